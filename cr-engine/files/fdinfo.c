/* What the fd kinds and the files-*.c steps look up: a key of an fdinfo
 * text at dump; at restore a file's index, a pipe, a ghost (an unlinked
 * file made again), and the placing of descriptors on fd numbers.  It
 * calls no kind and no step (ghost.c's object aside), so that every kind
 * can call it. */
#include <fcntl.h>
#include <unistd.h>

#include "fdinfo.h"
#include "files.h"
#include "ghost.h"
#include "log.h"
#include "restore-ctx.h"
#include "util.h"

const char *fdinfo_find(const char *fdinfo, const char *key)
{
	size_t n = strlen(key);

	/* keys start a line */
	for (const char *p = fdinfo; (p = strstr(p, key)); p += n)
		if (p == fdinfo || p[-1] == '\n')
			return p + n;
	return NULL;
}

int fdinfo_read(pid_t pid, int fd, char **buf, uint64_t *pos, uint32_t *flags)
{
	const char *p;
	int ret = read_proc(buf, NULL, "/proc/%d/fdinfo/%d", pid, fd);

	if (ret)
		return ret;
	p = fdinfo_find(*buf, "pos:");
	*pos = p ? strtoull(p, NULL, 10) : 0;
	p = fdinfo_find(*buf, "flags:");
	*flags = p ? strtoul(p, NULL, 8) : 0;
	return 0;
}

/* ------------------------------------------------------------- restore */

struct rproc files_tool_owner;

/* files.img is in the order of the ids (files_load checks it) */
size_t files_index(const struct rfiles *f, uint32_t id)
{
	size_t lo = 0, hi = f->nr_files;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->files[mid]->id == id)
			return mid;
		if (f->files[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (size_t)-1;
}

bool files_holds(const struct rproc *rp, uint32_t file_id)
{
	for (size_t k = 0; k < rp->nr_fds; k++)
		if (rp->fds[k]->file_id == file_id)
			return true;
	return false;
}

PipeEntry *files_pipe(const struct rfiles *f, uint64_t id)
{
	for (size_t i = 0; i < f->nr_pipes; i++)
		if (f->pipes[i]->id == id)
			return f->pipes[i];
	return NULL;
}

struct rghost *files_ghost(const struct rfiles *f, uint32_t id)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		if (f->ghosts[i].e && f->ghosts[i].e->id == id)
			return &f->ghosts[i];
	return NULL;
}

int files_load_ghost(int dirfd, struct rfiles *f, uint32_t id, struct rghost **out)
{
	struct rghost *ng = files_ghost(f, id);
	int ret;

	if (!ng) {
		ng = xrealloc_array(f->ghosts, f->nr_ghosts + 1, sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		f->ghosts = ng;
		ng += f->nr_ghosts;
		ret = ghost_load(dirfd, id, ng);
		f->nr_ghosts++;
		if (ret)
			return ret;
	}
	if (out)
		*out = ng;
	return 0;
}

/* An fd of the ghost id made again, in this process, for what must reach
 * its inode (an inotify watch): a description of it on its transport fd,
 * or the ghost kupdate (or this process) made, made now if not yet. */
int files_ghost_fd(const struct rfiles *f, uint32_t id, const char *path)
{
	struct rghost *g = files_ghost(f, id);

	if (!g)
		return -EINVAL;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->has_ghost_id && f->files[i]->ghost_id == id &&
		    f->desc[i].tfd >= 0 && fcntl(f->desc[i].tfd, F_GETFD) >= 0)
			return f->desc[i].tfd;
	if (g->fd >= 0)
		return g->fd;
	if (g->map_fd >= 0 && fcntl(g->map_fd, F_GETFD) >= 0)
		return g->map_fd;
	g->fd = ghost_create(g, path);
	if (g->fd >= 0)
		g->fd = files_lift(f, g->fd);
	return g->fd;
}

int files_lift(const struct rfiles *f, int fd)
{
	return fd_move_above(fd, f->tend);
}

int files_place(int fd, int want)
{
	if (fd == want)
		return 0;
	if (dup3(fd, want, O_CLOEXEC) < 0) {
		int ret = -errno;
		pr_perror("cannot place a descriptor on fd %d", want);
		close(fd);
		return ret;
	}
	close(fd);
	return 0;
}

int files_set_fl(int fd, uint32_t flags, const char *what)
{
	if (fcntl(fd, F_SETFL, flags & SETFL_MASK)) {
		int ret = -errno;
		pr_perror("cannot set the flags %#x of %s", flags, what);
		return ret;
	}
	return 0;
}
