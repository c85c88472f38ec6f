/* Numbered, checksummed records streamed both ways over a TCP connection
 * (tcpserver.c in the dumped tree, tcpeer.c outside it).  Each side sends
 * a record every few milliseconds and checks every record it receives:
 * number in sequence, length, checksum.  A lost, repeated, reordered or
 * damaged byte, or a reset, is an error. */
#ifndef STREAM_H
#define STREAM_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REC_MAGIC 0x6b757064
#define REC_LEN	  1000

struct rec_hdr {
	uint32_t magic, seq, len, crc;
};

struct stream {
	int fd;
	uint32_t next_send, next_recv;
	unsigned char out[sizeof(struct rec_hdr) + REC_LEN];
	size_t out_len, out_off;
	unsigned char in[sizeof(struct rec_hdr) + REC_LEN];
	size_t in_off;
	double last_recv, longest_gap;
	double pace, due; /* pace: seconds between records sent (0: as fast as it goes) */
	int done_sending;
	char err[160];
};

static inline double stream_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline uint32_t rec_crc(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static inline void rec_fill(unsigned char *p, uint32_t seq, int salt)
{
	for (int i = 0; i < REC_LEN; i++)
		p[i] = (unsigned char)(seq * 31 + i * 7 + salt);
}

static inline void stream_init(struct stream *s, int fd)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->last_recv = stream_now();
}

/* one step: send what is due (unless done sending), read what is there;
 * 1 when the other side has finished (EOF), -1 on error (s->err) */
static inline int stream_step(struct stream *s, int salt_out, int salt_in, int wait_ms)
{
	struct pollfd p = { s->fd, POLLIN | (s->out_len ? POLLOUT : 0), 0 };

	if (!s->out_len && !s->done_sending && (!s->pace || stream_now() >= s->due)) {
		struct rec_hdr h = { REC_MAGIC, s->next_send, REC_LEN, 0 };

		if (s->pace)
			s->due =
				(s->due > stream_now() - s->pace ? s->due : stream_now()) + s->pace;

		rec_fill(s->out + sizeof(h), s->next_send, salt_out);
		h.crc = rec_crc(s->out + sizeof(h), REC_LEN);
		memcpy(s->out, &h, sizeof(h));
		s->out_len = sizeof(h) + REC_LEN;
		s->out_off = 0;
		p.events |= POLLOUT;
	}
	if (poll(&p, 1, wait_ms) < 0 && errno != EINTR)
		return -1;
	if (p.revents & POLLOUT) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(s->err, sizeof(s->err), "send: %s", strerror(errno));
			return -1;
		}
		if (n > 0) {
			s->out_off += n;
			if (s->out_off == s->out_len) {
				s->out_len = 0;
				s->next_send++;
			}
		}
	}
	if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
		ssize_t n = recv(s->fd, s->in + s->in_off, sizeof(s->in) - s->in_off, MSG_DONTWAIT);

		if (n == 0) {
			if (s->in_off) {
				snprintf(s->err, sizeof(s->err),
					 "the connection ended inside a record");
				return -1;
			}
			return 1;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(s->err, sizeof(s->err), "recv: %s", strerror(errno));
			return -1;
		}
		if (n > 0) {
			s->in_off += n;
			if (s->in_off == sizeof(s->in)) {
				struct rec_hdr h;
				unsigned char want[REC_LEN];
				double t = stream_now();

				memcpy(&h, s->in, sizeof(h));
				rec_fill(want, h.seq, salt_in);
				if (h.magic != REC_MAGIC || h.len != REC_LEN ||
				    h.crc != rec_crc(s->in + sizeof(h), REC_LEN) ||
				    memcmp(want, s->in + sizeof(h), REC_LEN)) {
					snprintf(s->err, sizeof(s->err), "record %u is damaged",
						 s->next_recv);
					return -1;
				}
				if (h.seq != s->next_recv) {
					snprintf(s->err, sizeof(s->err),
						 "record %u arrived where %u was expected", h.seq,
						 s->next_recv);
					return -1;
				}
				if (t - s->last_recv > s->longest_gap)
					s->longest_gap = t - s->last_recv;
				s->last_recv = t;
				s->next_recv++;
				s->in_off = 0;
			}
		}
	}
	return 0;
}

#endif
