/* Reading /proc: stat, smaps, task and children lists. */
#ifndef CR_PROC_H
#define CR_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cr-util.h"

struct proc_stat {
	pid_t pid;
	char comm[64];
	char state;
	pid_t ppid, pgid, sid;
	unsigned long flags;
	long num_threads;
	unsigned long start_code, end_code, start_stack;
	unsigned long start_data, end_data, start_brk;
	unsigned long arg_start, arg_end, env_start, env_end;
	int exit_code;
	unsigned long long starttime;
};

int parse_stat(pid_t pid, pid_t tid, struct proc_stat *st);

/* A file of kupdate's own /proc (rel: "sys/kernel/ns_last_pid"), even
 * while the restore works inside a tree's mount namespace, whose /proc may
 * be read-only (ProtectKernelTunables=) or a subset (ProcSubset=pid):
 * proc_pin(true) keeps a descriptor of it before the namespace is
 * entered, proc_pin(false) lets it go.  A /proc/sys file still answers
 * for the namespaces of the caller (its IPC namespace's shm_next_id). */
int proc_pin(bool pin);
int proc_open(const char *rel, int flags);
/* the caller's pid as the /proc of proc_open names it; -1 */
pid_t proc_self_pid(void);
/* the pinned descriptor (-1: none), and the same moved to fd (a restoring
 * process keeps it above the fds it restores) */
int proc_pinned(void);
void proc_repin(int fd);
/* run fn(arg) in a thread that joined namespace name ("uts", "net") of
 * pid; 0, or a negative errno (fn not run) */
int proc_run_in_ns(pid_t pid, const char *name, void *(*fn)(void *), void *arg);

/* VmFlags bits we care about */
enum {
	VMF_SHARED = 1 << 0,
	VMF_MAYWRITE = 1 << 1,
	VMF_GROWSDOWN = 1 << 2,
	VMF_LOCKED = 1 << 3,
	VMF_IO = 1 << 4,
	VMF_PFNMAP = 1 << 5,
	VMF_DONTFORK = 1 << 6,
	VMF_DONTDUMP = 1 << 7,
	VMF_HUGEPAGE = 1 << 8,
	VMF_NOHUGEPAGE = 1 << 9,
	VMF_MERGEABLE = 1 << 10,
	VMF_WIPEONFORK = 1 << 11,
	VMF_NORESERVE = 1 << 12,
	VMF_MAYEXEC = 1 << 13,
	VMF_SEQ_READ = 1 << 14,
	VMF_RAND_READ = 1 << 15,
	VMF_DROPPABLE = 1 << 16,
};

struct smaps_vma {
	unsigned long start, end, pgoff;
	unsigned prot; /* PROT_* */
	bool shared;   /* 's' in the perms column */
	unsigned dev_major, dev_minor;
	unsigned long ino;
	char *path; /* malloc'd, "" for anonymous */
	unsigned long rss_kb, swap_kb, anon_kb;
	unsigned vmflags;
};

/* Parse /proc/PID/smaps.  *out is a malloc'd array the caller frees (and
 * each path). */
int parse_smaps(pid_t pid, struct smaps_vma **out, int *nr);
int parse_maps(pid_t pid, struct smaps_vma **out, int *nr);
void free_smaps(struct smaps_vma *v, int nr);

/* List numeric entries of /proc/PID/task.  Returns count or -errno. */
int list_tasks(pid_t pid, pid_t **tids);
/* Children of every thread of pid (needs CONFIG_PROC_CHILDREN; falls back
 * to a scan of /proc). */
int list_children(pid_t pid, pid_t **kids);

/* stat of namespace name ("mnt", "time"...) of pid, or of the caller's
 * with pid 0: 0 or -errno */
struct stat;
int ns_stat(pid_t pid, const char *name, struct stat *st);
/* pids a and b (0: kupdate) share their namespace name; true where the
 * kernel has no such namespace */
bool ns_same(pid_t a, pid_t b, const char *name);

/* a line of a user namespace's uid_map or gid_map */
struct ns_idmap {
	uint32_t inside, outside, count;
};
#define NS_IDMAP_MAX 16
/* "inside outside count;..." into map (0, or -EINVAL) */
int ns_parse_idmap(const char *text, struct ns_idmap *map, size_t *nr);
/* /proc/PID/NAME (uid_map, gid_map, setgroups) with its blanks made one
 * space and its lines ";"; NULL if unreadable */
char *ns_read_squeezed(pid_t pid, const char *name);
/* pid's uid_map, gid_map and setgroups so (each malloc'd); 0, or -EIO
 * logged, naming whose (what: "its user namespace"...) */
int ns_read_idmaps(pid_t pid, const char *what, char **uid, char **gid, char **setgroups);

/* the mount table (mount_table_read): public, in cr-util.h */

#endif
