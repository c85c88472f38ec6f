#ifndef CR_TIMERFD_H
#define CR_TIMERFD_H

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

int timerfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f);
/* its part of the files.img entry; what its dump allocated, freed */
void timerfd_save(const struct cr_file *f, FileEntry *e);
void timerfd_free_dump(struct cr_file *f);
int timerfd_validate(const struct rfiles *f, const FileEntry *e);
/* a timerfd armed with the time it had left (see timers.c for the rule) */
int timerfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what);

#endif
