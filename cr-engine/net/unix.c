/* Unix sockets: stream, dgram and seqpacket; bound (path or abstract) or
 * not; socketpairs and accepted connections; listeners with connections
 * not yet accepted; unread data with its message boundaries.
 *
 * Dump: sock_diag gives the name, the peer and the pending connections;
 * the receive queue is read without draining it by peeking with SO_PEEK_OFF
 * (seed 004) on kupdate's own descriptor of the socket.  A socket whose
 * peer is outside the tree (journald's stdout stream, D-Bus) is refused
 * naming the peer, unless the caller asked to replace it
 * (cr_dump_opts.external_unix); a datagram socket connected to a bound one
 * outside (syslog's /dev/log) is connected to its name again, as the peer
 * keeps nothing of it.  File descriptors in flight (SCM_RIGHTS) are
 * received by kupdate at the peek and dumped as files (files.c:
 * files_resolve_inflight); each message keeps their ids.  A socket bound at a path since removed is bound there again
 * and the path removed once every connection to it is made; one whose peer
 * was closed is made as one end of a pair whose other end is closed.
 *
 * Restore (files.c decides who does it): the two ends of a connection in
 * the tree are made with socketpair(2); bound sockets are bound again (a
 * stale socket file left by the dumped process is replaced); sockets
 * connected to a bound one connect to it once every process has created
 * its own; queued data is sent back through the peer, without waiting:
 * what does not fit fails the restore, naming the socket.  A queue that
 * carries fds waits until the files it carries exist (files.c:
 * fill_carriers), then each message is sent with them again. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>

#include "dump.h"
#include "files.h"
#include "log.h"
#include "proc.h"
#include "sockdiag.h"
#include "sockets.h"
#include "unix.h"
#include "unix-int.h"
#include "util.h"

#define PEEK_BUF (1 << 20)

static const char *type_name(int type)
{
	return type == SOCK_STREAM ? "stream" : type == SOCK_DGRAM ? "dgram" : "seqpacket";
}

void unix_describe(const struct sk_diag *d, char *buf, size_t len)
{
	if (!d) {
		snprintf(buf, len, "an unknown socket");
	} else if (d->name_len > 0 && d->name[0]) {
		snprintf(buf, len, "%.*s", d->name_len, d->name);
	} else if (d->name_len > 1) {
		snprintf(buf, len, "@%.*s", d->name_len - 1, d->name + 1);
	} else {
		snprintf(buf, len, "an unnamed socket (inode %u)", d->ino);
	}
}

/* A queue ends with EAGAIN; a seqpacket socket shut for reading ends it
 * with 0 instead, as a record of no bytes does.  Records come with
 * SCM_CREDENTIALS while SO_PASSCRED is on, the end does not: it is set for
 * the peek, then put back.  Zero-length records at an offset are returned
 * once (the kernel marks them peeked, then skips them); the bound below
 * stops a loop on a kernel doing otherwise. */
#define MAX_RECORDS (1 << 20)

static bool has_creds(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
			return true;
	return false;
}

/* File descriptors in flight (SCM_RIGHTS): a peek installs them in
 * kupdate (the kernel takes a new reference of each file, the queue keeps
 * its own).  They are identified once every process is dumped
 * (files_resolve_inflight): a file some fd of the tree holds is that
 * file's id, any other is dumped as a file of its own. */
#define MAX_FDS 253 /* SCM_MAX_FD: per message */

/* the fds a peeked message carries (every SCM_RIGHTS header, in order) */
static int take_fds(struct msghdr *mh, int *fds)
{
	int n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (int j = 0; j < k; j++)
				if (n < MAX_FDS)
					memcpy(&fds[n++], CMSG_DATA(c) + j * sizeof(int),
					       sizeof(int));
				else
					close(*(int *)(CMSG_DATA(c) + j * sizeof(int)));
		}
	return n;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* room for the most fds, credentials and a security context (SO_PASSSEC) */
union peek_ctl {
	char buf[CMSG_SPACE(sizeof(int) * MAX_FDS) + CMSG_SPACE(sizeof(struct ucred)) +
		 CMSG_SPACE(256)];
	struct cmsghdr align;
};

static UnixMsg *add_msg(UnixSk *u, const unsigned char *data, size_t n)
{
	UnixMsg *m = xzalloc(sizeof(*m)), **nq;

	nq = m ? xrealloc_array(u->queue, u->n_queue + 1, sizeof(*nq)) : NULL;
	if (!nq) {
		free(m);
		return NULL;
	}
	u->queue = nq;
	unix_msg__init(m);
	m->data.data = malloc(n ? n : 1);
	if (!m->data.data) {
		free(m);
		return NULL;
	}
	memcpy(m->data.data, data, n);
	m->data.len = n;
	u->queue[u->n_queue++] = m;
	return m;
}

/* The fds a message carries, kept by kupdate until they are identified
 * (the ids are filled in then); closed here if that cannot be. */
static int add_fds(struct cr_dump_ctx *ctx, pid_t pid, int fd, UnixMsg *m, int *fds, int nfds)
{
	struct cr_inflight *ni =
		xrealloc_array(ctx->inflight, ctx->nr_inflight + nfds, sizeof(*ni));

	m->fds = ni ? calloc(nfds, sizeof(*m->fds)) : NULL;
	if (ni)
		ctx->inflight = ni;
	if (!m->fds) {
		close_fds(fds, nfds);
		return -ENOMEM;
	}
	m->n_fds = nfds;
	for (int i = 0; i < nfds; i++)
		ctx->inflight[ctx->nr_inflight++] = (struct cr_inflight){ m, i, fds[i], pid, fd };
	return 0;
}

/* kupdate receives the fds in flight: its soft limit goes up to the hard one */
static void raise_nofile(void)
{
	static bool raised;
	struct rlimit rl;

	if (raised || getrlimit(RLIMIT_NOFILE, &rl))
		return;
	raised = true;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Where the write carrying the fds a stream peek returned starts.  A
 * stream peek glues the bytes of the writes queued before that write to
 * it and returns its fds whatever its length: once the length is used up
 * it goes on, copying nothing, up to the first write with fds (measured
 * on 6.18: a peek of 0, 1, ... bytes at any offset before that write's
 * end returns them).  But it copies each write (each skb) whole or not at
 * all, and a copy that fails stops it before that write's fds.  So a peek
 * at off into n - 1 bytes followed by an unmapped page copies the writes
 * that fit, fails on the one reaching past them, and returns the bytes of
 * the writes before it without fds (EFAULT if it starts at off): those
 * before the write with fds, which ends at off + n.  Unless the full peek
 * filled its len bytes: then that write must be shown to end there (a
 * peek into n bytes and the page returns n with fds).  Returns the count
 * of bytes before that write, the peek offset set after them (after the
 * write if none); fails if the kernel does otherwise. */
static ssize_t stream_fds_start(int sk, size_t off, unsigned char *buf, size_t n, size_t len,
				void **guard)
{
	int32_t o = (int32_t)off;
	ssize_t r;

	if (!*guard) {
		void *g = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (g == MAP_FAILED)
			return -errno;
		*guard = g;
	}
	for (size_t valid = n - 1; valid <= n; valid++) {
		union peek_ctl ctl;
		struct iovec iov[2] = { { buf, valid }, { *guard, 1 } };
		struct msghdr mh = { NULL, 0, iov, 2, ctl.buf, sizeof(ctl.buf), 0 };
		int fds[MAX_FDS], nfds;

		if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &o, sizeof(o)))
			return -errno;
		r = recvmsg(sk, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (r < 0 && errno != EFAULT)
			return -errno;
		if (r < 0) {
			r = 0;
			mh.msg_controllen = 0;
		}
		nfds = take_fds(&mh, fds);
		close_fds(fds, nfds);
		if (valid == n) {
			if ((size_t)r != n || !nfds)
				return -EPROTO;
			r = 0;
			break;
		}
		if (nfds || (size_t)r >= n || (mh.msg_flags & MSG_CTRUNC))
			return -EPROTO;
		if (r || n < len)
			break;
	}
	o = (int32_t)(off + (r ? (size_t)r : n));
	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &o, sizeof(o)))
		return -errno;
	return r;
}

/* A pending error: af_unix sets only ECONNRESET (the peer closed with data
 * of its own unread).  A stream socket reports it at the end of its queue,
 * which is peeked no further than sock_diag's length: it stays.  A
 * datagram one reports it before its queue: it is taken (SO_ERROR) to
 * peek.  The restore makes it again the same way. */
static int peek_error(int sk, pid_t pid, int fd, int type, UnixSk *u)
{
	struct pollfd pfd = { sk, 0, 0 };
	int err = ECONNRESET;
	socklen_t elen = sizeof(err);

	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLERR))
		return 0;
	if (!u->peer_closed || type == SOCK_DGRAM) {
		pr_err("pid %d: fd %d: the unix %s socket has a pending error (its peer "
		       "disconnected), which cannot be made again",
		       pid, fd, type_name(type));
		return -EOPNOTSUPP;
	}
	if (type != SOCK_STREAM)
		getsockopt(sk, SOL_SOCKET, SO_ERROR, &err, &elen);
	u->has_error = 1;
	u->error = err;
	return 0;
}

/* a message whose fds did not all come (MSG_CTRUNC): they are closed */
static int peek_fds_truncated(struct cr_dump_ctx *ctx, pid_t pid, int fd, int type, int *fds,
			      int nfds)
{
	struct rlimit rl = { 0, 0 };

	close_fds(fds, nfds);
	getrlimit(RLIMIT_NOFILE, &rl);
	pr_err("pid %d: fd %d: a message queued on the unix %s socket carries file "
	       "descriptors in flight (SCM_RIGHTS) that kupdate cannot all receive "
	       "to dump them (it holds %d of them already, and its RLIMIT_NOFILE "
	       "is %llu)",
	       pid, fd, type_name(type), ctx->nr_inflight, (unsigned long long)rl.rlim_cur);
	return -EMFILE;
}

/* a record past the most a queue may hold, or larger than the buffer:
 * its fds closed, and why */
static int peek_refused(pid_t pid, int fd, const UnixSk *u, const struct msghdr *mh, int *fds,
			int nfds)
{
	if (u->n_queue >= MAX_RECORDS) {
		close_fds(fds, nfds);
		pr_err("pid %d: fd %d: the unix socket's queue does not end after %d "
		       "records",
		       pid, fd, MAX_RECORDS);
		return -EOVERFLOW;
	}
	if (mh->msg_flags & MSG_TRUNC) {
		close_fds(fds, nfds);
		pr_err("pid %d: fd %d: a queued message is larger than %d bytes", pid, fd,
		       PEEK_BUF);
		return -EMSGSIZE;
	}
	return 0;
}

/* the record: its bytes, fds and (not a stream) sender */
static int peek_record(struct cr_dump_ctx *ctx, pid_t pid, int fd, int type, UnixSk *u,
		       const unsigned char *buf, size_t n, int *fds, int nfds,
		       const struct msghdr *mh, const struct sockaddr_un *from)
{
	UnixMsg *m = add_msg(u, buf, n);
	int ret;

	if (!m) {
		close_fds(fds, nfds);
		return -ENOMEM;
	}
	if (nfds) {
		ret = add_fds(ctx, pid, fd, m, fds, nfds);
		if (ret)
			return ret;
	}
	if (type != SOCK_STREAM && mh->msg_namelen > offsetof(struct sockaddr_un, sun_path)) {
		size_t nl = mh->msg_namelen - offsetof(struct sockaddr_un, sun_path);

		m->has_sender = 1;
		m->sender.data = malloc(nl);
		if (m->sender.data) {
			memcpy(m->sender.data, from->sun_path, nl);
			m->sender.len = nl;
		}
	}
	return 0;
}

/* The receive queue, peeked message by message with SO_PEEK_OFF.  pid and
 * fd name the socket: its holder's, or for a socket itself in flight, the
 * holder of the socket whose queue holds it. */
static int peek_queue(struct cr_dump_ctx *ctx, pid_t pid, int fd, int sk, const struct sk_diag *d,
		      UnixSk *u)
{
	_cleanup_free_ unsigned char *buf = malloc(PEEK_BUF);
	int32_t old_off = -1, zero = 0;
	int old_cred = 0, one = 1, type = d->type;
	socklen_t olen = sizeof(old_off), clen = sizeof(old_cred);
	bool creds = type == SOCK_SEQPACKET && (d->shutdown & 1);
	void *guard = NULL;
	size_t got = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	ret = peek_error(sk, pid, fd, type, u);
	if (ret)
		return ret;
	raise_nofile();
	getsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &old_off, &olen);
	if (setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)))
		return pr_errno(
			"pid %d: fd %d: cannot peek at the unix socket's queue (SO_PEEK_OFF)", pid,
			fd);
	if (creds && (getsockopt(sk, SOL_SOCKET, SO_PASSCRED, &old_cred, &clen) ||
		      setsockopt(sk, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)))) {
		ret = pr_errno("pid %d: fd %d: cannot tell the records of a shut seqpacket socket "
			       "from its end (SO_PASSCRED)",
			       pid, fd);
		goto out;
	}
	for (;;) {
		union peek_ctl ctl;
		struct sockaddr_un from;
		struct iovec iov = { buf, PEEK_BUF };
		struct msghdr mh = { &from, sizeof(from), &iov, 1, ctl.buf, sizeof(ctl.buf), 0 };
		int fds[MAX_FDS], nfds;
		ssize_t n;

		if (type == SOCK_STREAM && u->has_error) {
			if (got >= d->rqlen)
				break; /* what follows is the error */
			iov.iov_len = MIN((size_t)PEEK_BUF, d->rqlen - got);
		}
		n = recvmsg(sk, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n > 0)
			got += n;

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			ret = pr_errno("pid %d: fd %d: cannot peek at the unix socket's queue", pid,
				       fd);
			break;
		}
		nfds = take_fds(&mh, fds);
		if (mh.msg_flags & MSG_CTRUNC) {
			ret = peek_fds_truncated(ctx, pid, fd, type, fds, nfds);
			break;
		}
		if (n == 0 && type == SOCK_STREAM)
			break;
		if (n == 0 && creds && !has_creds(&mh))
			break; /* the end of a shut seqpacket socket's queue */
		ret = peek_refused(pid, fd, u, &mh, fds, nfds);
		if (ret)
			break;
		/* A stream peek glues the bytes of several writes, up to and
		 * including the first one that carries fds (it stops after it),
		 * and shows its fds for every offset before its end.  The bytes
		 * written before that write are a message of their own, without
		 * fds: the restore sends them first, then the fds on the first
		 * byte of that write, as they were; the next peek starts there. */
		if (type == SOCK_STREAM && nfds) {
			ssize_t b = stream_fds_start(sk, got - n, buf, n, iov.iov_len, &guard);

			if (b < 0) {
				close_fds(fds, nfds);
				pr_err("pid %d: fd %d: the unix stream socket's queue carries file "
				       "descriptors in flight (SCM_RIGHTS) whose place among its "
				       "bytes kupdate cannot find (%s): they would come back on "
				       "another byte",
				       pid, fd, strerror((int)-b));
				ret = -EOPNOTSUPP;
				break;
			}
			if (b > 0) {
				close_fds(fds, nfds);
				nfds = 0;
				got -= n - b;
				n = b;
			}
		}
		ret = peek_record(ctx, pid, fd, type, u, buf, n, fds, nfds, &mh, &from);
		if (ret)
			break;
	}
	if (creds)
		setsockopt(sk, SOL_SOCKET, SO_PASSCRED, &old_cred, sizeof(old_cred));
out:
	setsockopt(sk, SOL_SOCKET, SO_PEEK_OFF, &old_off, sizeof(old_off));
	if (guard)
		munmap(guard, 4096);
	return ret;
}

int unix_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct sk_diag *d,
	      struct cr_file *f)
{
	UnixSk *u = xzalloc(sizeof(*u));
	int sk, ret;

	if (!u)
		return -ENOMEM;
	unix_sk__init(u);
	f->usk = u;
	u->ino = d->ino;
	u->type = d->type;
	u->state = d->state;
	if (d->type != SOCK_STREAM && d->type != SOCK_DGRAM && d->type != SOCK_SEQPACKET) {
		pr_err("pid %d: fd %d: unix socket of type %d is not supported", p->pid, fd,
		       d->type);
		return -EOPNOTSUPP;
	}
	if (d->name_len) {
		u->has_name = 1;
		u->name.data = malloc(d->name_len);
		if (!u->name.data)
			return -ENOMEM;
		memcpy(u->name.data, d->name, d->name_len);
		u->name.len = d->name_len;
		if (d->name[0]) {
			struct stat st;
			char path[sizeof(d->name) + 1], rpath[sizeof(path) + 32];
			const char *file;
			int n;

			u->has_vfs_ino = 1;
			u->vfs_ino = d->vfs_ino;
			snprintf(path, sizeof(path), "%.*s", d->name_len, d->name);
			if (unix_through_fd(path, &n, &file)) {
				int err = unix_find_bound_dir(p, fd, path, file, d->vfs_ino, u);

				if (err)
					return err;
				goto named;
			}
			/* seen from the process's root */
			if (path[0] == '/')
				snprintf(rpath, sizeof(rpath), "/proc/%d/root%s", p->pid, path);
			else
				snprintf(rpath, sizeof(rpath), "%s", path);
			/* the socket file's owner and mode, if it is still ours */
			if ((!lstat(rpath, &st) && st.st_ino == d->vfs_ino &&
			     S_ISSOCK(st.st_mode)) ||
			    (path[0] == '/' && d->vfs_ino &&
			     (u->bound_in = unix_bound_in_container(ctx, path, d->vfs_ino, &st)))) {
				u->has_bound_in = u->bound_in != 0;
				if (u->has_bound_in &&
				    (d->type != SOCK_DGRAM || d->peer || d->rqlen)) {
					pr_err("pid %d: fd %d: the unix socket bound at %s in the "
					       "container pid %d made is %s; kupdate binds there "
					       "again only a datagram socket with nothing queued",
					       p->pid, fd, path, u->bound_in,
					       d->type != SOCK_DGRAM ? "no datagram socket"
					       : d->peer	     ? "connected"
								     : "holding datagrams");
					return -EOPNOTSUPP;
				}
				u->has_file_mode = u->has_file_uid = u->has_file_gid = 1;
				u->file_mode = st.st_mode & 07777;
				u->file_uid = st.st_uid;
				u->file_gid = st.st_gid;
			} else if (d->vfs_ino && path[0] == '/' &&
				   (d->type == SOCK_DGRAM || d->state != TCP_ESTABLISHED)) {
				/* bound, then its path unlinked: bound again at the
				 * restore (its name is the path) and unlinked again
				 * once every connection to it is made.  A connected
				 * stream socket's name is its listener's: not bound */
				int err = unix_removed_path(p, fd, path, rpath, u);

				if (err)
					return err;
			}
		}
	}
named:
	if (d->peer) {
		const struct sk_diag *pd = sockdiag_find(&ctx->sk, d->peer);

		u->has_peer = 1;
		u->peer = d->peer;
		if (pd && pd->name_len) {
			u->has_peer_name = 1;
			u->peer_name.data = malloc(pd->name_len);
			if (!u->peer_name.data)
				return -ENOMEM;
			memcpy(u->peer_name.data, pd->name, pd->name_len);
			u->peer_name.len = pd->name_len;
		}
	}
	if (d->shutdown) {
		u->has_shutdown = 1;
		u->shutdown = d->shutdown;
	}
	if (d->state == TCP_LISTEN) {
		u->has_backlog = 1;
		u->backlog = d->wqlen; /* sk_max_ack_backlog for a listener */
		if (d->nr_icons) {
			u->icons = malloc(sizeof(uint32_t) * d->nr_icons);
			if (!u->icons)
				return -ENOMEM;
			memcpy(u->icons, d->icons, sizeof(uint32_t) * d->nr_icons);
			u->n_icons = d->nr_icons;
		}
	}
	sk = sk_dup(p, fd);
	if (sk < 0)
		return sk;
	/* connected to a socket since closed: sock_diag names no peer, but the
	 * socket still has one (a datagram receiver others connect to is
	 * "established" too, without one) */
	if (!d->peer && d->state == TCP_ESTABLISHED) {
		struct sockaddr_un a;
		socklen_t alen = sizeof(a);

		if (!getpeername(sk, (struct sockaddr *)&a, &alen))
			u->has_peer_closed = u->peer_closed = 1;
	}
	u->opts = xzalloc(sizeof(*u->opts));
	ret = u->opts ? sk_opts_dump(sk, u->opts, AF_UNIX) : -ENOMEM;
	/* an unconnected stream socket has no queue (and refuses to be peeked) */
	if (!ret && (d->type == SOCK_DGRAM || d->state == TCP_ESTABLISHED)) {
		/* a socket itself in flight: named by the socket that holds it */
		bool self = p == ctx->self;

		ret = peek_queue(ctx, self ? ctx->via_pid : p->pid, self ? ctx->via_fd : fd, sk, d,
				 u);
	}
	close(sk);
	return ret;
}

static void free_unix_msg(UnixMsg *m)
{
	free(m->data.data);
	free(m->sender.data);
	free(m->fds);
	free(m);
}

void unix_free_dump(UnixSk *u)
{
	if (!u)
		return;
	free(u->name.data);
	free(u->peer_name.data);
	free(u->bound_dir);
	free(u->icons);
	for (size_t i = 0; i < u->n_queue; i++)
		free_unix_msg(u->queue[i]);
	free(u->queue);
	if (u->opts)
		free(u->opts);
	free(u);
}

/* the socket's holder, for messages ("pid %d: fd %d%s"): for one in
 * flight, the holder of the socket whose queue holds it */
#define HOLDER(f)                                                   \
	((f)->inflight_only ? (f)->via_pid : (f)->owner_pid),       \
		((f)->inflight_only ? (f)->via_fd : (f)->owner_fd), \
		((f)->inflight_only ? " (a socket in flight in its queue)" : "")

/* Once every fd of the tree is known: a peer must be in the tree; a client
 * whose connection a listener has not accepted yet (the listener's "icons"
 * are the clients' inodes) connects to it again at restore. */
int unix_check_peers(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_files; i++) {
		struct cr_file *lf = &ctx->files[i];
		UnixSk *l = lf->usk;

		for (size_t c = 0; l && c < l->n_icons; c++) {
			UnixSk *cl = NULL;

			for (int k = 0; k < ctx->nr_files && !cl; k++)
				if (ctx->files[k].usk && ctx->files[k].usk->ino == l->icons[c])
					cl = ctx->files[k].usk;
			if (!cl) {
				pr_err("pid %d: fd %d%s: a process outside the dumped tree waits "
				       "for "
				       "this "
				       "unix listener to accept its connection; it cannot be "
				       "dumped "
				       "(retry once it is accepted)",
				       HOLDER(lf));
				return -EAGAIN;
			}
			if (cl->n_queue || cl->has_peer) {
				pr_err("pid %d: fd %d%s: a connection not yet accepted by this "
				       "unix "
				       "listener carries data, which cannot be dumped",
				       HOLDER(lf));
				return -EOPNOTSUPP;
			}
			cl->has_pending = cl->pending = 1;
			cl->has_peer_name = 1;
			cl->peer_name.data = malloc(l->name.len ? l->name.len : 1);
			if (!cl->peer_name.data)
				return -ENOMEM;
			memcpy(cl->peer_name.data, l->name.data, l->name.len);
			cl->peer_name.len = l->name.len;
		}
	}
	for (int i = 0; i < ctx->nr_files; i++) {
		struct cr_file *f = &ctx->files[i];
		const struct sk_diag *pd;
		UnixSk *u = f->usk;
		bool found = false, dgram_named;
		char who[160];

		if (!u || !u->has_peer)
			continue;
		for (int k = 0; k < ctx->nr_files && !found; k++) {
			const UnixSk *o = ctx->files[k].usk;

			found = o && o->ino == u->peer;
			/* connected to a socket not connected to it: connected by
			 * name at the restore, and only a bound datagram socket's
			 * queue comes back then (from a stand-in sender) */
			if (found && (!o->has_peer || o->peer != u->ino) && u->n_queue &&
			    (u->type != SOCK_DGRAM || !u->has_name || u->name.len < 2)) {
				pr_err("pid %d: fd %d%s: its unix %s socket holds data but was "
				       "connected elsewhere since; the data cannot be put back",
				       HOLDER(f), type_name(u->type));
				return -EOPNOTSUPP;
			}
		}
		if (found)
			continue;
		unix_describe(sockdiag_find(&ctx->sk, u->peer), who, sizeof(who));
		/* the caller may know how to replace it (journald's stdout stream) */
		if (ctx->opts->external_unix && u->has_peer_name && u->type == SOCK_STREAM &&
		    !u->n_queue && !f->inflight_only &&
		    ctx->opts->external_unix(who, ctx->opts->cb_arg)) {
			u->has_external = u->external = 1;
			pr_debug("pid %d: fd %d%s: connected to %s, which will be replaced",
				 HOLDER(f), who);
			continue;
		}
		/* the caller dumps the peer's tree with this one (a link) */
		if (ctx->opts->linked_unix && u->type != SOCK_DGRAM && !f->inflight_only &&
		    ctx->opts->linked_unix(u->ino, u->peer, ctx->opts->cb_arg)) {
			for (size_t q = 0; q < u->n_queue; q++)
				if (u->queue[q]->n_fds) {
					pr_err("pid %d: fd %d%s: its unix %s socket, connected to "
					       "%s in another tree, holds a message that carries "
					       "file descriptors, which cannot cross to that tree",
					       HOLDER(f), type_name(u->type), who);
					return -EOPNOTSUPP;
				}
			u->has_linked = u->linked = 1;
			pr_debug("pid %d: fd %d%s: connected to %s in another tree dumped with it",
				 HOLDER(f), who);
			continue;
		}
		/* a datagram socket connected to a bound one (syslog's /dev/log):
		 * the peer keeps nothing of it, it connects to the name again.
		 * Not if that one is connected itself (to this socket, say): it
		 * would refuse a new one (EPERM) */
		pd = sockdiag_find(&ctx->sk, u->peer);
		dgram_named = u->type == SOCK_DGRAM && u->has_peer_name && u->peer_name.len > 1;
		if (dgram_named && pd && pd->peer) {
			pr_err("pid %d: fd %d%s: its unix dgram socket is connected to %s, outside "
			       "the dumped tree, which is connected to a socket itself; it would "
			       "not take a new connection",
			       HOLDER(f), who);
			return -EOPNOTSUPP;
		}
		if (dgram_named && (!u->n_queue || (u->has_name && u->name.len > 1))) {
			pr_debug("pid %d: fd %d%s: connected to %s, connected again at the restore",
				 HOLDER(f), who);
			continue;
		}
		if (dgram_named) { /* with datagrams queued and no name of its own */
			pr_err("pid %d: fd %d%s: its unix dgram socket, connected to %s outside "
			       "the "
			       "dumped tree, holds datagrams but has no name to receive them "
			       "again",
			       HOLDER(f), who);
			return -EOPNOTSUPP;
		}
		pr_err("pid %d: fd %d%s: its unix %s socket is connected to %s, outside the dumped "
		       "tree; such a connection cannot be restored",
		       HOLDER(f), type_name(u->type), who);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* ------------------------------------------------------------- restore */

static void addr_str(const ProtobufCBinaryData *name, char *buf, size_t len)
{
	if (name->len && name->data[0])
		snprintf(buf, len, "%.*s", (int)name->len, (char *)name->data);
	else if (name->len > 1)
		snprintf(buf, len, "@%.*s", (int)name->len - 1, (char *)name->data + 1);
	else
		snprintf(buf, len, "(unnamed)");
}

int unix_validate(const FileEntry *e)
{
	const UnixSk *u = e->usk;

	if (!u || (u->type != SOCK_STREAM && u->type != SOCK_DGRAM && u->type != SOCK_SEQPACKET) ||
	    u->name.len > sizeof(((struct sockaddr_un *)0)->sun_path) ||
	    (u->state != TCP_ESTABLISHED && u->state != TCP_LISTEN && u->state != TCP_CLOSE &&
	     u->state != TCP_SYN_SENT)) {
		pr_err("image files.img is damaged: unix socket %u is invalid", e->id);
		return -EINVAL;
	}
	return 0;
}

/* Bind to the saved name; a socket file left behind by the dumped process
 * (the same inode, or any socket file nobody listens on) is replaced. */
/* a socket file no socket is bound to any more (a connect is refused) */
static bool stale_socket_file(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	bool stale;

	if (sk < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	stale = connect(sk, (struct sockaddr *)&a, sizeof(a)) && errno == ECONNREFUSED;
	close(sk);
	return stale;
}

static int do_bind(int sk, const UnixSk *u, const char *what)
{
	struct sockaddr_un a;
	socklen_t len = unix_make_addr(&a, &u->name);
	char name[120];

	if (u->bound_dir)
		return unix_bind_through_fd(sk, u, what);
	/* in a container's mount namespace: once it exists (unix_bind_late) */
	if (u->has_bound_in)
		return 0;
	addr_str(&u->name, name, sizeof(name));
	if (bind(sk, (struct sockaddr *)&a, len) == 0)
		goto bound;
	/* removed since: whatever is at the path now is someone else's,
	 * unless a socket file nobody is bound to (a failed restore's) */
	if (errno == EADDRINUSE && u->name.data[0]) {
		struct stat st;

		if (!lstat(a.sun_path, &st) && S_ISSOCK(st.st_mode) &&
		    (!u->removed || stale_socket_file(a.sun_path))) {
			unlink(a.sun_path);
			if (bind(sk, (struct sockaddr *)&a, len) == 0)
				goto bound;
		}
	}
	{
		int ret = -errno;
		pr_perror("%s: cannot bind the unix socket to %s", what, name);
		return ret;
	}
bound:
	if (u->has_file_mode && u->name.data[0] &&
	    (chown(a.sun_path, u->file_uid, u->file_gid) || chmod(a.sun_path, u->file_mode))) {
		int ret = -errno;
		pr_perror("%s: cannot give %s its owner and mode", what, name);
		return ret;
	}
	return 0;
}

/* Put data into the receive queue of the socket whose peer is "via".
 * Nothing waits: via's send buffer is made large enough for the whole
 * queue (its own size comes back with its options), and a queue the
 * receiver does not take (a datagram receiver takes max_dgram_qlen
 * records from a sender it is not connected to) fails, naming it.  A
 * message that carried fds (SCM_RIGHTS) carries the restored files again,
 * on its first byte; res finds them. */
static int send_queue(int via, const UnixSk *u, const char *what, const struct unix_fds *res)
{
	uint64_t need = 65536;

	for (size_t i = 0; i < u->n_queue; i++)
		need += u->queue[i]->data.len + 1024; /* and the kernel's share of each */
	setsockopt(via, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ (int)MIN(need, INT_MAX / 2) },
		   sizeof(int));
	for (size_t i = 0; i < u->n_queue; i++) {
		const UnixMsg *m = u->queue[i];
		union {
			char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
			struct cmsghdr align;
		} ctl;
		size_t done = 0;
		bool fds = m->n_fds > 0;

		if (fds) {
			struct cmsghdr *c = &ctl.align;

			if (!res || m->n_fds > MAX_FDS) {
				pr_err("%s: a queued message carries %zu file descriptors, which "
				       "cannot be sent again here",
				       what, m->n_fds);
				return -EINVAL;
			}
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * m->n_fds);
			for (size_t k = 0; k < m->n_fds; k++) {
				int fd = res->fd_of(res->arg, m->fds[k]);

				if (fd < 0) {
					pr_err("%s: file %u, in flight in its queued message %zu, "
					       "was not made",
					       what, m->fds[k], i);
					return -EINVAL;
				}
				memcpy(CMSG_DATA(c) + k * sizeof(int), &fd, sizeof(int));
			}
		}
		do {
			struct iovec iov = { m->data.data + done, m->data.len - done };
			struct msghdr mh = { NULL,
					     0,
					     &iov,
					     1,
					     fds ? ctl.buf : NULL,
					     fds ? CMSG_SPACE(sizeof(int) * m->n_fds) : 0,
					     0 };
			ssize_t n = sendmsg(via, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n < 0) {
				int ret = -errno;

				if (ret == -EAGAIN)
					pr_err("%s: its receive queue took %zu of its %zu queued "
					       "records back and no more (full)",
					       what, i, u->n_queue);
				else
					pr_err("%s: cannot put %zu queued bytes back%s: %s", what,
					       m->data.len, fds ? " with the files they carry" : "",
					       strerror(-ret));
				return ret;
			}
			done += n;
			fds = false; /* on the first byte only */
		} while (done < m->data.len && u->type == SOCK_STREAM);
		if (done != m->data.len) {
			pr_err("%s: a queued record of %zu bytes went back as %zu", what,
			       m->data.len, done);
			return -EIO;
		}
	}
	return 0;
}

static int finish_sk(int sk, const UnixSk *u, const char *what)
{
	int ret = sk_opts_restore(sk, u->opts, what);

	if (!ret && u->has_shutdown && u->shutdown) {
		int how = (u->shutdown & 3) == 3 ? SHUT_RDWR
			  : (u->shutdown & 2)	 ? SHUT_WR
						 : SHUT_RD;

		if (shutdown(sk, how) && errno != ENOTCONN)
			ret = pr_errno("%s: cannot shut the unix socket down", what);
	}
	return ret;
}

/* Make dirs of path under root, as far as its last slash. */
static int mkdirs(const char *root, const char *path)
{
	char p[PATH_MAX];

	for (const char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(p, sizeof(p), "%s%.*s", root, (int)(s - path), path);
		if (mkdir(p, 0700) && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static void rmdirs(const char *root, const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s%s", root, path);
	unlink(p);
	for (char *s = strrchr(p + strlen(root), '/'); s && s > p + strlen(root);
	     s = strrchr(p + strlen(root), '/')) {
		*s = 0;
		rmdir(p);
	}
	rmdir(root);
}

/* In the helper: a listener at name, under its own root (the name is
 * only the string given to bind: the file goes to the helper's root),
 * one connection to it, its two ends sent back; never returns. */
static void __attribute__((noreturn))
named_pair_helper(int type, const char *root, const char *name, int back)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, type, 0), c = socket(AF_UNIX, type, 0), s;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { "", 1 };
	struct msghdr mh = { NULL, 0, &iov, 1, ctl.buf, sizeof(ctl.buf), 0 };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memcpy(a.sun_path, name, strnlen(name, sizeof(a.sun_path)));
	if (l < 0 || c < 0 || chroot(root) || chdir("/") ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    connect(c, (struct sockaddr *)&a, sizeof(a)))
		_exit(1);
	s = accept(l, NULL, NULL);
	if (s < 0)
		_exit(1);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(cm), (int[]){ s, c }, 2 * sizeof(int));
	_exit(sendmsg(back, &mh, 0) == 1 ? 0 : 1);
}

/* A connection made by connect and accept through a listener at a path:
 * the accepted end's name, the client's peer name, are that path.  Made
 * the same way, by a helper whose root is a directory of its own, so
 * that neither the path nor a listener restored there is touched.  The
 * helper takes a pid: restored processes take theirs with clone3's
 * set_tid, which a pid taken meanwhile does not disturb. */
static int named_pair(int type, const ProtobufCBinaryData *name, int *named, int *other,
		      const char *what)
{
	char root[] = "/tmp/kupdate-unix.XXXXXX",
	     path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { NULL, 0, &iov, 1, ctl.buf, sizeof(ctl.buf), 0 };
	struct cmsghdr *cm;
	int sv[2], ret = -EIO, st;
	pid_t pid;

	snprintf(path, sizeof(path), "%.*s", (int)name->len, (char *)name->data);
	if (!mkdtemp(root))
		return -errno;
	ret = mkdirs(root, path);
	if (ret || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		ret = ret ?: -errno;
		rmdirs(root, path);
		return ret;
	}
	pid = fork();
	if (pid == 0)
		named_pair_helper(type, root, path, sv[1]);
	close(sv[1]);
	if (pid > 0) {
		struct pollfd pfd = { sv[0], POLLIN, 0 };

		/* a few local system calls: 5 s is plenty */
		if (poll(&pfd, 1, 5000) == 1 && recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC) == 1 &&
		    (cm = CMSG_FIRSTHDR(&mh)) && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
			memcpy(named, CMSG_DATA(cm), sizeof(int));
			memcpy(other, CMSG_DATA(cm) + sizeof(int), sizeof(int));
			ret = 0;
		} else {
			pr_err("%s: the helper making a connection named %s did not answer in 5 s",
			       what, path);
			kill(pid, SIGKILL);
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	} else {
		ret = -errno;
	}
	close(sv[0]);
	rmdirs(root, path);
	return ret;
}

/* a stream or seqpacket end named as a listener at a path names it */
static bool accepted_name(const UnixSk *u)
{
	return u->type != SOCK_DGRAM && u->has_name && u->name.len > 1 && u->name.data[0] == '/';
}

/* The two ends of a connection: sv[0] for a, sv[1] for b (the same
 * type); through a listener named as an accepted end was, else a pair.  A
 * helper that cannot do it costs the names, not the restore. */
static int make_pair(const UnixSk *a, const UnixSk *b, int sv[2], const char *what)
{
	int ret = 0;

	if (accepted_name(a) || (b && accepted_name(b))) {
		bool an = accepted_name(a);

		ret = named_pair(a->type, an ? &a->name : &b->name, &sv[an ? 0 : 1],
				 &sv[an ? 1 : 0], what);
		if (!ret)
			return 0;
		pr_warn("%s: cannot make a connection through a listener again (%s): it is "
			"made without its names",
			what, strerror(-ret));
	}
	if (socketpair(AF_UNIX, a->type | SOCK_CLOEXEC, 0, sv))
		return pr_errno("%s: cannot create a unix socket pair", what);
	return 0;
}

int unix_create_pair(const UnixSk *a, const UnixSk *b, int *fa, int *fb, const char *what,
		     bool defer)
{
	int sv[2], ret = make_pair(a, b, sv, what);

	if (ret)
		return ret;
	/* two datagram sockets connected to each other may have names of their
	 * own (a stream one's is its listener's, if it was accepted) */
	ret = a->type == SOCK_DGRAM && a->has_name && a->name.len ? do_bind(sv[0], a, what) : 0;
	if (!ret && b->type == SOCK_DGRAM && b->has_name && b->name.len)
		ret = do_bind(sv[1], b, what);
	if (!ret && !defer)
		ret = unix_fill_pair(sv[0], sv[1], a, b, what, NULL);
	if (ret) {
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	*fa = sv[0];
	*fb = sv[1];
	return 0;
}

int unix_fill_pair(int fa, int fb, const UnixSk *a, const UnixSk *b, const char *what,
		   const struct unix_fds *res)
{
	/* data first, then options (a small buffer would not take it) */
	int ret = send_queue(fb, a, what, res);

	if (!ret)
		ret = send_queue(fa, b, what, res);
	if (!ret)
		ret = finish_sk(fa, a, what);
	if (!ret)
		ret = finish_sk(fb, b, what);
	return ret;
}

/* A connected socket whose peer was closed: made as one end of a pair,
 * its queue sent through the other end, which is then closed: a stream or
 * seqpacket socket is then shut both ways (reads end after the data,
 * writes fail with EPIPE), a datagram one is left connected to a closed
 * socket, as it was. */
static int orphan_fill(int sk, int via, const UnixSk *u, const char *what,
		       const struct unix_fds *res)
{
	int ret = send_queue(via, u, what, res);

	/* closed with data of its own unread, the peer leaves ECONNRESET */
	if (!ret && u->has_error && u->error == ECONNRESET &&
	    send(sk, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		ret = pr_errno("%s: cannot make its pending error again", what);
	}
	close(via);
	if (!ret)
		ret = finish_sk(sk, u, what);
	return ret;
}

/* deferred: the other end comes back in *via, for unix_fill */
static int create_orphan(const UnixSk *u, const char *what, int *via)
{
	int sv[2], ret;

	ret = make_pair(u, NULL, sv, what);
	if (ret)
		return ret;
	if (via) {
		*via = sv[1];
		return sv[0];
	}
	ret = orphan_fill(sv[0], sv[1], u, what, NULL);
	if (ret) {
		close(sv[0]);
		return ret;
	}
	return sv[0];
}

/* The same for a bound datagram socket (its queue came back from a
 * stand-in): connected to a socket closed at once. */
static int connect_closed(int sk, const char *what)
{
	struct sockaddr_un a;
	socklen_t len = sizeof(a);
	int tmp = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	/* an autobound name (bind with the family alone) to connect to */
	if (tmp < 0 ||
	    bind(tmp, (struct sockaddr *)&(sa_family_t){ AF_UNIX }, sizeof(sa_family_t)) ||
	    getsockname(tmp, (struct sockaddr *)&a, &len) ||
	    connect(sk, (struct sockaddr *)&a, len)) {
		ret = pr_errno("%s: cannot connect the unix socket to a closed peer", what);
	}
	if (tmp >= 0)
		close(tmp);
	return ret;
}

static bool peer_closed(const UnixSk *u)
{
	return u->peer_closed && !u->has_peer && !u->pending && !u->external && !u->linked;
}

/* Queued datagrams of a bound receiver come back from a stand-in sender,
 * before it connects to its peer if it has one; then its options. */
static int bound_fill(int sk, const UnixSk *u, const char *what, const struct unix_fds *res)
{
	int ret = 0;

	if (u->n_queue && u->type == SOCK_DGRAM && u->has_name && u->name.len) {
		int tmp = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un a;
		socklen_t len = unix_make_addr(&a, &u->name);

		if (tmp < 0 || connect(tmp, (struct sockaddr *)&a, len)) {
			ret = pr_errno("%s: cannot refill the datagram queue", what);
		} else {
			ret = send_queue(tmp, u, what, res);
		}
		if (tmp >= 0)
			close(tmp);
	} else if (u->n_queue) {
		pr_err("%s: queued data without a sender to send it again", what);
		ret = -EOPNOTSUPP;
	}
	if (!ret && u->type == SOCK_DGRAM && peer_closed(u))
		ret = connect_closed(sk, what);
	if (!ret)
		ret = sk_opts_restore(sk, u->opts, what);
	return ret;
}

int unix_create(const UnixSk *u, struct sk_listeners *l, const char *what, int *via)
{
	int sk, ret = 0;

	if (via)
		*via = -1;
	/* an accepted socket's name is its listener's: not one to bind */
	if (peer_closed(u) && (u->type != SOCK_DGRAM || !u->has_name || u->name.len < 2))
		return create_orphan(u, what, via);
	/* a listener the service manager made in this boot (socket activation) */
	if (u->state == TCP_LISTEN && u->has_name && u->name.len) {
		struct sockaddr_un a;
		socklen_t len = unix_make_addr(&a, &u->name);

		sk = sk_take_listener(l, u->type, (struct sockaddr *)&a, len, what);
		if (sk >= 0 && listen(sk, u->has_backlog ? (int)u->backlog : 128)) {
			ret = pr_errno("%s: cannot listen", what);
			close(sk);
			return ret;
		}
		if (sk >= 0 || sk != -ENOENT)
			return sk;
	}
	sk = socket(AF_UNIX, u->type | SOCK_CLOEXEC, 0);
	if (sk < 0)
		return pr_errno("%s: cannot create a unix socket", what);
	if (u->has_name && u->name.len)
		ret = do_bind(sk, u, what);
	if (!ret && u->state == TCP_LISTEN && listen(sk, u->has_backlog ? (int)u->backlog : 128))
		ret = pr_errno("%s: cannot listen", what);
	if (!ret && !via)
		ret = bound_fill(sk, u, what, NULL);
	if (ret) {
		close(sk);
		return ret;
	}
	return sk;
}

int unix_fill(int sk, int via, const UnixSk *u, const char *what, const struct unix_fds *res)
{
	if (via >= 0)
		return orphan_fill(sk, via, u, what, res);
	return bound_fill(sk, u, what, res);
}

int unix_bind_late(int sk, const UnixSk *u, const char *what)
{
	struct sockaddr_un a, got;
	socklen_t len = unix_make_addr(&a, &u->name), glen = sizeof(got);

	/* bound by the process that built the container's mounts */
	if (getsockname(sk, (struct sockaddr *)&got, &glen) || glen != len ||
	    memcmp(&got, &a, len)) {
		pr_err("%s: the unix socket was not bound at %s in the container pid %d made", what,
		       a.sun_path, u->bound_in);
		return -EIO;
	}
	return 0;
}

int unix_connect_late(int sk, const UnixSk *u, const char *what)
{
	struct sockaddr_un a;
	socklen_t len;
	char name[120];
	int fl, ret;

	if (!u->has_peer_name || !u->peer_name.len) {
		pr_err("%s: its peer has no name to connect to again", what);
		return -EOPNOTSUPP;
	}
	len = unix_make_addr(&a, &u->peer_name);
	addr_str(&u->peer_name, name, sizeof(name));
	/* not waiting: a listener whose backlog is full (somaxconn lowered
	 * since the dump) says EAGAIN */
	fl = fcntl(sk, F_GETFL);
	ret = fl < 0 || fcntl(sk, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
	if (!ret && connect(sk, (struct sockaddr *)&a, len))
		ret = -errno;
	if (fl >= 0)
		fcntl(sk, F_SETFL, fl);
	if (ret == -EAGAIN) {
		pr_err("%s: cannot connect again to %s: its backlog is full", what, name);
		return ret;
	}
	if (ret) {
		pr_err("%s: cannot connect again to %s: %s", what, name, strerror(-ret));
		return ret;
	}
	/* a bound datagram socket has its queue back already (unix_create) */
	if (u->n_queue && (u->type != SOCK_DGRAM || !u->has_name || u->name.len < 2)) {
		pr_err("%s: data queued on a socket connected to %s cannot be put back", what,
		       name);
		return -EOPNOTSUPP;
	}
	return finish_sk(sk, u, what);
}

void unix_unlink_removed(const UnixSk *u, bool failed)
{
	struct sockaddr_un a;
	struct stat st;

	if (!u->removed || !u->has_name || u->name.len < 2 || !u->name.data[0])
		return;
	unix_make_addr(&a, &u->name);
	if (!lstat(a.sun_path, &st) && S_ISSOCK(st.st_mode) &&
	    (!failed || stale_socket_file(a.sun_path)) && unlink(a.sun_path))
		pr_warn("cannot remove %s again: %s", a.sun_path, strerror(errno));
}
