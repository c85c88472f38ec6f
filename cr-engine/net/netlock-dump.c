/* The network lock of a dump: one nftables context for all its
 * connections, its table set up before the first, and the connections it
 * locked (for a tree that goes on: they are unlocked again). */
#include <errno.h>

#include "dump.h"
#include "fault.h"
#include "log.h"
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

int dump_lock(struct cr_dump_ctx *ctx, const struct cr_conn *c)
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
	n[ctx->nr_locked] = *c;
	if (dump_lock_prepare(ctx) || netlock_add_one(ctx->netlock, c))
		return -EIO;
	ctx->nr_locked++;
	return 0;
}
