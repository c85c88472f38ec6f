/* UDP sockets keep their multicast state (mcast.c): the groups they joined,
 * on their interface, with their source filters, and their sending
 * options.  In the test's own network namespace (crrun --netns), on lo:
 *   s4: bound to port P, joined 239.1.2.3 (a plain join, by interface
 *       index) and 239.1.2.4 from 127.0.0.2 only (INCLUDE filter);
 *   so: IP_MULTICAST_TTL 7, IP_MULTICAST_LOOP 0, IP_MULTICAST_ALL 0,
 *       IP_MULTICAST_IF 127.0.0.1, no group;
 *   s6: joined ff15::1234, IPV6_MULTICAST_HOPS 9, IPV6_MULTICAST_IF lo.
 * After the restore each filter reads back the same (a group never joined
 * still says EADDRNOTAVAIL), a datagram sent to 239.1.2.3:P reaches s4,
 * and the options read back as set. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crt.h"

static unsigned lo;

/* the socket's filter of group g on lo: 1 and its mode and sources, or 0
 * when it did not join it */
static int filter(int sk, int family, const char *g, uint32_t *mode, char *srcs, size_t len)
{
	char buf[sizeof(struct group_filter) + 8 * sizeof(struct sockaddr_storage)];
	struct group_filter *gf = (struct group_filter *)buf;
	socklen_t l = sizeof(buf);

	memset(buf, 0, sizeof(buf));
	gf->gf_interface = lo;
	gf->gf_numsrc = 8;
	gf->gf_group.ss_family = family;
	if (family == AF_INET)
		inet_pton(AF_INET, g, &((struct sockaddr_in *)&gf->gf_group)->sin_addr);
	else
		inet_pton(AF_INET6, g, &((struct sockaddr_in6 *)&gf->gf_group)->sin6_addr);
	if (getsockopt(sk, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, MCAST_MSFILTER, gf, &l))
		return errno == EADDRNOTAVAIL ? 0 : -errno;
	*mode = gf->gf_fmode;
	srcs[0] = 0;
	for (uint32_t i = 0; i < gf->gf_numsrc && i < 8; i++) {
		char a[INET6_ADDRSTRLEN];
		const void *p =
			family == AF_INET
				? (const void *)&((struct sockaddr_in *)&gf->gf_slist[i])->sin_addr
				: (const void *)&((struct sockaddr_in6 *)&gf->gf_slist[i])
					  ->sin6_addr;

		inet_ntop(family, p, a, sizeof(a));
		snprintf(srcs + strlen(srcs), len - strlen(srcs), "%s%s", i ? "," : "", a);
	}
	return 1;
}

static int getint(int sk, int level, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);

	getsockopt(sk, level, opt, &v, &l);
	return v;
}

/* a datagram sent to 239.1.2.3:port comes to sk within 2 s */
static int reaches(int sk, unsigned port, const char *msg)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct in_addr me = { htonl(INADDR_LOOPBACK) };
	int tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct pollfd p = { sk, POLLIN, 0 };
	char buf[64];
	ssize_t n;

	inet_pton(AF_INET, "239.1.2.3", &to.sin_addr);
	if (tx < 0 || setsockopt(tx, IPPROTO_IP, IP_MULTICAST_IF, &me, sizeof(me)) ||
	    sendto(tx, msg, strlen(msg), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
		crt_fail("cannot send to 239.1.2.3: %s", strerror(errno));
	close(tx);
	if (poll(&p, 1, 2000) != 1)
		return 0;
	n = recv(sk, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return 0;
	buf[n] = 0;
	return !strcmp(buf, msg);
}

int main(void)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct ip_mreqn mr = { 0 };
	struct ipv6_mreq m6 = { 0 };
	struct group_source_req gs = { 0 };
	struct in_addr me = { htonl(INADDR_LOOPBACK) }, got = { 0 };
	socklen_t l = sizeof(a4);
	int s4, so, s6, v;
	uint32_t mode = 99;
	char srcs[256];
	unsigned port;

	crt_init();
	lo = if_nametoindex("lo");
	s4 = socket(AF_INET, SOCK_DGRAM, 0);
	so = socket(AF_INET, SOCK_DGRAM, 0);
	s6 = socket(AF_INET6, SOCK_DGRAM, 0);
	if (!lo || s4 < 0 || so < 0 || s6 < 0 || bind(s4, (struct sockaddr *)&a4, sizeof(a4)) ||
	    getsockname(s4, (struct sockaddr *)&a4, &l))
		crt_fail("setup: %s", strerror(errno));
	port = ntohs(a4.sin_port);
	/* a plain join by index; a join from one source */
	inet_pton(AF_INET, "239.1.2.3", &mr.imr_multiaddr);
	mr.imr_ifindex = (int)lo;
	gs.gsr_interface = lo;
	((struct sockaddr_in *)&gs.gsr_group)->sin_family = AF_INET;
	inet_pton(AF_INET, "239.1.2.4", &((struct sockaddr_in *)&gs.gsr_group)->sin_addr);
	((struct sockaddr_in *)&gs.gsr_source)->sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.2", &((struct sockaddr_in *)&gs.gsr_source)->sin_addr);
	if (setsockopt(s4, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) ||
	    setsockopt(s4, IPPROTO_IP, MCAST_JOIN_SOURCE_GROUP, &gs, sizeof(gs)))
		crt_fail("joins: %s", strerror(errno));
	if (setsockopt(so, IPPROTO_IP, IP_MULTICAST_TTL, &(int){ 7 }, sizeof(int)) ||
	    setsockopt(so, IPPROTO_IP, IP_MULTICAST_LOOP, &(int){ 0 }, sizeof(int)) ||
	    setsockopt(so, IPPROTO_IP, IP_MULTICAST_ALL, &(int){ 0 }, sizeof(int)) ||
	    setsockopt(so, IPPROTO_IP, IP_MULTICAST_IF, &me, sizeof(me)))
		crt_fail("options: %s", strerror(errno));
	inet_pton(AF_INET6, "ff15::1234", &m6.ipv6mr_multiaddr);
	m6.ipv6mr_interface = lo;
	if (bind(s6, (struct sockaddr *)&a6, sizeof(a6)) ||
	    setsockopt(s6, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m6, sizeof(m6)) ||
	    setsockopt(s6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &(int){ 9 }, sizeof(int)) ||
	    setsockopt(s6, IPPROTO_IPV6, IPV6_MULTICAST_IF, &(int){ (int)lo }, sizeof(int)))
		crt_fail("IPv6: %s", strerror(errno));
	crt_check(reaches(s4, port, "before"), "multicast on lo does not reach the socket here");

	crt_ready();
	crt_wait_term();

	crt_check(filter(s4, AF_INET, "239.1.2.3", &mode, srcs, sizeof(srcs)) == 1 &&
			  mode == MCAST_EXCLUDE && !srcs[0],
		  "239.1.2.3: not joined again as it was (mode %u, sources '%s')", mode, srcs);
	crt_check(filter(s4, AF_INET, "239.1.2.4", &mode, srcs, sizeof(srcs)) == 1 &&
			  mode == MCAST_INCLUDE && !strcmp(srcs, "127.0.0.2"),
		  "239.1.2.4: not joined again from 127.0.0.2 only (mode %u, sources '%s')", mode,
		  srcs);
	crt_check(filter(s4, AF_INET, "239.1.2.5", &mode, srcs, sizeof(srcs)) == 0,
		  "239.1.2.5, never joined, is joined");
	crt_check(filter(so, AF_INET, "239.1.2.3", &mode, srcs, sizeof(srcs)) == 0,
		  "the socket that joined nothing joined 239.1.2.3");
	crt_check(reaches(s4, port, "after"), "a datagram to 239.1.2.3 does not reach it");
	crt_check(getint(so, IPPROTO_IP, IP_MULTICAST_TTL) == 7, "IP_MULTICAST_TTL %d, not 7",
		  getint(so, IPPROTO_IP, IP_MULTICAST_TTL));
	crt_check(getint(so, IPPROTO_IP, IP_MULTICAST_LOOP) == 0, "IP_MULTICAST_LOOP is on");
	crt_check(getint(so, IPPROTO_IP, IP_MULTICAST_ALL) == 0, "IP_MULTICAST_ALL is on");
	crt_check(getint(s4, IPPROTO_IP, IP_MULTICAST_ALL) == 1, "s4's IP_MULTICAST_ALL is off");
	l = sizeof(got);
	crt_check(!getsockopt(so, IPPROTO_IP, IP_MULTICAST_IF, &got, &l) && got.s_addr == me.s_addr,
		  "IP_MULTICAST_IF is not 127.0.0.1");
	crt_check(filter(s6, AF_INET6, "ff15::1234", &mode, srcs, sizeof(srcs)) == 1 &&
			  mode == MCAST_EXCLUDE,
		  "ff15::1234: not joined again");
	v = getint(s6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS);
	crt_check(v == 9, "IPV6_MULTICAST_HOPS %d, not 9", v);
	v = getint(s6, IPPROTO_IPV6, IPV6_MULTICAST_IF);
	crt_check(v == (int)lo, "IPV6_MULTICAST_IF %d, not lo (%u)", v, lo);
	crt_pass();
}
