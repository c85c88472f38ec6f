/* Listeners a service manager makes (socket activation): a TCP listener
 * on 127.0.0.1:PORT and a unix one at $CRT_DIR/NAME, with SO_REUSEADDR as
 * systemd's .socket units make them.  crrun --activate-tcp PORT
 * --activate-unix NAME makes them anew for each restore (a new boot's
 * systemd holds those addresses before the unit's restore starts) and
 * passes them (LISTEN_FDS); the restore must take those, not make its own
 * (a TCP one could not bind the port, a unix one would take the path from
 * the manager's).  After the restore: each listener is the passed socket
 * (its inode, in $CRT_DIR/passed), with the tree's backlog, and accepts a
 * connection made to its address.
 *
 *   activated PORT NAME */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "crt.h"

static unsigned long ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (unsigned long)st.st_ino;
}

/* a connection to addr is accepted on l */
static void answers(int l, const struct sockaddr *addr, socklen_t len, const char *what)
{
	int c = socket(addr->sa_family, SOCK_STREAM, 0), s;

	crt_check(c >= 0 && !connect(c, addr, len), "%s: cannot connect: %s", what,
		  strerror(errno));
	s = accept(l, NULL, NULL);
	crt_check(s >= 0, "%s: the listener accepted nothing: %s", what, strerror(errno));
	close(s);
	close(c);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	unsigned long passed[2] = { 0, 0 };
	int t, x, one = 1;
	char *text;

	crt_init();
	crt_check(argc == 3, "usage: activated PORT NAME");
	a.sin_port = htons(atoi(argv[1]));
	snprintf(u.sun_path, sizeof(u.sun_path), "%s", crt_path(argv[2]));
	t = socket(AF_INET, SOCK_STREAM, 0);
	crt_check(t >= 0 && !setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) &&
			  !bind(t, (struct sockaddr *)&a, sizeof(a)) && !listen(t, 7),
		  "tcp listener on port %s: %s", argv[1], strerror(errno));
	unlink(u.sun_path);
	x = socket(AF_UNIX, SOCK_STREAM, 0);
	crt_check(x >= 0 && !bind(x, (struct sockaddr *)&u, sizeof(u)) && !listen(x, 5),
		  "unix listener %s: %s", u.sun_path, strerror(errno));

	crt_ready();
	crt_wait_term();

	text = crt_read_file(crt_path("passed"), NULL);
	crt_check(text && sscanf(text, "%lu %lu", &passed[0], &passed[1]) == 2,
		  "no inodes of the passed listeners");
	crt_check(ino_of(t) == passed[0], "the TCP listener is not the passed one (inode %lu, %lu)",
		  ino_of(t), passed[0]);
	crt_check(ino_of(x) == passed[1],
		  "the unix listener is not the passed one (inode %lu, %lu)", ino_of(x), passed[1]);
	answers(t, (struct sockaddr *)&a, sizeof(a), "tcp");
	answers(x, (struct sockaddr *)&u, sizeof(u), "unix");
	crt_pass();
}
