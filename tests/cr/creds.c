/* Credentials across a dump and restore, set up by root and checked from
 * inside: real/effective/saved/fs uids and gids all different,
 * supplementary groups, the permitted, effective, inheritable, ambient and
 * bounding capability sets, securebits (KEEP_CAPS, NO_SETUID_FIXUP and
 * NO_CAP_AMBIENT_RAISE, which would forbid raising the ambient set were it
 * set first), no_new_privs; a process running as non-root after root set
 * it up.  Compared with what /proc/self/status and prctl said before, and
 * by behaviour: the effective CAP_NET_BIND_SERVICE binds a low port, a
 * root-only file stays closed, the dropped bounding capability cannot come
 * back.  "root": a root process with its full sets, for the plain case.
 * "threads": threads with credentials of their own (raw setresuid/
 * setresgid/setgroups/capset change only the calling thread), each checked
 * by the thread itself. */
#include <pthread.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "crt.h"

static const char *const keys[] = { "\nUid:",	 "\nGid:",    "\nGroups:",
				    "\nCapInh:", "\nCapPrm:", "\nCapEff:",
				    "\nCapBnd:", "\nCapAmb:", "\nNoNewPrivs:" };
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static void snapshot(char out[NKEYS][160], int *secbits, int *keepcaps)
{
	char path[64], *s;

	/* this thread's */
	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)syscall(SYS_gettid));
	s = crt_read_file(path, NULL);

	for (size_t i = 0; i < NKEYS; i++) {
		const char *p = s ? strstr(s, keys[i]) : NULL;

		out[i][0] = 0;
		if (p)
			snprintf(out[i], 160, "%.*s", (int)strcspn(p + 1, "\n"), p + 1);
	}
	free(s);
	*secbits = prctl(PR_GET_SECUREBITS);
	*keepcaps = prctl(PR_GET_KEEPCAPS);
}

static void set_caps(uint64_t eff, uint64_t prm, uint64_t inh)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = {
		{ (uint32_t)eff, (uint32_t)prm, (uint32_t)inh },
		{ (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32) },
	};

	if (syscall(SYS_capset, &h, d))
		crt_fail("capset: %s", strerror(errno));
}

#define CAP(x) (1ULL << (x))

static int bind_low(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = { htonl(INADDR_LOOPBACK) } };
	int s = socket(AF_INET, SOCK_STREAM, 0), r;

	a.sin_port = htons(0); /* then a low one: 600-699 */
	for (int port = 600; port < 700; port++) {
		a.sin_port = htons(port);
		r = bind(s, (struct sockaddr *)&a, sizeof(a));
		if (!r || errno != EADDRINUSE)
			break;
	}
	close(s);
	return r ? -errno : 0;
}

struct thr {
	pthread_t t;
	int idx;
	char before[NKEYS][160], after[NKEYS][160];
	int sb_b, sb_a, kc_b, kc_a;
	volatile int state;
	char err[200];
};
static volatile int thr_go;

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	if (t->idx == 0) {
		if (syscall(SYS_setresgid, 2000, 2001, 2002) ||
		    syscall(SYS_setresuid, 3000, 3001, 3002))
			snprintf(t->err, sizeof(t->err), "raw setres[ug]id: %s", strerror(errno));
	} else {
		gid_t g[] = { 44, 55 };
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];

		if (syscall(SYS_setgroups, 2, g) || syscall(SYS_capget, &h, d))
			snprintf(t->err, sizeof(t->err), "raw setgroups/capget: %s",
				 strerror(errno));
		d[0].effective &= ~(1U << CAP_KILL);
		d[0].inheritable |= 1U << CAP_KILL;
		if (syscall(SYS_capset, &h, d))
			snprintf(t->err, sizeof(t->err), "raw capset: %s", strerror(errno));
	}
	snapshot(t->before, &t->sb_b, &t->kc_b);
	t->state = 1;
	while (!thr_go)
		usleep(1000);
	snapshot(t->after, &t->sb_a, &t->kc_a);
	t->state = 2;
	return NULL;
}

static int threads_mode(void)
{
	static struct thr t[2];
	char before[NKEYS][160], after[NKEYS][160];
	int sb_b, sb_a, kc_b, kc_a;

	for (int i = 0; i < 2; i++) {
		t[i].idx = i;
		if (pthread_create(&t[i].t, NULL, thread_main, &t[i]))
			crt_fail("pthread_create");
		while (!t[i].state)
			usleep(1000);
		crt_check(!t[i].err[0], "thread %d: %s", i, t[i].err);
	}
	snapshot(before, &sb_b, &kc_b);
	crt_check(strcmp(before[0], t[0].before[0]) && strcmp(before[3], t[1].before[3]),
		  "the threads' credentials are not their own");
	crt_ready();
	crt_wait_term();
	thr_go = 1;
	snapshot(after, &sb_a, &kc_a);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i].t, NULL);
		for (size_t k = 0; k < NKEYS; k++)
			crt_check(!strcmp(t[i].before[k], t[i].after[k]),
				  "thread %d: '%s' became '%s'", i, t[i].before[k], t[i].after[k]);
	}
	for (size_t k = 0; k < NKEYS; k++)
		crt_check(!strcmp(before[k], after[k]), "main thread: '%s' became '%s'", before[k],
			  after[k]);
	crt_pass();
}

int main(int argc, char **argv)
{
	bool root = argc > 1 && !strcmp(argv[1], "root");
	char before[NKEYS][160], after[NKEYS][160];
	int sb_b, sb_a, kc_b, kc_a;
	gid_t groups[] = { 1001, 1002, 65534 };
	uint64_t keep =
		CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_CHOWN) | CAP(CAP_SETUID) | CAP(CAP_SETPCAP);
	const char *secret;
	int fd;

	crt_init();
	if (argc > 1 && !strcmp(argv[1], "threads"))
		return threads_mode();
	/* a file only root may read */
	secret = strdup(crt_path("secret"));
	fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		crt_fail("open %s: %s", secret, strerror(errno));
	close(fd);

	if (prctl(PR_CAPBSET_DROP, CAP_MKNOD) || prctl(PR_CAPBSET_DROP, CAP_SYS_BOOT))
		crt_fail("PR_CAPBSET_DROP: %s", strerror(errno));
	if (!root) {
		/* crt_ready() writes in the scratch directory as fsuid 1003 */
		if (chown(crt_path(""), 1003, 1003))
			crt_fail("chown: %s", strerror(errno));
		if (setgroups(3, groups) || setresgid(1000, 1001, 1002) || setfsgid(1003) < 0)
			crt_fail("gids: %s", strerror(errno));
		if (prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS))
			crt_fail("securebits: %s", strerror(errno));
		if (setresuid(1000, 1001, 1002))
			crt_fail("setresuid: %s", strerror(errno));
		/* permitted kept, effective gone: back for setfsuid */
		set_caps(keep, keep, 0);
		setfsuid(1003);
		if (setfsuid(-1) != 1003)
			crt_fail("setfsuid");
		set_caps(CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_SETPCAP), keep,
			 CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_CHOWN));
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0))
			crt_fail("ambient: %s", strerror(errno));
		if (prctl(PR_SET_SECUREBITS,
			  SECBIT_KEEP_CAPS | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_CAP_AMBIENT_RAISE))
			crt_fail("securebits: %s", strerror(errno));
		set_caps(CAP(CAP_NET_BIND_SERVICE), keep & ~CAP(CAP_SETPCAP),
			 CAP(CAP_NET_BIND_SERVICE) | CAP(CAP_CHOWN));
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			crt_fail("no_new_privs: %s", strerror(errno));
		crt_check(open(secret, O_RDONLY) < 0 && errno == EACCES,
			  "fsuid 1003 reads a root-only file");
		crt_check(bind_low() == 0, "binding a low port before the dump: %s",
			  strerror(-bind_low()));
	}
	snapshot(before, &sb_b, &kc_b);

	crt_ready();
	crt_wait_term();

	snapshot(after, &sb_a, &kc_a);
	for (size_t i = 0; i < NKEYS; i++) {
		crt_msg("%s", after[i]);
		crt_check(!strcmp(before[i], after[i]), "'%s' became '%s'", before[i], after[i]);
	}
	crt_check(sb_a == sb_b && kc_a == kc_b, "securebits %#x keepcaps %d became %#x %d", sb_b,
		  kc_b, sb_a, kc_a);
	crt_check(prctl(PR_CAPBSET_READ, CAP_MKNOD) == 0 &&
			  prctl(PR_CAPBSET_READ, CAP_SYS_BOOT) == 0,
		  "a dropped bounding capability is back");
	if (!root) {
		crt_check(getuid() == 1000 && geteuid() == 1001 && setfsuid(-1) == 1003 &&
				  getgid() == 1000 && getegid() == 1001 && setfsgid(-1) == 1003,
			  "ids changed");
		crt_check(open(secret, O_RDONLY) < 0 && errno == EACCES,
			  "fsuid 1003 reads a root-only file after the restore");
		crt_check(bind_low() == 0, "binding a low port (CAP_NET_BIND_SERVICE): %s",
			  strerror(-bind_low()));
		crt_check(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHOWN, 0, 0) < 0,
			  "SECBIT_NO_CAP_AMBIENT_RAISE does not hold");
	} else {
		crt_check(open(secret, O_RDONLY) >= 0, "root cannot read its file");
	}
	crt_pass();
}
