/* Raw x86-64 system calls for the freestanding restorer. */
#ifndef RST_SYS_H
#define RST_SYS_H

#include <stdint.h>

static inline long rsys6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define rsys0(n)		rsys6(n, 0, 0, 0, 0, 0, 0)
#define rsys1(n, a)		rsys6(n, (long)(a), 0, 0, 0, 0, 0)
#define rsys2(n, a, b)		rsys6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define rsys3(n, a, b, c)	rsys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define rsys4(n, a, b, c, d)	rsys6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define rsys5(n, a, b, c, d, e) rsys6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* syscall numbers (x86-64) */
#define NR_read		     0
#define NR_close	     3
#define NR_mmap		     9
#define NR_mprotect	     10
#define NR_rt_sigaction	     13
#define NR_rt_sigprocmask    14
#define NR_munmap	     11
#define NR_pread64	     17
#define NR_mremap	     25
#define NR_madvise	     28
#define NR_shmat	     30
#define NR_getpid	     39
#define NR_exit		     60
#define NR_mlock	     149
#define NR_prctl	     157
#define NR_gettid	     186
#define NR_set_tid_address   218
#define NR_exit_group	     231
#define NR_set_robust_list   273
#define NR_rseq		     334
#define NR_setns	     308
#define NR_futex	     202
#define NR_clone3	     435
#define NR_close_range	     436
#define NR_sigaltstack	     131
#define NR_setitimer	     38
#define NR_setgroups	     116
#define NR_setpriority	     141
#define NR_setresuid	     117
#define NR_setresgid	     119
#define NR_setfsuid	     122
#define NR_setfsgid	     123
#define NR_capget	     125
#define NR_capset	     126
#define NR_rt_sigtimedwait   128
#define NR_rt_sigqueueinfo   129
#define NR_sched_setaffinity 203
#define NR_timer_create	     222
#define NR_timer_settime     223
#define NR_timer_delete	     226
#define NR_clock_gettime     228
#define NR_rt_tgsigqueueinfo 297
#define NR_prlimit64	     302
#define NR_sched_setattr     314
#define NR_seccomp	     317

/* constants, spelled out: the restorer includes no system headers */
#define R_PROT_READ		   0x1
#define R_PROT_WRITE		   0x2
#define R_MAP_SHARED		   0x01
#define R_MAP_FIXED		   0x10
#define R_MAP_ANONYMOUS		   0x20
#define R_MAP_GROWSDOWN		   0x100
#define R_SHM_RDONLY		   010000
#define R_SHM_REMAP		   040000
#define R_MREMAP_MAYMOVE	   1
#define R_MREMAP_FIXED		   2
#define R_MADV_RANDOM		   1
#define R_MADV_DONTNEED		   4
#define R_MADV_SEQUENTIAL	   2
#define R_MADV_MERGEABLE	   12
#define R_MADV_DONTFORK		   10
#define R_MADV_HUGEPAGE		   14
#define R_MADV_NOHUGEPAGE	   15
#define R_MADV_DONTDUMP		   16
#define R_MADV_WIPEONFORK	   18
#define R_PR_SET_NAME		   15
#define R_PR_SET_MM		   35
#define R_PR_SET_MM_MAP		   14
#define R_PR_SET_VMA		   0x53564d41
#define R_PR_SET_VMA_ANON_NAME	   0
#define R_CLONE_VM		   0x00000100
#define R_CLONE_FS		   0x00000200
#define R_CLONE_FILES		   0x00000400
#define R_CLONE_SIGHAND		   0x00000800
#define R_CLONE_THREAD		   0x00010000
#define R_CLONE_SYSVSEM		   0x00040000
#define R_CLONE_NEWUSER		   0x10000000
#define R_CLONE_CHILD_CLEARTID	   0x00200000
#define R_FUTEX_WAIT		   0
#define R_FUTEX_WAKE		   1
#define R_PR_SET_PDEATHSIG	   1
#define R_PR_SET_DUMPABLE	   4
#define R_PR_SET_KEEPCAPS	   8
#define R_PR_CAPBSET_DROP	   24
#define R_PR_SET_SECUREBITS	   28
#define R_PR_SET_NO_NEW_PRIVS	   38
#define R_PR_CAP_AMBIENT	   47
#define R_PR_CAP_AMBIENT_RAISE	   2
#define R_PR_CAP_AMBIENT_CLEAR_ALL 4
#define R_SECBIT_KEEP_CAPS	   0x10
#define R_SIGEV_THREAD_ID	   4
#define R_SECCOMP_MODE_STRICT	   0
#define R_SECCOMP_MODE_FILTER	   1
#define R_SECCOMP_FLAG_TSYNC	   1
#define R_CAP_SYS_ADMIN		   21
#define R_CAP_SETPCAP		   8
#define R_EPERM			   1
#define R_EINTR			   4
#define R_EINVAL		   22
#define R_EAGAIN		   11

struct r_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size, cgroup;
};

struct r_prctl_mm_map {
	uint64_t start_code, end_code, start_data, end_data;
	uint64_t start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint64_t auxv;
	uint32_t auxv_size;
	uint32_t exe_fd;
};

#endif
