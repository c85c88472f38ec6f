/* The directories of a tree's own mount namespace that no file system
 * outside keeps: a systemd unit's PrivateTmp= /tmp and /var/tmp (the new
 * boot's systemd makes them anew, empty), a tmpfs of the namespace's own
 * (namespaces.c chooses them).  Saved whole, as the tree's state: what the
 * service wrote there, the files it holds open by name (reopened by path
 * inside the new namespace: their inode numbers are new, the dump records
 * none for them), with modes, owners, times, hard links, symlinks and
 * FIFOs.  A socket file is left out (a bound socket of the tree makes its
 * own again, unix.c); a device node is refused.
 *
 * Dump: the tree is stopped; its directory is walked through
 * /proc/ROOT/root, not crossing into another mount, and each node listed;
 * the data are read when the images are written (the tree still stopped),
 * holes left out, into tmpdir-N.img.  At most TMPDIR_MAX bytes of data a
 * directory, else refused naming it.
 * Restore: inside the namespace kupdate entered, the directory must be
 * empty (a new one); the nodes are made again, parents first, owners and
 * modes set, the directories' times last. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cr-util.h"
#include "dump.h"
#include "ghost.h"
#include "image.h"
#include "images/tmpdir.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "tmpdir.h"
#include "util.h"

#define CHUNK	   (1U << 20)
#define TMPDIR_MAX (IMG_MAX_FILE - (8U << 20))
#define NODES_MAX  100000

struct tnode {
	char *rel;
	struct stat st;
	char *target;
	uint32_t link_of; /* index + 1 of the node it is a hard link of */
};

struct tmpdir {
	char *path;
	/* a container's (mntns.c): looked at through its maker's /proc/PID/root
	 * rather than the tree's, device nodes kept */
	pid_t owner;
	char root[32];
	struct stat st;
	struct tnode *nodes;
	size_t nr;
	uint64_t data;
};

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static int add_node(struct tmpdir *d, const char *rel, const struct stat *st, int dfd,
		    const char *name)
{
	struct tnode *n;

	if (d->nr >= NODES_MAX) {
		pr_err("%s holds more than %d files in the tree's mount namespace; kupdate saves "
		       "no more",
		       d->path, NODES_MAX);
		return -EFBIG;
	}
	d->nodes = xrealloc_array(d->nodes, d->nr + 1, sizeof(*d->nodes));
	if (!d->nodes)
		return -ENOMEM;
	n = &d->nodes[d->nr];
	memset(n, 0, sizeof(*n));
	n->rel = xstrdup(rel);
	n->st = *st;
	if (!n->rel)
		return -ENOMEM;
	d->nr++;
	if (S_ISLNK(st->st_mode)) {
		char buf[PATH_MAX];
		ssize_t len = readlinkat(dfd, name, buf, sizeof(buf) - 1);

		if (len < 0)
			return pr_errno("%s/%s: cannot read the symlink", d->path, rel);
		buf[len] = 0;
		n->target = xstrdup(buf);
		return n->target ? 0 : -ENOMEM;
	}
	if (S_ISREG(st->st_mode) && st->st_nlink > 1)
		for (size_t i = 0; i + 1 < d->nr; i++)
			if (d->nodes[i].st.st_ino == st->st_ino &&
			    S_ISREG(d->nodes[i].st.st_mode) && !d->nodes[i].link_of) {
				n->link_of = i + 1;
				return 0;
			}
	if (S_ISREG(st->st_mode)) {
		d->data += MIN((uint64_t)st->st_blocks * 512ULL, (uint64_t)st->st_size);
		if (d->data > TMPDIR_MAX) {
			pr_err("%s holds more than %u MiB in the tree's mount namespace; kupdate "
			       "saves no more",
			       d->path, TMPDIR_MAX >> 20);
			return -EFBIG;
		}
	}
	return 0;
}

static int walk(struct tmpdir *d, int dfd, const char *rel, dev_t dev)
{
	DIR *dir = fdopendir(dfd);
	struct dirent *de;
	int ret = 0;

	if (!dir) {
		close(dfd);
		return -errno;
	}
	while (!ret && (de = readdir(dir))) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			ret = pr_errno("%s/%s: cannot look at it", d->path, sub);
			break;
		}
		if (st.st_dev != dev) {
			/* another mount, recorded on its own; in a container's
			 * tmpfs (made new at the restore) the directory it is
			 * on is kept, empty (its own mode and owner are hidden:
			 * the tmpfs root's, 0755), that the mount has its
			 * point in a tmpfs made read-only (nspawn's /sys); a
			 * unit's namespace has its points already */
			if (de->d_type == DT_DIR && d->owner) {
				struct stat pt = d->st;

				pt.st_mode = S_IFDIR | 0755;
				pt.st_nlink = 2;
				ret = add_node(d, sub, &pt, dirfd(dir), de->d_name);
			}
			continue;
		}
		if (S_ISSOCK(st.st_mode))
			continue;
		if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && !d->owner) {
			pr_err("%s/%s is a device node in the tree's own %s; kupdate does not make "
			       "device nodes",
			       d->path, sub, d->path);
			ret = -EOPNOTSUPP;
			break;
		}
		ret = add_node(d, sub, &st, dirfd(dir), de->d_name);
		if (!ret && S_ISDIR(st.st_mode)) {
			int sfd = openat(dirfd(dir), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			ret = sfd < 0 ? pr_errno("%s/%s: cannot open it", d->path, sub)
				      : walk(d, sfd, sub, dev);
		}
	}
	closedir(dir);
	return ret;
}

/* as the tree, or d's owner, sees path */
static const char *tmpdir_path(const struct cr_dump_ctx *ctx, const struct tmpdir *d,
			       const char *path, char *buf, size_t len)
{
	if (!d->owner)
		return dump_path(ctx, path, buf, len);
	snprintf(buf, len, "%s%s", d->root, path);
	return buf;
}

int tmpdir_dump(struct cr_dump_ctx *ctx, const char *point)
{
	int ret = tmpdir_dump_in(ctx, 0, point);

	return ret < 0 ? ret : 0;
}

int tmpdir_dump_in(struct cr_dump_ctx *ctx, pid_t owner, const char *point)
{
	struct cr_ns *ns = ctx->ns;
	char buf[PATH_MAX];
	struct tmpdir *d;
	int fd, ret;

	ns->tmpdirs = xrealloc_array(ns->tmpdirs, ns->nr_tmpdirs + 1, sizeof(*ns->tmpdirs));
	if (!ns->tmpdirs)
		return -ENOMEM;
	d = &ns->tmpdirs[ns->nr_tmpdirs];
	memset(d, 0, sizeof(*d));
	d->path = xstrdup(point);
	if (!d->path)
		return -ENOMEM;
	d->owner = owner;
	snprintf(d->root, sizeof(d->root), "/proc/%d/root", owner);
	ns->nr_tmpdirs++;
	fd = open(tmpdir_path(ctx, d, point, buf, sizeof(buf)), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &d->st)) {
		ret = pr_errno("%s in the tree's mount namespace: cannot open it", point);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	ret = walk(d, fd, "", d->st.st_dev);
	if (!ret)
		pr_debug("%s of the %s mount namespace: %zu files, %" PRIu64 " bytes to save",
			 point, owner ? "container's" : "tree's", d->nr, d->data);
	return ret ? ret : (int)ns->nr_tmpdirs - 1;
}

bool tmpdir_holds(const struct cr_dump_ctx *ctx, pid_t owner, const char *path)
{
	for (size_t i = 0; i < ctx->ns->nr_tmpdirs; i++) {
		size_t l = strlen(ctx->ns->tmpdirs[i].path);

		if (ctx->ns->tmpdirs[i].owner != owner)
			continue;
		if (!strncmp(path, ctx->ns->tmpdirs[i].path, l) && path[l] == '/')
			return true;
	}
	return false;
}

static void tmpdir_chunk(off_t off, const unsigned char *buf, size_t len, void *arg)
{
	TmpdirNode c = TMPDIR_NODE__INIT;

	c.has_offset = 1;
	c.offset = off;
	c.has_data = 1;
	c.data.data = (uint8_t *)buf;
	c.data.len = len;
	img_write(arg, &c.base);
}

static int write_data(struct cr_dump_ctx *ctx, struct img_writer *w, const struct tmpdir *d,
		      const struct tnode *n, unsigned char *buf)
{
	char path[PATH_MAX], full[PATH_MAX + 64];
	off_t at = 0;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/%s", d->path, n->rel);
	fd = open(tmpdir_path(ctx, d, path, full, sizeof(full)),
		  O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0)
		fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return pr_errno("%s: cannot read it", path);
	ret = ghost_each_chunk(fd, n->st.st_size, buf, tmpdir_chunk, w, &at);
	close(fd);
	if (ret)
		pr_err("%s: cannot read it at %lu (changed while the tree was stopped?): %s", path,
		       (unsigned long)at, strerror(-ret));
	return ret;
}

static int write_one(struct cr_dump_ctx *ctx, const struct tmpdir *d, size_t idx,
		     unsigned char *buf)
{
	TmpdirEntry e = TMPDIR_ENTRY__INIT;
	struct img_writer w;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "tmpdir-%zu.img", idx);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_TMPDIR);
	if (ret)
		return ret;
	e.path = d->path;
	e.mode = d->st.st_mode;
	e.uid = d->st.st_uid;
	e.gid = d->st.st_gid;
	e.nr_nodes = d->nr;
	e.data = d->data;
	img_write(&w, &e.base);
	for (size_t i = 0; i < d->nr && !ret; i++) {
		const struct tnode *t = &d->nodes[i];
		TmpdirNode n = TMPDIR_NODE__INIT;

		n.rel = t->rel;
		n.has_mode = n.has_uid = n.has_gid = n.has_atime_ns = n.has_mtime_ns = 1;
		n.has_size = 1;
		n.mode = t->st.st_mode;
		n.uid = t->st.st_uid;
		n.gid = t->st.st_gid;
		n.atime_ns = ts_ns(&t->st.st_atim);
		n.mtime_ns = ts_ns(&t->st.st_mtim);
		n.size = S_ISREG(t->st.st_mode) ? t->st.st_size : 0;
		n.target = t->target;
		if (S_ISCHR(t->st.st_mode) || S_ISBLK(t->st.st_mode)) {
			n.has_rdev = 1;
			n.rdev = t->st.st_rdev;
		}
		if (t->link_of) {
			n.has_link_of = 1;
			n.link_of = t->link_of - 1;
		}
		img_write(&w, &n.base);
		if (S_ISREG(t->st.st_mode) && !t->link_of)
			ret = write_data(ctx, &w, d, t, buf);
	}
	if (ret) {
		img_writer_abort(&w);
		return ret;
	}
	return img_writer_close(&w);
}

int tmpdir_write(struct cr_dump_ctx *ctx, char ***paths, size_t *nr)
{
	struct cr_ns *ns = ctx->ns;
	_cleanup_free_ unsigned char *buf = NULL;
	int ret = 0;

	*paths = NULL;
	*nr = 0;
	if (!ns->nr_tmpdirs)
		return 0;
	buf = malloc(CHUNK);
	*paths = xrealloc_array(NULL, ns->nr_tmpdirs, sizeof(**paths));
	if (!buf || !*paths)
		return -ENOMEM;
	/* the tree's own come first (namespaces.c lists them before any
	 * process is looked at): their indices are namespaces.img's */
	for (size_t i = 0; i < ns->nr_tmpdirs && !ret; i++) {
		ret = write_one(ctx, &ns->tmpdirs[i], i, buf);
		if (!ns->tmpdirs[i].owner && *nr == i)
			(*paths)[(*nr)++] = ns->tmpdirs[i].path;
	}
	return ret;
}

void tmpdir_free_dump(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	for (size_t i = 0; i < ns->nr_tmpdirs; i++) {
		struct tmpdir *d = &ns->tmpdirs[i];

		for (size_t j = 0; j < d->nr; j++) {
			free(d->nodes[j].rel);
			free(d->nodes[j].target);
		}
		free(d->nodes);
		free(d->path);
	}
	free(ns->tmpdirs);
	ns->tmpdirs = NULL;
	ns->nr_tmpdirs = 0;
}

/* ------------------------------------------------------------ restore */

int tmpdir_check(pid_t pid, char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *p = xasprintf("/proc/%d/root%s", pid, paths[i]);
		struct dirent *de;
		DIR *d;
		bool empty = true;

		if (!p)
			return -ENOMEM;
		struct stat top, st;

		d = opendir(p);
		if (!d || fstat(dirfd(d), &top)) {
			if (d)
				closedir(d);
			return pr_errno("%s in the namespace of pid %d: cannot open it", paths[i],
					pid);
		}
		/* a mount point in it (a bind into a TemporaryFileSystem=) is
		 * the namespace's, not content */
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
			     st.st_dev == top.st_dev))
				empty = false;
		closedir(d);
		if (!empty) {
			pr_err("%s in the namespace of pid %d is not empty: the tree's saved "
			       "contents would mix with others",
			       paths[i], pid);
			return -EEXIST;
		}
	}
	return 0;
}

static void set_times(int dfd, const char *rel, const TmpdirNode *n)
{
	struct timespec ts[2] = {
		{ MAX(n->atime_ns, 0) / 1000000000LL, MAX(n->atime_ns, 0) % 1000000000LL },
		{ MAX(n->mtime_ns, 0) / 1000000000LL, MAX(n->mtime_ns, 0) % 1000000000LL },
	};

	utimensat(dfd, rel, ts, AT_SYMLINK_NOFOLLOW);
}

/* node n (index idx) made again under dfd; *fd: a regular file's, for the
 * chunks that follow */
/* uid, gid as ids names them; -EINVAL naming what has no id there */
static int owner(const struct tmpdir_ids *ids, const char *dir, const char *rel, uint32_t *uid,
		 uint32_t *gid)
{
	int64_t u, g;

	if (!ids)
		return 0;
	u = ids->inside(ids->arg, *uid, false);
	g = ids->inside(ids->arg, *gid, true);
	if (u < 0 || g < 0) {
		pr_err("%s/%s: its owner %u:%u has no id in the user namespace it is made again "
		       "in",
		       dir, rel, *uid, *gid);
		return -EINVAL;
	}
	*uid = (uint32_t)u;
	*gid = (uint32_t)g;
	return 0;
}

static int make_node(int dfd, const char *dir, TmpdirNode **nodes, size_t idx, int *fd,
		     const struct tmpdir_ids *ids)
{
	const TmpdirNode *n = nodes[idx];
	mode_t perm = n->mode & 07777;
	uint32_t uid, gid;
	int ret = 0;

	if (!n->rel || !*n->rel || n->rel[0] == '/' || !strcmp(n->rel, "..") ||
	    !strncmp(n->rel, "../", 3) || strstr(n->rel, "/../") ||
	    (strlen(n->rel) > 2 && !strcmp(n->rel + strlen(n->rel) - 3, "/.."))) {
		pr_err("image of %s is damaged: a node named %s", dir, n->rel ? n->rel : "");
		return -EINVAL;
	}
	if (n->has_link_of) {
		if (n->link_of >= idx || !S_ISREG(nodes[n->link_of]->mode)) {
			pr_err("image of %s is damaged: a bad hard link", dir);
			return -EINVAL;
		}
		if (linkat(dfd, nodes[n->link_of]->rel, dfd, n->rel, 0))
			return pr_errno("%s/%s: cannot link it again", dir, n->rel);
		return 0;
	}
	if (S_ISDIR(n->mode))
		ret = mkdirat(dfd, n->rel, 0700);
	else if ((S_ISCHR(n->mode) || S_ISBLK(n->mode)) && n->has_rdev)
		ret = mknodat(dfd, n->rel, (n->mode & S_IFMT) | 0600, n->rdev);
	else if (S_ISLNK(n->mode))
		ret = n->target ? symlinkat(n->target, dfd, n->rel) : (errno = EINVAL, -1);
	else if (S_ISFIFO(n->mode))
		ret = mkfifoat(dfd, n->rel, 0600);
	else if (S_ISREG(n->mode)) {
		*fd = openat(dfd, n->rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
		ret = *fd < 0 ? -1 : 0;
		if (!ret && ftruncate(*fd, n->size))
			ret = -1;
	} else {
		pr_err("image of %s is damaged: %s has mode %o", dir, n->rel, n->mode);
		return -EINVAL;
	}
	if (ret)
		return pr_errno("%s/%s: cannot make it again", dir, n->rel);
	uid = n->uid;
	gid = n->gid;
	ret = owner(ids, dir, n->rel, &uid, &gid);
	if (ret)
		return ret;
	if (fchownat(dfd, n->rel, uid, gid, AT_SYMLINK_NOFOLLOW))
		return pr_errno("%s/%s: cannot give it back to %u:%u", dir, n->rel, uid, gid);
	if (!S_ISLNK(n->mode) && fchmodat(dfd, n->rel, perm, 0))
		return pr_errno("%s/%s: cannot set its mode %o", dir, n->rel, perm);
	return 0;
}

void tmpdir_image_name(size_t idx, char *buf, size_t len)
{
	snprintf(buf, len, "tmpdir-%zu.img", idx);
}

/* the saved directory path made again at at from its image, read (r), which
 * it closes */
static int fill(struct img_reader *rd, const char *path, const char *at,
		const struct tmpdir_ids *ids)
{
	struct img_reader r = *rd;
	const char *name = r.name;
	ProtobufCMessage *m;
	TmpdirEntry *e = NULL;
	TmpdirNode **nodes = NULL;
	size_t nr = 0;
	struct stat st = { 0 };
	uint32_t uid, gid;
	int dfd = -1, fd = -1, ret;

	ret = img_read(&r, &tmpdir_entry__descriptor, &m);
	if (ret <= 0 || strcmp(((TmpdirEntry *)m)->path, path)) {
		img_reader_close(&r);
		pr_err("image %s is damaged: it does not hold %s", name, path);
		return ret < 0 ? ret : -EINVAL;
	}
	e = (TmpdirEntry *)m;
	ret = 0;
	nodes = calloc(r.nr ? r.nr : 1, sizeof(*nodes));
	dfd = open(at, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!nodes || dfd < 0)
		ret = nodes ? pr_errno("%s: cannot open it in the tree's namespace", path)
			    : -ENOMEM;
	while (!ret && (ret = img_read(&r, &tmpdir_node__descriptor, &m)) > 0) {
		TmpdirNode *n = (TmpdirNode *)m;

		ret = 0;
		if (n->has_data) {
			if (fd < 0 || !nr || n->offset + n->data.len > nodes[nr - 1]->size) {
				pr_err("image %s is damaged: data outside a file", name);
				ret = -EINVAL;
			} else {
				ret = pwrite_all(fd, n->data.data, n->data.len, n->offset);
			}
			tmpdir_node__free_unpacked(n, NULL);
			continue;
		}
		if (fd >= 0) {
			close(fd);
			fd = -1;
		}
		nodes[nr++] = n;
		ret = make_node(dfd, path, nodes, nr - 1, &fd, ids);
	}
	if (fd >= 0)
		close(fd);
	/* times last, deepest first: making a child changes its directory's */
	for (size_t i = nr; !ret && i-- > 0;)
		if (!nodes[i]->has_link_of)
			set_times(dfd, nodes[i]->rel, nodes[i]);
	/* (a read-only one is left as it is when it is right) */
	uid = e->uid;
	gid = e->gid;
	if (!ret)
		ret = owner(ids, path, ".", &uid, &gid);
	if (!ret && !fstat(dfd, &st) && (st.st_uid != uid || st.st_gid != gid) &&
	    fchown(dfd, uid, gid))
		ret = pr_errno("%s: cannot give it back to %u:%u", path, uid, gid);
	if (!ret && (st.st_mode & 07777) != (e->mode & 07777) && fchmod(dfd, e->mode & 07777))
		ret = pr_errno("%s: cannot set its mode %o", path, e->mode & 07777);
	if (!ret)
		pr_debug("%s of the tree's mount namespace: %zu files made again", path, nr);
	for (size_t i = 0; i < nr; i++)
		tmpdir_node__free_unpacked(nodes[i], NULL);
	free(nodes);
	tmpdir_entry__free_unpacked(e, NULL);
	img_reader_close(&r);
	if (dfd >= 0)
		close(dfd);
	return ret < 0 ? ret : 0;
}

static int restore_one(int imgfd, const char *path, size_t idx, const char *at,
		       const struct tmpdir_ids *ids)
{
	struct img_reader r;
	char name[64];
	int ret;

	tmpdir_image_name(idx, name, sizeof(name));
	ret = img_reader_open(&r, imgfd, name, IMG_TMPDIR);
	return ret ? ret : fill(&r, path, at, ids);
}

int tmpdir_restore(int imgfd, char *const *paths, size_t n)
{
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++)
		ret = restore_one(imgfd, paths[i], i, paths[i], NULL);
	return ret;
}

int tmpdir_restore_at(int imgfd, size_t idx, const char *path, const char *at)
{
	return restore_one(imgfd, path, idx, at, NULL);
}

int tmpdir_restore_read(struct img_reader *r, const char *path, const char *at,
			const struct tmpdir_ids *ids)
{
	return fill(r, path, at, ids);
}
