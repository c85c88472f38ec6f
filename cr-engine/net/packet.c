/* Packet sockets (AF_PACKET): a DHCP client's, a capture's.
 *
 * What the socket is comes from kupdate's own descriptor of it (sk_dup):
 * its type, its protocol and interface (getsockname), its PACKET_*
 * options, its classic BPF filter (SO_GET_FILTER: the program as attached
 * with SO_ATTACH_FILTER); what getsockopt does not tell, from packet_diag
 * (sockdiag.c): the copy threshold, the memberships (promiscuous mode,
 * multicast addresses) with their counts, whether it has a ring or is in a
 * fanout group, the bytes queued.  An interface is saved with its name,
 * and the restore refuses one whose index now names another interface.
 *
 * The restore makes the socket with no protocol (it receives nothing),
 * sets its options, filter and memberships, then binds it to its protocol
 * and interface: the first packet it receives is one its filter lets
 * through, as before.
 *
 * Refused at dump, naming the socket: a mapped ring (PACKET_RX_RING,
 * PACKET_TX_RING: libpcap's), a fanout group, an eBPF filter (which
 * SO_GET_FILTER cannot give back); packets waiting in its queue are a
 * state that passes (-EAGAIN: the process reads them once thawed), since
 * they cannot be put back in a packet socket's queue. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/packet_diag.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dump.h"
#include "image.h"
#include "log.h"
#include "packet.h"
#include "sockdiag.h"
#include "sockets.h"
#include "util.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef SO_LOCK_FILTER
#define SO_LOCK_FILTER 44
#endif

#define MAX_FILTER 4096 /* BPF_MAXINSNS */

/* ---------------------------------------------------------------- dump */

static int dump_filter(int sk, PacketSk *s, const char *what)
{
	socklen_t n = 0;
	struct sock_filter *prog;
	int v = 0;

	/* the length in instructions (0: no filter); an eBPF program has no
	 * classic one to give back */
	if (getsockopt(sk, SOL_SOCKET, SO_GET_FILTER, NULL, &n)) {
		if (errno != EACCES)
			return pr_errno("%s: cannot read its filter", what);
		pr_err("%s: a packet socket with an eBPF filter (SO_ATTACH_BPF) cannot be "
		       "checkpointed: the program cannot be read back",
		       what);
		return -EOPNOTSUPP;
	}
	if (!n)
		return 0;
	if (n > MAX_FILTER) {
		pr_err("%s: its filter has %u instructions, more than a classic BPF program", what,
		       n);
		return -EOPNOTSUPP;
	}
	prog = calloc(n, sizeof(*prog));
	if (!prog)
		return -ENOMEM;
	if (getsockopt(sk, SOL_SOCKET, SO_GET_FILTER, prog, &n)) {
		free(prog);
		return pr_errno("%s: cannot read its filter", what);
	}
	s->has_filter = 1;
	s->filter.data = (uint8_t *)prog;
	s->filter.len = n * sizeof(*prog);
	if (!sk_getint(sk, SOL_SOCKET, SO_LOCK_FILTER, &v) && v)
		s->has_filter_locked = s->filter_locked = 1;
	return 0;
}

/* its interface, its name now ("" if none has that index) */
static char *if_name(uint32_t ifindex)
{
	char n[IF_NAMESIZE] = "";

	if (ifindex)
		if_indextoname(ifindex, n);
	return strdup(n);
}

static int dump_mclist(const struct pk_diag *pk, PacketSk *s)
{
	s->mclist = calloc(pk->nr_mc ? pk->nr_mc : 1, sizeof(*s->mclist));
	if (!s->mclist)
		return -ENOMEM;
	for (int i = 0; i < pk->nr_mc; i++) {
		PacketMclist *m = malloc(sizeof(*m));

		if (!m)
			return -ENOMEM;
		packet_mclist__init(m);
		s->mclist[s->n_mclist++] = m;
		m->ifindex = pk->mc[i].ifindex;
		m->type = pk->mc[i].type;
		m->count = pk->mc[i].count;
		m->ifname = if_name(m->ifindex);
		if (!m->ifname || img_bytes(&m->addr, pk->mc[i].addr, pk->mc[i].alen))
			return -ENOMEM;
		m->has_addr = pk->mc[i].alen > 0;
	}
	return 0;
}

static int refused(const struct sk_diag *d, const char *what)
{
	const struct pk_diag *pk = d->pk;

	if (pk->tx_ring) {
		pr_err("%s: a packet socket with a transmit ring (PACKET_TX_RING) cannot be "
		       "checkpointed yet",
		       what);
		return -EOPNOTSUPP;
	}
	if (pk->fanout) {
		pr_err("%s: a packet socket in a fanout group (PACKET_FANOUT) cannot be "
		       "checkpointed",
		       what);
		return -EOPNOTSUPP;
	}
	if (d->rqlen) {
		/* nothing can put them back in a packet socket's queue */
		pr_err("%s: a packet socket with %u bytes of packets waiting to be read", what,
		       d->rqlen);
		return -EAGAIN;
	}
	return 0;
}

static int dump_opts(int sk, const struct pk_diag *pk, PacketSk *s)
{
	int v;

	s->version = pk->version;
	s->has_reserve = s->has_copy_thresh = s->has_tstamp = 1;
	s->reserve = pk->reserve;
	s->copy_thresh = pk->copy_thresh;
	s->tstamp = pk->tstamp;
	s->has_auxdata = s->has_origdev = s->has_vnet_hdr = s->has_loss = 1;
	s->auxdata = !!(pk->flags & PDI_AUXDATA);
	s->origdev = !!(pk->flags & PDI_ORIGDEV);
	s->vnet_hdr = !!(pk->flags & PDI_VNETHDR);
	s->loss = !!(pk->flags & PDI_LOSS);
	if (!sk_getint(sk, SOL_PACKET, PACKET_IGNORE_OUTGOING, &v))
		s->has_ignore_outgoing = 1, s->ignore_outgoing = !!v;
	if (!sk_getint(sk, SOL_PACKET, PACKET_QDISC_BYPASS, &v))
		s->has_qdisc_bypass = 1, s->qdisc_bypass = !!v;
	return 0;
}

int packet_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
		struct cr_file *f)
{
	struct sockaddr_ll sll;
	socklen_t len = sizeof(sll);
	PacketSk *s;
	char what[96];
	int sk, ret;

	(void)ctx;
	snprintf(what, sizeof(what), "pid %d: fd %d (socket:[%u])", p->pid, fd, d->ino);
	if (!d->pk) {
		pr_err("%s: packet_diag said nothing of it", what);
		return -EOPNOTSUPP;
	}
	ret = refused(d, what);
	if (ret)
		return ret;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	packet_sk__init(s);
	f->psk = s;
	s->opts = calloc(1, sizeof(*s->opts));
	if (!s->opts)
		return -ENOMEM;
	sk_opts__init(s->opts);
	sk = sk_dup(p, fd);
	if (sk < 0)
		return sk;
	memset(&sll, 0, sizeof(sll));
	if (getsockname(sk, (struct sockaddr *)&sll, &len))
		ret = pr_errno("%s: getsockname", what);
	s->type = d->type;
	s->protocol = sll.sll_protocol;
	s->ifindex = sll.sll_ifindex;
	s->ifname = if_name(s->ifindex);
	if (!ret && !s->ifname)
		ret = -ENOMEM;
	if (!ret)
		ret = dump_opts(sk, d->pk, s);
	if (!ret)
		ret = dump_mclist(d->pk, s);
	if (!ret)
		ret = dump_filter(sk, s, what);
	if (!ret)
		ret = sk_opts_dump(sk, s->opts, AF_PACKET);
	if (!ret && d->pk->rx_ring)
		ret = packet_ring_dump(p, d->ino, d->pk->rx, d->pk->version, &s->rx_ring, what);
	close(sk);
	return ret;
}

void packet_free_dump(PacketSk *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_mclist; i++) {
		free(s->mclist[i]->ifname);
		free(s->mclist[i]->addr.data);
		free(s->mclist[i]);
	}
	free(s->mclist);
	free(s->ifname);
	free(s->filter.data);
	free(s->opts);
	packet_ring_free(s->rx_ring);
	free(s);
}

/* ------------------------------------------------------------- restore */

int packet_validate(const FileEntry *e)
{
	const PacketSk *s = e->psk;
	bool bad =
		!s || !s->opts || (s->type != SOCK_RAW && s->type != SOCK_DGRAM) ||
		s->protocol > 0xffff || s->version > TPACKET_V3 ||
		(s->has_filter && (!s->filter.len || s->filter.len % sizeof(struct sock_filter) ||
				   s->filter.len / sizeof(struct sock_filter) > MAX_FILTER)) ||
		(s->ifname && strlen(s->ifname) >= IF_NAMESIZE) ||
		(s->rx_ring && (s->version != TPACKET_V3 || packet_ring_validate(s->rx_ring)));

	for (size_t i = 0; !bad && i < s->n_mclist; i++)
		bad = !s->mclist[i]->ifname || strlen(s->mclist[i]->ifname) >= IF_NAMESIZE ||
		      s->mclist[i]->addr.len > 8 || s->mclist[i]->count > 1024;
	if (bad) {
		pr_err("image files.img is damaged: packet socket %u is invalid", e->id);
		return -EINVAL;
	}
	return 0;
}

/* the interface of ifindex is the one of the dump (by name) */
static int same_if(uint32_t ifindex, const char *name, const char *what)
{
	char now[IF_NAMESIZE] = "";

	if (!ifindex)
		return 0;
	if (!if_indextoname(ifindex, now)) {
		pr_err("%s: its interface %s (index %u) is not here", what, name ? name : "?",
		       ifindex);
		return -ENODEV;
	}
	if (name && *name && strcmp(name, now)) {
		pr_err("%s: its interface %s had index %u, which is %s's now", what, name, ifindex,
		       now);
		return -ENODEV;
	}
	return 0;
}

static int set_opts(int sk, const PacketSk *s, const char *what)
{
	int ret = 0;

	if (s->version)
		ret = sk_setint(sk, SOL_PACKET, PACKET_VERSION, s->version, "PACKET_VERSION", what);
	if (!ret && s->reserve)
		ret = sk_setint(sk, SOL_PACKET, PACKET_RESERVE, s->reserve, "PACKET_RESERVE", what);
	if (!ret && s->copy_thresh)
		ret = sk_setint(sk, SOL_PACKET, PACKET_COPY_THRESH, s->copy_thresh,
				"PACKET_COPY_THRESH", what);
	if (!ret && s->tstamp)
		ret = sk_setint(sk, SOL_PACKET, PACKET_TIMESTAMP, s->tstamp, "PACKET_TIMESTAMP",
				what);
	if (!ret && s->auxdata)
		ret = sk_setint(sk, SOL_PACKET, PACKET_AUXDATA, 1, "PACKET_AUXDATA", what);
	if (!ret && s->origdev)
		ret = sk_setint(sk, SOL_PACKET, PACKET_ORIGDEV, 1, "PACKET_ORIGDEV", what);
	if (!ret && s->vnet_hdr)
		ret = sk_setint(sk, SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", what);
	if (!ret && s->loss)
		ret = sk_setint(sk, SOL_PACKET, PACKET_LOSS, 1, "PACKET_LOSS", what);
	if (!ret && s->ignore_outgoing)
		ret = sk_setint(sk, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING",
				what);
	if (!ret && s->qdisc_bypass)
		ret = sk_setint(sk, SOL_PACKET, PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS",
				what);
	return ret;
}

static int set_mclist(int sk, const PacketSk *s, const char *what)
{
	for (size_t i = 0; i < s->n_mclist; i++) {
		const PacketMclist *m = s->mclist[i];
		struct packet_mreq mr = { .mr_ifindex = m->ifindex, .mr_type = m->type };
		int ret = same_if(m->ifindex, m->ifname, what);

		if (ret)
			return ret;
		mr.mr_alen = m->addr.len;
		if (m->addr.len)
			memcpy(mr.mr_address, m->addr.data, m->addr.len);
		for (uint32_t k = 0; k < m->count; k++)
			if (setsockopt(sk, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)))
				return pr_errno("%s: cannot take its membership of type %u on %s",
						what, m->type, m->ifname);
	}
	return 0;
}

int packet_create(const PacketSk *s, const char *what)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	int sk, ret;

	ret = same_if(s->ifindex, s->ifname, what);
	if (ret)
		return ret;
	/* no protocol yet: nothing comes in before its filter is there */
	sk = socket(AF_PACKET, s->type | SOCK_CLOEXEC, 0);
	if (sk < 0)
		return pr_errno("%s: cannot create it", what);
	ret = set_opts(sk, s, what);
	if (!ret && s->has_filter) {
		struct sock_fprog fp = { .len = s->filter.len / sizeof(struct sock_filter),
					 .filter = (struct sock_filter *)s->filter.data };

		if (setsockopt(sk, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)))
			ret = pr_errno("%s: cannot attach its filter", what);
		if (!ret && s->filter_locked)
			ret = sk_setint(sk, SOL_SOCKET, SO_LOCK_FILTER, 1, "SO_LOCK_FILTER", what);
	}
	if (!ret)
		ret = set_mclist(sk, s, what);
	if (!ret)
		ret = sk_opts_restore(sk, s->opts, what);
	if (!ret && s->rx_ring)
		ret = packet_ring_create(sk, s->rx_ring, what);
	sll.sll_protocol = s->protocol;
	sll.sll_ifindex = s->ifindex;
	if (!ret && (s->protocol || s->ifindex) && bind(sk, (struct sockaddr *)&sll, sizeof(sll)))
		ret = pr_errno("%s: cannot bind it to protocol %#x on %s", what, ntohs(s->protocol),
			       s->ifindex ? s->ifname : "every interface");
	if (ret) {
		close(sk);
		return ret;
	}
	return sk;
}
