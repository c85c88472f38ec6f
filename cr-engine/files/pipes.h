#ifndef CR_PIPES_H
#define CR_PIPES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/pipes.pb-c.h"

struct cr_dump_ctx;

/* dump: remember pipe id (and its data) the first time one of its ends is seen */
int pipe_dump(struct cr_dump_ctx *ctx, pid_t pid, int fd, uint64_t id);
/* a FIFO whose path was removed: made again there at the restore, then
 * removed, if the path is free and its directory there */
struct cr_file;
struct stat;
int fifo_removed_dump(pid_t pid, int fd, const struct stat *st, struct cr_file *f);
int pipes_write(struct cr_dump_ctx *ctx);
void pipes_free_dump(struct cr_dump_ctx *ctx);
/* a pipe's and a FIFO's part of their files.img entry */
struct FileEntry;
void pipe_save(const struct cr_file *f, struct FileEntry *e);
void fifo_save(const struct cr_file *f, struct FileEntry *e);

int pipes_load(int dirfd, PipeEntry ***out, size_t *nr);
void pipes_free(PipeEntry **p, size_t n);
int pipe_fill(const PipeEntry *pe, int wfd);
/* restore: a removed FIFO made at its path (mode, owner), to be opened
 * there and removed (fifo_unmake) */
int fifo_make(const struct FileEntry *e, pid_t pid);
void fifo_unmake(const struct FileEntry *e);

#endif
