/* The task's own state (task.c: umask, limits, personality, oom score,
 * scheduling, affinity...) and its credentials (creds.c), read at dump;
 * core-PID.img holds them (regs.h). */
#ifndef CR_TASK_H
#define CR_TASK_H

struct cr_dump_ctx;
struct cr_proc;
struct cr_thread;

int dump_task_misc(struct cr_dump_ctx *ctx, struct cr_proc *p);
int dump_thread_misc(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_thread *t);
int dump_creds(struct cr_dump_ctx *ctx, struct cr_proc *p);

#endif
