/* proc_run_in_ns (cr-engine/base/proc.c): the thread it runs leaves the
 * process alone in its file system context, so that a mount namespace can
 * be entered right after it.  The kernel wakes pthread_join() before the
 * exiting thread drops its share of that context (exit_mm() comes before
 * exit_fs()); a thread whose exit is slow (here: thousands of descriptors
 * of its own to close) shows it: setns() of a mount namespace then fails
 * with EINVAL, as a unit's restore did on a busy boot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "proc.h"

#define SLOW_FDS 8000

/* runs in proc_run_in_ns's thread: arg's int is the namespace's fd */
static void *slow_exit(void *arg)
{
	(void)arg;
	if (unshare(CLONE_FILES))
		return NULL;
	for (int i = 0; i < SLOW_FDS; i++)
		if (open("/dev/null", O_RDONLY) < 0)
			break;
	return NULL;
}

static void test_mount_ns_after_thread(void **state)
{
	struct rlimit rl;
	int arg[1], mnt, bad = 0;

	(void)state;
	if (geteuid()) {
		skip(); /* setns() of a mount namespace needs CAP_SYS_ADMIN */
		return;
	}
	/* room for the thread's descriptors */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < SLOW_FDS + 64) {
		skip();
		return;
	}
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? SLOW_FDS + 64 : rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	/* our own mount namespace: entering it changes nothing but the
	 * root and working directory, which go back to its root */
	mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	assert_true(mnt >= 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(proc_run_in_ns(getpid(), "uts", slow_exit, arg), 0);
		if (setns(mnt, CLONE_NEWNS)) {
			assert_int_equal(errno, EINVAL);
			bad++;
		}
	}
	close(mnt);
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mount_ns_after_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
