/* CLOCK_MONOTONIC and CLOCK_BOOTTIME go on where they were across a dump
 * and restore; time spent checkpointed does not count (the runner pauses
 * 3 s between them: --pause-ms 3000), CLOCK_REALTIME does count it.  The
 * vDSO and the system call agree after the restore (the restored tree's
 * vDSO reads its time namespace's offsets). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

static int64_t vdso_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t sys_ns(clockid_t c)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void)
{
	int64_t pm = 0, pb = 0, pr = 0, jm = 0, jb = 0, jr = 0;
	bool back = false;

	crt_init();
	crt_ready();
	/* the largest realtime step between two readings is the checkpoint;
	 * what the other clocks did across that step is what is checked */
	while (!crt_term) {
		int64_t m = vdso_ns(CLOCK_MONOTONIC), b = vdso_ns(CLOCK_BOOTTIME);
		int64_t r = vdso_ns(CLOCK_REALTIME);

		if (pr) {
			back |= m < pm || b < pb;
			if (r - pr > jr) {
				jr = r - pr;
				jm = m - pm;
				jb = b - pb;
			}
		}
		pm = m;
		pb = b;
		pr = r;
		usleep(1000);
	}
	crt_msg("across the checkpoint: monotonic %+.3f s, boottime %+.3f s, realtime %+.3f s",
		jm / 1e9, jb / 1e9, jr / 1e9);
	crt_check(!back, "a clock went back");
	crt_check(jr >= 3000000000LL, "realtime did not count the 3 s pause");
	crt_check(jm < 2500000000LL, "monotonic counted the time checkpointed (%+.3f s)", jm / 1e9);
	crt_check(jb < 2500000000LL, "boottime counted the time checkpointed (%+.3f s)", jb / 1e9);
	{
		int64_t v = vdso_ns(CLOCK_MONOTONIC), s = sys_ns(CLOCK_MONOTONIC);
		int64_t v2 = vdso_ns(CLOCK_BOOTTIME), s2 = sys_ns(CLOCK_BOOTTIME);

		crt_check(s - v < 50000000LL && s - v > -1000 && s2 - v2 < 50000000LL &&
				  s2 - v2 > -1000,
			  "vDSO and system call disagree: monotonic %+.6f s, boottime %+.6f s",
			  (s - v) / 1e9, (s2 - v2) / 1e9);
	}
	crt_pass();
}
