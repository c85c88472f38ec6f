#ifndef CR_GHOST_H
#define CR_GHOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "images/ghost.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;

#define GHOST_LIMIT_DEFAULT (1ULL << 20)

/* dump: an fd of an unlinked regular file; saves the file once (its
 * data in ghost-ID.img) and sets f->ghost_id */
int ghost_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct stat *st,
	       struct cr_file *f);
void ghost_free_dump(struct cr_dump_ctx *ctx);

/* restore */
struct rghost {
	GhostEntry *e;
	GhostChunk **chunks;
	size_t nr_chunks;
	int fd; /* the file made again, or -1 */
};
int ghost_load(int dirfd, uint32_t id, struct rghost *g);
void ghost_free(struct rghost *g);
/* Make the file again at path (or beside it if path is taken), with its
 * data, mode, owner and times, and unlink it; returns an O_RDWR fd. */
int ghost_create(const struct rghost *g, const char *path);

#endif
