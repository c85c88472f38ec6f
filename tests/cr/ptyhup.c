/* A pseudo-terminal slave hung up by its master's close, as a daemon
 * started from a session that has ended holds it: the slave, non-blocking,
 * shared with a child (one description), and a second description opened
 * blocking.  After the restore each fd still shows the same /dev/pts name,
 * deleted, its flags, read gives end of file and write EIO (a hung-up
 * tty); the child's fd is the same description as the parent's. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static void hung(int fd, const char *what, const char *want_link, int want_fl)
{
	char path[64], link[128];
	ssize_t n;
	char c;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	crt_check(n > 0, "%s: readlink: %s", what, strerror(errno));
	link[n] = 0;
	crt_check(!strcmp(link, want_link), "%s: the fd shows '%s', expected '%s'", what, link,
		  want_link);
	crt_check((fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) == want_fl,
		  "%s: flags %#o, expected %#o", what, fcntl(fd, F_GETFL), want_fl);
	crt_check((want_fl & O_ACCMODE) == O_WRONLY || read(fd, &c, 1) == 0,
		  "%s: read does not give end of file (%s)", what, strerror(errno));
	crt_check(write(fd, "x", 1) < 0 && errno == EIO, "%s: write does not fail with EIO (%s)",
		  what, strerror(errno));
}

int main(void)
{
	char name[64], link[96];
	int m, s1, s2, st;
	pid_t child;

	crt_init();
	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)))
		crt_fail("posix_openpt: %s", strerror(errno));
	s1 = open(name, O_RDWR | O_NOCTTY | O_NONBLOCK);
	s2 = open(name, O_WRONLY | O_NOCTTY);
	if (s1 < 0 || s2 < 0)
		crt_fail("open %s: %s", name, strerror(errno));
	close(m); /* the slave hangs up */
	snprintf(link, sizeof(link), "%s (deleted)", name);
	hung(s1, "the non-blocking slave", link, O_RDWR | O_NONBLOCK);
	hung(s2, "the write-only slave", link, O_WRONLY);
	child = fork();
	if (child == 0) {
		crt_wait_term();
		hung(s1, "the child's slave", link, O_RDWR | O_NONBLOCK);
		_exit(0);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	hung(s1, "the non-blocking slave", link, O_RDWR | O_NONBLOCK);
	hung(s2, "the write-only slave", link, O_WRONLY);
	crt_check(syscall(SYS_kcmp, getpid(), child, KCMP_FILE, s1, s1) == 0,
		  "the child's slave is not the parent's description");
	crt_check(syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, s1, s2) != 0,
		  "the two slaves became one description");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child's checks failed (its output above)");
	crt_pass();
}
