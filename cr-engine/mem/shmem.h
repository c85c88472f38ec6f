#ifndef CR_SHMEM_H
#define CR_SHMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/shmem.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_vma;

/* dump: save the object behind a shared mapping once; sets v->shmid */
int shmem_dump_vma(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_vma *v);
/* the same for the memfd fd of pid is open on */
int shmem_dump_fd(struct cr_dump_ctx *ctx, pid_t pid, int fd, const char *path, uint32_t *shmid);
int shmem_write(struct cr_dump_ctx *ctx);
void shmem_free_dump(struct cr_dump_ctx *ctx);

/* restore: the objects, created and filled, each with an fd */
struct rshm {
	ShmemEntry **e;
	size_t n;
	int *fds;	     /* -1 for System V segments, reached by id */
	int *sysv;	     /* SYSV_* of sysvshm.h, per object */
	bool sysv_committed; /* the tree is attached: nothing to undo */
};
int shmem_restore(int dirfd, struct rshm *t, bool verify);
void shmem_free(struct rshm *t);
/* fd of object id, or -1 */
int shmem_fd(const struct rshm *t, uint32_t id, uint64_t *size);

#endif
