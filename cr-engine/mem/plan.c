/* Memory, restore side: mem_plan() turns the images into the restorer's
 * list of mappings and page runs (restorer/restorer.c maps them), opening
 * the mapped files and the page files as the restorer's helper fds. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "layers.h"
#include "log.h"
#include "proc.h"
#include "pages.h"
#include "plan.h"
#include "restore.h"
#include "sysvshm.h"
#include "util.h"

struct map_file {
	const char *path;
	uint32_t ghost_id;
	int flags;
	int fd;
};

/* A deleted file: kupdate made it again (ghost.c) and holds it read-only;
 * opened again through /proc/self/fd with the mapping's mode. */
static int open_ghost_mapped(pid_t pid, const VmaEntry *e, const struct rfiles *files, int flags)
{
	const struct rghost *g = files_ghost(files, e->ghost_id);
	char self[64];
	int fd;

	if (!g || g->map_fd < 0) {
		pr_err("pid %d: mapping %lx of the deleted file %s: the file was not made again",
		       pid, (unsigned long)e->start, e->path);
		return -EINVAL;
	}
	snprintf(self, sizeof(self), "self/fd/%d", g->map_fd);
	fd = proc_open(self, flags | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;

		pr_perror("pid %d: cannot open the deleted file %s mapped at %lx again", pid,
			  e->path, (unsigned long)e->start);
		return ret;
	}
	return fd;
}

static int open_mapped(pid_t pid, const VmaEntry *e, const struct rfiles *files,
		       struct map_file **cache, size_t *n, struct rst_builder *b)
{
	int flags = ((e->kind == VMA_KIND__VMA_FILE_SHARED && e->may_write) || e->open_rw)
			    ? O_RDWR
			    : O_RDONLY;
	uint32_t gid = e->has_ghost_id ? e->ghost_id : 0;
	struct map_file *nc;
	struct stat st;
	int fd, ret;

	for (size_t i = 0; i < *n; i++)
		if ((*cache)[i].flags == flags && (*cache)[i].ghost_id == gid &&
		    !strcmp((*cache)[i].path, e->path))
			return (*cache)[i].fd;
	fd = gid ? open_ghost_mapped(pid, e, files, flags) : open(e->path, flags | O_CLOEXEC);
	if (gid && fd < 0)
		return fd;
	if (fd < 0)
		return pr_errno("pid %d: cannot open %s mapped at %lx", pid, e->path,
				(unsigned long)e->start);
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* a deleted file is kupdate's own copy: nothing can have changed it */
	if (!gid &&
	    ((e->has_ino && st.st_ino != e->ino) ||
	     (e->kind == VMA_KIND__VMA_FILE_PRIVATE &&
	      ((e->has_file_size && (uint64_t)st.st_size != e->file_size) ||
	       (e->has_mtime_ns &&
		(int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec != e->mtime_ns))))) {
		pr_err("pid %d: %s (mapped at %lx) changed since the dump; its process cannot be "
		       "restored on top of a different file",
		       pid, e->path, (unsigned long)e->start);
		close(fd);
		return -ESTALE;
	}
	fd = builder_place_fd(b, fd);
	if (fd < 0)
		return fd;
	nc = realloc(*cache, (*n + 1) * sizeof(**cache));
	if (!nc)
		return -ENOMEM;
	*cache = nc;
	nc[*n].path = e->path;
	nc[*n].ghost_id = gid;
	nc[*n].flags = flags;
	nc[*n].fd = fd;
	(*n)++;
	return fd;
}

/* This process's own fd to a shared memory object (one per object). */
static int shm_fd_for(pid_t pid, const VmaEntry *e, const struct rshm *shm, int *cache,
		      struct rst_builder *b)
{
	uint64_t size;
	int fd = shmem_fd(shm, e->shmid, &size);

	if (fd < 0 || e->pgoff + (e->end - e->start) > size) {
		pr_err("pid %d: mapping %lx-%lx refers to shared memory object %u, which the "
		       "images do not hold",
		       pid, (unsigned long)e->start, (unsigned long)e->end, e->shmid);
		return -EINVAL;
	}
	if (cache[e->shmid - 1] >= 0)
		return cache[e->shmid - 1];
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	fd = builder_place_fd(b, fd);
	if (fd >= 0)
		cache[e->shmid - 1] = fd;
	return fd;
}

/* The region a ring's mappings tiled (base: the first one's start), laid
 * out anew: the kernel's blocks from 0 at the rotation's block, the last
 * ones before it (at most two pieces); ring_done: set for each ring once */
static int plan_ring(pid_t pid, const VmaEntry *e, const struct mem_ring *rings, size_t nr_rings,
		     bool *ring_done, struct rst_builder *b)
{
	const struct mem_ring *r = NULL;
	uint64_t len;
	size_t k;

	for (k = 0; k < nr_rings && !r; k++)
		if (rings[k].fd == e->ring_fd)
			r = &rings[k];
	if (!r) {
		pr_err("pid %d: mapping %lx maps the ring of fd %d, which has none", pid,
		       (unsigned long)e->start, e->ring_fd);
		return -EINVAL;
	}
	if (ring_done[k - 1])
		return 0; /* its region is laid out already */
	ring_done[k - 1] = true;
	len = r->bs * r->nb;
	for (int piece = 0; piece < 2; piece++) {
		/* the mapping's blocks [0, rot) hold the kernel's last ones,
		 * [rot, nb) its first ones */
		uint64_t from = piece ? r->rot : 0, to = piece ? r->nb : r->rot;
		struct rst_vma *v;

		if (from == to)
			continue;
		v = &b->vmas[b->nr_vmas++];
		v->start = e->start + from * r->bs;
		v->end = e->start + to * r->bs;
		v->pgoff = piece ? 0 : (uint64_t)(r->nb - r->rot) * r->bs;
		v->prot = e->prot;
		v->fd = e->ring_fd;
		v->mmap_flags = MAP_SHARED;
		v->flags = RST_VMA_RING;
		v->ring_len = len;
		v->first_run = b->nr_runs;
	}
	return 0;
}

int mem_plan(int dirfd, pid_t pid, const struct rmm *mm, const struct rshm *shm,
	     const struct rfiles *files, const struct mem_ring *rings, size_t nr_rings,
	     struct rst_builder *b, bool verify)
{
	_cleanup_free_ bool *ring_done = calloc(nr_rings ? nr_rings : 1, sizeof(bool));
	_cleanup_free_ int *shm_cache = malloc(sizeof(int) * (shm->n ? shm->n : 1));
	_cleanup_free_ struct map_file *cache = NULL;
	_cleanup_free_ uint64_t *off = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*off));
	size_t ncache = 0, run = 0;
	int pages_fd[PAGES_MAX_FILES], ret;
	char name[64];

	__attribute__((cleanup(mem_layers_free))) struct layer *layers = mem_layers_new();
	struct run_src src = {
		dirfd, pid, mm, off, pages_fd, layers, mm->nr_runs ? mm->nr_runs : 1
	};

	if (!shm_cache || !off || !layers)
		return -ENOMEM;
	for (size_t i = 0; i < shm->n; i++)
		shm_cache[i] = -1;
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = mem_open_page_files(dirfd, pid, name, mm->head, mm->runs, mm->nr_runs, off, pages_fd,
				  b);
	if (ret)
		return ret;
	b->args.pages_fd = pages_fd[0];
	/* the restorer checks with the SSE4.2 instruction (1), or without (2) */
	b->args.verify_crc = verify && mm->head->crc_valid ? (crc32c_hw() ? 1 : 2) : 0;
	b->args.populate = !getenv("KUPDATE_NO_POPULATE");
	/* mappings of 32 MiB and more: kupdate fills half (on another CPU) */
	b->args.fill_helper =
		sysconf(_SC_NPROCESSORS_ONLN) > 1 && !getenv("KUPDATE_NO_FILL_HELPER") ? 8192 : 0;

	/* one more for a vDSO proxy (vdso.c), one more a ring (in two pieces) */
	if (!ring_done)
		return -ENOMEM;
	b->vmas = calloc(mm->nr_vmas + 1 + nr_rings, sizeof(*b->vmas));
	b->runs = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*b->runs));
	if (!b->vmas || !b->runs)
		return -ENOMEM;
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		struct rst_vma *v;

		if (e->kind == VMA_KIND__VMA_VDSO || e->kind == VMA_KIND__VMA_VVAR)
			continue;
		if (e->kind == VMA_KIND__VMA_PACKET_RING) {
			ret = plan_ring(pid, e, rings, nr_rings, ring_done, b);
			if (ret)
				return ret;
			continue;
		}
		v = &b->vmas[b->nr_vmas++];
		v->start = e->start;
		v->end = e->end;
		v->prot = e->prot;
		v->fd = -1;
		v->mmap_flags = (e->kind == VMA_KIND__VMA_FILE_SHARED ||
				 e->kind == VMA_KIND__VMA_ANON_SHARED)
					? MAP_SHARED
					: MAP_PRIVATE;
		if (e->growsdown)
			v->mmap_flags |= MAP_GROWSDOWN;
		if (e->noreserve)
			v->mmap_flags |= MAP_NORESERVE;
		if (e->droppable)
			v->mmap_flags = (v->mmap_flags & ~MAP_PRIVATE) | 0x08 /* MAP_DROPPABLE */;
		if (e->kind == VMA_KIND__VMA_FILE_PRIVATE || e->kind == VMA_KIND__VMA_FILE_SHARED) {
			ret = open_mapped(pid, e, files, &cache, &ncache, b);
			if (ret < 0)
				return ret;
			v->fd = ret;
			v->pgoff = e->pgoff;
		} else if (e->kind == VMA_KIND__VMA_ANON_SHARED) {
			ret = sysvshm_plan(pid, mm, i, shm, v);
			if (ret < 0)
				return ret;
			if (!ret) {
				ret = shm_fd_for(pid, e, shm, shm_cache, b);
				if (ret < 0)
					return ret;
				v->fd = ret;
				v->pgoff = e->pgoff;
			}
		}
		v->madv = e->has_madv ? e->madv : 0;
		if (e->locked)
			v->flags |= RST_VMA_LOCKED;
		if (e->name) {
			ret = builder_add_string(b, e->name, &v->name_off);
			if (ret)
				return ret;
		}
		v->first_run = b->nr_runs;
		if (mm->premap[i].at) {
			/* made and filled already (mem_premap) */
			v->flags |= RST_VMA_PREMAP;
			v->premap = mm->premap[i].at;
			while (run < mm->nr_runs && mm->runs[run]->vaddr < e->end)
				run++;
			continue;
		}
		ret = mem_plan_runs(&src, &run, e->end, b);
		if (ret)
			return ret;
		v->nr_runs = b->nr_runs - v->first_run;
	}

	b->args.start_code = mm->core->start_code;
	b->args.end_code = mm->core->end_code;
	b->args.start_data = mm->core->start_data;
	b->args.end_data = mm->core->end_data;
	b->args.start_brk = mm->core->start_brk;
	b->args.brk = mm->core->brk;
	b->args.start_stack = mm->core->start_stack;
	b->args.arg_start = mm->core->arg_start;
	b->args.arg_end = mm->core->arg_end;
	b->args.env_start = mm->core->env_start;
	b->args.env_end = mm->core->env_end;
	return 0;
}
