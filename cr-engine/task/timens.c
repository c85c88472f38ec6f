/* Clocks: CLOCK_MONOTONIC and CLOCK_BOOTTIME go on where they were.
 *
 * After a kexec the new kernel's monotonic clock starts again near zero; a
 * program that kept a deadline on the old clock would wait for hours, and
 * one comparing two readings would see time go back.  So the tree's
 * clocks are saved at the end of the dump (dump side), and the restored
 * tree lives in a time namespace whose offsets make its clocks start from
 * those values (restore side): time spent checkpointed does not count, as
 * for the timers (timers.c).  CLOCK_REALTIME is not namespaced: it jumps
 * forward by the time the tree was away, as for any stopped process.
 *
 * A tree restored once lives in such a namespace; its next dump reads the
 * offsets back.  Every process of a tree must share one time namespace. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "namespaces.h"
#include "timens.h"
#include "util.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

int timens_check(pid_t pid, pid_t first)
{
	struct stat a, b;

	if (ns_stat(pid, "time", &a))
		return 0; /* a kernel without time namespaces */
	if (!ns_stat(pid, "time_for_children", &b) &&
	    (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
		pr_err("pid %d has created a time namespace for its future children; such a "
		       "process cannot be dumped",
		       pid);
		return -EOPNOTSUPP;
	}
	if (first && first != pid && !ns_stat(first, "time", &b) &&
	    (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
		pr_err("pid %d lives in another time namespace than pid %d; a tree must share "
		       "one",
		       pid, first);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* the offsets of pid's time namespace (0 in the initial one) */
static int read_offsets(pid_t pid, int64_t *mono, int64_t *boot)
{
	_cleanup_free_ char *text = NULL;
	int ret;

	*mono = *boot = 0;
	ret = read_proc(&text, NULL, "/proc/%d/timens_offsets", pid);
	if (ret == -ENOENT)
		return 0;
	if (ret) {
		pr_err("pid %d: cannot read its clock offsets (/proc/%d/timens_offsets): %s", pid,
		       pid, strerror(-ret));
		return ret;
	}
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char name[32];
		long long s;
		long ns;

		if (sscanf(l, "%31s %lld %ld", name, &s, &ns) != 3)
			continue;
		if (!strcmp(name, "monotonic") || !strcmp(name, "1"))
			*mono = s * 1000000000LL + ns;
		else if (!strcmp(name, "boottime") || !strcmp(name, "7"))
			*boot = s * 1000000000LL + ns;
	}
	return 0;
}

int timens_clocks(pid_t pid, int64_t *mono, int64_t *boot)
{
	int64_t om, ob;
	int ret = read_offsets(pid, &om, &ob);

	if (ret)
		return ret;
	*mono = now_ns(CLOCK_MONOTONIC) + om;
	*boot = now_ns(CLOCK_BOOTTIME) + ob;
	return 0;
}

static int64_t floor_div(int64_t ns)
{
	int64_t s = ns / 1000000000LL;

	return ns < 0 && s * 1000000000LL != ns ? s - 1 : s;
}

int timens_enter(int64_t mono, int64_t boot, int *saved)
{
	_cleanup_close_ int fd = -1;
	int64_t om, ob;
	char buf[128];
	int ret;

	*saved = open("/proc/self/ns/time_for_children", O_RDONLY | O_CLOEXEC);
	if (*saved < 0) {
		if (errno == ENOENT)
			return 0; /* no time namespaces: the clocks are what they are */
		ret = pr_errno("cannot open /proc/self/ns/time_for_children");
		return ret;
	}
	if (unshare(CLONE_NEWTIME)) {
		ret = pr_errno("cannot create a time namespace for the restored tree");
		close(*saved);
		*saved = -1;
		return ret;
	}
	/* set before any process enters it */
	om = mono - now_ns(CLOCK_MONOTONIC);
	ob = boot - now_ns(CLOCK_BOOTTIME);
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	/* seconds rounded down, nanoseconds in [0, 1e9) */
	snprintf(buf, sizeof(buf), "monotonic %lld %lld\nboottime %lld %lld\n",
		 (long long)floor_div(om), (long long)(om - floor_div(om) * 1000000000LL),
		 (long long)floor_div(ob), (long long)(ob - floor_div(ob) * 1000000000LL));
	if (fd < 0 || write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf)) {
		ret = pr_errno("cannot set the restored tree's clock offsets (monotonic %+.3f s, "
			       "boottime %+.3f s)",
			       om / 1e9, ob / 1e9);
		timens_leave(*saved);
		*saved = -1;
		return ret;
	}
	pr_debug("clocks of the restored tree: monotonic %+.3f s, boottime %+.3f s", om / 1e9,
		 ob / 1e9);
	return 0;
}

void timens_leave(int saved)
{
	if (saved < 0)
		return;
	if (setns(saved, CLONE_NEWTIME))
		pr_perror("cannot go back to the original time namespace");
	close(saved);
}
