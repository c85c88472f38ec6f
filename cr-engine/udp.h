#ifndef CR_UDP_H
#define CR_UDP_H

#include <stdbool.h>

#include "images/inet.pb-c.h"

struct sk_table;
struct sk_diag;

/* What makes the datagrams queued on UDP socket sk impossible to put back
 * exactly just now (-EAGAIN, said in a message naming what): looked at
 * without reading the queue, so that a check leaves it untouched.  0 when
 * the queue is empty or can be dumped. */
int udp_queue_check(int sk, const struct sk_diag *d, const struct sk_table *t, const char *what);
/* The datagrams queued, peeked into s->queue (the queue stays as it was). */
int udp_queue_dump(int sk, InetSk *s, const char *what);
void udp_queue_free(InetSk *s);
/* the receive options (IP_PKTINFO, IP_RECVTTL...: what recvmsg tells) */
void udp_recv_opts_dump(int sk, InetSk *s);
int udp_recv_opts_restore(int sk, const InetSk *s, const char *what);
int udp_queue_validate(const InetSk *s);
/* After its bind, before its connect: each datagram sent to the new socket
 * from its source, in order, each checked to have arrived. */
int udp_queue_restore(int sk, const InetSk *s, const char *what);

#endif
