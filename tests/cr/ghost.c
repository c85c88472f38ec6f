/* Files opened, then unlinked, come back unlinked with their contents;
 * files renamed while open come back under their new name:
 *  - "ghost1": 300 KiB with a hole in the middle and 4 KiB of hole at the
 *    end, mode 0640, its mtime set
 *    to a known time; an fd at offset 4096 shared with a child (fork), and
 *    a second, read-only, O_APPEND-less description of the same file; then
 *    unlinked;
 *  - "ghost2": empty, opened O_WRONLY | O_APPEND, unlinked, and a new file
 *    created under its old name (so the restore must not touch that one);
 *  - "before": renamed to "after" while open;
 *  - with the argument "big", "ghost3": 2 MiB and a byte of data, above
 *    the default limit of 1 MiB for saving unlinked files.
 * After the restore: no name, same data, mode, mtime and size; both
 * descriptions of ghost1 are one inode (a write through one shows through
 * the other); the child's read moves the shared offset; the new file is
 * untouched; the renamed file's fd is "after", with its offset. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define SIZE	  (300 << 10)
#define HOLE_AT	  (100 << 10)
#define HOLE_LEN  (100 << 10)
#define TAIL	  4096 /* a hole at the end too */
#define BIG	  (2 << 20)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static unsigned char pat(int i)
{
	return (unsigned char)(i * 11 + 5);
}

static void link_of(int fd, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, len - 1);
	buf[n > 0 ? n : 0] = 0;
}

int main(int argc, char **argv)
{
	bool big = argc > 1 && !strcmp(argv[1], "big");
	int f3 = -1;
	static unsigned char buf[SIZE];
	char g1[4096], g2[4096], want[4200], got[4200];
	struct timespec ts[2] = { { 1000000000, 0 }, { 1234567890, 123456789 } };
	struct stat s1, s1b, s2, sn;
	int f1, f1b, f2, fr, st;
	pid_t child;

	crt_init();
	snprintf(g1, sizeof(g1), "%s", crt_path("ghost1"));
	snprintf(g2, sizeof(g2), "%s", crt_path("ghost2"));
	for (int i = 0; i < SIZE; i++)
		buf[i] = (i >= HOLE_AT && i < HOLE_AT + HOLE_LEN) ? 0 : pat(i);
	f1 = open(g1, O_RDWR | O_CREAT | O_EXCL, 0640);
	if (f1 < 0 || pwrite(f1, buf, HOLE_AT, 0) != HOLE_AT ||
	    pwrite(f1, buf + HOLE_AT + HOLE_LEN, SIZE - HOLE_AT - HOLE_LEN, HOLE_AT + HOLE_LEN) !=
		    SIZE - HOLE_AT - HOLE_LEN ||
	    ftruncate(f1, SIZE + TAIL) || lseek(f1, 4096, SEEK_SET) != 4096 || fchmod(f1, 0640) ||
	    futimens(f1, ts))
		crt_fail("ghost1: %s", strerror(errno));
	f1b = open(g1, O_RDONLY);
	f2 = open(g2, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (f1b < 0 || f2 < 0 || unlink(g1) || unlink(g2))
		crt_fail("ghosts: %s", strerror(errno));
	if (close(open(g2, O_WRONLY | O_CREAT | O_EXCL, 0600)))
		crt_fail("new ghost2: %s", strerror(errno));
	snprintf(want, sizeof(want), "%s", crt_path("before"));
	fr = open(want, O_RDWR | O_CREAT, 0644);
	if (fr < 0 || write(fr, "hello", 5) != 5 || rename(want, crt_path("after")))
		crt_fail("rename: %s", strerror(errno));
	if (big) {
		f3 = open(crt_path("ghost3"), O_RDWR | O_CREAT | O_TRUNC, 0600);
		for (int i = 0; f3 >= 0 && i <= BIG; i += SIZE) {
			for (int k = 0; k < SIZE; k++)
				buf[k] = pat(i + k + 1);
			if (write(f3, buf, MIN(SIZE, BIG + 1 - i)) != MIN(SIZE, BIG + 1 - i))
				crt_fail("write ghost3");
		}
		if (f3 < 0 || unlink(crt_path("ghost3")))
			crt_fail("ghost3: %s", strerror(errno));
	}
	fstat(f1, &s1);
	fstat(f2, &s2);
	fstat(fr, &sn);
	child = fork();
	if (child == 0) {
		crt_wait_term();
		_exit(read(f1, buf, 10) == 10 && buf[0] == pat(4096) ? 0 : 1);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	snprintf(want, sizeof(want), "%s (deleted)", g1);
	link_of(f1, got, sizeof(got));
	crt_check(!strcmp(got, want), "ghost1's fd is %s, expected %s", got, want);
	crt_check(access(g1, F_OK) && errno == ENOENT, "ghost1 has a name again");
	crt_check(fstat(f1, &s1) == 0 && s1.st_nlink == 0 && s1.st_size == SIZE + TAIL &&
			  (s1.st_mode & 07777) == 0640,
		  "ghost1: %lu links, %ld bytes, mode %o", (unsigned long)s1.st_nlink,
		  (long)s1.st_size, s1.st_mode & 07777);
	crt_check(s1.st_mtim.tv_sec == ts[1].tv_sec && s1.st_mtim.tv_nsec == ts[1].tv_nsec,
		  "ghost1's mtime is %ld.%09ld", (long)s1.st_mtim.tv_sec, s1.st_mtim.tv_nsec);
	crt_check(fstat(f1b, &s1b) == 0 && s1b.st_ino == s1.st_ino,
		  "ghost1's two descriptions are two files");
	crt_check(lseek(f1, 0, SEEK_CUR) == 4096, "ghost1 is at %ld", (long)lseek(f1, 0, SEEK_CUR));
	memset(buf, 0xff, SIZE);
	crt_check(pread(f1b, buf, SIZE, 0) == SIZE, "read ghost1");
	for (int i = 0; i < SIZE; i++)
		crt_check(buf[i] == ((i >= HOLE_AT && i < HOLE_AT + HOLE_LEN) ? 0 : pat(i)),
			  "ghost1 byte %d differs", i);
	crt_check(s1.st_blocks * 512 < SIZE, "ghost1 lost its hole (%ld blocks)",
		  (long)s1.st_blocks);
	crt_check(pwrite(f1, "Q", 1, 7) == 1 && pread(f1b, buf, 1, 7) == 1 && buf[0] == 'Q',
		  "a write to ghost1 does not show through its other description");
	crt_check((fcntl(f1b, F_GETFL) & O_ACCMODE) == O_RDONLY, "f1b is not read-only");
	crt_check(fstat(f2, &s2) == 0 && s2.st_nlink == 0 && s2.st_size == 0, "ghost2 is wrong");
	crt_check((fcntl(f2, F_GETFL) & (O_ACCMODE | O_APPEND)) == (O_WRONLY | O_APPEND),
		  "ghost2 lost its flags");
	crt_check(stat(g2, &sn) == 0 && sn.st_ino != s2.st_ino && sn.st_size == 0,
		  "the new file at ghost2's old name was touched");
	link_of(fr, got, sizeof(got));
	crt_check(!strcmp(got, crt_path("after")), "the renamed file is %s", got);
	crt_check(lseek(fr, 0, SEEK_CUR) == 5, "the renamed file is at %ld",
		  (long)lseek(fr, 0, SEEK_CUR));
	if (big) {
		struct stat s3;

		crt_check(fstat(f3, &s3) == 0 && s3.st_nlink == 0 && s3.st_size == BIG + 1,
			  "ghost3 has %ld bytes", (long)s3.st_size);
		for (int i = 0; i <= BIG; i += SIZE) {
			int n = MIN(SIZE, BIG + 1 - i);

			crt_check(pread(f3, buf, n, i) == n, "read ghost3");
			for (int k = 0; k < n; k++)
				crt_check(buf[k] == pat(i + k + 1), "ghost3 byte %d differs",
					  i + k);
		}
	}
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child could not read ghost1 (%#x)", st);
	crt_check(lseek(f1, 0, SEEK_CUR) == 4106, "the child's read did not move ghost1's offset");
	crt_pass();
}
