/* Loading files.img (and pipes.img, the ghosts files.img names) for a
 * restore, and checking it: what no kind could restore is refused before
 * anything is made; each kind checks its own part (its row's validate). */
#include <fcntl.h>

#include "fdinfo.h"
#include "fdkind.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "locks.h"
#include "log.h"
#include "pipes.h"
#include "tty.h"
#include "util.h"

int files_read(int dirfd, FileEntry ***out, size_t *nr)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret;

	*out = NULL;
	*nr = 0;
	ret = img_reader_open(&r, dirfd, "files.img", IMG_FILES);
	if (ret)
		return ret;
	*out = calloc(r.nr ? r.nr : 1, sizeof(**out));
	if (!*out) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &file_entry__descriptor, &m)) > 0)
		(*out)[(*nr)++] = (FileEntry *)m;
	img_reader_close(&r);
	return ret < 0 ? ret : 0;
}

int files_load(int dirfd, struct rfiles *f)
{
	int ret;

	memset(f, 0, sizeof(*f));
	ret = files_read(dirfd, &f->files, &f->nr_files);
	if (ret)
		return ret;
	ret = pipes_load(dirfd, &f->pipes, &f->nr_pipes);
	if (ret)
		return ret;
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		const struct fd_kind *k = fd_kind(e->kind);
		bool piped = e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO;

		if (!k || !e->path[0] || (piped && !e->has_pipe_id) ||
		    (e->kind == FILE_KIND__FILE_MEMFD && !e->has_shmid) ||
		    (e->has_ghost_id && e->kind != FILE_KIND__FILE_REG) ||
		    (e->fifo_removed && (e->kind != FILE_KIND__FILE_FIFO || e->path[0] != '/')) ||
		    (e->n_locks && !k->lockable)) {
			pr_err("image files.img is damaged: entry %zu has an invalid kind or path",
			       i);
			return -EINVAL;
		}
		if (locks_validate(e->locks, e->n_locks, false, "files.img"))
			return -EINVAL;
		if (e->owner && ((e->owner->type != F_OWNER_TID && e->owner->type != F_OWNER_PID &&
				  e->owner->type != F_OWNER_PGRP) ||
				 e->owner->pid < 0 || e->owner->signum > 64)) {
			pr_err("image files.img is damaged: entry %zu has an invalid signal owner",
			       i);
			return -EINVAL;
		}
		ret = k->validate ? k->validate(f, e) : 0;
		if (ret)
			return ret;
		if (e->has_ghost_id) {
			ret = files_load_ghost(dirfd, f, e->ghost_id, NULL);
			if (ret)
				return ret;
		}
		/* the dump writes them in the order of their ids, which
		 * files_index() relies on */
		if (i && e->id <= f->files[i - 1]->id) {
			pr_err("image files.img is damaged: file %u appears twice or out of order",
			       e->id);
			return -EINVAL;
		}
		if (piped && !files_pipe(f, e->pipe_id)) {
			pr_err("image files.img refers to pipe %lu, which pipes.img lacks",
			       (unsigned long)e->pipe_id);
			return -EINVAL;
		}
	}
	/* the files queued messages carry (SCM_RIGHTS) are in files.img */
	for (size_t i = 0; i < f->nr_files; i++) {
		const UnixSk *u = f->files[i]->usk;

		for (size_t q = 0; f->files[i]->kind == FILE_KIND__FILE_UNIX && q < u->n_queue; q++)
			for (size_t k = 0; k < u->queue[q]->n_fds; k++)
				if (u->queue[q]->n_fds > 253 ||
				    files_index(f, u->queue[q]->fds[k]) == (size_t)-1) {
					pr_err("image files.img is damaged: unix socket %u carries "
					       "file %u in flight, which it lacks",
					       f->files[i]->id, u->queue[q]->fds[k]);
					return -EINVAL;
				}
	}
	f->desc = calloc(f->nr_files ? f->nr_files : 1, sizeof(*f->desc));
	f->pipe_owner = calloc(f->nr_pipes ? f->nr_pipes : 1, sizeof(*f->pipe_owner));
	f->tty = calloc(1, sizeof(*f->tty));
	if (!f->desc || !f->pipe_owner || !f->tty)
		return -ENOMEM;
	return 0;
}

void files_free(struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		ghost_free(&f->ghosts[i]);
	free(f->ghosts);
	if (f->tty) {
		tty_close_pairs(f->tty);
		free(f->tty->p);
		free(f->tty);
	}
	for (size_t i = 0; i < f->nr_files; i++)
		file_entry__free_unpacked(f->files[i], NULL);
	free(f->files);
	pipes_free(f->pipes, f->nr_pipes);
	free(f->desc);
	free(f->pipe_owner);
	memset(f, 0, sizeof(*f));
}

int files_validate_fds(const struct rfiles *f, FdEntry **fds, size_t nr_fds, const char *img)
{
	for (size_t i = 0; i < nr_fds; i++) {
		if (fds[i]->fd < 0 || fds[i]->fd >= (1 << 20)) {
			pr_err("image %s is damaged: fd number %d", img, fds[i]->fd);
			return -EINVAL;
		}
		if (i && fds[i]->fd <= fds[i - 1]->fd) {
			pr_err("image %s is damaged: fds out of order", img);
			return -EINVAL;
		}
		if (files_index(f, fds[i]->file_id) == (size_t)-1) {
			pr_err("image %s is damaged: fd %d refers to unknown file %u", img,
			       fds[i]->fd, fds[i]->file_id);
			return -EINVAL;
		}
		if (locks_validate(fds[i]->locks, fds[i]->n_locks, true, img) ||
		    (fds[i]->n_locks &&
		     !fd_kind_lockable(f->files[files_index(f, fds[i]->file_id)]->kind))) {
			pr_err("image %s is damaged: fd %d has invalid locks", img, fds[i]->fd);
			return -EINVAL;
		}
	}
	return 0;
}
