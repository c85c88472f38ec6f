/* Memory, restore side: copy-on-write sharing.  A mapping whose pages a
 * process shares with its parent or a child is premapped: made and filled
 * before the process forks its children (mem_premap, in the process), at
 * an address of its own; a child that inherits it clears what is not its
 * parent's and writes its own pages; each restorer then moves it into
 * place (RST_VMA_PREMAP). */
#include <sys/mman.h>

#include "crc32c.h"
#include "image.h"
#include "layers.h"
#include "log.h"
#include "pages.h"
#include "premap.h"
#include "restore.h"
#include "util.h"

/* the mapping of mm that holds [start, end), or -1 */
static int vma_holding(const struct rmm *mm, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < mm->nr_vmas; i++)
		if (mm->vmas[i]->start <= start && end <= mm->vmas[i]->end)
			return (int)i;
	return -1;
}

int mem_link_cow(pid_t pid, struct rmm *mm, pid_t ppid, struct rmm *parent)
{
	size_t v = 0;

	for (size_t i = 0; i < mm->nr_runs; i++) {
		const PagemapEntry *r = mm->runs[i];
		const VmaEntry *e;
		int pv;

		if (!r->cow_parent)
			continue;
		while (mm->vmas[v]->end <= r->vaddr) /* validate_mm: within one */
			v++;
		if (mm->premap[v].want)
			continue;
		e = mm->vmas[v];
		pv = parent ? vma_holding(parent, e->start, e->end) : -1;
		if (pv < 0 || parent->vmas[pv]->kind != VMA_KIND__VMA_ANON_PRIVATE ||
		    parent->vmas[pv]->growsdown || parent->vmas[pv]->droppable) {
			pr_err("image pagemap-%d.img is damaged: its pages at %lx are said to be "
			       "its parent's, and its parent%s has no mapping that can hold them",
			       pid, (unsigned long)r->vaddr, parent ? "" : " (not in the images)");
			return -EINVAL;
		}
		mm->premap[v].want = true;
		mm->premap[v].pvma = pv;
		parent->premap[pv].want = true;
		pr_debug("pid %d: %lx-%lx inherits its parent %d's pages", pid,
			 (unsigned long)e->start, (unsigned long)e->end, ppid);
	}
	return 0;
}

uint64_t mem_premap_park_len(const struct rmm *mm)
{
	uint64_t len = 0;

	for (size_t i = 0; i < mm->nr_vmas; i++) {
		uint64_t l = mm->vmas[i]->end - mm->vmas[i]->start;

		if (mm->premap[i].at)
			len += l + (l >= RST_HUGE ? RST_HUGE : 0);
	}
	return len;
}

/* A new private anonymous area for e, at an address with e's offset in a
 * huge page. */
static long premap_new(const VmaEntry *e)
{
	uint64_t len = e->end - e->start, slack = len >= RST_HUGE ? RST_HUGE : 0, a, lead;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (e->noreserve ? MAP_NORESERVE : 0);
	void *p = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, flags, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	a = (uintptr_t)p;
	lead = slack ? (e->start - a) & (RST_HUGE - 1) : 0;
	if (lead)
		munmap(p, lead);
	if (slack - lead)
		munmap((char *)p + lead + len, slack - lead);
	return (long)(a + lead);
}

/* Fill [run) of a premapped mapping of e that is at `at` now. */
static int premap_fill(pid_t pid, const VmaEntry *e, uint64_t at, const struct rst_run *r,
		       bool verify)
{
	unsigned char *dst = (unsigned char *)(uintptr_t)(at + (r->vaddr - e->start));
	uint64_t len = r->nr_pages * PAGE_SIZE;
	int ret = pread_all(r->fd, dst, len, r->file_off);

	if (ret) {
		pr_err("pid %d: cannot read its pages at %lx (+%lu) from the images: %s", pid,
		       (unsigned long)r->vaddr, (unsigned long)r->nr_pages, strerror(-ret));
		return ret;
	}
	if (verify && !(r->flags & RST_RUN_NOCRC) && crc32c(0, dst, len) != r->crc) {
		pr_err("pid %d: its pages at %lx (+%lu) do not match their checksum in the "
		       "images",
		       pid, (unsigned long)r->vaddr, (unsigned long)r->nr_pages);
		return -EBADMSG;
	}
	return 0;
}

static int premap_zero(pid_t pid, const VmaEntry *e, uint64_t from, uint64_t to, uint64_t at)
{
	if (to > from &&
	    madvise((void *)(uintptr_t)(at + (from - e->start)), to - from, MADV_DONTNEED)) {
		int ret = -errno;

		pr_perror("pid %d: cannot clear its pages at %lx-%lx", pid, (unsigned long)from,
			  (unsigned long)to);
		return ret;
	}
	return 0;
}

/* Of the parent's pages inherited for e (at `at` now), clear those that
 * are not the parent's: the pages this process had not, or had of its own
 * (premap_fill writes those after). */
static int premap_zero_own(pid_t pid, const struct rmm *mm, const VmaEntry *e, uint64_t at)
{
	uint64_t a = e->start;
	int ret;

	/* validate_mm: a run lies within one mapping */
	for (size_t i = 0; i < mm->nr_runs && mm->runs[i]->vaddr < e->end; i++) {
		const PagemapEntry *r = mm->runs[i];

		if (!r->cow_parent || r->vaddr < e->start)
			continue;
		ret = premap_zero(pid, e, a, r->vaddr, at);
		if (ret)
			return ret;
		a = r->vaddr + r->nr_pages * PAGE_SIZE;
	}
	return premap_zero(pid, e, a, e->end, at);
}

int mem_premap(int dirfd, pid_t pid, struct rmm *mm, const struct rmm *parent, bool verify)
{
	_cleanup_free_ uint64_t *off = NULL;
	__attribute__((cleanup(mem_layers_free))) struct layer *layers = NULL;
	struct rst_builder b;
	int pages_fd[PAGES_MAX_FILES], ret = 0;
	size_t i, run = 0;
	struct run_src src;
	char name[64];

	for (i = 0; i < mm->nr_vmas && !mm->premap[i].want; i++)
		;
	if (i == mm->nr_vmas)
		return 0;
	memset(&b, 0, sizeof(b));
	for (int f = 0; f < PAGES_MAX_FILES; f++)
		pages_fd[f] = -1;
	off = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*off));
	layers = mem_layers_new();
	b.runs = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*b.runs));
	if (!off || !layers || !b.runs) {
		free(b.runs);
		return -ENOMEM;
	}
	src = (struct run_src){
		dirfd, pid, mm, off, pages_fd, layers, mm->nr_runs ? mm->nr_runs : 1
	};
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = mem_open_page_files(dirfd, pid, name, mm->head, mm->runs, mm->nr_runs, off, pages_fd,
				  &b);
	for (i = 0; !ret && i < mm->nr_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		struct rpremap *pm = &mm->premap[i];
		long at;

		if (!pm->want)
			continue;
		while (run < mm->nr_runs && mm->runs[run]->vaddr < e->start)
			run++;
		if (pm->pvma >= 0) {
			/* the parent's, inherited: what is not its goes */
			const struct rpremap *pp = parent ? &parent->premap[pm->pvma] : NULL;

			if (!pp || !pp->at) {
				pr_err("pid %d: its parent did not make its mapping at %lx first",
				       pid, (unsigned long)e->start);
				ret = -EINVAL;
				break;
			}
			at = (long)(pp->at + (e->start - parent->vmas[pm->pvma]->start));
			ret = premap_zero_own(pid, mm, e, (uint64_t)at);
		} else {
			at = premap_new(e);
			if (at < 0) {
				ret = (int)at;
				pr_err("pid %d: cannot make its mapping %lx-%lx: %s", pid,
				       (unsigned long)e->start, (unsigned long)e->end,
				       strerror(-ret));
			}
		}
		b.nr_runs = 0;
		if (!ret)
			ret = mem_plan_runs(&src, &run, e->end, &b);
		for (size_t k = 0; !ret && k < b.nr_runs; k++)
			ret = premap_fill(pid, e, (uint64_t)at, &b.runs[k], verify);
		if (!ret)
			pm->at = (uint64_t)at;
	}
	mem_layers_close_pages(layers, mm->head, pages_fd);
	free(b.runs);
	return ret;
}
