#ifndef CR_FDINFO_H
#define CR_FDINFO_H

/* The lookups the fd kinds and the files-*.c steps share (fdinfo.c): the
 * layer below both, which calls neither. */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/pipes.pb-c.h"

struct rfiles;
struct rghost;
struct rproc;

/* the file status flags F_SETFL sets (the rest are fixed at open) */
#define SETFL_MASK (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK)

/* ----------------------------------------------------------------- dump */
/* the value of "key" in an fdinfo text (keys start a line), or NULL */
const char *fdinfo_find(const char *fdinfo, const char *key);
/* /proc/PID/fdinfo/FD into *buf (the caller frees it), with its pos and flags */
int fdinfo_read(pid_t pid, int fd, char **buf, uint64_t *pos, uint32_t *flags);

/* -------------------------------------------------------------- restore */
/* kupdate itself, which creates the roots: the owner of what processes of
 * different trees (a service's several roots) share */
extern struct rproc files_tool_owner;
#define FILES_TOOL (&files_tool_owner)
size_t files_index(const struct rfiles *f, uint32_t id); /* (size_t)-1: no such file */
bool files_holds(const struct rproc *rp, uint32_t file_id);
PipeEntry *files_pipe(const struct rfiles *f, uint64_t id);
/* an fd of ghost id made again, reachable in this process */
int files_ghost_fd(const struct rfiles *f, uint32_t id, const char *path);
struct rghost *files_ghost(const struct rfiles *f, uint32_t id);
/* ghost-ID.img loaded (once) into f->ghosts; *out (if not NULL): it */
int files_load_ghost(int dirfd, struct rfiles *f, uint32_t id, struct rghost **out);
/* Move an fd that must stay open while transports are placed above every
 * transport number, where no placement can clobber it. */
int files_lift(const struct rfiles *f, int fd);
/* Put fd on exactly the number want (closing what was there). */
int files_place(int fd, int want);
/* the flags of SETFL_MASK among flags, on fd (what: for the message) */
int files_set_fl(int fd, uint32_t flags, const char *what);

#endif
