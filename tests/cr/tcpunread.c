/* An established loopback connection whose peer is outside the tree, with
 * data queued both ways when the tree is dumped: N1 bytes the peer sent and
 * the tree has not read (its receive queue), and what the tree sent beyond
 * the peer's small receive window (its send queue, unsent).  Run with
 * KUPDATE_FAULT=kill-dump (crrun --expect-dump-killed): kupdate dies in the
 * middle of the dump, and after SIGTERM the tree checks that it lost
 * nothing: its socket is not in repair mode, it reads exactly the N1 bytes,
 * the peer reads everything the tree had sent, and a record goes each way;
 * neither side meets a FIN, a RST or an error.
 *
 * The peer is forked twice and its parent exits: it belongs to crrun (the
 * subreaper), not to the dumped tree.  It waits for $CRT_DIR/go (the number
 * of bytes the tree sent) before it reads, and reports in
 * $CRT_DIR/peer-verdict ("PASS ..." or "FAIL: why").
 *
 * Also dumped and restored ("tcpunread SIZE": a send buffer of SIZE, full
 * at the dump): the part of the send queue put back in repair mode takes
 * more of the buffer than it did, and the unsent rest must still go in
 * (tcp.c: send_unsent), the buffer's size as it was afterwards.  With
 * "tcpunread auto" the program never sizes its send buffer: the kernel
 * tunes it, and it must not come back locked (SO_BUF_LOCK, Linux 5.14)
 * after the restore grew it for a while. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

#define N1	 40000	/* peer -> tree, unread at the dump */
#define N2_MAX	 400000 /* tree -> peer, beyond the peer's window */
#define REC	 1000	/* one record each way afterwards */
#define WAIT_SEC 30

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

static unsigned char pat(long i, int salt)
{
	return (unsigned char)(i * 7 + salt * 13 + (i >> 9));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* read exactly n bytes of pattern salt; 0, or a reason in why */
static int read_check(int fd, long n, int salt, char *why, size_t wl)
{
	unsigned char buf[8192];
	double end = now() + WAIT_SEC;
	long got = 0;

	while (got < n) {
		struct pollfd p = { fd, POLLIN, 0 };
		size_t want = sizeof(buf) < (size_t)(n - got) ? sizeof(buf) : (size_t)(n - got);
		ssize_t r;

		if (now() > end) {
			snprintf(why, wl, "only %ld of %ld bytes arrived in %d s", got, n,
				 WAIT_SEC);
			return -1;
		}
		if (poll(&p, 1, 100) <= 0)
			continue;
		r = recv(fd, buf, want, MSG_DONTWAIT);
		if (r == 0) {
			snprintf(why, wl, "end of stream (FIN) after %ld of %ld bytes", got, n);
			return -1;
		}
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			snprintf(why, wl, "recv after %ld of %ld bytes: %s", got, n,
				 strerror(errno));
			return -1;
		}
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(got + i, salt)) {
				snprintf(why, wl, "byte %ld of %ld is wrong", got + i, n);
				return -1;
			}
		got += r;
	}
	return 0;
}

static int send_all(int fd, long n, int salt, char *why, size_t wl)
{
	unsigned char buf[8192];
	long sent = 0;

	while (sent < n) {
		long k = sizeof(buf) < (size_t)(n - sent) ? (long)sizeof(buf) : n - sent;
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t r;

		for (long i = 0; i < k; i++)
			buf[i] = pat(sent + i, salt);
		if (poll(&p, 1, WAIT_SEC * 1000) <= 0) {
			snprintf(why, wl, "cannot send for %d s", WAIT_SEC);
			return -1;
		}
		r = send(fd, buf, k, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(why, wl, "send: %s", strerror(errno));
			return -1;
		}
		if (r > 0)
			sent += r;
	}
	return 0;
}

/* the connection as it should be: established, no error, and unless data
 * is expected, nothing to read (no FIN, no RST waiting) */
static int intact(int fd, bool data, char *why, size_t wl)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	int err = 0;
	char c;
	ssize_t r;

	if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &l) || ti.tcpi_state != TCP_ESTABLISHED) {
		snprintf(why, wl, "the connection is in TCP state %d, not established",
			 ti.tcpi_state);
		return -1;
	}
	l = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
		snprintf(why, wl, "the socket has error %s", strerror(err));
		return -1;
	}
	if (data)
		return 0;
	r = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	if (r >= 0 || errno != EAGAIN) {
		snprintf(why, wl, "%s where nothing was expected",
			 r > 0	  ? "more data"
			 : r == 0 ? "end of stream (FIN)"
				  : strerror(errno));
		return -1;
	}
	return 0;
}

static void verdict(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void verdict(const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s", crt_path(".peer-verdict"));
	f = fopen(tmp, "w");
	if (!f)
		_exit(1);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	rename(tmp, crt_path("peer-verdict"));
}

/* the peer, outside the tree */
static void peer(const struct sockaddr_in *a)
{
	char why[256];
	long n2 = 0;
	double end;
	int fd, nul = open("/dev/null", O_RDWR);

	setsid();
	dup2(nul, 0);
	dup2(nul, 1);
	dup2(nul, 2);
	for (int i = 3; i < 1024; i++)
		close(i);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	/* a small window: what the tree sends beyond it stays in its queue */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ 4096 }, sizeof(int));
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a))) {
		verdict("FAIL: connect: %s\n", strerror(errno));
		_exit(1);
	}
	if (send_all(fd, N1, 1, why, sizeof(why))) {
		verdict("FAIL: sending the %d bytes: %s\n", N1, why);
		_exit(1);
	}
	/* nothing read until the tree has been dumped and checked its side */
	for (end = now() + 600; now() < end && !n2; usleep(10000)) {
		char *s = crt_read_file(crt_path("go"), NULL);

		if (s)
			n2 = atol(s);
		free(s);
	}
	if (!n2) {
		verdict("FAIL: never told to go on\n");
		_exit(1);
	}
	if (read_check(fd, n2, 2, why, sizeof(why))) {
		verdict("FAIL: reading the %ld bytes the tree had sent: %s\n", n2, why);
		_exit(1);
	}
	if (send_all(fd, REC, 3, why, sizeof(why)) || read_check(fd, REC, 4, why, sizeof(why))) {
		verdict("FAIL: exchanging a record: %s\n", why);
		_exit(1);
	}
	if (intact(fd, false, why, sizeof(why))) {
		verdict("FAIL: %s\n", why);
		_exit(1);
	}
	verdict("PASS: read the %ld queued bytes and a record, sent a record\n", n2);
	/* the tree closes first: wait for that, then go */
	if (read(fd, why, 1) < 0)
		_exit(1);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int lst, srv, inq = 0, outq = 0, unsent = 0, rep = -1, st, sndbuf = 0, sndbuf2 = 0;
	int lock = -1, lock2 = -1;
	long n2_max;
	long n2 = 0;
	char why[256], buf[64], tmp[4096];
	unsigned char chunk[8192];
	double end;
	pid_t child;
	FILE *f;

	crt_init();
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lst = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lst, (struct sockaddr *)&a, sizeof(a)) || listen(lst, 4) ||
	    getsockname(lst, (struct sockaddr *)&a, &al))
		crt_fail("listen: %s", strerror(errno));
	child = fork();
	if (child < 0)
		crt_fail("fork: %s", strerror(errno));
	if (child == 0) {
		if (fork() == 0)
			peer(&a);
		_exit(0);
	}
	if (waitpid(child, &st, 0) != child)
		crt_fail("waitpid: %s", strerror(errno));
	srv = accept(lst, NULL, NULL);
	if (srv < 0)
		crt_fail("accept: %s", strerror(errno));
	close(lst);
	/* "tcpunread SIZE": a send buffer of SIZE (SO_SNDBUF), full at the dump */
	if (argc > 1 && strcmp(argv[1], "auto") &&
	    setsockopt(srv, SOL_SOCKET, SO_SNDBUF, &(int){ atoi(argv[1]) }, sizeof(int)))
		crt_fail("SO_SNDBUF: %s", strerror(errno));

	/* the peer's bytes wait, unread, in our receive queue */
	for (end = now() + WAIT_SEC; !ioctl(srv, SIOCINQ, &inq) && inq < N1 && now() < end;)
		usleep(1000);
	crt_check(inq == N1, "%d bytes queued from the peer, expected %d", inq, N1);
	/* ours fill the peer's window, then our send queue */
	fcntl(srv, F_SETFL, O_NONBLOCK);
	/* a buffer the kernel tunes takes all of N2_MAX: up to 16 MiB, until
	 * it is full, then */
	n2_max = argc > 1 && !strcmp(argv[1], "auto") ? 16L << 20 : N2_MAX;
	while (n2 < n2_max) {
		long k = sizeof(chunk) < (size_t)(n2_max - n2) ? (long)sizeof(chunk) : n2_max - n2;
		ssize_t r;

		for (long i = 0; i < k; i++)
			chunk[i] = pat(n2 + i, 2);
		r = send(srv, chunk, k, MSG_NOSIGNAL);
		if (r <= 0)
			break;
		n2 += r;
	}
	usleep(100000);
	ioctl(srv, SIOCOUTQ, &outq);
	ioctl(srv, SIOCOUTQNSD, &unsent);
	crt_check(outq > 0, "nothing waits in the send queue (%ld bytes sent)", n2);
	crt_msg("queued: %d bytes to read, %ld sent of which %d in the send queue (%d unsent)", inq,
		n2, outq, unsent);
	al = sizeof(sndbuf);
	getsockopt(srv, SOL_SOCKET, SO_SNDBUF, &sndbuf, &al);
	al = sizeof(lock);
	if (getsockopt(srv, SOL_SOCKET, SO_BUF_LOCK, &lock, &al))
		lock = -1; /* before Linux 5.14 */
	crt_ready();
	crt_wait_term();

	/* kupdate died in the middle of the dump: the socket must be an
	 * ordinary one again, with everything it held */
	al = sizeof(rep);
	crt_check(!getsockopt(srv, SOL_TCP, TCP_REPAIR, &rep, &al) && rep == 0,
		  "the socket is still in repair mode (TCP_REPAIR %d)", rep);
	crt_check(!intact(srv, true, why, sizeof(why)), "%s", why);
	/* the restore may have grown it for a while: it is as it was */
	al = sizeof(sndbuf2);
	crt_check(!getsockopt(srv, SOL_SOCKET, SO_SNDBUF, &sndbuf2, &al) && sndbuf2 == sndbuf,
		  "SO_SNDBUF is %d, it was %d", sndbuf2, sndbuf);
	al = sizeof(lock2);
	crt_check(lock < 0 ||
			  (!getsockopt(srv, SOL_SOCKET, SO_BUF_LOCK, &lock2, &al) && lock2 == lock),
		  "SO_BUF_LOCK is %d, it was %d", lock2, lock);
	crt_check(!ioctl(srv, SIOCINQ, &inq) && inq == N1, "%d bytes to read, expected %d", inq,
		  N1);
	crt_check(!read_check(srv, N1, 1, why, sizeof(why)), "reading the queued bytes: %s", why);
	crt_check(!intact(srv, false, why, sizeof(why)), "after the queued bytes: %s", why);
	/* the peer reads now */
	snprintf(buf, sizeof(buf), "%ld\n", n2);
	snprintf(tmp, sizeof(tmp), "%s", crt_path(".go"));
	f = fopen(tmp, "w");
	crt_check(f && fputs(buf, f) >= 0 && !fclose(f) && !rename(tmp, crt_path("go")),
		  "cannot tell the peer to go on");
	crt_check(!read_check(srv, REC, 3, why, sizeof(why)), "the peer's record: %s", why);
	crt_check(!send_all(srv, REC, 4, why, sizeof(why)), "our record: %s", why);
	{
		char *v = NULL;

		for (end = now() + WAIT_SEC; !v && now() < end; usleep(10000))
			v = crt_read_file(crt_path("peer-verdict"), NULL);
		crt_check(v, "the peer gave no verdict in %d s", WAIT_SEC);
		v[strcspn(v, "\n")] = 0;
		crt_check(!strncmp(v, "PASS", 4), "peer: %s", v);
		crt_msg("peer: %s", v);
		free(v);
	}
	crt_check(!intact(srv, false, why, sizeof(why)), "at the end: %s", why);
	close(srv);
	crt_pass();
}
