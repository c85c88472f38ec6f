/* The dumped side of the stream test: accept one connection from the peer
 * (tcpeer, outside the tree, in another network namespace) and stream
 * records both ways until SIGTERM.  See stream.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "crt.h"
#include "stream.h"

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct stream s;
	int lst, c;
	FILE *f;

	crt_init();
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	lst = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lst, (struct sockaddr *)&a, sizeof(a)) || listen(lst, 4) ||
	    getsockname(lst, (struct sockaddr *)&a, &al))
		crt_fail("listen: %s", strerror(errno));
	f = fopen(crt_path("port"), "w");
	fprintf(f, "%d\n", ntohs(a.sin_port));
	fclose(f);
	c = accept(lst, NULL, NULL);
	if (c < 0)
		crt_fail("accept: %s", strerror(errno));
	stream_init(&s, c);
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
