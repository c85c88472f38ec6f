#ifndef CR_EPOLL_H
#define CR_EPOLL_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

/* dump: the targets with their fd numbers (checked with kcmp) */
int epoll_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	       struct cr_file *f);
/* once every fd of p is known: which description each target is */
int epoll_resolve(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* its part of the files.img entry; what its dump allocated, freed */
void epoll_save(const struct cr_file *f, FileEntry *e);
void epoll_free_dump(struct cr_file *f);
int epoll_validate(const struct rfiles *f, const FileEntry *e);
/* restore: an empty instance (O_CLOEXEC); returns the fd */
int epoll_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		  const char *what);
/* register the targets, in the process whose fds they were found in, once
 * its whole fd table (fds) is in place */
int epoll_fill(int epfd, const FileEntry *e, FdEntry *const *fds, size_t n, const char *what);
/* once rp's fd table is complete: fd's targets, if rp is the one that fills it */
int epoll_finish(const FileEntry *e, struct rproc *rp, int fd, const char *what);

#endif
