#ifndef CR_TIMERFD_H
#define CR_TIMERFD_H

#include "images/files.pb-c.h"

struct cr_proc;
struct cr_file;

int timerfd_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f);
void timerfd_free_dump(TimerfdFile *t);
int timerfd_validate(const FileEntry *e);
/* a timerfd armed with the time it had left (see timers.c for the rule) */
int timerfd_restore(const FileEntry *e, const char *what);

#endif
