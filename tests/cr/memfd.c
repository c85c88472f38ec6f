/* memfd file descriptors survive as the same objects as memfd mappings:
 *  - memfd "kupdate-a": 10000 bytes (not a page multiple), mode 0640,
 *    sealed against
 *    shrinking and growing, an fd at offset 1234 and a shared mapping of
 *    it; a second description of it (opened through /proc/self/fd, read
 *    only, offset 77); the child (fork) shares the first fd;
 *  - memfd "kupdate-b": empty, no sealing allowed (F_SEAL_SEAL), only an
 *    fd, non-blocking.
 * After the restore the names, sizes, seals, contents and offsets are
 * back, a write through the fd shows in the mapping, and the child's read
 * moves the shared offset. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define SIZE 10000

static unsigned char pat(int i)
{
	return (unsigned char)(i * 7 + 3);
}

static void check_link(int fd, const char *want)
{
	char path[64], buf[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	crt_check(!strcmp(buf, want), "fd %d is %s, expected %s", fd, buf, want);
}

int main(void)
{
	unsigned char buf[SIZE], *map;
	int a, a2, b, st;
	char path[64];
	struct stat sa, sa2;
	pid_t child;

	crt_init();
	a = memfd_create("kupdate-a", MFD_ALLOW_SEALING);
	b = memfd_create("kupdate-b", MFD_CLOEXEC);
	if (a < 0 || b < 0)
		crt_fail("memfd_create: %s", strerror(errno));
	for (int i = 0; i < SIZE; i++)
		buf[i] = pat(i);
	if (write(a, buf, SIZE) != SIZE || lseek(a, 1234, SEEK_SET) != 1234)
		crt_fail("write a");
	if (fchmod(a, 0640) || fcntl(a, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))
		crt_fail("F_ADD_SEALS: %s", strerror(errno));
	map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, a, 0);
	if (map == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", a);
	a2 = open(path, O_RDONLY);
	if (a2 < 0 || lseek(a2, 77, SEEK_SET) != 77)
		crt_fail("reopen: %s", strerror(errno));
	fcntl(b, F_SETFL, O_NONBLOCK);
	child = fork();
	if (child == 0) {
		crt_wait_term();
		_exit(read(a, buf, 100) == 100 && buf[0] == pat(1234) ? 0 : 1);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	check_link(a, "/memfd:kupdate-a (deleted)");
	check_link(b, "/memfd:kupdate-b (deleted)");
	crt_check(fstat(a, &sa) == 0 && sa.st_size == SIZE, "a has %ld bytes", (long)sa.st_size);
	crt_check((sa.st_mode & 07777) == 0640, "a has mode %o", sa.st_mode & 07777);
	crt_check(fstat(a2, &sa2) == 0 && sa2.st_ino == sa.st_ino,
		  "the second description is not of the same memfd");
	crt_check(fstat(b, &sa2) == 0 && sa2.st_size == 0, "b has %ld bytes", (long)sa2.st_size);
	crt_check(sa2.st_ino != sa.st_ino, "a and b are one memfd");
	crt_check(fcntl(a, F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW), "a's seals are %#x",
		  fcntl(a, F_GET_SEALS));
	crt_check(fcntl(b, F_GET_SEALS) == F_SEAL_SEAL, "b's seals are %#x", fcntl(b, F_GET_SEALS));
	crt_check(ftruncate(a, 100) < 0 && errno == EPERM, "a can shrink");
	crt_check(fcntl(b, F_GETFL) & O_NONBLOCK, "b lost O_NONBLOCK");
	crt_check(fcntl(b, F_GETFD) & FD_CLOEXEC, "b lost FD_CLOEXEC");
	crt_check(!(fcntl(a, F_GETFD) & FD_CLOEXEC), "a gained FD_CLOEXEC");
	crt_check((fcntl(a2, F_GETFL) & O_ACCMODE) == O_RDONLY, "a2 is not read-only");
	crt_check(lseek(a2, 0, SEEK_CUR) == 77, "a2 is at %ld", (long)lseek(a2, 0, SEEK_CUR));
	crt_check(lseek(a, 0, SEEK_CUR) == 1234, "a is at %ld", (long)lseek(a, 0, SEEK_CUR));
	crt_check(pread(a, buf, SIZE, 0) == SIZE, "read a");
	for (int i = 0; i < SIZE; i++)
		crt_check(buf[i] == pat(i) && map[i] == pat(i), "byte %d differs", i);
	crt_check(pwrite(a, "Z", 1, 5000) == 1 && map[5000] == 'Z',
		  "a write through the fd does not show in the mapping");
	map[6000] = 'Y';
	crt_check(pread(a2, buf, 1, 6000) == 1 && buf[0] == 'Y',
		  "a write to the mapping does not show through the second fd");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child could not read (%#x)", st);
	crt_check(lseek(a, 0, SEEK_CUR) == 1334, "the child's read did not move a's offset");
	crt_pass();
}
