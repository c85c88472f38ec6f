#ifndef CR_FILES_H
#define CR_FILES_H

#include <stddef.h>
#include <sys/types.h>

#include "images/files.pb-c.h"

/* Reopen a process's files and put them on their fd numbers.  The caller
 * has moved its own fds out of the way. */
int files_restore(pid_t pid, FdEntry **fds, size_t nr_fds, FileEntry **files, size_t nr_files);
int files_validate(FdEntry **fds, size_t nr_fds, FileEntry **files, size_t nr_files,
		   const char *img);

#endif
