/* The network lock: while a TCP connection is dumped and until it is
 * restored, its packets are dropped (nftables, through libnftables), so the
 * peer only retransmits and never meets a closed port that would answer
 * with a reset.
 *
 *   table inet kupdate
 *     set conn4 / conn6: remote addr . remote port . local addr . local port
 *     chain in  (hook input,  priority -300): from a locked peer -> drop
 *     chain out (hook output, priority -300): to a locked peer   -> drop
 *
 * The table lives in the network namespace kupdate runs in.  Elements are
 * added by the dump and removed by the restore (or by a failed dump). */
#include <arpa/inet.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>

#include "log.h"
#include "netlock.h"
#include "util.h"

#define TABLE "inet kupdate"

static bool v4mapped(const uint8_t *a)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return !memcmp(a, pfx, 12);
}

/* "R . rp . L . lp" and which set it belongs to */
static void element(const struct cr_conn *c, char *buf, size_t len, const char **set)
{
	char r[INET6_ADDRSTRLEN], l[INET6_ADDRSTRLEN];

	if (c->family == AF_INET || (v4mapped(c->raddr) && v4mapped(c->laddr))) {
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

/* libnftables keeps state of its own beyond a context: apply's dumps,
 * which run in threads, take turns in it */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

static int nft_cmd(struct nft_ctx *nft, const char *cmd)
{
	int ret;

	pthread_mutex_lock(&nft_lock);
	ret = nft_run_cmd_from_buffer(nft, cmd);
	pthread_mutex_unlock(&nft_lock);
	return ret;
}

static void close_nft(struct nft_ctx *nft)
{
	if (!nft)
		return;
	pthread_mutex_lock(&nft_lock);
	nft_ctx_free(nft);
	pthread_mutex_unlock(&nft_lock);
}

/* Closing the nftables socket after a deletion waits for the kernel to
 * free what was deleted (20 ms on this host, an RCU grace period, more in
 * an emulated guest): a restore's unlock leaves it to the process's exit,
 * after its tree runs again.  So does the removal of the table once no
 * connection is held in it: one more command, which lists the table
 * (100-150 ms in the emulated guest's boot, with the other restores). */
enum { MAX_DEFERRED = 8 };
static struct nft_ctx *deferred[MAX_DEFERRED];
static int nr_deferred;
static bool tidy_at_exit, keep_table;

static void drop_table_if_empty(struct nft_ctx *nft);

static void close_deferred(void)
{
	if (tidy_at_exit && nr_deferred > 0)
		drop_table_if_empty(deferred[nr_deferred - 1]);
	pthread_mutex_lock(&nft_lock);
	while (nr_deferred > 0)
		nft_ctx_free(deferred[--nr_deferred]);
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

static int run(struct nft_ctx *nft, const char *cmd, bool quiet)
{
	int ret = nft_cmd(nft, cmd);

	if (ret && !quiet) {
		const char *err = nft_ctx_get_error_buffer(nft);

		pr_err("network lock: nftables refused '%.*s': %s", (int)strcspn(cmd, "\n"), cmd,
		       err && *err ? err : "unknown error");
	}
	return ret ? -EIO : 0;
}

static struct nft_ctx *open_nft(void)
{
	struct nft_ctx *nft;

	pthread_mutex_lock(&nft_lock);
	nft = nft_ctx_new(NFT_CTX_DEFAULT);
	pthread_mutex_unlock(&nft_lock);
	if (!nft) {
		pr_err("network lock: cannot create an nftables context");
		return NULL;
	}
	nft_ctx_buffer_error(nft);
	nft_ctx_buffer_output(nft);
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

static int add(struct nft_ctx *nft, const struct cr_conn *c, size_t n, bool with_setup)
{
	char *cmd;
	size_t cap = strlen(setup) + n * 160 + 1, len = 0;
	int ret;

	cmd = malloc(cap);
	if (!cmd)
		return -ENOMEM;
	cmd[0] = 0;
	if (with_setup)
		len = snprintf(cmd, cap, "%s", setup);
	for (size_t i = 0; i < n; i++) {
		char el[160];
		const char *set;

		element(&c[i], el, sizeof(el), &set);
		len += snprintf(cmd + len, cap - len, "add element " TABLE " %s { %s }\n", set, el);
	}
	/* one batch: all or nothing */
	ret = run(nft, cmd, false);
	free(cmd);
	return ret;
}

int netlock_add(const struct cr_conn *c, size_t n)
{
	struct nft_ctx *nft;
	int ret;

	if (!n)
		return 0;
	nft = open_nft();
	if (!nft)
		return -EIO;
	ret = add(nft, c, n, true);
	close_nft(nft);
	return ret;
}

/* A dump locks its connections one by one: the table is set up once and
 * each connection costs one element, not a new context and ruleset. */
struct netlock {
	struct nft_ctx *nft;
	bool set_up;
};

struct netlock *netlock_open(void)
{
	struct netlock *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->nft = open_nft();
	if (!l->nft) {
		free(l);
		return NULL;
	}
	return l;
}

int netlock_add_one(struct netlock *l, const struct cr_conn *c)
{
	int ret = add(l->nft, c, 1, !l->set_up);

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
	out = nft_ctx_get_output_buffer(nft);
	return !out || !strstr(out, "elements");
}

static void drop_table_if_empty(struct nft_ctx *nft)
{
	if (table_empty(nft))
		run(nft, "delete table " TABLE, true);
}

/* Every nftables command fetches the ruleset and makes a netlink
 * transaction (tens of milliseconds in an emulated guest): the elements go
 * in one batch, and only if it is refused (one of them gone already: a
 * restore repeated, say) one at a time. */
int netlock_del(const struct cr_conn *c, size_t n)
{
	enum { LINE = 256 }; /* "delete element inet kupdate connN { " + element + " }" */
	struct nft_ctx *nft = open_nft();
	char *batch = malloc(n * LINE + 1);
	size_t len = 0;

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
	if (n && run(nft, batch, true)) {
		for (char *line = batch, *nl; *line; line = nl + 1) {
			nl = strchr(line, '\n');
			*nl = 0;
			run(nft, line, true);
		}
	}
	free(batch);
	if (close_later(nft)) {
		tidy_at_exit = !keep_table;
		return 0;
	}
	/* no room to defer: tidy and close now */
	if (!keep_table)
		drop_table_if_empty(nft);
	close_nft(nft);
	return 0;
}

void netlock_keep_table(void)
{
	keep_table = true;
}

int netlock_clear(void)
{
	struct nft_ctx *nft = open_nft();
	int ret;

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
	nft_ctx_set_dry_run(nft, true);
	ret = nft_cmd(nft, cmd) ? -EOPNOTSUPP : 0;
	if (ret) {
		const char *err = nft_ctx_get_error_buffer(nft);

		if (!err || !*err)
			err = "refused";
		snprintf(why, len, "%.*s", (int)strcspn(err, "\n"), err);
	}
	free(cmd);
	close_nft(nft);
	return ret;
}
