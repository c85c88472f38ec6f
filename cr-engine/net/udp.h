#ifndef CR_UDP_H
#define CR_UDP_H

#include <stdbool.h>
#include <sys/types.h>

#include "images/inet.pb-c.h"

struct cr_dump_ctx;
struct sk_table;
struct sk_diag;

/* What makes the datagrams queued on UDP socket sk impossible to put back
 * exactly just now (-EAGAIN, said in a message naming what): looked at
 * without reading the queue, so that a check leaves it untouched.  0 when
 * the queue is empty or can be dumped. */
int udp_queue_check(int sk, const struct sk_diag *d, const struct sk_table *t, const char *what);
/* The datagrams queued, peeked into s->queue (the queue stays as it was);
 * *zeros: how many of them are zero-length (which the kernel now marks
 * peeked: see udp_hold) */
int udp_queue_dump(int sk, InetSk *s, size_t *zeros, const char *what);
void udp_queue_free(InetSk *s);
/* the receive options (IP_PKTINFO, IP_RECVTTL...: what recvmsg tells) */
void udp_recv_opts_dump(int sk, InetSk *s);
int udp_recv_opts_restore(int sk, const InetSk *s, const char *what);
int udp_queue_validate(const InetSk *s);
/* After its bind, before its connect: each datagram sent to the new socket
 * from its source, in order, each checked to have arrived. */
int udp_queue_restore(int sk, const InetSk *s, const char *what);

/* A socket whose zero-length datagrams the dump peeked, held (sk: our
 * descriptor of it, pid's fd) until the dump ends: should the tree go on,
 * udp_dump_resume puts its queue back anew, which a later dump sees
 * whole.  Both while the tree is stopped. */
int udp_hold(struct cr_dump_ctx *ctx, int sk, pid_t pid, int fd, InetSk *s);
void udp_dump_resume(struct cr_dump_ctx *ctx);
void udp_dump_close(struct cr_dump_ctx *ctx);

#endif
