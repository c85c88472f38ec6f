/* Seizing a process tree with PTRACE_SEIZE/PTRACE_INTERRUPT, and letting
 * it go again. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/kcmp.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "dump.h"
#include "images/pstree.pb-c.h"
#include "log.h"
#include "seccomp.h"
#include "remote.h"
#include "util.h"

#define PF_KTHREAD 0x00200000

struct cr_proc *dump_find_proc(struct cr_dump_ctx *ctx, pid_t pid)
{
	for (int i = 0; i < ctx->nr_procs; i++)
		if (ctx->procs[i]->pid == pid)
			return ctx->procs[i];
	return NULL;
}

pid_t dump_ns_outsider(struct cr_dump_ctx *ctx, const char *ns, const struct stat *st)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	while (d && !found && (de = readdir(d))) {
		pid_t x = atoi(de->d_name);
		char path[64];
		struct stat s;

		snprintf(path, sizeof(path), "/proc/%d/ns/%s", x, ns);
		if (x > 0 && !dump_find_proc(ctx, x) && !stat(path, &s) && s.st_ino == st->st_ino &&
		    s.st_dev == st->st_dev)
			found = x;
	}
	if (d)
		closedir(d);
	return found;
}

/* threads found gone after being listed, in one process's seizure, before
 * it is given up */
#define SEIZE_VANISHED_MAX 1000

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static long tracer_of(pid_t tid)
{
	_cleanup_free_ char *st = NULL;
	const char *p;

	if (read_proc(&st, NULL, "/proc/%d/status", tid) || !(p = strstr(st, "\nTracerPid:")))
		return -1;
	return strtol(p + 11, NULL, 10);
}

/* Seize one thread and wait until it sits in a ptrace stop.  Returns 1 if
 * the thread vanished meanwhile, 0 when stopped, -errno on failure. */
static int seize_thread(pid_t pid, struct cr_thread *t, int *group_stop_sig)
{
	int st, ret;
	long opts = PTRACE_O_TRACESYSGOOD;

	/* what kupdate runs inside the thread must not meet its seccomp
	 * filters (seccomp.c) */
	if (seccomp_thread_active(t->tid))
		opts |= PTRACE_O_SUSPEND_SECCOMP;
	if (ptrace(PTRACE_SEIZE, t->tid, 0, opts)) {
		if ((errno == EPERM || errno == EINVAL) && (opts & PTRACE_O_SUSPEND_SECCOMP)) {
			ret = -errno;
			pr_err("pid %d: thread %d runs under seccomp and cannot be seized with its "
			       "filters suspended (PTRACE_O_SUSPEND_SECCOMP needs CAP_SYS_ADMIN "
			       "and "
			       "CONFIG_CHECKPOINT_RESTORE, kupdate not under seccomp itself, and "
			       "no other tracer): %s",
			       pid, t->tid, strerror(-ret));
			return ret;
		}
		if (errno == ESRCH)
			return 1;
		ret = -errno;
		if (errno == EPERM && tracer_of(t->tid) > 0)
			pr_err("pid %d: thread %d is being traced (ptrace) by pid %ld; a traced "
			       "process cannot be dumped (a debugger, strace, or a tracer inside "
			       "the tree)",
			       pid, t->tid, tracer_of(t->tid));
		else if (errno == EPERM)
			pr_err("pid %d: cannot seize thread %d: it is traced by another process or "
			       "not ours to trace (see TracerPid in /proc/%d/status)",
			       pid, t->tid, t->tid);
		else
			pr_perror("pid %d: cannot seize thread %d", pid, t->tid);
		return ret;
	}
	t->seized = true;
	if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0)) {
		if (errno == ESRCH)
			return 1;
		ret = pr_errno("pid %d: cannot interrupt thread %d", pid, t->tid);
		return ret;
	}
	for (;;) {
		ret = wait_stop(t->tid, &st);
		if (ret == -ECHILD)
			return 1;
		if (ret) {
			pr_err("pid %d: waiting for thread %d: %s", pid, t->tid, strerror(-ret));
			return ret;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			t->seized = false;
			return 1;
		}
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			int sig = WSTOPSIG(st);

			if (is_stop_signal(sig))
				*group_stop_sig = sig;
			t->stopped = true;
			return 0;
		}
		if ((st >> 16) == PTRACE_EVENT_EXIT) {
			/* exiting: let it finish */
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			continue;
		}
		/* A signal was being delivered: hand it back and wait for the
		 * interrupt, which stays pending. */
		pr_debug("pid %d: thread %d got signal %d while being seized", pid, t->tid,
			 WSTOPSIG(st));
		if (ptrace(PTRACE_CONT, t->tid, 0, WSTOPSIG(st)) && errno == ESRCH)
			return 1;
	}
}

static int add_thread(struct cr_proc *p, pid_t tid)
{
	struct cr_thread *nt = xrealloc_array(p->threads, p->nr_threads + 1, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	p->threads = nt;
	memset(&nt[p->nr_threads], 0, sizeof(*nt));
	nt[p->nr_threads].tid = tid;
	nt[p->nr_threads].restart_nr = -1;
	p->nr_threads++;
	return 0;
}

static bool has_thread(struct cr_proc *p, pid_t tid)
{
	for (int i = 0; i < p->nr_threads; i++)
		if (p->threads[i].tid == tid)
			return true;
	return false;
}

/* A process sharing its memory with its parent or a child (vfork in
 * progress, or CLONE_VM) cannot be dumped; a vfork parent would not even
 * stop (it waits for the child unaware of PTRACE_INTERRUPT), so this is
 * looked at before seizing anything. */
static int check_shared_vm(struct cr_proc *p)
{
	_cleanup_free_ pid_t *tids = NULL;
	int nt = list_tasks(p->pid, &tids);

	if (p->stat.ppid > 1 && syscall(SYS_kcmp, p->pid, p->stat.ppid, KCMP_VM, 0, 0) == 0) {
		pr_err("pid %d shares its memory with its parent %d (vfork in progress, or "
		       "CLONE_VM); it cannot be dumped now",
		       p->pid, p->stat.ppid);
		return -EAGAIN;
	}
	for (int i = 0; i < nt; i++) {
		_cleanup_free_ char *kids = NULL;
		char *s, *e;

		if (read_proc(&kids, NULL, "/proc/%d/task/%d/children", p->pid, tids[i]))
			continue;
		for (s = kids;; s = e) {
			long c = strtol(s, &e, 10);

			if (e == s)
				break;
			if (syscall(SYS_kcmp, p->pid, (pid_t)c, KCMP_VM, 0, 0) == 0) {
				pr_err("pid %ld shares its memory with its parent %d (vfork in "
				       "progress, or CLONE_VM); it cannot be dumped now",
				       c, p->pid);
				return -EAGAIN;
			}
		}
	}
	return 0;
}

/* Seize every thread of p, re-reading the thread list until no new thread
 * shows up (a thread can clone while we are seizing its siblings). */
static int seize_process(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret, group_sig = 0, vanished = 0;
	bool changed = true;

	ret = parse_stat(p->pid, 0, &p->stat);
	if (ret) {
		pr_err("pid %d: cannot read /proc/%d/stat: %s", p->pid, p->pid, strerror(-ret));
		return ret;
	}
	if (p->stat.flags & PF_KTHREAD) {
		pr_err("pid %d is a kernel thread; only user processes can be dumped", p->pid);
		return -EINVAL;
	}
	if (p->stat.state == 'Z' || p->stat.state == 'X') {
		_cleanup_free_ pid_t *tids = NULL;
		int nt = list_tasks(p->pid, &tids);

		if (nt > 1) {
			pr_err("pid %d: the main thread exited while %d other threads run; such a "
			       "process cannot be dumped",
			       p->pid, nt - 1);
			return -EOPNOTSUPP;
		}
		p->state = TASK_STATE__TASK_ZOMBIE;
		p->exit_code = p->stat.exit_code;
		return add_thread(p, p->pid);
	}

	ret = check_shared_vm(p);
	if (ret)
		return ret;
	while (changed) {
		_cleanup_free_ pid_t *tids = NULL;
		int nt = list_tasks(p->pid, &tids);

		changed = false;
		if (nt < 0) {
			pr_err("pid %d: cannot list threads: %s", p->pid, strerror(-nt));
			return nt;
		}
		/* main thread first */
		for (int pass = 0; pass < 2; pass++) {
			for (int i = 0; i < nt; i++) {
				struct cr_thread *t;

				if ((pass == 0) != (tids[i] == p->pid) || has_thread(p, tids[i]))
					continue;
				ret = add_thread(p, tids[i]);
				if (ret)
					return ret;
				t = &p->threads[p->nr_threads - 1];
				changed = true;
				ret = seize_thread(p->pid, t, &group_sig);
				if (ret < 0)
					return ret;
				if (ret == 1) {
					/* thread exited meanwhile */
					p->nr_threads--;
					if (tids[i] == p->pid) {
						pr_err("pid %d exited while being dumped", p->pid);
						return -ESRCH;
					}
					/* bounded: a thread /proc lists and ptrace says is
					 * gone, again and again (a dead thread nobody reaps) */
					if (++vanished > SEIZE_VANISHED_MAX) {
						pr_err("pid %d: thread %d is listed in "
						       "/proc/%d/task but "
						       "cannot be seized (gone, %d times); such a "
						       "process "
						       "cannot be dumped",
						       p->pid, tids[i], p->pid, vanished);
						return -EOPNOTSUPP;
					}
				}
			}
		}
	}
	if (!p->nr_threads || p->threads[0].tid != p->pid) {
		pr_err("pid %d exited while being dumped", p->pid);
		return -ESRCH;
	}
	ctx->nr_threads += p->nr_threads;
	/* now that it cannot change, read stat again */
	ret = parse_stat(p->pid, 0, &p->stat);
	if (ret)
		return ret;
	p->state = group_sig ? TASK_STATE__TASK_STOPPED : TASK_STATE__TASK_ALIVE;
	p->stop_sig = group_sig;
	return 0;
}

static int add_proc(struct cr_dump_ctx *ctx, pid_t pid, struct cr_proc *parent)
{
	struct cr_proc **np, *p;

	np = xrealloc_array(ctx->procs, ctx->nr_procs + 1, sizeof(*np));
	if (!np)
		return -ENOMEM;
	ctx->procs = np;
	p = xzalloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->parent = parent;
	p->mem_fd = -1;
	p->pidfd = -1;
	p->uffd_fd = -1;
	ctx->procs[ctx->nr_procs++] = p;
	if (parent) {
		struct cr_proc **nc =
			xrealloc_array(parent->children, parent->nr_children + 1, sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		parent->children = nc;
		nc[parent->nr_children++] = p;
	}
	return 0;
}

static int check_root(pid_t root)
{
	pid_t self = getpid();

	for (pid_t a = self; a > 1;) {
		struct proc_stat st;

		if (a == root) {
			pr_err("pid %d is kupdate itself or one of its ancestors; it cannot be "
			       "dumped",
			       a);
			return -EINVAL;
		}
		if (parse_stat(a, 0, &st))
			break;
		a = st.ppid;
	}
	if (root <= 1) {
		pr_err("pid %d cannot be dumped", root);
		return -EINVAL;
	}
	if (kill(root, 0) && errno == ESRCH) {
		pr_err("pid %d does not exist", root);
		return -ESRCH;
	}
	return 0;
}

/* The members whose parent is not a member are the roots; the tree of
 * members[0] (a service's main process) comes first. */
static int roots_of_members(struct cr_dump_ctx *ctx, pid_t **out, int *nr)
{
	const pid_t *m = ctx->opts->members;
	int n = ctx->opts->nr_members, k = 0;
	pid_t *roots = calloc(n ? n : 1, sizeof(*roots));

	if (!roots)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct proc_stat st;
		bool inside = false;

		if (parse_stat(m[i], 0, &st))
			continue; /* gone meanwhile */
		for (int j = 0; j < n && !inside; j++)
			inside = m[j] == st.ppid;
		if (!inside)
			roots[k++] = m[i];
	}
	/* members[0]'s root first */
	for (pid_t a = m[0]; a > 1;) {
		struct proc_stat st;

		for (int i = 0; i < k; i++)
			if (roots[i] == a) {
				roots[i] = roots[0];
				roots[0] = a;
				a = 0;
				break;
			}
		if (!a || parse_stat(a, 0, &st))
			break;
		a = st.ppid;
	}
	*out = roots;
	*nr = k;
	return 0;
}

static int check_members(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		bool member = false;

		for (int j = 0; j < ctx->opts->nr_members && !member; j++)
			member = ctx->opts->members[j] == ctx->procs[i]->pid;
		/* an exited child its parent has not waited for: the kernel
		 * takes a process out of its cgroup's list as it exits, and
		 * the zombie is its parent's (a member's) */
		if (!member && ctx->procs[i]->state == TASK_STATE__TASK_ZOMBIE &&
		    ctx->procs[i]->parent)
			continue;
		if (!member) {
			pr_err("pid %d (%s), a child of %d, is not in the group being dumped "
			       "(another "
			       "cgroup?); it cannot be dumped with it",
			       ctx->procs[i]->pid, ctx->procs[i]->stat.comm,
			       ctx->procs[i]->parent ? ctx->procs[i]->parent->pid : 0);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

int seize_tree(struct cr_dump_ctx *ctx)
{
	_cleanup_free_ pid_t *from_members = NULL;
	const pid_t *roots = ctx->opts->nr_roots ? ctx->opts->roots : &ctx->opts->root;
	int nr_roots = ctx->opts->nr_roots ? ctx->opts->nr_roots : 1, ret;

	if (ctx->opts->nr_members) {
		ret = roots_of_members(ctx, &from_members, &nr_roots);
		if (ret)
			return ret;
		if (!nr_roots) {
			pr_err("none of the %d processes to dump exists any more",
			       ctx->opts->nr_members);
			return -ESRCH;
		}
		roots = from_members;
	}

	for (int r = 0; r < nr_roots; r++) {
		ret = check_root(roots[r]);
		if (ret)
			return ret;
	}
	ctx->t_seized = now_ns(CLOCK_MONOTONIC);
	for (int r = 0; r < nr_roots; r++) {
		/* a root may be in another root's tree already */
		if (dump_find_proc(ctx, roots[r]))
			continue;
		ret = add_proc(ctx, roots[r], NULL);
		if (ret)
			return ret;
		/* breadth first: procs[] grows while we walk it */
		for (int i = ctx->nr_procs - 1; i < ctx->nr_procs; i++) {
			struct cr_proc *p = ctx->procs[i];
			_cleanup_free_ pid_t *kids = NULL;
			int nk;

			ret = seize_process(ctx, p);
			if (ret)
				return ret;
			p->ppid = p->parent ? p->parent->pid : p->stat.ppid;
			p->pgid = p->stat.pgid;
			p->sid = p->stat.sid;
			if (p->state == TASK_STATE__TASK_ZOMBIE)
				continue;
			nk = list_children(p->pid, &kids);
			if (nk < 0) {
				pr_err("pid %d: cannot list children: %s", p->pid, strerror(-nk));
				return nk;
			}
			for (int k = 0; k < nk; k++) {
				struct cr_proc *known = dump_find_proc(ctx, kids[k]);

				if (known) {
					/* a root listed separately turns out to be a child */
					if (!known->parent) {
						pr_err("pid %d: listed as a root but it is a child "
						       "of %d",
						       kids[k], p->pid);
						return -EINVAL;
					}
					continue;
				}
				ret = add_proc(ctx, kids[k], p);
				if (ret)
					return ret;
			}
		}
	}
	if (ctx->opts->nr_members) {
		ret = check_members(ctx);
		if (ret)
			return ret;
	}
	pr_info("seized %d processes, %u threads", ctx->nr_procs, ctx->nr_threads);
	return 0;
}

/* Put a thread back the way it was and detach.  Once its registers have
 * been read they are put back normalised (an interrupted syscall rewound to
 * be issued again), which is right from any kind of ptrace stop. */
static void release_thread(struct cr_proc *p, struct cr_thread *t)
{
	if (!t->seized)
		return;
	if (t->regs_valid && ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) && errno != ESRCH)
		pr_perror("pid %d: cannot restore registers of thread %d", p->pid, t->tid);
	if (ptrace(PTRACE_DETACH, t->tid, 0, 0) && errno != ESRCH)
		pr_perror("pid %d: cannot detach from thread %d", p->pid, t->tid);
	t->seized = false;
}

/* Reap what ptrace reports of a killed thread: for a thread this frees it,
 * for a process leader it hands the zombie to its real parent. */
static void wait_gone(struct cr_thread *t)
{
	for (;;) {
		int st;
		pid_t r = waitpid(t->tid, &st, __WALL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st))
			break;
		/* a stop on the way out (e.g. PTRACE_EVENT_EXIT): go on dying */
		ptrace(PTRACE_CONT, t->tid, 0, 0);
	}
	t->seized = false;
}

void release_tree(struct cr_dump_ctx *ctx, bool kill_it)
{
	ctx->t_released = now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];

		if (p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		if (kill_it) {
			/* SIGKILL while still seized: nothing of the tree runs again */
			kill(p->pid, SIGKILL);
			continue;
		}
		for (int k = 0; k < p->nr_threads; k++)
			release_thread(p, &p->threads[k]);
		if (p->state == TASK_STATE__TASK_STOPPED)
			kill(p->pid, p->stop_sig ? p->stop_sig : SIGSTOP);
	}
	if (!kill_it)
		return;
	/* children first: a pid namespace's init ends only once the kernel
	 * reaped everything in its namespace, which waits for what ptrace
	 * reports of them to us */
	for (int i = ctx->nr_procs - 1; i >= 0; i--) {
		struct cr_proc *p = ctx->procs[i];

		if (p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		for (int k = p->nr_threads - 1; k >= 0; k--)
			if (p->threads[k].seized)
				wait_gone(&p->threads[k]);
	}
}
