/* Unix connections between two trees dumped and restored apart, as a
 * database unit and a client unit connected over its socket are.
 *
 * The second tree (the "server", an orphan the runner adopts, its root
 * named in $CRT_DIR/linked) accepts the test's connection on a listener at
 * $CRT_DIR/db.sock, and holds the other end of a seqpacket pair the test
 * made.  Before the dump each side sends the other data it does not read:
 * 30000 bytes on the stream from the test, 5000 back; records of 1, 100
 * and 3000 bytes on the seqpacket from the test, 7 and 2000 back.
 *
 * After the restore the test finds: its fds with their numbers and flags,
 * its stream's peer still named db.sock, the 5000 bytes then nothing, the
 * two records in order with their lengths.  It then wakes the server
 * (SIGUSR1), which finds on its side: the three records then the test's
 * "check", the 30000 bytes, its accepted end still named db.sock, its fd
 * flags; it answers "ok" or what it found wrong, and sends 6 bytes on the
 * stream, which the test must read: the connection flows both ways.  The
 * server's exit status at the end is its verdict (its messages go to
 * $CRT_DIR/linked.log).
 *
 * --refused: the server also sends the test a file descriptor
 * (SCM_RIGHTS) the test does not read: a message that carries one cannot
 * cross to another tree, the test's dump refuses it (tests.list:
 * refuse-unixlink-fds), and both run on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define T_STREAM 10 /* the test's stream (O_NONBLOCK) */
#define T_SEQ	 11 /* the test's seqpacket end (FD_CLOEXEC) */
#define S_STREAM 20 /* the server's accepted end (O_NONBLOCK) */
#define S_SEQ	 21

#define TO_SERVER 30000
#define TO_TEST	  5000

static const size_t rec_t[] = { 1, 100, 3000 }; /* test -> server */
static const size_t rec_s[] = { 7, 2000 };	/* server -> test */

static unsigned char pat(size_t i, unsigned seed)
{
	return (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i, seed);
}

static bool same(const unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(i, seed))
			return false;
	return true;
}

static bool named_db(int fd, bool peer)
{
	struct sockaddr_un a;
	socklen_t l = sizeof(a);
	int r = peer ? getpeername(fd, (struct sockaddr *)&a, &l)
		     : getsockname(fd, (struct sockaddr *)&a, &l);

	return !r && l > sizeof(sa_family_t) && !strcmp(a.sun_path, crt_path("db.sock"));
}

/* ------------------------------------------------------------ server */

static volatile sig_atomic_t woken, ended;

static void on_sig(int s)
{
	if (s == SIGUSR1)
		woken = 1;
	else
		ended = 1;
}

static FILE *slog;

/* all of n bytes from a stream, waiting at most 5 s */
static ssize_t read_n(int fd, unsigned char *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 5000) != 1)
			break;
		r = read(fd, b + got, n - got);
		if (r <= 0)
			break;
		got += r;
	}
	return (ssize_t)got;
}

/* the server's checks after the restore; NULL if all is well */
static const char *server_check(void)
{
	static unsigned char b[TO_SERVER + 16];
	static char why[160];

	if (!(fcntl(S_STREAM, F_GETFL) & O_NONBLOCK))
		return "the accepted end lost O_NONBLOCK";
	if (!named_db(S_STREAM, false))
		return "the accepted end is no longer named db.sock";
	for (size_t k = 0; k < 3; k++) {
		ssize_t r = recv(S_SEQ, b, sizeof(b), MSG_DONTWAIT);

		if (r != (ssize_t)rec_t[k] || !same(b, r, 10 + k)) {
			snprintf(why, sizeof(why), "seqpacket record %zu: %zd bytes, expected %zu",
				 k, r, rec_t[k]);
			return why;
		}
	}
	if (recv(S_SEQ, b, sizeof(b), MSG_DONTWAIT) != 5 || memcmp(b, "check", 5))
		return "the test's check record did not follow its three records";
	if (read_n(S_STREAM, b, TO_SERVER) != TO_SERVER || !same(b, TO_SERVER, 1))
		return "the 30000 bytes the test sent before the dump did not come";
	if (recv(S_STREAM, b, 1, MSG_DONTWAIT) != -1 || errno != EAGAIN)
		return "more than the 30000 bytes came on the stream";
	return NULL;
}

/* one byte carrying fd on sk (SCM_RIGHTS) */
static int send_fd(int sk, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { "F", 1 };
	struct msghdr mh = { NULL, 0, &iov, 1, ctl.b, sizeof(ctl.b), 0 };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sk, &mh, 0) == 1 ? 0 : -1;
}

static void __attribute__((noreturn)) server(int ls, int seq, pid_t test, bool refused)
{
	unsigned char b[TO_TEST];
	const char *why = "never woken after the restore";
	char tmp[256];
	FILE *f;
	int c;

	setsid();
	slog = fopen(crt_path("linked.log"), "w");
	signal(SIGUSR1, on_sig);
	signal(SIGTERM, on_sig);
	c = accept(ls, NULL, NULL);
	close(ls);
	if (c < 0 || dup2(c, S_STREAM) < 0 || dup2(seq, S_SEQ) < 0)
		_exit(2);
	close(c);
	close(seq);
	fcntl(S_STREAM, F_SETFL, O_NONBLOCK);
	fill(b, TO_TEST, 2);
	if (write(S_STREAM, b, TO_TEST) != TO_TEST)
		_exit(3);
	if (refused && send_fd(S_SEQ, 0))
		_exit(3);
	for (size_t k = 0; k < 2; k++) {
		fill(b, rec_s[k], 20 + k);
		if (send(S_SEQ, b, rec_s[k], 0) != (ssize_t)rec_s[k])
			_exit(4);
	}
	/* ready: the test waits for its name */
	snprintf(tmp, sizeof(tmp), "%s.tmp", crt_path("linked"));
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) || rename(tmp, crt_path("linked")))
		_exit(5);
	/* the test is briefly absent between its dump and its restore: a
	 * server left alone for 60 s ends */
	for (int ticks = 0; !woken && !ended && ticks < 600; ticks++)
		usleep(100000);
	if (refused) {
		why = NULL; /* nothing moved: nothing to check here */
	} else if (woken) {
		why = server_check();
		if (send(S_SEQ, why ? why : "ok", why ? strlen(why) : 2, 0) < 0 ||
		    write(S_STREAM, "after\n", 6) != 6)
			why = why ?: "cannot answer the test";
	}
	fprintf(slog, "%s\n", why ? why : "PASS");
	fclose(slog);
	while (!ended && !kill(test, 0))
		usleep(100000);
	_exit(why ? 1 : 0);
}

/* ------------------------------------------------------------- test */

int main(int argc, char **argv)
{
	bool refused = argc > 1 && !strcmp(argv[1], "--refused");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	unsigned char b[TO_SERVER];
	int ls, sk, sv[2];
	pid_t child, test = getpid(), srv = 0;
	char *name;
	ssize_t r;

	crt_init();
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", crt_path("db.sock"));
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 4) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		crt_fail("sockets: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		close(sv[0]);
		if (fork() == 0)
			server(ls, sv[1], test, refused);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(ls);
	close(sv[1]);
	sk = socket(AF_UNIX, SOCK_STREAM, 0);
	if (sk < 0 || connect(sk, (struct sockaddr *)&a, sizeof(a)) || dup2(sk, T_STREAM) < 0 ||
	    dup2(sv[0], T_SEQ) < 0)
		crt_fail("connect: %s", strerror(errno));
	close(sk);
	close(sv[0]);
	fcntl(T_STREAM, F_SETFL, O_NONBLOCK);
	fcntl(T_SEQ, F_SETFD, FD_CLOEXEC);
	fill(b, TO_SERVER, 1);
	crt_check(write(T_STREAM, b, TO_SERVER) == TO_SERVER, "write: %s", strerror(errno));
	for (size_t k = 0; k < 3; k++) {
		fill(b, rec_t[k], 10 + k);
		crt_check(send(T_SEQ, b, rec_t[k], 0) == (ssize_t)rec_t[k], "send: %s",
			  strerror(errno));
	}
	for (int ms = 0; !(name = crt_read_file(crt_path("linked"), NULL)); ms += 10) {
		crt_check(ms < 10000, "the server did not get ready in 10 s");
		usleep(10000);
	}
	srv = atoi(name);
	free(name);
	/* both sides' data queued before the dump */
	for (int ms = 0; ms < 5000; ms += 10) {
		struct pollfd p[2] = { { T_STREAM, POLLIN, 0 }, { T_SEQ, POLLIN, 0 } };

		if (poll(p, 2, 0) == 2 && p[0].revents & POLLIN && p[1].revents & POLLIN)
			break;
		usleep(10000);
	}

	crt_ready();
	crt_wait_term();
	if (refused) {
		/* the dump refused, nothing was touched: the record carrying
		 * the fd (sent before the others) is there */
		r = recv(T_SEQ, b, sizeof(b), MSG_DONTWAIT);
		crt_check(r == 1 && b[0] == 'F',
			  "after the refused dump: the record with the fd is gone (%zd: %s)", r,
			  strerror(errno));
		crt_pass();
	}

	crt_check(fcntl(T_STREAM, F_GETFL) & O_NONBLOCK, "fd %d lost O_NONBLOCK", T_STREAM);
	crt_check(fcntl(T_SEQ, F_GETFD) == FD_CLOEXEC, "fd %d lost FD_CLOEXEC", T_SEQ);
	crt_check(named_db(T_STREAM, true), "the stream's peer is no longer named db.sock");
	r = read_n(T_STREAM, b, TO_TEST);
	crt_check(r == TO_TEST && same(b, TO_TEST, 2),
		  "the server's 5000 bytes sent before the dump: %zd came", r);
	crt_check(recv(T_STREAM, b, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN,
		  "more than 5000 bytes came on the stream");
	for (size_t k = 0; k < 2; k++) {
		r = recv(T_SEQ, b, sizeof(b), MSG_DONTWAIT);
		crt_check(r == (ssize_t)rec_s[k] && same(b, r, 20 + k),
			  "seqpacket record %zu from the server: %zd bytes, expected %zu", k, r,
			  rec_s[k]);
	}
	crt_check(send(T_SEQ, "check", 5, 0) == 5, "send check: %s", strerror(errno));
	crt_check(kill(srv, SIGUSR1) == 0, "the server %d is gone", srv);
	{
		struct pollfd p = { T_SEQ, POLLIN, 0 };
		char ans[200];

		crt_check(poll(&p, 1, 10000) == 1, "the server did not answer in 10 s");
		r = recv(T_SEQ, ans, sizeof(ans) - 1, 0);
		ans[r > 0 ? r : 0] = 0;
		crt_check(r == 2 && !strcmp(ans, "ok"), "the server found: %s", ans);
	}
	r = read_n(T_STREAM, b, 6);
	crt_check(r == 6 && !memcmp(b, "after\n", 6),
		  "the server's bytes sent after the restore did not come");
	crt_pass();
}
