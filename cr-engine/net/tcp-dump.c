/* The established TCP connections of a dump: each locked, read in repair
 * mode, and held until the dump ends.
 *
 * The dump holds a copy of the socket, but leaves repair mode as soon as
 * the connection is read (without a window probe where the kernel can:
 * TCP_REPAIR_OFF_NO_WP), and puts it back only just before the tree is
 * killed, the very last step: a kupdate killed in between (SIGKILL, OOM)
 * leaves the service ordinary sockets, whose unread data it can still
 * read once its packets flow again.  A tree that goes on (a failed dump,
 * --leave-running) gets a window probe once the lock is lifted, so that
 * the peer resumes at once, and its peers' retransmission timeouts cut
 * short (tcp-rto.c). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "dump.h"
#include "log.h"
#include "netlock.h"
#include "namespaces.h"
#include "tcp-int.h"
#include "tcp-rto.h"
#include "tcp.h"
#include "util.h"

/* The dump holds a copy of each established connection's socket until it
 * ends; the index of the new one, or a negative errno. */
static int hold_tcp(struct cr_dump_ctx *ctx, int sk, pid_t pid, int fd, bool reuseaddr)
{
	struct dump_tcp_sk *n = xrealloc_array(ctx->tcp_sks, ctx->nr_tcp_sks + 1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	ctx->tcp_sks = n;
	n[ctx->nr_tcp_sks] =
		(struct dump_tcp_sk){ .fd = sk, .pid = pid, .tree_fd = fd, .reuseaddr = reuseaddr };
	return ctx->nr_tcp_sks++;
}

static void held_name(const struct dump_tcp_sk *h, char *buf, size_t len)
{
	snprintf(buf, len, "pid %d: fd %d", h->pid, h->tree_fd);
}

/* The last acknowledgement this side sent before the lock (an ACK it sends
 * later is dropped, and moves rcv_wup all the same): the peer's snd_una,
 * which the restore quotes to the peer (rto_revert_send).  Reading it takes
 * repair mode, left again without a probe.  -1: not read. */
static int read_last_ack(int sk, bool reuse, int64_t *rcv_wup, const char *what)
{
	uint32_t wup;

	*rcv_wup = -1;
	if (tcp_repair_on(sk, what))
		return 0;
	if (!tcp_repair_last_ack(sk, &wup))
		*rcv_wup = wup;
	if (tcp_repair_off(sk, 0, what) || tcp_repair_reuseaddr(sk, reuse, what))
		return -EIO;
	return 0;
}

/* the held connection h, read in repair mode into s->tcp */
static int read_held(struct dump_tcp_sk *h, InetSk *s, const struct cr_conn *c,
		     int64_t rcv_wup_at_lock, const char *what)
{
	struct tcp_repair *tr;
	struct tcp_repair_data d;
	int ret, r;

	ret = tcp_repair_on(h->fd, what);
	if (ret)
		return ret;
	h->repair = true;
	ret = tcp_repair_save(h->fd, s->state, &tr, what);
	if (!ret) {
		tcp_repair_export(tr, &d);
		ret = tcp_stream_set(s, &d, rcv_wup_at_lock);
	}
	if (!ret) {
		h->read = true;
		h->conn = *c;
		h->nr_acks = peer_una_candidates(s->tcp, h->acks);
	}
	/* read: an ordinary socket again at once (its packets stay locked),
	 * without a window probe; back in repair mode just before the kill */
	r = tcp_repair_off(h->fd, 0, what);
	if (!r)
		h->repair = false;
	if (!r)
		r = tcp_repair_reuseaddr(h->fd, h->reuseaddr, what);
	return ret ? ret : r;
}

int tcp_dump_conn(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, int *sk, InetSk *s,
		  const char *what)
{
	bool reuse = s->opts->has_reuseaddr && s->opts->reuseaddr;
	int64_t rcv_wup_at_lock, t_read;
	struct cr_conn c;
	int h, ret;

	/* (a tree in its own network namespace: its peer must be the tree's) */
	inet_conn(s, &c);
	ret = netns_conn(ctx, &c, p->pid, fd);
	if (ret || ctx->check_only)
		return ret; /* checkpointable; nothing to lock or read */
	/* The lock's table is set up first: between the read of the last
	 * acknowledgement and the lock, only the element's transaction. */
	ret = netns_maker(p) ? 0 : dump_lock_prepare(ctx); /* (a container's: dump_lock) */
	if (ret)
		return ret;
	t_read = now_ns(CLOCK_MONOTONIC);
	ret = read_last_ack(*sk, reuse, &rcv_wup_at_lock, what);
	if (ret)
		return ret;
	/* lock first, so that nothing moves while it is read */
	ret = dump_lock(ctx, p, &c);
	if (ret)
		return ret;
	pr_debug("%s: locked %.2f ms after its last acknowledgement was read", what,
		 (now_ns(CLOCK_MONOTONIC) - t_read) / 1e6);
	h = hold_tcp(ctx, *sk, p->pid, fd, reuse);
	if (h < 0)
		return h;
	*sk = -1; /* held until the dump ends */
	return read_held(&ctx->tcp_sks[h], s, &c, rcv_wup_at_lock, what);
}

/* The same for the connections a dump held, when the tree goes on (the
 * pause was the dump's, as long as a large one takes) */
static void rto_revert_held(struct cr_dump_ctx *ctx)
{
	struct rto_revert rr = RTO_REVERT_INIT;
	struct cr_conn *all = calloc(ctx->nr_tcp_sks ? ctx->nr_tcp_sks : 1, sizeof(*all));
	size_t n = 0;

	if (!all)
		return;
	for (int i = 0; i < ctx->nr_tcp_sks; i++)
		if (ctx->tcp_sks[i].read)
			all[n++] = ctx->tcp_sks[i].conn;
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		if (!h->read || h->repair)
			continue; /* not read, or still in repair mode: no probe either */
		held_name(h, what, sizeof(what));
		rto_revert_send(&rr, &h->conn, h->acks, h->nr_acks, all, n, what);
	}
	rto_revert_report(&rr);
	free(all);
}

/* The tree goes on (a failed dump, --leave-running), its connections
 * unlocked: each leaves repair mode with a window probe, so that the peer
 * resumes at once without waiting for its retransmission timer; one that
 * already left it goes in and out again for the probe.  The tree is still
 * stopped. */
void tcp_dump_resume(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		held_name(h, what, sizeof(what));
		if (!h->repair && tcp_repair_on(h->fd, what))
			continue; /* it runs on without the probe */
		h->repair = true;
		if (tcp_repair_off(h->fd, TCP_RESUME_PROBES, what))
			continue;
		h->repair = false;
		tcp_repair_reuseaddr(h->fd, h->reuseaddr, what);
	}
	if (!ctx->opts->no_rto_revert)
		rto_revert_held(ctx);
	tcp_dump_close(ctx);
}

/* The very last step before the tree is killed: every connection back in
 * repair mode, so that neither the death of its processes nor our close
 * sends a FIN or a RST (the lock stays until the restore). */
void tcp_dump_repair(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++) {
		struct dump_tcp_sk *h = &ctx->tcp_sks[i];
		char what[64];

		held_name(h, what, sizeof(what));
		if (!h->repair && !tcp_repair_on(h->fd, what))
			h->repair = true;
	}
}

void tcp_dump_close(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_tcp_sks; i++)
		close(ctx->tcp_sks[i].fd);
	ctx->nr_tcp_sks = 0;
}
