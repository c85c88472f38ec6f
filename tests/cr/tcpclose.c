/* TCP connections in the states of their close, both ends in the tree
 * (a loopback connection in the test's network namespace), with data
 * queued each way when the tree is dumped.  argv[1] says which pair of
 * states (A is the connecting end, B the accepted one):
 *
 *   finwait2  A shut for writing, its FIN acknowledged: A FIN_WAIT2 with
 *             B's bytes unread, B CLOSE_WAIT with A's bytes and FIN unread
 *   finwait1  A filled B's small window and shut for writing: A FIN_WAIT1,
 *             its FIN unsent behind its unsent bytes; B ESTABLISHED, its
 *             receive queue full
 *   lastack   A shut for writing (B CLOSE_WAIT), then B filled A's window
 *             and shut too: B LAST_ACK (its FIN unsent), A FIN_WAIT2 with
 *             its receive queue full
 *   closing   A filled B's window and shut for writing, then B shut:
 *             A CLOSING (its FIN unsent, B's received), B FIN_WAIT2
 *   shutrd    A shut for reading only, B's bytes unread: both ESTABLISHED,
 *             A reads them, then EOF without a FIN, and still writes
 *
 * argv[2] "v6": over ::1.  After SIGTERM it checks from the inside that each
 * end is in its state again, reads every byte that was queued to it, in
 * order, then EOF where a FIN had come; that the close then goes on (the
 * FIN_WAIT1 end's FIN is acknowledged, a LAST_ACK or CLOSING end closes
 * once its peer has read up to its FIN, an end waiting in FIN_WAIT2 sees
 * EOF when the other closes), and that the namespace sent no RST
 * (/proc/net/snmp: Tcp OutRsts unchanged since before the first dump).
 *
 * "tcpclose server STATE" and "tcpclose peer STATE ADDR" (crrun --peer):
 * the same with the other end outside the tree, in a namespace of its own
 * (see server_main). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

#define SMALL_BUF 16384 /* the receive buffer of an end that does not read */
#define WAIT_MS	  10000

static const char *const names[] = {
	"?",	     "ESTABLISHED", "SYN_SENT",	  "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
	"TIME_WAIT", "CLOSE",	    "CLOSE_WAIT", "LAST_ACK", "LISTEN",	   "CLOSING",
};

static const char *sname(int s)
{
	return s >= 0 && s < (int)(sizeof(names) / sizeof(names[0])) ? names[s] : "?";
}

static int state(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l))
		crt_fail("TCP_INFO: %s", strerror(errno));
	return ti.tcpi_state;
}

static void want_state(int fd, const char *end, int want, const char *when)
{
	int s = state(fd);

	crt_check(s == want, "%s: %s is %s, expected %s", when, end, sname(s), sname(want));
}

/* wait (bounded) until the state is want */
static void reach_state(int fd, const char *end, int want, const char *when)
{
	for (int ms = 0; ms < WAIT_MS && state(fd) != want; ms++)
		usleep(1000);
	want_state(fd, end, want, when);
}

static long out_rsts(void)
{
	char *t = crt_read_file("/proc/net/snmp", NULL), *p, *q;
	long v = -1;
	int col = -1, i = 0;

	/* "Tcp: name name ..." then "Tcp: value value ..." */
	p = t ? strstr(t, "\nTcp: ") : NULL;
	if (!p)
		crt_fail("no Tcp line in /proc/net/snmp");
	q = strstr(p + 1, "\nTcp: ");
	if (!q)
		crt_fail("no Tcp values in /proc/net/snmp");
	for (char *w = strtok(p + 6, " \n"); w && w < q; w = strtok(NULL, " \n"), i++)
		if (!strcmp(w, "OutRsts")) {
			col = i;
			break;
		}
	if (col < 0)
		crt_fail("no OutRsts in /proc/net/snmp");
	q += 6;
	for (i = 0; i <= col; i++, q += strspn(q, " "))
		v = strtol(q, &q, 10);
	free(t);
	return v;
}

static unsigned char pat(long i, int salt)
{
	return (unsigned char)(i * 7 + salt * 13 + (i >> 9));
}

/* write the pattern without blocking until the window and the send buffer
 * are full; returns the bytes written */
static long fill(int fd, int salt)
{
	unsigned char buf[4096];
	long n = 0;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		ssize_t w;

		for (size_t k = 0; k < sizeof(buf); k++)
			buf[k] = pat(n + k, salt);
		w = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			usleep(50000); /* let the window close for good */
			w = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
			if (w < 0 && errno == EAGAIN)
				break;
		}
		if (w <= 0)
			crt_fail("filling the window: %s", w < 0 ? strerror(errno) : "0");
		n += w;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return n;
}

/* read len bytes (bounded wait), then expect EOF if eof */
static void read_all(int fd, const char *end, const void *want, long len, int salt, bool eof)
{
	unsigned char buf[4096];
	long got = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, WAIT_MS) != 1)
			crt_fail("%s: nothing to read after %ld of %ld bytes", end, got, len);
		r = read(fd, buf, sizeof(buf));
		if (r < 0)
			crt_fail("%s: read after %ld bytes: %s", end, got, strerror(errno));
		if (r == 0) {
			crt_check(got == len, "%s: EOF after %ld bytes, expected %ld", end, got,
				  len);
			crt_check(eof, "%s: EOF after its %ld bytes, where no FIN had come", end,
				  got);
			return;
		}
		for (ssize_t k = 0; k < r; k++, got++) {
			unsigned char w =
				want ? ((const unsigned char *)want)[got] : pat(got, salt);

			crt_check(got < len, "%s: more than the %ld bytes queued", end, len);
			crt_check(buf[k] == w, "%s: byte %ld is %#x, expected %#x", end, got,
				  buf[k], w);
		}
		if (got == len && !eof)
			return;
	}
}

static void say(int fd, const char *s)
{
	crt_check(write(fd, s, strlen(s)) == (ssize_t)strlen(s), "write: %s", strerror(errno));
}

static int pair_main(int argc, char **argv);

/* ------------------------------------------- the peer outside the tree */

/* wait (bounded) for a number in $CRT_DIR/name */
static long wait_file_long(const char *name, int secs)
{
	for (int ms = 0; ms < secs * 1000; ms += 10) {
		char *t = crt_read_file(crt_path(name), NULL);

		if (t && *t) {
			long v = atol(t);

			free(t);
			return v;
		}
		free(t);
		usleep(10000);
	}
	crt_fail("no %s after %d s", name, secs);
}

static void put_file_long(const char *name, long v)
{
	char tmp[4200], path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s", crt_path(name));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%ld\n", v) < 0 || fclose(f) || rename(tmp, path))
		crt_fail("cannot write %s", path);
}

/* crrun --one-way waits for this before the first dump */
static void peer_set_up(void)
{
	char tmp[4200], path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s", crt_path("peer-progress"));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "0 0 0.0 1000000 1000000\n") < 0 || fclose(f) || rename(tmp, path))
		crt_fail("cannot write the peer's progress");
}

/* crrun stops the peer (SIGTERM) once the tree is restored for the last
 * time, and only then the tree: the peer tells the tree to go on with the
 * close, and gives its verdict once it has seen it through */
static void after_restores(void)
{
	crt_wait_term();
	put_file_long("peer-go", 1);
}

/* the tree waits for that */
static void wait_peer_go(void)
{
	for (int ms = 0; ms < 600000 && !crt_term; ms += 10) {
		if (!access(crt_path("peer-go"), F_OK))
			return;
		usleep(10000);
	}
	crt_fail("the peer never said that the restores were done");
}

/* the peer (crrun --peer, in a namespace of its own): its end of the
 * connection with "server" in the tree, the other state of the pair */
static int peer_main(const char *what, const char *addr)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int P = socket(AF_INET, SOCK_STREAM, 0), small = SMALL_BUF;
	long rsts, n;

	crt_init();
	a.sin_port = htons((uint16_t)wait_file_long("port", 60));
	if (P < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		crt_fail("peer address %s", addr);
	if (!strcmp(what, "finwait1") || !strcmp(what, "lastack"))
		setsockopt(P, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	if (connect(P, (struct sockaddr *)&a, sizeof(a)))
		crt_fail("connect to %s: %s", addr, strerror(errno));
	rsts = out_rsts();
	if (!strcmp(what, "closewait")) {
		/* the server gets our bytes and FIN (CLOSE_WAIT), we its bytes */
		say(P, "hello from P");
		shutdown(P, SHUT_WR);
		read_all(P, "P", "hello from S", 12, 0, false);
		reach_state(P, "P", TCP_FIN_WAIT2, "before the dump");
		peer_set_up();
		after_restores();
		/* after the restore: its last bytes and its FIN */
		read_all(P, "P", "bye", 3, 0, true);
		reach_state(P, "P", TCP_CLOSE, "after the server's close");
	} else if (!strcmp(what, "finwait2")) {
		say(P, "hello from P");
		read_all(P, "P", "hello from S", 12, 0, true);
		want_state(P, "P", TCP_CLOSE_WAIT, "before the dump");
		peer_set_up();
		after_restores();
		wait_file_long("go", 60);
		say(P, "bye");
		shutdown(P, SHUT_WR);
		reach_state(P, "P", TCP_CLOSE, "after our FIN");
	} else if (!strcmp(what, "finwait1") || !strcmp(what, "lastack")) {
		if (!strcmp(what, "lastack")) {
			say(P, "hello from P");
			shutdown(P, SHUT_WR);
		}
		peer_set_up();
		after_restores();
		/* we read nothing until the restored server says how much */
		n = wait_file_long("go", 60);
		read_all(P, "P", NULL, n, 4, true);
		if (!strcmp(what, "finwait1")) {
			wait_file_long("go2", 60); /* it has seen FIN_WAIT2 */
			shutdown(P, SHUT_WR);
		}
		reach_state(P, "P", TCP_CLOSE, "after both FINs");
	} else {
		crt_fail("unknown pair of states %s", what);
	}
	crt_check(out_rsts() == rsts, "the peer's namespace sent %ld RSTs", out_rsts() - rsts);
	crt_msg("peer %s: the data and the FIN as they were, the close went on, no RST", what);
	crt_pass();
}

/* the server in the tree, the peer above outside it:
 *   closewait  the server CLOSE_WAIT (the peer's bytes and FIN unread),
 *              the peer FIN_WAIT2: the FIN must be delivered by kupdate
 *   finwait2   the server FIN_WAIT2 (the peer's bytes unread), the peer
 *              CLOSE_WAIT; it closes after the restore
 *   finwait1   the server FIN_WAIT1 behind the peer's closed window
 *   lastack    the server LAST_ACK behind the peer's closed window */
static int server_main(const char *what)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), S;
	long rsts, n = 0;

	crt_init();
	if (l < 0 || bind(l, (struct sockaddr *)&a, al) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		crt_fail("listen: %s", strerror(errno));
	put_file_long("port", ntohs(a.sin_port));
	S = accept(l, NULL, NULL);
	if (S < 0)
		crt_fail("accept: %s", strerror(errno));
	close(l);
	if (!strcmp(what, "closewait")) {
		say(S, "hello from S");
		reach_state(S, "S", TCP_CLOSE_WAIT, "before the dump");
	} else if (!strcmp(what, "finwait2")) {
		int inq = 0;

		say(S, "hello from S");
		shutdown(S, SHUT_WR);
		reach_state(S, "S", TCP_FIN_WAIT2, "before the dump");
		for (int ms = 0; ms < WAIT_MS && (ioctl(S, FIONREAD, &inq), inq < 12); ms++)
			usleep(1000);
	} else if (!strcmp(what, "finwait1")) {
		n = fill(S, 4);
		shutdown(S, SHUT_WR);
		usleep(100000);
		want_state(S, "S", TCP_FIN_WAIT1, "before the dump");
	} else if (!strcmp(what, "lastack")) {
		reach_state(S, "S", TCP_CLOSE_WAIT, "before the dump");
		n = fill(S, 4);
		shutdown(S, SHUT_WR);
		usleep(100000);
		want_state(S, "S", TCP_LAST_ACK, "before the dump");
	} else {
		crt_fail("unknown pair of states %s", what);
	}
	rsts = out_rsts();
	crt_msg("server %s: %ld bytes beyond the window, OutRsts %ld", what, n, rsts);
	crt_ready();
	wait_peer_go();

	if (!strcmp(what, "closewait")) {
		want_state(S, "S", TCP_CLOSE_WAIT, "after the restore");
		read_all(S, "S", "hello from P", 12, 0, true);
		say(S, "bye");
		close(S);
	} else if (!strcmp(what, "finwait2")) {
		want_state(S, "S", TCP_FIN_WAIT2, "after the restore");
		read_all(S, "S", "hello from P", 12, 0, false);
		put_file_long("go", 1);
		read_all(S, "S", "bye", 3, 0, true);
	} else if (!strcmp(what, "finwait1")) {
		want_state(S, "S", TCP_FIN_WAIT1, "after the restore");
		put_file_long("go", n);
		reach_state(S, "S", TCP_FIN_WAIT2, "once the peer has read everything");
		put_file_long("go2", 1);
		read_all(S, "S", NULL, 0, 0, true);
	} else {
		want_state(S, "S", TCP_LAST_ACK, "after the restore");
		read_all(S, "S", "hello from P", 12, 0, true);
		put_file_long("go", n);
		reach_state(S, "S", TCP_CLOSE, "once the peer has read everything");
	}
	crt_check(out_rsts() == rsts, "the namespace sent %ld RSTs", out_rsts() - rsts);
	crt_msg("server %s: state, queues and FINs as they were; the close went on", what);
	crt_wait_term();
	crt_pass();
}

int main(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[1], "peer"))
		return peer_main(argv[2], argv[3]);
	if (argc > 2 && !strcmp(argv[1], "server"))
		return server_main(argv[2]);
	return pair_main(argc, argv);
}

static int pair_main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "finwait2";
	bool v6 = argc > 2 && !strcmp(argv[2], "v6");
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = in6addr_loopback };
	struct sockaddr_in a4 = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr *sa = v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4;
	socklen_t al = v6 ? sizeof(a6) : sizeof(a4);
	static const char hello_a[] = "hello from A", hello_b[] = "hello from B";
	int fam = v6 ? AF_INET6 : AF_INET, l, A, B, small = SMALL_BUF;
	long n = 0, rsts;

	crt_init();
	l = socket(fam, SOCK_STREAM, 0);
	A = socket(fam, SOCK_STREAM, 0);
	/* the end that does not read gets a small receive buffer */
	if (!strcmp(what, "lastack"))
		setsockopt(A, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	if (!strcmp(what, "finwait1") || !strcmp(what, "closing"))
		setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	if (l < 0 || A < 0 || bind(l, sa, al) || listen(l, 1) || getsockname(l, sa, &al) ||
	    connect(A, sa, al))
		crt_fail("loopback connection: %s", strerror(errno));
	B = accept(l, NULL, NULL);
	if (B < 0)
		crt_fail("accept: %s", strerror(errno));
	close(l);
	/* kupdate releases a process's connections in the order of their
	 * descriptors: the end that needs its peer's FIN delivered goes
	 * first, before the other end's own shutdown sends it again */
	if (!strcmp(what, "finwait2") || !strcmp(what, "lastack")) {
		int t = dup(A);

		if (t < 0 || dup2(B, A) < 0 || dup2(t, B) < 0)
			crt_fail("dup: %s", strerror(errno));
		close(t);
		t = A;
		A = B;
		B = t;
	}

	if (!strcmp(what, "finwait2")) {
		say(A, hello_a);
		say(B, hello_b);
		shutdown(A, SHUT_WR);
		reach_state(A, "A", TCP_FIN_WAIT2, "before the dump");
		reach_state(B, "B", TCP_CLOSE_WAIT, "before the dump");
	} else if (!strcmp(what, "finwait1")) {
		n = fill(A, 1);
		shutdown(A, SHUT_WR);
		usleep(100000);
		want_state(A, "A", TCP_FIN_WAIT1, "before the dump");
		want_state(B, "B", TCP_ESTABLISHED, "before the dump");
	} else if (!strcmp(what, "lastack")) {
		say(A, hello_a);
		shutdown(A, SHUT_WR);
		reach_state(B, "B", TCP_CLOSE_WAIT, "before the dump");
		n = fill(B, 2);
		shutdown(B, SHUT_WR);
		usleep(100000);
		want_state(A, "A", TCP_FIN_WAIT2, "before the dump");
		want_state(B, "B", TCP_LAST_ACK, "before the dump");
	} else if (!strcmp(what, "closing")) {
		say(B, hello_b);
		n = fill(A, 3);
		shutdown(A, SHUT_WR);
		usleep(100000);
		shutdown(B, SHUT_WR);
		reach_state(A, "A", TCP_CLOSING, "before the dump");
		reach_state(B, "B", TCP_FIN_WAIT2, "before the dump");
	} else if (!strcmp(what, "shutrd")) {
		say(B, hello_b);
		usleep(50000);
		shutdown(A, SHUT_RD);
		want_state(A, "A", TCP_ESTABLISHED, "before the dump");
	} else {
		crt_fail("unknown pair of states %s", what);
	}
	rsts = out_rsts();
	crt_msg("%s: %ld bytes beyond the window, OutRsts %ld", what, n, rsts);
	crt_ready();
	crt_wait_term();

	if (!strcmp(what, "finwait2")) {
		want_state(A, "A", TCP_FIN_WAIT2, "after the restore");
		want_state(B, "B", TCP_CLOSE_WAIT, "after the restore");
		read_all(B, "B", hello_a, strlen(hello_a), 0, true);
		read_all(A, "A", hello_b, strlen(hello_b), 0, false);
		say(B, "bye");
		close(B);
		read_all(A, "A", "bye", 3, 0, true);
	} else if (!strcmp(what, "finwait1")) {
		want_state(A, "A", TCP_FIN_WAIT1, "after the restore");
		want_state(B, "B", TCP_ESTABLISHED, "after the restore");
		read_all(B, "B", NULL, n, 1, true);
		reach_state(A, "A", TCP_FIN_WAIT2, "once B has read everything");
		close(B);
		read_all(A, "A", NULL, 0, 0, true);
	} else if (!strcmp(what, "lastack")) {
		want_state(A, "A", TCP_FIN_WAIT2, "after the restore");
		want_state(B, "B", TCP_LAST_ACK, "after the restore");
		read_all(B, "B", hello_a, strlen(hello_a), 0, true);
		read_all(A, "A", NULL, n, 2, true);
		reach_state(B, "B", TCP_CLOSE, "once A has read everything");
	} else if (!strcmp(what, "shutrd")) {
		want_state(A, "A", TCP_ESTABLISHED, "after the restore");
		read_all(A, "A", hello_b, strlen(hello_b), 0, true);
		say(A, hello_a);
		read_all(B, "B", hello_a, strlen(hello_a), 0, false);
		want_state(B, "B", TCP_ESTABLISHED, "at the end");
	} else {
		want_state(A, "A", TCP_CLOSING, "after the restore");
		want_state(B, "B", TCP_FIN_WAIT2, "after the restore");
		read_all(A, "A", hello_b, strlen(hello_b), 0, true);
		read_all(B, "B", NULL, n, 3, true);
		reach_state(A, "A", TCP_CLOSE, "once B has read everything");
	}
	crt_check(out_rsts() == rsts, "the namespace sent %ld RSTs", out_rsts() - rsts);
	crt_msg("%s: states, queues and FINs as they were; the close went on without a RST", what);
	crt_pass();
}
