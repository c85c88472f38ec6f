/* A packet socket with a TPACKET_V3 receive ring, read as libpcap reads
 * it (tcpdump's capture), in the runner's network namespace (--netns):
 * SOCK_DGRAM, ETH_P_IP on lo, PACKET_IGNORE_OUTGOING (each datagram once),
 * a filter for UDP to port 9999, 8 blocks of 4 KiB whose timer is long
 * (blocks close when full).  Before the dump the test sends datagrams 1-40
 * and reads the blocks closed (1 to about 26), then sends 41-80 and reads
 * nothing: at the dump two or so blocks are closed and not read, and the
 * kernel's open block holds packets.  After the restore it sends 81 on,
 * reading as it goes, from the block it was at: it must read 27, 28, ...
 * each once, in order, up to past 80 (what was not read, then what came).
 * The ring is where it was in the process's memory. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crt.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define BS 4096
#define NB 8

static uint8_t *ring;
static unsigned cur; /* the block read next, as libpcap keeps it */
static int next_seq = 1, bad;

static void send_seq(int from, int to)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9999) };
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	char msg[200];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = from; i <= to; i++) {
		memset(msg, '.', sizeof(msg));
		snprintf(msg, sizeof(msg), "seq %d", i);
		crt_check(sendto(s, msg, sizeof(msg), 0, (struct sockaddr *)&a, sizeof(a)) > 0,
			  "cannot send %d: %s", i, strerror(errno));
	}
	close(s);
}

/* every closed block from cur on: each datagram's number must be the next */
static void read_closed(void)
{
	for (;;) {
		struct tpacket_block_desc *b = (void *)(ring + cur * BS);
		struct tpacket3_hdr *h;

		if (!(b->hdr.bh1.block_status & TP_STATUS_USER))
			return;
		h = (void *)((uint8_t *)b + b->hdr.bh1.offset_to_first_pkt);
		for (unsigned i = 0; i < b->hdr.bh1.num_pkts; i++) {
			const char *d = (const char *)h + h->tp_mac + 28;
			int seq = -1;

			sscanf(d, "seq %d", &seq);
			if (seq != next_seq && !bad) {
				crt_msg("block %u packet %u: datagram %d, expected %d", cur, i, seq,
					next_seq);
				bad = 1;
			}
			next_seq = seq + 1;
			h = (void *)((uint8_t *)h + h->tp_next_offset);
		}
		b->hdr.bh1.block_status = TP_STATUS_KERNEL;
		cur = (cur + 1) % NB;
	}
}

int main(void)
{
	struct sock_fprog fp = { .len = CRT_UDP9999_LEN,
				 .filter = (struct sock_filter *)crt_udp9999 };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP) };
	struct tpacket_req3 req = { .tp_block_size = BS,
				    .tp_block_nr = NB,
				    .tp_frame_size = 2048,
				    .tp_frame_nr = BS / 2048 * NB,
				    .tp_retire_blk_tov = 60000 };
	uint8_t *was;
	int sk, before;

	crt_init();
	sk = socket(AF_PACKET, SOCK_DGRAM, 0);
	if (sk < 0)
		crt_skip("no packet socket here: %s", strerror(errno));
	sll.sll_ifindex = if_nametoindex("lo");
	crt_check(!setsockopt(sk, SOL_PACKET, PACKET_VERSION, &(int){ TPACKET_V3 }, sizeof(int)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_IGNORE_OUTGOING, &(int){ 1 },
				      sizeof(int)) &&
			  !setsockopt(sk, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) &&
			  !setsockopt(sk, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)),
		  "cannot set the ring up: %s", strerror(errno));
	ring = mmap(NULL, BS * NB, PROT_READ | PROT_WRITE, MAP_SHARED, sk, 0);
	crt_check(ring != MAP_FAILED, "cannot map the ring: %s", strerror(errno));
	crt_check(!bind(sk, (struct sockaddr *)&sll, sizeof(sll)), "bind: %s", strerror(errno));
	send_seq(1, 40);
	usleep(100000);
	read_closed();
	before = next_seq;
	crt_check(before > 1 && before < 40 && !bad, "read %d datagrams before, not part of 40",
		  before - 1);
	send_seq(41, 80);
	usleep(100000);
	crt_msg("read 1-%d before the dump; block %u next", before - 1, cur);

	crt_ready();
	crt_wait_term();

	was = ring;
	for (int i = 81; i <= 400 && next_seq <= 100; i += 10) {
		send_seq(i, i + 9);
		usleep(20000);
		read_closed();
	}
	crt_check(ring == was, "the ring moved");
	crt_check(!bad, "the datagrams did not come in order, once each (see above)");
	crt_check(next_seq > 100, "read up to %d only after the restore", next_seq - 1);
	crt_msg("read %d-%d after the restore", before, next_seq - 1);
	crt_pass();
}
