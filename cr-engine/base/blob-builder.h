/* What the restore of one process hands to the restorer blob, gathered
 * before the blob's region is laid out (restore-blob.c): its arguments,
 * mappings, page runs, threads, strings and the fds it keeps.  The kinds
 * (memory, pages, vDSO, files) add to it; the planner lays it out. */
#ifndef CR_BLOB_BUILDER_H
#define CR_BLOB_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "restorer/restorer.h"

struct rst_builder {
	struct rst_args args;
	struct rst_vma *vmas;
	size_t nr_vmas;
	struct rst_run *runs;
	size_t nr_runs;
	struct rst_thread *threads;
	size_t nr_threads;
	char *strings; /* NUL-separated; offset 0 is the empty string */
	size_t strings_len;
	int next_fd; /* helper fds are opened from here up */
};

int builder_add_string(struct rst_builder *b, const char *s, uint32_t *off);
/* Put fd at the next helper number (>= args.close_from); closes fd. */
int builder_place_fd(struct rst_builder *b, int fd);
/* The same, leaving fd open: in an fd table shared with a process that
 * prepares after us, fd is that process's too. */
int builder_copy_fd(struct rst_builder *b, int fd);

#endif
