/* Running system calls inside a seized thread (syscall injection). */
#ifndef CR_REMOTE_H
#define CR_REMOTE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* Find the address of a syscall instruction in pid's vDSO (or, failing
 * that, near its ip); vdso gets the [vdso] range (0, 0 if none).  Returns 0
 * or -errno. */
int remote_find_syscall(pid_t pid, uint64_t *ip, uint64_t vdso[2]);

/* Execute syscall nr with args in thread tid, which must be in a
 * ptrace-stop.  regs are the thread's current registers; they are put back
 * afterwards.  *res receives the raw return value. */
int remote_syscall(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		   const long args[6], long *res);

/* Like remote_syscall, for a call that writes its result to user memory:
 * args[out_arg] is pointed at scratch space below the thread's stack (its
 * previous contents are put back), and out_len bytes of it are copied to
 * out afterwards. */
int remote_syscall_out(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		       long args[6], int out_arg, void *out, size_t out_len, long *res);

/* The same for a call that reads and writes a buffer: len bytes of buf
 * are copied in before, and back after. */
int remote_syscall_buf(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		       long args[6], int buf_arg, void *buf, size_t len, long *res);

/* Wait for a ptrace stop of tid; returns the status, or -errno.  Signal
 * deliveries that arrive in between are handed back to the tracee. */
int wait_stop(pid_t tid, int *status);

#endif
