#ifndef CR_TCP_INT_H
#define CR_TCP_INT_H

/* What the files of TCP (tcp.c: the socket, tcp-dump.c: the connections a
 * dump holds, tcp-release.c: a restored connection let go) share. */

#include <stdint.h>

#include "images/inet.pb-c.h"
#include "tcp-repair.h"

struct cr_dump_ctx;
struct cr_proc;

/* the kernel's sk_shutdown bits, as sock_diag reports them */
#define RCV_SHUTDOWN  1
#define SEND_SHUTDOWN 2

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

const char *tcp_state_name(int s);

/* a connection's state, as the image records it (s->tcp), and back */
int tcp_stream_set(InetSk *s, struct tcp_repair_data *d, int64_t rcv_locked);
void tcp_stream_get(const InetSk *s, struct tcp_repair_data *d);

/* tcp-dump.c: the established connection s of fd of p (sk: kupdate's
 * copy, held until the dump ends, and then -1), locked and read */
int tcp_dump_conn(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, int *sk, InetSk *s,
		  const char *what);

#endif
