#ifndef CR_UNIX_INT_H
#define CR_UNIX_INT_H

/* What the files of unix sockets (unix.c: the socket, its queue and its
 * peer; unix-bound.c: where its file lives) share. */

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "images/unix.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;

/* the address of a saved name */
socklen_t unix_make_addr(struct sockaddr_un *a, const ProtobufCBinaryData *name);

/* dump: "/proc/self/fd/N/FILE" into N and FILE (false: another name); the
 * directory such a socket was bound in, among p's open files and cwd,
 * into u->bound_dir; the process of the tree whose container's mount
 * namespace holds path with the socket file ino (0: none); a socket bound
 * at path, removed since (u->removed), refused if the path was taken or
 * its directory is gone */
bool unix_through_fd(const char *name, int *n, const char **file);
int unix_find_bound_dir(struct cr_proc *p, int fd, const char *name, const char *file, uint64_t ino,
			UnixSk *u);
pid_t unix_bound_in_container(struct cr_dump_ctx *ctx, const char *path, uint32_t ino,
			      struct stat *st);
int unix_removed_path(struct cr_proc *p, int fd, const char *path, const char *rpath, UnixSk *u);

/* restore: bound through its directory's fd again (u->bound_dir) */
int unix_bind_through_fd(int sk, const UnixSk *u, const char *what);

#endif
