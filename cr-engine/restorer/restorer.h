/* The interface between kupdate and the restorer blob.
 *
 * The blob is freestanding position-independent code (no libc) that a
 * restoring process jumps into once its tree, sessions and file
 * descriptors are in place.  It replaces the address space with the saved
 * one, creates the threads with their tids, and parks every thread on an
 * int3; kupdate, tracing the process, then sets each thread's registers,
 * unmaps the blob with an injected munmap and detaches.
 *
 * Everything here has a fixed layout; references are offsets from the
 * start of struct rst_args.
 */
#ifndef CR_RESTORER_H
#define CR_RESTORER_H

#include <stdint.h>

#define RST_MAGIC   0x4b55504452535452ULL
#define RST_VERSION 6

#define RST_STACK_SIZE (64 * 1024)
/* a huge page: premapped mappings keep their offset in one (restorer.c) */
#define RST_HUGE      (2UL << 20)
#define RST_MAX_MOVES 4

/* offset in the blob of a syscall instruction (see rst_entry) */
#define RST_SYSCALL_OFFSET 8
/* Filling a mapping with a helper (args.fill_helper): the blob stops on
 * the int3 at RST_HELPER_START_OFFSET with %rdi = the first run kupdate is
 * to fill, %rsi = the byte where its share of that run begins, %rdx = the
 * run after the last; kupdate fills that share from outside
 * (process_vm_writev) while the blob fills the rest, checks the crc of each
 * whole run of its share, and when the blob stops on the int3 at
 * RST_HELPER_WAIT_OFFSET sets %rax to the crc32c of its part of the first
 * run (0 when %rsi was 0), or a negative errno. */
#define RST_HELPER_START_OFFSET 16
#define RST_HELPER_WAIT_OFFSET	24
/* A thread of a process that entered its user namespace (args.userns_fd)
 * or was born there (args.born_in_userns): it cannot be given its tid in
 * kupdate's pid namespace with set_tid (that needs privileges in the
 * initial user namespace).  The blob stops on the int3 at
 * RST_TID_PREP_OFFSET with %rdi = that tid: kupdate takes the tid lock,
 * frees the tid of the boot's pid reservation and sets ns_last_pid below
 * it; the blob clones the thread with set_tid holding its ids in the pid
 * namespaces below (none at the top) and stops on the int3 at
 * RST_TID_DONE_OFFSET with %rdi = what clone returned: kupdate puts the
 * reservation back, lets the lock go, and sets %rax to 1 if the thread has
 * its tid there, 0 if something forked in between took it (that thread
 * goes, and the blob tries again). */
#define RST_TID_PREP_OFFSET 32
#define RST_TID_DONE_OFFSET 40

enum {
	RST_MADV_DONTFORK = 1 << 0,
	RST_MADV_DONTDUMP = 1 << 1,
	RST_MADV_HUGEPAGE = 1 << 2,
	RST_MADV_NOHUGEPAGE = 1 << 3,
	RST_MADV_MERGEABLE = 1 << 4,
	RST_MADV_WIPEONFORK = 1 << 5,
	RST_MADV_SEQUENTIAL = 1 << 6,
	RST_MADV_RANDOM = 1 << 7,
};

enum {
	RST_VMA_LOCKED = 1 << 0,
	RST_VMA_SYSV_ATTACH = 1 << 1, /* shmat(shmid) here, all of the segment */
	RST_VMA_SYSV_PART = 1 << 2,   /* the rest of the attach before: mapped by it */
	RST_VMA_SYSV_RDONLY = 1 << 3, /* attached SHM_RDONLY */
	/* made and filled before the process forked its children, which
	 * share its pages copy-on-write (mem/premap.c), at premap:
	 * moved into place, not mapped */
	RST_VMA_PREMAP = 1 << 4,
	/* a piece of a packet socket's ring (fd): the ring mapped whole
	 * (ring_len), the piece at pgoff moved into place, the rest dropped */
	RST_VMA_RING = 1 << 5,
};

struct rst_vma {
	uint64_t start, end, pgoff;
	uint32_t prot;	     /* final PROT_* */
	uint32_t mmap_flags; /* MAP_PRIVATE/SHARED|ANONYMOUS|GROWSDOWN|NORESERVE */
	int32_t fd;	     /* -1: anonymous */
	uint32_t madv;	     /* RST_MADV_* */
	uint32_t name_off;   /* NUL-terminated anon name, 0: none */
	uint32_t flags;	     /* RST_VMA_* */
	uint32_t first_run, nr_runs;
	uint32_t src_off, src_len; /* contents copied from the arguments */
	int32_t shmid;		   /* RST_VMA_SYSV_*: the System V segment */
	uint32_t pad;
	uint64_t premap;   /* RST_VMA_PREMAP: where it is now */
	uint64_t ring_len; /* RST_VMA_RING */
};

struct rst_run {
	uint64_t vaddr, nr_pages, file_off;
	uint32_t crc;
	int32_t fd;	/* the page image holding the data (layers: mem/layers.c) */
	uint32_t flags; /* RST_RUN_* */
	uint32_t pad;
};
#define RST_RUN_NOCRC 1 /* part of a run of an older layer: its crc covers more */

struct rst_creds {
	uint32_t uid[4], gid[4]; /* real, effective, saved, fs */
	uint32_t nr_groups, groups_off;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	uint32_t securebits, nnp;
	uint32_t present, dumpable;
};

/* ids of a thread in each pid namespace of its line: a container's */
#define RST_PID_LEVELS 8

struct rst_thread {
	int32_t tid;	  /* as kupdate sees it */
	int32_t self_tid; /* as it sees itself (its pid namespace's) */
	/* clone3's set_tid: its ids, its own pid namespace first, kupdate's last */
	uint32_t nr_set_tid;
	int32_t has_rseq;
	int32_t set_tid[RST_PID_LEVELS];
	uint64_t stack_top;
	uint64_t clear_child_tid;
	uint64_t robust_list, robust_len;
	uint64_t rseq_ptr;
	uint32_t rseq_len, rseq_sig;
	char comm[16];
	uint64_t altstack_sp, altstack_size;
	uint32_t altstack_flags, has_altstack;
	uint8_t sched_attr[56];
	uint32_t sched_attr_len;
	uint32_t affinity_len;
	uint8_t affinity[128];
	uint32_t pdeathsig;
	/* made through ns_last_pid: 0 until kupdate said whether it has its
	 * tid in every namespace (1) or not (2: it goes) */
	int32_t tid_verdict;
	uint32_t nr_pending, pending_off; /* 128-byte siginfos */
	struct rst_creds creds;		  /* its own, if present; else the process's */
};

struct rst_timer {
	int32_t id, clock, notify, signo, tid;
	int32_t overrun;	  /* timer_getoverrun(): of the last signal delivered */
	int32_t sig_pending, pad; /* its signal was queued: queue it again */
	uint64_t sival, value_ns, interval_ns;
};

/* seccomp (seccomp.c): mode, and the filters oldest first */
struct rst_seccomp_filter {
	uint32_t len;	/* instructions (struct sock_filter, 8 bytes) */
	uint32_t flags; /* SECCOMP_FILTER_FLAG_* */
	uint32_t off;	/* the instructions */
	uint32_t pad;
};

struct rst_seccomp {
	uint32_t mode;	  /* 0 none, 1 strict, 2 filter */
	uint32_t nr, off; /* struct rst_seccomp_filter[nr] */
	uint32_t pad;
};

struct rst_sigaction {
	uint32_t sig;
	uint32_t pad;
	uint64_t handler, flags, restorer, mask;
};

/* a kernel special mapping ([vdso], [vvar]...) moved into place */
struct rst_move {
	uint64_t from, to, len;
};

enum rst_step {
	RST_STEP_NONE = 0,
	RST_STEP_PARK,
	RST_STEP_UNMAP,
	RST_STEP_MOVE,
	RST_STEP_MMAP,
	RST_STEP_FILL,
	RST_STEP_CRC,
	RST_STEP_MPROTECT,
	RST_STEP_MADVISE,
	RST_STEP_MLOCK,
	RST_STEP_MM,
	RST_STEP_CLONE,
	RST_STEP_THREAD,
	RST_STEP_RSEQ,
	RST_STEP_SIGACTION,
	RST_STEP_RLIMIT,
	RST_STEP_ITIMER,
	RST_STEP_TIMER,
	RST_STEP_SIGQUEUE,
	RST_STEP_SCHED,
	RST_STEP_ALTSTACK,
	RST_STEP_CREDS,
	RST_STEP_SECCOMP,
	RST_STEP_MAX,
};

struct rst_args {
	uint64_t magic;
	uint32_t version;
	uint32_t size; /* of the whole args area */
	uint64_t blob_start, blob_len;
	uint64_t park_start; /* inside the blob: specials wait here */
	uint64_t task_size;

	uint32_t nr_vmas, vmas_off;
	uint32_t nr_runs, runs_off;
	uint32_t nr_threads, threads_off; /* threads[0] is the main thread */
	int32_t close_from;		  /* fds >= this served only the restore; -1: kupdate
					   * closes them (a shared fd table) */
	int32_t userns_fd;		  /* >= 0: the tree's user namespace, entered before the
			    * threads are made (task/namespaces.c); -1: none */
	int32_t born_in_userns;		  /* born in the user namespace the tree made
				 * (task/userns.c): threads as for userns_fd */
	uint32_t nr_moves;
	int32_t pages_fd;
	struct rst_move moves[RST_MAX_MOVES];
	uint32_t nr_sigacts, sigacts_off;
	uint32_t nr_rlimits, nr_timers;
	uint64_t rlimits[16][2];
	uint64_t itimers[3][2]; /* value, interval in us */
	uint32_t timers_off, nr_shared_pending, shared_pending_off, pad1;
	int64_t timers_mono; /* CLOCK_MONOTONIC when the times were read, 0: unknown */
	struct rst_creds creds;
	struct rst_seccomp seccomp;
	int32_t exe_fd; /* -1: keep */
	uint32_t verify_crc;
	uint32_t populate;    /* populate a run's pages before reading them */
	uint32_t fill_helper; /* mappings of at least this many pages are filled
			       * with kupdate's help (RST_HELPER_*); 0: never */
	uint32_t crc_tab_off; /* verify_crc 2: struct crc32c_tab (crc32c-impl.h) */

	/* struct prctl_mm_map fields */
	uint64_t start_code, end_code, start_data, end_data;
	uint64_t start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint32_t auxv_off, auxv_size; /* bytes */

	/* written by the blob when something fails */
	int64_t err; /* negative errno */
	uint64_t err_addr;
	uint32_t err_step;  /* enum rst_step */
	uint32_t err_index; /* vma or thread index */
};

#endif
