#ifndef CR_SOCKDIAG_H
#define CR_SOCKDIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* packet sockets: what packet_diag tells beyond sk_diag */
struct pk_diag {
	uint32_t version, reserve, copy_thresh, tstamp, flags; /* PDI_* */
	struct pk_mc {
		uint32_t ifindex, count;
		uint16_t type, alen;
		uint8_t addr[32];
	} * mc;
	int nr_mc;
	bool rx_ring, tx_ring, fanout;
	uint32_t rx[7]; /* packet_diag_ring: block size, nr, frame size, nr, tmo, priv, features */
};

/* what sock_diag tells of one socket */
struct sk_diag {
	uint32_t ino;
	int family, type, protocol, state;
	/* unix */
	char name[108];
	int name_len;
	uint32_t vfs_ino, vfs_dev;
	uint32_t peer;
	uint32_t *icons;
	int nr_icons;
	/* inet: addresses in network order, ports in host order */
	uint8_t src[16], dst[16];
	uint16_t src_port, dst_port;
	/* packet (malloc'd) */
	struct pk_diag *pk;
	/* both */
	uint32_t rqlen, wqlen;
	uint8_t shutdown;
	/* a unix socket of kupdate's network namespace, the tree having its
	 * own (made outside it: systemd's stdout stream to journald) */
	bool outer;
};

struct sk_table {
	struct sk_diag *v;
	size_t n, cap;
};

int sockdiag_collect(struct sk_table *t);
/* the unix sockets of the calling thread's network namespace added to t
 * (collected in another), marked outer */
int sockdiag_merge_unix(struct sk_table *t);
/* every socket of the calling thread's network namespace added to t (one
 * made inside the tree: netns.c) */
int sockdiag_merge(struct sk_table *t);
struct sk_diag *sockdiag_find(const struct sk_table *t, uint32_t ino);
void sockdiag_free(struct sk_table *t);
/* a socket sockdiag_collect did not list, through kupdate's own descriptor
 * sk of it: an unbound TCP or UDP socket described in d (0), or what else
 * it is said in a message naming what (-EOPNOTSUPP) */
int sockdiag_probe(int sk, uint32_t ino, struct sk_diag *d, const char *what);
/* the TCP state of sk, and how many segments it ever sent and received
 * (0 where the kernel does not count them); a negative errno */
int sk_tcp_segs(int sk, uint32_t *segs);

#endif
