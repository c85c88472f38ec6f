/* The receive ring of a packet socket (PACKET_RX_RING, TPACKET_V3: the
 * one libpcap, and so tcpdump, maps), part of packet.c's kind.
 *
 * The ring is a run of blocks the kernel fills in turn; a block it has
 * closed (full, or its timer expired with packets in it) has status
 * TP_STATUS_USER until the process gives it back (TP_STATUS_KERNEL).  The
 * process keeps in its own memory which block it reads next; the kernel
 * keeps which block it fills (not readable from outside, but the block it
 * opened last has the highest sequence number).  So at dump, in the
 * process's view of the ring (its mapping's order):
 *  - the blocks not read yet are those of status USER, oldest first, and
 *    the kernel's open block if it holds packets (closed here as its timer
 *    would: status USER, its last packet's time, no next offset);
 *  - the process reads next the first of them (or, with none, the open
 *    block, where the kernel writes next).
 * A new ring starts with the kernel at its block 0, which it has already
 * opened.  The restore writes the blocks not read into the new ring's last
 * blocks, and the process's mapping is laid out rotated (mem/plan.c, the
 * restorer: the ring mapped whole, its pieces moved with mremap) so that
 * those blocks fall where the process reads next and the kernel's block 0
 * right after them: the process reads what it had not read, then what
 * comes, in order, and never a block the kernel is filling.  A ring whose
 * every block is full keeps all but its newest (the kernel's block 0 must
 * stay the kernel's), said and counted.  A TPACKET_V1 or V2 ring (frames,
 * not blocks) is refused. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dump.h"
#include "image.h"
#include "log.h"
#include "packet.h"
#include "util.h"

#define MAX_RING (1ULL << 30)

/* the mappings of socket ino (the memory map dumped before the fds:
 * VMA_PACKET_RING), tiling [*base, *base + len) */
static int ring_pieces(const struct cr_proc *p, uint32_t ino, uint64_t len, uint64_t *base,
		       const char *what)
{
	uint64_t total = 0, end = 0;
	char want[40];
	int n = 0;

	snprintf(want, sizeof(want), "socket:[%u]", ino);
	for (int i = 0; i < p->nr_vmas; i++) {
		const struct cr_vma *v = &p->vmas[i];

		if (v->kind != VMA_KIND__VMA_PACKET_RING || strcmp(v->s.path, want))
			continue;
		/* in address order: one run, no gap */
		if (n && v->s.start != end) {
			pr_err("%s: its ring is mapped in pieces that leave a gap", what);
			return -EOPNOTSUPP;
		}
		if (!n++)
			*base = v->s.start;
		end = v->s.end;
		total += v->s.end - v->s.start;
	}
	if (!n || total != len) {
		pr_err("%s: its ring of %lu bytes is mapped %s (%lu bytes in %d mappings), not "
		       "once whole: it cannot be laid out again",
		       what, (unsigned long)len, n ? "otherwise" : "nowhere", (unsigned long)total,
		       n);
		return -EOPNOTSUPP;
	}
	return 0;
}

static struct tpacket_hdr_v1 *bh(uint8_t *ring, uint64_t bs, uint32_t u)
{
	return &((struct tpacket_block_desc *)(ring + u * bs))->hdr.bh1;
}

/* the kernel's open block, closed as its timer would close it */
static int close_open_block(uint8_t *blk, uint64_t bs)
{
	struct tpacket_hdr_v1 *h = &((struct tpacket_block_desc *)blk)->hdr.bh1;
	struct tpacket3_hdr *pkt = NULL;
	uint64_t off = h->offset_to_first_pkt;

	for (uint32_t i = 0; i < h->num_pkts; i++) {
		if (off + sizeof(*pkt) > bs)
			return -EINVAL;
		pkt = (struct tpacket3_hdr *)(blk + off);
		if (i + 1 < h->num_pkts)
			off += pkt->tp_next_offset;
	}
	if (!pkt)
		return -EINVAL;
	pkt->tp_next_offset = 0;
	h->ts_last_pkt.ts_sec = pkt->tp_sec;
	h->ts_last_pkt.ts_nsec = pkt->tp_nsec;
	h->block_status = TP_STATUS_USER;
	return 0;
}

static int cmp_seq(const void *a, const void *b, void *arg)
{
	const uint64_t *seq = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (seq[x] > seq[y]) - (seq[x] < seq[y]);
}

/* which blocks are not read yet, in order: order[0..*np), and where the
 * process reads next */
static int unread(uint8_t *ring, uint64_t bs, uint32_t nb, uint32_t *order, uint32_t *np,
		  uint32_t *resume, bool *open_kept)
{
	uint64_t *seq = calloc(nb, sizeof(*seq));
	uint32_t cur = 0, p = 0;

	if (!seq)
		return -ENOMEM;
	for (uint32_t u = 0; u < nb; u++) {
		seq[u] = bh(ring, bs, u)->seq_num;
		if (seq[u] > seq[cur])
			cur = u;
		if (bh(ring, bs, u)->block_status & TP_STATUS_USER)
			order[p++] = u;
	}
	qsort_r(order, p, sizeof(*order), cmp_seq, seq);
	free(seq);
	*open_kept = !(bh(ring, bs, cur)->block_status & TP_STATUS_USER) &&
		     bh(ring, bs, cur)->num_pkts > 0;
	if (*open_kept)
		order[p++] = cur;
	*resume = p ? order[0] : cur;
	*np = p;
	return 0;
}

int packet_ring_dump(const struct cr_proc *p, uint32_t ino, const uint32_t rx[7], uint32_t version,
		     PacketRing **out, const char *what)
{
	uint64_t bs = rx[0], nb = rx[1], len = bs * nb, base = 0;
	uint32_t *order = NULL, np = 0, resume = 0;
	uint8_t *ring = NULL;
	PacketRing *r;
	bool open_kept;
	int ret;

	if (version != TPACKET_V3) {
		pr_err("%s: a packet socket with a TPACKET_V%u receive ring (frames, not blocks) "
		       "cannot be checkpointed yet",
		       what, version + 1);
		return -EOPNOTSUPP;
	}
	if (!bs || !nb || len > MAX_RING || bs % 4096) {
		pr_err("%s: its ring of %lu blocks of %lu bytes is not one kupdate can save", what,
		       (unsigned long)nb, (unsigned long)bs);
		return -EOPNOTSUPP;
	}
	ret = ring_pieces(p, ino, len, &base, what);
	if (ret)
		return ret;
	ring = malloc(len);
	order = calloc(nb, sizeof(*order));
	r = malloc(sizeof(*r));
	if (!ring || !order || !r) {
		free(ring);
		free(order);
		free(r);
		return -ENOMEM;
	}
	packet_ring__init(r);
	*out = r;
	{
		struct iovec l = { ring, len }, rm = { (void *)(uintptr_t)base, len };

		if (process_vm_readv(p->pid, &l, 1, &rm, 1, 0) != (ssize_t)len)
			ret = pr_errno("%s: cannot read its ring at %lx", what,
				       (unsigned long)base);
	}
	if (!ret)
		ret = unread(ring, bs, nb, order, &np, &resume, &open_kept);
	if (!ret && open_kept && close_open_block(ring + order[np - 1] * bs, bs)) {
		pr_err("%s: the open block of its ring is damaged", what);
		ret = -EINVAL;
	}
	if (!ret && np == nb) {
		/* the kernel's block 0 is its own once the ring is made: the
		 * newest block cannot be handed back */
		r->has_dropped = 1;
		r->dropped = bh(ring, bs, order[np - 1])->num_pkts;
		pr_warn("%s: its ring is full: the %u packets of its newest block are left out",
			what, r->dropped);
		np--;
	}
	r->block_size = bs;
	r->block_nr = nb;
	r->frame_size = rx[2];
	r->frame_nr = rx[3];
	r->retire_tmo = rx[4];
	r->sizeof_priv = rx[5];
	r->features = rx[6];
	r->resume = resume;
	if (!ret && np) {
		r->has_pending = 1;
		r->pending.len = np * bs;
		r->pending.data = malloc(r->pending.len);
		if (!r->pending.data)
			ret = -ENOMEM;
		for (uint32_t i = 0; !ret && i < np; i++)
			memcpy(r->pending.data + i * bs, ring + order[i] * bs, bs);
	}
	free(ring);
	free(order);
	return ret;
}

void packet_ring_free(PacketRing *r)
{
	if (r)
		free(r->pending.data);
	free(r);
}

int packet_ring_validate(const PacketRing *r)
{
	uint64_t len = (uint64_t)r->block_size * r->block_nr;

	return !r->block_size || !r->block_nr || r->block_size % 4096 || len > MAX_RING ||
			       r->resume >= r->block_nr || r->pending.len % r->block_size ||
			       r->pending.len / r->block_size >= r->block_nr
		       ? -EINVAL
		       : 0;
}

void packet_ring_layout(const PacketRing *r, uint64_t *bs, uint32_t *nb, uint32_t *rot)
{
	uint32_t p = r->pending.len / r->block_size;

	*bs = r->block_size;
	*nb = r->block_nr;
	*rot = (r->resume + p) % r->block_nr;
}

int packet_ring_create(int sk, const PacketRing *r, const char *what)
{
	struct tpacket_req3 req = {
		.tp_block_size = r->block_size,
		.tp_block_nr = r->block_nr,
		.tp_frame_size = r->frame_size,
		.tp_frame_nr = r->frame_nr,
		.tp_retire_blk_tov = r->retire_tmo,
		.tp_sizeof_priv = r->sizeof_priv,
		.tp_feature_req_word = r->features,
	};
	uint64_t len = (uint64_t)r->block_size * r->block_nr;
	uint32_t p = r->pending.len / r->block_size;
	uint8_t *m;

	if (setsockopt(sk, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		return pr_errno("%s: cannot make its ring of %u blocks of %u bytes", what,
				r->block_nr, r->block_size);
	if (!p)
		return 0;
	/* the blocks not read, in the ring's last blocks: the kernel, at its
	 * block 0, reaches them after the process has read them */
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sk, 0);
	if (m == MAP_FAILED)
		return pr_errno("%s: cannot map its new ring", what);
	memcpy(m + (uint64_t)(r->block_nr - p) * r->block_size, r->pending.data, r->pending.len);
	munmap(m, len);
	return 0;
}
