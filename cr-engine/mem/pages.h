#ifndef CR_PAGES_H
#define CR_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/pagemap.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct rst_builder;

/* the name of page file N of process pid: pages-PID.img, pages-PID.N.img */
int mem_pages_name(char *buf, size_t size, pid_t pid, uint32_t file);
/* the header page of page file `file` of process pid (PAGES_DATA_OFFSET bytes) */
void mem_pages_header(unsigned char *hdr, pid_t pid, uint32_t file, uint64_t nr_pages);
/* layers of images a restore reads pages from: a dump and the pre-dumps
 * below it (--prev, the parent links) */
#define PAGES_MAX_LAYERS 16

struct cr_pagerun;

/* Page data going into one page file, run by run: pages_emit appends
 * [vaddr, +len) from buf, summed (crc), to the open run (a new one if
 * none is open, at file), leaving out pages of zeros when zeros; a run
 * left out of, or a new source run, closes the open run (open = false). */
struct pages_out {
	int fd;
	uint32_t file;
	bool crc, open;
	struct cr_pagerun *runs;
	int nr, cap;
	uint64_t written;    /* pages in the file */
	uint64_t zero_pages; /* left out */
};
struct cr_vma;
/* May p share pages copy-on-write with another process of the tree?  Then
 * its pages are read through /proc/PID/mem: process_vm_readv pins them,
 * and pinning a shared anonymous page makes the kernel give the process a
 * copy of its own (a COW break: on this host, 3.3 s a GiB instead of 0.17,
 * the tree's memory growing by as much while it is stopped, and the
 * sharing gone after a pre-dump); /proc/PID/mem only looks (0.19 s). */
bool pages_may_share(const struct cr_proc *p);
/* the mapping of p holding addr, or NULL */
const struct cr_vma *mem_vma_at(const struct cr_proc *p, uint64_t addr);
/* pages of zeros in v may be left out: private anonymous memory, whose
 * missing pages a restore leaves to fresh (zero) memory; not a private
 * file mapping, whose missing pages would come back as the file's data */
bool pages_zeros_skippable(const struct cr_vma *v);
/* From page *pos of buf (np pages): the pages of zeros there are skipped,
 * then the pages with data taken; [*start, *pos) are those (empty at the
 * end).  Returns how many pages of zeros were skipped. */
uint64_t pages_data_span(const unsigned char *buf, uint64_t np, uint64_t *pos, uint64_t *start);
int pages_emit(struct pages_out *o, uint64_t vaddr, const unsigned char *buf, uint64_t len,
	       bool zeros);
int pages_push_run(struct cr_pagerun **out, int *n, int *cap, const struct cr_pagerun *r);

/* write the page data of p->runs (dump side); p->runs and p->nr_pages
 * become what was written */
int mem_write_pages(struct cr_dump_ctx *ctx, struct cr_proc *p);

/* the page file holding a run's data */
static inline uint32_t mem_run_file(const PagemapEntry *e)
{
	return e->has_file ? e->file : 0;
}

/* a run whose data is not in this layer's page files: in a parent layer,
 * or its parent process's pages (cow_parent) */
static inline bool mem_run_nodata(const PagemapEntry *e)
{
	return e->in_parent || e->cow_parent;
}

/* Open the page files of one layer's pagemap (runs[0..nr)), place them for
 * the restorer in fds[file], and give each run with data its offset in its
 * file (off[i]; 0 for those without: mem_run_nodata).  name: the pagemap, for errors. */
int mem_open_page_files(int dirfd, pid_t pid, const char *name, const PagemapHead *head,
			PagemapEntry *const *runs, size_t nr, uint64_t *off, int *fds,
			struct rst_builder *b);

/* restore side */
struct rmm;
struct fill_helper;
/* the page file holding addr (for errors): pages-PID.img, pages-PID.N.img */
void mem_pages_name_at(const struct rmm *mm, pid_t pid, uint64_t addr, char *buf, size_t size);
/* The blob stopped at RST_HELPER_START_OFFSET with these registers: fill
 * the share they name from outside, on a thread of ours (inline when no
 * thread can be had).  Then, at RST_HELPER_WAIT_OFFSET: the value for its
 * %rax. */
int mem_helper_start(pid_t pid, uint64_t args_addr, uint64_t first_run, uint64_t off,
		     uint64_t end_run, struct fill_helper **out);
/* bad_addr: set to the run whose data did not match its checksum, if one */
long mem_helper_wait(struct fill_helper **h, uint64_t *bad_addr);

#endif
