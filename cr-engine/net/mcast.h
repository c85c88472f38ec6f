/* Multicast state of a UDP socket: the groups it joined, with their source
 * filters, and its sending options (mcast.c). */
#ifndef CR_MCAST_H
#define CR_MCAST_H

#include "images/inet.pb-c.h"

/* Into s: the groups socket sk (kupdate's copy) joined, found among those
 * the kernel lists for this network namespace (/proc/net/igmp, igmp6),
 * and the multicast options that differ from a new socket's. */
int mcast_dump(int sk, InetSk *s, const char *what);
void mcast_free(InetSk *s);
int mcast_validate(const InetSk *s);
/* After its bind: the options set again, each group joined again on its
 * interface (found by name) with its source filter. */
int mcast_restore(int sk, const InetSk *s, const char *what);

#endif
