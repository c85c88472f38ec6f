/* inotify: the watches, with their masks and watch descriptors.
 *
 * Dump: fdinfo gives, for each watch, its wd, the inode (number and
 * superblock) and the mask, and a file handle of the inode.  The path is
 * found with open_by_handle_at(2) from a mount of that superblock (the
 * process's own, for a process in a mount namespace of its own: a
 * sandboxed unit's, a container's), and checked (same device and inode).
 * A watch on a tmpfs only that namespace has (a container's /run, a
 * private /tmp) is on a file the restore makes again with another inode:
 * its kind is recorded instead; one on any other filesystem of the
 * namespace's own is refused.  So is a watch on a file of a control group
 * the restore makes again (systemd's on its units' cgroup.events); a group
 * below the tree's that holds none of its processes is recorded for it.  A watch whose inode has no path any more (a
 * file deleted while the tree holds it open) watches the ghost saved for
 * that fd (ghost.c); one that nothing else holds is refused.
 * Restore: the path must still lead to the same inode (or one of the same
 * kind); a deleted one is watched through a descriptor of its ghost, made
 * again (fdinfo.c: files_ghost_fd).  Watch descriptors are handed out in
 * increasing order, so each watch is added again and again (and removed)
 * until it gets its number; the IN_IGNORED events those removals queue are
 * read away before the instance is handed over.  Events queued at the dump
 * cannot be put back into the kernel's queue: such an instance is not
 * dumped (-EAGAIN, events_queued) until the program has read them. */
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
#include "restore-ctx.h"
#include "sockets.h"
#include "util.h"

#define MAX_WATCHES (1 << 20)
#define MAX_HANDLE  128

/* The mount tables a watch's inode is looked for in: kupdate's, and for a
 * process in a mount namespace of its own (root "/proc/PID/root"), that
 * process's; read once per instance */
struct watch_mounts {
	struct mount_table self, ns;
	const char *root; /* "" or the process's root */
};

static int watch_mounts_read(struct watch_mounts *m, const char *root, pid_t pid)
{
	char info[64];
	int ret;

	memset(m, 0, sizeof(*m));
	m->root = root;
	ret = mount_table_read(NULL, &m->self);
	if (ret || !root[0])
		return ret;
	snprintf(info, sizeof(info), "/proc/%d/mountinfo", pid);
	return mount_table_read(info, &m->ns);
}

static void watch_mounts_free(struct watch_mounts *m)
{
	mount_table_free(&m->self);
	mount_table_free(&m->ns);
}

/* the mount of table t of the filesystem with kernel device number sdev,
 * a mount of the whole filesystem if there is one, or NULL */
static const struct mount_entry *mount_of(const struct mount_table *t, unsigned sdev)
{
	unsigned maj = sdev >> 20, min = sdev & 0xfffff;
	const struct mount_entry *best = NULL;

	for (size_t i = 0; i < t->n; i++) {
		const struct mount_entry *e = &t->e[i];

		if (e->maj != maj || e->min != min)
			continue;
		if (!strcmp(e->root, "/"))
			return e;
		if (!best)
			best = e;
	}
	return best;
}

/* an fd of a mount of that filesystem, as the process sees it */
static int open_mount(const struct watch_mounts *m, unsigned sdev)
{
	const struct mount_entry *e = mount_of(m->root[0] ? &m->ns : &m->self, sdev);
	char mp[PATH_MAX + 64];
	int fd;

	if (!e)
		return -ENOENT;
	snprintf(mp, sizeof(mp), "%s%s", m->root, e->mp);
	fd = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/* A filesystem only the process's mount namespace has: a tmpfs or ramfs
 * mounted whole is made again by the restore (its contents saved, or made
 * by the namespace's maker: a private /dev), its files with other inodes;
 * any other is refused */
static int private_fs(const struct watch_mounts *m, pid_t pid, int fd, unsigned wd, unsigned sdev,
		      const char *path, bool *fresh)
{
	const struct mount_entry *e;

	if (!m->root[0] || mount_of(&m->self, sdev))
		return 0;
	e = mount_of(&m->ns, sdev);
	if (e && !strcmp(e->root, "/") &&
	    (!strcmp(e->fstype, "tmpfs") || !strcmp(e->fstype, "ramfs"))) {
		*fresh = true;
		return 0;
	}
	pr_err("pid %d: fd %d: inotify watch %u watches %s, on a filesystem (%s) only its mount "
	       "namespace has, which the restore does not make again whole; kupdate cannot "
	       "restore the watch",
	       pid, fd, wd, path, e ? e->fstype : "not mounted");
	return -EOPNOTSUPP;
}

/* A watch on a file of the cgroup2 hierarchy (systemd's on its units'
 * cgroup.events): the restore makes the tree's groups again, their files
 * with other inodes: its kind is checked instead (fresh).  One in a group
 * below the tree's that holds none of its processes (a slice) has that
 * group recorded, made again; one outside the tree's keeps its inode. */
static int cgroup_watch(struct cr_dump_ctx *ctx, const struct watch_mounts *m, pid_t pid, int fd,
			unsigned wd, unsigned sdev, struct file_handle *fh, const char *path,
			bool *fresh, InotifyWatch *w)
{
	const char *rel = NULL;
	const struct mount_entry *e = mount_of(&m->self, sdev);
	char lpath[64], buf[PATH_MAX + 1], group[2 * PATH_MAX + 2];
	_cleanup_close_ int mfd = -1, wfd = -1;
	size_t mp;
	struct stat st;
	char *slash;
	ssize_t len;
	int made;

	if (!e || strcmp(e->fstype, "cgroup2"))
		return 0;
	mfd = open(e->mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	wfd = mfd < 0 ? -1 : open_by_handle_at(mfd, fh, O_PATH | O_CLOEXEC);
	snprintf(lpath, sizeof(lpath), "/proc/self/fd/%d", wfd);
	len = wfd < 0 ? -1 : readlink(lpath, buf, sizeof(buf) - 1);
	mp = strcmp(e->mp, "/") ? strlen(e->mp) : 0;
	if (len <= 0 || fstat(wfd, &st) || (size_t)len < mp || strncmp(buf, e->mp, mp)) {
		pr_err("pid %d: fd %d: cannot find the control group inotify watch %u (%s) lies in",
		       pid, fd, wd, path);
		return -EOPNOTSUPP;
	}
	buf[len] = 0;
	/* the hierarchy's path: the mount's root, then the path below it */
	snprintf(group, sizeof(group), "%s%s", strcmp(e->root, "/") ? e->root : "",
		 buf[mp] ? buf + mp : "/");
	if (!S_ISDIR(st.st_mode) && (slash = strrchr(group, '/')))
		*(slash == group ? slash + 1 : slash) = 0;
	made = cgroups_made_again(ctx, group, &rel);
	/* an empty one (systemd watches its slices): recorded, made again */
	if (made == 0 && !cgroups_record(ctx, rel))
		made = 1;
	if (made == 0) {
		pr_err("pid %d: fd %d: inotify watch %u watches %s, in the control group %s, which "
		       "the restore does not make again (no group of the tree's is recorded)",
		       pid, fd, wd, path, group);
		return -EOPNOTSUPP;
	}
	*fresh |= made > 0;
	if (made > 0 && !(w->cgroup = strdup(rel)))
		return -ENOMEM;
	return 0;
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
static int watch_path(struct cr_dump_ctx *ctx, const struct watch_mounts *m, pid_t pid, int fd,
		      unsigned wd, unsigned sdev, uint64_t ino, const char *hline, InotifyWatch *w,
		      bool *deleted)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE];
	} h;
	unsigned hbytes, htype;
	char handle[2 * MAX_HANDLE + 1], lpath[64], buf[PATH_MAX + 1], seen[PATH_MAX + 64];
	_cleanup_close_ int mfd = -1, wfd = -1;
	struct stat st;
	bool fresh = false;
	ssize_t n;
	int ret;

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
	mfd = open_mount(m, sdev);
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
	ret = private_fs(m, pid, fd, wd, sdev, buf, &fresh);
	if (!ret)
		ret = cgroup_watch(ctx, m, pid, fd, wd, sdev, &h.fh, buf, &fresh, w);
	if (ret)
		return ret;
	if (stat(dump_path(ctx, buf, seen, sizeof(seen)), &st) || st.st_ino != ino ||
	    major(st.st_dev) != sdev >> 20 || minor(st.st_dev) != (sdev & 0xfffff)) {
		/* deleted: its ghost is looked for once every fd is dumped */
		if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
			buf[n - 10] = 0;
		*deleted = true;
	} else if (fresh) {
		/* made again with another inode: its kind is checked */
		w->has_fresh_type = 1;
		w->fresh_type = st.st_mode & S_IFMT;
	}
	w->path = strdup(buf);
	return w->path ? 0 : -ENOMEM;
}

/* Events queued (what read(2) would return) cannot be put back into a
 * kernel queue: the dump waits for the program to read them.  -EAGAIN:
 * kupdate's units thaw the unit a moment and try again; a plain dump says
 * so.  FIONREAD, through kupdate's own descriptor, reads nothing.  But an
 * instance whose every watch is an IN_MODIFY one of a control group's file
 * (a container's systemd's on its units' cgroup.events, which the freeze of
 * the unit itself changes, so that retrying never ends): its events say
 * only "read the file again", and are made again for every watched group
 * once the tree is restored (inotify_restore_events). */
static int events_queued(struct cr_proc *p, int fd, InotifyFile *in)
{
	_cleanup_close_ int dup = sk_dup(p, fd);
	bool groups = in->n_watches > 0;
	int n = 0;

	if (dup < 0)
		return dup;
	if (ioctl(dup, FIONREAD, &n)) {
		int ret = -errno;

		pr_perror("pid %d: fd %d: cannot read how many inotify events are queued", p->pid,
			  fd);
		return ret;
	}
	if (n <= 0)
		return 0;
	for (size_t i = 0; i < in->n_watches; i++)
		groups &= in->watches[i]->cgroup &&
			  !(in->watches[i]->mask & IN_ALL_EVENTS & ~(uint32_t)IN_MODIFY);
	if (groups) {
		pr_info("pid %d: fd %d: %d bytes of inotify events queued on its watches of "
			"control groups: made again after the restore",
			p->pid, fd, n);
		in->has_queued = 1;
		in->queued = n;
		return 0;
	}
	pr_err("pid %d: fd %d: %d bytes of inotify events are queued, which cannot be put "
	       "back; retry once the program has read them",
	       p->pid, fd, n);
	return -EAGAIN;
}

/* one "inotify wd:" line of fdinfo (l after its tag) */
static int one_watch(struct cr_dump_ctx *ctx, const struct watch_mounts *m, pid_t pid, int fd,
		     const char *l, InotifyFile *in)
{
	unsigned wd, sdev, mask, ignored;
	unsigned long ino;
	InotifyWatch *w, **nw;
	bool deleted = false;
	int off = 0, ret;

	if (sscanf(l, "%x ino:%lx sdev:%x mask:%x ignored_mask:%x%n", &wd, &ino, &sdev, &mask,
		   &ignored, &off) < 5 ||
	    !off) {
		pr_err("pid %d: fd %d: cannot parse the inotify's fdinfo", pid, fd);
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
	ret = watch_path(ctx, m, pid, fd, wd, sdev, ino, l + off, w, &deleted);
	if (!ret && deleted) {
		w->has_sdev = 1;
		w->sdev = sdev;
		w->has_ghost_id = 1; /* 0 until inotify_finish_dump finds it */
	}
	return ret;
}

int inotify_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f)
{
	InotifyFile *in = calloc(1, sizeof(*in));
	struct watch_mounts m;
	const char *l;
	int ret;

	if (!in)
		return -ENOMEM;
	f->ify = in;
	inotify_file__init(in);
	l = fdinfo_find(fdinfo, "inotify wd:");
	if (!l)
		return events_queued(p, fd, in);
	ret = watch_mounts_read(&m, ctx->root_prefix, p->pid);
	if (ret)
		pr_err("pid %d: fd %d: cannot read the mount tables its inotify watches are looked "
		       "for in: %s",
		       p->pid, fd, strerror(-ret));
	for (; l && !ret; l = fdinfo_find(l, "inotify wd:"))
		ret = one_watch(ctx, &m, p->pid, fd, l, in);
	watch_mounts_free(&m);
	if (ret)
		return ret;
	/* the kernel lists them newest first */
	for (size_t i = 1; i < in->n_watches; i++)
		for (size_t k = i; k > 0 && in->watches[k - 1]->wd > in->watches[k]->wd; k--) {
			InotifyWatch *t = in->watches[k];

			in->watches[k] = in->watches[k - 1];
			in->watches[k - 1] = t;
		}
	return events_queued(p, fd, in);
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
		free(in->watches[i]->cgroup);
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
		    !(w->mask & IN_ALL_EVENTS) || (i && w->wd <= in->watches[i - 1]->wd) ||
		    (w->cgroup && (w->cgroup[0] == '/' || strstr(w->cgroup, ".."))))
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
		if (pfd < 0 || fstat(pfd, &st) ||
		    (w->has_fresh_type ? (st.st_mode & S_IFMT) != w->fresh_type
				       : st.st_ino != w->ino)) {
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

int inotify_restore_events(const struct rctx *c)
{
	for (size_t i = 0; i < c->files.nr_files; i++) {
		const FileEntry *e = c->files.files[i];
		int n = 0;

		if (e->kind != FILE_KIND__FILE_INOTIFY || !e->ify || !e->ify->has_queued)
			continue;
		for (size_t k = 0; k < e->ify->n_watches; k++) {
			int ret;

			if (!e->ify->watches[k]->cgroup)
				continue;
			ret = cgroups_renotify(c, e->ify->watches[k]->cgroup);
			if (ret)
				return ret;
			n++;
		}
		pr_debug("inotify %u: the %u bytes of events it had queued made again on %d "
			 "control groups",
			 e->id, e->ify->queued, n);
	}
	return 0;
}
