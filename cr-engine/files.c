/* File descriptors and the open file descriptions behind them.
 *
 * Dump: every fd of /proc/PID/fd is described once per open file
 * description (kcmp(KCMP_FILE) finds dup'd and inherited fds), with its
 * path, open flags and offset from fdinfo.  Restore: each process reopens
 * its files and dups them onto the saved numbers. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "files.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "log.h"
#include "util.h"

static int kcmp_file(pid_t p1, int fd1, pid_t p2, int fd2)
{
	return syscall(SYS_kcmp, p1, p2, KCMP_FILE, fd1, fd2);
}

static int parse_fdinfo(pid_t pid, int fd, uint64_t *pos, uint32_t *flags)
{
	_cleanup_free_ char *buf = NULL;
	char *p;
	int ret = read_proc(&buf, NULL, "/proc/%d/fdinfo/%d", pid, fd);

	if (ret)
		return ret;
	p = strstr(buf, "pos:");
	*pos = p ? strtoull(p + 4, NULL, 10) : 0;
	p = strstr(buf, "flags:");
	*flags = p ? strtoul(p + 6, NULL, 8) : 0;
	return 0;
}

static const char *unsupported_kind(const char *link)
{
	if (!strncmp(link, "pipe:", 5))
		return "a pipe";
	if (!strncmp(link, "socket:", 7))
		return "a socket";
	if (!strncmp(link, "anon_inode:", 11))
		return "an anonymous-inode object (eventfd, epoll, timerfd, signalfd...)";
	return NULL;
}

static int find_or_add_file(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *link,
			    const struct stat *st, uint32_t *id)
{
	struct cr_file *f, *nf;
	uint64_t pos;
	uint32_t flags;
	int ret;

	for (int i = 0; i < ctx->nr_files; i++) {
		f = &ctx->files[i];
		if (f->dev != st->st_dev || f->ino != st->st_ino)
			continue;
		if (kcmp_file(f->owner_pid, f->owner_fd, p->pid, fd) == 0) {
			*id = f->id;
			return 0;
		}
	}
	ret = parse_fdinfo(p->pid, fd, &pos, &flags);
	if (ret) {
		pr_err("pid %d: cannot read fdinfo of fd %d: %s", p->pid, fd, strerror(-ret));
		return ret;
	}
	nf = xrealloc_array(ctx->files, ctx->nr_files + 1, sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	ctx->files = nf;
	f = &nf[ctx->nr_files];
	memset(f, 0, sizeof(*f));
	f->id = ++ctx->next_file_id;
	f->path = xstrdup(link);
	if (!f->path)
		return -ENOMEM;
	ctx->nr_files++;
	f->kind = S_ISDIR(st->st_mode)	 ? FILE_KIND__FILE_DIR
		  : S_ISCHR(st->st_mode) ? FILE_KIND__FILE_CHR
					 : FILE_KIND__FILE_REG;
	f->flags = flags & ~O_CLOEXEC;
	f->pos = pos;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = st->st_size;
	f->rdev = st->st_rdev;
	f->owner_pid = p->pid;
	f->owner_fd = fd;
	*id = f->id;
	return 0;
}

static int cmp_fd(const void *a, const void *b)
{
	const struct cr_fd *x = a, *y = b;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

int dump_files(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char dpath[64];
	DIR *d;
	struct dirent *de;
	int ret = 0;

	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", p->pid);
	d = opendir(dpath);
	if (!d) {
		ret = -errno;
		pr_perror("pid %d: cannot list its fds (%s)", p->pid, dpath);
		return ret;
	}
	while ((de = readdir(d))) {
		char lpath[96], link[PATH_MAX + 1];
		struct stat st;
		struct cr_fd *nfds;
		const char *what;
		uint64_t pos;
		uint32_t flags, id;
		ssize_t n;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		fd = atoi(de->d_name);
		snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%d", p->pid, fd);
		n = readlink(lpath, link, sizeof(link) - 1);
		if (n < 0) {
			ret = -errno;
			pr_perror("pid %d: cannot read the link of fd %d", p->pid, fd);
			break;
		}
		link[n] = 0;
		what = unsupported_kind(link);
		if (what) {
			pr_err("pid %d: fd %d is %s (%s), which this kupdate cannot dump yet", p->pid,
			       fd, what, link);
			ret = -EOPNOTSUPP;
			break;
		}
		if (stat(lpath, &st)) {
			ret = -errno;
			pr_perror("pid %d: cannot stat fd %d (%s)", p->pid, fd, link);
			break;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISCHR(st.st_mode)) {
			pr_err("pid %d: fd %d (%s) is neither a file, a directory nor a character "
			       "device; it cannot be dumped yet",
			       p->pid, fd, link);
			ret = -EOPNOTSUPP;
			break;
		}
		if (link[0] != '/') {
			pr_err("pid %d: fd %d (%s) has no path to reopen it by", p->pid, fd, link);
			ret = -EOPNOTSUPP;
			break;
		}
		if (st.st_nlink == 0 || (n > 10 && !strcmp(link + n - 10, " (deleted)"))) {
			pr_err("pid %d: fd %d refers to the deleted file %s; unlinked open files are "
			       "not supported yet",
			       p->pid, fd, link);
			ret = -EOPNOTSUPP;
			break;
		}
		ret = find_or_add_file(ctx, p, fd, link, &st, &id);
		if (ret)
			break;
		ret = parse_fdinfo(p->pid, fd, &pos, &flags);
		if (ret) {
			pr_err("pid %d: cannot read fdinfo of fd %d: %s", p->pid, fd, strerror(-ret));
			break;
		}
		nfds = xrealloc_array(p->fds, p->nr_fds + 1, sizeof(*nfds));
		if (!nfds) {
			ret = -ENOMEM;
			break;
		}
		p->fds = nfds;
		nfds[p->nr_fds].fd = fd;
		nfds[p->nr_fds].file_id = id;
		nfds[p->nr_fds].cloexec = !!(flags & O_CLOEXEC);
		p->nr_fds++;
	}
	closedir(d);
	if (!ret)
		qsort(p->fds, p->nr_fds, sizeof(*p->fds), cmp_fd);
	return ret;
}

int write_files(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "files.img", IMG_FILES);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_files; i++) {
		struct cr_file *f = &ctx->files[i];
		FileEntry e = FILE_ENTRY__INIT;

		e.id = f->id;
		e.kind = f->kind;
		e.path = f->path;
		e.flags = f->flags;
		e.has_pos = e.has_ino = e.has_size = 1;
		e.pos = f->pos;
		e.ino = f->ino;
		e.size = f->size;
		if (f->kind == FILE_KIND__FILE_CHR) {
			e.has_rdev = 1;
			e.rdev = f->rdev;
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
	for (int i = 0; i < ctx->nr_files; i++)
		free(ctx->files[i].path);
	free(ctx->files);
	ctx->files = NULL;
	ctx->nr_files = 0;
}

/* ------------------------------------------------------------- restore */

static int open_file(const FileEntry *f, pid_t pid, int fd)
{
	int flags = (f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY)) | O_CLOEXEC;
	struct stat st;
	int nfd, ret;

	if (f->kind == FILE_KIND__FILE_DIR)
		flags |= O_DIRECTORY;
	nfd = open(f->path, flags);
	if (nfd < 0) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot reopen %s", pid, fd, f->path);
		return ret;
	}
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
	} else if (f->has_ino && st.st_ino != f->ino) {
		pr_err("pid %d: fd %d: %s was replaced since the dump (inode %lu, was %lu)", pid, fd,
		       f->path, (unsigned long)st.st_ino, (unsigned long)f->ino);
		close(nfd);
		return -ESTALE;
	}
	if (f->kind == FILE_KIND__FILE_REG && !(f->flags & O_PATH) && f->has_pos &&
	    lseek(nfd, f->pos, SEEK_SET) != (off_t)f->pos) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot seek %s to %lu", pid, fd, f->path,
			  (unsigned long)f->pos);
		close(nfd);
		return ret ? ret : -EIO;
	}
	return nfd;
}

int files_restore(pid_t pid, FdEntry **fds, size_t nr_fds, FileEntry **files, size_t nr_files)
{
	for (size_t i = 0; i < nr_fds; i++) {
		const FdEntry *e = fds[i];
		const FileEntry *f = NULL;
		int nfd = -1;

		/* a description already opened by this process: dup it */
		for (size_t k = 0; k < i; k++)
			if (fds[k]->file_id == e->file_id) {
				nfd = fcntl(fds[k]->fd, F_DUPFD_CLOEXEC, 0);
				if (nfd < 0)
					return -errno;
				break;
			}
		if (nfd < 0) {
			for (size_t k = 0; k < nr_files && !f; k++)
				if (files[k]->id == e->file_id)
					f = files[k];
			if (!f)
				return -EINVAL; /* validated when loading */
			nfd = open_file(f, pid, e->fd);
			if (nfd < 0)
				return nfd;
		}
		if (nfd != e->fd) {
			if (dup3(nfd, e->fd, e->cloexec ? O_CLOEXEC : 0) < 0) {
				int ret = -errno;
				pr_perror("pid %d: cannot place fd %d", pid, e->fd);
				close(nfd);
				return ret;
			}
			close(nfd);
		} else if (!e->cloexec) {
			fcntl(nfd, F_SETFD, 0);
		}
	}
	return 0;
}

int files_validate(FdEntry **fds, size_t nr_fds, FileEntry **files, size_t nr_files,
		   const char *img)
{
	for (size_t i = 0; i < nr_files; i++) {
		if (files[i]->kind < FILE_KIND__FILE_REG || files[i]->kind > FILE_KIND__FILE_CHR ||
		    !files[i]->path[0]) {
			pr_err("image files.img is damaged: entry %zu has an invalid kind or path", i);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < nr_fds; i++) {
		bool found = false;

		if (fds[i]->fd < 0 || fds[i]->fd >= (1 << 20)) {
			pr_err("image %s is damaged: fd number %d", img, fds[i]->fd);
			return -EINVAL;
		}
		if (i && fds[i]->fd <= fds[i - 1]->fd) {
			pr_err("image %s is damaged: fds out of order", img);
			return -EINVAL;
		}
		for (size_t k = 0; k < nr_files && !found; k++)
			found = files[k]->id == fds[i]->file_id;
		if (!found) {
			pr_err("image %s is damaged: fd %d refers to unknown file %u", img,
			       fds[i]->fd, fds[i]->file_id);
			return -EINVAL;
		}
	}
	return 0;
}
