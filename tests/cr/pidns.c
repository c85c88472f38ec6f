/* A container's process tree: the root (a monitor, as podman's conmon or
 * systemd-nspawn) is the parent of the init of a pid namespace of its own,
 * whose descendants live in it: init (1) forks A (2), which has a thread
 * (3) and forks B (4), the leader of its own process group, which forks C
 * (5); init forks D (6), which joins B's group, and Z (7), which exits with
 * status 7 and stays a zombie.  Init leads its own session, and made UTS
 * and IPC namespaces of its own (its host name "kupdate-ctr").
 *
 * After the restore each of them finds its ids as it saw them (pid, parent,
 * group, session, thread id), and its ids in both namespaces (NSpid) as
 * before; they all share one pid namespace again, a child of the root's,
 * and one UTS and one IPC namespace, not the root's, with init's names;
 * init is pid 1 and reaps: Z's status 7, an orphan (C, once B exits:
 * reparented to init), and a child forked after the restore.
 *
 * "pidns setns": the root also forks E, which enters the namespace (setns,
 * as nsenter or podman exec), forks F there and goes back; "pidns
 * unshare-nofork": the root unshares a pid namespace in which no process
 * is born; "pidns sysv": D makes a System V segment in the container's IPC
 * namespace.  The dump refuses them.
 *
 * "pidns unshare": the root makes the namespace itself and forks the init
 * (unshare --pid --fork): after the restore its later children are born
 * in init's namespace again. */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

enum { S_INIT, S_A, S_T, S_B, S_C, S_D, NSLOTS };
static const char *const names[NSLOTS] = { "init", "A", "A's thread", "B", "C", "D" };

struct slot {
	volatile int ready, checked, done, ok;
	pid_t nspid;
	unsigned long nsino, utsino, ipcino;
	char msg[300];
};

#define HOST   "kupdate-ctr"
#define DOMAIN "ctr.example"

static struct shared {
	volatile int go;
	int sysv; /* D makes a System V segment in the container's IPC namespace */
	pid_t init_host;
	struct slot s[NSLOTS];
} * sh;

/* "NSpid:" of /proc/self/status, or of the calling thread's */
static void nspid(bool thread, char *out, size_t len)
{
	char *buf = crt_read_file(thread ? "/proc/thread-self/status" : "/proc/self/status", NULL);
	char *l = buf ? strstr(buf, "\nNSpid:") : NULL;

	snprintf(out, len, "%.*s", l ? (int)strcspn(l + 1, "\n") : 1, l ? l + 1 : "?");
	free(buf);
}

static unsigned long ns_ino(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_ino;
}

static void wait_go(void)
{
	while (!sh->go)
		usleep(10000);
}

/* the ids the member saw before, compared after; a verdict in its slot */
struct ids {
	pid_t pid, ppid, pgid, sid, tid;
	char nspid[128];
};

static void take(struct ids *x, bool thread)
{
	x->pid = getpid();
	x->ppid = getppid();
	x->pgid = getpgid(0);
	x->sid = getsid(0);
	x->tid = syscall(SYS_gettid);
	nspid(thread, x->nspid, sizeof(x->nspid));
}

static void verdict(int i, const struct ids *before, bool thread, const char *extra)
{
	struct slot *s = &sh->s[i];
	struct ids now;
	struct utsname u;

	take(&now, thread);
	s->nsino = ns_ino("/proc/self/ns/pid");
	s->utsino = ns_ino("/proc/thread-self/ns/uts");
	s->ipcino = ns_ino("/proc/thread-self/ns/ipc");
	if (uname(&u) || strcmp(u.nodename, HOST) || strcmp(u.domainname, DOMAIN))
		snprintf(s->msg, sizeof(s->msg), "names %.40s %.40s, not %s %s", u.nodename,
			 u.domainname, HOST, DOMAIN);
	else if (now.pid != before->pid || now.ppid != before->ppid || now.pgid != before->pgid ||
		 now.sid != before->sid || now.tid != before->tid)
		snprintf(s->msg, sizeof(s->msg),
			 "ids pid/ppid/pgid/sid/tid %d/%d/%d/%d/%d, were %d/%d/%d/%d/%d", now.pid,
			 now.ppid, now.pgid, now.sid, now.tid, before->pid, before->ppid,
			 before->pgid, before->sid, before->tid);
	else if (strcmp(now.nspid, before->nspid))
		snprintf(s->msg, sizeof(s->msg), "%s, was %s", now.nspid, before->nspid);
	else if (extra && *extra)
		snprintf(s->msg, sizeof(s->msg), "%s", extra);
	else
		s->ok = 1;
	if (s->ok)
		snprintf(s->msg, sizeof(s->msg), "%s", now.nspid);
	s->checked = 1;
}

static void ready(int i, struct ids *x, bool thread)
{
	take(x, thread);
	sh->s[i].nspid = thread ? x->tid : x->pid;
	sh->s[i].ready = 1;
}

static void *thread_main(void *arg)
{
	struct ids x;

	(void)arg;
	ready(S_T, &x, true);
	wait_go();
	verdict(S_T, &x, true, NULL);
	sh->s[S_T].done = 1;
	return NULL;
}

static void wait_ready(int i)
{
	for (int n = 0; !sh->s[i].ready; n++) {
		if (n > 1000)
			_exit(9);
		usleep(10000);
	}
}

static void __attribute__((noreturn)) member_c(void)
{
	struct ids x;
	char extra[120] = "";

	ready(S_C, &x, false);
	wait_go();
	verdict(S_C, &x, false, NULL);
	/* B exits once C gave its verdict: C is init's then */
	for (int n = 0; getppid() != 1 && n < 500; n++)
		usleep(10000);
	if (getppid() != 1)
		snprintf(extra, sizeof(extra), "an orphan: its parent is %d, not init", getppid());
	if (*extra) {
		sh->s[S_C].ok = 0;
		snprintf(sh->s[S_C].msg, sizeof(sh->s[S_C].msg), "%s", extra);
	}
	sh->s[S_C].done = 1;
	_exit(0);
}

static void __attribute__((noreturn)) member_b(void)
{
	struct ids x;

	setpgid(0, 0);
	if (fork() == 0)
		member_c();
	wait_ready(S_C);
	ready(S_B, &x, false);
	wait_go();
	verdict(S_B, &x, false, NULL);
	sh->s[S_B].done = 1;
	while (!sh->s[S_C].checked)
		usleep(10000);
	_exit(0);
}

static void __attribute__((noreturn)) member_a(void)
{
	pthread_t t;
	pid_t b;
	struct ids x;

	if (pthread_create(&t, NULL, thread_main, NULL))
		_exit(2);
	wait_ready(S_T);
	b = fork();
	if (b == 0)
		member_b();
	wait_ready(S_B);
	ready(S_A, &x, false);
	wait_go();
	verdict(S_A, &x, false, NULL);
	sh->s[S_A].done = 1;
	pthread_join(t, NULL);
	waitpid(b, NULL, 0);
	_exit(0);
}

static void __attribute__((noreturn)) member_d(void)
{
	struct ids x;

	if (setpgid(0, sh->s[S_B].nspid))
		_exit(3);
	if (sh->sysv && shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) < 0)
		_exit(4);
	ready(S_D, &x, false);
	wait_go();
	verdict(S_D, &x, false, NULL);
	sh->s[S_D].done = 1;
	_exit(0);
}

static void __attribute__((noreturn)) init_main(void)
{
	struct ids x;
	pid_t z, n;
	char extra[160] = "";
	int st, reaped = 0, zst = -1;

	setsid();
	if (unshare(CLONE_NEWUTS | CLONE_NEWIPC) || sethostname(HOST, strlen(HOST)) ||
	    setdomainname(DOMAIN, strlen(DOMAIN)))
		_exit(8);
	if (fork() == 0)
		member_a();
	wait_ready(S_A);
	if (fork() == 0)
		member_d();
	wait_ready(S_D);
	z = fork();
	if (z == 0)
		_exit(7);
	while (waitid(P_PID, z, NULL, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	ready(S_INIT, &x, false);
	wait_go();
	/* a child forked now: the namespace gives pids again */
	n = fork();
	if (n == 0)
		_exit(0);
	for (pid_t w; (w = waitpid(-1, &st, 0)) > 0 || errno == EINTR;) {
		if (w == z)
			zst = st;
		else if (w > 0)
			reaped++;
	}
	if (getpid() != 1)
		snprintf(extra, sizeof(extra), "init is pid %d", getpid());
	else if (!WIFEXITED(zst) || WEXITSTATUS(zst) != 7)
		snprintf(extra, sizeof(extra), "the zombie %d's status is %#x, not exit 7", z, zst);
	else if (n <= 1 || reaped != 4)
		snprintf(extra, sizeof(extra),
			 "reaped %d children, not 4 (A, D, the orphan C, the new %d)", reaped, n);
	verdict(S_INIT, &x, false, extra);
	sh->s[S_INIT].done = 1;
	_exit(0);
}

/* E: enters init's namespace and forks F there, a process of it whose
 * parent is outside */
static void entered(void)
{
	char path[64];
	pid_t e = fork();
	int fd, own;

	if (e < 0)
		crt_fail("fork: %s", strerror(errno));
	if (e > 0) {
		crt_own_child(e);
		return;
	}
	own = open("/proc/self/ns/pid", O_RDONLY);
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", sh->init_host);
	fd = open(path, O_RDONLY);
	if (own < 0 || fd < 0 || setns(fd, CLONE_NEWPID))
		_exit(6);
	/* F is reaped at once when init's end kills it: init's own end
	 * waits for that */
	signal(SIGCHLD, SIG_IGN);
	if (fork() == 0)
		for (;;)
			pause();
	/* back: its own later children are born beside it */
	if (setns(own, CLONE_NEWPID))
		_exit(7);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char buf[128], want[64];
	unsigned long mine, ino;
	pid_t h;
	int fd, pfd;
	struct stat up;
	struct utsname host, now;

	crt_init();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	sh->sysv = !strcmp(mode, "sysv");
	if (uname(&host))
		crt_fail("uname: %s", strerror(errno));
	/* the monitor adopts the init, as conmon does (a subreaper); the
	 * process that made the namespace is gone */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (!strcmp(mode, "unshare")) {
		if (unshare(CLONE_NEWPID))
			crt_fail("unshare: %s", strerror(errno));
		h = fork();
		if (h == 0)
			init_main();
		sh->init_host = h;
	} else if ((h = fork()) == 0) {
		pid_t i;

		if (unshare(CLONE_NEWPID))
			_exit(4);
		i = fork();
		if (i == 0)
			init_main();
		sh->init_host = i;
		_exit(i > 0 ? 0 : 5);
	}
	if (strcmp(mode, "unshare"))
		crt_wait_ok(h, "the namespace's maker");
	if (!sh->init_host)
		crt_fail("no init");
	crt_own_child(sh->init_host);
	for (int n = 0; !sh->s[S_INIT].ready; n++) {
		if (n > 1000)
			crt_fail("the namespace's processes did not start");
		usleep(10000);
	}
	if (!strcmp(mode, "setns"))
		entered();
	if (!strcmp(mode, "unshare-nofork") && unshare(CLONE_NEWPID))
		crt_fail("unshare: %s", strerror(errno));
	crt_ready();
	crt_wait_term();

	/* the init: the same host pid, pid 1 inside, its namespace a child
	 * of ours */
	snprintf(want, sizeof(want), "NSpid:\t%d\t1", sh->init_host);
	snprintf(buf, sizeof(buf), "/proc/%d/status", sh->init_host);
	{
		char *st = crt_read_file(buf, NULL);

		crt_check(st && strstr(st, want), "init %d is not \"%s\"", sh->init_host, want);
		free(st);
	}
	snprintf(buf, sizeof(buf), "/proc/%d/ns/pid", sh->init_host);
	fd = open(buf, O_RDONLY);
	pfd = fd < 0 ? -1 : ioctl(fd, NS_GET_PARENT);
	mine = ns_ino("/proc/self/ns/pid");
	crt_check(pfd >= 0 && !fstat(pfd, &up) && up.st_ino == mine,
		  "init's pid namespace is not a child of the monitor's");
	ino = ns_ino(buf);
	crt_check(ino && ino != mine, "init is in the monitor's pid namespace");
	if (!strcmp(mode, "unshare"))
		crt_check(ns_ino("/proc/self/ns/pid_for_children") == ino,
			  "the root's children are not born in init's pid namespace");
	crt_check(!uname(&now) && !strcmp(now.nodename, host.nodename),
		  "the monitor's host name is %s, was %s", now.nodename, host.nodename);

	sh->go = 1;
	for (int n = 0; !sh->s[S_INIT].done; n++) {
		if (n > 1000)
			crt_fail("init gave no verdict in 10 s");
		usleep(10000);
	}
	for (int i = 0; i < NSLOTS; i++) {
		crt_check(sh->s[i].done && sh->s[i].ok, "%s: %s", names[i],
			  sh->s[i].done ? sh->s[i].msg : "no verdict");
		crt_check(sh->s[i].nsino == ino, "%s is not in init's pid namespace", names[i]);
		crt_check(sh->s[i].utsino == sh->s[S_INIT].utsino &&
				  sh->s[i].utsino != ns_ino("/proc/self/ns/uts") &&
				  sh->s[i].ipcino == sh->s[S_INIT].ipcino &&
				  sh->s[i].ipcino != ns_ino("/proc/self/ns/ipc"),
			  "%s is not in init's UTS and IPC namespaces", names[i]);
		crt_msg("%s: %s", names[i], sh->s[i].msg);
	}
	crt_wait_ok(sh->init_host, "init");
	crt_pass();
}
