#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "log.h"
#include "proc.h"
#include "remote.h"
#include "util.h"

/* Offset of the first "syscall" (0f 05) in our own vDSO: the target runs
 * the same kernel, so its vDSO has the same bytes. */
static long own_vdso_syscall_offset(size_t *vdso_len)
{
	const unsigned char *v = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)v;
	const Elf64_Phdr *ph;
	size_t len = 0;

	if (!v)
		return -1;
	ph = (const Elf64_Phdr *)(v + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD)
			len = MAX(len, ph[i].p_offset + ph[i].p_filesz);
	for (size_t i = 0; i + 1 < len; i++)
		if (v[i] == 0x0f && v[i + 1] == 0x05) {
			*vdso_len = len;
			return i;
		}
	return -1;
}

int remote_find_syscall(pid_t pid, uint64_t *ip, uint64_t vdso[2])
{
	struct smaps_vma *v;
	int nr, ret;
	size_t vlen = 0;
	long off = own_vdso_syscall_offset(&vlen);

	ret = parse_maps(pid, &v, &nr);
	if (ret)
		return ret;
	vdso[0] = vdso[1] = 0;
	for (int i = 0; i < nr; i++)
		if (!strcmp(v[i].path, "[vdso]")) {
			vdso[0] = v[i].start;
			vdso[1] = v[i].end;
		}
	ret = -ENOENT;
	for (int i = 0; i < nr && off >= 0; i++) {
		unsigned char b[2];
		struct iovec l = { b, 2 }, r = { (void *)(v[i].start + off), 2 };

		if (strcmp(v[i].path, "[vdso]"))
			continue;
		if (process_vm_readv(pid, &l, 1, &r, 1, 0) == 2 && b[0] == 0x0f && b[1] == 0x05) {
			*ip = v[i].start + off;
			ret = 0;
		}
		break;
	}
	/* no vDSO: look through the executable mappings */
	for (int i = 0; i < nr && ret; i++) {
		unsigned char buf[4096];
		char mem[64];
		int fd;

		if (!(v[i].prot & PROT_EXEC) || v[i].path[0] == '[')
			continue;
		snprintf(mem, sizeof(mem), "/proc/%d/mem", pid);
		fd = open(mem, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		for (unsigned long a = v[i].start; a < v[i].end && ret; a += sizeof(buf)) {
			if (pread(fd, buf, sizeof(buf), a) != sizeof(buf))
				break;
			for (size_t k = 0; k + 1 < sizeof(buf); k++)
				if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
					*ip = a + k;
					ret = 0;
					break;
				}
		}
		close(fd);
	}
	free_smaps(v, nr);
	if (ret)
		pr_err("pid %d: found no syscall instruction to run code in the task", pid);
	return ret;
}

int wait_stop(pid_t tid, int *status)
{
	for (;;) {
		int st;
		pid_t r = waitpid(tid, &st, __WALL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		*status = st;
		return 0;
	}
}

static int syscall_stop(pid_t tid, const char *what)
{
	int st = 0, ret;

	for (;;) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
			return pr_errno("tid %d: cannot resume for %s", tid, what);
		ret = wait_stop(tid, &st);
		if (ret) {
			pr_err("tid %d: waiting for %s: %s", tid, what, strerror(-ret));
			return ret;
		}
		if (!WIFSTOPPED(st)) {
			pr_err("tid %d: died while running an injected syscall (status %#x)", tid,
			       st);
			return -ESRCH;
		}
		if (WSTOPSIG(st) == (SIGTRAP | 0x80))
			return 0;
		/* a non-blockable stop (e.g. SIGSTOP group stop): go on */
		pr_debug("tid %d: stop %#x while running %s", tid, st, what);
	}
}

int remote_syscall(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		   const long a[6], long *res)
{
	struct user_regs_struct r = *regs;
	uint64_t mask, all = ~0ULL;
	int ret;

	if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(mask), &mask) ||
	    ptrace(PTRACE_SETSIGMASK, tid, sizeof(all), &all)) {
		ret = pr_errno("tid %d: cannot block signals for syscall injection", tid);
		return ret;
	}
	r.rax = nr;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.r10 = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rip = syscall_ip;
	r.orig_rax = -1;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r)) {
		ret = pr_errno("tid %d: cannot set registers for syscall %ld", tid, nr);
		goto out;
	}
	ret = syscall_stop(tid, "syscall entry");
	if (!ret)
		ret = syscall_stop(tid, "syscall exit");
	if (!ret) {
		if (ptrace(PTRACE_GETREGS, tid, 0, &r)) {
			ret = pr_errno("tid %d: cannot read syscall result", tid);
		} else {
			*res = r.rax;
		}
	}
out:
	if (ptrace(PTRACE_SETREGS, tid, 0, regs) && !ret)
		ret = pr_errno("tid %d: cannot put registers back after syscall injection", tid);
	if (ptrace(PTRACE_SETSIGMASK, tid, sizeof(mask), &mask) && !ret)
		ret = pr_errno("tid %d: cannot put the signal mask back", tid);
	return ret;
}

int remote_syscall_out(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		       long args[6], int out_arg, void *out, size_t out_len, long *res)
{
	unsigned char saved[512];
	/* below the red zone, where a signal frame would go */
	uint64_t addr = (regs->rsp - 128 - sizeof(saved)) & ~63ULL;
	struct iovec l = { saved, sizeof(saved) }, r = { (void *)addr, sizeof(saved) };
	int ret;

	if (out_len > sizeof(saved))
		return -E2BIG;
	if (process_vm_readv(tid, &l, 1, &r, 1, 0) != sizeof(saved))
		return pr_errno("tid %d: its stack at %lx is not accessible", tid,
				(unsigned long)addr);
	args[out_arg] = addr;
	ret = remote_syscall(tid, syscall_ip, regs, nr, args, res);
	if (!ret && *res >= 0) {
		struct iovec lo = { out, out_len }, ro = { (void *)addr, out_len };

		if (process_vm_readv(tid, &lo, 1, &ro, 1, 0) != (ssize_t)out_len)
			ret = -EFAULT;
	}
	if (process_vm_writev(tid, &l, 1, &r, 1, 0) != sizeof(saved)) {
		pr_perror("tid %d: cannot put its stack back at %lx", tid, (unsigned long)addr);
		return -EFAULT;
	}
	return ret;
}

int remote_syscall_buf(pid_t tid, uint64_t syscall_ip, const struct user_regs_struct *regs, long nr,
		       long args[6], int buf_arg, void *buf, size_t len, long *res)
{
	unsigned char saved[512];
	uint64_t addr = (regs->rsp - 128 - sizeof(saved)) & ~63ULL;
	struct iovec l = { saved, sizeof(saved) }, r = { (void *)addr, sizeof(saved) };
	struct iovec lb = { buf, len }, rb = { (void *)addr, len };
	int ret;

	if (len > sizeof(saved))
		return -E2BIG;
	if (process_vm_readv(tid, &l, 1, &r, 1, 0) != sizeof(saved))
		return pr_errno("tid %d: its stack at %lx is not accessible", tid,
				(unsigned long)addr);
	if (process_vm_writev(tid, &lb, 1, &rb, 1, 0) != (ssize_t)len)
		return pr_errno("tid %d: cannot write the arguments of syscall %ld at %lx", tid, nr,
				(unsigned long)addr);
	args[buf_arg] = addr;
	ret = remote_syscall(tid, syscall_ip, regs, nr, args, res);
	if (!ret && *res >= 0 && process_vm_readv(tid, &lb, 1, &rb, 1, 0) != (ssize_t)len)
		ret = -EFAULT;
	if (process_vm_writev(tid, &l, 1, &r, 1, 0) != sizeof(saved)) {
		pr_perror("tid %d: cannot put its stack back at %lx", tid, (unsigned long)addr);
		return -EFAULT;
	}
	return ret;
}
