#ifndef CR_EVENTFD_H
#define CR_EVENTFD_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

/* dump: f->efd from the fd's fdinfo (and a probe on old kernels) */
int eventfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f);
/* its part of the files.img entry; what its dump allocated, freed */
void eventfd_save(const struct cr_file *f, FileEntry *e);
void eventfd_free_dump(struct cr_file *f);
int eventfd_validate(const struct rfiles *f, const FileEntry *e);
/* restore: a new eventfd as it was (O_CLOEXEC); returns the fd */
int eventfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what);

#endif
