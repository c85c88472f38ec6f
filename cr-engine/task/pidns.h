/* A process tree that holds pid namespaces of its own (pidns.c): a
 * container's init, forked into a new pid namespace by a process of the
 * tree (nspawn, conmon), and the init's descendants. */
#ifndef CR_PIDNS_H
#define CR_PIDNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cr_dump_ctx;
struct rctx;
struct rproc;
typedef struct PstreeEntry PstreeEntry;

/* pid namespaces nested below the dumper's, at most */
#define PIDNS_DEPTH_MAX 7

/* dump: every process's and thread's ids in the pid namespaces below the
 * dumper's (cr_proc.pid_depth, ns_ids), checked to be those of inits and
 * their descendants only, every process of those namespaces in the tree */
int pidns_dump(struct cr_dump_ctx *ctx);

/* restore: the pid namespace fields of pstree.img, for each entry and
 * between parent and child (e[i]'s parent is e[parent[i]], -1 for a root) */
int pidns_validate(PstreeEntry **e, size_t n, const int *parent);
/* rp is the init of a pid namespace the restore makes (CLONE_NEWPID) */
bool pidns_makes(const struct rproc *rp);
/* in rp, once its children are made: its later children born in the
 * namespace of its child init again (pstree_entry.children_ns_of) */
int pidns_children_setns(const struct rproc *rp);
/* the set_tid array of rp's thread k, innermost namespace first, the
 * dumper's last; its length */
size_t pidns_set_tid(const struct rproc *rp, size_t k, pid_t *out);
int pidns_depth(const struct rproc *rp);
/* rp's thread k in the pid namespace 'level' of its line (0: the
 * dumper's, pidns_depth(rp): its own) */
pid_t pidns_id_at(const struct rproc *rp, size_t k, int level);
/* rp's thread k as it sees itself (gettid() in its own namespace) */
pid_t pidns_self(const struct rproc *rp, size_t k);
/* the tree's process pid (as the dumper saw it) as rp's own pid namespace
 * sees it: 0 where that namespace does not (a process group led from
 * outside a container) */
pid_t pidns_view(const struct rctx *c, const struct rproc *rp, pid_t pid);

#endif
