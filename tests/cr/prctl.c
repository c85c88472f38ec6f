/* The rest of a process's state across a dump and restore, compared from
 * inside with what it was:
 *  - every resource limit (several lowered, soft and hard);
 *  - umask, personality, oom_score_adj, child subreaper, dumpable;
 *  - the exe link (/proc/self/exe: same path, same inode);
 *  - per thread: comm, nice, scheduling policy and priority (SCHED_OTHER,
 *    SCHED_BATCH, SCHED_IDLE, SCHED_RR), CPU affinity, the rseq
 *    registration (the kernel says the same area is registered, and keeps
 *    its cpu_id up to date);
 *  - the parent-death signal of a child (its parent is the test). */
#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

struct kattr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t prio;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};

struct tstate {
	char comm[16];
	int nice;
	struct kattr attr;
	cpu_set_t cpus;
	int rseq_len; /* the length the kernel accepts as already registered */
};

#define NTHR 3
static pthread_t thr[NTHR];
static pid_t tids[NTHR + 1];
static struct tstate st_before[NTHR + 1], st_after[NTHR + 1];
static volatile int phase; /* 1: take before, 2: take after */
static volatile int done[NTHR + 1];
static char terr[NTHR + 1][200];

/* same area, size and signature already registered: EBUSY */
static int rseq_registered(void)
{
	struct rseq *area = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	unsigned lens[2] = { __rseq_size, 32 };

	if (!__rseq_size)
		return 0;
	for (int i = 0; i < 2; i++)
		if (syscall(SYS_rseq, area, lens[i], 0, RSEQ_SIG) < 0 && errno == EBUSY)
			return lens[i];
	return -1;
}

static void take(struct tstate *s, int idx)
{
	struct rseq *area = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	unsigned cpu;

	prctl(PR_GET_NAME, s->comm);
	errno = 0;
	s->nice = getpriority(PRIO_PROCESS, 0);
	memset(&s->attr, 0, sizeof(s->attr));
	syscall(SYS_sched_getattr, 0, &s->attr, sizeof(s->attr), 0);
	sched_getaffinity(0, sizeof(s->cpus), &s->cpus);
	s->rseq_len = rseq_registered();
	if (__rseq_size && !syscall(SYS_getcpu, &cpu, NULL, NULL) && area->cpu_id != cpu)
		snprintf(terr[idx], sizeof(terr[idx]), "rseq cpu_id %u, the thread runs on %u",
			 area->cpu_id, cpu);
}

static void setup_thread(int idx)
{
	static const char *const names[] = { "prctl-main", "prctl-batch", "prctl-idle",
					     "prctl-rr" };
	struct kattr a;
	cpu_set_t c;

	prctl(PR_SET_NAME, names[idx]);
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	switch (idx) {
	case 0:
		a.policy = SCHED_OTHER;
		a.nice = 3;
		break;
	case 1:
		a.policy = SCHED_BATCH;
		a.nice = 11;
		break;
	case 2:
		a.policy = SCHED_IDLE;
		a.nice = 17;
		break;
	case 3:
		a.policy = SCHED_RR;
		a.prio = 3;
		break;
	}
	if (syscall(SYS_sched_setattr, 0, &a, 0))
		snprintf(terr[idx], sizeof(terr[idx]), "sched_setattr(policy %u): %s", a.policy,
			 strerror(errno));
	CPU_ZERO(&c);
	CPU_SET(idx % 2, &c);
	if (idx != 0 && sched_setaffinity(0, sizeof(c), &c))
		snprintf(terr[idx], sizeof(terr[idx]), "sched_setaffinity: %s", strerror(errno));
}

static void *thread_main(void *arg)
{
	int idx = (int)(intptr_t)arg;

	tids[idx] = syscall(SYS_gettid);
	setup_thread(idx);
	take(&st_before[idx], idx);
	done[idx] = 1;
	while (phase < 2)
		usleep(1000);
	take(&st_after[idx], idx);
	done[idx] = 2;
	return NULL;
}

static void compare(int i)
{
	struct tstate *b = &st_before[i], *a = &st_after[i];

	crt_check(!terr[i][0], "thread %d: %s", i, terr[i]);
	crt_check(!strcmp(a->comm, b->comm), "thread %d: comm '%s' became '%s'", i, b->comm,
		  a->comm);
	crt_check(a->nice == b->nice, "thread %d: nice %d became %d", i, b->nice, a->nice);
	crt_check(a->attr.policy == b->attr.policy && a->attr.prio == b->attr.prio &&
			  a->attr.nice == b->attr.nice && a->attr.flags == b->attr.flags,
		  "thread %d: policy %u prio %u nice %d flags %#llx became %u %u %d %#llx", i,
		  b->attr.policy, b->attr.prio, b->attr.nice, (unsigned long long)b->attr.flags,
		  a->attr.policy, a->attr.prio, a->attr.nice, (unsigned long long)a->attr.flags);
	crt_check(CPU_EQUAL(&a->cpus, &b->cpus), "thread %d: its CPU affinity changed", i);
	crt_check(a->rseq_len == b->rseq_len && (b->rseq_len > 0 || !__rseq_size),
		  "thread %d: rseq registration %d became %d", i, b->rseq_len, a->rseq_len);
}

static char *read_str(const char *path)
{
	char *s = crt_read_file(path, NULL);

	if (s)
		s[strcspn(s, "\n")] = 0;
	return s ? s : strdup("?");
}

int main(void)
{
	struct rlimit rl_b[RLIM_NLIMITS], rl_a[RLIM_NLIMITS];
	static const struct {
		int res;
		rlim_t cur, max;
	} lower[] = {
		{ RLIMIT_NOFILE, 512, 1000 },
		{ RLIMIT_CORE, 0, 1 << 20 },
		{ RLIMIT_NPROC, 2000, 3000 },
		{ RLIMIT_MSGQUEUE, 100000, 200000 },
		{ RLIMIT_CPU, 1000, 2000 },
		{ RLIMIT_SIGPENDING, 500, 900 },
		{ RLIMIT_FSIZE, 1 << 30, 1ULL << 31 },
	};
	char exe_b[4096], exe_a[4096], *oom_b, *oom_a;
	struct stat xb, xa;
	ssize_t n;
	int pers_b, pers_a, reaper_b = 0, reaper_a = 0, dump_b, dump_a;
	mode_t um_b, um_a;
	volatile int *child_pd;
	pid_t child;

	crt_init();
	for (size_t i = 0; i < sizeof(lower) / sizeof(lower[0]); i++) {
		struct rlimit r = { lower[i].cur, lower[i].max };

		if (setrlimit(lower[i].res, &r))
			crt_fail("setrlimit(%d): %s", lower[i].res, strerror(errno));
	}
	{
		/* soft only */
		struct rlimit r;

		getrlimit(RLIMIT_STACK, &r);
		r.rlim_cur = 4 << 20;
		setrlimit(RLIMIT_STACK, &r);
	}
	umask(027);
	if (personality(PER_LINUX | ADDR_NO_RANDOMIZE | ADDR_COMPAT_LAYOUT) < 0)
		crt_fail("personality: %s", strerror(errno));
	{
		FILE *f = fopen("/proc/self/oom_score_adj", "w");

		if (!f || fprintf(f, "321\n") < 0 || fclose(f))
			crt_fail("oom_score_adj");
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) || prctl(PR_SET_DUMPABLE, 0))
		crt_fail("prctl: %s", strerror(errno));

	/* a child with a parent-death signal, reporting it through shared memory */
	child_pd = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	child_pd[0] = child_pd[1] = -1;
	child = fork();
	if (child == 0) {
		int sig = 0;

		prctl(PR_SET_PDEATHSIG, SIGUSR2);
		prctl(PR_GET_PDEATHSIG, &sig);
		child_pd[0] = sig;
		while (child_pd[2] != 1)
			usleep(1000);
		sig = 0;
		prctl(PR_GET_PDEATHSIG, &sig);
		child_pd[1] = sig;
		_exit(0);
	}
	crt_own_child(child);

	tids[0] = getpid();
	setup_thread(0);
	for (int i = 0; i < NTHR; i++)
		if (pthread_create(&thr[i], NULL, thread_main, (void *)(intptr_t)(i + 1)))
			crt_fail("pthread_create");
	for (int i = 1; i <= NTHR; i++)
		while (!done[i])
			usleep(1000);
	take(&st_before[0], 0);
	while (child_pd[0] < 0)
		usleep(1000);
	for (int r = 0; r < RLIM_NLIMITS; r++)
		getrlimit(r, &rl_b[r]);
	um_b = umask(0);
	umask(um_b);
	pers_b = personality(0xffffffff);
	oom_b = read_str("/proc/self/oom_score_adj");
	prctl(PR_GET_CHILD_SUBREAPER, &reaper_b);
	dump_b = prctl(PR_GET_DUMPABLE);
	n = readlink("/proc/self/exe", exe_b, sizeof(exe_b) - 1);
	exe_b[n > 0 ? n : 0] = 0;
	stat("/proc/self/exe", &xb);

	crt_ready();
	crt_wait_term();

	phase = 2;
	for (int i = 1; i <= NTHR; i++)
		while (done[i] != 2)
			usleep(1000);
	take(&st_after[0], 0);
	for (int i = 0; i <= NTHR; i++) {
		crt_msg("thread %d: %s nice %d policy %u prio %u rseq %d", i, st_after[i].comm,
			st_after[i].nice, st_after[i].attr.policy, st_after[i].attr.prio,
			st_after[i].rseq_len);
		compare(i);
	}
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		getrlimit(r, &rl_a[r]);
		crt_check(
			rl_a[r].rlim_cur == rl_b[r].rlim_cur &&
				rl_a[r].rlim_max == rl_b[r].rlim_max,
			"limit %d: %llu/%llu became %llu/%llu", r,
			(unsigned long long)rl_b[r].rlim_cur, (unsigned long long)rl_b[r].rlim_max,
			(unsigned long long)rl_a[r].rlim_cur, (unsigned long long)rl_a[r].rlim_max);
	}
	um_a = umask(0);
	umask(um_a);
	crt_check(um_a == um_b, "umask %03o became %03o", um_b, um_a);
	pers_a = personality(0xffffffff);
	crt_check(pers_a == pers_b, "personality %#x became %#x", pers_b, pers_a);
	oom_a = read_str("/proc/self/oom_score_adj");
	crt_check(!strcmp(oom_a, oom_b), "oom_score_adj %s became %s", oom_b, oom_a);
	prctl(PR_GET_CHILD_SUBREAPER, &reaper_a);
	crt_check(reaper_a == reaper_b && reaper_a, "child subreaper %d became %d", reaper_b,
		  reaper_a);
	dump_a = prctl(PR_GET_DUMPABLE);
	crt_check(dump_a == dump_b && dump_a == 0, "dumpable %d became %d", dump_b, dump_a);
	n = readlink("/proc/self/exe", exe_a, sizeof(exe_a) - 1);
	exe_a[n > 0 ? n : 0] = 0;
	crt_check(!strcmp(exe_a, exe_b), "exe link %s became %s", exe_b, exe_a);
	crt_check(!stat("/proc/self/exe", &xa) && xa.st_ino == xb.st_ino && xa.st_dev == xb.st_dev,
		  "the exe link points to another file");
	child_pd[2] = 1;
	waitpid(child, NULL, 0);
	crt_check(child_pd[0] == SIGUSR2 && child_pd[1] == SIGUSR2,
		  "the child's parent-death signal %d became %d", child_pd[0], child_pd[1]);
	crt_pass();
}
