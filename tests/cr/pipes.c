/* Pipes, FIFOs and shared file offsets survive:
 *  - a pipe with 10000 unread bytes and a size of 256 KiB, both ends in
 *    this process, the read end non-blocking;
 *  - a pipe whose write end is here and read end in a child, with data in
 *    flight: after the restore the child reads the old bytes, then new ones;
 *  - a FIFO with data, read end in the child, write end here;
 *  - a regular file opened before fork: after the restore a read in the
 *    child moves the offset seen here (one open file description). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static unsigned char pat(int i, int salt)
{
	return (unsigned char)(i * 13 + salt);
}

static int read_exact(int fd, unsigned char *buf, int len)
{
	int got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n <= 0) {
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return -1;
		}
		got += n;
	}
	return 0;
}

static void __attribute__((noreturn)) child_main(int rd, int fifo_rd, int file)
{
	unsigned char buf[4096];

	while (!crt_term)
		pause();
	/* the bytes in flight at the dump, then the ones written after */
	if (read_exact(rd, buf, 3000))
		_exit(10);
	for (int i = 0; i < 3000; i++)
		if (buf[i] != pat(i, 2))
			_exit(11);
	if (read_exact(rd, buf, 100))
		_exit(12);
	for (int i = 0; i < 100; i++)
		if (buf[i] != pat(i, 3))
			_exit(13);
	if (read_exact(fifo_rd, buf, 2000))
		_exit(14);
	for (int i = 0; i < 2000; i++)
		if (buf[i] != pat(i, 4))
			_exit(15);
	/* moves the shared offset */
	if (read(file, buf, 10) != 10)
		_exit(16);
	_exit(0);
}

int main(void)
{
	int a[2], b[2], fifo_w, fifo_r, file, st;
	unsigned char buf[10000];
	char fifo[4096];
	pid_t child;
	off_t off;

	crt_init();
	if (pipe(a) || pipe(b))
		crt_fail("pipe: %s", strerror(errno));
	if (fcntl(a[1], F_SETPIPE_SZ, 256 << 10) < 0)
		crt_fail("F_SETPIPE_SZ: %s", strerror(errno));
	fcntl(a[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 10000; i++)
		buf[i] = pat(i, 1);
	if (write(a[1], buf, 10000) != 10000)
		crt_fail("write a");
	for (int i = 0; i < 3000; i++)
		buf[i] = pat(i, 2);
	if (write(b[1], buf, 3000) != 3000)
		crt_fail("write b");

	snprintf(fifo, sizeof(fifo), "%s", crt_path("fifo"));
	if (mkfifo(fifo, 0600))
		crt_fail("mkfifo: %s", strerror(errno));
	fifo_r = open(fifo, O_RDONLY | O_NONBLOCK);
	fifo_w = open(fifo, O_WRONLY);
	if (fifo_r < 0 || fifo_w < 0)
		crt_fail("open fifo: %s", strerror(errno));
	fcntl(fifo_r, F_SETFL, 0);
	for (int i = 0; i < 2000; i++)
		buf[i] = pat(i, 4);
	if (write(fifo_w, buf, 2000) != 2000)
		crt_fail("write fifo");

	file = open(crt_path("shared-offset"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (file < 0 || write(file, buf, 100) != 100 || lseek(file, 20, SEEK_SET) != 20)
		crt_fail("shared file");

	child = fork();
	if (child == 0) {
		close(b[1]);
		close(fifo_w);
		child_main(b[0], fifo_r, file);
	}
	close(b[0]);
	close(fifo_r);

	crt_ready();
	crt_wait_term();

	crt_check(fcntl(a[0], F_GETPIPE_SZ) >= (256 << 10), "pipe size is %d",
		  fcntl(a[0], F_GETPIPE_SZ));
	crt_check(fcntl(a[0], F_GETFL) & O_NONBLOCK, "the read end lost O_NONBLOCK");
	crt_check(!(fcntl(a[1], F_GETFL) & O_NONBLOCK), "the write end gained O_NONBLOCK");
	memset(buf, 0, sizeof(buf));
	crt_check(read(a[0], buf, sizeof(buf)) == 10000, "pipe a does not hold 10000 bytes");
	for (int i = 0; i < 10000; i++)
		crt_check(buf[i] == pat(i, 1), "pipe a byte %d differs", i);
	crt_check(read(a[0], buf, 1) < 0 && errno == EAGAIN, "pipe a holds more than it should");
	for (int i = 0; i < 100; i++)
		buf[i] = pat(i, 3);
	crt_check(write(b[1], buf, 100) == 100, "cannot write to pipe b");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child, "wait");
	crt_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed its checks (%#x)", st);
	off = lseek(file, 0, SEEK_CUR);
	crt_check(off == 30, "file offset is %ld, expected 30: the child's read did not move it",
		  (long)off);
	crt_pass();
}
