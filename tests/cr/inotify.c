/* An inotify instance survives with its watches, their masks and their
 * watch descriptors (with a gap: watch 2 was removed), and nothing else
 * queued:
 *  - wd 1: a directory, IN_CREATE | IN_DELETE;
 *  - wd 3: a file, IN_MODIFY;
 *  - wd 4: a subdirectory, IN_ATTRIB;
 * and a second, non-blocking instance shared with a child (fork), which
 * reads an event on it after the restore.  After the restore fdinfo lists
 * the same watches, and creating a file or writing one gives the events
 * with the old watch descriptors.  "private" (with --own-ns): the watched
 * files are on a tmpfs of the test's own mount namespace, as a sandboxed
 * service's PrivateTmp= or a container's /run is, which the restore makes
 * anew with its contents: the watches are the same but for their inodes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool private;

/* the watch lines of fdinfo, sorted; "private": their watch descriptors and
 * masks (the files are others, made again) */
static char *watches(int fd)
{
	char path[64], *buf, *out, *l, *save = NULL, *lines[16];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	buf = crt_read_file(path, NULL);
	if (!buf)
		crt_fail("cannot read %s", path);
	out = calloc(1, strlen(buf) + 1);
	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (!strncmp(l, "inotify ", 8) && n < 16) {
			unsigned wd, mask;
			char *m = strstr(l, " mask:");

			if (private && (sscanf(l, "inotify wd:%x", &wd) != 1 || !m ||
					sscanf(m, " mask:%x", &mask) != 1))
				crt_fail("cannot read fdinfo line %s", l);
			if (private)
				sprintf(l, "wd:%x mask:%x", wd, mask);
			lines[n++] = l;
		}
	qsort(lines, n, sizeof(*lines), cmp_str);
	for (int i = 0; i < n; i++) {
		strcat(out, lines[i]);
		strcat(out, "\n");
	}
	free(buf);
	return out;
}

static struct inotify_event *next_event(int fd, char *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	if (n < (ssize_t)sizeof(struct inotify_event))
		return NULL;
	return (struct inotify_event *)buf;
}

/* "queued": an event the program has not read yet cannot be put back: the
 * dump is refused (-EAGAIN, which kupdate's units take for "try again in
 * a moment"), and the event is still there to read afterwards */
static void queued(const char *dir)
{
	char buf[4096] __attribute__((aligned(8))), path[PATH_MAX];
	struct inotify_event *ev;
	int in = inotify_init1(IN_NONBLOCK);

	snprintf(path, sizeof(path), "%s/new", dir);
	if (in < 0 || inotify_add_watch(in, dir, IN_CREATE) != 1 ||
	    close(open(path, O_CREAT | O_WRONLY, 0644)))
		crt_fail("setup: %s", strerror(errno));
	crt_ready();
	crt_wait_term();
	ev = next_event(in, buf, sizeof(buf));
	crt_check(ev && ev->wd == 1 && (ev->mask & IN_CREATE) && !strcmp(ev->name, "new"),
		  "the event queued before the dump is gone");
	crt_check(!next_event(in, buf, sizeof(buf)), "more than one event queued");
	crt_pass();
}

int main(int argc, char **argv)
{
	char dir[1024], file[PATH_MAX], sub[PATH_MAX], gone[PATH_MAX], new[PATH_MAX];
	char buf[4096] __attribute__((aligned(8)));
	char *before, *after;
	struct inotify_event *ev;
	int in, in2, f, st, w1, w2, w3, w4;
	pid_t child;

	/* not the runner's work directory, where it makes files meanwhile;
	 * "private": on the tmpfs only the test's mount namespace has
	 * (--own-ns), which kupdate's own mounts do not show */
	private = argc > 1 && !strcmp(argv[1], "private");
	snprintf(dir, sizeof(dir), "%s%s/w", crt_init(), private ? "/private" : "");
	if (mkdir(dir, 0755))
		crt_fail("mkdir %s: %s", dir, strerror(errno));
	if (argc > 1 && !strcmp(argv[1], "queued"))
		queued(dir);
	snprintf(file, sizeof(file), "%s/watched", dir);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	snprintf(gone, sizeof(gone), "%s/unwatched", dir);
	snprintf(new, sizeof(new), "%s/created", dir);
	f = open(file, O_RDWR | O_CREAT, 0644);
	if (f < 0 || mkdir(sub, 0755) || close(open(gone, O_CREAT | O_WRONLY, 0644)))
		crt_fail("setup: %s", strerror(errno));
	in = inotify_init1(0);
	in2 = inotify_init1(IN_NONBLOCK);
	if (in < 0 || in2 < 0)
		crt_fail("inotify_init1: %s", strerror(errno));
	w1 = inotify_add_watch(in, dir, IN_CREATE | IN_DELETE);
	w2 = inotify_add_watch(in, gone, IN_OPEN);
	w3 = inotify_add_watch(in, file, IN_MODIFY);
	w4 = inotify_add_watch(in, sub, IN_ATTRIB);
	if (w1 != 1 || w2 != 2 || w3 != 3 || w4 != 4 || inotify_rm_watch(in, w2))
		crt_fail("watches %d %d %d %d", w1, w2, w3, w4);
	if (inotify_add_watch(in2, sub, IN_CREATE) != 1)
		crt_fail("inotify_add_watch in2");
	/* the IN_IGNORED of watch 2 */
	if (!(ev = next_event(in, buf, sizeof(buf))) || !(ev->mask & IN_IGNORED))
		crt_fail("no IN_IGNORED for watch 2");
	before = watches(in);

	child = fork();
	if (child == 0) {
		char d[PATH_MAX + 8];

		crt_wait_term();
		snprintf(d, sizeof(d), "%s/d", sub);
		if (mkdir(d, 0755))
			_exit(3);
		ev = next_event(in2, buf, sizeof(buf));
		_exit(ev && ev->wd == 1 && (ev->mask & IN_CREATE) && !strcmp(ev->name, "d") ? 0
											    : 1);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	after = watches(in);
	crt_check(!strcmp(before, after), "the watches differ:\nbefore:\n%safter:\n%s", before,
		  after);
	crt_check(!(fcntl(in, F_GETFL) & O_NONBLOCK), "the first instance became non-blocking");
	crt_check(fcntl(in2, F_GETFL) & O_NONBLOCK, "the second instance lost O_NONBLOCK");
	crt_check(close(open(new, O_CREAT | O_WRONLY, 0644)) == 0, "create");
	ev = next_event(in, buf, sizeof(buf));
	crt_check(ev && ev->wd == 1 && (ev->mask & IN_CREATE) && !strcmp(ev->name, "created"),
		  "the first event is not IN_CREATE of \"created\" on wd 1 (wd %d mask %#x)",
		  ev ? ev->wd : -1, ev ? ev->mask : 0);
	crt_check(write(f, "x", 1) == 1, "write");
	ev = next_event(in, buf, sizeof(buf));
	crt_check(ev && ev->wd == 3 && (ev->mask & IN_MODIFY),
		  "no IN_MODIFY on wd 3 (wd %d mask %#x)", ev ? ev->wd : -1, ev ? ev->mask : 0);
	crt_check(chmod(sub, 0700) == 0, "chmod");
	ev = next_event(in, buf, sizeof(buf));
	crt_check(ev && ev->wd == 4 && (ev->mask & IN_ATTRIB),
		  "no IN_ATTRIB on wd 4 (wd %d mask %#x)", ev ? ev->wd : -1, ev ? ev->mask : 0);
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child's instance failed (%#x)", st);
	crt_pass();
}
