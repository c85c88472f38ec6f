#ifndef CR_TIMERS_H
#define CR_TIMERS_H

#include <stddef.h>

#include "images/pstree.pb-c.h"
#include "images/timers.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;

int dump_timers(struct cr_dump_ctx *ctx, struct cr_proc *p);
int write_timers(struct cr_dump_ctx *ctx, struct cr_proc *p);

struct rtimers {
	TimersCore *core;
	PosixTimer **timers; /* sorted by id */
	size_t nr;
};

int timers_load(int dirfd, const PstreeEntry *pe, struct rtimers *t);
void timers_free(struct rtimers *t);

#endif
