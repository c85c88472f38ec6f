/* O_PATH descriptors keep what they point at and their flags:
 *  - of a regular file and of a directory;
 *  - of a symbolic link itself (O_PATH | O_NOFOLLOW, as systemd holds
 *    /etc/localtime to watch it), one to a file and one dangling;
 *  - of a symbolic link followed (O_PATH alone): its target.
 * After the restore each fd's file has the kind, inode and flags of before,
 * and a link's target read through its fd (readlinkat "") is the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crt.h"

struct held {
	int fd;
	const char *what;
	struct stat st;
	int flags;
	char target[256];
};

static struct held h[8];
static int nh;

static void hold(const char *path, int flags, const char *what, mode_t kind)
{
	struct held *x = &h[nh++];

	x->fd = open(path, flags);
	x->what = what;
	if (x->fd < 0 || fstat(x->fd, &x->st))
		crt_fail("%s: open %s: %s", what, path, strerror(errno));
	if ((x->st.st_mode & S_IFMT) != kind)
		crt_fail("%s: mode %#o, not %#o", what, x->st.st_mode & S_IFMT, kind);
	x->flags = fcntl(x->fd, F_GETFL);
	if (S_ISLNK(kind) && readlinkat(x->fd, "", x->target, sizeof(x->target) - 1) <= 0)
		crt_fail("%s: readlinkat: %s", what, strerror(errno));
}

int main(void)
{
	char file[4096], dir[4096], link[4096], dangling[4096];

	crt_init();
	snprintf(file, sizeof(file), "%s", crt_path("opath.file"));
	snprintf(dir, sizeof(dir), "%s", crt_path("opath.dir"));
	snprintf(link, sizeof(link), "%s", crt_path("opath.link"));
	snprintf(dangling, sizeof(dangling), "%s", crt_path("opath.dangling"));
	if (close(open(file, O_CREAT | O_WRONLY, 0644)) || mkdir(dir, 0755) ||
	    symlink("opath.file", link) || symlink("nowhere/at/all", dangling))
		crt_fail("setup: %s", strerror(errno));
	hold(file, O_PATH, "O_PATH of a file", S_IFREG);
	hold(dir, O_PATH | O_DIRECTORY, "O_PATH of a directory", S_IFDIR);
	hold(link, O_PATH | O_NOFOLLOW, "O_PATH of a symbolic link", S_IFLNK);
	hold(dangling, O_PATH | O_NOFOLLOW | O_CLOEXEC, "O_PATH of a dangling symbolic link",
	     S_IFLNK);
	hold(link, O_PATH, "O_PATH through a symbolic link", S_IFREG);

	crt_ready();
	crt_wait_term();

	for (int i = 0; i < nh; i++) {
		struct held *x = &h[i];
		char target[256] = "";
		struct stat st;

		crt_check(!fstat(x->fd, &st), "%s: fd %d: fstat: %s", x->what, x->fd,
			  strerror(errno));
		crt_check((st.st_mode & S_IFMT) == (x->st.st_mode & S_IFMT) &&
				  st.st_ino == x->st.st_ino && st.st_dev == x->st.st_dev,
			  "%s: fd %d is mode %#o inode %lu now, was %#o inode %lu", x->what, x->fd,
			  st.st_mode & S_IFMT, (unsigned long)st.st_ino, x->st.st_mode & S_IFMT,
			  (unsigned long)x->st.st_ino);
		crt_check(fcntl(x->fd, F_GETFL) == x->flags, "%s: flags %#o, were %#o", x->what,
			  fcntl(x->fd, F_GETFL), x->flags);
		if (S_ISLNK(x->st.st_mode)) {
			crt_check(readlinkat(x->fd, "", target, sizeof(target) - 1) > 0 &&
					  !strcmp(target, x->target),
				  "%s: it leads to \"%s\", not \"%s\"", x->what, target, x->target);
		}
	}
	crt_check(fcntl(h[3].fd, F_GETFD) & FD_CLOEXEC, "the dangling link's fd lost FD_CLOEXEC");
	crt_pass();
}
