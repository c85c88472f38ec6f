/* tar c DIR | gzip > FILE, caught in the middle: the runner dumps and
 * restores the pipeline (tar reading its files at their offsets, the pipe
 * with what tar wrote and gzip has not read, gzip writing the archive at
 * its offset) while it runs; once it has finished, the archive must be
 * byte-identical to one the same pipeline makes without interruption.
 * Debian's own tar and gzip, as a backup job runs them; the pipe is made
 * here, as a shell makes it.  tar's options make its output depend on the
 * files alone (order, times, owners), gzip -n leaves out name and time. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define NFILES	  24
#define FILE_SIZE (1u << 20)

/* text-like content gzip -9 has work with: words from a small vocabulary
 * in an order drawn from a seed */
static void make_files(const char *src)
{
	static const char *const words[] = { "kernel", "update ", "restore", "pid ",  "socket",
					     "page ",  "\n",	  "memory",  "tree ", "image" };
	char *buf = malloc(FILE_SIZE), path[600];
	uint64_t s = 0x9e3779b97f4a7c15ull;

	if (!buf || mkdir(src, 0755))
		crt_fail("cannot make %s: %s", src, strerror(errno));
	for (int f = 0; f < NFILES; f++) {
		size_t n = 0;
		int fd;

		while (n < FILE_SIZE) {
			const char *w;
			size_t l;

			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			w = words[s % 10];
			l = strlen(w);
			if (l > FILE_SIZE - n)
				l = FILE_SIZE - n;
			memcpy(buf + n, w, l);
			n += l;
		}
		snprintf(path, sizeof(path), "%s/f%02d.txt", src, f);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, FILE_SIZE) != (ssize_t)FILE_SIZE || close(fd))
			crt_fail("cannot write %s", path);
	}
	free(buf);
}

/* tar's stdout into gzip's stdin; returns gzip's pid, *tar_pid tar's */
static pid_t pipeline(const char *src, const char *out, pid_t *tar_pid)
{
	int p[2], o;
	pid_t t, g;

	if (pipe(p))
		crt_fail("pipe: %s", strerror(errno));
	t = fork();
	if (t == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execlp("tar", "tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0",
		       "--numeric-owner", "--format=gnu", "-c", "-C", src, ".", (char *)NULL);
		_exit(127);
	}
	g = fork();
	if (g == 0) {
		o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o < 0)
			_exit(126);
		dup2(p[0], 0);
		dup2(o, 1);
		close(p[0]);
		close(p[1]);
		close(o);
		execlp("gzip", "gzip", "-n", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	close(p[1]);
	if (t < 0 || g < 0)
		crt_fail("fork: %s", strerror(errno));
	crt_own_child(t);
	crt_own_child(g);
	*tar_pid = t;
	return g;
}

int main(void)
{
	const char *dir = crt_init();
	char src[512], out[512], ref[512], *a, *b;
	size_t la, lb;
	pid_t tar, gz;
	struct stat st;

	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(out, sizeof(out), "%s/out.tar.gz", dir);
	snprintf(ref, sizeof(ref), "%s/ref.tar.gz", dir);
	make_files(src);
	gz = pipeline(src, out, &tar);
	/* under way: gzip has written part of the archive, tar is reading */
	for (int i = 0; i < 3000; i++) {
		if (!stat(out, &st) && st.st_size > (256 << 10))
			break;
		usleep(2000);
	}
	crt_check(waitpid(gz, NULL, WNOHANG) == 0, "the pipeline ended before the dump");
	crt_msg("caught with %lld bytes of the archive written", (long long)st.st_size);
	crt_ready();
	crt_wait_term();
	crt_wait_ok(tar, "tar");
	crt_wait_ok(gz, "gzip");
	/* the same pipeline, uninterrupted */
	gz = pipeline(src, ref, &tar);
	crt_wait_ok(tar, "tar (reference)");
	crt_wait_ok(gz, "gzip (reference)");
	a = crt_read_file(out, &la);
	b = crt_read_file(ref, &lb);
	crt_check(a && b, "cannot read the archives");
	crt_check(la == lb && !memcmp(a, b, la),
		  "the archive made across the checkpoint (%zu bytes) differs from the one made "
		  "without (%zu bytes)",
		  la, lb);
	crt_msg("archives identical: %zu bytes", la);
	crt_pass();
}
