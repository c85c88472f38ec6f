/* Unix sockets in the corners the plain unixsk test leaves out (issue 26).
 *
 * usk queues: every kind of unix socket with data queued both ways:
 * stream, dgram and seqpacket socketpairs; stream and seqpacket pairs
 * made by connect and accept through a bound listener; two bound dgram
 * sockets connected to each other.  One direction of each is filled until
 * the kernel says EAGAIN (a full socket buffer; one sender with a larger
 * SO_SNDBUF than the default), records include zero-length ones.  After
 * the restore every queue is read back record by record (length, bytes,
 * boundaries) up to EAGAIN, the names are those of before, and each
 * connection still carries a record both ways.
 *
 * usk devlog: a dgram socket connected to a bound receiver outside the
 * dumped tree, as syslog(3) holds /dev/log.  The receiver is an orphaned
 * grandchild of the test (adopted by the runner, so not dumped); after the
 * restore the socket's peer name is the receiver's path, and a record sent
 * from it arrives there (the receiver writes what it got to a file).  With
 * --gone the receiver removes its path once the test is dumped: the
 * restore fails naming it.  With --connected the receiver is connected to
 * the test's socket: it would refuse a new connection, the dump refuses.
 *
 * usk removed: sockets bound at paths since removed (a listener, a dgram
 * receiver with queued records): restored with their names, the paths
 * still absent, the sockets still usable through their connected peers.
 *
 * usk removed-taken: a listener whose removed path is now a regular file:
 * refused at dump, the file and the listener as they were.
 *
 * usk halfclosed: stream and seqpacket connections shut down on one side
 * with data queued, and sockets whose peer was closed with data still
 * queued for them: the reader gets its data then end of file, a write on
 * the shut side fails with EPIPE.
 *
 * usk reconnected: a dgram socket left by its pair for another, with an
 * ECONNRESET pending: refused at dump, the error still there after.
 *
 * usk fifo: a FIFO opened both ways, its path since removed, with data in
 * it: restored with its data, its mode, its path still absent. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static socklen_t mkaddr(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof(a->sun_path), "%s", path);
	return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

/* ------------------------------------------------------------- records */

/* record i of channel ch: its length (some are empty) and its bytes */
static size_t rec_len(int ch, int i)
{
	return i % 5 == 2 ? 0 : 1 + (size_t)((i * 389 + ch * 71) % 3000);
}

static unsigned char rec_byte(int ch, int i, size_t j)
{
	return (unsigned char)(ch * 131 + i * 17 + j * 7 + j / 251);
}

static unsigned char buf[1 << 16];

static void make_rec(int ch, int i, size_t *len)
{
	*len = rec_len(ch, i);
	for (size_t j = 0; j < *len; j++)
		buf[j] = rec_byte(ch, i, j);
}

/* send records until max of them, or until the socket is full; the count */
static int send_recs(int fd, int ch, int max, const char *what)
{
	int i;

	if (max < 0)
		max = 1 << 30;
	for (i = 0; i < max; i++) {
		size_t len;
		ssize_t n;

		make_rec(ch, i, &len);
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		crt_check(n == (ssize_t)len, "%s: send of record %d: %s", what, i,
			  n < 0 ? strerror(errno) : "short");
	}
	crt_check(i == max || i > 20, "%s: only %d records fit", what, i);
	return i;
}

static void check_recs_end(int fd, int ch, int count, bool eof, const char *what)
{
	for (int i = 0; i < count; i++) {
		size_t len = rec_len(ch, i);
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

		crt_check(n >= 0, "%s: record %d of %d missing: %s", what, i, count,
			  strerror(errno));
		crt_check((size_t)n == len, "%s: record %d has %zd bytes, not %zu", what, i, n,
			  len);
		for (size_t j = 0; j < len; j++)
			crt_check(buf[j] == rec_byte(ch, i, j), "%s: record %d differs at byte %zu",
				  what, i, j);
	}
	if (eof)
		crt_check(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 0,
			  "%s: no end of file after the %d records queued", what, count);
	else
		crt_check(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
			  "%s: more than the %d records queued", what, count);
}

static void check_recs(int fd, int ch, int count, const char *what)
{
	check_recs_end(fd, ch, count, false, what);
}

/* a byte stream: its bytes by position */
static unsigned char st_byte(int ch, size_t pos)
{
	return (unsigned char)(ch * 29 + pos * 13 + pos / 509);
}

static size_t send_stream(int fd, int ch, size_t max, const char *what)
{
	size_t sent = 0;

	while (sent < max) {
		size_t len = max - sent < sizeof(buf) ? max - sent : sizeof(buf);
		ssize_t n;

		for (size_t j = 0; j < len; j++)
			buf[j] = st_byte(ch, sent + j);
		n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		crt_check(n > 0, "%s: send: %s", what, strerror(errno));
		sent += n;
	}
	return sent;
}

/* then end of file (eof 1), nothing (0), or not looked at (-1) */
static void check_stream_end(int fd, int ch, size_t total, int eof, const char *what)
{
	size_t got = 0;

	while (got < total) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		crt_check(n > 0, "%s: %zu of %zu bytes read, then %s", what, got, total,
			  n < 0 ? strerror(errno) : "end of file");
		for (ssize_t j = 0; j < n; j++)
			crt_check(buf[j] == st_byte(ch, got + j), "%s: byte %zu differs", what,
				  got + j);
		got += n;
	}
	if (eof < 0)
		return; /* an error follows */
	if (eof)
		crt_check(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 0,
			  "%s: no end of file after the %zu bytes queued", what, total);
	else
		crt_check(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
			  "%s: more than the %zu bytes queued", what, total);
}

static void check_stream(int fd, int ch, size_t total, const char *what)
{
	check_stream_end(fd, ch, total, false, what);
}

static void check_reset(int fd, const char *what)
{
	crt_check(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == ECONNRESET,
		  "%s: no ECONNRESET (%s)", what, strerror(errno));
}

static void check_epipe(int fd, const char *what)
{
	crt_check(send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EPIPE,
		  "%s: a write on the shut side did not fail with EPIPE (%s)", what,
		  strerror(errno));
}

/* a record still goes through both ways */
static void check_alive(int a, int b, const char *what)
{
	char r[8];

	crt_check(send(a, "ping", 4, MSG_DONTWAIT) == 4, "%s: send: %s", what, strerror(errno));
	crt_check(recv(b, r, sizeof(r), MSG_DONTWAIT) == 4 && !memcmp(r, "ping", 4),
		  "%s: the record sent after the restore did not arrive", what);
	crt_check(send(b, "pong", 4, MSG_DONTWAIT) == 4, "%s: send back: %s", what,
		  strerror(errno));
	crt_check(recv(a, r, sizeof(r), MSG_DONTWAIT) == 4 && !memcmp(r, "pong", 4),
		  "%s: the record sent back after the restore did not arrive", what);
}

static void check_name(int fd, bool peer, const char *want, const char *what)
{
	struct sockaddr_un a;
	socklen_t len = sizeof(a);
	int r = peer ? getpeername(fd, (struct sockaddr *)&a, &len)
		     : getsockname(fd, (struct sockaddr *)&a, &len);
	const char *got = len > offsetof(struct sockaddr_un, sun_path) ? a.sun_path : "";

	crt_check(!r, "%s: %s: %s", what, peer ? "getpeername" : "getsockname", strerror(errno));
	crt_check(!strcmp(got, want), "%s: %s is '%s', not '%s'", what,
		  peer ? "its peer's name" : "its name", got, want);
}

static int listener(int type, const char *name, struct sockaddr_un *a, socklen_t *len)
{
	int l = socket(AF_UNIX, type, 0);

	*len = mkaddr(a, crt_path(name));
	if (l < 0 || bind(l, (struct sockaddr *)a, *len) || listen(l, 4))
		crt_fail("listener %s: %s", name, strerror(errno));
	return l;
}

/* a connection through a listener at name: *c the client, *s accepted */
static void via_listener(int type, const char *name, int *c, int *s)
{
	struct sockaddr_un a;
	socklen_t len;
	int l = listener(type, name, &a, &len);

	*c = socket(AF_UNIX, type, 0);
	if (*c < 0 || connect(*c, (struct sockaddr *)&a, len))
		crt_fail("connect to %s: %s", name, strerror(errno));
	*s = accept(l, NULL, NULL);
	crt_check(*s >= 0, "accept on %s: %s", name, strerror(errno));
	close(l);
}

static void pair(int type, int sv[2])
{
	if (socketpair(AF_UNIX, type, 0, sv))
		crt_fail("socketpair: %s", strerror(errno));
}

static int queues(void)
{
	int ss[2], ds[2], qs[2], sc, sa, qc, qa, d1, d2, bs[2], sndbuf = 0, sndbuf_d = 0, v = 0;
	int n_d0, n_d1, n_q0, n_q1, n_qc, n_qa, n_r1, n_r2;
	size_t s0, s1, sc0, sa0, b0;
	struct sockaddr_un a1, a2;
	socklen_t l1, l2;

	/* socketpairs: one way full, the other a few records */
	pair(SOCK_STREAM, ss);
	s0 = send_stream(ss[0], 1, SIZE_MAX, "stream pair");
	s1 = send_stream(ss[1], 2, 1000, "stream pair back");
	pair(SOCK_DGRAM, ds);
	n_d0 = send_recs(ds[0], 3, -1, "dgram pair");
	n_d1 = send_recs(ds[1], 4, 7, "dgram pair back");
	pair(SOCK_SEQPACKET, qs);
	n_q0 = send_recs(qs[0], 5, -1, "seqpacket pair");
	n_q1 = send_recs(qs[1], 6, 8, "seqpacket pair back");
	/* through listeners */
	via_listener(SOCK_STREAM, "stream.sock", &sc, &sa);
	sc0 = send_stream(sc, 7, 5000, "accepted stream");
	sa0 = send_stream(sa, 8, SIZE_MAX, "accepted stream back");
	via_listener(SOCK_SEQPACKET, "seqpacket.sock", &qc, &qa);
	n_qc = send_recs(qc, 9, -1, "accepted seqpacket");
	n_qa = send_recs(qa, 10, 9, "accepted seqpacket back");
	/* two bound dgram sockets connected to each other */
	d1 = socket(AF_UNIX, SOCK_DGRAM, 0);
	d2 = socket(AF_UNIX, SOCK_DGRAM, 0);
	l1 = mkaddr(&a1, crt_path("d1.sock"));
	l2 = mkaddr(&a2, crt_path("d2.sock"));
	if (bind(d1, (struct sockaddr *)&a1, l1) || bind(d2, (struct sockaddr *)&a2, l2) ||
	    connect(d1, (struct sockaddr *)&a2, l2) || connect(d2, (struct sockaddr *)&a1, l1))
		crt_fail("bound dgram sockets: %s", strerror(errno));
	n_r1 = send_recs(d1, 11, -1, "bound dgram");
	n_r2 = send_recs(d2, 12, 6, "bound dgram back");
	/* a sender with twice the default buffer, filled */
	pair(SOCK_STREAM, bs);
	setsockopt(bs[0], SOL_SOCKET, SO_SNDBUF, &(int){ 1 << 20 }, sizeof(int));
	b0 = send_stream(bs[0], 13, SIZE_MAX, "big stream");
	getsockopt(bs[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &(socklen_t){ sizeof(int) });
	getsockopt(ss[0], SOL_SOCKET, SO_SNDBUF, &sndbuf_d, &(socklen_t){ sizeof(int) });
	crt_msg("queued: stream %zu, dgram %d, seqpacket %d, accepted %zu/%d, bound dgram %d, "
		"big stream %zu",
		s0, n_d0, n_q0, sa0, n_qc, n_r1, b0);

	crt_ready();
	crt_wait_term();

	check_stream(ss[1], 1, s0, "stream pair");
	check_stream(ss[0], 2, s1, "stream pair back");
	check_alive(ss[0], ss[1], "stream pair");
	check_recs(ds[1], 3, n_d0, "dgram pair");
	check_recs(ds[0], 4, n_d1, "dgram pair back");
	check_alive(ds[0], ds[1], "dgram pair");
	check_recs(qs[1], 5, n_q0, "seqpacket pair");
	check_recs(qs[0], 6, n_q1, "seqpacket pair back");
	check_alive(qs[0], qs[1], "seqpacket pair");
	check_stream(sa, 7, sc0, "accepted stream");
	check_stream(sc, 8, sa0, "accepted stream back");
	check_alive(sc, sa, "accepted stream");
	check_recs(qa, 9, n_qc, "accepted seqpacket");
	check_recs(qc, 10, n_qa, "accepted seqpacket back");
	check_alive(qc, qa, "accepted seqpacket");
	/* an accepted socket is named as its listener, its client's peer too */
	check_name(sa, false, crt_path("stream.sock"), "accepted stream");
	check_name(sc, true, crt_path("stream.sock"), "accepted stream's client");
	check_name(sc, false, "", "accepted stream's client");
	check_name(sa, true, "", "accepted stream");
	check_name(qa, false, crt_path("seqpacket.sock"), "accepted seqpacket");
	check_name(qc, true, crt_path("seqpacket.sock"), "accepted seqpacket's client");
	check_recs(d2, 11, n_r1, "bound dgram");
	check_recs(d1, 12, n_r2, "bound dgram back");
	check_alive(d1, d2, "bound dgram");
	check_name(d1, false, a1.sun_path, "bound dgram");
	check_name(d1, true, a2.sun_path, "bound dgram");
	check_name(d2, true, a1.sun_path, "bound dgram back");
	check_stream(bs[1], 13, b0, "big stream");
	/* the buffers raised to send the queues back are as they were */
	getsockopt(bs[0], SOL_SOCKET, SO_SNDBUF, &v, &(socklen_t){ sizeof(int) });
	crt_check(v == sndbuf, "big stream: SO_SNDBUF is %d, not %d", v, sndbuf);
	getsockopt(ss[0], SOL_SOCKET, SO_SNDBUF, &v, &(socklen_t){ sizeof(int) });
	crt_check(v == sndbuf_d, "stream pair: SO_SNDBUF is %d, not %d", v, sndbuf_d);
	check_alive(bs[0], bs[1], "big stream");
	crt_pass();
}

/* ---------------------------------------------------------- halfclosed */

static int halfclosed(void)
{
	int hs[2], hq[2], ps[2], pq[2], pd[2], rs[2], rq[2], lc, la, l, c2;
	int n_hq, n_hqb, n_pq, n_pd, n_rq;
	size_t n_hs, n_hsb, n_ps, n_la, n_rs;
	struct sockaddr_un a;
	socklen_t len;

	/* shut for writing on one side, data queued both ways */
	pair(SOCK_STREAM, hs);
	n_hs = send_stream(hs[0], 1, 100000, "shut stream");
	n_hsb = send_stream(hs[1], 2, 3000, "shut stream back");
	shutdown(hs[0], SHUT_WR);
	pair(SOCK_SEQPACKET, hq);
	n_hq = send_recs(hq[0], 3, 40, "shut seqpacket");
	n_hqb = send_recs(hq[1], 4, 5, "shut seqpacket back");
	shutdown(hq[0], SHUT_WR);
	/* the peer closed, its data still queued */
	pair(SOCK_STREAM, ps);
	n_ps = send_stream(ps[1], 5, 50000, "closed stream");
	close(ps[1]);
	pair(SOCK_SEQPACKET, pq);
	n_pq = send_recs(pq[1], 6, 33, "closed seqpacket");
	close(pq[1]);
	pair(SOCK_DGRAM, pd);
	n_pd = send_recs(pd[1], 7, 12, "closed dgram");
	close(pd[1]);
	/* the peer closed with data of its own unread: ECONNRESET pending */
	pair(SOCK_STREAM, rs);
	n_rs = send_stream(rs[1], 9, 4000, "reset stream");
	pair(SOCK_SEQPACKET, rq);
	n_rq = send_recs(rq[1], 10, 4, "reset seqpacket");
	if (send(rs[0], "u", 1, 0) != 1 || send(rq[0], "u", 1, 0) != 1)
		crt_fail("send: %s", strerror(errno));
	close(rs[1]);
	close(rq[1]);
	/* an accepted connection whose client closed; its listener stays */
	l = listener(SOCK_STREAM, "listener.sock", &a, &len);
	lc = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(lc, (struct sockaddr *)&a, len))
		crt_fail("connect: %s", strerror(errno));
	la = accept(l, NULL, NULL);
	crt_check(la >= 0, "accept: %s", strerror(errno));
	n_la = send_stream(lc, 8, 7000, "closed client");
	close(lc);

	crt_ready();
	crt_wait_term();

	check_stream_end(hs[1], 1, n_hs, true, "shut stream");
	check_stream(hs[0], 2, n_hsb, "shut stream back");
	check_epipe(hs[0], "shut stream");
	crt_check(send(hs[1], "y", 1, MSG_DONTWAIT) == 1, "shut stream: the open side: %s",
		  strerror(errno));
	check_recs_end(hq[1], 3, n_hq, true, "shut seqpacket");
	check_recs(hq[0], 4, n_hqb, "shut seqpacket back");
	check_epipe(hq[0], "shut seqpacket");
	check_stream_end(ps[0], 5, n_ps, true, "closed stream");
	check_epipe(ps[0], "closed stream");
	check_recs_end(pq[0], 6, n_pq, true, "closed seqpacket");
	check_epipe(pq[0], "closed seqpacket");
	check_recs(pd[0], 7, n_pd, "closed dgram");
	crt_check(send(pd[0], "z", 1, MSG_DONTWAIT) < 0 && errno == ECONNREFUSED,
		  "closed dgram: a send did not fail with ECONNREFUSED (%s)", strerror(errno));
	/* a stream socket says it after its data, a seqpacket one before */
	check_stream_end(rs[0], 9, n_rs, -1, "reset stream");
	check_reset(rs[0], "reset stream");
	crt_check(recv(rs[0], buf, 1, MSG_DONTWAIT) == 0, "reset stream: no end of file");
	check_reset(rq[0], "reset seqpacket");
	check_recs_end(rq[0], 10, n_rq, true, "reset seqpacket");
	check_stream_end(la, 8, n_la, true, "closed client");
	check_epipe(la, "closed client");
	check_name(la, false, a.sun_path, "closed client's accepted socket");
	/* the listener's path still leads to it */
	c2 = socket(AF_UNIX, SOCK_STREAM, 0);
	crt_check(!connect(c2, (struct sockaddr *)&a, len), "connect to the listener: %s",
		  strerror(errno));
	crt_check(accept(l, NULL, NULL) >= 0, "the listener did not get the connection: %s",
		  strerror(errno));
	crt_pass();
}

/* ------------------------------------------------------------- removed */

static int removed(void)
{
	struct sockaddr_un a, r;
	socklen_t alen, rlen;
	int l, c, d, snd, acc, n_d;
	struct stat st;

	/* a listener with a connection not yet accepted */
	l = listener(SOCK_STREAM, "gone-listener.sock", &a, &alen);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, alen))
		crt_fail("connect: %s", strerror(errno));
	/* a datagram receiver with a sender connected and records queued */
	d = socket(AF_UNIX, SOCK_DGRAM, 0);
	snd = socket(AF_UNIX, SOCK_DGRAM, 0);
	rlen = mkaddr(&r, crt_path("gone-dgram.sock"));
	if (bind(d, (struct sockaddr *)&r, rlen) || connect(snd, (struct sockaddr *)&r, rlen))
		crt_fail("dgram: %s", strerror(errno));
	n_d = send_recs(snd, 1, 6, "gone dgram");
	if (unlink(a.sun_path) || unlink(r.sun_path))
		crt_fail("unlink: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	crt_check(lstat(a.sun_path, &st) && errno == ENOENT, "%s is back", a.sun_path);
	crt_check(lstat(r.sun_path, &st) && errno == ENOENT, "%s is back", r.sun_path);
	check_name(l, false, a.sun_path, "listener");
	check_name(c, true, a.sun_path, "listener's client");
	check_name(d, false, r.sun_path, "dgram receiver");
	check_name(snd, true, r.sun_path, "dgram sender");
	check_recs(d, 1, n_d, "gone dgram");
	crt_check(send(snd, "after", 5, MSG_DONTWAIT) == 5, "dgram sender: %s", strerror(errno));
	crt_check(recv(d, buf, sizeof(buf), MSG_DONTWAIT) == 5 && !memcmp(buf, "after", 5),
		  "the record sent after the restore did not arrive");
	acc = accept(l, NULL, NULL);
	crt_check(acc >= 0, "the pending connection cannot be accepted: %s", strerror(errno));
	check_alive(c, acc, "accepted after the restore");
	crt_pass();
}

/* a listener whose removed path is now another file: refused at dump, the
 * listener still there after, the file untouched */
static int removed_taken(void)
{
	struct sockaddr_un a;
	socklen_t alen;
	int l = listener(SOCK_STREAM, "taken.sock", &a, &alen), f, c;
	struct stat st;

	if (unlink(a.sun_path) || (f = open(a.sun_path, O_CREAT | O_WRONLY, 0600)) < 0)
		crt_fail("taken: %s", strerror(errno));
	close(f);

	crt_ready();
	crt_wait_term();
	crt_check(!lstat(a.sun_path, &st) && S_ISREG(st.st_mode), "the file at %s is gone",
		  a.sun_path);
	check_name(l, false, a.sun_path, "listener");
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	crt_check(connect(c, (struct sockaddr *)&a, alen) && errno == ECONNREFUSED,
		  "a connect to the file did not fail with ECONNREFUSED");
	crt_pass();
}

/* -------------------------------------------------------------- devlog */

static bool test_alive(pid_t test)
{
	char path[64], line[256];
	FILE *f;
	bool alive = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", test);
	f = fopen(path, "r");
	if (f && fgets(line, sizeof(line), f))
		alive = strrchr(line, ')') && strrchr(line, ')')[2] != 'Z';
	if (f)
		fclose(f);
	return alive;
}

/* the receiver, outside the tree: each record a line of devlog.log; gone
 * 5 s after the test (at once with gone: its path too, to make the
 * restore fail) */
static void receive(int sk, pid_t test, bool gone, const char *path, const char *back)
{
	FILE *log;
	int away = 0;

	setsid();
	if (back) {
		struct sockaddr_un b;
		socklen_t blen = mkaddr(&b, back);

		if (connect(sk, (struct sockaddr *)&b, blen))
			_exit(1);
	}
	log = fopen(crt_path("devlog.log"), "w");
	for (;;) {
		struct pollfd pfd = { sk, POLLIN, 0 };
		ssize_t n;

		if (poll(&pfd, 1, 50) <= 0) {
			away = test_alive(test) ? 0 : away + 1;
			if (away && gone)
				unlink(path);
			if (away > 100)
				_exit(0);
			continue;
		}
		n = recv(sk, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			_exit(1);
		buf[n] = 0;
		fprintf(log, "%s\n", (char *)buf);
		fflush(log);
	}
}

static int devlog(bool gone, bool connected)
{
	struct sockaddr_un a, c;
	socklen_t len = mkaddr(&a, crt_path("devlog.sock"));
	socklen_t clen = mkaddr(&c, crt_path("client.sock"));
	int rs = socket(AF_UNIX, SOCK_DGRAM, 0), sk = socket(AF_UNIX, SOCK_DGRAM, 0);
	pid_t child, test = getpid();
	char *log = NULL;

	if (rs < 0 || bind(rs, (struct sockaddr *)&a, len))
		crt_fail("receiver: %s", strerror(errno));
	/* --connected: the receiver connects to the test's socket */
	if (sk < 0 || (connected && bind(sk, (struct sockaddr *)&c, clen)))
		crt_fail("client: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		if (fork() == 0)
			receive(rs, test, gone, a.sun_path, connected ? c.sun_path : NULL);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(rs);
	for (int i = 0; connected && i < 500 && access(crt_path("devlog.log"), F_OK); i++)
		usleep(10000); /* the receiver connected before it opened its log */
	if (connect(sk, (struct sockaddr *)&a, len))
		crt_fail("connect: %s", strerror(errno));
	crt_check(send(sk, "before", 6, 0) == 6, "send: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	check_name(sk, true, a.sun_path, "syslog socket");
	crt_check(send(sk, "after", 5, 0) == 5, "send after the restore: %s", strerror(errno));
	for (int i = 0; i < 200; i++) {
		log = crt_read_file(crt_path("devlog.log"), NULL);
		if (log && strstr(log, "after"))
			break;
		free(log);
		log = NULL;
		usleep(10000);
	}
	crt_check(log && !strcmp(log, "before\nafter\n"), "the receiver got '%s'", log ? log : "");
	crt_pass();
}

/* a datagram socket of a pair, holding records from its pair, connected
 * to another since: the kernel drops its records and leaves its old pair
 * an ECONNRESET, which the dump refuses, leaving it pending */
static int reconnected(void)
{
	struct sockaddr_un a;
	socklen_t len = mkaddr(&a, crt_path("other.sock"));
	int sv[2], z = socket(AF_UNIX, SOCK_DGRAM, 0);

	pair(SOCK_DGRAM, sv);
	send_recs(sv[1], 1, 3, "pair");
	if (z < 0 || bind(z, (struct sockaddr *)&a, len) ||
	    connect(sv[0], (struct sockaddr *)&a, len))
		crt_fail("reconnect: %s", strerror(errno));

	crt_ready();
	crt_wait_term();
	check_reset(sv[1], "the old pair");
	crt_pass();
}

/* ---------------------------------------------------------------- fifo */

static int fifo(void)
{
	char path[4096], got[64];
	struct stat st;
	int r, w;

	snprintf(path, sizeof(path), "%s", crt_path("gone.fifo"));
	if (mkfifo(path, 0600) || chmod(path, 0640))
		crt_fail("mkfifo: %s", strerror(errno));
	r = open(path, O_RDONLY | O_NONBLOCK);
	w = open(path, O_WRONLY | O_NONBLOCK);
	if (r < 0 || w < 0 || write(w, "queued", 6) != 6 || unlink(path))
		crt_fail("fifo: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	crt_check(lstat(path, &st) && errno == ENOENT, "%s is back", path);
	crt_check(!fstat(r, &st) && S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0640 &&
			  st.st_nlink == 0,
		  "the FIFO is not a removed FIFO of mode 0640 (mode %o, %lu links)", st.st_mode,
		  (unsigned long)st.st_nlink);
	{
		char link[64], want[4200];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", w);
		n = readlink(link, want, sizeof(want) - 1);
		want[n > 0 ? n : 0] = 0;
		crt_check(!strncmp(want, path, strlen(path)) && strstr(want, "(deleted)"),
			  "fd %d leads to '%s'", w, want);
	}
	crt_check(read(r, got, sizeof(got)) == 6 && !memcmp(got, "queued", 6),
		  "the FIFO's data is lost");
	crt_check(write(w, "more", 4) == 4 && read(r, got, sizeof(got)) == 4,
		  "the FIFO's ends are not one pipe any more");
	crt_pass();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	crt_init();
	if (!strcmp(mode, "queues"))
		return queues();
	if (!strcmp(mode, "halfclosed"))
		return halfclosed();
	if (!strcmp(mode, "removed"))
		return removed();
	if (!strcmp(mode, "removed-taken"))
		return removed_taken();
	if (!strcmp(mode, "devlog"))
		return devlog(argc > 2 && !strcmp(argv[2], "--gone"),
			      argc > 2 && !strcmp(argv[2], "--connected"));
	if (!strcmp(mode, "fifo"))
		return fifo();
	if (!strcmp(mode, "reconnected"))
		return reconnected();
	crt_fail("usage: usk queues|devlog|removed|halfclosed|fifo");
}
