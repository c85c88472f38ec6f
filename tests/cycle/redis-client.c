/* redis-client: a connection to redis-server held open through the update
 * cycle, from the host through QEMU's forward.
 *
 *   redis-client HOST PORT STOPFILE
 *
 * Writes 1000 keys, then issues INCR on a counter every 200 ms on the same
 * connection: each answer must be the previous one plus one (no command
 * lost or repeated), the connection never closed or reset.  When STOPFILE
 * appears it reads every key back on that connection and prints
 *   PASS keys 1000 intact, INCR N..M, longest pause S s
 * or FAIL with the reason (exit 1). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NKEYS 1000

static int s;
static char buf[1 << 16];
static size_t blen;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *fmt, const char *a)
{
	printf("FAIL ");
	printf(fmt, a);
	printf("\n");
	exit(1);
}

static void send_cmd(const char *cmd)
{
	size_t n = strlen(cmd);

	if (write(s, cmd, n) != (ssize_t)n)
		fail("write: %s", strerror(errno));
}

/* one line of the reply (without \r\n), waiting as long as it takes */
static char *line(void)
{
	static char l[4096];
	double t0 = now();

	for (;;) {
		char *e = memmem(buf, blen, "\r\n", 2);

		if (e) {
			size_t n = e - buf;

			memcpy(l, buf, n < sizeof(l) - 1 ? n : sizeof(l) - 1);
			l[n < sizeof(l) - 1 ? n : sizeof(l) - 1] = 0;
			memmove(buf, e + 2, blen - n - 2);
			blen -= n + 2;
			return l;
		}
		struct pollfd p = { s, POLLIN, 0 };
		if (poll(&p, 1, 1000) == 0) {
			if (now() - t0 > 1200)
				fail("no answer for 20 minutes%s", "");
			continue;
		}
		ssize_t r = read(s, buf + blen, sizeof(buf) - blen);
		if (r <= 0)
			fail("the connection was %s", r == 0 ? "closed" : strerror(errno));
		blen += r;
	}
}

static void value(int i, char *v, size_t len)
{
	snprintf(v, len, "value-%d-%08x", i, (unsigned)(i * 2654435761u));
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char cmd[256], v[64];
	long long first = -1, last = -1;
	double t_last, longest = 0, t_report;
	int one = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: redis-client HOST PORT STOPFILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	a.sin_port = htons(atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	for (int i = 0;; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(s);
		if (i == 100)
			fail("cannot connect: %s", strerror(errno));
		usleep(100000);
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int i = 0; i < NKEYS; i++) {
		value(i, v, sizeof(v));
		snprintf(cmd, sizeof(cmd), "SET kupdate:key:%d %s\r\n", i, v);
		send_cmd(cmd);
		if (strcmp(line(), "+OK"))
			fail("SET refused%s", "");
	}
	t_last = t_report = now();
	while (access(argv[3], F_OK)) {
		char *l;
		long long n;
		double t;

		send_cmd("INCR kupdate:counter\r\n");
		l = line();
		if (l[0] != ':')
			fail("INCR answered '%s'", l);
		n = atoll(l + 1);
		if (last >= 0 && n != last + 1) {
			snprintf(cmd, sizeof(cmd), "%lld after %lld", n, last);
			fail("INCR gave %s: a command was lost or repeated", cmd);
		}
		if (first < 0)
			first = n;
		last = n;
		t = now();
		if (t - t_last > longest)
			longest = t - t_last;
		t_last = t;
		if (t - t_report >= 10) {
			printf("redis: INCR at %lld, longest pause %.1f s\n", last, longest);
			t_report = t;
		}
		usleep(200000);
	}
	for (int i = 0; i < NKEYS; i++) {
		char *l;

		snprintf(cmd, sizeof(cmd), "GET kupdate:key:%d\r\n", i);
		send_cmd(cmd);
		l = line();
		value(i, v, sizeof(v));
		if (l[0] != '$' || atoi(l + 1) != (int)strlen(v) || strcmp(line(), v)) {
			snprintf(cmd, sizeof(cmd), "kupdate:key:%d", i);
			fail("key %s lost or changed", cmd);
		}
	}
	printf("PASS keys %d intact, INCR %lld..%lld, longest pause %.1f s\n", NKEYS, first, last,
	       longest);
	return 0;
}
