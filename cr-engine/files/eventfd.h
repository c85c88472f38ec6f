#ifndef CR_EVENTFD_H
#define CR_EVENTFD_H

#include "images/files.pb-c.h"

struct cr_proc;
struct cr_file;

/* dump: f->efd from the fd's fdinfo (and a probe on old kernels) */
int eventfd_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f);
void eventfd_free_dump(EventfdFile *e);
int eventfd_validate(const FileEntry *e);
/* restore: a new eventfd as it was (O_CLOEXEC); returns the fd */
int eventfd_restore(const FileEntry *e, const char *what);

#endif
