/* An established TCP connection's state as the image records it
 * (InetSk.tcp, a TcpStream), from and to the plain fields of the repair
 * library (tcp-repair.h); and the connection's addresses and ports, as
 * the network lock sees them. */
#include <stdlib.h>
#include <string.h>

#include "cr.h"
#include "tcp-int.h"
#include "tcp.h"
#include "util.h"

int tcp_stream_set(InetSk *s, struct tcp_repair_data *d, int64_t rcv_locked)
{
	TcpStream *t = xzalloc(sizeof(*t));

	if (!t) {
		free(d->outq);
		free(d->inq);
		return -ENOMEM;
	}
	tcp_stream__init(t);
	s->tcp = t;
	t->snd_seq = d->snd_seq;
	t->rcv_seq = d->rcv_seq;
	t->outq = (ProtobufCBinaryData){ d->outq_len, d->outq };
	t->inq = (ProtobufCBinaryData){ d->inq_len, d->inq };
	t->has_outq = d->outq_len > 0;
	t->has_inq = d->inq_len > 0;
	t->has_unsent = 1;
	t->unsent = d->unsent;
	if (rcv_locked >= 0) {
		t->has_rcv_locked = 1;
		t->rcv_locked = (uint32_t)rcv_locked;
	}
	t->mss = d->mss;
	if (d->has_wscale) {
		t->has_snd_wscale = t->has_rcv_wscale = 1;
		t->snd_wscale = d->snd_wscale;
		t->rcv_wscale = d->rcv_wscale;
	}
	t->has_sack = t->has_tstamp = 1;
	t->sack = d->sack;
	t->tstamp = d->tstamp;
	t->has_timestamp = d->has_timestamp;
	t->timestamp = d->timestamp;
	if (d->has_window) {
		t->has_snd_wl1 = t->has_snd_wnd = t->has_max_window = t->has_rcv_wnd =
			t->has_rcv_wup = 1;
		t->snd_wl1 = d->snd_wl1;
		t->snd_wnd = d->snd_wnd;
		t->max_window = d->max_window;
		t->rcv_wnd = d->rcv_wnd;
		t->rcv_wup = d->rcv_wup;
	}
	t->has_nodelay = t->nodelay = d->nodelay;
	t->has_cork = t->cork = d->cork;
	t->has_keepidle = d->has_keepidle;
	t->keepidle = d->keepidle;
	t->has_keepintvl = d->has_keepintvl;
	t->keepintvl = d->keepintvl;
	t->has_keepcnt = d->has_keepcnt;
	t->keepcnt = d->keepcnt;
	t->has_user_timeout = d->has_user_timeout;
	t->user_timeout = d->user_timeout;
	return 0;
}

void tcp_stream_get(const InetSk *s, struct tcp_repair_data *d)
{
	const TcpStream *t = s->tcp;

	*d = (struct tcp_repair_data){
		.state = s->state,
		.snd_seq = t->snd_seq,
		.rcv_seq = t->rcv_seq,
		.outq = t->outq.data,
		.outq_len = t->outq.len,
		.unsent = t->unsent,
		.inq = t->inq.data,
		.inq_len = t->inq.len,
		.mss = t->mss,
		.has_wscale = t->has_snd_wscale,
		.snd_wscale = t->snd_wscale,
		.rcv_wscale = t->rcv_wscale,
		.sack = t->sack,
		.tstamp = t->tstamp,
		.has_timestamp = t->has_timestamp,
		.timestamp = t->timestamp,
		.has_window = t->has_snd_wl1,
		.snd_wl1 = t->snd_wl1,
		.snd_wnd = t->snd_wnd,
		.max_window = t->max_window,
		.rcv_wnd = t->rcv_wnd,
		.rcv_wup = t->rcv_wup,
		.nodelay = t->nodelay,
		.cork = t->cork,
		.has_keepidle = t->has_keepidle,
		.keepidle = t->keepidle,
		.has_keepintvl = t->has_keepintvl,
		.keepintvl = t->keepintvl,
		.has_keepcnt = t->has_keepcnt,
		.keepcnt = t->keepcnt,
		.has_user_timeout = t->has_user_timeout,
		.user_timeout = t->user_timeout,
	};
}

void inet_conn(const InetSk *s, struct cr_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->family = s->family;
	memcpy(c->laddr, s->src_addr.data, MIN(s->src_addr.len, sizeof(c->laddr)));
	memcpy(c->raddr, s->dst_addr.data, MIN(s->dst_addr.len, sizeof(c->raddr)));
	c->lport = s->src_port;
	c->rport = s->dst_port;
}
