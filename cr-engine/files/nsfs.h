/* A namespace file held open (nsfs.c). */
#ifndef CR_NSFS_H
#define CR_NSFS_H

#include <stdbool.h>

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

/* a /proc/PID/fd link that names a namespace ("net:[4026532241]") */
bool nsfs_link(const char *link);
/* dump: f->nsf, the process of the tree whose namespace it is */
int nsfs_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	      struct cr_file *f);
void nsfs_save(const struct cr_file *f, FileEntry *e);
void nsfs_free_dump(struct cr_file *f);
int nsfs_validate(const struct rfiles *f, const FileEntry *e);
/* restore: a stand-in until every process exists (its fd number kept),
 * then the namespace's file in place of each fd of rp that holds it */
int nsfs_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		 const char *what);
int nsfs_finish(const FileEntry *e, struct rproc *rp, int at, const char *what);

#endif
