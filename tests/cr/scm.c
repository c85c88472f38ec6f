/* File descriptors in flight (SCM_RIGHTS) in unix sockets survive.
 *
 * scm stream|dgram|seqpacket: a socketpair of that type with five
 * messages queued one way, two of them carrying fds:
 *   1. "plain-0", no fds;
 *   2. "with-tree": the write end of a pipe whose read end the test holds
 *      (data in the pipe), and a regular file the test holds too (offset
 *      5, O_APPEND|O_NONBLOCK);
 *   3. "plain-2", no fds;
 *   4. "alone": files the test no longer holds: both ends of a pipe with
 *      data in it, a regular file at offset 7 (O_RDONLY|O_NONBLOCK), one
 *      end of a stream socketpair (data queued for it; its other end the
 *      test holds), an eventfd (count 42), an O_PATH fd of a directory,
 *      both ends of a seqpacket pair (a record queued);
 *   5. "tail", no fds.
 * After the restore each message is received in order with its bytes
 * (a stream is read record by record: the fds come with the first byte of
 * their record, not later), each with exactly its fds: the files the
 * test holds are the same open file descriptions (kcmp), the pipe is the
 * same pipe (a write through the received end is read from the held
 * one), the offsets and status flags are those of before, the socket's
 * peer is the held socket both ways, then the queue is empty.
 *
 * scm glued: on a stream, plain bytes of separate writes right before a
 * write carrying fds, which a peek glues to it: three small writes then
 * "carry" with a pipe's write end (the test holds the read end) and a
 * file the test holds; 100000 bytes in writes of 64 KiB and "gh" then
 * "second" with the file; "third" with the pipe end right after; "tail".
 * After the restore the plain bytes are read exactly with no room for
 * control data (fds on them would be closed by the kernel: MSG_CTRUNC
 * fails), and each write's fds come with its first byte, the test's pipe
 * and file (kcmp).  glued-big: the same with 1.5 MiB instead of 100000
 * bytes (SO_SNDBUFFORCE), more than kupdate peeks at once.
 *
 * scm cycle: sockets in flight referring to themselves and to each
 * other: pair A's end a0 is sent through a0 itself (it waits in a1's
 * queue), pair B's end b0 through A (in a1's queue) and A's a0 through B
 * (in b1's queue), and a1 through a0 (in its own queue); the test then
 * closes a0 and b0.  After the restore
 * the ends come back from the queues, a0 twice (kcmp: one description),
 * and each is connected to its pair's other end.
 *
 * scm tree: a child holds a socketpair whose queue carries a file its
 * parent holds (the child closed its own fd of it): after the restore
 * the child receives it and finds it is its parent's (kcmp) and a pipe
 * end the parent holds too.  The other way round, the parent's pair
 * carries a file only the child holds (on fd 50, offset 3): the parent
 * receives it and finds it is the child's (kcmp), at its offset.
 *
 * scm nested: a socket in flight whose own queue carries a file: b1, whose
 * peer b0 was closed (shut both ways), holds a message carrying a pipe's
 * write end; b1 itself waits in a1's queue; the test holds only a0, a1
 * and the pipe's read end.  After the restore b1 comes out of a1, its
 * message out of b1 with the pipe end (the test's pipe), then end of
 * file.
 *
 * scm many: 253 fds (SCM_MAX_FD) in one dgram, copies of one file the test
 * holds: all back, all that file.  many-low: with kupdate's RLIMIT_NOFILE
 * at 128 (and the test's, not to be refused for a limit above kupdate's)
 * the dump is refused: kupdate cannot receive them to look; the message is
 * whole after.
 *
 * scm refuse-udp: an UDP socket in flight that no process holds: refused
 * at dump naming the unix socket (the message is still there after).
 * scm refuse-epoll, refuse-deleted: the same for an epoll instance and for
 * a deleted file; refuse-outside: a unix stream socket in flight alone
 * whose peer is outside the tree, refused naming the carrying socket. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static void send_fds(int via, const char *data, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)data, strlen(data) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n) {
		struct cmsghdr *c = &ctl.align;

		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	if (sendmsg(via, &mh, MSG_DONTWAIT) != (ssize_t)strlen(data))
		crt_fail("sendmsg %s: %s", data, strerror(errno));
}

/* receive len bytes (one record), expecting data and exactly nfds fds */
static void recv_fds(int via, const char *data, int *fds, int nfds, const char *what)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctl;
	char got[256] = { 0 };
	struct iovec iov = { got, strlen(data) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	int n = 0;
	ssize_t r = recvmsg(via, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	crt_check(r == (ssize_t)strlen(data) && !memcmp(got, data, r),
		  "%s: received %zd bytes \"%.*s\", expected \"%s\" (%s)", what, r,
		  (int)(r > 0 ? r : 0), got, data, r < 0 ? strerror(errno) : "");
	crt_check(!(mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)), "%s: truncated (%#x)", what,
		  mh.msg_flags);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		crt_check(c->cmsg_type == SCM_RIGHTS && n + k <= nfds,
			  "%s: %d fds or more, expected %d", what, n + k, nfds);
		memcpy(fds + n, CMSG_DATA(c), sizeof(int) * k);
		n += k;
	}
	crt_check(n == nfds, "%s: %d fds, expected %d", what, n, nfds);
}

static bool same_file(int a, int b)
{
	return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, a, b) == 0;
}

static void xwrite(int fd, const char *s)
{
	crt_check(write(fd, s, strlen(s)) == (ssize_t)strlen(s), "write: %s", strerror(errno));
}

static void expect_read(int fd, const char *s, const char *what)
{
	char buf[256] = { 0 };
	ssize_t r = read(fd, buf, strlen(s));

	crt_check(r == (ssize_t)strlen(s) && !memcmp(buf, s, r),
		  "%s: read \"%.*s\", expected \"%s\"", what, (int)(r > 0 ? r : 0), buf, s);
}

static int open_file(const char *name, const char *data, int flags, off_t pos)
{
	int fd = open(crt_path(name), O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		crt_fail("%s: %s", name, strerror(errno));
	close(fd);
	fd = open(crt_path(name), flags);
	if (fd < 0 || lseek(fd, pos, SEEK_SET) != pos)
		crt_fail("%s: %s", name, strerror(errno));
	return fd;
}

static void queue_case(int type)
{
	int sv[2], p[2], only[2], q[2], z[2], f, of, efd, dir, fds[10];
	struct stat st, dst;
	const char *recs[] = { "plain-0", "with-tree", "plain-2", "alone", "tail" };
	char buf[64];

	if (socketpair(AF_UNIX, type, 0, sv) || pipe(p) || pipe(only) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, q) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, z))
		crt_fail("setup: %s", strerror(errno));
	f = open_file("held", "0123456789abcdef", O_RDWR | O_APPEND | O_NONBLOCK, 5);
	of = open_file("alone", "ABCDEFGHIJKLMNOP", O_RDONLY | O_NONBLOCK, 7);
	efd = eventfd(42, 0);
	dir = open(crt_path(""), O_PATH | O_DIRECTORY);
	if (efd < 0 || dir < 0 || fstat(dir, &dst))
		crt_fail("eventfd, O_PATH: %s", strerror(errno));
	xwrite(p[1], "in-pipe ");
	xwrite(only[1], "only-pipe ");
	xwrite(q[1], "for-q0 ");
	xwrite(z[0], "for-z1");
	send_fds(sv[0], recs[0], NULL, 0);
	send_fds(sv[0], recs[1], (int[]){ p[1], f }, 2);
	send_fds(sv[0], recs[2], NULL, 0);
	send_fds(sv[0], recs[3], (int[]){ only[0], only[1], of, q[0], efd, dir, z[0], z[1] }, 8);
	send_fds(sv[0], recs[4], NULL, 0);
	close(p[1]);
	close(only[0]);
	close(only[1]);
	close(of);
	close(q[0]);
	close(efd);
	close(dir);
	close(z[0]);
	close(z[1]);

	crt_ready();
	crt_wait_term();

	recv_fds(sv[1], recs[0], fds, 0, "record 0");
	if (type == SOCK_STREAM) {
		/* the fds come with the first byte of their record */
		recv_fds(sv[1], "w", fds, 2, "record 1's first byte");
		recv_fds(sv[1], recs[1] + 1, fds + 2, 0, "record 1's other bytes");
	} else {
		recv_fds(sv[1], recs[1], fds, 2, "record 1");
	}
	/* the pipe the test holds */
	xwrite(fds[0], "after");
	expect_read(p[0], "in-pipe after", "the pipe whose write end was in flight");
	crt_check(same_file(fds[1], f), "the regular file in flight is not the test's own");
	crt_check(lseek(f, 0, SEEK_CUR) == 5, "the held file's offset moved");
	crt_check((fcntl(fds[1], F_GETFL) & (O_APPEND | O_NONBLOCK | O_ACCMODE)) ==
			  (O_APPEND | O_NONBLOCK | O_RDWR),
		  "the held file's flags are %#x", fcntl(fds[1], F_GETFL));
	close(fds[0]);
	close(fds[1]);
	recv_fds(sv[1], recs[2], fds, 0, "record 2");
	if (type != SOCK_STREAM) {
		recv_fds(sv[1], recs[3], fds, 8, "record 3");
	} else {
		recv_fds(sv[1], "a", fds, 8, "record 3's first byte");
		recv_fds(sv[1], recs[3] + 1, fds + 8, 0, "record 3's other bytes");
	}
	/* only[0], only[1]: one pipe, its data kept */
	xwrite(fds[1], "more");
	expect_read(fds[0], "only-pipe more", "the pipe in flight alone");
	crt_check(!same_file(fds[0], fds[1]), "the two pipe ends are one description");
	crt_check(lseek(fds[2], 0, SEEK_CUR) == 7, "the file in flight alone is at %ld, not 7",
		  (long)lseek(fds[2], 0, SEEK_CUR));
	crt_check((fcntl(fds[2], F_GETFL) & (O_NONBLOCK | O_ACCMODE)) == (O_NONBLOCK | O_RDONLY),
		  "the file in flight alone has the flags %#x", fcntl(fds[2], F_GETFL));
	expect_read(fds[2], "HIJ", "the file in flight alone");
	/* q[0]: its queue, then its peer both ways */
	expect_read(fds[3], "for-q0 ", "the socket in flight's own queue");
	xwrite(fds[3], "to-q1");
	expect_read(q[1], "to-q1", "the socket in flight's peer");
	xwrite(q[1], "to-q0");
	expect_read(fds[3], "to-q0", "the socket in flight from its peer");
	{
		uint64_t v = 0;

		crt_check(read(fds[4], &v, sizeof(v)) == sizeof(v) && v == 42,
			  "the eventfd in flight counts %lu, not 42", (unsigned long)v);
	}
	crt_check((fcntl(fds[5], F_GETFL) & O_PATH) && !fstat(fds[5], &st) &&
			  st.st_ino == dst.st_ino && st.st_dev == dst.st_dev,
		  "the O_PATH directory in flight is not the test's directory");
	/* a seqpacket pair both of whose ends are in flight alone */
	expect_read(fds[7], "for-z1", "the pair in flight alone's queue");
	xwrite(fds[7], "z1-to-z0");
	expect_read(fds[6], "z1-to-z0", "the pair in flight alone");
	recv_fds(sv[1], recs[4], fds + 8, 0, "record 4");
	crt_check(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		  "the queue does not end after its records");
	/* and the pair still works both ways */
	send_fds(sv[1], "back", NULL, 0);
	recv_fds(sv[0], "back", fds, 0, "the other way");
	crt_pass();
}

/* read exactly len plain bytes with no room for control data (as recv(2)
 * does): fds on any of them would be closed by the kernel (MSG_CTRUNC) */
static void read_plain(int via, const char *data, size_t len, const char *what)
{
	static char got[1 << 21];
	size_t done = 0;

	while (done < len) {
		struct iovec iov = { got + done, len - done };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t r = recvmsg(via, &mh, MSG_DONTWAIT);

		crt_check(r > 0, "%s: received %zu of %zu bytes (%s)", what, done, len,
			  r < 0 ? strerror(errno) : "end of file");
		crt_check(!(mh.msg_flags & MSG_CTRUNC),
			  "%s: fds came with the plain bytes %zu to %zu (closed by the kernel)",
			  what, done, done + r);
		done += r;
	}
	crt_check(!memcmp(got, data, len), "%s: not the bytes written", what);
}

static void glued_case(bool big)
{
	size_t nbig = big ? (3 << 19) : 100000; /* 1.5 MiB: more than one peek */
	int sv[2], p[2], f, fds[2];
	char *prefix = malloc(nbig + 2), buf[64];

	if (!prefix || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(p))
		crt_fail("setup: %s", strerror(errno));
	if (big && setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &(int){ 8 << 20 }, sizeof(int)))
		crt_skip("SO_SNDBUFFORCE: %s", strerror(errno));
	f = open_file("glued", "0123456789abcdef", O_RDWR, 3);
	for (size_t i = 0; i < nbig; i++)
		prefix[i] = 'a' + i % 23;
	memcpy(prefix + nbig, "gh", 2);
	xwrite(p[1], "in-pipe ");
	/* three writes, then a write with fds */
	xwrite(sv[0], "ab");
	xwrite(sv[0], "cde");
	xwrite(sv[0], "f");
	send_fds(sv[0], "carry", (int[]){ p[1], f }, 2);
	/* after those fds: a large write and a small one, then fds */
	for (size_t done = 0; done < nbig;) {
		ssize_t w = write(sv[0], prefix + done, nbig - done < 65536 ? nbig - done : 65536);

		if (w <= 0)
			crt_fail("write: %s", strerror(errno));
		done += w;
	}
	xwrite(sv[0], "gh");
	send_fds(sv[0], "second", &f, 1);
	/* fds right after fds, then plain bytes at the end */
	send_fds(sv[0], "third", &p[1], 1);
	xwrite(sv[0], "tail");
	close(p[1]);

	crt_ready();
	crt_wait_term();

	read_plain(sv[1], "abcdef", 6, "the three writes before the first fds");
	recv_fds(sv[1], "c", fds, 2, "the first byte of the write with fds");
	xwrite(fds[0], "after");
	expect_read(p[0], "in-pipe after", "the pipe whose write end was in flight");
	crt_check(same_file(fds[1], f), "the file in flight is not the test's own");
	close(fds[0]);
	close(fds[1]);
	recv_fds(sv[1], "arry", fds, 0, "the other bytes of the write with fds");
	read_plain(sv[1], prefix, nbig + 2, "the writes before the second fds");
	recv_fds(sv[1], "s", fds, 1, "the first byte of the second write with fds");
	crt_check(same_file(fds[0], f), "the second file in flight is not the test's own");
	close(fds[0]);
	recv_fds(sv[1], "econd", fds, 0, "the other bytes of the second write with fds");
	recv_fds(sv[1], "t", fds, 1, "the first byte of the third write with fds");
	xwrite(fds[0], "again");
	expect_read(p[0], "again", "the pipe whose write end was in flight, again");
	close(fds[0]);
	recv_fds(sv[1], "hird", fds, 0, "the other bytes of the third write with fds");
	read_plain(sv[1], "tail", 4, "the bytes after the last fds");
	crt_check(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		  "the queue does not end after its bytes");
	free(prefix);
	crt_pass();
}

static void cycle_case(void)
{
	int a[2], b[2], fds[4];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_DGRAM, 0, b))
		crt_fail("socketpair: %s", strerror(errno));
	send_fds(a[0], "self", (int[]){ a[0] }, 1);	/* a0 in a1's queue */
	send_fds(a[0], "b0", (int[]){ b[0] }, 1);	/* b0 in a1's queue */
	send_fds(b[0], "a0", (int[]){ a[0], a[0] }, 2); /* a0 twice in b1's queue */
	send_fds(a[0], "own", (int[]){ a[1] }, 1);	/* a1 in its own queue */
	close(a[0]);
	close(b[0]);

	crt_ready();
	crt_wait_term();

	recv_fds(a[1], "s", fds, 1, "a0's first byte");
	recv_fds(a[1], "elf", fds + 1, 0, "a0's other bytes");
	recv_fds(a[1], "b", fds + 1, 1, "b0's first byte");
	recv_fds(a[1], "0", fds + 2, 0, "b0's other byte");
	recv_fds(b[1], "a0", fds + 2, 2, "a0 twice");
	{
		int own;

		recv_fds(a[1], "o", &own, 1, "a1's own first byte");
		recv_fds(a[1], "wn", fds, 0, "a1's own other bytes");
		crt_check(same_file(own, a[1]), "a1 in its own queue came back as another socket");
		close(own);
	}
	crt_check(same_file(fds[0], fds[2]) && same_file(fds[2], fds[3]),
		  "a0 came back as different descriptions");
	xwrite(fds[0], "x");
	expect_read(a[1], "x", "a0 to a1");
	xwrite(a[1], "y");
	expect_read(fds[0], "y", "a1 to a0");
	send_fds(fds[1], "z", NULL, 0);
	recv_fds(b[1], "z", fds, 0, "b0 to b1");
	crt_pass();
}

static void tree_case(void)
{
	int c[2], p[2], sv[2], pv[2], cf, status;
	pid_t child;

	if (pipe(p) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, c) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, pv))
		crt_fail("setup: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		int fds[2];

		close(p[0]);
		close(c[0]);
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv))
			_exit(2);
		send_fds(sv[0], "parent's", (int[]){ p[1] }, 1);
		close(p[1]);
		/* a file of the child's own, on fd 50, sent to its parent */
		cf = open_file("child", "0123456789", O_RDWR, 3);
		if (dup2(cf, 50) != 50)
			_exit(2);
		close(cf);
		send_fds(c[1], "r", (int[]){ 50 }, 1);
		while (!crt_term)
			pause();
		recv_fds(sv[1], "parent's", fds, 1, "in the child");
		xwrite(fds[0], "from-child");
		crt_check(syscall(SYS_kcmp, getpid(), getppid(), KCMP_FILE, fds[0], p[1]) == 0,
			  "the child's file in flight is not its parent's");
		_exit(0);
	}
	crt_own_child(child);
	close(c[1]);
	/* the child's file goes in flight in the parent's own pair */
	{
		struct pollfd pfd = { c[0], POLLIN, 0 };

		poll(&pfd, 1, 10000);
	}
	recv_fds(c[0], "r", &cf, 1, "the child's file");
	send_fds(pv[0], "child's", &cf, 1);
	close(cf);

	crt_ready();
	crt_wait_term();

	recv_fds(pv[1], "c", &cf, 1, "the child's file in flight in the parent");
	recv_fds(pv[1], "hild's", &status, 0, "the rest");
	crt_check(syscall(SYS_kcmp, getpid(), child, KCMP_FILE, cf, 50) == 0,
		  "the parent's file in flight is not its child's fd 50");
	crt_check(lseek(cf, 0, SEEK_CUR) == 3, "the child's file is at %ld, not 3",
		  (long)lseek(cf, 0, SEEK_CUR));
	kill(child, SIGTERM);
	crt_check(waitpid(child, &status, 0) == child && WIFEXITED(status) && !WEXITSTATUS(status),
		  "child failed (%#x)", status);
	expect_read(p[0], "from-child", "the pipe through the child's file in flight");
	crt_pass();
}

static void nested_case(void)
{
	int a[2], b[2], p[2], x, y;
	char c;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a) || socketpair(AF_UNIX, SOCK_STREAM, 0, b) ||
	    pipe(p))
		crt_fail("setup: %s", strerror(errno));
	send_fds(b[0], "inner", &p[1], 1);
	send_fds(a[0], "outer", &b[1], 1);
	close(p[1]);
	close(b[0]);
	close(b[1]);

	crt_ready();
	crt_wait_term();

	recv_fds(a[1], "outer", &x, 1, "the socket in flight");
	recv_fds(x, "inner", &y, 1, "the socket in flight's own message");
	xwrite(y, "nest");
	expect_read(p[0], "nest", "the pipe in flight in a socket in flight");
	crt_check(read(x, &c, 1) == 0, "the socket in flight does not end (its peer was closed)");
	crt_pass();
}

/* SCM_MAX_FD: 253 fds in one message, copies of one file the test holds */
static void many_case(bool low)
{
	int sv[2], fd = open("/dev/null", O_RDONLY), fds[253];
	struct rlimit rl = { 128, 128 };

	if (fd < 0 || socketpair(AF_UNIX, SOCK_DGRAM, 0, sv))
		crt_fail("setup: %s", strerror(errno));
	for (int i = 0; i < 253; i++)
		fds[i] = fd;
	send_fds(sv[0], "many", fds, 253);
	/* no limit above kupdate's (refused otherwise, before the fds) */
	if (low && setrlimit(RLIMIT_NOFILE, &rl))
		crt_fail("RLIMIT_NOFILE: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	if (low) {
		/* refused: the message and its fds still queued (the test
		 * cannot receive 253 fds under 128 itself) */
		char path[64], *info, buf[8];

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", sv[1]);
		info = crt_read_file(path, NULL);
		crt_check(info && strstr(info, "scm_fds: 253"),
			  "after the refused dump the socket's fdinfo says %s", info);
		crt_check(recv(sv[1], buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT) == 4 &&
				  !memcmp(buf, "many", 4),
			  "after the refused dump the message is not whole");
		crt_pass();
	}
	recv_fds(sv[1], "many", fds, 253, "253 fds");
	for (int i = 0; i < 253; i++)
		crt_check(same_file(fds[i], fd), "fd %d of 253 is not the test's /dev/null", i);
	crt_pass();
}

/* refuse-outside: a stream socket in flight alone, whose peer a process
 * outside the tree holds (an orphaned grandchild, gone when the test's end
 * of a pipe closes) */
static int outside_socket(void)
{
	int x[2], life[2];
	pid_t child;
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, x) || pipe(life))
		crt_fail("setup: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		if (fork() == 0) {
			close(life[1]);
			close(x[0]);
			while (read(life[0], &c, 1) < 0 && errno == EINTR)
				;
			_exit(0);
		}
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(life[0]);
	close(x[1]);
	return x[0];
}

static void refuse_case(const char *what)
{
	int sv[2], fd, got;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		crt_fail("socketpair: %s", strerror(errno));
	if (!strcmp(what, "refuse-udp")) {
		fd = socket(AF_INET, SOCK_DGRAM, 0);
	} else if (!strcmp(what, "refuse-epoll")) {
		fd = epoll_create1(0);
	} else if (!strcmp(what, "refuse-outside")) {
		fd = outside_socket();
	} else {
		fd = open(crt_path("deleted"), O_RDWR | O_CREAT, 0600);
		unlink(crt_path("deleted"));
	}
	if (fd < 0)
		crt_fail("%s: %s", what, strerror(errno));
	send_fds(sv[0], "x", &fd, 1);
	close(fd);

	crt_ready();
	crt_wait_term();

	/* the dump failed and let the tree run: the message is still there */
	recv_fds(sv[1], "x", &got, 1, "after the refused dump");
	crt_pass();
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "stream";

	crt_init();
	if (!strcmp(what, "stream"))
		queue_case(SOCK_STREAM);
	else if (!strcmp(what, "dgram"))
		queue_case(SOCK_DGRAM);
	else if (!strcmp(what, "seqpacket"))
		queue_case(SOCK_SEQPACKET);
	else if (!strcmp(what, "glued") || !strcmp(what, "glued-big"))
		glued_case(!strcmp(what, "glued-big"));
	else if (!strcmp(what, "cycle"))
		cycle_case();
	else if (!strcmp(what, "tree"))
		tree_case();
	else if (!strcmp(what, "nested"))
		nested_case();
	else if (!strcmp(what, "many") || !strcmp(what, "many-low"))
		many_case(!strcmp(what, "many-low"));
	else if (!strncmp(what, "refuse-", 7))
		refuse_case(what);
	crt_fail("unknown case %s", what);
}
