/* Memory, dump side: the images of a process's memory, mm-PID.img (mm
 * fields, auxv, vDSO, mappings) and pagemap-PID.img (the page runs), and
 * the pre-dump's copy of the pages of a process that runs meanwhile. */
#include <fcntl.h>
#include <sys/uio.h>

#include "dump.h"
#include "image.h"
#include "images/mm.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "mm-write.h"
#include "pages.h"
#include "util.h"
#include "vdso.h"

/* Pre-dump: the process runs while its pages are copied.  A page it unmaps
 * meanwhile cannot be read: it is left out (the dump that follows copies
 * whatever is there then), and the runs are cut around it; so are pages
 * of zeros in private anonymous memory (pages_emit). */
int mem_write_predump(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	enum { BUF = 512 << 10 };
	_cleanup_free_ unsigned char *buf = NULL;
	struct pages_out o = { .fd = -1, .crc = !ctx->opts->no_page_crc };
	unsigned char hdr[PAGES_DATA_OFFSET];
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "pages-%d.img", p->pid);
	o.fd = openat(ctx->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (o.fd < 0)
		return pr_errno("cannot create image %s", name);
	buf = malloc(BUF);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	p->nr_page_files = 1; /* written as it is read, by one thread */
	for (int i = 0; i < p->nr_runs; i++) {
		struct cr_pagerun *r = &p->runs[i];
		uint64_t left = r->nr_pages * PAGE_SIZE, a = r->vaddr;
		const struct cr_vma *v = mem_vma_at(p, r->vaddr);

		o.open = false;
		if (run_nodata(r)) {
			ret = pages_push_run(&o.runs, &o.nr, &o.cap, r);
			if (ret)
				goto out;
			continue;
		}
		while (left) {
			uint64_t chunk = MIN(left, (uint64_t)BUF), len = 0, step;
			struct iovec l = { buf, chunk }, rv = { (void *)a, chunk };
			ssize_t k = pages_may_share(p) ? pread(p->mem_fd, buf, chunk, a)
						       : process_vm_readv(p->pid, &l, 1, &rv, 1, 0);

			if (k > 0)
				len = (uint64_t)k & ~(PAGE_SIZE - 1);
			/* the rest page by page through /proc/PID/mem, which
			 * reads unreadable mappings too, up to a page gone */
			while (len < chunk &&
			       pread(p->mem_fd, buf + len, PAGE_SIZE, a + len) == PAGE_SIZE)
				len += PAGE_SIZE;
			if (len) {
				ret = pages_emit(&o, a, buf, len, pages_zeros_skippable(v));
				if (ret)
					goto werr;
			}
			step = len;
			if (len < chunk) {
				pr_debug("pid %d: page %lx went away during the pre-dump", p->pid,
					 (unsigned long)(a + len));
				step += PAGE_SIZE;
				o.open = false;
			}
			a += step;
			left -= step;
		}
	}
	mem_pages_header(hdr, p->pid, 0, o.written);
	ret = pwrite_all(o.fd, hdr, sizeof(hdr), 0);
	if (ret)
		goto werr;
	ret = close(o.fd) ? -errno : 0;
	o.fd = -1;
	if (ret)
		goto werr;
	free(p->runs);
	p->runs = o.runs;
	o.runs = NULL;
	p->nr_runs = o.nr;
	p->nr_pages = o.written;
	p->zero_pages = o.zero_pages;
	ctx->total_pages += o.written;
	ctx->zero_pages += o.zero_pages;
	return write_pagemap(ctx, p);
werr:
	pr_err("cannot write image %s: %s", name, strerror(-ret));
out:
	if (o.fd >= 0)
		close(o.fd);
	free(o.runs);
	return ret;
}

/* vDSO symbols: offsets of the functions, to redirect them on a kernel
 * whose vDSO differs (vdso.c). */
static int vdso_symbols(struct cr_proc *p, VdsoSymbol ***out, size_t *nr)
{
	struct vdso_sym *syms;
	VdsoSymbol **v;
	size_t n;

	*out = NULL;
	*nr = 0;
	if (vdso_parse(p->vdso_image, p->vdso_len, &syms, &n)) {
		pr_warn("pid %d: the vDSO is not an ELF image this kupdate understands", p->pid);
		return 0;
	}
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free(syms);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = xzalloc(sizeof(**v));
		if (!v[i]) {
			for (size_t k = 0; k < i; k++) {
				free(v[k]->name);
				free(v[k]);
			}
			free(v);
			free(syms);
			return -ENOMEM;
		}
		vdso_symbol__init(v[i]);
		v[i]->name = xstrdup(syms[i].name);
		v[i]->offset = syms[i].offset;
	}
	free(syms);
	*out = v;
	*nr = n;
	return 0;
}

int write_mm(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_writer w;
	MmCore mm = MM_CORE__INIT;
	VdsoSymbol **syms = NULL;
	size_t nsyms = 0;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "mm-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_MM);
	if (ret)
		return ret;
	mm.start_code = p->stat.start_code;
	mm.end_code = p->stat.end_code;
	mm.start_data = p->stat.start_data;
	mm.end_data = p->stat.end_data;
	mm.start_brk = p->stat.start_brk;
	mm.brk = p->brk;
	mm.start_stack = p->stat.start_stack;
	mm.arg_start = p->stat.arg_start;
	mm.arg_end = p->stat.arg_end;
	mm.env_start = p->stat.env_start;
	mm.env_end = p->stat.env_end;
	mm.n_auxv = p->nr_auxv;
	mm.auxv = p->auxv;
	if (p->vdso_image) {
		mm.has_vdso_image = 1;
		mm.vdso_image.data = p->vdso_image;
		mm.vdso_image.len = p->vdso_len;
		ret = vdso_symbols(p, &syms, &nsyms);
		if (ret) {
			img_writer_abort(&w);
			return ret;
		}
		mm.vdso_symbols = syms;
		mm.n_vdso_symbols = nsyms;
	}
	img_write(&w, &mm.base);
	for (size_t i = 0; i < nsyms; i++) {
		free(syms[i]->name);
		free(syms[i]);
	}
	free(syms);

	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];
		VmaEntry e = VMA_ENTRY__INIT;

		e.start = v->s.start;
		e.end = v->s.end;
		e.prot = v->s.prot;
		e.kind = v->kind;
		if (v->kind == VMA_KIND__VMA_FILE_PRIVATE || v->kind == VMA_KIND__VMA_FILE_SHARED) {
			e.has_pgoff = e.has_ino = e.has_file_size = e.has_mtime_ns = 1;
			e.pgoff = v->s.pgoff;
			e.path = v->s.path;
			e.ino = v->ino;
			/* in a directory saved whole (tmpdir.c): made again */
			if (ns_saved_path(ctx, ctx->mnt_owner, v->s.path))
				e.has_ino = e.has_mtime_ns = 0;
			e.file_size = v->file_size;
			e.mtime_ns = v->mtime_ns;
			e.has_may_write = 1;
			e.may_write = !!(v->s.vmflags & VMF_MAYWRITE);
			e.has_open_rw = 1;
			e.open_rw = v->open_rw;
			if (v->ghost_id) {
				e.has_ghost_id = 1;
				e.ghost_id = v->ghost_id;
			}
		}
		if (v->kind == VMA_KIND__VMA_PACKET_RING) {
			e.has_pgoff = e.has_ring_fd = 1;
			e.pgoff = v->s.pgoff;
			e.ring_fd = v->ring_fd;
		}
		if (v->s.vmflags & VMF_GROWSDOWN) {
			e.has_growsdown = 1;
			e.growsdown = 1;
		}
		if (v->s.vmflags & VMF_LOCKED) {
			e.has_locked = 1;
			e.locked = 1;
		}
		if (v->s.vmflags & VMF_DROPPABLE) {
			e.has_droppable = 1;
			e.droppable = 1;
		}
		if (v->s.vmflags & VMF_NORESERVE) {
			e.has_noreserve = 1;
			e.noreserve = 1;
		}
		if (v->madv) {
			e.has_madv = 1;
			e.madv = v->madv;
		}
		e.name = v->name;
		if (v->shmid) {
			e.has_shmid = 1;
			e.shmid = v->shmid;
			e.has_pgoff = 1;
			e.pgoff = v->s.pgoff;
			e.has_may_write = 1;
			e.may_write = !!(v->s.vmflags & VMF_MAYWRITE);
		}
		if (v->special)
			e.special = (char *)v->special;
		img_write(&w, &e.base);
	}
	ret = img_writer_close(&w);
	if (ret)
		return ret;

	return write_pagemap(ctx, p);
}

int write_pagemap(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	PagemapHead h = PAGEMAP_HEAD__INIT;
	struct img_writer w;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "pagemap-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_PAGEMAP);
	if (ret)
		return ret;
	h.nr_pages = p->nr_pages;
	h.crc_valid = !ctx->opts->no_page_crc;
	h.has_start_time = 1;
	h.start_time = p->stat.starttime;
	if (ctx->opts->pre_dump) {
		h.has_tracking = 1;
		h.tracking = ctx->track;
		if (p->uffd_fd >= 0) {
			h.has_uffd_fd = h.has_uffd_ino = 1;
			h.uffd_fd = p->uffd_fd;
			h.uffd_ino = p->uffd_ino;
		}
	}
	if (p->nr_page_files > 1) {
		h.has_nr_files = 1;
		h.nr_files = (uint32_t)p->nr_page_files;
	}
	img_write(&w, &h.base);
	for (int i = 0; i < p->nr_runs; i++) {
		PagemapEntry e = PAGEMAP_ENTRY__INIT;

		e.vaddr = p->runs[i].vaddr;
		e.nr_pages = p->runs[i].nr_pages;
		if (p->runs[i].in_parent) {
			e.has_in_parent = 1;
			e.in_parent = 1;
		} else if (p->runs[i].cow) {
			e.has_cow_parent = 1;
			e.cow_parent = 1;
		} else {
			e.has_crc32c = 1;
			e.crc32c = p->runs[i].crc;
			if (p->nr_page_files > 1 && p->runs[i].file) {
				e.has_file = 1;
				e.file = p->runs[i].file;
			}
		}
		img_write(&w, &e.base);
	}
	return img_writer_close(&w);
}
