#ifndef CR_PACKET_H
#define CR_PACKET_H

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

#endif
