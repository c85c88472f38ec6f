/* What the parts of crrun share: its options, its work directory, the
 * messages it prints and the few helpers of crrun.c that the others use.
 *
 * crrun.c holds the run itself (the test, the dump, the restore, the
 * checks around them and the options); crrun-damage.c what the runner does
 * to the dumped state between the dump and the restore (damaged images,
 * the System V segments a kexec takes away); crrun-net.c the network side
 * (a namespace of our own, the peer outside the tree); crrun-procs.c the
 * processes of the tree as /proc shows them.
 */
#ifndef CRRUN_H
#define CRRUN_H

#include <stdbool.h>
#include <sys/types.h>

struct opts {
	const char *kupdate;
	int iterations;
	bool leave_running;
	bool restore_running;	  /* restore the leave-running images while the tree runs */
	const char *running_fail; /* ... and the failure expected of it (default: pid in use) */
	bool churn;		  /* the tree's processes come and go: only the root is compared */
	bool host_mount_late; /* --own-ns: a host mount the holder's namespace is made without */
	long max_image_kb;
	const char *expect_images; /* PATTERN=N: N image files match PATTERN */
	int timeout;
	const char *expect_dump_fail;
	const char *expect_restore_fail;
	bool expect_dump_killed;
	bool keep;
	const char *corrupt; /* truncate:PREFIX or flip:PREFIX */
	bool netns;	     /* run everything in a new network namespace */
	const char *peer;    /* a program outside the tree, in a namespace of its own */
	char *peer_args[8];
	int n_peer_args;
	bool peer_local;	      /* the peer shares our namespace (loopback) */
	bool check;		      /* dump --check: the tree must stay as it was */
	const char *extra_roots_file; /* the test names more roots of its tree here */
	/* the test names here the root of another tree, connected to its own by
	 * unix sockets: dumped apart with it (--linked-unix), restored apart
	 * (--linked), in turn first and second */
	const char *linked_root_file;
	char *restore_extra[8];
	int n_restore_extra;
	char **dump_extra;
	int n_dump_extra;
	int pause_ms; /* --pause-ms: the tree stays checkpointed this long */
	/* after the dump, the System V segments the tree had attached are
	 * removed, as a kexec would (--drop-sysvshm), and their ids given to
	 * segments of ours (--squat-sysvshm) */
	bool drop_sysvshm, squat_sysvshm;
	/* --rmdirs-file NAME: the directories the test listed there (parents
	 * first) are removed after the dump, as a new boot has none of them
	 * (its control groups) */
	const char *rmdirs_file;
	long kupdate_nofile; /* --kupdate-nofile: kupdate runs with this RLIMIT_NOFILE */
	int pre_dumps;
	bool no_prev;
	int win_probes; /* --win-probes: window probes each restore sends, at least */
	bool one_way;	/* --one-way: the test sends its peer nothing */
	int rto_revert; /* --rto-revert: ICMP errors the peer receives a restore, at least (-1: unchecked; 0: none) */
	const char *skip_if;
	bool own_ns;		   /* --own-ns: crrun-ns.c */
	bool ns_holder_differs;	   /* --ns-holder-differs */
	bool ns_unasked;	   /* --ns-unasked: no dump --own-namespaces */
	bool own_userns;	   /* --own-userns: a user namespace too */
	bool own_netns;		   /* --own-netns: a network namespace too, its lo up */
	bool private_dev;	   /* --private-dev: its own /dev (a tmpfs with 3 nodes) */
	int activate_port;	   /* --activate-tcp PORT: a listener passed to each restore */
	const char *activate_unix; /* --activate-unix NAME: one at $CRT_DIR/NAME */
	bool fork_storm;	   /* --fork-storm: a process forks all through each restore */
};

extern struct opts o;
/* the test's scratch directory ($CRT_DIR), which holds the images too */
extern char workdir[256];

struct proc_info {
	pid_t pid, ppid;
	char state; /* as in /proc/PID/stat */
};

/* crrun-procs.c: the processes of the tree rooted at root (up to max, all
 * threads' children); pid lives (not a zombie); the tree killed; our
 * children reaped, and killed first with their trees at the end of a run;
 * pid waited for, timeout seconds at most (-1: not ended); every thread of
 * pid runs on, not traced nor stopped (-1: why says) */
int read_ppid(pid_t pid, pid_t *ppid, char *state);
int collect_tree(pid_t root, struct proc_info *out, int max);
bool alive(pid_t pid);
void kill_tree(pid_t root);
void reap_all(void);
void kill_leftovers(void);
int wait_exit(pid_t pid, int timeout, int *status);
int tracer_of(pid_t pid, int tid);
int runs_free(pid_t pid, char *why, size_t wl);

/* crrun.c */
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double now(void);
char *slurp(const char *path);
void show_file(const char *title, const char *path);

/* crrun-damage.c */
int corrupt_images(const char *img, const char *prev);
void collect_sysvshm(const struct proc_info *procs, int n);
void remove_our_shm(void);
int drop_sysvshm(void);
int rmdirs_listed(void);
int check_no_tree_shm(void);

/* crrun-net.c: peer_pid is the peer's pid, 0 when there is none (or it
 * died); run_ip runs a shell command (printf format), 0 if it succeeded */
extern pid_t peer_pid;
int run_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int start_peer(void);
long peer_progress(void);
int wait_peer_progress(long want, int secs, const char *when);
int stop_peer(void);
int enter_netns(void);
long net_counter(pid_t pid, const char *file, const char *section, const char *name);
long net_counter6(pid_t pid, const char *name);
long tcpext_counter(const char *name);
long long peer_acked(long long *written);
void show_net_state(pid_t root);
/* the peer namespace's ICMP counters that --rto-revert checks, and the
 * check after a restore (or a dump that leaves the tree running) */
enum { IC_DEST_UNREACH, IC_ERRORS, IC_CSUM_ERRORS, IC_OUT_OF_WINDOW, IC_LOCKED, IC_ACKED, IC_N };
void icmp_counters(long long v[IC_N]);
int check_rto_revert(const long long before[IC_N], double t_restored, pid_t root);
/* the listeners a new boot's service manager would hold for the test's
 * addresses (--activate-tcp, --activate-unix), in pass_fds for the next
 * restore, their inodes in $CRT_DIR/passed; 0 or -1 */
extern int pass_fds[2], n_pass;
int activate(void);

/* crrun-ns.c: the test's own namespaces and the holders restores go into */
extern pid_t ns_holder;
int ns_setup(bool differs);
pid_t ns_fork(bool differs);
int ns_holder_start(void);
int host_late_mount(void);
int host_late_before_holder(void);
void host_late_umount(void);
void ns_holder_stop(void);
int ns_check_restored(pid_t root);

#endif
