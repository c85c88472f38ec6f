/* Shared memory objects: MAP_SHARED|MAP_ANONYMOUS regions and memfds.
 *
 * Dump: each object is saved once, whichever processes map it.  Its data is
 * read through /proc/PID/map_files (an fd to the object itself), with
 * SEEK_DATA/SEEK_HOLE to skip what was never allocated — this also finds
 * pages no process has mapped right now and pages in swap — and without
 * its pages of zeros.
 * Restore: kupdate creates each object before the tree (an anonymous shared
 * mapping reopened through /proc/self/map_files, or a memfd of the same
 * name), fills it, and every process maps that same object, so sharing
 * holds after the restore.  System V segments are objects too; what is
 * particular to them is in sysvshm.c. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "dump.h"
#include "image.h"
#include "images/mm.pb-c.h"
#include "log.h"
#include "pages.h"
#include "shmem.h"
#include "sysvshm.h"
#include "util.h"

#ifndef F_GET_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#endif

#define SHM_MAX_SIZE (1ULL << 46)

/* The data is read through a mapping of the object: read(2) on an fd of an
 * anonymous shared mapping does not return its contents on every kernel. */
static int copy_object(struct cr_dump_ctx *ctx, struct cr_shm *s, int fd)
{
	struct pages_header h;
	unsigned char hdr[PAGES_DATA_OFFSET];
	unsigned char *map;
	char name[64];
	_cleanup_close_ int out = -1;
	off_t off = 0;
	int ret;

	/* an empty memfd has nothing to map */
	map = s->size ? mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
	if (map == MAP_FAILED)
		return pr_errno("cannot map shared memory object %u to read it", s->id);
	snprintf(name, sizeof(name), "shmem-pages-%u.img", s->id);
	out = openat(ctx->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		ret = pr_errno("cannot create image %s", name);
		goto out;
	}
	memset(hdr, 0, sizeof(hdr));
	ret = write_all(out, hdr, sizeof(hdr)); /* the header is written last */
	if (ret)
		goto werr;
	while ((uint64_t)off < s->size) {
		off_t data = lseek(fd, off, SEEK_DATA), hole;
		struct cr_shm_run *nr;
		uint64_t len;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			/* no SEEK_DATA: take everything */
			data = off;
			hole = s->size;
		} else {
			hole = lseek(fd, data, SEEK_HOLE);
			if (hole < 0)
				hole = s->size;
		}
		data &= ~(off_t)(PAGE_SIZE - 1);
		hole = MIN((uint64_t)PAGE_ALIGN(hole), s->size);
		if (hole <= data)
			break;
		/* the pages of zeros are left out (a run ends there): the
		 * restore's new object, or the segment it takes back and
		 * clears, is zeros */
		for (uint64_t np = (hole - data) / PAGE_SIZE, pos = 0, first; pos < np;) {
			unsigned char *at;

			ctx->zero_pages += pages_data_span(map + data, np, &pos, &first);
			if (pos == first)
				continue;
			at = map + data + first * PAGE_SIZE;
			len = (pos - first) * PAGE_SIZE;
			nr = xrealloc_array(s->runs, s->nr_runs + 1, sizeof(*nr));
			if (!nr) {
				ret = -ENOMEM;
				goto out;
			}
			s->runs = nr;
			nr[s->nr_runs].offset = at - map;
			nr[s->nr_runs].nr_pages = len / PAGE_SIZE;
			nr[s->nr_runs].crc = ctx->opts->no_page_crc ? 0 : crc32c(0, at, len);
			s->nr_runs++;
			s->nr_pages += len / PAGE_SIZE;
			ret = write_all(out, at, len);
			if (ret)
				goto werr;
		}
		off = hole;
	}
	memset(&h, 0, sizeof(h));
	h.h.magic = IMG_MAGIC;
	h.h.kind = IMG_SHMEM_PAGES;
	h.h.version = IMG_FORMAT_VERSION;
	h.h.hdr_size = sizeof(h);
	h.nr_pages = s->nr_pages;
	h.pid = s->id;
	memcpy(hdr, &h, sizeof(h));
	ret = pwrite_all(out, hdr, sizeof(hdr), 0);
	if (ret)
		goto werr;
	ret = close(out) ? -errno : 0;
	out = -1;
	if (ret)
		goto werr;
	ctx->total_pages += s->nr_pages;
	goto out;
werr:
	pr_err("cannot write image %s: %s", name, strerror(-ret));
out:
	if (map)
		munmap(map, s->size);
	return ret;
}

/* The object fd is open on, saved the first time it is seen. */
static int shm_object(struct cr_dump_ctx *ctx, int fd, const struct stat *stp, const char *path,
		      const char *where, uint32_t *shmid)
{
	struct cr_shm *s, *ns;
	struct stat st = *stp;
	int ret;

	/* a System V segment's inode number is its id, which another object of
	 * the same internal mount may have as well */
	for (int i = 0; i < ctx->nr_shm; i++)
		if (ctx->shm[i].dev == (uint64_t)st.st_dev && ctx->shm[i].ino == st.st_ino &&
		    (ctx->shm[i].kind == SHMEM_KIND__SHMEM_SYSV) == sysvshm_mapping(path)) {
			*shmid = ctx->shm[i].id;
			return 0;
		}
	if ((uint64_t)st.st_size > SHM_MAX_SIZE) {
		pr_err("%s: the shared memory object %s is too large (%lu bytes)", where, path,
		       (unsigned long)st.st_size);
		return -EFBIG;
	}
	ns = xrealloc_array(ctx->shm, ctx->nr_shm + 1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	ctx->shm = ns;
	s = &ns[ctx->nr_shm++];
	memset(s, 0, sizeof(*s));
	s->id = ctx->nr_shm;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = PAGE_ALIGN(st.st_size);
	s->file_size = st.st_size;
	s->mode = st.st_mode & 07777;
	s->uid = st.st_uid;
	s->gid = st.st_gid;
	if (!strncmp(path, "/memfd:", 7)) {
		size_t n = strlen(path + 7);

		s->kind = SHMEM_KIND__SHMEM_MEMFD;
		if (n > 10 && !strcmp(path + 7 + n - 10, " (deleted)"))
			n -= 10;
		s->name = strndup(path + 7, n);
		if (!s->name)
			return -ENOMEM;
		ret = fcntl(fd, F_GET_SEALS);
		s->seals = ret > 0 ? ret : 0;
	} else if (sysvshm_mapping(path)) {
		s->kind = SHMEM_KIND__SHMEM_SYSV;
		ret = sysvshm_describe(fd, &st, s, where);
		if (ret)
			return ret;
	} else {
		s->kind = SHMEM_KIND__SHMEM_ANON;
	}
	*shmid = s->id;
	/* a check looks at the object, it does not copy it */
	return ctx->check_only ? 0 : copy_object(ctx, s, fd);
}

int shmem_dump_vma(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_vma *v)
{
	char mf[96];
	struct stat st;
	_cleanup_close_ int fd = -1;
	const char *path = v->s.path;

	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%lx-%lx", p->pid, v->s.start, v->s.end);
	fd = open(mf, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		return pr_errno("pid %d: cannot open shared memory at %lx (%s)", p->pid, v->s.start,
				path);
	snprintf(mf, sizeof(mf), "pid %d: shared memory at %lx", p->pid, v->s.start);
	return shm_object(ctx, fd, &st, path, mf, &v->shmid);
}

int shmem_dump_fd(struct cr_dump_ctx *ctx, pid_t pid, int fd, const char *path, uint32_t *shmid)
{
	char pp[96];
	struct stat st;
	_cleanup_close_ int ofd = -1;

	/* a new open of the object itself, whatever the fd's mode */
	snprintf(pp, sizeof(pp), "/proc/%d/fd/%d", pid, fd);
	ofd = open(pp, O_RDONLY | O_CLOEXEC);
	if (ofd < 0 || fstat(ofd, &st))
		return pr_errno("pid %d: fd %d: cannot open its memfd (%s)", pid, fd, path);
	snprintf(pp, sizeof(pp), "pid %d: fd %d", pid, fd);
	return shm_object(ctx, ofd, &st, path, pp, shmid);
}

int shmem_write(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "shmem.img", IMG_SHMEM);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_shm; i++) {
		struct cr_shm *s = &ctx->shm[i];
		ShmemEntry e = SHMEM_ENTRY__INIT;
		ShmemRun *runs = calloc(s->nr_runs ? s->nr_runs : 1, sizeof(*runs));
		ShmemRun **rp = calloc(s->nr_runs ? s->nr_runs : 1, sizeof(*rp));

		if (!runs || !rp) {
			free(runs);
			free(rp);
			img_writer_abort(&w);
			return -ENOMEM;
		}
		for (int k = 0; k < s->nr_runs; k++) {
			shmem_run__init(&runs[k]);
			runs[k].offset = s->runs[k].offset;
			runs[k].nr_pages = s->runs[k].nr_pages;
			runs[k].has_crc32c = !ctx->opts->no_page_crc;
			runs[k].crc32c = s->runs[k].crc;
			rp[k] = &runs[k];
		}
		e.id = s->id;
		e.kind = s->kind;
		e.size = s->size;
		e.name = s->name;
		e.n_runs = s->nr_runs;
		e.runs = rp;
		e.has_ino = 1;
		e.ino = s->ino;
		if (s->seals) {
			e.has_seals = 1;
			e.seals = s->seals;
		}
		if (s->kind == SHMEM_KIND__SHMEM_SYSV)
			sysvshm_fill_entry(s, &e);
		if (s->kind == SHMEM_KIND__SHMEM_MEMFD) {
			e.has_file_size = e.has_mode = e.has_uid = e.has_gid = 1;
			e.file_size = s->file_size;
			e.mode = s->mode;
			e.uid = s->uid;
			e.gid = s->gid;
		}
		img_write(&w, &e.base);
		free(runs);
		free(rp);
	}
	return img_writer_close(&w);
}

void shmem_free_dump(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_shm; i++) {
		free(ctx->shm[i].name);
		free(ctx->shm[i].runs);
	}
	free(ctx->shm);
	ctx->shm = NULL;
	ctx->nr_shm = 0;
}

/* ------------------------------------------------------------- restore */

void shmem_free(struct rshm *t)
{
	sysvshm_cleanup(t);
	for (size_t i = 0; i < t->n; i++) {
		shmem_entry__free_unpacked(t->e[i], NULL);
		if (t->fds && t->fds[i] >= 0)
			close(t->fds[i]);
	}
	free(t->e);
	free(t->fds);
	free(t->sysv);
	memset(t, 0, sizeof(*t));
}

static int validate(const ShmemEntry *e, size_t idx)
{
	uint64_t end = 0;

	if (e->id != idx + 1 ||
	    (e->kind != SHMEM_KIND__SHMEM_ANON && e->kind != SHMEM_KIND__SHMEM_MEMFD &&
	     e->kind != SHMEM_KIND__SHMEM_SYSV) ||
	    (!e->size && e->kind != SHMEM_KIND__SHMEM_MEMFD) || e->size > SHM_MAX_SIZE ||
	    e->size % PAGE_SIZE || (e->kind == SHMEM_KIND__SHMEM_MEMFD && !e->name) ||
	    (e->has_file_size && PAGE_ALIGN(e->file_size) != e->size)) {
		pr_err("image shmem.img is damaged: object %zu is invalid", idx);
		return -EINVAL;
	}
	if (e->kind == SHMEM_KIND__SHMEM_SYSV && sysvshm_validate(e, idx))
		return -EINVAL;
	for (size_t k = 0; k < e->n_runs; k++) {
		const ShmemRun *r = e->runs[k];

		if (r->offset % PAGE_SIZE || r->offset < end || !r->nr_pages ||
		    r->nr_pages > e->size / PAGE_SIZE ||
		    r->offset + r->nr_pages * PAGE_SIZE > e->size) {
			pr_err("image shmem.img is damaged: object %u, run %zu", e->id, k);
			return -EINVAL;
		}
		end = r->offset + r->nr_pages * PAGE_SIZE;
	}
	return 0;
}

static int fill_object(int dirfd, const ShmemEntry *e, unsigned char *map, bool verify)
{
	char name[64];
	_cleanup_close_ int fd = -1;
	struct pages_header h;
	struct stat st;
	uint64_t total = 0, off = PAGES_DATA_OFFSET;
	int ret;

	for (size_t k = 0; k < e->n_runs; k++)
		total += e->runs[k]->nr_pages;
	snprintf(name, sizeof(name), "shmem-pages-%u.img", e->id);
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pr_errno("cannot open image %s", name);
	if (fstat(fd, &st) || pread(fd, &h, sizeof(h), 0) != sizeof(h) || h.h.magic != IMG_MAGIC ||
	    h.h.kind != IMG_SHMEM_PAGES || h.h.version != IMG_FORMAT_VERSION ||
	    h.nr_pages != total || h.pid != e->id ||
	    (uint64_t)st.st_size != PAGES_DATA_OFFSET + total * PAGE_SIZE) {
		pr_err("image %s is damaged or belongs to another dump", name);
		return -EINVAL;
	}
	for (size_t k = 0; k < e->n_runs; k++) {
		const ShmemRun *r = e->runs[k];
		size_t len = r->nr_pages * PAGE_SIZE;

		ret = pread_all(fd, map + r->offset, len, off);
		if (ret) {
			pr_err("cannot read image %s: %s", name, strerror(-ret));
			return ret;
		}
		if (verify && r->has_crc32c && crc32c(0, map + r->offset, len) != r->crc32c) {
			pr_err("shared memory data at offset %lu does not match its checksum: %s "
			       "is "
			       "damaged",
			       (unsigned long)r->offset, name);
			return -EBADMSG;
		}
		off += len;
	}
	return 0;
}

/* A System V segment: no fd, the processes attach it by its id. */
static int create_segment(int dirfd, const ShmemEntry *e, bool verify, int *state)
{
	void *map;
	int ret = sysvshm_create(e, state, &map);

	if (ret)
		return ret;
	ret = fill_object(dirfd, e, map, verify);
	/* detached before the tree is forked, which must not inherit it */
	sysvshm_detach(map);
	return ret;
}

static int create_object(int dirfd, const ShmemEntry *e, bool verify)
{
	unsigned char *map;
	int fd = -1, ret;

	if (e->kind == SHMEM_KIND__SHMEM_MEMFD) {
		fd = memfd_create(e->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, e->has_file_size ? e->file_size : e->size) ||
		    (e->has_uid && e->has_gid && fchown(fd, e->uid, e->gid)) ||
		    (e->has_mode && fchmod(fd, e->mode & 07777))) {
			ret = pr_errno("cannot create memfd %s", e->name);
			if (fd >= 0)
				close(fd);
			return ret;
		}
		/* an empty one has nothing to fill */
		map = e->size ? mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
			      : NULL;
	} else {
		map = mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
			   0);
	}
	if (map == MAP_FAILED) {
		ret = pr_errno("cannot map shared memory object %u (%lu bytes)", e->id,
			       (unsigned long)e->size);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	ret = fill_object(dirfd, e, map, verify);
	if (!ret && fd < 0) {
		char mf[96];

		/* an fd to the object itself: mappings of it are shared anonymous memory */
		snprintf(mf, sizeof(mf), "/proc/self/map_files/%lx-%lx", (unsigned long)map,
			 (unsigned long)(map + e->size));
		fd = open(mf, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			ret = pr_errno("cannot reopen shared memory object %u", e->id);
	}
	if (map)
		munmap(map, e->size);
	if (!ret && e->has_seals && e->seals && fcntl(fd, F_ADD_SEALS, e->seals))
		ret = pr_errno("cannot seal memfd %s", e->name);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	return fd;
}

int shmem_restore(int dirfd, struct rshm *t, bool verify)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = img_reader_open(&r, dirfd, "shmem.img", IMG_SHMEM);
	if (ret)
		return ret;
	t->e = calloc(r.nr ? r.nr : 1, sizeof(*t->e));
	t->fds = malloc((r.nr ? r.nr : 1) * sizeof(int));
	t->sysv = calloc(r.nr ? r.nr : 1, sizeof(int));
	if (!t->e || !t->fds || !t->sysv) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &shmem_entry__descriptor, &m)) > 0) {
		t->fds[t->n] = -1;
		t->e[t->n] = (ShmemEntry *)m;
		t->n++;
		ret = validate(t->e[t->n - 1], t->n - 1);
		if (ret)
			break;
	}
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < t->n; i++) {
		if (t->e[i]->kind == SHMEM_KIND__SHMEM_SYSV) {
			ret = create_segment(dirfd, t->e[i], verify, &t->sysv[i]);
			if (ret < 0)
				return ret;
			continue;
		}
		ret = create_object(dirfd, t->e[i], verify);
		if (ret < 0)
			return ret;
		t->fds[i] = ret;
	}
	return 0;
}

int shmem_fd(const struct rshm *t, uint32_t id, uint64_t *size)
{
	if (!id || id > t->n)
		return -1;
	if (size)
		*size = t->e[id - 1]->size;
	return t->fds[id - 1];
}
