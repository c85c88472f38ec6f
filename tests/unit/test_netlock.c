/* Unit tests of the network lock's elements (netlock.c), which go through
 * nftables' netlink messages built by kupdate: in a network namespace of
 * the test's own, elements added for IPv4, IPv6 and v4-mapped connections
 * must be the ones nftables shows for those connections (its text "get
 * element"), a batch larger than one message's worth is taken whole, and
 * a removal with an element missing removes the others, and the table goes
 * at a restore's exit once it holds nothing.  Needs root
 * (CAP_NET_ADMIN, CAP_SYS_ADMIN for the namespace): skipped without. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr.h"
#include "netlock.h"

static bool in_netns;

static int setup(void **state)
{
	(void)state;
	in_netns = unshare(CLONE_NEWNET) == 0;
	return 0;
}

static void conn(struct cr_conn *c, int family, const char *l, const char *r, unsigned lp,
		 unsigned rp)
{
	memset(c, 0, sizeof(*c));
	c->family = family;
	inet_pton(family, l, c->laddr);
	inet_pton(family, r, c->raddr);
	c->lport = lp;
	c->rport = rp;
}

static void test_kinds(void **state)
{
	struct cr_conn c[3];

	(void)state;
	if (!in_netns)
		skip();
	conn(&c[0], AF_INET, "10.1.2.3", "10.4.5.6", 80, 40001);
	conn(&c[1], AF_INET6, "fd00::1", "fd00::2", 443, 40002);
	conn(&c[2], AF_INET6, "::ffff:10.7.8.9", "::ffff:10.9.8.7", 8080, 40003);
	assert_int_equal(netlock_add(c, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_true(netlock_present(&c[i]));
	/* the same ports the other way round is another connection */
	{
		struct cr_conn o;

		conn(&o, AF_INET, "10.1.2.3", "10.4.5.6", 40001, 80);
		assert_false(netlock_present(&o));
	}
	assert_int_equal(netlock_del(c, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_false(netlock_present(&c[i]));
}

static void test_many_and_missing(void **state)
{
	enum { N = 1500 };
	static struct cr_conn c[N];

	(void)state;
	if (!in_netns)
		skip();
	for (int i = 0; i < N; i++)
		conn(&c[i], i % 3 ? AF_INET : AF_INET6, i % 3 ? "10.0.0.1" : "fd00::1",
		     i % 3 ? "10.0.0.2" : "fd00::2", 80, 10000 + i);
	assert_int_equal(netlock_add(c, N), 0);
	assert_true(netlock_present(&c[0]));
	assert_true(netlock_present(&c[N - 1]));
	assert_int_equal(netlock_del(&c[7], 1), 0);
	assert_false(netlock_present(&c[7]));
	/* one of them is gone: the rest go all the same */
	assert_int_equal(netlock_del(c, N), 0);
	assert_false(netlock_present(&c[0]));
	assert_false(netlock_present(&c[N / 2]));
	assert_false(netlock_present(&c[N - 1]));
}

/* an IPv4 and an IPv6 connection, and no lock table to begin with (the
 * test is skipped without nft to list it) */
static void two_conns_no_table(struct cr_conn c[2])
{
	if (!in_netns || system("nft --version >/dev/null 2>&1"))
		skip();
	netlock_clear();
	conn(&c[0], AF_INET, "10.1.2.3", "10.4.5.6", 80, 40001);
	conn(&c[1], AF_INET6, "fd00::1", "fd00::2", 443, 40002);
}

/* nft's listing of the lock's table */
static void listing(char *buf, size_t len)
{
	FILE *f = popen("nft list table inet kupdate", "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	assert_int_equal(pclose(f), 0);
}

/* The table kupdate sets up with its own netlink messages is the one nft
 * makes of the text setup: the same listing (sets, chains, rules), with
 * the same elements, and a second setup leaves one copy of each rule. */
static void test_setup_as_text(void **state)
{
	struct cr_conn c[2];
	static char a[16384], b[16384];
	FILE *f;

	(void)state;
	two_conns_no_table(c);
	assert_int_equal(netlock_add(&c[0], 1), 0);
	assert_int_equal(netlock_add(&c[1], 1), 0);
	listing(a, sizeof(a));
	assert_int_equal(netlock_clear(), 0);
	assert_int_equal(netlock_clear(), -ENOENT);
	f = popen("nft -f -", "w");
	assert_non_null(f);
	fputs(netlock_setup_text(), f);
	fputs("add element inet kupdate conn4 { 10.4.5.6 . 40001 . 10.1.2.3 . 80 }\n"
	      "add element inet kupdate conn6 { fd00::2 . 40002 . fd00::1 . 443 }\n",
	      f);
	assert_int_equal(pclose(f), 0);
	listing(b, sizeof(b));
	assert_string_equal(a, b);
	assert_non_null(strstr(a, "ip saddr . tcp sport . ip daddr . tcp dport @conn4 drop"));
	assert_int_equal(netlock_clear(), 0);
	/* kupdate's fallback where the kernel refuses the netlink messages:
	 * libnftables' text commands, the same table */
	setenv("KUPDATE_NETLOCK_TEXT", "1", 1);
	assert_int_equal(netlock_add(&c[0], 1), 0);
	assert_int_equal(netlock_add(&c[1], 1), 0);
	unsetenv("KUPDATE_NETLOCK_TEXT");
	listing(b, sizeof(b));
	assert_string_equal(a, b);
	assert_int_equal(netlock_clear(), 0);
}

static bool table_there(void)
{
	return system("nft list table inet kupdate >/dev/null 2>&1") == 0;
}

/* a process that removes n connections' elements and exits, as a restore
 * does (keep: as a boot's restore, which keeps the table) */
static void del_in_child(const struct cr_conn *c, size_t n, bool keep)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (keep)
			netlock_keep_table();
		exit(netlock_del(c, n) ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A restore drops the table at its exit once no connection is held in
 * either set (asked by netlink), and not while one is, in the other set
 * or among many; a boot's restore keeps it. */
static void test_table_dropped_at_exit(void **state)
{
	enum { N = 1500 };
	static struct cr_conn many[N];
	struct cr_conn c[2];

	(void)state;
	two_conns_no_table(c);
	assert_int_equal(netlock_add(c, 2), 0);
	del_in_child(&c[0], 1, false);
	assert_true(table_there()); /* the IPv6 one is still held */
	assert_true(netlock_present(&c[1]));
	del_in_child(&c[1], 1, false);
	assert_false(table_there());
	/* the IPv6 set empty, the IPv4 one with many: the answer comes in
	 * several parts */
	for (int i = 0; i < N; i++)
		conn(&many[i], AF_INET, "10.0.0.1", "10.0.0.2", 80, 10000 + i);
	assert_int_equal(netlock_add(many, N), 0);
	assert_int_equal(netlock_add(&c[1], 1), 0);
	del_in_child(&c[1], 1, false);
	assert_true(table_there());
	del_in_child(many, N - 1, false);
	assert_true(table_there());
	assert_true(netlock_present(&many[N - 1]));
	del_in_child(&many[N - 1], 1, false);
	assert_false(table_there());
	/* a boot's restore leaves the empty table to kupdate-finish */
	assert_int_equal(netlock_add(c, 2), 0);
	del_in_child(c, 2, true);
	assert_true(table_there());
	assert_false(netlock_present(&c[0]));
	assert_int_equal(netlock_clear(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_many_and_missing),
		cmocka_unit_test(test_setup_as_text),
		cmocka_unit_test(test_table_dropped_at_exit),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
