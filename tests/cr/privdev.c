/* A tree with a /dev of its own (crrun --private-dev: a tmpfs with null,
 * zero and urandom, as systemd's PrivateDevices= makes it), holding
 * /dev/null for appending, /dev/zero for reading and /dev/urandom
 * non-blocking.  After the restore: /dev is still a tmpfs of its own with
 * those three nodes and nothing of the host's, each fd is the node of
 * that /dev (its inode), the same device, with its flags; null takes
 * data, zero gives zeros. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "crt.h"

#define TMPFS_MAGIC 0x01021994

static const char *const names[] = { "/dev/null", "/dev/zero", "/dev/urandom" };
static const int flags[] = { O_WRONLY | O_APPEND, O_RDONLY, O_RDONLY | O_NONBLOCK };
static const unsigned minors[] = { 3, 5, 9 };

/* /dev is a tmpfs holding exactly the three nodes */
static void check_dev(void)
{
	struct statfs sf;
	struct dirent *e;
	DIR *d = opendir("/dev");
	int n = 0;

	crt_check(!statfs("/dev", &sf) && sf.f_type == TMPFS_MAGIC,
		  "/dev is not a tmpfs of its own");
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	crt_check(n == 3, "/dev has %d entries, not the 3 nodes", n);
}

int main(void)
{
	int fd[3];
	char buf[64];

	crt_init();
	check_dev();
	for (int i = 0; i < 3; i++) {
		fd[i] = open(names[i], flags[i]);
		crt_check(fd[i] >= 0, "%s: %s", names[i], strerror(errno));
	}

	crt_ready();
	crt_wait_term();

	check_dev();
	for (int i = 0; i < 3; i++) {
		struct stat a, b;
		int fl = fcntl(fd[i], F_GETFL);

		crt_check(!fstat(fd[i], &a) && !stat(names[i], &b) && a.st_ino == b.st_ino &&
				  a.st_dev == b.st_dev,
			  "fd %d is not the node %s of the tree's /dev", fd[i], names[i]);
		crt_check(S_ISCHR(a.st_mode) && major(a.st_rdev) == 1 &&
				  minor(a.st_rdev) == minors[i],
			  "fd %d: device %u:%u, not 1:%u", fd[i], major(a.st_rdev),
			  minor(a.st_rdev), minors[i]);
		crt_check(fl >= 0 && (fl & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == flags[i],
			  "fd %d: flags %#x, were %#x", fd[i], fl, flags[i]);
	}
	crt_check(write(fd[0], "x", 1) == 1, "/dev/null takes no data");
	memset(buf, 1, sizeof(buf));
	crt_check(read(fd[1], buf, sizeof(buf)) == sizeof(buf) && !buf[0] && !buf[63],
		  "/dev/zero gives no zeros");
	crt_check(read(fd[2], buf, 16) == 16, "/dev/urandom gives nothing");
	crt_pass();
}
