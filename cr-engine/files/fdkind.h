#ifndef CR_FDKIND_H
#define CR_FDKIND_H

/* One record per kind of file descriptor (FILE_KIND__* of files.proto):
 * what the dump, the image checks and the restore call for it.  The steps
 * of files-*.c look a kind up here (fdkind.c holds the table) instead of
 * naming it.  A kind keeps its state in its own struct and its
 * prototypes in its own header; see docs/adding-a-kind.md. */
#include <stdbool.h>
#include <stddef.h>

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_file;
struct cr_proc;
struct rfiles;
struct rproc;
struct sk_diag;

struct fd_kind {
	int kind;	  /* FILE_KIND__* */
	const char *name; /* what it is, for messages: "an eventfd" */
	/* an anonymous-inode kind: the whole /proc/PID/fd link that names it;
	 * or a test of the link (a namespace file's) */
	const char *link;
	bool (*link_match)(const char *link);
	bool lockable;	   /* its descriptions may hold flock and OFD locks */
	bool needs_holder; /* cannot be dumped in flight in a unix socket that no
			    * process holds it beside (its restore needs one) */

	/* ---- dump (f: path, flags, pos, dev, ino set; f->kind this kind) */
	/* the kinds found by their link (and the terminal and the memfd) */
	int (*dump)(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		    struct cr_file *f);
	/* a socket: this kind if sk_match(d), d being sock_diag's view */
	bool (*sk_match)(const struct sk_diag *d);
	int (*sk_dump)(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
		       struct cr_file *f);
	/* once every fd of p is dumped / once the last process is */
	int (*dump_proc)(struct cr_dump_ctx *ctx, struct cr_proc *p);
	int (*dump_tree)(struct cr_dump_ctx *ctx);
	/* its part of the files.img entry, and freeing what its dump made */
	void (*save)(const struct cr_file *f, FileEntry *e);
	void (*free)(struct cr_file *f);

	/* ---- restore */
	/* files.img: e (in f->files, those before it checked) is sound */
	int (*validate)(const struct rfiles *f, const FileEntry *e);
	/* a new description (O_CLOEXEC) for fd of rp: its fd, or -errno */
	int (*restore)(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd,
		       const char *what);
	/* once rp's fd table is complete, on the first fd of e in it */
	int (*finish)(const FileEntry *e, struct rproc *rp, int at, const char *what);
};

extern const struct fd_kind fd_kinds[];
extern const size_t nr_fd_kinds;

/* the record of kind, or NULL: no such kind */
const struct fd_kind *fd_kind(int kind);
/* the anonymous-inode kind a /proc/PID/fd link names, or NULL */
const struct fd_kind *fd_kind_by_link(const char *link);
/* what a link names that this kupdate cannot dump ("a pidfd"), or NULL */
const char *fd_kind_unsupported(const char *link);
/* what an operator can do about such a descriptor, or NULL */
const char *fd_kind_hint(const char *link);
/* its descriptions may hold flock and OFD locks / it is a socket */
bool fd_kind_lockable(int kind);
bool fd_kind_socket(int kind);

#endif
