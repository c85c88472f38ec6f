// SPDX-License-Identifier: GPL-2.0
/*
 * TCP_REPAIR: read a connection's queue sequence numbers and queued data,
 * close it in repair mode (nothing is sent: no FIN, no RST), and rebuild it
 * in a new socket (sequence numbers set, options, timestamp, window, queue)
 * that then talks to the unsuspecting peer in the same guest.
 */
#include "ktap.h"
#include "util.h"
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#define OPT_MAXSEG    2
#define OPT_WINDOW    3
#define OPT_SACK_PERM 4
#define OPT_TIMESTAMP 8

static int setopt(int fd, int opt, int val)
{
	return setsockopt(fd, IPPROTO_TCP, opt, &val, sizeof(val));
}

static int getopt_u32(int fd, int opt, unsigned int *val)
{
	socklen_t len = sizeof(*val);

	return getsockopt(fd, IPPROTO_TCP, opt, val, &len);
}

static int queue_seq(int fd, int queue, unsigned int *seq)
{
	if (setopt(fd, TCP_REPAIR_QUEUE, queue))
		return -1;
	return getopt_u32(fd, TCP_QUEUE_SEQ, seq);
}

/* "Tcp:" counter from /proc/net/snmp, by name */
static long snmp_tcp(const char *name)
{
	char buf[8192], *names, *vals, *sn, *sv, *n, *v;

	if (read_file("/proc/net/snmp", buf, sizeof(buf)) <= 0)
		return -1;
	names = strstr(buf, "\nTcp: ");
	if (!names)
		return -1;
	vals = strstr(names + 1, "\nTcp: ");
	if (!vals)
		return -1;
	*strchr(names + 1, '\n') = '\0';
	n = strtok_r(names + 6, " ", &sn);
	v = strtok_r(vals + 6, " \n", &sv);
	while (n && v) {
		if (!strcmp(n, name))
			return strtol(v, NULL, 10);
		n = strtok_r(NULL, " ", &sn);
		v = strtok_r(NULL, " \n", &sv);
	}
	return -1;
}

static int recv_exact(int fd, char *buf, size_t len, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, timeout_ms) != 1)
			return -1;
		n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (n <= 0)
			return -1;
		got += n;
	}
	return 0;
}

struct dump {
	struct sockaddr_in local, peer;
	unsigned int snd_seq, rcv_seq, mss, ts;
	int inq, outq;
	char inq_data[64], outq_data[64];
	struct tcp_info info;
	struct tcp_repair_window win;
};

int main(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr), len;
	unsigned int c_snd, c_rcv, seq;
	struct tcp_repair_opt opts[4];
	int l, c, s, n, one = 1, nopt = 0, ok;
	long segs, rsts;
	struct dump d;
	char buf[64];

	ktap_plan(12);
	memset(&d, 0, sizeof(d));

	/* A connection over loopback with some history and 5 unread bytes at s */
	l = socket(AF_INET, SOCK_STREAM, 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || c < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (void *)&addr, sizeof(addr)) || listen(l, 1) ||
	    getsockname(l, (void *)&addr, &alen) || connect(c, (void *)&addr, sizeof(addr)))
		ktap_bail("loopback connection (is lo up?)");
	s = accept(l, NULL, NULL);
	if (s < 0 || send(s, "world!", 6, 0) != 6 || recv_exact(c, buf, 6, 2000) ||
	    send(c, "hello", 5, 0) != 5)
		ktap_bail("exchange");
	usleep(100 * 1000); /* let "hello" arrive and be acked */

	/* ---- dump s ---- */
	ktap_ok(setopt(s, TCP_REPAIR, TCP_REPAIR_ON) == 0, "TCP_REPAIR on (%s)", strerror(errno));
	ok = !queue_seq(s, TCP_RECV_QUEUE, &d.rcv_seq) && !queue_seq(s, TCP_SEND_QUEUE, &d.snd_seq);
	ktap_ok(ok, "TCP_QUEUE_SEQ read for the receive and send queues (%u, %u)", d.rcv_seq,
		d.snd_seq);

	/* the peer's view, read in repair mode and left without a window probe */
	if (setopt(c, TCP_REPAIR, TCP_REPAIR_ON) || queue_seq(c, TCP_RECV_QUEUE, &c_rcv) ||
	    queue_seq(c, TCP_SEND_QUEUE, &c_snd) || setopt(c, TCP_REPAIR_QUEUE, TCP_NO_QUEUE) ||
	    setopt(c, TCP_REPAIR, TCP_REPAIR_OFF_NO_WP))
		ktap_bail("peer sequence numbers");
	ktap_ok(d.rcv_seq == c_snd && d.snd_seq == c_rcv,
		"sequence numbers match the peer's (rcv %u = peer snd %u, snd %u = peer rcv %u)",
		d.rcv_seq, c_snd, d.snd_seq, c_rcv);

	if (ioctl(s, SIOCINQ, &d.inq) || ioctl(s, SIOCOUTQ, &d.outq))
		ktap_bail("SIOCINQ/SIOCOUTQ");
	if (setopt(s, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE))
		ktap_bail("TCP_REPAIR_QUEUE");
	ktap_ok(d.inq == 5 && recv(s, d.inq_data, sizeof(d.inq_data), MSG_PEEK) == 5 &&
			!memcmp(d.inq_data, "hello", 5),
		"receive queue peeked in repair mode (%d bytes)", d.inq);
	if (d.outq > (int)sizeof(d.outq_data) || setopt(s, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE) ||
	    (d.outq && recv(s, d.outq_data, d.outq, MSG_PEEK) != d.outq))
		ktap_bail("send queue");

	alen = sizeof(d.local);
	getsockname(s, (void *)&d.local, &alen);
	alen = sizeof(d.peer);
	getpeername(s, (void *)&d.peer, &alen);
	len = sizeof(d.info);
	if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &d.info, &len) ||
	    getopt_u32(s, TCP_MAXSEG, &d.mss) || getopt_u32(s, TCP_TIMESTAMP, &d.ts))
		ktap_bail("TCP_INFO/TCP_MAXSEG/TCP_TIMESTAMP");
	len = sizeof(d.win);
	ok = !getsockopt(s, IPPROTO_TCP, TCP_REPAIR_WINDOW, &d.win, &len) && d.win.snd_wnd &&
	     d.win.rcv_wnd;
	ktap_ok(ok, "TCP_REPAIR_WINDOW read (snd_wnd %u rcv_wnd %u)", d.win.snd_wnd, d.win.rcv_wnd);

	/* ---- close in repair mode: nothing goes out ---- */
	segs = snmp_tcp("OutSegs");
	rsts = snmp_tcp("OutRsts");
	close(s);
	{
		struct pollfd p = { .fd = c, .events = POLLIN | POLLRDHUP };
		struct tcp_info ci;

		int quiet = poll(&p, 1, 500) == 0;
		long segs2 = snmp_tcp("OutSegs"), rsts2 = snmp_tcp("OutRsts");

		len = sizeof(ci);
		ok = quiet && segs >= 0 && segs2 == segs && rsts2 == rsts &&
		     !getsockopt(c, IPPROTO_TCP, TCP_INFO, &ci, &len) &&
		     ci.tcpi_state == 1 /* TCP_ESTABLISHED */;
		ktap_ok(ok,
			"close in repair mode sends nothing (OutSegs %ld->%ld, OutRsts %ld->%ld), "
			"peer still established",
			segs, segs2, rsts, rsts2);
	}

	/* ---- restore into a new socket ---- */
	n = socket(AF_INET, SOCK_STREAM, 0);
	if (n < 0 || setopt(n, TCP_REPAIR, TCP_REPAIR_ON))
		ktap_bail("new socket");
	ktap_ok(!setopt(n, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE) &&
			!setopt(n, TCP_QUEUE_SEQ, d.snd_seq - d.outq) &&
			!setopt(n, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE) &&
			!setopt(n, TCP_QUEUE_SEQ, d.rcv_seq - d.inq),
		"TCP_QUEUE_SEQ set on a new socket");
	/* no SO_REUSEADDR: it would undo the forced reuse that repair mode sets */
	if (bind(n, (void *)&d.local, sizeof(d.local)))
		ktap_bail("bind to the old address");
	ktap_ok(connect(n, (void *)&d.peer, sizeof(d.peer)) == 0,
		"connect in repair mode (no handshake) (%s)", strerror(errno));

	opts[nopt].opt_code = OPT_MAXSEG;
	opts[nopt++].opt_val = d.mss;
	if (d.info.tcpi_options & TCPI_OPT_WSCALE) {
		opts[nopt].opt_code = OPT_WINDOW;
		opts[nopt++].opt_val = d.info.tcpi_snd_wscale | (d.info.tcpi_rcv_wscale << 16);
	}
	if (d.info.tcpi_options & TCPI_OPT_TIMESTAMPS) {
		opts[nopt].opt_code = OPT_TIMESTAMP;
		opts[nopt++].opt_val = 0;
	}
	if (d.info.tcpi_options & TCPI_OPT_SACK) {
		opts[nopt].opt_code = OPT_SACK_PERM;
		opts[nopt++].opt_val = 0;
	}
	if (setsockopt(n, IPPROTO_TCP, TCP_REPAIR_OPTIONS, opts, nopt * sizeof(opts[0])) ||
	    setopt(n, TCP_TIMESTAMP, d.ts))
		ktap_bail("TCP_REPAIR_OPTIONS/TCP_TIMESTAMP");

	{
		unsigned int rs = 0, ss = 0;

		queue_seq(n, TCP_RECV_QUEUE, &rs);
		queue_seq(n, TCP_SEND_QUEUE, &ss);
		ktap_ok(rs == d.rcv_seq - d.inq && ss == d.snd_seq - d.outq,
			"TCP_QUEUE_SEQ reads back what was set (%u, %u)", rs, ss);
	}

	/* queues: the unread bytes go back into the receive queue */
	if (setopt(n, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE) || send(n, d.inq_data, d.inq, 0) != d.inq ||
	    setopt(n, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE) ||
	    (d.outq && send(n, d.outq_data, d.outq, 0) != d.outq) ||
	    setopt(n, TCP_REPAIR_QUEUE, TCP_NO_QUEUE))
		ktap_bail("restore queues");
	if (setsockopt(n, IPPROTO_TCP, TCP_REPAIR_WINDOW, &d.win, sizeof(d.win)))
		ktap_bail("TCP_REPAIR_WINDOW");
	if (!queue_seq(n, TCP_RECV_QUEUE, &seq))
		ktap_info("receive sequence after queue restore: %u", seq);
	if (setopt(n, TCP_REPAIR_QUEUE, TCP_NO_QUEUE) || setopt(n, TCP_REPAIR, TCP_REPAIR_OFF))
		ktap_bail("TCP_REPAIR off");

	ktap_ok(!recv_exact(n, buf, 5, 2000) && !memcmp(buf, "hello", 5),
		"restored socket reads the restored receive queue");
	ktap_ok(send(c, "ping", 4, 0) == 4 && !recv_exact(n, buf, 4, 3000) &&
			!memcmp(buf, "ping", 4),
		"peer -> restored socket: data arrives");
	ktap_ok(send(n, "pong", 4, 0) == 4 && !recv_exact(c, buf, 4, 3000) &&
			!memcmp(buf, "pong", 4),
		"restored socket -> peer: data arrives");

	close(n);
	close(c);
	close(l);
	return ktap_finish();
}
