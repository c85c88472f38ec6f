#ifndef CR_MEMORY_H
#define CR_MEMORY_H

struct cr_dump_ctx;
void mem_find_zero_pfns(struct cr_dump_ctx *ctx);

#endif
