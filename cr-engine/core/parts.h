/* The kinds of per-process state, one row each: what the dump reads from
 * a seized process and writes, what the restore loads and frees.  The dump
 * (dump.c) and the restore's loading (restore-images.c) loop over the
 * table; a new kind of per-process state is one row here (parts.c) and
 * the functions of its own file.  File descriptors are one row; their
 * kinds have a table of their own (files/). */
#ifndef CR_PARTS_H
#define CR_PARTS_H

#include <stddef.h>

struct cr_dump_ctx;
struct cr_proc;
struct rctx;
struct rproc;

struct proc_part {
	const char *name; /* in the dump's step log (-vv) */
	/* dump: read the part from the seized process, whose threads are read */
	int (*dump)(struct cr_dump_ctx *ctx, struct cr_proc *p);
	/* dump: write its images (never for a check-only dump) */
	int (*write)(struct cr_dump_ctx *ctx, struct cr_proc *p);
	/* dump: free what dump kept of the process (also after a failure) */
	void (*release)(struct cr_proc *p);
	/* restore: read and validate its images for one process of the tree
	 * (not a zombie), and free what load kept */
	int (*load)(struct rctx *c, struct rproc *rp);
	void (*free)(struct rproc *rp);
};

/* in the order of the dump: the memory map first (the parts after it run
 * code in the process, at a syscall instruction found among its mappings) */
extern const struct proc_part proc_parts[];
extern const size_t nr_proc_parts;

#endif
