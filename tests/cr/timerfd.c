/* timerfds survive with their clocks, time left, intervals and unread
 * expirations, and the time the process spent checkpointed does not count
 * (as for every timer of the tree):
 *  - A: CLOCK_MONOTONIC, 4 s, then every 1 s; after the restore it has
 *    4 s minus the time the process ran left, and fires then;
 *  - B: CLOCK_REALTIME set with TFD_TIMER_ABSTIME 60 s ahead, non-blocking;
 *  - C: CLOCK_BOOTTIME, non-blocking, fired once, unread: read gives 1;
 *  - D: disarmed;
 *  - E: CLOCK_MONOTONIC, every 2 s from 1 ms on, non-blocking: it expired
 *    once, unread (the kernel moves such a timer on only when it is read:
 *    its time left shows as 0 in fdinfo meanwhile).
 * The process measures the time it was stopped (the largest gap between
 * two readings of the clock, taken every millisecond); crrun keeps it
 * checkpointed for a second (--pause-ms) so that counting it shows. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

#define MS 1000000LL

static int64_t now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t left(int fd, int64_t *interval)
{
	struct itimerspec its;

	if (timerfd_gettime(fd, &its))
		crt_fail("timerfd_gettime: %s", strerror(errno));
	if (interval)
		*interval = its.it_interval.tv_sec * 1000000000LL + its.it_interval.tv_nsec;
	return its.it_value.tv_sec * 1000000000LL + its.it_value.tv_nsec;
}

int main(void)
{
	struct itimerspec its;
	int a, b, c, d, e;
	int64_t t0, gap = 0, last, expect, got, interval;
	uint64_t ticks;

	crt_init();
	a = timerfd_create(CLOCK_MONOTONIC, 0);
	b = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	c = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK);
	d = timerfd_create(CLOCK_MONOTONIC, 0);
	e = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	if (a < 0 || b < 0 || c < 0 || d < 0 || e < 0)
		crt_fail("timerfd_create: %s", strerror(errno));
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = 4;
	its.it_interval.tv_sec = 1;
	t0 = now(CLOCK_MONOTONIC);
	if (timerfd_settime(a, 0, &its, NULL))
		crt_fail("settime a");
	its.it_value.tv_sec = now(CLOCK_REALTIME) / 1000000000LL + 60;
	its.it_interval.tv_sec = 0;
	if (timerfd_settime(b, TFD_TIMER_ABSTIME, &its, NULL))
		crt_fail("settime b");
	its.it_value.tv_sec = 0;
	its.it_value.tv_nsec = MS;
	if (timerfd_settime(c, 0, &its, NULL))
		crt_fail("settime c");
	its.it_interval.tv_sec = 2;
	if (timerfd_settime(e, 0, &its, NULL))
		crt_fail("settime e");
	usleep(500 * 1000);

	crt_ready();
	last = now(CLOCK_MONOTONIC);
	while (!crt_term) {
		int64_t n;

		usleep(1000);
		n = now(CLOCK_MONOTONIC);
		if (n - last > gap)
			gap = n - last;
		last = n;
	}
	/* the firing is timed from the moment A said how long it had left
	 * (the messages between take time: milliseconds in an emulated guest) */
	last = now(CLOCK_MONOTONIC);
	expect = 4000 * MS - (last - t0 - gap);
	got = left(a, &interval);
	crt_msg("stopped for %ld ms; A has %ld ms left, expected %ld", (long)(gap / MS),
		(long)(got / MS), (long)(expect / MS));
	crt_check(interval == 1000 * MS, "A's interval is %ld ns", (long)interval);
	crt_check(got <= expect + 50 * MS && got >= expect - 150 * MS,
		  "A has %ld ms left, expected %ld: the time checkpointed counted, or its time "
		  "was lost",
		  (long)(got / MS), (long)(expect / MS));
	/* it fires when it said */
	crt_check(read(a, &ticks, 8) == 8 && ticks == 1, "A did not fire once");
	crt_check(now(CLOCK_MONOTONIC) - last >= got - 5 * MS &&
			  now(CLOCK_MONOTONIC) - last <= got + 100 * MS,
		  "A fired after %ld ms, not %ld", (long)((now(CLOCK_MONOTONIC) - last) / MS),
		  (long)(got / MS));
	got = left(b, &interval);
	crt_check(got > 50000 * MS && got <= 60000 * MS && !interval, "B has %ld ms left",
		  (long)(got / MS));
	crt_check(fcntl(b, F_GETFL) & O_NONBLOCK, "B lost O_NONBLOCK");
	crt_check(fcntl(b, F_GETFD) & FD_CLOEXEC, "B lost FD_CLOEXEC");
	crt_check(read(b, &ticks, 8) < 0 && errno == EAGAIN, "B fired");
	crt_check(left(c, NULL) == 0, "C is armed");
	ticks = 0;
	crt_check(read(c, &ticks, 8) == 8 && ticks == 1, "C had %lu unread expirations, not 1",
		  (unsigned long)ticks);
	crt_check(left(d, &interval) == 0 && !interval, "D is armed");
	got = left(e, &interval);
	crt_check(interval == 2000 * MS && got > 0 && got <= 2000 * MS,
		  "E has %ld ms left, interval %ld ms: the periodic timer stopped",
		  (long)(got / MS), (long)(interval / MS));
	ticks = 0;
	crt_check(read(e, &ticks, 8) == 8 && ticks >= 1, "E's expiration was lost");
	crt_pass();
}
