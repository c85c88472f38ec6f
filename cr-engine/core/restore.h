/* Restore side: the images of one tree, loaded and validated, and what the
 * restore of each process builds for the restorer blob. */
#ifndef CR_RESTORE_H
#define CR_RESTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cr.h"
#include "images/core.pb-c.h"
#include "images/files.pb-c.h"
#include "images/inventory.pb-c.h"
#include "images/mm.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "images/pstree.pb-c.h"
#include "blob-builder.h"
#include "regs.h"
#include "restorer/restorer.h"
#include "shmem.h"
#include "signals.h"
#include "timers.h"

/* A private anonymous mapping whose pages a process shares copy-on-write
 * with its parent or a child (premap.c) is made and filled before
 * the process forks its children, then moved into place by the restorer. */
struct rpremap {
	bool want;
	int pvma;    /* >= 0: it inherits its pages from the parent's mapping pvma */
	uint64_t at; /* where it was made (0: not yet) */
};

/* memory of one process (mm-load.c) */
struct rmm {
	MmCore *core;
	VmaEntry **vmas;
	size_t nr_vmas;
	PagemapHead *head;
	PagemapEntry **runs;
	size_t nr_runs;
	struct rpremap *premap; /* per mapping */
};

/* threads and task state of one process (regs.c) */

/* ns_last_pid and the pid reservation, held for a thread's clone */
struct tid_hold {
	bool held;
	int fd;
	char *reserve;
	long last; /* ns_last_pid before, put back after (above the saved pids) */
};

/* the namespaces made for a process in the user namespace it made, before
 * its birth (userns.c): fds, -1 */
struct usermade {
	int user;
	int fd[5]; /* mnt (unused), uts, ipc, net, cgroup */
	/* the init of a pid namespace its user namespace owns, born there
	 * (userns_clone_init): its namespaces joined before its birth, its
	 * mounts built but for those it makes itself (mntns.c: mnt_done,
	 * mnt_late, per mount; mnt_inside: made by a child of its own
	 * from inside the user namespace, not locked) */
	bool born;
	bool *mnt_done, *mnt_late, *mnt_inside;
};

struct rproc {
	PstreeEntry *pe;
	pid_t pid;
	struct rproc *parent;
	struct rproc **children;
	int nr_children;
	bool zombie;
	/* a root forked from the session of this process (its leader) */
	struct rproc *launcher;

	struct rcore core;
	struct rmm mm;
	FdEntry **fds;
	size_t nr_fds;
	struct rsignals sig;
	struct rtimers timers;
	int cwd_fd; /* its removed cwd, made again (restore-blob.c), or -1 */
	int cg_fd;  /* the control group it is born in (cgroups.c), or -1 */
	struct usermade um;
	/* an fd table shared (CLONE_FILES): fdt is the process that restores
	 * it, for the others; fdt_shared, for it.  Their rst_prepare()s run one
	 * at a time, fdt's last: each waits for fdt_prev's */
	struct rproc *fdt;
	struct rproc *fdt_prev;
	bool fdt_shared;

	/* filled while restoring */
	uint64_t blob_start, blob_len, args_addr, syscall_ip;
	struct fill_helper *helper; /* filling part of a mapping (pages.c) */
	struct tid_hold tid_hold;   /* a thread's tid being taken (lastpid.c) */
	pid_t tid_last;		    /* the last one asked for */
	pid_t tid_stray;	    /* a thread made with another tid, on its way out */
	int tid_last_idx;	    /* tid_last's index among its threads */
	uint64_t helper_bad_addr;   /* where its data did not match its sum */
	int parked;
	bool seized;
};

/* regs.c */
int core_set_thread(pid_t pid, const ThreadCore *tc);

#endif
