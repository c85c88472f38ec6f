#ifndef CR_SCAN_H
#define CR_SCAN_H

struct cr_dump_ctx;
struct cr_proc;

/* scan.c: the zero page's pfn, in ctx->zero_pfn (0 if it cannot be seen) */
void mem_find_zero_pfns(struct cr_dump_ctx *ctx);
/* the page runs of p (present, not zero), in_parent where p->inpar says */
int mem_scan_pages(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* the runs of p (mem_scan_pages), those shared with its parent marked cow,
 * and their data written (pages.c) */
int dump_pages(struct cr_dump_ctx *ctx, struct cr_proc *p);

#endif
