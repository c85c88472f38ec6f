/* Files opened or mapped, then unlinked ("ghost" files): their contents
 * are saved.
 *
 * Dump: an fd whose file has no name any more (nlink 0), a mapping of a
 * deleted file (a library or an executable that apt replaced while the
 * service ran) or a deleted executable is saved once per inode, however
 * many fds and mappings of however many processes refer to it: mode,
 * owner, times, path and data, read through /proc/PID/fd/N (or
 * /proc/PID/map_files/START-END, /proc/PID/exe) skipping holes
 * (SEEK_DATA/SEEK_HOLE), into ghost-ID.img.  Files with more data than the
 * ghost limit (cr_dump_opts.ghost_limit, `kupdate dump --ghost-limit`; by
 * default 1 MiB for a file only open, 256 MiB for one mapped or run) are
 * refused (holes do not count: they cost nothing), as are unlinked files
 * that still have another name (they would come back as a separate copy,
 * no longer shared with that name).
 * Restore: kupdate makes the file again in its old directory, under its
 * old name if that is free (so /proc/PID/fd and maps show the same path)
 * or a temporary one beside it (the old name is usually the new version's),
 * fills it with its holes, unlinks it, and opens every description of it
 * from that one inode before the tree is created (files-restore.c); a mapped one
 * is made by kupdate before it forks, and every process maps it from
 * there (memory.c) or makes it its executable (restore-blob.c). */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "dump.h"
#include "ghost.h"
#include "image.h"
#include "log.h"
#include "namespaces.h"
#include "util.h"

#define CHUNK (1U << 20)
/* what one image can hold (image.h), with room for the records */
#define GHOST_MAX (IMG_MAX_FILE - (8U << 20))

/* The operator's limit, or by default one for files a process only has
 * open (a deleted log can be huge, and is rarely worth its bytes) and a
 * larger one for the libraries and programs it maps or runs (after a libc
 * update every process maps its 2 MB old copy: no cycle without them). */
static uint64_t ghost_limit(const struct cr_dump_ctx *ctx, bool mapped)
{
	uint64_t l = ctx->opts->ghost_limit ? ctx->opts->ghost_limit
		     : mapped		    ? GHOST_MAPPED_LIMIT_DEFAULT
					    : GHOST_LIMIT_DEFAULT;

	return MIN(l, (uint64_t)GHOST_MAX);
}

/* The bytes of data of a file, its size less its holes (SEEK_DATA and
 * SEEK_HOLE; a file system without them has no holes). */
static int data_bytes(int rfd, uint64_t size, uint64_t *out)
{
	off_t off = 0;

	*out = 0;
	while ((uint64_t)off < size) {
		off_t data = lseek(rfd, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			*out += size - off;
			break;
		}
		hole = lseek(rfd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = size;
		*out += hole - data;
		off = hole;
	}
	return 0;
}

int ghost_each_chunk(int fd, off_t size, unsigned char *buf,
		     void (*fn)(off_t off, const unsigned char *buf, size_t len, void *arg),
		     void *arg, off_t *at)
{
	off_t off = 0;

	while (off < size) {
		off_t data = lseek(fd, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) { /* no SEEK_DATA there: all of it */
			data = off;
			hole = size;
		} else {
			hole = lseek(fd, data, SEEK_HOLE);
			if (hole < 0 || hole > size)
				hole = size;
		}
		while (data < hole) {
			ssize_t n =
				pread(fd, buf, MIN((uint64_t)(hole - data), (uint64_t)CHUNK), data);

			if (n <= 0) {
				*at = data;
				return n < 0 ? -errno : -EIO;
			}
			fn(data, buf, n, arg);
			data += n;
		}
		off = hole;
	}
	return 0;
}

static void ghost_chunk(off_t off, const unsigned char *buf, size_t len, void *arg)
{
	GhostChunk c = GHOST_CHUNK__INIT;

	c.offset = off;
	c.data.data = (uint8_t *)buf;
	c.data.len = len;
	img_write(arg, &c.base);
}

static int save_data(struct cr_dump_ctx *ctx, int rfd, const char *what, const char *path,
		     const struct stat *st, uint64_t data_len, uint32_t id)
{
	GhostEntry ge = GHOST_ENTRY__INIT;
	struct img_writer w;
	_cleanup_free_ unsigned char *buf = NULL;
	char name[64];
	off_t at = 0;
	int ret;

	buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	snprintf(name, sizeof(name), "ghost-%u.img", id);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_GHOST);
	if (ret)
		return ret;
	ge.id = id;
	ge.size = st->st_size;
	ge.mode = st->st_mode;
	ge.uid = st->st_uid;
	ge.gid = st->st_gid;
	ge.has_atime_ns = ge.has_mtime_ns = ge.has_ino = ge.has_data = 1;
	ge.atime_ns = (int64_t)st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
	ge.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	ge.ino = st->st_ino;
	ge.path = (char *)path;
	ge.data = data_len;
	img_write(&w, &ge.base);
	ret = ghost_each_chunk(rfd, st->st_size, buf, ghost_chunk, &w, &at);
	if (ret) {
		/* shrunk meanwhile?  The tree is stopped: an error */
		pr_err("%s %s: cannot read the deleted file at %lu: %s", what, path,
		       (unsigned long)at, strerror(-ret));
		img_writer_abort(&w);
		return ret;
	}
	return img_writer_close(&w);
}

/* the restore makes the file again in its directory: 0 if that exists
 * and can be written */
static int dir_usable(const struct cr_dump_ctx *ctx, const char *path)
{
	char rdir[PATH_MAX + 64], dir[PATH_MAX];
	const char *slash = strrchr(path, '/'), *rd;
	struct statvfs sv;
	struct stat st;

	if (path[0] != '/' || !slash || (size_t)(slash - path) >= sizeof(dir))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	rd = dump_path(ctx, dir, rdir, sizeof(rdir)); /* as the tree sees it */

	if (stat(rd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (!statvfs(rd, &sv) && (sv.f_flag & ST_RDONLY))
		return -EROFS;
	return 0;
}

int ghost_save(struct cr_dump_ctx *ctx, const char *src, const char *what, const char *path,
	       const struct stat *st, bool mapped, uint32_t *id)
{
	_cleanup_close_ int rfd = -1;
	struct cr_ghost *ng;
	uint64_t limit = ghost_limit(ctx, mapped), data;
	int64_t t0 = now_ns(CLOCK_MONOTONIC);
	int ret;

	if (!S_ISREG(st->st_mode)) {
		pr_err("%s %s, which was deleted; kupdate restores only deleted regular files",
		       what, path);
		return -EOPNOTSUPP;
	}
	if (st->st_nlink) {
		pr_err("%s %s, whose name was removed but which still has %lu other link(s); "
		       "kupdate cannot restore it",
		       what, path, (unsigned long)st->st_nlink);
		return -EOPNOTSUPP;
	}
	for (int i = 0; i < ctx->nr_ghosts; i++)
		if (ctx->ghosts[i].dev == st->st_dev && ctx->ghosts[i].ino == st->st_ino) {
			ctx->ghosts[i].mapped |= mapped;
			*id = ctx->ghosts[i].id;
			return 0;
		}
	ret = dir_usable(ctx, path);
	if (ret) {
		pr_err("%s %s, which was deleted %s; kupdate cannot make it again there", what,
		       path, ret == -EROFS ? "on a read-only file system" : "with its directory");
		return -EOPNOTSUPP;
	}
	rfd = open(src, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (rfd < 0)
		rfd = open(src, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return pr_errno("%s %s: cannot open the deleted file (%s) to save it", what, path,
				src);
	ret = data_bytes(rfd, st->st_size, &data);
	if (ret)
		return ret;
	/* what is saved is the data: holes cost nothing */
	if (data > limit) {
		pr_err("%s the unlinked file %s of %lu bytes with %lu bytes of data, above the "
		       "limit of %lu bytes for saving unlinked files (kupdate dump "
		       "--ghost-limit%s)",
		       what, path, (unsigned long)st->st_size, (unsigned long)data,
		       (unsigned long)limit, limit == GHOST_MAX ? ", which images cap here" : "");
		return -EFBIG;
	}
	ng = xrealloc_array(ctx->ghosts, ctx->nr_ghosts + 1, sizeof(*ng));
	if (!ng)
		return -ENOMEM;
	ctx->ghosts = ng;
	ng += ctx->nr_ghosts;
	memset(ng, 0, sizeof(*ng));
	ng->id = ctx->nr_ghosts + 1;
	ng->dev = st->st_dev;
	ng->ino = st->st_ino;
	ng->data = data;
	ng->mapped = mapped;
	*id = ng->id;
	ctx->nr_ghosts++;
	/* a pre-dump saves memory only: the dump after it saves the files */
	if (!ctx->check_only && !ctx->opts->pre_dump)
		ret = save_data(ctx, rfd, what, path, st, data, *id);
	ctx->ghost_ns += now_ns(CLOCK_MONOTONIC) - t0;
	return ret;
}

int ghost_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct stat *st,
	       struct cr_file *f)
{
	char src[64], what[64];

	snprintf(src, sizeof(src), "/proc/%d/fd/%d", p->pid, fd);
	snprintf(what, sizeof(what), "pid %d: fd %d refers to", p->pid, fd);
	return ghost_save(ctx, src, what, f->path, st, false, &f->ghost_id);
}

void ghost_stats(const struct cr_dump_ctx *ctx, struct ghost_stats *gs)
{
	memset(gs, 0, sizeof(*gs));
	for (int i = 0; i < ctx->nr_ghosts; i++) {
		gs->files++;
		gs->bytes += ctx->ghosts[i].data;
		if (ctx->ghosts[i].mapped) {
			gs->mapped++;
			gs->mapped_bytes += ctx->ghosts[i].data;
		}
	}
	gs->ns = ctx->ghost_ns;
}

uint32_t ghost_find(const struct cr_dump_ctx *ctx, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < ctx->nr_ghosts; i++)
		if (ctx->ghosts[i].dev == dev && ctx->ghosts[i].ino == ino)
			return ctx->ghosts[i].id;
	return 0;
}

void ghost_free_dump(struct cr_dump_ctx *ctx)
{
	free(ctx->ghosts);
	ctx->ghosts = NULL;
	ctx->nr_ghosts = 0;
}

/* ------------------------------------------------------------- restore */

void ghost_free(struct rghost *g)
{
	if (g->e)
		ghost_entry__free_unpacked(g->e, NULL);
	for (size_t i = 0; i < g->nr_chunks; i++)
		ghost_chunk__free_unpacked(g->chunks[i], NULL);
	free(g->chunks);
	if (g->fd >= 0)
		close(g->fd);
	if (g->map_fd >= 0)
		close(g->map_fd);
	memset(g, 0, sizeof(*g));
	g->fd = g->map_fd = -1;
}

int ghost_load(int dirfd, uint32_t id, struct rghost *g)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	uint64_t end = 0;
	int ret;

	memset(g, 0, sizeof(*g));
	g->fd = g->map_fd = -1;
	snprintf(name, sizeof(name), "ghost-%u.img", id);
	ret = img_reader_open(&r, dirfd, name, IMG_GHOST);
	if (ret)
		return ret;
	ret = img_read_first(&r, &ghost_entry__descriptor, &m);
	if (ret) {
		img_reader_close(&r);
		return ret;
	}
	g->e = (GhostEntry *)m;
	g->chunks = calloc(r.nr ? r.nr : 1, sizeof(*g->chunks));
	if (!g->chunks) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &ghost_chunk__descriptor, &m)) > 0) {
		GhostChunk *c = (GhostChunk *)m;

		g->chunks[g->nr_chunks++] = c;
		if (c->offset < end || !c->data.len || c->data.len > CHUNK ||
		    c->offset + c->data.len > g->e->size) {
			pr_err("image %s is damaged: data at %lu", name, (unsigned long)c->offset);
			ret = -EINVAL;
			break;
		}
		end = c->offset + c->data.len;
	}
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	if (g->e->id != id || !S_ISREG(g->e->mode) || g->e->size > INT64_MAX) {
		pr_err("image %s is damaged: it does not hold unlinked file %u", name, id);
		return -EINVAL;
	}
	return 0;
}

/* a free name: the old one, else a temporary one beside it */
static int make_file(const char *path, uint32_t id, char *made, size_t len)
{
	const char *slash = strrchr(path, '/');
	int fd;

	snprintf(made, len, "%s", path);
	fd = open(made, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	for (int n = 0; fd < 0 && errno == EEXIST && n < 100; n++) {
		snprintf(made, len, "%.*s/.kupdate-ghost-%u-%d-%d", (int)(slash - path), path, id,
			 getpid(), n);
		fd = open(made, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	return fd < 0 ? -errno : fd;
}

int ghost_create(const struct rghost *g, const char *path)
{
	char made[PATH_MAX + 64];
	struct timespec ts[2];
	int fd, ret = 0;

	if (!path)
		path = g->e->path ? g->e->path : "";
	if (path[0] != '/' || !strrchr(path, '/')) {
		pr_err("unlinked file %s: not an absolute path", path);
		return -EINVAL;
	}
	fd = make_file(path, g->e->id, made, sizeof(made));
	if (fd < 0) {
		pr_err("cannot make the unlinked file %s again in its directory: %s", path,
		       strerror(-fd));
		return fd;
	}
	/* nobody sees it by name for longer than this */
	if (unlink(made)) {
		ret = pr_errno("cannot unlink %s", made);
		close(fd);
		return ret;
	}
	for (size_t i = 0; i < g->nr_chunks && !ret; i++)
		ret = pwrite_all(fd, g->chunks[i]->data.data, g->chunks[i]->data.len,
				 g->chunks[i]->offset);
	if (!ret && ftruncate(fd, g->e->size))
		ret = -errno;
	if (!ret && fchown(fd, g->e->uid, g->e->gid))
		ret = -errno;
	if (!ret && fchmod(fd, g->e->mode & 07777))
		ret = -errno;
	ts[0].tv_sec = MAX(g->e->atime_ns, 0) / 1000000000LL;
	ts[0].tv_nsec = MAX(g->e->atime_ns, 0) % 1000000000LL;
	ts[1].tv_sec = MAX(g->e->mtime_ns, 0) / 1000000000LL;
	ts[1].tv_nsec = MAX(g->e->mtime_ns, 0) % 1000000000LL;
	if (!ret && g->e->has_mtime_ns && g->e->has_atime_ns && futimens(fd, ts))
		ret = -errno;
	if (ret) {
		pr_err("cannot fill the unlinked file %s again (%" PRIu64 " bytes): %s", path,
		       g->e->size, strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}

int ghost_make_mapped(struct rghost *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char self[64];
		int fd;

		if (!g[i].mapped || g[i].map_fd >= 0)
			continue;
		if (!g[i].e->path) {
			pr_err("image ghost-%u.img is damaged: a mapped file without its path",
			       g[i].e->id);
			return -EINVAL;
		}
		fd = ghost_create(&g[i], NULL);
		if (fd < 0)
			return fd;
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		g[i].map_fd = open(self, O_RDONLY | O_CLOEXEC);
		if (g[i].map_fd < 0) {
			int ret = -errno;

			pr_perror("cannot open the deleted file %s again read-only", g[i].e->path);
			close(fd);
			return ret;
		}
		close(fd);
	}
	return 0;
}
