#ifndef CR_UNIX_H
#define CR_UNIX_H

#include <stdbool.h>
#include <stddef.h>

#include "images/files.pb-c.h"
#include "images/unix.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct sk_diag;

int unix_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
	      struct cr_file *f);
int unix_check_peers(struct cr_dump_ctx *ctx);
void unix_free_dump(UnixSk *u);
void unix_describe(const struct sk_diag *d, char *buf, size_t len);

int unix_validate(const FileEntry *e);
/* a connection with both ends in the tree */
int unix_create_pair(const UnixSk *a, const UnixSk *b, int *fa, int *fb, const char *what);
/* any other: created, bound and listening as it was; returns the fd */
int unix_create(const UnixSk *u, const char *what);
/* connect to the (restored) bound socket it was connected to */
int unix_connect_late(int sk, const UnixSk *u, const char *what);
/* a socket bound at a path since removed: its path removed again, once
 * every connection to it is made; after a failed restore, only if nothing
 * is bound there any more (it may not have been bound by the restore) */
void unix_unlink_removed(const UnixSk *u, bool failed);

#endif
