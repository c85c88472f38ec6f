/* Restore of one process tree.
 *
 * 1. Load and validate every image before anything is created
 *    (restore-images.c).
 * 2. Create the tree: each process is born with its saved pid (clone3 with
 *    set_tid, ns_last_pid as a fallback), takes its session, creates its
 *    children, then joins its process group once every group leader
 *    exists; zombies exit with their saved status.
 * 3. Each live process reopens its files, maps the restorer blob where the
 *    saved layout has a hole (restore-blob.c), and waits; kupdate seizes
 *    them all.
 * 4. The processes jump into the blob, which rebuilds the address space,
 *    creates the threads with their tids and parks each thread on int3
 *    (kupdate follows them: restore-follow.c).
 * 5. kupdate sets every thread's registers, FPU state and signal mask,
 *    unmaps the blob with an injected munmap, and lets the tree go
 *    (restore-follow.c).
 *
 * The processes of the tree and kupdate synchronise through a shared page
 * (a stage number and a counter, with futexes).  Any failure kills what was
 * created (PTRACE_O_EXITKILL covers kupdate dying itself). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "fault.h"
#include "ghost.h"
#include "log.h"
#include "mntns.h"
#include "namespaces.h"
#include "pidns.h"
#include "proc.h"
#include "remote.h"
#include "tcp.h"
#include "timens.h"
#include "util.h"

#include "restore-ctx.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
#endif

/* the pid namespace depth (pidns.c) of the process running this code: 0
 * in kupdate, the restored process's own in task_main() and what it forks */
static int self_depth;
/* in a restoring process: kupdate's pidfd (rctx.tool_pidfd, which
 * rst_prepare() moves), or -1 */
static int tool_fd = -1;

static int find_helpers(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i], *root = rp;
		pid_t g = rp->pe->pgid;
		bool known;
		struct helper *nh;

		while (root->parent)
			root = root->parent;
		/* a root's own group, and its tree's, come from outside */
		known = !rp->parent || g == root->pe->pgid;
		for (size_t k = 0; k < c->nr && !known; k++)
			known = c->procs[k].pid == g;
		for (size_t k = 0; k < c->nr_helpers && !known; k++)
			known = c->helpers[k].pid == g;
		if (known)
			continue;
		if (pidns_depth(rp)) {
			/* pidns.c refused it at dump */
			pr_err("pid %d: its process group %d has no leader in its pid namespace",
			       rp->pid, g);
			return -EINVAL;
		}
		nh = xrealloc_array(c->helpers, c->nr_helpers + 1, sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		c->helpers = nh;
		nh[c->nr_helpers].pid = g;
		nh[c->nr_helpers].parent = rp->parent;
		c->nr_helpers++;
		pr_debug("group %d is rebuilt with a helper under pid %d", g, rp->parent->pid);
	}
	return 0;
}

/* Roots in another process's session: forked from that session, by its
 * leader or by a helper that recreates it. */
static int find_launchers(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		struct session_helper *ns;
		bool known = false;

		if (rp->parent || rp->pe->sid == rp->pid)
			continue;
		for (size_t k = 0; k < c->nr; k++)
			if (c->procs[k].pid == rp->pe->sid)
				rp->launcher = &c->procs[k];
		if (rp->launcher || !rp->pe->new_session)
			continue;
		for (size_t k = 0; k < c->nr_sessions && !known; k++)
			known = c->sessions[k].sid == rp->pe->sid;
		if (known)
			continue;
		ns = xrealloc_array(c->sessions, c->nr_sessions + 1, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		c->sessions = ns;
		ns[c->nr_sessions++].sid = rp->pe->sid;
		pr_debug("session %d is rebuilt with a helper", rp->pe->sid);
	}
	/* a root launched from a tree that is itself launched from the first
	 * root's tree would never be created */
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		size_t steps = 0;

		while (rp && steps++ <= c->nr) {
			while (rp->parent)
				rp = rp->parent;
			rp = rp->launcher;
		}
		if (rp) {
			pr_err("image pstree.img is damaged: the sessions of its roots form a "
			       "cycle");
			return -EINVAL;
		}
	}
	return 0;
}

static int spawn(struct rctx *c, struct rproc *rp, bool clone_parent);

/* Fork, from this process's session, the roots it launches: a short-lived
 * child creates each, then exits, so that the root is adopted by the
 * nearest subreaper (kupdate during the restore). */
static int launch_roots(struct rctx *c, struct rproc *launcher, pid_t sid)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		pid_t t;
		int st;

		if (rp->parent)
			continue;
		if (launcher ? rp->launcher != launcher
			     : !(rp->pe->new_session && rp->pe->sid == sid && !rp->launcher))
			continue;
		t = fork();
		if (t < 0) {
			pr_perror("pid %d: cannot fork to create root %d in its session", getpid(),
				  rp->pid);
			return -errno;
		}
		if (t == 0)
			_exit(spawn(c, rp, false) ? 1 : 0);
		while (waitpid(t, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			return -ECHILD;
	}
	return 0;
}

/* A helper with the session's id: setsid, launch its roots, exit. */
static int spawn_session_helper(struct rctx *c, pid_t sid)
{
	struct clone_args_k ca;
	long r;
	int st;

	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uintptr_t)&sid;
	ca.set_tid_size = 1;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0) {
		if (setsid() < 0) {
			pr_perror("helper %d: cannot create its session", getpid());
			_exit(1);
		}
		_exit(launch_roots(c, NULL, sid) ? 1 : 0);
	}
	if (r != sid) {
		pr_err("pid %d: cannot be created to rebuild its session: %s", sid,
		       r < 0 ? strerror(errno) : "wrong pid");
		if (r > 0)
			kill(r, SIGKILL);
		return -EEXIST;
	}
	while (waitpid(sid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

/* Every saved pid and tid must be free now. */
static int check_ids_free(struct rctx *c)
{
	/* test only: as if a task took the ids after this check (the
	 * creation then finds them taken, and must kill nothing of its) */
	if (cr_fault("ids-late"))
		return 0;
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; k < c->pstree[i]->n_tids; k++) {
			int id = c->pstree[i]->tids[k];
			struct proc_stat st;

			char path[32];

			snprintf(path, sizeof(path), "/proc/%d", id);
			if (!access(path, F_OK)) {
				pr_err("pid %d is in use (by \"%s\"); the tree cannot be restored "
				       "with "
				       "its pids until it is free",
				       id, parse_stat(id, 0, &st) ? "?" : st.comm);
				return -EBUSY;
			}
		}
	for (size_t i = 0; i < c->nr_helpers; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%d", c->helpers[i].pid);
		if (!access(path, F_OK)) {
			pr_err("pid %d is in use; it is needed to rebuild process group %d",
			       c->helpers[i].pid, c->helpers[i].pid);
			return -EBUSY;
		}
	}
	for (size_t i = 0; i < c->nr_sessions; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%d", c->sessions[i].sid);
		if (!access(path, F_OK)) {
			pr_err("pid %d is in use; it is needed to rebuild session %d",
			       c->sessions[i].sid, c->sessions[i].sid);
			return -EBUSY;
		}
	}
	return 0;
}

static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int max = 2;

	while (d && (de = readdir(d)))
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			max = MAX(max, atoi(de->d_name));
	if (d)
		closedir(d);
	return max;
}

/* ----------------------------------------------------- synchronisation */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static void arrive(struct shared *sh)
{
	atomic_fetch_add(&sh->count, 1);
	futex(&sh->count, FUTEX_WAKE, INT32_MAX, NULL);
}

/* kupdate is gone: a process in a pid namespace of the tree's own does
 * not see it there, and looks through /proc (kupdate's namespace's) */
static bool tool_gone(struct shared *sh)
{
	char path[32];

	/* readable once kupdate ended, whatever namespaces the process is in
	 * (a container's /proc does not show kupdate) */
	if (tool_fd >= 0) {
		struct pollfd p = { tool_fd, POLLIN, 0 };

		return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLNVAL));
	}
	if (!self_depth)
		return kill(sh->tool, 0) && errno == ESRCH;
	snprintf(path, sizeof(path), "/proc/%d", sh->tool);
	return access(path, F_OK) && errno == ENOENT;
}

/* In a restoring process: wait until kupdate opens the stage; leave if
 * kupdate is gone or gave up. */
static void wait_stage(struct shared *sh, uint32_t stage)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	for (;;) {
		uint32_t v = atomic_load(&sh->stage);

		if (v >= stage)
			return;
		if (atomic_load(&sh->failed) || tool_gone(sh))
			_exit(1);
		futex(&sh->stage, FUTEX_WAIT, v, &ts);
	}
}

/* In a process of a shared fd table: wait until prev has prepared (its
 * fds are in place, above the table's, and it opens no more). */
static void wait_prepared(struct shared *sh, int prev)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	while (!atomic_load(&sh->procs[prev].prepared)) {
		if (atomic_load(&sh->failed) || tool_gone(sh))
			_exit(1);
		futex(&sh->procs[prev].prepared, FUTEX_WAIT, 0, &ts);
	}
}

static void __attribute__((noreturn)) task_fail(struct shared *sh)
{
	atomic_store(&sh->failed, 1);
	futex(&sh->count, FUTEX_WAKE, INT32_MAX, NULL);
	_exit(1);
}

/* ------------------------------------------------------ tree creation */

static void __attribute__((noreturn)) task_main(struct rctx *c, struct rproc *rp);

static pid_t spawn_ns_last_pid(pid_t pid, unsigned long flags)
{
	_cleanup_close_ int fd = proc_open("sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
	char buf[16];
	long r;

	if (fd < 0 || flock(fd, LOCK_EX))
		return -errno;
	snprintf(buf, sizeof(buf), "%d", pid - 1);
	if (write(fd, buf, strlen(buf)) < 0)
		return -errno;
	r = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
	if (r < 0)
		return -errno;
	if (r > 0 && r != pid) {
		kill(r, SIGKILL);
		return -EEXIST;
	}
	return r;
}

/* rp, by a process born in the tree's user namespace (userns.c), which
 * may give set_tid the ids of the pid namespaces that user namespace owns
 * but not kupdate's: that one through ns_last_pid, set by kupdate
 * (lp_ask).  The child tells its pid in kupdate's namespace and waits for
 * the verdict: one that got another (something forked in between) ends
 * before it does anything, and the clone is tried again. */
static long clone_in_userns(struct rctx *c, struct rproc *rp, struct clone_args_k *ca, pid_t want)
{
	int sk[2];
	long r = -1;
	int ret = 0;

	if (ca->set_tid_size)
		ca->set_tid_size--; /* kupdate's level is the last */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk))
		return -1;
	for (int k = 0; k < 50; k++) {
		pid_t host = 0;
		char ok;

		ret = lp_ask(c->sh, rp->pid);
		if (ret)
			break;
		r = syscall(SYS_clone3, ca, sizeof(*ca));
		if (r == 0) {
			host = proc_self_pid();
			close(sk[0]);
			if (write(sk[1], &host, sizeof(host)) != sizeof(host) ||
			    read(sk[1], &ok, 1) != 1 || ok != 'y')
				_exit(0);
			close(sk[1]);
			return 0;
		}
		ret = r < 0 ? -errno : 0;
		lp_cloned(c->sh);
		if (ret)
			break;
		if (read(sk[0], &host, sizeof(host)) != sizeof(host)) {
			ret = -EPIPE;
			break;
		}
		ok = host == rp->pid ? 'y' : 'n';
		if (write(sk[0], &ok, 1) != 1) {
			ret = -errno;
			break;
		}
		if (ok == 'y')
			break;
		while (waitpid(r, NULL, __WALL) < 0 && errno == EINTR)
			;
		r = -1;
		ret = -EEXIST;
	}
	close(sk[0]);
	close(sk[1]);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return r == want ? r : (errno = EEXIST, -1);
}

/* The control group pid is to be born into (cr_restore_opts.cgroups), as
 * an open directory; -1: its parent's.  A root recorded in a group of its
 * own below the tree's (cgroups.c: tree_base) goes there, below the place
 * the caller gives. */
static int cgroup_of(const struct rctx *c, const struct rproc *rp)
{
	if (rp->cg_fd >= 0 && rp->pe->cgroup && rp->pe->cgroup[0])
		return rp->cg_fd;
	for (size_t i = 0; i < c->opts->nr_cgroups; i++)
		if (c->opts->cgroups[i].pid == rp->pid)
			return c->opts->cgroups[i].fd;
	return rp->cg_fd; /* below the root's, recorded (cgroups.c) */
}

/* Create rp with its saved pid (in every pid namespace of its line); the
 * child runs task_main. */
static int spawn(struct rctx *c, struct rproc *rp, bool clone_parent)
{
	struct clone_args_k ca;
	pid_t ids[PIDNS_DEPTH_MAX + 1], want = pidns_id_at(rp, 0, self_depth);
	int cg;
	long r;

	/* the user namespace it made and those it owns (userns.c) */
	if (userns_prepare(c, rp))
		return -EPERM;
	memset(&ca, 0, sizeof(ca));
	ca.flags = clone_parent ? CLONE_PARENT : 0;
	/* shares cwd, root and umask with its parent (CLONE_FS): files.c
	 * refused any other sharing at dump, and a root other than "/", as
	 * both processes restore the same ones in rst_prepare() */
	if (rp->pe->clone_fs)
		ca.flags |= CLONE_FS;
	/* shares our fd table (CLONE_FILES): we, or the ancestor whose table
	 * we share, restore it (rp->fdt); rp only waits its turn to prepare */
	if (rp->pe->clone_files)
		ca.flags |= CLONE_FILES;
	/* with CLONE_PARENT the child takes our exit signal; clone3 wants 0 */
	ca.exit_signal = clone_parent ? 0 : SIGCHLD;
	/* a container's init: pid 1 of a new pid namespace */
	if (pidns_makes(rp))
		ca.flags |= CLONE_NEWPID;
	ca.set_tid = (uintptr_t)ids;
	ca.set_tid_size = pidns_set_tid(rp, 0, ids);
	cg = cgroup_of(c, rp);
	if (cg >= 0) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cg;
	}
	if (userns_init_born_inside(rp))
		r = userns_clone_init(c, rp, &ca, want, !self_depth && !c->ns_in_userns,
				      mntns_build);
	else if (c->ns_in_userns)
		r = clone_in_userns(c, rp, &ca, want);
	else
		r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r < 0 && cg < 0 && ca.set_tid_size == 1 && (errno == ENOSYS || errno == E2BIG))
		r = spawn_ns_last_pid(rp->pid, ca.flags);
	if (r == 0)
		task_main(c, rp);
	{
		int err = errno; /* for the messages below */

		userns_spawn_end(rp);
		errno = err;
	}
	if (r > 0)
		atomic_store(&c->sh->procs[rp - c->procs].created, 1);
	if (r < 0) {
		int err = errno;

		if (err == EEXIST)
			pr_err("pid %d: cannot be created with its pid: the pid is taken", rp->pid);
		else if (cg >= 0)
			pr_err("pid %d: cannot be created with its pid in its control group: %s",
			       rp->pid, strerror(err));
		else
			pr_err("pid %d: cannot be created with its pid: %s", rp->pid,
			       strerror(err));
		return -err;
	}
	if (r != want) {
		pr_err("pid %d: was created as pid %ld", rp->pid, r);
		kill(r, SIGKILL);
		return -EEXIST;
	}
	return 0;
}

static void __attribute__((noreturn)) helper_main(struct rctx *c)
{
	if (setpgid(0, 0)) {
		pr_perror("helper %d: cannot create its process group", getpid());
		task_fail(c->sh);
	}
	arrive(c->sh);
	wait_stage(c->sh, ST_PGID);
	arrive(c->sh);
	wait_stage(c->sh, ST_PREPARE);
	_exit(0);
}

static int spawn_helper(struct rctx *c, size_t i)
{
	struct clone_args_k ca;
	pid_t pid = c->helpers[i].pid;
	long r;

	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uintptr_t)&pid;
	ca.set_tid_size = 1;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		helper_main(c);
	if (r > 0)
		atomic_store(&c->sh->procs[c->nr + i].created, 1);
	if (r != pid) {
		pr_err("pid %d: cannot be created to rebuild its process group: %s", pid,
		       r < 0 ? strerror(errno) : "wrong pid");
		return -EEXIST;
	}
	return 0;
}

static void __attribute__((noreturn)) become_zombie(struct rproc *rp)
{
	int st = rp->pe->has_exit_code ? rp->pe->exit_code : 0;
	struct rlimit rl = { 0, 0 };

	if (WIFSIGNALED(st)) {
		sigset_t s;

		setrlimit(RLIMIT_CORE, &rl);
		prctl(PR_SET_DUMPABLE, 0);
		signal(WTERMSIG(st), SIG_DFL);
		sigemptyset(&s);
		sigaddset(&s, WTERMSIG(st));
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		kill(getpid(), WTERMSIG(st));
	}
	_exit(WEXITSTATUS(st));
}

/* glibc registers an rseq area for every thread; ours is about to be
 * unmapped, and the kernel would fault on it at the next return to user
 * mode.  The restorer registers the saved process's areas later. */
static int unregister_rseq(void)
{
#ifdef RSEQ_SIG
	unsigned sizes[2] = { __rseq_size, 32 };
	void *area = (char *)__builtin_thread_pointer() + __rseq_offset;

	if (!__rseq_size)
		return 0;
	for (int i = 0; i < 2; i++)
		if (!syscall(SYS_rseq, area, sizes[i], RSEQ_FLAG_UNREGISTER, RSEQ_SIG))
			return 0;
	if (errno != EINVAL)
		return -errno;
	return -EINVAL;
#else
	return 0;
#endif
}

static void __attribute__((noreturn)) jump(uint64_t entry, uint64_t args, uint64_t stack)
{
	__asm__ volatile("mov %0, %%rsp\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "jmp *%1\n\t" ::"r"(stack),
			 "r"(entry), "D"(args)
			 : "memory");
	__builtin_unreachable();
}

static void __attribute__((noreturn)) task_main(struct rctx *c, struct rproc *rp)
{
	struct shared *sh = c->sh;
	int idx = rp - c->procs;
	uint64_t entry = 0, args = 0, stack = 0;
	sigset_t all;

	/* ours, even if the parent is killed before it says so */
	atomic_store(&sh->procs[idx].created, 1);
	self_depth = pidns_depth(rp);
	tool_fd = c->tool_pidfd;
	/* a container's init makes its namespaces again, for its descendants */
	if (ns_restore_made(c, rp) || mntns_restore(c, rp) || userns_enter_later(c, rp))
		task_fail(sh);
	/* SIGCHLD stays deliverable (and, at SIG_DFL, is discarded) so that
	 * zombie children leave no pending signal behind */
	sigfillset(&all);
	sigdelset(&all, SIGCHLD);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	if (rp->pe->sid == rp->pid) {
		if (setsid() < 0) {
			pr_perror("pid %d: cannot create its session", rp->pid);
			task_fail(sh);
		}
	} else if (rp->pe->pgid == rp->pid && setpgid(0, 0)) {
		pr_perror("pid %d: cannot create its process group", rp->pid);
		task_fail(sh);
	}
	/* what this process and its descendants share, before they fork: its
	 * objects, and the pages its children share copy-on-write with it */
	if (files_create_owned(&c->files, rp) ||
	    mem_premap(c->dirfd, rp->pid, &rp->mm, rp->parent ? &rp->parent->mm : NULL,
		       !c->opts->no_page_verify))
		task_fail(sh);
	for (int i = 0; i < rp->nr_children; i++)
		if (spawn(c, rp->children[i], false))
			task_fail(sh);
	for (size_t i = 0; i < c->nr_helpers; i++)
		if (c->helpers[i].parent == rp && spawn_helper(c, i))
			task_fail(sh);
	if (launch_roots(c, rp, 0) || pidns_children_setns(rp))
		task_fail(sh);
	arrive(sh);

	wait_stage(sh, ST_PGID);
	/* as its own pid namespace sees the group: 0 for one led from outside */
	if (pidns_view(c, rp, rp->pe->pgid) != getpgid(0) && rp->pe->pgid != rp->pid) {
		if (setpgid(0, pidns_view(c, rp, rp->pe->pgid))) {
			if (!rp->parent)
				pr_warn("pid %d: its process group %d is outside the tree; it "
					"stays in "
					"group %d",
					rp->pid, rp->pe->pgid, getpgid(0));
			else {
				pr_perror("pid %d: cannot join process group %d", rp->pid,
					  rp->pe->pgid);
				task_fail(sh);
			}
		}
	}
	arrive(sh);

	wait_stage(sh, ST_PREPARE);
	/* helpers have served once every group is joined */
	for (size_t i = 0; i < c->nr_helpers; i++)
		if (c->helpers[i].parent == rp)
			while (waitpid(c->helpers[i].pid, NULL, 0) < 0 && errno == EINTR)
				;
	if (rp->zombie)
		become_zombie(rp);
	if (rp->fdt_prev)
		wait_prepared(sh, rp->fdt_prev - c->procs);
	if (rst_prepare(c, rp, idx, &entry, &args, &stack))
		task_fail(sh);
	tool_fd = c->tool_pidfd; /* moved above the restored fds */
	atomic_store(&sh->procs[idx].prepared, 1);
	futex(&sh->procs[idx].prepared, FUTEX_WAKE, INT32_MAX, NULL);
	arrive(sh);

	wait_stage(sh, ST_GO);
	if (unregister_rseq()) {
		pr_err("pid %d: cannot unregister the restoring process's rseq area", rp->pid);
		task_fail(sh);
	}
	jump(entry, args, stack);
}

/* --------------------------------------------------------- kupdate side */

/* Wait until n processes arrived.  Once the tree exists (alive_check), a
 * process that dies without a word is noticed too. */
static int wait_count(struct rctx *c, uint32_t n, const char *what, bool alive_check)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + 60LL * 1000000000LL;

	for (;;) {
		uint32_t v = atomic_load(&c->sh->count);

		if (atomic_load(&c->sh->failed))
			return -ECANCELED; /* the process said why */
		if (v >= n)
			return 0;
		/* a process born in the tree's user namespace asks (userns.c) */
		lp_serve(c);
		if (now_ns(CLOCK_MONOTONIC) > deadline) {
			pr_err("restore timed out while %s (%u of %u processes ready)", what, v, n);
			return -ETIMEDOUT;
		}
		for (size_t i = 0; alive_check && i < c->nr; i++) {
			struct proc_stat st;
			struct rproc *rp = &c->procs[i];

			if (rp->zombie)
				continue;
			if (parse_stat(rp->pid, 0, &st) || st.state == 'Z') {
				pr_err("pid %d died while %s", rp->pid, what);
				return -ESRCH;
			}
		}
		futex(&c->sh->count, FUTEX_WAIT, v, &ts);
	}
}

/* Zombies must be dead before the tree is traced: a SIGCHLD to a traced
 * parent would be queued instead of discarded. */
static int wait_zombies(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct proc_stat st;
		int tries;

		if (!c->procs[i].zombie)
			continue;
		for (tries = 0; tries < 5000; tries++) {
			if (!parse_stat(c->procs[i].pid, 0, &st) && st.state == 'Z')
				break;
			usleep(1000);
		}
		if (tries == 5000) {
			pr_err("pid %d: did not become a zombie again", c->procs[i].pid);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static void open_stage(struct rctx *c, uint32_t stage)
{
	atomic_store(&c->sh->count, 0);
	atomic_store(&c->sh->stage, stage);
	futex(&c->sh->stage, FUTEX_WAKE, INT32_MAX, NULL);
}

/* Nothing of a failed restore survives: kill what was created and wait
 * until it is gone (or a zombie for its parent to reap). */
static bool created(const struct rctx *c, size_t i)
{
	return c->sh && atomic_load(&c->sh->procs[i].created);
}

static void kill_all(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++)
		if (created(c, i))
			kill(c->procs[i].pid, SIGKILL);
	for (size_t i = 0; i < c->nr_helpers; i++)
		if (created(c, c->nr + i))
			kill(c->helpers[i].pid, SIGKILL);
	/* a tracee held in its exit stop only moves on when we let it go */
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; c->procs[i].seized && k < c->procs[i].pe->n_tids; k++)
			ptrace(PTRACE_DETACH, c->procs[i].pe->tids[k], 0, 0);
	for (size_t i = 0; i < c->nr; i++) {
		for (int tries = 0; created(c, i) && tries < 5000; tries++) {
			struct proc_stat st;
			int ws;
			pid_t w;

			/* our tracees report their death to us first; one that
			 * reached its exit stop after the detach above waits
			 * there for us to let it go */
			while ((w = waitpid(-1, &ws, __WALL | WNOHANG)) > 0)
				if (WIFSTOPPED(ws))
					ptrace(PTRACE_DETACH, w, 0, 0);
			if (parse_stat(c->procs[i].pid, 0, &st) || st.state == 'Z' ||
			    st.state == 'X')
				break;
			usleep(1000);
		}
	}
}

/* The processes of a shared fd table keep the fds that serve their
 * restore (helper fds: kupdate's, the shared memory objects, the mapped
 * files, the page images) in it until every one of them is done: room for
 * all of them, above the transport fds. */
static void raise_nofile_for_shared(const struct rctx *c)
{
	size_t most = 0;
	struct rlimit rl;

	for (size_t i = 0; i < c->nr; i++) {
		const struct rproc *o = &c->procs[i];
		size_t n = 0;

		if (!o->fdt_shared)
			continue;
		for (size_t k = i; k < c->nr; k++)
			if (&c->procs[k] == o || c->procs[k].fdt == o)
				n += c->procs[k].mm.nr_vmas + c->shm.n + c->files.nr_ghosts + 16;
		most = MAX(most, n);
	}
	if (most && !getrlimit(RLIMIT_NOFILE, &rl) &&
	    rl.rlim_cur < (rlim_t)c->files.tend + most + 64 && rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)c->files.tend + most + 1024);
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int write_pidfile(const char *path, pid_t pid)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%d\n", pid);

	if (fd < 0 || write_all(fd, buf, n)) {
		pr_perror("cannot write pid file %s", path);
		return -EIO;
	}
	return 0;
}

static bool has_launched_roots(const struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++)
		if (c->procs[i].launcher)
			return true;
	return false;
}

/* The listeners a service manager passed (cr_restore_opts.listen_fds),
 * copied above every fd the tree's processes have: a restoring process
 * puts its descriptors in place before it makes the next, over whatever
 * kupdate had at those numbers */
static int take_listen_fds(struct rctx *c)
{
	const struct cr_restore_opts *o = c->opts;
	int top = 2;
	int *own;

	if (!o->nr_listen_fds)
		return 0;
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; k < c->procs[i].nr_fds; k++)
			top = MAX(top, c->procs[i].fds[k]->fd);
	own = calloc(o->nr_listen_fds, sizeof(int));
	c->listeners.used = calloc(o->nr_listen_fds, sizeof(bool));
	if (!own || !c->listeners.used) {
		free(own);
		return -ENOMEM;
	}
	c->listeners.fds = own;
	for (size_t i = 0; i < o->nr_listen_fds; i++) {
		own[i] = fcntl(o->listen_fds[i], F_DUPFD_CLOEXEC, top + 1);
		if (own[i] < 0)
			return pr_errno("cannot keep the listening socket passed as fd %d",
					o->listen_fds[i]);
		c->listeners.n = i + 1;
	}
	c->files.listeners = &c->listeners;
	return 0;
}

static void drop_listen_fds(struct rctx *c)
{
	for (size_t i = 0; i < c->listeners.n; i++)
		close(c->listeners.fds[i]);
	free((int *)c->listeners.fds);
	free(c->listeners.used);
	memset(&c->listeners, 0, sizeof(c->listeners));
}

/* The ends of the tree's links to other trees (cr_restore_opts.links),
 * copied above every fd of the tree as the listeners are; every linked
 * socket of the images must have its end, or nothing is made. */
static int take_links(struct rctx *c)
{
	const struct cr_restore_opts *o = c->opts;
	int top = 2;

	for (size_t i = 0; i < c->files.nr_files; i++) {
		const FileEntry *e = c->files.files[i];
		bool given = false;

		if (e->kind != FILE_KIND__FILE_UNIX || !e->usk->linked)
			continue;
		for (size_t k = 0; k < o->nr_links && !given; k++)
			given = o->links[k].ino == e->usk->ino && o->links[k].fd >= 0;
		if (!given) {
			pr_err("unix socket %u is connected to socket %u of another tree dumped "
			       "with "
			       "it, and its end of that connection was not given: restore the two "
			       "trees together",
			       e->usk->ino, e->usk->peer);
			return -ENOENT;
		}
	}
	if (!o->nr_links)
		return 0;
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; k < c->procs[i].nr_fds; k++)
			top = MAX(top, c->procs[i].fds[k]->fd);
	c->links = calloc(o->nr_links, sizeof(*c->links));
	if (!c->links)
		return -ENOMEM;
	for (size_t i = 0; i < o->nr_links; i++) {
		c->links[i] = o->links[i];
		c->links[i].fd = fcntl(o->links[i].fd, F_DUPFD_CLOEXEC, top + 1);
		if (c->links[i].fd < 0)
			return pr_errno("cannot keep the end of link %u passed as fd %d",
					o->links[i].ino, o->links[i].fd);
		c->nr_links = i + 1;
	}
	c->files.links = c->links;
	c->files.nr_links = c->nr_links;
	return 0;
}

static void drop_links(struct rctx *c)
{
	for (size_t i = 0; i < c->nr_links; i++)
		close(c->links[i].fd);
	free(c->links);
	c->links = NULL;
	c->nr_links = 0;
}

/* Before anything is created: the images loaded and checked, the shared
 * memory objects, deleted files and removed directories made, the files
 * planned. */
static int prepare_tree(struct rctx *c)
{
	const struct cr_restore_opts *o = c->opts;
	int ret = load_images(c);

	restore_step_done(c, "images loaded");
	c->files.open_external = o->open_external;
	c->files.cb_arg = o->cb_arg;
	c->files.shm = &c->shm; /* memfd fds are new descriptions of these objects */
	if (!ret)
		ret = take_listen_fds(c);
	if (!ret)
		ret = take_links(c);
	if (!ret)
		ret = find_helpers(c);
	if (!ret)
		ret = find_launchers(c);
	if (!ret)
		ret = check_ids_free(c);
	/* before the files are planned: below every fd they place */
	if (!ret)
		c->tool_pidfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (!ret)
		ret = cgroups_restore_prepare(c);
	/* from here kupdate works inside the tree's namespaces, if it had its
	 * own (namespaces.c): what it makes, the tree it forks */
	if (!ret)
		ret = ns_restore_enter(c);
	if (!ret)
		ret = shmem_restore(c->dirfd, &c->shm, !o->no_page_verify);
	/* the deleted files the processes map, made once for all of them */
	if (!ret)
		ret = ghost_make_mapped(c->files.ghosts, c->files.nr_ghosts);
	if (!ret)
		ret = make_gone_dirs(c);
	if (!ret)
		ret = files_plan(&c->files, c->procs, c->nr, highest_fd());
	if (ret)
		return ret;
	raise_nofile_for_shared(c);
	restore_step_done(c, "shared memory restored, files planned");
	return 0;
}

/* Fork the tree: what the roots share, then every root (a service may
 * have several trees) and the session helpers; wait until every process
 * exists.  *subreaper: whether kupdate was a subreaper before (0: it was
 * made one here). */
static int create_tree(struct rctx *c, pid_t *root_pid, int *subreaper)
{
	int ret;

	open_stage(c, ST_FORK);
	if (files_tool_owns(&c->files)) {
		ret = files_create_for_tool(&c->files);
		if (ret)
			return ret;
	}
	/* roots forked from a session of the tree or a rebuilt one come back
	 * to us, and a non-detached restore can wait for them */
	if ((c->nr_sessions || has_launched_roots(c)) &&
	    prctl(PR_GET_CHILD_SUBREAPER, subreaper) == 0 && !*subreaper)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	for (size_t i = 0; i < c->nr; i++) {
		if (c->procs[i].parent || c->procs[i].launcher || c->procs[i].pe->new_session)
			continue;
		ret = spawn(c, &c->procs[i], c->opts->detach);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < c->nr_sessions; i++) {
		ret = spawn_session_helper(c, c->sessions[i].sid);
		if (ret)
			return ret;
	}
	*root_pid = c->procs[0].pid;

	ret = wait_count(c, c->nr + c->nr_helpers, "creating processes", false);
	if (!ret)
		ret = files_finish_tool(&c->files);
	if (ret)
		return ret;
	restore_step_done(c, "processes created");
	return 0;
}

/* The created tree through its stages: process groups, files and memory
 * prepared, seized, the restorer blobs run, the tree let go. */
static int run_tree(struct rctx *c)
{
	int ret;

	open_stage(c, ST_PGID);
	ret = wait_count(c, c->nr + c->nr_helpers, "joining process groups", true);
	/* every process in its control group, a namespace's maker moved */
	if (!ret)
		ret = cgroups_restore_finish(c);
	if (ret)
		return ret;
	open_stage(c, ST_PREPARE);
	ret = wait_count(c, c->nr_live, "restoring files and preparing memory", true);
	if (!ret)
		files_unlink_removed(&c->files, false);
	if (!ret)
		ret = wait_zombies(c);
	if (ret)
		return ret;
	restore_step_done(c, "files restored, memory prepared");
	ret = restore_seize_all(c);
	if (!ret && cr_fault("restore")) {
		pr_err("restore: fault injected by KUPDATE_FAULT after the %zu processes were "
		       "created",
		       c->nr);
		ret = -EIO;
	}
	if (ret)
		return ret;
	restore_step_done(c, "processes seized");
	open_stage(c, ST_GO);
	ret = restore_run_blobs(c);
	/* every process has attached its System V segments: the ones marked
	 * for removal can be marked again */
	if (!ret)
		ret = sysvshm_commit(&c->shm);
	if (ret)
		return ret;
	restore_step_done(c, "memory and threads restored (restorer)");
	ret = restore_finish(c);
	if (ret)
		return ret;
	ns_restore_leave(c);
	if (c->opts->pidfile)
		write_pidfile(c->opts->pidfile, c->procs[0].pid);
	restore_step_done(c, "tree running");
	pr_info("restored %zu processes, %zu threads", c->nr, c->nr_threads);
	return 0;
}

/* whatever failed has been reported; nothing of the tree survives */
static void abandon_tree(struct rctx *c)
{
	atomic_store(&c->sh->failed, 1);
	lp_abandon(c);
	kill_all(c);
	c->shm.sysv_committed = false; /* the segments created go with the tree */
	/* reap what is ours to reap */
	while (waitpid(-1, NULL, __WALL | WNOHANG) > 0)
		;
	files_unlink_removed(&c->files, true);
}

int cr_restore(const struct cr_restore_opts *o, pid_t *root_pid, int *root_status)
{
	struct rctx c;
	sigset_t chld, old;
	int ret, subreaper = 1, timens_fd = -1;

	memset(&c, 0, sizeof(c));
	c.tool_pidfd = -1;
	c.cg.base_fd = -1;
	ns_restore_init(&c);
	c.opts = o;
	c.t0 = now_ns(CLOCK_MONOTONIC);
	c.dirfd = open(o->imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.dirfd < 0)
		return pr_errno("cannot open image directory %s", o->imgdir);
	/* the restoring processes reach /proc through it: a container's
	 * root may have none (mntns.c) */
	proc_pin(true);
	ret = prepare_tree(&c);
	if (ret)
		goto out;

	c.sh_len = PAGE_ALIGN(sizeof(struct shared) +
			      (c.nr + c.nr_helpers) * sizeof(struct shared_proc));
	c.sh = mmap(NULL, c.sh_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c.sh == MAP_FAILED) {
		c.sh = NULL;
		ret = -ENOMEM;
		goto out;
	}
	c.sh->tool = getpid();

	/* the tree's clocks go on from where they were (timens.c) */
	if (c.inv->has_clock_monotonic_ns && c.inv->has_clock_boottime_ns) {
		ret = timens_enter(c.inv->clock_monotonic_ns, c.inv->clock_boottime_ns, &timens_fd);
		if (ret)
			goto out;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	ret = create_tree(&c, root_pid, &subreaper);
	/* every process is born in it: ours again, for the threads kupdate
	 * makes from now on (to join a container's network namespace, to
	 * fill pages): 6.1 refuses a thread while the time namespace for
	 * children differs from the caller's (6.12 allows it) */
	timens_leave(timens_fd);
	timens_fd = -1;
	if (!ret)
		ret = run_tree(&c);
	if (ret) {
		abandon_tree(&c);
	} else if (!o->detach) {
		int st;

		while (waitpid(c.procs[0].pid, &st, 0) < 0 && errno == EINTR)
			;
		*root_status = st;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	ns_restore_leave(&c);
	mntns_cleanup(&c);
	cgroups_restore_done(&c, ret != 0);
	if (c.tool_pidfd >= 0)
		close(c.tool_pidfd);
	timens_leave(timens_fd);
	if (!subreaper)
		prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (c.sh)
		munmap(c.sh, c.sh_len);
	shmem_free(&c.shm);
	close_gone_dirs(&c);
	free(c.helpers);
	free(c.sessions);
	drop_listen_fds(&c);
	drop_links(&c);
	free_images(&c);
	close(c.dirfd);
	return ret;
}

int cr_images_check(const char *imgdir)
{
	struct rctx c;
	struct cr_restore_opts o = { .imgdir = imgdir };
	int ret;

	memset(&c, 0, sizeof(c));
	c.opts = &o;
	c.dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.dirfd < 0)
		return pr_errno("cannot open image directory %s", imgdir);
	ret = load_images(&c);
	if (!ret)
		ret = find_helpers(&c);
	if (!ret)
		ret = find_launchers(&c);
	free(c.helpers);
	free(c.sessions);
	free_images(&c);
	close(c.dirfd);
	return ret;
}
