#ifndef CR_GHOST_H
#define CR_GHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "images/ghost.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;

#define GHOST_LIMIT_DEFAULT (1ULL << 20)
/* ... of a file mapped or run (a library, a program apt replaced) */
#define GHOST_MAPPED_LIMIT_DEFAULT (256ULL << 20)

/* dump: an fd of an unlinked regular file; saves the file once (its
 * data in ghost-ID.img) and sets f->ghost_id */
int ghost_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct stat *st,
	       struct cr_file *f);
/* The same for any deleted file, read through src (/proc/PID/map_files/..,
 * /proc/PID/exe); st is its stat, path where it was (for the image and the
 * messages, which start with what).  Saved once per inode: *id is the
 * ghost's, new or already saved. */
int ghost_save(struct cr_dump_ctx *ctx, const char *src, const char *what, const char *path,
	       const struct stat *st, bool mapped, uint32_t *id);
/* the ghost saved for this inode, or 0 */
uint32_t ghost_find(const struct cr_dump_ctx *ctx, uint64_t dev, uint64_t ino);
void ghost_free_dump(struct cr_dump_ctx *ctx);

/* what a dump saves of deleted files (a check-only dump: would save) */
struct ghost_stats {
	unsigned files, mapped; /* files, and of them the mapped ones */
	uint64_t bytes, mapped_bytes;
	int64_t ns; /* time spent reading and writing them */
};
void ghost_stats(const struct cr_dump_ctx *ctx, struct ghost_stats *gs);

/* restore */
struct rghost {
	GhostEntry *e;
	GhostChunk **chunks;
	size_t nr_chunks;
	int fd;	    /* the file made again, or -1 */
	int map_fd; /* made by kupdate before the tree for its mappings (read-only), or -1 */
	bool mapped;
};
int ghost_load(int dirfd, uint32_t id, struct rghost *g);
void ghost_free(struct rghost *g);
/* Make the file again at path (or beside it if path is taken), with its
 * data, mode, owner and times, and unlink it; returns an O_RDWR fd.  path
 * NULL: the one the image holds. */
int ghost_create(const struct rghost *g, const char *path);
/* Before the tree is created: the ghosts that processes map (or run)
 * made again, g->map_fd read-only (a file open for writing could not be
 * an executable). */
int ghost_make_mapped(struct rghost *g, size_t n);

/* each stretch of data of fd's first size bytes, its holes skipped, read
 * into buf (1 MiB) at most 1 MiB at a time and given to fn with its offset:
 * 0, or the error of the read at *at (-EIO: the file is shorter) */
int ghost_each_chunk(int fd, off_t size, unsigned char *buf,
		     void (*fn)(off_t off, const unsigned char *buf, size_t len, void *arg),
		     void *arg, off_t *at);

#endif
