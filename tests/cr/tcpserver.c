/* The dumped side of the stream test: accept one connection from the peer
 * (tcpeer, outside the tree, in another network namespace) and stream
 * records both ways until SIGTERM.  See stream.h.  Arguments: "v6": listen
 * on IPv6 only; "quiet": send nothing, only receive (the peer's requests
 * reach a server with nothing to say: after a restore, no segment of its
 * own acknowledges what the peer retransmits). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "crt.h"
#include "stream.h"

int main(int argc, char **argv)
{
	bool v6 = false, quiet = false;
	struct sockaddr_in6 a = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
	socklen_t al;
	struct stream s;
	int lst, c;
	FILE *f;

	for (int i = 1; i < argc; i++) {
		v6 |= !strcmp(argv[i], "v6");
		quiet |= !strcmp(argv[i], "quiet");
	}
	crt_init();
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
	crt_pass();
}
