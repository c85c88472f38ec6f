#ifndef CR_PLAN_H
#define CR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rfiles;
struct rmm;
struct rshm;
struct rst_builder;

/* a packet socket's ring in the process (packet.c's layout): its fd,
 * nb blocks of bs bytes, the kernel's block j at the mapping's block
 * (j + rot) % nb */
struct mem_ring {
	int fd;
	uint64_t bs;
	uint32_t nb, rot;
};

/* plan.c: fill b's mappings and page runs, opening the mapped files and the
 * page image (as helper fds); the deleted ones are files->ghosts' map_fd. */
int mem_plan(int dirfd, pid_t pid, const struct rmm *mm, const struct rshm *shm,
	     const struct rfiles *files, const struct mem_ring *rings, size_t nr_rings,
	     struct rst_builder *b, bool verify);

#endif
