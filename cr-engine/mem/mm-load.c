/* Memory, restore side: a process's mm and pagemap images, loaded and
 * checked (mappings in order and aligned, runs within private mappings). */
#include "image.h"
#include "images/mm.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "log.h"
#include "mm-load.h"
#include "pages.h"
#include "restore.h"
#include "util.h"

void mem_free(struct rmm *mm)
{
	if (mm->core)
		mm_core__free_unpacked(mm->core, NULL);
	for (size_t i = 0; i < mm->nr_vmas; i++)
		vma_entry__free_unpacked(mm->vmas[i], NULL);
	free(mm->vmas);
	if (mm->head)
		pagemap_head__free_unpacked(mm->head, NULL);
	for (size_t i = 0; i < mm->nr_runs; i++)
		pagemap_entry__free_unpacked(mm->runs[i], NULL);
	free(mm->runs);
	free(mm->premap);
	memset(mm, 0, sizeof(*mm));
}

static int validate_mm(pid_t pid, struct rmm *mm)
{
	const char *img = "mm";
	uint64_t total = 0;
	size_t v = 0;

	if (mm->core->n_auxv % 2 || mm->core->n_auxv > 128) {
		pr_err("image %s-%d.img is damaged: auxv of %zu words", img, pid, mm->core->n_auxv);
		return -EINVAL;
	}
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		VmaEntry *e = mm->vmas[i];

		if (e->start >= e->end || !page_aligned(e->start) || !page_aligned(e->end) ||
		    e->end > TASK_SIZE_MAX || (i && e->start < mm->vmas[i - 1]->end)) {
			pr_err("image mm-%d.img is damaged: mapping %zu (%lx-%lx) is out of order "
			       "or "
			       "misaligned",
			       pid, i, (unsigned long)e->start, (unsigned long)e->end);
			return -EINVAL;
		}
		switch (e->kind) {
		case VMA_KIND__VMA_ANON_PRIVATE:
		case VMA_KIND__VMA_VDSO:
		case VMA_KIND__VMA_VVAR:
			break;
		case VMA_KIND__VMA_ANON_SHARED:
			if (!e->has_shmid || !page_aligned(e->pgoff)) {
				pr_err("image mm-%d.img is damaged: shared mapping %lx-%lx without "
				       "an "
				       "object",
				       pid, (unsigned long)e->start, (unsigned long)e->end);
				return -EINVAL;
			}
			break;
		case VMA_KIND__VMA_PACKET_RING:
			if (!e->has_ring_fd || e->ring_fd < 0 || !page_aligned(e->pgoff)) {
				pr_err("image mm-%d.img is damaged: ring mapping %lx-%lx without "
				       "its socket",
				       pid, (unsigned long)e->start, (unsigned long)e->end);
				return -EINVAL;
			}
			break;
		case VMA_KIND__VMA_FILE_PRIVATE:
		case VMA_KIND__VMA_FILE_SHARED:
			if (!e->path || e->path[0] != '/' || !page_aligned(e->pgoff)) {
				pr_err("image mm-%d.img is damaged: file mapping %lx-%lx without a "
				       "valid path or offset",
				       pid, (unsigned long)e->start, (unsigned long)e->end);
				return -EINVAL;
			}
			break;
		default:
			pr_err("image mm-%d.img: mapping %lx-%lx has kind %d, which this kupdate "
			       "cannot restore",
			       pid, (unsigned long)e->start, (unsigned long)e->end, e->kind);
			return -EINVAL;
		}
		if (e->prot & ~7U) {
			pr_err("image mm-%d.img is damaged: mapping %lx has protection %#x", pid,
			       (unsigned long)e->start, e->prot);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < mm->nr_runs; i++) {
		PagemapEntry *r = mm->runs[i];
		uint64_t end = r->vaddr + r->nr_pages * PAGE_SIZE;

		if (!page_aligned(r->vaddr) || !r->nr_pages || r->nr_pages > (1ULL << 36) ||
		    end <= r->vaddr ||
		    (i &&
		     r->vaddr < mm->runs[i - 1]->vaddr + mm->runs[i - 1]->nr_pages * PAGE_SIZE)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx is out of order or "
			       "invalid",
			       pid, i, (unsigned long)r->vaddr);
			return -EINVAL;
		}
		while (v < mm->nr_vmas && mm->vmas[v]->end <= r->vaddr)
			v++;
		if (v == mm->nr_vmas || r->vaddr < mm->vmas[v]->start || end > mm->vmas[v]->end ||
		    (mm->vmas[v]->kind != VMA_KIND__VMA_ANON_PRIVATE &&
		     mm->vmas[v]->kind != VMA_KIND__VMA_FILE_PRIVATE)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx (+%lu pages) lies "
			       "outside any private mapping",
			       pid, i, (unsigned long)r->vaddr, (unsigned long)r->nr_pages);
			return -EINVAL;
		}
		if (r->cow_parent &&
		    (r->in_parent || mm->vmas[v]->kind != VMA_KIND__VMA_ANON_PRIVATE ||
		     mm->vmas[v]->growsdown || mm->vmas[v]->droppable)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx is said to be the "
			       "parent's pages, in a mapping that cannot have them",
			       pid, i, (unsigned long)r->vaddr);
			return -EINVAL;
		}
		if (!mem_run_nodata(r))
			total += r->nr_pages;
	}
	if (total != mm->head->nr_pages) {
		pr_err("image pagemap-%d.img is damaged: runs hold %lu pages, header says %lu", pid,
		       (unsigned long)total, (unsigned long)mm->head->nr_pages);
		return -EINVAL;
	}
	return 0;
}

int mem_load(int dirfd, pid_t pid, struct rmm *mm)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	memset(mm, 0, sizeof(*mm));
	snprintf(name, sizeof(name), "mm-%d.img", pid);
	ret = img_reader_open(&r, dirfd, name, IMG_MM);
	if (ret)
		return ret;
	ret = img_read_first(&r, &mm_core__descriptor, &m);
	if (ret)
		goto out;
	mm->core = (MmCore *)m;
	mm->vmas = calloc(r.nr, sizeof(*mm->vmas));
	if (!mm->vmas) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &vma_entry__descriptor, &m)) > 0)
		mm->vmas[mm->nr_vmas++] = (VmaEntry *)m;
	if (ret < 0)
		goto out;
	img_reader_close(&r);

	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = img_reader_open(&r, dirfd, name, IMG_PAGEMAP);
	if (ret)
		goto out;
	ret = img_read_first(&r, &pagemap_head__descriptor, &m);
	if (ret)
		goto out;
	mm->head = (PagemapHead *)m;
	mm->runs = calloc(r.nr, sizeof(*mm->runs));
	if (!mm->runs) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &pagemap_entry__descriptor, &m)) > 0)
		mm->runs[mm->nr_runs++] = (PagemapEntry *)m;
	if (ret < 0)
		goto out;
	mm->premap = calloc(mm->nr_vmas ? mm->nr_vmas : 1, sizeof(*mm->premap));
	if (!mm->premap) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < mm->nr_vmas; i++)
		mm->premap[i].pvma = -1;
	ret = validate_mm(pid, mm);
out:
	img_reader_close(&r);
	if (ret)
		mem_free(mm);
	return ret;
}
