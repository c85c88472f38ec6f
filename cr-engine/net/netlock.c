/* The network lock: while a TCP connection is dumped and until it is
 * restored, its packets are dropped (nftables), so the peer only
 * retransmits and never meets a closed port that would answer with a
 * reset.
 *
 *   table inet kupdate
 *     set conn4 / conn6: remote addr . remote port . local addr . local port
 *     chain in  (hook input,  priority -300): from a locked peer -> drop
 *     chain out (hook output, priority -300): to a locked peer   -> drop
 *
 * The table lives in the network namespace kupdate runs in.  Elements are
 * added by the dump and removed by the restore (or by a failed dump).
 *
 * The table is set up, and elements are added and removed, with nftables'
 * netlink messages built here (put_setup, put_elems): a libnftables
 * command costs about 5 ms of CPU on the host (loading it and its five
 * libraries, its context, parser and cache), which an emulated guest
 * stretched to 0.1-0.5 s per unit, inside a dump's frozen window and in a
 * boot's restores.  Where the kernel refuses the messages, the same lock
 * is asked for by libnftables' text commands (`setup`, below); the unit
 * tests check that both make the same table. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "log.h"
#include "netlock.h"
#include "proc.h"
#include "util.h"

#define TABLE "inet kupdate"

bool addr_v4mapped(const uint8_t *a)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return !memcmp(a, pfx, 12);
}

bool conn_is_v4(const struct cr_conn *c)
{
	return c->family == AF_INET || (addr_v4mapped(c->raddr) && addr_v4mapped(c->laddr));
}

/* "R . rp . L . lp" and which set it belongs to */
static void element(const struct cr_conn *c, char *buf, size_t len, const char **set)
{
	char r[INET6_ADDRSTRLEN], l[INET6_ADDRSTRLEN];

	if (conn_is_v4(c)) {
		const uint8_t *ra = c->family == AF_INET ? c->raddr : c->raddr + 12;
		const uint8_t *la = c->family == AF_INET ? c->laddr : c->laddr + 12;

		inet_ntop(AF_INET, ra, r, sizeof(r));
		inet_ntop(AF_INET, la, l, sizeof(l));
		*set = "conn4";
	} else {
		inet_ntop(AF_INET6, c->raddr, r, sizeof(r));
		inet_ntop(AF_INET6, c->laddr, l, sizeof(l));
		*set = "conn6";
	}
	snprintf(buf, len, "%s . %u . %s . %u", r, c->rport, l, c->lport);
}

/* An element's key, as nftables lays out a concatenation: each field in
 * 4-byte words (a port: 2 bytes in network order, 2 of padding).  Returns
 * its length: 16 (conn4) or 40 (conn6). */
static size_t element_key(const struct cr_conn *c, uint8_t key[40], bool *v6)
{
	size_t l;
	uint16_t rp = htons(c->rport), lp = htons(c->lport);

	memset(key, 0, 40);
	*v6 = !conn_is_v4(c);
	l = *v6 ? 16 : 4;
	memcpy(key, c->family == AF_INET || *v6 ? c->raddr : c->raddr + 12, l);
	memcpy(key + l, &rp, 2);
	memcpy(key + l + 4, c->family == AF_INET || *v6 ? c->laddr : c->laddr + 12, l);
	memcpy(key + 2 * l + 4, &lp, 2);
	return 2 * l + 8;
}

struct nlbuf {
	uint8_t *p;
	size_t len, cap;
	bool full; /* something did not fit: the batch is not sent */
};

static void *nl_put(struct nlbuf *b, size_t len)
{
	size_t al = NLMSG_ALIGN(len);
	void *r;

	if (b->len + al > b->cap) {
		b->full = true;
		return NULL;
	}
	r = b->p + b->len;
	memset(r, 0, al);
	b->len += al;
	return r;
}

static struct nlmsghdr *nl_msg(struct nlbuf *b, uint16_t type, uint16_t flags, uint32_t seq,
			       uint8_t family, uint16_t res_id)
{
	struct nlmsghdr *h = nl_put(b, NLMSG_HDRLEN);
	struct nfgenmsg *g = nl_put(b, sizeof(*g));

	if (!h || !g)
		return NULL;
	h->nlmsg_len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*g)); /* grown by the caller */
	h->nlmsg_type = type;
	h->nlmsg_flags = NLM_F_REQUEST | flags;
	h->nlmsg_seq = seq;
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	g->res_id = htons(res_id);
	return h;
}

/* an attribute; a nested one (data NULL) is closed by nl_end */
static struct nlattr *nl_attr(struct nlbuf *b, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = nl_put(b, NLA_HDRLEN + (data ? len : 0));

	if (!a)
		return NULL;
	a->nla_type = type | (data ? 0 : NLA_F_NESTED);
	a->nla_len = NLA_HDRLEN + (data ? len : 0);
	if (data)
		memcpy((uint8_t *)a + NLA_HDRLEN, data, len);
	return a;
}

static void nl_end(struct nlbuf *b, void *start)
{
	if (start)
		((struct nlattr *)start)->nla_len = b->p + b->len - (uint8_t *)start;
}

/* The restore's socket for the removals is closed at exit, after the tree
 * runs: its close waits for the kernel to free the deleted elements (an
 * RCU grace period, 10-20 ms on this host) */
static int del_sock = -1;
static pthread_mutex_t del_lock = PTHREAD_MUTEX_INITIALIZER;

static void close_del_sock(void)
{
	if (del_sock >= 0)
		close(del_sock);
	del_sock = -1;
}

static struct nlmsghdr *nft_msg(struct nlbuf *b, uint16_t type, uint16_t flags, uint32_t *seq)
{
	return nl_msg(b, NFNL_SUBSYS_NFTABLES << 8 | type, NLM_F_ACK | flags, (*seq)++,
		      NFPROTO_INET, 0);
}

/* a message's length, once its attributes are in */
static void msg_end(struct nlbuf *b, struct nlmsghdr *h)
{
	if (h)
		h->nlmsg_len = b->p + b->len - (uint8_t *)h;
}

static void nl_str(struct nlbuf *b, uint16_t type, const char *s)
{
	nl_attr(b, type, s, strlen(s) + 1);
}

static void nl_be32(struct nlbuf *b, uint16_t type, uint32_t v)
{
	uint32_t be = htonl(v);

	nl_attr(b, type, &be, sizeof(be));
}

/* one expression of a rule: its name, then its attributes (closed by
 * expr_end) */
static struct nlattr *expr_begin(struct nlbuf *b, const char *name, struct nlattr **data)
{
	struct nlattr *e = nl_attr(b, NFTA_LIST_ELEM, NULL, 0);

	nl_str(b, NFTA_EXPR_NAME, name);
	*data = nl_attr(b, NFTA_EXPR_DATA, NULL, 0);
	return e;
}

static void expr_end(struct nlbuf *b, struct nlattr *e, struct nlattr *data)
{
	nl_end(b, data);
	nl_end(b, e);
}

/* meta KEY => reg 1; cmp eq reg 1 VALUE (one byte) */
static void expr_meta_is(struct nlbuf *b, uint32_t key, uint8_t value)
{
	struct nlattr *d, *e = expr_begin(b, "meta", &d), *v;

	nl_be32(b, NFTA_META_KEY, key);
	nl_be32(b, NFTA_META_DREG, NFT_REG_1);
	expr_end(b, e, d);
	e = expr_begin(b, "cmp", &d);
	nl_be32(b, NFTA_CMP_SREG, NFT_REG_1);
	nl_be32(b, NFTA_CMP_OP, NFT_CMP_EQ);
	v = nl_attr(b, NFTA_CMP_DATA, NULL, 0);
	nl_attr(b, NFTA_DATA_VALUE, &value, 1);
	nl_end(b, v);
	expr_end(b, e, d);
}

/* payload load LEN bytes at BASE + OFFSET => the 32-bit register *reg,
 * which then moves past them */
static void expr_payload(struct nlbuf *b, uint32_t base, uint32_t offset, uint32_t len,
			 uint32_t *reg)
{
	struct nlattr *d, *e = expr_begin(b, "payload", &d);

	nl_be32(b, NFTA_PAYLOAD_DREG, *reg);
	nl_be32(b, NFTA_PAYLOAD_BASE, base);
	nl_be32(b, NFTA_PAYLOAD_OFFSET, offset);
	nl_be32(b, NFTA_PAYLOAD_LEN, len);
	expr_end(b, e, d);
	*reg += (len + 3) / 4;
}

/* "ip saddr . tcp sport . ip daddr . tcp dport @conn4 drop" (chain in) and
 * its mirror "ip daddr . tcp dport . ip saddr . tcp sport" (chain out): the
 * remote end's address and port, then ours, as element_key lays them out */
static void rule_msg(struct nlbuf *b, uint32_t *seq, bool out, bool v6)
{
	uint32_t alen = v6 ? 16 : 4, src = v6 ? 8 : 12, dst = v6 ? 24 : 16;
	uint32_t reg = NFT_REG32_00, verdict = NF_DROP;
	struct nlmsghdr *h = nft_msg(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, seq);
	struct nlattr *list, *e, *d, *imm, *vd;

	nl_str(b, NFTA_RULE_TABLE, "kupdate");
	nl_str(b, NFTA_RULE_CHAIN, out ? "out" : "in");
	list = nl_attr(b, NFTA_RULE_EXPRESSIONS, NULL, 0);
	expr_meta_is(b, NFT_META_NFPROTO, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
	expr_meta_is(b, NFT_META_L4PROTO, IPPROTO_TCP);
	expr_payload(b, NFT_PAYLOAD_NETWORK_HEADER, out ? dst : src, alen, &reg);
	expr_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, out ? 2 : 0, 2, &reg);
	expr_payload(b, NFT_PAYLOAD_NETWORK_HEADER, out ? src : dst, alen, &reg);
	expr_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, out ? 0 : 2, 2, &reg);
	e = expr_begin(b, "lookup", &d);
	nl_str(b, NFTA_LOOKUP_SET, v6 ? "conn6" : "conn4");
	nl_be32(b, NFTA_LOOKUP_SREG, NFT_REG32_00);
	nl_be32(b, NFTA_LOOKUP_SET_ID, v6 ? 2 : 1);
	expr_end(b, e, d);
	e = expr_begin(b, "immediate", &d);
	nl_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
	imm = nl_attr(b, NFTA_IMMEDIATE_DATA, NULL, 0);
	vd = nl_attr(b, NFTA_DATA_VERDICT, NULL, 0);
	nl_be32(b, NFTA_VERDICT_CODE, verdict);
	nl_end(b, vd);
	nl_end(b, imm);
	expr_end(b, e, d);
	nl_end(b, list);
	msg_end(b, h);
}

/* The objects of `setup` (below), as nftables' netlink messages: the table,
 * the two sets (their key types: nftables' concatenation of ipv4_addr or
 * ipv6_addr and inet_service, 6 bits a field), the two chains, emptied,
 * and their four rules.  Each "add" leaves an existing object as it is. */
static void put_setup(struct nlbuf *b, uint32_t *seq)
{
	enum { IPV4_ADDR = 7, IPV6_ADDR = 8, INET_SERVICE = 13 };
	struct nlmsghdr *h;

	h = nft_msg(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, seq);
	nl_str(b, NFTA_TABLE_NAME, "kupdate");
	nl_be32(b, NFTA_TABLE_FLAGS, 0);
	msg_end(b, h);
	for (int v6 = 0; v6 < 2; v6++) {
		uint32_t addr = v6 ? IPV6_ADDR : IPV4_ADDR;

		h = nft_msg(b, NFT_MSG_NEWSET, NLM_F_CREATE, seq);
		nl_str(b, NFTA_SET_TABLE, "kupdate");
		nl_str(b, NFTA_SET_NAME, v6 ? "conn6" : "conn4");
		nl_be32(b, NFTA_SET_FLAGS, 0);
		nl_be32(b, NFTA_SET_KEY_TYPE,
			((addr << 6 | INET_SERVICE) << 6 | addr) << 6 | INET_SERVICE);
		nl_be32(b, NFTA_SET_KEY_LEN, v6 ? 40 : 16);
		nl_be32(b, NFTA_SET_ID, v6 ? 2 : 1);
		msg_end(b, h);
	}
	for (int out = 0; out < 2; out++) {
		struct nlattr *hook;

		h = nft_msg(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, seq);
		nl_str(b, NFTA_CHAIN_TABLE, "kupdate");
		nl_str(b, NFTA_CHAIN_NAME, out ? "out" : "in");
		nl_str(b, NFTA_CHAIN_TYPE, "filter");
		nl_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
		hook = nl_attr(b, NFTA_CHAIN_HOOK, NULL, 0);
		nl_be32(b, NFTA_HOOK_HOOKNUM, out ? NF_INET_LOCAL_OUT : NF_INET_LOCAL_IN);
		nl_be32(b, NFTA_HOOK_PRIORITY, (uint32_t)-300);
		nl_end(b, hook);
		msg_end(b, h);
	}
	for (int out = 0; out < 2; out++) {
		h = nft_msg(b, NFT_MSG_DELRULE, 0, seq); /* flush chain */
		nl_str(b, NFTA_RULE_TABLE, "kupdate");
		nl_str(b, NFTA_RULE_CHAIN, out ? "out" : "in");
		msg_end(b, h);
	}
	for (int out = 0; out < 2; out++)
		for (int v6 = 0; v6 < 2; v6++)
			rule_msg(b, seq, out, v6);
}

/* the elements of n connections, added or removed: a message a set */
static void put_elems(struct nlbuf *b, uint32_t *seq, bool add, const struct cr_conn *c, size_t n)
{
	for (int v6 = 0; v6 < 2; v6++) {
		struct nlmsghdr *h = NULL;
		struct nlattr *list = NULL;

		for (size_t i = 0; i < n; i++) {
			uint8_t key[40];
			bool is6;
			size_t kl = element_key(&c[i], key, &is6);
			struct nlattr *el, *ka;

			if (is6 != (bool)v6)
				continue;
			if (!h) {
				h = nft_msg(b, add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM,
					    add ? NLM_F_CREATE : 0, seq);
				nl_str(b, NFTA_SET_ELEM_LIST_TABLE, "kupdate");
				nl_str(b, NFTA_SET_ELEM_LIST_SET, v6 ? "conn6" : "conn4");
				list = nl_attr(b, NFTA_SET_ELEM_LIST_ELEMENTS, NULL, 0);
			}
			el = nl_attr(b, NFTA_LIST_ELEM, NULL, 0);
			ka = nl_attr(b, NFTA_SET_ELEM_KEY, NULL, 0);
			nl_attr(b, NFTA_DATA_VALUE, key, kl);
			nl_end(b, ka);
			nl_end(b, el);
		}
		nl_end(b, list);
		msg_end(b, h);
	}
}

/* a socket of nftables' netlink, whose answers are waited for 5 s at most;
 * -1 (errno) if it cannot be had */
static int nf_open(void)
{
	int sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	if (sk >= 0 && setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 5 },
				  sizeof(struct timeval))) {
		int e = errno;

		close(sk);
		errno = e;
		return -1;
	}
	return sk;
}

/* One transaction: what put() adds between the batch's begin and end.  0,
 * or a negative errno (the kernel's for the first message it refused:
 * -ENOENT for an element that is not there; nothing is changed then).
 * keep: a socket kept for the next calls (opened on the first), or NULL
 * for one of its own. */
static int batch_nl(void (*put)(struct nlbuf *b, uint32_t *seq, const void *arg), const void *arg,
		    size_t cap, int *keep)
{
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	struct nlbuf b = { .cap = cap };
	static uint32_t next_seq;
	uint32_t seq = __atomic_fetch_add(&next_seq, 1024, __ATOMIC_RELAXED) +
		       ((uint32_t)getpid() << 16),
		 first = seq, msgs;
	int sk, ret = 0;
	uint32_t acks = 0;

	b.p = malloc(b.cap);
	if (!b.p)
		return -ENOMEM;
	nl_msg(&b, NFNL_MSG_BATCH_BEGIN, 0, seq++, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
	put(&b, &seq, arg);
	msgs = seq - first - 1; /* each asks for an acknowledgement */
	nl_msg(&b, NFNL_MSG_BATCH_END, 0, seq++, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
	if (b.full || seq - first > 1024) {
		free(b.p);
		return -E2BIG;
	}
	if (!msgs) {
		free(b.p);
		return 0;
	}
	sk = keep && *keep >= 0 ? *keep : nf_open();
	if (keep && *keep < 0 && sk >= 0) {
		*keep = sk;
		atexit(close_del_sock);
	}
	/* an error's answer without the request it refuses (which can be
	 * larger than the receive buffer) */
	if (sk >= 0)
		setsockopt(sk, SOL_NETLINK, NETLINK_CAP_ACK, &(int){ 1 }, sizeof(int));
	if (sk < 0 ||
	    sendto(sk, b.p, b.len, 0, (struct sockaddr *)&k, sizeof(k)) != (ssize_t)b.len) {
		ret = -errno;
		goto out;
	}
	/* one acknowledgement per message, or the first error (the batch is
	 * then undone as a whole) */
	while (acks < msgs && !ret) {
		uint8_t rb[8192];
		ssize_t r = recv(sk, rb, sizeof(rb), 0);

		if (r < 0) {
			ret = -errno;
			break;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)r);
		     h = NLMSG_NEXT(h, r)) {
			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq - first > msgs + 1)
				continue; /* not an answer to this transaction */
			ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
			acks++;
			if (ret)
				break;
		}
	}
out:
	if (sk >= 0 && !keep)
		close(sk);
	free(b.p);
	return ret;
}

struct elems_arg {
	bool add, setup;
	const struct cr_conn *c;
	size_t n;
};

static void put_lock(struct nlbuf *b, uint32_t *seq, const void *arg)
{
	const struct elems_arg *a = arg;

	if (a->setup)
		put_setup(b, seq);
	put_elems(b, seq, a->add, a->c, a->n);
}

/* The elements of n connections added or removed in one transaction,
 * after the table's setup if asked (setup: the whole lock in one batch) */
static int elems_nl(bool add, bool setup, const struct cr_conn *c, size_t n, int *keep)
{
	struct elems_arg a = { .add = add, .setup = setup, .c = c, .n = n };

	return batch_nl(put_lock, &a, (setup ? 4096 : 256) + n * 96, keep);
}

static void put_deltable(struct nlbuf *b, uint32_t *seq, const void *arg)
{
	struct nlmsghdr *h = nft_msg(b, NFT_MSG_DELTABLE, 0, seq);

	(void)arg;
	nl_str(b, NFTA_TABLE_NAME, "kupdate");
	msg_end(b, h);
}

/* 1 when the set holds an element, 0 when it holds none (or it is not
 * there), a negative errno when the kernel cannot be asked: one
 * GETSETELEM dump */
static int set_has_elems_nl(const char *set)
{
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	struct nlbuf b = { .cap = 256 };
	enum { RB = 32768 }; /* a dump's answers come in parts of up to a few pages */
	uint8_t msg[256], *rb;
	uint32_t seq = 1;
	struct nlmsghdr *h;
	int sk, ret = -EIO;
	bool done = false;

	b.p = msg;
	h = nl_msg(&b, NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETSETELEM, NLM_F_DUMP, seq,
		   NFPROTO_INET, 0);
	nl_str(&b, NFTA_SET_ELEM_LIST_TABLE, "kupdate");
	nl_str(&b, NFTA_SET_ELEM_LIST_SET, set);
	msg_end(&b, h);
	rb = malloc(RB);
	if (!rb)
		return -ENOMEM;
	sk = nf_open();
	if (sk < 0) {
		ret = -errno;
		free(rb);
		return ret;
	}
	if (sendto(sk, b.p, b.len, 0, (struct sockaddr *)&k, sizeof(k)) != (ssize_t)b.len) {
		ret = -errno;
		close(sk);
		free(rb);
		return ret;
	}
	ret = 0;
	while (!done && ret == 0) {
		ssize_t r = recv(sk, rb, RB, 0);

		if (r < 0) {
			ret = -errno;
			break;
		}
		for (struct nlmsghdr *m = (struct nlmsghdr *)rb; NLMSG_OK(m, (size_t)r);
		     m = NLMSG_NEXT(m, r)) {
			if (m->nlmsg_seq != seq)
				continue;
			if (m->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (m->nlmsg_type == NLMSG_ERROR) {
				int e = ((struct nlmsgerr *)NLMSG_DATA(m))->error;

				/* no table or no set: nothing held */
				ret = e == -ENOENT ? 0 : e;
				done = true;
				break;
			}
			/* a NEWSETELEM message: is there an element list in it? */
			for (struct nlattr *a =
				     (struct nlattr *)((uint8_t *)NLMSG_DATA(m) +
						       NLMSG_ALIGN(sizeof(struct nfgenmsg)));
			     (uint8_t *)a + NLA_HDRLEN <= (uint8_t *)m + m->nlmsg_len &&
			     a->nla_len >= NLA_HDRLEN;
			     a = (struct nlattr *)((uint8_t *)a + NLA_ALIGN(a->nla_len)))
				if ((a->nla_type & NLA_TYPE_MASK) == NFTA_SET_ELEM_LIST_ELEMENTS &&
				    a->nla_len > NLA_HDRLEN)
					ret = 1;
		}
	}
	close(sk);
	free(rb);
	return ret;
}

/* The table is dropped once no connection is held in it: 0 when it was (or
 * it was not there), 1 when a connection is still held, a negative errno
 * when the kernel could not be asked (the table is left then). */
static int drop_table_if_empty_nl(void)
{
	int r4 = set_has_elems_nl("conn4"), r6 = r4 ? r4 : set_has_elems_nl("conn6"), ret;

	if (r6)
		return r6;
	ret = batch_nl(put_deltable, NULL, 256, NULL);
	return ret == -ENOENT ? 0 : ret;
}

/* libnftables keeps state of its own beyond a context: apply's dumps,
 * which run in threads, take turns in it */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

/* libnftables and the five libraries it brings (libnftnl, libmnl,
 * libxtables, libjansson, libgmp) are loaded when a command needs them,
 * not at every start of kupdate: the dynamic loader's work for them was a
 * third of a start's 6 ms on this host, and a restore at boot (seven at
 * once on two emulated CPUs) uses none of them. */
#define LIBNFTABLES "libnftables.so.1"
#define NFT_FUNCS(X)                 \
	X(nft_ctx_new)               \
	X(nft_ctx_free)              \
	X(nft_run_cmd_from_buffer)   \
	X(nft_ctx_get_error_buffer)  \
	X(nft_ctx_get_output_buffer) \
	X(nft_ctx_buffer_error)      \
	X(nft_ctx_buffer_output)     \
	X(nft_ctx_set_dry_run)
static struct {
#define X(f) __typeof__(&f) f;
	NFT_FUNCS(X)
#undef X
} nftl;
static char nftl_error[256];

static void nftl_load(void)
{
#define X(f) #f,
	static const char *const names[] = { NFT_FUNCS(X) };
#undef X
#define X(f) (void **)&nftl.f,
	static void **const ptrs[] = { NFT_FUNCS(X) };
#undef X

	dl_load("KUPDATE_LIBNFTABLES", LIBNFTABLES, names, ptrs, ARRAY_SIZE(names), nftl_error,
		sizeof(nftl_error));
}

/* called with nft_lock held */
static bool nftl_ready(void)
{
	static bool tried;

	if (!tried) {
		tried = true;
		nftl_load();
	}
	return nftl.nft_ctx_new != NULL;
}

static int nft_cmd(struct nft_ctx *nft, const char *cmd)
{
	int ret;

	pthread_mutex_lock(&nft_lock);
	ret = nftl.nft_run_cmd_from_buffer(nft, cmd);
	pthread_mutex_unlock(&nft_lock);
	return ret;
}

static void close_nft(struct nft_ctx *nft)
{
	if (!nft)
		return;
	pthread_mutex_lock(&nft_lock);
	nftl.nft_ctx_free(nft);
	pthread_mutex_unlock(&nft_lock);
}

/* Closing the nftables socket after a deletion waits for the kernel to
 * free what was deleted (20 ms on this host, an RCU grace period, more in
 * an emulated guest): a restore's unlock leaves it to the process's exit,
 * after its tree runs again (these deferred contexts only serve removals
 * made by text, where netlink failed).  So does the removal of the table
 * once no connection is held in it (drop_table_later). */
enum { MAX_DEFERRED = 8 };
static struct nft_ctx *deferred[MAX_DEFERRED];
static int nr_deferred;
static bool keep_table;

static void close_deferred(void)
{
	pthread_mutex_lock(&nft_lock);
	while (nr_deferred > 0)
		nftl.nft_ctx_free(deferred[--nr_deferred]);
	pthread_mutex_unlock(&nft_lock);
}

/* true: nft is closed at exit; false: no room, the caller closes it */
static bool close_later(struct nft_ctx *nft)
{
	static bool registered;
	bool taken = false;

	pthread_mutex_lock(&nft_lock);
	if (nr_deferred < MAX_DEFERRED && (registered || !atexit(close_deferred))) {
		registered = true;
		deferred[nr_deferred++] = nft;
		taken = true;
	}
	pthread_mutex_unlock(&nft_lock);
	return taken;
}

/* Why nftables may refuse everything: on a kernel that builds it as a
 * module (a distribution's), nf_tables is loaded by the kernel on first
 * use, from the running release's /lib/modules; when it is not loaded,
 * what to look at ("" when it is, or built in) */
static const char *nf_tables_hint(void)
{
	static const char *const mods[] = { "nf_tables", NULL };
	static __thread char hint[512];
	struct utsname un;
	char why[320];

	if (!access("/sys/module/nf_tables", F_OK) || uname(&un))
		return "";
	if (kmod_installed("/lib/modules", un.release, mods, why, sizeof(why)) == 0)
		snprintf(hint, sizeof(hint),
			 " (the nf_tables module is neither loaded nor installed, %s: install "
			 "the modules of kernel %s)",
			 why, un.release);
	else
		snprintf(hint, sizeof(hint),
			 " (the nf_tables module is not loaded: modprobe nf_tables says why)");
	return hint;
}

static int run(struct nft_ctx *nft, const char *cmd, bool quiet)
{
	int ret = nft_cmd(nft, cmd);

	if (ret && !quiet) {
		const char *err = nftl.nft_ctx_get_error_buffer(nft);

		pr_err("network lock: nftables refused '%.*s': %.*s%s", (int)strcspn(cmd, "\n"),
		       cmd, (int)strcspn(err && *err ? err : "unknown error", "\n"),
		       err && *err ? err : "unknown error", nf_tables_hint());
	}
	return ret ? -EIO : 0;
}

static struct nft_ctx *open_nft(void)
{
	struct nft_ctx *nft;

	pthread_mutex_lock(&nft_lock);
	if (!nftl_ready()) {
		pthread_mutex_unlock(&nft_lock);
		pr_err("network lock: cannot load " LIBNFTABLES " (%s): install the libnftables1 "
		       "package",
		       nftl_error);
		return NULL;
	}
	nft = nftl.nft_ctx_new(NFT_CTX_DEFAULT);
	pthread_mutex_unlock(&nft_lock);
	if (!nft) {
		pr_err("network lock: cannot create an nftables context");
		return NULL;
	}
	nftl.nft_ctx_buffer_error(nft);
	nftl.nft_ctx_buffer_output(nft);
	return nft;
}

static const char *const setup =
	"add table " TABLE "\n"
	"add set " TABLE " conn4 { type ipv4_addr . inet_service . ipv4_addr . "
	"inet_service ; }\n"
	"add set " TABLE " conn6 { type ipv6_addr . inet_service . ipv6_addr . "
	"inet_service ; }\n"
	"add chain " TABLE " in { type filter hook input priority -300 ; policy accept ; }\n"
	"add chain " TABLE " out { type filter hook output priority -300 ; policy accept ; }\n"
	"flush chain " TABLE " in\n"
	"flush chain " TABLE " out\n"
	"add rule " TABLE " in ip saddr . tcp sport . ip daddr . tcp dport @conn4 drop\n"
	"add rule " TABLE " in ip6 saddr . tcp sport . ip6 daddr . tcp dport @conn6 drop\n"
	"add rule " TABLE " out ip daddr . tcp dport . ip saddr . tcp sport @conn4 drop\n"
	"add rule " TABLE " out ip6 daddr . tcp dport . ip6 saddr . tcp sport @conn6 drop\n";

const char *netlock_setup_text(void)
{
	return setup;
}

/* The lock of n connections, after the table's setup if asked: one
 * transaction of netlink messages built here; where the kernel refuses it,
 * libnftables' text commands (*nft is opened then, and left to the
 * caller to close). */
static int add(struct nft_ctx **nft, const struct cr_conn *c, size_t n, bool with_setup)
{
	char *cmd;
	size_t cap = n * 160 + 1, len = 0;
	int ret;

	/* KUPDATE_NETLOCK_TEXT (test only): the text commands, as where the
	 * kernel refuses the netlink messages */
	ret = getenv("KUPDATE_NETLOCK_TEXT") ? -EOPNOTSUPP : elems_nl(true, with_setup, c, n, NULL);
	if (!ret)
		return 0;
	pr_debug("network lock: nftables' netlink refused the %s (%s): by text",
		 with_setup ? "table and its elements" : "elements", strerror(-ret));
	if (!*nft && !(*nft = open_nft()))
		return -EIO;
	if (with_setup && run(*nft, setup, false))
		return -EIO;
	if (!n)
		return 0;
	cmd = malloc(cap);
	if (!cmd)
		return -ENOMEM;
	cmd[0] = 0;
	for (size_t i = 0; i < n; i++) {
		char el[160];
		const char *set;

		element(&c[i], el, sizeof(el), &set);
		len += snprintf(cmd + len, cap - len, "add element " TABLE " %s { %s }\n", set, el);
	}
	/* one batch: all or nothing */
	ret = run(*nft, cmd, false);
	free(cmd);
	return ret;
}

int netlock_add(const struct cr_conn *c, size_t n)
{
	struct nft_ctx *nft = NULL;
	int ret;

	if (!n)
		return 0;
	ret = add(&nft, c, n, true);
	close_nft(nft);
	return ret;
}

/* A dump locks its connections one by one: the table is set up before
 * the first (netlock_prepare), and each connection costs one element.
 * libnftables is only loaded if the kernel refuses the netlink messages. */
struct netlock {
	struct nft_ctx *nft;
	bool set_up;
};

struct netlock *netlock_open(void)
{
	return calloc(1, sizeof(struct netlock));
}

int netlock_prepare(struct netlock *l)
{
	int ret = l->set_up ? 0 : add(&l->nft, NULL, 0, true);

	if (!ret)
		l->set_up = true;
	return ret;
}

int netlock_add_one(struct netlock *l, const struct cr_conn *c)
{
	int ret = add(&l->nft, c, 1, !l->set_up);

	if (!ret)
		l->set_up = true;
	return ret;
}

void netlock_close(struct netlock *l)
{
	if (!l)
		return;
	close_nft(l->nft);
	free(l);
}

/* no connection held in either set (or no table at all) */
static bool table_empty(struct nft_ctx *nft)
{
	const char *out;

	if (nft_cmd(nft, "list table " TABLE))
		return true;
	out = nftl.nft_ctx_get_output_buffer(nft);
	return !out || !strstr(out, "elements");
}

static void drop_table_if_empty(struct nft_ctx *nft)
{
	if (table_empty(nft))
		run(nft, "delete table " TABLE, true);
}

/* At exit, the table is dropped if no connection is held in it any more
 * (the restore outside a boot's: the boot's restores keep it for
 * kupdate-finish); by text only if netlink cannot say. */
static void drop_table_at_exit(void)
{
	struct nft_ctx *nft;

	if (keep_table || drop_table_if_empty_nl() >= 0)
		return;
	nft = open_nft();
	if (!nft)
		return;
	drop_table_if_empty(nft);
	close_nft(nft);
}

static void drop_table_later(void)
{
	static bool registered;
	bool now = false;

	pthread_mutex_lock(&del_lock);
	if (!registered) {
		registered = true;
		now = atexit(drop_table_at_exit) != 0;
	}
	pthread_mutex_unlock(&del_lock);
	if (now)
		drop_table_at_exit();
}

/* The calling thread works in a tree's own network namespace (netns.c):
 * the lock there is that tree's, with sockets opened there */
static __thread bool in_tree_netns;

void netlock_in_tree_netns(bool in)
{
	in_tree_netns = in;
}

/* the lock of a network namespace a process of a tree made (a
 * container's), or of the tree's own, worked on by a thread that joined it */
struct lock_in {
	const struct cr_conn *c;
	size_t n;
	bool add;
	int err;
};

static void *lock_thread(void *arg)
{
	struct lock_in *l = arg;

	netlock_in_tree_netns(true);
	l->err = l->add ? netlock_add(l->c, l->n) : netlock_del(l->c, l->n);
	return NULL;
}

int netlock_in_ns(pid_t pid, const struct cr_conn *c, size_t n, bool add)
{
	struct lock_in l = { .c = c, .n = n, .add = add };
	int ret = proc_run_in_ns(pid, "net", lock_thread, &l);

	return ret ? ret : l.err;
}

/* Every nftables command fetches the ruleset and makes a netlink
 * transaction (tens of milliseconds in an emulated guest): the elements go
 * in one batch, and only if it is refused (one of them gone already: a
 * restore repeated, say) one at a time. */
int netlock_del(const struct cr_conn *c, size_t n)
{
	enum { LINE = 256 }; /* "delete element inet kupdate connN { " + element + " }" */
	int *sock = in_tree_netns ? NULL : &del_sock;
	struct nft_ctx *nft = NULL;
	char *batch = NULL;
	size_t len = 0;
	int ret;

	/* one socket, one transaction at a time (apply's threads) */
	pthread_mutex_lock(&del_lock);
	ret = n ? elems_nl(false, false, c, n, sock) : 0;
	/* one that is not there (removed meanwhile) fails the whole
	 * transaction: then one at a time */
	for (size_t i = 0; ret == -ENOENT && i < n; i++)
		elems_nl(false, false, &c[i], 1, sock);
	pthread_mutex_unlock(&del_lock);
	if (ret == -ENOENT)
		ret = 0;
	if (ret)
		pr_debug("network lock: nftables' netlink refused the removal (%s): by text",
			 strerror(-ret));
	if (!ret && in_tree_netns) {
		/* nothing else locks there: the table goes now if it is empty
		 * (none there, as in a namespace made anew: nothing to do) */
		drop_table_if_empty_nl();
		return 0;
	}
	if (!ret) {
		/* the table goes at exit if it is empty, once the tree runs */
		if (!keep_table)
			drop_table_later();
		return 0;
	}
	/* the text commands, where netlink failed (n > 0 here: with none, ret is 0) */
	nft = open_nft();
	batch = malloc(n * LINE + 1);
	if (!nft || !batch) {
		close_nft(nft);
		free(batch);
		return nft ? -ENOMEM : -EIO;
	}
	batch[0] = 0;
	for (size_t i = 0; i < n; i++) {
		char el[160];
		const char *set;

		element(&c[i], el, sizeof(el), &set);
		len += snprintf(batch + len, LINE, "delete element " TABLE " %s { %s }\n", set, el);
	}
	if (run(nft, batch, true)) {
		for (char *line = batch, *nl; *line; line = nl + 1) {
			nl = strchr(line, '\n');
			*nl = 0;
			run(nft, line, true);
		}
	}
	free(batch);
	if (in_tree_netns) {
		drop_table_if_empty(nft);
		close_nft(nft);
		return 0;
	}
	if (!keep_table)
		drop_table_later();
	if (!close_later(nft))
		close_nft(nft);
	return 0;
}

void netlock_keep_table(void)
{
	keep_table = true;
}

/* 0 when there was a table to delete */
int netlock_clear(void)
{
	struct nft_ctx *nft;
	int ret = batch_nl(put_deltable, NULL, 256, NULL);

	if (!ret || ret == -ENOENT)
		return ret;
	nft = open_nft();
	if (!nft)
		return -EIO;
	ret = run(nft, "delete table " TABLE, true);
	close_nft(nft);
	return ret;
}

bool netlock_present(const struct cr_conn *c)
{
	struct nft_ctx *nft = open_nft();
	char el[160], cmd[256];
	const char *set;
	bool present;

	if (!nft)
		return false;
	element(c, el, sizeof(el), &set);
	snprintf(cmd, sizeof(cmd), "get element " TABLE " %s { %s }", set, el);
	present = nft_cmd(nft, cmd) == 0;
	close_nft(nft);
	return present;
}

int netlock_probe(char *why, size_t len)
{
	struct nft_ctx *nft = open_nft();
	char *cmd;
	int ret;

	why[0] = 0;
	if (!nft) {
		if (!nftl.nft_ctx_new)
			snprintf(why, len,
				 "cannot load " LIBNFTABLES " (%s): install the libnftables1 "
				 "package",
				 nftl_error);
		else
			snprintf(why, len, "cannot create an nftables context");
		return -EIO;
	}
	cmd = xasprintf("%sadd element " TABLE " conn4 { 127.0.0.1 . 1 . 127.0.0.1 . 2 }\n"
			"add element " TABLE " conn6 { ::1 . 1 . ::1 . 2 }\n",
			setup);
	if (!cmd) {
		close_nft(nft);
		return -ENOMEM;
	}
	/* check mode: the kernel validates the batch, then aborts it */
	nftl.nft_ctx_set_dry_run(nft, true);
	ret = nft_cmd(nft, cmd) ? -EOPNOTSUPP : 0;
	if (ret) {
		const char *err = nftl.nft_ctx_get_error_buffer(nft);

		if (!err || !*err)
			err = "refused";
		snprintf(why, len, "%.*s%s", (int)strcspn(err, "\n"), err, nf_tables_hint());
	}
	free(cmd);
	close_nft(nft);
	return ret;
}

int cr_net_unlock_all(void)
{
	return netlock_clear();
}

void cr_net_lock_keep_table(void)
{
	netlock_keep_table();
}

int cr_net_lock(const struct cr_conn *c, size_t nr, bool lock)
{
	return lock ? netlock_add(c, nr) : netlock_del(c, nr);
}
