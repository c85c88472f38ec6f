/* Dump of one process tree: seize, collect, write, release.
 *
 * The tree is stopped from the first PTRACE_INTERRUPT to the release; on
 * any failure it is resumed exactly as it was and the partial images are
 * removed, so a failed dump never costs a service anything. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "cr.h"
#include "dump.h"
#include "fault.h"
#include "files.h"
#include "ghost.h"
#include "namespaces.h"
#include "image.h"
#include "images/inventory.pb-c.h"
#include "log.h"
#include "memory.h"
#include "mntns.h"
#include "parts.h"
#include "pidns.h"
#include "predump.h"
#include "regs.h"
#include "remote.h"
#include "seccomp.h"
#include "pipes.h"
#include "shmem.h"
#include "sysvshm.h"
#include "signals.h"
#include "task.h"
#include "tcp.h"
#include "udp.h"
#include "timens.h"
#include "unix.h"
#include "util.h"

/* Every file written so far (all but the inventory), with what identifies
 * it: the restore refuses a directory whose files do not match. */
static int list_files(struct cr_dump_ctx *ctx, InventoryFile **files, InventoryFile ***pfiles,
		      size_t *nr)
{
	int fd = fcntl(ctx->dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	size_t n = 0, cap = 0;
	int ret = 0;

	*files = NULL;
	*pfiles = NULL;
	*nr = 0;
	if (!d) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		pr_perror("cannot list the image directory %s", ctx->opts->imgdir);
		return ret;
	}
	while ((de = readdir(d))) {
		InventoryFile *f;

		/* the images (*.img) only: not parent, the link to a pre-dump
		 * below this dump (predump.c), nor whatever else a caller keeps
		 * there (a log), which a restore never reads */
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "inventory.img") || len < 5 ||
		    strcmp(de->d_name + len - 4, ".img"))
			continue;
		if (n == cap) {
			InventoryFile *nf;

			cap = cap ? cap * 2 : 64;
			nf = xrealloc_array(*files, cap, sizeof(**files));
			if (!nf) {
				ret = -ENOMEM;
				break;
			}
			*files = nf;
		}
		f = &(*files)[n];
		inventory_file__init(f);
		f->name = xstrdup(de->d_name);
		if (!f->name) {
			ret = -ENOMEM;
			break;
		}
		n++;
		ret = img_fingerprint(ctx->dirfd, f->name, &f->size, &f->crc);
		if (ret)
			break;
	}
	closedir(d);
	if (!ret) {
		*pfiles = xrealloc_array(NULL, n ? n : 1, sizeof(**pfiles));
		if (!*pfiles)
			ret = -ENOMEM;
		for (size_t i = 0; !ret && i < n; i++)
			(*pfiles)[i] = &(*files)[i];
	}
	if (ret) {
		for (size_t i = 0; i < n; i++)
			free((*files)[i].name);
		free(*files);
		*files = NULL;
		n = 0;
	}
	*nr = n;
	return ret;
}

static int write_inventory(struct cr_dump_ctx *ctx)
{
	InventoryFile *files, **pfiles;
	size_t nr_files = 0;
	InventoryEntry e = INVENTORY_ENTRY__INIT;
	struct img_writer w;
	struct utsname u;
	_cleanup_free_ char *boot_id = NULL;
	int ret;

	uname(&u);
	if (read_proc(&boot_id, NULL, "/proc/sys/kernel/random/boot_id") == 0)
		boot_id[strcspn(boot_id, "\n")] = 0;
	e.format_version = IMG_FORMAT_VERSION;
	e.kernel_release = u.release;
	e.boot_id = boot_id ? boot_id : "";
	e.cycle_id = (char *)ctx->opts->cycle_id;
	e.tool_version = CR_TOOL_VERSION;
	e.root_pid = ctx->procs[0]->pid;
	e.dump_time_ns = now_ns(CLOCK_REALTIME);
	e.xfeatures = cpu_xcr0();
	e.page_size = PAGE_SIZE;
	e.nr_processes = ctx->nr_procs;
	e.frozen_ns = now_ns(CLOCK_MONOTONIC) - ctx->t_seized;
	e.has_total_pages = 1;
	e.total_pages = ctx->total_pages;
	ret = timens_clocks(ctx->procs[0]->pid, &e.clock_monotonic_ns, &e.clock_boottime_ns);
	if (ret)
		return ret;
	e.has_clock_monotonic_ns = e.has_clock_boottime_ns = 1;
	if (ctx->opts->pre_dump)
		e.has_pre_dump = e.pre_dump = 1;
	ret = list_files(ctx, &files, &pfiles, &nr_files);
	if (ret)
		return ret;
	e.n_files = nr_files;
	e.files = pfiles;
	ret = img_writer_open(&w, ctx->dirfd, "inventory.img", IMG_INVENTORY);
	if (!ret) {
		img_write(&w, &e.base);
		ret = img_writer_close(&w);
	}
	for (size_t i = 0; i < nr_files; i++)
		free(files[i].name);
	free(files);
	free(pfiles);
	return ret;
}

/* The tree goes on (a failed dump, or --leave-running): the packets of its
 * connections flow again, and a window probe tells each peer so. */
static void sockets_resume(struct cr_dump_ctx *ctx)
{
	netlock_del(ctx->locked, ctx->nr_locked);
	dump_unlock_made(ctx);
	tcp_dump_resume(ctx);
	udp_dump_resume(ctx);
}

/* test only (KUPDATE_FAULT=kill-dump, interrupt-dump: fault.h): kupdate
 * dies, or gets SIGINT, in the middle of a dump, once the first process
 * that holds a connection is dumped (its connections read and locked; the
 * last process if none does), nothing written yet */
static void fault_kill_dump(void)
{
	/* a long dump: the tree's peers back their timers off meanwhile */
	if (cr_fault("slow-dump")) {
		fprintf(stderr, "kupdate: slow-dump fault (KUPDATE_FAULT): 2 s in the middle of a "
				"dump\n");
		usleep(2000000);
	}
	if (cr_fault("interrupt-dump")) {
		fprintf(stderr, "kupdate: interrupt-dump fault (KUPDATE_FAULT): SIGINT in the "
				"middle of a dump\n");
		kill(getpid(), SIGINT);
	}
	if (!cr_fault("kill-dump"))
		return;
	fprintf(stderr, "kupdate: kill-dump fault (KUPDATE_FAULT): SIGKILL in the middle of a "
			"dump\n");
	kill(getpid(), SIGKILL);
}

static int check_stop(void)
{
	return cr_stop_requested() ? -EINTR : 0;
}

/* Where a dump's time goes, at debug level (-vv, and always in a log
 * file): each step's end, from the start of the dump. */
static void step_done(const struct cr_dump_ctx *ctx, const struct cr_proc *p, const char *what)
{
	if (p)
		pr_debug("dump: pid %d: %s at +%.1f ms", p->pid, what,
			 (now_ns(CLOCK_MONOTONIC) - ctx->t_start) / 1e6);
	else
		pr_debug("dump: %s at +%.1f ms", what,
			 (now_ns(CLOCK_MONOTONIC) - ctx->t_start) / 1e6);
}

static int dump_process_in(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret;

	ret = remote_find_syscall(p->pid, &p->syscall_ip, p->vdso_range);
	if (ret)
		return ret;
	for (int i = 0; i < p->nr_threads; i++) {
		ret = dump_thread(ctx, p, &p->threads[i]);
		if (!ret)
			ret = dump_thread_misc(ctx, p, &p->threads[i]);
		if (ret)
			return ret;
	}
	step_done(ctx, p, "threads");
	/* before its fds are looked at: a pre-dump's userfaultfd goes */
	ret = prev_collect(ctx, p);
	for (size_t i = 0; !ret && i < nr_proc_parts; i++) {
		if (!proc_parts[i].dump)
			continue;
		ret = proc_parts[i].dump(ctx, p);
		if (!ret)
			step_done(ctx, p, proc_parts[i].name);
	}
	for (size_t i = 0; !ret && !ctx->check_only && i < nr_proc_parts; i++)
		if (proc_parts[i].write)
			ret = proc_parts[i].write(ctx, p);
	if (!ret && !ctx->check_only)
		step_done(ctx, p, "pages and images written");
	return ret;
}

/* The paths p sees, looked at through its own root when it lives in a
 * mount namespace a process of the tree made (a container's: mntns.c);
 * its maker is the nearest ancestor that made one */
static void enter_root(struct cr_dump_ctx *ctx, struct cr_proc *p, char *saved, size_t len)
{
	struct cr_proc *a = p;

	snprintf(saved, len, "%s", ctx->root_prefix);
	while (a && !(a->made_ns & CLONE_NEWNS) && a != ctx->procs[0])
		a = a->parent;
	ctx->mnt_owner = a && a != ctx->procs[0] ? a->pid : 0;
	if (ctx->mnt_owner)
		snprintf(ctx->root_prefix, sizeof(ctx->root_prefix), "/proc/%d/root", p->pid);
}

static int dump_process(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char saved[sizeof(ctx->root_prefix)];
	int ret;

	if (p->state == TASK_STATE__TASK_ZOMBIE)
		return 0;
	/* made_ns is known once check_refusals looked (task part); a
	 * container's init looks at its own paths from its first part on */
	if (ns_proc_made_mnt(ctx, p))
		p->made_ns |= CLONE_NEWNS;
	enter_root(ctx, p, saved, sizeof(saved));
	ret = dump_process_in(ctx, p);
	snprintf(ctx->root_prefix, sizeof(ctx->root_prefix), "%s", saved);
	ctx->mnt_owner = 0;
	return ret;
}
static void free_proc(struct cr_proc *p)
{
	for (int i = 0; i < p->nr_threads; i++) {
		free(p->threads[i].xsave);
		free(p->threads[i].pending);
		if (p->threads[i].creds)
			free(p->threads[i].creds->groups);
		free(p->threads[i].creds);
	}
	free(p->shared_pending);
	for (size_t i = 0; i < nr_proc_parts; i++)
		if (proc_parts[i].release)
			proc_parts[i].release(p);
	free(p->creds.groups);
	seccomp_free_dump(&p->seccomp);
	free(p->threads);
	free(p->ns_ids);
	free(p->made_hostname);
	free(p->made_domainname);
	userns_free_dump(p);
	mntns_free_dump(p);
	netlinks_free(p);
	free(p->cgroup);
	free(p->cgroup_ns_root);
	for (int i = 0; i < p->nr_vmas; i++) {
		free(p->vmas[i].s.path);
		free(p->vmas[i].name);
	}
	free(p->vmas);
	free(p->auxv);
	free(p->vdso_image);
	free(p->runs);
	free(p->inpar);
	free(p->fds);
	free(p->children);
	free(p->exe_path);
	free(p->cwd);
	free(p->root);
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

/* The image directory: created if missing, and it must hold no images. */
static int open_imgdir(const char *path, bool *created)
{
	DIR *d;
	struct dirent *de;
	int fd;

	*created = false;
	if (mkdir(path, 0700) == 0)
		*created = true;
	else if (errno != EEXIST) {
		int ret = -errno;
		pr_perror("cannot create image directory %s", path);
		return ret;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;
		pr_perror("cannot open image directory %s", path);
		return ret;
	}
	d = opendir(path);
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n > 4 && !strcmp(de->d_name + n - 4, ".img")) {
			pr_err("image directory %s already holds images (%s); use an empty "
			       "directory",
			       path, de->d_name);
			closedir(d);
			close(fd);
			return -EEXIST;
		}
	}
	if (d)
		closedir(d);
	return fd;
}

/* Remove what a failed dump wrote. */
static void remove_images(int dirfd, const char *path, bool created)
{
	DIR *d = opendir(path);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if ((n > 4 && !strcmp(de->d_name + n - 4, ".img")) ||
		    (n > 4 && !strcmp(de->d_name + n - 4, ".tmp")) || !strcmp(de->d_name, "parent"))
			unlinkat(dirfd, de->d_name, 0);
	}
	if (d)
		closedir(d);
	if (created)
		rmdir(path);
}

struct cr_dump_session {
	struct cr_dump_ctx ctx;
	struct cr_dump_stats *st;
};

static void free_ctx(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_procs; i++)
		free_proc(ctx->procs[i]);
	free(ctx->procs);
	free_files(ctx);
	free(ctx->locked);
	free(ctx->locked_made);
	cgroups_free_dump(ctx);
	netlock_close(ctx->netlock);
	tcp_dump_close(ctx);
	free(ctx->tcp_sks);
	udp_dump_close(ctx);
	if (ctx->sk_collected)
		sockdiag_free(&ctx->sk);
	free(ctx->merged_net);
	shmem_free_dump(ctx);
	pipes_free_dump(ctx);
	ns_free_dump(ctx);
	if (ctx->dirfd >= 0)
		close(ctx->dirfd);
	if (ctx->prev_dirfd >= 0)
		close(ctx->prev_dirfd);
	free(ctx->prev_uffd);
	for (int i = 0; i < ctx->nr_held_uffd; i++)
		close(ctx->held_uffd[i]);
	free(ctx->held_uffd);
}

static void fill_stats(struct cr_dump_ctx *ctx, struct cr_dump_stats *st)
{
	if (!st)
		return;
	st->pages = ctx->total_pages;
	st->zero_pages = ctx->zero_pages;
	st->cow_pages = ctx->cow_pages;
	st->frozen_ns =
		(ctx->t_released ? ctx->t_released : now_ns(CLOCK_MONOTONIC)) - ctx->t_seized;
	st->total_ns = now_ns(CLOCK_MONOTONIC) - ctx->t_start;
	st->processes = ctx->nr_procs;
	st->threads = ctx->nr_threads;
	{
		struct ghost_stats gs;

		ghost_stats(ctx, &gs);
		st->deleted_files = gs.files;
		st->deleted_mapped = gs.mapped;
		st->deleted_bytes = gs.bytes;
		st->deleted_mapped_bytes = gs.mapped_bytes;
		st->deleted_ns = gs.ns;
	}
	st->namespaces = ctx->ns ? (unsigned)ctx->ns->own : 0;
	st->containers = 0;
	for (int i = 0; i < ctx->nr_procs; i++) {
		const struct cr_proc *p = ctx->procs[i];

		st->containers += p->parent && p->pid_depth > p->parent->pid_depth;
	}
}

/* what the deleted files cost (ghost.c), at the dump's summary level */
static void log_ghosts(const struct cr_dump_ctx *ctx)
{
	struct ghost_stats gs;

	ghost_stats(ctx, &gs);
	if (!gs.files || ctx->check_only)
		return;
	pr_info("pid %d: saved %u deleted mapped file(s), %" PRIu64 " bytes, and %u unlinked "
		"open file(s), %" PRIu64 " bytes, in %.1f ms",
		ctx->procs[0]->pid, gs.mapped, gs.mapped_bytes, gs.files - gs.mapped,
		gs.bytes - gs.mapped_bytes, gs.ns / 1e6);
}

static int write_images(struct cr_dump_ctx *ctx)
{
	int ret = write_pstree(ctx);

	if (!ret)
		ret = write_files(ctx);
	if (!ret)
		ret = shmem_write(ctx);
	if (!ret)
		ret = pipes_write(ctx);
	if (!ret)
		ret = ns_write(ctx);
	if (!ret)
		ret = cgroups_write(ctx);
	/* the inventory last: a directory without one is not a dump */
	if (!ret)
		ret = write_inventory(ctx);
	return ret;
}

/* Pre-dump, while the tree is stopped: what changed since --prev, and the
 * tracking of the parent dump disarmed in every process (a userfaultfd
 * goes away only with its last copy, in a child forked since, say) ... */
static int predump_collect(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret;

	if (p->state == TASK_STATE__TASK_ZOMBIE)
		return 0;
	ret = remote_find_syscall(p->pid, &p->syscall_ip, p->vdso_range);
	if (!ret)
		ret = dump_thread(ctx, p, &p->threads[0]);
	if (!ret)
		ret = prev_collect(ctx, p);
	return ret;
}

/* ... then the pages there are, and the tracking of writes armed again */
static int predump_process(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret;

	if (p->state == TASK_STATE__TASK_ZOMBIE)
		return 0;
	ret = dump_mm(ctx, p);
	if (!ret)
		ret = mem_scan_pages(ctx, p);
	if (!ret)
		ret = track_arm(ctx, p);
	return ret;
}

/* The pages are copied once the tree runs again. */
static int pre_dump(struct cr_dump_ctx *ctx, const struct cr_dump_opts *o, bool created)
{
	int ret = 0;

	for (int i = 0; !ret && i < ctx->nr_procs; i++)
		ret = predump_collect(ctx, ctx->procs[i]);
	for (int i = 0; !ret && i < ctx->nr_procs; i++)
		ret = predump_process(ctx, ctx->procs[i]);
	if (ret) {
		for (int i = 0; i < ctx->nr_procs; i++)
			track_disarm(ctx, ctx->procs[i]);
		release_tree(ctx, false);
		remove_images(ctx->dirfd, o->imgdir, created);
		return ret;
	}
	release_tree(ctx, false);
	for (int i = 0; !ret && i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];

		if (p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		ret = check_stop();
		if (!ret)
			ret = mem_write_predump(ctx, p);
		if (!ret && o->progress) {
			struct cr_dump_progress pg = { i + 1, ctx->nr_procs,
						       ctx->total_pages * PAGE_SIZE };

			o->progress(&pg, o->progress_arg);
		}
	}
	if (!ret)
		ret = write_inventory(ctx);
	if (ret) {
		pr_err("pre-dump of pid %d failed: %s", ctx->procs[0]->pid,
		       ret == -EINTR && cr_stop_requested() ? strsignal(cr_stop_requested())
							    : strerror(-ret));
		remove_images(ctx->dirfd, o->imgdir, created);
	}
	return ret;
}

int cr_dump_begin(const struct cr_dump_opts *o, struct cr_dump_stats *st,
		  struct cr_dump_session **out)
{
	struct cr_dump_session *s = xzalloc(sizeof(*s));
	struct cr_dump_ctx *ctx;
	bool created = false;
	int ret;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	ctx = &s->ctx;
	ctx->opts = o;
	ctx->check_only = o->check_only;
	ctx->have_pagemap_scan = -1;
	ctx->t_start = now_ns(CLOCK_MONOTONIC);
	ctx->dirfd = -1;
	ctx->prev_dirfd = -1;
	if (o->pre_dump && o->check_only)
		return -EINVAL;
	if (!o->check_only) {
		ctx->dirfd = open_imgdir(o->imgdir, &created);
		if (ctx->dirfd < 0) {
			ret = ctx->dirfd;
			free(s);
			return ret;
		}
	}
	mem_find_zero_pfns(ctx);
	ret = o->pre_dump ? track_method(&ctx->track) : 0;
	if (!ret && o->prev_dir)
		ret = prev_open(ctx);
	if (ret) {
		if (!o->check_only)
			remove_images(ctx->dirfd, o->imgdir, created);
		free_ctx(ctx);
		free(s);
		return ret;
	}

	ret = check_stop();
	if (!ret)
		ret = seize_tree(ctx);
	if (!ret)
		step_done(ctx, NULL, "tree seized");
	/* test only: the tree's timers run on while its dump reads it */
	if (!ret && cr_fault("slow-seize")) {
		fprintf(stderr, "kupdate: slow-seize fault (KUPDATE_FAULT): 1 s between the seize "
				"and the dump\n");
		usleep(1000000);
	}
	if (!ret && o->seized)
		ret = o->seized(o->cb_arg);
	/* the tree's namespaces: the paths the dump looks at go through them */
	if (!ret)
		ret = ns_dump(ctx);
	if (!ret)
		ret = pidns_dump(ctx);
	if (!ret)
		ret = cgroups_dump(ctx);
	if (!ret && o->pre_dump) {
		ret = pre_dump(ctx, o, created);
		fill_stats(ctx, st);
		free_ctx(ctx);
		free(s);
		return ret;
	}
	bool faulted = false;

	for (int i = 0; !ret && i < ctx->nr_procs; i++) {
		ret = check_stop();
		if (!ret)
			ret = dump_process(ctx, ctx->procs[i]);
		/* (at the first process that locked a connection, or the last) */
		if (!ret && !o->check_only && !faulted &&
		    (ctx->nr_locked || ctx->nr_locked_made || i == ctx->nr_procs - 1)) {
			faulted = true;
			fault_kill_dump();
		}
		if (!ret && o->progress && !o->check_only) {
			struct cr_dump_progress pg = { i + 1, ctx->nr_procs,
						       ctx->total_pages * PAGE_SIZE };

			o->progress(&pg, o->progress_arg);
		}
	}
	if (!ret)
		ret = files_resolve_inflight(ctx);
	if (!ret)
		ret = unix_check_peers(ctx);
	if (!ret)
		ret = sysvshm_check_outside(ctx);
	if (!ret)
		ret = files_check_outside(ctx);
	if (!ret)
		ret = netns_check_peers(ctx);
	if (!ret)
		ret = check_tree(ctx);
	if (!ret)
		ret = check_stop();
	if (!ret)
		step_done(ctx, NULL, "processes dumped");
	if (!ret && !o->check_only)
		ret = write_images(ctx);
	if (!ret)
		step_done(ctx, NULL, "images written");
	if (!ret)
		log_ghosts(ctx);
	ns_dump_done(ctx);

	if (ret || o->check_only) {
		sockets_resume(ctx);
		release_tree(ctx, false);
		if (ret && !o->check_only)
			remove_images(ctx->dirfd, o->imgdir, created);
		if (ret == -EINTR && cr_stop_requested())
			pr_err("pid %d: dump interrupted (%s): the tree runs on as it was, its "
			       "connections flow, no image is left",
			       ctx->procs ? ctx->procs[0]->pid : o->root,
			       strsignal(cr_stop_requested()));
		if (ret && !cr_log_errors())
			pr_err("dump of pid %d failed: %s",
			       ctx->procs ? ctx->procs[0]->pid : o->root, strerror(-ret));
		fill_stats(ctx, st);
		free_ctx(ctx);
		free(s);
		return ret;
	}
	fill_stats(ctx, st);
	netns_leave(ctx); /* cr_dump_end() enters it again */
	s->st = st;
	*out = s;
	return 0;
}

void cr_dump_end(struct cr_dump_session *s, bool kill_it)
{
	struct cr_dump_ctx *ctx = &s->ctx;

	/* the tree's network namespace, if it has its own: its lock, the
	 * probes of a tree that goes on (free_ctx() leaves it) */
	netns_enter(ctx);
	if (!kill_it) {
		sockets_resume(ctx);
		release_tree(ctx, false);
	} else {
		/* the last step: its connections back in repair mode, then the
		 * tree killed and our copies closed: no FIN, no RST; the lock
		 * stays until the restore */
		tcp_dump_repair(ctx);
		netlinks_cut(ctx);
		release_tree(ctx, true);
		tcp_dump_close(ctx);
		step_done(ctx, NULL, "tree killed");
	}
	fill_stats(ctx, s->st);
	free_ctx(ctx);
	free(s);
}

int cr_dump(const struct cr_dump_opts *o, struct cr_dump_stats *st)
{
	struct cr_dump_session *s;
	int ret = cr_dump_begin(o, st, &s);

	if (ret || !s)
		return ret;
	cr_dump_end(s, !o->leave_running);
	return 0;
}
