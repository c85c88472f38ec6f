// SPDX-License-Identifier: GPL-2.0
/*
 * kernel.ns_last_pid: writing N makes the next fork get N+1; writing needs
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE.
 */
#include "ktap.h"
#include "util.h"

#define LAST_PID "/proc/sys/kernel/ns_last_pid"

/* Set ns_last_pid to n and fork; retry a few times in case something else forked in between. */
static pid_t fork_after(long n)
{
	pid_t pid = -1;

	for (int i = 0; i < 5; i++) {
		if (write_long(LAST_PID, n))
			return -1;
		pid = fork_pid();
		if (pid == n + 1)
			break;
	}
	return pid;
}

int main(void)
{
	long last, pid_max, n;
	pid_t pid;
	int err;

	ktap_plan(5);

	last = read_long(LAST_PID);
	ktap_ok(last > 0, "ns_last_pid: readable (%ld)", last);

	pid_max = read_long("/proc/sys/kernel/pid_max");
	n = last + 1000 < pid_max - 10 ? last + 1000 : 400;
	while (pid_reserved(n + 1) || pid_reserved(n + 6))
		n += 10;
	pid = fork_after(n);
	ktap_ok(pid == n + 1, "ns_last_pid: write %ld, next fork gets %ld (got %d)", n, n + 1, pid);

	pid = fork_after(n + 5);
	ktap_ok(pid == n + 6, "ns_last_pid: going back and forth works (%ld -> %d)", n + 5, pid);

	err = write_file(LAST_PID, "-5");
	ktap_ok(err == -EINVAL, "ns_last_pid: negative value rejected (%s)", strerror(-err));

	pid = fork();
	if (pid == 0) {
		if (drop_cr_caps())
			_exit(2);
		err = write_long(LAST_PID, n);
		_exit(err == -EPERM ? 0 : 1);
	}
	ktap_ok(wait_child(pid) == 0,
		"ns_last_pid: EPERM without CAP_SYS_ADMIN/CAP_CHECKPOINT_RESTORE");

	return ktap_finish();
}
