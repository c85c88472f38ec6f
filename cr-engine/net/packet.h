#ifndef CR_PACKET_H
#define CR_PACKET_H

#include <stdint.h>
#include <sys/types.h>

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_file;
struct cr_proc;
struct sk_diag;

/* packet.c: a packet socket (AF_PACKET), dumped into f->psk */
int packet_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
		struct cr_file *f);
void packet_free_dump(PacketSk *s);
int packet_validate(const FileEntry *e);
/* the socket, as it was (O_CLOEXEC): its fd, or -errno said with what */
int packet_create(const PacketSk *s, const char *what);

/* packet-ring.c: the receive ring of socket ino mapped by p (rx: its
 * packet_diag_ring), with the blocks not read yet */
int packet_ring_dump(const struct cr_proc *p, uint32_t ino, const uint32_t rx[7], uint32_t version,
		     PacketRing **out, const char *what);
void packet_ring_free(PacketRing *r);
int packet_ring_validate(const PacketRing *r);
/* on sk, before its bind: the ring made, the blocks not read in it */
int packet_ring_create(int sk, const PacketRing *r, const char *what);
/* how the process's mapping of the new ring is laid out: blocks of *bs
 * bytes, *nb of them, the kernel's block j at the mapping's block
 * (j + *rot) % *nb */
void packet_ring_layout(const PacketRing *r, uint64_t *bs, uint32_t *nb, uint32_t *rot);

#endif
