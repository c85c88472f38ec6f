/* A tree in mount, UTS and IPC namespaces of its own (crrun --own-ns makes
 * them: a private tmpfs on $CRT_DIR/private, $CRT_DIR/ro read-only,
 * $CRT_DIR/hidden inaccessible, the host name "crtest-ns"):
 *  - in the private tmpfs: "open" held open at offset 5 with 9 bytes,
 *    "gone" held open and unlinked (64 KiB with a hole), "closed" not held
 *    (mode 0640, a known mtime), a subdirectory with a file, a symlink, a
 *    hard link of "closed", a FIFO held open for reading;
 *  - a child shares the namespaces and holds the private tmpfs as its cwd;
 *  - with the argument "unshare", the child makes a user namespace of
 *    its own (the dump must refuse, naming it; a UTS or IPC namespace it
 *    would keep, and a mount, network or cgroup namespace, as a
 *    container's init's: pidns.c, ctrroot.c, netmade.c, cgtree.c);
 *  - with "shm", a System V segment of 64 KiB in its IPC namespace,
 *    attached by the parent and the child, filled with a pattern;
 *  - with "overmount", a file held open under a directory that a tmpfs
 *    was then mounted on (its path leads to another file now: the dump must
 *    refuse, naming it);
 *  - with "user" (crrun --own-userns: a user namespace mapping root to
 *    itself, 1000 inside to nobody outside), the child becomes 1000 and
 *    starts three threads (their tids are given inside the namespace).
 * After the restore, all from inside: the contents, offsets, modes, the
 * mtime, the hard link (one inode), the unlinked file unlinked with its
 * data; writes to $CRT_DIR/ro fail with EROFS; the host name; the mount
 * table has the private tmpfs, the read-only bind and the cover of
 * $CRT_DIR/hidden; the child in the same mount namespace as its parent;
 * the segment with its size, contents and two attaches; the child 1000
 * inside (uids and gids) with its three threads and their tids, the parent root in
 * a namespace with its two-line map. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define GONE_SIZE (64 << 10)

static char priv[4096];

/* $CRT_DIR/private/name, in one of four buffers (two may be in use) */
static const char *in_priv(const char *name)
{
	static char buf[4][4200];
	static int n;

	n = (n + 1) % 4;
	snprintf(buf[n], sizeof(buf[n]), "%s/%s", priv, name);
	return buf[n];
}

static _Atomic pid_t thread_tid;

static void *thread_main(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	for (;;)
		pause();
	return NULL;
}

static unsigned char pat(int i)
{
	return (unsigned char)(i * 7 + 3);
}

static void check_mounts(void)
{
	char *mi = crt_read_file("/proc/self/mountinfo", NULL);
	char want[4200];

	crt_check(mi, "cannot read /proc/self/mountinfo");
	snprintf(want, sizeof(want), " %s rw,nosuid,nodev", priv);
	crt_check(strstr(mi, want), "the private tmpfs on %s is not in the mount table", priv);
	snprintf(want, sizeof(want), " %s ro,", crt_path("ro"));
	crt_check(strstr(mi, want), "%s is not mounted read-only", crt_path("ro"));
	snprintf(want, sizeof(want), " %s ro,nosuid,nodev,noexec", crt_path("hidden"));
	crt_check(strstr(mi, want), "%s is not covered (inaccessible)", crt_path("hidden"));
}

int main(int argc, char **argv)
{
	bool unshare_child = argc > 1 && !strcmp(argv[1], "unshare");
	bool shm = argc > 1 && !strcmp(argv[1], "shm");
	bool user = argc > 1 && !strcmp(argv[1], "user");
	bool overmount = argc > 1 && !strcmp(argv[1], "overmount");
	unsigned char *seg = NULL;
	int shmid = -1;
	static unsigned char buf[GONE_SIZE];
	struct timespec ts[2] = { { 1000000000, 0 }, { 1234567890, 5 } };
	char host[64], lbuf[256];
	struct stat sc, sl, sg;
	int fo, fg, ff, st, p[2];
	pid_t child;

	crt_init();
	snprintf(priv, sizeof(priv), "%s", crt_path("private"));
	fo = open(in_priv("open"), O_RDWR | O_CREAT | O_EXCL, 0600);
	crt_check(fo >= 0 && write(fo, "123456789", 9) == 9 && lseek(fo, 5, SEEK_SET) == 5,
		  "open: %s", strerror(errno));
	for (int i = 0; i < GONE_SIZE; i++)
		buf[i] = i >= 4096 && i < 8192 ? 0 : pat(i);
	fg = open(in_priv("gone"), O_RDWR | O_CREAT | O_EXCL, 0600);
	crt_check(fg >= 0 && pwrite(fg, buf, 4096, 0) == 4096 &&
			  pwrite(fg, buf + 8192, GONE_SIZE - 8192, 8192) == GONE_SIZE - 8192 &&
			  !unlink(in_priv("gone")),
		  "gone: %s", strerror(errno));
	ff = open(in_priv("closed"), O_WRONLY | O_CREAT | O_EXCL, 0640);
	crt_check(ff >= 0 && write(ff, "closed\n", 7) == 7 && !fchmod(ff, 0640) &&
			  !futimens(ff, ts) && !close(ff),
		  "closed: %s", strerror(errno));
	crt_check(!mkdir(in_priv("sub"), 0750) && !symlink("closed", in_priv("sym")) &&
			  !link(in_priv("closed"), in_priv("hard")) &&
			  !mkfifo(in_priv("fifo"), 0600),
		  "nodes: %s", strerror(errno));
	ff = open(in_priv("sub/inner"), O_WRONLY | O_CREAT | O_EXCL, 0600);
	crt_check(ff >= 0 && write(ff, "inner", 5) == 5 && !close(ff), "inner: %s",
		  strerror(errno));
	ff = open(in_priv("fifo"), O_RDONLY | O_NONBLOCK);
	crt_check(ff >= 0, "fifo: %s", strerror(errno));
	crt_check(pipe(p) == 0, "pipe");
	if (overmount) {
		int hidden;

		crt_check(!mkdir(in_priv("over"), 0755) &&
				  (hidden = open(in_priv("over/f"), O_RDWR | O_CREAT, 0600)) >= 0 &&
				  !mount("tmpfs", in_priv("over"), "tmpfs", 0, "size=64k") &&
				  !close(open(in_priv("over/f"), O_RDWR | O_CREAT, 0600)),
			  "overmount: %s", strerror(errno));
		(void)hidden; /* held: its path now names the new tmpfs's file */
	}
	if (shm) {
		shmid = shmget(IPC_PRIVATE, GONE_SIZE, IPC_CREAT | 0600);
		seg = shmid < 0 ? NULL : shmat(shmid, NULL, 0);
		crt_check(seg && seg != (void *)-1, "shm: %s", strerror(errno));
		for (int i = 0; i < GONE_SIZE; i++)
			seg[i] = pat(i + 1);
	}
	child = fork();
	if (child == 0) {
		if (unshare_child && unshare(CLONE_NEWUSER))
			_exit(3);
		if (chdir(priv))
			_exit(2);
		pthread_t th[3];

		if (user && (setresgid(1000, 1000, 1000) || setresuid(1000, 1000, 1000) ||
			     pthread_create(&th[0], NULL, thread_main, NULL) ||
			     pthread_create(&th[1], NULL, thread_main, NULL) ||
			     pthread_create(&th[2], NULL, thread_main, NULL)))
			_exit(4);
		while (user && !thread_tid)
			usleep(1000);
		close(p[0]);
		close(p[1]);
		crt_wait_term();
		if (user) {
			uid_t r, e, s;
			gid_t gr, ge, gs;
			char task[64];

			/* the thread is back with its tid */
			snprintf(task, sizeof(task), "/proc/self/task/%d", (int)thread_tid);
			if (access(task, F_OK))
				_exit(6);
			snprintf(task, sizeof(task), "/proc/self/task");
			{
				DIR *d = opendir(task);
				int n = 0;

				while (d && readdir(d))
					n++;
				if (d)
					closedir(d);
				if (n != 4 + 2) /* ".", "..", the child and its three threads */
					_exit(7);
			}
			_exit(getresuid(&r, &e, &s) || getresgid(&gr, &ge, &gs) || r != 1000 ||
					      e != 1000 || s != 1000 || gr != 1000 || ge != 1000 ||
					      gs != 1000
				      ? 5
				      : 0);
		}
		_exit(access("sub/inner", R_OK) ? 1 : 0);
	}
	crt_own_child(child);
	close(p[1]);
	/* the child is set up (its namespace made, if asked) */
	crt_check(read(p[0], host, 1) == 0, "child");
	close(p[0]);

	crt_ready();
	crt_wait_term();

	crt_check(!gethostname(host, sizeof(host)) && !strcmp(host, "crtest-ns"),
		  "the host name is %s", host);
	crt_check(lseek(fo, 0, SEEK_CUR) == 5, "open is at %ld", (long)lseek(fo, 0, SEEK_CUR));
	crt_check(read(fo, lbuf, 10) == 4 && !memcmp(lbuf, "6789", 4), "open's data");
	crt_check(fstat(fg, &sg) == 0 && sg.st_nlink == 0 && sg.st_size == GONE_SIZE,
		  "gone: %lu links, %ld bytes", (unsigned long)sg.st_nlink, (long)sg.st_size);
	{
		static unsigned char got[GONE_SIZE];

		crt_check(pread(fg, got, GONE_SIZE, 0) == GONE_SIZE && !memcmp(got, buf, GONE_SIZE),
			  "gone's data differ");
	}
	crt_check(access(in_priv("gone"), F_OK) && errno == ENOENT, "gone has a name again");
	crt_check(!stat(in_priv("closed"), &sc) && (sc.st_mode & 07777) == 0640 &&
			  sc.st_mtim.tv_sec == ts[1].tv_sec && sc.st_mtim.tv_nsec == ts[1].tv_nsec,
		  "closed: mode %o, mtime %ld", sc.st_mode & 07777, (long)sc.st_mtim.tv_sec);
	crt_check(!stat(in_priv("hard"), &sl) && sl.st_ino == sc.st_ino && sc.st_nlink == 2,
		  "hard is not a link of closed");
	{
		char *t = crt_read_file(in_priv("closed"), NULL);

		crt_check(t && !strcmp(t, "closed\n"), "closed's data");
	}
	crt_check(readlink(in_priv("sym"), lbuf, sizeof(lbuf)) == 6 && !memcmp(lbuf, "closed", 6),
		  "sym");
	crt_check(!stat(in_priv("sub"), &sl) && S_ISDIR(sl.st_mode) && (sl.st_mode & 0777) == 0750,
		  "sub: mode %o", sl.st_mode);
	crt_check(!fstat(ff, &sl) && S_ISFIFO(sl.st_mode) && !stat(in_priv("fifo"), &sc) &&
			  sc.st_ino == sl.st_ino,
		  "the fifo held is not the one named");
	crt_check(open(crt_path("ro/x"), O_WRONLY | O_CREAT, 0600) < 0 && errno == EROFS,
		  "%s is writable", crt_path("ro"));
	check_mounts();
	if (user) {
		char *map = crt_read_file("/proc/self/uid_map", NULL);
		int lines = 0;

		for (char *q = map; q && *q; q++)
			lines += *q == '\n';
		crt_check(getuid() == 0 && lines == 2, "user: uid %d, uid_map %s", (int)getuid(),
			  map ? map : "(none)");
	}
	if (shm) {
		struct shmid_ds ds;

		crt_check(shmctl(shmid, IPC_STAT, &ds) == 0 && ds.shm_segsz == GONE_SIZE &&
				  ds.shm_nattch == 2,
			  "shm: segment %d: %s, %lu bytes, %lu attaches", shmid, strerror(errno),
			  (unsigned long)ds.shm_segsz, (unsigned long)ds.shm_nattch);
		for (int i = 0; i < GONE_SIZE; i++)
			crt_check(seg[i] == pat(i + 1), "shm: byte %d differs", i);
	}
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the child in the private tmpfs: status %x", st);
	crt_pass();
}
