#ifndef CR_MEMORY_H
#define CR_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cr_dump_ctx;
void mem_find_zero_pfns(struct cr_dump_ctx *ctx);
/* the name of page file N of process pid: pages-PID.img, pages-PID.N.img */
int mem_pages_name(char *buf, size_t size, pid_t pid, uint32_t file);

#endif
