/* inotify: the watches, with their masks and watch descriptors.
 *
 * Dump: fdinfo gives, for each watch, its wd, the inode (number and
 * superblock) and the mask, and a file handle of the inode.  The path is
 * found with open_by_handle_at(2) from a mount of that superblock (the
 * process's own, for a process in a mount namespace of its own: a
 * sandboxed unit's, a container's), and checked (same device and inode).  A watch whose inode has no path any
 * more (a file deleted while the tree holds it open) watches the ghost
 * saved for that fd (ghost.c); one that nothing else holds is refused.
 * Restore: the path must still lead to the same inode; a deleted one is
 * watched through a descriptor of its ghost, made again (fdinfo.c: files_ghost_fd).  Watch descriptors
 * are handed out in increasing order, so each watch is added again and
 * again (and removed) until it gets its number; the IN_IGNORED events those
 * removals queue are read away before the instance is handed over.  Events
 * queued at the dump cannot be put back into the kernel's queue: such an
 * instance is not dumped (-EAGAIN, events_queued) until the program has
 * read them. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "fdinfo.h"
#include "inotify.h"
#include "log.h"
#include "namespaces.h"
#include "proc.h"
#include "sockets.h"
#include "util.h"

#define MAX_WATCHES (1 << 20)
#define MAX_HANDLE  128

/* an fd of a mount of the filesystem with kernel device number sdev, one
 * of kupdate's own or, with root ("/proc/PID/root": a process in a mount
 * namespace of its own), one of that process's */
static int open_mount(const char *root, pid_t pid, unsigned sdev)
{
	struct mount_table t;
	unsigned maj = sdev >> 20, min = sdev & 0xfffff;
	char info[64], mp[PATH_MAX + 64];
	int ret, best = -1;

	snprintf(info, sizeof(info), "/proc/%d/mountinfo", pid);
	ret = mount_table_read(root[0] ? info : NULL, &t);

	if (ret)
		return ret;
	for (size_t i = 0; i < t.n; i++) {
		const struct mount_entry *m = &t.e[i];

		if (m->maj != maj || m->min != min)
			continue;
		if (best >= 0) {
			/* prefer a mount of the whole filesystem */
			if (strcmp(m->root, "/"))
				continue;
			close(best);
		}
		snprintf(mp, sizeof(mp), "%s%s", root, m->mp);
		best = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (best >= 0 && !strcmp(m->root, "/"))
			break;
	}
	mount_table_free(&t);
	return best >= 0 ? best : -ENOENT;
}

static int hexbytes(const char *s, unsigned char *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		out[i] = v;
	}
	return 0;
}

/* The path of a watch's inode, as the process sees it: its file handle
 * opened on a mount of its filesystem (the process's own, through its
 * root, when it has a mount namespace of its own: the kernel then names the
 * file from that namespace's root, the process's) */
static int watch_path(const struct cr_dump_ctx *ctx, pid_t pid, int fd, unsigned wd, unsigned sdev,
		      uint64_t ino, const char *hline, char **path, bool *deleted)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE];
	} h;
	unsigned hbytes, htype;
	char handle[2 * MAX_HANDLE + 1], lpath[64], buf[PATH_MAX + 1], seen[PATH_MAX + 64];
	_cleanup_close_ int mfd = -1, wfd = -1;
	struct stat st;
	ssize_t n;

	if (!hline ||
	    sscanf(hline, " fhandle-bytes:%x fhandle-type:%x f_handle:%256s", &hbytes, &htype,
		   handle) != 3 ||
	    !hbytes || hbytes > MAX_HANDLE || strlen(handle) < 2 * hbytes ||
	    hexbytes(handle, h.bytes, hbytes)) {
		pr_err("pid %d: fd %d: inotify watch %u (inode %lu) has no file handle to find its "
		       "path by; kupdate cannot restore it",
		       pid, fd, wd, (unsigned long)ino);
		return -EOPNOTSUPP;
	}
	h.fh.handle_bytes = hbytes;
	h.fh.handle_type = htype;
	memcpy(h.fh.f_handle, h.bytes, hbytes);
	mfd = open_mount(ctx->root_prefix, pid, sdev);
	if (mfd >= 0)
		wfd = open_by_handle_at(mfd, &h.fh, O_PATH | O_CLOEXEC);
	if (wfd < 0) {
		pr_err("pid %d: fd %d: cannot find the path of inotify watch %u (inode %lu on "
		       "device "
		       "%u:%u): %s",
		       pid, fd, wd, (unsigned long)ino, sdev >> 20, sdev & 0xfffff,
		       strerror(mfd < 0 ? -mfd : errno));
		return -EOPNOTSUPP;
	}
	snprintf(lpath, sizeof(lpath), "/proc/self/fd/%d", wfd);
	n = readlink(lpath, buf, sizeof(buf) - 1);
	if (n <= 0 || buf[0] != '/') {
		pr_err("pid %d: fd %d: inotify watch %u (inode %lu) has no path", pid, fd, wd,
		       (unsigned long)ino);
		return -EOPNOTSUPP;
	}
	buf[n] = 0;
	/* a filesystem of the namespace's own (a private tmpfs) is made anew
	 * at the restore, its files with other inodes */
	if (ctx->root_prefix[0]) {
		int own = open_mount("", 0, sdev);

		if (own < 0) {
			pr_err("pid %d: fd %d: inotify watch %u watches %s, on a filesystem only "
			       "its mount namespace has (a private tmpfs), whose files the restore "
			       "makes anew; kupdate cannot restore the watch",
			       pid, fd, wd, buf);
			return -EOPNOTSUPP;
		}
		close(own);
	}
	if (stat(dump_path(ctx, buf, seen, sizeof(seen)), &st) || st.st_ino != ino ||
	    major(st.st_dev) != sdev >> 20 || minor(st.st_dev) != (sdev & 0xfffff)) {
		/* deleted: its ghost is looked for once every fd is dumped */
		if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
			buf[n - 10] = 0;
		*deleted = true;
	}
	*path = strdup(buf);
	return *path ? 0 : -ENOMEM;
}

/* Events queued (what read(2) would return) cannot be put back into a
 * kernel queue: the dump waits for the program to read them.  -EAGAIN:
 * kupdate's units thaw the unit a moment and try again; a plain dump says
 * so.  FIONREAD, through kupdate's own descriptor, reads nothing. */
static int events_queued(struct cr_proc *p, int fd)
{
	_cleanup_close_ int dup = sk_dup(p, fd);
	int n = 0;

	if (dup < 0)
		return dup;
	if (ioctl(dup, FIONREAD, &n)) {
		int ret = -errno;

		pr_perror("pid %d: fd %d: cannot read how many inotify events are queued", p->pid,
			  fd);
		return ret;
	}
	if (n > 0) {
		pr_err("pid %d: fd %d: %d bytes of inotify events are queued, which cannot be put "
		       "back; retry once the program has read them",
		       p->pid, fd, n);
		return -EAGAIN;
	}
	return 0;
}

int inotify_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f)
{
	InotifyFile *in = calloc(1, sizeof(*in));
	const char *l;
	int ret;

	if (!in)
		return -ENOMEM;
	f->ify = in;
	inotify_file__init(in);
	ret = events_queued(p, fd);
	if (ret)
		return ret;
	for (l = fdinfo_find(fdinfo, "inotify wd:"); l; l = fdinfo_find(l, "inotify wd:")) {
		unsigned wd, sdev, mask, ignored;
		unsigned long ino;
		InotifyWatch *w, **nw;
		bool deleted = false;
		int off = 0;

		if (sscanf(l, "%x ino:%lx sdev:%x mask:%x ignored_mask:%x%n", &wd, &ino, &sdev,
			   &mask, &ignored, &off) < 5 ||
		    !off) {
			pr_err("pid %d: fd %d: cannot parse the inotify's fdinfo", p->pid, fd);
			return -EINVAL;
		}
		if (in->n_watches >= MAX_WATCHES)
			return -E2BIG;
		nw = xrealloc_array(in->watches, in->n_watches + 1, sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		in->watches = nw;
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		inotify_watch__init(w);
		nw[in->n_watches++] = w;
		w->wd = wd;
		w->mask = mask;
		w->ino = ino;
		w->path = NULL;
		ret = watch_path(ctx, p->pid, fd, wd, sdev, ino, l + off, &w->path, &deleted);
		if (ret)
			return ret;
		if (deleted) {
			w->has_sdev = 1;
			w->sdev = sdev;
			w->has_ghost_id = 1; /* 0 until inotify_finish_dump finds it */
		}
	}
	/* the kernel lists them newest first */
	for (size_t i = 1; i < in->n_watches; i++)
		for (size_t k = i; k > 0 && in->watches[k - 1]->wd > in->watches[k]->wd; k--) {
			InotifyWatch *t = in->watches[k];

			in->watches[k] = in->watches[k - 1];
			in->watches[k - 1] = t;
		}
	return 0;
}

/* the ghost saved for inode dev:ino if an fd of the tree holds it (its
 * descriptions reach it at restore), else 0 */
static uint32_t held_ghost(const struct cr_dump_ctx *ctx, dev_t dev, uint64_t ino)
{
	for (int g = 0; g < ctx->nr_ghosts; g++) {
		if (ctx->ghosts[g].dev != dev || ctx->ghosts[g].ino != ino)
			continue;
		for (int h = 0; h < ctx->nr_files; h++)
			if (ctx->files[h].ghost_id == ctx->ghosts[g].id)
				return ctx->ghosts[g].id;
	}
	return 0;
}

int inotify_finish_dump(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_files; i++) {
		const struct cr_file *f = &ctx->files[i];

		for (size_t k = 0; f->ify && k < f->ify->n_watches; k++) {
			InotifyWatch *w = f->ify->watches[k];
			dev_t dev = makedev(w->sdev >> 20, w->sdev & 0xfffff);

			if (!w->has_sdev)
				continue;
			w->ghost_id = held_ghost(ctx, dev, w->ino);
			if (!w->ghost_id) {
				pr_err("pid %d: fd %d: inotify watch %u watches %s (inode %lu), "
				       "which was deleted and which no fd of the tree holds; "
				       "kupdate cannot restore the watch",
				       f->owner_pid, f->owner_fd, w->wd, w->path,
				       (unsigned long)w->ino);
				return -EOPNOTSUPP;
			}
			w->has_sdev = 0; /* of this kernel only */
		}
	}
	return 0;
}

void inotify_save(const struct cr_file *f, FileEntry *e)
{
	e->ify = f->ify;
}

void inotify_free_dump(struct cr_file *f)
{
	InotifyFile *in = f->ify;

	if (!in)
		return;
	for (size_t i = 0; i < in->n_watches; i++) {
		free(in->watches[i]->path);
		free(in->watches[i]);
	}
	free(in->watches);
	free(in);
}

int inotify_validate(const struct rfiles *f, const FileEntry *e)
{
	const InotifyFile *in = e->ify;

	if (!in || in->n_watches > MAX_WATCHES)
		goto bad;
	for (size_t i = 0; i < in->n_watches; i++) {
		const InotifyWatch *w = in->watches[i];

		if (!w->wd || w->wd > INT32_MAX || w->path[0] != '/' ||
		    !(w->mask & IN_ALL_EVENTS) || (i && w->wd <= in->watches[i - 1]->wd))
			goto bad;
	}
	return 0;
bad:
	pr_err("image files.img is damaged: inotify %u is invalid", e->id);
	return -EINVAL;
}

static int add_watch(const struct rfiles *f, int ifd, const InotifyWatch *w, const char *what)
{
	_cleanup_close_ int pfd = -1;
	char lpath[64];
	struct stat st;
	int wd;

	if (w->has_ghost_id) {
		/* a deleted file: one of its descriptions made again */
		int gfd = files_ghost_fd(f, w->ghost_id, w->path);

		if (gfd < 0) {
			pr_err("%s: inotify watch %u: the deleted %s was not made again", what,
			       w->wd, w->path);
			return gfd;
		}
		snprintf(lpath, sizeof(lpath), "/proc/self/fd/%d", gfd);
	} else {
		pfd = open(w->path, O_PATH | O_CLOEXEC);
		if (pfd < 0 || fstat(pfd, &st) || st.st_ino != w->ino) {
			pr_err("%s: inotify watch %u: %s %s", what, w->wd, w->path,
			       pfd < 0 ? "is gone" : "was replaced since the dump");
			return -ESTALE;
		}
		snprintf(lpath, sizeof(lpath), "/proc/self/fd/%d", pfd);
	}
	for (;;) {
		wd = inotify_add_watch(ifd, lpath, w->mask & IN_ALL_EVENTS);
		if (wd < 0)
			return pr_errno("%s: cannot watch %s", what, w->path);
		if ((uint32_t)wd == w->wd)
			return 0;
		if ((uint32_t)wd > w->wd) {
			pr_err("%s: inotify watch of %s got number %d, not %u", what, w->path, wd,
			       w->wd);
			return -EEXIST;
		}
		/* not there yet: the numbers only go up */
		inotify_rm_watch(ifd, wd);
	}
}

int inotify_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC), ret = 0;
	char buf[4096];

	if (fd < 0)
		return pr_errno("%s: cannot create an inotify instance", what);
	for (size_t i = 0; i < e->ify->n_watches && !ret; i++)
		ret = add_watch(f, fd, e->ify->watches[i], what);
	/* the IN_IGNORED events of the stand-ins */
	while (!ret && read(fd, buf, sizeof(buf)) > 0)
		;
	if (!ret && !(e->flags & O_NONBLOCK) && fcntl(fd, F_SETFL, e->flags & O_NONBLOCK))
		ret = pr_errno("%s: cannot set the inotify's flags", what);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}
