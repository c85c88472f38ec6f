/* The restorer: freestanding, position independent, no libc.  See
 * restorer.h for the protocol.  Entered at offset 0 with %rdi = args and
 * %rsp on the main thread's stack inside the blob. */
#include "restorer.h"
#include "sys.h"
#include "crc32c-impl.h"

#define PAGE 4096UL

#define AT(a, off) ((void *)((char *)(a) + (off)))

/* the compiler may emit calls to these */
void *memcpy(void *d, const void *s, unsigned long n);
void *memset(void *d, int c, unsigned long n);
void *memcpy(void *d, const void *s, unsigned long n)
{
	char *dp = d;
	const char *sp = s;

	while (n--)
		*dp++ = *sp++;
	return d;
}
void *memset(void *d, int c, unsigned long n)
{
	char *dp = d;

	while (n--)
		*dp++ = (char)c;
	return d;
}

long rst_clone3(struct r_clone_args *ca, unsigned long size, void (*fn)(struct rst_args *, long),
		struct rst_args *a, long idx);
__asm__(".text\n"
	".globl rst_clone3\n"
	".type rst_clone3,@function\n"
	"rst_clone3:\n"
	"	push %r12\n"
	"	push %r13\n"
	"	push %r14\n"
	"	mov %rdx, %r12\n"
	"	mov %rcx, %r13\n"
	"	mov %r8, %r14\n"
	"	mov $435, %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jnz 1f\n"
	"	mov %r13, %rdi\n"
	"	mov %r14, %rsi\n"
	"	xor %ebp, %ebp\n"
	"	and $-16, %rsp\n"
	"	call *%r12\n"
	"	ud2\n"
	"1:	pop %r14\n"
	"	pop %r13\n"
	"	pop %r12\n"
	"	ret\n");

static __attribute__((noreturn)) void park(void)
{
	for (;;)
		__asm__ volatile("int3" ::: "memory");
}

static __attribute__((noreturn)) void fail(struct rst_args *a, int step, long err, uint64_t addr,
					   uint32_t index)
{
	a->err = err < 0 ? err : -1;
	a->err_step = step;
	a->err_addr = addr;
	a->err_index = index;
	rsys1(NR_exit_group, 111);
	for (;;)
		;
}

/* Each thread sets its own credentials (they are per thread in Linux),
 * last, because they take away what the restore needed.  The order
 * matters: ids while still privileged (KEEP_CAPS keeps the permitted set
 * across the change of uid, and the effective set is raised again for the
 * fs ids); then the capability sets with CAP_SETPCAP kept a moment longer,
 * for the ambient set (before SECBIT_NO_CAP_AMBIENT_RAISE can forbid it)
 * and the securebits themselves; then the final sets. */
static void capset(struct rst_args *a, long idx, uint64_t eff, uint64_t prm, uint64_t inh, int what)
{
	struct {
		uint32_t version;
		int pid;
	} hdr = { 0x20080522, 0 };
	struct {
		uint32_t eff, prm, inh;
	} data[2] = { { (uint32_t)eff, (uint32_t)prm, (uint32_t)inh },
		      { (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32) } };
	long r = rsys2(NR_capset, &hdr, data);

	if (r)
		fail(a, RST_STEP_CREDS, r, what, idx);
}

static void set_creds(struct rst_args *a, long idx)
{
	struct rst_thread *t = (struct rst_thread *)AT(a, a->threads_off) + idx;
	struct rst_creds *c = t->creds.present ? &t->creds : &a->creds;
	uint64_t setpcap = 1ULL << R_CAP_SETPCAP, all;
	struct {
		uint32_t version;
		int pid;
	} hdr = { 0x20080522, 0 };
	uint32_t cur[6];
	long r;

	if (!c->present)
		return;
	for (int cap = 0; cap < 64; cap++)
		if (!(c->cap_bnd & (1ULL << cap))) {
			r = rsys2(NR_prctl, R_PR_CAPBSET_DROP, cap);
			if (r && r != -R_EINVAL)
				fail(a, RST_STEP_CREDS, r, cap, idx);
		}
	/* keep the permitted set across the change of uid */
	r = rsys2(NR_prctl, R_PR_SET_SECUREBITS, R_SECBIT_KEEP_CAPS);
	if (r)
		fail(a, RST_STEP_CREDS, r, R_SECBIT_KEEP_CAPS, idx);
	/* (in a user namespace, set before it was entered: enter_userns) */
	r = a->userns_fd >= 0 && c == &a->creds
		    ? 0
		    : rsys2(NR_setgroups, c->nr_groups, AT(a, c->groups_off));
	if (r)
		fail(a, RST_STEP_CREDS, r, 1, idx);
	r = rsys3(NR_setresgid, c->gid[0], c->gid[1], c->gid[2]);
	if (r)
		fail(a, RST_STEP_CREDS, r, 2, idx);
	r = rsys3(NR_setresuid, c->uid[0], c->uid[1], c->uid[2]);
	if (r)
		fail(a, RST_STEP_CREDS, r, 3, idx);
	/* a uid other than 0 took the effective set: back, for the fs ids */
	r = rsys2(NR_capget, &hdr, cur);
	if (r)
		fail(a, RST_STEP_CREDS, r, 7, idx);
	all = cur[1] | (uint64_t)cur[4] << 32;
	capset(a, idx, all, all, 0, 8);
	rsys1(NR_setfsgid, c->gid[3]);
	rsys1(NR_setfsuid, c->uid[3]);
	if ((uint32_t)rsys1(NR_setfsuid, -1) != c->uid[3] ||
	    (uint32_t)rsys1(NR_setfsgid, -1) != c->gid[3])
		fail(a, RST_STEP_CREDS, -R_EPERM, 9, idx);
	capset(a, idx, c->cap_eff | setpcap, c->cap_prm | setpcap, c->cap_inh, 4);
	r = rsys5(NR_prctl, R_PR_CAP_AMBIENT, R_PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int cap = 0; cap < 64; cap++)
		if (c->cap_amb & (1ULL << cap)) {
			r = rsys5(NR_prctl, R_PR_CAP_AMBIENT, R_PR_CAP_AMBIENT_RAISE, cap, 0, 0);
			if (r)
				fail(a, RST_STEP_CREDS, r, 5, idx);
		}
	r = rsys2(NR_prctl, R_PR_SET_SECUREBITS, c->securebits);
	if (r)
		fail(a, RST_STEP_CREDS, r, c->securebits, idx);
	capset(a, idx, c->cap_eff, c->cap_prm, c->cap_inh, 10);
	if (c->nnp) {
		r = rsys5(NR_prctl, R_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (r)
			fail(a, RST_STEP_CREDS, r, 6, idx);
	}
}

/* What is left of a timer on a wall clock once the tree's monotonic clock
 * has run since the times were read (timers.c); 1 ns if nothing. */
static uint64_t time_left(struct rst_args *a, uint64_t left_ns)
{
	int64_t ts[2], ran;

	if (!a->timers_mono || rsys2(NR_clock_gettime, 1 /* CLOCK_MONOTONIC */, ts))
		return left_ns;
	ran = ts[0] * 1000000000LL + ts[1] - a->timers_mono;
	if (ran <= 0)
		return left_ns;
	return (uint64_t)ran < left_ns ? left_ns - (uint64_t)ran : 1;
}

/* A timer whose signal was pending at the dump queues its own again.
 * A periodic timer whose last delivered signal counted overruns: the
 * count (timer_getoverrun) is only ever set by a delivery, and any
 * timer_settime clears it.  So the timer is armed to have expired
 * overrun + 1 periods ago, in phase with its next expiry, and the signal
 * this queues at once is taken here; taking it forwards the timer by those
 * periods, which become the count, and leaves it due in left ns.  Only for
 * signals the main thread can take (to the process, or to itself).
 * Returns 0 when done, 1 when the timer is to be armed the plain way. */
static int restore_overrun(struct rst_args *a, struct rst_timer *tm, int32_t id, uint64_t left,
			   int main_tid)
{
	int64_t ts[2], when, its[4];
	uint64_t set = 1ULL << (tm->signo - 1);
	struct {
		int32_t signo, err, code, pad0, timerid, overrun;
		int32_t pad[26];
	} info;
	/* an expiry in the past is signalled from the timer interrupt, not
	 * by timer_settime itself: wait for it (a slow machine, an emulator) */
	int64_t wait[2] = { 2, 0 };
	int take = !tm->sig_pending;
	long r;

	/* a signal still pending: the timer expired one period before its
	 * next expiry (or, one-shot, just now) and queues its own signal,
	 * left for the program to take */
	if ((tm->notify & ~R_SIGEV_THREAD_ID) != 0 /* SIGEV_SIGNAL */ || tm->signo < 1 ||
	    tm->signo > 64 || (tm->interval_ns && left > tm->interval_ns))
		return 1;
	if (take && (tm->overrun <= 0 || !tm->interval_ns || tm->clock < 0 ||
		     ((tm->notify & R_SIGEV_THREAD_ID) && tm->tid != main_tid)))
		return 1;
	r = rsys2(NR_clock_gettime, tm->clock, ts);
	if (r && !take)
		fail(a, RST_STEP_TIMER, r, tm->id, 3);
	if (r)
		return 1;
	when = ts[0] * 1000000000LL + ts[1] + (int64_t)left -
	       ((int64_t)(take ? tm->overrun : 0) + 1) * (int64_t)tm->interval_ns;
	if (!tm->interval_ns)
		when = ts[0] * 1000000000LL + ts[1] - 1;
	/* a pending signal must come back: a CPU clock just restarted from
	 * zero has no period behind it, any moment in the past will do */
	if (when <= 0 && !take)
		when = 1;
	if (when <= 0)
		return 1;
	its[0] = (int64_t)(tm->interval_ns / 1000000000ULL);
	its[1] = (int64_t)(tm->interval_ns % 1000000000ULL);
	its[2] = when / 1000000000LL;
	its[3] = when % 1000000000LL;
	r = rsys4(NR_timer_settime, id, 1 /* TIMER_ABSTIME */, its, 0);
	if (r)
		fail(a, RST_STEP_TIMER, r, tm->id, 1);
	if (!take)
		return 0;
	r = rsys4(NR_rt_sigtimedwait, &set, &info, wait, 8);
	if (r != tm->signo || info.code != -2 /* SI_TIMER */ || info.timerid != id)
		fail(a, RST_STEP_TIMER, r < 0 ? r : -R_EAGAIN, tm->id, 2);
	return 0;
}

/* Seccomp, the very last: strict mode in each thread; the filters, oldest
 * first, by the main thread for all (TSYNC: the threads share the chain as
 * they did).  kupdate traces the process with PTRACE_O_SUSPEND_SECCOMP, so
 * nothing is enforced until it lets the process go. */
static void set_seccomp(struct rst_args *a, long idx)
{
	struct rst_seccomp *s = &a->seccomp;
	struct rst_seccomp_filter *f = AT(a, s->off);
	long r;

	if (s->mode == 1) {
		r = rsys3(NR_seccomp, R_SECCOMP_MODE_STRICT, 0, 0);
		if (r)
			fail(a, RST_STEP_SECCOMP, r, 0, idx);
		return;
	}
	if (s->mode != 2 || idx)
		return;
	for (uint32_t i = 0; i < s->nr; i++) {
		struct {
			uint16_t len;
			uint16_t pad[3];
			uint64_t filter;
		} prog = { (uint16_t)f[i].len, { 0, 0, 0 }, (uint64_t)AT(a, f[i].off) };

		r = rsys3(NR_seccomp, R_SECCOMP_MODE_FILTER,
			  f[i].flags | (a->nr_threads > 1 ? R_SECCOMP_FLAG_TSYNC : 0), &prog);
		if (r)
			fail(a, RST_STEP_SECCOMP, r > 0 ? -R_EAGAIN : r, r > 0 ? r : 0, i);
	}
}

static void queue_signals(struct rst_args *a, long idx, uint32_t off, uint32_t n, int tid)
{
	int tgid = rsys0(NR_getpid);

	for (uint32_t i = 0; i < n; i++) {
		int32_t *info = AT(a, off + i * 128);
		long r = tid ? rsys4(NR_rt_tgsigqueueinfo, tgid, tid, info[0], info)
			     : rsys3(NR_rt_sigqueueinfo, tgid, info[0], info);

		if (r)
			fail(a, RST_STEP_SIGQUEUE, r, info[0], idx);
	}
}

static void thread_setup(struct rst_args *a, long idx)
{
	struct rst_thread *t = (struct rst_thread *)AT(a, a->threads_off) + idx;
	int late;
	long r;

	rsys1(NR_set_tid_address, t->clear_child_tid);
	if (t->robust_list) {
		r = rsys2(NR_set_robust_list, t->robust_list, t->robust_len);
		if (r < 0)
			fail(a, RST_STEP_THREAD, r, t->robust_list, idx);
	}
	if (t->has_rseq) {
		r = rsys4(NR_rseq, t->rseq_ptr, t->rseq_len, 0, t->rseq_sig);
		if (r < 0)
			fail(a, RST_STEP_RSEQ, r, t->rseq_ptr, idx);
	}
	if (t->comm[0])
		rsys2(NR_prctl, R_PR_SET_NAME, t->comm);
	if (t->has_altstack) {
		struct {
			uint64_t sp;
			int32_t flags, pad;
			uint64_t size;
		} ss = { t->altstack_sp, (int32_t)t->altstack_flags, 0, t->altstack_size };

		r = rsys2(NR_sigaltstack, &ss, 0);
		if (r)
			fail(a, RST_STEP_ALTSTACK, r, t->altstack_sp, idx);
	}
	if (t->sched_attr_len) {
		/* the nice value first: sched_setattr leaves it alone for
		 * SCHED_IDLE and the real-time policies, which keep it */
		if (t->sched_attr_len >= 20)
			rsys3(NR_setpriority, 0 /* PRIO_PROCESS: this thread */, 0,
			      *(int32_t *)(t->sched_attr + 16));
		r = rsys3(NR_sched_setattr, 0, t->sched_attr, 0);
		if (r)
			fail(a, RST_STEP_SCHED, r, 0, idx);
	}
	if (t->affinity_len) {
		r = rsys3(NR_sched_setaffinity, 0, t->affinity_len, t->affinity);
		if (r)
			fail(a, RST_STEP_SCHED, r, 1, idx);
	}
	queue_signals(a, idx, t->pending_off, t->nr_pending, t->self_tid);
	/* installing a filter needs no_new_privs or CAP_SYS_ADMIN: when the
	 * restored credentials have neither (they were dropped after the
	 * filters went in), before them */
	late = !a->creds.present || a->creds.nnp || (a->creds.cap_eff >> R_CAP_SYS_ADMIN & 1);
	if (!late)
		set_seccomp(a, idx);
	set_creds(a, idx);
	/* a change of credentials clears the parent-death signal */
	if (t->pdeathsig)
		rsys2(NR_prctl, R_PR_SET_PDEATHSIG, t->pdeathsig);
	if (late)
		set_seccomp(a, idx);
}

static void __attribute__((noreturn)) thread_main(struct rst_args *a, long idx)
{
	struct rst_thread *t = (struct rst_thread *)AT(a, a->threads_off) + idx;

	if (a->userns_fd >= 0 || a->born_in_userns) {
		/* made through ns_last_pid: if something forked in between took
		 * its tid, this thread goes, the main thread tries again
		 * (clone_by_last_pid) */
		while (!__atomic_load_n(&t->tid_verdict, __ATOMIC_ACQUIRE))
			rsys4(NR_futex, &t->tid_verdict, R_FUTEX_WAIT, 0, 0);
		if (t->tid_verdict != 1)
			rsys1(NR_exit, 0);
	}
	if (rsys0(NR_gettid) != t->self_tid)
		fail(a, RST_STEP_CLONE, -R_EAGAIN, 0, idx);
	thread_setup(a, idx);
	park();
}

/* A run goes in steps of FILL_STEP: populated (MADV_POPULATE_WRITE, 5.14;
 * without it the copy faults the pages one by one), read into place, and
 * summed while the step is still in the cache, rather than each pass over
 * the whole run from memory. */
#define FILL_STEP (512UL << 10)

/* bytes [from, to) of a run; *c: the raw crc register, carried on */
static void fill_range(struct rst_args *a, struct rst_run *run, uint64_t from, uint64_t to,
		       uint32_t vi, uint32_t k, int check, uint32_t *c)
{
	unsigned char *dst = (unsigned char *)run->vaddr;

	while (from < to) {
		uint64_t step = to - from < FILL_STEP ? to - from : FILL_STEP, got = 0;

		if (a->populate)
			rsys3(NR_madvise, dst + from, step, 23);
		while (got < step) {
			long n = rsys4(NR_pread64, run->fd, dst + from + got, step - got,
				       run->file_off + from + got);

			if (n == -R_EINTR)
				continue;
			if (n <= 0)
				fail(a, RST_STEP_FILL, n ? n : -5, run->vaddr + from + got, vi);
			got += n;
		}
		if (check)
			*c = a->verify_crc == 1 ? crc32c_hw_update(*c, dst + from, step, k)
						: crc32c_sw_update(*c, dst + from, step,
								   AT(a, a->crc_tab_off));
		from += step;
	}
}

/* the stops kupdate handles (RST_HELPER_*) */
void rst_helper_start(uint64_t first_run, uint64_t off, uint64_t end_run);
long rst_helper_wait(void);

static void fill_pages(struct rst_args *a, struct rst_vma *v, uint32_t vi, uint32_t k)
{
	struct rst_run *runs = AT(a, a->runs_off);
	uint32_t end = v->first_run + v->nr_runs, split = end;
	uint64_t pages = 0, split_off = 0;

	for (uint32_t r = v->first_run; r < end; r++) {
		struct rst_run *run = &runs[r];
		uint64_t len = run->nr_pages * PAGE;

		if (run->vaddr < v->start || run->vaddr + len > v->end ||
		    len / PAGE != run->nr_pages)
			fail(a, RST_STEP_FILL, -22, run->vaddr, vi);
		pages += run->nr_pages;
	}
	/* kupdate takes the second half, cut at a page */
	if (a->fill_helper && pages >= a->fill_helper) {
		uint64_t half = pages / 2;

		for (split = v->first_run; half >= runs[split].nr_pages; split++)
			half -= runs[split].nr_pages;
		split_off = half * PAGE;
		rst_helper_start(split, split_off, end);
	}
	for (uint32_t r = v->first_run; r < end && r <= split; r++) {
		struct rst_run *run = &runs[r];
		uint64_t len = run->nr_pages * PAGE;
		int check = a->verify_crc && !(run->flags & RST_RUN_NOCRC);
		uint32_t c = ~0U;

		if (r == split && !split_off)
			break;
		fill_range(a, run, 0, r == split ? split_off : len, vi, k, check, &c);
		if (r == split) {
			long h = rst_helper_wait();

			if (h < 0)
				fail(a, h == -74 ? RST_STEP_CRC : RST_STEP_FILL, h,
				     run->vaddr + split_off, vi);
			if (check && crc32c_gf2_mul(~c, crc32c_x_pow_bytes(len - split_off)) !=
					     ((uint32_t)h ^ run->crc))
				fail(a, RST_STEP_CRC, -74 /* EBADMSG */, run->vaddr, vi);
			split_off = 0;
			split = end;
			break;
		}
		if (check && ~c != run->crc)
			fail(a, RST_STEP_CRC, -74 /* EBADMSG */, run->vaddr, vi);
	}
	if (split != end && !split_off) {
		/* the cut fell between two runs: only wait */
		long h = rst_helper_wait();

		if (h < 0)
			fail(a, h == -74 ? RST_STEP_CRC : RST_STEP_FILL, h, runs[split].vaddr, vi);
	}
}

/* an anonymous mapping made elsewhere, with an anon_vma, then moved to
 * v->start (map_vmas: apart); returns where it is, or an error */
static long map_apart(const struct rst_vma *v, uint64_t len, uint32_t prot)
{
	long tmp =
		rsys6(NR_mmap, 0, len, prot | R_PROT_WRITE, v->mmap_flags | R_MAP_ANONYMOUS, -1, 0);
	long r;

	if (tmp < 0)
		return tmp;
	if ((uint64_t)tmp == v->start) {
		/* the hole it is meant for: made once more, elsewhere */
		long t2 = rsys6(NR_mmap, 0, len, prot | R_PROT_WRITE,
				v->mmap_flags | R_MAP_ANONYMOUS, -1, 0);

		rsys2(NR_munmap, tmp, len);
		if (t2 < 0)
			return t2;
		tmp = t2;
	}
	*(volatile char *)tmp = 0;
	rsys3(NR_madvise, tmp, 4096, R_MADV_DONTNEED);
	r = rsys5(NR_mremap, tmp, len, len, R_MREMAP_MAYMOVE | R_MREMAP_FIXED, v->start);
	if (r != (long)v->start)
		rsys2(NR_munmap, tmp, len);
	if (r >= 0 && (prot | R_PROT_WRITE) != prot)
		r = rsys3(NR_mprotect, v->start, len, prot) ?: r;
	return r;
}

/* a piece of a packet socket's ring: the kernel maps a ring only whole,
 * from its start (packet_mmap) */
static long map_ring(const struct rst_vma *v, uint64_t len, uint32_t prot)
{
	long t = rsys6(NR_mmap, 0, v->ring_len, prot, R_MAP_SHARED, v->fd, 0), r;

	if ((unsigned long)t > -4096UL)
		return t;
	r = rsys5(NR_mremap, t + v->pgoff, len, len, R_MREMAP_MAYMOVE | R_MREMAP_FIXED, v->start);
	if (v->pgoff)
		rsys2(NR_munmap, t, v->pgoff);
	if (v->pgoff + len < v->ring_len)
		rsys2(NR_munmap, t + v->pgoff + len, v->ring_len - v->pgoff - len);
	return r;
}

static void map_vmas(struct rst_args *a)
{
	struct rst_vma *vmas = AT(a, a->vmas_off);
	uint32_t k = a->verify_crc ? crc32c_x_pow_bytes(CRC32C_BLOCK) : 0;

	for (uint32_t i = 0; i < a->nr_vmas; i++) {
		struct rst_vma *v = &vmas[i];
		uint64_t len = v->end - v->start;
		uint32_t prot = v->prot | (v->nr_runs || v->src_len ? R_PROT_WRITE : 0);
		/* Two private anonymous mappings side by side, alike in all
		 * that the dump saw, were apart for a reason it does not see
		 * (one moved there by mremap, or inherited through fork: its
		 * page offset or anon_vma differs).  Mapped plainly, this one
		 * would merge into the one before (and its first fault would
		 * even take that one's anon_vma).  So it is made elsewhere,
		 * given an anon_vma there (a page written and dropped), and
		 * moved into place: it keeps the page offset of where it was
		 * made, and the kernel merges no mappings whose offsets do not
		 * follow on. */
		const struct rst_vma *pv = i ? &vmas[i - 1] : 0;
		int apart = pv && pv->end == v->start && v->fd < 0 && pv->fd < 0 &&
			    !((v->flags | pv->flags) & (RST_VMA_SYSV_ATTACH | RST_VMA_SYSV_PART)) &&
			    pv->prot == v->prot && pv->mmap_flags == v->mmap_flags &&
			    !(v->mmap_flags & (R_MAP_SHARED | R_MAP_GROWSDOWN));
		long r;

		if (v->flags & RST_VMA_PREMAP) {
			/* filled already, its pages shared with its children */
			r = rsys5(NR_mremap, v->premap, len, len, R_MREMAP_MAYMOVE | R_MREMAP_FIXED,
				  v->start);
			prot = R_PROT_READ | R_PROT_WRITE;
		} else if (v->flags & (RST_VMA_SYSV_ATTACH | RST_VMA_SYSV_PART)) {
			/* a real attach, so that shmdt works: it maps the whole
			 * segment, the parts after this one too */
			int ro = !!(v->flags & RST_VMA_SYSV_RDONLY);

			prot = ro ? R_PROT_READ : R_PROT_READ | R_PROT_WRITE;
			if (v->flags & RST_VMA_SYSV_ATTACH)
				r = rsys3(NR_shmat, v->shmid, v->start,
					  R_SHM_REMAP | (ro ? R_SHM_RDONLY : 0));
			else
				r = v->start;
		} else if (v->flags & RST_VMA_RING)
			r = map_ring(v, len, prot);
		else if (v->fd >= 0)
			r = rsys6(NR_mmap, v->start, len, prot, v->mmap_flags | R_MAP_FIXED, v->fd,
				  v->pgoff);
		else if (apart)
			r = map_apart(v, len, prot);
		else
			r = rsys6(NR_mmap, v->start, len, prot,
				  v->mmap_flags | R_MAP_FIXED | R_MAP_ANONYMOUS, -1, 0);
		if (r != (long)v->start)
			fail(a, RST_STEP_MMAP, r, v->start, i);
		if (v->nr_runs)
			fill_pages(a, v, i, k);
		if (v->src_len)
			memcpy((void *)v->start, AT(a, v->src_off), v->src_len);
		if (prot != v->prot) {
			r = rsys3(NR_mprotect, v->start, len, v->prot);
			if (r)
				fail(a, RST_STEP_MPROTECT, r, v->start, i);
		}
		if (v->madv) {
			static const struct {
				uint32_t bit;
				int advice;
			} adv[] = {
				{ RST_MADV_DONTFORK, R_MADV_DONTFORK },
				{ RST_MADV_DONTDUMP, R_MADV_DONTDUMP },
				{ RST_MADV_HUGEPAGE, R_MADV_HUGEPAGE },
				{ RST_MADV_NOHUGEPAGE, R_MADV_NOHUGEPAGE },
				{ RST_MADV_MERGEABLE, R_MADV_MERGEABLE },
				{ RST_MADV_WIPEONFORK, R_MADV_WIPEONFORK },
				{ RST_MADV_SEQUENTIAL, R_MADV_SEQUENTIAL },
				{ RST_MADV_RANDOM, R_MADV_RANDOM },
			};
			for (unsigned j = 0; j < sizeof(adv) / sizeof(adv[0]); j++) {
				if (!(v->madv & adv[j].bit))
					continue;
				r = rsys3(NR_madvise, v->start, len, adv[j].advice);
				if (r)
					fail(a, RST_STEP_MADVISE, r, v->start, i);
			}
		}
		if (v->name_off)
			/* a kernel without anon VMA names simply keeps them unnamed */
			rsys5(NR_prctl, R_PR_SET_VMA, R_PR_SET_VMA_ANON_NAME, v->start, len,
			      AT(a, v->name_off));
		if (v->flags & RST_VMA_LOCKED) {
			r = rsys2(NR_mlock, v->start, len);
			if (r)
				fail(a, RST_STEP_MLOCK, r, v->start, i);
		}
	}
}

/* Offset 0: the entry.  Offset 8: a syscall instruction kupdate uses to
 * run the final munmap of the blob from outside (RST_SYSCALL_OFFSET). */
__asm__(".section .text.entry,\"ax\",@progbits\n"
	".globl rst_entry\n"
	"rst_entry:\n"
	"	jmp rst_main\n"
	"	.balign 8\n"
	"rst_syscall_insn:\n"
	"	syscall\n"
	"	int3\n"
	"	.balign 8\n"
	".globl rst_helper_start\n"
	"rst_helper_start:\n"
	"	int3\n"
	"	ret\n"
	"	.balign 8\n"
	".globl rst_helper_wait\n"
	"rst_helper_wait:\n"
	"	int3\n"
	"	ret\n"
	"	.balign 8\n"
	".globl rst_tid_prepare\n"
	"rst_tid_prepare:\n"
	"	int3\n"
	"	ret\n"
	"	.balign 8\n"
	".globl rst_tid_done\n"
	"rst_tid_done:\n"
	"	int3\n"
	"	ret\n"
	".text\n");

/* 1. the kernel's special mappings wait inside the blob while ... with
 * the mappings made before the children were forked (their page offset
 * in 2 MiB kept, so that huge pages stay whole) */
static void park_mappings(struct rst_args *a)
{
	uint64_t park_at = a->park_start;
	long r;

	for (uint32_t i = 0; i < a->nr_moves; i++) {
		struct rst_move *m = &a->moves[i];

		r = rsys5(NR_mremap, m->from, m->len, m->len, R_MREMAP_MAYMOVE | R_MREMAP_FIXED,
			  park_at);
		if (r != (long)park_at)
			fail(a, RST_STEP_PARK, r, m->from, i);
		m->from = park_at;
		park_at += m->len;
	}
	for (uint32_t i = 0; i < a->nr_vmas; i++) {
		struct rst_vma *v = (struct rst_vma *)AT(a, a->vmas_off) + i;
		uint64_t len = v->end - v->start;

		if (!(v->flags & RST_VMA_PREMAP))
			continue;
		if (len >= RST_HUGE)
			park_at += (v->start - park_at) & (RST_HUGE - 1);
		r = rsys5(NR_mremap, v->premap, len, len, R_MREMAP_MAYMOVE | R_MREMAP_FIXED,
			  park_at);
		if (r != (long)park_at)
			fail(a, RST_STEP_PARK, r, v->premap, i);
		v->premap = park_at;
		park_at += len;
	}
}

/* 2. ... everything of the old address space but the blob goes ... */
static void unmap_old(struct rst_args *a)
{
	uint64_t blob_end = a->blob_start + a->blob_len;
	long r;

	r = rsys2(NR_munmap, 0, a->blob_start);
	if (r)
		fail(a, RST_STEP_UNMAP, r, 0, 0);
	r = rsys2(NR_munmap, blob_end, a->task_size - blob_end);
	if (r)
		fail(a, RST_STEP_UNMAP, r, blob_end, 0);
}

/* 3. ... and they move to where the saved process had them */
static void move_specials(struct rst_args *a)
{
	for (uint32_t i = 0; i < a->nr_moves; i++) {
		struct rst_move *m = &a->moves[i];
		long r = rsys5(NR_mremap, m->from, m->len, m->len,
			       R_MREMAP_MAYMOVE | R_MREMAP_FIXED, m->to);

		if (r != (long)m->to)
			fail(a, RST_STEP_MOVE, r, m->to, i);
	}
}

/* 5. mm fields, auxv, exe link */
static void set_mm(struct rst_args *a)
{
	struct r_prctl_mm_map mm;
	long r;

	mm.start_code = a->start_code;
	mm.end_code = a->end_code;
	mm.start_data = a->start_data;
	mm.end_data = a->end_data;
	mm.start_brk = a->start_brk;
	mm.brk = a->brk;
	mm.start_stack = a->start_stack;
	mm.arg_start = a->arg_start;
	mm.arg_end = a->arg_end;
	mm.env_start = a->env_start;
	mm.env_end = a->env_end;
	mm.auxv = (uint64_t)AT(a, a->auxv_off);
	mm.auxv_size = a->auxv_size;
	mm.exe_fd = (uint32_t)a->exe_fd;
	r = rsys5(NR_prctl, R_PR_SET_MM, R_PR_SET_MM_MAP, &mm, sizeof(mm), 0);
	if (r)
		fail(a, RST_STEP_MM, r, 0, 0);
}

/* 7a. resource limits and interval timers */
static void set_limits_itimers(struct rst_args *a)
{
	long r;

	for (uint32_t i = 0; i < a->nr_rlimits; i++) {
		r = rsys4(NR_prlimit64, 0, i, a->rlimits[i], 0);
		if (r)
			fail(a, RST_STEP_RLIMIT, r, a->rlimits[i][1], i);
	}
	for (uint32_t w = 0; w < 3; w++) {
		/* ITIMER_REAL keeps step with the monotonic clock */
		uint64_t left =
			w ? a->itimers[w][0] : (time_left(a, a->itimers[w][0] * 1000) + 999) / 1000;
		/* struct itimerval: interval first */
		int64_t it[4] = { (int64_t)(a->itimers[w][1] / 1000000),
				  (int64_t)(a->itimers[w][1] % 1000000), (int64_t)(left / 1000000),
				  (int64_t)(left % 1000000) };

		if (!a->itimers[w][0])
			continue;
		r = rsys3(NR_setitimer, w, it, 0);
		if (r)
			fail(a, RST_STEP_ITIMER, r, a->itimers[w][0], w);
	}
}

/* 7. threads, each with its own tid */
/* Into the tree's user namespace (task/namespaces.c): after what needs
 * kupdate's privileges in the initial one (the memory map, the limits),
 * before the threads are made (setns wants a single thread), and the
 * supplementary groups set first, as the initial namespace names them (a
 * namespace may deny setgroups).  Its uids and gids are given as the
 * namespace names them. */
static void enter_userns(struct rst_args *a)
{
	long r;

	if (a->creds.present) {
		r = rsys2(NR_setgroups, a->creds.nr_groups, AT(a, a->creds.groups_off));
		if (r)
			fail(a, RST_STEP_CREDS, r, 11, 0);
	}
	r = rsys2(NR_setns, a->userns_fd, R_CLONE_NEWUSER);
	if (r)
		fail(a, RST_STEP_CREDS, r, 12, 0);
}

void rst_tid_prepare(uint64_t tid);
long rst_tid_done(long r);

/* times a thread made through ns_last_pid is tried again when something
 * else took its tid in between (the boot forks all the while) */
#define TID_TRIES 50

/* thread i through ns_last_pid (kupdate sets it: RST_TID_PREP_OFFSET) for
 * its tid in kupdate's pid namespace, set_tid for those below; one that
 * got another tid there exits, and once it is gone (its clear_child_tid
 * word cleared, its stack free) the next try goes */
static long clone_by_last_pid(struct rst_args *a, struct r_clone_args *ca, uint32_t i)
{
	struct rst_thread *t = (struct rst_thread *)AT(a, a->threads_off) + i;
	long r = -R_EAGAIN;

	for (int k = 0; k < TID_TRIES; k++) {
		/* cleared by the kernel when the thread is gone; until then
		 * (thread_setup gives it its own) the right one keeps it */
		volatile int32_t gone = 1;
		long ok;

		ca->flags |= R_CLONE_CHILD_CLEARTID;
		ca->child_tid = (uint64_t)&gone;
		t->tid_verdict = 0;
		rst_tid_prepare((uint64_t)t->tid);
		r = rst_clone3(ca, sizeof(*ca), thread_main, a, i);
		ok = rst_tid_done(r);
		if (r < 0)
			return r;
		__atomic_store_n(&t->tid_verdict, ok == 1 ? 1 : 2, __ATOMIC_RELEASE);
		rsys4(NR_futex, &t->tid_verdict, R_FUTEX_WAKE, 1, 0);
		if (ok == 1)
			return r;
		while (gone != 0)
			rsys4(NR_futex, &gone, R_FUTEX_WAIT, 1, 0);
		r = -R_EAGAIN;
	}
	return r;
}

static void clone_threads(struct rst_args *a)
{
	struct rst_thread *th = AT(a, a->threads_off);
	int in_userns = a->userns_fd >= 0 || a->born_in_userns;

	for (uint32_t i = 1; i < a->nr_threads; i++) {
		struct r_clone_args ca;
		long r;

		memset(&ca, 0, sizeof(ca));
		ca.flags = R_CLONE_VM | R_CLONE_FS | R_CLONE_FILES | R_CLONE_SIGHAND |
			   R_CLONE_THREAD | R_CLONE_SYSVSEM;
		ca.stack = th[i].stack_top - RST_STACK_SIZE;
		ca.stack_size = RST_STACK_SIZE;
		ca.set_tid = (uint64_t)th[i].set_tid;
		ca.set_tid_size = th[i].nr_set_tid;
		if (in_userns) {
			/* kupdate's level, the last, through ns_last_pid */
			ca.set_tid_size = th[i].nr_set_tid - 1;
			if (!ca.set_tid_size)
				ca.set_tid = 0;
			r = clone_by_last_pid(a, &ca, i);
		} else {
			r = rst_clone3(&ca, sizeof(ca), thread_main, a, i);
		}
		if (r != th[i].self_tid)
			fail(a, RST_STEP_CLONE, r < 0 ? r : -R_EAGAIN, th[i].tid, i);
	}
}

/* 8. signal dispositions, now that nothing of the restore can raise one */
static void set_sigactions(struct rst_args *a)
{
	for (uint32_t i = 0; i < a->nr_sigacts; i++) {
		struct rst_sigaction *sa = (struct rst_sigaction *)AT(a, a->sigacts_off) + i;
		uint64_t act[4] = { sa->handler, sa->flags, sa->restorer, sa->mask };
		long r = rsys4(NR_rt_sigaction, sa->sig, act, 0, 8);

		if (r)
			fail(a, RST_STEP_SIGACTION, r, sa->handler, sa->sig);
	}
}

/* POSIX timer i with its id (stand-ins fill the gap below it), armed */
static void create_timer(struct rst_args *a, struct rst_timer *tm, uint32_t i, int main_tid)
{
	struct {
		uint64_t value;
		int32_t signo, notify, tid;
		int32_t pad[11];
	} sev;
	int32_t id = -1;
	long r;

	memset(&sev, 0, sizeof(sev));
	sev.value = tm->sival;
	sev.signo = tm->signo;
	sev.notify = tm->notify;
	sev.tid = tm->tid;
	for (;;) {
		r = rsys3(NR_timer_create, tm->clock, &sev, &id);
		if (r)
			fail(a, RST_STEP_TIMER, r, tm->id, i);
		if (id == tm->id)
			break;
		/* ids come from a counter that only goes up: a stand-in
		 * moves it on and can go at once */
		rsys1(NR_timer_delete, id);
		if (id > tm->id)
			fail(a, RST_STEP_TIMER, -R_EINVAL, tm->id, i);
	}
	{
		/* wall clocks keep step with the monotonic one; CPU
		 * clocks (negative ids) keep what they had left */
		uint64_t left =
			tm->clock >= 0 && tm->value_ns ? time_left(a, tm->value_ns) : tm->value_ns;
		/* struct itimerspec: interval first */
		int64_t its[4] = { (int64_t)(tm->interval_ns / 1000000000ULL),
				   (int64_t)(tm->interval_ns % 1000000000ULL),
				   (int64_t)(left / 1000000000ULL),
				   (int64_t)(left % 1000000000ULL) };

		if (!restore_overrun(a, tm, id, left, main_tid))
			return;
		r = rsys4(NR_timer_settime, id, 0, its, 0);
		if (r)
			fail(a, RST_STEP_TIMER, r, tm->id, i);
	}
}

__attribute__((used, noreturn)) void rst_main(struct rst_args *a);
__attribute__((used, noreturn)) void rst_main(struct rst_args *a)
{
	struct rst_thread *th = AT(a, a->threads_off);

	if (a->magic != RST_MAGIC || a->version != RST_VERSION)
		fail(a, RST_STEP_NONE, -22, 0, 0);
	/* nothing is delivered until kupdate sets the final masks (SIGCHLD was
	 * left open for the zombies, which are dead by now) */
	{
		uint64_t all = ~0ULL;

		rsys4(NR_rt_sigprocmask, 2 /* SIG_SETMASK */, &all, 0, 8);
	}

	/* 1-3. the special mappings and the premapped ones out of the way,
	 * the old address space gone, the special ones in place */
	park_mappings(a);
	unmap_old(a);
	move_specials(a);

	/* 4. the saved mappings and their pages */
	map_vmas(a);

	set_mm(a);
	set_limits_itimers(a);
	if (a->userns_fd >= 0)
		enter_userns(a);

	/* 6. descriptors that only served the restore */
	if (a->close_from >= 0)
		rsys3(NR_close_range, a->close_from, ~0U, 0);

	clone_threads(a);
	set_sigactions(a);

	/* 8b. POSIX timers, with their ids (stand-ins fill the gaps), now
	 * that the threads they may notify exist */
	for (uint32_t i = 0; i < a->nr_timers; i++)
		create_timer(a, (struct rst_timer *)AT(a, a->timers_off) + i, i, th[0].self_tid);
	queue_signals(a, 0, a->shared_pending_off, a->nr_shared_pending, 0);

	/* 9. the main thread's own per-thread state, then wait for kupdate */
	thread_setup(a, 0);
	if (a->creds.present)
		rsys2(NR_prctl, R_PR_SET_DUMPABLE, a->creds.dumpable);
	park();
}
