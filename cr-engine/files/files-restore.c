/* Restoring fd tables.  A description held by one process is opened by
 * that process in place.  A description held by several processes (so
 * that they keep sharing its offset, or the two ends of one pipe) is
 * created by the closest common ancestor of its holders before it forks,
 * on a "transport" fd above every fd the tree uses; the holders inherit
 * it, dup it onto their fd numbers, and the restorer closes every
 * transport fd at the end.  Who creates what, and on which transport fd:
 * files-plan.c.  Each description is its kind's (its row's restore,
 * fdkind.c); pipes, unix socket pairs and the queues that carry fds are
 * made here, across kinds. */
#include <fcntl.h>

#include "fdinfo.h"
#include "fdkind.h"
#include "files.h"
#include "ghost.h"
#include "locks.h"
#include "log.h"
#include "proc.h"
#include "pipes.h"
#include "restore-ctx.h"
#include "tty.h"
#include "unix.h"
#include "util.h"

/* the files made again once every description of them is open */
static void close_ghosts(struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		if (f->ghosts[i].fd >= 0) {
			close(f->ghosts[i].fd);
			f->ghosts[i].fd = -1;
		}
}

/* Create one pipe object and every description of it, on transport fds. */
static int create_pipe_descs(struct rfiles *f, size_t pi, pid_t pid)
{
	PipeEntry *pe = f->pipes[pi];
	int p[2] = { -1, -1 }, anchor = -1, ret = 0;
	const char *fifo = NULL;

	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_FIFO && f->files[i]->pipe_id == pe->id)
			fifo = f->files[i]->path;
	if (fifo) {
		anchor = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (anchor < 0)
			return pr_errno("pid %d: cannot open the FIFO %s", pid, fifo);
		anchor = files_lift(f, anchor);
		if (anchor < 0)
			return anchor;
		ret = pipe_fill(pe, anchor);
	} else {
		if (pipe2(p, O_CLOEXEC))
			return pr_errno("pid %d: cannot create a pipe", pid);
		p[0] = files_lift(f, p[0]);
		p[1] = files_lift(f, p[1]);
		if (p[0] < 0 || p[1] < 0) {
			if (p[0] >= 0)
				close(p[0]);
			if (p[1] >= 0)
				close(p[1]);
			return -EMFILE;
		}
		ret = pipe_fill(pe, p[1]);
	}
	for (size_t i = 0; i < f->nr_files && !ret; i++) {
		FileEntry *e = f->files[i];
		int acc = e->flags & O_ACCMODE, fd;
		char path[64];

		if ((e->kind != FILE_KIND__FILE_PIPE && e->kind != FILE_KIND__FILE_FIFO) ||
		    e->pipe_id != pe->id || f->desc[i].tfd < 0)
			continue;
		/* each description its own open of the pipe: both ends are open
		 * meanwhile, so none of these opens waits */
		if (!fifo)
			snprintf(path, sizeof(path), "self/fd/%d", acc == O_WRONLY ? p[1] : p[0]);
		fd = fifo ? open(fifo, acc | O_NONBLOCK | O_CLOEXEC)
			  : proc_open(path, acc | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			ret = pr_errno("pid %d: cannot open an end of pipe %lu", pid,
				       (unsigned long)pe->id);
			break;
		}
		ret = files_set_fl(fd, e->flags, e->path);
		if (!ret)
			ret = files_place(fd, f->desc[i].tfd);
	}
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (anchor >= 0)
		close(anchor);
	return ret;
}

/* A FIFO whose path was removed is made there for its opens, then removed. */
static int create_pipe(struct rfiles *f, size_t pi, pid_t pid)
{
	const FileEntry *removed = NULL;
	int ret;

	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_FIFO &&
		    f->files[i]->pipe_id == f->pipes[pi]->id && f->files[i]->fifo_removed)
			removed = f->files[i];
	if (removed && (ret = fifo_make(removed, pid)))
		return ret;
	ret = create_pipe_descs(f, pi, pid);
	if (removed)
		fifo_unmake(removed);
	return ret;
}

/* A description that is neither a pipe nor half of a pair: its kind's. */
static int create_desc(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd)
{
	char what[96];

	snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, fd);
	return fd_kind(e->kind)->restore(f, e, rp, fd, what);
}

static int late_desc(const struct rfiles *f, size_t i, int sk, pid_t pid, int fd)
{
	char what[96];

	if (!f->desc[i].late)
		return 0;
	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	if (f->files[i]->usk->has_bound_in)
		return unix_bind_late(sk, f->files[i]->usk, what);
	return unix_connect_late(sk, f->files[i]->usk, what);
}

/* A session leader takes its terminal before it forks (its session
 * inherits it) and before anything opens /dev/tty. */
static int take_ctty(struct rfiles *f, struct rproc *rp)
{
	if (rp == FILES_TOOL || !rp->pe->has_ctty)
		return 0;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_TTY && f->files[i]->tty->master &&
		    f->files[i]->tty->index == rp->pe->ctty && f->desc[i].tfd >= 0)
			return tty_set_ctty(f->desc[i].tfd, rp->pe->ctty, rp->pid);
	return -EINVAL;
}

/* the fd of a file in flight, in the process that fills a queue */
static int inflight_fd(void *arg, uint32_t id)
{
	const struct rfiles *f = arg;
	size_t i = files_index(f, id);

	if (i == (size_t)-1 || f->desc[i].tfd < 0 || fcntl(f->desc[i].tfd, F_GETFD) < 0)
		return -EBADF;
	return f->desc[i].tfd;
}

/* Once every description rp makes exists (and those its ancestors made,
 * which it inherited): the queues that carry fds, each message with the
 * files it carried.  A description in flight that no process holds gets
 * its file status flags first (a holder would set them, finish_status). */
static int fill_carriers(struct rfiles *f, struct rproc *rp)
{
	struct unix_fds res = { inflight_fd, f };
	int ret;

	for (size_t i = 0; i < f->nr_files; i++) {
		const FileEntry *e = f->files[i];
		char what[96];

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 || !f->desc[i].inflight ||
		    f->desc[i].first || e->kind == FILE_KIND__FILE_PIPE ||
		    e->kind == FILE_KIND__FILE_FIFO || (e->flags & O_PATH))
			continue;
		snprintf(what, sizeof(what), "file %u (%s), in flight", e->id, e->path);
		ret = files_set_fl(f->desc[i].tfd, e->flags, what);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < f->nr_files; i++) {
		const struct rdesc *d = &f->desc[i];
		int pair = d->pair;
		char what[96];

		if (d->owner != rp || d->tfd < 0 ||
		    !(d->carrier || (pair >= 0 && f->desc[pair].carrier)) ||
		    (pair >= 0 && (size_t)pair < i))
			continue;
		if (pair >= 0) {
			snprintf(what, sizeof(what), "pid %d: unix socket pair %u/%u", rp->pid,
				 f->files[i]->usk->ino, f->files[pair]->usk->ino);
			ret = unix_fill_pair(d->tfd, f->desc[pair].tfd, f->files[i]->usk,
					     f->files[pair]->usk, what, &res);
		} else {
			snprintf(what, sizeof(what), "pid %d: unix socket %u", rp->pid,
				 f->files[i]->usk->ino);
			ret = unix_fill(d->tfd, d->via, f->files[i]->usk, what, &res);
			f->desc[i].via = -1; /* closed */
		}
		if (ret)
			return ret;
	}
	return 0;
}

int files_create_owned(struct rfiles *f, struct rproc *rp)
{
	int ret;

	/* pseudo-terminals first: then the controlling terminal */
	for (size_t i = 0; i < f->nr_files; i++) {
		int fd;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 ||
		    f->files[i]->kind != FILE_KIND__FILE_TTY)
			continue;
		fd = create_desc(f, f->files[i], rp, f->desc[i].tfd);
		if (fd < 0)
			return fd;
		ret = files_place(fd, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	tty_close_pairs(f->tty);
	ret = take_ctty(f, rp);
	if (ret)
		return ret;
	for (size_t pi = 0; pi < f->nr_pipes; pi++) {
		if (f->pipe_owner[pi] != rp)
			continue;
		ret = create_pipe(f, pi, rp->pid);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		int fd, pair = f->desc[i].pair;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 ||
		    e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO ||
		    e->kind == FILE_KIND__FILE_TTY)
			continue;
		if (pair >= 0) {
			int fa, fb;
			char what[96];

			if ((size_t)pair < i)
				continue; /* made with its other end */
			snprintf(what, sizeof(what), "pid %d: unix socket pair %u/%u", rp->pid,
				 e->usk->ino, f->files[pair]->usk->ino);
			ret = unix_create_pair(e->usk, f->files[pair]->usk, &fa, &fb, what,
					       f->desc[i].carrier || f->desc[pair].carrier);
			if (ret)
				return ret;
			/* fb must survive fa's placement */
			fb = files_lift(f, fb);
			if (fb < 0) {
				close(fa);
				return fb;
			}
			ret = files_place(fa, f->desc[i].tfd);
			if (!ret)
				ret = files_place(fb, f->desc[pair].tfd);
			if (ret)
				return ret;
			continue;
		}
		if (f->desc[i].carrier) {
			char what[96];
			int via = -1;

			snprintf(what, sizeof(what), "pid %d: unix socket %u", rp->pid,
				 e->usk->ino);
			fd = unix_create(e->usk, f->listeners, what, &via);
			if (fd >= 0 && via >= 0) {
				f->desc[i].via = files_lift(f, via);
				if (f->desc[i].via < 0) {
					close(fd);
					return -EMFILE;
				}
			}
		} else {
			fd = create_desc(f, e, rp, f->desc[i].tfd);
		}
		if (fd < 0)
			return fd;
		ret = files_place(fd, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	ret = fill_carriers(f, rp);
	close_ghosts(f);
	return ret;
}

int files_bind_in_container(const struct rfiles *f, pid_t maker)
{
	for (size_t i = 0; i < f->nr_files; i++) {
		const UnixSk *u =
			f->files[i]->kind == FILE_KIND__FILE_UNIX ? f->files[i]->usk : NULL;
		char what[96];
		int ret;

		if (!u || !u->has_bound_in || u->bound_in != maker)
			continue;
		snprintf(what, sizeof(what), "unix socket %u", u->ino);
		/* its holder, an ancestor, made it before it forked */
		if (f->desc[i].tfd < 0 || fcntl(f->desc[i].tfd, F_GETFD) < 0) {
			pr_err("%s: bound in the container pid %d made, is not held by an ancestor "
			       "of it; kupdate cannot bind it there",
			       what, maker);
			return -EOPNOTSUPP;
		}
		ret = unix_bind_in_built(f->desc[i].tfd, u, what);
		if (ret)
			return ret;
	}
	return 0;
}

int files_prepare_owned(struct rfiles *f, struct rproc *rp)
{
	for (size_t i = 0; i < f->nr_files; i++) {
		int ret;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 || !f->desc[i].late)
			continue;
		ret = late_desc(f, i, f->desc[i].tfd, rp->pid, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	return 0;
}

void files_unlink_removed(const struct rfiles *f, bool failed)
{
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_UNIX)
			unix_unlink_removed(f->files[i]->usk, failed);
}

/* rp holds the transport fds of what its ancestors (and kupdate) made */
static bool inherited(const struct rproc *owner, const struct rproc *rp)
{
	if (owner == FILES_TOOL)
		return true;
	for (; rp; rp = rp->parent)
		if (rp == owner)
			return true;
	return false;
}

/* The file status flags that open(2) and the kinds' own calls do not set
 * (O_ASYNC never; a socket is made without any), and the owner of the
 * description's signals, once every process exists: an owner can be any
 * process or group of the tree.  Set on each fd: a description several
 * processes share gets the same values again. */
static int finish_status(const FileEntry *e, pid_t pid, int fd)
{
	bool sock = fd_kind_socket(e->kind);
	char what[96];
	int ret;

	if (e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO ||
	    (e->flags & O_PATH))
		return 0; /* set where the pipe's descriptions are made; none on O_PATH */
	if (e->owner) {
		struct f_owner_ex own = { .type = e->owner->type, .pid = e->owner->pid };

		if ((own.pid && fcntl(fd, F_SETOWN_EX, &own)) ||
		    (e->owner->signum && fcntl(fd, F_SETSIG, (int)e->owner->signum))) {
			ret = pr_errno("pid %d: fd %d (%s): cannot give its signals to %d again",
				       pid, fd, e->path, e->owner->pid);
			return ret;
		}
	}
	if (!sock && !(e->flags & SETFL_MASK))
		return 0;
	snprintf(what, sizeof(what), "pid %d: fd %d (%s)", pid, fd, e->path);
	return files_set_fl(fd, e->flags, what);
}

/* Once the fd table of rp is complete: its kinds' finish (its epolls are
 * filled), and its POSIX locks taken, after every other fd it held of
 * their files for the restore is gone (closing one would drop them). */
static int finish_fds(struct rfiles *f, struct rproc *rp)
{
	bool posix = false;
	char what[96];
	int ret;

	for (size_t i = 0; i < rp->nr_fds; i++) {
		const FileEntry *e = f->files[files_index(f, rp->fds[i]->file_id)];
		const struct fd_kind *kind = fd_kind(e->kind);
		bool first = true;

		ret = finish_status(e, rp->pid, rp->fds[i]->fd);
		if (ret)
			return ret;

		posix |= rp->fds[i]->n_locks > 0;
		if (!kind->finish)
			continue;
		for (size_t k = 0; k < i; k++)
			first &= rp->fds[k]->file_id != e->id;
		if (!first)
			continue;
		snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[i]->fd);
		ret = kind->finish(e, rp, rp->fds[i]->fd, what);
		if (ret)
			return ret;
	}
	if (rp->pe->has_ctty && rp->pe->has_ctty_fg && rp->pe->ctty_fg > 0 &&
	    (ret = tty_set_fg(rp->pe->ctty_fg, rp->pid)))
		return ret;
	if (!posix)
		return 0;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].tfd >= 0 && f->desc[i].owner && inherited(f->desc[i].owner, rp))
			close(f->desc[i].tfd);
	for (size_t i = 0; i < rp->nr_fds; i++) {
		if (!rp->fds[i]->n_locks)
			continue;
		snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[i]->fd);
		ret = locks_apply_posix(rp->fds[i]->fd, rp->fds[i], what);
		if (ret)
			return ret;
	}
	return 0;
}

int files_restore(struct rfiles *f, struct rproc *rp)
{
	for (size_t i = 0; i < rp->nr_fds; i++) {
		const FdEntry *e = rp->fds[i];
		size_t fi = files_index(f, e->file_id);
		const struct rdesc *d = &f->desc[fi];
		int nfd = -1;

		if (d->tfd >= 0) {
			nfd = fcntl(d->tfd, F_DUPFD_CLOEXEC, 0);
			if (nfd < 0) {
				int ret = -errno;
				pr_perror("pid %d: fd %d: its inherited description is missing",
					  rp->pid, e->fd);
				return ret;
			}
		} else {
			/* this process alone holds it: dup an fd placed already */
			for (size_t k = 0; k < i; k++)
				if (rp->fds[k]->file_id == e->file_id) {
					nfd = fcntl(rp->fds[k]->fd, F_DUPFD_CLOEXEC, 0);
					if (nfd < 0)
						return -errno;
					break;
				}
			if (nfd < 0) {
				nfd = create_desc(f, f->files[fi], rp, e->fd);
				if (nfd < 0)
					return nfd;
				if (late_desc(f, fi, nfd, rp->pid, e->fd)) {
					close(nfd);
					return -EINVAL;
				}
			}
		}
		if (nfd != e->fd) {
			if (dup3(nfd, e->fd, e->cloexec ? O_CLOEXEC : 0) < 0) {
				int ret = -errno;
				pr_perror("pid %d: cannot place fd %d", rp->pid, e->fd);
				close(nfd);
				return ret;
			}
			close(nfd);
		} else if (!e->cloexec) {
			fcntl(nfd, F_SETFD, 0);
		}
	}
	return finish_fds(f, rp);
}

int files_restore_sharer(struct rfiles *f, struct rproc *rp)
{
	/* its children, all forked, have them; the table's restorer does not
	 * need them (it would hold them itself otherwise) */
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].owner == rp && f->desc[i].tfd >= 0)
			close(f->desc[i].tfd);
	if (rp->pe->has_ctty && rp->pe->has_ctty_fg && rp->pe->ctty_fg > 0)
		return tty_set_fg(rp->pe->ctty_fg, rp->pid);
	return 0;
}

bool files_tool_owns(const struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].owner == FILES_TOOL)
			return true;
	return false;
}

int files_create_for_tool(struct rfiles *f)
{
	return files_create_owned(f, FILES_TOOL);
}

int files_finish_tool(struct rfiles *f)
{
	int ret = files_prepare_owned(f, FILES_TOOL);

	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].owner == FILES_TOOL && f->desc[i].tfd >= 0)
			close(f->desc[i].tfd);
	return ret;
}
