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
 * mode (TCP_REPAIR): sequence numbers, the unacknowledged and
 * unsent send queue, the unread receive queue, MSS, window scaling, SACK,
 * timestamps (TCP_TIMESTAMP, so the peer sees them go on), the window
 * (TCP_REPAIR_WINDOW) and the usual options.  Its packets are dropped by
 * the network lock (netlock.c) from just before it is read until it is
 * restored; a socket still in repair mode closes without a FIN or a RST.
 *
 * The dump holds a copy of the socket, but leaves repair mode as soon as
 * the connection is read (without a window probe where the kernel can:
 * TCP_REPAIR_OFF_NO_WP), and puts it back only just before the tree is
 * killed, the very last step: a kupdate killed in between (SIGKILL, OOM)
 * leaves the service ordinary sockets, whose unread data it can still
 * read once its packets flow again.  A tree that goes on (a failed dump,
 * --leave-running) gets a window probe once the lock is lifted, so that
 * the peer resumes at once.
 *
 * Restore builds the connection in repair mode without sending anything;
 * kupdate lifts the lock and leaves repair mode (which sends a window
 * probe) only once the whole tree is ready to run (restore.c). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "dump.h"
#include "image.h"
#include "log.h"
#include "mcast.h"
#include "netlock.h"
#include "sockdiag.h"
#include "sockets.h"
#include "files.h"
#include "restore.h"
#include "tcp.h"
#include "udp.h"
#include "util.h"

#ifndef TCPOPT_MSS
#define TCPOPT_MSS	 2
#define TCPOPT_WINDOW	 3
#define TCPOPT_SACK_PERM 4
#define TCPOPT_TIMESTAMP 8
#endif

/* the kernel's sk_shutdown bits, as sock_diag reports them */
#define RCV_SHUTDOWN  1
#define SEND_SHUTDOWN 2

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef TCP_REPAIR_ON
#define TCP_REPAIR_ON  1
#define TCP_REPAIR_OFF 0
#endif
#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif

static const char *const tcp_states[] = {
	"?",	     "ESTABLISHED", "SYN_SENT",	  "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
	"TIME_WAIT", "CLOSE",	    "CLOSE_WAIT", "LAST_ACK", "LISTEN",	   "CLOSING",
};

static const char *state_name(int s)
{
	return s >= 0 && s < (int)ARRAY_SIZE(tcp_states) ? tcp_states[s] : "?";
}

/* A connection that had sent its FIN (which takes one sequence number,
 * counted in write_seq and in SIOCOUTQ/SIOCOUTQNSD while unacknowledged or
 * unsent), and one that had received the peer's (counted in rcv_nxt). */
static bool fin_sent_state(unsigned s)
{
	return s == TCP_FIN_WAIT1 || s == TCP_FIN_WAIT2 || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

static bool fin_received_state(unsigned s)
{
	return s == TCP_CLOSE_WAIT || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

/* the states a connection is dumped and restored in with repair mode */
static bool stream_state(unsigned s)
{
	return s == TCP_ESTABLISHED || fin_sent_state(s) || fin_received_state(s);
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

static int getint(int sk, int level, int opt, uint32_t *v)
{
	int val = 0;
	socklen_t l = sizeof(val);

	if (getsockopt(sk, level, opt, &val, &l))
		return -errno;
	*v = val;
	return 0;
}

/* peek a whole queue selected with TCP_REPAIR_QUEUE */
static int peek_tcp_queue(int sk, int queue, uint32_t len, uint32_t *seq, ProtobufCBinaryData *out)
{
	ssize_t n;

	if (setsockopt(sk, SOL_TCP, TCP_REPAIR_QUEUE, &queue, sizeof(queue)) ||
	    getint(sk, SOL_TCP, TCP_QUEUE_SEQ, seq))
		return -errno;
	if (!len)
		return 0;
	out->data = malloc(len);
	if (!out->data)
		return -ENOMEM;
	n = recv(sk, out->data, len, MSG_PEEK | MSG_DONTWAIT);
	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	out->len = len;
	return 0;
}

static int dump_stream(int sk, InetSk *s, int64_t rcv_wup_at_lock, const char *what)
{
	bool fin_out = fin_sent_state(s->state);
	TcpStream *t = xzalloc(sizeof(*t));
	struct tcp_info ti;
	struct tcp_repair_window w;
	socklen_t l;
	int outq = 0, unsent = 0, inq = 0, ret;
	uint32_t v = 0;

	if (!t)
		return -ENOMEM;
	tcp_stream__init(t);
	s->tcp = t;
	l = sizeof(ti);
	if (getsockopt(sk, SOL_TCP, TCP_INFO, &ti, &l)) {
		ret = -errno;
		pr_perror("%s: cannot read TCP_INFO", what);
		return ret;
	}
	if (ioctl(sk, SIOCOUTQ, &outq) || ioctl(sk, SIOCOUTQNSD, &unsent) ||
	    ioctl(sk, SIOCINQ, &inq)) {
		ret = -errno;
		pr_perror("%s: cannot read the queue lengths", what);
		return ret;
	}
	/* the FIN it sent is the last sequence number of its send queue, in
	 * the queue lengths while unacknowledged (outq) or unsent (unsent),
	 * but no byte of the queue: outq and unsent count the bytes only */
	if (fin_out && outq > 0)
		outq--;
	if (fin_out && unsent > 0)
		unsent--;
	ret = peek_tcp_queue(sk, TCP_SEND_QUEUE, outq, &t->snd_seq, &t->outq);
	if (!ret)
		ret = peek_tcp_queue(sk, TCP_RECV_QUEUE, inq, &t->rcv_seq, &t->inq);
	if (ret) {
		pr_err("%s: cannot read its queues in repair mode: %s", what, strerror(-ret));
		return ret;
	}
	if (rcv_wup_at_lock >= 0) {
		t->has_rcv_locked = 1;
		t->rcv_locked = (uint32_t)rcv_wup_at_lock;
	}
	t->has_outq = outq > 0;
	t->has_inq = inq > 0;
	t->has_unsent = 1;
	t->unsent = unsent;
	if (getint(sk, SOL_TCP, TCP_MAXSEG, &t->mss)) {
		ret = -errno;
		pr_perror("%s: cannot read its MSS", what);
		return ret;
	}
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		t->has_snd_wscale = t->has_rcv_wscale = 1;
		t->snd_wscale = ti.tcpi_snd_wscale;
		t->rcv_wscale = ti.tcpi_rcv_wscale;
	}
	t->has_sack = t->has_tstamp = 1;
	t->sack = !!(ti.tcpi_options & TCPI_OPT_SACK);
	t->tstamp = !!(ti.tcpi_options & TCPI_OPT_TIMESTAMPS);
	if (!getint(sk, SOL_TCP, TCP_TIMESTAMP, &v)) {
		t->has_timestamp = 1;
		t->timestamp = v;
	}
	l = sizeof(w);
	if (!getsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, &l)) {
		t->has_snd_wl1 = t->has_snd_wnd = t->has_max_window = t->has_rcv_wnd =
			t->has_rcv_wup = 1;
		t->snd_wl1 = w.snd_wl1;
		t->snd_wnd = w.snd_wnd;
		t->max_window = w.max_window;
		t->rcv_wnd = w.rcv_wnd;
		t->rcv_wup = w.rcv_wup;
	}
	if (!getint(sk, SOL_TCP, TCP_NODELAY, &v) && v)
		t->has_nodelay = t->nodelay = 1;
	if (!getint(sk, SOL_TCP, TCP_CORK, &v) && v)
		t->has_cork = t->cork = 1;
	if (!getint(sk, SOL_TCP, TCP_KEEPIDLE, &v)) {
		t->has_keepidle = 1;
		t->keepidle = v;
	}
	if (!getint(sk, SOL_TCP, TCP_KEEPINTVL, &v)) {
		t->has_keepintvl = 1;
		t->keepintvl = v;
	}
	if (!getint(sk, SOL_TCP, TCP_KEEPCNT, &v)) {
		t->has_keepcnt = 1;
		t->keepcnt = v;
	}
	if (!getint(sk, SOL_TCP, TCP_USER_TIMEOUT, &v) && v) {
		t->has_user_timeout = 1;
		t->user_timeout = v;
	}
	return 0;
}

/* the option differs from what a new socket of the same kind (fresh, or
 * -1: none could be made) reads for it: the default of a sysctl the
 * socket follows until the program sets it */
static bool differs_from_new(int fresh, int sk, int level, int opt, uint32_t *v)
{
	uint32_t def = 0;

	if (getint(sk, level, opt, v))
		return false;
	return fresh < 0 || getint(fresh, level, opt, &def) || *v != def;
}

/* the TCP options of a socket that is not an established connection */
static int dump_topts(int sk, int fresh, InetSk *s)
{
	TcpOpts *o = xzalloc(sizeof(*o));
	uint32_t v = 0;

	if (!o)
		return -ENOMEM;
	tcp_opts__init(o);
	s->topts = o;
	if (!getint(sk, SOL_TCP, TCP_NODELAY, &v) && v)
		o->has_nodelay = o->nodelay = 1;
	if (!getint(sk, SOL_TCP, TCP_CORK, &v) && v)
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
	if (!getint(sk, SOL_TCP, TCP_USER_TIMEOUT, &v) && v) {
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

static int repair_on(int sk, const char *what)
{
	int on = TCP_REPAIR_ON;

	if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &on, sizeof(on))) {
		int ret = -errno;
		pr_perror("%s: cannot put the connection in repair mode (needs CAP_NET_ADMIN)",
			  what);
		return ret;
	}
	return 0;
}

/* Leave repair mode, with a window probe (probe) or without one where the
 * kernel knows TCP_REPAIR_OFF_NO_WP (Linux 4.19; before, the probe goes out
 * and the network lock drops it). */
static int repair_off(int sk, bool probe, const char *what)
{
	int v = probe ? TCP_REPAIR_OFF : TCP_REPAIR_OFF_NO_WP;
	int ret = setsockopt(sk, SOL_TCP, TCP_REPAIR, &v, sizeof(v));

	if (ret && !probe && errno == EINVAL) {
		v = TCP_REPAIR_OFF;
		ret = setsockopt(sk, SOL_TCP, TCP_REPAIR, &v, sizeof(v));
	}
	if (ret) {
		ret = -errno;
		pr_perror("%s: cannot leave repair mode", what);
		return ret;
	}
	return 0;
}

/* Leave repair mode with three window probes (out and in again twice).
 * The peer answers each probe with an ACK; a peer with a BSD-derived stack
 * (QEMU's user network, the BSDs) also counts each one as a duplicate ACK,
 * and three make it retransmit what the lock dropped at once instead of at
 * the end of a retransmission timeout it backed off while the service was
 * away (the clients of the QEMU cycle waited 22 s across a 10 s downtime);
 * its three ACKs do the same for this side's own unacknowledged data if it
 * has no SACK.  A Linux peer ignores probes beyond the first (it answers
 * out-of-window segments at most twice a second).  A connection that
 * cannot go back into repair mode (closed by its peer meanwhile) keeps the
 * probes sent so far. */
enum { TCP_RESUME_PROBES = 3 };

static int repair_off_probes(int sk, const char *what)
{
	int ret = repair_off(sk, true, what), on = TCP_REPAIR_ON;

	for (int i = 1; i < TCP_RESUME_PROBES && !ret; i++) {
		if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &on, sizeof(on)))
			break;
		ret = repair_off(sk, true, what);
	}
	return ret;
}

/* leaving repair mode resets the address reuse the socket had */
static int reuse_again(int sk, bool reuseaddr, const char *what)
{
	if (reuseaddr && setsockopt(sk, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int))) {
		int ret = -errno;
		pr_perror("%s: cannot set SO_REUSEADDR again", what);
		return ret;
	}
	return 0;
}

void inet_conn(const InetSk *s, struct cr_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->family = s->family;
	memcpy(c->laddr, s->src_addr.data, MIN(s->src_addr.len, sizeof(c->laddr)));
	memcpy(c->raddr, s->dst_addr.data, MIN(s->dst_addr.len, sizeof(c->raddr)));
	c->lport = s->src_port;
	c->rport = s->dst_port;
}

/* The dump holds a copy of each established connection's socket until it
 * ends; the index of the new one, or a negative errno. */
static int hold_tcp(struct cr_dump_ctx *ctx, int sk, pid_t pid, int fd, bool reuseaddr)
{
	struct dump_tcp_sk *n = xrealloc_array(ctx->tcp_sks, ctx->nr_tcp_sks + 1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	ctx->tcp_sks = n;
	n[ctx->nr_tcp_sks] =
		(struct dump_tcp_sk){ .fd = sk, .pid = pid, .tree_fd = fd, .reuseaddr = reuseaddr };
	return ctx->nr_tcp_sks++;
}

static void held_name(const struct dump_tcp_sk *h, char *buf, size_t len)
{
	snprintf(buf, len, "pid %d: fd %d", h->pid, h->tree_fd);
}

/* The peer's retransmission timer, cut short (RFC 6069).
 *
 * What the peer sent while the service was away was dropped by the lock,
 * and a peer waiting for its acknowledgement retransmits on a timer it
 * doubled at every try: after a pause of 10 s its next try can be 6 s
 * away.  The window probes do not help a Linux peer (it ignores duplicate
 * ACKs after a timeout, and answers an out-of-window segment at most twice
 * a second).  What does is an ICMP "host unreachable" (ICMPv6 "no route")
 * that quotes the connection with sequence number == the peer's snd_una:
 * each one takes one doubling off the peer's timeout, and once the
 * remaining timeout has run out the peer retransmits at once (Linux does
 * this for IPv4, and for IPv6 in recent kernels: the guests' 6.1 and 6.12
 * and this host's 6.18 all do).  The peer's snd_una is what this side last
 * acknowledged: rcv_locked (in the last segment this side sent before the
 * dump put the lock in place), rcv_wup (in the last one before the dump
 * read it: the same, unless the lock dropped one) or rcv_nxt (once one of
 * its segments got through).  Each is sent RTO_REVERT_COPIES times, enough
 * for the 15 doublings of a peer's longest timeout.  What is left: an ACK
 * that left between the first read and the lock, followed by one the lock
 * dropped, leaves the peer's snd_una between the two, where nothing is
 * quoted (1 restore in 12 in the host test, under load): that peer waits
 * for its timer as before.
 *
 * A message with any other sequence number changes nothing but the
 * socket's soft error (reported only if the connection times out later);
 * a peer socket with IP_RECVERR set would see one EHOSTUNREACH from its
 * next call, which is why the restore has no_rto_revert (kupdate
 * --no-rto-revert).  Connections whose both ends are restored together, and
 * loopback peers, get none. */
enum { RTO_REVERT_COPIES = 16 };

struct rto_revert {
	int fd4, fd6; /* raw ICMP sockets, opened on first use (-1: none yet, -2: failed) */
	unsigned peers, sent;
};

static uint16_t inet_csum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;

	for (; len > 1; p += 2, len -= 2)
		sum += (uint32_t)p[0] << 8 | p[1];
	if (len)
		sum += (uint32_t)p[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

static bool addr_loopback(int family, const uint8_t *a)
{
	static const uint8_t lo6[16] = { [15] = 1 };

	if (family == AF_INET)
		return a[0] == 127;
	return !memcmp(a, lo6, 16) || (addr_v4mapped(a) && a[12] == 127);
}

/* the quoted segment: from the peer to us, as the peer sent it */
static void quote_tcp(struct tcphdr *th, const struct cr_conn *c, uint32_t seq)
{
	memset(th, 0, sizeof(*th));
	th->th_sport = htons(c->rport);
	th->th_dport = htons(c->lport);
	th->th_seq = htonl(seq);
	th->th_off = sizeof(*th) / 4;
	th->th_flags = TH_ACK;
}

static int rto_revert_socket(int *fd, int family, const char *what)
{
	if (*fd == -1) {
		*fd = socket(family, SOCK_RAW | SOCK_CLOEXEC,
			     family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
		if (*fd < 0) {
			pr_warn("%s: cannot open a raw ICMP socket (%s): its peer resumes when its "
				"own retransmission timer runs out",
				what, strerror(errno));
			*fd = -2;
		}
	}
	return *fd;
}

static void rto_revert_report(struct rto_revert *r)
{
	if (r->peers)
		pr_info("sent %u peers %u ICMP messages that cut their retransmission timeout "
			"short (RFC 6069)",
			r->peers, r->sent);
	if (r->fd4 >= 0)
		close(r->fd4);
	if (r->fd6 >= 0)
		close(r->fd6);
}

/* both ends of this connection are restored together */
static bool conn_pair_restored(const struct cr_conn *c, const struct cr_conn *all, size_t n)
{
	int l = c->family == AF_INET ? 4 : 16;

	for (size_t i = 0; i < n; i++)
		if (all[i].family == c->family && all[i].lport == c->rport &&
		    all[i].rport == c->lport && !memcmp(all[i].laddr, c->raddr, l) &&
		    !memcmp(all[i].raddr, c->laddr, l))
			return true;
	return false;
}

/* what the peer may wait to have acknowledged, without repeats: 1 to 3 */
static int peer_una_candidates(const TcpStream *t, uint32_t seqs[3])
{
	int n = 0;

	if (t->has_rcv_wup && t->rcv_wup != t->rcv_seq)
		seqs[n++] = t->rcv_wup;
	if (t->has_rcv_locked && t->rcv_locked != t->rcv_seq &&
	    (!t->has_rcv_wup || t->rcv_locked != t->rcv_wup))
		seqs[n++] = t->rcv_locked;
	seqs[n++] = t->rcv_seq;
	return n;
}

static void rto_revert_send(struct rto_revert *r, const struct cr_conn *conn, const uint32_t *seqs,
			    int nseq, const struct cr_conn *all, size_t nall, const char *what)
{
	const struct cr_conn c = *conn;
	int sent = 0;
	bool v4 = conn_is_v4(&c);

	if (!nseq || addr_loopback(c.family, c.raddr) || conn_pair_restored(&c, all, nall))
		return;
	for (int k = 0; k < nseq; k++) {
		if (v4) {
			const uint8_t *la = c.family == AF_INET ? c.laddr : c.laddr + 12;
			const uint8_t *ra = c.family == AF_INET ? c.raddr : c.raddr + 12;
			struct {
				struct icmphdr icmp;
				struct iphdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in to = { .sin_family = AF_INET };

			_Static_assert(sizeof(m) == 48, "no padding in the ICMP message");
			if (rto_revert_socket(&r->fd4, AF_INET, what) < 0)
				return;
			memset(&m, 0, sizeof(m));
			m.icmp.type = ICMP_DEST_UNREACH;
			m.icmp.code = ICMP_HOST_UNREACH;
			m.ip.version = 4;
			m.ip.ihl = 5;
			m.ip.tot_len = htons(sizeof(m.ip) + sizeof(m.tcp));
			m.ip.ttl = 64;
			m.ip.protocol = IPPROTO_TCP;
			memcpy(&m.ip.saddr, ra, 4);
			memcpy(&m.ip.daddr, la, 4);
			m.ip.check = inet_csum(&m.ip, sizeof(m.ip));
			quote_tcp(&m.tcp, &c, seqs[k]);
			m.icmp.checksum = inet_csum(&m, sizeof(m));
			memcpy(&to.sin_addr, ra, 4);
			for (int i = 0; i < RTO_REVERT_COPIES; i++)
				sent += sendto(r->fd4, &m, sizeof(m), MSG_DONTWAIT, (void *)&to,
					       sizeof(to)) == (ssize_t)sizeof(m);
		} else {
			struct {
				struct icmp6_hdr icmp;
				struct ip6_hdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in6 to = { .sin6_family = AF_INET6 };

			_Static_assert(sizeof(m) == 68, "no padding in the ICMPv6 message");
			if (rto_revert_socket(&r->fd6, AF_INET6, what) < 0)
				return;
			memset(&m, 0, sizeof(m));
			m.icmp.icmp6_type = ICMP6_DST_UNREACH;
			m.icmp.icmp6_code = ICMP6_DST_UNREACH_NOROUTE;
			m.ip.ip6_flow = htonl(6u << 28);
			m.ip.ip6_plen = htons(sizeof(m.tcp));
			m.ip.ip6_nxt = IPPROTO_TCP;
			m.ip.ip6_hlim = 64;
			memcpy(&m.ip.ip6_src, c.raddr, 16);
			memcpy(&m.ip.ip6_dst, c.laddr, 16);
			quote_tcp(&m.tcp, &c, seqs[k]);
			/* the kernel sums ICMPv6 itself */
			memcpy(&to.sin6_addr, c.raddr, 16);
			for (int i = 0; i < RTO_REVERT_COPIES; i++)
				sent += sendto(r->fd6, &m, sizeof(m), MSG_DONTWAIT, (void *)&to,
					       sizeof(to)) == (ssize_t)sizeof(m);
		}
	}
	if (sent) {
		r->peers++;
		r->sent += sent;
	} else {
		pr_warn("%s: cannot send its peer the messages that cut its retransmission "
			"timeout short (%s): the peer resumes when that timeout runs out",
			what, strerror(errno));
	}
}

/* The same for the connections a dump held, when the tree goes on (the
 * pause was the dump's, as long as a large one takes) */
static void rto_revert_held(struct cr_dump_ctx *ctx)
{
	struct rto_revert rr = { .fd4 = -1, .fd6 = -1 };
	struct cr_conn *all = calloc(ctx->nr_tcp_sks ? ctx->nr_tcp_sks : 1, sizeof(*all));
	size_t n = 0;

	if (!all)
		return;
	for (int i = 0; i < ctx->nr_tcp_sks; i++)
		if (ctx->tcp_sks[i].read)
			all[n++] = ctx->tcp_sks[i].conn;
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		if (!h->read || h->repair)
			continue; /* not read, or still in repair mode: no probe either */
		held_name(h, what, sizeof(what));
		rto_revert_send(&rr, &h->conn, h->acks, h->nr_acks, all, n, what);
	}
	rto_revert_report(&rr);
	free(all);
}

/* The tree goes on (a failed dump, --leave-running), its connections
 * unlocked: each leaves repair mode with a window probe, so that the peer
 * resumes at once without waiting for its retransmission timer; one that
 * already left it goes in and out again for the probe.  The tree is still
 * stopped. */
void tcp_dump_resume(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		held_name(h, what, sizeof(what));
		if (!h->repair && repair_on(h->fd, what))
			continue; /* it runs on without the probe */
		h->repair = true;
		if (repair_off_probes(h->fd, what))
			continue;
		h->repair = false;
		reuse_again(h->fd, h->reuseaddr, what);
	}
	if (!ctx->opts->no_rto_revert)
		rto_revert_held(ctx);
	tcp_dump_close(ctx);
}

/* The very last step before the tree is killed: every connection back in
 * repair mode, so that neither the death of its processes nor our close
 * sends a FIN or a RST (the lock stays until the restore). */
void tcp_dump_repair(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		held_name(h, what, sizeof(what));
		if (!h->repair && !repair_on(h->fd, what))
			h->repair = true;
	}
}

void tcp_dump_close(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++)
		close(ctx->tcp_sks[i].fd);
	ctx->nr_tcp_sks = 0;
}

int inet_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
	      struct cr_file *f)
{
	InetSk *s = xzalloc(sizeof(*s));
	char what[160], lep[64], rep[64];
	int sk = -1, fresh = -1, ret;
	uint32_t v = 0;

	if (!s)
		return -ENOMEM;
	inet_sk__init(s);
	f->isk = s;
	s->family = d->family;
	s->type = d->type;
	s->protocol = d->protocol;
	s->state = d->state;
	s->ino = d->ino;
	s->has_src_addr = s->has_src_port = s->has_dst_addr = s->has_dst_port = 1;
	s->src_port = d->src_port;
	s->dst_port = d->dst_port;
	if (img_bytes(&s->src_addr, d->src, alen(d->family)) ||
	    img_bytes(&s->dst_addr, d->dst, alen(d->family)))
		return -ENOMEM;
	inet_endpoint(d->family, d->src, d->src_port, lep, sizeof(lep));
	inet_endpoint(d->family, d->dst, d->dst_port, rep, sizeof(rep));
	snprintf(what, sizeof(what), "pid %d: fd %d (%s %s -> %s)", p->pid, fd,
		 d->protocol == IPPROTO_TCP ? "TCP" : "UDP", lep, rep);

	if (d->protocol == IPPROTO_TCP && !stream_state(d->state) && d->state != TCP_LISTEN &&
	    d->state != TCP_CLOSE) {
		pr_err("%s: a connection in state %s (still being opened) cannot be dumped; "
		       "retry once it is established",
		       what, state_name(d->state));
		return -EOPNOTSUPP;
	}
	/* a connection shut for writing has sent its FIN, and one that has
	 * received its peer's is shut for reading: a shutdown for writing in
	 * any other state would be a FIN the restore cannot place */
	if (d->protocol == IPPROTO_TCP && stream_state(d->state) && (d->shutdown & SEND_SHUTDOWN) &&
	    !fin_sent_state(d->state)) {
		pr_err("%s: a connection in state %s shut for writing (shutdown %#x) cannot be "
		       "dumped",
		       what, state_name(d->state), d->shutdown);
		return -EOPNOTSUPP;
	}
	if (d->protocol == IPPROTO_TCP && d->state == TCP_LISTEN && d->rqlen) {
		pr_err("%s: %u connections wait to be accepted on this listener; they cannot be "
		       "dumped (retry once they are accepted)",
		       what, d->rqlen);
		return -EAGAIN;
	}

	sk = sk_dup(p, fd);
	if (sk < 0)
		return sk;
	if (d->protocol == IPPROTO_UDP) {
		ret = udp_queue_check(sk, d, &ctx->sk, what);
		if (ret)
			goto out;
	}
	if (d->protocol == IPPROTO_TCP && d->state == TCP_CLOSE) {
		uint32_t segs = 0;

		if (sk_tcp_segs(sk, &segs) >= 0 && segs) {
			pr_err("%s: a TCP socket whose connection failed or ended (state CLOSE, "
			       "%u segments sent and received) cannot be dumped: its pending error "
			       "and shutdown cannot be read back",
			       what, segs);
			ret = -EOPNOTSUPP;
			goto out;
		}
	}
	s->opts = xzalloc(sizeof(*s->opts));
	ret = s->opts ? sk_opts_dump(sk, s->opts, d->family) : -ENOMEM;
	if (ret)
		goto out;
	fresh = socket(d->family, d->type | SOCK_CLOEXEC, d->protocol);
	s->has_bound = 1;
	/* an address without a port: IP_BIND_ADDRESS_NO_PORT */
	s->bound = d->src_port != 0 || !addr_any(d->family, d->src);
	if (d->family == AF_INET6 && !getint(sk, IPPROTO_IPV6, IPV6_V6ONLY, &v)) {
		s->has_v6only = 1;
		s->v6only = !!v;
	}
	/* IP_TOS also for IPv6: the IPv4 packets of a dual-stack socket */
	if (!getint(sk, IPPROTO_IP, IP_TOS, &v) && v) {
		s->has_tos = 1;
		s->tos = v;
	}
	if (d->family == AF_INET6 && !getint(sk, IPPROTO_IPV6, IPV6_TCLASS, &v) && v) {
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
	if (!getint(sk, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &v) && v)
		s->has_bind_no_port = s->bind_no_port = 1;
	{
		char dev[IFNAMSIZ + 1] = "";
		socklen_t l = IFNAMSIZ;

		if (!getsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, dev, &l) && dev[0]) {
			s->bind_dev = strdup(dev);
			if (!s->bind_dev) {
				ret = -ENOMEM;
				goto out;
			}
		}
	}
	if (!getint(sk, d->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		    d->family == AF_INET ? IP_FREEBIND : IPV6_FREEBIND, &v) &&
	    v)
		s->has_freebind = s->freebind = 1;
	if (d->protocol == IPPROTO_TCP && !stream_state(d->state)) {
		ret = dump_topts(sk, fresh, s);
		if (ret)
			goto out;
	}
	if (d->shutdown) {
		s->has_shutdown = 1;
		s->shutdown = d->shutdown;
	}
	if (d->protocol == IPPROTO_UDP) {
		int32_t off = -1;
		socklen_t ol = sizeof(off);

		/* the program's own peek offset (udp_queue_dump moves it and
		 * sets it back) */
		if (!getsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &off, &ol) && off >= 0) {
			s->opts->has_peek_off = 1;
			s->opts->peek_off = off;
		}
		udp_recv_opts_dump(sk, s);
		ret = mcast_dump(sk, s, what);
		if (ret)
			goto out;
		/* a check reads nothing (a peek would hide the zero-length
		 * datagrams from the dump that follows, udp.c) */
		if (!ctx->check_only) {
			size_t zeros = 0;

			ret = udp_queue_dump(sk, s, &zeros, what);
			/* (also when the dump of its queue failed past them) */
			if (zeros && !udp_hold(ctx, sk, p->pid, fd, s))
				sk = -1; /* held until the dump ends */
			if (ret)
				goto out;
		}
	}
	if (d->protocol == IPPROTO_TCP && d->state == TCP_LISTEN) {
		s->has_backlog = 1;
		s->backlog = d->wqlen;
	}
	if (d->protocol == IPPROTO_TCP && stream_state(d->state)) {
		bool reuse = s->opts->has_reuseaddr && s->opts->reuseaddr;
		int64_t rcv_wup_at_lock = -1, t_read;
		struct cr_conn c;
		int h, r;

		if (ctx->check_only)
			goto out; /* checkpointable; nothing to lock or read */
		/* The last acknowledgement this side sent before the lock (an
		 * ACK it sends later is dropped, and moves rcv_wup all the same):
		 * the peer's snd_una, which the restore quotes to the peer
		 * (rto_revert_send).  Reading it takes repair mode, left again
		 * without a probe.  The lock's table is set up first: between
		 * this read and the lock, only the element's transaction. */
		ret = dump_lock_prepare(ctx);
		if (ret)
			goto out;
		t_read = now_ns(CLOCK_MONOTONIC);
		if (!repair_on(sk, what)) {
			struct tcp_repair_window w;
			socklen_t l = sizeof(w);

			if (!getsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, &l))
				rcv_wup_at_lock = (int64_t)w.rcv_wup;
			if (repair_off(sk, false, what) || reuse_again(sk, reuse, what)) {
				ret = -EIO;
				goto out;
			}
		}
		/* lock first, so that nothing moves while it is read */
		inet_conn(s, &c);
		ret = dump_lock(ctx, &c);
		if (ret)
			goto out;
		pr_debug("%s: locked %.2f ms after its last acknowledgement was read", what,
			 (now_ns(CLOCK_MONOTONIC) - t_read) / 1e6);
		h = hold_tcp(ctx, sk, p->pid, fd, reuse);
		if (h < 0) {
			ret = h;
			goto out;
		}
		sk = -1; /* held until the dump ends */
		ret = repair_on(ctx->tcp_sks[h].fd, what);
		if (ret)
			goto out;
		ctx->tcp_sks[h].repair = true;
		ret = dump_stream(ctx->tcp_sks[h].fd, s, rcv_wup_at_lock, what);
		if (!ret) {
			ctx->tcp_sks[h].read = true;
			ctx->tcp_sks[h].conn = c;
			ctx->tcp_sks[h].nr_acks = peer_una_candidates(s->tcp, ctx->tcp_sks[h].acks);
		}
		/* read: an ordinary socket again at once (its packets stay locked),
		 * without a window probe; back in repair mode just before the kill */
		r = repair_off(ctx->tcp_sks[h].fd, false, what);
		if (!r)
			ctx->tcp_sks[h].repair = false;
		if (!r)
			r = reuse_again(ctx->tcp_sks[h].fd, reuse, what);
		if (!ret)
			ret = r;
	}
out:
	if (sk >= 0)
		close(sk);
	if (fresh >= 0)
		close(fresh);
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
	    (s->protocol == IPPROTO_TCP && stream_state(s->state) &&
	     (!s->tcp || s->tcp->inq.len > (64U << 20) || s->tcp->outq.len > (64U << 20) ||
	      s->tcp->unsent > s->tcp->outq.len)) ||
	    (s->protocol == IPPROTO_TCP && !stream_state(s->state) && s->state != TCP_LISTEN &&
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

static int setint(int sk, int level, int opt, int val, const char *name, const char *what)
{
	if (setsockopt(sk, level, opt, &val, sizeof(val))) {
		int ret = -errno;
		pr_perror("%s: cannot set %s", what, name);
		return ret;
	}
	return 0;
}

static int fill_tcp_queue(int sk, int queue, const uint8_t *data, size_t len, const char *what)
{
	if (setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, queue, "TCP_REPAIR_QUEUE", what))
		return -EINVAL;
	while (len) {
		ssize_t n = send(sk, data, len, MSG_NOSIGNAL);

		if (n <= 0) {
			int ret = n < 0 ? -errno : -EIO;
			pr_err("%s: cannot put %zu bytes back into its %s queue: %s", what, len,
			       queue == TCP_SEND_QUEUE ? "send" : "receive", strerror(-ret));
			return ret;
		}
		data += n;
		len -= n;
	}
	return 0;
}

/* A closing connection is rebuilt established, without its FINs: the
 * sequence numbers after its last byte of data each way.  inet_release
 * then sends its own FIN again (shutdown) and delivers the peer's. */
static uint32_t snd_data_end(const InetSk *s)
{
	return s->tcp->snd_seq - fin_sent_state(s->state);
}

static uint32_t rcv_data_end(const InetSk *s)
{
	return s->tcp->rcv_seq - fin_received_state(s->state);
}

static int restore_stream(int sk, const InetSk *s, const char *what)
{
	const TcpStream *t = s->tcp;
	struct sockaddr_storage ss;
	socklen_t len;
	size_t sent_len = t->outq.len - t->unsent;
	struct tcp_repair_opt opts[4];
	uint32_t rcv_end = rcv_data_end(s);
	int n = 0;

	if (setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "TCP_REPAIR_QUEUE", what) ||
	    setint(sk, SOL_TCP, TCP_QUEUE_SEQ, snd_data_end(s) - t->unsent - sent_len,
		   "send sequence", what) ||
	    setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "TCP_REPAIR_QUEUE", what) ||
	    setint(sk, SOL_TCP, TCP_QUEUE_SEQ, rcv_end - t->inq.len, "receive sequence", what))
		return -EINVAL;
	len = bind_addr_of(s, &ss);
	if (bind(sk, (struct sockaddr *)&ss, len)) {
		int ret = -errno;
		pr_perror("%s: cannot bind", what);
		return ret;
	}
	len = sockaddr_of(s, true, &ss);
	if (connect(sk, (struct sockaddr *)&ss, len)) {
		int ret = -errno;
		pr_perror("%s: cannot connect in repair mode", what);
		return ret;
	}
	opts[n].opt_code = TCPOPT_MSS;
	opts[n++].opt_val = t->mss;
	/* A connection without window scaling gets scales of 0: without them
	 * it would keep the receive scale its repair-mode connect chose, and
	 * shift every window it offers by it (a peer that does not scale,
	 * such as QEMU's user network, saw half the window) */
	opts[n].opt_code = TCPOPT_WINDOW;
	opts[n++].opt_val = t->has_snd_wscale ? t->snd_wscale | (t->rcv_wscale << 16) : 0;
	if (t->sack) {
		opts[n].opt_code = TCPOPT_SACK_PERM;
		opts[n++].opt_val = 0;
	}
	if (t->tstamp) {
		opts[n].opt_code = TCPOPT_TIMESTAMP;
		opts[n++].opt_val = 0;
	}
	if (setsockopt(sk, SOL_TCP, TCP_REPAIR_OPTIONS, opts, n * sizeof(opts[0]))) {
		int ret = -errno;
		pr_perror("%s: cannot set its TCP options", what);
		return ret;
	}
	if (t->has_timestamp &&
	    setint(sk, SOL_TCP, TCP_TIMESTAMP, t->timestamp, "TCP_TIMESTAMP", what))
		return -EINVAL;
	if (fill_tcp_queue(sk, TCP_SEND_QUEUE, t->outq.data, sent_len, what) ||
	    fill_tcp_queue(sk, TCP_RECV_QUEUE, t->inq.data, t->inq.len, what))
		return -EIO;
	if (t->has_snd_wl1) {
		struct tcp_repair_window w = { t->snd_wl1, t->snd_wnd, t->max_window, t->rcv_wnd,
					       t->rcv_wup };

		/* the window the peer's FIN was acknowledged with ends where it
		 * ended, from the sequence number before the FIN (the kernel
		 * takes no rcv_wup past rcv_nxt) */
		if ((int32_t)(w.rcv_wup - rcv_end) > 0) {
			w.rcv_wnd += w.rcv_wup - rcv_end;
			w.rcv_wup = rcv_end;
		}

		if (setsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, sizeof(w))) {
			int ret = -errno;
			pr_perror("%s: cannot set its window", what);
			return ret;
		}
	}
	if ((t->nodelay && setint(sk, SOL_TCP, TCP_NODELAY, 1, "TCP_NODELAY", what)) ||
	    (t->cork && setint(sk, SOL_TCP, TCP_CORK, 1, "TCP_CORK", what)) ||
	    (t->has_keepidle &&
	     setint(sk, SOL_TCP, TCP_KEEPIDLE, t->keepidle, "TCP_KEEPIDLE", what)) ||
	    (t->has_keepintvl &&
	     setint(sk, SOL_TCP, TCP_KEEPINTVL, t->keepintvl, "TCP_KEEPINTVL", what)) ||
	    (t->has_keepcnt && setint(sk, SOL_TCP, TCP_KEEPCNT, t->keepcnt, "TCP_KEEPCNT", what)) ||
	    (t->has_user_timeout &&
	     setint(sk, SOL_TCP, TCP_USER_TIMEOUT, t->user_timeout, "TCP_USER_TIMEOUT", what)))
		return -EINVAL;
	return 0;
}

static int restore_topts(int sk, const TcpOpts *o, const char *what)
{
	if ((o->nodelay && setint(sk, SOL_TCP, TCP_NODELAY, 1, "TCP_NODELAY", what)) ||
	    (o->cork && setint(sk, SOL_TCP, TCP_CORK, 1, "TCP_CORK", what)) ||
	    (o->has_keepidle &&
	     setint(sk, SOL_TCP, TCP_KEEPIDLE, o->keepidle, "TCP_KEEPIDLE", what)) ||
	    (o->has_keepintvl &&
	     setint(sk, SOL_TCP, TCP_KEEPINTVL, o->keepintvl, "TCP_KEEPINTVL", what)) ||
	    (o->has_keepcnt && setint(sk, SOL_TCP, TCP_KEEPCNT, o->keepcnt, "TCP_KEEPCNT", what)) ||
	    (o->has_user_timeout &&
	     setint(sk, SOL_TCP, TCP_USER_TIMEOUT, o->user_timeout, "TCP_USER_TIMEOUT", what)) ||
	    (o->has_maxseg && setint(sk, SOL_TCP, TCP_MAXSEG, o->maxseg, "TCP_MAXSEG", what)))
		return -EINVAL;
	return 0;
}

int inet_create(const InetSk *s, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int sk, ret = 0;

	sk = socket(s->family,
		    (s->protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC,
		    s->protocol);
	if (sk < 0) {
		ret = -errno;
		pr_perror("%s: cannot create the socket", what);
		return ret;
	}
	/* (images before the field was always written have it only when set) */
	if (s->has_v6only)
		ret |= setint(sk, IPPROTO_IPV6, IPV6_V6ONLY, s->v6only, "IPV6_V6ONLY", what);
	if (s->freebind)
		ret |= setint(sk, s->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
			      s->family == AF_INET ? IP_FREEBIND : IPV6_FREEBIND, 1, "FREEBIND",
			      what);
	if (s->bind_dev &&
	    setsockopt(sk, SOL_SOCKET, SO_BINDTODEVICE, s->bind_dev, strlen(s->bind_dev))) {
		ret = -errno;
		pr_perror("%s: cannot bind it to device %s (SO_BINDTODEVICE)", what, s->bind_dev);
		goto fail;
	}
	if (s->bind_no_port)
		ret |= setint(sk, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1, "IP_BIND_ADDRESS_NO_PORT",
			      what);
	/* IP_TOS sets the priority too: SO_PRIORITY comes after (sk_opts_restore) */
	if (s->has_tos)
		ret |= setint(sk, IPPROTO_IP, IP_TOS, s->tos, "IP_TOS", what);
	if (s->has_tclass)
		ret |= setint(sk, IPPROTO_IPV6, IPV6_TCLASS, s->tclass, "IPV6_TCLASS", what);
	if (s->has_ttl)
		ret |= setint(sk, IPPROTO_IP, IP_TTL, s->ttl, "IP_TTL", what);
	if (s->has_hops)
		ret |= setint(sk, IPPROTO_IPV6, IPV6_UNICAST_HOPS, s->hops, "IPV6_UNICAST_HOPS",
			      what);
	if (!ret && s->topts)
		ret = restore_topts(sk, s->topts, what);
	if (!ret)
		ret = sk_opts_restore(sk, s->opts, what);
	if (ret)
		goto fail;

	if (s->protocol == IPPROTO_TCP && stream_state(s->state)) {
		if (setint(sk, SOL_TCP, TCP_REPAIR, 1, "TCP_REPAIR (needs CAP_NET_ADMIN)", what)) {
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
			ret = -errno;
			pr_perror("%s: cannot bind", what);
			goto fail;
		}
	}
	if (s->protocol == IPPROTO_TCP && s->state == TCP_LISTEN &&
	    listen(sk, s->has_backlog ? (int)s->backlog : 128)) {
		ret = -errno;
		pr_perror("%s: cannot listen", what);
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
			ret = -errno;
			pr_perror("%s: cannot connect", what);
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
	       stream_state(e->isk->state);
}

/* The part of the send queue never sent goes out the ordinary way.  The
 * part put back in repair mode was cut into segments of one MSS each, which
 * take more of the send buffer than the queue took when it was dumped: a
 * full buffer has no room left for the rest (EAGAIN), and waiting for the
 * peer's acknowledgements could take as long as it keeps its window shut.
 * The buffer is made large enough for as long as the rest is queued, and
 * then given back its size and lock (further sends wait until the queue
 * drains). */
static int send_unsent(int sk, const uint8_t *p, size_t left, int buf_lock, const char *what)
{
	int size = 0;
	socklen_t sl = sizeof(size);
	bool raised = false;
	int ret = 0;

	while (left) {
		ssize_t n = send(sk, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN && !raised &&
		    !getsockopt(sk, SOL_SOCKET, SO_SNDBUF, &size, &sl)) {
			/* the kernel doubles what it is given */
			long want = (long)size + 2 * (long)left + 65536;

			if (want > INT_MAX)
				want = INT_MAX;
			if (!setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ (int)want },
					sizeof(int))) {
				raised = true;
				continue;
			}
		}
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			pr_err("%s: cannot send the %zu bytes it had not sent yet: %s", what, left,
			       strerror(-ret));
			break;
		}
		p += n;
		left -= n;
	}
	if (raised) {
		setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ size / 2 }, sizeof(int));
		/* which locked the size: the program's lock as it was (a buffer
		 * the kernel tuned goes on being tuned) */
		if (buf_lock >= 0)
			setsockopt(sk, SOL_SOCKET, SO_BUF_LOCK, &buf_lock, sizeof(buf_lock));
	}
	return ret ? -EIO : 0;
}

static int tcp_state_of(int sk)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	return getsockopt(sk, SOL_TCP, TCP_INFO, &ti, &l) ? -errno : ti.tcpi_state;
}

/* The peer's FIN, delivered again.
 *
 * Repair mode sets the receive sequence and queue but has no FIN to put
 * after them: the connection is rebuilt up to the sequence number before
 * the peer's FIN, and once it is an ordinary socket again, a FIN|ACK
 * segment from the peer's address and port, at that sequence number, is
 * put to it through a raw socket (IP_HDRINCL, in our network namespace:
 * the packet loops back to the local address).  The connection handles it
 * as it handled the peer's: it queues the FIN after its data (the program
 * reads them, then EOF), moves to CLOSE_WAIT (or CLOSING) and acknowledges
 * it, which the peer, that had it acknowledged already, takes for a
 * duplicate.  The peer does not send it again, and needs not.
 *
 * The segment acknowledges snd_una exactly: nothing new (one acknowledging
 * what was never received would lose it), and not older (a restored
 * socket has acknowledged no bytes yet, and drops any ACK before snd_una as
 * a blind injection).  snd_una is read just before (write_seq - SIOCOUTQ);
 * an acknowledgement of the peer's arriving in between moves it, the
 * segment is dropped, and it is sent again (at most FIN_TRIES times).  Its
 * window is the peer's, as dumped (it updates the socket's).  It has no
 * timestamp option (PAWS checks only segments that have one).  The lock
 * drops what comes from the peer: it is lifted first (tcp_finish_restore),
 * or, where the caller keeps it, lifted for this connection meanwhile. */
enum { FIN_TRIES = 4, FIN_WAIT_MS = 50 };

static uint16_t tcp_csum(const void *pseudo, size_t plen, const struct tcphdr *th)
{
	uint8_t buf[40 + sizeof(*th)];

	memcpy(buf, pseudo, plen);
	memcpy(buf + plen, th, sizeof(*th));
	return inet_csum(buf, plen + sizeof(*th));
}

/* still without the peer's FIN */
static bool fin_awaited(int st)
{
	return st == TCP_ESTABLISHED || st == TCP_FIN_WAIT1 || st == TCP_FIN_WAIT2;
}

static int deliver_fin(int sk, const InetSk *s, uint32_t write_seq, bool locked, const char *what)
{
	const TcpStream *t = s->tcp;
	struct cr_conn c;
	bool v4;
	int raw, ret = -ETIMEDOUT, st = 0;
	uint32_t wnd =
		t->has_snd_wnd ? t->snd_wnd >> (t->has_snd_wscale ? t->snd_wscale : 0) : 65535;

	inet_conn(s, &c);
	v4 = conn_is_v4(&c);
	raw = socket(v4 ? AF_INET : AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP);
	if (raw < 0 ||
	    setsockopt(raw, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_HDRINCL : 36 /* IPV6_HDRINCL */,
		       &(int){ 1 }, sizeof(int))) {
		ret = -errno;
		pr_perror("%s: cannot open a raw TCP socket to deliver its peer's FIN", what);
		if (raw >= 0)
			close(raw);
		return ret;
	}
	if (locked)
		netlock_del(&c, 1);
	for (int i = 0; i < FIN_TRIES; i++) {
		struct tcphdr th;
		int outq = 0;
		ssize_t n;

		st = tcp_state_of(sk);
		if (st < 0 || !fin_awaited(st)) {
			ret = 0; /* it has it (the peer sent it again meanwhile), or is gone */
			break;
		}
		if (ioctl(sk, SIOCOUTQ, &outq)) {
			ret = -errno;
			pr_perror("%s: cannot read its send queue's length", what);
			break;
		}
		memset(&th, 0, sizeof(th));
		th.th_sport = htons(c.rport);
		th.th_dport = htons(c.lport);
		th.th_seq = htonl(rcv_data_end(s));
		th.th_ack = htonl(write_seq - (uint32_t)outq);
		th.th_off = sizeof(th) / 4;
		th.th_flags = TH_FIN | TH_ACK;
		th.th_win = htons(wnd > 65535 ? 65535 : wnd);
		if (v4) {
			struct {
				struct iphdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in to = { .sin_family = AF_INET };
			uint8_t ph[12] = { 0 };
			const uint8_t *la = c.family == AF_INET ? c.laddr : c.laddr + 12;
			const uint8_t *ra = c.family == AF_INET ? c.raddr : c.raddr + 12;

			memcpy(ph, ra, 4);
			memcpy(ph + 4, la, 4);
			ph[9] = IPPROTO_TCP;
			ph[11] = sizeof(th);
			th.th_sum = tcp_csum(ph, sizeof(ph), &th);
			memset(&m.ip, 0, sizeof(m.ip));
			m.ip.version = 4;
			m.ip.ihl = 5;
			m.ip.tot_len = htons(sizeof(m));
			m.ip.ttl = 64;
			m.ip.protocol = IPPROTO_TCP;
			memcpy(&m.ip.saddr, ra, 4);
			memcpy(&m.ip.daddr, la, 4);
			m.tcp = th;
			memcpy(&to.sin_addr, la, 4);
			n = sendto(raw, &m, sizeof(m), 0, (void *)&to, sizeof(to));
		} else {
			struct {
				struct ip6_hdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in6 to = { .sin6_family = AF_INET6 };
			uint8_t ph[40] = { 0 };

			memcpy(ph, c.raddr, 16);
			memcpy(ph + 16, c.laddr, 16);
			ph[35] = sizeof(th);
			ph[39] = IPPROTO_TCP;
			th.th_sum = tcp_csum(ph, sizeof(ph), &th);
			memset(&m.ip, 0, sizeof(m.ip));
			m.ip.ip6_flow = htonl(6u << 28);
			m.ip.ip6_plen = htons(sizeof(th));
			m.ip.ip6_nxt = IPPROTO_TCP;
			m.ip.ip6_hlim = 64;
			memcpy(&m.ip.ip6_src, c.raddr, 16);
			memcpy(&m.ip.ip6_dst, c.laddr, 16);
			m.tcp = th;
			memcpy(&to.sin6_addr, c.laddr, 16);
			n = sendto(raw, &m, sizeof(m), 0, (void *)&to, sizeof(to));
		}
		if (n < 0) {
			ret = -errno;
			pr_perror("%s: cannot send its peer's FIN to it", what);
			break;
		}
		/* it loops back at once, mostly before sendto returns */
		for (int ms = 0; ms < FIN_WAIT_MS; ms++) {
			st = tcp_state_of(sk);
			if (st < 0 || !fin_awaited(st))
				break;
			usleep(1000);
		}
	}
	if (locked)
		netlock_add(&c, 1);
	close(raw);
	if (ret == -ETIMEDOUT)
		pr_err("%s: its peer's FIN, sent to it %d times, did not reach it (state %s)", what,
		       FIN_TRIES, state_name(st));
	else if (!ret)
		pr_debug("%s: its peer's FIN delivered: state %s", what, state_name(st));
	return ret;
}

static int shut(int sk, int how, const char *what)
{
	if (shutdown(sk, how)) {
		int ret = -errno;
		pr_perror("%s: cannot shut it for %s again", what,
			  how == SHUT_WR ? "writing" : "reading");
		return ret;
	}
	return 0;
}

/* After the lock is lifted: leave repair mode (window probes go out),
 * send what had never been sent, and close it as far as it was closed:
 * its own FIN sent again after its data (a shutdown: the FIN goes out at
 * the sequence number it had, a duplicate for a peer that had it, or
 * once the window lets it), the peer's delivered (deliver_fin), in the
 * order that leaves it in its state (CLOSING: its FIN first; LAST_ACK:
 * the peer's), and a shutdown for reading that no FIN made. */
int inet_release(int sk, const InetSk *s, bool locked, const char *what)
{
	const TcpStream *t = s->tcp;
	bool fin_out = fin_sent_state(s->state), fin_in = fin_received_state(s->state);
	int ret = repair_off_probes(sk, what);

	if (!ret)
		ret = reuse_again(sk, s->opts && s->opts->reuseaddr, what);
	if (ret)
		return ret;
	if (t && t->unsent)
		ret = send_unsent(sk, t->outq.data + t->outq.len - t->unsent, t->unsent,
				  s->opts && s->opts->has_buf_lock ? (int)s->opts->buf_lock : -1,
				  what);
	if (!ret && fin_out && s->state != TCP_LAST_ACK)
		ret = shut(sk, SHUT_WR, what);
	if (!ret && fin_in)
		ret = deliver_fin(sk, s, t->snd_seq - (s->state == TCP_LAST_ACK), locked, what);
	if (!ret && s->state == TCP_LAST_ACK)
		ret = shut(sk, SHUT_WR, what);
	if (!ret && !fin_in && s->has_shutdown && (s->shutdown & RCV_SHUTDOWN))
		ret = shut(sk, SHUT_RD, what);
	return ret;
}

/* TCP connections: lift the lock, then leave repair mode (which sends a
 * window probe, so the peer learns at once that its segments get through
 * again), send what had never been sent, and cut the peer's retransmission
 * timeout short (above).  The tree is still stopped. */
int tcp_finish_restore(struct rfiles *files, struct rproc *procs, size_t nr, bool unlock,
		       bool rto_revert)
{
	struct rto_revert rr = { .fd4 = -1, .fd6 = -1 };
	struct cr_conn *conns = NULL;
	size_t n = 0;
	int ret = 0;
	bool *done = calloc(files->nr_files ? files->nr_files : 1, sizeof(bool));

	if (!done)
		return -ENOMEM;
	for (size_t f = 0; f < files->nr_files; f++) {
		struct cr_conn *nc;

		if (!inet_is_repaired(files->files[f]))
			continue;
		nc = xrealloc_array(conns, n + 1, sizeof(*nc));
		if (!nc) {
			free(conns);
			free(done);
			return -ENOMEM;
		}
		conns = nc;
		inet_conn(files->files[f]->isk, &conns[n++]);
	}
	if (n && unlock)
		netlock_del(conns, n);
	for (size_t i = 0; i < nr && !ret; i++) {
		struct rproc *rp = &procs[i];
		int pidfd = -1;

		for (size_t k = 0; k < rp->nr_fds && !ret; k++) {
			const FileEntry *fe = NULL;
			size_t fi;
			char what[96];
			int sk;

			for (fi = 0; fi < files->nr_files; fi++)
				if (files->files[fi]->id == rp->fds[k]->file_id) {
					fe = files->files[fi];
					break;
				}
			if (!fe || !inet_is_repaired(fe) || done[fi])
				continue;
			done[fi] = true;
			if (pidfd < 0)
				pidfd = syscall(SYS_pidfd_open, rp->pid, 0);
			sk = pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, rp->fds[k]->fd, 0);
			if (sk < 0) {
				ret = -errno;
				pr_perror("pid %d: fd %d: cannot reach the restored connection",
					  rp->pid, rp->fds[k]->fd);
				break;
			}
			snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[k]->fd);
			ret = inet_release(sk, fe->isk, !unlock, what);
			close(sk);
			if (!ret && rto_revert && unlock && fe->isk->tcp) {
				struct cr_conn c;
				uint32_t seqs[3];

				inet_conn(fe->isk, &c);
				rto_revert_send(&rr, &c, seqs,
						peer_una_candidates(fe->isk->tcp, seqs), conns, n,
						what);
			}
		}
		if (pidfd >= 0)
			close(pidfd);
	}
	rto_revert_report(&rr);
	free(conns);
	free(done);
	return ret;
}

int cr_images_connections(const char *imgdir, struct cr_conn **out, size_t *nr)
{
	_cleanup_close_ int dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct rfiles f;
	struct cr_conn *v = NULL;
	size_t n = 0;
	int ret;

	*out = NULL;
	*nr = 0;
	if (dirfd < 0) {
		ret = -errno;
		pr_perror("cannot open image directory %s", imgdir);
		return ret;
	}
	ret = files_load(dirfd, &f);
	for (size_t i = 0; !ret && i < f.nr_files; i++) {
		struct cr_conn *nv;

		if (!inet_is_repaired(f.files[i]))
			continue;
		nv = xrealloc_array(v, n + 1, sizeof(*nv));
		if (!nv) {
			ret = -ENOMEM;
			break;
		}
		v = nv;
		inet_conn(f.files[i]->isk, &v[n++]);
	}
	files_free(&f);
	if (ret) {
		free(v);
		return ret;
	}
	*out = v;
	*nr = n;
	return 0;
}

int cr_net_unlock_all(void)
{
	return netlock_clear();
}

void cr_net_lock_keep_table(void)
{
	netlock_keep_table();
}

int cr_net_lock(const struct cr_conn *c, size_t nr, bool lock)
{
	return lock ? netlock_add(c, nr) : netlock_del(c, nr);
}
