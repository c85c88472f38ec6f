// SPDX-License-Identifier: GPL-2.0
/*
 * sock_diag for unix sockets (NETLINK_SOCK_DIAG, UNIX_DIAG): each socket's
 * inode, its peer's inode, its bound name, state and queue lengths.
 */
#include "ktap.h"
#include "util.h"
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

struct usock {
	unsigned int ino, peer, state, rqlen, wqlen;
	int found;
	char name[108];
};

static unsigned int ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (unsigned int)st.st_ino;
}

/* Dump all unix sockets and fill in the entries of 'want' by inode. */
static int diag_dump(struct usock *want, int nwant)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} rq;
	static char buf[65536];
	int nl, done = 0;

	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	memset(&rq, 0, sizeof(rq));
	rq.nlh.nlmsg_len = sizeof(rq);
	rq.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	rq.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	rq.req.sdiag_family = AF_UNIX;
	rq.req.udiag_states = -1;
	rq.req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN;
	if (send(nl, &rq, sizeof(rq), 0) != sizeof(rq)) {
		close(nl);
		return -errno;
	}
	while (!done) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0)
			break;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			struct unix_diag_msg *m = NLMSG_DATA(h);
			struct rtattr *a;
			int alen, i;

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = 1;
				break;
			}
			for (i = 0; i < nwant && want[i].ino != m->udiag_ino; i++)
				;
			if (i == nwant)
				continue;
			want[i].found = 1;
			want[i].state = m->udiag_state;
			alen = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
			for (a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				if (a->rta_type == UNIX_DIAG_PEER)
					want[i].peer = *(unsigned int *)RTA_DATA(a);
				else if (a->rta_type == UNIX_DIAG_NAME) {
					size_t l = RTA_PAYLOAD(a);

					if (l >= sizeof(want[i].name))
						l = sizeof(want[i].name) - 1;
					memcpy(want[i].name, RTA_DATA(a), l);
					want[i].name[l] = '\0';
				} else if (a->rta_type == UNIX_DIAG_RQLEN) {
					struct unix_diag_rqlen *q = RTA_DATA(a);

					want[i].rqlen = q->udiag_rqueue;
					want[i].wqlen = q->udiag_wqueue;
				}
			}
		}
	}
	close(nl);
	return 0;
}

int main(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct usock s[4];
	int sv[2], lfd, cfd, afd;

	ktap_plan(6);

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		ktap_bail("socketpair");
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/diag.%d", getpid());
	unlink(addr.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	cfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || cfd < 0 || bind(lfd, (void *)&addr, sizeof(addr)) || listen(lfd, 4) ||
	    connect(cfd, (void *)&addr, sizeof(addr)))
		ktap_bail("listen/connect");
	afd = accept(lfd, NULL, NULL);
	if (afd < 0)
		ktap_bail("accept");
	if (send(sv[0], "12345", 5, 0) != 5)
		ktap_bail("send");

	memset(s, 0, sizeof(s));
	s[0].ino = ino_of(sv[0]);
	s[1].ino = ino_of(sv[1]);
	s[2].ino = ino_of(lfd);
	s[3].ino = ino_of(cfd);
	ktap_ok(diag_dump(s, 4) == 0 && s[0].found && s[1].found && s[2].found && s[3].found,
		"unix_diag: dump finds every socket by its inode");
	ktap_ok(s[0].peer == s[1].ino && s[1].peer == s[0].ino,
		"unix_diag: socketpair ends name each other as peer (%u<->%u)", s[0].peer,
		s[1].peer);
	ktap_ok(s[3].peer == ino_of(afd) && s[3].peer != 0,
		"unix_diag: a connected client's peer is the accepted socket (%u)", s[3].peer);
	ktap_ok(!strcmp(s[2].name, addr.sun_path), "unix_diag: a bound socket's name (%s)",
		s[2].name);
	ktap_ok(s[2].state == 10 /* TCP_LISTEN */ && s[0].state == 1 /* TCP_ESTABLISHED */,
		"unix_diag: states listen and established (%u, %u)", s[2].state, s[0].state);
	ktap_ok(s[1].rqlen == 5, "unix_diag: receive queue length of the reading end (%u)",
		s[1].rqlen);
	unlink(addr.sun_path);
	return ktap_finish();
}
