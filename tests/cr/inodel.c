/* An inotify watch of a file deleted while this process holds it open
 * (zdtm's inotify00 does the same): the watch keeps its number and, after
 * the restore, a write through the fd brings IN_MODIFY with that number;
 * a second watch on the scratch directory is still there too.  The file
 * is still deleted and holds what was written before the dump.
 *   inodel closed: the file is mapped and its fd closed: no fd holds it
 * (its ghost has no description to watch it through): the dump refuses,
 * and the process runs on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crt.h"

static void drain(int ify)
{
	char buf[4096];

	while (read(ify, buf, sizeof(buf)) > 0)
		;
}

int main(int argc, char **argv)
{
	bool closed = argc > 1 && !strcmp(argv[1], "closed");
	char buf[4096] __attribute__((aligned(8)));
	int ify, fd, wdir, wfile;
	struct stat st;
	ssize_t n;

	crt_init();
	ify = inotify_init1(IN_NONBLOCK);
	fd = open(crt_path("watched"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (ify < 0 || fd < 0 || write(fd, "before", 6) != 6)
		crt_fail("setup: %s", strerror(errno));
	/* not the runner's work directory, where it makes files meanwhile:
	 * their events would be queued at the dump, which refuses them */
	if (mkdir(crt_path("w"), 0755))
		crt_fail("mkdir: %s", strerror(errno));
	wdir = inotify_add_watch(ify, crt_path("w"), IN_CREATE);
	wfile = inotify_add_watch(ify, crt_path("watched"), IN_MODIFY | IN_DELETE_SELF);
	if (wdir < 0 || wfile < 0 || unlink(crt_path("watched")))
		crt_fail("watch: %s", strerror(errno));
	if (closed && (mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED || close(fd)))
		crt_fail("map: %s", strerror(errno));
	drain(ify);

	crt_ready();
	crt_wait_term();
	if (closed)
		crt_pass(); /* it ran on through the refused dump */

	crt_check(fstat(fd, &st) == 0 && st.st_nlink == 0, "the watched file has a name again");
	crt_check(pread(fd, buf, 6, 0) == 6 && !memcmp(buf, "before", 6),
		  "the deleted file lost its contents");
	crt_check(pwrite(fd, "after", 5, 6) == 5, "write: %s", strerror(errno));
	crt_check(poll(&(struct pollfd){ .fd = ify, .events = POLLIN }, 1, 2000) == 1,
		  "no inotify event within 2 s of writing to the deleted file");
	n = read(ify, buf, sizeof(buf));
	crt_check(n >= (ssize_t)sizeof(struct inotify_event), "read the inotify: %s",
		  strerror(errno));
	crt_check(((struct inotify_event *)buf)->wd == wfile &&
			  (((struct inotify_event *)buf)->mask & IN_MODIFY),
		  "the event is wd %d mask %#x, expected wd %d IN_MODIFY",
		  ((struct inotify_event *)buf)->wd, ((struct inotify_event *)buf)->mask, wfile);
	crt_check(close(open(crt_path("w/new"), O_CREAT | O_WRONLY, 0600)) == 0, "create new");
	n = read(ify, buf, sizeof(buf));
	crt_check(n >= (ssize_t)sizeof(struct inotify_event) &&
			  ((struct inotify_event *)buf)->wd == wdir,
		  "the directory's watch (%d) saw no IN_CREATE", wdir);
	crt_pass();
}
