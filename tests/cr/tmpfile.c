/* A nameless file made with O_TMPFILE (as MariaDB's InnoDB makes its
 * temporary files in /tmp), held open read-write with 3 pages of data and
 * its offset at 5000; its description's flags keep O_TMPFILE (with
 * O_DIRECTORY in it), which opening it again must not use.  After the
 * restore: still nameless (no link), its data, its offset, read-write. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crt.h"

#define SIZE (3 * 4096)

static unsigned char pat(int i)
{
	return (unsigned char)(i * 13 + 1);
}

int main(void)
{
	static unsigned char buf[SIZE], got[SIZE];
	struct stat st;
	int fd, fl;

	crt_init();
	fd = open(crt_path(""), O_TMPFILE | O_RDWR, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR))
		crt_skip("no O_TMPFILE on this file system");
	for (int i = 0; i < SIZE; i++)
		buf[i] = pat(i);
	crt_check(fd >= 0 && write(fd, buf, SIZE) == SIZE && lseek(fd, 5000, SEEK_SET) == 5000,
		  "O_TMPFILE: %s", strerror(errno));

	crt_ready();
	crt_wait_term();

	fl = fcntl(fd, F_GETFL);
	crt_check(fl >= 0 && (fl & O_ACCMODE) == O_RDWR, "flags %#x, not read-write", fl);
	crt_check(!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_size == SIZE,
		  "the file: %lu links, %ld bytes", (unsigned long)st.st_nlink, (long)st.st_size);
	crt_check(lseek(fd, 0, SEEK_CUR) == 5000, "its offset is %ld",
		  (long)lseek(fd, 0, SEEK_CUR));
	crt_check(pread(fd, got, SIZE, 0) == SIZE && !memcmp(got, buf, SIZE), "its data differ");
	crt_check(write(fd, "x", 1) == 1, "cannot write it: %s", strerror(errno));
	crt_pass();
}
