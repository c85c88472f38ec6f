/* The kinds reopened by path: regular files, directories, character
 * devices (checked to be the same device), symbolic links themselves
 * (O_PATH | O_NOFOLLOW), FIFOs (their pipe's
 * descriptions are made in files-restore.c; one held alone is reopened
 * here); deleted files, as a new description of their ghost (ghost.c)
 * made again; memfds, as one of the object shmem.c made again. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "fdinfo.h"
#include "files.h"
#include "ghost.h"
#include "locks.h"
#include "log.h"
#include "proc.h"
#include "regfile.h"
#include "restore-ctx.h"
#include "shmem.h"
#include "util.h"

int memfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	       struct cr_file *f)
{
	return shmem_dump_fd(ctx, p->pid, fd, f->path, &f->shmid);
}

void reg_save(const struct cr_file *f, FileEntry *e)
{
	if (f->ghost_id) {
		e->has_ghost_id = 1;
		e->ghost_id = f->ghost_id;
	}
}

void chr_save(const struct cr_file *f, FileEntry *e)
{
	e->has_rdev = 1;
	e->rdev = f->rdev;
}

void memfd_save(const struct cr_file *f, FileEntry *e)
{
	e->has_shmid = 1;
	e->shmid = f->shmid;
}

/* the flock and OFD locks of a description just made */
static int with_locks(int nfd, const FileEntry *e, pid_t pid, int fd)
{
	char what[96];
	int ret;

	if (!e->n_locks)
		return nfd;
	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	ret = locks_apply_desc(nfd, e, what);
	if (ret) {
		close(nfd);
		return ret;
	}
	return nfd;
}

/* /proc files get new inode numbers with every instance of a process: a
 * /proc/PID file of the restored tree is the same file again */
static bool on_procfs(int fd)
{
	struct statfs sf;

	return !fstatfs(fd, &sf) && sf.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */;
}

/* the flags a file is opened again with: not those that made it (O_TMPFILE,
 * which names the directory a nameless file was made in and has
 * O_DIRECTORY in it, as MariaDB's InnoDB temporary files keep) */
static int reopen_flags(const FileEntry *f)
{
	int flags = f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);

	if ((flags & O_TMPFILE) == O_TMPFILE)
		flags &= ~O_TMPFILE;
	return flags | O_CLOEXEC;
}

static int open_file(const FileEntry *f, pid_t pid, int fd)
{
	int flags = reopen_flags(f);
	struct stat st;
	int nfd, ret;

	if (f->kind == FILE_KIND__FILE_DIR)
		flags |= O_DIRECTORY;
	if (f->kind == FILE_KIND__FILE_SYMLINK)
		flags = (flags & O_CLOEXEC) | O_PATH | O_NOFOLLOW;
	nfd = open(f->path, flags);
	if (nfd < 0)
		return pr_errno("pid %d: fd %d: cannot reopen %s", pid, fd, f->path);
	if (fstat(nfd, &st)) {
		ret = -errno;
		close(nfd);
		return ret;
	}
	if (f->kind == FILE_KIND__FILE_CHR) {
		if (!S_ISCHR(st.st_mode) || (f->has_rdev && st.st_rdev != f->rdev)) {
			pr_err("pid %d: fd %d: %s is no longer the character device %u:%u", pid, fd,
			       f->path, major(f->rdev), minor(f->rdev));
			close(nfd);
			return -ESTALE;
		}
	} else if (f->has_ino && st.st_ino != f->ino && !on_procfs(nfd)) {
		pr_err("pid %d: fd %d: %s was replaced since the dump (inode %lu, was %lu)", pid,
		       fd, f->path, (unsigned long)st.st_ino, (unsigned long)f->ino);
		close(nfd);
		return -ESTALE;
	}
	if (f->kind == FILE_KIND__FILE_REG && !(f->flags & O_PATH) && f->has_pos &&
	    lseek(nfd, f->pos, SEEK_SET) != (off_t)f->pos) {
		ret = pr_errno("pid %d: fd %d: cannot seek %s to %lu", pid, fd, f->path,
			       (unsigned long)f->pos);
		close(nfd);
		return ret ? ret : -EIO;
	}
	return with_locks(nfd, f, pid, fd);
}

/* A memfd or an unlinked file: a new description of the object kupdate
 * (or an ancestor) made, reached through /proc/self/fd. */
static int open_object(const FileEntry *e, int obj, pid_t pid, int fd)
{
	int flags = reopen_flags(e);
	char path[64];
	int nfd, ret;

	snprintf(path, sizeof(path), "self/fd/%d", obj);
	nfd = proc_open(path, flags);
	if (nfd < 0)
		return pr_errno("pid %d: fd %d: cannot open %s again", pid, fd, e->path);
	if (!(e->flags & O_PATH) && e->has_pos && lseek(nfd, e->pos, SEEK_SET) != (off_t)e->pos) {
		ret = pr_errno("pid %d: fd %d: cannot seek %s to %lu", pid, fd, e->path,
			       (unsigned long)e->pos);
		close(nfd);
		return ret ? ret : -EIO;
	}
	return with_locks(nfd, e, pid, fd);
}

static int open_memfd(const struct rfiles *f, const FileEntry *e, pid_t pid, int fd)
{
	int obj = shmem_fd(f->shm, e->shmid, NULL);

	if (obj < 0) {
		pr_err("pid %d: fd %d: memfd %u was not made", pid, fd, e->shmid);
		return -EINVAL;
	}
	return open_object(e, obj, pid, fd);
}

static int open_ghost(const struct rfiles *f, const FileEntry *e, pid_t pid, int fd)
{
	struct rghost *g = files_ghost(f, e->ghost_id);

	/* made by kupdate for the mappings: the same inode */
	if (g->fd < 0 && g->map_fd >= 0)
		return open_object(e, g->map_fd, pid, fd);
	if (g->fd < 0) {
		int gfd = ghost_create(g, e->path);

		if (gfd < 0)
			return gfd;
		/* above every transport, out of the way of their placement */
		g->fd = files_lift(f, gfd);
		if (g->fd < 0)
			return g->fd;
	}
	return open_object(e, g->fd, pid, fd);
}

int regfile_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what)
{
	if (e->has_ghost_id)
		return open_ghost(f, e, rp->pid, at);
	return open_file(e, rp->pid, at);
}

int memfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		  const char *what)
{
	return open_memfd(f, e, rp->pid, at);
}
