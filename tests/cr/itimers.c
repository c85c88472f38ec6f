/* Interval timers across a dump and restore (run with --pause-ms 1000),
 * checked from inside.  The rule (timers.c): a timer resumes with the time
 * it had left at the dump; the time the tree spent checkpointed does not
 * count, as for CLOCK_MONOTONIC (timens.c).
 *  - ITIMER_REAL, 3 s then every 0.4 s: the first four expiries come at
 *    those moments on CLOCK_MONOTONIC, and CLOCK_REALTIME shows the pause
 *    was not counted;
 *  - ITIMER_VIRTUAL: remaining time about what it was, interval exact;
 *  - ITIMER_PROF, 0.5 s of CPU then every 0.5 s, mostly used before the
 *    dump: it fires after what was left, not after a whole period (CPU
 *    timers count whole scheduler ticks, so on a busy machine they run
 *    ahead of the precise CPU clock: the check allows for that). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
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

static volatile int nr_alrm, nr_prof;
static int64_t alrm_mono[8], alrm_real[8], prof_cpu[8];

static void on_alrm(int sig)
{
	(void)sig;
	if (nr_alrm < 8) {
		alrm_mono[nr_alrm] = now(CLOCK_MONOTONIC);
		alrm_real[nr_alrm] = now(CLOCK_REALTIME);
	}
	nr_alrm++;
}

static void on_prof(int sig)
{
	(void)sig;
	if (nr_prof < 8)
		prof_cpu[nr_prof] = now(CLOCK_PROCESS_CPUTIME_ID);
	nr_prof++;
}

static int64_t tv_ns(struct timeval tv)
{
	return tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
}

static void burn_cpu(int64_t ns)
{
	int64_t end = now(CLOCK_PROCESS_CPUTIME_ID) + ns;

	while (now(CLOCK_PROCESS_CPUTIME_ID) < end)
		;
}

int main(void)
{
	struct itimerval real = { { 0, 400000 }, { 3, 0 } };
	struct itimerval virt = { { 10, 0 }, { 30, 0 } };
	struct itimerval prof = { { 0, 500000 }, { 0, 500000 } };
	struct itimerval vb, pb, va, pa;
	int64_t t0_mono, t0_real, cpu0;
	struct sigaction sa;

	crt_init();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alrm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_prof;
	sigaction(SIGPROF, &sa, NULL);

	if (setitimer(ITIMER_PROF, &prof, NULL) || setitimer(ITIMER_VIRTUAL, &virt, NULL))
		crt_fail("setitimer: %s", strerror(errno));
	burn_cpu(350 * MS);
	t0_mono = now(CLOCK_MONOTONIC);
	t0_real = now(CLOCK_REALTIME);
	if (setitimer(ITIMER_REAL, &real, NULL))
		crt_fail("setitimer: %s", strerror(errno));
	getitimer(ITIMER_VIRTUAL, &vb);
	getitimer(ITIMER_PROF, &pb);

	crt_ready();
	crt_wait_term();

	getitimer(ITIMER_VIRTUAL, &va);
	getitimer(ITIMER_PROF, &pa);
	crt_msg("ITIMER_PROF left %.3f s at the dump, %.3f s after the restore",
		tv_ns(pb.it_value) / 1e9, tv_ns(pa.it_value) / 1e9);
	crt_check(tv_ns(va.it_interval) == tv_ns(virt.it_interval) &&
			  tv_ns(pa.it_interval) == tv_ns(prof.it_interval),
		  "an interval changed: VIRTUAL %ld.%06ld PROF %ld.%06ld", va.it_interval.tv_sec,
		  va.it_interval.tv_usec, pa.it_interval.tv_sec, pa.it_interval.tv_usec);
	/* CPU-time timers are sampled at the scheduler tick: a tick or two either way */
	crt_check(tv_ns(va.it_value) <= tv_ns(vb.it_value) + 10 * MS &&
			  tv_ns(va.it_value) > tv_ns(vb.it_value) - 30 * MS,
		  "ITIMER_VIRTUAL: %.3f s left, was %.3f s", tv_ns(va.it_value) / 1e9,
		  tv_ns(vb.it_value) / 1e9);
	crt_check(tv_ns(pa.it_value) <= tv_ns(pb.it_value) + 10 * MS &&
			  tv_ns(pa.it_value) > tv_ns(pb.it_value) - 30 * MS,
		  "ITIMER_PROF: %.3f s left, was %.3f s", tv_ns(pa.it_value) / 1e9,
		  tv_ns(pb.it_value) / 1e9);

	/* ITIMER_PROF fires after the CPU time it had left, then after a
	 * whole period */
	cpu0 = now(CLOCK_PROCESS_CPUTIME_ID);
	while (nr_prof < 2)
		burn_cpu(MS);
	crt_msg("SIGPROF after %.3f s and %.3f s of CPU", (prof_cpu[0] - cpu0) / 1e9,
		(prof_cpu[1] - cpu0) / 1e9);
	crt_check(prof_cpu[0] - cpu0 < tv_ns(pa.it_value) * 3 / 2 + 20 * MS &&
			  prof_cpu[0] - cpu0 > tv_ns(pa.it_value) / 2 - 20 * MS,
		  "SIGPROF came after %.3f s of CPU, %.3f s were left", (prof_cpu[0] - cpu0) / 1e9,
		  tv_ns(pa.it_value) / 1e9);
	crt_check(prof_cpu[1] - prof_cpu[0] > 300 * MS,
		  "the second SIGPROF came %.3f s of CPU after the first, the period is 0.5 s",
		  (prof_cpu[1] - prof_cpu[0]) / 1e9);

	/* ITIMER_REAL: expiries at t0 + 3 s + k * 0.4 s on the monotonic
	 * clock, which did not count the pause */
	while (nr_alrm < 4 && now(CLOCK_MONOTONIC) - t0_mono < 10000 * MS)
		usleep(10000);
	crt_check(nr_alrm >= 4, "only %d SIGALRMs", nr_alrm);
	for (int k = 0; k < 4; k++) {
		int64_t want = t0_mono + 3000 * MS + k * 400 * MS;

		crt_msg("SIGALRM %d at %+.3f s (monotonic, from arming), %+.3f s realtime", k,
			(alrm_mono[k] - t0_mono) / 1e9, (alrm_real[k] - t0_real) / 1e9);
		crt_check(alrm_mono[k] >= want - 2 * MS && alrm_mono[k] < want + 50 * MS,
			  "SIGALRM %d came at %+.3f s, not %+.3f s", k,
			  (alrm_mono[k] - t0_mono) / 1e9, (want - t0_mono) / 1e9);
	}
	crt_check(alrm_real[0] - t0_real >= 3000 * MS + 900 * MS,
		  "the first SIGALRM came %.3f s (realtime) after arming: the pause counted",
		  (alrm_real[0] - t0_real) / 1e9);
	crt_pass();
}
