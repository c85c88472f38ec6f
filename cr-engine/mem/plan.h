#ifndef CR_PLAN_H
#define CR_PLAN_H

#include <stdbool.h>
#include <sys/types.h>

struct rfiles;
struct rmm;
struct rshm;
struct rst_builder;

/* plan.c: fill b's mappings and page runs, opening the mapped files and the
 * page image (as helper fds); the deleted ones are files->ghosts' map_fd. */
int mem_plan(int dirfd, pid_t pid, const struct rmm *mm, const struct rshm *shm,
	     const struct rfiles *files, struct rst_builder *b, bool verify);

#endif
