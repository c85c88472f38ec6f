/* Pre-dump: the pages a service writes after a pre-dump, tracked (soft
 * dirty bits, or userfaultfd write-protection) for the dump that follows
 * it with --prev. */
#ifndef CR_PREDUMP_H
#define CR_PREDUMP_H

#include <stdint.h>

struct cr_dump_ctx;
struct cr_proc;
struct cr_range;

int track_method(int *track);
int prev_open(struct cr_dump_ctx *ctx);
/* what changed in p since the parent dump (sets p->inpar), and the
 * tracking of the parent dump disarmed */
int prev_collect(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* append [start, end) to a sorted list, merged with the last range */
int push_range(struct cr_range **v, int *n, int *cap, uint64_t start, uint64_t end);
/* start tracking writes in p (seized, its mappings read) */
int track_arm(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* fd of p is a userfaultfd: if it is the one a pre-dump leaves (not
 * followed by a dump with --prev), close it and return 1; 0: not ours */
int track_leftover(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd);
/* undo track_arm (a failed pre-dump) */
void track_disarm(struct cr_dump_ctx *ctx, struct cr_proc *p);

#endif
