/* A tree in namespaces of its own (namespaces.c). */
#ifndef CR_NAMESPACES_H
#define CR_NAMESPACES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cr.h"	  /* struct cr_conn */
#include "proc.h" /* ns_stat, ns_same */

struct cr_dump_ctx;
struct cr_proc;
struct rctx;
struct rproc;
struct tmpdir;
typedef struct NsMount NsMount;
typedef struct NsEntry NsEntry;

/* an established TCP connection of a tree in its own network namespace */
struct ns_conn {
	struct cr_conn c;
	pid_t pid; /* whose fd it is */
	int fd;
};

/* the dump's view of the tree's namespaces */
struct cr_ns {
	int own;	/* CLONE_NEW* of those not kupdate's */
	char *hostname; /* with a UTS namespace of its own */
	char *domainname;
	NsMount **mounts; /* its mounts that kupdate's namespace has not */
	size_t nr_mounts;
	char **host_points; /* kupdate's mount points */
	size_t nr_host_points;
	char **host_copies; /* those its namespace shows as kupdate's does */
	size_t nr_host_copies;
	struct tmpdir *tmpdirs; /* tmpdir.c */
	size_t nr_tmpdirs;
	int ipc_saved; /* the dumping thread's own IPC namespace, while in the tree's */
	char *uid_map, *gid_map, *setgroups; /* with a user namespace of its own */
	int net_fd;			     /* its own network namespace (netns.c), or -1 */
	int net_saved;			     /* the dumping thread's own, while in the tree's */
	char **net_addrs;		     /* its interfaces (netns_read_addrs) */
	size_t nr_net_addrs;
	struct ns_conn *conns; /* its established TCP connections */
	size_t nr_conns;
};

/* dump: the root's namespaces, once the tree is seized; every other
 * process shares them (ns_check_proc) */
int ns_dump(struct cr_dump_ctx *ctx);
int ns_check_proc(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* p made a mount namespace of its own inside the tree (a container's
 * root): not its parent's nor the root's; ns_check_proc then checks it */
bool ns_proc_made_mnt(const struct cr_dump_ctx *ctx, const struct cr_proc *p);
/* nsmade.c: p made a namespace of kind bit (CLONE_NEW*, named what in
 * messages) for itself and its descendants: kept, its contents recorded,
 * or refused naming it */
int nsmade_check(struct cr_dump_ctx *ctx, struct cr_proc *p, unsigned bit, const char *what);
/* the names of pid's UTS namespace; sets them in the caller's */
int ns_read_names(pid_t pid, char **host, char **domain);
int ns_set_names(const char *host, const char *domain);
/* the namespaces p made for itself and its descendants (ns_check_proc),
 * into m, its kinds' names in kinds; false: none */
#define NS_MADE_KINDS 6
typedef struct NsMade NsMade;
bool ns_made_save(const struct cr_proc *p, NsMade *m, char **names);
int ns_write(struct cr_dump_ctx *ctx);
/* the dumping thread back in kupdate's IPC namespace, the tree looked at */
void ns_dump_done(struct cr_dump_ctx *ctx);
void ns_free_dump(struct cr_dump_ctx *ctx);
/* path lies in a directory saved whole (tmpdir.c): the restore makes it
 * again, with a new inode; owner: the maker of the mount namespace the
 * path is seen in (a container's init, mntns.c), 0 for the tree's */
bool ns_saved_path(const struct cr_dump_ctx *ctx, pid_t owner, const char *path);

/* restore: into the namespaces of cr_restore_opts.ns_pid, checked against
 * the images, before the tree is forked; and back once it runs */
void ns_restore_init(struct rctx *c);
int ns_restore_enter(struct rctx *c);
void ns_restore_leave(struct rctx *c);
/* restore: in the process rp, right after its birth, the namespaces it
 * had made for itself and its descendants (task_core.made_ns) */
int ns_restore_made(const struct rctx *c, struct rproc *rp);
/* restore: id (uid, or gid) of the initial user namespace as the tree's
 * own user namespace names it (the same without one) */
uint32_t ns_id_inside(const struct rctx *c, uint32_t id, bool gid);

/* netns.c: the network namespace's part.  The dumping thread is in the
 * tree's between netns_enter() (netns_dump() the first time) and
 * netns_leave(). */
int netns_dump(struct cr_dump_ctx *ctx);
int netns_enter(struct cr_dump_ctx *ctx);
void netns_leave(struct cr_dump_ctx *ctx);
/* the unix sockets of kupdate's network namespace added to the dump's
 * socket table (the tree's collected): those systemd made for the tree */
int netns_collect_outer(struct cr_dump_ctx *ctx);
/* an established TCP connection of the tree (kept with an own network
 * namespace), and the check that every one's peer is the tree's */
int netns_conn(struct cr_dump_ctx *ctx, const struct cr_conn *c, pid_t pid, int fd);
int netns_check_peers(struct cr_dump_ctx *ctx);
/* the calling thread's namespace's interfaces and addresses, sorted lines */
int netns_read_addrs(char ***out, size_t *nr);
/* restore: pid's network namespace has the recorded interfaces */
int netns_check(const NsEntry *e, pid_t pid);
/* dump: p made its network namespace (a container's private network):
 * kept when it holds its loopback only, as it is when up, and no process
 * outside the tree lives there; p->made_lo_up */
int netns_made(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* dump: the sockets of p's network namespace, one made inside the tree,
 * added to ctx->sk once (sock_diag answers for the caller's namespace) */
int netns_merge_made(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* dump: the process of the tree that made p's network namespace (p or an
 * ancestor), or NULL: p lives in the tree's */
struct cr_proc *netns_maker(struct cr_proc *p);
/* restore: the calling thread's namespace's loopback up; -1 and errno */
int netns_lo_up(void);

/* cgroups.c: dump: the control groups below the root's and each
 * process's (p->cgroup); written to cgroup.img */
int cgroups_dump(struct cr_dump_ctx *ctx);
/* group (a path of the hierarchy) is the root's or one recorded below it,
 * which the restore makes again (1), one below it that it does not make
 * (0: it holds none of the tree's processes), or outside (-1); *rel: its
 * path below the root's */
int cgroups_made_again(const struct cr_dump_ctx *ctx, const char *group, const char **rel);
/* the group rel below the root's recorded too (one that holds no process
 * of the tree, which a process watches); -ENOENT when nothing is */
int cgroups_record(struct cr_dump_ctx *ctx, const char *rel);
/* restore: events on the group rel's files (cgroup.events), made by a
 * freeze and thaw of it, once the tree's processes are stopped */
int cgroups_renotify(const struct rctx *c, const char *rel);
int cgroups_write(struct cr_dump_ctx *ctx);
void cgroups_free_dump(struct cr_dump_ctx *ctx);
/* dump: p made a cgroup namespace: its root (p->cgroup_ns_root) */
int cgroups_ns_root(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* restore: the groups made and opened, each process's (rproc.cg_fd),
 * before the tree is forked; finish(): their controllers and limits once
 * every process is in place; done(): closed, removed if failed */
int cgroups_restore_prepare(struct rctx *c);
/* restore: pid (as the caller names it) moved into the group rel */
int cgroups_move_pid(const struct rctx *c, const char *rel, pid_t pid);
int cgroups_restore_finish(struct rctx *c);
void cgroups_restore_done(struct rctx *c, bool failed);
/* restore, in rp: its cgroup namespace, rooted at root (cgroup.img's) */
int cgroups_make_ns(const struct rctx *c, const struct rproc *rp, const char *root);

/* netlinks.c: dump: the interfaces of the network namespace p made, its
 * loopback and veth pairs to parent's namespace, read into p->made_links
 * (and p->made_lo_up); refused with a message otherwise */
int netlinks_dump(struct cr_proc *p, pid_t parent);
void netlinks_free(struct cr_proc *p);
/* dump, just before the tree is killed: each container's veth pairs
 * deleted from its parent's side.  Its sockets go with the kill, and the
 * kernel tears its namespace down later, its firewall (the lock) before
 * its interfaces: a peer's segment in between would meet no socket and no
 * lock, and be answered with a reset */
void netlinks_cut(struct cr_dump_ctx *ctx);
/* restore, in the maker: prepare() before it unshares its network
 * namespace (a socket in its parent's), restore() after (the veth pairs,
 * their addresses and routes), done() at last */
struct nl_sock;
struct netlinks_rst {
	int parent_fd;
	struct nl_sock *parent;
};
int netlinks_restore_prepare(const NsMade *m, struct netlinks_rst *r);
int netlinks_restore(const NsMade *m, struct netlinks_rst *r, pid_t pid, uint32_t elapsed);
void netlinks_restore_done(struct netlinks_rst *r);

/* userns.c: dump: p made a user namespace (nsmade_check): its maps read,
 * every namespace it made owned by it, or refused; the nearest process
 * from p up that made one, or NULL */
int userns_made(struct cr_dump_ctx *ctx, struct cr_proc *p);
struct cr_proc *userns_maker(struct cr_proc *p);
/* dump: p lives in a user namespace a process of the tree made (p may be
 * its maker): refused if it has threads in a pid namespace made there,
 * or, made_what naming one, if it made that namespace there itself */
bool userns_born_inside(struct cr_proc *p);
/* the inode of the user namespace that owns pid's namespace kind */
int userns_owner_ino(pid_t pid, const char *kind, ino_t *ino);
int userns_check_member(struct cr_proc *p, const char *made_what);
void userns_free_dump(struct cr_proc *p);
/* restore, in rp's parent before rp is born: its user namespace and the
 * namespaces it made there (rp->um); after the clone, the parent's copies
 * closed */
struct usermade;
void userns_fds_init(struct usermade *u);
void userns_fds_close(struct usermade *u, bool user_too);
int userns_prepare(const struct rctx *c, struct rproc *rp);
void userns_spawn_end(struct rproc *rp);
/* restore, in the parent of rp, the init of a pid namespace its user
 * namespace owns (nspawn -U's container): rp cloned by a helper that
 * joined them and built its mounts (build_mounts: mntns_build), with want
 * as its pid in our namespace (ns_last_pid: set here if privileged, else
 * asked of kupdate).  0 in rp, its pid here,
 * or -1 with errno */
struct clone_args_k;
bool userns_init_born_inside(const struct rproc *rp);
pid_t userns_clone_init(struct rctx *c, struct rproc *rp, struct clone_args_k *ca, pid_t want,
			bool privileged, int (*build_mounts)(struct rctx *, struct rproc *));
/* restore, in rp: it joins what its parent made (kind "net", "uts",
 * "ipc", "cgroup") instead of making it; its mounts, built in a namespace
 * of its own, copied into one its user namespace owns; and the user
 * namespace kept for it and its descendants to enter last */
bool userns_joins(const struct rproc *rp);
int userns_join(struct rproc *rp, const char *kind);
int userns_copy_mounts(const struct rproc *rp);
int userns_enter_later(struct rctx *c, struct rproc *rp);

#endif
