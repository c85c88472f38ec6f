#ifndef CR_SOCKDIAG_H
#define CR_SOCKDIAG_H

#include <stddef.h>
#include <stdint.h>

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
	/* both */
	uint32_t rqlen, wqlen;
	uint8_t shutdown;
};

struct sk_table {
	struct sk_diag *v;
	size_t n, cap;
};

int sockdiag_collect(struct sk_table *t);
struct sk_diag *sockdiag_find(const struct sk_table *t, uint32_t ino);
void sockdiag_free(struct sk_table *t);

#endif
