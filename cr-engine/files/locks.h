#ifndef CR_LOCKS_H
#define CR_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "images/files.pb-c.h"
#include "images/locks.pb-c.h"

/* dump: the "lock:" lines of one fd's fdinfo, split into the locks of its
 * description (flock, OFD) and those of the process (POSIX) */
int locks_parse(pid_t pid, int fd, const char *path, const char *fdinfo, FileLock ***desc,
		size_t *nr_desc, FileLock ***posix, size_t *nr_posix);
void locks_free(FileLock **l, size_t n);
int locks_validate(FileLock *const *l, size_t n, bool posix, const char *img);
/* restore: flock and OFD locks on a description just made */
int locks_apply_desc(int fd, const FileEntry *e, const char *what);
/* POSIX locks of this process, through fd */
int locks_apply_posix(int fd, const FdEntry *e, const char *what);

#endif
