/* The datagrams queued on a UDP socket (IPv4 and IPv6, bound or
 * connected), dumped and put back.
 *
 * Dump: the queue is read without taking anything, through kupdate's own
 * descriptor of the socket (pidfd_getfd): MSG_PEEK at an offset that
 * SO_PEEK_OFF moves on by each datagram peeked (UDP has it since Linux
 * 4.7; the guests' 6.1 and 6.12 and the host's 6.18 have it), with
 * IP_PKTINFO, IP_RECVTTL, IP_RECVTOS (and their IPv6 counterparts) set
 * for as long as the peek lasts, so that each datagram comes with its
 * source address and port, the address it was sent to, its TTL (hop
 * limit) and TOS (traffic class).  The program's own peek offset and
 * flags are set back as they were; a dump that fails leaves the queue as
 * it was.
 *
 * Restore: after the new socket's bind and before its connect (a datagram
 * queued before a connect came from anywhere; after it, the kernel takes
 * only the peer's), each datagram is sent to it again from its source
 * through a raw socket (IP_HDRINCL, IPV6_HDRINCL: any source address, as
 * tcp.c delivers a peer's FIN), to the address it had been sent to, which
 * must be an address of this host (the packet loops back, never leaves).
 * Each is waited for (SO_MEMINFO: the receive memory grows, its drop count
 * does not) before the next is sent: in order, and a datagram that does
 * not arrive fails the restore.  The receive buffer is made large enough
 * meanwhile, then given back its size and lock (a queue that filled it
 * fills it again).  The network lock (netlock.c) is for TCP only: it
 * drops none of them.
 *
 * What cannot be put back exactly is not dumped (-EAGAIN, the state passes
 * once the program has read its queue: kupdate's units try again, thawed
 * in between; a plain dump says why): a socket with a pending error (a
 * peek would take it), UDP_GRO (a datagram read is several), receive
 * timestamps (SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING: the arrival
 * time would be the restore's), SO_REUSEPORT or another socket on its
 * port (a datagram sent again could reach the other), SO_BINDTODEVICE (it
 * takes no datagram from the loopback), a source address that is IPv6
 * link-local (its interface would read as the loopback), a datagram sent
 * to an address that is not one of this host's own (broadcast, multicast,
 * an IP_TRANSPARENT destination), and a zero-length datagram at the head
 * of the queue that the program peeked (the peek at an offset passes over
 * a zero-length datagram peeked before).  What differs after the restore:
 * the interface index IP_PKTINFO reports (the loopback's), SO_RXQ_OVFL's
 * drop counts, and datagrams that arrive while the refill runs may sit
 * among the restored ones.  A zero-length datagram the dump peeked is
 * passed over by a later peek at an offset: a dump of the same socket that
 * fails (the tree goes on) warns of it (see udp_queue_dump). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dump.h"
#include "image.h"
#include "log.h"
#include "sockets.h"
#include "sockdiag.h"
#include "udp.h"
#include "util.h"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif
/* the values before the 64-bit time variants (x86_64 has only these) */
#define SO_TIMESTAMP_OLD_    29
#define SO_TIMESTAMPNS_OLD_  35
#define SO_TIMESTAMPING_OLD_ 37
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef IPV6_HDRINCL
#define IPV6_HDRINCL 36
#endif

#define DGRAM_MAX (65536)
#define QUEUE_MAX (64U << 20)
#define ARRIVE_MS 1000

/* the queue holds something (poll, which reads nothing) */
static int queue_state(int sk, bool *in, bool *err)
{
	struct pollfd p = { .fd = sk, .events = POLLIN };

	if (poll(&p, 1, 0) < 0)
		return -errno;
	*in = p.revents & POLLIN;
	*err = p.revents & POLLERR;
	return 0;
}

int udp_queue_check(int sk, const struct sk_diag *d, const struct sk_table *t, const char *what)
{
	static const struct {
		int level, opt;
		const char *why;
	} opts[] = {
		{ SOL_UDP, UDP_GRO, "UDP_GRO is set (a datagram read is several received)" },
		{ SOL_SOCKET, SO_TIMESTAMP_OLD_,
		  "SO_TIMESTAMP is set (their arrival time cannot be given back)" },
		{ SOL_SOCKET, SO_TIMESTAMPNS_OLD_,
		  "SO_TIMESTAMPNS is set (their arrival time cannot be given back)" },
		{ SOL_SOCKET, SO_TIMESTAMPING_OLD_,
		  "SO_TIMESTAMPING is set (their arrival time cannot be given back)" },
		{ SOL_SOCKET, SO_REUSEPORT,
		  "SO_REUSEPORT is set (a datagram sent again could reach another socket of its "
		  "group)" },
	};
	bool in = false, err = false;
	char dev[IFNAMSIZ + 1] = "";
	socklen_t l = IFNAMSIZ;
	int v, ret = queue_state(sk, &in, &err);

	if (ret) {
		pr_err("%s: cannot poll it: %s", what, strerror(-ret));
		return ret;
	}
	if (!in)
		return 0;
	if (err) {
		pr_err("%s: datagrams are queued (%u bytes of receive memory) on a socket with a "
		       "pending error, which reading them would take; retry once the program has "
		       "read them",
		       what, d->rqlen);
		return -EAGAIN;
	}
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (!sk_getint(sk, opts[i].level, opts[i].opt, &v) && v) {
			pr_err("%s: datagrams are queued (%u bytes of receive memory) and %s; "
			       "retry once the program has read them",
			       what, d->rqlen, opts[i].why);
			return -EAGAIN;
		}
	if (!getsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, dev, &l) && dev[0]) {
		pr_err("%s: datagrams are queued (%u bytes of receive memory) and it is bound to "
		       "device %s (SO_BINDTODEVICE), which takes none sent again through the "
		       "loopback; retry once the program has read them",
		       what, d->rqlen, dev);
		return -EAGAIN;
	}
	for (size_t i = 0; t && i < t->n; i++) {
		const struct sk_diag *o = &t->v[i];

		if (o->ino != d->ino && o->protocol == IPPROTO_UDP && o->src_port == d->src_port &&
		    d->src_port) {
			pr_err("%s: datagrams are queued (%u bytes of receive memory) and socket "
			       "%u shares its port %u (a datagram sent again could reach it); "
			       "retry once the program has read them",
			       what, d->rqlen, o->ino, d->src_port);
			return -EAGAIN;
		}
	}
	return 0;
}

/* addr (4 or 16 bytes) is a unicast address of this host: the kernel's
 * route to it is of type local (RTM_GETROUTE, as `ip route get` asks; not
 * a broadcast, multicast or remote one, which a packet sent to it would
 * leave the host for).  scope: the interface of an IPv6 link-local one. */
static bool addr_local(const uint8_t *addr, size_t len, unsigned scope)
{
	static const uint8_t any[16];
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req;
	union {
		char buf[4096];
		struct nlmsghdr align;
	} resp;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct rtattr *a;
	struct nlmsghdr *nh;
	ssize_t n;
	bool ok = false;
	int fd;

	if ((len != 4 && len != 16) || !memcmp(addr, any, len))
		return false;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = len == 4 ? AF_INET : AF_INET6;
	req.rt.rtm_dst_len = len * 8;
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.rt));
	a = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	a->rta_type = RTA_DST;
	a->rta_len = RTA_LENGTH(len);
	memcpy(RTA_DATA(a), addr, len);
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
	if (scope) {
		a = (struct rtattr *)((char *)&req + req.nh.nlmsg_len);
		a->rta_type = RTA_OIF;
		a->rta_len = RTA_LENGTH(sizeof(uint32_t));
		memcpy(RTA_DATA(a), &(uint32_t){ scope }, sizeof(uint32_t));
		req.nh.nlmsg_len += RTA_ALIGN(a->rta_len);
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return false;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		goto out;
	n = recv(fd, resp.buf, sizeof(resp.buf), 0);
	for (nh = &resp.align; n > 0 && NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n))
		if (nh->nlmsg_type == RTM_NEWROUTE &&
		    nh->nlmsg_len >= NLMSG_LENGTH(sizeof(struct rtmsg))) {
			ok = ((struct rtmsg *)NLMSG_DATA(nh))->rtm_type == RTN_LOCAL;
			break;
		}
out:
	close(fd);
	return ok;
}

static bool v4mapped(const uint8_t *a)
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a, pfx, 12);
}

static void addr_str(const uint8_t *a, size_t len, unsigned port, char *buf, size_t blen)
{
	char s[INET6_ADDRSTRLEN] = "?";

	inet_ntop(len == 4 ? AF_INET : AF_INET6, a, s, sizeof(s));
	snprintf(buf, blen, len == 4 ? "%s:%u" : "[%s]:%u", s, port);
}

/* the receive flags set while the queue is peeked, and what they were */
struct rflag {
	int level, opt, was;
	bool set;
};

static void flags_on(int sk, struct rflag *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		f[i].set = false;
		if (sk_getint(sk, f[i].level, f[i].opt, &f[i].was))
			continue;
		if (!f[i].was && !setsockopt(sk, f[i].level, f[i].opt, &(int){ 1 }, sizeof(int)))
			f[i].set = true;
	}
}

static void flags_back(int sk, struct rflag *f, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (f[i].set && setsockopt(sk, f[i].level, f[i].opt, &(int){ 0 }, sizeof(int)))
			pr_warn("%s: cannot clear receive option %d/%d again: %s", what, f[i].level,
				f[i].opt, strerror(errno));
}

static int add_dgram(InetSk *s, UdpDgram **out)
{
	UdpDgram **nq = xrealloc_array(s->queue, s->n_queue + 1, sizeof(*nq));
	UdpDgram *g;

	if (!nq)
		return -ENOMEM;
	s->queue = nq;
	g = xzalloc(sizeof(*g));
	if (!g)
		return -ENOMEM;
	udp_dgram__init(g);
	nq[s->n_queue++] = g;
	*out = g;
	return 0;
}

/* how a datagram read is taken: as it is (0); refused (-EAGAIN) unless it
 * can be sent again as it came (STRICT: the dump), without a word (QUIET) */
enum { STRICT = 1, QUIET = 2 };

/* one datagram read: its source, where it went, its TTL and TOS */
static int take_dgram(InetSk *s, const uint8_t *data, size_t len, const struct msghdr *m, int mode,
		      const char *what)
{
	bool strict = mode & STRICT;
	const struct sockaddr_storage *from = m->msg_name;
	uint8_t src[16], dst[16];
	size_t alen = 0, dlen = 0;
	unsigned port = 0, scope = 0;
	UdpDgram *g;
	char sa[80];
	int ret;

	if (from->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)from;

		memcpy(src, &a->sin_addr, 4);
		alen = 4;
		port = ntohs(a->sin_port);
	} else if (from->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)from;
		const uint8_t *b = (const uint8_t *)&a->sin6_addr;

		alen = v4mapped(b) ? 4 : 16;
		memcpy(src, alen == 4 ? b + 12 : b, alen);
		port = ntohs(a->sin6_port);
		scope = a->sin6_scope_id;
	} else {
		pr_err("%s: a datagram queued has a source of family %d", what, from->ss_family);
		return -EOPNOTSUPP;
	}
	addr_str(src, alen, port, sa, sizeof(sa));
	if (strict && alen == 16 && (IN6_IS_ADDR_LINKLOCAL((struct in6_addr *)src) || scope)) {
		if (mode & QUIET)
			return -EAGAIN;
		pr_err("%s: a datagram queued comes from %s, a link-local address of interface "
		       "%u: sent again it would come from the loopback; retry once the program "
		       "has read it",
		       what, sa, scope);
		return -EAGAIN;
	}
	ret = add_dgram(s, &g);
	if (ret)
		return ret;
	if (img_bytes(&g->data, data, len) || img_bytes(&g->src_addr, src, alen))
		return -ENOMEM;
	g->src_port = port;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		int v;

		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(dst, &pi.ipi_addr, 4);
			dlen = 4;
			g->has_ifindex = pi.ipi_ifindex > 0;
			g->ifindex = pi.ipi_ifindex;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
			   c->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
			struct in6_pktinfo pi;
			const uint8_t *b = (const uint8_t *)&pi.ipi6_addr;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			if (v4mapped(b) && alen == 4) {
				memcpy(dst, b + 12, 4);
				dlen = 4;
			} else if (alen == 16) {
				memcpy(dst, b, 16);
				dlen = 16;
			}
			g->has_ifindex = pi.ipi6_ifindex > 0;
			g->ifindex = pi.ipi6_ifindex;
		} else if (c->cmsg_len >= CMSG_LEN(1) &&
			   ((c->cmsg_level == IPPROTO_IP &&
			     (c->cmsg_type == IP_TTL || c->cmsg_type == IP_TOS)) ||
			    (c->cmsg_level == IPPROTO_IPV6 &&
			     (c->cmsg_type == IPV6_HOPLIMIT || c->cmsg_type == IPV6_TCLASS)))) {
			/* IP_TOS is one byte, the others an int */
			if (c->cmsg_type == IP_TOS && c->cmsg_level == IPPROTO_IP)
				v = *(uint8_t *)CMSG_DATA(c);
			else if (c->cmsg_len >= CMSG_LEN(sizeof(int)))
				memcpy(&v, CMSG_DATA(c), sizeof(v));
			else
				continue;
			if ((c->cmsg_level == IPPROTO_IP) != (alen == 4))
				continue;
			if (c->cmsg_type == IP_TTL || c->cmsg_type == IPV6_HOPLIMIT) {
				g->has_ttl = 1;
				g->ttl = v;
			} else {
				g->has_tos = 1;
				g->tos = v;
			}
		}
	}
	if (!dlen && !strict)
		return 0;
	if (!dlen) {
		if (mode & QUIET)
			return -EOPNOTSUPP;
		pr_err("%s: cannot tell where the datagram from %s queued was sent (no "
		       "IP_PKTINFO); it cannot be put back",
		       what, sa);
		return -EOPNOTSUPP;
	}
	if (strict && !addr_local(dst, dlen, g->has_ifindex ? g->ifindex : 0)) {
		char da[80];

		if (mode & QUIET)
			return -EAGAIN;
		addr_str(dst, dlen, 0, da, sizeof(da));
		pr_err("%s: a datagram queued from %s was sent to %s, which is not a unicast "
		       "address of this host (broadcast, multicast, or taken by IP_TRANSPARENT): "
		       "it cannot be sent there again; retry once the program has read it",
		       what, sa, da);
		return -EAGAIN;
	}
	g->has_dst_addr = 1;
	return img_bytes(&g->dst_addr, dst, dlen);
}

/* Every datagram of the queue into s: peeked (MSG_PEEK, at an offset
 * SO_PEEK_OFF moves on) or taken (0) */
static int read_queue(int sk, InetSk *s, int flags, int mode, const char *what)
{
	uint8_t *buf = malloc(DGRAM_MAX);
	uint64_t total = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct sockaddr_storage from;
		union {
			char b[512];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { buf, DGRAM_MAX };
		struct msghdr m = { .msg_name = &from,
				    .msg_namelen = sizeof(from),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.b,
				    .msg_controllen = sizeof(ctl.b) };
		ssize_t n;

		memset(&from, 0, sizeof(from));
		n = recvmsg(sk, &m, flags | MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			ret = pr_errno("%s: cannot read its queued datagrams", what);
			break;
		}
		if (n > DGRAM_MAX || (m.msg_flags & MSG_CTRUNC)) {
			pr_err("%s: a datagram queued is %zd bytes long, more than a datagram can "
			       "be",
			       what, n);
			ret = -EOPNOTSUPP;
			break;
		}
		total += n;
		if (total > QUEUE_MAX) {
			pr_err("%s: more than %u MiB of datagrams queued", what, QUEUE_MAX >> 20);
			ret = -EOPNOTSUPP;
			break;
		}
		ret = take_dgram(s, buf, n, &m, mode, what);
		if (ret)
			break;
	}
	free(buf);
	return ret;
}

/* Zero-length datagrams the dump peeked are passed over by any later peek
 * at an offset (the kernel marks them peeked, so that a peek at an offset
 * does not return them again and again).  The head of the queue is peeked
 * once more without an offset, which returns it whatever it is: a
 * zero-length datagram there that the walk did not return had been
 * peeked before (by the program, or by a dump that failed). */
static int walk(int sk, InetSk *s, const char *what)
{
	char c;
	int ret;

	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &(int){ 0 }, sizeof(int)))
		return pr_errno("%s: cannot peek at an offset (SO_PEEK_OFF, Linux 4.7)", what);
	ret = read_queue(sk, s, MSG_PEEK, STRICT, what);
	if (ret)
		return ret;
	/* the head, without an offset */
	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &(int){ -1 }, sizeof(int)))
		return pr_errno("%s: cannot set SO_PEEK_OFF", what);
	if (recv(sk, &c, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC) == 0 &&
	    (!s->n_queue || s->queue[0]->data.len)) {
		pr_err("%s: a zero-length datagram at the head of its queue was peeked before (by "
		       "the program, or by a dump that failed), which hides it from the dump; "
		       "retry once the program has read it",
		       what);
		return -EAGAIN;
	}
	return 0;
}

static struct rflag peek_flags[] = {
	{ IPPROTO_IP, IP_PKTINFO, 0, false },	       { IPPROTO_IP, IP_RECVTTL, 0, false },
	{ IPPROTO_IP, IP_RECVTOS, 0, false },	       { IPPROTO_IPV6, IPV6_RECVPKTINFO, 0, false },
	{ IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 0, false }, { IPPROTO_IPV6, IPV6_RECVTCLASS, 0, false },
};

int udp_queue_dump(int sk, InetSk *s, size_t *zeros, const char *what)
{
	struct rflag f[ARRAY_SIZE(peek_flags)];
	size_t nf = s->family == AF_INET6 ? ARRAY_SIZE(f) : 3;
	bool in = false, err = false;
	int peek_off = -1, ret = queue_state(sk, &in, &err);

	*zeros = 0;
	if (ret || !in)
		return ret;
	memcpy(f, peek_flags, sizeof(f));
	if (sk_getint(sk, SOL_SOCKET, SO_PEEK_OFF, &peek_off))
		peek_off = -1;
	flags_on(sk, f, nf);
	ret = walk(sk, s, what);
	flags_back(sk, f, nf, what);
	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &peek_off, sizeof(peek_off))) {
		pr_perror("%s: cannot set its peek offset back to %d", what, peek_off);
		if (!ret)
			ret = -EIO;
	}
	for (size_t i = 0; i < s->n_queue; i++)
		*zeros += !s->queue[i]->data.len;
	if (!ret)
		pr_debug("%s: %zu datagram(s) queued, %zu of them zero-length", what, s->n_queue,
			 *zeros);
	return ret;
}

/* the receive options, a bit each in inet_sk.recv_opts: never renumber */
static const struct {
	int level, opt;
	bool v6;
	const char *name;
} recv_opts[] = {
	{ IPPROTO_IP, IP_PKTINFO, false, "IP_PKTINFO" },
	{ IPPROTO_IP, IP_RECVTTL, false, "IP_RECVTTL" },
	{ IPPROTO_IP, IP_RECVTOS, false, "IP_RECVTOS" },
	{ IPPROTO_IP, IP_RECVORIGDSTADDR, false, "IP_RECVORIGDSTADDR" },
	{ IPPROTO_IP, IP_RECVERR, false, "IP_RECVERR" },
	{ IPPROTO_IPV6, IPV6_RECVPKTINFO, true, "IPV6_RECVPKTINFO" },
	{ IPPROTO_IPV6, IPV6_RECVHOPLIMIT, true, "IPV6_RECVHOPLIMIT" },
	{ IPPROTO_IPV6, IPV6_RECVTCLASS, true, "IPV6_RECVTCLASS" },
	{ IPPROTO_IPV6, IPV6_RECVORIGDSTADDR, true, "IPV6_RECVORIGDSTADDR" },
	{ IPPROTO_IPV6, IPV6_RECVERR, true, "IPV6_RECVERR" },
};

void udp_recv_opts_dump(int sk, InetSk *s)
{
	int v;

	for (size_t i = 0; i < ARRAY_SIZE(recv_opts); i++)
		if ((!recv_opts[i].v6 || s->family == AF_INET6) &&
		    !sk_getint(sk, recv_opts[i].level, recv_opts[i].opt, &v) && v) {
			s->has_recv_opts = 1;
			s->recv_opts |= 1u << i;
		}
}

int udp_recv_opts_restore(int sk, const InetSk *s, const char *what)
{
	for (size_t i = 0; i < ARRAY_SIZE(recv_opts); i++)
		if ((s->recv_opts & (1u << i)) &&
		    setsockopt(sk, recv_opts[i].level, recv_opts[i].opt, &(int){ 1 },
			       sizeof(int))) {
			int ret = -errno;

			pr_perror("%s: cannot set %s", what, recv_opts[i].name);
			return ret;
		}
	return 0;
}

void udp_queue_free(InetSk *s)
{
	for (size_t i = 0; i < s->n_queue; i++) {
		UdpDgram *g = s->queue[i];

		if (!g)
			continue;
		free(g->data.data);
		free(g->src_addr.data);
		free(g->dst_addr.data);
		free(g);
	}
	free(s->queue);
	s->queue = NULL;
	s->n_queue = 0;
}

int udp_queue_validate(const InetSk *s)
{
	uint64_t total = 0;

	if (s->n_queue && s->protocol != IPPROTO_UDP)
		return -EINVAL;
	for (size_t i = 0; i < s->n_queue; i++) {
		const UdpDgram *g = s->queue[i];
		size_t al = g->src_addr.len;

		total += g->data.len;
		if ((al != 4 && al != 16) || (al == 16 && s->family != AF_INET6) ||
		    g->src_port > 65535 || g->data.len > 65527 ||
		    (g->has_dst_addr && g->dst_addr.len != al) || total > QUEUE_MAX)
			return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------- restore */

static uint32_t sum16(const void *p, size_t len, uint32_t sum)
{
	const uint8_t *b = p;

	for (; len > 1; b += 2, len -= 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (len)
		sum += (uint32_t)b[0] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	return htons(sum ? sum : 0xffff);
}

/* the IP and UDP headers and the data, from src:sport to dst:dport */
static size_t build(uint8_t *pkt, const UdpDgram *g, const uint8_t *dst, unsigned dport)
{
	bool v4 = g->src_addr.len == 4;
	size_t ipl = v4 ? sizeof(struct iphdr) : sizeof(struct ip6_hdr);
	struct udphdr *uh = (struct udphdr *)(pkt + ipl);
	size_t ulen = sizeof(*uh) + g->data.len;
	uint32_t sum;
	uint8_t ph[40] = { 0 };

	memset(pkt, 0, ipl);
	uh->uh_sport = htons(g->src_port);
	uh->uh_dport = htons(dport);
	uh->uh_ulen = htons(ulen);
	uh->uh_sum = 0;
	if (g->data.len)
		memcpy(pkt + ipl + sizeof(*uh), g->data.data, g->data.len);
	if (v4) {
		struct iphdr *ip = (struct iphdr *)pkt;

		ip->version = 4;
		ip->ihl = 5;
		ip->tos = g->has_tos ? g->tos : 0;
		ip->tot_len = htons(ipl + ulen);
		ip->ttl = g->has_ttl ? g->ttl : 64;
		ip->protocol = IPPROTO_UDP;
		memcpy(&ip->saddr, g->src_addr.data, 4);
		memcpy(&ip->daddr, dst, 4);
		memcpy(ph, g->src_addr.data, 4);
		memcpy(ph + 4, dst, 4);
		ph[9] = IPPROTO_UDP;
		ph[10] = ulen >> 8;
		ph[11] = ulen & 0xff;
		sum = sum16(ph, 12, 0);
	} else {
		struct ip6_hdr *ip = (struct ip6_hdr *)pkt;

		ip->ip6_flow = htonl(6u << 28 | (g->has_tos ? (g->tos & 0xff) << 20 : 0));
		ip->ip6_plen = htons(ulen);
		ip->ip6_nxt = IPPROTO_UDP;
		ip->ip6_hlim = g->has_ttl ? g->ttl : 64;
		memcpy(&ip->ip6_src, g->src_addr.data, 16);
		memcpy(&ip->ip6_dst, dst, 16);
		memcpy(ph, g->src_addr.data, 16);
		memcpy(ph + 16, dst, 16);
		ph[34] = ulen >> 8;
		ph[35] = ulen & 0xff;
		ph[39] = IPPROTO_UDP;
		sum = sum16(ph, 40, 0);
	}
	uh->uh_sum = fold(sum16(uh, ulen, sum));
	return ipl + ulen;
}

static int raw_socket(int *fd, bool v4, const char *what)
{
	if (*fd >= 0)
		return *fd;
	*fd = socket(v4 ? AF_INET : AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (*fd >= 0 && setsockopt(*fd, v4 ? IPPROTO_IP : IPPROTO_IPV6,
				   v4 ? IP_HDRINCL : IPV6_HDRINCL, &(int){ 1 }, sizeof(int))) {
		close(*fd);
		*fd = -1;
	}
	if (*fd < 0) {
		int ret = -errno;

		pr_perror("%s: cannot open a raw %s socket to put its queued datagrams back", what,
			  v4 ? "IPv4" : "IPv6");
		return ret;
	}
	return *fd;
}

static int meminfo(int sk, uint32_t *rmem, uint32_t *drops)
{
	uint32_t m[SK_MEMINFO_VARS] = { 0 };
	socklen_t l = sizeof(m);

	if (getsockopt(sk, SOL_SOCKET, SO_MEMINFO, m, &l))
		return -errno;
	*rmem = m[SK_MEMINFO_RMEM_ALLOC];
	*drops = l > SK_MEMINFO_DROPS * sizeof(uint32_t) ? m[SK_MEMINFO_DROPS] : 0;
	return 0;
}

/* the address the datagram goes to again: where it had gone, else the
 * socket's own */
static const uint8_t *dest_of(const InetSk *s, const UdpDgram *g)
{
	const uint8_t *own = s->src_addr.data;

	if (g->has_dst_addr && g->dst_addr.len == g->src_addr.len)
		return g->dst_addr.data;
	if (g->src_addr.len == 16)
		return s->family == AF_INET6 ? own : NULL;
	if (s->family == AF_INET)
		return own;
	return v4mapped(own) ? own + 12 : NULL;
}

/* Each datagram of s->queue sent to sk again, from its source, each
 * waited for; the receive buffer raised meanwhile, then set to rcvbuf (as
 * SO_RCVBUF reads it) with lock buf_lock (-1: left).  keep_going: a
 * datagram that cannot be sent again is counted in *lost, the others go
 * on; else the first one fails it all. */
static int refill(int sk, const InetSk *s, int rcvbuf, int buf_lock, bool keep_going, size_t *lost,
		  const char *what)
{
	int raw4 = -1, raw6 = -1, ret = 0;
	uint8_t *pkt = malloc(sizeof(struct ip6_hdr) + sizeof(struct udphdr) + DGRAM_MAX);
	size_t i;

	if (!pkt)
		return -ENOMEM;
	/* room for all of them meanwhile (the kernel doubles it) */
	setsockopt(sk, SOL_SOCKET, SO_RCVBUFFORCE, &(int){ INT_MAX / 4 }, sizeof(int));
	for (i = 0; i < s->n_queue && (!ret || keep_going); i++) {
		const UdpDgram *g = s->queue[i];
		const uint8_t *dst = dest_of(s, g);
		bool v4 = g->src_addr.len == 4;
		struct sockaddr_storage to = { 0 };
		socklen_t tl;
		uint32_t rmem0, drops0, rmem, drops;
		char sa[80];
		size_t len;
		int fd;

		if (ret) {
			ret = 0;
			(*lost)++;
		}
		addr_str(g->src_addr.data, g->src_addr.len, g->src_port, sa, sizeof(sa));
		if (!dst || !addr_local(dst, g->src_addr.len, g->has_ifindex ? g->ifindex : 0)) {
			char da[80] = "its own address";

			if (dst)
				addr_str(dst, g->src_addr.len, s->src_port, da, sizeof(da));
			pr_err("%s: queued datagram %zu (from %s) cannot be sent again to %s: not "
			       "an address of this host",
			       what, i + 1, sa, da);
			ret = -EADDRNOTAVAIL;
			continue;
		}
		fd = raw_socket(v4 ? &raw4 : &raw6, v4, what);
		if (fd < 0) {
			ret = fd;
			continue;
		}
		len = build(pkt, g, dst, s->src_port);
		if (v4) {
			struct sockaddr_in *a = (struct sockaddr_in *)&to;

			a->sin_family = AF_INET;
			memcpy(&a->sin_addr, dst, 4);
			tl = sizeof(*a);
		} else {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to;

			a->sin6_family = AF_INET6;
			memcpy(&a->sin6_addr, dst, 16);
			if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr) && g->has_ifindex)
				a->sin6_scope_id = g->ifindex;
			tl = sizeof(*a);
		}
		ret = meminfo(sk, &rmem0, &drops0);
		if (ret) {
			pr_err("%s: cannot read its receive memory (SO_MEMINFO): %s", what,
			       strerror(-ret));
			continue;
		}
		if (sendto(fd, pkt, len, 0, (struct sockaddr *)&to, tl) != (ssize_t)len) {
			ret = pr_errno("%s: cannot send queued datagram %zu (from %s) again", what,
				       i + 1, sa);
			continue;
		}
		/* it loops back at once, mostly before sendto returns */
		ret = -ETIMEDOUT;
		for (int ms = 0; ms < ARRIVE_MS; ms++) {
			if (meminfo(sk, &rmem, &drops))
				break;
			if (drops != drops0) {
				ret = -ENOBUFS;
				break;
			}
			if (rmem != rmem0) {
				ret = 0;
				break;
			}
			usleep(1000);
		}
		if (ret)
			pr_err("%s: queued datagram %zu (from %s, %zu bytes) sent again %s", what,
			       i + 1, sa, g->data.len,
			       ret == -ENOBUFS ? "was dropped" : "did not arrive within 1 s");
	}
	if (ret && keep_going) {
		ret = 0;
		(*lost)++;
	}
	setsockopt(sk, SOL_SOCKET, SO_RCVBUFFORCE, &(int){ rcvbuf / 2 }, sizeof(int));
	if (buf_lock >= 0)
		setsockopt(sk, SOL_SOCKET, SO_BUF_LOCK, &buf_lock, sizeof(buf_lock));
	if (raw4 >= 0)
		close(raw4);
	if (raw6 >= 0)
		close(raw6);
	free(pkt);
	return ret;
}

int udp_queue_restore(int sk, const InetSk *s, const char *what)
{
	int rcvbuf = 0, ret;
	size_t lost = 0;

	if (!s->n_queue)
		return 0;
	/* its own size and lock again after (sk_opts_restore set them) */
	sk_getint(sk, SOL_SOCKET, SO_RCVBUF, &rcvbuf);
	if (s->opts && s->opts->has_rcvbuf)
		rcvbuf = s->opts->rcvbuf;
	ret = refill(sk, s, rcvbuf, s->opts && s->opts->has_buf_lock ? (int)s->opts->buf_lock : -1,
		     false, &lost, what);
	if (!ret)
		pr_debug("%s: %zu queued datagram(s) put back", what, s->n_queue);
	return ret;
}

/* ------------------------------------------------- the tree goes on */

int udp_hold(struct cr_dump_ctx *ctx, int sk, pid_t pid, int fd, InetSk *s)
{
	struct dump_udp_sk *n = xrealloc_array(ctx->udp_sks, ctx->nr_udp_sks + 1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	ctx->udp_sks = n;
	n[ctx->nr_udp_sks++] = (struct dump_udp_sk){ .fd = sk, .pid = pid, .tree_fd = fd, .s = s };
	return 0;
}

/* the datagram came from the peer the socket is connected to */
static bool from_peer(const InetSk *s, const UdpDgram *g)
{
	const uint8_t *p = s->dst_addr.data;

	if (g->src_port != s->dst_port)
		return false;
	if (g->src_addr.len == s->dst_addr.len)
		return !memcmp(g->src_addr.data, p, g->src_addr.len);
	return g->src_addr.len == 4 && s->dst_addr.len == 16 && v4mapped(p) &&
	       !memcmp(g->src_addr.data, p + 12, 4);
}

/* A socket whose zero-length datagrams the dump peeked, in a tree that
 * goes on (a failed dump, --leave-running): a later dump would pass over
 * them.  Its queue is taken and sent to it again (the tree still stopped),
 * new datagrams that were never peeked.  Only when each of them can be
 * sent again exactly, as the dump checks (peeked once more first): else
 * one that cannot came after those the dump peeked (the dump checked
 * those), and a later dump refuses it until the program has read it, and
 * so the ones before it too.  A connected socket that holds a datagram
 * from outside its connection cannot take it again: it is left as it is,
 * with a warning. */
static void requeue(struct dump_udp_sk *h)
{
	const InetSk *ds = h->s;
	InetSk q;
	struct rflag f[ARRAY_SIZE(peek_flags)];
	size_t nf = ds->family == AF_INET6 ? ARRAY_SIZE(f) : 3, lost = 0;
	int peek_off = -1, rcvbuf = 0, lock = -1, ret;
	char what[64];

	snprintf(what, sizeof(what), "pid %d: fd %d", h->pid, h->tree_fd);
	inet_sk__init(&q);
	q.family = ds->family;
	q.protocol = ds->protocol;
	q.src_addr = ds->src_addr;
	q.src_port = ds->src_port;
	memcpy(f, peek_flags, sizeof(f));
	sk_getint(h->fd, SOL_SOCKET, SO_PEEK_OFF, &peek_off);
	sk_getint(h->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf);
	sk_getint(h->fd, SOL_SOCKET, SO_BUF_LOCK, &lock);
	flags_on(h->fd, f, nf);
	ret = setsockopt(h->fd, SOL_SOCKET, SO_PEEK_OFF, &(int){ 0 }, sizeof(int)) ? -errno : 0;
	if (!ret)
		ret = read_queue(h->fd, &q, MSG_PEEK, STRICT | QUIET, what);
	for (size_t i = 0; !ret && ds->state == TCP_ESTABLISHED && i < q.n_queue; i++)
		if (!from_peer(ds, q.queue[i])) {
			pr_warn("%s: its zero-length datagrams were peeked, and it holds a "
				"datagram from outside its connection: a dump before the program "
				"reads them "
				"would not see them",
				what);
			ret = -EOPNOTSUPP;
		}
	udp_queue_free(&q);
	if (!ret)
		ret = read_queue(h->fd, &q, 0, 0, what);
	flags_back(h->fd, f, nf, what);
	if (q.n_queue)
		refill(h->fd, &q, rcvbuf, lock, true, &lost, what);
	setsockopt(h->fd, SOL_SOCKET, SO_PEEK_OFF, &peek_off, sizeof(peek_off));
	if (lost)
		pr_warn("%s: %zu of its %zu queued datagrams were lost putting them back", what,
			lost, q.n_queue);
	else if (q.n_queue)
		pr_debug("%s: its %zu queued datagrams put back, none marked peeked", what,
			 q.n_queue);
	udp_queue_free(&q);
}

void udp_dump_resume(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_udp_sks; i++)
		requeue(&ctx->udp_sks[i]);
	udp_dump_close(ctx);
}

void udp_dump_close(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_udp_sks; i++)
		close(ctx->udp_sks[i].fd);
	free(ctx->udp_sks);
	ctx->udp_sks = NULL;
	ctx->nr_udp_sks = 0;
}
