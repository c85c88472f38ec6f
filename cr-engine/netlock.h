#ifndef CR_NETLOCK_H
#define CR_NETLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* one TCP connection, seen from our side; ports in host order */
struct nl_conn {
	int family;
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;
};

int netlock_add(const struct nl_conn *c, size_t n);
int netlock_del(const struct nl_conn *c, size_t n);
bool netlock_present(const struct nl_conn *c);

#endif
