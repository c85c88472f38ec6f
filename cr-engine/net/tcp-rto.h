#ifndef CR_TCP_RTO_H
#define CR_TCP_RTO_H

/* The peer's retransmission timeout, cut short after a pause (RFC 6069):
 * ICMP messages quoting the connection at what the peer may wait to have
 * acknowledged (tcp-rto.c). */

#include <stddef.h>
#include <stdint.h>

#include "cr.h" /* struct cr_conn */
#include "images/inet.pb-c.h"

/* the messages of one dump's end or one restore: raw ICMP sockets opened
 * on first use, and what was sent */
struct rto_revert {
	int fd4, fd6; /* -1: none yet, -2: failed */
	unsigned peers, sent;
};
#define RTO_REVERT_INIT              \
	{                            \
		.fd4 = -1, .fd6 = -1 \
	}

/* what the peer may wait to have acknowledged, without repeats: 1 to 3 */
int peer_una_candidates(const TcpStream *t, uint32_t seqs[3]);
/* the messages for conn at each of seqs[nseq]; none for a loopback peer
 * or a connection whose other end is among all[nall] */
void rto_revert_send(struct rto_revert *r, const struct cr_conn *conn, const uint32_t *seqs,
		     int nseq, const struct cr_conn *all, size_t nall, const char *what);
/* what was sent, logged; the sockets closed */
void rto_revert_report(struct rto_revert *r);

/* the Internet checksum (RFC 1071), in network order */
uint16_t inet_csum(const void *data, size_t len);

#endif
