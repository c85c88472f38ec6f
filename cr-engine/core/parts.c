/* The table of per-process parts (parts.h), and the small adapters that
 * give each part's functions the table's shape. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dump.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "log.h"
#include "memory.h"
#include "parts.h"
#include "regs.h"
#include "signals.h"
#include "task.h"
#include "timers.h"

#include "restore-ctx.h"

/* ------------------------------------------------------------ memory */

/* The page data (not in a check-only dump), then the map that describes
 * it. */
static int mem_part_write(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret = dump_pages(ctx, p);

	return ret ? ret : write_mm(ctx, p);
}

static int mem_part_load(struct rctx *c, struct rproc *rp)
{
	return mem_load(c->dirfd, rp->pid, &rp->mm);
}

static void mem_part_free(struct rproc *rp)
{
	mem_free(&rp->mm);
}

/* ------------------------------------------------------------ core */

/* core-PID.img: the threads' registers (read before the parts), the task's
 * own state (task.c) and its credentials (creds.c) */
static int core_part_load(struct rctx *c, struct rproc *rp)
{
	return core_load(c->dirfd, rp->pe, &rp->core);
}

static void core_part_free(struct rproc *rp)
{
	core_free(&rp->core);
}

/* The deleted files rp maps or runs (ghost.c): kupdate makes them before
 * the tree.  After the memory map and the core, which name them. */
static int ghosts_part_load(struct rctx *c, struct rproc *rp)
{
	struct rghost *g;
	int ret;

	for (size_t i = 0; i < rp->mm.nr_vmas; i++) {
		const VmaEntry *e = rp->mm.vmas[i];

		if (!e->has_ghost_id)
			continue;
		if (e->kind != VMA_KIND__VMA_FILE_PRIVATE && e->kind != VMA_KIND__VMA_FILE_SHARED) {
			pr_err("image mm-%d.img is damaged: mapping %lx refers to a deleted file "
			       "but maps none",
			       rp->pid, (unsigned long)e->start);
			return -EINVAL;
		}
		ret = files_load_ghost(c->dirfd, &c->files, e->ghost_id, &g);
		if (ret)
			return ret;
		g->mapped = true;
	}
	if (rp->core.task->has_exe_ghost_id) {
		ret = files_load_ghost(c->dirfd, &c->files, rp->core.task->exe_ghost_id, &g);
		if (ret)
			return ret;
		g->mapped = true;
	}
	return 0;
}

/* ------------------------------------------------------------ signals */

static int signals_part_dump(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret = dump_sigactions(ctx, p);

	return ret ? ret : dump_pending(ctx, p);
}

static int signals_part_load(struct rctx *c, struct rproc *rp)
{
	return signals_load(c->dirfd, rp->pid, &rp->sig);
}

static void signals_part_free(struct rproc *rp)
{
	signals_free(&rp->sig);
}

/* ------------------------------------------------------------ timers */

static int timers_part_load(struct rctx *c, struct rproc *rp)
{
	return timers_load(c->dirfd, rp->pe, &rp->timers);
}

static void timers_part_free(struct rproc *rp)
{
	timers_free(&rp->timers);
}

/* ------------------------------------------------------------ fds */

/* fds-PID.img: the process's fds, each naming a file of files.img (loaded
 * with the tree's files before the processes); none for a process that
 * shares its parent's fd table (CLONE_FILES), which links to the process
 * that restores the table */
static int fds_part_load(struct rctx *c, struct rproc *rp)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "fds-%d.img", rp->pid);
	ret = img_reader_open(&r, c->dirfd, name, IMG_FDS);
	if (ret)
		return ret;
	rp->fds = calloc(r.nr ? r.nr : 1, sizeof(*rp->fds));
	if (!rp->fds) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &fd_entry__descriptor, &m)) > 0)
		rp->fds[rp->nr_fds++] = (FdEntry *)m;
	img_reader_close(&r);
	if (!ret)
		ret = files_validate_fds(&c->files, rp->fds, rp->nr_fds, name);
	if (ret)
		return ret;
	if (!rp->pe->clone_files)
		return 0;
	if (rp->nr_fds) {
		pr_err("image %s is damaged: pid %d shares its parent's fd table but has fds of "
		       "its own",
		       name, rp->pid);
		return -EINVAL;
	}
	rp->fdt = rp->parent->fdt ? rp->parent->fdt : rp->parent;
	rp->fdt->fdt_shared = true;
	return 0;
}

static void fds_part_free(struct rproc *rp)
{
	for (size_t k = 0; k < rp->nr_fds; k++)
		fd_entry__free_unpacked(rp->fds[k], NULL);
	free(rp->fds);
	rp->fds = NULL;
	rp->nr_fds = 0;
}

/* ------------------------------------------------------------ the table */

const struct proc_part proc_parts[] = {
	{ "memory map", dump_mm, mem_part_write, NULL, mem_part_load, mem_part_free },
	{ "task", dump_task_misc, write_core, NULL, core_part_load, core_part_free },
	{ "credentials", dump_creds, NULL, NULL, NULL, NULL },
	{ "deleted files mapped", NULL, NULL, NULL, ghosts_part_load, NULL },
	{ "signals", signals_part_dump, write_signals, NULL, signals_part_load, signals_part_free },
	{ "timers", dump_timers, write_timers, timers_free_dump, timers_part_load,
	  timers_part_free },
	{ "fds", dump_files, NULL, NULL, fds_part_load, fds_part_free },
};
const size_t nr_proc_parts = sizeof(proc_parts) / sizeof(proc_parts[0]);
