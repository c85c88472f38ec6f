// SPDX-License-Identifier: GPL-2.0
/*
 * SO_PEEK_OFF on unix sockets: MSG_PEEK reads at the peek offset and moves
 * it, without draining the queue (stream: bytes; dgram: whole datagrams).
 */
#include "ktap.h"
#include "util.h"
#include <sys/socket.h>

static int peek_off(int fd)
{
	int off = -2;
	socklen_t len = sizeof(off);

	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, &len))
		return -errno - 1000;
	return off;
}

static int set_peek_off(int fd, int off)
{
	return setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
}

static int got(int fd, int flags, size_t len, const char *want)
{
	char buf[64];
	ssize_t n = recv(fd, buf, len, flags | MSG_DONTWAIT);

	return n == (ssize_t)strlen(want) && !memcmp(buf, want, n);
}

int main(void)
{
	int sv[2];

	ktap_plan(9);

	/* stream */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		ktap_bail("socketpair stream");
	ktap_ok(peek_off(sv[1]) == -1, "stream: SO_PEEK_OFF is -1 (off) by default");
	if (send(sv[0], "abcdefgh", 8, 0) != 8)
		ktap_bail("send");
	ktap_ok(!set_peek_off(sv[1], 0) && peek_off(sv[1]) == 0, "stream: SO_PEEK_OFF set to 0");
	ktap_ok(got(sv[1], MSG_PEEK, 3, "abc") && got(sv[1], MSG_PEEK, 3, "def"),
		"stream: two peeks of 3 bytes give abc then def");
	ktap_ok(peek_off(sv[1]) == 6, "stream: peek offset moved to 6 (%d)", peek_off(sv[1]));
	ktap_ok(got(sv[1], 0, 64, "abcdefgh") && peek_off(sv[1]) == 0,
		"stream: the queue was not drained by the peeks; offset back to 0 after reading");
	close(sv[0]);
	close(sv[1]);

	/* datagram */
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv))
		ktap_bail("socketpair dgram");
	if (send(sv[0], "one", 3, 0) != 3 || send(sv[0], "two!", 4, 0) != 4 ||
	    send(sv[0], "three", 5, 0) != 5)
		ktap_bail("send dgram");
	ktap_ok(!set_peek_off(sv[1], 0), "dgram: SO_PEEK_OFF set to 0");
	ktap_ok(got(sv[1], MSG_PEEK, 64, "one") && got(sv[1], MSG_PEEK, 64, "two!") &&
			got(sv[1], MSG_PEEK, 64, "three"),
		"dgram: successive peeks walk the queue datagram by datagram");
	ktap_ok(peek_off(sv[1]) == 12, "dgram: peek offset is the sum of the peeked lengths (%d)",
		peek_off(sv[1]));
	ktap_ok(got(sv[1], 0, 64, "one") && got(sv[1], 0, 64, "two!") && got(sv[1], 0, 64, "three"),
		"dgram: all datagrams still queued, in order");

	return ktap_finish();
}
