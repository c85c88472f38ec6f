/* Signal state across a dump and restore, checked from inside:
 *  - the disposition of every signal as the kernel holds it (handler
 *    address, SA_* flags incl. SA_RESTART/SA_SIGINFO/SA_ONSTACK, the
 *    handler mask, the restorer), read with rt_sigaction before and after;
 *  - the blocked mask of each thread;
 *  - signals pending per thread (rt_tgsigqueueinfo via pthread_sigqueue,
 *    tgkill) and for the whole process (sigqueue, kill), with their
 *    siginfo: values, codes and senders arrive intact and in order;
 *  - each thread's alternate signal stack; a signal handled after the
 *    restore runs on it (SA_ONSTACK) with its SA_SIGINFO info and the
 *    handler's mask in force; SA_RESTART restarts a read, its absence
 *    does not;
 *  - a child stopped by SIGSTOP stays stopped, and goes on after SIGCONT. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

struct ksa {
	unsigned long handler, flags, restorer;
	uint64_t mask;
};

static struct ksa before[65];
static char altstack_main[65536], altstack_thr[32768];
static volatile sig_atomic_t usr1_seen, usr1_on_stack, usr1_code, usr1_usr2_blocked;
static volatile sig_atomic_t rt5_seen, rt6_seen;
static pthread_t thr;
static volatile int go_check, thr_done;
static char thr_err[256];

#define SIG_THR	   (SIGRTMIN + 1) /* pending per thread, with values */
#define SIG_SHARED (SIGRTMIN + 2) /* pending for the process, with values */
#define SIG_RST	   (SIGRTMIN + 5) /* SA_RESTART */
#define SIG_NORST  (SIGRTMIN + 6) /* no SA_RESTART */

static void get_action(int sig, struct ksa *k)
{
	memset(k, 0, sizeof(*k));
	syscall(SYS_rt_sigaction, sig, NULL, k, 8);
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	char here;
	sigset_t cur;

	(void)sig;
	(void)uc;
	usr1_seen++;
	usr1_code = si->si_code;
	usr1_on_stack = &here >= altstack_main && &here < altstack_main + sizeof(altstack_main);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	usr1_usr2_blocked = sigismember(&cur, SIGUSR2) && sigismember(&cur, SIGRTMIN + 3);
}

static void on_usr2(int sig)
{
	(void)sig;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (sig == SIG_RST)
		rt5_seen++;
	else
		rt6_seen++;
}

static void set_action(int sig, void *handler, int flags, const int *maskv)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	if (flags & SA_SIGINFO)
		sa.sa_sigaction = handler;
	else
		sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	for (; maskv && *maskv; maskv++)
		sigaddset(&sa.sa_mask, *maskv);
	if (sigaction(sig, &sa, NULL))
		crt_fail("sigaction(%d): %s", sig, strerror(errno));
}

static sigset_t mask_of(const int *v)
{
	sigset_t s;

	sigemptyset(&s);
	for (; *v; v++)
		sigaddset(&s, *v);
	return s;
}

static int thr_mask_sigs[] = { SIGTERM, SIGINT, SIGUSR2, 0, 0, 0 };
static int main_mask_sigs[] = { SIGINT, SIGUSR1, 0, 0, 0, 0 };

static bool same_set(const sigset_t *a, const sigset_t *b)
{
	for (int s = 1; s < 65; s++)
		if (sigismember(a, s) != sigismember(b, s))
			return false;
	return true;
}

/* dequeue one of sig now, or fail */
static int take(int sig, siginfo_t *si)
{
	sigset_t s;
	struct timespec zero = { 0, 0 };

	sigemptyset(&s);
	sigaddset(&s, sig);
	return sigtimedwait(&s, si, &zero);
}

#define TFAIL(...)                                               \
	do {                                                     \
		snprintf(thr_err, sizeof(thr_err), __VA_ARGS__); \
		thr_done = 1;                                    \
		return NULL;                                     \
	} while (0)

static void *thread_main(void *arg)
{
	sigset_t want = mask_of(thr_mask_sigs), cur;
	stack_t ss;
	siginfo_t si;

	(void)arg;
	pthread_sigmask(SIG_SETMASK, &want, NULL);
	ss.ss_sp = altstack_thr;
	ss.ss_size = sizeof(altstack_thr);
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL))
		TFAIL("thread sigaltstack: %s", strerror(errno));
	thr_done = 2; /* set up */
	while (!go_check)
		usleep(1000);

	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	if (!same_set(&cur, &want))
		TFAIL("the thread's blocked mask changed");
	if (sigaltstack(NULL, &ss) || ss.ss_sp != altstack_thr ||
	    ss.ss_size != sizeof(altstack_thr) || ss.ss_flags != 0)
		TFAIL("the thread's sigaltstack changed: %p %zu %#x", ss.ss_sp, ss.ss_size,
		      ss.ss_flags);
	/* its own queue, in order */
	for (int i = 0; i < 3; i++) {
		if (take(SIG_THR, &si) != SIG_THR)
			TFAIL("thread: pending SIGRTMIN+1 #%d missing: %s", i, strerror(errno));
		if (si.si_code != SI_QUEUE || si.si_pid != getpid() ||
		    si.si_value.sival_int != 100 + i)
			TFAIL("thread: SIGRTMIN+1 #%d: code %d pid %d value %d", i, si.si_code,
			      si.si_pid, si.si_value.sival_int);
	}
	if (take(SIG_THR, &si) >= 0)
		TFAIL("thread: an extra SIGRTMIN+1");
	if (take(SIGUSR2, &si) != SIGUSR2 || si.si_pid != getpid() || si.si_uid != getuid())
		TFAIL("thread: pending SIGUSR2 (tgkill) missing or changed (pid %d)", si.si_pid);
	thr_done = 1;
	return NULL;
}

int main(void)
{
	static const int usr1_mask[] = { SIGUSR2, 0, 0 };
	int usr1_maskv[3] = { SIGUSR2, 0, 0 };
	sigset_t all, want, cur, pend;
	stack_t ss;
	siginfo_t si;
	volatile uint64_t *counter;
	pid_t child;
	int st;

	crt_init();
	(void)usr1_mask;
	usr1_maskv[1] = SIGRTMIN + 3;
	thr_mask_sigs[3] = SIG_THR;
	thr_mask_sigs[4] = SIG_SHARED;
	main_mask_sigs[2] = SIG_THR;
	main_mask_sigs[3] = SIG_SHARED;

	/* dispositions */
	set_action(SIGUSR1, on_usr1, SA_SIGINFO | SA_RESTART | SA_ONSTACK, usr1_maskv);
	set_action(SIGUSR2, on_usr2, SA_NODEFER | SA_RESETHAND, NULL);
	set_action(SIGHUP, SIG_IGN, SA_RESTART, usr1_maskv);
	set_action(SIGCHLD, SIG_DFL, SA_NOCLDSTOP, NULL);
	set_action(SIGPIPE, SIG_IGN, 0, NULL);
	set_action(SIG_RST, on_rt, SA_SIGINFO | SA_RESTART, NULL);
	set_action(SIG_NORST, on_rt, SA_SIGINFO, NULL);
	set_action(SIGRTMAX, on_rt, SA_SIGINFO | SA_ONSTACK, usr1_maskv);

	/* the threads get every signal blocked, then set their own masks */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	if (pthread_create(&thr, NULL, thread_main, NULL))
		crt_fail("pthread_create");
	want = mask_of(main_mask_sigs);
	pthread_sigmask(SIG_SETMASK, &want, NULL);
	while (!thr_done)
		usleep(1000);
	if (thr_done == 1)
		crt_fail("%s", thr_err);

	ss.ss_sp = altstack_main;
	ss.ss_size = sizeof(altstack_main);
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL))
		crt_fail("sigaltstack: %s", strerror(errno));

	/* pending: per thread, then for the process */
	for (int i = 0; i < 3; i++) {
		union sigval v = { .sival_int = 100 + i };

		if (pthread_sigqueue(thr, SIG_THR, v))
			crt_fail("pthread_sigqueue");
	}
	pthread_kill(thr, SIGUSR2);
	{
		union sigval v = { .sival_int = 7 };

		pthread_sigqueue(pthread_self(), SIG_THR, v);
	}
	pthread_kill(pthread_self(), SIGUSR1);
	for (int i = 0; i < 4; i++) {
		union sigval v = { .sival_ptr = (void *)(0xdeadbeef00ULL + i) };

		if (sigqueue(getpid(), SIG_SHARED, v))
			crt_fail("sigqueue: %s", strerror(errno));
	}
	kill(getpid(), SIGINT);

	/* a stopped child counting in shared memory */
	counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counter == MAP_FAILED)
		crt_fail("mmap");
	child = fork();
	if (child < 0)
		crt_fail("fork");
	if (child == 0) {
		sigset_t none;

		sigemptyset(&none);
		pthread_sigmask(SIG_SETMASK, &none, NULL);
		signal(SIGTERM, SIG_DFL);
		for (;;)
			(*counter)++;
	}
	crt_own_child(child);
	while (*counter < 1000)
		usleep(1000);
	kill(child, SIGSTOP);
	if (waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st))
		crt_fail("the child did not stop");

	for (int s = 1; s < 65; s++)
		get_action(s, &before[s]);

	crt_ready();
	crt_wait_term();

	/* dispositions, as the kernel has them */
	for (int s = 1; s < 65; s++) {
		struct ksa now;

		if (s == SIGKILL || s == SIGSTOP)
			continue;
		get_action(s, &now);
		if (before[s].handler == (unsigned long)SIG_DFL && s != SIGCHLD) {
			crt_check(now.handler == (unsigned long)SIG_DFL,
				  "signal %d: SIG_DFL became %#lx", s, now.handler);
			continue;
		}
		crt_check(!memcmp(&now, &before[s], sizeof(now)),
			  "signal %d: action %#lx/%#lx/%#lx/%#llx became %#lx/%#lx/%#lx/%#llx", s,
			  before[s].handler, before[s].flags, before[s].restorer,
			  (unsigned long long)before[s].mask, now.handler, now.flags, now.restorer,
			  (unsigned long long)now.mask);
	}

	/* the main thread's mask (crt_wait_term restored it) and altstack */
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	crt_check(same_set(&cur, &want), "the main thread's blocked mask changed");
	crt_check(!sigaltstack(NULL, &ss) && ss.ss_sp == altstack_main &&
			  ss.ss_size == sizeof(altstack_main) && ss.ss_flags == 0,
		  "the main thread's sigaltstack changed: %p %zu %#x", ss.ss_sp, ss.ss_size,
		  ss.ss_flags);

	/* what the main thread sees pending: its own and the process's */
	sigpending(&pend);
	crt_check(sigismember(&pend, SIGUSR1) && sigismember(&pend, SIG_THR) &&
			  sigismember(&pend, SIG_SHARED) && sigismember(&pend, SIGINT),
		  "pending signals lost (USR1 %d RTMIN+1 %d RTMIN+2 %d INT %d)",
		  sigismember(&pend, SIGUSR1), sigismember(&pend, SIG_THR),
		  sigismember(&pend, SIG_SHARED), sigismember(&pend, SIGINT));

	/* the thread checks its own, first (sigtimedwait would take shared
	 * ones of the same number too) */
	go_check = 1;
	pthread_join(thr, NULL);
	crt_check(thr_done == 1 && !thr_err[0], "%s", thr_err);

	crt_check(take(SIG_THR, &si) == SIG_THR && si.si_code == SI_QUEUE &&
			  si.si_value.sival_int == 7 && si.si_pid == getpid(),
		  "main thread's SIGRTMIN+1 missing or changed");
	crt_check(take(SIG_THR, &si) < 0, "an extra SIGRTMIN+1 for the main thread");
	for (int i = 0; i < 4; i++) {
		crt_check(take(SIG_SHARED, &si) == SIG_SHARED, "shared SIGRTMIN+2 #%d missing", i);
		crt_check(si.si_code == SI_QUEUE && si.si_pid == getpid() &&
				  si.si_uid == getuid() &&
				  si.si_value.sival_ptr == (void *)(0xdeadbeef00ULL + i),
			  "shared SIGRTMIN+2 #%d: code %d pid %d value %p", i, si.si_code,
			  si.si_pid, si.si_value.sival_ptr);
	}
	crt_check(take(SIG_SHARED, &si) < 0, "an extra SIGRTMIN+2");
	crt_check(take(SIGINT, &si) == SIGINT && si.si_code == SI_USER && si.si_pid == getpid(),
		  "shared SIGINT missing or changed");

	/* the pending SIGUSR1 is delivered once unblocked: on the altstack,
	 * with its info, under the handler's mask */
	{
		sigset_t u;

		sigemptyset(&u);
		sigaddset(&u, SIGUSR1);
		pthread_sigmask(SIG_UNBLOCK, &u, NULL);
	}
	crt_check(usr1_seen == 1, "SIGUSR1 delivered %d times", (int)usr1_seen);
	crt_check(usr1_code == SI_TKILL || usr1_code == SI_USER, "SIGUSR1 si_code %d",
		  (int)usr1_code);
	crt_check(usr1_on_stack, "SIGUSR1's handler did not run on the altstack");
	crt_check(usr1_usr2_blocked, "SIGUSR1's handler mask not in force");

	/* SA_RESTART: a read interrupted by SIG_RST goes on; by SIG_NORST it
	 * fails with EINTR */
	for (int k = 0; k < 2; k++) {
		int p[2];
		char c;
		ssize_t n;
		pid_t helper;

		if (pipe(p))
			crt_fail("pipe");
		helper = fork();
		if (helper == 0) {
			usleep(100000);
			syscall(SYS_tgkill, getppid(), getppid(), k ? SIG_NORST : SIG_RST);
			usleep(100000);
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			_exit(0);
		}
		crt_own_child(helper);
		n = read(p[0], &c, 1);
		waitpid(helper, NULL, 0);
		if (!k)
			crt_check(n == 1 && rt5_seen == 1,
				  "SA_RESTART: read returned %zd (%s), handler ran %d", n,
				  n < 0 ? strerror(errno) : "", (int)rt5_seen);
		else
			crt_check(n < 0 && errno == EINTR && rt6_seen == 1,
				  "no SA_RESTART: read returned %zd, handler ran %d", n,
				  (int)rt6_seen);
		close(p[0]);
		close(p[1]);
	}

	/* the child stays stopped ... */
	{
		char path[64], *s;
		uint64_t c0 = *counter;

		snprintf(path, sizeof(path), "/proc/%d/stat", child);
		s = crt_read_file(path, NULL);
		crt_check(s && strchr(s, ')') && strchr(s, ')')[2] == 'T',
			  "the stopped child is not stopped: %s", s ? s : "gone");
		usleep(200000);
		crt_check(*counter == c0, "the stopped child ran");
		/* ... until SIGCONT */
		kill(child, SIGCONT);
		usleep(200000);
		crt_check(*counter != c0, "the child did not go on after SIGCONT");
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	crt_pass();
}
