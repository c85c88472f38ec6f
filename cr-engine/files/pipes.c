/* Pipes and FIFOs: the pipe object (size, unread data) once per pipe.
 *
 * Dump: the data is copied with tee(2) from an fd opened through
 * /proc/PID/fd, which duplicates the pipe's buffers without consuming
 * them: the tree, if it keeps running, loses nothing.
 * Restore: the process that owns the pipe (the closest common ancestor of
 * every process holding one of its ends) creates it before it forks, sets
 * its size, writes the data back, and its children inherit the ends (see
 * files-restore.c).  A FIFO whose path was removed is made at its path again,
 * opened there, and removed again. */
#include <fcntl.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "dump.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "images/pipes.pb-c.h"
#include "log.h"
#include "pipes.h"
#include "util.h"

int pipe_dump(struct cr_dump_ctx *ctx, pid_t pid, int fd, uint64_t id)
{
	char path[64];
	_cleanup_close_ int pfd = -1;
	int tmp[2] = { -1, -1 }, avail = 0, size, ret = 0;
	struct cr_pipe *np, *pp;
	ssize_t n;

	for (int i = 0; i < ctx->nr_pipes; i++)
		if (ctx->pipes[i].id == id)
			return 0;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	pfd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (pfd < 0)
		return pr_errno("pid %d: fd %d: cannot open its pipe to read it", pid, fd);
	size = fcntl(pfd, F_GETPIPE_SZ);
	if (size < 0 || ioctl(pfd, FIONREAD, &avail))
		return pr_errno("pid %d: fd %d: cannot query its pipe", pid, fd);
	np = xrealloc_array(ctx->pipes, ctx->nr_pipes + 1, sizeof(*np));
	if (!np)
		return -ENOMEM;
	ctx->pipes = np;
	pp = &np[ctx->nr_pipes];
	memset(pp, 0, sizeof(*pp));
	pp->id = id;
	pp->size = size;
	if (avail > 0) {
		pp->data = malloc(avail);
		if (!pp->data)
			return -ENOMEM;
		if (pipe2(tmp, O_NONBLOCK | O_CLOEXEC) ||
		    fcntl(tmp[1], F_SETPIPE_SZ, size) < size) {
			ret = pr_errno(
				"pid %d: fd %d: cannot make a pipe of %d bytes to copy its data",
				pid, fd, size);
			goto out;
		}
		/* one tee: it duplicates the buffers without consuming them */
		n = tee(pfd, tmp[1], avail, SPLICE_F_NONBLOCK);
		if (n != avail) {
			ret = n < 0 ? -errno : -EIO;
			pr_err("pid %d: fd %d: copied %zd of the %d bytes queued in its pipe", pid,
			       fd, n, avail);
			goto out;
		}
		ret = read_all(tmp[0], pp->data, avail);
		if (ret)
			goto out;
		pp->len = avail;
	}
	ctx->nr_pipes++;
out:
	if (tmp[0] >= 0) {
		close(tmp[0]);
		close(tmp[1]);
	}
	if (ret)
		free(pp->data);
	return ret;
}

int pipes_write(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "pipes.img", IMG_PIPES);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_pipes; i++) {
		PipeEntry e = PIPE_ENTRY__INIT;

		e.id = ctx->pipes[i].id;
		e.size = ctx->pipes[i].size;
		if (ctx->pipes[i].len) {
			e.has_data = 1;
			e.data.data = ctx->pipes[i].data;
			e.data.len = ctx->pipes[i].len;
		}
		img_write(&w, &e.base);
	}
	return img_writer_close(&w);
}

void pipes_free_dump(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_pipes; i++)
		free(ctx->pipes[i].data);
	free(ctx->pipes);
	ctx->pipes = NULL;
	ctx->nr_pipes = 0;
}

/* ------------------------------------------------------------- restore */

int pipes_load(int dirfd, PipeEntry ***out, size_t *nr)
{
	struct img_reader r;
	ProtobufCMessage *m;
	PipeEntry **p;
	size_t n = 0;
	int ret = img_reader_open(&r, dirfd, "pipes.img", IMG_PIPES);

	*out = NULL;
	*nr = 0;
	if (ret)
		return ret;
	p = calloc(r.nr ? r.nr : 1, sizeof(*p));
	if (!p) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &pipe_entry__descriptor, &m)) > 0) {
		p[n++] = (PipeEntry *)m;
		if (p[n - 1]->size < 4096 || p[n - 1]->size > (1U << 30) ||
		    (p[n - 1]->has_data && p[n - 1]->data.len > p[n - 1]->size)) {
			pr_err("image pipes.img is damaged: pipe %lu", (unsigned long)p[n - 1]->id);
			ret = -EINVAL;
			break;
		}
	}
	img_reader_close(&r);
	*out = p;
	*nr = n;
	return ret < 0 ? ret : 0;
}

void pipes_free(PipeEntry **p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pipe_entry__free_unpacked(p[i], NULL);
	free(p);
}

/* Size the pipe and put its data back; wfd is a write end. */
int pipe_fill(const PipeEntry *pe, int wfd)
{
	int ret;

	if (fcntl(wfd, F_GETPIPE_SZ) < (int)pe->size && fcntl(wfd, F_SETPIPE_SZ, pe->size) < 0)
		return pr_errno("cannot give a pipe its size of %u bytes (is it above "
				"/proc/sys/fs/pipe-max-size?)",
				pe->size);
	if (pe->has_data && pe->data.len) {
		ret = write_all(wfd, pe->data.data, pe->data.len);
		if (ret) {
			pr_err("cannot put %zu bytes back into a pipe: %s", pe->data.len,
			       strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int fifo_removed_dump(pid_t pid, int fd, const struct stat *st, struct cr_file *f)
{
	char dir[PATH_MAX], rpath[PATH_MAX];
	struct stat ds;
	char *slash;

	if (st->st_nlink || f->path[0] != '/') {
		pr_err("pid %d: fd %d refers to the FIFO %s, whose name was removed but which "
		       "still has %lu other link(s); kupdate cannot restore it",
		       pid, fd, f->path, (unsigned long)st->st_nlink);
		return -EOPNOTSUPP;
	}
	/* seen from the process's root */
	snprintf(rpath, sizeof(rpath), "/proc/%d/root%s", pid, f->path);
	if (!lstat(rpath, &ds)) {
		pr_err("pid %d: fd %d refers to the FIFO %s, which was removed and is now "
		       "another file; it cannot be made there again",
		       pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	snprintf(dir, sizeof(dir), "%s", rpath);
	slash = strrchr(dir, '/');
	slash[1] = 0;
	if (stat(dir, &ds) || !S_ISDIR(ds.st_mode)) {
		pr_err("pid %d: fd %d refers to the FIFO %s, removed with its directory; it "
		       "cannot be made there again",
		       pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	f->fifo_removed = true;
	f->fifo_mode = st->st_mode & 07777;
	f->fifo_uid = st->st_uid;
	f->fifo_gid = st->st_gid;
	return 0;
}

int fifo_make(const FileEntry *e, pid_t pid)
{
	int ret;

	if (mkfifo(e->path, 0600))
		return pr_errno("pid %d: cannot make the removed FIFO %s again", pid, e->path);
	if (chown(e->path, e->fifo_uid, e->fifo_gid) || chmod(e->path, e->fifo_mode)) {
		ret = pr_errno("pid %d: cannot give the FIFO %s its owner and mode", pid, e->path);
		unlink(e->path);
		return ret;
	}
	return 0;
}

void fifo_unmake(const FileEntry *e)
{
	if (unlink(e->path))
		pr_warn("cannot remove the FIFO %s again: %s", e->path, strerror(errno));
}

void pipe_save(const struct cr_file *f, FileEntry *e)
{
	e->has_pipe_id = 1;
	e->pipe_id = f->pipe_id;
}

void fifo_save(const struct cr_file *f, FileEntry *e)
{
	pipe_save(f, e);
	if (f->fifo_removed) {
		e->has_fifo_removed = e->fifo_removed = 1;
		e->has_fifo_mode = e->has_fifo_uid = e->has_fifo_gid = 1;
		e->fifo_mode = f->fifo_mode;
		e->fifo_uid = f->fifo_uid;
		e->fifo_gid = f->fifo_gid;
	}
}
