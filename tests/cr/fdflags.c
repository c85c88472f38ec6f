/* Every fd keeps its file status flags and the owner of its signals:
 *  - O_NONBLOCK on unix sockets of each type (one end of a pair only), a
 *    unix listener, a TCP listener, a bound UDP socket, a pipe's read end,
 *    an eventfd, a timerfd, an epoll and an inotify instance;
 *  - O_APPEND | O_NOATIME | O_NONBLOCK on a regular file, and O_DIRECT
 *    where the scratch directory's file system takes it;
 *  - O_ASYNC on a unix socket whose signals go to this process as
 *    SIGRTMIN+1 (F_SETOWN_EX, F_SETSIG): data written to its peer after the
 *    restore brings that signal with the fd in si_fd;
 *  - the owner of a TCP listener's signals (SIGURG) is the child, and that
 *    of a dgram socket this process's group.
 * Each fd's flags are compared with those read before the dump. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define STATUS (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK | O_ACCMODE)

struct watched {
	int fd;
	const char *what;
	int want; /* the status flags this test set, checked before the dump */
	int before;
};

static struct watched w[32];
static int nw;

static void watch(int fd, const char *what, int want)
{
	if (fd < 0)
		crt_fail("%s: %s", what, strerror(errno));
	w[nw].fd = fd;
	w[nw].what = what;
	w[nw].want = want;
	w[nw].before = fcntl(fd, F_GETFL) & STATUS;
	if ((w[nw].before & want) != want)
		crt_fail("%s: flags %#o before the dump, without %#o", what, w[nw].before, want);
	nw++;
}

static int bound_inet(int type)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int sk = socket(AF_INET, type | SOCK_NONBLOCK, 0);

	if (sk < 0 || bind(sk, (struct sockaddr *)&a, sizeof(a)))
		crt_fail("bind: %s", strerror(errno));
	if (type == SOCK_STREAM && listen(sk, 4))
		crt_fail("listen: %s", strerror(errno));
	return sk;
}

int main(void)
{
	int st[2], dg[2], sp[2], as[2], pp[2], lst, tcp, udp, reg, dir = -1, efd, tfd, ep, ify;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct f_owner_ex own, tcp_own, dg_own;
	int sig = SIGRTMIN + 1, status;
	sigset_t set;
	siginfo_t si;
	pid_t child;

	crt_init();
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, NULL);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, st) ||
	    socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sp) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, as) || pipe(pp))
		crt_fail("socketpair: %s", strerror(errno));
	fcntl(st[1], F_SETFL, 0);	   /* one end blocking, the other not */
	fcntl(dg[0], F_SETFL, O_NONBLOCK); /* set after the socket was made */
	fcntl(pp[0], F_SETFL, O_NONBLOCK);
	watch(st[0], "stream socket", O_NONBLOCK);
	watch(st[1], "stream socket's blocking end", 0);
	watch(dg[0], "dgram socket", O_NONBLOCK);
	watch(dg[1], "dgram socket's blocking end", 0);
	watch(sp[0], "seqpacket socket", O_NONBLOCK);
	watch(pp[0], "pipe's read end", O_NONBLOCK);
	watch(pp[1], "pipe's write end", 0);

	lst = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", crt_path("fdflags.sock"));
	if (lst < 0 || bind(lst, (struct sockaddr *)&a, sizeof(a)) || listen(lst, 4))
		crt_fail("unix listener: %s", strerror(errno));
	watch(lst, "unix listener", O_NONBLOCK);
	tcp = bound_inet(SOCK_STREAM);
	watch(tcp, "TCP listener", O_NONBLOCK);
	udp = bound_inet(SOCK_DGRAM);
	watch(udp, "UDP socket", O_NONBLOCK);

	reg = open(crt_path("fdflags.data"), O_RDWR | O_CREAT | O_APPEND | O_NOATIME | O_NONBLOCK,
		   0600);
	watch(reg, "regular file", O_APPEND | O_NOATIME | O_NONBLOCK | O_RDWR);
	dir = open(crt_path("fdflags.direct"), O_WRONLY | O_CREAT | O_DIRECT, 0600);
	if (dir >= 0)
		watch(dir, "file opened with O_DIRECT", O_DIRECT | O_WRONLY);
	else
		crt_msg("O_DIRECT not checked: the scratch directory refuses it (%s)",
			strerror(errno));
	efd = eventfd(0, EFD_NONBLOCK);
	watch(efd, "eventfd", O_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	watch(tfd, "timerfd", O_NONBLOCK);
	ep = epoll_create1(0);
	fcntl(ep, F_SETFL, O_NONBLOCK);
	watch(ep, "epoll", O_NONBLOCK);
	ify = inotify_init1(IN_NONBLOCK);
	watch(ify, "inotify", O_NONBLOCK);

	/* signals: to this process as SIGRTMIN+1, to the child, to the group */
	own = (struct f_owner_ex){ F_OWNER_PID, getpid() };
	if (fcntl(as[0], F_SETOWN_EX, &own) || fcntl(as[0], F_SETSIG, sig) ||
	    fcntl(as[0], F_SETFL, O_ASYNC | O_NONBLOCK))
		crt_fail("O_ASYNC: %s", strerror(errno));
	watch(as[0], "socket with O_ASYNC", O_ASYNC | O_NONBLOCK);
	child = fork();
	if (child == 0) {
		crt_wait_term();
		_exit(0);
	}
	crt_own_child(child);
	tcp_own = (struct f_owner_ex){ F_OWNER_PID, child };
	dg_own = (struct f_owner_ex){ F_OWNER_PGRP, getpgid(0) };
	if (fcntl(tcp, F_SETOWN_EX, &tcp_own) || fcntl(dg[1], F_SETOWN_EX, &dg_own))
		crt_fail("F_SETOWN_EX: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	for (int i = 0; i < nw; i++) {
		int now = fcntl(w[i].fd, F_GETFL) & STATUS;

		crt_check(now == w[i].before, "%s (fd %d): flags %#o after the restore, %#o before",
			  w[i].what, w[i].fd, now, w[i].before);
	}
	memset(&own, 0, sizeof(own));
	crt_check(
		!fcntl(as[0], F_GETOWN_EX, &own) && own.type == F_OWNER_PID && own.pid == getpid(),
		"the O_ASYNC socket's owner is %d (type %d), not this process", own.pid, own.type);
	crt_check(fcntl(as[0], F_GETSIG) == sig, "the O_ASYNC socket's signal is %d, not %d",
		  fcntl(as[0], F_GETSIG), sig);
	memset(&own, 0, sizeof(own));
	crt_check(!fcntl(tcp, F_GETOWN_EX, &own) && own.type == F_OWNER_PID && own.pid == child,
		  "the TCP listener's owner is %d (type %d), not the child %d", own.pid, own.type,
		  child);
	memset(&own, 0, sizeof(own));
	crt_check(!fcntl(dg[1], F_GETOWN_EX, &own) && own.type == F_OWNER_PGRP &&
			  own.pid == getpgid(0),
		  "the dgram socket's owner is %d (type %d), not the group %d", own.pid, own.type,
		  getpgid(0));
	crt_check(write(as[1], "x", 1) == 1, "write to the O_ASYNC socket's peer: %s",
		  strerror(errno));
	crt_check(sigtimedwait(&set, &si, &(struct timespec){ 2, 0 }) == sig,
		  "no SIGRTMIN+1 within 2 s of data arriving on the O_ASYNC socket");
	crt_check(si.si_fd == as[0], "the signal names fd %d, not %d", si.si_fd, as[0]);
	kill(child, SIGTERM);
	waitpid(child, &status, 0);
	crt_pass();
}
