/* TCP repair (tcp-repair.h): a connection saved from a socket in repair
 * mode and restored into a fresh one.
 *
 * Saved: the sequence numbers after each queue (TCP_QUEUE_SEQ), the send
 * queue (unacknowledged and unsent) and the receive queue (unread), both
 * peeked in repair mode, the MSS, window scaling, SACK, timestamps
 * (TCP_TIMESTAMP, so the peer sees them go on), the window
 * (TCP_REPAIR_WINDOW), and TCP_NODELAY, TCP_CORK, the keepalive options and
 * TCP_USER_TIMEOUT.  Restored: the same, in repair mode, but the unsent
 * part of the send queue, sent the ordinary way once out of repair mode
 * (tcp_repair_send_unsent).  A socket in repair mode sends nothing, and
 * closes without a FIN or a RST. */
#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "log.h"
#include "tcp-repair.h"

#ifndef TCPOPT_MSS
#define TCPOPT_MSS	 2
#define TCPOPT_WINDOW	 3
#define TCPOPT_SACK_PERM 4
#define TCPOPT_TIMESTAMP 8
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef TCP_REPAIR_ON
#define TCP_REPAIR_ON  1
#define TCP_REPAIR_OFF 0
#endif
#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif

struct tcp_repair {
	struct tcp_repair_data d;
	bool owns_queues; /* saved (freed with it), not imported */
};

bool tcp_fin_sent_state(int s)
{
	return s == TCP_FIN_WAIT1 || s == TCP_FIN_WAIT2 || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

bool tcp_fin_received_state(int s)
{
	return s == TCP_CLOSE_WAIT || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

bool tcp_repair_state(int s)
{
	return s == TCP_ESTABLISHED || tcp_fin_sent_state(s) || tcp_fin_received_state(s);
}

static int getint(int sk, int level, int opt, uint32_t *v)
{
	int val = 0;
	socklen_t l = sizeof(val);

	if (getsockopt(sk, level, opt, &val, &l))
		return -errno;
	*v = val;
	return 0;
}

static int setint(int sk, int level, int opt, int val, const char *name, const char *what)
{
	if (setsockopt(sk, level, opt, &val, sizeof(val))) {
		int ret = -errno;
		pr_perror("%s: cannot set %s", what, name);
		return ret;
	}
	return 0;
}

/* ------------------------------------------------------- repair mode */

int tcp_repair_on(int sk, const char *what)
{
	int on = TCP_REPAIR_ON;

	if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &on, sizeof(on))) {
		int ret = -errno;
		pr_perror("%s: cannot put the connection in repair mode (needs CAP_NET_ADMIN)",
			  what);
		return ret;
	}
	return 0;
}

/* out once, with a window probe or without one where the kernel knows
 * TCP_REPAIR_OFF_NO_WP (before, the probe goes out) */
static int repair_off_once(int sk, bool probe, const char *what)
{
	int v = probe ? TCP_REPAIR_OFF : TCP_REPAIR_OFF_NO_WP;
	int ret = setsockopt(sk, SOL_TCP, TCP_REPAIR, &v, sizeof(v));

	if (ret && !probe && errno == EINVAL) {
		v = TCP_REPAIR_OFF;
		ret = setsockopt(sk, SOL_TCP, TCP_REPAIR, &v, sizeof(v));
	}
	if (ret)
		return pr_errno("%s: cannot leave repair mode", what);
	return 0;
}

int tcp_repair_off(int sk, int probes, const char *what)
{
	int ret = repair_off_once(sk, probes > 0, what), on = TCP_REPAIR_ON;

	for (int i = 1; i < probes && !ret; i++) {
		if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &on, sizeof(on)))
			break;
		ret = repair_off_once(sk, true, what);
	}
	return ret;
}

int tcp_repair_reuseaddr(int sk, bool reuseaddr, const char *what)
{
	if (reuseaddr && setsockopt(sk, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int))) {
		int ret = -errno;
		pr_perror("%s: cannot set SO_REUSEADDR again", what);
		return ret;
	}
	return 0;
}

int tcp_repair_last_ack(int sk, uint32_t *rcv_wup)
{
	struct tcp_repair_window w;
	socklen_t l = sizeof(w);

	if (getsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, &l))
		return -errno;
	*rcv_wup = w.rcv_wup;
	return 0;
}

/* -------------------------------------------------------------- save */

/* peek a whole queue selected with TCP_REPAIR_QUEUE */
static int peek_queue(int sk, int queue, uint32_t len, uint32_t *seq, uint8_t **out,
		      uint32_t *out_len)
{
	ssize_t n;

	if (setsockopt(sk, SOL_TCP, TCP_REPAIR_QUEUE, &queue, sizeof(queue)) ||
	    getint(sk, SOL_TCP, TCP_QUEUE_SEQ, seq))
		return -errno;
	if (!len)
		return 0;
	*out = malloc(len);
	if (!*out)
		return -ENOMEM;
	n = recv(sk, *out, len, MSG_PEEK | MSG_DONTWAIT);
	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	*out_len = len;
	return 0;
}

static int save_queues(int sk, struct tcp_repair_data *d, const char *what)
{
	bool fin_out = tcp_fin_sent_state(d->state);
	int outq = 0, unsent = 0, inq = 0, ret;

	if (ioctl(sk, SIOCOUTQ, &outq) || ioctl(sk, SIOCOUTQNSD, &unsent) ||
	    ioctl(sk, SIOCINQ, &inq)) {
		ret = pr_errno("%s: cannot read the queue lengths", what);
		return ret;
	}
	/* the FIN it sent is the last sequence number of its send queue, in
	 * the queue lengths while unacknowledged (outq) or unsent (unsent),
	 * but no byte of the queue: outq and unsent count the bytes only */
	if (fin_out && outq > 0)
		outq--;
	if (fin_out && unsent > 0)
		unsent--;
	ret = peek_queue(sk, TCP_SEND_QUEUE, outq, &d->snd_seq, &d->outq, &d->outq_len);
	if (!ret)
		ret = peek_queue(sk, TCP_RECV_QUEUE, inq, &d->rcv_seq, &d->inq, &d->inq_len);
	if (ret) {
		pr_err("%s: cannot read its queues in repair mode: %s", what, strerror(-ret));
		return ret;
	}
	d->unsent = unsent;
	return 0;
}

/* TCP_NODELAY, TCP_CORK, the keepalive options, TCP_USER_TIMEOUT */
static void save_sockopts(int sk, struct tcp_repair_data *d)
{
	uint32_t v = 0;

	if (!getint(sk, SOL_TCP, TCP_NODELAY, &v) && v)
		d->nodelay = true;
	if (!getint(sk, SOL_TCP, TCP_CORK, &v) && v)
		d->cork = true;
	if (!getint(sk, SOL_TCP, TCP_KEEPIDLE, &v)) {
		d->has_keepidle = true;
		d->keepidle = v;
	}
	if (!getint(sk, SOL_TCP, TCP_KEEPINTVL, &v)) {
		d->has_keepintvl = true;
		d->keepintvl = v;
	}
	if (!getint(sk, SOL_TCP, TCP_KEEPCNT, &v)) {
		d->has_keepcnt = true;
		d->keepcnt = v;
	}
	if (!getint(sk, SOL_TCP, TCP_USER_TIMEOUT, &v) && v) {
		d->has_user_timeout = true;
		d->user_timeout = v;
	}
}

static int save_data(int sk, struct tcp_repair_data *d, const char *what)
{
	struct tcp_info ti;
	struct tcp_repair_window w;
	socklen_t l = sizeof(ti);
	uint32_t v = 0;
	int ret;

	if (getsockopt(sk, SOL_TCP, TCP_INFO, &ti, &l))
		return pr_errno("%s: cannot read TCP_INFO", what);
	ret = save_queues(sk, d, what);
	if (ret)
		return ret;
	if (getint(sk, SOL_TCP, TCP_MAXSEG, &d->mss))
		return pr_errno("%s: cannot read its MSS", what);
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		d->has_wscale = true;
		d->snd_wscale = ti.tcpi_snd_wscale;
		d->rcv_wscale = ti.tcpi_rcv_wscale;
	}
	d->sack = !!(ti.tcpi_options & TCPI_OPT_SACK);
	d->tstamp = !!(ti.tcpi_options & TCPI_OPT_TIMESTAMPS);
	if (!getint(sk, SOL_TCP, TCP_TIMESTAMP, &v)) {
		d->has_timestamp = true;
		d->timestamp = v;
	}
	l = sizeof(w);
	if (!getsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, &l)) {
		d->has_window = true;
		d->snd_wl1 = w.snd_wl1;
		d->snd_wnd = w.snd_wnd;
		d->max_window = w.max_window;
		d->rcv_wnd = w.rcv_wnd;
		d->rcv_wup = w.rcv_wup;
	}
	save_sockopts(sk, d);
	return 0;
}

int tcp_repair_save(int sk, int state, struct tcp_repair **out, const char *what)
{
	struct tcp_repair *c = calloc(1, sizeof(*c));
	int ret;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->owns_queues = true;
	c->d.state = state;
	ret = save_data(sk, &c->d, what);
	if (ret) {
		tcp_repair_free(c);
		return ret;
	}
	*out = c;
	return 0;
}

void tcp_repair_export(struct tcp_repair *c, struct tcp_repair_data *d)
{
	*d = c->d;
	c->owns_queues = false;
	tcp_repair_free(c);
}

struct tcp_repair *tcp_repair_import(const struct tcp_repair_data *d)
{
	struct tcp_repair *c = calloc(1, sizeof(*c));

	if (c)
		c->d = *d;
	return c;
}

void tcp_repair_free(struct tcp_repair *c)
{
	if (!c)
		return;
	if (c->owns_queues) {
		free(c->d.outq);
		free(c->d.inq);
	}
	free(c);
}

/* ----------------------------------------------------------- restore */

static int fill_queue(int sk, int queue, const uint8_t *data, size_t len, const char *what)
{
	if (setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, queue, "TCP_REPAIR_QUEUE", what))
		return -EINVAL;
	while (len) {
		ssize_t n = send(sk, data, len, MSG_NOSIGNAL);

		if (n <= 0) {
			int ret = n < 0 ? -errno : -EIO;
			pr_err("%s: cannot put %zu bytes back into its %s queue: %s", what, len,
			       queue == TCP_SEND_QUEUE ? "send" : "receive", strerror(-ret));
			return ret;
		}
		data += n;
		len -= n;
	}
	return 0;
}

/* A closing connection is rebuilt established, without its FINs: the
 * sequence numbers after its last byte of data each way. */
static uint32_t snd_data_end(const struct tcp_repair_data *d)
{
	return d->snd_seq - tcp_fin_sent_state(d->state);
}

static uint32_t rcv_data_end(const struct tcp_repair_data *d)
{
	return d->rcv_seq - tcp_fin_received_state(d->state);
}

static int restore_seqs(int sk, const struct tcp_repair_data *d, const char *what)
{
	size_t sent_len = d->outq_len - d->unsent;

	if (setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "TCP_REPAIR_QUEUE", what) ||
	    setint(sk, SOL_TCP, TCP_QUEUE_SEQ, snd_data_end(d) - d->unsent - sent_len,
		   "send sequence", what) ||
	    setint(sk, SOL_TCP, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "TCP_REPAIR_QUEUE", what) ||
	    setint(sk, SOL_TCP, TCP_QUEUE_SEQ, rcv_data_end(d) - d->inq_len, "receive sequence",
		   what))
		return -EINVAL;
	return 0;
}

static int restore_options(int sk, const struct tcp_repair_data *d, const char *what)
{
	struct tcp_repair_opt opts[4];
	int n = 0;

	opts[n].opt_code = TCPOPT_MSS;
	opts[n++].opt_val = d->mss;
	/* A connection without window scaling gets scales of 0: without them
	 * it would keep the receive scale its repair-mode connect chose, and
	 * shift every window it offers by it (a peer that does not scale,
	 * such as QEMU's user network, saw half the window) */
	opts[n].opt_code = TCPOPT_WINDOW;
	opts[n++].opt_val = d->has_wscale ? d->snd_wscale | (d->rcv_wscale << 16) : 0;
	if (d->sack) {
		opts[n].opt_code = TCPOPT_SACK_PERM;
		opts[n++].opt_val = 0;
	}
	if (d->tstamp) {
		opts[n].opt_code = TCPOPT_TIMESTAMP;
		opts[n++].opt_val = 0;
	}
	if (setsockopt(sk, SOL_TCP, TCP_REPAIR_OPTIONS, opts, n * sizeof(opts[0]))) {
		int ret = -errno;
		pr_perror("%s: cannot set its TCP options", what);
		return ret;
	}
	if (d->has_timestamp &&
	    setint(sk, SOL_TCP, TCP_TIMESTAMP, d->timestamp, "TCP_TIMESTAMP", what))
		return -EINVAL;
	return 0;
}

static int restore_window(int sk, const struct tcp_repair_data *d, const char *what)
{
	struct tcp_repair_window w = { d->snd_wl1, d->snd_wnd, d->max_window, d->rcv_wnd,
				       d->rcv_wup };
	uint32_t rcv_end = rcv_data_end(d);

	if (!d->has_window)
		return 0;
	/* the window the peer's FIN was acknowledged with ends where it
	 * ended, from the sequence number before the FIN (the kernel takes no
	 * rcv_wup past rcv_nxt) */
	if ((int32_t)(w.rcv_wup - rcv_end) > 0) {
		w.rcv_wnd += w.rcv_wup - rcv_end;
		w.rcv_wup = rcv_end;
	}
	if (setsockopt(sk, SOL_TCP, TCP_REPAIR_WINDOW, &w, sizeof(w))) {
		int ret = -errno;
		pr_perror("%s: cannot set its window", what);
		return ret;
	}
	return 0;
}

static int restore_sockopts(int sk, const struct tcp_repair_data *d, const char *what)
{
	if ((d->nodelay && setint(sk, SOL_TCP, TCP_NODELAY, 1, "TCP_NODELAY", what)) ||
	    (d->cork && setint(sk, SOL_TCP, TCP_CORK, 1, "TCP_CORK", what)) ||
	    (d->has_keepidle &&
	     setint(sk, SOL_TCP, TCP_KEEPIDLE, d->keepidle, "TCP_KEEPIDLE", what)) ||
	    (d->has_keepintvl &&
	     setint(sk, SOL_TCP, TCP_KEEPINTVL, d->keepintvl, "TCP_KEEPINTVL", what)) ||
	    (d->has_keepcnt && setint(sk, SOL_TCP, TCP_KEEPCNT, d->keepcnt, "TCP_KEEPCNT", what)) ||
	    (d->has_user_timeout &&
	     setint(sk, SOL_TCP, TCP_USER_TIMEOUT, d->user_timeout, "TCP_USER_TIMEOUT", what)))
		return -EINVAL;
	return 0;
}

int tcp_repair_restore(int sk, const struct tcp_repair *c, const struct sockaddr *self,
		       socklen_t self_len, const struct sockaddr *peer, socklen_t peer_len,
		       const char *what)
{
	const struct tcp_repair_data *d = &c->d;
	int ret = restore_seqs(sk, d, what);

	if (ret)
		return ret;
	if (bind(sk, self, self_len))
		return pr_errno("%s: cannot bind", what);
	if (connect(sk, peer, peer_len))
		return pr_errno("%s: cannot connect in repair mode", what);
	ret = restore_options(sk, d, what);
	if (ret)
		return ret;
	if (fill_queue(sk, TCP_SEND_QUEUE, d->outq, d->outq_len - d->unsent, what) ||
	    fill_queue(sk, TCP_RECV_QUEUE, d->inq, d->inq_len, what))
		return -EIO;
	ret = restore_window(sk, d, what);
	if (!ret)
		ret = restore_sockopts(sk, d, what);
	return ret;
}

/* The part of the send queue never sent goes out the ordinary way.  The
 * part put back in repair mode was cut into segments of one MSS each, which
 * take more of the send buffer than the queue took when it was saved: a
 * full buffer has no room left for the rest (EAGAIN), and waiting for the
 * peer's acknowledgements could take as long as it keeps its window shut.
 * The buffer is made large enough for as long as the rest is queued, and
 * then given back its size and lock (further sends wait until the queue
 * drains). */
int tcp_repair_send_unsent(int sk, const uint8_t *p, size_t left, int buf_lock, const char *what)
{
	int size = 0;
	socklen_t sl = sizeof(size);
	bool raised = false;
	int ret = 0;

	while (left) {
		ssize_t n = send(sk, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN && !raised &&
		    !getsockopt(sk, SOL_SOCKET, SO_SNDBUF, &size, &sl)) {
			/* the kernel doubles what it is given */
			long want = (long)size + 2 * (long)left + 65536;

			if (want > INT_MAX)
				want = INT_MAX;
			if (!setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ (int)want },
					sizeof(int))) {
				raised = true;
				continue;
			}
		}
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			pr_err("%s: cannot send the %zu bytes it had not sent yet: %s", what, left,
			       strerror(-ret));
			break;
		}
		p += n;
		left -= n;
	}
	if (raised) {
		setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ size / 2 }, sizeof(int));
		/* which locked the size: the program's lock as it was (a buffer
		 * the kernel tuned goes on being tuned) */
		if (buf_lock >= 0)
			setsockopt(sk, SOL_SOCKET, SO_BUF_LOCK, &buf_lock, sizeof(buf_lock));
	}
	return ret ? -EIO : 0;
}
