/* Dump side: the in-memory picture of a seized tree. */
#ifndef CR_DUMP_H
#define CR_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/user.h>

#include "cr.h"
#include "images/files.pb-c.h"
#include "images/mm.pb-c.h"
#include "images/pstree.pb-c.h"
#include "netlock.h"
#include "proc.h"
#include "sockdiag.h"

struct cr_thread {
	pid_t tid;
	bool seized;
	bool stopped;			   /* reported the stop we asked for */
	struct user_regs_struct orig_regs; /* as read */
	bool regs_valid;		   /* regs below hold the normalised state */
	struct user_regs_struct regs;	   /* normalised for the image */
	uint8_t *xsave;
	size_t xsave_len;
	uint64_t sigmask;
	uint64_t clear_child_tid, robust_list, robust_len;
	bool has_rseq;
	uint64_t rseq_ptr;
	uint32_t rseq_len, rseq_sig, rseq_flags;
	char comm[17];
	int restart_nr; /* syscall re-issued on resume, or -1 */
	/* task.c, signals.c */
	bool has_altstack;
	uint64_t altstack_sp, altstack_size;
	uint32_t altstack_flags;
	uint8_t sched_attr[56];
	uint32_t sched_attr_len;
	uint8_t affinity[128];
	uint32_t affinity_len;
	uint32_t pdeathsig;
	uint8_t (*pending)[128]; /* queued siginfo */
	int nr_pending;
	struct cr_creds *creds; /* creds.c: its own, NULL if the process's */
};

struct cr_shm_run {
	uint64_t offset, nr_pages;
	uint32_t crc;
};

/* a pipe object (pipes.c) */
struct cr_pipe {
	uint64_t id;
	uint32_t size;
	uint8_t *data;
	size_t len;
};

/* a shared memory object (shmem.c) */
struct cr_shm {
	uint32_t id;
	int kind; /* SHMEM_KIND__* */
	uint64_t dev, ino, size, nr_pages;
	uint64_t file_size; /* size is page aligned; this is the file's */
	uint32_t mode, uid, gid;
	char *name;
	uint32_t seals;
	struct cr_shm_run *runs;
	int nr_runs;
	/* a System V segment (SHMEM_KIND__SHMEM_SYSV) */
	int32_t sysv_id, sysv_key;
	uint32_t sysv_cuid, sysv_cgid;
	bool sysv_removed, sysv_locked;
	int64_t sysv_ctime;
};

struct cr_vma {
	struct smaps_vma s;  /* from smaps; s.path owned */
	int kind;	     /* VMA_KIND__* */
	const char *special; /* points into s.path for [xxx] names */
	uint64_t ino, file_size;
	int64_t mtime_ns;
	char *name; /* [anon:NAME] */
	uint32_t madv;
	uint32_t shmid;	   /* shared memory object (shmem.c) */
	bool open_rw;	   /* the mapped file was opened for writing */
	uint32_t ghost_id; /* a deleted file (ghost.c) */
	int ring_fd;	   /* VMA_PACKET_RING: the process's fd of the socket */
};

struct cr_pagerun {
	uint64_t vaddr, nr_pages;
	uint32_t crc;
	uint32_t file;	/* its data is in page file N (pages.c: mem_pages_name) */
	bool in_parent; /* unchanged since the --prev dump: no data here */
	bool cow;	/* its parent process's, shared copy-on-write: no data */
};

/* a run whose data this dump does not write */
static inline bool run_nodata(const struct cr_pagerun *r)
{
	return r->in_parent || r->cow;
}

struct cr_range {
	uint64_t start, end;
};

struct cr_fd {
	int fd;
	uint32_t file_id;
	bool cloexec;
	FileLock **locks; /* POSIX locks taken through it (owned by ctx->posix_locks) */
	size_t nr_locks;
};

/* an array of locks (locks.c) */
struct cr_lockset {
	FileLock **l;
	size_t n;
};

/* an unlinked open or mapped file, saved once (ghost.c) */
struct cr_ghost {
	uint32_t id;
	uint64_t dev, ino;
	uint64_t data; /* bytes of data saved */
	bool mapped;
};

/* a file descriptor in flight (SCM_RIGHTS) in a unix socket's queue,
 * received by kupdate when it peeked the queue (unix.c) and identified
 * once every process is dumped (files-dump.c: files_resolve_inflight) */
struct cr_inflight {
	struct UnixMsg *m; /* the queued message carrying it */
	size_t slot;	   /* its place among m->fds */
	int kfd;	   /* kupdate's fd of it, -1 once closed */
	pid_t pid;	   /* the process and fd of the socket whose queue holds it */
	int fd;
};

/* an open file description, shared by every fd that refers to it */
struct cr_file {
	uint32_t id;
	int kind; /* FILE_KIND__* */
	char *path;
	pid_t mnt_owner; /* the mount namespace path is seen in: cr_dump_ctx's */
	uint32_t flags;
	uint64_t pos;
	uint64_t dev, ino, size;
	uint32_t rdev;
	pid_t owner_pid; /* first holder, for kcmp */
	int owner_fd;
	uint64_t pipe_id;
	/* The state of one kind, each its own: set by its dump, put into
	 * files.img and freed by its row of the fd-kind table (files/fdkind.c);
	 * NULL for the other kinds (unix.c, tty.c rely on it). */
	struct UnixSk *usk; /* sockets: what unix.c / tcp.c read */
	struct InetSk *isk;
	struct PacketSk *psk;
	EventfdFile *efd; /* anonymous-inode kinds (eventfd.c, signalfd.c...) */
	SignalfdFile *sfd;
	TimerfdFile *tmr;
	EpollFile *ep;
	int *ep_where; /* for each target of ep: the fd of the process holding it */
	InotifyFile *ify;
	TtyFile *tty;	   /* a pseudo-terminal end (tty.c) */
	NsfsFile *nsf;	   /* a namespace file (nsfs.c) */
	uint32_t shmid;	   /* FILE_MEMFD: the shared memory object (shmem.c) */
	uint32_t ghost_id; /* an unlinked file (ghost.c) */
	bool fifo_removed; /* a FIFO whose path was unlinked (pipes.c) */
	uint32_t fifo_mode, fifo_uid, fifo_gid;
	FileLock **locks; /* flock and OFD locks of the description (locks.c) */
	size_t nr_locks;
	bool has_owner; /* F_SETOWN_EX / F_SETSIG of the description */
	uint32_t own_type, own_sig;
	int32_t own_pid;
	/* held by no process, only in flight in a unix socket's queue: its
	 * owner is kupdate (owner_fd its copy); via_* the socket whose queue
	 * holds it, for messages */
	bool inflight_only;
	pid_t via_pid;
	int via_fd;
};

/* seccomp.c: one filter, and the process's mode and chain (oldest first) */
struct cr_seccomp_filter {
	uint8_t *prog; /* struct sock_filter[len] */
	uint32_t len, flags;
};

struct cr_seccomp {
	uint32_t mode; /* 0 none, 1 strict, 2 filter */
	struct cr_seccomp_filter *filters;
	int nr_filters;
};

struct cr_sigaction {
	uint32_t sig;
	uint64_t handler, flags, restorer, mask;
};

struct cr_proc {
	pid_t pid, ppid, pgid, sid;
	int state; /* TASK_STATE__* */
	int exit_code, stop_sig;
	struct proc_stat stat;
	struct cr_proc *parent;
	struct cr_proc **children;
	int nr_children;

	struct cr_thread *threads;
	int nr_threads;
	/* pidns.c: how many pid namespaces below kupdate's it lives in, and
	 * each thread's ids in them, innermost first (pid_depth per thread) */
	int pid_depth;
	/* its children are born in the pid namespace of its child init of
	 * this pid (unshare --pid --fork) (pidns.c) */
	pid_t children_ns_of;
	uint64_t kids_ns_ino;
	int32_t *ns_ids;
	/* namespaces.c: those it made for itself and its descendants
	 * (CLONE_NEWUTS, CLONE_NEWIPC: a container's), its names in its own */
	unsigned made_ns;
	char *made_hostname, *made_domainname;
	struct MadeMount **made_mounts; /* CLONE_NEWNS: mntns.c */
	bool made_lo_up;		/* CLONE_NEWNET: its loopback was up (netns.c) */
	struct NetLink **made_links;	/* CLONE_NEWNET: its veth pairs (netlinks.c) */
	char *cgroup;			/* its control group below the root's (cgroups.c) */
	char *cgroup_ns_root;		/* CLONE_NEWCGROUP: its namespace's root, the same */
	/* CLONE_NEWUSER: its uid_map, gid_map and setgroups (userns.c) */
	char *made_uid_map, *made_gid_map, *made_setgroups;
	size_t nr_made_links;
	size_t nr_made_mounts;

	struct cr_vma *vmas;
	int nr_vmas;
	unsigned long brk;
	uint64_t *auxv;
	int nr_auxv; /* number of u64 words */
	uint8_t *vdso_image;
	size_t vdso_len;
	uint64_t vdso_start;

	struct cr_pagerun *runs;
	int nr_runs;
	uint64_t nr_pages;   /* pages whose data this dump writes (not in_parent) */
	uint64_t zero_pages; /* read, found to be zeros and left out (pages.c) */
	uint64_t cow_pages;  /* its parent's, shared copy-on-write (no data) */
	int nr_page_files;   /* written by that many threads, a file each */
	/* predump.c: pages present and unchanged since the --prev dump, which
	 * the parent images hold (sorted) */
	struct cr_range *inpar;
	int nr_inpar;
	int uffd_fd;	   /* the userfaultfd armed in the process, -1: none */
	uint64_t uffd_ino; /* its inode */

	int mem_fd;		/* /proc/PID/mem */
	int pidfd;		/* for pidfd_getfd, -1 until needed */
	uint64_t syscall_ip;	/* a syscall instruction in the task, for injection */
	uint64_t vdso_range[2]; /* [vdso] start, end */

	struct cr_fd *fds;
	int nr_fds;

	struct cr_sigaction sigacts[64];
	int nr_sigacts;

	char *exe_path, *cwd, *root;
	uint32_t exe_ghost_id; /* the executable was deleted (ghost.c) */
	bool cwd_deleted;      /* cwd was removed: cwd is where it was */
	uint32_t cwd_mode, cwd_uid, cwd_gid;
	uint64_t cwd_ino;
	bool share_fs; /* shares its fs struct with its parent (CLONE_FS) */
	/* shares its parent's fd table (CLONE_FILES): the nearest ancestor
	 * that does not, whose fds are dumped for both; NULL: its own table */
	struct cr_proc *fdt_owner;
	bool new_session; /* a root whose session's leader is dead */
	uint64_t exe_ino;
	int personality;

	/* task.c */
	uint32_t umask;
	uint64_t rlim[16][2];
	int nr_rlim;
	int oom_score_adj;
	bool child_subreaper;
	uint32_t dumpable;
	/* creds.c */
	struct cr_creds {
		uint32_t uid[4], gid[4]; /* real, effective, saved, fs */
		uint32_t *groups;
		int nr_groups;
		uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
		uint32_t securebits;
		bool nnp;
	} creds;
	struct cr_seccomp seccomp;
	/* signals.c: pending for the whole process */
	uint8_t (*shared_pending)[128];
	int nr_shared_pending;
	struct cr_timers *timers; /* timers.c: its own, once read */
};

/* an established TCP connection the dump has read: a copy of its socket,
 * held until the dump ends (tcp.c) */
struct dump_tcp_sk {
	int fd;
	pid_t pid;	/* whose fd ... */
	int tree_fd;	/* ... it is (for messages) */
	bool repair;	/* in repair mode */
	bool reuseaddr; /* SO_REUSEADDR, which leaving repair mode clears */
	bool read;	/* read: conn and acks hold what the peer is quoted */
	struct cr_conn conn;
	uint32_t acks[3]; /* what the peer may wait to have acknowledged (tcp.c) */
	int nr_acks;
};

/* a UDP socket whose zero-length datagrams the dump peeked (udp.c) */
struct dump_udp_sk {
	int fd;
	pid_t pid;
	int tree_fd;
	struct InetSk *s; /* as dumped */
};

/* the control groups below the root's (task/cgroups.c) */
struct cr_cgroups {
	char *base, *base_fs; /* the root's: in the hierarchy, and its directory */
	char *root_ctl;	      /* its subtree_control */
	struct CgroupDir **dirs;
	size_t nr_dirs;
	bool recorded; /* a process lives below the root's */
};

struct cr_dump_ctx {
	const struct cr_dump_opts *opts;
	int dirfd;
	struct cr_proc **procs; /* parents before children; procs[0] is the root */
	int nr_procs;
	uint64_t zero_pfn; /* pfn of the zero page, 0 if unknown */
	uint64_t huge_zero_pfn;
	int have_pagemap_scan; /* -1 unknown, 0 no, 1 yes */
	int track;	       /* DIRTY_TRACK__* used to arm the pre-dump, predump.c */
	int prev_dirfd;	       /* --prev: the parent image directory, or -1 */
	uint64_t *prev_uffd;   /* inodes of the userfaultfds the parent dump left */
	int nr_prev_uffd;
	int *held_uffd; /* our copies of them, closed once the tree is released */
	int nr_held_uffd;
	bool check_only; /* cr_dump_opts.check_only: look, write nothing */
	int64_t t_start, t_seized, t_released;
	unsigned nr_threads;
	uint64_t total_pages;
	uint64_t zero_pages; /* left out of the page files: zeros */
	uint64_t cow_pages;  /* shared with the parent process: saved once */
	/* open file descriptions of the tree, see files/files-dump.c */
	struct cr_file *files;
	int nr_files;
	unsigned next_file_id;
	int *file_order; /* indices of files by (dev, ino, kcmp order) */
	/* shared memory objects, see shmem.c */
	struct cr_shm *shm;
	int nr_shm;
	struct cr_pipe *pipes;
	int nr_pipes;
	struct cr_ghost *ghosts; /* ghost.c */
	int nr_ghosts;
	int64_t ghost_ns;		/* time spent saving them */
	struct cr_lockset *posix_locks; /* every fd's POSIX locks (locks.c) */
	int nr_posix_locks;
	/* sockets: sock_diag's view; established TCP connections locked and
	 * held (tcp.c: out of repair mode once read, back in just before the
	 * tree is killed) */
	struct sk_table sk;
	bool sk_collected;
	/* network namespaces made inside the tree whose sockets are in sk */
	uint64_t *merged_net;
	size_t nr_merged_net;
	pid_t merge_checked; /* the last process whose namespace was checked */
	struct cr_conn *locked;
	int nr_locked;
	struct made_lock {
		struct cr_conn c;
		pid_t pid; /* a process in the namespace a process of the tree made */
	} * locked_made;
	size_t nr_locked_made;
	struct netlock *netlock; /* the nftables context of the locking */
	struct dump_tcp_sk *tcp_sks;
	int nr_tcp_sks;
	/* fds in flight in unix sockets, and kupdate itself as the process
	 * that holds them while they are dumped (files-dump.c) */
	struct cr_inflight *inflight;
	int nr_inflight;
	struct cr_proc *self;
	pid_t via_pid; /* the in-flight file being dumped: whose socket holds it */
	int via_fd;
	struct dump_udp_sk *udp_sks;
	int nr_udp_sks;
	struct cr_ns *ns; /* its own namespaces (namespaces.c) */
	/* "/proc/ROOT/root" when the tree has its own mount namespace: the
	 * paths the dump looks at are its paths (dump_path) */
	char root_prefix[64];
	/* the maker of the mount namespace of the process being dumped, when
	 * it is not the tree's (mntns.c): root_prefix is its /proc/PID/root */
	pid_t mnt_owner;
	struct cr_cgroups cg;
};

/* path, as the tree sees it, for kupdate to look at (in buf if it has to
 * go through the tree's root) */
static inline const char *dump_path(const struct cr_dump_ctx *ctx, const char *path, char *buf,
				    size_t len)
{
	if (!ctx->root_prefix[0] || path[0] != '/')
		return path;
	snprintf(buf, len, "%s%s", ctx->root_prefix, path);
	return buf;
}

struct cr_proc *dump_find_proc(struct cr_dump_ctx *ctx, pid_t pid);
/* a process outside the tree that lives in namespace st (of kind ns:
 * "pid", "net"...), or 0 */
pid_t dump_ns_outsider(struct cr_dump_ctx *ctx, const char *ns, const struct stat *st);

/* seize.c */
int seize_tree(struct cr_dump_ctx *ctx);
/* Let the tree go: resume it as it was (kill=false) or kill it. */
void release_tree(struct cr_dump_ctx *ctx, bool kill);

/* pstree.c */
int check_tree(struct cr_dump_ctx *ctx);
int write_pstree(struct cr_dump_ctx *ctx);

#endif
