#ifndef CR_UNIX_H
#define CR_UNIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* the fds of the files (by files.img id) that queued messages carry */
struct unix_fds {
	int (*fd_of)(void *arg, uint32_t file_id); /* < 0: not made */
	void *arg;
};
/* a connection with both ends in the tree; deferred (defer), its queues
 * and options wait for unix_fill_pair, once the files they carry exist */
int unix_create_pair(const UnixSk *a, const UnixSk *b, int *fa, int *fb, const char *what,
		     bool defer);
int unix_fill_pair(int fa, int fb, const UnixSk *a, const UnixSk *b, const char *what,
		   const struct unix_fds *res);
/* any other: created, bound and listening as it was; returns the fd.
 * Deferred (via not NULL): its queue and options wait for unix_fill, and
 * *via is what it needs then (or -1) */
struct sk_listeners;
int unix_create(const UnixSk *u, struct sk_listeners *l, const char *what, int *via);
int unix_fill(int sk, int via, const UnixSk *u, const char *what, const struct unix_fds *res);
/* connect to the (restored) bound socket it was connected to */
int unix_connect_late(int sk, const UnixSk *u, const char *what);
/* a socket bound in the mount namespace a container's init made (its
 * bound_in): bound by the process that built that namespace, its root
 * entered, before its mounts are locked in a user namespace's copy
 * (files_bind_in_container), through a private copy where the read-only
 * binds over its directory are unmounted (nspawn's /run/host); checked by
 * its holder once every process exists (unix_bind_late) */
int unix_bind_in_built(int sk, const UnixSk *u, const char *what);
int unix_bind_late(int sk, const UnixSk *u, const char *what);
/* a socket bound at a path since removed: its path removed again, once
 * every connection to it is made; after a failed restore, only if nothing
 * is bound there any more (it may not have been bound by the restore) */
void unix_unlink_removed(const UnixSk *u, bool failed);

#endif
