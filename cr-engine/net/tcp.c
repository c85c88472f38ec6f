/* TCP and UDP sockets, IPv4 and IPv6.
 *
 * A socket that is not an established TCP connection is rebuilt with
 * socket, its options, bind, then listen (a TCP listener) or connect (a
 * connected UDP socket): a TCP or UDP socket never bound, one bound to a
 * port the program chose or the kernel chose (bound to port 0), to an
 * address with or without a port (IP_BIND_ADDRESS_NO_PORT), a TCP socket
 * neither listening nor connected, a listener, a UDP socket bound or
 * connected.  sock_diag does not list the unbound ones (sockdiag.c finds
 * them through the socket itself).  A TCP socket in state CLOSE that has
 * sent or received segments (a connection that failed or ended) is
 * refused: its pending error and shutdown cannot be read back.  The
 * options carried: those of every socket (sockets.c: SO_REUSEADDR,
 * SO_REUSEPORT, SO_KEEPALIVE, SO_BROADCAST, SO_SNDBUF/SO_RCVBUF with their
 * locks, SO_LINGER, SO_PRIORITY, ...), IP_TOS, IPV6_TCLASS, IPV6_V6ONLY,
 * IP_FREEBIND, IP_BIND_ADDRESS_NO_PORT, IP_TTL and IPV6_UNICAST_HOPS (when
 * the program set them apart from the sysctl's default), and for TCP
 * TCP_NODELAY, TCP_CORK, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT, TCP_USER_TIMEOUT
 * and TCP_MAXSEG (a listener hands them down to what it accepts), and
 * SO_BINDTODEVICE by the device's name (which a bind to an IPv6 link-local
 * address sets too, and needs again: it is set before the bind).  The
 * datagrams queued on a UDP socket come back in order with their sources
 * (udp.c).  Not carried: multicast memberships and options, and the
 * shutdown(2) of a UDP socket never bound (which the kernel records even
 * though the call fails with ENOTCONN, and nothing reads back).
 *
 * An established TCP connection, or one in the middle of its close
 * (FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, CLOSING: its FINs are sent and
 * delivered again after the restore, inet_release), is captured in repair
 * mode (TCP_REPAIR, tcp-repair.c): sequence numbers, the unacknowledged and
 * unsent send queue, the unread receive queue, MSS, window scaling, SACK,
 * timestamps (TCP_TIMESTAMP, so the peer sees them go on), the window
 * (TCP_REPAIR_WINDOW) and the usual options.  Its packets are dropped by
 * the network lock (netlock.c) from just before it is read until it is
 * restored; a socket still in repair mode closes without a FIN or a RST.
 *
 * The dump holds a copy of the socket until it ends (tcp-dump.c).
 *
 * Restore builds the connection in repair mode without sending anything;
 * kupdate lifts the lock and leaves repair mode (which sends a window
 * probe) only once the whole tree is ready to run (tcp-release.c).
 *
 * The files: this one, the socket (its dump, check and restore);
 * tcp-repair.c, the connection in repair mode (a library of plain C
 * types), and tcp-stream.c, its image; tcp-dump.c, the connections a dump
 * locks, reads and holds; tcp-release.c, a restored connection let go;
 * tcp-rto.c, the peer's retransmission timeout cut short (RFC 6069). */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "dump.h"
#include "image.h"
#include "log.h"
#include "mcast.h"
#include "sockdiag.h"
#include "sockets.h"
#include "files.h"
#include "tcp-int.h"
#include "tcp.h"
#include "udp.h"
#include "util.h"

static const char *const tcp_states[] = {
	"?",	     "ESTABLISHED", "SYN_SENT",	  "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
	"TIME_WAIT", "CLOSE",	    "CLOSE_WAIT", "LAST_ACK", "LISTEN",	   "CLOSING",
};

const char *tcp_state_name(int s)
{
	return s >= 0 && s < (int)ARRAY_SIZE(tcp_states) ? tcp_states[s] : "?";
}

void inet_endpoint(int family, const uint8_t *addr, unsigned port, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(family, addr, a, sizeof(a));
	snprintf(buf, len, family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, port);
}

static int alen(int family)
{
	return family == AF_INET ? 4 : 16;
}

static bool addr_any(int family, const uint8_t *a)
{
	static const uint8_t any[16];

	return !memcmp(a, any, alen(family));
}

/* the option differs from what a new socket of the same kind (fresh, or
 * -1: none could be made) reads for it: the default of a sysctl the
 * socket follows until the program sets it */
static bool differs_from_new(int fresh, int sk, int level, int opt, int *v)
{
	int def = 0;

	if (sk_getint(sk, level, opt, v))
		return false;
	return fresh < 0 || sk_getint(fresh, level, opt, &def) || *v != def;
}

/* the TCP options of a socket that is not an established connection */
static int dump_topts(int sk, int fresh, InetSk *s)
{
	TcpOpts *o = xzalloc(sizeof(*o));
	int v = 0;

	if (!o)
		return -ENOMEM;
	tcp_opts__init(o);
	s->topts = o;
	if (!sk_getint(sk, SOL_TCP, TCP_NODELAY, &v) && v)
		o->has_nodelay = o->nodelay = 1;
	if (!sk_getint(sk, SOL_TCP, TCP_CORK, &v) && v)
		o->has_cork = o->cork = 1;
	if (differs_from_new(fresh, sk, SOL_TCP, TCP_KEEPIDLE, &v)) {
		o->has_keepidle = 1;
		o->keepidle = v;
	}
	if (differs_from_new(fresh, sk, SOL_TCP, TCP_KEEPINTVL, &v)) {
		o->has_keepintvl = 1;
		o->keepintvl = v;
	}
	if (differs_from_new(fresh, sk, SOL_TCP, TCP_KEEPCNT, &v)) {
		o->has_keepcnt = 1;
		o->keepcnt = v;
	}
	if (!sk_getint(sk, SOL_TCP, TCP_USER_TIMEOUT, &v) && v) {
		o->has_user_timeout = 1;
		o->user_timeout = v;
	}
	/* not connected, TCP_MAXSEG reads what the program set, if it did */
	if (differs_from_new(fresh, sk, SOL_TCP, TCP_MAXSEG, &v)) {
		o->has_maxseg = 1;
		o->maxseg = v;
	}
	return 0;
}

/* ---------------------------------------------------------------- dump */

/* the socket's image, with what sock_diag says of it; "what" names it */
static InetSk *inet_sk_new(const struct sk_diag *d, pid_t pid, int fd, char *what, size_t len)
{
	InetSk *s = xzalloc(sizeof(*s));
	char lep[64], rep[64];

	if (!s)
		return NULL;
	inet_sk__init(s);
	s->family = d->family;
	s->type = d->type;
	s->protocol = d->protocol;
	s->state = d->state;
	s->ino = d->ino;
	s->has_src_addr = s->has_src_port = s->has_dst_addr = s->has_dst_port = 1;
	s->src_port = d->src_port;
	s->dst_port = d->dst_port;
	inet_endpoint(d->family, d->src, d->src_port, lep, sizeof(lep));
	inet_endpoint(d->family, d->dst, d->dst_port, rep, sizeof(rep));
	snprintf(what, len, "pid %d: fd %d (%s %s -> %s)", pid, fd,
		 d->protocol == IPPROTO_TCP ? "TCP" : "UDP", lep, rep);
	return s;
}

/* what sock_diag says of a TCP socket that cannot be dumped */
static int tcp_refused(const struct sk_diag *d, const char *what)
{
	if (d->protocol != IPPROTO_TCP)
		return 0;
	if (!tcp_repair_state(d->state) && d->state != TCP_LISTEN && d->state != TCP_CLOSE) {
		pr_err("%s: a connection in state %s (still being opened) cannot be dumped; "
		       "retry once it is established",
		       what, tcp_state_name(d->state));
		return -EOPNOTSUPP;
	}
	/* a connection shut for writing has sent its FIN, and one that has
	 * received its peer's is shut for reading: a shutdown for writing in
	 * any other state would be a FIN the restore cannot place */
	if (tcp_repair_state(d->state) && (d->shutdown & SEND_SHUTDOWN) &&
	    !tcp_fin_sent_state(d->state)) {
		pr_err("%s: a connection in state %s shut for writing (shutdown %#x) cannot be "
		       "dumped",
		       what, tcp_state_name(d->state), d->shutdown);
		return -EOPNOTSUPP;
	}
	if (d->state == TCP_LISTEN && d->rqlen) {
		pr_err("%s: %u connections wait to be accepted on this listener; they cannot be "
		       "dumped (retry once they are accepted)",
		       what, d->rqlen);
		return -EAGAIN;
	}
	return 0;
}

/* a TCP socket in state CLOSE that has sent or received segments */
static int tcp_closed_refused(int sk, const struct sk_diag *d, const char *what)
{
	uint32_t segs = 0;

	if (d->protocol != IPPROTO_TCP || d->state != TCP_CLOSE)
		return 0;
	if (sk_tcp_segs(sk, &segs) >= 0 && segs) {
		pr_err("%s: a TCP socket whose connection failed or ended (state CLOSE, "
		       "%u segments sent and received) cannot be dumped: its pending error "
		       "and shutdown cannot be read back",
		       what, segs);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* the IP options: v6-only, TOS and traffic class, TTL and hop limit (set
 * apart from what a new socket, fresh, reads), IP_BIND_ADDRESS_NO_PORT,
 * the device, IP_FREEBIND */
static int ip_opts_dump(int sk, int fresh, const struct sk_diag *d, InetSk *s)
{
	char dev[IFNAMSIZ + 1] = "";
	socklen_t l = IFNAMSIZ;
	int v = 0;

	if (d->family == AF_INET6 && !sk_getint(sk, IPPROTO_IPV6, IPV6_V6ONLY, &v)) {
		s->has_v6only = 1;
		s->v6only = !!v;
	}
	/* IP_TOS also for IPv6: the IPv4 packets of a dual-stack socket */
	if (!sk_getint(sk, IPPROTO_IP, IP_TOS, &v) && v) {
		s->has_tos = 1;
		s->tos = v;
	}
	if (d->family == AF_INET6 && !sk_getint(sk, IPPROTO_IPV6, IPV6_TCLASS, &v) && v) {
		s->has_tclass = 1;
		s->tclass = v;
	}
	if (differs_from_new(fresh, sk, IPPROTO_IP, IP_TTL, &v)) {
		s->has_ttl = 1;
		s->ttl = v;
	}
	if (d->family == AF_INET6 &&
	    differs_from_new(fresh, sk, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v)) {
		s->has_hops = 1;
		s->hops = v;
	}
	if (!sk_getint(sk, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &v) && v)
		s->has_bind_no_port = s->bind_no_port = 1;
	if (!getsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, dev, &l) && dev[0]) {
		s->bind_dev = strdup(dev);
		if (!s->bind_dev)
			return -ENOMEM;
	}
	if (!sk_getint(sk, d->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       d->family == AF_INET ? IP_FREEBIND : IPV6_FREEBIND, &v) &&
	    v)
		s->has_freebind = s->freebind = 1;
	return 0;
}

/* a UDP socket's peek offset, receive options, multicast and queue; sk
 * -1 once held until the dump ends */
static int udp_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, int *sk, InetSk *s,
		    const char *what)
{
	int32_t off = -1;
	socklen_t ol = sizeof(off);
	size_t zeros = 0;
	int ret;

	/* the program's own peek offset (udp_queue_dump moves it and sets it
	 * back) */
	if (!getsockopt(*sk, SOL_SOCKET, SO_PEEK_OFF, &off, &ol) && off >= 0) {
		s->opts->has_peek_off = 1;
		s->opts->peek_off = off;
	}
	udp_recv_opts_dump(*sk, s);
	ret = mcast_dump(*sk, s, what);
	/* a check reads nothing (a peek would hide the zero-length datagrams
	 * from the dump that follows, udp.c) */
	if (ret || ctx->check_only)
		return ret;
	ret = udp_queue_dump(*sk, s, &zeros, what);
	/* (also when the dump of its queue failed past them) */
	if (zeros && !udp_hold(ctx, *sk, p->pid, fd, s))
		*sk = -1; /* held until the dump ends */
	return ret;
}

/* what is read of the socket itself (sk, kupdate's copy, -1 once held) */
static int inet_dump_sk(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, int *sk,
			const struct sk_diag *d, InetSk *s, const char *what)
{
	bool tcp = d->protocol == IPPROTO_TCP;
	int fresh, ret;

	if (d->protocol == IPPROTO_UDP) {
		ret = udp_queue_check(*sk, d, &ctx->sk, what);
		if (ret)
			return ret;
	}
	ret = tcp_closed_refused(*sk, d, what);
	if (ret)
		return ret;
	s->opts = xzalloc(sizeof(*s->opts));
	ret = s->opts ? sk_opts_dump(*sk, s->opts, d->family) : -ENOMEM;
	if (ret)
		return ret;
	fresh = socket(d->family, d->type | SOCK_CLOEXEC, d->protocol);
	s->has_bound = 1;
	/* an address without a port: IP_BIND_ADDRESS_NO_PORT */
	s->bound = d->src_port != 0 || !addr_any(d->family, d->src);
	ret = ip_opts_dump(*sk, fresh, d, s);
	if (!ret && tcp && !tcp_repair_state(d->state))
		ret = dump_topts(*sk, fresh, s);
	if (fresh >= 0)
		close(fresh);
	if (ret)
		return ret;
	if (d->shutdown) {
		s->has_shutdown = 1;
		s->shutdown = d->shutdown;
	}
	if (d->protocol == IPPROTO_UDP)
		return udp_dump(ctx, p, fd, sk, s, what);
	if (tcp && d->state == TCP_LISTEN) {
		s->has_backlog = 1;
		s->backlog = d->wqlen;
	}
	if (tcp && tcp_repair_state(d->state))
		return tcp_dump_conn(ctx, p, fd, sk, s, what);
	return 0;
}

int inet_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
	      struct cr_file *f)
{
	char what[160];
	InetSk *s = inet_sk_new(d, p->pid, fd, what, sizeof(what));
	int sk, ret;

	if (!s)
		return -ENOMEM;
	f->isk = s;
	if (img_bytes(&s->src_addr, d->src, alen(d->family)) ||
	    img_bytes(&s->dst_addr, d->dst, alen(d->family)))
		return -ENOMEM;
	ret = tcp_refused(d, what);
	if (ret)
		return ret;
	sk = sk_dup(p, fd);
	if (sk < 0)
		return sk;
	ret = inet_dump_sk(ctx, p, fd, &sk, d, s, what);
	if (sk >= 0)
		close(sk);
	return ret;
}

void inet_free_dump(InetSk *s)
{
	if (!s)
		return;
	free(s->src_addr.data);
	free(s->dst_addr.data);
	free(s->opts);
	free(s->topts);
	free(s->bind_dev);
	udp_queue_free(s);
	mcast_free(s);
	if (s->tcp) {
		free(s->tcp->outq.data);
		free(s->tcp->inq.data);
		free(s->tcp);
	}
	free(s);
}

/* ------------------------------------------------------------- restore */

int inet_validate(const FileEntry *e)
{
	const InetSk *s = e->isk;

	if (!s || (s->family != AF_INET && s->family != AF_INET6) ||
	    (s->protocol != IPPROTO_TCP && s->protocol != IPPROTO_UDP) ||
	    s->src_addr.len != (size_t)alen(s->family) ||
	    (s->has_dst_addr && s->dst_addr.len != (size_t)alen(s->family)) ||
	    s->src_port > 65535 || s->dst_port > 65535 ||
	    (s->bind_dev && strlen(s->bind_dev) >= IFNAMSIZ) ||
	    (s->protocol == IPPROTO_TCP && tcp_repair_state(s->state) &&
	     (!s->tcp || s->tcp->inq.len > (64U << 20) || s->tcp->outq.len > (64U << 20) ||
	      s->tcp->unsent > s->tcp->outq.len)) ||
	    (s->protocol == IPPROTO_TCP && !tcp_repair_state(s->state) && s->state != TCP_LISTEN &&
	     s->state != TCP_CLOSE) ||
	    udp_queue_validate(s) || mcast_validate(s)) {
		pr_err("image files.img is damaged: inet socket %u is invalid", e->id);
		return -EINVAL;
	}
	return 0;
}

static socklen_t sockaddr_of(const InetSk *s, bool dst, struct sockaddr_storage *ss)
{
	const ProtobufCBinaryData *a = dst ? &s->dst_addr : &s->src_addr;
	unsigned port = dst ? s->dst_port : s->src_port;

	memset(ss, 0, sizeof(*ss));
	if (s->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, a->data, 4);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, a->data, 16);
		return sizeof(*in6);
	}
}

/* Where to bind: the source address, but the wildcard for an IPv6 socket
 * that is not v6-only whose address is a plain IPv6 one.  Binding such an
 * address makes a socket v6-only (the kernel's inet6 bind), so the program
 * never bound it: connect chose it, and the restore's connect chooses it
 * again, the socket staying dual-stack as it was. */
static socklen_t bind_addr_of(const InetSk *s, struct sockaddr_storage *ss)
{
	socklen_t len = sockaddr_of(s, false, ss);

	if (s->family == AF_INET6 && s->has_v6only && !s->v6only &&
	    !addr_v4mapped(s->src_addr.data) && !addr_any(AF_INET6, s->src_addr.data))
		memset(&((struct sockaddr_in6 *)ss)->sin6_addr, 0, 16);
	return len;
}

/* the connection, in repair mode (tcp-repair.c) */
static int restore_stream(int sk, const InetSk *s, const char *what)
{
	struct sockaddr_storage self, peer;
	socklen_t self_len = bind_addr_of(s, &self), peer_len = sockaddr_of(s, true, &peer);
	struct tcp_repair_data d;
	struct tcp_repair *c;
	int ret;

	tcp_stream_get(s, &d);
	c = tcp_repair_import(&d);
	if (!c)
		return -ENOMEM;
	ret = tcp_repair_restore(sk, c, (struct sockaddr *)&self, self_len,
				 (struct sockaddr *)&peer, peer_len, what);
	tcp_repair_free(c);
	return ret;
}

static int restore_topts(int sk, const TcpOpts *o, const char *what)
{
	if ((o->nodelay && sk_setint(sk, SOL_TCP, TCP_NODELAY, 1, "TCP_NODELAY", what)) ||
	    (o->cork && sk_setint(sk, SOL_TCP, TCP_CORK, 1, "TCP_CORK", what)) ||
	    (o->has_keepidle &&
	     sk_setint(sk, SOL_TCP, TCP_KEEPIDLE, o->keepidle, "TCP_KEEPIDLE", what)) ||
	    (o->has_keepintvl &&
	     sk_setint(sk, SOL_TCP, TCP_KEEPINTVL, o->keepintvl, "TCP_KEEPINTVL", what)) ||
	    (o->has_keepcnt &&
	     sk_setint(sk, SOL_TCP, TCP_KEEPCNT, o->keepcnt, "TCP_KEEPCNT", what)) ||
	    (o->has_user_timeout &&
	     sk_setint(sk, SOL_TCP, TCP_USER_TIMEOUT, o->user_timeout, "TCP_USER_TIMEOUT", what)) ||
	    (o->has_maxseg && sk_setint(sk, SOL_TCP, TCP_MAXSEG, o->maxseg, "TCP_MAXSEG", what)))
		return -EINVAL;
	return 0;
}

/* a listener the service manager made (sk_take_listener): the tree's
 * options on it, and its backlog */
static int adopt_listener(int sk, const InetSk *s, const char *what)
{
	int ret = s->topts ? restore_topts(sk, s->topts, what) : 0;

	if (!ret)
		ret = sk_opts_restore(sk, s->opts, what);
	if (!ret && listen(sk, s->has_backlog ? (int)s->backlog : 128))
		ret = pr_errno("%s: cannot listen", what);
	if (ret) {
		close(sk);
		return ret < 0 ? ret : -EINVAL;
	}
	return sk;
}

int inet_create(const InetSk *s, struct sk_listeners *l, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int sk, ret = 0;

	if (s->protocol == IPPROTO_TCP && s->state == TCP_LISTEN && s->bound) {
		len = bind_addr_of(s, &ss);
		sk = sk_take_listener(l, SOCK_STREAM, (struct sockaddr *)&ss, len, what);
		if (sk >= 0)
			return adopt_listener(sk, s, what);
		if (sk != -ENOENT)
			return sk;
	}
	sk = socket(s->family,
		    (s->protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC,
		    s->protocol);
	if (sk < 0)
		return pr_errno("%s: cannot create the socket", what);
	/* (images before the field was always written have it only when set) */
	if (s->has_v6only)
		ret |= sk_setint(sk, IPPROTO_IPV6, IPV6_V6ONLY, s->v6only, "IPV6_V6ONLY", what);
	if (s->freebind)
		ret |= sk_setint(sk, s->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
				 s->family == AF_INET ? IP_FREEBIND : IPV6_FREEBIND, 1, "FREEBIND",
				 what);
	if (s->bind_dev &&
	    setsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, s->bind_dev, strlen(s->bind_dev))) {
		ret = pr_errno("%s: cannot bind it to device %s (SO_BINDTODEVICE)", what,
			       s->bind_dev);
		goto fail;
	}
	if (s->bind_no_port)
		ret |= sk_setint(sk, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1,
				 "IP_BIND_ADDRESS_NO_PORT", what);
	/* IP_TOS sets the priority too: SO_PRIORITY comes after (sk_opts_restore) */
	if (s->has_tos)
		ret |= sk_setint(sk, IPPROTO_IP, IP_TOS, s->tos, "IP_TOS", what);
	if (s->has_tclass)
		ret |= sk_setint(sk, IPPROTO_IPV6, IPV6_TCLASS, s->tclass, "IPV6_TCLASS", what);
	if (s->has_ttl)
		ret |= sk_setint(sk, IPPROTO_IP, IP_TTL, s->ttl, "IP_TTL", what);
	if (s->has_hops)
		ret |= sk_setint(sk, IPPROTO_IPV6, IPV6_UNICAST_HOPS, s->hops, "IPV6_UNICAST_HOPS",
				 what);
	if (!ret && s->topts)
		ret = restore_topts(sk, s->topts, what);
	if (!ret)
		ret = sk_opts_restore(sk, s->opts, what);
	if (ret)
		goto fail;

	if (s->protocol == IPPROTO_TCP && tcp_repair_state(s->state)) {
		if (sk_setint(sk, SOL_TCP, TCP_REPAIR, 1, "TCP_REPAIR (needs CAP_NET_ADMIN)",
			      what)) {
			ret = -EPERM;
			goto fail;
		}
		ret = restore_stream(sk, s, what);
		if (ret)
			goto fail;
		/* it leaves repair mode when kupdate lifts the lock */
		return sk;
	}
	if (s->bound) {
		len = bind_addr_of(s, &ss);
		if (bind(sk, (struct sockaddr *)&ss, len)) {
			ret = pr_errno("%s: cannot bind", what);
			goto fail;
		}
	}
	if (s->protocol == IPPROTO_TCP && s->state == TCP_LISTEN &&
	    listen(sk, s->has_backlog ? (int)s->backlog : 128)) {
		ret = pr_errno("%s: cannot listen", what);
		goto fail;
	}
	/* its multicast groups and options (before its queue: its datagrams
	 * may have come to a group) */
	if (s->protocol == IPPROTO_UDP) {
		ret = mcast_restore(sk, s, what);
		if (ret)
			goto fail;
	}
	/* its queue before its connect: the datagrams queued before a connect
	 * came from anywhere, and once connected it takes its peer's only */
	if (s->n_queue) {
		ret = udp_queue_restore(sk, s, what);
		if (ret)
			goto fail;
	}
	if (s->recv_opts) {
		ret = udp_recv_opts_restore(sk, s, what);
		if (ret)
			goto fail;
	}
	if (s->protocol == IPPROTO_UDP && s->state == TCP_ESTABLISHED) {
		len = sockaddr_of(s, true, &ss);
		if (connect(sk, (struct sockaddr *)&ss, len)) {
			ret = pr_errno("%s: cannot connect", what);
			goto fail;
		}
	}
	if (s->has_shutdown && s->shutdown && s->protocol == IPPROTO_UDP)
		shutdown(sk, (s->shutdown & 3) == 3 ? SHUT_RDWR
			     : (s->shutdown & 2)    ? SHUT_WR
						    : SHUT_RD);
	return sk;
fail:
	close(sk);
	return ret ? ret : -EINVAL;
}

bool inet_is_repaired(const FileEntry *e)
{
	return e->kind == FILE_KIND__FILE_INET && e->isk && e->isk->protocol == IPPROTO_TCP &&
	       tcp_repair_state(e->isk->state);
}
