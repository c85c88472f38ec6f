/* timerfd: clock, time left, interval and expirations not yet read.
 *
 * Dump: fdinfo has the clock, the settime flags and the unread
 * expirations, but not always the time left: a periodic timer that
 * expired stays expired (time left 0) until it is read.  So the time left
 * and the interval come from timerfd_gettime(2) on kupdate's own
 * descriptor of it (pidfd_getfd), which moves such a timer on to its next
 * expiry, counting the ones missed; fdinfo is read after that.  The time
 * left is taken back to the moment the tree was seized.
 * Restore: the timer is armed with the time it had left, like every timer
 * of the tree (timers.c): the time spent checkpointed does not count.  A
 * TFD_TIMER_CANCEL_ON_SET timer is armed at the absolute time that many
 * nanoseconds from now, as it needs an absolute CLOCK_REALTIME timer.
 * Unread expirations come back with TFD_IOC_SET_TICKS. */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <time.h>

#include "dump.h"
#include "fdinfo.h"
#include "log.h"
#include "sockets.h"
#include "timerfd.h"
#include "util.h"

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif
#ifndef TFD_TIMER_CANCEL_ON_SET
#define TFD_TIMER_CANCEL_ON_SET (1 << 1)
#endif

#define NSEC 1000000000ULL

int timerfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo0,
		 struct cr_file *f)
{
	_cleanup_free_ char *fdinfo = NULL;
	_cleanup_close_ int tfd = sk_dup(p, fd);
	struct itimerspec its;
	const char *clk, *ticks, *fl;
	TimerfdFile *t;
	int ret;

	(void)fdinfo0;
	if (tfd < 0)
		return tfd;
	if (timerfd_gettime(tfd, &its))
		return pr_errno("pid %d: fd %d: timerfd_gettime", p->pid, fd);
	ret = read_proc(&fdinfo, NULL, "/proc/%d/fdinfo/%d", p->pid, fd);
	if (ret) {
		pr_err("pid %d: cannot read fdinfo of fd %d: %s", p->pid, fd, strerror(-ret));
		return ret;
	}
	clk = fdinfo_find(fdinfo, "clockid:");
	ticks = fdinfo_find(fdinfo, "ticks:");
	fl = fdinfo_find(fdinfo, "settime flags:");
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	timerfd_file__init(t);
	f->tmr = t;
	if (!clk || !ticks || !fl) {
		pr_err("pid %d: fd %d: cannot parse the timerfd's fdinfo", p->pid, fd);
		return -EINVAL;
	}
	t->value_ns = its.it_value.tv_sec * NSEC + its.it_value.tv_nsec;
	t->interval_ns = its.it_interval.tv_sec * NSEC + its.it_interval.tv_nsec;
	t->clock = strtoul(clk, NULL, 10);
	t->settime_flags = strtoul(fl, NULL, 8);
	t->ticks = strtoull(ticks, NULL, 10);
	/* the time left when the tree was seized: it ran on meanwhile, and
	 * the time spent checkpointed does not count; an absolute one keeps
	 * its date.  Unless it expired in between, which the kernel counted:
	 * it did not when no expiration is unread (a first expiration further
	 * than its period, not reached yet, included); a periodic one with
	 * some unread did when the time left plus that exceeds a period */
	if (t->value_ns && ctx->t_seized > 0 && !(t->settime_flags & TFD_TIMER_ABSTIME)) {
		uint64_t ran = (uint64_t)(now_ns(CLOCK_MONOTONIC) - ctx->t_seized);

		if (!t->ticks || t->value_ns + ran <= t->interval_ns)
			t->value_ns += ran;
	}
	t->has_ticks = t->ticks != 0;
	return 0;
}

void timerfd_save(const struct cr_file *f, FileEntry *e)
{
	e->tmr = f->tmr;
}

void timerfd_free_dump(struct cr_file *f)
{
	TimerfdFile *t = f->tmr;

	free(t);
}

int timerfd_validate(const struct rfiles *f, const FileEntry *e)
{
	const TimerfdFile *t = e->tmr;

	if (!t ||
	    (t->clock != CLOCK_REALTIME && t->clock != CLOCK_MONOTONIC &&
	     t->clock != CLOCK_BOOTTIME && t->clock != CLOCK_REALTIME_ALARM &&
	     t->clock != CLOCK_BOOTTIME_ALARM) ||
	    (t->settime_flags & ~(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)) ||
	    t->value_ns / NSEC > INT64_MAX / 2 || t->interval_ns / NSEC > INT64_MAX / 2) {
		pr_err("image files.img is damaged: timerfd %u is invalid", e->id);
		return -EINVAL;
	}
	return 0;
}

int timerfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what)
{
	const TimerfdFile *t = e->tmr;
	struct itimerspec its;
	int flags = 0, fd, ret;

	fd = timerfd_create(t->clock, TFD_CLOEXEC | (e->flags & O_NONBLOCK ? TFD_NONBLOCK : 0));
	if (fd < 0)
		return pr_errno("%s: cannot create a timerfd on clock %u", what, t->clock);
	memset(&its, 0, sizeof(its));
	its.it_interval.tv_sec = t->interval_ns / NSEC;
	its.it_interval.tv_nsec = t->interval_ns % NSEC;
	if (t->value_ns) {
		uint64_t v = t->value_ns;

		if (t->settime_flags & TFD_TIMER_CANCEL_ON_SET) {
			v += now_ns(t->clock);
			flags = TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET;
		}
		its.it_value.tv_sec = v / NSEC;
		its.it_value.tv_nsec = v % NSEC;
		if (timerfd_settime(fd, flags, &its, NULL)) {
			ret = pr_errno("%s: cannot arm the timerfd (%" PRIu64
				       " ns left, interval %" PRIu64 " ns)",
				       what, t->value_ns, t->interval_ns);
			close(fd);
			return ret;
		}
	}
	if (t->has_ticks && t->ticks && ioctl(fd, TFD_IOC_SET_TICKS, &t->ticks)) {
		ret = pr_errno("%s: cannot give the timerfd its %" PRIu64 " unread expirations",
			       what, t->ticks);
		close(fd);
		return ret;
	}
	return fd;
}
