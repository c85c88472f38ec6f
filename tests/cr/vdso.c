/* Time through the vDSO after a restore: clock_gettime (REALTIME,
 * MONOTONIC, BOOTTIME, *_COARSE), gettimeofday, time and getcpu, called the
 * way glibc calls them (function pointers into the vDSO found at start-up),
 * agree with the kernel's own answer given by the system call.  Run with
 * KUPDATE_VDSO_PROXY=1 it checks the redirection of the old vDSO's entry
 * points used across kernels. */
#include <sched.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

static int64_t ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void check_clock(clockid_t c, const char *name)
{
	struct timespec v, s1, s2;

	syscall(SYS_clock_gettime, c, &s1);
	crt_check(clock_gettime(c, &v) == 0, "clock_gettime(%s) failed", name);
	syscall(SYS_clock_gettime, c, &s2);
	/* coarse clocks tick every few ms */
	crt_check(ns(v) >= ns(s1) - 20000000LL && ns(v) <= ns(s2) + 20000000LL,
		  "%s through the vDSO is off: %lld vs %lld..%lld", name, (long long)ns(v),
		  (long long)ns(s1), (long long)ns(s2));
}

int main(void)
{
	unsigned long vdso_before = getauxval(AT_SYSINFO_EHDR);
	struct timeval tv;
	struct timespec s;
	unsigned cpu = 0, node = 0;
	long sum = 0;

	crt_init();
	/* warm up: glibc has resolved its vDSO pointers at start-up */
	for (int i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &s);
		sum += s.tv_nsec & 1;
	}
	crt_ready();
	while (!crt_term) {
		clock_gettime(CLOCK_REALTIME, &s);
		sum += s.tv_nsec & 1;
	}
	crt_check(getauxval(AT_SYSINFO_EHDR) == vdso_before, "AT_SYSINFO_EHDR changed");
	check_clock(CLOCK_REALTIME, "CLOCK_REALTIME");
	check_clock(CLOCK_MONOTONIC, "CLOCK_MONOTONIC");
	check_clock(CLOCK_BOOTTIME, "CLOCK_BOOTTIME");
	check_clock(CLOCK_REALTIME_COARSE, "CLOCK_REALTIME_COARSE");
	check_clock(CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE");
	{
		struct timespec a, b;

		syscall(SYS_clock_gettime, CLOCK_REALTIME, &a);
		crt_check(gettimeofday(&tv, NULL) == 0, "gettimeofday failed");
		syscall(SYS_clock_gettime, CLOCK_REALTIME, &b);
		crt_check((int64_t)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL >=
					  ns(a) - 1000000 &&
				  (int64_t)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL <= ns(b),
			  "gettimeofday through the vDSO is off");
	}
	{
		time_t t0 = syscall(SYS_time, NULL), t = time(NULL), t1 = syscall(SYS_time, NULL);
		crt_check(t >= t0 && t <= t1, "time() through the vDSO is off");
	}
	crt_check(getcpu(&cpu, &node) == 0 && (long)cpu < sysconf(_SC_NPROCESSORS_CONF),
		  "getcpu through the vDSO failed");
	crt_msg("%ld", sum);
	crt_pass();
}
