/* Timers: interval timers (ITIMER_REAL, VIRTUAL, PROF) and POSIX timers
 * with their ids, clocks, notification, remaining time, interval and
 * overrun.  They are read by running getitimer/timer_gettime inside the
 * task; /proc/PID/timers lists the POSIX timers.
 *
 * The rule for time: a timer resumes with the time it had left when it was
 * dumped; the time the process spent checkpointed does not count (it was,
 * as far as its timers are concerned, stopped).  Timers on wall clocks
 * (REALTIME, MONOTONIC, BOOTTIME, TAI and the ITIMER_REAL) keep step with
 * the tree's CLOCK_MONOTONIC, which goes on from where it was (timens.c):
 * the restorer takes off what that clock ran between the reading of the
 * timers and their arming (the end of the dump, the restore).  CPU-time
 * timers (ITIMER_VIRTUAL/PROF, CPU clocks) keep what they had left; the
 * CPU clocks themselves start again from zero in the restored process (no
 * kernel interface sets them).  A timer armed with TIMER_ABSTIME comes
 * back relative: on CLOCK_REALTIME it no longer follows clock_settime().
 *
 * Restore: restorer.c creates the timers again with the same ids (creating
 * and deleting stand-ins to reach each id) and arms them.  A timer whose
 * signal was still queued queues its own again (armed to have expired a
 * period ago); one whose last delivered signal counted overruns gets that
 * count back (armed to have expired that many periods ago, its signal
 * taken at once by the restorer): timer_settime clears the count, only a
 * delivery sets it. */
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#include "dump.h"
#include "image.h"
#include "images/timers.pb-c.h"
#include "log.h"
#include "remote.h"
#include "timens.h"
#include "timers.h"
#include "util.h"

static uint64_t tv_us(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static uint64_t ts_ns(struct timespec ts)
{
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* CPU-time clocks (negative ids, see clock_getcpuclockid(3)): the pid or
 * tid is encoded in the id; 0 means the creator (CLOCK_PROCESS_CPUTIME_ID,
 * CLOCK_THREAD_CPUTIME_ID as glibc passes them). */
#define CPUCLOCK_PID(c)	      ((pid_t) ~((c) >> 3))
#define CPUCLOCK_PERTHREAD(c) (((c)&4) != 0)
#define CPUCLOCK_WHICH(c)     ((c)&3)
#define CLOCKFD		      3

static int check_cpu_clock(struct cr_dump_ctx *ctx, struct cr_proc *p, int id, int clock)
{
	pid_t who = CPUCLOCK_PID(clock);

	if (clock >= 0)
		return 0;
	if (CPUCLOCK_WHICH(clock) == CLOCKFD) {
		pr_err("pid %d: POSIX timer %d runs on a dynamic clock (a PTP device, clock id "
		       "%d), which this kupdate cannot restore",
		       p->pid, id, clock);
		return -EOPNOTSUPP;
	}
	if (CPUCLOCK_PERTHREAD(clock)) {
		if (who == 0 && p->nr_threads > 1) {
			pr_err("pid %d: POSIX timer %d runs on the CPU clock of the thread that "
			       "created it (CLOCK_THREAD_CPUTIME_ID), and which thread that was "
			       "cannot be read in a process of %d threads; use "
			       "pthread_getcpuclockid() for such timers",
			       p->pid, id, p->nr_threads);
			return -EOPNOTSUPP;
		}
		for (int i = 0; who && i < p->nr_threads; i++)
			if (p->threads[i].tid == who)
				return 0;
		if (who) {
			pr_err("pid %d: POSIX timer %d runs on the CPU clock of thread %d, not one "
			       "of its threads",
			       p->pid, id, who);
			return -EOPNOTSUPP;
		}
		return 0;
	}
	if (who && who != p->pid && !dump_find_proc(ctx, who)) {
		pr_err("pid %d: POSIX timer %d runs on the CPU clock of pid %d, which is outside "
		       "the dumped tree",
		       p->pid, id, who);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int parse_timers(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *buf = NULL;
	char *l;
	int ret = read_proc(&buf, NULL, "/proc/%d/timers", p->pid);

	if (ret == -ENOENT)
		return 0;
	if (ret) {
		pr_err("pid %d: cannot read its POSIX timers: %s", p->pid, strerror(-ret));
		return ret;
	}
	for (l = strstr(buf, "ID:"); l; l = strstr(l + 1, "\nID:")) {
		struct cr_ptimer *nt, *t;
		char how[16] = "", who[8] = "";
		unsigned long long sival = 0;
		int id, signo, pid, clock;
		char *ln = l[0] == '\n' ? l + 1 : l;

		if (sscanf(ln, "ID: %d\nsignal: %d/%llx\nnotify: %15[a-z]/%7[a-z].%d\nClockID: %d",
			   &id, &signo, &sival, how, who, &pid, &clock) != 7) {
			pr_err("pid %d: cannot parse /proc/%d/timers", p->pid, p->pid);
			return -EINVAL;
		}
		nt = xrealloc_array(p->timers->ptimers, p->timers->nr_ptimers + 1, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		p->timers->ptimers = nt;
		t = &nt[p->timers->nr_ptimers++];
		memset(t, 0, sizeof(*t));
		t->id = id;
		t->signo = signo;
		t->sival = sival;
		t->clock = clock;
		ret = check_cpu_clock(ctx, p, id, clock);
		if (ret)
			return ret;
		t->notify = !strcmp(how, "none") ? SIGEV_NONE : SIGEV_SIGNAL;
		if (!strcmp(how, "thread")) {
			pr_err("pid %d: POSIX timer %d uses SIGEV_THREAD notification, which this "
			       "kupdate cannot restore",
			       p->pid, id);
			return -EOPNOTSUPP;
		}
		if (!strcmp(who, "tid")) {
			t->notify |= SIGEV_THREAD_ID;
			t->tid = pid;
		}
	}
	return 0;
}

/* A timer's signal still queued is the timer's own (preallocated): taken
 * by the program, it re-arms the timer and counts the overruns.  A copy
 * queued at restore would not, and the restored timer would queue another:
 * so it is taken out of the pending lists, and the restorer has the timer
 * queue its own again (restorer.c). */
static void take_timer_signals(struct cr_proc *p, uint8_t (*q)[128], int *nr)
{
	int k = 0;

	for (int i = 0; i < *nr; i++) {
		int32_t signo, code, tid;
		bool mine = false;

		memcpy(&signo, q[i], 4);
		memcpy(&code, q[i] + 8, 4);
		memcpy(&tid, q[i] + 16, 4); /* si_timerid */
		for (int t = 0; code == SI_TIMER && t < p->timers->nr_ptimers && !mine; t++)
			if (p->timers->ptimers[t].id == tid &&
			    p->timers->ptimers[t].signo == signo &&
			    !p->timers->ptimers[t].sig_pending) {
				p->timers->ptimers[t].sig_pending = true;
				mine = true;
			}
		if (!mine)
			memmove(q[k++], q[i], 128);
	}
	*nr = k;
}

int dump_timers(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct cr_thread *t = &p->threads[0];
	int64_t boot, ref;
	int ret;

	p->timers = calloc(1, sizeof(*p->timers));
	if (!p->timers)
		return -ENOMEM;
	/* the times are brought back to one moment, ref (kupdate's clock),
	 * which is p->timers->mono on the process's clock */
	ref = now_ns(CLOCK_MONOTONIC);
	ret = timens_clocks(p->pid, &p->timers->mono, &boot);
	if (ret)
		return ret;
	p->timers->mono -= now_ns(CLOCK_MONOTONIC) - ref;
	for (int w = 0; w < 3; w++) {
		struct itimerval it;
		long args[6] = { w }, res;
		int64_t at;

		ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_getitimer, args, 1,
					 &it, sizeof(it), &res);
		/* taken after the reading: a timer may come late, never early */
		at = now_ns(CLOCK_MONOTONIC);
		if (ret)
			return ret;
		if (res) {
			pr_err("pid %d: getitimer(%d) failed: %s", p->pid, w, strerror((int)-res));
			return (int)res;
		}
		p->timers->itimer[w][0] = tv_us(it.it_value);
		p->timers->itimer[w][1] = tv_us(it.it_interval);
		if (w == ITIMER_REAL && p->timers->itimer[w][0])
			p->timers->itimer[w][0] += (at - ref) / 1000;
	}
	ret = parse_timers(ctx, p);
	if (ret)
		return ret;
	for (int i = 0; i < p->timers->nr_ptimers; i++) {
		struct cr_ptimer *pt = &p->timers->ptimers[i];
		struct itimerspec its;
		long args[6] = { pt->id }, res;
		int64_t at;

		ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_timer_gettime, args,
					 1, &its, sizeof(its), &res);
		at = now_ns(CLOCK_MONOTONIC);
		if (ret)
			return ret;
		if (res) {
			pr_err("pid %d: timer_gettime(%d) failed: %s", p->pid, pt->id,
			       strerror((int)-res));
			return (int)res;
		}
		pt->value_ns = ts_ns(its.it_value);
		if (pt->clock >= 0 && pt->value_ns)
			pt->value_ns += at - ref;
		pt->interval_ns = ts_ns(its.it_interval);
		args[0] = pt->id;
		ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_timer_getoverrun, args,
				     &res);
		if (ret)
			return ret;
		pt->overrun = res > 0 ? res : 0;
	}
	/* dump_pending ran before */
	take_timer_signals(p, p->shared_pending, &p->nr_shared_pending);
	for (int i = 0; i < p->nr_threads; i++)
		take_timer_signals(p, p->threads[i].pending, &p->threads[i].nr_pending);
	return 0;
}

void timers_free_dump(struct cr_proc *p)
{
	if (p->timers)
		free(p->timers->ptimers);
	free(p->timers);
	p->timers = NULL;
}

int write_timers(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_writer w;
	TimersCore tc = TIMERS_CORE__INIT;
	Itimer it[3] = { ITIMER__INIT, ITIMER__INIT, ITIMER__INIT };
	Itimer **slot[3] = { &tc.real, &tc.virt, &tc.prof };
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "timers-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_TIMERS);
	if (ret)
		return ret;
	for (int i = 0; i < 3; i++) {
		if (!p->timers->itimer[i][0] && !p->timers->itimer[i][1])
			continue;
		it[i].value_us = p->timers->itimer[i][0];
		it[i].interval_us = p->timers->itimer[i][1];
		*slot[i] = &it[i];
	}
	tc.has_read_mono_ns = 1;
	tc.read_mono_ns = p->timers->mono;
	img_write(&w, &tc.base);
	for (int i = 0; i < p->timers->nr_ptimers; i++) {
		struct cr_ptimer *pt = &p->timers->ptimers[i];
		PosixTimer e = POSIX_TIMER__INIT;

		e.id = pt->id;
		e.clock = pt->clock;
		e.notify = pt->notify;
		e.signo = pt->signo;
		e.sival = pt->sival;
		if (pt->notify & SIGEV_THREAD_ID) {
			e.has_tid = 1;
			e.tid = pt->tid;
		}
		e.value_ns = pt->value_ns;
		e.interval_ns = pt->interval_ns;
		e.has_overrun = 1;
		e.overrun = pt->overrun;
		e.has_sig_pending = 1;
		e.sig_pending = pt->sig_pending;
		img_write(&w, &e.base);
	}
	return img_writer_close(&w);
}

/* ------------------------------------------------------------- restore */

void timers_free(struct rtimers *t)
{
	if (t->core)
		timers_core__free_unpacked(t->core, NULL);
	for (size_t i = 0; i < t->nr; i++)
		posix_timer__free_unpacked(t->timers[i], NULL);
	free(t->timers);
	memset(t, 0, sizeof(*t));
}

static int cmp_id(const void *a, const void *b)
{
	const PosixTimer *x = *(PosixTimer *const *)a, *y = *(PosixTimer *const *)b;
	return (x->id > y->id) - (x->id < y->id);
}

int timers_load(int dirfd, const PstreeEntry *pe, struct rtimers *t)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	memset(t, 0, sizeof(*t));
	snprintf(name, sizeof(name), "timers-%d.img", pe->pid);
	ret = img_reader_open(&r, dirfd, name, IMG_TIMERS);
	if (ret)
		return ret;
	ret = img_read_first(&r, &timers_core__descriptor, &m);
	if (ret) {
		img_reader_close(&r);
		return ret;
	}
	t->core = (TimersCore *)m;
	t->timers = calloc(r.nr ? r.nr : 1, sizeof(*t->timers));
	if (!t->timers) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &posix_timer__descriptor, &m)) > 0) {
		PosixTimer *pt = (PosixTimer *)m;
		bool tid_ok = !(pt->notify & SIGEV_THREAD_ID);
		/* a CPU clock: of this process or one of its threads (0: the
		 * creator, the main thread at restore), or another process */
		bool clock_ok = pt->clock >= 0 ? pt->clock <= 11
					       : CPUCLOCK_WHICH(pt->clock) != CLOCKFD &&
							 (!CPUCLOCK_PERTHREAD(pt->clock) ||
							  CPUCLOCK_PID(pt->clock) == 0);

		t->timers[t->nr++] = pt;
		for (size_t k = 0; k < pe->n_tids && !tid_ok; k++)
			tid_ok = pe->tids[k] == pt->tid;
		for (size_t k = 0; k < pe->n_tids && !clock_ok; k++)
			clock_ok = pe->tids[k] == CPUCLOCK_PID(pt->clock);
		if (pt->id < 0 || !clock_ok || pt->signo < 0 || pt->signo > 64 ||
		    ((pt->notify & ~SIGEV_THREAD_ID) != SIGEV_SIGNAL &&
		     (pt->notify & ~SIGEV_THREAD_ID) != SIGEV_NONE) ||
		    !tid_ok) {
			pr_err("image %s is damaged: POSIX timer %d is invalid", name, pt->id);
			ret = -EINVAL;
			break;
		}
	}
	img_reader_close(&r);
	if (ret < 0) {
		timers_free(t);
		return ret;
	}
	if (t->nr)
		qsort(t->timers, t->nr, sizeof(*t->timers), cmp_id);
	for (size_t i = 1; i < t->nr; i++)
		if (t->timers[i]->id == t->timers[i - 1]->id) {
			pr_err("image %s is damaged: POSIX timer %d appears twice", name,
			       t->timers[i]->id);
			timers_free(t);
			return -EINVAL;
		}
	return 0;
}
