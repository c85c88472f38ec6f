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
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "netlock.h"
#include "tcp-rto.h"

enum { RTO_REVERT_COPIES = 16 };

uint16_t inet_csum(const void *data, size_t len)
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

void rto_revert_report(struct rto_revert *r)
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
int peer_una_candidates(const TcpStream *t, uint32_t seqs[3])
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

void rto_revert_send(struct rto_revert *r, const struct cr_conn *conn, const uint32_t *seqs,
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
