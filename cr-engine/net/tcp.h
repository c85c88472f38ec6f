#ifndef CR_TCP_H
#define CR_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "images/files.pb-c.h"
#include "images/inet.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct sk_diag;
struct cr_conn;

int inet_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
	      struct cr_file *f);
void inet_free_dump(InetSk *s);
void inet_endpoint(int family, const uint8_t *addr, unsigned port, char *buf, size_t len);
/* tcp-stream.c: the connection of s, as the network lock sees it */
void inet_conn(const InetSk *s, struct cr_conn *c);

int inet_validate(const FileEntry *e);
/* the socket, as it was; an established connection stays in repair mode */
/* l: the listeners a service manager passed (a listener of the tree bound
 * to the same address is taken from there), or NULL */
struct sk_listeners;
int inet_create(const InetSk *s, struct sk_listeners *l, const char *what);
bool inet_is_repaired(const FileEntry *e);
/* tcp-release.c.  locked: the caller keeps the network lock (lifted meanwhile for what
 * the restore itself must put to the connection) */
int inet_release(int sk, const InetSk *s, bool locked, const char *what);

struct rfiles;
struct rproc;
/* After a restore, while the tree is still stopped: lift the lock (unless
 * the caller does it), take every connection out of repair mode and, with
 * rto_revert, cut each remote peer's retransmission timeout short. */
int tcp_finish_restore(struct rfiles *files, struct rproc *procs, size_t nr, bool unlock,
		       bool rto_revert);

/* tcp-dump.c: the connections a dump holds (out of repair mode once read): when the
 * tree goes on, after the lock is lifted, each leaves repair mode with a
 * window probe, and they are closed; just before the tree is killed, each
 * goes back into repair mode (the close then sends nothing); closed. */
void tcp_dump_resume(struct cr_dump_ctx *ctx);
void tcp_dump_repair(struct cr_dump_ctx *ctx);
void tcp_dump_close(struct cr_dump_ctx *ctx);

#endif
