/* stream-client: numbered, checksummed records both ways through the update
 * cycle, from the host through QEMU's forward to the guest's echo service.
 *
 *   stream-client HOST PORT STOPFILE
 *
 * STREAM_RATE (bytes a second, default 0: as fast as it goes) paces what
 * it sends.  The cycle tests give it 4 MiB/s: the host's two cores run
 * the emulated guest too, and at full rate this client and QEMU's user
 * network took one and a half of them, slowing the guest's restores
 * (bytes are in flight at every moment either way).
 *
 * Sends records (magic, sequence number, length, payload, crc32) with at
 * most 256 KiB in flight and reads them back: every record must come back
 * whole, in order, exactly once, with its checksum.  The connection must
 * never be closed or reset.  When STOPFILE appears it stops sending, waits
 * for what is in flight, and prints
 *   PASS records N bytes B each way, longest stall S s
 * or FAIL with the reason (exit 1).  A line every 10 s tells the progress.
 * Last, in either case, a line for the soak's tally:
 *   summary checked B in-flight F resets R stall S
 * B bytes came back verified, F were sent and never came back verified (lost
 * when the run failed), R is 1 when the connection was closed or reset. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC	 0x6b757064u /* "kupd" */
#define INFLIGHT (256u << 10)
#define MAXREC	 4096

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t crc32(const unsigned char *p, size_t n)
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

/* record seq: header (magic, seq, len), len payload bytes, crc of all that */
static size_t make_record(unsigned char *b, uint32_t seq)
{
	uint32_t len = 16 + (seq * 2654435761u) % (MAXREC - 32), h[3] = { MAGIC, seq, len }, c;

	memcpy(b, h, 12);
	for (uint32_t i = 0; i < len; i++)
		b[12 + i] = (unsigned char)(seq * 31 + i * 7);
	c = crc32(b, 12 + len);
	memcpy(b + 12 + len, &c, 4);
	return 16 + len;
}

static void summary(uint64_t sent, uint64_t checked, int resets, double stall)
{
	printf("summary checked %llu in-flight %llu resets %d stall %.1f\n",
	       (unsigned long long)checked, (unsigned long long)(sent - checked), resets, stall);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	static unsigned char out[MAXREC + 32], in[1 << 20];
	size_t out_len = 0, out_off = 0, in_len = 0;
	uint64_t sent = 0, recvd = 0, checked = 0;
	int resets = 0;
	uint32_t next_send = 0, next_recv = 0;
	double t_last, stall = 0, t_report, t_stop = 0, t_credit;
	/* a token bucket of at most 256 KiB: no burst to catch up after a pause */
	double rate = getenv("STREAM_RATE") ? atof(getenv("STREAM_RATE")) : 0, credit = 0;
	int s, one = 1;
	bool stopping = false;

	if (argc != 4) {
		fprintf(stderr, "usage: stream-client HOST PORT STOPFILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN); /* a reset is told, not died of */
	a.sin_port = htons(atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	for (int i = 0;; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(s);
		if (i == 100) {
			printf("FAIL cannot connect to %s:%s\n", argv[1], argv[2]);
			return 1;
		}
		usleep(100000);
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(s, F_SETFL, O_NONBLOCK);
	t_last = t_report = t_credit = now();
	for (;;) {
		struct pollfd p = { s, POLLIN, 0 };
		double t = now();
		ssize_t r;

		if (!stopping && !access(argv[3], F_OK)) {
			stopping = true;
			t_stop = t;
		}
		if (stopping && next_recv == next_send && !out_len)
			break;
		if (stopping && t - t_stop > 120) {
			printf("FAIL %u records still in flight 120 s after the stop\n",
			       next_send - next_recv);
			goto fail;
		}
		if (rate > 0) {
			credit += rate * (t - t_credit);
			if (credit > INFLIGHT)
				credit = INFLIGHT;
			t_credit = t;
		}
		if (!out_len && !stopping && sent - recvd < INFLIGHT && (rate <= 0 || credit > 0)) {
			out_len = make_record(out, next_send++);
			out_off = 0;
			credit -= (double)out_len;
		}
		if (out_len)
			p.events |= POLLOUT;
		if (poll(&p, 1, out_len || rate <= 0 ? 200 : 5) < 0 && errno != EINTR)
			goto fail;
		if (p.revents & POLLOUT) {
			r = write(s, out + out_off, out_len - out_off);
			if (r < 0 && errno != EAGAIN) {
				resets = errno == ECONNRESET || errno == EPIPE;
				printf("FAIL write: %s after %u records\n", strerror(errno),
				       next_recv);
				goto fail;
			}
			if (r > 0) {
				out_off += r;
				sent += r;
				if (out_off == out_len)
					out_len = 0;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read(s, in + in_len, sizeof(in) - in_len);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				printf("FAIL the connection was %s after %u records\n",
				       r == 0 ? "closed" : strerror(errno), next_recv);
				resets = 1;
				goto fail;
			}
			if (r > 0) {
				in_len += r;
				recvd += r;
				if (t - t_last > stall)
					stall = t - t_last;
				t_last = t;
			}
		}
		/* whole records that came back */
		for (;;) {
			uint32_t h[3], c, want;
			unsigned char ref[MAXREC + 32];
			size_t n;

			if (in_len < 12)
				break;
			memcpy(h, in, 12);
			if (h[0] != MAGIC || h[1] != next_recv || h[2] > MAXREC) {
				printf("FAIL record %u: got magic %#x seq %u len %u (lost, "
				       "duplicated "
				       "or reordered bytes)\n",
				       next_recv, h[0], h[1], h[2]);
				goto fail;
			}
			if (in_len < 16 + h[2])
				break;
			memcpy(&c, in + 12 + h[2], 4);
			n = make_record(ref, next_recv);
			if (n != 16 + h[2] || memcmp(ref, in, n) || c != crc32(in, 12 + h[2])) {
				printf("FAIL record %u came back damaged\n", next_recv);
				goto fail;
			}
			want = 16 + h[2];
			memmove(in, in + want, in_len - want);
			in_len -= want;
			checked += want;
			next_recv++;
		}
		if (t - t_report >= 10) {
			printf("stream: %u records, %.1f MiB each way, longest stall %.1f s\n",
			       next_recv, recvd / 1048576.0, stall);
			t_report = t;
		}
	}
	printf("PASS records %u bytes %llu each way, longest stall %.1f s\n", next_recv,
	       (unsigned long long)recvd, stall);
	summary(sent, checked, 0, stall);
	return 0;
fail:
	summary(sent, checked, resets, stall);
	return 1;
}
