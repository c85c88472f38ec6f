/* TCP inside the tree: a listener, and both ends of a loopback connection
 * with data written and not read in both directions (the client end in a
 * child).  After the restore the data arrives in order, new data flows
 * both ways, and the listener accepts a new connection.  The server end's
 * send buffer was sized by the program (locked, SO_BUF_LOCK 1) and keeps
 * its size and lock; the client end's were left to the kernel and stay
 * unlocked (its autotuning goes on). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define N1 100000
#define N2 70000

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

static int sockopt(int fd, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, opt, &v, &l) ? -1 : v;
}

static unsigned char pat(long i, int salt)
{
	return (unsigned char)(i * 7 + salt + (i >> 9));
}

static int xfer_check(int fd, long n, int salt)
{
	unsigned char buf[8192];
	long got = 0;

	while (got < n) {
		size_t want = sizeof(buf) < (size_t)(n - got) ? sizeof(buf) : (size_t)(n - got);
		ssize_t r = recv(fd, buf, want, 0);

		if (r <= 0)
			return -1;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(got + i, salt))
				return -2;
		got += r;
	}
	return 0;
}

static int xfer_send(int fd, long n, int salt)
{
	unsigned char buf[8192];
	long sent = 0;

	while (sent < n) {
		long k = sizeof(buf) < (size_t)(n - sent) ? (long)sizeof(buf) : n - sent;

		for (long i = 0; i < k; i++)
			buf[i] = pat(sent + i, salt);
		if (send(fd, buf, k, 0) != k)
			return -1;
		sent += k;
	}
	return 0;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int lst, srv, cli, st, sndbuf;
	pid_t child;

	crt_init();
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lst = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lst, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (bind(lst, (struct sockaddr *)&a, sizeof(a)) || listen(lst, 16) ||
	    getsockname(lst, (struct sockaddr *)&a, &al))
		crt_fail("listen: %s", strerror(errno));
	cli = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(cli, (struct sockaddr *)&a, sizeof(a)))
		crt_fail("connect: %s", strerror(errno));
	srv = accept(lst, NULL, NULL);
	if (srv < 0)
		crt_fail("accept: %s", strerror(errno));
	if (setsockopt(srv, SOL_SOCKET, SO_SNDBUF, &(int){ 96 << 10 }, sizeof(int)) ||
	    sockopt(srv, SO_BUF_LOCK) != 1 || sockopt(cli, SO_BUF_LOCK) != 0)
		crt_fail("SO_SNDBUF / SO_BUF_LOCK: %s", strerror(errno));
	sndbuf = sockopt(srv, SO_SNDBUF);
	setsockopt(srv, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (xfer_send(srv, N1, 1) || xfer_send(cli, N2, 2))
		crt_fail("send: %s", strerror(errno));

	child = fork();
	if (child == 0) {
		close(srv);
		close(lst);
		while (!crt_term)
			pause();
		if (xfer_check(cli, N1, 1))
			_exit(10);
		if (xfer_send(cli, 5000, 3))
			_exit(11);
		if (xfer_check(cli, 6000, 4))
			_exit(12);
		if (sockopt(cli, SO_BUF_LOCK) != 0)
			_exit(13); /* its buffers were not left to the kernel */
		_exit(0);
	}
	close(cli);
	usleep(100000);

	crt_ready();
	crt_wait_term();

	{
		int nd = 0;
		socklen_t l = sizeof(nd);
		getsockopt(srv, IPPROTO_TCP, TCP_NODELAY, &nd, &l);
		crt_check(nd, "TCP_NODELAY was lost");
	}
	crt_check(sockopt(srv, SO_BUF_LOCK) == 1 && sockopt(srv, SO_SNDBUF) == sndbuf,
		  "the server end's send buffer: lock %d, size %d (was 1, %d)",
		  sockopt(srv, SO_BUF_LOCK), sockopt(srv, SO_SNDBUF), sndbuf);
	kill(child, SIGTERM);
	crt_check(xfer_check(srv, N2, 2) == 0, "the bytes in flight to the server were lost or "
					       "changed");
	crt_check(xfer_send(srv, 6000, 4) == 0, "cannot send after the restore: %s",
		  strerror(errno));
	crt_check(xfer_check(srv, 5000, 3) == 0, "the client's new bytes did not arrive");
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the client side failed (%#x%s)", st,
		  WIFEXITED(st) && WEXITSTATUS(st) == 13 ? ": its buffers are locked" : "");
	{
		int c2 = socket(AF_INET, SOCK_STREAM, 0), s2;

		crt_check(connect(c2, (struct sockaddr *)&a, sizeof(a)) == 0,
			  "the listener does not take a new connection: %s", strerror(errno));
		s2 = accept(lst, NULL, NULL);
		crt_check(s2 >= 0, "accept after the restore: %s", strerror(errno));
	}
	crt_pass();
}
