/* A tree in a network namespace of its own (a systemd unit's
 * PrivateNetwork=, NetworkNamespacePath=, JoinsNamespaceOf=): the part of
 * namespaces.c that is the network's.
 *
 * Dump: the dumping thread enters the tree's network namespace (a thread
 * may: its nsproxy is its own) for as long as it looks at the tree, in
 * cr_dump_begin() and again in cr_dump_end(): the socket diagnostics, the
 * network lock, the probes of a tree that goes on, /proc/thread-self/net
 * are then the tree's.  Recorded: the namespace's interfaces, up or down,
 * and their addresses (link-local IPv6 ones aside: they follow a link's
 * hardware address), which the restore's namespace must have the same.
 * The unix sockets of kupdate's namespace are looked at too: a unit's
 * stdout stream to journald is made by systemd there, outside the unit's.
 * Every established TCP connection's peer must be a socket of the tree:
 * one held by a process outside it (another unit joined to the namespace)
 * would meet a closed port while one of the two is restored and not the
 * other, and be reset.
 *
 * Restore: the namespace of the given process is entered as the others
 * (namespaces.c), its interfaces checked first.  Its network lock, if a
 * dump left one there (a namespace that outlived the tree), is lifted in
 * it (netlock.c follows the calling thread's namespace). */
#include <arpa/inet.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "images/namespaces.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "netlock.h"
#include "proc.h"
#include "sockdiag.h"
#include "util.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "prefix length" of a netmask */
static int mask_len(const struct sockaddr *m)
{
	const uint8_t *b = m->sa_family == AF_INET
				   ? (const uint8_t *)&((const struct sockaddr_in *)m)->sin_addr
				   : ((const struct sockaddr_in6 *)m)->sin6_addr.s6_addr;
	int n = m->sa_family == AF_INET ? 4 : 16, len = 0;

	for (int i = 0; i < n; i++)
		len += __builtin_popcount(b[i]);
	return len;
}

/* The interfaces of the calling thread's network namespace, sorted:
 * "NAME up" or "NAME down", "NAME ADDR/LEN" */
int netns_read_addrs(char ***out, size_t *nr)
{
	struct ifaddrs *ifa = NULL;
	char **v = NULL;
	size_t n = 0;
	int ret = 0;

	*out = NULL;
	*nr = 0;
	if (getifaddrs(&ifa))
		return -errno;
	for (struct ifaddrs *i = ifa; i && !ret; i = i->ifa_next) {
		char line[IF_NAMESIZE + INET6_ADDRSTRLEN + 16], a[INET6_ADDRSTRLEN];
		const struct sockaddr *s = i->ifa_addr;

		snprintf(line, sizeof(line), "%s %s", i->ifa_name,
			 (i->ifa_flags & IFF_UP) ? "up" : "down");
		ret = strv_add(&v, &n, line);
		if (ret || !s || (s->sa_family != AF_INET && s->sa_family != AF_INET6))
			continue;
		if (s->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)s)->sin6_addr))
			continue;
		inet_ntop(s->sa_family,
			  s->sa_family == AF_INET
				  ? (const void *)&((const struct sockaddr_in *)s)->sin_addr
				  : (const void *)&((const struct sockaddr_in6 *)s)->sin6_addr,
			  a, sizeof(a));
		snprintf(line, sizeof(line), "%s %s/%d", i->ifa_name, a,
			 i->ifa_netmask ? mask_len(i->ifa_netmask) : 0);
		ret = strv_add(&v, &n, line);
	}
	freeifaddrs(ifa);
	if (ret) {
		strv_free(v, n);
		return ret;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	*nr = n;
	return 0;
}

/* ------------------------------------------------------------ dump */

/* The dumping thread into the tree's network namespace, kupdate's kept */
int netns_enter(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	if (!ns || ns->net_fd < 0 || ns->net_saved >= 0)
		return 0;
	ns->net_saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns->net_saved < 0 || setns(ns->net_fd, CLONE_NEWNET)) {
		int ret =
			pr_errno("pid %d: cannot enter its network namespace", ctx->procs[0]->pid);

		if (ns->net_saved >= 0)
			close(ns->net_saved);
		ns->net_saved = -1;
		return ret;
	}
	netlock_in_tree_netns(true);
	return 0;
}

void netns_leave(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	if (!ns || ns->net_saved < 0)
		return;
	if (setns(ns->net_saved, CLONE_NEWNET))
		pr_perror("cannot go back to kupdate's own network namespace");
	close(ns->net_saved);
	ns->net_saved = -1;
	netlock_in_tree_netns(false);
}

int netns_dump(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;
	pid_t root = ctx->procs[0]->pid;
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", root);
	ns->net_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ns->net_fd < 0)
		return pr_errno("pid %d: cannot open its network namespace", root);
	ret = netns_enter(ctx);
	if (!ret)
		ret = netns_read_addrs(&ns->net_addrs, &ns->nr_net_addrs);
	if (ret)
		pr_err("pid %d: cannot read the interfaces of its network namespace: %s", root,
		       strerror(-ret));
	return ret;
}

int netns_collect_outer(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;
	int ret;

	if (!ns || ns->net_saved < 0)
		return 0;
	if (setns(ns->net_saved, CLONE_NEWNET))
		return pr_errno("cannot go back to kupdate's own network namespace");
	ret = sockdiag_merge_unix(&ctx->sk);
	if (setns(ns->net_fd, CLONE_NEWNET)) {
		ret = pr_errno("pid %d: cannot enter its network namespace again",
			       ctx->procs[0]->pid);
	}
	return ret;
}

static bool peer_of(const struct cr_conn *a, const struct cr_conn *b)
{
	return a->family == b->family && a->lport == b->rport && a->rport == b->lport &&
	       !memcmp(a->laddr, b->raddr, 16) && !memcmp(a->raddr, b->laddr, 16);
}

int netns_conn(struct cr_dump_ctx *ctx, const struct cr_conn *c, pid_t pid, int fd)
{
	struct cr_ns *ns = ctx->ns;
	struct ns_conn *v;

	if (!ns || ns->net_fd < 0)
		return 0;
	v = xrealloc_array(ns->conns, ns->nr_conns + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	ns->conns = v;
	v[ns->nr_conns++] = (struct ns_conn){ .c = *c, .pid = pid, .fd = fd };
	return 0;
}

int netns_check_peers(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	for (size_t i = 0; ns && i < ns->nr_conns; i++) {
		const struct ns_conn *h = &ns->conns[i];
		char l[INET6_ADDRSTRLEN], r[INET6_ADDRSTRLEN];
		bool found = false;

		for (size_t j = 0; j < ns->nr_conns && !found; j++)
			found = j != i && peer_of(&h->c, &ns->conns[j].c);
		if (found)
			continue;
		inet_ntop(h->c.family, h->c.laddr, l, sizeof(l));
		inet_ntop(h->c.family, h->c.raddr, r, sizeof(r));
		pr_err("pid %d: fd %d: the TCP connection %s:%u -> %s:%u in the tree's own "
		       "network namespace has its peer outside the tree (a process of another "
		       "unit joined to the namespace, or another host): kupdate cannot hold it "
		       "while the namespace is made again; dump the peer's unit with it in one "
		       "tree, or close the connection",
		       h->pid, h->fd, l, h->c.lport, r, h->c.rport);
		return -EOPNOTSUPP;
	}
	return 0;
}

struct addrs_read {
	char **v;
	size_t n;
	int err;
};

static void *addrs_thread(void *arg)
{
	struct addrs_read *r = arg;

	r->err = netns_read_addrs(&r->v, &r->n);
	return NULL;
}

/* netns_read_addrs in pid's network namespace, into r */
static int addrs_of(pid_t pid, struct addrs_read *r)
{
	int ret = proc_run_in_ns(pid, "net", addrs_thread, r);

	if (!ret)
		ret = r->err;
	if (ret)
		pr_err("pid %d: cannot read the interfaces of its network namespace: %s", pid,
		       strerror(-ret));
	return ret;
}

/* ------------------------------------------- a namespace made inside */

struct cr_proc *netns_maker(struct cr_proc *p)
{
	for (; p; p = p->parent)
		if (p->made_ns & CLONE_NEWNET)
			return p;
	return NULL;
}

/* the mount that pins network namespace ino (ip netns add, podman's
 * netavark: /run/netns/NAME), into buf; false: none in kupdate's */
static bool pinned_at(uint64_t ino, char *buf, size_t len)
{
	struct mount_table t;
	char want[48];
	bool found = false;

	snprintf(want, sizeof(want), "net:[%llu]", (unsigned long long)ino);
	if (mount_table_read(NULL, &t))
		return false;
	for (size_t i = 0; i < t.n && !found; i++)
		if (!strcmp(t.e[i].fstype, "nsfs") && !strcmp(t.e[i].root, want)) {
			snprintf(buf, len, "%s", t.e[i].mp);
			found = true;
		}
	mount_table_free(&t);
	return found;
}

int netns_made(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char path[64], pin[PATH_MAX];
	struct stat st;
	pid_t out;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", p->pid);
	if (stat(path, &st))
		return pr_errno("pid %d: cannot look at its network namespace", p->pid);
	if (pinned_at(st.st_ino, pin, sizeof(pin))) {
		pr_err("pid %d (%s) joined a network namespace pinned at %s (made outside the "
		       "tree, as podman's netavark makes one); kupdate does not make it again "
		       "yet",
		       p->pid, p->stat.comm, pin);
		return -EOPNOTSUPP;
	}
	out = dump_ns_outsider(ctx, "net", &st);
	if (out) {
		pr_err("pid %d (%s) made a network namespace that pid %d, outside the tree, "
		       "lives in too; kupdate cannot make it again for both",
		       p->pid, p->stat.comm, out);
		return -EOPNOTSUPP;
	}
	/* its parent's: where its veth pairs lead */
	return netlinks_dump(p, p->parent ? p->parent->pid : ctx->procs[0]->pid);
}

struct merge_arg {
	struct sk_table *t;
	int err;
};

static void *merge_thread(void *arg)
{
	struct merge_arg *m = arg;

	m->err = sockdiag_merge(m->t);
	return NULL;
}

int netns_merge_made(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char path[64];
	struct stat st, self;
	struct merge_arg m = { .t = &ctx->sk };
	int ret;

	/* once a process: every socket of it comes here */
	if (ctx->merge_checked == p->pid)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", p->pid);
	if (stat(path, &st) || stat("/proc/thread-self/ns/net", &self))
		return pr_errno("pid %d: cannot look at its network namespace", p->pid);
	if (st.st_ino == self.st_ino && st.st_dev == self.st_dev) {
		ctx->merge_checked = p->pid;
		return 0;
	}
	for (size_t i = 0; i < ctx->nr_merged_net; i++)
		if (ctx->merged_net[i] == st.st_ino) {
			ctx->merge_checked = p->pid;
			return 0;
		}
	/* one a process of the tree made (netns_made) */
	if (!netns_maker(p)) {
		pr_err("pid %d lives in another network namespace; run kupdate inside it (for "
		       "example with ip netns exec, or nsenter --net)",
		       p->pid);
		return -EOPNOTSUPP;
	}
	ret = proc_run_in_ns(p->pid, "net", merge_thread, &m);
	if (!ret)
		ret = m.err;
	if (ret)
		return pr_err("pid %d: cannot list the sockets of its network namespace: %s",
			      p->pid, strerror(-ret)),
		       ret;
	ctx->merged_net =
		xrealloc_array(ctx->merged_net, ctx->nr_merged_net + 1, sizeof(*ctx->merged_net));
	if (!ctx->merged_net)
		return -ENOMEM;
	ctx->merged_net[ctx->nr_merged_net++] = st.st_ino;
	ctx->merge_checked = p->pid;
	return 0;
}

/* ------------------------------------------------------------ restore */

int netns_lo_up(void)
{
	struct ifreq ifr;
	int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = -1;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (sk >= 0 && !ioctl(sk, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(sk, SIOCSIFFLAGS, &ifr);
	}
	if (sk >= 0) {
		int err = errno;

		close(sk);
		errno = err;
	}
	return ret;
}

int netns_check(const NsEntry *e, pid_t pid)
{
	struct addrs_read r = { .err = 0 };
	int ret = addrs_of(pid, &r);

	if (ret)
		goto out;
	for (size_t i = 0; i < e->n_net_addrs && !ret; i++)
		if (!bsearch(&e->net_addrs[i], r.v, r.n, sizeof(char *), cmp_str)) {
			pr_err("the network namespace of pid %d lacks the tree's '%s' (interface "
			       "and state, or address): the namespace's configuration changed "
			       "since the dump",
			       pid, e->net_addrs[i]);
			ret = -ESTALE;
		}
	for (size_t i = 0; i < r.n && !ret; i++) {
		bool had = false;

		for (size_t j = 0; j < e->n_net_addrs && !had; j++)
			had = !strcmp(r.v[i], e->net_addrs[j]);
		if (!had) {
			pr_err("the network namespace of pid %d has '%s' (interface and state, or "
			       "address), the tree's had not: the namespace's configuration "
			       "changed "
			       "since the dump",
			       pid, r.v[i]);
			ret = -ESTALE;
		}
	}
out:
	strv_free(r.v, r.n);
	return ret;
}
