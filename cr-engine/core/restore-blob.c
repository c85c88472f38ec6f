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
#include "log.h"
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
/* Credentials into the restorer's form; the groups go at *off in a. */
static void plan_creds(const Creds *cr, struct rst_creds *rc, uint32_t dumpable, void *a,
		       size_t *off)
{
	rc->present = 1;
	rc->uid[0] = cr->uid;
	rc->uid[1] = cr->euid;
	rc->uid[2] = cr->suid;
	rc->uid[3] = cr->fsuid;
	rc->gid[0] = cr->gid;
	rc->gid[1] = cr->egid;
	rc->gid[2] = cr->sgid;
	rc->gid[3] = cr->fsgid;
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
		if (errno != EEXIST || n == 100) {
			ret = -errno;
			pr_perror("pid %d: cannot make its removed working directory %s again", pid,
				  t->cwd);
			return ret;
		}
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

int rst_prepare(struct rctx *c, struct rproc *rp, int idx, uint64_t *entry, uint64_t *args_p,
		uint64_t *stack_p)
{
	struct rst_builder b;
	struct vdso_plan vp;
	const struct rcore *core = &rp->core;
	uint64_t code_len = PAGE_ALIGN(restorer_blob_end - restorer_blob);
	uint64_t park_len, args_len, stacks_len, total, task_size = 0x7ffffffff000ULL;
	int base = fdt_base(rp), dirfd, errfd, logfd = -1, ret;
	unsigned char *region;
	struct rst_args *a;
	size_t off;
	/* an fd table shared with the process that restores it (rp->fdt),
	 * which prepares after us: we leave what is below base and every fd
	 * we inherited as they are, and restore no fd */
	int (*place_fd)(struct rst_builder *, int) = rp->fdt ? builder_copy_fd : builder_place_fd;

	memset(&b, 0, sizeof(b));
	/* our own fds go above the saved ones */
	errfd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, base);
	if (cr_log_fd() >= 0)
		logfd = fcntl(cr_log_fd(), F_DUPFD_CLOEXEC, base);
	dirfd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, base);
	if (dirfd < 0) {
		pr_perror("pid %d: cannot move descriptors above %d", rp->pid, base);
		return -EMFILE;
	}
	cr_log_redirect(errfd, logfd);
	b.next_fd = MAX(MAX(errfd, dirfd), logfd) + 1;
	/* in a shared table, kupdate closes them once every process of it is
	 * done (restore.c: finish) */
	b.args.close_from = rp->fdt || rp->fdt_shared ? -1 : base;
	/* the shared memory objects kupdate created, too */
	for (size_t i = 0; i < c->shm.n; i++) {
		int fd;

		if (c->shm.fds[i] < 0) /* a System V segment, attached by id */
			continue;
		fd = place_fd(&b, c->shm.fds[i]);

		if (fd < 0)
			return fd;
		c->shm.fds[i] = fd;
	}
	/* its removed working directory, made again */
	if (rp->cwd_fd >= 0) {
		rp->cwd_fd = place_fd(&b, rp->cwd_fd);
		if (rp->cwd_fd < 0)
			return rp->cwd_fd;
	}
	/* and the deleted files it made for the mappings (ghost.c) */
	for (size_t i = 0; i < c->files.nr_ghosts; i++) {
		struct rghost *g = &c->files.ghosts[i];

		if (g->map_fd < 0)
			continue;
		g->map_fd = place_fd(&b, g->map_fd);
		if (g->map_fd < 0)
			return g->map_fd;
	}
	/* nothing below base survives but what we restore */
	if (!rp->fdt && syscall(SYS_close_range, 0, base - 1, 0)) {
		for (int fd = 0; fd < base; fd++)
			close(fd);
	}
	ret = files_prepare_owned(&c->files, rp);
	if (!ret)
		ret = rp->fdt ? files_restore_sharer(&c->files, rp) : files_restore(&c->files, rp);
	if (ret)
		return ret;
	pr_debug("pid %d: files restored", rp->pid);
	if (core->task->root && strcmp(core->task->root, "/") && chroot(core->task->root)) {
		ret = -errno;
		pr_perror("pid %d: cannot change root to %s", rp->pid, core->task->root);
		return ret;
	}
	if (core->task->has_umask)
		umask(core->task->umask);
	if (core->task->has_personality && personality(core->task->personality) < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot set its personality %#x", rp->pid,
			  core->task->personality);
		return ret;
	}
	if (core->task->child_subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		ret = -errno;
		pr_perror("pid %d: cannot make it a child subreaper", rp->pid);
		return ret;
	}
	if (core->task->has_oom_score_adj) {
		char v[16];
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		int n = snprintf(v, sizeof(v), "%d", core->task->oom_score_adj);

		if (fd < 0 || write(fd, v, n) != n) {
			ret = -errno;
			pr_perror("pid %d: cannot set its oom_score_adj to %d (lowering it needs "
				  "CAP_SYS_RESOURCE)",
				  rp->pid, core->task->oom_score_adj);
			if (fd >= 0)
				close(fd);
			return ret;
		}
		close(fd);
	}
	/* a removed one: the directory kupdate made again */
	if (rp->cwd_fd >= 0 ? fchdir(rp->cwd_fd) : core->task->cwd && chdir(core->task->cwd)) {
		ret = -errno;
		pr_perror("pid %d: cannot change directory to %s", rp->pid, core->task->cwd);
		return ret;
	}

	ret = mem_plan(dirfd, rp->pid, &rp->mm, &c->shm, &c->files, &b, !c->opts->no_page_verify);
	if (ret)
		return ret;
	pr_debug("pid %d: memory planned", rp->pid);
	b.args.exe_fd = -1;
	if (core->task->has_exe_ghost_id) {
		/* a deleted executable: the file kupdate made again */
		const struct rghost *g = files_ghost(&c->files, core->task->exe_ghost_id);
		int fd = g && g->map_fd >= 0 ? fcntl(g->map_fd, F_DUPFD_CLOEXEC, 0) : -1;

		if (fd < 0) {
			pr_err("pid %d: its deleted executable %s was not made again", rp->pid,
			       core->task->exe_path ? core->task->exe_path : "");
			return -EINVAL;
		}
		b.args.exe_fd = builder_place_fd(&b, fd);
		if (b.args.exe_fd < 0)
			return b.args.exe_fd;
	} else if (core->task->exe_path) {
		int fd = open(core->task->exe_path, O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) ||
		    (core->task->has_exe_ino && st.st_ino != core->task->exe_ino)) {
			pr_err("pid %d: its executable %s is gone or was replaced since the dump",
			       rp->pid, core->task->exe_path);
			if (fd >= 0)
				close(fd);
			return -ESTALE;
		}
		b.args.exe_fd = builder_place_fd(&b, fd);
		if (b.args.exe_fd < 0)
			return b.args.exe_fd;
	}
	ret = vdso_plan(rp->pid, &rp->mm, &b, &vp);
	if (ret)
		return ret;
	park_len = vp.park_len + mem_premap_park_len(&rp->mm);

	/* layout: code | args (vmas, runs, threads, auxv, strings) | park | stacks */
	b.nr_threads = core->nr_threads;
	args_len = sizeof(struct rst_args) + b.nr_vmas * sizeof(struct rst_vma) +
		   b.nr_runs * sizeof(struct rst_run) + b.nr_threads * sizeof(struct rst_thread) +
		   rp->mm.core->n_auxv * 8 + b.strings_len + 64 * sizeof(struct rst_sigaction) +
		   rp->timers.nr * sizeof(struct rst_timer) + 128 * rp->sig.core->n_pending +
		   (core->task->creds ? core->task->creds->n_groups * 4 : 0) +
		   vdso_args_len(&rp->mm) + seccomp_args_len(core->task->seccomp) +
		   (b.args.verify_crc == 2 ? sizeof(struct crc32c_tab) : 0) + 64;
	for (size_t i = 0; i < core->nr_threads; i++)
		args_len +=
			128 * core->threads[i]->n_pending +
			(core->threads[i]->creds ? core->threads[i]->creds->n_groups * 4 + 8 : 0);
	args_len = PAGE_ALIGN(args_len);
	stacks_len = b.nr_threads * RST_STACK_SIZE;
	total = code_len + args_len + PAGE_ALIGN(park_len) + stacks_len;
	for (size_t i = 0; i < rp->mm.nr_vmas; i++)
		if (rp->mm.vmas[i]->end > task_size)
			task_size = (1ULL << 56) - PAGE_SIZE;
	region = map_blob_region(rp, total, task_size);
	if (!region)
		return -ENOMEM;
	if (mprotect(region, code_len + args_len, PROT_READ | PROT_WRITE) ||
	    mprotect(region + total - stacks_len, stacks_len, PROT_READ | PROT_WRITE)) {
		ret = -errno;
		pr_perror("pid %d: cannot set up the restorer", rp->pid);
		return ret;
	}
	memcpy(region, restorer_blob, restorer_blob_end - restorer_blob);
	vdso_place(&vp, &b, (uintptr_t)region);

	a = (struct rst_args *)(region + code_len);
	b.args.magic = RST_MAGIC;
	b.args.version = RST_VERSION;
	b.args.size = args_len;
	b.args.blob_start = (uintptr_t)region;
	b.args.blob_len = total;
	b.args.park_start = (uintptr_t)region + code_len + args_len;
	b.args.task_size = task_size;
	off = sizeof(struct rst_args);
	b.args.nr_vmas = b.nr_vmas;
	b.args.vmas_off = off;
	memcpy((char *)a + off, b.vmas, b.nr_vmas * sizeof(struct rst_vma));
	off += b.nr_vmas * sizeof(struct rst_vma);
	b.args.nr_runs = b.nr_runs;
	b.args.runs_off = off;
	memcpy((char *)a + off, b.runs, b.nr_runs * sizeof(struct rst_run));
	off += b.nr_runs * sizeof(struct rst_run);
	b.args.nr_threads = b.nr_threads;
	b.args.threads_off = off;
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + off) + i;
		const ThreadCore *tc = core->threads[i];

		t->tid = tc->tid;
		t->stack_top = (uintptr_t)region + total - i * RST_STACK_SIZE;
		t->clear_child_tid = tc->clear_child_tid;
		t->robust_list = tc->robust_list;
		t->robust_len = tc->robust_list_len;
		if (tc->rseq) {
			t->has_rseq = 1;
			t->rseq_ptr = tc->rseq->abi_pointer;
			t->rseq_len = tc->rseq->abi_size;
			t->rseq_sig = tc->rseq->signature;
		}
		snprintf(t->comm, sizeof(t->comm), "%s",
			 tc->comm ? tc->comm : (i ? "" : core->task->comm));
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
	off += b.nr_threads * sizeof(struct rst_thread);
	/* queued signals, per thread then for the whole process */
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + b.args.threads_off) + i;
		const ThreadCore *tc = core->threads[i];

		t->pending_off = off;
		t->nr_pending = tc->n_pending;
		for (size_t k = 0; k < tc->n_pending; k++, off += 128)
			memcpy((char *)a + off, tc->pending[k].data, 128);
	}
	b.args.shared_pending_off = off;
	b.args.nr_shared_pending = rp->sig.core->n_pending;
	for (size_t k = 0; k < rp->sig.core->n_pending; k++, off += 128)
		memcpy((char *)a + off, rp->sig.core->pending[k].data, 128);
	/* timers */
	b.args.timers_off = off;
	b.args.nr_timers = rp->timers.nr;
	for (size_t i = 0; i < rp->timers.nr; i++, off += sizeof(struct rst_timer)) {
		const PosixTimer *pt = rp->timers.timers[i];
		struct rst_timer *tm = (struct rst_timer *)((char *)a + off);

		tm->id = pt->id;
		tm->clock = pt->clock;
		tm->notify = pt->notify;
		tm->signo = pt->signo;
		tm->tid = pt->has_tid ? pt->tid : 0;
		tm->sival = pt->sival;
		tm->value_ns = pt->value_ns;
		tm->interval_ns = pt->interval_ns;
		tm->overrun = pt->has_overrun ? pt->overrun : 0;
		tm->sig_pending = pt->sig_pending;
	}
	if (rp->timers.core->has_read_mono_ns)
		b.args.timers_mono = rp->timers.core->read_mono_ns;
	{
		const Itimer *it[3] = { rp->timers.core->real, rp->timers.core->virt,
					rp->timers.core->prof };

		for (int w = 0; w < 3; w++)
			if (it[w]) {
				b.args.itimers[w][0] = it[w]->value_us;
				b.args.itimers[w][1] = it[w]->interval_us;
			}
	}
	/* limits and credentials */
	b.args.nr_rlimits = core->task->n_rlimits;
	for (size_t i = 0; i < core->task->n_rlimits; i++) {
		b.args.rlimits[i][0] = core->task->rlimits[i]->cur;
		b.args.rlimits[i][1] = core->task->rlimits[i]->max;
	}
	if (core->task->creds)
		plan_creds(core->task->creds, &b.args.creds,
			   core->task->has_dumpable ? core->task->dumpable : 1, a, &off);
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + b.args.threads_off) + i;

		if (i && core->threads[i]->creds)
			plan_creds(core->threads[i]->creds, &t->creds, 1, a, &off);
	}
	seccomp_plan(core->task->seccomp, &b.args, (uint8_t *)a, &off);
	b.args.sigacts_off = off;
	b.args.nr_sigacts = signals_plan(&rp->sig, (struct rst_sigaction *)((char *)a + off));
	off += b.args.nr_sigacts * sizeof(struct rst_sigaction);
	b.args.auxv_off = off;
	b.args.auxv_size = rp->mm.core->n_auxv * 8;
	memcpy((char *)a + off, rp->mm.core->auxv, b.args.auxv_size);
	off += b.args.auxv_size;
	if (b.args.verify_crc == 2) { /* the restorer sums without SSE4.2 */
		off = (off + 7) & ~7UL;
		b.args.crc_tab_off = off;
		memcpy((char *)a + off, crc32c_soft_tab(), sizeof(struct crc32c_tab));
		off += sizeof(struct crc32c_tab);
	}
	for (size_t i = 0; i < b.nr_vmas; i++) {
		struct rst_vma *v = (struct rst_vma *)((char *)a + b.args.vmas_off) + i;
		if (v->name_off)
			v->name_off += off;
	}
	if (b.strings_len)
		memcpy((char *)a + off, b.strings, b.strings_len);
	off = PAGE_ALIGN(off + b.strings_len);
	ret = vdso_fill(rp->pid, &rp->mm, &vp, (struct rst_vma *)((char *)a + b.args.vmas_off),
			(uint8_t *)a, &off);
	if (ret)
		return ret;
	memcpy(a, &b.args, sizeof(b.args));
	if (mprotect(region, code_len, PROT_READ | PROT_EXEC)) {
		ret = -errno;
		pr_perror("pid %d: cannot set up the restorer", rp->pid);
		return ret;
	}
	free(b.vmas);
	free(b.runs);
	free(b.strings);

	if (cr_log_level() >= CR_LOG_DEBUG) {
		DIR *d = opendir("/proc/self/fd");
		struct dirent *de;
		char line[512] = "";

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.' && strlen(line) < 480)
				snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s",
					 de->d_name);
		if (d)
			closedir(d);
		pr_debug("pid %d: fds before the restorer:%s (close from %d)", rp->pid, line,
			 b.args.close_from);
	}
	c->sh->procs[idx].blob_start = (uintptr_t)region;
	c->sh->procs[idx].blob_len = total;
	c->sh->procs[idx].args_addr = (uintptr_t)a;
	*entry = (uintptr_t)region;
	*args_p = (uintptr_t)a;
	/* as if called: the return address slot keeps the stack ABI-aligned */
	*stack_p = (uintptr_t)region + total - 8;
	return 0;
}
