/* A mount namespace a process of the tree made (mntns.c): a container's
 * root and the mounts under it. */
#ifndef CR_MNTNS_H
#define CR_MNTNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cr_dump_ctx;
struct mount_table;
struct cr_proc;
struct rctx;
struct rproc;

/* dump: p made its mount namespace; its mounts into p->made_mounts, or
 * refused naming the mount kupdate cannot make again */
int mntns_dump(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* mntlock.c: inside[i], mount i of pid's table t (its mountinfo) was made
 * from inside its user namespace (not locked); 0 or -errno */
int mntlock_probe(pid_t pid, const struct mount_table *t, bool *inside);
void mntns_free_dump(struct cr_proc *p);

/* restore, in the process rp right after its birth: its mount namespace
 * made again and entered (task_core.made_ns.mounts), if it had made one */
int mntns_restore(struct rctx *c, const struct rproc *rp);
/* restore, for the init of a pid namespace its user namespace owns, by
 * its builder (userns.c) before its birth: its mounts but its /proc and
 * what lies on it, moved over the old root and entered (chroot); the
 * builder copies them into a namespace the user namespace owns, and
 * mntns_restore() in the init makes the rest */
int mntns_build(struct rctx *c, struct rproc *rp);
/* kupdate, once the tree is restored or given up: the staging directories */
void mntns_cleanup(const struct rctx *c);
void mntns_stage(pid_t pid, char *buf, size_t len);

#endif
