#ifndef CR_SYSVSHM_H
#define CR_SYSVSHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "images/shmem.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_vma;
struct cr_shm;
struct rshm;
struct rmm;
struct rst_vma;

/* ---- dump */

/* a mapping of a System V segment: /SYSV<key> (deleted) */
bool sysvshm_mapping(const char *path);
/* can the segment behind v be saved (an attach in kupdate's IPC namespace)?
 * 0 if so; the caller then saves it as an object (shmem_dump_vma) */
int sysvshm_check_vma(const struct cr_proc *p, const struct cr_vma *v);
/* shmem.c, for a new object: what IPC_STAT says of the segment fd maps */
int sysvshm_describe(int fd, const struct stat *st, struct cr_shm *s, const char *where);
/* every attach of p covers its whole segment, in one piece of address space */
int sysvshm_check_attaches(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* once the whole tree is seen: no segment is attached outside it */
int sysvshm_check_outside(struct cr_dump_ctx *ctx);
void sysvshm_fill_entry(const struct cr_shm *s, ShmemEntry *e);

/* ---- restore */

enum { SYSV_NONE = 0, SYSV_CREATED, SYSV_TAKEN };

int sysvshm_validate(const ShmemEntry *e, size_t idx);
/* the segment, created with its id (or the very same one taken back),
 * attached in kupdate to be filled; *state is SYSV_* */
int sysvshm_create(const ShmemEntry *e, int *state, void **map);
void sysvshm_detach(void *map);
/* every process has attached: the segments marked for removal are removed */
int sysvshm_commit(struct rshm *t);
/* a restore that did not get that far removes the segments it created */
void sysvshm_cleanup(struct rshm *t);
/* the restorer's plan for mapping i of a process: 1 if it is an attach (or
 * part of one), 0 if it is no System V segment, or a negative errno */
int sysvshm_plan(pid_t pid, const struct rmm *mm, size_t i, const struct rshm *shm,
		 struct rst_vma *v);

#endif
