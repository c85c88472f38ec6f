/* Multicast state of a UDP socket.
 *
 * No call lists the groups a socket joined.  The kernel lists the groups
 * joined on each interface of the namespace (/proc/net/igmp, igmp6), and
 * MCAST_MSFILTER read on the socket for one of them answers with the
 * socket's source filter if it joined that group on that interface, or
 * EADDRNOTAVAIL: so each group of the namespace is asked for.  At restore
 * the socket joins each again (MCAST_JOIN_GROUP) on the interface of the
 * same name, then gets its filter back (MCAST_MSFILTER).
 *
 * The sending options (TTL or hops, loop, IP_MULTICAST_ALL, the interface)
 * are saved where they differ from a new socket's.  IP_MULTICAST_IF set
 * by interface index alone (struct ip_mreqn without an address) cannot be
 * read back: getsockopt gives the address only. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "sockets.h"
#include "mcast.h"
#include "util.h"

#define MAX_GROUPS  1024
#define MAX_SOURCES 64 /* a socket's per group: net.ipv4.igmp_max_msf, 10 */

struct cand {
	unsigned ifindex;
	char ifname[IFNAMSIZ];
	uint8_t group[16];
};

/* The groups joined on the interfaces of our namespace, of one family. */
static int candidates(int family, struct cand **out, size_t *nr)
{
	FILE *f = fopen(family == AF_INET ? "/proc/thread-self/net/igmp"
					  : "/proc/thread-self/net/igmp6",
			"re");
	char line[256], name[IFNAMSIZ] = "";
	unsigned idx = 0;
	struct cand *v = NULL;
	size_t n = 0;

	*out = NULL;
	*nr = 0;
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct cand c = { 0 };
		struct cand *nv;

		if (family == AF_INET) {
			unsigned long g;
			char dev[IFNAMSIZ + 1];

			/* "1\tlo        :     1      V3", then "\t\t\t\t010000E0 ..." */
			if (line[0] != '\t') {
				if (sscanf(line, "%u %16s", &idx, dev) == 2) {
					snprintf(name, sizeof(name), "%.*s", IFNAMSIZ - 1, dev);
					name[strcspn(name, ":")] = 0;
				}
				continue;
			}
			if (sscanf(line, " %lx", &g) != 1 || !idx)
				continue;
			c.ifindex = idx;
			snprintf(c.ifname, sizeof(c.ifname), "%s", name);
			/* printed as the u32 it is in memory */
			memcpy(c.group, &(uint32_t){ (uint32_t)g }, 4);
		} else {
			char dev[IFNAMSIZ + 1], hex[33];

			if (sscanf(line, "%u %16s %32s", &c.ifindex, dev, hex) != 3 ||
			    strlen(hex) != 32)
				continue;
			snprintf(c.ifname, sizeof(c.ifname), "%.*s", IFNAMSIZ - 1, dev);
			for (int i = 0; i < 16; i++) {
				unsigned b;

				if (sscanf(hex + 2 * i, "%2x", &b) != 1)
					break;
				c.group[i] = (uint8_t)b;
			}
		}
		if (n >= MAX_GROUPS)
			break;
		nv = xrealloc_array(v, n + 1, sizeof(*nv));
		if (!nv) {
			free(v);
			fclose(f);
			return -ENOMEM;
		}
		v = nv;
		v[n++] = c;
	}
	fclose(f);
	*out = v;
	*nr = n;
	return 0;
}

static socklen_t group_sa(int family, const uint8_t *g, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, g, 4);
		return sizeof(*in);
	}
	((struct sockaddr_in6 *)ss)->sin6_family = AF_INET6;
	memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, g, 16);
	return sizeof(struct sockaddr_in6);
}

static const uint8_t *sa_addr(int family, const struct sockaddr_storage *ss)
{
	return family == AF_INET ? (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr
				 : (const uint8_t *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
}

static void group_str(int family, const uint8_t *g, char *buf, size_t len)
{
	if (!inet_ntop(family, g, buf, len))
		snprintf(buf, len, "?");
}

/* the filter of group c on socket sk: 1 joined (gf filled), 0 not */
static int msfilter(int sk, int family, const struct cand *c, struct group_filter *gf,
		    socklen_t size)
{
	socklen_t len = size;

	memset(gf, 0, size);
	gf->gf_interface = c->ifindex;
	group_sa(family, c->group, &gf->gf_group);
	gf->gf_numsrc = MAX_SOURCES;
	if (!getsockopt(sk, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, MCAST_MSFILTER, gf,
			&len))
		return 1;
	return errno == EADDRNOTAVAIL || errno == EINVAL || errno == ENODEV ? 0 : -errno;
}

static int add_group(InetSk *s, const struct cand *c, const struct group_filter *gf, int alen)
{
	McGroup *m = malloc(sizeof(*m)), **nv;
	int ret;

	if (!m)
		return -ENOMEM;
	mc_group__init(m);
	nv = xrealloc_array(s->mc_groups, s->n_mc_groups + 1, sizeof(*nv));
	if (!nv) {
		free(m);
		return -ENOMEM;
	}
	s->mc_groups = nv;
	nv[s->n_mc_groups++] = m;
	m->ifindex = c->ifindex;
	m->ifname = c->ifname[0] ? xstrdup(c->ifname) : NULL;
	m->fmode = gf->gf_fmode;
	ret = img_bytes(&m->group, c->group, alen);
	if (ret)
		return ret;
	if (!gf->gf_numsrc)
		return 0;
	m->sources = calloc(gf->gf_numsrc, sizeof(*m->sources));
	if (!m->sources)
		return -ENOMEM;
	for (uint32_t i = 0; i < gf->gf_numsrc; i++) {
		ret = img_bytes(&m->sources[i], sa_addr(s->family, &gf->gf_slist[i]), alen);
		if (ret)
			return ret;
		m->n_sources++;
	}
	return 0;
}

/* the sending options that differ from those of fresh, a new socket */
static void options_dump(int sk, int fresh, InetSk *s)
{
	bool v4 = s->family == AF_INET;
	int lvl = v4 ? IPPROTO_IP : IPPROTO_IPV6, a, b;

	if (!sk_getint(sk, lvl, v4 ? IP_MULTICAST_TTL : IPV6_MULTICAST_HOPS, &a) &&
	    !sk_getint(fresh, lvl, v4 ? IP_MULTICAST_TTL : IPV6_MULTICAST_HOPS, &b) && a != b &&
	    a >= 0) {
		s->has_mc_ttl = 1;
		s->mc_ttl = (uint32_t)a;
	}
	if (!sk_getint(sk, lvl, v4 ? IP_MULTICAST_LOOP : IPV6_MULTICAST_LOOP, &a) && !a)
		s->has_mc_loop_off = s->mc_loop_off = 1;
	if (!sk_getint(sk, lvl, v4 ? IP_MULTICAST_ALL : IPV6_MULTICAST_ALL, &a) && !a)
		s->has_mc_all_off = s->mc_all_off = 1;
	if (v4) {
		struct in_addr ia = { 0 };
		socklen_t l = sizeof(ia);

		if (!getsockopt(sk, IPPROTO_IP, IP_MULTICAST_IF, &ia, &l) && ia.s_addr)
			s->has_mc_if_addr = !img_bytes(&s->mc_if_addr, &ia, 4);
	} else if (!sk_getint(sk, IPPROTO_IPV6, IPV6_MULTICAST_IF, &a) && a > 0) {
		char name[IFNAMSIZ];

		s->has_mc_ifindex = 1;
		s->mc_ifindex = (uint32_t)a;
		if (if_indextoname((unsigned)a, name))
			s->mc_ifname = xstrdup(name);
	}
}

int mcast_dump(int sk, InetSk *s, const char *what)
{
	size_t size = sizeof(struct group_filter) + MAX_SOURCES * sizeof(struct sockaddr_storage);
	_cleanup_free_ struct group_filter *gf = malloc(size);
	_cleanup_free_ struct cand *c = NULL;
	_cleanup_close_ int fresh = socket(s->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int alen = s->family == AF_INET ? 4 : 16, ret;
	size_t n = 0;

	if (!gf)
		return -ENOMEM;
	if (fresh >= 0)
		options_dump(sk, fresh, s);
	ret = candidates(s->family, &c, &n);
	if (ret) {
		pr_err("%s: cannot read the multicast groups of this namespace: %s", what,
		       strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		char g[INET6_ADDRSTRLEN];

		ret = msfilter(sk, s->family, &c[i], gf, size);
		if (ret < 0) {
			group_str(s->family, c[i].group, g, sizeof(g));
			pr_err("%s: cannot read its filter of multicast group %s on %s: %s", what,
			       g, c[i].ifname, strerror(-ret));
			return ret;
		}
		if (!ret)
			continue;
		if (gf->gf_numsrc > MAX_SOURCES) {
			group_str(s->family, c[i].group, g, sizeof(g));
			pr_err("%s: its filter of multicast group %s on %s lists %u sources, more "
			       "than the %d kupdate reads",
			       what, g, c[i].ifname, gf->gf_numsrc, MAX_SOURCES);
			return -E2BIG;
		}
		ret = add_group(s, &c[i], gf, alen);
		if (ret)
			return ret;
	}
	return 0;
}

void mcast_free(InetSk *s)
{
	for (size_t i = 0; i < s->n_mc_groups; i++) {
		McGroup *m = s->mc_groups[i];

		if (!m)
			continue;
		for (size_t k = 0; k < m->n_sources; k++)
			free(m->sources[k].data);
		free(m->sources);
		free(m->group.data);
		free(m->ifname);
		free(m);
	}
	free(s->mc_groups);
	s->mc_groups = NULL;
	s->n_mc_groups = 0;
	free(s->mc_if_addr.data);
	s->mc_if_addr.data = NULL;
	free(s->mc_ifname);
	s->mc_ifname = NULL;
}

int mcast_validate(const InetSk *s)
{
	size_t alen = s->family == AF_INET ? 4 : 16;

	if ((s->n_mc_groups || s->has_mc_ttl || s->has_mc_if_addr || s->has_mc_ifindex) &&
	    s->protocol != IPPROTO_UDP)
		return -EINVAL;
	if (s->n_mc_groups > MAX_GROUPS || s->mc_ttl > 255 ||
	    (s->has_mc_if_addr && (s->family != AF_INET || s->mc_if_addr.len != 4)) ||
	    (s->mc_ifname && strlen(s->mc_ifname) >= IFNAMSIZ))
		return -EINVAL;
	for (size_t i = 0; i < s->n_mc_groups; i++) {
		const McGroup *m = s->mc_groups[i];

		if (m->group.len != alen || m->n_sources > MAX_SOURCES ||
		    (m->fmode != MCAST_INCLUDE && m->fmode != MCAST_EXCLUDE) ||
		    (m->ifname && strlen(m->ifname) >= IFNAMSIZ))
			return -EINVAL;
		for (size_t k = 0; k < m->n_sources; k++)
			if (m->sources[k].len != alen)
				return -EINVAL;
	}
	return 0;
}

/* the interface of that name now, else the saved index */
static unsigned ifindex_of(const char *name, unsigned saved, const char *what)
{
	unsigned i = name ? if_nametoindex(name) : 0;

	if (name && !i)
		pr_warn("%s: interface %s is gone: index %u is used", what, name, saved);
	return i ? i : saved;
}

int mcast_restore(int sk, const InetSk *s, const char *what)
{
	size_t size = sizeof(struct group_filter) + MAX_SOURCES * sizeof(struct sockaddr_storage);
	_cleanup_free_ struct group_filter *gf = NULL;
	bool v4 = s->family == AF_INET;
	int lvl = v4 ? IPPROTO_IP : IPPROTO_IPV6, ret = 0;

	if (s->has_mc_ttl)
		ret = sk_setint(sk, lvl, v4 ? IP_MULTICAST_TTL : IPV6_MULTICAST_HOPS,
				(int)s->mc_ttl, "its multicast TTL", what);
	if (!ret && s->mc_loop_off)
		ret = sk_setint(sk, lvl, v4 ? IP_MULTICAST_LOOP : IPV6_MULTICAST_LOOP, 0,
				"its multicast loop", what);
	if (!ret && s->mc_all_off)
		ret = sk_setint(sk, lvl, v4 ? IP_MULTICAST_ALL : IPV6_MULTICAST_ALL, 0,
				"IP_MULTICAST_ALL", what);
	if (!ret && s->has_mc_if_addr &&
	    setsockopt(sk, IPPROTO_IP, IP_MULTICAST_IF, s->mc_if_addr.data, 4)) {
		ret = pr_errno("%s: cannot set its multicast interface", what);
	}
	if (!ret && s->has_mc_ifindex)
		ret = sk_setint(sk, IPPROTO_IPV6, IPV6_MULTICAST_IF,
				(int)ifindex_of(s->mc_ifname, s->mc_ifindex, what),
				"its multicast interface", what);
	if (ret || !s->n_mc_groups)
		return ret;
	gf = malloc(size);
	if (!gf)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_mc_groups; i++) {
		const McGroup *m = s->mc_groups[i];
		struct group_req gr = { .gr_interface = ifindex_of(m->ifname, m->ifindex, what) };
		char g[INET6_ADDRSTRLEN];

		group_sa(s->family, m->group.data, &gr.gr_group);
		group_str(s->family, m->group.data, g, sizeof(g));
		if (setsockopt(sk, lvl, MCAST_JOIN_GROUP, &gr, sizeof(gr)))
			return pr_errno("%s: cannot join multicast group %s on %s", what, g,
					m->ifname ? m->ifname : "its interface");
		if (m->fmode == MCAST_EXCLUDE && !m->n_sources)
			continue;
		memset(gf, 0, size);
		gf->gf_interface = gr.gr_interface;
		gf->gf_group = gr.gr_group;
		gf->gf_fmode = m->fmode;
		gf->gf_numsrc = (uint32_t)m->n_sources;
		for (size_t k = 0; k < m->n_sources; k++)
			group_sa(s->family, m->sources[k].data, &gf->gf_slist[k]);
		if (setsockopt(sk, lvl, MCAST_MSFILTER, gf,
			       (socklen_t)GROUP_FILTER_SIZE(m->n_sources))) {
			ret = pr_errno("%s: cannot set its source filter of multicast group %s",
				       what, g);
			return ret;
		}
	}
	return 0;
}
