#ifndef CR_MM_LOAD_H
#define CR_MM_LOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

struct rmm;

/* the highest address a mapping may reach (5-level page tables) */
#define TASK_SIZE_MAX (1ULL << 56)

static inline bool page_aligned(uint64_t x)
{
	return !(x & (PAGE_SIZE - 1));
}

/* mm-load.c: the images of pid's memory, checked */
int mem_load(int dirfd, pid_t pid, struct rmm *mm);
void mem_free(struct rmm *mm);

#endif
