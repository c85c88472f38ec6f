#ifndef CR_SIGNALFD_H
#define CR_SIGNALFD_H

#include "images/files.pb-c.h"

struct cr_proc;
struct cr_file;

int signalfd_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f);
void signalfd_free_dump(SignalfdFile *s);
int signalfd_validate(const FileEntry *e);
int signalfd_restore(const FileEntry *e, const char *what);

#endif
