/* Pseudo-terminals held by the tree come back with their index, termios,
 * window size and lock, and a session's controlling terminal with its
 * foreground group:
 *  - pair A: master and slave here, the slave opened without O_NOCTTY (the
 *    session's controlling terminal), termios changed (no echo, VINTR is
 *    ^B), 40x100; a child in its own process group shares the slave and is
 *    the terminal's foreground group; /dev/tty is open here too;
 *  - pair A holds unread data both ways: "one\ntwo\npart" for the slave
 *    (the last line incomplete) and "out\n" for the master;
 *  - pair B: a master never unlocked, non-blocking.
 * After the restore: same /dev/pts names, termios, window size and locks;
 * both processes have A as their controlling terminal and the child's
 * group is in the foreground; the queued bytes are read, then new bytes
 * flow both ways through A and through /dev/tty. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "crt.h"

static unsigned long ctty_of(pid_t pid)
{
	char path[64], *buf, *e;
	unsigned long tty = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	buf = crt_read_file(path, NULL);
	e = buf ? strrchr(buf, ')') : NULL;
	if (!e || sscanf(e + 2, "%*c %*d %*d %*d %lu", &tty) != 1)
		tty = 0;
	free(buf);
	return tty;
}

static void read_exact(int fd, char *buf, int len, const char *what)
{
	int got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n <= 0)
			crt_fail("%s: read: %s", what, n ? strerror(errno) : "end of file");
		got += n;
	}
	buf[got] = 0;
}

int main(void)
{
	char name_a[64], name_b[64], buf[64];
	struct termios t, t2;
	struct winsize ws = { 40, 100, 0, 0 }, ws2;
	struct stat st;
	int ma, sa, mb, tty, lock, status;
	unsigned long want;
	pid_t child;

	crt_init();
	ma = posix_openpt(O_RDWR | O_NOCTTY);
	mb = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK);
	if (ma < 0 || mb < 0 || grantpt(ma) || unlockpt(ma))
		crt_fail("posix_openpt: %s", strerror(errno));
	snprintf(name_a, sizeof(name_a), "%s", ptsname(ma));
	snprintf(name_b, sizeof(name_b), "%s", ptsname(mb));
	sa = open(name_a, O_RDWR); /* the controlling terminal of our session */
	tty = open("/dev/tty", O_RDWR);
	if (sa < 0 || tty < 0 || tcgetattr(sa, &t) || ioctl(ma, TIOCSWINSZ, &ws))
		crt_fail("slave: %s", strerror(errno));
	t.c_lflag &= ~ECHO;
	t.c_cc[VINTR] = 2;
	if (tcsetattr(sa, TCSANOW, &t))
		crt_fail("tcsetattr: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		setpgid(0, 0);
		crt_wait_term();
		_exit(ctty_of(getpid()) == ctty_of(getppid()) && ctty_of(getpid()) ? 0 : 1);
	}
	crt_own_child(child);
	setpgid(child, child);
	signal(SIGTTOU, SIG_IGN);
	if (tcsetpgrp(sa, child))
		crt_fail("tcsetpgrp: %s", strerror(errno));
	if (write(ma, "one\ntwo\npart", 12) != 12 || write(sa, "out\n", 4) != 4)
		crt_fail("queueing data: %s", strerror(errno));
	fstat(sa, &st);
	want = st.st_rdev;
	crt_check(ctty_of(getpid()) == want, "the slave is not our controlling terminal");

	crt_ready();
	crt_wait_term();

	crt_check(!strcmp(ptsname(ma), name_a), "pair A is %s, was %s", ptsname(ma), name_a);
	crt_check(!strcmp(ptsname(mb), name_b), "pair B is %s, was %s", ptsname(mb), name_b);
	crt_check(fstat(sa, &st) == 0 && st.st_rdev == want, "the slave is another device");
	crt_check(ctty_of(getpid()) == want, "pair A is not our controlling terminal any more");
	crt_check(tcgetpgrp(sa) == child, "the foreground group is %d, not %d", tcgetpgrp(sa),
		  child);
	crt_check(tcgetattr(sa, &t2) == 0 && !(t2.c_lflag & ECHO) && t2.c_cc[VINTR] == 2 &&
			  t2.c_iflag == t.c_iflag && t2.c_oflag == t.c_oflag &&
			  t2.c_cflag == t.c_cflag && t2.c_lflag == t.c_lflag,
		  "the slave's termios changed");
	crt_check(ioctl(sa, TIOCGWINSZ, &ws2) == 0 && ws2.ws_row == 40 && ws2.ws_col == 100,
		  "the window size is %dx%d", ws2.ws_row, ws2.ws_col);
	crt_check(ioctl(mb, TIOCGPTLCK, &lock) == 0 && lock == 1, "pair B was unlocked");
	crt_check(ioctl(ma, TIOCGPTLCK, &lock) == 0 && lock == 0, "pair A is locked");
	crt_check(fcntl(mb, F_GETFL) & O_NONBLOCK, "pair B lost O_NONBLOCK");
	/* reading its terminal from the background would fail (EIO) */
	crt_check(tcsetpgrp(sa, getpgrp()) == 0, "tcsetpgrp: %s", strerror(errno));
	/* the queued data (a canonical reader sees it as one line) */
	read_exact(sa, buf, 12, "slave's queue");
	crt_check(!memcmp(buf, "one\ntwo\npart", 12), "the slave's queue held '%s'", buf);
	read_exact(ma, buf, 5, "master's queue");
	crt_check(!memcmp(buf, "out\r\n", 5), "the master's queue held '%s'", buf);
	crt_check(write(ma, "ping\n", 5) == 5, "write to the master");
	read_exact(sa, buf, 5, "slave");
	crt_check(!strcmp(buf, "ping\n"), "the slave read '%s'", buf);
	crt_check(write(tty, "pong", 4) == 4, "write to /dev/tty: %s", strerror(errno));
	read_exact(ma, buf, 4, "master");
	crt_check(!strcmp(buf, "pong"), "the master read '%s'", buf);
	kill(child, SIGTERM);
	crt_check(waitpid(child, &status, 0) == child && WIFEXITED(status) && !WEXITSTATUS(status),
		  "the child lost the controlling terminal (%#x)", status);
	crt_pass();
}
