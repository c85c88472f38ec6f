#ifndef CR_MM_WRITE_H
#define CR_MM_WRITE_H

struct cr_dump_ctx;
struct cr_proc;

/* mm-write.c: mm-PID.img, then the pagemap */
int write_mm(struct cr_dump_ctx *ctx, struct cr_proc *p);
int write_pagemap(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* pre-dump: copy the runs of a process that runs again, dropping the pages
 * that went away meanwhile; then the pagemap */
int mem_write_predump(struct cr_dump_ctx *ctx, struct cr_proc *p);

#endif
