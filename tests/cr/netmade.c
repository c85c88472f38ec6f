/* A private network made inside the tree, as a container's or a sandboxed
 * service's inside one (nspawn --private-network, PrivateNetwork= in a
 * container): the root's child M makes a network namespace with its
 * loopback up, listens on 127.0.0.1, and its child N connects; each side
 * has bytes queued for the other; M also holds a bound UDP socket with a
 * datagram queued.  After the restore both are in one network namespace
 * again, not the root's, its loopback up; the bytes and the datagram come
 * in order; the listener accepts a new connection.
 *
 * Refused (argv[1]): "veth", M adds a veth pair with both ends in its
 * namespace (only one to its parent's is made again, tcpserver.c's "ctr");
 * "nft", an nftables table of its own (a firewall); "rule", a policy
 * routing rule. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define PORT  47621
#define UPORT 47622

static struct shared {
	volatile int ready, go, done, ok;
	char extra[160]; /* a command M runs in its namespace */
	char msg[200];
	unsigned long ino;
} * sh;

static unsigned long ns_ino(const char *p)
{
	struct stat st;

	return stat(p, &st) ? 0 : st.st_ino;
}

static bool lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	bool up;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	up = s >= 0 && !ioctl(s, SIOCGIFFLAGS, &ifr) && (ifr.ifr_flags & IFF_UP);
	close(s);
	return up;
}

static bool got(int fd, const char *want)
{
	char buf[64] = "";
	size_t n = strlen(want), have = 0;

	while (have < n) {
		ssize_t r = read(fd, buf + have, n - have);

		if (r <= 0)
			return false;
		have += r;
	}
	return !memcmp(buf, want, n);
}

static void __attribute__((noreturn)) m_main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	int l, c, s, u, one = 1, st;
	pid_t n;
	char *m = sh->msg;

	if (unshare(CLONE_NEWNET) || system("ip link set lo up") ||
	    (sh->extra[0] && system(sh->extra)))
		_exit(2);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 8))
		_exit(3);
	u = socket(AF_INET, SOCK_DGRAM, 0);
	a.sin_port = htons(UPORT);
	if (u < 0 || bind(u, (struct sockaddr *)&a, sizeof(a)))
		_exit(4);
	n = fork();
	if (n == 0) {
		/* N: the client */
		a.sin_port = htons(PORT);
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) ||
		    write(c, "to-m", 4) != 4)
			_exit(5);
		a.sin_port = htons(UPORT);
		u = socket(AF_INET, SOCK_DGRAM, 0);
		if (u < 0 || sendto(u, "dgram", 5, 0, (struct sockaddr *)&a, sizeof(a)) != 5)
			_exit(6);
		close(u);
		while (!sh->go)
			usleep(10000);
		_exit(got(c, "to-n") && write(c, "more", 4) == 4 ? 0 : 7);
	}
	s = accept(l, NULL, NULL);
	if (s < 0 || write(s, "to-n", 4) != 4)
		_exit(8);
	sh->ino = ns_ino("/proc/self/ns/net");
	sh->ready = 1;
	while (!sh->go)
		usleep(10000);
	{
		char d[16] = "";
		ssize_t r = recv(u, d, sizeof(d), 0);

		if (!lo_up())
			snprintf(m, 200, "its loopback is down");
		else if (!got(s, "to-m"))
			snprintf(m, 200, "the bytes queued for M are not there");
		else if (r != 5 || memcmp(d, "dgram", 5))
			snprintf(m, 200, "the queued datagram is not there (%zd)", r);
		else if (waitpid(n, &st, 0) != n || !WIFEXITED(st) || WEXITSTATUS(st))
			snprintf(m, 200, "N failed (status %#x)", st);
		else if (!got(s, "more"))
			snprintf(m, 200, "N's bytes after the restore are not there");
		else {
			a.sin_port = htons(PORT);
			c = socket(AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) ||
			    accept(l, NULL, NULL) < 0)
				snprintf(m, 200, "the listener does not accept: %s",
					 strerror(errno));
			else
				sh->ok = 1;
		}
	}
	sh->ino = ns_ino("/proc/self/ns/net");
	sh->done = 1;
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned long mine;
	pid_t m;

	crt_init();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	if (argc > 1 && !strcmp(argv[1], "veth"))
		snprintf(sh->extra, sizeof(sh->extra),
			 "ip link add kupd0 type veth peer name kupd1");
	else if (argc > 1 && !strcmp(argv[1], "nft"))
		snprintf(sh->extra, sizeof(sh->extra), "nft add table inet ctrfw");
	else if (argc > 1 && !strcmp(argv[1], "rule"))
		snprintf(sh->extra, sizeof(sh->extra), "ip rule add from 10.9.0.0/24 table 7");
	m = fork();
	if (m == 0)
		m_main();
	crt_own_child(m);
	for (int i = 0; !sh->ready; i++) {
		int st;

		if (waitpid(m, &st, WNOHANG) == m)
			crt_fail("M ended while setting up: status %#x", st);
		if (i > 1000)
			crt_fail("M did not start");
		usleep(10000);
	}
	mine = ns_ino("/proc/self/ns/net");
	crt_ready();
	crt_wait_term();
	sh->go = 1;
	for (int i = 0; !sh->done; i++) {
		if (i > 1000)
			crt_fail("M gave no verdict in 10 s");
		usleep(10000);
	}
	crt_wait_ok(m, "M");
	crt_check(sh->ok, "M: %s", sh->msg);
	crt_check(ns_ino("/proc/self/ns/net") == mine, "the root's network namespace changed");
	crt_check(sh->ino && sh->ino != mine, "M is in the root's network namespace");
	crt_pass();
}
