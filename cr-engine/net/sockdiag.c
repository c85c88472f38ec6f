/* Socket discovery through netlink sock_diag (libnl-3): one dump of every
 * unix, TCP, UDP and packet socket of the current network namespace,
 * indexed by inode, before the sockets of the tree are looked at one by one.
 *
 * sock_diag lists the TCP sockets that are listening or connected (and,
 * from Linux 6.8, those bound to a port), and the UDP sockets bound to a
 * port: a TCP or UDP socket never bound (or, before 6.8, a TCP socket bound
 * and neither listening nor connected) is not there.  Such a socket is
 * described from kupdate's own descriptor of it instead (sockdiag_probe:
 * SO_DOMAIN, SO_TYPE, SO_PROTOCOL, the TCP state, getsockname).  Any other
 * socket sock_diag does not list is refused with what it is: one made in
 * another network namespace, a netlink, packet or raw socket, another
 * protocol (SCTP, ping, MPTCP...), or a TCP or UDP socket of a kind the
 * kernel's sock_diag should have listed (a kernel without INET_DIAG for
 * that protocol). */
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/packet_diag.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sockdiag.h"
#include "util.h"

/* The kernel's struct tcp_info goes on past the end of glibc's with the
 * segment counters (Linux 4.2) */
struct tcp_info_segs {
	struct tcp_info base;
	uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
	uint32_t segs_out, segs_in;
};
_Static_assert(offsetof(struct tcp_info_segs, segs_out) == 136, "the kernel's tcpi_segs_out");

struct collect {
	struct sk_table *t;
	int family, protocol;
	int err;
};

static struct sk_diag *new_entry(struct sk_table *t)
{
	struct sk_diag *nv;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		nv = realloc(t->v, t->cap * sizeof(*nv));
		if (!nv)
			return NULL;
		t->v = nv;
	}
	memset(&t->v[t->n], 0, sizeof(t->v[0]));
	return &t->v[t->n++];
}

static int unix_cb(struct nl_msg *msg, void *arg)
{
	struct collect *c = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct unix_diag_msg *m = nlmsg_data(nh);
	struct nlattr *tb[UNIX_DIAG_MAX + 1];
	struct sk_diag *d;

	if (nlmsg_parse(nh, sizeof(*m), tb, UNIX_DIAG_MAX, NULL) < 0)
		return NL_SKIP;
	d = new_entry(c->t);
	if (!d) {
		c->err = -ENOMEM;
		return NL_STOP;
	}
	d->ino = m->udiag_ino;
	d->family = AF_UNIX;
	d->type = m->udiag_type;
	d->state = m->udiag_state;
	if (tb[UNIX_DIAG_NAME]) {
		int len = MIN(nla_len(tb[UNIX_DIAG_NAME]), (int)sizeof(d->name));

		memcpy(d->name, nla_data(tb[UNIX_DIAG_NAME]), len);
		d->name_len = len;
	}
	if (tb[UNIX_DIAG_VFS]) {
		struct unix_diag_vfs *v = nla_data(tb[UNIX_DIAG_VFS]);

		d->vfs_ino = v->udiag_vfs_ino;
		d->vfs_dev = v->udiag_vfs_dev;
	}
	if (tb[UNIX_DIAG_PEER])
		d->peer = nla_get_u32(tb[UNIX_DIAG_PEER]);
	if (tb[UNIX_DIAG_RQLEN]) {
		struct unix_diag_rqlen *q = nla_data(tb[UNIX_DIAG_RQLEN]);

		d->rqlen = q->udiag_rqueue;
		d->wqlen = q->udiag_wqueue;
	}
	if (tb[UNIX_DIAG_SHUTDOWN])
		d->shutdown = nla_get_u8(tb[UNIX_DIAG_SHUTDOWN]);
	if (tb[UNIX_DIAG_ICONS]) {
		int n = nla_len(tb[UNIX_DIAG_ICONS]) / 4;

		d->icons = malloc(sizeof(uint32_t) * (n ? n : 1));
		if (!d->icons) {
			c->err = -ENOMEM;
			return NL_STOP;
		}
		memcpy(d->icons, nla_data(tb[UNIX_DIAG_ICONS]), n * 4);
		d->nr_icons = n;
	}
	return NL_OK;
}

static int inet_cb(struct nl_msg *msg, void *arg)
{
	struct collect *c = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct inet_diag_msg *m = nlmsg_data(nh);
	struct nlattr *tb[INET_DIAG_MAX + 1];
	struct sk_diag *d;

	if (nlmsg_parse(nh, sizeof(*m), tb, INET_DIAG_MAX, NULL) < 0)
		return NL_SKIP;
	if (!m->idiag_inode)
		return NL_OK; /* TIME_WAIT and request sockets have no inode */
	d = new_entry(c->t);
	if (!d) {
		c->err = -ENOMEM;
		return NL_STOP;
	}
	d->ino = m->idiag_inode;
	d->family = m->idiag_family;
	d->protocol = c->protocol;
	d->type = c->protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM;
	d->state = m->idiag_state;
	d->src_port = ntohs(m->id.idiag_sport);
	d->dst_port = ntohs(m->id.idiag_dport);
	memcpy(d->src, m->id.idiag_src, 16);
	memcpy(d->dst, m->id.idiag_dst, 16);
	d->rqlen = m->idiag_rqueue;
	d->wqlen = m->idiag_wqueue;
	if (tb[INET_DIAG_SHUTDOWN])
		d->shutdown = nla_get_u8(tb[INET_DIAG_SHUTDOWN]);
	return NL_OK;
}

static int packet_mclist(struct pk_diag *pk, struct nlattr *a)
{
	const struct packet_diag_mclist *m = nla_data(a);
	int n = nla_len(a) / sizeof(*m);

	pk->mc = n ? calloc(n, sizeof(*pk->mc)) : NULL;
	if (n && !pk->mc)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		pk->mc[i].ifindex = m[i].pdmc_index;
		pk->mc[i].count = m[i].pdmc_count;
		pk->mc[i].type = m[i].pdmc_type;
		pk->mc[i].alen = m[i].pdmc_alen > 32 ? 32 : m[i].pdmc_alen;
		memcpy(pk->mc[i].addr, m[i].pdmc_addr, pk->mc[i].alen);
	}
	pk->nr_mc = n;
	return 0;
}

static int packet_cb(struct nl_msg *msg, void *arg)
{
	struct collect *c = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct packet_diag_msg *m = nlmsg_data(nh);
	struct nlattr *tb[PACKET_DIAG_MAX + 1];
	struct pk_diag *pk;
	struct sk_diag *d;

	if (nlmsg_parse(nh, sizeof(*m), tb, PACKET_DIAG_MAX, NULL) < 0)
		return NL_SKIP;
	pk = calloc(1, sizeof(*pk));
	d = pk ? new_entry(c->t) : NULL;
	if (!d) {
		free(pk);
		c->err = -ENOMEM;
		return NL_STOP;
	}
	d->ino = m->pdiag_ino;
	d->family = AF_PACKET;
	d->type = m->pdiag_type;
	d->protocol = m->pdiag_num;
	d->pk = pk;
	if (tb[PACKET_DIAG_INFO]) {
		const struct packet_diag_info *i = nla_data(tb[PACKET_DIAG_INFO]);

		pk->version = i->pdi_version;
		pk->reserve = i->pdi_reserve;
		pk->copy_thresh = i->pdi_copy_thresh;
		pk->tstamp = i->pdi_tstamp;
		pk->flags = i->pdi_flags;
	}
	if (tb[PACKET_DIAG_MCLIST] && packet_mclist(pk, tb[PACKET_DIAG_MCLIST])) {
		c->err = -ENOMEM;
		return NL_STOP;
	}
	pk->rx_ring = tb[PACKET_DIAG_RX_RING] != NULL;
	if (pk->rx_ring && nla_len(tb[PACKET_DIAG_RX_RING]) >= (int)sizeof(pk->rx))
		memcpy(pk->rx, nla_data(tb[PACKET_DIAG_RX_RING]), sizeof(pk->rx));
	pk->tx_ring = tb[PACKET_DIAG_TX_RING] != NULL;
	pk->fanout = tb[PACKET_DIAG_FANOUT] != NULL;
	/* the bytes queued to be read */
	if (tb[PACKET_DIAG_MEMINFO])
		d->rqlen = ((const uint32_t *)nla_data(
			tb[PACKET_DIAG_MEMINFO]))[SK_MEMINFO_RMEM_ALLOC];
	return NL_OK;
}

static int dump_family(struct nl_sock *sk, struct collect *c)
{
	int ret;

	if (c->family == AF_PACKET) {
		struct packet_diag_req req;

		memset(&req, 0, sizeof(req));
		req.sdiag_family = AF_PACKET;
		req.pdiag_show = PACKET_SHOW_INFO | PACKET_SHOW_MCLIST | PACKET_SHOW_RING_CFG |
				 PACKET_SHOW_FANOUT | PACKET_SHOW_MEMINFO;
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, packet_cb, c);
		ret = nl_send_simple(sk, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP | NLM_F_REQUEST, &req,
				     sizeof(req));
	} else if (c->family == AF_UNIX) {
		struct unix_diag_req req;

		memset(&req, 0, sizeof(req));
		req.sdiag_family = AF_UNIX;
		req.udiag_states = ~0U;
		req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_PEER |
				 UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN;
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, unix_cb, c);
		ret = nl_send_simple(sk, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP | NLM_F_REQUEST, &req,
				     sizeof(req));
	} else {
		struct inet_diag_req_v2 req;

		memset(&req, 0, sizeof(req));
		req.sdiag_family = c->family;
		req.sdiag_protocol = c->protocol;
		req.idiag_states = ~0U;
		req.idiag_ext = 1 << (INET_DIAG_SHUTDOWN - 1);
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, inet_cb, c);
		ret = nl_send_simple(sk, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP | NLM_F_REQUEST, &req,
				     sizeof(req));
	}
	if (ret < 0)
		return ret;
	ret = nl_recvmsgs_default(sk);
	if (c->err)
		return c->err;
	return ret < 0 ? ret : 0;
}

static int cmp_ino(const void *a, const void *b)
{
	const struct sk_diag *x = a, *y = b;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/* the sockets of the calling thread's network namespace into t; only its
 * unix ones with unix_only */
static int collect(struct sk_table *t, bool unix_only)
{
	static const struct {
		int family, protocol;
		bool needed;
	} what[] = {
		{ AF_UNIX, 0, true }, /* first: all there is with unix_only */
		{ AF_INET, IPPROTO_TCP, true },
		{ AF_INET6, IPPROTO_TCP, false },
		{ AF_INET, IPPROTO_UDP, false },
		{ AF_INET6, IPPROTO_UDP, false },
		{ AF_PACKET, 0, false }, /* a kernel without PACKET_DIAG: none */
	};
	struct nl_sock *sk;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	ret = nl_connect(sk, NETLINK_SOCK_DIAG);
	if (ret < 0) {
		pr_err("cannot open a sock_diag netlink socket: %s", nl_geterror(ret));
		nl_socket_free(sk);
		return -EIO;
	}
	for (size_t i = 0; i < (unix_only ? 1 : ARRAY_SIZE(what)); i++) {
		struct collect c = { t, what[i].family, what[i].protocol, 0 };

		ret = dump_family(sk, &c);
		if (ret && what[i].needed) {
			pr_err("sock_diag dump of family %d protocol %d failed: %s (is the kernel "
			       "built with UNIX_DIAG and INET_DIAG?)",
			       what[i].family, what[i].protocol,
			       ret < 0 && ret > -64 ? nl_geterror(ret) : strerror(-ret));
			break;
		}
		if (ret)
			pr_debug("sock_diag: family %d protocol %d unavailable", what[i].family,
				 what[i].protocol);
		ret = 0;
	}
	nl_socket_free(sk);
	if (ret)
		return -EIO;
	/* (a namespace may have no socket sock_diag lists: no table at all) */
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_ino);
	return 0;
}

int sockdiag_collect(struct sk_table *t)
{
	return collect(t, false);
}

/* the sockets of the calling thread's namespace added to t: those sock_diag
 * lists there, unix ones only if unix_only, marked outer if so */
static int merge(struct sk_table *t, bool unix_only, bool outer)
{
	struct sk_table o;
	size_t n = t->n;
	int ret = collect(&o, unix_only);

	for (size_t i = 0; !ret && i < o.n; i++) {
		/* (the entries added come after the sorted ones) */
		struct sk_table sorted = { .v = t->v, .n = n };
		struct sk_diag *d;

		if (sockdiag_find(&sorted, o.v[i].ino))
			continue;
		d = new_entry(t);
		if (!d) {
			ret = -ENOMEM;
			break;
		}
		*d = o.v[i];
		d->outer = outer;
		o.v[i].icons = NULL; /* the entry's now */
		o.v[i].pk = NULL;
	}
	sockdiag_free(&o);
	if (t->n > n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_ino);
	return ret;
}

int sockdiag_merge_unix(struct sk_table *t)
{
	return merge(t, true, true);
}

int sockdiag_merge(struct sk_table *t)
{
	return merge(t, false, false);
}

struct sk_diag *sockdiag_find(const struct sk_table *t, uint32_t ino)
{
	struct sk_diag key = { .ino = ino };

	return t->n ? bsearch(&key, t->v, t->n, sizeof(*t->v), cmp_ino) : NULL;
}

void sockdiag_free(struct sk_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].icons);
		if (t->v[i].pk)
			free(t->v[i].pk->mc);
		free(t->v[i].pk);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

int sk_tcp_segs(int sk, uint32_t *segs)
{
	struct tcp_info_segs ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(sk, IPPROTO_TCP, TCP_INFO, &ti, &l))
		return -errno;
	/* before Linux 4.2, nothing tells */
	*segs = l >= sizeof(ti) ? ti.segs_out + ti.segs_in : 0;
	return ti.base.tcpi_state;
}

static const char *netlink_name(int proto)
{
	switch (proto) {
	case NETLINK_ROUTE:
		return "NETLINK_ROUTE";
	case NETLINK_SOCK_DIAG:
		return "NETLINK_SOCK_DIAG";
	case NETLINK_AUDIT:
		return "NETLINK_AUDIT";
	case NETLINK_NETFILTER:
		return "NETLINK_NETFILTER";
	case NETLINK_KOBJECT_UEVENT:
		return "NETLINK_KOBJECT_UEVENT";
	case NETLINK_GENERIC:
		return "NETLINK_GENERIC";
	}
	return "protocol";
}

static const char *ip_proto_name(int proto)
{
	switch (proto) {
	case IPPROTO_ICMP:
		return "ICMP";
	case IPPROTO_ICMPV6:
		return "ICMPv6";
	case IPPROTO_SCTP:
		return "SCTP";
	case IPPROTO_UDPLITE:
		return "UDP-Lite";
	case IPPROTO_MPTCP:
		return "MPTCP";
	case IPPROTO_DCCP:
		return "DCCP";
	}
	return "protocol";
}

/* the socket's own network namespace is not ours */
static bool other_netns(int sk)
{
	struct stat ns, self;
	int fd = ioctl(sk, SIOCGSKNS);
	bool other;

	if (fd < 0)
		return false; /* before Linux 4.9: the process's own was checked */
	other = !fstat(fd, &ns) && !stat("/proc/thread-self/ns/net", &self) &&
		(ns.st_ino != self.st_ino || ns.st_dev != self.st_dev);
	close(fd);
	return other;
}

/* no socket holds the TCP port of addr: a new one binds it (without
 * SO_REUSEADDR or SO_REUSEPORT, so that any holder stands in its way) */
static bool port_free(int family, const struct sockaddr_storage *addr)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = !bind(fd, (const struct sockaddr *)addr,
		   family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	close(fd);
	return ok;
}

int sockdiag_probe(int sk, uint32_t ino, struct sk_diag *d, const char *what)
{
	int domain = -1, type = -1, proto = -1, state;
	socklen_t l = sizeof(int);
	const char *fam;
	struct sockaddr_storage ss;
	uint32_t segs = 0;

	if (other_netns(sk)) {
		pr_err("%s: the socket belongs to another network namespace than its process "
		       "(made there after a setns or unshare); it cannot be dumped",
		       what);
		return -EOPNOTSUPP;
	}
	if (getsockopt(sk, SOL_SOCKET, SO_DOMAIN, &domain, &l) ||
	    getsockopt(sk, SOL_SOCKET, SO_TYPE, &type, &l) ||
	    getsockopt(sk, SOL_SOCKET, SO_PROTOCOL, &proto, &l)) {
		int ret = -errno;
		pr_perror("%s: cannot tell what kind of socket it is", what);
		return ret;
	}
	fam = domain == AF_INET ? "IPv4" : "IPv6";
	switch (domain) {
	case AF_NETLINK:
		pr_err("%s: a netlink socket (%s %d) cannot be dumped", what, netlink_name(proto),
		       proto);
		return -EOPNOTSUPP;
	case AF_PACKET:
		pr_err("%s: a packet socket (AF_PACKET) cannot be dumped", what);
		return -EOPNOTSUPP;
	case AF_INET:
	case AF_INET6:
		break;
	default:
		pr_err("%s: a socket of family %d (type %d, protocol %d) cannot be dumped", what,
		       domain, type, proto);
		return -EOPNOTSUPP;
	}
	if (type == SOCK_RAW) {
		pr_err("%s: a raw %s socket (protocol %d) cannot be dumped", what, fam, proto);
		return -EOPNOTSUPP;
	}
	if (!((type == SOCK_STREAM && proto == IPPROTO_TCP) ||
	      (type == SOCK_DGRAM && proto == IPPROTO_UDP))) {
		pr_err("%s: an %s socket of %s %d (type %d) cannot be dumped", what, fam,
		       ip_proto_name(proto), proto, type);
		return -EOPNOTSUPP;
	}
	l = sizeof(ss);
	if (getsockname(sk, (struct sockaddr *)&ss, &l)) {
		int ret = -errno;
		pr_perror("%s: getsockname", what);
		return ret;
	}
	memset(d, 0, sizeof(*d));
	d->ino = ino;
	d->family = domain;
	d->type = type;
	d->protocol = proto;
	if (domain == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		memcpy(d->src, &a->sin_addr, 4);
		d->src_port = ntohs(a->sin_port);
	} else {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

		memcpy(d->src, &a->sin6_addr, 16);
		d->src_port = ntohs(a->sin6_port);
	}
	if (proto == IPPROTO_TCP) {
		state = sk_tcp_segs(sk, &segs);
		if (state < 0) {
			pr_err("%s: cannot read its TCP state: %s", what, strerror(-state));
			return state;
		}
		if (state != TCP_CLOSE) {
			pr_err("%s: sock_diag does not list this %s TCP socket in state %d (a "
			       "kernel without INET_DIAG%s?); it cannot be dumped",
			       what, fam, state, domain == AF_INET6 ? " for IPv6" : "");
			return -EOPNOTSUPP;
		}
		/* A connect that failed (blocking) or connect(AF_UNSPEC) made it a
		 * new socket again, its port given back unless the program had
		 * bound it, but getsockname still shows it: a port nobody
		 * holds is one the socket does not hold */
		if (d->src_port && port_free(domain, &ss)) {
			pr_debug("%s: does not hold port %u any more", what, d->src_port);
			d->src_port = 0;
		}
		d->state = TCP_CLOSE;
		return 0;
	}
	/* UDP: a port or a peer would have put it in sock_diag's table */
	l = sizeof(ss);
	if (d->src_port || !getpeername(sk, (struct sockaddr *)&ss, &l)) {
		pr_err("%s: sock_diag does not list this bound %s UDP socket (a kernel without "
		       "INET_UDP_DIAG?); it cannot be dumped",
		       what, fam);
		return -EOPNOTSUPP;
	}
	d->state = TCP_CLOSE;
	return 0;
}
