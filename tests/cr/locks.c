/* File locks held by the tree come back, held by the same processes on
 * the same descriptions:
 *  - flock: an exclusive lock on "a", its fd shared with the child (fork);
 *  - POSIX: the parent's write lock on bytes 10-19 of "b" and read lock
 *    from byte 100 to the end, through an fd the child shares too (POSIX
 *    locks are the parent's alone); the child's own write lock on all of
 *    "d";
 *  - OFD: a read lock on bytes 0-99 of "c" and a write lock on 200-299.
 * After the restore each lock is checked from a process that does not
 * hold it: the child tests the parent's POSIX locks (F_GETLK names the
 * parent), the parent tests the child's, and new descriptions test the
 * flock and OFD locks.  /proc/locks lists as many locks of the tree as
 * before. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static int lk(int fd, int cmd, int type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };

	return fcntl(fd, cmd, &fl);
}

/* who holds a lock conflicting with (type, start, len): pid, 0 for none */
static pid_t holder(int fd, int cmd, int type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };

	if (fcntl(fd, cmd, &fl))
		crt_fail("F_GETLK: %s", strerror(errno));
	return fl.l_type == F_UNLCK ? 0 : fl.l_pid;
}

static int open_rw(const char *name)
{
	int fd = open(crt_path(name), O_RDWR | O_CREAT, 0644);

	if (fd < 0)
		crt_fail("open %s: %s", name, strerror(errno));
	return fd;
}

/* lines of /proc/locks on files of ours (by inode) */
static int count_locks(const ino_t *inos, int n)
{
	char *buf = crt_read_file("/proc/locks", NULL), *l, *save = NULL;
	int count = 0;

	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned long ino = 0;

		if (strstr(l, "->"))
			continue; /* a waiter */
		/* "N: KIND ADVISORY TYPE PID MAJ:MIN:INO START END" */
		if (sscanf(l, "%*d: %*s %*s %*s %*d %*x:%*x:%lu", &ino) == 1)
			for (int i = 0; i < n; i++)
				count += inos[i] == ino;
	}
	free(buf);
	return count;
}

int main(void)
{
	int a, b, c, d, st, before, after;
	ino_t inos[4];
	struct stat s;
	pid_t child, parent = getpid();

	crt_init();
	a = open_rw("a");
	b = open_rw("b");
	c = open_rw("c");
	d = open_rw("d");
	if (flock(a, LOCK_EX) || lk(b, F_SETLK, F_WRLCK, 10, 10) ||
	    lk(b, F_SETLK, F_RDLCK, 100, 0) || lk(c, F_OFD_SETLK, F_RDLCK, 0, 100) ||
	    lk(c, F_OFD_SETLK, F_WRLCK, 200, 100))
		crt_fail("locking: %s", strerror(errno));
	fstat(a, &s), inos[0] = s.st_ino;
	fstat(b, &s), inos[1] = s.st_ino;
	fstat(c, &s), inos[2] = s.st_ino;
	fstat(d, &s), inos[3] = s.st_ino;
	child = fork();
	if (child == 0) {
		int nb;

		if (lk(d, F_SETLK, F_WRLCK, 0, 0))
			_exit(2);
		crt_wait_term();
		/* the parent's POSIX locks on b, seen from here */
		nb = open_rw("b");
		if (holder(nb, F_GETLK, F_RDLCK, 10, 1) != parent)
			_exit(3);
		if (holder(nb, F_GETLK, F_RDLCK, 20, 1) != 0)
			_exit(4);
		if (holder(nb, F_GETLK, F_WRLCK, 5000, 1) != parent)
			_exit(5);
		if (holder(nb, F_GETLK, F_RDLCK, 5000, 1) != 0)
			_exit(6);
		/* the shared flock is this process's too: it can convert it */
		if (flock(a, LOCK_EX | LOCK_NB))
			_exit(7);
		_exit(0);
	}
	crt_own_child(child);
	{
		int nd = open_rw("d");

		while (holder(nd, F_GETLK, F_WRLCK, 0, 1) != child)
			usleep(1000);
		close(nd);
	}
	before = count_locks(inos, 4);

	crt_ready();
	crt_wait_term();

	after = count_locks(inos, 4);
	crt_check(after == before, "%d locks of ours in /proc/locks, %d before", after, before);
	{
		int na = open_rw("a"), nc = open_rw("c"), nd = open_rw("d");

		crt_check(flock(na, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK,
			  "a is not flock()ed any more");
		crt_check(holder(nc, F_OFD_GETLK, F_WRLCK, 50, 1) == -1,
			  "the OFD read lock on c is gone");
		crt_check(holder(nc, F_OFD_GETLK, F_RDLCK, 50, 1) == 0,
			  "the OFD read lock on c became a write lock");
		crt_check(holder(nc, F_OFD_GETLK, F_RDLCK, 250, 1) == -1,
			  "the OFD write lock on c is gone");
		crt_check(holder(nc, F_OFD_GETLK, F_RDLCK, 150, 1) == 0, "c is locked at 150");
		crt_check(holder(nd, F_GETLK, F_RDLCK, 0, 1) == child,
			  "the child's POSIX lock on d is gone (holder %d)",
			  holder(nd, F_GETLK, F_RDLCK, 0, 1));
	}
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st), "the child died (%#x)", st);
	crt_check(WEXITSTATUS(st) == 0, "the child's check %d failed", WEXITSTATUS(st));
	crt_pass();
}
