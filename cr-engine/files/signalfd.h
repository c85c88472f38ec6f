#ifndef CR_SIGNALFD_H
#define CR_SIGNALFD_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

int signalfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		  struct cr_file *f);
/* its part of the files.img entry; what its dump allocated, freed */
void signalfd_save(const struct cr_file *f, FileEntry *e);
void signalfd_free_dump(struct cr_file *f);
int signalfd_validate(const struct rfiles *f, const FileEntry *e);
int signalfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		     const char *what);

#endif
