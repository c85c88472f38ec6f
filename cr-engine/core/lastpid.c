/* A thread of a process that entered its own user namespace is made
 * without set_tid (that needs privileges in the initial user namespace,
 * which the process gave up): kupdate, which keeps them, sets ns_last_pid
 * just below the thread's tid for the clone (restorer.h: RST_TID_PREP).
 * Every kupdate that writes ns_last_pid holds its flock meanwhile
 * (restore.c: spawn_ns_last_pid too).  A tid of the boot's pid reservation
 * (pid_reserve=, kernel/patches: ordinary allocation skips it even after
 * ns_last_pid) is taken out of it while the lock is held and put back
 * after.  Something else that forks in between takes the tid: the thread
 * gets another and exits, and the restorer tries again (up to 50 times);
 * a process that holds the tid meanwhile (a short-lived one the boot
 * forked in that window) is waited for, 3 s at most, before each try.
 * ns_last_pid goes back to where it was after each clone: the boot's forks
 * go on above the saved pids, not among those of the units not restored
 * yet (without pid_reserve=, where the generator put it up there). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cr-util.h"
#include "log.h"
#include "proc.h"
#include "pidns.h"
#include "restore.h"
#include "restore-ctx.h"

/* ranges "a-b,c" without tid, into out; false if tid is in none */
static bool without(const char *list, pid_t tid, char *out, size_t len)
{
	bool found = false;
	size_t o = 0;

	out[0] = 0;
	for (const char *s = list; *s && o < len;) {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (tid >= a && tid <= b) {
			found = true;
			if (a < tid)
				o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "", a,
					      (long)tid - 1);
			if (tid < b && o < len)
				o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "",
					      (long)tid + 1, b);
		} else {
			o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "", a, b);
		}
		s = end;
		while (*s == ',' || *s == ' ' || *s == '\n')
			s++;
	}
	return found;
}

static int write_proc(const char *rel, const char *text)
{
	int fd = proc_open(rel, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* no task holds tid (a process the boot forked while ns_last_pid was
 * below it, gone in a moment); 3 s at most */
static int wait_tid_free(pid_t tid)
{
	char rel[32];

	snprintf(rel, sizeof(rel), "%d", tid);
	for (int i = 0; i < 300; i++) {
		int fd = proc_open(rel, O_PATH | O_CLOEXEC);

		if (fd < 0)
			return 0;
		close(fd);
		usleep(10000);
	}
	pr_err("thread %d: its tid is held by another task (for 3 s): it cannot be made again",
	       tid);
	return -EBUSY;
}

int tid_prepare(pid_t tid, struct tid_hold *h)
{
	char buf[512], *list = NULL;
	ssize_t n;
	int fd, ret;

	memset(h, 0, sizeof(*h));
	h->fd = -1;
	h->held = true;
	fd = proc_open("sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		ret = pr_errno("thread %d: cannot lock ns_last_pid", tid);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	h->fd = fd;
	n = pread(h->fd, buf, sizeof(buf) - 1, 0);
	h->last = n > 0 ? (buf[n] = 0, strtol(buf, NULL, 10)) : 0;
	ret = wait_tid_free(tid);
	if (ret) {
		tid_done(h);
		return ret;
	}
	fd = proc_open("sys/kernel/pid_reserve", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		list = xzalloc(512);
		n = list ? read(fd, list, 511) : -1;
		close(fd);
		if (n > 0 && without(list, tid, buf, sizeof(buf))) {
			list[strcspn(list, "\n")] = 0;
			ret = write_proc("sys/kernel/pid_reserve", buf[0] ? buf : "\n");
			if (ret) {
				pr_err("thread %d: cannot take it out of the pid reservation (%s): "
				       "%s",
				       tid, list, strerror(-ret));
				free(list);
				tid_done(h);
				return ret;
			}
			h->reserve = list;
			list = NULL;
		}
		free(list);
	}
	snprintf(buf, sizeof(buf), "%d", tid - 1);
	if (write(h->fd, buf, strlen(buf)) < 0) {
		ret = pr_errno("thread %d: cannot set ns_last_pid", tid);
		tid_done(h);
		return ret;
	}
	return 0;
}

void tid_done(struct tid_hold *h)
{
	if (h->fd >= 0 && h->last > 0) {
		char buf[32];
		ssize_t n = pread(h->fd, buf, sizeof(buf) - 1, 0);

		/* (a write sets it; others forking meanwhile moved it up: kept) */
		if (n > 0 && (buf[n] = 0, strtol(buf, NULL, 10)) < h->last) {
			snprintf(buf, sizeof(buf), "%ld", h->last);
			if (pwrite(h->fd, buf, strlen(buf), 0) < 0)
				pr_perror("cannot set ns_last_pid back to %ld", h->last);
		}
	}
	if (h->reserve) {
		int ret = write_proc("sys/kernel/pid_reserve", h->reserve[0] ? h->reserve : "\n");

		if (ret)
			pr_err("cannot put the pid reservation back (%s): %s", h->reserve,
			       strerror(-ret));
		free(h->reserve);
		h->reserve = NULL;
	}
	if (h->fd >= 0)
		close(h->fd); /* and its lock */
	h->fd = -1;
	h->held = false;
}

/* ------------------------------------ host pids asked of kupdate (lp_*) */

#define LP_WAIT_NS (10LL * 1000000000LL)

static void lp_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* until *w is no longer val: 0, or -ETIMEDOUT after 10 s, -ECANCELED once
 * the restore failed */
static int lp_wait(struct shared *sh, _Atomic uint32_t *w, uint32_t val)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + LP_WAIT_NS;

	/* spinning first, 20 ms at most: the clone must follow kupdate's
	 * setting of ns_last_pid closely, before something else forks */
	lp_spin(w, val, 20 * 1000000LL);
	while (atomic_load(w) == val) {
		if (atomic_load(&sh->failed))
			return -ECANCELED;
		if (now_ns(CLOCK_MONOTONIC) > deadline)
			return -ETIMEDOUT;
		syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
	}
	return 0;
}

bool lp_spin(_Atomic uint32_t *w, uint32_t val, int64_t ns)
{
	int64_t until = now_ns(CLOCK_MONOTONIC) + ns;

	while (atomic_load(w) == val) {
		for (int k = 0; k < 256 && atomic_load(w) == val; k++)
			__builtin_ia32_pause();
		if (now_ns(CLOCK_MONOTONIC) > until)
			return atomic_load(w) != val;
	}
	return true;
}

static void lp_unlock(struct shared *sh)
{
	atomic_store(&sh->lp_lock, 0);
	lp_wake(&sh->lp_lock);
}

int lp_ask(struct shared *sh, pid_t pid)
{
	uint32_t st;
	int ret;

	for (;;) {
		uint32_t free_ = 0;

		if (atomic_compare_exchange_strong(&sh->lp_lock, &free_, 1))
			break;
		ret = lp_wait(sh, &sh->lp_lock, 1);
		if (ret) {
			pr_err("pid %d: kupdate gave no host pid: another process held the "
			       "request for 10 s",
			       pid);
			return ret;
		}
	}
	sh->lp_pid = pid;
	atomic_store(&sh->lp_state, LP_ASKED);
	lp_wake(&sh->count); /* kupdate waits there (lp_serve) */
	ret = lp_wait(sh, &sh->lp_state, LP_ASKED);
	st = atomic_load(&sh->lp_state);
	if (!ret && st == LP_SET)
		return 0;
	if (!ret)
		ret = sh->lp_err ? sh->lp_err : -EIO;
	else
		pr_err("pid %d: kupdate did not set ns_last_pid for it in 10 s", pid);
	atomic_store(&sh->lp_state, LP_IDLE);
	lp_unlock(sh);
	return ret;
}

void lp_cloned(struct shared *sh)
{
	atomic_store(&sh->lp_state, LP_CLONED);
	lp_wake(&sh->count);
	/* ns_last_pid back and its lock let go before the next one asks */
	if (lp_wait(sh, &sh->lp_state, LP_CLONED))
		pr_err("pid %d: kupdate did not let ns_last_pid go in 10 s", sh->lp_pid);
	lp_unlock(sh);
}

void lp_serve(struct rctx *c)
{
	struct shared *sh = c->sh;

	switch (atomic_load(&sh->lp_state)) {
	case LP_ASKED: {
		int ret = c->lp_hold.held ? -EPROTO : tid_prepare(sh->lp_pid, &c->lp_hold);

		sh->lp_err = ret;
		atomic_store(&sh->lp_state, ret ? LP_FAILED : LP_SET);
		lp_wake(&sh->lp_state);
		break;
	}
	case LP_CLONED:
		tid_done(&c->lp_hold);
		atomic_store(&sh->lp_state, LP_IDLE);
		lp_wake(&sh->lp_state);
		break;
	default:
		break;
	}
}

void lp_abandon(struct rctx *c)
{
	if (c->lp_hold.held)
		tid_done(&c->lp_hold);
}

/* the thread of rp that is none of those made before tid_last (the one
 * just made with another tid), or 0 */
static pid_t new_tid(const struct rproc *rp)
{
	pid_t *tids = NULL, found = 0;
	int n = list_tasks(rp->pid, &tids);

	for (int i = 0; i < n && !found; i++) {
		bool known = false;

		for (int k = 0; !known && k < rp->tid_last_idx; k++)
			known = rp->pe->tids[k] == tids[i];
		if (!known)
			found = tids[i];
	}
	free(tids);
	return found;
}

/* A thread of a process in its own user namespace is made with its tid
 * through ns_last_pid (lastpid.c): the blob stops before the clone and
 * after it.  1 if the stop was one of those (the thread let go on), 0 if
 * not, or -errno. */
int lp_tid_trap(struct rproc *rp, pid_t tid, const struct user_regs_struct *r)
{
	struct user_regs_struct set;
	int ret;

	if (r->rip == rp->blob_start + RST_TID_PREP_OFFSET + 1) {
		if (rp->tid_last == (pid_t)r->rdi)
			pr_info("pid %d: thread %d lost its tid to a process forked meanwhile; "
				"made again",
				rp->pid, (pid_t)r->rdi);
		rp->tid_last = (pid_t)r->rdi;
		for (size_t k = 0; k < rp->pe->n_tids; k++)
			if (rp->pe->tids[k] == rp->tid_last)
				rp->tid_last_idx = (int)k;
		ret = rp->tid_hold.held ? -EPROTO : tid_prepare(rp->tid_last, &rp->tid_hold);
		if (ret)
			return ret;
		ptrace(PTRACE_CONT, tid, 0, 0);
		return 1;
	}
	if (r->rip == rp->blob_start + RST_TID_DONE_OFFSET + 1) {
		/* made, with its tid here (the blob's %rax says) */
		bool ok = (long)r->rdi > 0 && !syscall(SYS_tgkill, rp->pid, rp->tid_last, 0);

		/* another tid (a sibling's, maybe): that thread exits, unless it
		 * is gone already (reaped: lp_stray_event); in a pid namespace
		 * below, clone gave its tid there: found among the process's */
		if (!ok && (pid_t)r->rdi > 0) {
			pid_t stray = pidns_depth(rp) ? new_tid(rp) : (pid_t)r->rdi;

			if (stray > 0 && !syscall(SYS_tgkill, rp->pid, stray, 0))
				rp->tid_stray = stray;
		}
		tid_done(&rp->tid_hold);
		set = *r;
		set.rax = ok;
		if (ptrace(PTRACE_SETREGS, tid, 0, &set))
			return pr_errno("pid %d: cannot tell the restorer whether thread %d has "
					"its tid",
					rp->pid, rp->tid_last);
		ptrace(PTRACE_CONT, tid, 0, 0);
		return 1;
	}
	return 0;
}

/* An event of the thread that missed its tid (a sibling's, maybe) on its
 * way out, met before the clone's end (the tid lock still held: a thread
 * not made yet) or after it: let go on, forgotten once it is gone. */
bool lp_stray_event(struct rproc *rp, pid_t tid, int ti, int st)
{
	if (tid == rp->pid ||
	    (tid != rp->tid_stray && !(rp->tid_hold.held && ti > rp->tid_last_idx)))
		return false;
	rp->tid_stray = tid;
	if (WIFEXITED(st) || WIFSIGNALED(st))
		rp->tid_stray = 0;
	else if (WIFSTOPPED(st))
		ptrace(PTRACE_CONT, tid, 0, 0);
	return true;
}
