#ifndef CR_NETLOCK_H
#define CR_NETLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr.h" /* struct cr_conn: one TCP connection, from our side, ports in host order */

/* an IPv4 connection, as such or in v4-mapped IPv6 addresses (conn4) */
bool addr_v4mapped(const uint8_t *a);
bool conn_is_v4(const struct cr_conn *c);

int netlock_add(const struct cr_conn *c, size_t n);
/* the whole lock, whatever it holds (recovery after a killed apply) */
int netlock_clear(void);
int netlock_del(const struct cr_conn *c, size_t n);
/* the calling thread works in a tree's own network namespace, or no longer:
 * netlock_del() then removes the elements there, and the table once empty */
void netlock_in_tree_netns(bool in);
/* n connections locked (add) or let go in pid's network namespace, by a
 * thread that joined it; 0 or a negative errno */
int netlock_in_ns(pid_t pid, const struct cr_conn *c, size_t n, bool add);
/* netlock_del leaves the table even when it is empty (cr_net_lock_keep_table) */
void netlock_keep_table(void);
bool netlock_present(const struct cr_conn *c);
/* Whether nftables takes the lock's table, sets and rules (validated by the
 * kernel in nftables' check mode: nothing is changed); 0, or -errno with
 * the reason in why. */
int netlock_probe(char *why, size_t len);
/* the lock's table, sets, chains and rules as nftables' text (which the
 * netlink messages kupdate sends must match: the unit tests compare) */
const char *netlock_setup_text(void);

/* one context for many additions (a dump) */
struct netlock;
struct netlock *netlock_open(void);
/* the table, its sets, chains and rules, once, before the first element */
int netlock_prepare(struct netlock *l);
int netlock_add_one(struct netlock *l, const struct cr_conn *c);
void netlock_close(struct netlock *l);

/* netlock-dump.c: the lock of a connection during a dump; its table set up
 * before (dump_lock_prepare), so that a connection's last acknowledgement
 * is read just before its own element goes in */
struct cr_dump_ctx;
int dump_lock_prepare(struct cr_dump_ctx *ctx);
struct cr_proc;
/* p's connection c: in the namespace p's container made, if so */
int dump_lock(struct cr_dump_ctx *ctx, struct cr_proc *p, const struct cr_conn *c);
/* the locks of the containers' namespaces lifted (the tree goes on) */
void dump_unlock_made(struct cr_dump_ctx *ctx);

#endif
