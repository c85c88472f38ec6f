#ifndef CR_INOTIFY_H
#define CR_INOTIFY_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;
struct rctx;

/* dump: each watch with the path of the inode it watches */
int inotify_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f);
/* its part of the files.img entry; what its dump allocated, freed */
void inotify_save(const struct cr_file *f, FileEntry *e);
void inotify_free_dump(struct cr_file *f);
/* once every fd of the tree is dumped: a watch of a deleted file goes to
 * the ghost saved for an fd that holds it, or the dump is refused */
int inotify_finish_dump(struct cr_dump_ctx *ctx);
int inotify_validate(const struct rfiles *f, const FileEntry *e);
/* restore: the instance with its watches under their numbers */
int inotify_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what);
/* kupdate, once every process is stopped at the end of the restore: the
 * events queued at the dump on watches of control groups, made again */
int inotify_restore_events(const struct rctx *c);

#endif
