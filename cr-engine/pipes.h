#ifndef CR_PIPES_H
#define CR_PIPES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/pipes.pb-c.h"

struct cr_dump_ctx;

/* dump: remember pipe id (and its data) the first time one of its ends is seen */
int pipe_dump(struct cr_dump_ctx *ctx, pid_t pid, int fd, uint64_t id);
int pipes_write(struct cr_dump_ctx *ctx);
void pipes_free_dump(struct cr_dump_ctx *ctx);

int pipes_load(int dirfd, PipeEntry ***out, size_t *nr);
void pipes_free(PipeEntry **p, size_t n);
int pipe_fill(const PipeEntry *pe, int wfd);

#endif
