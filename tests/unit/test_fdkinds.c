/* Unit tests of the file kinds of issue 4: fdinfo and lock parsing, and
 * the refusal by files_load / ghost_load of entries that are out of range
 * (timerfd clock, epoll target fd, inotify order, tty termios, locks,
 * memfd without its object, ghost data beyond the file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "ghost.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "images/ghost.pb-c.h"
#include "images/pipes.pb-c.h"
#include "locks.h"
#include "log.h"

static char tmpdir[64];
static int ndir;

static void test_fdinfo_find(void **state)
{
	const char *t = "pos:\t5\nflags:\t02\nxpos: 9\ntfd: 3 events: 1\n";

	(void)state;
	assert_string_equal(fdinfo_find(t, "pos:"), "\t5\nflags:\t02\nxpos: 9\ntfd: 3 events: 1\n");
	assert_int_equal(strtol(fdinfo_find(t, "flags:"), NULL, 8), 2);
	/* keys start a line: "pos:" inside "xpos:" does not count */
	assert_null(fdinfo_find(t + 6, "pos:"));
	assert_null(fdinfo_find(t, "events:"));
}

static void test_locks_parse(void **state)
{
	const char *t = "pos:\t0\nflags:\t02\n"
			"lock:\t1: FLOCK  ADVISORY  WRITE 100 fe:00:12 0 EOF\n"
			"lock:\t2: POSIX  ADVISORY  READ 100 fe:00:12 10 14\n"
			"lock:\t3: OFDLCK ADVISORY  WRITE -1 fe:00:12 100 EOF\n";
	FileLock **d = NULL, **p = NULL;
	size_t nd = 0, np = 0;

	(void)state;
	assert_int_equal(locks_parse(1, 3, "/x", t, &d, &nd, &p, &np), 0);
	assert_int_equal(nd, 2);
	assert_int_equal(np, 1);
	assert_int_equal(d[0]->kind, LOCK_KIND__LOCK_FLOCK);
	assert_true(d[0]->write);
	assert_int_equal(d[1]->kind, LOCK_KIND__LOCK_OFD);
	assert_int_equal(d[1]->start, 100);
	assert_false(d[1]->has_end);
	assert_int_equal(p[0]->kind, LOCK_KIND__LOCK_POSIX);
	assert_false(p[0]->write);
	assert_int_equal(p[0]->start, 10);
	assert_true(p[0]->has_end);
	assert_int_equal(p[0]->end, 14);
	assert_int_equal(locks_validate(d, nd, false, "t"), 0);
	assert_int_equal(locks_validate(p, np, true, "t"), 0);
	/* a POSIX lock where descriptions' locks go, and the reverse */
	assert_int_equal(locks_validate(p, np, false, "t"), -EINVAL);
	assert_int_equal(locks_validate(d, nd, true, "t"), -EINVAL);
	p[0]->end = 9; /* ends before it starts */
	assert_int_equal(locks_validate(p, np, true, "t"), -EINVAL);
	locks_free(d, nd);
	locks_free(p, np);
	d = p = NULL;
	nd = np = 0;
	assert_int_equal(locks_parse(1, 3, "/x",
				     "lock:\t1: LEASE  ACTIVE    READ 100 fe:00:12 0 EOF\n", &d,
				     &nd, &p, &np),
			 -EOPNOTSUPP);
	locks_free(d, nd);
	locks_free(p, np);
}

/* a new directory holding files.img with e, and an empty pipes.img */
static int image_dir(const FileEntry *e)
{
	char path[128];
	struct img_writer w;
	int dirfd;

	snprintf(path, sizeof(path), "%s/%d", tmpdir, ndir++);
	assert_int_equal(mkdir(path, 0700), 0);
	dirfd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(dirfd >= 0);
	assert_int_equal(img_writer_open(&w, dirfd, "files.img", IMG_FILES), 0);
	img_write(&w, &e->base);
	assert_int_equal(img_writer_close(&w), 0);
	assert_int_equal(img_writer_open(&w, dirfd, "pipes.img", IMG_PIPES), 0);
	assert_int_equal(img_writer_close(&w), 0);
	return dirfd;
}

static int load(const FileEntry *e)
{
	struct rfiles f;
	int dirfd = image_dir(e), ret = files_load(dirfd, &f);

	files_free(&f);
	close(dirfd);
	return ret;
}

static void test_files_load_refuses(void **state)
{
	FileEntry e = FILE_ENTRY__INIT;
	TimerfdFile tmr = TIMERFD_FILE__INIT;
	EpollFile ep = EPOLL_FILE__INIT;
	EpollTarget tg = EPOLL_TARGET__INIT, *tgs[1] = { &tg };
	InotifyFile ify = INOTIFY_FILE__INIT;
	InotifyWatch w1 = INOTIFY_WATCH__INIT, w2 = INOTIFY_WATCH__INIT, *ws[2] = { &w1, &w2 };
	TtyFile tty = TTY_FILE__INIT;
	TtyTermios tio = TTY_TERMIOS__INIT;
	FileLock lk = FILE_LOCK__INIT, *lks[1] = { &lk };
	uint8_t cc[NCCS] = { 0 };

	(void)state;
	e.id = 1;
	e.path = "anon_inode:[timerfd]";
	e.kind = FILE_KIND__FILE_TIMERFD;
	e.tmr = &tmr;
	tmr.clock = CLOCK_MONOTONIC;
	assert_int_equal(load(&e), 0);
	tmr.clock = 42;
	assert_int_equal(load(&e), -EINVAL);
	e.tmr = NULL;
	assert_int_equal(load(&e), -EINVAL); /* a timerfd without its state */

	e.kind = FILE_KIND__FILE_EPOLL;
	e.path = "anon_inode:[eventpoll]";
	e.ep = &ep;
	ep.pid = 100;
	ep.n_targets = 1;
	ep.targets = tgs;
	tg.fd = 3;
	tg.file_id = 1;
	assert_int_equal(load(&e), 0);
	tg.fd = -1;
	assert_int_equal(load(&e), -EINVAL);
	e.ep = NULL;

	e.kind = FILE_KIND__FILE_INOTIFY;
	e.path = "anon_inode:inotify";
	e.ify = &ify;
	ify.n_watches = 2;
	ify.watches = ws;
	w1.wd = 1;
	w1.mask = 2;
	w1.path = "/a";
	w2.wd = 3;
	w2.mask = 2;
	w2.path = "/b";
	assert_int_equal(load(&e), 0);
	w2.wd = 1; /* not ascending */
	assert_int_equal(load(&e), -EINVAL);
	w2.wd = 3;
	w2.path = "b"; /* not absolute */
	assert_int_equal(load(&e), -EINVAL);
	e.ify = NULL;

	e.kind = FILE_KIND__FILE_TTY;
	e.path = "/dev/ptmx";
	e.tty = &tty;
	tty.index = 3;
	tty.master = 1;
	tty.ptmx = "/dev/ptmx";
	tty.termios = &tio;
	tio.cc.data = cc;
	tio.cc.len = NCCS;
	assert_int_equal(load(&e), 0);
	tio.cc.len = 3;
	assert_int_equal(load(&e), -EINVAL);
	tio.cc.len = NCCS;
	tty.ptmx = "/etc/passwd"; /* not a device */
	assert_int_equal(load(&e), -EINVAL);
	tty.ptmx = "/dev/ptmx";
	tty.index = 1U << 30;
	assert_int_equal(load(&e), -EINVAL);
	e.tty = NULL;

	e.kind = FILE_KIND__FILE_REG;
	e.path = "/etc/hostname";
	e.n_locks = 1;
	e.locks = lks;
	lk.kind = LOCK_KIND__LOCK_OFD;
	lk.has_start = 1;
	lk.start = 10;
	assert_int_equal(load(&e), 0);
	lk.kind = LOCK_KIND__LOCK_POSIX; /* the process's, not the description's */
	assert_int_equal(load(&e), -EINVAL);
	lk.kind = 77;
	assert_int_equal(load(&e), -EINVAL);
	e.n_locks = 0;

	e.kind = FILE_KIND__FILE_MEMFD;
	e.path = "/memfd:x (deleted)";
	assert_int_equal(load(&e), -EINVAL); /* no shmid */
	e.kind = 99;
	assert_int_equal(load(&e), -EINVAL);
}

static void write_ghost(int dirfd, uint64_t size, uint64_t off, size_t len)
{
	GhostEntry ge = GHOST_ENTRY__INIT;
	GhostChunk c = GHOST_CHUNK__INIT;
	static uint8_t data[64];
	struct img_writer w;

	ge.id = 7;
	ge.size = size;
	ge.mode = S_IFREG | 0600;
	c.offset = off;
	c.data.data = data;
	c.data.len = len;
	assert_int_equal(img_writer_open(&w, dirfd, "ghost-7.img", IMG_GHOST), 0);
	img_write(&w, &ge.base);
	img_write(&w, &c.base);
	assert_int_equal(img_writer_close(&w), 0);
}

static void test_ghost_load(void **state)
{
	int dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	struct rghost g;

	(void)state;
	write_ghost(dirfd, 100, 10, 64);
	assert_int_equal(ghost_load(dirfd, 7, &g), 0);
	assert_int_equal(g.nr_chunks, 1);
	ghost_free(&g);
	write_ghost(dirfd, 100, 50, 64); /* past the end of the file */
	assert_int_equal(ghost_load(dirfd, 7, &g), -EINVAL);
	ghost_free(&g);
	write_ghost(dirfd, 100, 10, 64);
	assert_int_not_equal(ghost_load(dirfd, 8, &g), 0); /* another id */
	ghost_free(&g);
	close(dirfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fdinfo_find),
		cmocka_unit_test(test_locks_parse),
		cmocka_unit_test(test_files_load_refuses),
		cmocka_unit_test(test_ghost_load),
	};
	int ret;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kupdate-unit.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	/* the refusals are expected; keep their messages out of the TAP */
	cr_log_init("unit", -1, -1);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd))
			ret = 1;
	}
	return ret;
}
