/* kupdate checkpoint/restore engine: public API.
 *
 * The engine knows process trees and image directories; it knows nothing
 * of systemd, kexec or update cycles (the orchestrator does). */
#ifndef CR_H
#define CR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CR_TOOL_VERSION "0.1.0"

/* A unix socket connected to something outside the tree (journald's
 * stdout stream, say): the dump asks the caller whether it may be replaced
 * at restore by a new connection of the caller's making. */
typedef bool (*cr_external_unix_fn)(const char *peer_name, void *arg);
/* At restore, in the restoring process: a new fd for such a socket. */
typedef int (*cr_open_external_fn)(const char *peer_name, const char *comm, void *arg);
/* A unix stream or seqpacket socket connected to a socket outside the tree
 * (ino: its inode, peer: the peer's): the dump asks the caller whether the
 * peer's tree is dumped with this one, both stopped before either's queues
 * are read (a client unit of a database unit's).  Then the connection is
 * kept as a link: each end's queue saved in its own images, the two ends
 * made again by cr_unix_link_pair and given to each tree's restore
 * (cr_restore_opts.links). */
typedef bool (*cr_linked_unix_fn)(uint32_t ino, uint32_t peer, void *arg);

/* Progress of a dump, reported after each process of the tree is written
 * (and not for a check-only dump): a caller on a terminal shows it. */
struct cr_dump_progress {
	unsigned processes_done, processes;
	uint64_t bytes; /* page data written so far */
};

struct cr_dump_opts {
	pid_t root;	    /* root of the tree to dump */
	const pid_t *roots; /* or several roots (a service's cgroup), the main one first */
	int nr_roots;
	const pid_t *members; /* or every process of a group (a service's cgroup): the
				 * roots are found, members[0]'s tree first; nothing
				 * outside the group may be in their trees */
	int nr_members;
	const char *imgdir;   /* empty or new directory for the images */
	bool leave_running;   /* resume the tree after the dump instead of killing it */
	const char *cycle_id; /* recorded in the inventory (orchestrator) */
	bool no_page_crc;     /* skip the crc32c of page data */
	bool no_net_lock;     /* the caller locks the network itself */
	bool check_only;      /* look at everything, write nothing, resume the tree */
	bool no_rto_revert;   /* a tree that goes on: no ICMP to its peers (tcp.c) */
	/* the tree may live in mount, UTS and IPC namespaces of its own; its
	 * restore needs a process in equivalent ones (cr_restore_opts.ns_pid) */
	bool own_namespaces;
	uint64_t ghost_limit; /* most data of an unlinked open or mapped file saved; 0: 1 MiB
			       * for a file only open, 256 MiB for one mapped or run */
	/* pre_dump: save only memory, copied after the tree runs again, and
	 * track what it writes from then on; prev_dir: an earlier pre-dump,
	 * whose unchanged pages this dump refers to instead of copying them */
	bool pre_dump;
	const char *prev_dir;
	cr_external_unix_fn external_unix;
	cr_linked_unix_fn linked_unix;
	/* called once every process is seized, before anything runs in them
	 * (the orchestrator thaws the frozen cgroup there: code injected into
	 * a task of a frozen cgroup would not run) */
	int (*seized)(void *arg);
	void *cb_arg;
	void (*progress)(const struct cr_dump_progress *p, void *arg);
	void *progress_arg;
};

struct cr_dump_stats {
	uint64_t pages;	     /* pages written */
	uint64_t zero_pages; /* pages of zeros found and left out */
	/* pages a child shares copy-on-write with its parent: saved once */
	uint64_t cow_pages;
	uint64_t frozen_ns; /* from seizing the tree to its release */
	uint64_t total_ns;
	unsigned processes, threads;
	/* deleted files saved (or, check-only, to save) with their data: open
	 * and unlinked, or mapped (a library apt replaced), each once */
	unsigned deleted_files, deleted_mapped;
	uint64_t deleted_bytes, deleted_mapped_bytes; /* their data, holes left out */
	uint64_t deleted_ns;			      /* the time saving them took */
	/* the namespaces the tree has of its own (CLONE_NEW* flags), kept
	 * with cr_dump_opts.own_namespaces */
	unsigned namespaces;
	/* containers: processes of the tree that are the init (pid 1) of a pid
	 * namespace of their own, below their parent's */
	unsigned containers;
};

/* The namespaces of process pid that are not the caller's (CLONE_NEW*
 * flags: mount, UTS, IPC, network, pid, user, cgroup), and which of them
 * a dump with own_namespaces keeps (the rest it refuses).  0 or -errno. */
int cr_process_namespaces(pid_t pid, unsigned *own, unsigned *kept);
/* their short names ("mnt uts"), space-separated, into buf */
void cr_namespace_names(unsigned flags, char *buf, size_t len);

/* Checkpoint the tree.  On failure the tree is left running as it was. */
int cr_dump(const struct cr_dump_opts *o, struct cr_dump_stats *st);

/* The same in two steps, for a caller that dumps several trees and kills
 * them only once all of them are safely dumped: cr_dump_begin leaves the
 * tree stopped (seized, its TCP connections locked, out of repair mode
 * once read, so that a caller killed meanwhile leaves them usable);
 * cr_dump_end kills it (its connections back in repair mode just before:
 * no FIN, no RST leaves) or resumes it as it was.
 * On failure cr_dump_begin has resumed the tree itself and *s is NULL. */
struct cr_dump_session;
int cr_dump_begin(const struct cr_dump_opts *o, struct cr_dump_stats *st,
		  struct cr_dump_session **s);
void cr_dump_end(struct cr_dump_session *s, bool kill);

/* An operator's interruption (SIGINT, SIGTERM): the caller's signal
 * handler calls cr_request_stop(sig) (async-signal-safe), and the dumps in
 * progress stop at their next step (a process, 512 KiB of its pages) and
 * fail with -EINTR as a failure there would: their trees run on as they
 * were, their connections flow, no image is left.  cr_stop_requested():
 * the signal, or 0. */
void cr_request_stop(int sig);
int cr_stop_requested(void);

/* Can a pre-dump on this kernel track the pages written after it with
 * asynchronous userfaultfd write-protection (6.7+), where it has no
 * soft-dirty bits?  0, or a negative errno. */
int cr_uffd_wp_async(void);

/* pid is born into the cgroup v2 directory open as fd */
struct cr_cgroup_place {
	pid_t pid;
	int fd;
};

struct cr_restore_opts {
	const char *imgdir;
	bool detach;	      /* return once the tree runs; the caller is its parent */
	const char *pidfile;  /* receives the root pid */
	bool no_page_verify;  /* skip the crc32c check of page data */
	bool no_net_unlock;   /* the caller lifts the network lock itself */
	bool no_rto_revert;   /* no ICMP to cut the peers' retransmission timeout (tcp.c) */
	const char *cycle_id; /* if set, the images must have been dumped for it */
	/* a process living in namespaces equivalent to those the tree had of
	 * its own (task/namespaces.c): the tree is restored into them */
	pid_t ns_pid;
	cr_open_external_fn open_external;
	void *cb_arg;
	/* listening sockets a service manager made for the tree's unit in this
	 * boot (socket activation: systemd's LISTEN_FDS): a listener of the
	 * images bound to the same address is that one, not a new one that
	 * could not bind it */
	const int *listen_fds;
	size_t nr_listen_fds;
	/* processes born into another control group than their parent's
	 * (clone3 CLONE_INTO_CGROUP): a login session's inside sshd's tree */
	const struct cr_cgroup_place *cgroups;
	size_t nr_cgroups;
	/* this tree's ends of its links (cr_linked_unix_fn), made by
	 * cr_unix_link_pair: copied, the caller closes its own */
	const struct cr_unix_link *links;
	size_t nr_links;
};

/* One end of a link between two trees (cr_linked_unix_fn): the socket's
 * inode at the dump, its peer's, and at restore its new fd. */
struct cr_unix_link {
	uint32_t ino, peer;
	int fd;
};
/* The links an image directory holds (fd -1 each): 0 or -errno. */
int cr_images_links(const char *imgdir, struct cr_unix_link **out, size_t *nr);
/* The connection of link ino (in imgdir) to peer (in peer_dir) made
 * again: *fd its end, *peer_fd the peer's, each with its own queue, name
 * and options as they were.  0 or -errno, said. */
int cr_unix_link_pair(const char *imgdir, uint32_t ino, const char *peer_dir, uint32_t peer,
		      int *fd, int *peer_fd);
/* The unix sockets that the processes pids hold and that are connected to
 * a peer (cr_unix_link, fd -1): who is linked to whom before a freeze.
 * Sockets of another network namespace than the caller's are left out.
 * Appended to *out (malloc'd), *nr grown: 0 or -errno. */
int cr_unix_connected(const pid_t *pids, size_t n, struct cr_unix_link **out, size_t *nr);

/* Recreate the tree.  With detach, returns 0 once it runs; otherwise
 * waits for the root and stores its wait status in *root_status. */
int cr_restore(const struct cr_restore_opts *o, pid_t *root, int *root_status);

/* The established TCP connections of an image directory, as the network
 * lock sees them; and the lock itself, for a caller that must put it in
 * place before the tree is restored (in early boot after a kexec). */
struct cr_conn {
	int family;
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;
};
int cr_images_connections(const char *imgdir, struct cr_conn **out, size_t *nr);
/* every pid and tid of an image directory, and the ids of the process
 * groups and sessions it rebuilds (cr_group_ids) */
int cr_images_ids(const char *imgdir, pid_t **out, size_t *nr);
/* the ids a process's group and session add to those it saves: its pgid
 * and sid when another process leads them (0 to 2 written to out) */
int cr_group_ids(pid_t pid, pid_t pgid, pid_t sid, pid_t out[2]);
int cr_net_lock(const struct cr_conn *c, size_t nr, bool lock);
/* remove the network lock with everything it holds: 0, or -EIO if there
 * was none to remove */
int cr_net_unlock_all(void);
/* The unlocks of this process leave the lock's table in place, even empty
 * (by default the last one removes it at exit): for the boot's restores,
 * whose kupdate-finish removes it after all of them. */
void cr_net_lock_keep_table(void);

/* Running processes, as the engine reads them (its caller does not parse
 * /proc).  cr_process_start: when pid started, in clock ticks after boot
 * (sysconf(_SC_CLK_TCK)), as /proc/PID/stat says it: a pid used again
 * since has another.  0 or -errno. */
int cr_process_start(pid_t pid, unsigned long long *ticks);
/* its parent's pid (0 for the init of its pid namespace): 0 or -errno */
int cr_process_parent(pid_t pid, pid_t *ppid);
/* The ids a dump of process pid would save, as cr_images_ids lists them
 * from its images: every thread id, and its process group's and session's
 * where another process leads them (cr_group_ids).  Appended to the
 * malloc'd array *ids, *nr grown: 0; -ENOMEM; another -errno, nothing
 * appended, if the process is gone. */
int cr_process_ids(pid_t pid, pid_t **ids, size_t *nr);

/* After a dump killed midway (SIGKILL, OOM: its tracer gone, the tree runs
 * on): the TCP sockets of process pid, and with tree those of every process
 * below it, taken out of repair mode (through pidfd_getfd) and their
 * connections removed from the network lock, so that they flow again.
 * What was done is added to *c. */
struct cr_tcp_release {
	unsigned processes; /* of the tree, found running */
	unsigned repaired;  /* sockets taken out of repair mode */
	unsigned unlocked;  /* connections removed from the network lock */
};
void cr_tcp_release(pid_t pid, bool tree, struct cr_tcp_release *c);

/* Load and validate every image of a directory as a restore would, without
 * touching anything else: 0, or the restore's first error (logged). */
int cr_images_check(const char *imgdir);

/* Decode every image of a directory, as text or JSON. */
int cr_show(const char *imgdir, bool json, FILE *out);

#endif
