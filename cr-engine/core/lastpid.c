/* A thread of a process that entered its own user namespace is made
 * without set_tid (that needs privileges in the initial user namespace,
 * which the process gave up): kupdate, which keeps them, sets ns_last_pid
 * just below the thread's tid for the clone (restorer.h: RST_TID_PREP).
 * Every kupdate that writes ns_last_pid holds its flock meanwhile
 * (restore.c: spawn_ns_last_pid too).  A tid of the boot's pid reservation
 * (pid_reserve=, kernel/patches: ordinary allocation skips it even after
 * ns_last_pid) is taken out of it while the lock is held and put back
 * after.  Something else that forks in between takes the tid: the thread
 * gets another and exits, and the restorer tries again (up to 50 times);
 * a process that holds the tid meanwhile (a short-lived one the boot
 * forked in that window) is waited for, 3 s at most, before each try.
 * ns_last_pid goes back to where it was after each clone: the boot's forks
 * go on above the saved pids, not among those of the units not restored
 * yet (without pid_reserve=, where the generator put it up there). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cr-util.h"
#include "log.h"
#include "proc.h"
#include "restore-ctx.h"

/* ranges "a-b,c" without tid, into out; false if tid is in none */
static bool without(const char *list, pid_t tid, char *out, size_t len)
{
	bool found = false;
	size_t o = 0;

	out[0] = 0;
	for (const char *s = list; *s && o < len;) {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (tid >= a && tid <= b) {
			found = true;
			if (a < tid)
				o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "", a,
					      (long)tid - 1);
			if (tid < b && o < len)
				o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "",
					      (long)tid + 1, b);
		} else {
			o += snprintf(out + o, len - o, "%s%ld-%ld", o ? "," : "", a, b);
		}
		s = end;
		while (*s == ',' || *s == ' ' || *s == '\n')
			s++;
	}
	return found;
}

static int write_proc(const char *rel, const char *text)
{
	int fd = proc_open(rel, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* no task holds tid (a process the boot forked while ns_last_pid was
 * below it, gone in a moment); 3 s at most */
static int wait_tid_free(pid_t tid)
{
	char rel[32];

	snprintf(rel, sizeof(rel), "%d", tid);
	for (int i = 0; i < 300; i++) {
		int fd = proc_open(rel, O_PATH | O_CLOEXEC);

		if (fd < 0)
			return 0;
		close(fd);
		usleep(10000);
	}
	pr_err("thread %d: its tid is held by another task (for 3 s): it cannot be made again",
	       tid);
	return -EBUSY;
}

int tid_prepare(pid_t tid, struct tid_hold *h)
{
	char buf[512], *list = NULL;
	ssize_t n;
	int fd, ret;

	memset(h, 0, sizeof(*h));
	h->fd = -1;
	h->held = true;
	fd = proc_open("sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		ret = pr_errno("thread %d: cannot lock ns_last_pid", tid);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	h->fd = fd;
	n = pread(h->fd, buf, sizeof(buf) - 1, 0);
	h->last = n > 0 ? (buf[n] = 0, strtol(buf, NULL, 10)) : 0;
	ret = wait_tid_free(tid);
	if (ret) {
		tid_done(h);
		return ret;
	}
	fd = proc_open("sys/kernel/pid_reserve", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		list = xzalloc(512);
		n = list ? read(fd, list, 511) : -1;
		close(fd);
		if (n > 0 && without(list, tid, buf, sizeof(buf))) {
			list[strcspn(list, "\n")] = 0;
			ret = write_proc("sys/kernel/pid_reserve", buf[0] ? buf : "\n");
			if (ret) {
				pr_err("thread %d: cannot take it out of the pid reservation (%s): "
				       "%s",
				       tid, list, strerror(-ret));
				free(list);
				tid_done(h);
				return ret;
			}
			h->reserve = list;
			list = NULL;
		}
		free(list);
	}
	snprintf(buf, sizeof(buf), "%d", tid - 1);
	if (write(h->fd, buf, strlen(buf)) < 0) {
		ret = pr_errno("thread %d: cannot set ns_last_pid", tid);
		tid_done(h);
		return ret;
	}
	return 0;
}

void tid_done(struct tid_hold *h)
{
	if (h->fd >= 0 && h->last > 0) {
		char buf[32];
		ssize_t n = pread(h->fd, buf, sizeof(buf) - 1, 0);

		/* (a write sets it; others forking meanwhile moved it up: kept) */
		if (n > 0 && (buf[n] = 0, strtol(buf, NULL, 10)) < h->last) {
			snprintf(buf, sizeof(buf), "%ld", h->last);
			if (pwrite(h->fd, buf, strlen(buf), 0) < 0)
				pr_perror("cannot set ns_last_pid back to %ld", h->last);
		}
	}
	if (h->reserve) {
		int ret = write_proc("sys/kernel/pid_reserve", h->reserve[0] ? h->reserve : "\n");

		if (ret)
			pr_err("cannot put the pid reservation back (%s): %s", h->reserve,
			       strerror(-ret));
		free(h->reserve);
		h->reserve = NULL;
	}
	if (h->fd >= 0)
		close(h->fd); /* and its lock */
	h->fd = -1;
	h->held = false;
}
