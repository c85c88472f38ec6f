/* Datagrams queued on UDP sockets come back after the restore (udp.c), in
 * order, each with its bytes and its source address and port as
 * recvfrom returns them (run in a network namespace of its own, crrun
 * --netns):
 *  - v4: a socket bound to 127.0.0.1 with datagrams from three senders
 *    (127.0.0.1, 127.0.0.2 and an unbound one), zero-length ones at the
 *    head, in the middle and at the end, and ones of 1, 1472 and 65507
 *    bytes; one sent with IP_TTL 7 and IP_TOS 0x28, which the receiver
 *    reads with IP_RECVTTL and IP_RECVTOS; one from a remote address
 *    (192.0.2.7:4444, sent with a raw socket);
 *  - v4 wildcard: a socket bound to 0.0.0.0 with IP_PKTINFO, datagrams
 *    sent to 127.0.0.1 and 127.0.0.3: each must say where it was sent;
 *  - connected: a socket connected to a peer after a datagram from
 *    another source was queued, then two from its peer: all three come
 *    back (the first one too: it was queued before the connect), and it
 *    is still connected (a datagram from elsewhere is not taken);
 *  - v6: a socket bound to ::1, datagrams from two IPv6 senders, one of
 *    them zero-length, one with IPV6_UNICAST_HOPS 9 and IPV6_TCLASS 0x20
 *    (read with IPV6_RECVHOPLIMIT and IPV6_RECVTCLASS), and from two remote
 *    addresses (2001:db8::7 and ::8, sent with a raw socket);
 *  - dual: an IPv6 socket bound to [::] (not v6-only) with an IPv4
 *    datagram (source ::ffff:127.0.0.1) and an IPv6 one, IPV6_PKTINFO set;
 *  - nothing more: each queue ends with EAGAIN.
 * Each queue is first counted with a peek at an offset: the dump must have
 * left no zero-length datagram marked peeked (a later dump would pass over
 * it), which "leave" (the tree goes on after a dump, crrun --leave-running,
 * then is dumped again) and "later" (a dump that fails after the queues
 * were peeked: an inotify event queued on an fd dumped after them) check.
 * "full": a socket with a small SO_RCVBUF filled until the kernel drops a
 * datagram: every datagram queued comes back, none more.
 * "refuse-ts": datagrams queued on a socket with SO_TIMESTAMP set cannot
 * be put back with their arrival times: the dump is refused (-EAGAIN), and
 * the queue is left as it was (checked after the failed dump). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crt.h"

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

struct dg {
	int rx;		    /* receiving socket */
	size_t len;	    /* bytes */
	unsigned char fill; /* each byte: fill + index */
	struct sockaddr_storage from;
	socklen_t fromlen;
	struct sockaddr_storage to; /* where it was sent (for pktinfo) */
	int ttl, tos;		    /* -1: not checked */
};

static struct dg dgs[256];
static int ndg;
static unsigned char big[65536];

static socklen_t addr4(struct sockaddr_storage *ss, const char *a, unsigned port)
{
	struct sockaddr_in *s = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, a, &s->sin_addr);
	return sizeof(*s);
}

static socklen_t addr6(struct sockaddr_storage *ss, const char *a, unsigned port)
{
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	inet_pton(AF_INET6, a, &s->sin6_addr);
	return sizeof(*s);
}

static int sock(int family, const struct sockaddr_storage *bind_to, socklen_t bl)
{
	int fd = socket(family, SOCK_DGRAM, 0);

	if (fd < 0 || (bind_to && bind(fd, (const struct sockaddr *)bind_to, bl)))
		crt_fail("socket/bind: %s", strerror(errno));
	return fd;
}

static void name_of(int fd, struct sockaddr_storage *ss, socklen_t *l)
{
	*l = sizeof(*ss);
	if (getsockname(fd, (struct sockaddr *)ss, l))
		crt_fail("getsockname: %s", strerror(errno));
}

static void fill(unsigned char *b, size_t len, unsigned char f)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(f + i);
}

/* the datagram tx sends to rx (at its address to), remembered with what
 * rx should read: tx's address as rx sees it (mapped: an IPv4 sender to
 * a dual-stack socket) */
static void sendq(int tx, int rx, const struct sockaddr_storage *to, socklen_t tl, size_t len,
		  bool mapped)
{
	struct dg *d = &dgs[ndg];
	struct sockaddr_storage me;
	socklen_t ml;

	if (ndg >= (int)(sizeof(dgs) / sizeof(dgs[0])))
		crt_fail("too many datagrams");
	d->rx = rx;
	d->len = len;
	d->fill = (unsigned char)(ndg * 7 + 1);
	d->ttl = d->tos = -1;
	memcpy(&d->to, to, sizeof(*to));
	fill(big, len, d->fill);
	if (sendto(tx, big, len, 0, (const struct sockaddr *)to, tl) != (ssize_t)len)
		crt_fail("sendto: %s", strerror(errno));
	name_of(tx, &me, &ml);
	/* an unbound sender: the source the route to a loopback address
	 * chooses */
	if (me.ss_family == AF_INET && !((struct sockaddr_in *)&me)->sin_addr.s_addr)
		((struct sockaddr_in *)&me)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (me.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&me)->sin6_addr))
		((struct sockaddr_in6 *)&me)->sin6_addr = in6addr_loopback;
	if (mapped) {
		struct sockaddr_in *a = (struct sockaddr_in *)&me;
		struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = a->sin_port };

		m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&m.sin6_addr.s6_addr[12], &a->sin_addr, 4);
		memset(&d->from, 0, sizeof(d->from));
		memcpy(&d->from, &m, sizeof(m));
		d->fromlen = sizeof(m);
	} else {
		d->from = me;
		d->fromlen = ml;
	}
	ndg++;
}

/* A datagram from a source that is no address of this namespace (a
 * remote host's), made with a raw socket (closed at once: the dump
 * refuses raw sockets); to rx at its address to (4 or 16 bytes) */
static void send_remote(int rx, const struct sockaddr_storage *to, const char *from, unsigned sport,
			size_t len)
{
	struct dg *d = &dgs[ndg];
	struct sockaddr_storage dst;
	bool v4 = to->ss_family == AF_INET;
	unsigned char pkt[40 + 8 + 512] = { 0 };
	size_t ipl = v4 ? 20 : 40, ulen = 8 + len;
	unsigned port = ntohs(v4 ? ((const struct sockaddr_in *)to)->sin_port
				 : ((const struct sockaddr_in6 *)to)->sin6_port);
	int raw = socket(to->ss_family, SOCK_RAW, IPPROTO_RAW);

	if (raw < 0 || len > 512)
		crt_fail("raw socket: %s", strerror(errno));
	d->rx = rx;
	d->len = len;
	d->fill = (unsigned char)(ndg * 7 + 1);
	d->ttl = d->tos = -1;
	memcpy(&d->to, to, sizeof(*to));
	d->fromlen = v4 ? addr4(&d->from, from, sport) : addr6(&d->from, from, sport);
	fill(pkt + ipl + 8, len, d->fill);
	pkt[ipl] = sport >> 8;
	pkt[ipl + 1] = sport & 0xff;
	pkt[ipl + 2] = port >> 8;
	pkt[ipl + 3] = port & 0xff;
	pkt[ipl + 4] = ulen >> 8;
	pkt[ipl + 5] = ulen & 0xff;
	if (v4) {
		/* no UDP checksum (0: none, which IPv4 allows) */
		pkt[0] = 0x45;
		pkt[2] = (ipl + ulen) >> 8;
		pkt[3] = (ipl + ulen) & 0xff;
		pkt[8] = 64;
		pkt[9] = IPPROTO_UDP;
		inet_pton(AF_INET, from, pkt + 12);
		memcpy(pkt + 16, &((const struct sockaddr_in *)to)->sin_addr, 4);
	} else {
		unsigned long sum = 0;

		if (setsockopt(raw, IPPROTO_IPV6, 36 /* IPV6_HDRINCL */, &(int){ 1 }, sizeof(int)))
			crt_fail("IPV6_HDRINCL: %s", strerror(errno));
		pkt[0] = 0x60;
		pkt[4] = ulen >> 8;
		pkt[5] = ulen & 0xff;
		pkt[6] = IPPROTO_UDP;
		pkt[7] = 64;
		inet_pton(AF_INET6, from, pkt + 8);
		memcpy(pkt + 24, &((const struct sockaddr_in6 *)to)->sin6_addr, 16);
		/* the checksum, which IPv6 requires: pseudo-header, then UDP */
		for (int i = 8; i < 40; i += 2)
			sum += pkt[i] << 8 | pkt[i + 1];
		sum += ulen + IPPROTO_UDP;
		for (size_t i = 0; i < ulen; i += 2)
			sum += pkt[ipl + i] << 8 | (i + 1 < ulen ? pkt[ipl + i + 1] : 0);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		sum = ~sum & 0xffff;
		if (!sum)
			sum = 0xffff;
		pkt[ipl + 6] = sum >> 8;
		pkt[ipl + 7] = sum & 0xff;
	}
	/* (a raw IPv6 socket takes the port of its address for a protocol) */
	memcpy(&dst, to, sizeof(dst));
	if (!v4)
		((struct sockaddr_in6 *)&dst)->sin6_port = 0;
	if (sendto(raw, pkt, ipl + ulen, 0, (const struct sockaddr *)&dst,
		   v4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) !=
	    (ssize_t)(ipl + ulen))
		crt_fail("sendto from %s: %s", from, strerror(errno));
	close(raw);
	ndg++;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static const char *str(const struct sockaddr_storage *ss)
{
	static char buf[2][80];
	static int k;
	char a[INET6_ADDRSTRLEN] = "?";
	char *b = buf[k++ & 1];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		snprintf(b, 80, "%s:%u", a, ntohs(s->sin_port));
	} else {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		snprintf(b, 80, "[%s]:%u", a, ntohs(s->sin6_port));
	}
	return b;
}

/* how many datagrams a peek at an offset sees (SO_PEEK_OFF): a
 * zero-length one peeked before is passed over */
static int peek_count(int rx)
{
	static unsigned char buf[65536];
	int n = 0;

	if (setsockopt(rx, SOL_SOCKET, SO_PEEK_OFF, &(int){ 0 }, sizeof(int)))
		crt_fail("SO_PEEK_OFF: %s", strerror(errno));
	while (recv(rx, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT) >= 0)
		n++;
	if (setsockopt(rx, SOL_SOCKET, SO_PEEK_OFF, &(int){ -1 }, sizeof(int)))
		crt_fail("SO_PEEK_OFF: %s", strerror(errno));
	return n;
}

/* every datagram of rx, in order, then EAGAIN; first, a peek at an offset
 * must see them all (a dump would: none of them marked peeked) */
static void check_queue(int rx, const char *name, bool pktinfo)
{
	static unsigned char buf[65536], want[65536];
	int k = 0, peeked = peek_count(rx), nrx = 0;

	for (int i = 0; i < ndg; i++)
		nrx += dgs[i].rx == rx;
	crt_check(peeked == nrx, "%s: a peek at an offset sees %d datagrams of %d", name, peeked,
		  nrx);

	for (int i = 0; i < ndg; i++) {
		struct dg *d = &dgs[i];
		struct sockaddr_storage from;
		union {
			char b[512];
			struct cmsghdr a;
		} ctl;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = { &from, sizeof(from), &iov, 1, ctl.b, sizeof(ctl.b), 0 };
		ssize_t n;
		int ttl = -1, tos = -1;
		bool to_ok = !pktinfo;

		if (d->rx != rx)
			continue;
		k++;
		memset(&from, 0, sizeof(from));
		n = recvmsg(rx, &m, MSG_DONTWAIT);
		crt_check(n >= 0, "%s: datagram %d (%zu bytes from %s) is missing: %s", name, k,
			  d->len, str(&d->from), strerror(errno));
		fill(want, d->len, d->fill);
		crt_check((size_t)n == d->len && !memcmp(buf, want, n),
			  "%s: datagram %d is %zd bytes (first %#x), expected %zu (first %#x)",
			  name, k, n, n ? buf[0] : 0, d->len, d->len ? want[0] : 0);
		crt_check(same_addr(&from, &d->from), "%s: datagram %d comes from %s, expected %s",
			  name, k, str(&from), str(&d->from));
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL)
				memcpy(&ttl, CMSG_DATA(c), sizeof(int));
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
				tos = *(unsigned char *)CMSG_DATA(c);
			if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT)
				memcpy(&ttl, CMSG_DATA(c), sizeof(int));
			if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)
				memcpy(&tos, CMSG_DATA(c), sizeof(int));
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				to_ok = pi.ipi_addr.s_addr ==
					((struct sockaddr_in *)&d->to)->sin_addr.s_addr;
			}
			if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;
				const struct sockaddr_storage *t = &d->to;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				if (t->ss_family == AF_INET6)
					to_ok = !memcmp(
						&pi.ipi6_addr,
						&((const struct sockaddr_in6 *)t)->sin6_addr, 16);
				else
					to_ok = !memcmp(&pi.ipi6_addr.s6_addr[12],
							&((const struct sockaddr_in *)t)->sin_addr,
							4);
			}
		}
		crt_check(to_ok, "%s: datagram %d was sent to %s, its IP_PKTINFO says otherwise",
			  name, k, str(&d->to));
		crt_check(d->ttl < 0 || ttl == d->ttl, "%s: datagram %d has TTL %d, expected %d",
			  name, k, ttl, d->ttl);
		crt_check(d->tos < 0 || tos == d->tos, "%s: datagram %d has TOS %#x, expected %#x",
			  name, k, tos, d->tos);
	}
	crt_check(recv(rx, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		  "%s: more datagrams queued than the %d sent", name, k);
}

static void seti(int fd, int level, int opt, int v)
{
	if (setsockopt(fd, level, opt, &v, sizeof(v)))
		crt_fail("setsockopt %d/%d: %s", level, opt, strerror(errno));
}

static int drops(int fd)
{
	unsigned m[16] = { 0 };
	socklen_t l = sizeof(m);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, m, &l))
		crt_fail("SO_MEMINFO: %s", strerror(errno));
	return m[8]; /* SK_MEMINFO_DROPS */
}

static void full(void)
{
	struct sockaddr_storage a;
	socklen_t al = addr4(&a, "127.0.0.1", 0);
	int rx = sock(AF_INET, &a, al), tx = sock(AF_INET, NULL, 0), rcvbuf = 0;
	socklen_t l = sizeof(rcvbuf);

	seti(rx, SOL_SOCKET, SO_RCVBUF, 16384);
	name_of(rx, &a, &al);
	/* until the kernel drops one: the one dropped is forgotten */
	for (int i = 0; i < 200; i++) {
		int d0 = drops(rx);

		sendq(tx, rx, &a, al, 700 + i, false);
		if (drops(rx) != d0) {
			ndg--;
			break;
		}
	}
	crt_check(ndg > 3 && ndg < 200, "the queue held %d datagrams", ndg);
	crt_msg("%d datagrams queued, the next dropped", ndg);
	getsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &l);
	crt_ready();
	crt_wait_term();
	check_queue(rx, "full", false);
	{
		int now = 0;

		l = sizeof(now);
		getsockopt(rx, SOL_SOCKET, SO_RCVBUF, &now, &l);
		crt_check(now == rcvbuf, "SO_RCVBUF is %d, was %d", now, rcvbuf);
	}
	crt_pass();
}

static void refuse_ts(void)
{
	struct sockaddr_storage a;
	socklen_t al = addr4(&a, "127.0.0.1", 0);
	int rx = sock(AF_INET, &a, al), tx = sock(AF_INET, NULL, 0);

	seti(rx, SOL_SOCKET, SO_TIMESTAMP, 1);
	name_of(rx, &a, &al);
	sendq(tx, rx, &a, al, 0, false);
	sendq(tx, rx, &a, al, 100, false);
	sendq(tx, rx, &a, al, 0, false);
	crt_ready();
	crt_wait_term();
	/* the dump failed: the queue is as it was */
	check_queue(rx, "timestamped", false);
	crt_pass();
}

/* "refuse-peeked": the program peeked the zero-length datagram at the
 * head of its queue (MSG_PEEK), which hides it from a peek at an offset:
 * refused, not lost.  "refuse-reuseport": SO_REUSEPORT, where a datagram
 * sent again could reach another socket of the group: refused.  Both
 * leave the queue as it was. */
static void refuse_other(bool peeked)
{
	struct sockaddr_storage a;
	socklen_t al = addr4(&a, "127.0.0.1", 0);
	int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = sock(AF_INET, NULL, 0);
	char c;

	if (!peeked)
		seti(rx, SOL_SOCKET, SO_REUSEPORT, 1);
	if (rx < 0 || bind(rx, (struct sockaddr *)&a, al))
		crt_fail("bind: %s", strerror(errno));
	name_of(rx, &a, &al);
	sendq(tx, rx, &a, al, 0, false);
	sendq(tx, rx, &a, al, 9, false);
	if (peeked && recv(rx, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
		crt_fail("peek: %s", strerror(errno));
	crt_ready();
	crt_wait_term();
	/* (the count by a peek at an offset passes over the datagram peeked) */
	if (peeked) {
		char buf[16];

		crt_check(recv(rx, buf, sizeof(buf), MSG_DONTWAIT) == 0,
			  "the zero-length datagram is gone");
		crt_check(recv(rx, buf, sizeof(buf), MSG_DONTWAIT) == 9,
			  "the second datagram is gone");
		crt_pass();
	}
	check_queue(rx, "reuseport", false);
	crt_pass();
}

/* "refuse-bcast": a datagram sent to a broadcast address (10.88.0.255,
 * of an address this test gives the loopback of its network namespace,
 * crrun --netns) cannot be sent there again without leaving the host:
 * refused, the queue left as it was */
static void refuse_bcast(void)
{
	struct sockaddr_storage a, b;
	socklen_t al = addr4(&a, "0.0.0.0", 0), bl;
	int rx = sock(AF_INET, &a, al), tx = sock(AF_INET, NULL, 0);

	if (system("ip addr add 10.88.0.1/24 brd + dev lo"))
		crt_fail("ip addr add failed");
	seti(tx, SOL_SOCKET, SO_BROADCAST, 1);
	name_of(rx, &a, &al);
	bl = addr4(&b, "10.88.0.255", ntohs(((struct sockaddr_in *)&a)->sin_port));
	sendq(tx, rx, &b, bl, 3, false);
	crt_ready();
	crt_wait_term();
	crt_check(peek_count(rx) == 1, "the broadcast datagram is gone");
	crt_pass();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	struct sockaddr_storage a, b, c;
	socklen_t al, bl, cl;
	int r4, w4, cn, peer, other, r6, d6, s1, s2, s3, s6a, s6b, t4;

	crt_init();
	if (!strcmp(mode, "full"))
		full();
	if (!strcmp(mode, "refuse-ts"))
		refuse_ts();
	if (!strcmp(mode, "refuse-bcast"))
		refuse_bcast();
	if (!strcmp(mode, "refuse-peeked") || !strcmp(mode, "refuse-reuseport"))
		refuse_other(!strcmp(mode, "refuse-peeked"));

	/* v4: three senders */
	al = addr4(&a, "127.0.0.1", 0);
	r4 = sock(AF_INET, &a, al);
	name_of(r4, &a, &al);
	seti(r4, IPPROTO_IP, IP_RECVTTL, 1);
	seti(r4, IPPROTO_IP, IP_RECVTOS, 1);
	bl = addr4(&b, "127.0.0.1", 0);
	s1 = sock(AF_INET, &b, bl);
	bl = addr4(&b, "127.0.0.2", 0);
	s2 = sock(AF_INET, &b, bl);
	s3 = sock(AF_INET, NULL, 0);
	t4 = sock(AF_INET, NULL, 0);
	seti(t4, IPPROTO_IP, IP_TTL, 7);
	seti(t4, IPPROTO_IP, IP_TOS, 0x28);
	sendq(s1, r4, &a, al, 0, false);
	sendq(s2, r4, &a, al, 1, false);
	sendq(s3, r4, &a, al, 1472, false);
	sendq(s1, r4, &a, al, 0, false);
	sendq(s2, r4, &a, al, 65507, false);
	sendq(t4, r4, &a, al, 33, false);
	dgs[ndg - 1].ttl = 7;
	dgs[ndg - 1].tos = 0x28;
	sendq(s3, r4, &a, al, 12, false);
	send_remote(r4, &a, "192.0.2.7", 4444, 17);
	sendq(s1, r4, &a, al, 0, false);

	/* v4 wildcard, IP_PKTINFO */
	al = addr4(&a, "0.0.0.0", 0);
	w4 = sock(AF_INET, &a, al);
	seti(w4, IPPROTO_IP, IP_PKTINFO, 1);
	name_of(w4, &a, &al);
	{
		unsigned port = ntohs(((struct sockaddr_in *)&a)->sin_port);

		bl = addr4(&b, "127.0.0.1", port);
		sendq(s1, w4, &b, bl, 10, false);
		bl = addr4(&b, "127.0.0.3", port);
		sendq(s2, w4, &b, bl, 20, false);
		sendq(s1, w4, &b, bl, 0, false);
	}

	/* connected, with one datagram from elsewhere queued before */
	al = addr4(&a, "127.0.0.1", 0);
	cn = sock(AF_INET, &a, al);
	name_of(cn, &a, &al);
	bl = addr4(&b, "127.0.0.1", 0);
	peer = sock(AF_INET, &b, bl);
	other = sock(AF_INET, &b, bl);
	sendq(other, cn, &a, al, 5, false);
	sendq(peer, cn, &a, al, 6, false);
	name_of(peer, &c, &cl);
	if (connect(cn, (struct sockaddr *)&c, cl))
		crt_fail("connect: %s", strerror(errno));
	sendq(peer, cn, &a, al, 7, false);

	/* v6 */
	al = addr6(&a, "::1", 0);
	r6 = sock(AF_INET6, &a, al);
	name_of(r6, &a, &al);
	bl = addr6(&b, "::1", 0);
	s6a = sock(AF_INET6, &b, bl);
	s6b = sock(AF_INET6, NULL, 0);
	sendq(s6a, r6, &a, al, 100, false);
	sendq(s6b, r6, &a, al, 0, false);
	sendq(s6a, r6, &a, al, 2000, false);
	seti(r6, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
	seti(r6, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
	seti(s6b, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 9);
	seti(s6b, IPPROTO_IPV6, IPV6_TCLASS, 0x20);
	sendq(s6b, r6, &a, al, 8, false);
	dgs[ndg - 1].ttl = 9;
	dgs[ndg - 1].tos = 0x20;
	send_remote(r6, &a, "2001:db8::7", 5555, 0);
	send_remote(r6, &a, "2001:db8::8", 5556, 300);

	/* dual-stack, IPV6_PKTINFO */
	al = addr6(&a, "::", 0);
	d6 = socket(AF_INET6, SOCK_DGRAM, 0);
	seti(d6, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	if (bind(d6, (struct sockaddr *)&a, al))
		crt_fail("bind [::]: %s", strerror(errno));
	seti(d6, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
	name_of(d6, &a, &al);
	{
		unsigned port = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);

		bl = addr4(&b, "127.0.0.1", port);
		sendq(s1, d6, &b, bl, 44, true);
		bl = addr6(&b, "::1", port);
		sendq(s6a, d6, &b, bl, 55, false);
	}
	crt_msg("%d datagrams queued", ndg);
	/* "later": an inotify event queued, on an fd dumped after the sockets:
	 * the dump fails once it has peeked their queues */
	if (!strcmp(mode, "later")) {
		int in = inotify_init1(IN_NONBLOCK);

		if (in < 0 || inotify_add_watch(in, crt_path(""), IN_CREATE | IN_DELETE) < 0 ||
		    close(open(crt_path("ev"), O_CREAT | O_WRONLY, 0600)))
			crt_fail("inotify: %s", strerror(errno));
	}

	crt_ready();
	crt_wait_term();

	check_queue(r4, "v4", false);
	check_queue(w4, "v4 wildcard", true);
	check_queue(cn, "connected", false);
	check_queue(r6, "v6", false);
	check_queue(d6, "dual", true);
	/* still connected: a datagram from elsewhere is not taken */
	{
		char x = 'x';

		name_of(cn, &a, &al);
		crt_check(sendto(other, &x, 1, 0, (struct sockaddr *)&a, al) == 1, "sendto: %s",
			  strerror(errno));
		crt_check(sendto(peer, &x, 1, 0, (struct sockaddr *)&a, al) == 1, "sendto: %s",
			  strerror(errno));
		usleep(10000);
		crt_check(recvfrom(cn, &x, 1, MSG_DONTWAIT, (struct sockaddr *)&b, &bl) == 1 &&
				  same_addr(&b, &c),
			  "the connected socket took a datagram from elsewhere, or none");
		crt_check(recv(cn, &x, 1, MSG_DONTWAIT) < 0, "the connected socket took more");
	}
	crt_pass();
}
