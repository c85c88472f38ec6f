/* The peer of the stream test, outside the dumped tree: connects to
 * tcpserver at argv[1]:port (read from $CRT_DIR/port), streams records both
 * ways, writes its progress to $CRT_DIR/peer-progress, and on SIGTERM says
 * how it went: exit 0 only if nothing was lost, repeated, reordered or
 * reset.  See stream.h. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

static volatile sig_atomic_t term;
static void on_term(int s)
{
	(void)s;
	term = 1;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("CRT_DIR");
	char path[4096], tmp[4096];
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct stream s;
	double last_report = 0;
	int fd, port = 0;
	FILE *f;

	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGTERM, on_term);
	snprintf(path, sizeof(path), "%s/port", dir);
	for (int i = 0; i < 3000 && !port; i++) {
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (!port)
			usleep(10000);
	}
	inet_pton(AF_INET, argc > 1 ? argv[1] : "127.0.0.1", &a.sin_addr);
	a.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!port || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		printf("FAIL: cannot connect to port %d: %s\n", port, strerror(errno));
		return 1;
	}
	stream_init(&s, fd);
	while (!term) {
		double t;

		if (stream_step(&s, 2, 1, 2)) {
			if (!s.err[0])
				snprintf(s.err, sizeof(s.err), "the server closed the connection");
			printf("FAIL: %s after %u records received, %u sent\n", s.err, s.next_recv,
			       s.next_send);
			return 1;
		}
		t = stream_now();
		if (t - last_report > 0.05) {
			snprintf(path, sizeof(path), "%s/peer-progress", dir);
			snprintf(tmp, sizeof(tmp), "%s/.peer-progress", dir);
			f = fopen(tmp, "w");
			if (f) {
				fprintf(f, "%u %u %.3f\n", s.next_recv, s.next_send, s.longest_gap);
				fclose(f);
				rename(tmp, path);
			}
			last_report = t;
		}
	}
	/* finish: no more records from us; read the server's until it closes */
	while (s.out_len) {
		if (stream_step(&s, 2, 1, 2) < 0) {
			printf("FAIL: %s while finishing\n", s.err);
			return 1;
		}
	}
	s.done_sending = 1;
	shutdown(fd, SHUT_WR);
	for (double end = stream_now() + 10;;) {
		int r = stream_step(&s, 2, 1, 10);

		if (r < 0) {
			printf("FAIL: %s while finishing\n", s.err);
			return 1;
		}
		if (r > 0)
			break;
		if (stream_now() > end) {
			printf("FAIL: the server did not close the connection\n");
			return 1;
		}
	}
	printf("PASS: %u records received, %u sent, longest stall %.3f s\n", s.next_recv,
	       s.next_send, s.longest_gap);
	return 0;
}
