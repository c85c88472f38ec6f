#ifndef CR_PREMAP_H
#define CR_PREMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct rmm;

/* premap.c.  A process whose pages are said to be its parent's (cow_parent
 * runs): check that the parent has them, and mark the mappings of both that
 * are premapped.  parent: NULL if it has no parent in the tree. */
int mem_link_cow(pid_t pid, struct rmm *mm, pid_t ppid, struct rmm *parent);
/* In the process, before it forks its children: make and fill its
 * premapped mappings (sharing its parent's pages where its own
 * mappings inherit them: parent is the parent's rmm, as it was filled
 * before this process was forked). */
int mem_premap(int dirfd, pid_t pid, struct rmm *mm, const struct rmm *parent, bool verify);
/* the room the restorer needs to park the premapped mappings */
uint64_t mem_premap_park_len(const struct rmm *mm);

#endif
