/* The registers and the rest of each thread's state, and core-PID.img,
 * which holds them with the task's own state (task.c, creds.c). */
#ifndef CR_REGS_H
#define CR_REGS_H

#include <stddef.h>

#include "images/core.pb-c.h"
#include "images/pstree.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_thread;

int dump_thread(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_thread *t);
int write_core(struct cr_dump_ctx *ctx, struct cr_proc *p);

struct rcore {
	TaskCore *task;
	ThreadCore **threads;
	size_t nr_threads;
};

int core_load(int dirfd, const PstreeEntry *pe, struct rcore *core);
void core_free(struct rcore *core);

#endif
