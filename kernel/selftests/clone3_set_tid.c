// SPDX-License-Identifier: GPL-2.0
/* clone3() with set_tid creates the child with the requested PID. */
#include "ktap.h"
#include "util.h"

/* A PID nobody uses: the last one handed out plus a margin, checked with kill(0). */
static pid_t free_pid(pid_t from)
{
	for (pid_t p = from; p < from + 1000; p++)
		if (kill(p, 0) && errno == ESRCH && !pid_reserved(p))
			return p;
	return -1;
}

int main(void)
{
	long pid_max = read_long("/proc/sys/kernel/pid_max");
	pid_t want, pid;
	int pipefd[2];

	ktap_plan(6);

	want = free_pid(read_long("/proc/sys/kernel/ns_last_pid") + 500);
	if (pipe(pipefd))
		ktap_bail("pipe");
	pid = clone3_pid(want);
	if (pid == 0) {
		pid_t self = getpid();

		if (write(pipefd[1], &self, sizeof(self)) != sizeof(self))
			_exit(1);
		_exit(0);
	}
	{
		pid_t seen = -1;

		if (pid > 0 && read(pipefd[0], &seen, sizeof(seen)) != sizeof(seen))
			seen = -1;
		ktap_ok(pid == want, "clone3: set_tid %d returns that pid to the parent (%d: %s)",
			want, pid, pid < 0 ? strerror(errno) : "ok");
		ktap_ok(seen == want, "clone3: the child's getpid() is %d (%d)", want, seen);
		if (pid > 0)
			wait_child(pid);
	}

	pid = clone3_pid(getpid());
	if (pid == 0)
		_exit(0);
	ktap_ok(pid < 0 && errno == EEXIST, "clone3: set_tid of a PID in use fails with EEXIST");

	pid = clone3_pid(pid_max);
	if (pid == 0)
		_exit(0);
	ktap_ok(pid < 0 && errno == EINVAL, "clone3: set_tid >= pid_max fails with EINVAL");

	/* The same PID again once the first child is reaped */
	pid = clone3_pid(want);
	if (pid == 0)
		_exit(0);
	ktap_ok(pid == want, "clone3: set_tid %d again after the first child was reaped", want);
	if (pid > 0)
		wait_child(pid);

	pid = fork();
	if (pid == 0) {
		pid_t c;

		if (drop_cr_caps())
			_exit(2);
		c = clone3_pid(want);
		if (c == 0)
			_exit(0);
		_exit(c < 0 && errno == EPERM ? 0 : 1);
	}
	ktap_ok(wait_child(pid) == 0,
		"clone3: set_tid without CAP_CHECKPOINT_RESTORE fails with EPERM");

	return ktap_finish();
}
