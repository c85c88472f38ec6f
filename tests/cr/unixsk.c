/* Unix sockets survive with their data, boundaries and options:
 *  - a stream socketpair with unread data both ways, one end in a child;
 *  - a dgram socketpair with three queued messages (boundaries kept);
 *  - a seqpacket socketpair with queued records;
 *  - a listener bound to a path with a connection not yet accepted (its
 *    client in this process): accepted after the restore, and usable;
 *  - an abstract-named dgram receiver with datagrams queued by a client
 *    connected to it;
 *  - SO_RCVBUF and SO_PASSCRED on one socket. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static int st[2], dg[2], sp[2], lst, cli, rcv, snd;
static pid_t child;

static void xsend(int fd, const char *s)
{
	if (send(fd, s, strlen(s), 0) != (ssize_t)strlen(s))
		crt_fail("send: %s", strerror(errno));
}

static void expect(int fd, const char *want, const char *what)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	crt_check(n >= 0, "%s: nothing to read (%s)", what, strerror(errno));
	buf[n] = 0;
	crt_check(!strcmp(buf, want), "%s: read '%s', expected '%s'", what, buf, want);
}

static socklen_t addr(struct sockaddr_un *a, const char *path, bool abstract)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (abstract) {
		snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s", path);
		return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
	}
	snprintf(a->sun_path, sizeof(a->sun_path), "%s", path);
	return sizeof(*a);
}

int main(void)
{
	struct sockaddr_un a;
	socklen_t len;
	char abs_name[64];
	int rcvbuf = 0, pc = 0, status;
	socklen_t ol = sizeof(int);

	crt_init();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) || socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp))
		crt_fail("socketpair: %s", strerror(errno));
	xsend(st[0], "from-parent");
	xsend(st[1], "from-child");
	xsend(dg[1], "one");
	xsend(dg[1], "two");
	xsend(dg[1], "three");
	xsend(sp[0], "rec-a");
	xsend(sp[0], "rec-b");
	setsockopt(dg[0], SOL_SOCKET, SO_RCVBUF, &(int){ 50000 }, sizeof(int));
	setsockopt(dg[0], SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int));

	lst = socket(AF_UNIX, SOCK_STREAM, 0);
	len = addr(&a, crt_path("listener.sock"), false);
	if (bind(lst, (struct sockaddr *)&a, len) || listen(lst, 7))
		crt_fail("listener: %s", strerror(errno));
	cli = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(cli, (struct sockaddr *)&a, len))
		crt_fail("connect: %s", strerror(errno));

	snprintf(abs_name, sizeof(abs_name), "kupdate-test-%d", getpid());
	rcv = socket(AF_UNIX, SOCK_DGRAM, 0);
	snd = socket(AF_UNIX, SOCK_DGRAM, 0);
	len = addr(&a, abs_name, true);
	if (bind(rcv, (struct sockaddr *)&a, len) || connect(snd, (struct sockaddr *)&a, len))
		crt_fail("abstract dgram: %s", strerror(errno));
	xsend(snd, "dgram-1");
	xsend(snd, "dgram-2");

	child = fork();
	if (child == 0) {
		close(st[0]);
		while (!crt_term)
			pause();
		expect(st[1], "from-parent", "child stream");
		xsend(st[1], "child-after");
		_exit(0);
	}
	close(st[1]);

	crt_ready();
	crt_wait_term();

	expect(st[0], "from-child", "parent stream");
	expect(dg[0], "one", "dgram 1");
	expect(dg[0], "two", "dgram 2");
	expect(dg[0], "three", "dgram 3");
	expect(sp[1], "rec-a", "seqpacket 1");
	expect(sp[1], "rec-b", "seqpacket 2");
	getsockopt(dg[0], SOL_SOCKET, SO_RCVBUF, &rcvbuf, &ol);
	crt_check(rcvbuf == 100000, "SO_RCVBUF is %d, expected 100000", rcvbuf);
	ol = sizeof(int);
	getsockopt(dg[0], SOL_SOCKET, SO_PASSCRED, &pc, &ol);
	crt_check(pc == 1, "SO_PASSCRED was lost");
	expect(rcv, "dgram-1", "abstract dgram 1");
	expect(rcv, "dgram-2", "abstract dgram 2");
	xsend(snd, "dgram-3");
	expect(rcv, "dgram-3", "abstract dgram after the restore");
	{
		int acc = accept(lst, NULL, NULL);

		crt_check(acc >= 0, "the pending connection cannot be accepted: %s",
			  strerror(errno));
		xsend(cli, "hello");
		usleep(10000);
		expect(acc, "hello", "accepted connection");
	}
	kill(child, SIGTERM);
	crt_check(waitpid(child, &status, 0) == child && WIFEXITED(status) && !WEXITSTATUS(status),
		  "child failed (%#x)", status);
	usleep(10000);
	expect(st[0], "child-after", "parent stream after the restore");
	crt_pass();
}
