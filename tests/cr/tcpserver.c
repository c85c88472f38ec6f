/* The dumped side of the stream test: accept one connection from the peer
 * (tcpeer, outside the tree, in another network namespace) and stream
 * records both ways until SIGTERM.  See stream.h.  Arguments: "v6": listen
 * on IPv6 only; "quiet": send nothing, only receive (the peer's requests
 * reach a server with nothing to say: after a restore, no segment of its
 * own acknowledges what the peer retransmits).
 *
 * "ctr": the server is a container's: the root's child C makes a network
 * namespace linked to the root's by a veth pair (kc0 here, 10.78.0.1 and
 * fd78::1; kc1 there, 10.78.0.2 and a secondary 10.78.0.5 labelled kc1:a,
 * fd78::2 without duplicate address detection, 10.78.0.9 with a lease's
 * lifetimes: still finite after the restore), each end with an MTU of
 * its own, C's default route and two more (one with a metric and a route
 * MTU) through kc1, one of the root's through kc0; C serves the peer
 * (tcpeer --peer-local at 10.78.0.2, in the root's namespace: outside the
 * tree, through the veth).  After the restores both ends must have the
 * same hardware addresses, MTUs, states, addresses with their flags and
 * labels, and routes; C a namespace that is not the root's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "crt.h"
#include "stream.h"

static char *snap(const char *cmd)
{
	static char buf[4][4096];
	static int next;
	char *b = buf[next++ % 4];
	FILE *f = popen(cmd, "r");
	size_t n = f ? fread(b, 1, sizeof(buf[0]) - 1, f) : 0;

	b[n] = 0;
	if (f)
		pclose(f);
	return b;
}

/* what each end looks like: the interface index left out (a restore's
 * are the kernel's to give), and a link-local address's duplicate address
 * detection (a link brought up again) */
#define SNAP_C                                                                                   \
	"ip -o link show dev kc1 | grep -o 'mtu [0-9]*\\|link/ether [0-9a-f:]*\\|state [A-Z]*';" \
	"ip -o addr show dev kc1 | cut -d' ' -f2- | sed -E 's/ tentative//; s/_lft "             \
	"[0-9]+sec/_lft Nsec/g'; ip route show; ip -6 "                                          \
	"route show dev kc1;"                                                                    \
	"ip rule show"
#define SNAP_ROOT                                                                                \
	"ip -o link show dev kc0 | grep -o 'mtu [0-9]*\\|link/ether [0-9a-f:]*\\|state [A-Z]*';" \
	"ip -o addr show dev kc0 | cut -d' ' -f2- | sed 's/ tentative//'; ip route show dev kc0"

static int sh(const char *cmd)
{
	return system(cmd) == 0 ? 0 : -1;
}

/* dev settled: its link up (the kernel's link watch sets that a moment
 * after the carrier, 1 s later on 6.1) and its IPv6 link-local address
 * made; what a snapshot compares is no passing state (10 s at most) */
static void settled(const char *dev)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 100); do ip -o link show dev %s | grep -q 'state UP' && "
		 "ip -6 -o addr show dev %s scope link | grep -qv tentative && exit 0; "
		 "sleep 0.1; done; exit 1",
		 dev, dev);
	if (sh(cmd))
		crt_fail("%s did not settle (its link up, its link-local address made) in 10 s",
			 dev);
}

static int serve(bool v6, bool quiet, bool in_ctr);
static int ready_fd = -1; /* C's: tells the root */

/* the container: C's network namespace made, the root adds the veth */
static int ctr(bool v6, bool quiet)
{
	int up[2], go[2];
	char c = 0, cmd[256], before[4096];
	pid_t pid;

	if (pipe(up) || pipe(go))
		crt_fail("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		crt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) || write(up[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			crt_fail("C: cannot make its network namespace: %s", strerror(errno));
		if (sh("ip link set lo up && ip link set kc1 mtu 1420 && "
		       "ip addr add 10.78.0.2/24 dev kc1 && "
		       "ip addr add 10.78.0.5/24 dev kc1 label kc1:a && "
		       "ip addr add 10.78.0.9/24 dev kc1 valid_lft 3600 preferred_lft 1800 && "
		       "ip link set kc1 up && "
		       "ip route add default via 10.78.0.1 && "
		       "ip route add 10.80.0.0/24 via 10.78.0.1 metric 50 mtu 1300 && "
		       "ip route add 10.81.0.0/24 dev kc1 scope link") ||
		    sh("ip -6 addr add fd78::2/64 dev kc1 nodad && "
		       "ip -6 route add fd79::/64 via fd78::1 dev kc1"))
			crt_fail("C: cannot set its network up");
		ready_fd = up[1];
		return serve(v6, quiet, true);
	}
	crt_own_child(pid);
	if (read(up[0], &c, 1) != 1)
		crt_fail("C did not make its network namespace");
	snprintf(cmd, sizeof(cmd), "ip link add kc0 type veth peer name kc1 netns %d", pid);
	if (sh(cmd) || sh("ip link set kc0 mtu 1450 && ip addr add 10.78.0.1/24 dev kc0 && "
			  "ip -6 addr add fd78::1/64 dev kc0 nodad && ip link set kc0 up && "
			  "ip route add 10.79.0.0/24 via 10.78.0.2"))
		crt_fail("cannot add the veth pair kc0, kc1");
	if (write(go[1], &c, 1) != 1)
		crt_fail("cannot tell C");
	/* C is ready, with its connection, once it says so (the peer is
	 * started once the port file is there) */
	if (read(up[0], &c, 1) != 1)
		crt_fail("C did not get ready");
	settled("kc0");
	snprintf(before, sizeof(before), "%s", snap(SNAP_ROOT));
	crt_ready();
	crt_wait_term();
	/* (kc0 goes with C's namespace) */
	crt_check(!strcmp(snap(SNAP_ROOT), before), "kc0 was:\n%s\nand is:\n%s", before,
		  snap(SNAP_ROOT));
	kill(pid, SIGTERM);
	crt_wait_ok(pid, "C (the container's server)");
	crt_pass();
}

int main(int argc, char **argv)
{
	bool v6 = false, quiet = false, in_ctr = false;

	for (int i = 1; i < argc; i++) {
		v6 |= !strcmp(argv[i], "v6");
		quiet |= !strcmp(argv[i], "quiet");
		in_ctr |= !strcmp(argv[i], "ctr");
	}
	crt_init();
	if (in_ctr)
		return ctr(v6, quiet);
	return serve(v6, quiet, false);
}

static bool same_ns(pid_t a, pid_t b)
{
	char pa[64], pb[64];
	struct stat sa, sb;

	snprintf(pa, sizeof(pa), "/proc/%d/ns/net", a);
	snprintf(pb, sizeof(pb), "/proc/%d/ns/net", b);
	return !stat(pa, &sa) && !stat(pb, &sb) && sa.st_ino == sb.st_ino;
}

static int serve(bool v6, bool quiet, bool in_ctr)
{
	char before[4096] = "";
	struct sockaddr_in6 a = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
	socklen_t al;
	struct stream s;
	int lst, c;
	FILE *f;

	a.sin6_family = v6 ? AF_INET6 : AF_INET;
	al = v6 ? sizeof(a) : sizeof(*a4);
	if (v6)
		a.sin6_addr = in6addr_any;
	else
		a4->sin_addr.s_addr = htonl(INADDR_ANY);
	lst = socket(a.sin6_family, SOCK_STREAM, 0);
	if (v6 && setsockopt(lst, IPPROTO_IPV6, IPV6_V6ONLY, &(int){ 1 }, sizeof(int)))
		crt_fail("IPV6_V6ONLY: %s", strerror(errno));
	if (bind(lst, (struct sockaddr *)&a, al) || listen(lst, 4) ||
	    getsockname(lst, (struct sockaddr *)&a, &al))
		crt_fail("listen: %s", strerror(errno));
	f = fopen(crt_path("port"), "w");
	fprintf(f, "%d\n", ntohs(v6 ? a.sin6_port : a4->sin_port));
	fclose(f);
	c = accept(lst, NULL, NULL);
	if (c < 0)
		crt_fail("accept: %s", strerror(errno));
	stream_init(&s, c);
	s.done_sending = quiet;
	for (int i = 0; i < 50; i++)
		if (stream_step(&s, 1, 2, 2))
			crt_fail("%s", s.err);
	if (in_ctr) {
		settled("kc1");
		snprintf(before, sizeof(before), "%s", snap(SNAP_C));
		if (write(ready_fd, "r", 1) != 1)
			crt_fail("C cannot tell the root it is ready");
	} else
		crt_ready();
	while (!crt_term) {
		int r = stream_step(&s, 1, 2, 2);

		if (r < 0)
			crt_fail("%s (after %u records in, %u out)", s.err, s.next_recv,
				 s.next_send);
		if (r > 0) {
			/* the peer has finished: so do we */
			close(c);
			crt_wait_term();
			break;
		}
	}
	crt_msg("%u records received, %u sent, longest gap %.3f s", s.next_recv, s.next_send,
		s.longest_gap);
	if (in_ctr) {
		crt_check(!strcmp(snap(SNAP_C), before), "C's kc1 was:\n%s\nand is:\n%s", before,
			  snap(SNAP_C));
		crt_check(!same_ns(getpid(), getppid()), "C lives in the root's network namespace");
	}
	crt_pass();
}
