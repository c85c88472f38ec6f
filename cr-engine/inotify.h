#ifndef CR_INOTIFY_H
#define CR_INOTIFY_H

#include "images/files.pb-c.h"

struct cr_proc;
struct cr_file;

/* dump: each watch with the path of the inode it watches */
int inotify_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f);
void inotify_free_dump(InotifyFile *i);
int inotify_validate(const FileEntry *e);
/* restore: the instance with its watches under their numbers */
int inotify_restore(const FileEntry *e, const char *what);

#endif
