/* Files opened, then unlinked ("ghost" files): their contents are saved.
 *
 * Dump: an fd whose file has no name any more (nlink 0) is saved once per
 * inode: mode, owner, times and data, read through /proc/PID/fd/N skipping
 * holes (SEEK_DATA/SEEK_HOLE), into ghost-ID.img.  Files larger than the
 * ghost limit (cr_dump_opts.ghost_limit, `kupdate dump --ghost-limit`) are
 * refused, as are unlinked files that still have another name (the fd
 * would come back as a separate copy, no longer shared with that name).
 * Restore: kupdate makes the file again in its old directory, under its
 * old name if that is free (so /proc/PID/fd shows the same path) or a
 * temporary one, fills it, unlinks it, and opens every description of it
 * from that one inode before the tree is created (files.c). */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "dump.h"
#include "ghost.h"
#include "image.h"
#include "log.h"
#include "util.h"

#define CHUNK (1U << 20)
/* what one image can hold (image.h), with room for the records */
#define GHOST_MAX (IMG_MAX_FILE - (8U << 20))

static uint64_t ghost_limit(const struct cr_dump_ctx *ctx)
{
	uint64_t l = ctx->opts->ghost_limit ? ctx->opts->ghost_limit : GHOST_LIMIT_DEFAULT;

	return MIN(l, (uint64_t)GHOST_MAX);
}

static int save_data(struct cr_dump_ctx *ctx, pid_t pid, int fd, const struct stat *st, uint32_t id)
{
	GhostEntry ge = GHOST_ENTRY__INIT;
	struct img_writer w;
	_cleanup_free_ unsigned char *buf = NULL;
	_cleanup_close_ int rfd = -1;
	char path[64], name[64];
	off_t off = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (rfd < 0)
		rfd = open(path, O_RDONLY | O_CLOEXEC);
	if (rfd < 0) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot open its unlinked file to save it", pid, fd);
		return ret;
	}
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
	ge.has_atime_ns = ge.has_mtime_ns = ge.has_ino = 1;
	ge.atime_ns = (int64_t)st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
	ge.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	ge.ino = st->st_ino;
	img_write(&w, &ge.base);
	while (off < st->st_size) {
		off_t data = lseek(rfd, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			data = off;
			hole = st->st_size;
		} else {
			hole = lseek(rfd, data, SEEK_HOLE);
			if (hole < 0 || hole > st->st_size)
				hole = st->st_size;
		}
		while (data < hole) {
			GhostChunk c = GHOST_CHUNK__INIT;
			size_t len = MIN((uint64_t)(hole - data), (uint64_t)CHUNK);
			ssize_t n = pread(rfd, buf, len, data);

			if (n <= 0) {
				/* shrunk meanwhile?  The tree is stopped: an error */
				ret = n < 0 ? -errno : -EIO;
				pr_err("pid %d: fd %d: cannot read its unlinked file at %lu: %s",
				       pid, fd, (unsigned long)data, strerror(-ret));
				img_writer_abort(&w);
				return ret;
			}
			c.offset = data;
			c.data.data = buf;
			c.data.len = n;
			img_write(&w, &c.base);
			data += n;
		}
		off = hole;
	}
	return img_writer_close(&w);
}

int ghost_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct stat *st,
	       struct cr_file *f)
{
	struct cr_ghost *ng;
	uint64_t limit = ghost_limit(ctx);
	int ret;

	if (!S_ISREG(st->st_mode)) {
		pr_err("pid %d: fd %d refers to %s, which was deleted; kupdate restores only "
		       "deleted regular files",
		       p->pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	if (st->st_nlink) {
		pr_err("pid %d: fd %d refers to %s, whose name was removed but which still has "
		       "%lu other link(s); kupdate cannot restore it",
		       p->pid, fd, f->path, (unsigned long)st->st_nlink);
		return -EOPNOTSUPP;
	}
	for (int i = 0; i < ctx->nr_ghosts; i++)
		if (ctx->ghosts[i].dev == st->st_dev && ctx->ghosts[i].ino == st->st_ino) {
			f->ghost_id = ctx->ghosts[i].id;
			return 0;
		}
	if ((uint64_t)st->st_size > limit) {
		pr_err("pid %d: fd %d refers to the unlinked file %s of %lu bytes, above the limit "
		       "of %lu bytes for saving unlinked files (kupdate dump --ghost-limit%s)",
		       p->pid, fd, f->path, (unsigned long)st->st_size, (unsigned long)limit,
		       limit == GHOST_MAX ? ", which images cap here" : "");
		return -EFBIG;
	}
	ng = xrealloc_array(ctx->ghosts, ctx->nr_ghosts + 1, sizeof(*ng));
	if (!ng)
		return -ENOMEM;
	ctx->ghosts = ng;
	ng[ctx->nr_ghosts].id = ctx->nr_ghosts + 1;
	ng[ctx->nr_ghosts].dev = st->st_dev;
	ng[ctx->nr_ghosts].ino = st->st_ino;
	f->ghost_id = ng[ctx->nr_ghosts].id;
	ctx->nr_ghosts++;
	if (ctx->check_only)
		return 0;
	ret = save_data(ctx, p->pid, fd, st, f->ghost_id);
	if (ret)
		return ret;
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
	memset(g, 0, sizeof(*g));
	g->fd = -1;
}

int ghost_load(int dirfd, uint32_t id, struct rghost *g)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	uint64_t end = 0;
	int ret;

	memset(g, 0, sizeof(*g));
	g->fd = -1;
	snprintf(name, sizeof(name), "ghost-%u.img", id);
	ret = img_reader_open(&r, dirfd, name, IMG_GHOST);
	if (ret)
		return ret;
	ret = img_read(&r, &ghost_entry__descriptor, &m);
	if (ret <= 0) {
		img_reader_close(&r);
		if (!ret)
			pr_err("image %s is damaged: it is empty", name);
		return ret ? ret : -EINVAL;
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
	if (g->e->id != id || !S_ISREG(g->e->mode) || g->e->size > GHOST_MAX) {
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
		ret = -errno;
		pr_perror("cannot unlink %s", made);
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
