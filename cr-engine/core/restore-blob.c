/* Restore, step 3: what each process of the tree hands to the restorer
 * blob (its arguments, its mappings, runs of pages, threads, strings and
 * fds), built in a region mapped where the saved layout has a hole
 * (restore.c). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "crc32c-impl.h"
#include "crc32c.h"
#include "ghost.h"
#include "fdinfo.h"
#include "log.h"
#include "proc.h"
#include "pidns.h"
#include "packet.h"
#include "plan.h"
#include "seccomp.h"
#include "util.h"
#include "vdso.h"

#include "restore-ctx.h"

extern const unsigned char restorer_blob[], restorer_blob_end[];

/* ------------------------------------------------------- blob building */

int fdt_base(const struct rproc *rp)
{
	const struct rproc *t = rp->fdt ? rp->fdt : rp;
	int base = 3;

	for (size_t i = 0; i < t->nr_fds; i++)
		base = MAX(base, t->fds[i]->fd + 1);
	return base;
}

#define MARGIN (4UL << 20)

/* Map the blob region where the saved layout has a hole that is also free
 * in this process now. */
static void *map_blob_region(struct rproc *rp, uint64_t len, uint64_t task_size)
{
	const struct rmm *mm = &rp->mm;
	uint64_t lo = 1UL << 20;

	for (ssize_t i = mm->nr_vmas; i >= 0; i--) {
		uint64_t g0 = i ? mm->vmas[i - 1]->end : lo;
		uint64_t g1 = (size_t)i < mm->nr_vmas ? mm->vmas[i]->start : task_size;
		uint64_t cand[3];

		if (g1 <= g0 || g1 - g0 < len + 2 * MARGIN)
			continue;
		cand[0] = (g1 - MARGIN - len) & ~(PAGE_SIZE - 1);
		cand[1] = PAGE_ALIGN(g0 + MARGIN);
		cand[2] = PAGE_ALIGN(g0 + (g1 - g0) / 2);
		for (int k = 0; k < 3; k++) {
			void *p;

			if (cand[k] < g0 + MARGIN || cand[k] + len + MARGIN > g1)
				continue;
			p = mmap((void *)cand[k], len, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == (void *)cand[k])
				return p;
			if (p != MAP_FAILED)
				munmap(p, len);
		}
	}
	pr_err("pid %d: found no free place for the restorer in its saved address space", rp->pid);
	return NULL;
}

/* Everything a process needs before it jumps: fds, cwd, the blob. */
/* Credentials into the restorer's form; the groups go at *off in a.  The
 * uids and gids as the tree's user namespace names them (the restorer sets
 * them from inside it); the groups as the initial one does (set before it
 * enters), or, for a process born inside (userns.c), as it does. */
static void plan_creds(const struct rctx *c, const Creds *cr, struct rst_creds *rc,
		       uint32_t dumpable, void *a, size_t *off)
{
	rc->present = 1;
	rc->uid[0] = ns_id_inside(c, cr->uid, false);
	rc->uid[1] = ns_id_inside(c, cr->euid, false);
	rc->uid[2] = ns_id_inside(c, cr->suid, false);
	rc->uid[3] = ns_id_inside(c, cr->fsuid, false);
	rc->gid[0] = ns_id_inside(c, cr->gid, true);
	rc->gid[1] = ns_id_inside(c, cr->egid, true);
	rc->gid[2] = ns_id_inside(c, cr->sgid, true);
	rc->gid[3] = ns_id_inside(c, cr->fsgid, true);
	rc->cap_inh = cr->cap_inh;
	rc->cap_prm = cr->cap_prm;
	rc->cap_eff = cr->cap_eff;
	rc->cap_bnd = cr->cap_bnd;
	rc->cap_amb = cr->cap_amb;
	rc->securebits = cr->securebits;
	rc->nnp = cr->no_new_privs;
	rc->dumpable = dumpable;
	rc->nr_groups = cr->n_groups;
	rc->groups_off = *off;
	if (cr->n_groups)
		memcpy((char *)a + *off, cr->groups, cr->n_groups * 4);
	/* born in the user namespace: set from inside it, as it names them */
	for (size_t i = 0; c->ns_in_userns && i < cr->n_groups; i++)
		((uint32_t *)((char *)a + *off))[i] = ns_id_inside(c, cr->groups[i], true);
	*off += (cr->n_groups * 4 + 7) & ~7UL;
}

/* A working directory that was removed: made again where it was (or
 * beside it if that name is taken), opened and removed again, by kupdate
 * before it forks, once for the processes that shared it; each enters it
 * (prepare), and /proc/PID/cwd shows it deleted as before. */
static int make_gone_dir(const TaskCore *t, pid_t pid)
{
	char made[PATH_MAX + 64];
	const char *slash = strrchr(t->cwd, '/');
	int fd, ret = 0;

	if (t->cwd[0] != '/' || !slash) {
		pr_err("pid %d: its removed working directory %s is not an absolute path", pid,
		       t->cwd);
		return -EINVAL;
	}
	snprintf(made, sizeof(made), "%s", t->cwd);
	for (int n = 0; mkdir(made, 0700); n++) {
		if (errno != EEXIST || n == 100)
			return pr_errno(
				"pid %d: cannot make its removed working directory %s again", pid,
				t->cwd);
		snprintf(made, sizeof(made), "%.*s/.kupdate-cwd-%d-%d",
			 slash == t->cwd ? 0 : (int)(slash - t->cwd), t->cwd, pid, n);
	}
	fd = open(made, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fchown(fd, t->cwd_uid, t->cwd_gid) || fchmod(fd, t->cwd_mode & 07777))
		ret = -errno;
	if (rmdir(made) && !ret)
		ret = -errno;
	if (ret) {
		pr_err("pid %d: cannot make its removed working directory %s again: %s", pid,
		       t->cwd, strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	return fd;
}

int make_gone_dirs(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		const TaskCore *t = rp->zombie ? NULL : rp->core.task;

		if (!t || !t->cwd || !t->cwd_deleted)
			continue;
		/* shared with a process made before? */
		for (size_t k = 0; k < i && rp->cwd_fd < 0; k++) {
			const TaskCore *o = c->procs[k].zombie ? NULL : c->procs[k].core.task;

			if (o && c->procs[k].cwd_fd >= 0 && !strcmp(o->cwd, t->cwd) &&
			    o->cwd_ino == t->cwd_ino)
				rp->cwd_fd = c->procs[k].cwd_fd;
		}
		if (rp->cwd_fd < 0) {
			int fd = make_gone_dir(t, rp->pid);

			if (fd < 0)
				return fd;
			rp->cwd_fd = fd;
		}
	}
	return 0;
}

void close_gone_dirs(struct rctx *c)
{
	for (size_t i = 0; c->procs && i < c->nr; i++) {
		int fd = c->procs[i].cwd_fd;

		if (fd < 0)
			continue;
		for (size_t k = i; k < c->nr; k++)
			if (c->procs[k].cwd_fd == fd)
				c->procs[k].cwd_fd = -1;
		close(fd);
	}
}

/* Our own fds (stderr, the log, the image directory) and those kupdate
 * made for the process (shared memory objects, its removed cwd, deleted
 * files it maps) go above the saved fd table, from base up; then nothing
 * below base survives but what is restored.  *dirfd: the image
 * directory's. */
static int place_tool_fds(struct rctx *c, struct rproc *rp, struct rst_builder *b, int *dirfd)
{
	int base = fdt_base(rp), errfd, logfd = -1;
	/* an fd table shared with the process that restores it (rp->fdt),
	 * which prepares after us: we leave what is below base and every fd
	 * we inherited as they are, and restore no fd */
	int (*place_fd)(struct rst_builder *, int) = rp->fdt ? builder_copy_fd : builder_place_fd;

	errfd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, base);
	if (cr_log_fd() >= 0)
		logfd = fcntl(cr_log_fd(), F_DUPFD_CLOEXEC, base);
	*dirfd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, base);
	if (*dirfd < 0) {
		pr_perror("pid %d: cannot move descriptors above %d", rp->pid, base);
		return -EMFILE;
	}
	cr_log_redirect(errfd, logfd);
	b->next_fd = MAX(MAX(errfd, *dirfd), logfd) + 1;
	/* in a shared table, kupdate closes them once every process of it is
	 * done (restore.c: finish) */
	b->args.close_from = rp->fdt || rp->fdt_shared ? -1 : base;
	/* the shared memory objects kupdate created, too */
	for (size_t i = 0; i < c->shm.n; i++) {
		int fd;

		if (c->shm.fds[i] < 0) /* a System V segment, attached by id */
			continue;
		fd = place_fd(b, c->shm.fds[i]);

		if (fd < 0)
			return fd;
		c->shm.fds[i] = fd;
	}
	/* kupdate's /proc (proc_open: a container's root may have none) */
	if (proc_pinned() >= 0) {
		int fd = place_fd(b, proc_pinned());

		if (fd < 0)
			return fd;
		proc_repin(fd);
	}
	/* kupdate's pidfd, which it watches until it jumps (restore.c) */
	if (c->tool_pidfd >= 0) {
		int fd = place_fd(b, c->tool_pidfd);

		if (fd < 0)
			return fd;
		c->tool_pidfd = fd;
	}
	/* the user namespace it enters last (restorer.c: enter_userns) */
	b->args.userns_fd = -1;
	b->args.born_in_userns = c->ns_in_userns;
	if (c->ns_userns_fd >= 0) {
		int fd = fcntl(c->ns_userns_fd, F_DUPFD_CLOEXEC, base);

		b->args.userns_fd = fd < 0 ? fd : builder_place_fd(b, fd);
		if (b->args.userns_fd < 0)
			return pr_errno("pid %d: cannot keep the tree's user namespace", rp->pid);
	}
	/* its removed working directory, made again */
	if (rp->cwd_fd >= 0) {
		rp->cwd_fd = place_fd(b, rp->cwd_fd);
		if (rp->cwd_fd < 0)
			return rp->cwd_fd;
	}
	/* and the deleted files it made for the mappings (ghost.c) */
	for (size_t i = 0; i < c->files.nr_ghosts; i++) {
		struct rghost *g = &c->files.ghosts[i];

		if (g->map_fd < 0)
			continue;
		g->map_fd = place_fd(b, g->map_fd);
		if (g->map_fd < 0)
			return g->map_fd;
	}
	/* nothing below base survives but what we restore */
	if (!rp->fdt && syscall(SYS_close_range, 0, base - 1, 0)) {
		for (int fd = 0; fd < base; fd++)
			close(fd);
	}
	return 0;
}

static int set_oom_score_adj(const struct rproc *rp, int adj)
{
	char v[16];
	int fd = proc_open("self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	int n = snprintf(v, sizeof(v), "%d", adj);

	if (fd < 0 || write(fd, v, n) != n) {
		int ret = -errno;

		pr_perror("pid %d: cannot set its oom_score_adj to %d (lowering it needs "
			  "CAP_SYS_RESOURCE)",
			  rp->pid, adj);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	close(fd);
	return 0;
}

/* What the process sets on itself before the blob: its root, umask,
 * personality, subreaper flag, oom_score_adj and working directory. */
static int set_task_state(const struct rproc *rp)
{
	const TaskCore *t = rp->core.task;
	int ret;

	if (t->root && strcmp(t->root, "/") && chroot(t->root))
		return pr_errno("pid %d: cannot change root to %s", rp->pid, t->root);
	if (t->has_umask)
		umask(t->umask);
	if (t->has_personality && personality(t->personality) < 0)
		return pr_errno("pid %d: cannot set its personality %#x", rp->pid, t->personality);
	if (t->child_subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1))
		return pr_errno("pid %d: cannot make it a child subreaper", rp->pid);
	if (t->has_oom_score_adj) {
		ret = set_oom_score_adj(rp, t->oom_score_adj);
		if (ret)
			return ret;
	}
	/* a removed one: the directory kupdate made again */
	if (rp->cwd_fd >= 0 ? fchdir(rp->cwd_fd) : t->cwd && chdir(t->cwd))
		return pr_errno("pid %d: cannot change directory to %s", rp->pid, t->cwd);
	return 0;
}

/* The executable the blob links (PR_SET_MM_MAP's exe_fd): the file
 * kupdate made again for a deleted one, or the same file as at dump. */
static int plan_exe(struct rctx *c, const struct rproc *rp, struct rst_builder *b)
{
	const TaskCore *t = rp->core.task;

	b->args.exe_fd = -1;
	if (t->has_exe_ghost_id) {
		/* a deleted executable: the file kupdate made again */
		const struct rghost *g = files_ghost(&c->files, t->exe_ghost_id);
		int fd = g && g->map_fd >= 0 ? fcntl(g->map_fd, F_DUPFD_CLOEXEC, 0) : -1;

		if (fd < 0) {
			pr_err("pid %d: its deleted executable %s was not made again", rp->pid,
			       t->exe_path ? t->exe_path : "");
			return -EINVAL;
		}
		b->args.exe_fd = builder_place_fd(b, fd);
		if (b->args.exe_fd < 0)
			return b->args.exe_fd;
	} else if (t->exe_path) {
		int fd = open(t->exe_path, O_RDONLY | O_CLOEXEC);
		struct stat st;

		struct stat self;

		if (fd < 0 || fstat(fd, &st) || (t->has_exe_ino && st.st_ino != t->exe_ino)) {
			pr_err("pid %d: its executable %s is gone or was replaced since the dump",
			       rp->pid, t->exe_path);
			if (fd >= 0)
				close(fd);
			return -ESTALE;
		}
		/* kupdate itself (an apply following its worker from a login
		 * session: orchestrator/handoff.c): the process, forked by
		 * kupdate, has it already, and the kernel refuses to replace an
		 * executable that is still mapped (EBUSY), as the restored
		 * memory maps it */
		int sfd = proc_open("self/exe", O_PATH | O_CLOEXEC);
		bool same = sfd >= 0 && !fstat(sfd, &self) && self.st_dev == st.st_dev &&
			    self.st_ino == st.st_ino;

		if (sfd >= 0)
			close(sfd);
		if (same) {
			close(fd);
			return 0;
		}
		b->args.exe_fd = builder_place_fd(b, fd);
		if (b->args.exe_fd < 0)
			return b->args.exe_fd;
	}
	return 0;
}

/* The blob's region: code | args (vmas, runs, threads, auxv, strings) |
 * park | stacks */
struct blob_layout {
	unsigned char *region;
	uint64_t code_len, args_len, stacks_len, total, task_size;
};

/* the room the arguments take (an upper bound, page aligned) */
static uint64_t args_room(const struct rproc *rp, const struct rst_builder *b)
{
	const struct rcore *core = &rp->core;
	uint64_t len;

	len = sizeof(struct rst_args) + b->nr_vmas * sizeof(struct rst_vma) +
	      b->nr_runs * sizeof(struct rst_run) + b->nr_threads * sizeof(struct rst_thread) +
	      rp->mm.core->n_auxv * 8 + b->strings_len + 64 * sizeof(struct rst_sigaction) +
	      rp->timers.nr * sizeof(struct rst_timer) + 128 * rp->sig.core->n_pending +
	      (core->task->creds ? core->task->creds->n_groups * 4 : 0) + vdso_args_len(&rp->mm) +
	      seccomp_args_len(core->task->seccomp) +
	      (b->args.verify_crc == 2 ? sizeof(struct crc32c_tab) : 0) + 64;
	for (size_t i = 0; i < core->nr_threads; i++)
		len += 128 * core->threads[i]->n_pending +
		       (core->threads[i]->creds ? core->threads[i]->creds->n_groups * 4 + 8 : 0);
	return PAGE_ALIGN(len);
}

/* Lay the region out, map it in a hole of the saved layout and copy the
 * blob's code in. */
static int map_blob(struct rproc *rp, struct rst_builder *b, uint64_t park_len,
		    struct blob_layout *l)
{
	int ret;

	l->code_len = PAGE_ALIGN(restorer_blob_end - restorer_blob);
	l->args_len = args_room(rp, b);
	l->stacks_len = b->nr_threads * RST_STACK_SIZE;
	l->total = l->code_len + l->args_len + PAGE_ALIGN(park_len) + l->stacks_len;
	l->task_size = 0x7ffffffff000ULL;
	for (size_t i = 0; i < rp->mm.nr_vmas; i++)
		if (rp->mm.vmas[i]->end > l->task_size)
			l->task_size = (1ULL << 56) - PAGE_SIZE;
	l->region = map_blob_region(rp, l->total, l->task_size);
	if (!l->region)
		return -ENOMEM;
	if (mprotect(l->region, l->code_len + l->args_len, PROT_READ | PROT_WRITE) ||
	    mprotect(l->region + l->total - l->stacks_len, l->stacks_len, PROT_READ | PROT_WRITE)) {
		ret = pr_errno("pid %d: cannot set up the restorer", rp->pid);
		return ret;
	}
	memcpy(l->region, restorer_blob, restorer_blob_end - restorer_blob);
	return 0;
}

static void fill_thread(struct rst_thread *t, const ThreadCore *tc, const TaskCore *task, size_t i,
			uint64_t stack_top)
{
	t->tid = tc->tid;
	t->stack_top = stack_top;
	t->clear_child_tid = tc->clear_child_tid;
	t->robust_list = tc->robust_list;
	t->robust_len = tc->robust_list_len;
	if (tc->rseq) {
		t->has_rseq = 1;
		t->rseq_ptr = tc->rseq->abi_pointer;
		t->rseq_len = tc->rseq->abi_size;
		t->rseq_sig = tc->rseq->signature;
	}
	snprintf(t->comm, sizeof(t->comm), "%s", tc->comm ? tc->comm : (i ? "" : task->comm));
	if (tc->has_altstack_sp) {
		t->has_altstack = 1;
		t->altstack_sp = tc->altstack_sp;
		t->altstack_size = tc->altstack_size;
		t->altstack_flags = tc->altstack_flags;
	}
	if (tc->has_sched_attr) {
		memcpy(t->sched_attr, tc->sched_attr.data, tc->sched_attr.len);
		t->sched_attr_len = tc->sched_attr.len;
	}
	if (tc->has_affinity) {
		memcpy(t->affinity, tc->affinity.data, tc->affinity.len);
		t->affinity_len = tc->affinity.len;
	}
	t->pdeathsig = tc->pdeathsig;
}

/* rp's thread tid as it sees itself (pidns.c), its set_tid into t */
static pid_t thread_ids(const struct rproc *rp, pid_t tid, struct rst_thread *t)
{
	_Static_assert(PIDNS_DEPTH_MAX + 1 <= RST_PID_LEVELS, "set_tid holds every level");
	for (size_t k = 0; k < rp->pe->n_tids; k++)
		if (rp->pe->tids[k] == tid) {
			if (t)
				t->nr_set_tid = pidns_set_tid(rp, k, t->set_tid);
			return pidns_self(rp, k);
		}
	if (t) { /* load_images() matched the threads with the tids */
		t->set_tid[0] = tid;
		t->nr_set_tid = 1;
	}
	return tid;
}

/* the thread i of the args at a */
static struct rst_thread *args_thread(void *a, const struct rst_builder *b, size_t i)
{
	return (struct rst_thread *)((char *)a + b->args.threads_off) + i;
}

/* At *off in a: the mappings, page runs and threads, then the queued
 * signals, per thread and for the whole process. */
static void write_vmas_threads(const struct rproc *rp, struct rst_builder *b,
			       const struct blob_layout *l, void *a, size_t *off)
{
	const struct rcore *core = &rp->core;

	b->args.nr_vmas = b->nr_vmas;
	b->args.vmas_off = *off;
	memcpy((char *)a + *off, b->vmas, b->nr_vmas * sizeof(struct rst_vma));
	*off += b->nr_vmas * sizeof(struct rst_vma);
	b->args.nr_runs = b->nr_runs;
	b->args.runs_off = *off;
	memcpy((char *)a + *off, b->runs, b->nr_runs * sizeof(struct rst_run));
	*off += b->nr_runs * sizeof(struct rst_run);
	b->args.nr_threads = b->nr_threads;
	b->args.threads_off = *off;
	for (size_t i = 0; i < b->nr_threads; i++) {
		struct rst_thread *t = args_thread(a, b, i);

		fill_thread(t, core->threads[i], core->task, i,
			    (uintptr_t)l->region + l->total - i * RST_STACK_SIZE);
		t->self_tid = thread_ids(rp, t->tid, t);
	}
	*off += b->nr_threads * sizeof(struct rst_thread);
	/* queued signals, per thread then for the whole process */
	for (size_t i = 0; i < b->nr_threads; i++) {
		struct rst_thread *t = args_thread(a, b, i);
		const ThreadCore *tc = core->threads[i];

		t->pending_off = *off;
		t->nr_pending = tc->n_pending;
		for (size_t k = 0; k < tc->n_pending; k++, *off += 128)
			memcpy((char *)a + *off, tc->pending[k].data, 128);
	}
	b->args.shared_pending_off = *off;
	b->args.nr_shared_pending = rp->sig.core->n_pending;
	for (size_t k = 0; k < rp->sig.core->n_pending; k++, *off += 128)
		memcpy((char *)a + *off, rp->sig.core->pending[k].data, 128);
}

/* At *off in a: the POSIX timers; the interval timers go in b->args. */
static void plan_timers(const struct rproc *rp, struct rst_builder *b, void *a, size_t *off)
{
	const Itimer *it[3] = { rp->timers.core->real, rp->timers.core->virt,
				rp->timers.core->prof };

	b->args.timers_off = *off;
	b->args.nr_timers = rp->timers.nr;
	for (size_t i = 0; i < rp->timers.nr; i++, *off += sizeof(struct rst_timer)) {
		const PosixTimer *pt = rp->timers.timers[i];
		struct rst_timer *tm = (struct rst_timer *)((char *)a + *off);

		tm->id = pt->id;
		tm->clock = pt->clock;
		tm->notify = pt->notify;
		tm->signo = pt->signo;
		tm->tid = pt->has_tid ? thread_ids(rp, pt->tid, NULL) : 0;
		tm->sival = pt->sival;
		tm->value_ns = pt->value_ns;
		tm->interval_ns = pt->interval_ns;
		tm->overrun = pt->has_overrun ? pt->overrun : 0;
		tm->sig_pending = pt->sig_pending;
	}
	if (rp->timers.core->has_read_mono_ns)
		b->args.timers_mono = rp->timers.core->read_mono_ns;
	for (int w = 0; w < 3; w++)
		if (it[w]) {
			b->args.itimers[w][0] = it[w]->value_us;
			b->args.itimers[w][1] = it[w]->interval_us;
		}
}

/* Limits in b->args; credentials (the groups at *off in a), seccomp,
 * signal dispositions and auxv at *off. */
static void write_task(const struct rctx *c, const struct rproc *rp, struct rst_builder *b, void *a,
		       size_t *off)
{
	const struct rcore *core = &rp->core;

	b->args.nr_rlimits = core->task->n_rlimits;
	for (size_t i = 0; i < core->task->n_rlimits; i++) {
		b->args.rlimits[i][0] = core->task->rlimits[i]->cur;
		b->args.rlimits[i][1] = core->task->rlimits[i]->max;
	}
	if (core->task->creds)
		plan_creds(c, core->task->creds, &b->args.creds,
			   core->task->has_dumpable ? core->task->dumpable : 1, a, off);
	for (size_t i = 0; i < b->nr_threads; i++) {
		struct rst_thread *t = args_thread(a, b, i);

		if (i && core->threads[i]->creds)
			plan_creds(c, core->threads[i]->creds, &t->creds, 1, a, off);
	}
	seccomp_plan(core->task->seccomp, &b->args, (uint8_t *)a, off);
	b->args.sigacts_off = *off;
	b->args.nr_sigacts = signals_plan(&rp->sig, (struct rst_sigaction *)((char *)a + *off));
	*off += b->args.nr_sigacts * sizeof(struct rst_sigaction);
	b->args.auxv_off = *off;
	b->args.auxv_size = rp->mm.core->n_auxv * 8;
	memcpy((char *)a + *off, rp->mm.core->auxv, b->args.auxv_size);
	*off += b->args.auxv_size;
}

/* At *off in a: the crc table (for a restorer that sums without SSE4.2),
 * then the strings, the mappings' names pointed at them. */
static void write_strings(struct rst_builder *b, void *a, size_t *off)
{
	if (b->args.verify_crc == 2) { /* the restorer sums without SSE4.2 */
		*off = (*off + 7) & ~7UL;
		b->args.crc_tab_off = *off;
		memcpy((char *)a + *off, crc32c_soft_tab(), sizeof(struct crc32c_tab));
		*off += sizeof(struct crc32c_tab);
	}
	for (size_t i = 0; i < b->nr_vmas; i++) {
		struct rst_vma *v = (struct rst_vma *)((char *)a + b->args.vmas_off) + i;
		if (v->name_off)
			v->name_off += *off;
	}
	if (b->strings_len)
		memcpy((char *)a + *off, b->strings, b->strings_len);
	*off = PAGE_ALIGN(*off + b->strings_len);
}

/* Write the blob's arguments at a, after its code in l->region. */
static int write_args(const struct rctx *c, const struct rproc *rp, struct rst_builder *b,
		      const struct vdso_plan *vp, const struct blob_layout *l, void *a)
{
	size_t off = sizeof(struct rst_args);
	int ret;

	b->args.magic = RST_MAGIC;
	b->args.version = RST_VERSION;
	b->args.size = l->args_len;
	b->args.blob_start = (uintptr_t)l->region;
	b->args.blob_len = l->total;
	b->args.park_start = (uintptr_t)l->region + l->code_len + l->args_len;
	b->args.task_size = l->task_size;
	write_vmas_threads(rp, b, l, a, &off);
	plan_timers(rp, b, a, &off);
	write_task(c, rp, b, a, &off);
	write_strings(b, a, &off);
	ret = vdso_fill(rp->pid, &rp->mm, vp, (struct rst_vma *)((char *)a + b->args.vmas_off),
			(uint8_t *)a, &off);
	if (ret)
		return ret;
	memcpy(a, &b->args, sizeof(b->args));
	return 0;
}

/* at debug level: the fds the process has as it jumps to the blob */
static void log_fds(const struct rproc *rp, int close_from)
{
	DIR *d;
	struct dirent *de;
	char line[512] = "";

	if (cr_log_level() < CR_LOG_DEBUG)
		return;
	{
		int dfd = proc_open("self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		d = dfd < 0 ? NULL : fdopendir(dfd);
		if (dfd >= 0 && !d)
			close(dfd);
	}
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && strlen(line) < 480)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s",
				 de->d_name);
	if (d)
		closedir(d);
	pr_debug("pid %d: fds before the restorer:%s (close from %d)", rp->pid, line, close_from);
}

/* the packet sockets with a ring among rp's fds, and how the mapping of
 * each is laid out (packet-ring.c) */
static int plan_rings(const struct rctx *c, const struct rproc *rp, struct mem_ring **out,
		      size_t *n)
{
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < rp->nr_fds; i++) {
		size_t k = files_index(&c->files, rp->fds[i]->file_id);
		const FileEntry *e = k == (size_t)-1 ? NULL : c->files.files[k];
		struct mem_ring *r;

		if (!e || e->kind != FILE_KIND__FILE_PACKET || !e->psk || !e->psk->rx_ring)
			continue;
		r = realloc(*out, (*n + 1) * sizeof(*r));
		if (!r)
			return -ENOMEM;
		*out = r;
		r[*n].fd = rp->fds[i]->fd;
		packet_ring_layout(e->psk->rx_ring, &r[*n].bs, &r[*n].nb, &r[*n].rot);
		(*n)++;
	}
	return 0;
}

int rst_prepare(struct rctx *c, struct rproc *rp, int idx, uint64_t *entry, uint64_t *args_p,
		uint64_t *stack_p)
{
	_cleanup_free_ struct mem_ring *rings = NULL;
	size_t nr_rings = 0;
	struct rst_builder b;
	struct vdso_plan vp;
	struct blob_layout l;
	int dirfd, ret;
	void *a;

	memset(&b, 0, sizeof(b));
	/* our own fds go above the saved ones */
	ret = place_tool_fds(c, rp, &b, &dirfd);
	if (ret)
		return ret;
	ret = files_prepare_owned(&c->files, rp);
	if (!ret)
		ret = rp->fdt ? files_restore_sharer(&c->files, rp) : files_restore(&c->files, rp);
	if (ret)
		return ret;
	pr_debug("pid %d: files restored", rp->pid);
	ret = set_task_state(rp);
	if (ret)
		return ret;

	ret = plan_rings(c, rp, &rings, &nr_rings);
	if (!ret)
		ret = mem_plan(dirfd, rp->pid, &rp->mm, &c->shm, &c->files, rings, nr_rings, &b,
			       !c->opts->no_page_verify);
	if (ret)
		return ret;
	pr_debug("pid %d: memory planned", rp->pid);
	ret = plan_exe(c, rp, &b);
	if (!ret)
		ret = vdso_plan(rp->pid, &rp->mm, &b, &vp);
	if (ret)
		return ret;

	b.nr_threads = rp->core.nr_threads;
	ret = map_blob(rp, &b, vp.park_len + mem_premap_park_len(&rp->mm), &l);
	if (ret)
		return ret;
	vdso_place(&vp, &b, (uintptr_t)l.region);
	a = l.region + l.code_len;
	ret = write_args(c, rp, &b, &vp, &l, a);
	if (ret)
		return ret;
	if (mprotect(l.region, l.code_len, PROT_READ | PROT_EXEC))
		return pr_errno("pid %d: cannot set up the restorer", rp->pid);
	free(b.vmas);
	free(b.runs);
	free(b.strings);

	log_fds(rp, b.args.close_from);
	c->sh->procs[idx].blob_start = (uintptr_t)l.region;
	c->sh->procs[idx].blob_len = l.total;
	c->sh->procs[idx].args_addr = (uintptr_t)a;
	*entry = (uintptr_t)l.region;
	*args_p = (uintptr_t)a;
	/* as if called: the return address slot keeps the stack ABI-aligned */
	*stack_p = (uintptr_t)l.region + l.total - 8;
	return 0;
}
