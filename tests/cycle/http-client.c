/* http-client: an HTTP/1.1 keep-alive connection left idle through the
 * update cycle, from the host through QEMU's forward.
 *
 *   http-client HOST PORT PATH GOFILE
 *
 * Asks for PATH once, keeps the connection open and idle until GOFILE
 * appears (at most 30 minutes), then asks for PATH again on the same
 * connection: the answer must be 200 with the same body as the first.
 * Prints
 *   PASS the same connection answered after S s idle (N bytes, the same body)
 * or FAIL with the reason (exit 1): the connection closed, reset, or a
 * different answer. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY (1 << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *what, int err)
{
	printf("FAIL %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
	exit(1);
}

/* one request on s and its answer's body into body (its length in *len);
 * NULL, or what went wrong */
static const char *ask(int s, const char *path, char *body, size_t *len, int *err)
{
	static char head[8192];
	char req[512];
	size_t h = 0, want;
	char *end, *cl;

	*err = 0;
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: cycle\r\nConnection: keep-alive\r\n\r\n", path);
	if (write(s, req, strlen(req)) != (ssize_t)strlen(req)) {
		*err = errno;
		return "cannot send the request";
	}
	/* the header, a byte at a time: nothing of the body read with it */
	while (h < sizeof(head) - 1) {
		ssize_t n = read(s, head + h, 1);

		if (n <= 0) {
			*err = n < 0 ? errno : 0;
			return n < 0 ? "the connection failed" : "the server closed the connection";
		}
		h += n;
		head[h] = 0;
		if (h >= 4 && !memcmp(head + h - 4, "\r\n\r\n", 4))
			break;
	}
	end = strstr(head, "\r\n\r\n");
	if (!end || strncmp(head, "HTTP/1.1 200", 12))
		return "no 200 answer";
	cl = strcasestr(head, "\r\nContent-Length:");
	if (!cl || sscanf(cl + 17, "%zu", &want) != 1 || want > MAX_BODY)
		return "no Content-Length (or too large)";
	*len = 0;
	while (*len < want) {
		ssize_t n = read(s, body + *len, want - *len);

		if (n <= 0) {
			*err = n < 0 ? errno : 0;
			return "the body was cut short";
		}
		*len += n;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static char first[MAX_BODY], again[MAX_BODY];
	struct sockaddr_in a = { .sin_family = AF_INET };
	size_t l1 = 0, l2 = 0;
	const char *why;
	double t0, idle;
	int s, err;

	if (argc != 5) {
		fprintf(stderr, "usage: http-client HOST PORT PATH GOFILE\n");
		return 2;
	}
	a.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1)
		fail("bad address", 0);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		fail("cannot connect", errno);
	why = ask(s, argv[3], first, &l1, &err);
	if (why)
		fail(why, err);
	t0 = now();
	while (access(argv[4], F_OK)) {
		if (now() - t0 > 1800)
			fail("GOFILE never came", 0);
		usleep(200000);
	}
	idle = now() - t0;
	why = ask(s, argv[3], again, &l2, &err);
	if (why) {
		char m[160];

		snprintf(m, sizeof(m), "the second request after %.1f s idle: %s", idle, why);
		fail(m, err);
	}
	if (l1 != l2 || memcmp(first, again, l1))
		fail("the second answer's body differs from the first", 0);
	printf("PASS the same connection answered after %.1f s idle (%zu bytes, the same body)\n",
	       idle, l2);
	return 0;
}
