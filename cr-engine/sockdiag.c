/* Socket discovery through netlink sock_diag (libnl-3): one dump of every
 * unix, TCP and UDP socket of the current network namespace, indexed by
 * inode, before the sockets of the tree are looked at one by one. */
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>

#include "log.h"
#include "sockdiag.h"
#include "util.h"

struct collect {
	struct sk_table *t;
	int family, protocol;
	int err;
};

static struct sk_diag *new_entry(struct sk_table *t)
{
	struct sk_diag *nv;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 256;
		nv = realloc(t->v, t->cap * sizeof(*nv));
		if (!nv)
			return NULL;
		t->v = nv;
	}
	memset(&t->v[t->n], 0, sizeof(t->v[0]));
	return &t->v[t->n++];
}

static int unix_cb(struct nl_msg *msg, void *arg)
{
	struct collect *c = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct unix_diag_msg *m = nlmsg_data(nh);
	struct nlattr *tb[UNIX_DIAG_MAX + 1];
	struct sk_diag *d;

	if (nlmsg_parse(nh, sizeof(*m), tb, UNIX_DIAG_MAX, NULL) < 0)
		return NL_SKIP;
	d = new_entry(c->t);
	if (!d) {
		c->err = -ENOMEM;
		return NL_STOP;
	}
	d->ino = m->udiag_ino;
	d->family = AF_UNIX;
	d->type = m->udiag_type;
	d->state = m->udiag_state;
	if (tb[UNIX_DIAG_NAME]) {
		int len = MIN(nla_len(tb[UNIX_DIAG_NAME]), (int)sizeof(d->name));

		memcpy(d->name, nla_data(tb[UNIX_DIAG_NAME]), len);
		d->name_len = len;
	}
	if (tb[UNIX_DIAG_VFS]) {
		struct unix_diag_vfs *v = nla_data(tb[UNIX_DIAG_VFS]);

		d->vfs_ino = v->udiag_vfs_ino;
		d->vfs_dev = v->udiag_vfs_dev;
	}
	if (tb[UNIX_DIAG_PEER])
		d->peer = nla_get_u32(tb[UNIX_DIAG_PEER]);
	if (tb[UNIX_DIAG_RQLEN]) {
		struct unix_diag_rqlen *q = nla_data(tb[UNIX_DIAG_RQLEN]);

		d->rqlen = q->udiag_rqueue;
		d->wqlen = q->udiag_wqueue;
	}
	if (tb[UNIX_DIAG_SHUTDOWN])
		d->shutdown = nla_get_u8(tb[UNIX_DIAG_SHUTDOWN]);
	if (tb[UNIX_DIAG_ICONS]) {
		int n = nla_len(tb[UNIX_DIAG_ICONS]) / 4;

		d->icons = malloc(sizeof(uint32_t) * (n ? n : 1));
		if (!d->icons) {
			c->err = -ENOMEM;
			return NL_STOP;
		}
		memcpy(d->icons, nla_data(tb[UNIX_DIAG_ICONS]), n * 4);
		d->nr_icons = n;
	}
	return NL_OK;
}

static int inet_cb(struct nl_msg *msg, void *arg)
{
	struct collect *c = arg;
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct inet_diag_msg *m = nlmsg_data(nh);
	struct nlattr *tb[INET_DIAG_MAX + 1];
	struct sk_diag *d;

	if (nlmsg_parse(nh, sizeof(*m), tb, INET_DIAG_MAX, NULL) < 0)
		return NL_SKIP;
	if (!m->idiag_inode)
		return NL_OK; /* TIME_WAIT and request sockets have no inode */
	d = new_entry(c->t);
	if (!d) {
		c->err = -ENOMEM;
		return NL_STOP;
	}
	d->ino = m->idiag_inode;
	d->family = m->idiag_family;
	d->protocol = c->protocol;
	d->type = c->protocol == IPPROTO_TCP ? SOCK_STREAM : SOCK_DGRAM;
	d->state = m->idiag_state;
	d->src_port = ntohs(m->id.idiag_sport);
	d->dst_port = ntohs(m->id.idiag_dport);
	memcpy(d->src, m->id.idiag_src, 16);
	memcpy(d->dst, m->id.idiag_dst, 16);
	d->rqlen = m->idiag_rqueue;
	d->wqlen = m->idiag_wqueue;
	if (tb[INET_DIAG_SHUTDOWN])
		d->shutdown = nla_get_u8(tb[INET_DIAG_SHUTDOWN]);
	return NL_OK;
}

static int dump_family(struct nl_sock *sk, struct collect *c)
{
	int ret;

	if (c->family == AF_UNIX) {
		struct unix_diag_req req;

		memset(&req, 0, sizeof(req));
		req.sdiag_family = AF_UNIX;
		req.udiag_states = ~0U;
		req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_PEER |
				 UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN;
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, unix_cb, c);
		ret = nl_send_simple(sk, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP | NLM_F_REQUEST, &req,
				     sizeof(req));
	} else {
		struct inet_diag_req_v2 req;

		memset(&req, 0, sizeof(req));
		req.sdiag_family = c->family;
		req.sdiag_protocol = c->protocol;
		req.idiag_states = ~0U;
		req.idiag_ext = 1 << (INET_DIAG_SHUTDOWN - 1);
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, inet_cb, c);
		ret = nl_send_simple(sk, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP | NLM_F_REQUEST, &req,
				     sizeof(req));
	}
	if (ret < 0)
		return ret;
	ret = nl_recvmsgs_default(sk);
	if (c->err)
		return c->err;
	return ret < 0 ? ret : 0;
}

static int cmp_ino(const void *a, const void *b)
{
	const struct sk_diag *x = a, *y = b;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

int sockdiag_collect(struct sk_table *t)
{
	static const struct {
		int family, protocol;
		bool needed;
	} what[] = {
		{ AF_UNIX, 0, true },
		{ AF_INET, IPPROTO_TCP, true },
		{ AF_INET6, IPPROTO_TCP, false },
		{ AF_INET, IPPROTO_UDP, false },
		{ AF_INET6, IPPROTO_UDP, false },
	};
	struct nl_sock *sk;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	ret = nl_connect(sk, NETLINK_SOCK_DIAG);
	if (ret < 0) {
		pr_err("cannot open a sock_diag netlink socket: %s", nl_geterror(ret));
		nl_socket_free(sk);
		return -EIO;
	}
	for (size_t i = 0; i < ARRAY_SIZE(what); i++) {
		struct collect c = { t, what[i].family, what[i].protocol, 0 };

		ret = dump_family(sk, &c);
		if (ret && what[i].needed) {
			pr_err("sock_diag dump of family %d protocol %d failed: %s (is the kernel "
			       "built with UNIX_DIAG and INET_DIAG?)",
			       what[i].family, what[i].protocol,
			       ret < 0 && ret > -64 ? nl_geterror(ret) : strerror(-ret));
			break;
		}
		if (ret)
			pr_debug("sock_diag: family %d protocol %d unavailable", what[i].family,
				 what[i].protocol);
		ret = 0;
	}
	nl_socket_free(sk);
	if (ret)
		return -EIO;
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_ino);
	return 0;
}

struct sk_diag *sockdiag_find(const struct sk_table *t, uint32_t ino)
{
	struct sk_diag key = { .ino = ino };

	return bsearch(&key, t->v, t->n, sizeof(*t->v), cmp_ino);
}

void sockdiag_free(struct sk_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].icons);
	free(t->v);
	memset(t, 0, sizeof(*t));
}
