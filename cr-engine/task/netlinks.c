/* The interfaces of a network namespace a process of the tree made (a
 * container's private network, netns.c's netns_made): its loopback, and
 * veth pairs whose other end lies in its maker's parent's namespace
 * (nspawn's host0 and ve-NAME), with the addresses and routes of both
 * ends.
 *
 * Dump: read with rtnetlink in a thread that joined the namespace, and
 * the other ends in one that joined the parent's; refused, naming the
 * process and the object: another kind of interface, a veth whose other
 * end is elsewhere or on a bridge, an address or route kupdate does not
 * make again (a multipath or encapsulated route, a table of its own, a
 * policy routing rule), and firewall rules in the namespace (nftables, or
 * iptables' legacy tables).  Recorded in the maker's made_ns: links.
 *
 * Restore: the maker, right after it unshared its network namespace,
 * makes each veth from the inside, its other end put into the parent's
 * namespace (IFLA_NET_NS_FD), with the same names, hardware addresses and
 * MTU; then the addresses (with the lifetimes left of a lease), the links
 * up, the routes.  The other end's are set through a socket opened in the
 * parent's namespace before the unshare. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/netfilter.h>
#include <linux/net_namespace.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "images/namespaces.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "proc.h"
#include "util.h"

#define RT_TIMEOUT_S 5
/* how long an interface of the names a veth needs may take to go */
#define VETH_GONE_MS 2000

/* a NETLINK_ROUTE socket of the calling thread's network namespace, whose
 * answers are waited for RT_TIMEOUT_S at most */
static struct nl_sock *rt_open(int proto)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct timeval tv = { .tv_sec = RT_TIMEOUT_S };

	if (!sk)
		return NULL;
	if (nl_connect(sk, proto) < 0 ||
	    setsockopt(nl_socket_get_fd(sk), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

/* one change, acknowledged: 0, or libnl's negative error */
static int rt_do(struct nl_sock *sk, struct nl_msg *m)
{
	int ret = m ? nl_send_auto(sk, m) : -NLE_NOMEM;

	nlmsg_free(m);
	return ret < 0 ? ret : nl_wait_for_ack(sk);
}

/* ------------------------------------------------------------ dump */

struct link {
	int index, peer_index, peer_nsid, master, type;
	unsigned flags, mtu;
	char name[IF_NAMESIZE], kind[32];
	uint8_t mac[32];
	int mac_len;
};

/* what a thread read in one namespace */
struct ns_read {
	int other_fd;	/* the parent's namespace, for its id here; -1 */
	int want_index; /* only this link and its routes (the parent's side); 0 all */
	struct link *links;
	size_t nr_links;
	NetAddr **addrs;
	int *addr_if;
	size_t nr_addrs;
	NetRoute **routes;
	int *route_oif;
	size_t nr_routes;
	int other_nsid;
	char why[256]; /* a refusal: what is there that is not made again */
	int err;
};

static void refuse(struct ns_read *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct ns_read *r, const char *fmt, ...)
{
	va_list ap;

	if (r->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static bool set_bytes(ProtobufCBinaryData *b, protobuf_c_boolean *has, const struct nlattr *a)
{
	if (!a)
		return true;
	b->data = malloc(nla_len(a));
	if (!b->data)
		return false;
	memcpy(b->data, nla_data(a), nla_len(a));
	b->len = nla_len(a);
	*has = 1;
	return true;
}

/* item appended to *v, and the interface index it belongs to to *at */
static int push(void ***v, int **at, size_t *n, void *item, int index)
{
	void **nv = xrealloc_array(*v, *n + 1, sizeof(*nv));
	int *na;

	if (!nv)
		return -ENOMEM;
	*v = nv;
	na = xrealloc_array(*at, *n + 1, sizeof(*na));
	if (!na)
		return -ENOMEM;
	*at = na;
	nv[*n] = item;
	na[(*n)++] = index;
	return 0;
}

static int link_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct ifinfomsg *ifi = nlmsg_data(nh);
	struct nlattr *tb[IFLA_MAX + 1], *info[IFLA_INFO_MAX + 1];
	struct link *l;

	if (nh->nlmsg_type != RTM_NEWLINK || nlmsg_parse(nh, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0)
		return NL_OK;
	if (r->want_index && ifi->ifi_index != r->want_index)
		return NL_OK;
	l = xrealloc_array(r->links, r->nr_links + 1, sizeof(*l));
	if (!l) {
		r->err = -ENOMEM;
		return NL_STOP;
	}
	r->links = l;
	l = &l[r->nr_links++];
	memset(l, 0, sizeof(*l));
	l->index = ifi->ifi_index;
	l->flags = ifi->ifi_flags;
	l->type = ifi->ifi_type;
	l->peer_nsid = -1;
	if (tb[IFLA_IFNAME])
		snprintf(l->name, sizeof(l->name), "%s", nla_get_string(tb[IFLA_IFNAME]));
	if (tb[IFLA_MTU])
		l->mtu = nla_get_u32(tb[IFLA_MTU]);
	if (tb[IFLA_LINK])
		l->peer_index = nla_get_u32(tb[IFLA_LINK]);
	if (tb[IFLA_LINK_NETNSID])
		l->peer_nsid = nla_get_s32(tb[IFLA_LINK_NETNSID]);
	if (tb[IFLA_MASTER])
		l->master = nla_get_u32(tb[IFLA_MASTER]);
	if (tb[IFLA_ADDRESS] && nla_len(tb[IFLA_ADDRESS]) <= (int)sizeof(l->mac)) {
		l->mac_len = nla_len(tb[IFLA_ADDRESS]);
		memcpy(l->mac, nla_data(tb[IFLA_ADDRESS]), l->mac_len);
	}
	if (tb[IFLA_LINKINFO] && !nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) &&
	    info[IFLA_INFO_KIND])
		snprintf(l->kind, sizeof(l->kind), "%s", nla_get_string(info[IFLA_INFO_KIND]));
	return NL_OK;
}

static int addr_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct ifaddrmsg *ifa = nlmsg_data(nh);
	struct nlattr *tb[IFA_MAX + 1];
	NetAddr *a;
	uint32_t flags;

	if (nh->nlmsg_type != RTM_NEWADDR || nlmsg_parse(nh, sizeof(*ifa), tb, IFA_MAX, NULL) < 0)
		return NL_OK;
	if (r->want_index && (int)ifa->ifa_index != r->want_index)
		return NL_OK;
	flags = tb[IFA_FLAGS] ? nla_get_u32(tb[IFA_FLAGS]) : ifa->ifa_flags;
	/* a link-local IPv6 address follows the hardware address, kept */
	if (ifa->ifa_family == AF_INET6 && ifa->ifa_scope == RT_SCOPE_LINK)
		return NL_OK;
	if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
		return NL_OK;
	a = calloc(1, sizeof(*a));
	if (!a || push((void ***)&r->addrs, &r->addr_if, &r->nr_addrs, a, ifa->ifa_index)) {
		free(a);
		r->err = -ENOMEM;
		return NL_STOP;
	}
	net_addr__init(a);
	a->family = ifa->ifa_family;
	a->prefix_len = ifa->ifa_prefixlen;
	a->has_flags = 1;
	a->flags = flags & ~(IFA_F_SECONDARY | IFA_F_PERMANENT | IFA_F_TENTATIVE | IFA_F_DADFAILED |
			     IFA_F_DEPRECATED | IFA_F_OPTIMISTIC);
	a->has_scope = 1;
	a->scope = ifa->ifa_scope;
	/* IPv4: IFA_LOCAL is the address, IFA_ADDRESS the other end of a
	 * point-to-point one (the address again otherwise); IPv6: IFA_ADDRESS,
	 * and IFA_LOCAL only with a peer */
	if (tb[IFA_LOCAL] && tb[IFA_ADDRESS] &&
	    nla_memcmp(tb[IFA_LOCAL], nla_data(tb[IFA_ADDRESS]), nla_len(tb[IFA_ADDRESS])) &&
	    !set_bytes(&a->peer, &a->has_peer, tb[IFA_ADDRESS]))
		r->err = -ENOMEM;
	{
		struct nlattr *loc = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
		protobuf_c_boolean dummy;

		if (!loc || !set_bytes(&a->local, &dummy, loc))
			r->err = loc ? -ENOMEM : -EPROTO;
	}
	if (!set_bytes(&a->broadcast, &a->has_broadcast, tb[IFA_BROADCAST]))
		r->err = -ENOMEM;
	if (tb[IFA_LABEL] && !(a->label = xstrdup(nla_get_string(tb[IFA_LABEL]))))
		r->err = -ENOMEM;
	if (tb[IFA_CACHEINFO]) {
		const struct ifa_cacheinfo *ci = nla_data(tb[IFA_CACHEINFO]);

		/* a lease's lifetimes, what is left of them */
		if (ci->ifa_valid != 0xFFFFFFFFu) {
			a->has_valid_lft = a->has_preferred_lft = 1;
			a->valid_lft = ci->ifa_valid;
			a->preferred_lft = ci->ifa_prefered;
		}
	}
	return r->err ? NL_STOP : NL_OK;
}

static int route_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct rtmsg *rt = nlmsg_data(nh);
	struct nlattr *tb[RTA_MAX + 1];
	uint32_t table;
	int oif;
	NetRoute *e;
	char dst[INET6_ADDRSTRLEN] = "default";

	if (nh->nlmsg_type != RTM_NEWROUTE || nlmsg_parse(nh, sizeof(*rt), tb, RTA_MAX, NULL) < 0)
		return NL_OK;
	table = tb[RTA_TABLE] ? nla_get_u32(tb[RTA_TABLE]) : rt->rtm_table;
	oif = tb[RTA_OIF] ? (int)nla_get_u32(tb[RTA_OIF]) : 0;
	if (tb[RTA_DST])
		inet_ntop(rt->rtm_family, nla_data(tb[RTA_DST]), dst, sizeof(dst));
	/* what the kernel made for an address or a link comes back with it */
	if (rt->rtm_protocol == RTPROT_KERNEL || table == RT_TABLE_LOCAL)
		return NL_OK;
	if (r->want_index && oif != r->want_index)
		return NL_OK;
	if (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6)
		return NL_OK;
	if (table != RT_TABLE_MAIN) {
		refuse(r,
		       "a route to %s/%d in routing table %u (kupdate makes again only the "
		       "main table)",
		       dst, rt->rtm_dst_len, table);
		return NL_OK;
	}
	if (tb[RTA_MULTIPATH] || tb[RTA_ENCAP] || tb[RTA_VIA] || tb[RTA_NH_ID] || tb[RTA_SRC] ||
	    tb[RTA_IIF] || rt->rtm_src_len || rt->rtm_protocol == RTPROT_RA) {
		refuse(r,
		       "a route to %s/%d with several next hops, an encapsulation, a source "
		       "or from a router advertisement (kupdate makes again only a plain one)",
		       dst, rt->rtm_dst_len);
		return NL_OK;
	}
	e = calloc(1, sizeof(*e));
	if (!e || push((void ***)&r->routes, &r->route_oif, &r->nr_routes, e, oif)) {
		free(e);
		r->err = -ENOMEM;
		return NL_STOP;
	}
	net_route__init(e);
	e->family = rt->rtm_family;
	e->dst_len = rt->rtm_dst_len;
	e->protocol = rt->rtm_protocol;
	e->scope = rt->rtm_scope;
	e->type = rt->rtm_type;
	e->has_rt_flags = 1;
	e->rt_flags = rt->rtm_flags & RTNH_F_ONLINK;
	if (!set_bytes(&e->dst, &e->has_dst, tb[RTA_DST]) ||
	    !set_bytes(&e->gateway, &e->has_gateway, tb[RTA_GATEWAY]) ||
	    !set_bytes(&e->prefsrc, &e->has_prefsrc, tb[RTA_PREFSRC]) ||
	    !set_bytes(&e->metrics, &e->has_metrics, tb[RTA_METRICS]))
		r->err = -ENOMEM;
	if (tb[RTA_PRIORITY]) {
		e->has_priority = 1;
		e->priority = nla_get_u32(tb[RTA_PRIORITY]);
	}
	if (tb[RTA_PREF]) {
		e->has_pref = 1;
		e->pref = nla_get_u8(tb[RTA_PREF]);
	}
	return r->err ? NL_STOP : NL_OK;
}

/* a namespace's policy routing rules: those it is born with only */
static int rule_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct rtmsg *rt = nlmsg_data(nh);
	struct nlattr *tb[FRA_MAX + 1];
	uint32_t prio, table;

	if (nh->nlmsg_type != RTM_NEWRULE || nlmsg_parse(nh, sizeof(*rt), tb, FRA_MAX, NULL) < 0)
		return NL_OK;
	prio = tb[FRA_PRIORITY] ? nla_get_u32(tb[FRA_PRIORITY]) : 0;
	table = tb[FRA_TABLE] ? nla_get_u32(tb[FRA_TABLE]) : rt->rtm_table;
	if (!((prio == 0 && table == RT_TABLE_LOCAL) || (prio == 32766 && table == RT_TABLE_MAIN) ||
	      (prio == 32767 && table == RT_TABLE_DEFAULT && rt->rtm_family == AF_INET)))
		refuse(r, "a policy routing rule (priority %u, table %u)", prio, table);
	return NL_OK;
}

static int nsid_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct nlattr *tb[NETNSA_MAX + 1];

	if (nh->nlmsg_type == RTM_NEWNSID &&
	    !nlmsg_parse(nh, sizeof(struct rtgenmsg), tb, NETNSA_MAX, NULL) && tb[NETNSA_NSID])
		r->other_nsid = nla_get_s32(tb[NETNSA_NSID]);
	return NL_OK;
}

static int table_cb(struct nl_msg *msg, void *arg)
{
	struct ns_read *r = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct nfgenmsg *g = nlmsg_data(nh);
	struct nlattr *tb[NFTA_TABLE_MAX + 1];
	const char *name;

	if (NFNL_MSG_TYPE(nh->nlmsg_type) != NFT_MSG_NEWTABLE ||
	    nlmsg_parse(nh, sizeof(*g), tb, NFTA_TABLE_MAX, NULL) < 0 || !tb[NFTA_TABLE_NAME])
		return NL_OK;
	name = nla_get_string(tb[NFTA_TABLE_NAME]);
	/* the network lock's own (netlock.c) */
	if (g->nfgen_family == NFPROTO_INET && !strcmp(name, "kupdate"))
		return NL_OK;
	refuse(r,
	       "the nftables table %s (a firewall of its own: kupdate does not make its "
	       "rules again yet)",
	       name);
	return NL_OK;
}

/* one request, and its answers to cb; a dump unless type is a GET of one */
static int ask(struct nl_sock *sk, int type, int flags, void *hdr, size_t len, int attr_fd,
	       nl_recvmsg_msg_cb_t cb, void *arg)
{
	struct nl_msg *m = nlmsg_alloc_simple(type, NLM_F_REQUEST | flags);
	int ret;

	if (!m)
		return -ENOMEM;
	ret = nlmsg_append(m, hdr, len, NLMSG_ALIGNTO);
	if (!ret && attr_fd >= 0)
		ret = nla_put_u32(m, NETNSA_FD, attr_fd);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, cb, arg);
	if (!ret)
		ret = nl_send_auto(sk, m);
	nlmsg_free(m);
	if (ret >= 0)
		ret = nl_recvmsgs_default(sk);
	return ret < 0 ? ret : 0; /* a libnl error (-NLE_*) */
}

/* the policy routing rules: none on a kernel without them (no
 * CONFIG_FIB_RULES: the request is not supported) */
static int ask_rules(struct nl_sock *sk, struct ns_read *r)
{
	struct rtmsg rt = { .rtm_family = AF_UNSPEC };
	int ret = ask(sk, RTM_GETRULE, NLM_F_DUMP, &rt, sizeof(rt), -1, rule_cb, r);

	return ret == -NLE_OPNOTSUPP ? 0 : ret;
}

/* the legacy iptables tables instantiated in the thread's namespace */
static void xtables(struct ns_read *r)
{
	static const char *const files[] = { "/proc/thread-self/net/ip_tables_names",
					     "/proc/thread-self/net/ip6_tables_names" };

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char *buf = NULL;
		size_t len;

		if (!read_file_at(AT_FDCWD, files[i], &buf, &len) && len) {
			char *nl = strchr(buf, '\n');

			if (nl)
				*nl = 0;
			refuse(r,
			       "the %s table '%s' (a firewall of its own: kupdate does not "
			       "make its rules again yet)",
			       i ? "ip6tables" : "iptables", buf);
		}
		free(buf);
	}
}

static void *read_thread(void *arg)
{
	struct ns_read *r = arg;
	struct nl_sock *sk;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct ifaddrmsg ifa = { .ifa_family = AF_UNSPEC };
	struct rtmsg rt = { .rtm_family = AF_UNSPEC };
	struct rtgenmsg g = { .rtgen_family = AF_UNSPEC };

	sk = rt_open(NETLINK_ROUTE);
	if (!sk) {
		r->err = -EIO;
		return NULL;
	}
	r->other_nsid = -1;
	if (ask(sk, RTM_GETLINK, NLM_F_DUMP, &ifi, sizeof(ifi), -1, link_cb, r) ||
	    ask(sk, RTM_GETADDR, NLM_F_DUMP, &ifa, sizeof(ifa), -1, addr_cb, r) ||
	    ask(sk, RTM_GETROUTE, NLM_F_DUMP, &rt, sizeof(rt), -1, route_cb, r) ||
	    (!r->want_index && ask_rules(sk, r)) ||
	    (r->other_fd >= 0 && ask(sk, RTM_GETNSID, 0, &g, sizeof(g), r->other_fd, nsid_cb, r)))
		r->err = r->err ? r->err : -EIO;
	nl_socket_free(sk);
	if (r->err || r->want_index)
		return NULL;
	/* its firewall */
	sk = rt_open(NETLINK_NETFILTER);
	if (sk) {
		struct nfgenmsg nf = { .nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0 };

		if (ask(sk, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE, NLM_F_DUMP, &nf,
			sizeof(nf), -1, table_cb, r))
			r->err = -EIO;
		nl_socket_free(sk);
	}
	xtables(r);
	return NULL;
}

static void ns_read_free(struct ns_read *r)
{
	for (size_t i = 0; i < r->nr_addrs; i++)
		if (r->addrs[i])
			net_addr__free_unpacked(r->addrs[i], NULL);
	for (size_t i = 0; i < r->nr_routes; i++)
		if (r->routes[i])
			net_route__free_unpacked(r->routes[i], NULL);
	free(r->addrs);
	free(r->addr_if);
	free(r->routes);
	free(r->route_oif);
	free(r->links);
}

static const struct link *link_at(const struct ns_read *r, int index)
{
	for (size_t i = 0; i < r->nr_links; i++)
		if (r->links[i].index == index)
			return &r->links[i];
	return NULL;
}

static char *addr_str(const NetAddr *a, char *buf, size_t len)
{
	char s[INET6_ADDRSTRLEN] = "?";

	if (a->local.len == (a->family == AF_INET ? 4u : 16u))
		inet_ntop(a->family, a->local.data, s, sizeof(s));
	snprintf(buf, len, "%s/%u", s, a->prefix_len);
	return buf;
}

/* l's description, its addresses and routes moved from r (taken: NULL left) */
static NetLink *make_link(const struct link *l, struct ns_read *r)
{
	NetLink *n = calloc(1, sizeof(*n));
	size_t na = 0, nr = 0;

	if (!n)
		return NULL;
	net_link__init(n);
	n->name = xstrdup(l->name);
	n->kind = xstrdup(l->kind);
	n->has_mtu = n->has_up = 1;
	n->mtu = l->mtu;
	n->up = !!(l->flags & IFF_UP);
	n->mac.data = malloc(l->mac_len ? l->mac_len : 1);
	if (!n->name || !n->kind || !n->mac.data) {
		net_link__free_unpacked(n, NULL);
		return NULL;
	}
	memcpy(n->mac.data, l->mac, l->mac_len);
	n->mac.len = l->mac_len;
	n->has_mac = 1;
	for (size_t i = 0; i < r->nr_addrs; i++)
		na += r->addr_if[i] == l->index;
	for (size_t i = 0; i < r->nr_routes; i++)
		nr += r->route_oif[i] == l->index;
	n->addrs = calloc(na + 1, sizeof(*n->addrs));
	n->routes = calloc(nr + 1, sizeof(*n->routes));
	if (!n->addrs || !n->routes) {
		net_link__free_unpacked(n, NULL);
		return NULL;
	}
	for (size_t i = 0; i < r->nr_addrs; i++)
		if (r->addr_if[i] == l->index) {
			n->addrs[n->n_addrs++] = r->addrs[i];
			r->addrs[i] = NULL;
		}
	for (size_t i = 0; i < r->nr_routes; i++)
		if (r->route_oif[i] == l->index) {
			n->routes[n->n_routes++] = r->routes[i];
			r->routes[i] = NULL;
		}
	return n;
}

static bool lo_default(const NetAddr *a)
{
	static const uint8_t v4[4] = { 127, 0, 0, 1 }, v6[16] = { [15] = 1 };

	return !a->has_peer && !a->has_valid_lft &&
	       ((a->family == AF_INET && a->prefix_len == 8 && a->local.len == 4 &&
		 !memcmp(a->local.data, v4, 4)) ||
		(a->family == AF_INET6 && a->prefix_len == 128 && a->local.len == 16 &&
		 !memcmp(a->local.data, v6, 16)));
}

struct made_links {
	NetLink **v;
	size_t n;
};

/* A device the kernel makes in every new network namespace itself: the
 * fallback tunnel of a tunnel driver built in or loaded (sit0, tunl0,
 * ip6tnl0, gre0...), with no configuration of the namespace's own on it
 * (down, no address, no route): the namespace made again has it again,
 * from the kernel, as long as the driver is there (with
 * net.core.fb_tunnels_only_for_init_net off, the default) */
static bool kernel_fallback(const struct link *l, const struct ns_read *in)
{
	static const struct {
		const char *kind, *name;
	} fb[] = { { "sit", "sit0" },	    { "ipip", "tunl0" },     { "ip6tnl", "ip6tnl0" },
		   { "gre", "gre0" },	    { "gretap", "gretap0" }, { "erspan", "erspan0" },
		   { "ip6gre", "ip6gre0" }, { "vti", "ip_vti0" },    { "vti6", "ip6_vti0" } };
	bool named = false;

	for (size_t i = 0; i < ARRAY_SIZE(fb) && !named; i++)
		named = !strcmp(l->kind, fb[i].kind) && !strcmp(l->name, fb[i].name);
	if (!named || (l->flags & IFF_UP))
		return false;
	for (size_t k = 0; k < in->nr_addrs; k++)
		if (in->addr_if[k] == l->index)
			return false;
	for (size_t k = 0; k < in->nr_routes; k++)
		if (in->route_oif[k] == l->index)
			return false;
	return true;
}

/* the checks and the records of the namespace's own side */
static int inner_links(struct cr_proc *p, struct ns_read *in, struct made_links *out)
{
	char a[64];

	for (size_t i = 0; i < in->nr_links; i++) {
		const struct link *l = &in->links[i];

		if (l->type == ARPHRD_LOOPBACK) {
			p->made_lo_up = l->flags & IFF_UP;
			for (size_t k = 0; k < in->nr_addrs; k++)
				if (in->addr_if[k] == l->index && !lo_default(in->addrs[k]))
					refuse(in, "the address %s on its loopback",
					       addr_str(in->addrs[k], a, sizeof(a)));
			for (size_t k = 0; k < in->nr_routes; k++)
				if (in->route_oif[k] == l->index)
					refuse(in, "a route through its loopback");
			continue;
		}
		if (kernel_fallback(l, in))
			continue;
		if (strcmp(l->kind, "veth") || l->peer_nsid < 0 || l->peer_nsid != in->other_nsid)
			refuse(in,
			       "the interface %s (%s%s): kupdate makes again only its "
			       "loopback and veth pairs to its parent's network namespace",
			       l->name, l->kind[0] ? l->kind : "no kind",
			       !strcmp(l->kind, "veth") ? ", whose other end is elsewhere" : "");
		else if (l->master)
			refuse(in, "the interface %s on a bridge or bond of its own", l->name);
		if (in->why[0])
			return 0;
		out->v = xrealloc_array(out->v, out->n + 1, sizeof(*out->v));
		if (!out->v || !(out->v[out->n] = make_link(l, in)))
			return -ENOMEM;
		out->n++;
	}
	for (size_t k = 0; k < in->nr_routes; k++)
		if (in->routes[k])
			refuse(in, "a route through no interface of its own (type %u)",
			       in->routes[k]->type);
	return 0;
}

int netlinks_dump(struct cr_proc *p, pid_t parent)
{
	struct ns_read in = { .err = 0 };
	struct made_links ml = { NULL, 0 };
	char path[64];
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", parent);
	in.other_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (in.other_fd < 0)
		return pr_errno("pid %d: cannot open its network namespace", parent);
	ret = proc_run_in_ns(p->pid, "net", read_thread, &in);
	close(in.other_fd);
	if (!ret && in.err) {
		pr_err("pid %d: cannot read the interfaces of its network namespace: %s", p->pid,
		       strerror(-in.err));
		ret = in.err;
	}
	if (!ret)
		ret = inner_links(p, &in, &ml);
	/* each veth's other end, in the parent's namespace */
	for (size_t i = 0; i < ml.n && !ret && !in.why[0]; i++) {
		const struct link *l = NULL;
		struct ns_read out = { .other_fd = -1 };

		for (size_t k = 0; k < in.nr_links && !l; k++)
			if (!strcmp(in.links[k].name, ml.v[i]->name))
				l = &in.links[k];
		out.want_index = l->peer_index;
		ret = proc_run_in_ns(parent, "net", read_thread, &out);
		if (!ret && out.err) {
			pr_err("pid %d: cannot read the interfaces of its network namespace: %s",
			       parent, strerror(-out.err));
			ret = out.err;
		}
		if (!ret) {
			const struct link *o = link_at(&out, l->peer_index);

			if (!o || strcmp(o->kind, "veth") || o->peer_index != l->index)
				refuse(&in,
				       "the veth %s, whose other end pid %d's namespace does "
				       "not show",
				       l->name, parent);
			else if (o->master)
				refuse(&in,
				       "the veth %s, whose other end %s is on a bridge "
				       "(not made again yet)",
				       l->name, o->name);
			else if (out.why[0])
				refuse(&in, "the other end %s of its veth %s: %s", o->name, l->name,
				       out.why);
			else if (!(ml.v[i]->peer = make_link(o, &out)))
				ret = -ENOMEM;
		}
		ns_read_free(&out);
	}
	if (!ret && in.why[0]) {
		pr_err("pid %d (%s) made a network namespace of its own with %s", p->pid,
		       p->stat.comm, in.why);
		ret = -EOPNOTSUPP;
	}
	ns_read_free(&in);
	if (ret) {
		for (size_t i = 0; i < ml.n; i++)
			net_link__free_unpacked(ml.v[i], NULL);
		free(ml.v);
		return ret;
	}
	p->made_links = ml.v;
	p->nr_made_links = ml.n;
	return 0;
}

/* the veth ends named in a parent's namespace, deleted there (the other
 * ends go with them) */
struct cut {
	struct cr_proc *p;
	int err;
};

static void *cut_thread(void *arg)
{
	struct cut *c = arg;
	struct nl_sock *sk = rt_open(NETLINK_ROUTE);

	for (size_t i = 0; sk && i < c->p->nr_made_links; i++) {
		struct nl_msg *m = nlmsg_alloc_simple(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
		struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
		int e;

		if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) ||
		    nla_put_string(m, IFLA_IFNAME, c->p->made_links[i]->peer->name)) {
			nlmsg_free(m);
			e = -NLE_NOMEM;
		} else
			e = rt_do(sk, m);
		if (e < 0) {
			pr_warn("pid %d: cannot delete its veth's end %s: %s", c->p->pid,
				c->p->made_links[i]->peer->name, nl_geterror(e));
			c->err = -EIO;
		}
	}
	if (!sk)
		c->err = -EIO;
	else
		nl_socket_free(sk);
	return NULL;
}

void netlinks_cut(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		struct cut c = { .p = p };

		if (!p->nr_made_links)
			continue;
		if (proc_run_in_ns(p->parent ? p->parent->pid : ctx->procs[0]->pid, "net",
				   cut_thread, &c) ||
		    c.err)
			pr_warn("pid %d: its veth pairs stay until its network namespace goes: a "
				"peer's segment meanwhile may be answered with a reset",
				p->pid);
	}
}

void netlinks_free(struct cr_proc *p)
{
	for (size_t i = 0; i < p->nr_made_links; i++)
		net_link__free_unpacked(p->made_links[i], NULL);
	free(p->made_links);
	p->made_links = NULL;
	p->nr_made_links = 0;
}

/* ---------------------------------------------------------- restore */

static int index_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nh = nlmsg_hdr(msg);

	if (nh->nlmsg_type == RTM_NEWLINK)
		*(int *)arg = ((struct ifinfomsg *)nlmsg_data(nh))->ifi_index;
	return NL_OK;
}

/* the index of the interface name in sk's namespace; 0 if none */
static int link_index(struct nl_sock *sk, const char *name)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST);
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	int index = 0;

	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) ||
	    nla_put_string(m, IFLA_IFNAME, name)) {
		nlmsg_free(m);
		return 0;
	}
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, index_cb, &index);
	if (nl_send_auto(sk, m) >= 0)
		nl_recvmsgs_default(sk);
	nlmsg_free(m);
	return index;
}

/* the veth l, made from the inside (sk), its other end put into the
 * namespace parent_fd */
static int make_veth(struct nl_sock *sk, const NetLink *l, int parent_fd)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE |
								   NLM_F_EXCL | NLM_F_ACK);
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	const NetLink *p = l->peer;
	struct nlattr *info, *data, *peer;

	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) ||
	    nla_put_string(m, IFLA_IFNAME, l->name) ||
	    (l->has_mac && l->mac.len && nla_put(m, IFLA_ADDRESS, l->mac.len, l->mac.data)) ||
	    (l->has_mtu && nla_put_u32(m, IFLA_MTU, l->mtu)) ||
	    !(info = nla_nest_start(m, IFLA_LINKINFO)) ||
	    nla_put_string(m, IFLA_INFO_KIND, "veth") ||
	    !(data = nla_nest_start(m, IFLA_INFO_DATA)) ||
	    !(peer = nla_nest_start(m, VETH_INFO_PEER)) ||
	    nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) ||
	    nla_put_string(m, IFLA_IFNAME, p->name) ||
	    (p->has_mac && p->mac.len && nla_put(m, IFLA_ADDRESS, p->mac.len, p->mac.data)) ||
	    (p->has_mtu && nla_put_u32(m, IFLA_MTU, p->mtu)) ||
	    nla_put_u32(m, IFLA_NET_NS_FD, parent_fd)) {
		nlmsg_free(m);
		return -NLE_NOMEM;
	}
	nla_nest_end(m, peer);
	nla_nest_end(m, data);
	nla_nest_end(m, info);
	return rt_do(sk, m);
}

static int put_addr(struct nl_sock *sk, int index, const NetAddr *a, uint32_t elapsed)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_CREATE |
								   NLM_F_EXCL | NLM_F_ACK);
	struct ifaddrmsg ifa = { .ifa_family = a->family,
				 .ifa_prefixlen = a->prefix_len,
				 .ifa_flags = a->flags & 0xff,
				 .ifa_scope = a->scope,
				 .ifa_index = index };
	const ProtobufCBinaryData *to = a->has_peer ? &a->peer : &a->local;
	/* a lease's lifetimes go on from where they were at the dump */
	struct ifa_cacheinfo ci = {
		.ifa_prefered = a->preferred_lft > elapsed ? a->preferred_lft - elapsed : 0,
		.ifa_valid = a->valid_lft - elapsed,
	};

	if (!m || nlmsg_append(m, &ifa, sizeof(ifa), NLMSG_ALIGNTO) ||
	    nla_put(m, IFA_LOCAL, a->local.len, a->local.data) ||
	    nla_put(m, IFA_ADDRESS, to->len, to->data) ||
	    (a->has_broadcast && nla_put(m, IFA_BROADCAST, a->broadcast.len, a->broadcast.data)) ||
	    (a->label && nla_put_string(m, IFA_LABEL, a->label)) ||
	    nla_put_u32(m, IFA_FLAGS, a->flags) ||
	    (a->has_valid_lft && nla_put(m, IFA_CACHEINFO, sizeof(ci), &ci))) {
		nlmsg_free(m);
		return -NLE_NOMEM;
	}
	return rt_do(sk, m);
}

static int set_up(struct nl_sock *sk, int index)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC,
				 .ifi_index = index,
				 .ifi_flags = IFF_UP,
				 .ifi_change = IFF_UP };

	if (!m || nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO)) {
		nlmsg_free(m);
		return -NLE_NOMEM;
	}
	return rt_do(sk, m);
}

static int put_route(struct nl_sock *sk, int index, const NetRoute *r)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE |
								    NLM_F_EXCL | NLM_F_ACK);
	struct rtmsg rt = { .rtm_family = r->family,
			    .rtm_dst_len = r->dst_len,
			    .rtm_table = RT_TABLE_MAIN,
			    .rtm_protocol = r->protocol,
			    .rtm_scope = r->scope,
			    .rtm_type = r->type,
			    .rtm_flags = r->rt_flags };

	if (!m || nlmsg_append(m, &rt, sizeof(rt), NLMSG_ALIGNTO) ||
	    (r->has_dst && nla_put(m, RTA_DST, r->dst.len, r->dst.data)) ||
	    (r->has_gateway && nla_put(m, RTA_GATEWAY, r->gateway.len, r->gateway.data)) ||
	    (r->has_prefsrc && nla_put(m, RTA_PREFSRC, r->prefsrc.len, r->prefsrc.data)) ||
	    (r->has_priority && nla_put_u32(m, RTA_PRIORITY, r->priority)) ||
	    (r->has_metrics && nla_put(m, RTA_METRICS, r->metrics.len, r->metrics.data)) ||
	    (r->has_pref && nla_put_u8(m, RTA_PREF, r->pref)) || nla_put_u32(m, RTA_OIF, index)) {
		nlmsg_free(m);
		return -NLE_NOMEM;
	}
	return rt_do(sk, m);
}

/* l's addresses, its state, its routes, through sk; side names it;
 * elapsed: seconds since the dump */
static int configure(struct nl_sock *sk, const NetLink *l, pid_t pid, const char *side,
		     uint32_t elapsed)
{
	int index = link_index(sk, l->name), ret = 0;
	char a[64];

	if (!index) {
		pr_err("pid %d: its veth's end %s is not in %s namespace once made", pid, l->name,
		       side);
		return -ENODEV;
	}
	for (size_t i = 0; i < l->n_addrs; i++) {
		if (l->addrs[i]->has_valid_lft && l->addrs[i]->valid_lft <= elapsed) {
			pr_warn("pid %d: the lease of %s's address %s in %s namespace ran out "
				"since the dump: it is not made again",
				pid, l->name, addr_str(l->addrs[i], a, sizeof(a)), side);
			continue;
		}
		ret = put_addr(sk, index, l->addrs[i], elapsed);
		if (ret < 0) {
			pr_err("pid %d: cannot give %s in %s namespace the address %s: %s", pid,
			       l->name, side, addr_str(l->addrs[i], a, sizeof(a)),
			       nl_geterror(ret));
			return -EIO;
		}
	}
	if (l->up && (ret = set_up(sk, index)) < 0) {
		pr_err("pid %d: cannot bring %s up in %s namespace: %s", pid, l->name, side,
		       nl_geterror(ret));
		return -EIO;
	}
	for (size_t i = 0; i < l->n_routes; i++) {
		const NetRoute *r = l->routes[i];

		ret = put_route(sk, index, r);
		if (ret < 0) {
			char d[INET6_ADDRSTRLEN] = "default";

			if (r->has_dst && r->dst.len == (r->family == AF_INET ? 4u : 16u))
				inet_ntop(r->family, r->dst.data, d, sizeof(d));
			pr_err("pid %d: cannot add the route to %s/%u through %s in %s namespace: "
			       "%s",
			       pid, d, r->dst_len, l->name, side, nl_geterror(ret));
			return -EIO;
		}
	}
	return 0;
}

int netlinks_restore_prepare(const NsMade *m, struct netlinks_rst *r)
{
	r->parent_fd = -1;
	r->parent = NULL;
	if (!m || !m->n_links)
		return 0;
	r->parent_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (r->parent_fd < 0)
		return pr_errno("cannot open the network namespace the tree's container is born "
				"in");
	r->parent = rt_open(NETLINK_ROUTE);
	if (!r->parent) {
		close(r->parent_fd);
		r->parent_fd = -1;
		return pr_err("cannot open a netlink socket in the network namespace the tree's "
			      "container is born in"),
		       -EIO;
	}
	return 0;
}

void netlinks_restore_done(struct netlinks_rst *r)
{
	if (r->parent)
		nl_socket_free(r->parent);
	if (r->parent_fd >= 0)
		close(r->parent_fd);
	r->parent = NULL;
	r->parent_fd = -1;
}

int netlinks_restore(const NsMade *m, struct netlinks_rst *r, pid_t pid, uint32_t elapsed)
{
	struct nl_sock *in;
	int ret = 0;

	if (!m->n_links)
		return 0;
	in = rt_open(NETLINK_ROUTE);
	if (!in)
		return pr_err("pid %d: cannot open a netlink socket in its network namespace", pid),
		       -EIO;
	for (size_t i = 0; i < m->n_links && !ret; i++) {
		const NetLink *l = m->links[i];
		int e;

		if (strcmp(l->kind, "veth") || !l->peer) {
			pr_err("image core-%d.img is damaged: its network namespace had an "
			       "interface %s of kind %s",
			       pid, l->name, l->kind);
			ret = -EINVAL;
			break;
		}
		/* a dying namespace of the tree's (its dump just killed it)
		 * lets go of its veth within milliseconds, in a kernel worker */
		e = make_veth(in, l, r->parent_fd);
		for (int ms = 0; e == -NLE_EXIST && ms < VETH_GONE_MS; ms += 20) {
			usleep(20000);
			e = make_veth(in, l, r->parent_fd);
		}
		if (e < 0) {
			pr_err("pid %d: cannot make its veth %s again, whose other end %s lies in "
			       "its parent's network namespace: %s%s",
			       pid, l->name, l->peer->name, nl_geterror(e),
			       e == -NLE_EXIST ? " (an interface of one of those names is there "
						 "already: the container runs still, or another "
						 "took the name)"
					       : "");
			ret = -EIO;
			break;
		}
		ret = configure(in, l, pid, "its own", elapsed);
		if (!ret)
			ret = configure(r->parent, l->peer, pid, "its parent's", elapsed);
	}
	nl_socket_free(in);
	return ret;
}
