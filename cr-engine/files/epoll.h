#ifndef CR_EPOLL_H
#define CR_EPOLL_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;

/* dump: the targets with their fd numbers (checked with kcmp) */
int epoll_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f);
/* once every fd of p is known: which description each target is */
int epoll_resolve(struct cr_dump_ctx *ctx, struct cr_proc *p);
void epoll_free_dump(EpollFile *e);
int epoll_validate(const FileEntry *e);
/* restore: an empty instance (O_CLOEXEC); returns the fd */
int epoll_restore(const FileEntry *e, const char *what);
/* register the targets, in the process whose fds they were found in, once
 * its whole fd table (fds) is in place */
int epoll_fill(int epfd, const FileEntry *e, FdEntry *const *fds, size_t n, const char *what);

#endif
