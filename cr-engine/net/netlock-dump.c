/* The network lock of a dump: one nftables context for all its
 * connections, its table set up before the first, and the connections it
 * locked (for a tree that goes on: they are unlocked again). */
#include <errno.h>
#include <string.h>

#include "dump.h"
#include "fault.h"
#include "log.h"
#include "namespaces.h"
#include "netlock.h"
#include "util.h"

int dump_lock_prepare(struct cr_dump_ctx *ctx)
{
	if (ctx->opts->no_net_lock)
		return 0;
	if (!ctx->netlock && !(ctx->netlock = netlock_open()))
		return -ENOMEM;
	return netlock_prepare(ctx->netlock) ? -EIO : 0;
}

static int lock_made(struct cr_dump_ctx *ctx, struct cr_proc *p, const struct cr_conn *c)
{
	struct made_lock *n = xrealloc_array(ctx->locked_made, ctx->nr_locked_made + 1, sizeof(*n));
	int ret;

	if (!n)
		return -ENOMEM;
	ctx->locked_made = n;
	ret = netlock_in_ns(p->pid, c, 1, true);
	if (ret) {
		pr_err("pid %d: network lock: cannot hold the connection to port %u in its "
		       "network namespace: %s",
		       p->pid, c->rport, strerror(-ret));
		return -EIO;
	}
	n[ctx->nr_locked_made++] = (struct made_lock){ .c = *c, .pid = p->pid };
	return 0;
}

void dump_unlock_made(struct cr_dump_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_locked_made; i++)
		netlock_in_ns(ctx->locked_made[i].pid, &ctx->locked_made[i].c, 1, false);
	ctx->nr_locked_made = 0;
}

int dump_lock(struct cr_dump_ctx *ctx, struct cr_proc *p, const struct cr_conn *c)
{
	struct cr_conn *n = xrealloc_array(ctx->locked, ctx->nr_locked + 1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	ctx->locked = n;
	if (ctx->opts->no_net_lock)
		return 0;
	if (cr_fault("netlock")) {
		pr_err("network lock: cannot hold the connection to port %u (netlock fault "
		       "injected "
		       "by KUPDATE_FAULT)",
		       c->rport);
		return -EIO;
	}
	if (netns_maker(p))
		return lock_made(ctx, p, c);
	n[ctx->nr_locked] = *c;
	if (dump_lock_prepare(ctx) || netlock_add_one(ctx->netlock, c))
		return -EIO;
	ctx->nr_locked++;
	return 0;
}
