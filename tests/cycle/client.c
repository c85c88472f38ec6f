/* demo-client: the live TCP client of the update cycle, on the host.
 *
 *   demo-client HOST PORT STOPFILE
 *
 * Keeps one connection to the counter service (through QEMU's host
 * forward), asks "get" every 200 ms and checks every answer: the
 * connection is never closed or reset, the service's pid never changes,
 * the counter never goes back, and across the longest pause it moves on by
 * no more than the time it was away allows (10 ticks a second).  Prints a
 * line every 10 s, and when STOPFILE appears the verdict:
 *   PASS answers N counter A..B pid P longest-pause S s (counter +D across it)
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

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned long long first = 0, last = 0, answers = 0, jump = 0;
	double t_last, longest = 0, t_report;
	int s, pid = 0, one = 1;
	char buf[256];
	size_t len = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: demo-client HOST PORT STOPFILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	a.sin_port = htons(atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	s = socket(AF_INET, SOCK_STREAM, 0);
	for (int i = 0; i < 100; i++) {
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(s);
		s = socket(AF_INET, SOCK_STREAM, 0);
		usleep(100000);
		if (i == 99) {
			printf("FAIL cannot connect to %s:%s: %s\n", argv[1], argv[2],
			       strerror(errno));
			return 1;
		}
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	t_last = t_report = now();
	while (access(argv[3], F_OK)) {
		struct pollfd p = { s, POLLIN, 0 };
		unsigned long long v;
		int apid;
		char *nl;
		double t;

		if (write(s, "get\n", 4) != 4) {
			printf("FAIL write after %llu answers: %s\n", answers, strerror(errno));
			return 1;
		}
		/* one answer, however long the service is away */
		for (;;) {
			int r = poll(&p, 1, 1000);
			ssize_t n;

			if (r < 0 && errno == EINTR)
				continue;
			if (now() - t_last > 1200) {
				printf("FAIL no answer for %.0f s\n", now() - t_last);
				return 1;
			}
			if (r == 0)
				continue;
			n = read(s, buf + len, sizeof(buf) - 1 - len);
			if (n <= 0) {
				printf("FAIL the connection was %s after %llu answers (counter "
				       "%llu)\n",
				       n == 0 ? "closed" : strerror(errno), answers, last);
				return 1;
			}
			len += n;
			buf[len] = 0;
			if ((nl = strchr(buf, '\n')))
				break;
		}
		*nl = 0;
		if (sscanf(buf, "%llu %d", &v, &apid) != 2) {
			printf("FAIL unexpected answer '%s'\n", buf);
			return 1;
		}
		memmove(buf, nl + 1, len - (nl + 1 - buf) + 1);
		len = strlen(buf);
		t = now();
		if (!answers) {
			first = v;
			pid = apid;
		} else {
			if (apid != pid) {
				printf("FAIL the service's pid changed from %d to %d\n", pid, apid);
				return 1;
			}
			if (v < last) {
				printf("FAIL the counter went back from %llu to %llu\n", last, v);
				return 1;
			}
			if (t - t_last > longest) {
				longest = t - t_last;
				jump = v - last;
			}
		}
		answers++;
		last = v;
		t_last = t;
		if (t - t_report >= 10) {
			printf("client: %llu answers, counter %llu, pid %d, longest pause %.1f s\n",
			       answers, last, pid, longest);
			t_report = t;
		}
		usleep(200000);
	}
	if (answers < 2) {
		printf("FAIL only %llu answers\n", answers);
		return 1;
	}
	if (jump > longest * 10 + 10) {
		printf("FAIL the counter moved on by %llu across a pause of %.1f s: it ran while "
		       "it should have been stopped, or was replaced\n",
		       jump, longest);
		return 1;
	}
	printf("PASS answers %llu counter %llu..%llu pid %d longest-pause %.1f s (counter +%llu "
	       "across it)\n",
	       answers, first, last, pid, longest, jump);
	return 0;
}
