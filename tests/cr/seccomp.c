/* Seccomp filters across a dump and restore, checked by behaviour:
 *  - four filters, in order: the newest of two filters returning
 *    different errnos for getppid must still win (order kept); one kills
 *    a child calling syncfs with SIGSYS (inherited, KILL_PROCESS); one
 *    traps getsid into a SIGSYS handler (SECCOMP_RET_TRAP) and has
 *    SECCOMP_FILTER_FLAG_LOG;
 *  - the other system calls work; a second thread is under the same
 *    filters (the last one was installed with TSYNC);
 *  - /proc/self/status: Seccomp 2, Seccomp_filters 4, NoNewPrivs.
 * "drop": root installs the filters without no_new_privs and then becomes
 * uid/gid 65534 (the restored process could not install them itself).
 * "notif": a filter handing a syscall to a supervisor
 * (SECCOMP_RET_USER_NOTIF) makes the dump refuse. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static volatile sig_atomic_t sigsys_seen, sigsys_nr;
static volatile int thr_go, thr_res;

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	sigsys_seen++;
	sigsys_nr = si->si_syscall;
}

static int install(int nr, unsigned ret, unsigned flags)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, ret),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

static long field(const char *key)
{
	char *s = crt_read_file("/proc/self/status", NULL), *p;
	long v = -1;

	if (s && (p = strstr(s, key)))
		v = strtol(p + strlen(key), NULL, 10);
	free(s);
	return v;
}

static void *thread_main(void *arg)
{
	(void)arg;
	while (!thr_go)
		usleep(1000);
	errno = 0;
	thr_res = syscall(SYS_getppid) < 0 ? errno : 0;
	thr_go = 0;
	return NULL;
}

static void check_filters(const char *when)
{
	pid_t c;
	int st;

	errno = 0;
	crt_check(syscall(SYS_getppid) == -1 && errno == 102,
		  "%s: getppid gave errno %d, not the newest filter's 102", when, errno);
	crt_check(syscall(SYS_getpid) == getpid() && syscall(SYS_gettid) > 0,
		  "%s: an allowed syscall failed", when);
	sigsys_seen = 0;
	errno = 0;
	syscall(SYS_getsid, 0);
	crt_check(sigsys_seen == 1 && sigsys_nr == SYS_getsid,
		  "%s: getsid did not trap (SIGSYS seen %d, nr %d)", when, (int)sigsys_seen,
		  (int)sigsys_nr);
	c = fork();
	if (c == 0) {
		syscall(SYS_syncfs, -1);
		_exit(0);
	}
	crt_check(c > 0 && waitpid(c, &st, 0) == c, "%s: fork", when);
	crt_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
		  "%s: a child calling syncfs was not killed by SIGSYS (status %#x)", when, st);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "plain";
	struct sigaction sa;
	pthread_t thr;
	long nnp;

	crt_init();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSYS, &sa, NULL);

	if (!strcmp(mode, "notif")) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			crt_fail("no_new_privs");
		if (install(SYS_getppid, SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER) <
		    0)
			crt_fail("seccomp listener: %s", strerror(errno));
		crt_ready();
		crt_wait_term();
		crt_pass();
	}
	if (strcmp(mode, "drop") && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		crt_fail("no_new_privs: %s", strerror(errno));
	if (install(SYS_getppid, SECCOMP_RET_ERRNO | 101, 0) ||
	    install(SYS_syncfs, SECCOMP_RET_KILL_PROCESS, 0))
		crt_fail("seccomp: %s", strerror(errno));
	/* a thread that inherits the first two; the third reaches it by TSYNC */
	if (pthread_create(&thr, NULL, thread_main, NULL))
		crt_fail("pthread_create");
	if (install(SYS_getsid, SECCOMP_RET_TRAP,
		    SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_TSYNC))
		crt_fail("seccomp (TSYNC): %s", strerror(errno));
	/* errno 102 from the newest: it also covers getppid */
	if (install(SYS_getppid, SECCOMP_RET_ERRNO | 102, SECCOMP_FILTER_FLAG_TSYNC))
		crt_fail("seccomp: %s", strerror(errno));
	if (!strcmp(mode, "drop")) {
		/* the scratch directory, where crt_ready() writes, goes along */
		if (chown(crt_path(""), 65534, 65534))
			crt_fail("chown %s: %s", crt_path(""), strerror(errno));
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			crt_fail("dropping to 65534: %s", strerror(errno));
	}
	check_filters("before");
	nnp = field("\nNoNewPrivs:\t");

	crt_ready();
	crt_wait_term();

	crt_check(field("\nSeccomp:\t") == 2, "Seccomp mode %ld", field("\nSeccomp:\t"));
	crt_check(field("\nSeccomp_filters:\t") == 4, "Seccomp_filters %ld (want 4)",
		  field("\nSeccomp_filters:\t"));
	crt_check(field("\nNoNewPrivs:\t") == nnp, "NoNewPrivs %ld, was %ld",
		  field("\nNoNewPrivs:\t"), nnp);
	if (!strcmp(mode, "drop"))
		crt_check(getuid() == 65534 && geteuid() == 65534 && getgid() == 65534,
			  "not 65534 any more");
	check_filters("after");
	thr_go = 1;
	while (thr_go)
		usleep(1000);
	pthread_join(thr, NULL);
	crt_check(thr_res == 102, "the thread's getppid gave errno %d, not 102", thr_res);
	/* the filters still apply to new filters' installation: one more */
	crt_check(install(SYS_getppid, SECCOMP_RET_ERRNO | 103, 0) == 0 || !strcmp(mode, "drop"),
		  "installing one more filter: %s", strerror(errno));
	crt_pass();
}
