/* A packet socket (AF_PACKET) as a DHCP client or a capture without a ring
 * holds it, in the runner's network namespace (--netns, its lo):
 *  - SOCK_DGRAM, protocol ETH_P_IP, bound to lo;
 *  - PACKET_AUXDATA on, PACKET_VERSION TPACKET_V2, PACKET_RESERVE 64,
 *    PACKET_IGNORE_OUTGOING off;
 *  - a classic BPF filter that lets through UDP to port 9999 only, locked
 *    (SO_LOCK_FILTER);
 *  - lo in promiscuous mode through its membership (PACKET_MR_PROMISC),
 *    taken twice (a count the socket keeps: lo's promiscuity is 1);
 *  - SO_RCVBUF 200000.
 * After the restore each is read back (the filter instruction by
 * instruction), lo is promiscuous again until the second drop of the
 * membership, and of two datagrams sent to
 * 127.0.0.1, to ports 9998 and 9999, the socket receives the one to 9999
 * only, with its auxiliary data. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crt.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef SO_LOCK_FILTER
#define SO_LOCK_FILTER 44
#endif

static int getint(int sk, int level, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (getsockopt(sk, level, opt, &v, &l))
		return -1;
	return v;
}

/* the promiscuity count of interface ifindex (rtnetlink IFLA_PROMISCUITY:
 * the memberships' share of it does not show in SIOCGIFFLAGS) */
static int promiscuity(int ifindex)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = { .nh = { .nlmsg_len = sizeof(req),
			  .nlmsg_type = RTM_GETLINK,
			  .nlmsg_flags = NLM_F_REQUEST },
		  .ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex } };
	char buf[8192];
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), v = -1;
	ssize_t n;

	if (s < 0 || send(s, &req, sizeof(req), 0) < 0 || (n = recv(s, buf, sizeof(buf), 0)) <= 0) {
		if (s >= 0)
			close(s);
		return -1;
	}
	close(s);
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
		struct ifinfomsg *ifi = NLMSG_DATA(h);
		int len = IFLA_PAYLOAD(h);

		if (h->nlmsg_type != RTM_NEWLINK)
			continue;
		for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
			if (a->rta_type == IFLA_PROMISCUITY)
				v = *(int *)RTA_DATA(a);
	}
	return v;
}

static void send_to(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	char msg[32];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	snprintf(msg, sizeof(msg), "to port %d", port);
	crt_check(s >= 0 && sendto(s, msg, strlen(msg), 0, (struct sockaddr *)&a, sizeof(a)) > 0,
		  "cannot send to port %d: %s", port, strerror(errno));
	close(s);
}

int main(void)
{
	struct sock_fprog fp = { .len = CRT_UDP9999_LEN,
				 .filter = (struct sock_filter *)crt_udp9999 };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	struct packet_mreq mr = { .mr_type = PACKET_MR_PROMISC };
	struct sock_filter got[16];
	socklen_t n = 16, l = sizeof(sll);
	char buf[2048], cbuf[256];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd pfd;
	int sk, lo, rcv;

	crt_init();
	lo = if_nametoindex("lo");
	sk = socket(AF_PACKET, SOCK_DGRAM, 0);
	if (sk < 0)
		crt_skip("no packet socket here: %s", strerror(errno));
	mr.mr_ifindex = lo;
	sll.sll_ifindex = lo;
	crt_check(!setsockopt(sk, SOL_PACKET, PACKET_AUXDATA, &(int){ 1 }, sizeof(int)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_VERSION, &(int){ TPACKET_V2 },
				      sizeof(int)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_RESERVE, &(int){ 64 }, sizeof(int)) &&
			  !setsockopt(sk, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) &&
			  !setsockopt(sk, SOL_SOCKET, SO_LOCK_FILTER, &(int){ 1 }, sizeof(int)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) &&
			  !setsockopt(sk, SOL_SOCKET, SO_RCVBUF, &(int){ 100000 }, sizeof(int)) &&
			  !bind(sk, (struct sockaddr *)&sll, sizeof(sll)),
		  "cannot set the packet socket up: %s", strerror(errno));
	rcv = getint(sk, SOL_SOCKET, SO_RCVBUF);
	crt_check(promiscuity(lo) == 1, "lo's promiscuity is %d, not 1", promiscuity(lo));

	crt_ready();
	crt_wait_term();

	crt_check(getint(sk, SOL_PACKET, PACKET_AUXDATA) == 1, "PACKET_AUXDATA was lost");
	crt_check(getint(sk, SOL_PACKET, PACKET_VERSION) == TPACKET_V2,
		  "PACKET_VERSION is %d, not TPACKET_V2", getint(sk, SOL_PACKET, PACKET_VERSION));
	crt_check(getint(sk, SOL_PACKET, PACKET_RESERVE) == 64, "PACKET_RESERVE is %d, not 64",
		  getint(sk, SOL_PACKET, PACKET_RESERVE));
	crt_check(getint(sk, SOL_SOCKET, SO_RCVBUF) == rcv, "SO_RCVBUF is %d, not %d",
		  getint(sk, SOL_SOCKET, SO_RCVBUF), rcv);
	crt_check(getint(sk, SOL_SOCKET, SO_LOCK_FILTER) == 1, "the filter is no longer locked");
	crt_check(getint(sk, SOL_PACKET, PACKET_IGNORE_OUTGOING) <= 0,
		  "PACKET_IGNORE_OUTGOING was turned on");
	crt_check(!getsockopt(sk, SOL_SOCKET, SO_GET_FILTER, got, &n) && n == fp.len &&
			  !memcmp(got, crt_udp9999, sizeof(crt_udp9999)),
		  "the filter is not the one attached (%u instructions)", n);
	crt_check(!getsockname(sk, (struct sockaddr *)&sll, &l) && sll.sll_ifindex == lo &&
			  sll.sll_protocol == htons(ETH_P_IP),
		  "bound to interface %d protocol %#x, not lo (%d) and ETH_P_IP", sll.sll_ifindex,
		  ntohs(sll.sll_protocol), lo);
	crt_check(promiscuity(lo) == 1, "lo's promiscuity is %d, not 1: the membership was lost",
		  promiscuity(lo));

	send_to(9998);
	send_to(9999);
	pfd.fd = sk;
	pfd.events = POLLIN;
	crt_check(poll(&pfd, 1, 5000) == 1, "nothing received in 5 s");
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	n = recvmsg(sk, &mh, MSG_DONTWAIT);
	crt_check((int)n > 28 && !memcmp(buf + 28, "to port 9999", 12),
		  "the first packet received is not the datagram to port 9999: the filter let "
		  "another through");
	crt_check(CMSG_FIRSTHDR(&mh) && CMSG_FIRSTHDR(&mh)->cmsg_level == SOL_PACKET &&
			  CMSG_FIRSTHDR(&mh)->cmsg_type == PACKET_AUXDATA,
		  "no auxiliary data with the packet");
	crt_check(recv(sk, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		  "a second packet came through the filter");
	/* taken twice: one drop leaves lo promiscuous, the second ends it */
	crt_check(!setsockopt(sk, SOL_PACKET, PACKET_DROP_MEMBERSHIP, &mr, sizeof(mr)) &&
			  promiscuity(lo) == 1,
		  "one drop of the membership ended it: it was taken once, not twice");
	crt_check(!setsockopt(sk, SOL_PACKET, PACKET_DROP_MEMBERSHIP, &mr, sizeof(mr)) &&
			  promiscuity(lo) == 0,
		  "the second drop of the membership failed or left lo promiscuous");
	crt_pass();
}
