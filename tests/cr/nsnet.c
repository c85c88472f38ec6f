/* A tree in a network namespace of its own (crrun --own-netns: its
 * loopback up, as systemd's PrivateNetwork= makes it), with its mount, UTS
 * and IPC namespaces:
 *  - a TCP listener on 127.0.0.1 and an established loopback connection
 *    made to it, its two ends in two processes (the parent holds the
 *    client side, the child the accepted one), each with data the other
 *    has not read ("from-c", "from-a");
 *  - a unix stream pair across the two, with data queued each way;
 *  - a UDP socket on 127.0.0.1 with a datagram queued;
 *  - an abstract unix listener (abstract names are the namespace's);
 *  - fds 40 and 41, a unix pair crrun made before the namespace (in its
 *    own: as systemd makes a unit's stdout stream), with data queued.
 * After the restore: the loopback is up; each queue has what it had; the
 * connection carries new data both ways with its addresses and ports as
 * they were; the listener accepts a new connection on its port; the
 * abstract name answers a connect; the pair made outside carries its data
 * and new data.
 * With the argument "outside": the tree's only connection goes to a
 * listener of a process that left the tree (its parent exited), in the
 * same namespace: the dump must refuse, naming the connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define ABSTRACT "\0crtest-nsnet"

static struct sockaddr_in lo4(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons(port),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

static uint16_t port_of(int sk, bool peer)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	if (peer ? getpeername(sk, (struct sockaddr *)&a, &l)
		 : getsockname(sk, (struct sockaddr *)&a, &l))
		return 0;
	return ntohs(a.sin_port);
}

/* exactly want from sk, waiting 10 s at most */
static bool read_exact(int sk, const char *want)
{
	size_t n = strlen(want), got = 0;
	char buf[64];

	setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 10 },
		   sizeof(struct timeval));
	while (got < n) {
		ssize_t r = read(sk, buf + got, n - got);

		if (r <= 0)
			return false;
		got += r;
	}
	return !memcmp(buf, want, n);
}

static struct sockaddr_un abstract(socklen_t *len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	memcpy(a.sun_path, ABSTRACT, sizeof(ABSTRACT) - 1);
	*len = offsetof(struct sockaddr_un, sun_path) + sizeof(ABSTRACT) - 1;
	return a;
}

/* a connection to a process outside the tree, in its namespace */
static void outside(void)
{
	int p[2], c, st;
	uint16_t port = 0;
	pid_t pid;

	crt_check(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		if (fork() == 0) {
			struct sockaddr_in a = lo4(0);
			socklen_t al = sizeof(a);
			int l = socket(AF_INET, SOCK_STREAM, 0), s;
			char b[16];

			alarm(120); /* bounded, whatever happens to the test */
			setsid();
			if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
			    getsockname(l, (struct sockaddr *)&a, &al))
				_exit(1);
			port = ntohs(a.sin_port);
			if (write(p[1], &port, sizeof(port)) != sizeof(port))
				_exit(1);
			s = accept(l, NULL, NULL);
			while (s >= 0 && read(s, b, sizeof(b)) > 0)
				;
			_exit(0); /* the tree's end closed */
		}
		_exit(0);
	}
	close(p[1]);
	crt_check(waitpid(pid, &st, 0) == pid && read(p[0], &port, sizeof(port)) == sizeof(port),
		  "the process outside did not start");
	{
		struct sockaddr_in a = lo4(port);

		c = socket(AF_INET, SOCK_STREAM, 0);
		crt_check(c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a)), "connect: %s",
			  strerror(errno));
	}
	crt_ready();
	crt_wait_term();
	crt_pass();
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = lo4(0);
	socklen_t al = sizeof(a), ul;
	struct sockaddr_un un = abstract(&ul);
	struct ifreq ifr = { .ifr_name = "lo" };
	int l, c, acc, u1, u2, ab, pr[2], up[2], st;
	uint16_t lport, cport, uport;
	char buf[64];
	pid_t child;

	crt_init();
	if (argc > 1 && !strcmp(argv[1], "outside"))
		outside();
	l = socket(AF_INET, SOCK_STREAM, 0);
	crt_check(l >= 0 && !bind(l, (struct sockaddr *)&a, sizeof(a)) && !listen(l, 8) &&
			  !getsockname(l, (struct sockaddr *)&a, &al),
		  "listener: %s", strerror(errno));
	lport = ntohs(a.sin_port);
	c = socket(AF_INET, SOCK_STREAM, 0);
	crt_check(c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a)), "connect: %s",
		  strerror(errno));
	acc = accept(l, NULL, NULL);
	crt_check(acc >= 0, "accept: %s", strerror(errno));
	cport = port_of(c, false);
	a = lo4(0);
	u1 = socket(AF_INET, SOCK_DGRAM, 0);
	u2 = socket(AF_INET, SOCK_DGRAM, 0);
	al = sizeof(a);
	crt_check(u1 >= 0 && u2 >= 0 && !bind(u1, (struct sockaddr *)&a, sizeof(a)) &&
			  !getsockname(u1, (struct sockaddr *)&a, &al) &&
			  sendto(u2, "datagram", 8, 0, (struct sockaddr *)&a, sizeof(a)) == 8,
		  "udp: %s", strerror(errno));
	uport = ntohs(a.sin_port);
	close(u2);
	ab = socket(AF_UNIX, SOCK_STREAM, 0);
	crt_check(ab >= 0 && !bind(ab, (struct sockaddr *)&un, ul) && !listen(ab, 4),
		  "abstract listener: %s", strerror(errno));
	crt_check(!socketpair(AF_UNIX, SOCK_STREAM, 0, up) && pipe(pr) == 0, "socketpair");

	child = fork();
	if (child == 0) {
		close(c);
		close(up[0]);
		close(pr[0]);
		if (write(acc, "from-a", 6) != 6 || write(up[1], "unix-a", 6) != 6)
			_exit(1);
		close(pr[1]);
		crt_wait_term();
		/* its ends: what the parent sent before the dump, then new data */
		if (!read_exact(acc, "from-c") || !read_exact(up[1], "unix-c"))
			_exit(2);
		if (port_of(acc, false) != lport || port_of(acc, true) != cport)
			_exit(3);
		_exit(write(acc, "after-a", 7) == 7 ? 0 : 4);
	}
	crt_own_child(child);
	close(acc);
	close(up[1]);
	close(pr[1]);
	crt_check(write(c, "from-c", 6) == 6 && write(up[0], "unix-c", 6) == 6, "writes");
	crt_check(write(40, "outer", 5) == 5, "fd 40, made outside the namespace: %s",
		  strerror(errno));
	crt_check(read(pr[0], buf, 1) == 0, "child");
	close(pr[0]);

	crt_ready();
	crt_wait_term();

	{
		int sk = socket(AF_INET, SOCK_DGRAM, 0);

		crt_check(sk >= 0 && !ioctl(sk, SIOCGIFFLAGS, &ifr) && (ifr.ifr_flags & IFF_UP),
			  "the loopback is not up: %s", strerror(errno));
		close(sk);
	}
	crt_check(port_of(c, false) == cport && port_of(c, true) == lport,
		  "the connection's ports: %u -> %u, were %u -> %u", port_of(c, false),
		  port_of(c, true), cport, lport);
	crt_check(read_exact(c, "from-a"), "the client's queue lacks from-a");
	crt_check(read_exact(up[0], "unix-a"), "the unix pair's queue lacks unix-a");
	crt_check(recv(u1, buf, sizeof(buf), MSG_DONTWAIT) == 8 && !memcmp(buf, "datagram", 8),
		  "the UDP socket on port %u lost its datagram", uport);
	{
		struct sockaddr_in b = lo4(lport);
		int n = socket(AF_INET, SOCK_STREAM, 0), s;

		crt_check(n >= 0 && !connect(n, (struct sockaddr *)&b, sizeof(b)),
			  "a new connection to the listener's port %u: %s", lport, strerror(errno));
		s = accept(l, NULL, NULL);
		crt_check(s >= 0 && write(n, "new", 3) == 3 && read_exact(s, "new"),
			  "the listener did not accept the new connection");
		close(s);
		close(n);
	}
	{
		int n = socket(AF_UNIX, SOCK_STREAM, 0);

		crt_check(n >= 0 && !connect(n, (struct sockaddr *)&un, ul),
			  "the abstract name does not answer: %s", strerror(errno));
		close(n);
	}
	crt_check(read_exact(41, "outer") && write(41, "back", 4) == 4 && read_exact(40, "back"),
		  "the unix pair made outside the namespace lost its data");
	kill(child, SIGTERM);
	crt_check(read_exact(c, "after-a"), "the accepted end's new data did not come");
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the child holding the accepted end: status %x", st);
	crt_pass();
}
