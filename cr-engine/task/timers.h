#ifndef CR_TIMERS_H
#define CR_TIMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/pstree.pb-c.h"
#include "images/timers.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;

struct cr_ptimer {
	int id, clock, notify, signo, tid, overrun;
	bool sig_pending; /* its signal is queued (taken out of the pending lists) */
	uint64_t sival, value_ns, interval_ns;
};

/* a process's timers as the dump read them (p->timers) */
struct cr_timers {
	uint64_t itimer[3][2]; /* value, interval in us: REAL, VIRTUAL, PROF */
	struct cr_ptimer *ptimers;
	int nr_ptimers;
	int64_t mono; /* its CLOCK_MONOTONIC when they were read */
};

int dump_timers(struct cr_dump_ctx *ctx, struct cr_proc *p);
int write_timers(struct cr_dump_ctx *ctx, struct cr_proc *p);
void timers_free_dump(struct cr_proc *p);

struct rtimers {
	TimersCore *core;
	PosixTimer **timers; /* sorted by id */
	size_t nr;
};

int timers_load(int dirfd, const PstreeEntry *pe, struct rtimers *t);
void timers_free(struct rtimers *t);

#endif
