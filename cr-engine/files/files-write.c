/* Writing what the dump collected: files.img (each open file description
 * once, its kind's part by its row's save) and fds-PID.img (each process's
 * fd table); and freeing it. */
#include <fcntl.h>

#include "dump.h"
#include "fdkind.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "locks.h"
#include "log.h"
#include "namespaces.h"
#include "util.h"

int write_files(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "files.img", IMG_FILES);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_files; i++) {
		struct cr_file *f = &ctx->files[i];
		FileEntry e = FILE_ENTRY__INIT;
		FileOwner owner = FILE_OWNER__INIT;
		const struct fd_kind *k;

		e.id = f->id;
		e.kind = f->kind;
		e.path = f->path;
		e.flags = f->flags;
		e.has_pos = e.has_ino = e.has_size = 1;
		/* in a directory saved whole (tmpdir.c): made again, a new inode */
		if (f->path && ns_saved_path(ctx, f->mnt_owner, f->path))
			e.has_ino = 0;
		e.pos = f->pos;
		e.ino = f->ino;
		e.size = f->size;
		k = fd_kind(f->kind);
		if (k && k->save)
			k->save(f, &e); /* its own part */
		e.n_locks = f->nr_locks;
		e.locks = f->locks;
		if (f->has_owner) {
			e.owner = &owner;
			owner.type = f->own_type;
			owner.pid = f->own_pid;
			owner.signum = f->own_sig;
		}
		img_write(&w, &e.base);
	}
	ret = img_writer_close(&w);
	if (ret)
		return ret;

	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		char name[64];

		if (p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		snprintf(name, sizeof(name), "fds-%d.img", p->pid);
		ret = img_writer_open(&w, ctx->dirfd, name, IMG_FDS);
		if (ret)
			return ret;
		for (int k = 0; k < p->nr_fds; k++) {
			FdEntry e = FD_ENTRY__INIT;

			e.fd = p->fds[k].fd;
			e.file_id = p->fds[k].file_id;
			e.cloexec = p->fds[k].cloexec;
			e.n_locks = p->fds[k].nr_locks;
			e.locks = p->fds[k].locks;
			img_write(&w, &e.base);
		}
		ret = img_writer_close(&w);
		if (ret)
			return ret;
	}
	return 0;
}

void free_files(struct cr_dump_ctx *ctx)
{
	free(ctx->file_order);
	ctx->file_order = NULL;
	for (int i = 0; i < ctx->nr_files; i++) {
		const struct fd_kind *k = fd_kind(ctx->files[i].kind);

		free(ctx->files[i].path);
		if (k && k->free)
			k->free(&ctx->files[i]);
		locks_free(ctx->files[i].locks, ctx->files[i].nr_locks);
	}
	free(ctx->files);
	ctx->files = NULL;
	ctx->nr_files = 0;
	/* the processes (and their fds) may be gone already */
	for (int i = 0; i < ctx->nr_posix_locks; i++)
		locks_free(ctx->posix_locks[i].l, ctx->posix_locks[i].n);
	free(ctx->posix_locks);
	ctx->posix_locks = NULL;
	ctx->nr_posix_locks = 0;
	ghost_free_dump(ctx);
	for (int i = 0; i < ctx->nr_inflight; i++)
		if (ctx->inflight[i].kfd >= 0)
			close(ctx->inflight[i].kfd);
	free(ctx->inflight);
	ctx->inflight = NULL;
	ctx->nr_inflight = 0;
	if (ctx->self && ctx->self->pidfd >= 0)
		close(ctx->self->pidfd);
	free(ctx->self);
	ctx->self = NULL;
}
