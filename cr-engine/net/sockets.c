/* Sockets: what every kind shares.  The socket of a dumped process is
 * reached with pidfd_getfd(2), which gives kupdate its own descriptor of
 * the same socket: options are read with getsockopt, queues are peeked, a
 * TCP connection is put in repair mode, all from here, without running
 * anything inside the process. */
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>

#include "dump.h"
#include "log.h"
#include "sockets.h"
#include "util.h"

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

#ifndef SO_PASSSEC
#define SO_PASSSEC 34
#endif

int sk_dup(struct cr_proc *p, int fd)
{
	int sk;

	if (p->pidfd < 0) {
		p->pidfd = syscall(SYS_pidfd_open, p->pid, 0);
		if (p->pidfd < 0) {
			int ret = -errno;
			pr_perror("pid %d: pidfd_open", p->pid);
			return ret;
		}
	}
	sk = syscall(SYS_pidfd_getfd, p->pidfd, fd, 0);
	if (sk < 0) {
		int ret = -errno;
		pr_perror("pid %d: cannot get hold of its fd %d (pidfd_getfd)", p->pid, fd);
		return ret;
	}
	return sk;
}

static int get_int(int sk, int level, int opt, uint32_t *val)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(sk, level, opt, &v, &len))
		return -errno;
	*val = v;
	return 0;
}

static int get_bool(int sk, int level, int opt, protobuf_c_boolean *has, protobuf_c_boolean *val)
{
	uint32_t v = 0;

	if (get_int(sk, level, opt, &v))
		return 0;
	*has = 1;
	*val = !!v;
	return 0;
}

static void get_timeo(int sk, int opt, protobuf_c_boolean *has, uint64_t *val)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (!getsockopt(sk, SOL_SOCKET, opt, &tv, &len) && (tv.tv_sec || tv.tv_usec)) {
		*has = 1;
		*val = (uint64_t)tv.tv_sec * 1000000 + tv.tv_usec;
	}
}

int sk_opts_dump(int sk, SkOpts *o, int family)
{
	uint32_t v = 0;
	struct linger lg;
	socklen_t len = sizeof(lg);

	sk_opts__init(o);
	if (!get_int(sk, SOL_SOCKET, SO_SNDBUF, &v)) {
		o->has_sndbuf = 1;
		o->sndbuf = v;
	}
	if (!get_int(sk, SOL_SOCKET, SO_RCVBUF, &v)) {
		o->has_rcvbuf = 1;
		o->rcvbuf = v;
	}
	if (!get_int(sk, SOL_SOCKET, SO_BUF_LOCK, &v)) {
		o->has_buf_lock = 1;
		o->buf_lock = v;
	}
	get_bool(sk, SOL_SOCKET, SO_REUSEADDR, &o->has_reuseaddr, &o->reuseaddr);
	get_bool(sk, SOL_SOCKET, SO_REUSEPORT, &o->has_reuseport, &o->reuseport);
	get_bool(sk, SOL_SOCKET, SO_KEEPALIVE, &o->has_keepalive, &o->keepalive);
	get_bool(sk, SOL_SOCKET, SO_BROADCAST, &o->has_broadcast, &o->broadcast);
	get_bool(sk, SOL_SOCKET, SO_OOBINLINE, &o->has_oobinline, &o->oobinline);
	if (family == AF_UNIX) {
		int32_t off = -1;
		socklen_t ol = sizeof(off);

		get_bool(sk, SOL_SOCKET, SO_PASSCRED, &o->has_passcred, &o->passcred);
		get_bool(sk, SOL_SOCKET, SO_PASSSEC, &o->has_passsec, &o->passsec);
		if (!getsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &off, &ol) && off >= 0) {
			o->has_peek_off = 1;
			o->peek_off = off;
		}
	}
	/* even 0: an IP_TOS restored before it sets it too */
	if (!get_int(sk, SOL_SOCKET, SO_PRIORITY, &v)) {
		o->has_priority = 1;
		o->priority = v;
	}
	if (!get_int(sk, SOL_SOCKET, SO_MARK, &v) && v) {
		o->has_mark = 1;
		o->mark = v;
	}
	if (!get_int(sk, SOL_SOCKET, SO_RCVLOWAT, &v) && v != 1) {
		o->has_rcvlowat = 1;
		o->rcvlowat = v;
	}
	get_timeo(sk, SO_RCVTIMEO, &o->has_rcvtimeo_us, &o->rcvtimeo_us);
	get_timeo(sk, SO_SNDTIMEO, &o->has_sndtimeo_us, &o->sndtimeo_us);
	if (!getsockopt(sk, SOL_SOCKET, SO_LINGER, &lg, &len) && lg.l_onoff) {
		o->has_linger_on = o->has_linger = 1;
		o->linger_on = 1;
		o->linger = lg.l_linger;
	}
	return 0;
}

static int set_int(int sk, int level, int opt, int val, const char *name, const char *what)
{
	if (setsockopt(sk, level, opt, &val, sizeof(val))) {
		int ret = -errno;
		pr_perror("%s: cannot set %s", what, name);
		return ret;
	}
	return 0;
}

int sk_opts_restore(int sk, const SkOpts *o, const char *what)
{
	int ret = 0;

	if (!o)
		return 0;
	/* the kernel doubles what it is given */
	if (o->has_sndbuf)
		setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ o->sndbuf / 2 }, sizeof(int));
	if (o->has_rcvbuf)
		setsockopt(sk, SOL_SOCKET, SO_RCVBUFFORCE, &(int){ o->rcvbuf / 2 }, sizeof(int));
	/* setting a size locks it (no more autotuning, and a TCP connection
	 * takes its window's clamp and scale from it): the locks go back to
	 * what the program had chosen.  A kernel without SO_BUF_LOCK keeps
	 * them, as the images of one do not have it. */
	if (o->has_buf_lock &&
	    setsockopt(sk, SOL_SOCKET, SO_BUF_LOCK, &(int){ (int)o->buf_lock }, sizeof(int)))
		pr_debug("%s: SO_BUF_LOCK %u: %s", what, o->buf_lock, strerror(errno));
	if (o->has_reuseaddr && o->reuseaddr)
		ret |= set_int(sk, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR", what);
	if (o->has_reuseport && o->reuseport)
		ret |= set_int(sk, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT", what);
	if (o->has_keepalive && o->keepalive)
		ret |= set_int(sk, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE", what);
	if (o->has_broadcast && o->broadcast)
		ret |= set_int(sk, SOL_SOCKET, SO_BROADCAST, 1, "SO_BROADCAST", what);
	if (o->has_oobinline && o->oobinline)
		ret |= set_int(sk, SOL_SOCKET, SO_OOBINLINE, 1, "SO_OOBINLINE", what);
	if (o->has_passcred && o->passcred)
		ret |= set_int(sk, SOL_SOCKET, SO_PASSCRED, 1, "SO_PASSCRED", what);
	if (o->has_passsec && o->passsec)
		ret |= set_int(sk, SOL_SOCKET, SO_PASSSEC, 1, "SO_PASSSEC", what);
	if (o->has_peek_off)
		ret |= set_int(sk, SOL_SOCKET, SO_PEEK_OFF, o->peek_off, "SO_PEEK_OFF", what);
	if (o->has_priority)
		ret |= set_int(sk, SOL_SOCKET, SO_PRIORITY, o->priority, "SO_PRIORITY", what);
	if (o->has_mark)
		ret |= set_int(sk, SOL_SOCKET, SO_MARK, o->mark, "SO_MARK", what);
	if (o->has_rcvlowat)
		ret |= set_int(sk, SOL_SOCKET, SO_RCVLOWAT, o->rcvlowat, "SO_RCVLOWAT", what);
	if (o->has_rcvtimeo_us || o->has_sndtimeo_us) {
		struct timeval r = { o->rcvtimeo_us / 1000000, o->rcvtimeo_us % 1000000 };
		struct timeval s = { o->sndtimeo_us / 1000000, o->sndtimeo_us % 1000000 };

		if ((o->has_rcvtimeo_us &&
		     setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof(r))) ||
		    (o->has_sndtimeo_us &&
		     setsockopt(sk, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof(s)))) {
			pr_perror("%s: cannot set its timeouts", what);
			ret = -EINVAL;
		}
	}
	if (o->has_linger_on && o->linger_on) {
		struct linger lg = { 1, (int)o->linger };

		if (setsockopt(sk, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))) {
			pr_perror("%s: cannot set SO_LINGER", what);
			ret = -EINVAL;
		}
	}
	return ret ? -EINVAL : 0;
}

int sk_getint(int sk, int level, int opt, int *v)
{
	socklen_t l = sizeof(*v);

	*v = 0;
	return getsockopt(sk, level, opt, v, &l) ? -errno : 0;
}

int sk_setint(int sk, int level, int opt, int v, const char *name, const char *what)
{
	if (setsockopt(sk, level, opt, &v, sizeof(v)))
		return pr_errno("%s: cannot set %s", what, name);
	return 0;
}

/* a unix socket's path name without the NULs after it (getsockname counts
 * one, a bind's length may not) */
static socklen_t addr_len(const struct sockaddr *a, socklen_t len)
{
	const char *p = ((const struct sockaddr_un *)a)->sun_path;
	socklen_t off = offsetof(struct sockaddr_un, sun_path);

	if (a->sa_family == AF_UNIX && len > off && p[0])
		while (len > off && !p[len - off - 1])
			len--;
	return len;
}

int sk_take_listener(struct sk_listeners *l, int type, const struct sockaddr *addr, socklen_t len,
		     const char *what)
{
	len = addr_len(addr, len);
	for (size_t i = 0; l && i < l->n; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int t = 0, acc = 0, fd;

		if (l->used[i] || sk_getint(l->fds[i], SOL_SOCKET, SO_TYPE, &t) || t != type ||
		    sk_getint(l->fds[i], SOL_SOCKET, SO_ACCEPTCONN, &acc) || !acc ||
		    getsockname(l->fds[i], (struct sockaddr *)&ss, &sl) ||
		    addr_len((struct sockaddr *)&ss, sl) != len || memcmp(&ss, addr, len))
			continue;
		fd = fcntl(l->fds[i], F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return pr_errno("%s: cannot take the listener the service manager made",
					what);
		l->used[i] = true;
		pr_info("%s: the listener the service manager made in this boot (socket "
			"activation)",
			what);
		return fd;
	}
	return -ENOENT;
}
