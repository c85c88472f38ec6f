/* The restore of one tree: its context, shared by restore.c (the tree's
 * creation and the driving of its processes), restore-images.c (the images
 * loaded and validated) and restore-blob.c (what each process hands to the
 * restorer blob).  Private to the restore. */
#ifndef CR_RESTORE_CTX_H
#define CR_RESTORE_CTX_H

#include <stdatomic.h>

#include "sockets.h"
#include "files.h"
#include "memory.h"
#include "namespaces.h"
#include "pages.h"
#include "restore.h"
#include "sysvshm.h"

enum stage { ST_FORK = 1, ST_PGID, ST_PREPARE, ST_GO };

enum lp_state { LP_IDLE, LP_ASKED, LP_SET, LP_FAILED, LP_CLONED };

struct shared_proc {
	uint64_t blob_start, blob_len, args_addr;
	_Atomic uint32_t prepared; /* its rst_prepare() is done (a shared fd table) */
	/* made by this restore: a failed one kills only these (a saved id
	 * another task took in between is that task's, not ours) */
	_Atomic uint32_t created;
};

struct shared {
	_Atomic uint32_t stage;
	_Atomic uint32_t count;
	_Atomic uint32_t failed; /* a process failed and said why */
	pid_t tool;
	/* lastpid.c: the host pid of a process born in a pid namespace of a
	 * user namespace the tree made, asked of kupdate (lp_ask) */
	_Atomic uint32_t lp_lock;   /* held by the process asking */
	_Atomic uint32_t lp_state;  /* enum lp_state */
	pid_t lp_pid;		    /* the pid wanted, in kupdate's namespace */
	int32_t lp_err;		    /* LP_FAILED: why */
	struct shared_proc procs[]; /* the tree's processes, then its helpers */
};

/* a process that exists only while the tree is built: the leader of a
 * process group whose real leader was dead at dump time */
struct helper {
	pid_t pid;
	struct rproc *parent;
};

/* a helper that takes the id of a session whose leader was dead at dump
 * and forks the roots that belong to it */
struct session_helper {
	pid_t sid;
};

/* the control groups below the root's (task/cgroups.c) */
struct rcgroups {
	struct CgroupEntry *img;
	char *base_fs; /* the directory the root is born in */
	int base_fd;
	int *fds;   /* per img->dirs */
	bool *made; /* made by this restore */
};

/* clone3's arguments */
struct clone_args_k {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size, cgroup;
};

struct rctx {
	const struct cr_restore_opts *opts;
	/* kupdate's own pidfd, for the tree's processes: below every fd they
	 * restore, moved above them by rst_prepare() */
	int tool_pidfd;
	int64_t t0; /* CLOCK_MONOTONIC at the start, for the steps' times */
	int dirfd;
	InventoryEntry *inv;
	PstreeEntry **pstree;
	size_t nr;
	struct rproc *procs;
	size_t nr_live;
	size_t nr_threads;
	struct rfiles files;
	struct rshm shm;
	struct helper *helpers;
	size_t nr_helpers;
	struct session_helper *sessions;
	size_t nr_sessions;
	struct shared *sh;
	size_t sh_len;
	uint64_t xcr0;
	/* namespaces.c: kupdate's own, while it is in the tree's */
	int ns_saved[7];
	int ns_entered;
	int ns_cwd;
	int ns_userns_fd; /* the tree's user namespace, each process enters it */
	struct ns_idmap ns_uidmap[NS_IDMAP_MAX], ns_gidmap[NS_IDMAP_MAX];
	size_t ns_nr_uidmap, ns_nr_gidmap;
	struct sk_listeners listeners; /* cr_restore_opts.listen_fds */
	struct cr_unix_link *links;    /* cr_restore_opts.links, their fds copied */
	size_t nr_links;
	struct rcgroups cg;
	/* born in the user namespace the tree made (userns.c): ids as it
	 * names them, host pids asked of kupdate (lp_ask) */
	bool ns_in_userns;
	struct tid_hold lp_hold; /* kupdate: the pid it set for lp_ask */
};

/* lastpid.c: ns_last_pid set below tid for a clone without set_tid, under
 * the lock of every kupdate, tid out of the boot's pid reservation
 * meanwhile; tid_done puts both back */
int tid_prepare(pid_t tid, struct tid_hold *h);
void tid_done(struct tid_hold *h);
/* lastpid.c: a process born in the tree's user namespace, which cannot
 * give a host pid to clone3's set_tid, asks kupdate to set ns_last_pid
 * below pid (lp_ask), clones, and tells it (lp_cloned); kupdate serves
 * while it waits for the tree (lp_serve) and lets go on a failure
 * (lp_abandon) */
int lp_ask(struct shared *sh, pid_t pid);
void lp_cloned(struct shared *sh);
void lp_serve(struct rctx *c);
void lp_abandon(struct rctx *c);
/* spin until *w is no longer val, ns at most: false if it still is (the
 * clones that follow a setting of ns_last_pid wait so, not woken late) */
bool lp_spin(_Atomic uint32_t *w, uint32_t val, int64_t ns);
/* lastpid.c, kupdate's side of a thread's making (restorer.h:
 * RST_TID_PREP): a stop of the blob before or after the clone (1: it was,
 * the thread let go on), and an event of the thread that missed its tid
 * (true: it was, let go on) */
struct user_regs_struct;
int lp_tid_trap(struct rproc *rp, pid_t tid, const struct user_regs_struct *r);

/* restore-follow.c: kupdate's side once the tree is created */
int restore_seize_all(struct rctx *c);
int restore_run_blobs(struct rctx *c);
int restore_finish(struct rctx *c);
/* where a restore's time goes (debug level): a step's end */
void restore_step_done(const struct rctx *c, const char *what);
bool lp_stray_event(struct rproc *rp, pid_t tid, int ti, int st);

/* restore-images.c: every image of the tree, loaded and checked against
 * the inventory, before anything is created */
int load_images(struct rctx *c);
void free_images(struct rctx *c);

/* restore-blob.c: the removed working directories made again (once for
 * the processes that shared one), rp->cwd_fd, before the tree is created;
 * kupdate's copies closed */
int make_gone_dirs(struct rctx *c);
void close_gone_dirs(struct rctx *c);
/* restore-blob.c: process rp (index idx) maps and fills the blob's
 * region; where to jump, its arguments and stack */
int rst_prepare(struct rctx *c, struct rproc *rp, int idx, uint64_t *entry, uint64_t *args_p,
		uint64_t *stack_p);
/* the first fd above the saved fd table of rp (the one it shares, if so):
 * what serves only the restore goes there */
int fdt_base(const struct rproc *rp);

#endif
