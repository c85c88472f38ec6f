#ifndef CR_NETLOCK_H
#define CR_NETLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr.h" /* struct cr_conn: one TCP connection, from our side, ports in host order */

int netlock_add(const struct cr_conn *c, size_t n);
int netlock_del(const struct cr_conn *c, size_t n);
bool netlock_present(const struct cr_conn *c);
/* Whether nftables takes the lock's table, sets and rules (validated by the
 * kernel in nftables' check mode: nothing is changed); 0, or -errno with
 * the reason in why. */
int netlock_probe(char *why, size_t len);

#endif
