/* cr_tcp_release: the TCP sockets of a tree whose dump was killed midway,
 * out of repair mode and out of the network lock.  The engine leaves
 * repair mode as soon as it has read a connection (tcp.c), so only a
 * socket whose queues were being read when the dump died is still in it;
 * the network lock's elements of the connections read stay until removed,
 * in the network namespace of the process that holds each (a container's
 * own: nsmade.c).
 * The orchestrator's recovery (orchestrator/recover.c) calls it for the
 * units of an interrupted apply and for the tree of a killed dump. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "cr.h"
#include "log.h"
#include "netlock.h"
#include "proc.h"
#include "util.h"

/* the deepest a tree is walked (a loop of reused pids cannot recurse for ever) */
#define RELEASE_MAX_DEPTH 64

static void sock_conn(int sk, int family, struct cr_conn *c)
{
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof(l), rl = sizeof(r);

	memset(c, 0, sizeof(*c));
	c->family = family;
	if (getsockname(sk, (struct sockaddr *)&l, &ll) ||
	    getpeername(sk, (struct sockaddr *)&r, &rl))
		return;
	if (family == AF_INET) {
		const struct sockaddr_in *a = (void *)&l, *b = (void *)&r;

		memcpy(c->laddr, &a->sin_addr, 4);
		memcpy(c->raddr, &b->sin_addr, 4);
		c->lport = ntohs(a->sin_port);
		c->rport = ntohs(b->sin_port);
	} else {
		const struct sockaddr_in6 *a = (void *)&l, *b = (void *)&r;

		memcpy(c->laddr, &a->sin6_addr, 16);
		memcpy(c->raddr, &b->sin6_addr, 16);
		c->lport = ntohs(a->sin6_port);
		c->rport = ntohs(b->sin6_port);
	}
}

/* every TCP socket of pid: out of repair mode, its packets flowing */
static void release_sockets(pid_t pid, struct cr_tcp_release *c)
{
	char path[64];
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	/* the dump locked them in pid's network namespace (a container's, or
	 * the tree's own) */
	bool elsewhere = !ns_same(pid, 0, "net");
	DIR *d;
	struct dirent *de;

	if (pidfd < 0) {
		pr_warn("recovery: pid %d: pidfd_open: %s", pid, strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		int fd = atoi(de->d_name), sk, dom = 0, proto = 0, rep = 0, off = 0;
		socklen_t l = sizeof(int);
		struct cr_conn conn;

		if (de->d_name[0] == '.')
			continue;
		sk = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		if (sk < 0) {
			pr_warn("recovery: pid %d fd %d: pidfd_getfd: %s", pid, fd,
				strerror(errno));
			continue;
		}
		if (getsockopt(sk, SOL_SOCKET, SO_DOMAIN, &dom, &l) ||
		    getsockopt(sk, SOL_SOCKET, SO_PROTOCOL, &proto, &l) ||
		    (dom != AF_INET && dom != AF_INET6) || proto != IPPROTO_TCP) {
			close(sk);
			continue;
		}
		if (getsockopt(sk, SOL_TCP, TCP_REPAIR, &rep, &l) == 0 && rep) {
			if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &off, sizeof(off)))
				pr_perror("pid %d fd %d: cannot take the socket out of repair mode",
					  pid, fd);
			else
				c->repaired++;
		}
		sock_conn(sk, dom, &conn);
		if (conn.lport && conn.rport &&
		    (elsewhere ? netlock_in_ns(pid, &conn, 1, false)
			       : cr_net_lock(&conn, 1, false)) == 0)
			c->unlocked++;
		close(sk);
	}
	if (d)
		closedir(d);
	close(pidfd);
}

/* pid and every process below it */
static void release_tree(pid_t pid, int depth, struct cr_tcp_release *c)
{
	_cleanup_free_ pid_t *kids = NULL;
	int n;

	if (depth > RELEASE_MAX_DEPTH || kill(pid, 0))
		return;
	c->processes++;
	release_sockets(pid, c);
	n = list_children(pid, &kids);
	for (int i = 0; i < n; i++)
		release_tree(kids[i], depth + 1, c);
}

void cr_tcp_release(pid_t pid, bool tree, struct cr_tcp_release *c)
{
	if (tree) {
		release_tree(pid, 0, c);
	} else {
		c->processes++;
		release_sockets(pid, c);
	}
}
