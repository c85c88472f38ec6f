/* Restore, steps 4 and 5, kupdate's side (restore.c): every process of the
 * created tree seized, each followed through its restorer blob to the int3
 * where it parks (a thread made through ns_last_pid stopped on its way,
 * lastpid.c; a page fill helper run beside it), a failure named by the
 * step the blob had reached; then each thread's registers set, the blob
 * unmapped by an injected munmap, the connections let out of repair mode
 * and the tree let go. */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "inotify.h"
#include "log.h"
#include "proc.h"
#include "remote.h"
#include "tcp.h"
#include "util.h"

#include "restore-ctx.h"

static struct rproc *proc_of_tid(struct rctx *c, pid_t tid, int *ti)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		for (size_t k = 0; !rp->zombie && k < rp->pe->n_tids; k++)
			if (rp->pe->tids[k] == tid) {
				*ti = k;
				return rp;
			}
	}
	return NULL;
}

static const char *step_name(uint32_t step)
{
	static const char *const n[RST_STEP_MAX] = {
		[RST_STEP_NONE] = "starting",
		[RST_STEP_PARK] = "moving the vDSO aside",
		[RST_STEP_UNMAP] = "unmapping the old address space",
		[RST_STEP_MOVE] = "placing the vDSO",
		[RST_STEP_MMAP] = "mmap",
		[RST_STEP_FILL] = "reading its pages",
		[RST_STEP_CRC] = "checking its pages",
		[RST_STEP_MPROTECT] = "mprotect",
		[RST_STEP_MADVISE] = "madvise",
		[RST_STEP_MLOCK] = "mlock",
		[RST_STEP_MM] = "setting the mm fields (PR_SET_MM_MAP)",
		[RST_STEP_CLONE] = "creating a thread",
		[RST_STEP_THREAD] = "setting thread state",
		[RST_STEP_RSEQ] = "registering rseq",
		[RST_STEP_SIGACTION] = "setting a signal action",
		[RST_STEP_RLIMIT] =
			"setting a resource limit (raising a hard limit needs CAP_SYS_RESOURCE)",
		[RST_STEP_ITIMER] = "arming an interval timer",
		[RST_STEP_TIMER] = "creating a POSIX timer",
		[RST_STEP_SIGQUEUE] = "queueing a pending signal",
		[RST_STEP_SCHED] = "setting the scheduling policy or affinity",
		[RST_STEP_ALTSTACK] = "setting the alternate signal stack",
		[RST_STEP_CREDS] = "setting credentials",
		[RST_STEP_SECCOMP] = "installing seccomp (index: the filter, oldest first)",
	};
	return step < RST_STEP_MAX && n[step] ? n[step] : "?";
}

/* The blob gave up: say what it was doing. */
static void report_blob_failure(struct rctx *c, struct rproc *rp)
{
	struct rst_args a;
	struct iovec l = { &a, sizeof(a) }, r = { (void *)rp->args_addr, sizeof(a) };

	if (process_vm_readv(rp->pid, &l, 1, &r, 1, 0) != sizeof(a)) {
		pr_err("pid %d: the restorer failed (its report is unreadable)", rp->pid);
		return;
	}
	if (a.err_step == RST_STEP_MMAP || a.err_step == RST_STEP_FILL ||
	    a.err_step == RST_STEP_CRC || a.err_step == RST_STEP_MPROTECT ||
	    a.err_step == RST_STEP_MADVISE || a.err_step == RST_STEP_MLOCK) {
		const VmaEntry *e = NULL;
		size_t n = 0;

		for (size_t i = 0; i < rp->mm.nr_vmas; i++) {
			if (rp->mm.vmas[i]->kind == VMA_KIND__VMA_VDSO ||
			    rp->mm.vmas[i]->kind == VMA_KIND__VMA_VVAR)
				continue;
			if (n++ == a.err_index)
				e = rp->mm.vmas[i];
		}
		if (a.err_step == RST_STEP_CRC) {
			char name[80];

			uint64_t at = rp->helper_bad_addr ? rp->helper_bad_addr : a.err_addr;

			mem_pages_name_at(&rp->mm, rp->pid, at, name, sizeof(name));
			pr_err("pid %d: page data at %lx does not match its checksum: %s is "
			       "damaged",
			       rp->pid, (unsigned long)at, name);
			return;
		}
		pr_err("pid %d: cannot restore mapping %lx-%lx%s%s: %s at %lx failed: %s", rp->pid,
		       e ? (unsigned long)e->start : 0, e ? (unsigned long)e->end : 0,
		       e && e->path ? " " : "", e && e->path ? e->path : "", step_name(a.err_step),
		       (unsigned long)a.err_addr, strerror((int)-a.err));
		return;
	}
	pr_err("pid %d: the restorer failed %s (index %u, address %lx): %s", rp->pid,
	       step_name(a.err_step), a.err_index, (unsigned long)a.err_addr,
	       strerror((int)-a.err));
}

int restore_seize_all(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL |
			    PTRACE_O_TRACESYSGOOD;

		if (rp->zombie)
			continue;
		/* its seccomp filters go in inside the restorer; they must not
		 * apply to what kupdate does in it until it is let go */
		if (rp->core.task->seccomp)
			opts |= PTRACE_O_SUSPEND_SECCOMP;
		if (ptrace(PTRACE_SEIZE, rp->pid, 0, opts)) {
			int ret = -errno;
			if (rp->core.task->seccomp)
				pr_perror("pid %d: cannot trace it with its seccomp filters "
					  "suspended "
					  "(PTRACE_O_SUSPEND_SECCOMP needs CAP_SYS_ADMIN and "
					  "CONFIG_CHECKPOINT_RESTORE)",
					  rp->pid);
			else
				pr_perror("pid %d: cannot trace it to finish its restore", rp->pid);
			return ret;
		}
		rp->seized = true;
		rp->blob_start = c->sh->procs[i].blob_start;
		rp->blob_len = c->sh->procs[i].blob_len;
		rp->args_addr = c->sh->procs[i].args_addr;
		rp->syscall_ip = rp->blob_start + RST_SYSCALL_OFFSET;
		pr_debug("pid %d: restorer at %lx-%lx, args at %lx", rp->pid,
			 (unsigned long)rp->blob_start,
			 (unsigned long)(rp->blob_start + rp->blob_len),
			 (unsigned long)rp->args_addr);
	}
	return 0;
}

/* Follow the tree through the blob until every thread is parked. */
static int follow_blobs(struct rctx *c)
{
	size_t parked = 0;
	sigset_t chld;
	int64_t deadline;
	uint64_t pages = 0;

	for (size_t i = 0; i < c->nr; i++)
		if (!c->procs[i].zombie)
			pages += c->procs[i].mm.head->nr_pages;
	/* generous: a minute plus ten seconds a GiB */
	deadline = now_ns(CLOCK_MONOTONIC) + (60LL + 10LL * (int64_t)(pages >> 18)) * 1000000000LL;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);

	while (parked < c->nr_threads) {
		int st, ti = 0;
		pid_t tid = waitpid(-1, &st, __WALL | WNOHANG);
		struct rproc *rp;

		if (tid == 0) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };

			if (now_ns(CLOCK_MONOTONIC) > deadline) {
				pr_err("restore timed out: %zu of %zu threads restored", parked,
				       c->nr_threads);
				return -ETIMEDOUT;
			}
			sigtimedwait(&chld, NULL, &ts);
			continue;
		}
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			pr_perror("restore: waiting for the tree");
			return -ECHILD;
		}
		rp = proc_of_tid(c, tid, &ti);
		if (!rp) {
			/* a thread that missed its tid (lastpid.c) on its way out:
			 * it stops as every new thread of a traced process does */
			pr_debug("restore: event %#x of unrelated pid %d", st, tid);
			if (WIFSTOPPED(st))
				ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		if (lp_stray_event(rp, tid, ti, st))
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (!atomic_load(&c->sh->failed))
				pr_err("pid %d (thread %d) died during its restore (%s %d)",
				       rp->pid, tid, WIFEXITED(st) ? "exit status" : "signal",
				       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return -ESRCH;
		}
		if (!WIFSTOPPED(st))
			continue;
		switch (st >> 16) {
		case PTRACE_EVENT_CLONE:
		case PTRACE_EVENT_STOP:
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		case PTRACE_EVENT_EXIT:
			report_blob_failure(c, rp);
			return -ECANCELED;
		}
		if (WSTOPSIG(st) == SIGTRAP) {
			struct user_regs_struct r;
			int ret;

			if (ptrace(PTRACE_GETREGS, tid, 0, &r) || r.rip <= rp->blob_start ||
			    r.rip > rp->blob_start + rp->blob_len) {
				pr_err("pid %d: thread %d stopped outside the restorer", rp->pid,
				       tid);
				return -EFAULT;
			}
			/* the blob asks for help with a mapping's pages, or waits
			 * for it to end (its %rax: what came of it) */
			if (r.rip == rp->blob_start + RST_HELPER_START_OFFSET + 1) {
				ret = mem_helper_start(rp->pid, rp->args_addr, r.rdi, r.rsi, r.rdx,
						       &rp->helper);
				if (ret)
					return ret;
				ptrace(PTRACE_CONT, tid, 0, 0);
				continue;
			}
			ret = lp_tid_trap(rp, tid, &r);
			if (ret < 0)
				return ret;
			if (ret)
				continue;
			if (r.rip == rp->blob_start + RST_HELPER_WAIT_OFFSET + 1) {
				r.rax = (unsigned long long)mem_helper_wait(&rp->helper,
									    &rp->helper_bad_addr);
				if (ptrace(PTRACE_SETREGS, tid, 0, &r))
					return pr_errno(
						"pid %d: cannot hand the fill's result to the "
						"restorer",
						rp->pid);
				ptrace(PTRACE_CONT, tid, 0, 0);
				continue;
			}
			rp->parked++;
			parked++;
			continue;
		}
		if (WSTOPSIG(st) == SIGCHLD) {
			/* from a zombie child: discarded, as it would be at SIG_DFL */
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		{
			struct user_regs_struct r;

			memset(&r, 0, sizeof(r));
			ptrace(PTRACE_GETREGS, tid, 0, &r);
			pr_err("pid %d: thread %d got signal %d at %llx while being restored",
			       rp->pid, tid, WSTOPSIG(st), r.rip);
			return -EFAULT;
		}
	}
	return 0;
}

int restore_run_blobs(struct rctx *c)
{
	int ret = follow_blobs(c);

	/* a tid lock left by a failure goes */
	for (size_t i = 0; i < c->nr; i++)
		if (c->procs[i].tid_hold.held)
			tid_done(&c->procs[i].tid_hold);
	/* a fill helper left running by a failure ends with its process */
	for (size_t i = 0; i < c->nr; i++)
		if (c->procs[i].helper) {
			if (!ret)
				pr_err("pid %d: the restorer parked with a fill helper running",
				       c->procs[i].pid);
			ret = ret ? ret : -EPROTO;
			if (c->procs[i].pid > 0)
				kill(c->procs[i].pid, SIGKILL);
			mem_helper_wait(&c->procs[i].helper, &c->procs[i].helper_bad_addr);
		}
	return ret;
}

/* Where a restore's time goes, at debug level (-vv, and always in a log
 * file): each step's end, from the start of cr_restore. */
void restore_step_done(const struct rctx *c, const char *what)
{
	pr_debug("restore: %s at +%.1f ms", what, (now_ns(CLOCK_MONOTONIC) - c->t0) / 1e6);
}

/* Registers in, blob out, tree loose. */
int restore_finish(struct rctx *c)
{
	int ret;

	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		const ThreadCore *main_tc;
		struct user_regs_struct r;
		long args[6] = { 0 }, res;

		if (rp->zombie)
			continue;
		main_tc = rp->core.threads[0];
		if (ptrace(PTRACE_GETREGS, main_tc->tid, 0, &r))
			return pr_errno("pid %d: cannot read the restorer's registers", rp->pid);
		/* a shared fd table: what served the restore of its processes
		 * is closed once all of them are done with it */
		if (rp->fdt_shared) {
			args[0] = fdt_base(rp);
			args[1] = ~0U;
			args[2] = 0;
			ret = remote_syscall(main_tc->tid, rp->syscall_ip, &r, SYS_close_range,
					     args, &res);
			if (ret)
				return ret;
			if (res) {
				pr_err("pid %d: cannot close the fds that served its restore: %s",
				       rp->pid, strerror((int)-res));
				return (int)res;
			}
		}
		args[0] = rp->blob_start;
		args[1] = rp->blob_len;
		args[2] = 0;
		ret = remote_syscall(main_tc->tid, rp->syscall_ip, &r, SYS_munmap, args, &res);
		if (ret)
			return ret;
		if (res) {
			pr_err("pid %d: cannot unmap the restorer at %lx: %s", rp->pid,
			       (unsigned long)rp->blob_start, strerror((int)-res));
			return (int)res;
		}
		for (size_t k = 0; k < rp->core.nr_threads; k++) {
			ret = core_set_thread(rp->pid, rp->core.threads[k]);
			if (ret)
				return ret;
		}
	}
	restore_step_done(c, "registers set");
	/* the processes stopped: what they had queued on their watches of
	 * control groups, made again (a freeze and thaw of each) */
	ret = inotify_restore_events(c);
	if (ret)
		return ret;
	ret = tcp_finish_restore(&c->files, c->procs, c->nr, !c->opts->no_net_unlock,
				 !c->opts->no_rto_revert);
	if (ret)
		return ret;
	restore_step_done(c, "connections out of repair mode, network unlocked");
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		if (rp->zombie)
			continue;
		for (size_t k = 0; k < rp->core.nr_threads; k++) {
			int sig = (k == 0 && rp->pe->state == TASK_STATE__TASK_STOPPED)
					  ? (rp->pe->has_stop_signal && rp->pe->stop_signal
						     ? (int)rp->pe->stop_signal
						     : SIGSTOP)
					  : 0;

			if (ptrace(PTRACE_DETACH, rp->core.threads[k]->tid, 0, sig))
				pr_perror("pid %d: cannot detach thread %d", rp->pid,
					  rp->core.threads[k]->tid);
		}
		rp->seized = false;
	}
	return 0;
}
