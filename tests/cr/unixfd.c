/* A unix socket bound through a directory's descriptor, as podman's conmon
 * binds its attach socket (the path is too long for sun_path), beside its
 * ctl FIFO, which it holds open: the directory opened as fd 14, a seqpacket listener bound as
 * /proc/self/fd/14/attach, its file made 0600, then fd 14 closed and
 * reused for /dev/null.  After the restore the listener has the same name,
 * its file is in the same directory with its mode, a client connecting to
 * the file's real path is accepted and answered, and fd 14 is /dev/null. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "crt.h"

#define NAME "/proc/self/fd/14/attach"

int main(void)
{
	const char *dir = crt_init();
	char sdir[4096], file[4200], buf[16];
	struct sockaddr_un a = { .sun_family = AF_UNIX }, got;
	socklen_t len = sizeof(got);
	struct stat st, null;
	int l, d, c, s;

	snprintf(sdir, sizeof(sdir), "%s/userdata", dir);
	snprintf(file, sizeof(file), "%s/attach", sdir);
	if (mkdir(sdir, 0700) && errno != EEXIST)
		crt_fail("mkdir %s: %s", sdir, strerror(errno));
	d = open(sdir, O_PATH | O_DIRECTORY);
	if (d < 0 || dup2(d, 14) != 14)
		crt_fail("cannot open %s as fd 14", sdir);
	close(d);
	l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", NAME);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4))
		crt_fail("bind %s: %s", NAME, strerror(errno));
	if (chmod(file, 0600))
		crt_fail("chmod %s: %s", file, strerror(errno));
	close(14);
	/* conmon's ctl FIFO, beside its attach socket */
	snprintf(file, sizeof(file), "%s/ctl", sdir);
	if (mkfifo(file, 0600) || open(file, O_RDWR) < 0)
		crt_fail("cannot open the FIFO %s: %s", file, strerror(errno));
	snprintf(file, sizeof(file), "%s/attach", sdir);
	d = open("/dev/null", O_RDWR);
	if (d < 0 || (d != 14 && dup2(d, 14) != 14))
		crt_fail("cannot reuse fd 14");
	if (d != 14)
		close(d);
	crt_ready();
	crt_wait_term();

	crt_check(!getsockname(l, (struct sockaddr *)&got, &len) && !strcmp(got.sun_path, NAME),
		  "the listener is named %s, not %s", got.sun_path, NAME);
	crt_check(!lstat(file, &st) && S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0600,
		  "%s is not the socket file with mode 0600 (mode %o)", file, st.st_mode);
	crt_check(!fstat(14, &st) && !stat("/dev/null", &null) && st.st_rdev == null.st_rdev,
		  "fd 14 is not /dev/null");
	c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (strlen(file) < sizeof(a.sun_path)) {
		memcpy(a.sun_path, file, strlen(file) + 1);
	} else {
		/* a long scratch path: through a descriptor, as a client would */
		int cd = open(sdir, O_PATH | O_DIRECTORY);

		snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/attach", cd);
	}
	crt_check(c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a)),
		  "cannot connect to %s: %s", file, strerror(errno));
	s = accept(l, NULL, NULL);
	crt_check(s >= 0 && write(c, "ping", 4) == 4 && read(s, buf, sizeof(buf)) == 4 &&
			  !memcmp(buf, "ping", 4),
		  "the listener does not answer");
	crt_pass();
}
