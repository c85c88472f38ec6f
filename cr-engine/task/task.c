/* The rest of a task's state: umask, resource limits, oom_score_adj,
 * subreaper and dumpable flags, and per thread the scheduling policy and
 * nice value (also of SCHED_IDLE and real-time threads), CPU affinity,
 * parent-death signal and alternate signal stack.
 * Dump reads /proc and sched_getattr/sched_getaffinity from outside, and
 * the few prctl values only the task can read by running them inside it.
 * Also the states the engine refuses: a tracer inside the tree, vfork.
 * Restore: restore.c (before the restorer) and restorer.c. */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "dump.h"
#include "log.h"
#include "remote.h"
#include "namespaces.h"
#include "task.h"
#include "timens.h"
#include "util.h"

static const char *const rlimit_names[] = {
	"Max cpu time",	      "Max file size",	   "Max data size",	    "Max stack size",
	"Max core file size", "Max resident set",  "Max processes",	    "Max open files",
	"Max locked memory",  "Max address space", "Max file locks",	    "Max pending signals",
	"Max msgqueue size",  "Max nice priority", "Max realtime priority", "Max realtime timeout",
};

static uint64_t limit_value(const char *s)
{
	while (*s == ' ')
		s++;
	if (!strncmp(s, "unlimited", 9))
		return ~0ULL;
	return strtoull(s, NULL, 10);
}

/* The restored process starts with kupdate's limits and can only lower a
 * hard limit unless it holds CAP_SYS_RESOURCE (root here does not): a hard
 * limit above kupdate's own cannot be restored, so the dump refuses it now
 * rather than the restore failing later.  (The restore runs with the
 * limits of its own start; a service manager should give it at least the
 * dump's.) */
static int check_limits(struct cr_proc *p)
{
	_cleanup_free_ char *st = NULL;
	const char *eff;

	if (!read_proc(&st, NULL, "/proc/self/status") && (eff = strstr(st, "\nCapEff:")) &&
	    (strtoull(eff + 8, NULL, 16) >> CAP_SYS_RESOURCE & 1))
		return 0;
	for (int i = 0; i < p->nr_rlim; i++) {
		struct rlimit own;

		if (getrlimit(i, &own))
			continue;
		if (p->rlim[i][1] > (uint64_t)own.rlim_max) {
			pr_err("pid %d: its hard limit '%s' (%llu) is above kupdate's own (%llu), "
			       "and "
			       "kupdate lacks CAP_SYS_RESOURCE to raise it: the restore could not "
			       "set "
			       "it",
			       p->pid, rlimit_names[i], (unsigned long long)p->rlim[i][1],
			       (unsigned long long)own.rlim_max);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

/* /proc/PID/limits: readable for any uid, unlike prlimit() without
 * CAP_SYS_RESOURCE */
static int read_limits(struct cr_proc *p)
{
	_cleanup_free_ char *buf = NULL;
	int ret = read_proc(&buf, NULL, "/proc/%d/limits", p->pid);

	if (ret) {
		pr_err("pid %d: cannot read its limits: %s", p->pid, strerror(-ret));
		return ret;
	}
	p->nr_rlim = 0;
	for (size_t i = 0; i < ARRAY_SIZE(rlimit_names); i++) {
		char *l = strstr(buf, rlimit_names[i]);

		if (!l) {
			pr_err("pid %d: /proc/%d/limits lacks '%s'", p->pid, p->pid,
			       rlimit_names[i]);
			return -EINVAL;
		}
		/* fixed columns: name (26), soft (21), hard (21), units */
		p->rlim[i][0] = limit_value(l + 26);
		p->rlim[i][1] = limit_value(l + 26 + 21);
		p->nr_rlim++;
	}
	return check_limits(p);
}

static long status_field(const char *status, const char *key, int base)
{
	const char *p = strstr(status, key);

	return p ? strtol(p + strlen(key), NULL, base) : -1;
}

/* tracers inside the tree and processes sharing memory (vfork) cannot be
 * rebuilt */
static int check_refusals(struct cr_dump_ctx *ctx, struct cr_proc *p, const char *status)
{
	long tracer = status_field(status, "\nTracerPid:", 10);

	/* the tracer is a thread: the one dumping (apply dumps in threads) */
	if (tracer > 0 && tracer != gettid()) {
		pr_err("pid %d is being traced (ptrace) by pid %ld; a traced process cannot be "
		       "dumped",
		       p->pid, tracer);
		return -EOPNOTSUPP;
	}
	if (ns_check_proc(ctx, p))
		return -EOPNOTSUPP;
	/* a time namespace is rebuilt (timens.c), one per tree */
	if (timens_check(p->pid, ctx->procs[0]->pid))
		return -EOPNOTSUPP;
	if (p->parent && p->parent->state != TASK_STATE__TASK_ZOMBIE &&
	    syscall(SYS_kcmp, p->pid, p->parent->pid, KCMP_VM, 0, 0) == 0) {
		pr_err("pid %d shares its memory with its parent %d (vfork in progress, or "
		       "CLONE_VM); it cannot be dumped now",
		       p->pid, p->parent->pid);
		return -EAGAIN;
	}
	return 0;
}

int dump_task_misc(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *status = NULL, *oom = NULL;
	struct cr_thread *t = &p->threads[0];
	long args[6] = { 0 }, res;
	int ret;

	ret = read_proc(&status, NULL, "/proc/%d/status", p->pid);
	if (ret)
		return ret;
	ret = check_refusals(ctx, p, status);
	if (ret)
		return ret;
	p->umask = status_field(status, "\nUmask:", 8);
	ret = read_limits(p);
	if (ret)
		return ret;
	if (!read_proc(&oom, NULL, "/proc/%d/oom_score_adj", p->pid))
		p->oom_score_adj = atoi(oom);

	{
		int v = 0;

		args[0] = PR_GET_CHILD_SUBREAPER;
		ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, 1, &v,
					 sizeof(v), &res);
		if (ret)
			return ret;
		p->child_subreaper = v != 0;
	}
	memset(args, 0, sizeof(args));
	args[0] = PR_GET_DUMPABLE;
	ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, &res);
	if (ret)
		return ret;
	p->dumpable = res >= 0 ? res : 1;
	return 0;
}

int dump_thread_misc(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_thread *t)
{
	long args[6] = { 0 }, res;
	stack_t ss;
	int ret, n;

	(void)ctx;
	/* scheduling: readable from outside */
	n = syscall(SYS_sched_getattr, t->tid, t->sched_attr, sizeof(t->sched_attr), 0);
	if (n)
		return pr_errno("pid %d: thread %d: sched_getattr", p->pid, t->tid);
	t->sched_attr_len = *(uint32_t *)t->sched_attr;
	if (t->sched_attr_len > sizeof(t->sched_attr))
		t->sched_attr_len = sizeof(t->sched_attr);
	/* a real-time thread keeps a nice value too (for when it goes back to
	 * SCHED_OTHER), which sched_getattr does not report: its field
	 * carries it (the restorer sets it first, with setpriority) */
	errno = 0;
	n = getpriority(PRIO_PROCESS, t->tid);
	if (errno)
		return pr_errno("pid %d: thread %d: getpriority", p->pid, t->tid);
	if (t->sched_attr_len >= 20)
		memcpy(t->sched_attr + 16, &n, sizeof(n));
	n = syscall(SYS_sched_getaffinity, t->tid, sizeof(t->affinity), t->affinity);
	if (n < 0)
		return pr_errno("pid %d: thread %d: sched_getaffinity", p->pid, t->tid);
	t->affinity_len = n;

	/* per thread, only from inside */
	ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_sigaltstack, args, 1, &ss,
				 sizeof(ss), &res);
	if (ret)
		return ret;
	if (!res && !(ss.ss_flags & SS_DISABLE)) {
		t->has_altstack = true;
		t->altstack_sp = (uintptr_t)ss.ss_sp;
		t->altstack_size = ss.ss_size;
		t->altstack_flags = ss.ss_flags & ~SS_ONSTACK;
	}
	memset(args, 0, sizeof(args));
	args[0] = PR_GET_PDEATHSIG;
	{
		int sig = 0;

		ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, 1, &sig,
					 sizeof(sig), &res);
		if (ret)
			return ret;
		t->pdeathsig = res ? 0 : sig;
	}
	return 0;
}
