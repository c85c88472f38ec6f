/* The peer of the stream test, outside the dumped tree: connects to
 * tcpserver at argv[1]:port (an IPv6 address if it has a colon) (read from $CRT_DIR/port), streams records both
 * ways, writes its progress to $CRT_DIR/peer-progress, and on SIGTERM says
 * how it went: exit 0 only if nothing was lost, repeated, reordered or
 * reset.  See stream.h.  The progress file's fields: records received,
 * records sent, the longest stall (s), the bytes of the stream the server
 * has acknowledged, the bytes this side has written.
 *
 * argv[2] "nowscale" (in a network namespace of its own): the connection
 * goes without window scaling (as with QEMU's user network), and the
 * window the server offers after the last restore must be at least 3/4 of
 * the largest it offered before the first dump (a restored socket that
 * kept the scale its repair-mode connect chose offered half).
 *
 * argv[2] "paced": a record every 5 ms (about 200 KB/s) instead of as fast
 * as the window lets it: the server never closes its window, and what this
 * side sends while the server is away is lost to the lock and waits for
 * this side's retransmission timer (a client sending requests). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h> /* the kernel's tcp_info: tcpi_snd_wnd */
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "stream.h"

static volatile sig_atomic_t term;
static void on_term(int s)
{
	(void)s;
	term = 1;
}

/* the window the server offers, as this side reads it, by stretches of
 * the stream without a stall (a dump and restore ends one) */
struct windows {
	bool reported; /* the kernel reports tcpi_snd_wnd (newer kernels do) */
	uint32_t first, last;
	int stretch;
	double last_recv;
};

static void note_window(struct windows *w, int fd, const struct stream *s)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) ||
	    l < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd))
		return;
	w->reported = true;
	if (s->last_recv - w->last_recv > 0.3 && w->last_recv > 0) {
		w->stretch++;
		w->last = 0;
	}
	w->last_recv = s->last_recv;
	if (!w->stretch && ti.tcpi_snd_wnd > w->first)
		w->first = ti.tcpi_snd_wnd;
	if (ti.tcpi_snd_wnd > w->last)
		w->last = ti.tcpi_snd_wnd;
}

int main(int argc, char **argv)
{
	bool nowscale = argc > 2 && !strcmp(argv[2], "nowscale");
	bool paced = argc > 2 && !strcmp(argv[2], "paced");
	struct windows w = { 0 };
	const char *dir = getenv("CRT_DIR");
	char path[4096], tmp[4096];
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
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
	if (nowscale) {
		f = fopen("/proc/sys/net/ipv4/tcp_window_scaling", "w");
		if (!f || fputs("0\n", f) < 0 || fclose(f)) {
			printf("FAIL: cannot turn window scaling off\n");
			return 1;
		}
	}
	if (argc > 1 && strchr(argv[1], ':')) {
		inet_pton(AF_INET6, argv[1], &a6.sin6_addr);
		a6.sin6_port = htons(port);
		fd = socket(AF_INET6, SOCK_STREAM, 0);
		if (!port || connect(fd, (struct sockaddr *)&a6, sizeof(a6))) {
			printf("FAIL: cannot connect to [%s]:%d: %s (no IPv6 here?)\n", argv[1],
			       port, strerror(errno));
			return 1;
		}
	} else {
		inet_pton(AF_INET, argc > 1 ? argv[1] : "127.0.0.1", &a.sin_addr);
		a.sin_port = htons(port);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!port || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			printf("FAIL: cannot connect to port %d: %s\n", port, strerror(errno));
			return 1;
		}
	}
	stream_init(&s, fd);
	if (paced)
		s.pace = 0.005;
	while (!term) {
		double t;

		if (stream_step(&s, 2, 1, 2)) {
			if (!s.err[0])
				snprintf(s.err, sizeof(s.err), "the server closed the connection");
			printf("FAIL: %s after %u records received, %u sent\n", s.err, s.next_recv,
			       s.next_send);
			return 1;
		}
		if (nowscale)
			note_window(&w, fd, &s);
		t = stream_now();
		if (t - last_report > 0.05) {
			snprintf(path, sizeof(path), "%s/peer-progress", dir);
			snprintf(tmp, sizeof(tmp), "%s/.peer-progress", dir);
			f = fopen(tmp, "w");
			if (f) {
				/* what this side wrote, and of it what the server has
				 * acknowledged (no longer in the send queue) */
				long long written = (long long)s.next_send * sizeof(s.out) +
						    (long long)s.out_off;
				int outq = 0;

				if (ioctl(fd, SIOCOUTQ, &outq))
					outq = -1;
				fprintf(f, "%u %u %.3f %lld %lld\n", s.next_recv, s.next_send,
					s.longest_gap, outq < 0 ? -1 : written - outq, written);
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
	if (nowscale && w.reported) {
		printf("window offered: up to %u bytes before the first stall, %u after the "
		       "last (%d stalls)\n",
		       w.first, w.last, w.stretch);
		if (!w.stretch || (uint64_t)w.last * 4 < (uint64_t)w.first * 3) {
			printf("FAIL: the restored server offers a window of %u bytes, %u before\n",
			       w.last, w.first);
			return 1;
		}
	} else if (nowscale) {
		printf("window offered: not reported by this kernel (tcpi_snd_wnd)\n");
	}
	printf("PASS: %u records received, %u sent, longest stall %.3f s\n", s.next_recv,
	       s.next_send, s.longest_gap);
	return 0;
}
