#ifndef CR_SIGNALS_H
#define CR_SIGNALS_H

#include <stddef.h>
#include <sys/types.h>

#include "images/signals.pb-c.h"
#include "restorer/restorer.h"

struct cr_dump_ctx;
struct cr_proc;

struct rsignals {
	SignalsCore *core;
	SigactionEntry **acts;
	size_t nr_acts;
};

int dump_sigactions(struct cr_dump_ctx *ctx, struct cr_proc *p);
int dump_pending(struct cr_dump_ctx *ctx, struct cr_proc *p);
int write_signals(struct cr_dump_ctx *ctx, struct cr_proc *p);

int signals_load(int dirfd, pid_t pid, struct rsignals *s);
void signals_free(struct rsignals *s);
/* fill out[] (room for 64) with the actions to install; returns how many */
size_t signals_plan(const struct rsignals *s, struct rst_sigaction *out);

#endif
