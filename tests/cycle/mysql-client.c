/* mysql-client: a MariaDB connection holding a transaction open through
 * the update cycle, from the host through QEMU's forward (the client/server
 * protocol's text queries, a user without a password: a test's own).
 *
 *   mysql-client HOST PORT USER DB STOPFILE
 *   mysql-client HOST PORT USER DB --long ROWS
 *
 * Reads the server's Uptime, begins a transaction and inserts 100 rows
 * into table t (id, v) of DB, then says "inserted 100 rows, the
 * transaction open"; then counts them every 200 ms on the same connection
 * (a query in flight when the server is frozen) until STOPFILE appears;
 * inserts 100 rows more, commits, and counts again.  Prints
 *   PASS 200 rows committed in one transaction, uptime U0 -> U1 s, longest pause S s
 * (the longest time between the ends of two queries, the wait between
 * them included)
 * or FAIL with the reason (exit 1): the connection closed or reset, an
 * error answer, rows missing, the server restarted (its uptime went back).
 *
 * --long ROWS: one query that runs for about ROWS / 250 s in the server
 * (a SLEEP per row) and streams ROWS rows of about 220 bytes (the server
 * sends them as its network buffer fills: several a second); each row is
 * checked (its number in order, its value computed from it, its filler).
 * Started before a cycle, it is running at the freeze.  Prints
 *   PASS ROWS rows in order with their values in S s, longest wait between two rows W s
 * or FAIL. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_LONG_PASSWORD	 0x00000001
#define CLIENT_CONNECT_WITH_DB	 0x00000008
#define CLIENT_PROTOCOL_41	 0x00000200
#define CLIENT_TRANSACTIONS	 0x00002000
#define CLIENT_SECURE_CONNECTION 0x00008000
#define CLIENT_PLUGIN_AUTH	 0x00080000

static int s;
static uint8_t pkt[1 << 16];
static uint8_t seq;
static double last_done, longest;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

static void read_full(void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(s, (uint8_t *)p + got, n - got);

		if (r <= 0)
			fail("the connection %s",
			     r < 0 ? strerror(errno) : "was closed by the server");
		got += r;
	}
}

/* one packet into pkt: its length */
static size_t get(void)
{
	uint8_t h[4];
	size_t len;

	read_full(h, 4);
	len = h[0] | h[1] << 8 | h[2] << 16;
	if (len >= sizeof(pkt))
		fail("a packet of %zu bytes", len);
	seq = h[3] + 1;
	read_full(pkt, len);
	return len;
}

static void put(const void *p, size_t len)
{
	uint8_t h[4] = { len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, seq++ };

	if (write(s, h, 4) != 4 || write(s, p, len) != (ssize_t)len)
		fail("cannot send: %s", strerror(errno));
}

static uint64_t lenenc(const uint8_t **p)
{
	uint8_t c = *(*p)++;
	uint64_t v = 0;
	int n = c == 0xfc ? 2 : c == 0xfd ? 3 : c == 0xfe ? 8 : 0;

	if (!n)
		return c;
	for (int i = 0; i < n; i++)
		v |= (uint64_t) * (*p)++ << (8 * i);
	return v;
}

static void check_err(size_t len, const char *what)
{
	if (len >= 3 && pkt[0] == 0xff)
		fail("%s: error %u: %.*s", what, pkt[1] | pkt[2] << 8, (int)(len > 9 ? len - 9 : 0),
		     (char *)pkt + 9);
}

static void query_once(const char *sql, char *out, size_t olen);

/* a text query; the first column of its first row into out (if any) */
static void query(const char *sql, char *out, size_t olen)
{
	double t;

	query_once(sql, out, olen);
	t = now();
	if (last_done > 0 && t - last_done > longest)
		longest = t - last_done;
	last_done = t;
}

static void query_once(const char *sql, char *out, size_t olen)
{
	uint8_t buf[512];
	size_t len = strlen(sql), n;
	const uint8_t *p;
	uint64_t cols;

	if (len + 1 > sizeof(buf))
		fail("query too long");
	buf[0] = 0x03; /* COM_QUERY */
	memcpy(buf + 1, sql, len);
	seq = 0;
	put(buf, len + 1);
	n = get();
	check_err(n, sql);
	if (out)
		out[0] = 0;
	if (pkt[0] == 0x00)
		return; /* OK */
	p = pkt;
	cols = lenenc(&p);
	for (uint64_t i = 0; i < cols; i++)
		get(); /* column definitions */
	get();	       /* EOF */
	for (bool first = true;; first = false) {
		n = get();
		if (pkt[0] == 0xfe && n < 9)
			break;
		check_err(n, sql);
		if (first && out) {
			uint64_t l;

			p = pkt;
			l = lenenc(&p);
			snprintf(out, olen, "%.*s", (int)l, (const char *)p);
		}
	}
}

/* field i of the row in pkt (len bytes): its text */
static int row_field(size_t len, int i, const char **f, uint64_t *flen)
{
	const uint8_t *p = pkt, *end = pkt + len;

	for (int k = 0; k <= i; k++) {
		if (p >= end || *p == 0xfb)
			return -1;
		*flen = lenenc(&p);
		*f = (const char *)p;
		if (p + *flen > end)
			return -1;
		p += *flen;
	}
	return 0;
}

/* --long: one long query whose rows are each checked as they come */
static int long_query(long rows)
{
	char sql[400];
	double t0 = now(), last, gap = 0;
	uint64_t cols, fl;
	const uint8_t *p;
	const char *f;
	long got = 0;
	size_t n;

	/* MariaDB stops a recursive query at max_recursive_iterations (1000
	 * by default) */
	snprintf(sql, sizeof(sql), "SET SESSION max_recursive_iterations = %ld", rows + 1);
	query_once(sql, NULL, 0);
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < %ld) "
		 "SELECT n, n * 7919 %% 1000003, REPEAT('x', 200) FROM r WHERE SLEEP(0.004) = 0",
		 rows);
	seq = 0;
	{
		uint8_t buf[512] = { 0x03 }; /* COM_QUERY */

		memcpy(buf + 1, sql, strlen(sql));
		put(buf, strlen(sql) + 1);
	}
	n = get();
	check_err(n, "the long query");
	p = pkt;
	cols = lenenc(&p);
	if (cols != 3)
		fail("the long query answers %llu columns, not 3", (unsigned long long)cols);
	for (uint64_t i = 0; i < cols; i++)
		get();
	get(); /* EOF */
	printf("the long query runs\n");
	fflush(stdout);
	last = now();
	for (;;) {
		n = get();
		if (pkt[0] == 0xfe && n < 9)
			break;
		check_err(n, "the long query");
		if (now() - last > gap)
			gap = now() - last;
		last = now();
		got++;
		if (row_field(n, 0, &f, &fl) || strtol(f, NULL, 10) != got)
			fail("row %ld of the long query is not number %ld", got, got);
		if (row_field(n, 1, &f, &fl) || strtol(f, NULL, 10) != got * 7919 % 1000003)
			fail("row %ld of the long query has the wrong value", got);
		if (row_field(n, 2, &f, &fl) || fl != 200 || f[0] != 'x' || f[199] != 'x')
			fail("row %ld of the long query has the wrong filler", got);
	}
	if (got != rows)
		fail("the long query gave %ld rows, not %ld", got, rows);
	printf("PASS %ld rows in order with their values in %.1f s, longest wait between two "
	       "rows %.1f s\n",
	       got, now() - t0, gap);
	return 0;
}

static void login(const char *user, const char *db)
{
	uint8_t r[256] = { 0 };
	uint32_t caps = CLIENT_LONG_PASSWORD | CLIENT_CONNECT_WITH_DB | CLIENT_PROTOCOL_41 |
			CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
	size_t o = 0, n = get();

	check_err(n, "the server's greeting");
	if (pkt[0] != 10)
		fail("the server speaks protocol %u, not 10", pkt[0]);
	memcpy(r, &caps, 4);
	r[4] = 0; /* max packet: 16 MiB */
	r[5] = 0;
	r[6] = 0;
	r[7] = 1;
	r[8] = 33; /* utf8 */
	o = 32;	   /* and 23 bytes of zeros */
	o += snprintf((char *)r + o, sizeof(r) - o, "%s", user) + 1;
	r[o++] = 0; /* no password: an empty answer */
	o += snprintf((char *)r + o, sizeof(r) - o, "%s", db) + 1;
	o += snprintf((char *)r + o, sizeof(r) - o, "mysql_native_password") + 1;
	put(r, o);
	n = get();
	check_err(n, "login");
	if (pkt[0] != 0x00)
		fail("login: answer %#x, not OK", pkt[0]);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char sql[256], v[64], u0[32], u1[32];
	double t0, start;

	if (argc != 6 && !(argc == 7 && !strcmp(argv[5], "--long"))) {
		fprintf(stderr, "usage: mysql-client HOST PORT USER DB STOPFILE\n"
				"       mysql-client HOST PORT USER DB --long ROWS\n");
		return 2;
	}
	a.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1)
		fail("bad address %s", argv[1]);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		fail("cannot connect: %s", strerror(errno));
	login(argv[3], argv[4]);
	if (argc == 7)
		return long_query(atol(argv[6]));
	start = now();
	query("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
	      "VARIABLE_NAME = 'UPTIME'",
	      u0, sizeof(u0));
	query("BEGIN", NULL, 0);
	for (int i = 1; i <= 100; i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%d, 'before %d')", i, i);
		query(sql, NULL, 0);
	}
	printf("inserted 100 rows, the transaction open\n");
	fflush(stdout);
	t0 = now();
	while (access(argv[5], F_OK)) {
		query("SELECT COUNT(*) FROM t", v, sizeof(v));
		if (atoi(v) != 100)
			fail("the transaction sees %s rows, not 100", v);
		if (now() - t0 > 1800)
			fail("STOPFILE never came");
		usleep(200000);
	}
	for (int i = 101; i <= 200; i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%d, 'after %d')", i, i);
		query(sql, NULL, 0);
	}
	query("COMMIT", NULL, 0);
	query("SELECT COUNT(*) FROM t", v, sizeof(v));
	if (atoi(v) != 200)
		fail("%s rows after the commit, not 200", v);
	query("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
	      "VARIABLE_NAME = 'UPTIME'",
	      u1, sizeof(u1));
	/* its running time: no restart, and it went on */
	if (atoi(u1) < atoi(u0) + (int)(now() - start) - 60 || atoi(u1) < atoi(u0))
		fail("the server's uptime went from %s to %s s in %.0f s: restarted", u0, u1,
		     now() - start);
	printf("PASS 200 rows committed in one transaction, uptime %s -> %s s, longest pause "
	       "%.1f s\n",
	       u0, u1, longest);
	return 0;
}
