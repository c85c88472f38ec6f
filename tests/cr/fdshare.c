/* Processes that share one fd table (CLONE_FILES) still share it after
 * the restore.  The parent opens files (one with FD_CLOEXEC and O_APPEND,
 * one with a POSIX lock, a pipe with data in it) and clones two children
 * with CLONE_FILES; the second clones a grandchild with CLONE_FILES and
 * forks two others normally, which alone hold a pipe; a third child is
 * forked normally; a sharer whose sharing parent exited is adopted by the
 * parent (a subreaper).  Before the dump the first child starts a thread and
 * opens a file in the shared table.  After the restore, from the inside:
 * kcmp(KCMP_FILES) says which tables are one (the thread's too);
 * the fds are there with their flags, offsets, lock and data; an fd
 * opened or closed in one sharing process is seen by the others; the
 * processes that do not share see none of it.  Every process maps shared
 * anonymous memory and a deleted file, which the restore makes once.
 * With "tty": a sharing child is a session leader with a pseudo-terminal
 * of the shared table as its controlling terminal, and a child of its own
 * in the foreground; both are so after the restore. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define FD_PLAIN   10 /* offset 37, no FD_CLOEXEC, a POSIX lock of the parent */
#define FD_CLOEX   11 /* offset 11, FD_CLOEXEC, O_APPEND */
#define FD_PIPE_R  12 /* a pipe holding "hello" */
#define FD_PIPE_W  13
#define FD_CHILD   14 /* opened by the first child before the dump, offset 5 */
#define FD_OWN	   15 /* opened by the unshared child in its own table */
#define FD_GPIPE_R 20 /* a pipe only the second child's unshared children hold */
#define FD_GPIPE_W 21
#define FD_AFTER1  100 /* opened after the restore by the first child */
#define FD_AFTER2  101 /* ... by the parent */
#define FD_AFTER3  102 /* ... by the second child, closed by the grandchild */

static pid_t thread_tid;
/* shared anonymous memory and a deleted file, mapped by every process:
 * the objects kupdate makes for the restore and each restoring process
 * places among its own fds, which in a shared table the others need too */
static volatile int *anon, *deleted;

/* a thread of the first child: its table is the child's, so ours */
static int thread_main(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int same_table(pid_t a, pid_t b)
{
	return syscall(SYS_kcmp, a, b, KCMP_FILES, 0, 0) == 0;
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static pid_t clone_files(void)
{
	return syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
}

static int open_at(const char *name, int flags, int want)
{
	int fd = open(crt_path(name), flags | O_CREAT, 0644);

	if (fd < 0 || (fd != want && (dup2(fd, want) < 0 || close(fd))))
		return -1;
	return want;
}

/* the table of the saved state: exit status 0, or which check failed */
static int check_saved(void)
{
	if (fcntl(FD_PLAIN, F_GETFD) != 0 || lseek(FD_PLAIN, 0, SEEK_CUR) != 37)
		return 2;
	if (fcntl(FD_CLOEX, F_GETFD) != FD_CLOEXEC || lseek(FD_CLOEX, 0, SEEK_CUR) != 11 ||
	    !(fcntl(FD_CLOEX, F_GETFL) & O_APPEND))
		return 3;
	if (!is_open(FD_PIPE_R) || !is_open(FD_PIPE_W))
		return 4;
	return 0;
}

/* the open fds, as text: nothing that served the restore may be left */
static void fd_list(char *buf, size_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t n = 0;

	buf[0] = 0;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d) && n + 16 < len)
			n += snprintf(buf + n, len - n, " %s", de->d_name);
	if (d)
		closedir(d);
}

static int reap(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* the second child: shares with the parent; a grandchild that shares, one
 * that does not */
static int second_child(const int sync[2])
{
	pid_t gshared, gown, gown2;
	int r, gp[2];

	gshared = clone_files();
	if (gshared < 0)
		return 20;
	if (gshared == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		crt_wait_term();
		if (!same_table(getpid(), getppid()))
			_exit(30);
		if (!is_open(FD_AFTER1) || !is_open(FD_AFTER2) || !is_open(FD_AFTER3))
			_exit(31);
		_exit(close(FD_AFTER3) ? 32 : check_saved());
	}
	/* a pipe for the two unshared grandchildren only: closed in our
	 * table once they have it, so that we (our restorer) make it for
	 * them and the table's restorer knows nothing of it */
	if (pipe(gp) || dup2(gp[0], FD_GPIPE_R) < 0 || dup2(gp[1], FD_GPIPE_W) < 0 ||
	    close(gp[0]) || close(gp[1]) || write(FD_GPIPE_W, "gg", 2) != 2)
		return 27;
	gown = fork();
	if (gown < 0)
		return 21;
	if (gown == 0) {
		char buf[4];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sync[0]);
		close(sync[1]);
		crt_wait_term();
		if (same_table(getpid(), getppid()))
			_exit(40);
		if (is_open(FD_AFTER1) || is_open(FD_AFTER2) || is_open(FD_AFTER3) ||
		    is_open(FD_CHILD))
			_exit(41);
		/* its brother wrote "h" */
		if (read(FD_GPIPE_R, buf, sizeof(buf)) != 3 || memcmp(buf, "ggh", 3))
			_exit(42);
		_exit(check_saved());
	}
	gown2 = fork();
	if (gown2 < 0)
		return 28;
	if (gown2 == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sync[0]);
		close(sync[1]);
		crt_wait_term();
		/* the same pipe as its brother's */
		if (!is_open(FD_GPIPE_R) || write(FD_GPIPE_W, "h", 1) != 1 ||
		    syscall(SYS_kcmp, getpid(), gown, KCMP_FILE, FD_GPIPE_R, FD_GPIPE_R) != 0)
			_exit(45);
		_exit(check_saved());
	}
	close(FD_GPIPE_R);
	close(FD_GPIPE_W);
	if (write(sync[1], "b", 1) != 1)
		return 26;
	crt_wait_term();
	if (!same_table(getpid(), getppid()) || !same_table(getpid(), gshared) ||
	    same_table(getpid(), gown))
		return 22;
	/* what the first child and the parent opened after the restore */
	if (!is_open(FD_AFTER1) || !is_open(FD_AFTER2) || is_open(FD_CHILD))
		return 23;
	if (open_at("after3", O_RDWR, FD_AFTER3) < 0)
		return 24;
	kill(gshared, SIGTERM);
	r = reap(gshared);
	if (r)
		return 60 + r;
	/* the grandchild closed it */
	if (is_open(FD_AFTER3))
		return 25;
	kill(gown2, SIGTERM);
	r = reap(gown2);
	if (r)
		return 150 + r;
	kill(gown, SIGTERM);
	r = reap(gown);
	if (r)
		return 100 + r;
	if (is_open(FD_GPIPE_R) || is_open(FD_GPIPE_W))
		return 29;
	return check_saved();
}

static unsigned long ctty_of(pid_t pid)
{
	char path[64], *buf, *e;
	unsigned long tty = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	buf = crt_read_file(path, NULL);
	e = buf ? strrchr(buf, ')') : NULL;
	if (!e || sscanf(e + 2, "%*c %*d %*d %*d %lu", &tty) != 1)
		tty = 0;
	free(buf);
	return tty;
}

/* fdshare tty: a sharing child leads a session of its own, whose
 * controlling terminal is a pseudo-terminal of the shared table, with a
 * child of its own in the foreground */
static void __attribute__((noreturn)) tty_main(void)
{
	int sync[2], ma = posix_openpt(O_RDWR | O_NOCTTY), r;
	pid_t leader;
	char c;

	if (ma < 0 || grantpt(ma) || unlockpt(ma) || pipe(sync))
		crt_fail("setup: %s", strerror(errno));
	leader = clone_files();
	if (leader < 0)
		crt_fail("clone: %s", strerror(errno));
	if (leader == 0) {
		struct stat st;
		pid_t fg;
		int sl;

		if (setsid() < 0)
			_exit(70);
		sl = open(ptsname(ma), O_RDWR); /* our controlling terminal */
		if (sl < 0 || fstat(sl, &st) || ctty_of(getpid()) != st.st_rdev)
			_exit(71);
		fg = fork();
		if (fg == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setpgid(0, 0);
			crt_wait_term();
			_exit(ctty_of(getpid()) == st.st_rdev ? 0 : 1);
		}
		setpgid(fg, fg);
		signal(SIGTTOU, SIG_IGN);
		if (fg < 0 || tcsetpgrp(sl, fg) || write(sync[1], "t", 1) != 1)
			_exit(72);
		crt_wait_term();
		if (!same_table(getpid(), getppid()) || getsid(0) != getpid())
			_exit(73);
		if (ctty_of(getpid()) != st.st_rdev || tcgetpgrp(sl) != fg)
			_exit(74);
		kill(fg, SIGTERM);
		r = reap(fg);
		_exit(r ? 80 + r : 0);
	}
	crt_own_child(leader);
	if (read(sync[0], &c, 1) != 1)
		crt_fail("the session leader did not start");
	close(sync[0]);
	close(sync[1]);

	crt_ready();
	crt_wait_term();

	crt_check(same_table(getpid(), leader), "the session leader has another fd table");
	kill(leader, SIGTERM);
	r = reap(leader);
	crt_check(!r, "the session leader lost its terminal or its foreground group (%d)", r);
	crt_pass();
}

int main(int argc, char **argv)
{
	char *fdinfo, path[64], before[512], after[512];
	pid_t shared, shared2, own;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	int p[2], sync[2], r, lp = 0;
	pid_t mid, adopted;
	char buf[8];

	crt_init();
	if (argc > 1 && !strcmp(argv[1], "tty"))
		tty_main();
	if (open_at("plain", O_RDWR, FD_PLAIN) < 0 || write(FD_PLAIN, "0123456789", 10) != 10 ||
	    lseek(FD_PLAIN, 37, SEEK_SET) != 37 || fcntl(FD_PLAIN, F_SETLK, &fl))
		crt_fail("setup: %s", strerror(errno));
	if (open_at("cloex", O_RDWR | O_APPEND, FD_CLOEX) < 0 ||
	    fcntl(FD_CLOEX, F_SETFD, FD_CLOEXEC) || lseek(FD_CLOEX, 11, SEEK_SET) != 11)
		crt_fail("setup: %s", strerror(errno));
	if (pipe(p) || dup2(p[0], FD_PIPE_R) < 0 || dup2(p[1], FD_PIPE_W) < 0 || close(p[0]) ||
	    close(p[1]) || write(FD_PIPE_W, "hello", 5) != 5)
		crt_fail("setup: %s", strerror(errno));

	{
		int fd = open(crt_path("deleted"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (fd < 0 || ftruncate(fd, 4096) || anon == MAP_FAILED)
			crt_fail("setup: %s", strerror(errno));
		deleted = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (deleted == MAP_FAILED || close(fd) || unlink(crt_path("deleted")))
			crt_fail("setup: %s", strerror(errno));
		anon[0] = 42;
		deleted[0] = 43;
	}
	if (pipe(sync))
		crt_fail("pipe: %s", strerror(errno));
	/* the second child first: its grandchild with a table of its own
	 * must not have the fd the first child opens */
	shared2 = clone_files();
	if (shared2 < 0)
		crt_fail("clone: %s", strerror(errno));
	if (shared2 == 0)
		_exit(second_child(sync));
	crt_own_child(shared2);
	if (read(sync[0], buf, 1) != 1)
		crt_fail("the second child did not start");
	own = fork();
	if (own < 0)
		crt_fail("fork: %s", strerror(errno));
	if (own == 0) {
		close(sync[0]);
		close(sync[1]);
		if (open_at("own", O_RDWR, FD_OWN) < 0)
			_exit(50);
		crt_wait_term();
		if (same_table(getpid(), getppid()) || !is_open(FD_OWN))
			_exit(51);
		if (is_open(FD_AFTER1) || is_open(FD_AFTER2) || is_open(FD_CHILD))
			_exit(52);
		_exit(check_saved());
	}
	crt_own_child(own);
	shared = clone_files();
	if (shared < 0)
		crt_fail("clone: %s", strerror(errno));
	if (shared == 0) {
		/* an open before the dump, in the table it shares with us */
		static char stack[64 * 1024];

		thread_tid = clone(thread_main, stack + sizeof(stack),
				   CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
					   CLONE_THREAD | CLONE_SYSVSEM,
				   NULL);
		if (thread_tid < 0)
			_exit(8);
		if (open_at("child", O_RDWR, FD_CHILD) < 0 || lseek(FD_CHILD, 5, SEEK_SET) != 5 ||
		    write(sync[1], "a", 1) != 1)
			_exit(9);
		crt_wait_term();
		if (!same_table(getpid(), getppid()) || !same_table(thread_tid, getppid()) ||
		    !is_open(FD_CHILD) || lseek(FD_CHILD, 0, SEEK_CUR) != 5)
			_exit(10);
		/* seen by the parent, the second child and the grandchild */
		if (open_at("after1", O_RDWR, FD_AFTER1) < 0)
			_exit(11);
		if (anon[0] != 42 || deleted[0] != 43)
			_exit(13);
		anon[1] = 7;
		deleted[1] = 8;
		_exit(close(FD_CHILD) ? 12 : check_saved());
	}
	crt_own_child(shared);
	if (read(sync[0], buf, 1) != 1)
		crt_fail("the first child did not open its file");
	/* a sharer whose parent, a sharer too, exited: adopted by us (a
	 * subreaper), it shares its parent's table again */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		crt_fail("prctl: %s", strerror(errno));
	mid = clone_files();
	if (mid < 0)
		crt_fail("clone: %s", strerror(errno));
	if (mid == 0) {
		pid_t o = clone_files();

		if (o == 0) {
			crt_wait_term();
			_exit(!same_table(getpid(), getppid()) || !is_open(FD_AFTER2)
				      ? 60
				      : check_saved());
		}
		_exit(o < 0 || write(sync[1], &o, sizeof(o)) != sizeof(o));
	}
	if (read(sync[0], &adopted, sizeof(adopted)) != sizeof(adopted) || reap(mid))
		crt_fail("the adopted sharer was not made");
	crt_own_child(adopted);
	/* closed for the sharing processes too */
	close(sync[0]);
	close(sync[1]);

	fd_list(before, sizeof(before));
	crt_ready();
	crt_wait_term();
	fd_list(after, sizeof(after));
	crt_check(!strcmp(before, after), "our fds were%s, they are%s", before, after);

	crt_check(same_table(getpid(), shared) && same_table(getpid(), shared2),
		  "the sharing children have another fd table than ours");
	crt_check(!same_table(getpid(), own), "the unshared child has our fd table");
	crt_check(same_table(getpid(), adopted), "the adopted sharer has another fd table");
	r = check_saved();
	crt_check(!r, "our saved fds are not as they were (check %d)", r);
	crt_check(is_open(FD_CHILD) && lseek(FD_CHILD, 0, SEEK_CUR) == 5,
		  "the fd the child opened before the dump is missing or moved");
	crt_check(!is_open(FD_OWN), "the unshared child's fd is in our table");
	/* the POSIX lock, ours again */
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", FD_PLAIN);
	fdinfo = crt_read_file(path, NULL);
	crt_check(fdinfo && strstr(fdinfo, "POSIX") &&
			  sscanf(strstr(fdinfo, "POSIX"), "POSIX %*s %*s %d", &lp) == 1 &&
			  lp == getpid(),
		  "our POSIX lock is gone or not ours (%d): %s", lp, fdinfo ? fdinfo : "?");
	free(fdinfo);

	kill(shared, SIGTERM);
	r = reap(shared);
	crt_check(!r, "the first sharing child failed (%d)", r);
	crt_check(is_open(FD_AFTER1), "the fd the child opened after the restore is not ours");
	crt_check(anon[1] == 7 && deleted[1] == 8,
		  "the child's writes to the shared memory and deleted file are not seen here");
	crt_check(!is_open(FD_CHILD), "the fd the child closed is still open here");
	crt_check(open_at("after2", O_RDWR, FD_AFTER2) == FD_AFTER2, "open: %s", strerror(errno));
	kill(shared2, SIGTERM);
	r = reap(shared2);
	crt_check(!r, "the second sharing child (or a grandchild) failed (%d)", r);
	crt_check(!is_open(FD_AFTER3), "the fd the grandchild closed is still open here");
	kill(adopted, SIGTERM);
	r = reap(adopted);
	crt_check(!r, "the adopted sharing child failed (%d)", r);
	kill(own, SIGTERM);
	r = reap(own);
	crt_check(!r, "the unshared child failed (%d)", r);
	crt_check(read(FD_PIPE_R, buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5),
		  "the pipe lost its data");
	crt_pass();
}
