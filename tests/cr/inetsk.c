/* TCP and UDP sockets that are not connected, with their options
 * ("inetsk" for IPv4, "inetsk v6" for IPv6; run in a network namespace of
 * its own, crrun --netns): a TCP socket never bound, TCP sockets bound but
 * neither listening nor connected (to a fixed port on the wildcard address,
 * to port 0 on loopback for a port the kernel chooses, to a specific
 * address and port, and to an address without a port with
 * IP_BIND_ADDRESS_NO_PORT), one whose connect failed (a new socket
 * again, though getsockname still shows the port it had), a TCP listener, an unbound UDP socket, a bound
 * one and a connected one.  The options are set the way a program sets
 * them (SO_REUSEADDR, SO_REUSEPORT, TCP_NODELAY, SO_SNDBUF/SO_RCVBUF, which
 * the kernel doubles and locks, SO_KEEPALIVE with TCP_KEEPIDLE/KEEPINTVL/
 * KEEPCNT, IP_TOS or IPV6_TCLASS, IPV6_V6ONLY, SO_BROADCAST, SO_LINGER,
 * SO_PRIORITY, IP_TTL or IPV6_UNICAST_HOPS, TCP_MAXSEG, TCP_USER_TIMEOUT,
 * SO_BINDTODEVICE).
 *
 * Before crt_ready() every option of a list (also those left alone) and
 * the socket's name are read with getsockopt and getsockname; after the
 * restore each must read the same.  Then the sockets must still work: the
 * bound TCP sockets listen on their port and accept a connection, the
 * unbound one connects to the listener (whose accepted socket inherits its
 * TCP_NODELAY), the unbound UDP socket sends to the bound one and gets the
 * answer, and the connected pair exchanges a datagram. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "crt.h"

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

static int family = AF_INET;

struct opt {
	int level, name;
	const char *what;
	bool v6, tcp; /* only on an AF_INET6 socket, only on TCP */
};

static const struct opt opts[] = {
	{ SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN", 0, 0 },
	{ SOL_SOCKET, SO_TYPE, "SO_TYPE", 0, 0 },
	{ SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL", 0, 0 },
	{ SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN", 0, 0 },
	{ SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", 0, 0 },
	{ SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", 0, 0 },
	{ SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 0, 0 },
	{ SOL_SOCKET, SO_BROADCAST, "SO_BROADCAST", 0, 0 },
	{ SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF", 0, 0 },
	{ SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF", 0, 0 },
	{ SOL_SOCKET, SO_BUF_LOCK, "SO_BUF_LOCK", 0, 0 },
	{ SOL_SOCKET, SO_LINGER, "SO_LINGER", 0, 0 },
	{ SOL_SOCKET, SO_PRIORITY, "SO_PRIORITY", 0, 0 },
	{ SOL_SOCKET, SO_RCVLOWAT, "SO_RCVLOWAT", 0, 0 },
	{ SOL_SOCKET, SO_RCVTIMEO, "SO_RCVTIMEO", 0, 0 },
	{ SOL_SOCKET, SO_SNDTIMEO, "SO_SNDTIMEO", 0, 0 },
	{ SOL_SOCKET, SO_MARK, "SO_MARK", 0, 0 },
	{ SOL_SOCKET, SO_OOBINLINE, "SO_OOBINLINE", 0, 0 },
	{ SOL_SOCKET, SO_BINDTODEVICE, "SO_BINDTODEVICE", 0, 0 },
	{ IPPROTO_IP, IP_TOS, "IP_TOS", 0, 0 },
	{ IPPROTO_IP, IP_TTL, "IP_TTL", 0, 0 },
	{ IPPROTO_IP, IP_FREEBIND, "IP_FREEBIND", 0, 0 },
	{ IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, "IP_BIND_ADDRESS_NO_PORT", 0, 0 },
	{ IPPROTO_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY", 1, 0 },
	{ IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS", 1, 0 },
	{ IPPROTO_IPV6, IPV6_UNICAST_HOPS, "IPV6_UNICAST_HOPS", 1, 0 },
	{ IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 0, 1 },
	{ IPPROTO_TCP, TCP_CORK, "TCP_CORK", 0, 1 },
	{ IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", 0, 1 },
	{ IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", 0, 1 },
	{ IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", 0, 1 },
	{ IPPROTO_TCP, TCP_MAXSEG, "TCP_MAXSEG", 0, 1 },
	{ IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", 0, 1 },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

struct sk {
	const char *name;
	int fd;
	bool tcp;
	unsigned char val[NOPTS][16];
	socklen_t len[NOPTS];
	int err[NOPTS];
	struct sockaddr_storage addr;
	socklen_t alen;
};

enum {
	T_UNBOUND,
	T_FAILED,
	T_PORT,
	T_AUTO,
	T_ADDR,
	T_NOPORT,
	T_LISTEN,
	U_UNBOUND,
	U_BOUND,
	U_CONN,
	NSK
};
static struct sk sks[NSK];

static socklen_t mkaddr(struct sockaddr_storage *ss, int which, unsigned port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		/* 0: any, 1: loopback, 2: another loopback address */
		a->sin_addr.s_addr = htonl(which == 0	? INADDR_ANY
					   : which == 1 ? 0x7f000001
							: 0x7f000003);
		return sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		if (which)
			a->sin6_addr = in6addr_loopback;
		return sizeof(*a);
	}
}

static unsigned port_of(const struct sockaddr_storage *ss)
{
	return ntohs(family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
				       : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void seti(int fd, int level, int name, int v, const char *what)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)))
		crt_fail("setsockopt %s %d: %s", what, v, strerror(errno));
}

static int mk(int i, const char *name, bool tcp)
{
	int fd = socket(family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);

	if (fd < 0)
		crt_fail("socket: %s", strerror(errno));
	sks[i].name = name;
	sks[i].fd = fd;
	sks[i].tcp = tcp;
	return fd;
}

static void bind_to(int i, int which, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t l = mkaddr(&ss, which, port);

	if (bind(sks[i].fd, (struct sockaddr *)&ss, l))
		crt_fail("%s: bind: %s", sks[i].name, strerror(errno));
}

/* every option and the name, as they read now */
static void record(struct sk *s, unsigned char val[][16], socklen_t *len, int *err,
		   struct sockaddr_storage *addr, socklen_t *alen)
{
	for (size_t k = 0; k < NOPTS; k++) {
		len[k] = 16;
		memset(val[k], 0, 16);
		err[k] = 0;
		if ((opts[k].v6 && family != AF_INET6) || (opts[k].tcp && !s->tcp))
			continue;
		if (getsockopt(s->fd, opts[k].level, opts[k].name, val[k], &len[k]))
			err[k] = errno;
	}
	*alen = sizeof(*addr);
	memset(addr, 0, sizeof(*addr));
	if (getsockname(s->fd, (struct sockaddr *)addr, alen))
		crt_fail("%s: getsockname: %s", s->name, strerror(errno));
}

static void compare(struct sk *s)
{
	unsigned char val[NOPTS][16];
	socklen_t len[NOPTS], alen;
	int err[NOPTS];
	struct sockaddr_storage addr;

	record(s, val, len, err, &addr, &alen);
	for (size_t k = 0; k < NOPTS; k++) {
		int a, b;

		if (err[k] != s->err[k] || len[k] != s->len[k] ||
		    memcmp(val[k], s->val[k], len[k])) {
			memcpy(&a, s->val[k], 4);
			memcpy(&b, val[k], 4);
			crt_fail(
				"%s: %s reads %d (len %u, errno %d) after the restore, %d (len %u, "
				"errno %d) before",
				s->name, opts[k].what, b, len[k], err[k], a, s->len[k], s->err[k]);
		}
	}
	if (s == &sks[T_FAILED]) {
		/* its getsockname showed the port it had given back */
		if (port_of(&addr))
			crt_fail("%s: holds port %u after the restore", s->name, port_of(&addr));
		return;
	}
	if (alen != s->alen || memcmp(&addr, &s->addr, alen))
		crt_fail("%s: getsockname differs after the restore (port %u, was %u)", s->name,
			 port_of(&addr), port_of(&s->addr));
}

static void wait_in(int fd, const char *what)
{
	struct pollfd p = { fd, POLLIN, 0 };

	if (poll(&p, 1, 5000) != 1)
		crt_fail("%s: nothing arrived within 5 s", what);
}

/* a new connection to port of the listener l, accepted */
static int connect_accept(int l, unsigned port, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, 1, port);
	int c = socket(family, SOCK_STREAM, 0), a;

	if (c < 0 || connect(c, (struct sockaddr *)&ss, len))
		crt_fail("%s: connect to port %u: %s", what, port, strerror(errno));
	wait_in(l, what);
	a = accept(l, NULL, NULL);
	if (a < 0)
		crt_fail("%s: accept: %s", what, strerror(errno));
	if (send(c, "x", 1, 0) != 1 || recv(a, (char[1]){ 0 }, 1, 0) != 1)
		crt_fail("%s: a byte through the connection: %s", what, strerror(errno));
	close(c);
	return a;
}

int main(int argc, char **argv)
{
	struct linger lg = { 1, 7 };
	int fd, v = 0;
	socklen_t vl = sizeof(v), al;
	struct sockaddr_storage ss;
	char buf[16];

	crt_init();
	if (argc > 1 && !strcmp(argv[1], "v6"))
		family = AF_INET6;

	/* never bound, with most options */
	fd = mk(T_UNBOUND, "unbound TCP", true);
	seti(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
	seti(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	seti(fd, SOL_SOCKET, SO_SNDBUF, 30000, "SO_SNDBUF");
	seti(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
	seti(fd, IPPROTO_TCP, TCP_KEEPIDLE, 77, "TCP_KEEPIDLE");
	seti(fd, IPPROTO_TCP, TCP_KEEPINTVL, 11, "TCP_KEEPINTVL");
	seti(fd, IPPROTO_TCP, TCP_KEEPCNT, 5, "TCP_KEEPCNT");
	seti(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, 12345, "TCP_USER_TIMEOUT");
	seti(fd, IPPROTO_TCP, TCP_MAXSEG, 1000, "TCP_MAXSEG");
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		crt_fail("SO_LINGER: %s", strerror(errno));
	/* IP_TOS sets the priority too: SO_PRIORITY afterwards */
	seti(fd, IPPROTO_IP, IP_TOS, 0x10, "IP_TOS");
	seti(fd, SOL_SOCKET, SO_PRIORITY, 0, "SO_PRIORITY");
	seti(fd, IPPROTO_IP, IP_TTL, 33, "IP_TTL");
	if (family == AF_INET6) {
		seti(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
		seti(fd, IPPROTO_IPV6, IPV6_TCLASS, 0x28, "IPV6_TCLASS");
		seti(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 17, "IPV6_UNICAST_HOPS");
	}

	/* a blocking connect refused: a new socket again, though getsockname
	 * still shows the port it had for a moment */
	fd = mk(T_FAILED, "TCP whose connect failed", true);
	seti(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	al = mkaddr(&ss, 1, 9);
	if (!connect(fd, (struct sockaddr *)&ss, al) || errno != ECONNREFUSED)
		crt_fail("connect to a closed port: %s", strerror(errno));

	/* bound to a fixed port on the wildcard address */
	fd = mk(T_PORT, "TCP bound to a port", true);
	seti(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
	seti(fd, SOL_SOCKET, SO_RCVBUF, 50000, "SO_RCVBUF");
	seti(fd, SOL_SOCKET, SO_PRIORITY, 3, "SO_PRIORITY");
	bind_to(T_PORT, 0, 40001);

	/* port 0 on loopback: the kernel chooses */
	fd = mk(T_AUTO, "TCP bound to port 0", true);
	seti(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
	seti(fd, SOL_SOCKET, SO_SNDBUF, 1, "SO_SNDBUF"); /* below the kernel's minimum */
	bind_to(T_AUTO, 1, 0);

	/* a specific address and port */
	fd = mk(T_ADDR, "TCP bound to an address", true);
	seti(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
	if (family == AF_INET6)
		seti(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1, "IPV6_V6ONLY");
	bind_to(T_ADDR, 2, 40003);

	/* an address, its port chosen only when it connects */
	fd = mk(T_NOPORT, "TCP bound without a port", true);
	seti(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1, "IP_BIND_ADDRESS_NO_PORT");
	bind_to(T_NOPORT, 1, 0);

	/* a listener whose accepted sockets inherit TCP_NODELAY */
	fd = mk(T_LISTEN, "TCP listener", true);
	seti(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	seti(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
	bind_to(T_LISTEN, 1, 0);
	if (listen(fd, 8))
		crt_fail("listen: %s", strerror(errno));

	/* UDP never bound */
	fd = mk(U_UNBOUND, "unbound UDP", false);
	seti(fd, SOL_SOCKET, SO_BROADCAST, 1, "SO_BROADCAST");
	seti(fd, SOL_SOCKET, SO_RCVBUF, 70000, "SO_RCVBUF");
	seti(fd, IPPROTO_IP, IP_TTL, 9, "IP_TTL");
	seti(fd, IPPROTO_IP, IP_TOS, 0x08, "IP_TOS");
	if (family == AF_INET6) {
		seti(fd, IPPROTO_IPV6, IPV6_TCLASS, 0x40, "IPV6_TCLASS");
		seti(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 200, "IPV6_UNICAST_HOPS");
	}
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", 2))
		crt_fail("SO_BINDTODEVICE lo: %s", strerror(errno));

	/* UDP bound to loopback, and one connected to it */
	fd = mk(U_BOUND, "bound UDP", false);
	bind_to(U_BOUND, 1, 0);
	fd = mk(U_CONN, "connected UDP", false);
	al = sizeof(ss);
	if (getsockname(sks[U_BOUND].fd, (struct sockaddr *)&ss, &al) ||
	    connect(fd, (struct sockaddr *)&ss, al))
		crt_fail("UDP connect: %s", strerror(errno));

	for (int i = 0; i < NSK; i++)
		record(&sks[i], sks[i].val, sks[i].len, sks[i].err, &sks[i].addr, &sks[i].alen);
	crt_ready();
	crt_wait_term();

	for (int i = 0; i < NSK; i++)
		compare(&sks[i]);

	/* the bound sockets still listen and connect on their port */
	for (int i = T_PORT; i <= T_ADDR; i++) {
		if (listen(sks[i].fd, 4))
			crt_fail("%s: listen: %s", sks[i].name, strerror(errno));
		if (i != T_ADDR || family == AF_INET6)
			close(connect_accept(sks[i].fd, port_of(&sks[i].addr), sks[i].name));
	}
	if (family == AF_INET) { /* 127.0.0.3: connect there */
		al = mkaddr(&ss, 2, port_of(&sks[T_ADDR].addr));
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&ss, al))
			crt_fail("connect to 127.0.0.3: %s", strerror(errno));
		wait_in(sks[T_ADDR].fd, "127.0.0.3");
		close(accept(sks[T_ADDR].fd, NULL, NULL));
		close(fd);
	}
	/* the one without a port gets one when it connects, from its address */
	fd = connect_accept(sks[T_LISTEN].fd, port_of(&sks[T_LISTEN].addr), "listener");
	if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl) || !v)
		crt_fail("the listener's accepted socket has no TCP_NODELAY");
	close(fd);
	al = sizeof(ss);
	getsockname(sks[T_LISTEN].fd, (struct sockaddr *)&ss, &al);
	if (connect(sks[T_NOPORT].fd, (struct sockaddr *)&ss, al) ||
	    connect(sks[T_UNBOUND].fd, (struct sockaddr *)&ss, al) ||
	    connect(sks[T_FAILED].fd, (struct sockaddr *)&ss, al))
		crt_fail("connect of the unbound sockets to the listener: %s", strerror(errno));
	for (int k = 0; k < 3; k++) {
		wait_in(sks[T_LISTEN].fd, "listener");
		close(accept(sks[T_LISTEN].fd, NULL, NULL));
	}

	/* UDP: unbound -> bound, the answer back; connected -> bound */
	al = sizeof(ss);
	getsockname(sks[U_BOUND].fd, (struct sockaddr *)&ss, &al);
	if (sendto(sks[U_UNBOUND].fd, "ping", 4, 0, (struct sockaddr *)&ss, al) != 4)
		crt_fail("sendto from the unbound UDP socket: %s", strerror(errno));
	wait_in(sks[U_BOUND].fd, "UDP ping");
	al = sizeof(ss);
	if (recvfrom(sks[U_BOUND].fd, buf, sizeof(buf), 0, (struct sockaddr *)&ss, &al) != 4 ||
	    memcmp(buf, "ping", 4) ||
	    sendto(sks[U_BOUND].fd, "pong", 4, 0, (struct sockaddr *)&ss, al) != 4)
		crt_fail("UDP ping: %s", strerror(errno));
	wait_in(sks[U_UNBOUND].fd, "UDP pong");
	if (recv(sks[U_UNBOUND].fd, buf, sizeof(buf), 0) != 4 || memcmp(buf, "pong", 4))
		crt_fail("UDP pong: %s", strerror(errno));
	if (send(sks[U_CONN].fd, "conn", 4, 0) != 4)
		crt_fail("send on the connected UDP socket: %s", strerror(errno));
	wait_in(sks[U_BOUND].fd, "connected UDP");
	if (recv(sks[U_BOUND].fd, buf, sizeof(buf), 0) != 4 || memcmp(buf, "conn", 4))
		crt_fail("datagram of the connected UDP socket: %s", strerror(errno));
	crt_pass();
}
