#ifndef CR_FILES_H
#define CR_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cr.h"
#include "images/files.pb-c.h"
#include "images/pipes.pb-c.h"

struct rproc;
struct rshm;
struct rghost;
struct sk_listeners;
struct rtty;

/* where each open file description comes from at restore (files-plan.c) */
struct rdesc {
	struct rproc *owner; /* creates it: the closest common ancestor of its holders */
	int nholders;
	int tfd;	     /* transport fd its holders inherit, or -1 */
	struct rproc *first; /* its first holder */
	int pair;	     /* a unix socket: the other end's index, or -1 */
	bool late;	     /* a unix socket connected to a bound one: connect once all exist */
	bool carrier;	     /* a unix socket whose queue carries fds (SCM_RIGHTS) */
	bool inflight; /* in flight in a carrier's queue: made by (an ancestor of) its maker */
	int via;       /* a deferred carrier's stand-in peer, or -1 */
};

struct rfiles {
	FileEntry **files;
	size_t nr_files;
	PipeEntry **pipes;
	size_t nr_pipes;
	struct rdesc *desc;		   /* parallel to files */
	struct rproc **pipe_owner;	   /* parallel to pipes */
	cr_open_external_fn open_external; /* a new fd for a peer outside the tree */
	void *cb_arg;
	const struct rshm *shm; /* the shared memory objects, for memfd fds */
	struct rghost *ghosts;	/* unlinked files (ghost.c) */
	size_t nr_ghosts;
	struct rtty *tty;		  /* the pseudo-terminals made (tty.c) */
	struct sk_listeners *listeners;	  /* passed by a service manager, or NULL */
	const struct cr_unix_link *links; /* the ends of the tree's links (cr.h) */
	size_t nr_links;
	int tbase; /* first transport fd */
	int tend;  /* after the last transport fd */
};

/* every entry of files.img in dirfd, nothing more (malloc'd; each freed
 * with file_entry__free_unpacked): 0 or -errno, said */
int files_read(int dirfd, FileEntry ***out, size_t *nr);
int files_load(int dirfd, struct rfiles *f);
void files_free(struct rfiles *f);
int files_validate_fds(const struct rfiles *f, FdEntry **fds, size_t nr_fds, const char *img);
/* Decide who creates each description; fd_floor: the highest fd in use by
 * kupdate itself (transport fds go above it and every saved fd). */
int files_plan(struct rfiles *f, struct rproc *procs, size_t nr, int fd_floor);

/* In a restoring process, before it forks: the descriptions it owns. */
int files_create_owned(struct rfiles *f, struct rproc *rp);
/* Descriptions shared by processes of different trees are made by
 * kupdate itself before it creates the roots, and closed by it once every
 * root has inherited them. */
bool files_tool_owns(const struct rfiles *f);
int files_create_for_tool(struct rfiles *f);
/* after every process has created its own: connect, then close our copies */
int files_finish_tool(struct rfiles *f);
/* In a restoring process, once every process has done the above: what
 * needs other processes' sockets (connecting to a bound unix socket). */
int files_prepare_owned(struct rfiles *f, struct rproc *rp);
/* In the process that built the mount namespace maker made, its root
 * entered: the unix sockets of maker's ancestors bound there */
int files_bind_in_container(const struct rfiles *f, pid_t maker);
/* In kupdate, once every process has done that (or the restore failed):
 * the paths of sockets bound at paths since removed are removed again. */
void files_unlink_removed(const struct rfiles *f, bool failed);
/* In a restoring process: its fd table.  The caller has moved its own
 * fds out of the way. */
int files_restore(struct rfiles *f, struct rproc *rp);
/* In a restoring process that shares the fd table of rp->fdt, which
 * restores it: what is its own (the foreground group of its terminal);
 * the transport fds of what it made for its children closed. */
int files_restore_sharer(struct rfiles *f, struct rproc *rp);

/* the lookups below the kinds (files_index, files_ghost...) */
#include "fdinfo.h"

struct cr_dump_ctx;
struct cr_proc;

/* the dump of fds: files-dump.c, files-share.c, files-write.c */
int dump_files(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* once every process is dumped: no fd table of the tree is shared with a
 * process outside it (CLONE_FILES) */
int files_check_outside(struct cr_dump_ctx *ctx);
int write_files(struct cr_dump_ctx *ctx);
/* once every process is dumped: the fds in flight found in unix sockets'
 * queues, each a file of the tree or a file of its own */
int files_resolve_inflight(struct cr_dump_ctx *ctx);
void free_files(struct cr_dump_ctx *ctx);

#endif
