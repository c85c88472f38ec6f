/* Memory, restore side: where the data of a process's pages is, through
 * the layers of images (a dump made with --prev and the pre-dumps below
 * it): restorer runs reading each page from the layer that holds it. */
#include <fcntl.h>

#include "image.h"
#include "images/pagemap.pb-c.h"
#include "layers.h"
#include "log.h"
#include "mm-load.h"
#include "pages.h"
#include "restore.h"
#include "util.h"

/* Layered images: a dump made with --prev refers to its parent directory
 * (the `parent` symlink) for the pages that did not change, and a parent
 * may itself have one.  Each layer's pagemap is read once, its page image
 * becomes one more helper fd of the restorer. */
#define MAX_LAYERS PAGES_MAX_LAYERS

struct layer {
	int dirfd; /* -1: not loaded */
	int pages_fd[PAGES_MAX_FILES];
	PagemapHead *head;
	PagemapEntry **runs;
	uint64_t *off; /* data offset of each run without in_parent */
	size_t nr;
};

void mem_layers_free(struct layer **lp)
{
	struct layer *l = *lp;

	if (!l)
		return;
	for (int i = 0; i < MAX_LAYERS; i++) {
		if (l[i].dirfd >= 0)
			close(l[i].dirfd);
		if (l[i].head)
			pagemap_head__free_unpacked(l[i].head, NULL);
		for (size_t k = 0; k < l[i].nr; k++)
			pagemap_entry__free_unpacked(l[i].runs[k], NULL);
		free(l[i].runs);
		free(l[i].off);
	}
	free(l);
}

static int grow_runs(struct rst_builder *b, size_t *cap)
{
	struct rst_run *n;

	if (b->nr_runs < *cap)
		return 0;
	n = xrealloc_array(b->runs, *cap * 2, sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + *cap, 0, *cap * sizeof(*n));
	b->runs = n;
	*cap *= 2;
	return 0;
}

/* layers[depth] is the parent of the directory child_fd */
static int load_layer(int child_fd, pid_t pid, struct layer *l, int depth, struct rst_builder *b)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	uint64_t total = 0;
	int ret;

	l->dirfd = openat(child_fd, "parent", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0)
		return pr_errno(
			"pid %d: its pagemap refers to a parent image directory, which cannot "
			"be opened (layer %d)",
			pid, depth + 1);
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = img_reader_open(&r, l->dirfd, name, IMG_PAGEMAP);
	if (ret)
		return ret;
	ret = img_read(&r, &pagemap_head__descriptor, &m);
	if (ret == 0) {
		pr_err("parent image %s (layer %d) is damaged: it is empty", name, depth + 1);
		ret = -EINVAL;
	}
	if (ret < 0)
		goto out;
	l->head = (PagemapHead *)m;
	l->runs = calloc(r.nr ? r.nr : 1, sizeof(*l->runs));
	l->off = calloc(r.nr ? r.nr : 1, sizeof(*l->off));
	if (!l->runs || !l->off) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &pagemap_entry__descriptor, &m)) > 0) {
		PagemapEntry *e = (PagemapEntry *)m;
		uint64_t end = e->vaddr + e->nr_pages * PAGE_SIZE;

		l->runs[l->nr] = e;
		if (!page_aligned(e->vaddr) || !e->nr_pages || e->nr_pages > (1ULL << 36) ||
		    end <= e->vaddr || end > TASK_SIZE_MAX ||
		    (l->nr && e->vaddr < l->runs[l->nr - 1]->vaddr +
						 l->runs[l->nr - 1]->nr_pages * PAGE_SIZE)) {
			pr_err("parent image %s (layer %d) is damaged: run %zu at %lx is out of "
			       "order or invalid",
			       name, depth + 1, l->nr, (unsigned long)e->vaddr);
			l->nr++;
			ret = -EINVAL;
			goto out;
		}
		if (!mem_run_nodata(e))
			total += e->nr_pages;
		l->nr++;
	}
	if (ret < 0)
		goto out;
	if (total != l->head->nr_pages) {
		pr_err("parent image %s (layer %d) is damaged: runs hold %lu pages, header says "
		       "%lu",
		       name, depth + 1, (unsigned long)total, (unsigned long)l->head->nr_pages);
		ret = -EINVAL;
		goto out;
	}
	ret = mem_open_page_files(l->dirfd, pid, name, l->head, l->runs, l->nr, l->off, l->pages_fd,
				  b);
out:
	img_reader_close(&r);
	return ret;
}

/* Pages [vaddr, +nr) are in the parent of the layer whose directory is
 * child_fd: add restorer runs reading them from where they are. */
static int resolve_parent(int child_fd, pid_t pid, struct layer *layers, int depth, uint64_t vaddr,
			  uint64_t nr, struct rst_builder *b, size_t *cap)
{
	struct layer *l = &layers[depth];
	uint64_t a = vaddr, end = vaddr + nr * PAGE_SIZE;
	size_t lo = 0, hi;
	int ret;

	if (depth >= MAX_LAYERS) {
		pr_err("pid %d: more than %d layers of images (a loop of parent links?)", pid,
		       MAX_LAYERS);
		return -ELOOP;
	}
	if (l->dirfd < 0) {
		ret = load_layer(child_fd, pid, l, depth, b);
		if (ret)
			return ret;
	}
	/* the first run ending after a */
	hi = l->nr;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l->runs[mid]->vaddr + l->runs[mid]->nr_pages * PAGE_SIZE <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; a < end; i++) {
		const PagemapEntry *e = i < l->nr ? l->runs[i] : NULL;
		uint64_t e_end, piece_end;

		if (!e || e->vaddr > a) {
			pr_err("pid %d: page %lx is said to be in the parent images (layer %d), "
			       "which do not hold it",
			       pid, (unsigned long)a, depth + 1);
			return -EINVAL;
		}
		e_end = e->vaddr + e->nr_pages * PAGE_SIZE;
		piece_end = MIN(end, e_end);
		if (e->cow_parent) {
			pr_err("pid %d: page %lx is said to be in the parent images (layer %d), "
			       "which hold it as its parent process's",
			       pid, (unsigned long)a, depth + 1);
			return -EINVAL;
		}
		if (e->in_parent) {
			ret = resolve_parent(l->dirfd, pid, layers, depth + 1, a,
					     (piece_end - a) / PAGE_SIZE, b, cap);
		} else {
			struct rst_run *r;

			ret = grow_runs(b, cap);
			if (!ret) {
				r = &b->runs[b->nr_runs++];
				r->vaddr = a;
				r->nr_pages = (piece_end - a) / PAGE_SIZE;
				r->file_off = l->off[i] + (a - e->vaddr);
				r->fd = l->pages_fd[mem_run_file(e)];
				r->crc = e->crc32c;
				/* the crc covers the parent's whole run */
				if (a != e->vaddr || piece_end != e_end || !l->head->crc_valid)
					r->flags |= RST_RUN_NOCRC;
			}
		}
		if (ret)
			return ret;
		a = piece_end;
	}
	return 0;
}

/* The runs of s->mm from *run on that start before end, added to b with
 * where their data is; the parent's pages (cow_parent) are left out: the
 * process inherits them. */
int mem_plan_runs(struct run_src *s, size_t *run, uint64_t end, struct rst_builder *b)
{
	for (; *run < s->mm->nr_runs && s->mm->runs[*run]->vaddr < end; (*run)++) {
		const PagemapEntry *pe = s->mm->runs[*run];
		struct rst_run *r;
		int ret;

		if (pe->cow_parent)
			continue;
		if (pe->in_parent) {
			ret = resolve_parent(s->dirfd, s->pid, s->layers, 0, pe->vaddr,
					     pe->nr_pages, b, &s->cap);
			if (ret)
				return ret;
			continue;
		}
		ret = grow_runs(b, &s->cap);
		if (ret)
			return ret;
		r = &b->runs[b->nr_runs++];
		r->vaddr = pe->vaddr;
		r->nr_pages = pe->nr_pages;
		r->file_off = s->off[*run];
		r->crc = pe->crc32c;
		r->fd = s->pages_fd[mem_run_file(pe)];
	}
	return 0;
}

struct layer *mem_layers_new(void)
{
	struct layer *l = calloc(MAX_LAYERS, sizeof(*l));

	for (int i = 0; l && i < MAX_LAYERS; i++) {
		l[i].dirfd = -1;
		for (int f = 0; f < PAGES_MAX_FILES; f++)
			l[i].pages_fd[f] = -1;
	}
	return l;
}

void mem_layers_close_pages(struct layer *l, const PagemapHead *head, const int *fds)
{
	for (uint32_t f = 0; f < (head->has_nr_files ? head->nr_files : 1); f++)
		if (fds[f] >= 0)
			close(fds[f]);
	for (int i = 0; l && i < MAX_LAYERS; i++)
		for (int f = 0; f < PAGES_MAX_FILES; f++)
			if (l[i].pages_fd[f] >= 0)
				close(l[i].pages_fd[f]);
}
