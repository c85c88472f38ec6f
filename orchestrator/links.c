/* Unix connections between trees restored apart (links.h): a database
 * unit and a client unit connected over its socket are restored by two
 * restores, each in its own unit, in no order known beforehand.
 *
 * Each connection (link) has a key, its two sockets' inodes "LO-HI", and
 * meets in a rendezvous directory: under the lock KEY.lock the first
 * restore to come makes the connection from the two image directories
 * (cr_unix_link_pair), keeps its end and gives the other to a holder, a
 * child of its own listening at KEY.sock; the second connects there, asks
 * for its socket by inode and receives it (SCM_RIGHTS, from a process of
 * the same user only).  Neither waits for the other's restore to begin: a
 * unit ordered after the other (a client After= its database) restores
 * once that one has.  The holder ends when each end it holds is taken, or
 * after LINK_HOLD_S: an end left then is closed, and its peer sees the
 * connection end, as when a peer's process dies. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "links.h"
#include "units.h"

#define LOCK_WAIT_MS 30000 /* another restore making or taking the same link */
#define ANSWER_MS    10000 /* a holder's answer: a few local system calls */

/* what the holder is handed: the end for the restore of socket taker,
 * to be given at path */
struct hand {
	uint32_t taker;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lock[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
};

struct held {
	struct hand h;
	int listener, end;
};

static int send_fd(int sk, const void *buf, size_t len, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { NULL, 0, &iov, 1, ctl.b, sizeof(ctl.b), 0 };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sk, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* a message of len bytes with one fd, within ms: 0 or -errno */
static int recv_fd(int sk, void *buf, size_t len, int *fd, int ms)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr mh = { NULL, 0, &iov, 1, ctl.b, sizeof(ctl.b), 0 };
	struct pollfd p = { sk, POLLIN, 0 };
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	if (poll(&p, 1, ms) != 1)
		return -ETIMEDOUT;
	n = recvmsg(sk, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	if ((size_t)n != len || *fd < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return n == 0 ? -ECONNRESET : -EPROTO;
	}
	return 0;
}

static socklen_t un_addr(struct sockaddr_un *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof(a->sun_path), "%s", path);
	return sizeof(*a);
}

/* ------------------------------------------------------------ holder */

/* a new end to hold: listening at its path; the answer is 0 or an errno */
static void holder_take(int ctl, struct held **v, size_t *n)
{
	struct hand h;
	struct sockaddr_un a;
	struct held *m;
	int end, l = -1, err = 0;

	if (recv_fd(ctl, &h, sizeof(h), &end, ANSWER_MS))
		_exit(1);
	h.path[sizeof(h.path) - 1] = h.lock[sizeof(h.lock) - 1] = 0;
	unlink(h.path); /* a holder's of an earlier attempt: the lock is ours */
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, un_addr(&a, h.path)) || chmod(h.path, 0600) ||
	    listen(l, 4))
		err = errno;
	m = err ? NULL : realloc(*v, (*n + 1) * sizeof(**v));
	if (!err && !m)
		err = ENOMEM;
	if (err) {
		if (l >= 0)
			close(l);
		close(end);
	} else {
		*v = m;
		m[(*n)++] = (struct held){ h, l, end };
	}
	if (write(ctl, &(int){ err }, sizeof(int)) != sizeof(int))
		_exit(1);
}

/* a restore asks at a listener: its end, if it is of our user and names
 * the socket the end is for */
static void holder_serve(struct held *e)
{
	int c = accept4(e->listener, NULL, NULL, SOCK_CLOEXEC);
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct pollfd p = { c, POLLIN, 0 };
	uint32_t ino;

	if (c < 0)
		return;
	if (!getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) && cr.uid == geteuid() &&
	    poll(&p, 1, ANSWER_MS) == 1 && read(c, &ino, sizeof(ino)) == sizeof(ino) &&
	    ino == e->h.taker && !send_fd(c, &ino, sizeof(ino), e->end)) {
		close(e->end);
		e->end = -1;
		close(e->listener);
		e->listener = -1;
		unlink(e->h.path);
		unlink(e->h.lock);
	}
	close(c);
}

static void __attribute__((noreturn)) holder_main(int ctl)
{
	struct held *v = NULL;
	size_t n = 0;
	int64_t end = now_ns(CLOCK_MONOTONIC) + (int64_t)LINK_HOLD_S * 1000000000;

	for (;;) {
		struct pollfd p[65];
		size_t np = 0, open = 0;
		int64_t left = (end - now_ns(CLOCK_MONOTONIC)) / 1000000;

		if (ctl >= 0)
			p[np++] = (struct pollfd){ ctl, POLLIN, 0 };
		for (size_t i = 0; i < n && np < ARRAY_SIZE(p); i++)
			if (v[i].end >= 0) {
				p[np++] = (struct pollfd){ v[i].listener, POLLIN, 0 };
				open++;
			}
		if ((ctl < 0 && !open) || left <= 0)
			break;
		if (poll(p, np, (int)left) <= 0)
			continue;
		if (ctl >= 0 && p[0].revents) {
			char c;

			if (recv(ctl, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
				holder_take(ctl, &v, &n);
			} else {
				close(ctl);
				ctl = -1;
			}
			continue;
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].end >= 0) {
				struct pollfd q = { v[i].listener, POLLIN, 0 };

				if (poll(&q, 1, 0) == 1)
					holder_serve(&v[i]);
			}
	}
	for (size_t i = 0; i < n; i++)
		if (v[i].end >= 0) {
			fprintf(stderr,
				"kupdate: the restore of unix socket %u did not take its end of "
				"the connection in %d s: closed (its peer sees the connection "
				"end)\n",
				v[i].h.taker, LINK_HOLD_S);
			unlink(v[i].h.path);
			unlink(v[i].h.lock);
		}
	_exit(0);
}

struct holder {
	pid_t pid;
	int ctl;
};

/* the holder, its pid none the restores need (the trees' ids) */
static int holder_start(struct holder *h, const pid_t *ids, size_t nids)
{
	int sv[2];
	pid_t p;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return pr_errno("cannot make a socket to hand connections over");
	p = fork_free_pid(ids, nids);
	if (p == 0) {
		/* nothing of the restore's: a link's lock held open here would
		 * stay taken */
		if (dup2(sv[1], 3) != 3)
			_exit(1);
		syscall(SYS_close_range, 4, ~0U, 0);
		prctl(PR_SET_NAME, "kupdate-link");
		signal(SIGPIPE, SIG_IGN);
		holder_main(3);
	}
	close(sv[1]);
	if (p < 0) {
		close(sv[0]);
		pr_err("cannot fork a holder of the connections made whose pid is free of the "
		       "restores': %s",
		       strerror((int)-p));
		return (int)p;
	}
	h->pid = p;
	h->ctl = sv[0];
	return 0;
}

/* ------------------------------------------------------------ gather */

/* the lock of a link, within LOCK_WAIT_MS: its fd, or -errno */
static int lock_link(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return pr_errno("cannot open the lock %s", path);
	for (int ms = 0; flock(fd, LOCK_EX | LOCK_NB); ms += 10) {
		if (errno != EWOULDBLOCK || ms >= LOCK_WAIT_MS) {
			int ret = errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;

			pr_err("cannot take the lock %s in %d s: %s", path, LOCK_WAIT_MS / 1000,
			       strerror(-ret));
			close(fd);
			return ret;
		}
		usleep(10000);
	}
	return fd;
}

/* the end of socket ino from the holder listening at path: its fd,
 * -ENOENT if none listens there, or another -errno */
static int take_end(const char *path, uint32_t ino)
{
	struct sockaddr_un a;
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), fd, ret;
	uint32_t back;

	if (sk < 0)
		return -errno;
	if (connect(sk, (struct sockaddr *)&a, un_addr(&a, path))) {
		ret = errno == ENOENT || errno == ECONNREFUSED ? -ENOENT : -errno;
		close(sk);
		return ret;
	}
	ret = write_all(sk, &ino, sizeof(ino));
	if (!ret)
		ret = recv_fd(sk, &back, sizeof(back), &fd, ANSWER_MS);
	close(sk);
	if (!ret && back != ino) {
		close(fd);
		ret = -EPROTO;
	}
	if (ret) {
		pr_err("the holder at %s did not give the end of unix socket %u: %s", path, ino,
		       strerror(-ret));
		return ret;
	}
	return fd;
}

/* the other end of a connection made here, to the holder (started now if
 * it is not yet) */
static int hand_over(struct holder *h, const pid_t *ids, size_t nids, int end, uint32_t taker,
		     const char *path, const char *lock)
{
	struct hand m = { .taker = taker };
	struct pollfd p;
	int ret = 0, err;

	if (!h->pid)
		ret = holder_start(h, ids, nids);
	if (ret)
		return ret;
	snprintf(m.path, sizeof(m.path), "%s", path);
	snprintf(m.lock, sizeof(m.lock), "%s", lock);
	ret = send_fd(h->ctl, &m, sizeof(m), end);
	p = (struct pollfd){ h->ctl, POLLIN, 0 };
	if (!ret && (poll(&p, 1, ANSWER_MS) != 1 || read(h->ctl, &err, sizeof(err)) != sizeof(err)))
		ret = -ETIMEDOUT;
	if (!ret && err)
		ret = -err;
	if (ret)
		pr_err("the holder cannot offer the connection's other end at %s: %s", path,
		       strerror(-ret));
	return ret;
}

/* the links of the peer directory holding link l's other end, or NULL */
struct peer_links {
	const char *dir;
	struct cr_unix_link *l;
	size_t n;
	bool used;
};

static struct peer_links *find_peer(struct peer_links *p, size_t np, const struct cr_unix_link *l)
{
	for (size_t i = 0; i < np; i++)
		for (size_t k = 0; k < p[i].n; k++)
			if (p[i].l[k].ino == l->peer && p[i].l[k].peer == l->ino)
				return &p[i];
	return NULL;
}

/* one link: its end taken or made, under its lock */
static int gather_one(const char *imgdir, const char *rdv, struct cr_unix_link *l,
		      const char *peer_dir, struct holder *h, const pid_t *ids, size_t nids)
{
	uint32_t lo = MIN(l->ino, l->peer), hi = MAX(l->ino, l->peer);
	_cleanup_free_ char *lock = xasprintf("%s/%u-%u.lock", rdv, lo, hi);
	_cleanup_free_ char *sock = xasprintf("%s/%u-%u.sock", rdv, lo, hi);
	int lfd, other = -1, ret;

	if (!lock || !sock)
		return -ENOMEM;
	if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		pr_err("the rendezvous directory %s is too long a path for a socket", rdv);
		return -ENAMETOOLONG;
	}
	lfd = lock_link(lock);
	if (lfd < 0)
		return lfd;
	ret = take_end(sock, l->ino);
	if (ret >= 0) {
		l->fd = ret;
		ret = 0;
		pr_debug("unix socket %u: its end of the link to %u taken from %s", l->ino, l->peer,
			 sock);
	} else if (ret == -ENOENT) {
		ret = cr_unix_link_pair(imgdir, l->ino, peer_dir, l->peer, &l->fd, &other);
		if (!ret)
			ret = hand_over(h, ids, nids, other, l->peer, sock, lock);
		if (other >= 0)
			close(other);
		if (!ret)
			pr_debug("unix socket %u: the link to %u made, its other end offered at %s",
				 l->ino, l->peer, sock);
	}
	close(lfd);
	return ret;
}

/* the ids of imgdir and of the peers with a link: appended */
static int gather_ids(const char *imgdir, struct peer_links *p, size_t np, pid_t **ids,
		      size_t *nids)
{
	int ret = cr_images_ids(imgdir, ids, nids);

	for (size_t i = 0; !ret && i < np; i++) {
		pid_t *more = NULL;
		size_t nm = 0;
		pid_t *all;

		if (!p[i].used)
			continue;
		ret = cr_images_ids(p[i].dir, &more, &nm);
		all = ret ? NULL : realloc(*ids, (*nids + nm + 1) * sizeof(pid_t));
		if (!ret && !all)
			ret = -ENOMEM;
		if (all) {
			memcpy(all + *nids, more, nm * sizeof(pid_t));
			*ids = all;
			*nids += nm;
		}
		free(more);
	}
	return ret;
}

int links_gather(const char *imgdir, const char *const *peer_dirs, size_t npeers, const char *rdv,
		 struct cr_unix_link **out, size_t *nr)
{
	struct peer_links *p = NULL;
	struct holder h = { 0, -1 };
	_cleanup_free_ pid_t *ids = NULL;
	size_t nids = 0;
	int ret = cr_images_links(imgdir, out, nr);

	if (ret || !*nr)
		return ret;
	p = calloc(npeers ? npeers : 1, sizeof(*p));
	if (!p)
		ret = -ENOMEM;
	/* one that cannot be read holds none of them (a link to it is refused
	 * below, naming the socket) */
	for (size_t i = 0; !ret && i < npeers; i++) {
		p[i].dir = peer_dirs[i];
		if (cr_images_links(peer_dirs[i], &p[i].l, &p[i].n))
			pr_warn("the images in %s cannot be searched for connections",
				peer_dirs[i]);
	}
	for (size_t i = 0; !ret && i < *nr; i++) {
		struct peer_links *pl = find_peer(p, npeers, &(*out)[i]);

		if (!pl) {
			pr_err("unix socket %u is connected to socket %u of another tree, which is "
			       "in "
			       "none of the trees restored with it",
			       (*out)[i].ino, (*out)[i].peer);
			ret = -ENOENT;
		} else {
			pl->used = true;
		}
	}
	if (!ret)
		ret = gather_ids(imgdir, p, npeers, &ids, &nids);
	if (!ret && mkdir_p(rdv, 0700))
		ret = pr_errno("cannot make the rendezvous directory %s", rdv);
	for (size_t i = 0; !ret && i < *nr; i++)
		ret = gather_one(imgdir, rdv, &(*out)[i], find_peer(p, npeers, &(*out)[i])->dir, &h,
				 ids, nids);
	/* the holder serves the ends it has, alone */
	if (h.ctl >= 0)
		close(h.ctl);
	if (ret && h.pid > 0) {
		int st;

		kill(h.pid, SIGKILL);
		waitpid(h.pid, &st, 0);
	}
	for (size_t i = 0; p && i < npeers; i++)
		free(p[i].l);
	free(p);
	if (ret)
		links_close(out, nr);
	return ret;
}

void links_close(struct cr_unix_link **l, size_t *nr)
{
	for (size_t i = 0; *l && i < *nr; i++)
		if ((*l)[i].fd >= 0)
			close((*l)[i].fd);
	free(*l);
	*l = NULL;
	*nr = 0;
}
