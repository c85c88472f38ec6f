/* Threads: registers (general purpose, xsave), signal mask, TLS, tid
 * address, robust list and rseq of each thread — dump side.  The restore
 * side is in restore.c (set through ptrace at the end of the restore). */
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <elf.h>
#include <sys/wait.h>

#include "dump.h"
#include "image.h"
#include "images/core.pb-c.h"
#include "namespaces.h"
#include "log.h"
#include "remote.h"
#include "restore.h"
#include "seccomp.h"
#include "util.h"

#define ERESTARTSYS	      512
#define ERESTARTNOINTR	      513
#define ERESTARTNOHAND	      514
#define ERESTART_RESTARTBLOCK 516

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
struct rseq_conf {
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size;
	uint32_t signature;
	uint32_t flags;
	uint32_t pad;
};

#define XSAVE_MAX (64 * 1024)

/* A thread stopped inside a system call has the kernel's restart code in
 * rax.  Rewind it so the call is issued again when the thread resumes,
 * whether that is after --leave-running or after a restore; orig_ax = -1
 * keeps the kernel from rewinding a second time.  Calls that use a restart
 * block (nanosleep, poll, futex with a timeout...) are issued again with
 * their original arguments: a relative timeout starts over. */
static void normalise_regs(struct user_regs_struct *r, int *restart_nr)
{
	long ax = (long)r->rax, orig = (long)r->orig_rax;

	*restart_nr = -1;
	if (orig >= 0) {
		switch (ax) {
		case -ERESTARTSYS:
		case -ERESTARTNOINTR:
		case -ERESTARTNOHAND:
		case -ERESTART_RESTARTBLOCK:
			if (orig == SYS_restart_syscall) {
				r->rax = -EINTR;
				break;
			}
			r->rax = orig;
			r->rip -= 2;
			*restart_nr = orig;
			break;
		}
	}
	r->orig_rax = -1;
}

static int get_clear_child_tid(struct cr_proc *p, struct cr_thread *t)
{
	long args[6] = { PR_GET_TID_ADDRESS }, res;
	uint64_t val = 0;
	int ret;

	ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, 1, &val,
				 sizeof(val), &res);
	if (ret)
		return ret;
	if (res)
		pr_warn("pid %d: thread %d: PR_GET_TID_ADDRESS failed (%ld)", p->pid, t->tid, res);
	t->clear_child_tid = res ? 0 : val;
	return 0;
}

/* A thread stopped inside the vDSO would resume in the middle of code that
 * reads the old kernel's data pages, which another kernel does not have:
 * it is let run, its signals blocked, until it is out.
 *
 * One instruction at a time at first: a vDSO function is a few dozen
 * instructions.  But its clock reads retry while the kernel updates the
 * time, which it does at every tick: a thread stepped through that loop
 * more slowly than the ticks come never leaves it (seen under an emulator,
 * and in a virtual machine: 150 us a step, the loop never left in 100000).
 * So past a few steps the thread runs freely to its return into its
 * caller, where a breakpoint stops it.  The vDSO keeps frame pointers (the
 * kernel builds it with -fno-omit-frame-pointer): the chain through %rbp
 * gives the first return address outside it, which must follow a call
 * instruction. */
#define VDSO_STEPS  64
#define VDSO_RUN_MS 2000

static bool in_vdso(const struct cr_proc *p, uint64_t ip)
{
	return ip >= p->vdso_range[0] && ip < p->vdso_range[1];
}

static int step_vdso(struct cr_proc *p, struct cr_thread *t, int max, int *steps)
{
	for (*steps = 0; *steps < max && in_vdso(p, t->orig_regs.rip); (*steps)++) {
		int st;

		if (ptrace(PTRACE_SINGLESTEP, t->tid, 0, 0) || wait_stop(t->tid, &st) ||
		    !WIFSTOPPED(st) || ptrace(PTRACE_GETREGS, t->tid, 0, &t->orig_regs)) {
			pr_err("pid %d: thread %d was lost while it was stepped out of the vDSO",
			       p->pid, t->tid);
			return -ESRCH;
		}
	}
	return 0;
}

/* does the code before ip end with a call (e8 rel32, or ff /2)? */
static bool after_call(pid_t pid, uint64_t ip)
{
	uint8_t b[8];
	struct iovec l = { b, sizeof(b) }, r = { (void *)(ip - sizeof(b)), sizeof(b) };

	if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(b))
		return false;
	if (b[3] == 0xe8)
		return true;
	for (int k = 2; k <= 7; k++)
		if (b[8 - k] == 0xff && (b[8 - k + 1] & 0x38) == 0x10)
			return true;
	return false;
}

/* the return address into the vDSO's caller, and the stack pointer there */
static bool vdso_return(const struct cr_proc *p, const struct cr_thread *t, uint64_t *ip,
			uint64_t *sp)
{
	uint64_t fp = t->orig_regs.rbp;

	for (int depth = 0; depth < 8; depth++) {
		uint64_t fr[2];
		struct iovec l = { fr, sizeof(fr) }, r = { (void *)fp, sizeof(fr) };

		if (fp < t->orig_regs.rsp || fp - t->orig_regs.rsp > (1 << 16) || fp & 7 ||
		    process_vm_readv(t->tid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(fr))
			return false;
		if (!in_vdso(p, fr[1])) {
			*ip = fr[1];
			*sp = fp + 16;
			return after_call(t->tid, fr[1]);
		}
		fp = fr[0];
	}
	return false;
}

/* run to the return address ip, where a breakpoint (int3) stops it; the
 * byte is put back after (the page of the caller's code is the process's
 * own copy from then on, as after a debugger's breakpoint).  1: no
 * breakpoint could be set, the thread is where it was. */
static int run_to(struct cr_proc *p, struct cr_thread *t, uint64_t ip, uint64_t sp)
{
	int64_t end = now_ns(CLOCK_MONOTONIC) + VDSO_RUN_MS * 1000000LL;
	uint64_t at = ip & ~7ULL, shift = (ip - at) * 8;
	long word, trap;
	int ret = 0, st = 0;
	pid_t r = 0;

	errno = 0;
	word = ptrace(PTRACE_PEEKDATA, t->tid, at, 0);
	if (errno)
		return 1;
	trap = (long)(((uint64_t)word & ~(0xffULL << shift)) | (0xccULL << shift));
	if (ptrace(PTRACE_POKEDATA, t->tid, at, trap))
		return 1;
	if (ptrace(PTRACE_CONT, t->tid, 0, 0))
		ret = -errno;
	while (!ret && (r = waitpid(t->tid, &st, __WALL | WNOHANG)) == 0 &&
	       now_ns(CLOCK_MONOTONIC) < end)
		usleep(100);
	if (!ret && r == 0) {
		/* not back in time: stopped where it is, the dump refused */
		ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
		wait_stop(t->tid, &st);
		ret = -ETIMEDOUT;
	} else if (!ret && (r < 0 || !WIFSTOPPED(st)))
		ret = -ESRCH;
	if (!ret && ptrace(PTRACE_GETREGS, t->tid, 0, &t->orig_regs))
		ret = -errno;
	if (ptrace(PTRACE_POKEDATA, t->tid, at, word) && !ret)
		ret = pr_errno("pid %d: thread %d: cannot take its breakpoint away at %#lx", p->pid,
			       t->tid, (unsigned long)ip);
	if (ret == -ETIMEDOUT)
		pr_err("pid %d: thread %d did not return from the vDSO to %#lx within %d ms",
		       p->pid, t->tid, (unsigned long)ip, VDSO_RUN_MS);
	else if (ret == -ESRCH)
		pr_err("pid %d: thread %d was lost while it ran out of the vDSO", p->pid, t->tid);
	else if (!ret && (t->orig_regs.rip != ip + 1 || t->orig_regs.rsp != sp ||
			  WSTOPSIG(st) != SIGTRAP)) {
		pr_err("pid %d: thread %d ran out of the vDSO to %#llx (sp %#llx), not to its "
		       "return address %#lx (sp %#lx): it stopped on %s",
		       p->pid, t->tid, t->orig_regs.rip, t->orig_regs.rsp, (unsigned long)ip,
		       (unsigned long)sp, strsignal(WSTOPSIG(st)));
		ret = -EIO;
	} else if (!ret) {
		/* back on the instruction the breakpoint took */
		t->orig_regs.rip = ip;
		if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->orig_regs))
			ret = pr_errno("pid %d: thread %d: cannot set its registers", p->pid,
				       t->tid);
	}
	return ret;
}

static int step_out_of_vdso(struct cr_proc *p, struct cr_thread *t)
{
	uint64_t mask, all = ~0ULL, ip, sp;
	int steps = 0, more = 0, ret;
	const char *how = "stepped";

	if (!in_vdso(p, t->orig_regs.rip))
		return 0;
	if (ptrace(PTRACE_GETSIGMASK, t->tid, sizeof(mask), &mask) ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(all), &all))
		return -errno;
	ret = step_vdso(p, t, VDSO_STEPS, &steps);
	if (!ret && in_vdso(p, t->orig_regs.rip)) {
		ret = vdso_return(p, t, &ip, &sp) ? run_to(p, t, ip, sp) : 1;
		if (!ret)
			how = "ran";
		else if (ret > 0)
			/* no frame to go by, or no breakpoint: step on */
			ret = step_vdso(p, t, 100000, &more);
	}
	if (!ret && in_vdso(p, t->orig_regs.rip)) {
		pr_err("pid %d: thread %d cannot be brought out of the vDSO (ip %llx, %d steps)",
		       p->pid, t->tid, t->orig_regs.rip, steps + more);
		ret = -ELOOP;
	} else if (!ret)
		pr_debug("pid %d: thread %d left the vDSO (%s, after %d steps)", p->pid, t->tid,
			 how, steps + more);
	ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(mask), &mask);
	return ret;
}

int dump_thread(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_thread *t)
{
	struct iovec iov;
	struct rseq_conf rc;
	char path[96];
	int ret;

	(void)ctx;
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &t->orig_regs))
		return pr_errno("pid %d: cannot read registers of thread %d", p->pid, t->tid);
	ret = step_out_of_vdso(p, t);
	if (ret)
		return ret;
	if (t->orig_regs.cs != 0x33) {
		pr_err("pid %d: thread %d runs 32-bit code (cs %#llx); only 64-bit tasks are "
		       "supported",
		       p->pid, t->tid, t->orig_regs.cs);
		return -EOPNOTSUPP;
	}
	t->regs = t->orig_regs;
	normalise_regs(&t->regs, &t->restart_nr);
	t->regs_valid = true;

	t->xsave = malloc(XSAVE_MAX);
	if (!t->xsave)
		return -ENOMEM;
	iov.iov_base = t->xsave;
	iov.iov_len = XSAVE_MAX;
	/* without XSAVE, the FXSAVE area (512 bytes) is all there is */
	if (ptrace(PTRACE_GETREGSET, t->tid, cpu_xcr0() ? NT_X86_XSTATE : NT_PRFPREG, &iov))
		return pr_errno("pid %d: cannot read the FPU/xsave state of thread %d", p->pid,
				t->tid);
	t->xsave_len = iov.iov_len;

	if (ptrace(PTRACE_GETSIGMASK, t->tid, sizeof(t->sigmask), &t->sigmask))
		return pr_errno("pid %d: cannot read the signal mask of thread %d", p->pid, t->tid);

	memset(&rc, 0, sizeof(rc));
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, t->tid, sizeof(rc), &rc) >= 0) {
		t->has_rseq = rc.rseq_abi_pointer != 0;
		t->rseq_ptr = rc.rseq_abi_pointer;
		t->rseq_len = rc.rseq_abi_size;
		t->rseq_sig = rc.signature;
		t->rseq_flags = rc.flags;
	}

	{
		void *head = NULL;
		size_t len = 0;

		if (syscall(SYS_get_robust_list, t->tid, &head, &len))
			return pr_errno("pid %d: cannot read the robust futex list of thread %d",
					p->pid, t->tid);
		t->robust_list = (uintptr_t)head;
		t->robust_len = len;
	}

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", p->pid, t->tid);
	{
		_cleanup_free_ char *c = NULL;

		if (!read_file_at(AT_FDCWD, path, &c, NULL)) {
			c[strcspn(c, "\n")] = 0;
			snprintf(t->comm, sizeof(t->comm), "%s", c);
		}
	}
	return get_clear_child_tid(p, t);
}

static void fill_gp(GpRegs *g, const struct user_regs_struct *r)
{
	g->r15 = r->r15;
	g->r14 = r->r14;
	g->r13 = r->r13;
	g->r12 = r->r12;
	g->bp = r->rbp;
	g->bx = r->rbx;
	g->r11 = r->r11;
	g->r10 = r->r10;
	g->r9 = r->r9;
	g->r8 = r->r8;
	g->ax = r->rax;
	g->cx = r->rcx;
	g->dx = r->rdx;
	g->si = r->rsi;
	g->di = r->rdi;
	g->orig_ax = r->orig_rax;
	g->ip = r->rip;
	g->cs = r->cs;
	g->flags = r->eflags;
	g->sp = r->rsp;
	g->ss = r->ss;
	g->fs_base = r->fs_base;
	g->gs_base = r->gs_base;
	g->ds = r->ds;
	g->es = r->es;
	g->fs = r->fs;
	g->gs = r->gs;
}

static void fill_creds(Creds *cr, struct cr_creds *c)
{
	creds__init(cr);
	cr->uid = c->uid[0];
	cr->euid = c->uid[1];
	cr->suid = c->uid[2];
	cr->fsuid = c->uid[3];
	cr->gid = c->gid[0];
	cr->egid = c->gid[1];
	cr->sgid = c->gid[2];
	cr->fsgid = c->gid[3];
	cr->n_groups = c->nr_groups;
	cr->groups = c->groups;
	cr->cap_inh = c->cap_inh;
	cr->cap_prm = c->cap_prm;
	cr->cap_eff = c->cap_eff;
	cr->cap_bnd = c->cap_bnd;
	cr->has_cap_amb = 1;
	cr->cap_amb = c->cap_amb;
	cr->has_securebits = 1;
	cr->securebits = c->securebits;
	cr->has_no_new_privs = 1;
	cr->no_new_privs = c->nnp;
}

int write_core(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_writer w;
	TaskCore tc = TASK_CORE__INIT;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "core-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_CORE);
	if (ret)
		return ret;
	tc.pid = p->pid;
	tc.comm = p->stat.comm;
	tc.exe_path = p->exe_path;
	if (p->exe_path) {
		tc.has_exe_ino = 1;
		tc.exe_ino = p->exe_ino;
	}
	if (p->exe_ghost_id) {
		tc.has_exe_ghost_id = 1;
		tc.exe_ghost_id = p->exe_ghost_id;
	}
	tc.cwd = p->cwd;
	if (p->cwd_deleted) {
		tc.has_cwd_deleted = tc.has_cwd_mode = tc.has_cwd_uid = tc.has_cwd_gid = 1;
		tc.has_cwd_ino = 1;
		tc.cwd_ino = p->cwd_ino;
		tc.cwd_deleted = 1;
		tc.cwd_mode = p->cwd_mode;
		tc.cwd_uid = p->cwd_uid;
		tc.cwd_gid = p->cwd_gid;
	}
	tc.root = p->root;
	NsMade made = NS_MADE__INIT;
	char *kinds[NS_MADE_KINDS];
	if (ns_made_save(p, &made, kinds))
		tc.made_ns = &made;
	tc.has_personality = 1;
	tc.personality = p->personality;
	tc.has_umask = 1;
	tc.umask = p->umask;
	tc.has_oom_score_adj = 1;
	tc.oom_score_adj = p->oom_score_adj;
	tc.has_child_subreaper = 1;
	tc.child_subreaper = p->child_subreaper;
	tc.has_dumpable = 1;
	tc.dumpable = p->dumpable;
	Rlimit rl[16], *rlp[16];
	for (int i = 0; i < p->nr_rlim; i++) {
		rlimit__init(&rl[i]);
		rl[i].cur = p->rlim[i][0];
		rl[i].max = p->rlim[i][1];
		rlp[i] = &rl[i];
	}
	tc.n_rlimits = p->nr_rlim;
	tc.rlimits = rlp;
	Creds cr;
	fill_creds(&cr, &p->creds);
	tc.creds = &cr;
	Seccomp sc;
	SeccompFilter *scf = NULL, **scfp = NULL;
	ret = seccomp_image(&p->seccomp, &sc, &scf, &scfp);
	if (ret < 0) {
		free(scf);
		free(scfp);
		img_writer_abort(&w);
		return ret;
	}
	if (ret)
		tc.seccomp = &sc;
	img_write(&w, &tc.base);
	free(scf);
	free(scfp);

	for (int i = 0; i < p->nr_threads; i++) {
		struct cr_thread *t = &p->threads[i];
		ThreadCore th = THREAD_CORE__INIT;
		GpRegs g = GP_REGS__INIT;
		RseqConfig rs = RSEQ_CONFIG__INIT;
		Creds tcr;

		th.tid = t->tid;
		fill_gp(&g, &t->regs);
		th.regs = &g;
		th.xsave.data = t->xsave;
		th.xsave.len = t->xsave_len;
		th.sigmask = t->sigmask;
		th.has_clear_child_tid = 1;
		th.clear_child_tid = t->clear_child_tid;
		th.has_robust_list = th.has_robust_list_len = 1;
		th.robust_list = t->robust_list;
		th.robust_list_len = t->robust_len;
		if (t->has_rseq) {
			rs.abi_pointer = t->rseq_ptr;
			rs.abi_size = t->rseq_len;
			rs.signature = t->rseq_sig;
			rs.flags = t->rseq_flags;
			th.rseq = &rs;
		}
		th.comm = t->comm;
		if (t->creds) {
			fill_creds(&tcr, t->creds);
			th.creds = &tcr;
		}
		th.has_syscall_restart = 1;
		th.syscall_restart = t->restart_nr;
		if (t->has_altstack) {
			th.has_altstack_sp = th.has_altstack_size = th.has_altstack_flags = 1;
			th.altstack_sp = t->altstack_sp;
			th.altstack_size = t->altstack_size;
			th.altstack_flags = t->altstack_flags;
		}
		th.has_sched_attr = 1;
		th.sched_attr.data = t->sched_attr;
		th.sched_attr.len = t->sched_attr_len;
		th.has_affinity = 1;
		th.affinity.data = t->affinity;
		th.affinity.len = t->affinity_len;
		th.has_pdeathsig = 1;
		th.pdeathsig = t->pdeathsig;
		ProtobufCBinaryData *pend = calloc(t->nr_pending + 1, sizeof(*pend));
		if (!pend) {
			img_writer_abort(&w);
			return -ENOMEM;
		}
		for (int k = 0; k < t->nr_pending; k++) {
			pend[k].data = t->pending[k];
			pend[k].len = 128;
		}
		th.n_pending = t->nr_pending;
		th.pending = pend;
		img_write(&w, &th.base);
		free(pend);
	}
	return img_writer_close(&w);
}

/* ------------------------------------------------------------- restore */

void core_free(struct rcore *c)
{
	if (c->task)
		task_core__free_unpacked(c->task, NULL);
	for (size_t i = 0; i < c->nr_threads; i++)
		thread_core__free_unpacked(c->threads[i], NULL);
	free(c->threads);
	memset(c, 0, sizeof(*c));
}

int core_load(int dirfd, const PstreeEntry *pe, struct rcore *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	memset(c, 0, sizeof(*c));
	snprintf(name, sizeof(name), "core-%d.img", pe->pid);
	ret = img_reader_open(&r, dirfd, name, IMG_CORE);
	if (ret)
		return ret;
	ret = img_read_first(&r, &task_core__descriptor, &m);
	if (ret)
		goto out;
	c->task = (TaskCore *)m;
	if (c->task->n_rlimits > 16 || (c->task->creds && c->task->creds->n_groups > 65536)) {
		pr_err("image %s is damaged: invalid limits or groups", name);
		ret = -EINVAL;
		goto out;
	}
	ret = seccomp_check_image(name, c->task->seccomp);
	if (ret)
		goto out;
	if (c->task->pid != pe->pid) {
		pr_err("image %s is damaged: it describes pid %d", name, c->task->pid);
		ret = -EINVAL;
		goto out;
	}
	c->threads = calloc(r.nr, sizeof(*c->threads));
	if (!c->threads) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &thread_core__descriptor, &m)) > 0) {
		ThreadCore *t = (ThreadCore *)m;
		size_t i = c->nr_threads;

		c->threads[c->nr_threads++] = t;
		if (i >= pe->n_tids || t->tid != pe->tids[i]) {
			pr_err("image %s is damaged: thread %zu is %d, pstree.img says otherwise",
			       name, i, t->tid);
			ret = -EINVAL;
			goto out;
		}
		if ((t->xsave.len < 576 && t->xsave.len != 512) || t->xsave.len > XSAVE_MAX ||
		    t->regs->cs != 0x33 || t->regs->ss != 0x2b) {
			pr_err("image %s is damaged: thread %d has invalid registers (cs %#lx, ss "
			       "%#lx, xsave %zu bytes)",
			       name, t->tid, (unsigned long)t->regs->cs, (unsigned long)t->regs->ss,
			       t->xsave.len);
			ret = -EINVAL;
			goto out;
		}
		for (size_t k = 0; k < t->n_pending; k++)
			if (t->pending[k].len != 128) {
				pr_err("image %s is damaged: thread %d has a pending signal of %zu "
				       "bytes",
				       name, t->tid, t->pending[k].len);
				ret = -EINVAL;
				goto out;
			}
		if ((t->has_sched_attr && (t->sched_attr.len > 56 || t->sched_attr.len < 48)) ||
		    (t->has_affinity && t->affinity.len > 128)) {
			pr_err("image %s is damaged: thread %d has invalid scheduling data", name,
			       t->tid);
			ret = -EINVAL;
			goto out;
		}
		if (t->creds && t->creds->n_groups > 65536) {
			pr_err("image %s is damaged: thread %d has %zu groups", name, t->tid,
			       t->creds->n_groups);
			ret = -EINVAL;
			goto out;
		}
		if (t->rseq && (t->rseq->abi_size < 32 || t->rseq->abi_size > 4096)) {
			pr_err("image %s is damaged: thread %d has an rseq area of %u bytes", name,
			       t->tid, t->rseq->abi_size);
			ret = -EINVAL;
			goto out;
		}
	}
	if (ret < 0)
		goto out;
	if (c->nr_threads != pe->n_tids) {
		pr_err("image %s is damaged: %zu threads, pstree.img says %zu", name, c->nr_threads,
		       pe->n_tids);
		ret = -EINVAL;
	}
out:
	img_reader_close(&r);
	if (ret)
		core_free(c);
	return ret;
}

static void gp_to_user(struct user_regs_struct *r, const GpRegs *g)
{
	r->r15 = g->r15;
	r->r14 = g->r14;
	r->r13 = g->r13;
	r->r12 = g->r12;
	r->rbp = g->bp;
	r->rbx = g->bx;
	r->r11 = g->r11;
	r->r10 = g->r10;
	r->r9 = g->r9;
	r->r8 = g->r8;
	r->rax = g->ax;
	r->rcx = g->cx;
	r->rdx = g->dx;
	r->rsi = g->si;
	r->rdi = g->di;
	r->orig_rax = -1;
	r->rip = g->ip;
	r->cs = g->cs;
	r->eflags = g->flags;
	r->rsp = g->sp;
	r->ss = g->ss;
	r->fs_base = g->fs_base;
	r->gs_base = g->gs_base;
	r->ds = g->ds;
	r->es = g->es;
	r->fs = g->fs;
	r->gs = g->gs;
}

/* The final step for a thread parked in the restorer: its saved registers,
 * FPU/vector state and signal mask, set through ptrace. */
int core_set_thread(pid_t pid, const ThreadCore *tc)
{
	struct user_regs_struct r;
	struct iovec iov = { tc->xsave.data, tc->xsave.len };
	uint64_t mask = tc->sigmask;
	int ret;

	gp_to_user(&r, tc->regs);
	/* 512 bytes: an FXSAVE area, from a CPU without XSAVE */
	if (ptrace(PTRACE_SETREGSET, tc->tid, tc->xsave.len == 512 ? NT_PRFPREG : NT_X86_XSTATE,
		   &iov)) {
		ret = pr_errno("pid %d: cannot set the FPU/xsave state of thread %d", pid, tc->tid);
		return ret;
	}
	if (ptrace(PTRACE_SETREGS, tc->tid, 0, &r))
		return pr_errno("pid %d: cannot set the registers of thread %d (ip %lx)", pid,
				tc->tid, (unsigned long)r.rip);
	if (ptrace(PTRACE_SETSIGMASK, tc->tid, sizeof(mask), &mask))
		return pr_errno("pid %d: cannot set the signal mask of thread %d", pid, tc->tid);
	return 0;
}

uint64_t cpu_xcr0(void)
{
	uint32_t a, b, c, d, eax, edx;

	/* KUPDATE_NO_XSAVE=1: as on a CPU without XSAVE (tests) */
	if (getenv("KUPDATE_NO_XSAVE"))
		return 0;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
	if (!(c & (1U << 27))) /* OSXSAVE */
		return 0;
	__asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
	return ((uint64_t)edx << 32) | eax;
}
