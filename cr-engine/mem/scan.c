/* Memory, dump side: which pages of a process to save.  Those present or
 * swapped and not the zero page (for private file mappings: only the
 * copied-on-write ones), found with the PAGEMAP_SCAN ioctl where the
 * kernel has it and /proc/PID/pagemap otherwise; the pages a child shares
 * copy-on-write with its parent (the same frame at the same address) are
 * the parent's (cow).  pages.c writes them. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "dump.h"
#include "log.h"
#include "pages.h"
#include "pagescan.h"
#include "predump.h"
#include "scan.h"
#include "util.h"

#define PM_PRESENT  (1ULL << 63)
#define PM_SWAPPED  (1ULL << 62)
#define PM_FILE	    (1ULL << 61)
#define PM_PFN_MASK ((1ULL << 55) - 1)

static uint64_t pfn_of(void *addr)
{
	_cleanup_close_ int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t e;

	if (fd < 0 || pread(fd, &e, 8, ((uintptr_t)addr / PAGE_SIZE) * 8) != 8)
		return 0;
	return (e & PM_PRESENT) ? (e & PM_PFN_MASK) : 0;
}

/* The zero page's pfn, to skip pages never written (needs CAP_SYS_ADMIN to
 * see pfns; without it nothing is skipped, which is only slower). */
void mem_find_zero_pfns(struct cr_dump_ctx *ctx)
{
	volatile char *p = mmap(NULL, PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	(void)p[0];
	ctx->zero_pfn = pfn_of((void *)p);
	munmap((void *)p, PAGE_SIZE);
}

/* Runs never span two mappings: the restorer fills one mapping at a time. */
static int add_run(struct cr_proc *p, const struct cr_vma *v, uint64_t vaddr, uint64_t nr)
{
	struct cr_pagerun *last = p->nr_runs ? &p->runs[p->nr_runs - 1] : NULL;

	if (last && last->vaddr >= v->s.start &&
	    last->vaddr + last->nr_pages * PAGE_SIZE == vaddr) {
		last->nr_pages += nr;
	} else {
		struct cr_pagerun *n = xrealloc_array(p->runs, p->nr_runs + 1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->runs = n;
		n[p->nr_runs].vaddr = vaddr;
		n[p->nr_runs].nr_pages = nr;
		n[p->nr_runs].crc = 0;
		n[p->nr_runs].in_parent = false;
		n[p->nr_runs].cow = false;
		p->nr_runs++;
	}
	p->nr_pages += nr;
	return 0;
}

/* PAGEMAP_SCAN: the kernel reports the matching ranges directly. */
static int scan_vma_ioctl(struct cr_proc *p, int pm_fd, struct cr_vma *v)
{
	struct page_region regs[512];
	struct pm_scan_arg arg;
	uint64_t start = v->s.start;
	bool file = v->kind == VMA_KIND__VMA_FILE_PRIVATE;

	while (start < v->s.end) {
		long n;

		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = start;
		arg.end = v->s.end;
		arg.vec = (uintptr_t)regs;
		arg.vec_len = ARRAY_SIZE(regs);
		arg.category_inverted = PAGE_IS_PFNZERO | (file ? PAGE_IS_FILE : 0);
		arg.category_mask = PAGE_IS_PFNZERO | (file ? PAGE_IS_FILE : 0);
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		n = ioctl(pm_fd, PAGEMAP_SCAN, &arg);
		if (n < 0)
			return -errno;
		for (long i = 0; i < n; i++) {
			int ret = add_run(p, v, regs[i].start,
					  (regs[i].end - regs[i].start) / PAGE_SIZE);
			if (ret)
				return ret;
		}
		if (arg.walk_end <= start)
			break;
		start = arg.walk_end;
	}
	return 0;
}

/* /proc/PID/pagemap: 8 bytes a page. */
static int scan_vma_read(struct cr_dump_ctx *ctx, struct cr_proc *p, int pm_fd, struct cr_vma *v)
{
	enum { CHUNK = 8192 };
	uint64_t buf[CHUNK];
	bool file = v->kind == VMA_KIND__VMA_FILE_PRIVATE;

	for (uint64_t a = v->s.start; a < v->s.end;) {
		uint64_t n = MIN((uint64_t)CHUNK, (v->s.end - a) / PAGE_SIZE);
		int ret = pread_all(pm_fd, buf, n * 8, (a / PAGE_SIZE) * 8);

		if (ret) {
			pr_err("pid %d: cannot read pagemap at %lx: %s", p->pid, (unsigned long)a,
			       strerror(-ret));
			return ret;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t e = buf[i];
			bool want = (e & PM_SWAPPED) ||
				    ((e & PM_PRESENT) && !(file && (e & PM_FILE)) &&
				     !(ctx->zero_pfn && (e & PM_PFN_MASK) == ctx->zero_pfn));
			if (want) {
				ret = add_run(p, v, a + i * PAGE_SIZE, 1);
				if (ret)
					return ret;
			}
		}
		a += n * PAGE_SIZE;
	}
	return 0;
}

/* Split the runs along the sorted ranges rg: the pages there are marked
 * in_parent (their data is left to the parent images) or, cow, shared with
 * the parent process; the others keep what they were. */
static int mark_runs(struct cr_proc *p, const struct cr_range *rg, int nrg, bool cow)
{
	struct cr_pagerun *out = NULL;
	int n = 0, cap = 0, k = 0;

	if (!nrg)
		return 0;
	p->nr_pages = 0;
	for (int i = 0; i < p->nr_runs; i++) {
		uint64_t a = p->runs[i].vaddr, end = a + p->runs[i].nr_pages * PAGE_SIZE;

		while (a < end) {
			uint64_t b;
			bool in;

			while (k < nrg && rg[k].end <= a)
				k++;
			if (k < nrg && rg[k].start <= a) {
				in = true;
				b = MIN(end, rg[k].end);
			} else {
				in = false;
				b = k < nrg ? MIN(end, rg[k].start) : end;
			}
			if (n == cap) {
				struct cr_pagerun *nr;

				cap = cap ? cap * 2 : 64;
				nr = xrealloc_array(out, cap, sizeof(*nr));
				if (!nr) {
					free(out);
					return -ENOMEM;
				}
				out = nr;
			}
			out[n] = p->runs[i];
			out[n].vaddr = a;
			out[n].nr_pages = (b - a) / PAGE_SIZE;
			out[n].crc = 0;
			if (in && cow) {
				out[n].cow = true;
				out[n].in_parent = false;
			} else if (in) {
				out[n].in_parent = true;
			}
			if (!run_nodata(&out[n]))
				p->nr_pages += out[n].nr_pages;
			n++;
			a = b;
		}
	}
	free(p->runs);
	p->runs = out;
	p->nr_runs = n;
	return 0;
}

/* Can pages of v (p's) be its parent's pv, kept shared at restore?  Both
 * private anonymous, v within pv, neither a stack that grows (it cannot be
 * moved into place) nor droppable. */
static bool cow_candidate(const struct cr_vma *v, const struct cr_vma *pv)
{
	unsigned no = VMF_GROWSDOWN | VMF_DROPPABLE;

	return v->kind == VMA_KIND__VMA_ANON_PRIVATE && pv &&
	       pv->kind == VMA_KIND__VMA_ANON_PRIVATE && !(v->s.vmflags & no) &&
	       !(pv->s.vmflags & no) && v->s.start >= pv->s.start && v->s.end <= pv->s.end &&
	       v->s.rss_kb > 0;
}

/* The pages p still shares copy-on-write with its parent: present in both
 * at the same address with the same frame (pagemap; pfns need
 * CAP_SYS_ADMIN, without which none is found).  A frame seen in both at
 * once holds the same data for both: the parent's dump saves it, and the
 * restore lets p inherit it (premaps), so a prefork server's workers do not
 * come back with a copy each. */
static int find_cow(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_range **out, int *nr)
{
	enum { CHUNK = 4096 };
	_cleanup_free_ uint64_t *mine = NULL, *theirs = NULL;
	_cleanup_close_ int fd = -1, pfd = -1;
	struct cr_proc *pp = p->parent;
	char path[64];
	int cap = 0;

	*out = NULL;
	*nr = 0;
	if (!pp || pp->state == TASK_STATE__TASK_ZOMBIE || !ctx->zero_pfn ||
	    getenv("KUPDATE_NO_COW"))
		return 0;
	mine = malloc(CHUNK * 8);
	theirs = malloc(CHUNK * 8);
	if (!mine || !theirs)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pp->pid);
	pfd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pfd < 0) {
		int ret = -errno;

		pr_perror("pid %d: cannot open the pagemaps of it and its parent %d", p->pid,
			  pp->pid);
		return ret;
	}
	for (int i = 0; i < p->nr_vmas; i++) {
		const struct cr_vma *v = &p->vmas[i];

		if (!cow_candidate(v, mem_vma_at(pp, v->s.start)))
			continue;
		for (uint64_t a = v->s.start; a < v->s.end;) {
			uint64_t n = MIN((uint64_t)CHUNK, (v->s.end - a) / PAGE_SIZE);
			int ret = pread_all(fd, mine, n * 8, (a / PAGE_SIZE) * 8);

			if (!ret)
				ret = pread_all(pfd, theirs, n * 8, (a / PAGE_SIZE) * 8);
			if (ret) {
				pr_err("pid %d: cannot read the pagemaps at %lx: %s", p->pid,
				       (unsigned long)a, strerror(-ret));
				return ret;
			}
			for (uint64_t k = 0; k < n; k++) {
				uint64_t f = mine[k] & PM_PFN_MASK;

				if (!(mine[k] & PM_PRESENT) || !(theirs[k] & PM_PRESENT) || !f ||
				    f == ctx->zero_pfn || f != (theirs[k] & PM_PFN_MASK))
					continue;
				ret = push_range(out, nr, &cap, a + k * PAGE_SIZE,
						 a + (k + 1) * PAGE_SIZE);
				if (ret)
					return ret;
			}
			a += n * PAGE_SIZE;
		}
	}
	return 0;
}

static int open_mem(struct cr_proc *p, int *pm_fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	*pm_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*pm_fd < 0)
		return pr_errno("pid %d: cannot open %s", p->pid, path);
	if (p->mem_fd >= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (p->mem_fd < 0)
		return pr_errno("pid %d: cannot open %s", p->pid, path);
	return 0;
}

int mem_scan_pages(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_close_ int pm_fd = -1;
	int ret;

	ret = open_mem(p, &pm_fd);
	if (ret)
		return ret;
	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];

		if (v->kind != VMA_KIND__VMA_ANON_PRIVATE && v->kind != VMA_KIND__VMA_FILE_PRIVATE)
			continue;
		if (v->s.rss_kb + v->s.swap_kb == 0)
			continue;
		if (v->kind == VMA_KIND__VMA_FILE_PRIVATE && v->s.anon_kb + v->s.swap_kb == 0)
			continue;
		ret = -ENOTTY;
		if (ctx->have_pagemap_scan != 0 && !getenv("KUPDATE_NO_PAGEMAP_SCAN")) {
			ret = scan_vma_ioctl(p, pm_fd, v);
			if (ret == -ENOTTY || ret == -EINVAL)
				ctx->have_pagemap_scan = 0;
			else if (!ret)
				ctx->have_pagemap_scan = 1;
		}
		if (ret == -ENOTTY || ret == -EINVAL)
			ret = scan_vma_read(ctx, p, pm_fd, v);
		if (ret) {
			pr_err("pid %d: cannot scan pages of %lx-%lx: %s", p->pid, v->s.start,
			       v->s.end, strerror(-ret));
			return ret;
		}
	}
	return mark_runs(p, p->inpar, p->nr_inpar, false);
}

int dump_pages(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ struct cr_range *cow = NULL;
	int ret = mem_scan_pages(ctx, p), nr_cow = 0;

	if (!ret)
		ret = find_cow(ctx, p, &cow, &nr_cow);
	if (!ret)
		ret = mark_runs(p, cow, nr_cow, true);
	if (ret)
		return ret;
	for (int i = 0; i < p->nr_runs; i++)
		if (p->runs[i].cow)
			p->cow_pages += p->runs[i].nr_pages;
	if (p->cow_pages)
		pr_debug("pid %d: %lu pages shared copy-on-write with its parent %d", p->pid,
			 (unsigned long)p->cow_pages, p->parent->pid);
	ctx->cow_pages += p->cow_pages;
	ret = mem_write_pages(ctx, p);
	ctx->total_pages += p->nr_pages;
	ctx->zero_pages += p->zero_pages;
	return ret;
}
