/* A process with nothing but a pipe (fds 3 and 4) holding unread data:
 * with so few fds, the descriptors the restore works with sit right where
 * the restored ones go, which must not clobber them. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "crt.h"

int main(void)
{
	int p[2];
	char buf[64];

	crt_init();
	if (pipe(p) || p[0] != 3 || p[1] != 4)
		crt_fail("expected the pipe on fds 3 and 4");
	if (write(p[1], "kupdate", 7) != 7)
		crt_fail("write: %s", strerror(errno));
	crt_ready();
	crt_wait_term();
	crt_check(fcntl(3, F_GETFL) >= 0 && (fcntl(3, F_GETFL) & O_ACCMODE) == O_RDONLY,
		  "fd 3 is not the read end");
	crt_check(fcntl(4, F_GETFL) >= 0 && (fcntl(4, F_GETFL) & O_ACCMODE) == O_WRONLY,
		  "fd 4 is not the write end");
	crt_check(read(3, buf, sizeof(buf)) == 7 && !memcmp(buf, "kupdate", 7),
		  "the pipe lost its data");
	crt_check(write(4, "x", 1) == 1 && read(3, buf, 1) == 1 && buf[0] == 'x',
		  "the pipe does not work after the restore");
	crt_pass();
}
