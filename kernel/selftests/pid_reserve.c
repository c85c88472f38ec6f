// SPDX-License-Identifier: GPL-2.0
/*
 * kupdate's pid_reserve patch: with pid_reserve=FIRST-LAST[,...] on the
 * command line, ordinary forks, threads and nested PID namespaces never get a
 * reserved PID (also across a wrap-around at pid_max), clone3() with set_tid
 * still can, and kernel.pid_reserve shows, replaces and releases the ranges.
 * Expects to be booted with pid_reserve=30-150,5000-5099,20000-20009 (the
 * harness does that): 30-150 is where the boot's own kernel threads and
 * processes would otherwise land.
 */
#include "ktap.h"
#include "util.h"
#include <dirent.h>
#include <pthread.h>

#define RESERVE	 "/proc/sys/kernel/pid_reserve"
#define LAST_PID "/proc/sys/kernel/ns_last_pid"
#define PID_MAX	 "/proc/sys/kernel/pid_max"

static int in(long pid, long first, long last)
{
	return pid >= first && pid <= last;
}

static void *thread_fn(void *arg)
{
	*(pid_t *)arg = syscall(SYS_gettid);
	return NULL;
}

/* Count the tasks (threads included) whose TID is in [first, last] and above it. */
static int scan_tasks(long first, long last, int *above)
{
	DIR *d = opendir("/proc"), *t;
	struct dirent *e, *te;
	int inside = 0;

	*above = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task", e->d_name);
		t = opendir(path);
		if (!t)
			continue;
		while ((te = readdir(t))) {
			long tid = strtol(te->d_name, NULL, 10);

			if (tid <= 0)
				continue;
			inside += in(tid, first, last);
			*above += tid > last && tid < 5000;
		}
		closedir(t);
	}
	closedir(d);
	return inside;
}

/* The value of pid_reserve= on the kernel command line, or "" */
static void cmdline_reserve(char *out, size_t size)
{
	char buf[4096], *p;

	out[0] = '\0';
	if (read_file("/proc/cmdline", buf, sizeof(buf)) <= 0)
		return;
	for (p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
		if (!strncmp(p, "pid_reserve=", 12))
			snprintf(out, size, "%s", p + 12);
}

int main(void)
{
	char boot[1024], cur[1024], buf[1024];
	long pid_max = read_long(PID_MAX), base;
	pid_t pids[16], tids[10];
	pthread_t th[10];
	int ok, i, err;
	pid_t pid;

	ktap_plan(15);

	cmdline_reserve(boot, sizeof(boot));
	if (read_file(RESERVE, cur, sizeof(cur)) < 0)
		ktap_bail("no %s: kernel without the pid_reserve patch", RESERVE);
	cur[strcspn(cur, "\n")] = '\0';
	ktap_ok(!strcmp(boot, "30-150,5000-5099,20000-20009") && !strcmp(cur, boot),
		"boot: kernel.pid_reserve shows the command line's ranges (cmdline '%s', sysctl "
		"'%s')",
		boot, cur);
	{
		int above, inside = scan_tasks(30, 150, &above);

		ktap_ok(inside == 0 && above > 0,
			"boot: no kernel thread or process of the boot took a PID in 30-150 (%d "
			"inside, %d between 151 and 4999)",
			inside, above);
	}

	/* ordinary forks walk around the range */
	write_long(LAST_PID, 4990);
	ok = 1;
	for (i = 0; i < 16; i++) {
		pids[i] = fork_pid();
		ok &= pids[i] > 0 && !in(pids[i], 5000, 5099);
	}
	ktap_ok(ok && pids[15] >= 5100, "fork: 16 forks from 4991 skip 5000-5099 (last %d)",
		pids[15]);

	write_long(LAST_PID, 5050);
	pid = fork_pid();
	ktap_ok(in(pid, 5100, 5120), "fork: with ns_last_pid inside the range, the next PID is %d",
		pid);

	write_long(LAST_PID, 4995);
	ok = 1;
	for (i = 0; i < 10; i++)
		ok &= !pthread_create(&th[i], NULL, thread_fn, &tids[i]);
	for (i = 0; i < 10; i++)
		ok &= !pthread_join(th[i], NULL) && !in(tids[i], 5000, 5099);
	ktap_ok(ok, "threads: 10 threads from 4996 skip the range (last %d)", tids[9]);

	/* a child in a new PID namespace: PID 1 inside, unreserved outside */
	write_long(LAST_PID, 5040);
	pid = fork();
	if (pid == 0) {
		int fds[2];
		pid_t inner = 0, c;

		if (pipe(fds) || unshare(CLONE_NEWPID))
			_exit(2);
		c = fork();
		if (c == 0) {
			inner = getpid();
			_exit(write(fds[1], &inner, sizeof(inner)) == sizeof(inner) ? 0 : 1);
		}
		if (c < 0 || read(fds[0], &inner, sizeof(inner)) != sizeof(inner))
			_exit(3);
		wait_child(c);
		_exit(inner == 1 && !in(c, 5000, 5099) && c > 0 ? 0 : 4);
	}
	ktap_ok(wait_child(pid) == 0, "pid namespace: init of a new namespace is 1 inside and "
				      "outside the range");

	pid = clone3_pid(5042);
	if (pid == 0)
		_exit(0);
	ktap_ok(pid == 5042, "clone3: set_tid 5042 inside the range works (%d: %s)", pid,
		pid < 0 ? strerror(errno) : "ok");
	if (pid > 0)
		wait_child(pid);

	/* runtime: parse, merge, reject */
	err = write_file(RESERVE, "10-20,15-30,31\n");
	read_file(RESERVE, buf, sizeof(buf));
	ktap_ok(!err && !strcmp(buf, "10-31\n"),
		"sysctl: overlapping and adjacent ranges merge ('%.*s')", (int)strcspn(buf, "\n"),
		buf);
	ok = write_file(RESERVE, "1-5") == -EINVAL && write_file(RESERVE, "9-7") == -EINVAL &&
	     write_file(RESERVE, "abc") == -EINVAL && write_file(RESERVE, "5,,6") == -EINVAL;
	buf[0] = '\0';
	for (i = 0; i < 33; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%d", i ? "," : "",
			 1000 + 2 * i);
	ok &= write_file(RESERVE, buf) == -E2BIG;
	read_file(RESERVE, buf, sizeof(buf));
	ktap_ok(ok && !strcmp(buf, "10-31\n"),
		"sysctl: invalid lists rejected, reservation unchanged");

	/* wrap-around at pid_max: both ends reserved */
	snprintf(buf, sizeof(buf), "300-399,%ld-%ld", pid_max - 5, pid_max - 1);
	write_file(RESERVE, buf);
	write_long(LAST_PID, pid_max - 8);
	for (i = 0; i < 3; i++)
		pids[i] = fork_pid();
	ktap_ok(pids[0] == pid_max - 7 && pids[1] == pid_max - 6 && in(pids[2], 400, pid_max - 9),
		"wrap-around: %ld, %ld, then back to %d (skipping %s)", pid_max - 7, pid_max - 6,
		pids[2], buf);

	/* everything reserved: fork fails like PID exhaustion, set_tid still works */
	if (write_long(PID_MAX, 4096) == 0) {
		write_file(RESERVE, "2-4095");
		pid = fork();
		if (pid == 0)
			_exit(0);
		err = errno;
		if (pid > 0)
			wait_child(pid);
		ktap_ok(pid < 0 && err == EAGAIN, "exhaustion: fork fails with EAGAIN when only "
						  "reserved PIDs are free");
		pid = clone3_pid(4000);
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			wait_child(pid);
		ktap_ok(pid == 4000, "exhaustion: clone3 set_tid 4000 still works (%d)", pid);
		write_long(PID_MAX, pid_max);
	} else {
		ktap_skip("cannot lower pid_max to 4096");
		ktap_skip("cannot lower pid_max to 4096");
	}

	/* no capability, no write */
	pid = fork();
	if (pid == 0) {
		if (drop_cr_caps())
			_exit(2);
		_exit(write_file(RESERVE, "") == -EPERM ? 0 : 1);
	}
	ktap_ok(wait_child(pid) == 0, "sysctl: writing needs CAP_SYS_ADMIN/CAP_CHECKPOINT_RESTORE");

	/* release */
	write_file(RESERVE, "5000-5099");
	err = write_file(RESERVE, "\n");
	read_file(RESERVE, buf, sizeof(buf));
	ktap_ok(!err && !strcmp(buf, "\n"),
		"release: writing an empty line clears the reservation");
	base = 5050;
	write_long(LAST_PID, base);
	pid = fork_pid();
	ktap_ok(pid == base + 1, "release: ordinary forks get PIDs in the old range again (%d)",
		pid);

	return ktap_finish();
}
