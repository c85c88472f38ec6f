#ifndef CR_MAPPINGS_H
#define CR_MAPPINGS_H

struct cr_dump_ctx;
struct cr_proc;

/* mappings.c: p's mappings, auxv, brk and the links of /proc/PID */
int dump_mm(struct cr_dump_ctx *ctx, struct cr_proc *p);

#endif
