/* Files deleted while a process maps or runs them (what apt leaves behind
 * when it replaces a library or a service's binary), unlinked sparse
 * files, and a removed working directory.
 *
 * delmap (no argument): the program runs from a copy of itself in the
 * scratch directory, and
 *  - "data", 64 KiB of a pattern, open as an fd, mapped MAP_PRIVATE
 *    (pages 1 written here, 2 in the child: copied on write) and
 *    MAP_SHARED (page 3 written: the file changes), then unlinked;
 *  - "libdel.so", a copy of libm, dlopen()ed and its cos() called;
 *  - "data2", mapped read-only, then replaced by a new file renamed over
 *    its name (as dpkg does), so the old name is taken at restore;
 * then the copied binary and libdel.so are unlinked too, and a child is
 * forked, which shares every one of these mappings.
 * After the restore: same contents at the same addresses, /proc/self/maps
 * says "(deleted)" with the old path (data2: a name beside it), the exe
 * link too, cos() of the copy still works, the fd and the mappings of
 * "data" are one inode in both processes (a write through the parent's
 * shared mapping shows in the child's and through the fd), the new data2
 * is untouched.  The runner counts the ghost images: four files, each
 * saved once although two processes map them.
 *
 * delmap sparse: a 2 GiB unlinked file with three 4 KiB blocks of data
 * (at 0, 1 GiB and the end): same data, same size and still sparse
 * (st_blocks) after the restore; the runner checks the images are small.
 *
 * delmap cwd: the process and its child work in "gone" (mode 0751),
 * which was removed (rmdir): both still work in one removed directory of
 * that name and mode after the restore.  delmap cwd-orphan: its parent
 * was removed too, which the dump refuses, as it does (delmap dir-gone) a
 * mapped file deleted with its directory and (delmap root-gone) a child
 * chrooted in a directory removed since. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define PG	 4096
#define DATA_LEN (16 * PG)
#define GIB	 (1ULL << 30)

static unsigned char pat(long i, int salt)
{
	return (unsigned char)(i * 13 + salt + (i >> 12));
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	static char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ssize_t n;

	if (in < 0 || out < 0)
		crt_fail("copy %s to %s: %s", from, to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			crt_fail("copy to %s: %s", to, strerror(errno));
	if (n < 0 || fchmod(out, mode))
		crt_fail("copy %s: %s", from, strerror(errno));
	close(in);
	close(out);
}

static void write_file(const char *path, int salt)
{
	static unsigned char buf[DATA_LEN];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	for (long i = 0; i < DATA_LEN; i++)
		buf[i] = pat(i, salt);
	if (fd < 0 || write(fd, buf, DATA_LEN) != DATA_LEN)
		crt_fail("write %s: %s", path, strerror(errno));
	close(fd);
}

/* the /proc/self/maps line of addr: its perms, offset and path */
static bool map_of(const void *addr, char *perms, unsigned long *off, char *path, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096 + 128];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		int n = 0;

		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &a, &b, perms, off, &n) < 4)
			continue;
		if ((unsigned long)addr < a || (unsigned long)addr >= b)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, len, "%s", n ? line + n : "");
		found = true;
	}
	if (f)
		fclose(f);
	return found;
}

static void check_map(const void *addr, const char *want_perms, unsigned long want_off,
		      const char *want_path, const char *what)
{
	char perms[8], path[4200], want[4200];
	unsigned long off;

	crt_check(map_of(addr, perms, &off, path, sizeof(path)), "%s: no mapping at %p", what,
		  addr);
	snprintf(want, sizeof(want), "%s (deleted)", want_path);
	crt_check(!strcmp(path, want), "%s at %p maps %s, expected %s", what, addr, path, want);
	crt_check(!strcmp(perms, want_perms) && (off == want_off || want_off == ~0UL),
		  "%s at %p: %s at offset %lx, expected %s at %lx", what, addr, perms, off,
		  want_perms, want_off);
}

static ino_t mapped_ino(const void *addr)
{
	char link[128], line[4400];
	unsigned long a = (unsigned long)addr;
	FILE *f = fopen("/proc/self/maps", "r");
	struct stat st;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && a >= s && a < e) {
			snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", s, e);
			fclose(f);
			return stat(link, &st) ? 0 : st.st_ino;
		}
	}
	if (f)
		fclose(f);
	return 0;
}

static void mapped(const char *self)
{
	static unsigned char buf[DATA_LEN];
	char data[4096], data2[4096], lib[4096], exe[4096], got[4200], want[4200];
	unsigned char *priv, *shared, *priv2;
	double (*cosp)(double);
	Dl_info di;
	void *h;
	struct stat st;
	int fd, st_child;
	pid_t child;
	ssize_t n;

	snprintf(data, sizeof(data), "%s", crt_path("data"));
	snprintf(data2, sizeof(data2), "%s", crt_path("data2"));
	snprintf(lib, sizeof(lib), "%s", crt_path("libdel.so"));
	snprintf(exe, sizeof(exe), "%s", self);
	write_file(data, 1);
	write_file(data2, 2);
	fd = open(data, O_RDWR);
	priv = mmap(NULL, DATA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	shared = mmap(NULL, DATA_LEN - PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, PG);
	if (fd < 0 || priv == MAP_FAILED || shared == MAP_FAILED)
		crt_fail("map data: %s", strerror(errno));
	memset(priv + PG, 'P', PG);	  /* private page 1 */
	memset(shared + 2 * PG, 'S', PG); /* file page 3 */
	{
		int f2 = open(data2, O_RDONLY);

		priv2 = mmap(NULL, DATA_LEN, PROT_READ, MAP_PRIVATE, f2, 0);
		if (f2 < 0 || priv2 == MAP_FAILED)
			crt_fail("map data2: %s", strerror(errno));
		close(f2);
	}
	/* libm, copied and loaded a second time from the copy */
	if (!dladdr((void *)cos, &di) || !di.dli_fname)
		crt_fail("cannot find libm");
	copy_file(di.dli_fname, lib, 0755);
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	cosp = h ? (double (*)(double))dlsym(h, "cos") : NULL;
	if (!cosp || !dladdr((void *)cosp, &di) || strcmp(di.dli_fname, lib))
		crt_fail("dlopen %s: %s", lib, dlerror());
	crt_check(cosp(0.5) == cos(0.5), "cos of the copy differs");
	/* apt: data and the library removed, data2 replaced, the binary too */
	write_file(crt_path("data2.new"), 3);
	if (unlink(data) || unlink(lib) || rename(crt_path("data2.new"), data2) || unlink(exe))
		crt_fail("delete: %s", strerror(errno));

	child = fork();
	if (child == 0) {
		memset(priv + 2 * PG, 'C', PG); /* the child's own private page 2 */
		crt_wait_term();
		/* after the restore, the parent wrote 'M' in the shared page 5 */
		for (long i = 0; i < DATA_LEN; i++) {
			unsigned char w = i >= PG && i < 2 * PG	      ? 'P'
					  : i >= 2 * PG && i < 3 * PG ? 'C'
					  : i >= 3 * PG && i < 4 * PG ? 'S'
					  : i >= 5 * PG && i < 6 * PG ? 'M'
								      : pat(i, 1);
			if (priv[i] != w)
				_exit(10);
		}
		if (shared[4 * PG] != 'M' || mapped_ino(priv) != mapped_ino(shared) ||
		    !mapped_ino(priv))
			_exit(11);
		_exit(cosp(1.5) == cos(1.5) ? 0 : 12);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	/* the maps */
	check_map(priv, "rw-p", 0, data, "private data");
	check_map(shared, "rw-s", PG, data, "shared data");
	check_map(cosp, "r-xp", ~0UL, lib, "libdel.so");
	crt_check(map_of((void *)mapped, got, &(unsigned long){ 0 }, want, sizeof(want)) &&
			  !strcmp(want, strcat(strcpy(got, exe), " (deleted)")),
		  "the program's code maps %s", want);
	crt_check(readlink("/proc/self/exe", got, sizeof(got) - 1) > 0, "exe link");
	n = readlink("/proc/self/exe", got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = 0;
	snprintf(want, sizeof(want), "%s (deleted)", exe);
	crt_check(!strcmp(got, want), "exe is %s, expected %s", got, want);
	{
		char perms[8], path[4200];
		unsigned long off;
		size_t dl = strlen(crt_path(""));

		/* its name is taken: made beside it, deleted too */
		crt_check(map_of(priv2, perms, &off, path, sizeof(path)), "no data2 mapping");
		crt_check(!strncmp(path, crt_path(""), dl) && strstr(path, " (deleted)") &&
				  strlen(path) > dl + 10 &&
				  !strcmp(path + strlen(path) - 10, " (deleted)") &&
				  !strcmp(perms, "r--p"),
			  "data2 maps %s %s", perms, path);
		for (long i = 0; i < DATA_LEN; i++)
			crt_check(priv2[i] == pat(i, 2), "data2 byte %ld differs", i);
		fd = open(data2, O_RDONLY);
		crt_check(fd >= 0 && read(fd, buf, DATA_LEN) == DATA_LEN, "read the new data2");
		for (long i = 0; i < DATA_LEN; i++)
			crt_check(buf[i] == pat(i, 3), "the new data2 changed at %ld", i);
		close(fd);
	}
	/* contents, at the same addresses */
	for (long i = 0; i < DATA_LEN; i++) {
		unsigned char w = i >= PG && i < 2 * PG	      ? 'P'
				  : i >= 3 * PG && i < 4 * PG ? 'S'
							      : pat(i, 1);
		crt_check(priv[i] == w, "private data byte %ld is %#x, expected %#x", i, priv[i],
			  w);
	}
	for (long i = 0; i < DATA_LEN - PG; i++)
		crt_check(shared[i] == (i >= 2 * PG && i < 3 * PG ? 'S' : pat(i + PG, 1)),
			  "shared data byte %ld differs", i);
	/* one inode: the fd, both mappings, the child's */
	fd = -1;
	for (int k = 3; k < 64 && fd < 0; k++) {
		char l[64];

		snprintf(l, sizeof(l), "/proc/self/fd/%d", k);
		n = readlink(l, got, sizeof(got) - 1);
		got[n > 0 ? n : 0] = 0;
		snprintf(want, sizeof(want), "%s (deleted)", data);
		if (n > 0 && !strcmp(got, want))
			fd = k;
	}
	crt_check(fd >= 0, "the fd of data is gone");
	crt_check(fstat(fd, &st) == 0 && st.st_nlink == 0 && st.st_size == DATA_LEN &&
			  st.st_ino == mapped_ino(priv) && st.st_ino == mapped_ino(shared),
		  "data's fd and mappings are not one deleted file");
	memset(shared + 4 * PG, 'M', PG);
	crt_check(pread(fd, buf, PG, 5 * PG) == PG && buf[0] == 'M' && buf[PG - 1] == 'M',
		  "a write through the shared mapping does not reach the fd");
	crt_check(cosp(0.5) == cos(0.5), "cos of the copy differs after the restore");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st_child, 0) == child && WIFEXITED(st_child) &&
			  !WEXITSTATUS(st_child),
		  "the child found its mappings wrong (status %#x)", st_child);
	crt_pass();
}

static void sparse(void)
{
	static const unsigned long long at[3] = { 0, GIB, 2 * GIB - PG };
	unsigned char buf[PG];
	struct stat st;
	int fd = open(crt_path("sparse"), O_RDWR | O_CREAT | O_TRUNC, 0600);

	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < PG; i++)
			buf[i] = pat(i, k + 7);
		if (fd < 0 || pwrite(fd, buf, PG, at[k]) != PG)
			crt_fail("write sparse: %s", strerror(errno));
	}
	if (unlink(crt_path("sparse")) || fstat(fd, &st))
		crt_fail("unlink sparse: %s", strerror(errno));
	if (st.st_blocks * 512 > 1 << 20)
		crt_skip("this file system does not keep holes");
	crt_ready();
	crt_wait_term();
	crt_check(fstat(fd, &st) == 0 && st.st_nlink == 0 && st.st_size == (off_t)(2 * GIB),
		  "sparse: %lu links, %ld bytes", (unsigned long)st.st_nlink, (long)st.st_size);
	crt_check(st.st_blocks * 512 <= 64 * PG, "sparse lost its holes: %ld blocks",
		  (long)st.st_blocks);
	for (int k = 0; k < 3; k++) {
		crt_check(pread(fd, buf, PG, at[k]) == PG, "read sparse at %llu", at[k]);
		for (int i = 0; i < PG; i++)
			crt_check(buf[i] == pat(i, k + 7), "sparse byte %llu differs", at[k] + i);
	}
	crt_check(pread(fd, buf, PG, GIB / 2) == PG && !buf[0] && !memcmp(buf, buf + 1, PG - 1),
		  "the hole at 512 MiB holds data");
	crt_pass();
}

/* delmap big: a 3 MiB file mapped like a library's text (the size of the
 * libc apt replaces), closed and deleted: saved without any --ghost-limit
 * (a file only open is limited to 1 MiB by default, refuse-ghost-limit) */
static void big(void)
{
	const long len = 3L << 20;
	unsigned char *p, *buf = malloc(len);
	char perms[8], path[4096];
	unsigned long off;
	int fd = open(crt_path("libbig.so"), O_RDWR | O_CREAT | O_TRUNC, 0644);

	for (long i = 0; buf && i < len; i++)
		buf[i] = pat(i, 9);
	if (!buf || fd < 0 || write(fd, buf, len) != len)
		crt_fail("libbig.so: %s", strerror(errno));
	p = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED || close(fd) || unlink(crt_path("libbig.so")))
		crt_fail("map libbig.so: %s", strerror(errno));
	crt_ready();
	crt_wait_term();
	crt_check(map_of(p, perms, &off, path, sizeof(path)) && !strncmp(perms, "r-xp", 4),
		  "libbig.so is not mapped r-xp at %p after the restore", (void *)p);
	crt_check(strstr(path, "libbig.so (deleted)"), "libbig.so's mapping shows %s", path);
	crt_check(!memcmp(p, buf, len), "libbig.so's contents differ after the restore");
	crt_pass();
}

/* a mapped file deleted with its directory: refused at dump */
static void dir_gone(void)
{
	int fd;

	if (mkdir(crt_path("sub"), 0755))
		crt_fail("mkdir sub: %s", strerror(errno));
	write_file(crt_path("sub/data"), 4);
	fd = open(crt_path("sub/data"), O_RDONLY);
	if (fd < 0 || mmap(NULL, DATA_LEN, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED ||
	    unlink(crt_path("sub/data")) || rmdir(crt_path("sub")))
		crt_fail("sub/data: %s", strerror(errno));
	close(fd);
	crt_ready();
	crt_wait_term();
	crt_pass();
}

/* a child chrooted in a directory removed since: refused at dump */
static void root_gone(void)
{
	int p[2];
	pid_t child;
	char c;

	if (mkdir(crt_path("jail"), 0755) || pipe(p))
		crt_fail("jail: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		if (chroot(crt_path("jail")) || chdir("/") || write(p[1], "x", 1) != 1)
			_exit(1);
		crt_wait_term();
		_exit(0);
	}
	crt_own_child(child);
	if (read(p[0], &c, 1) != 1 || rmdir(crt_path("jail")))
		crt_fail("remove the jail: %s", strerror(errno));
	crt_ready();
	crt_wait_term();
	crt_pass();
}

static void cwd(bool orphan)
{
	char dir[4096], got[4200], want[4200];
	struct stat st, pst;
	pid_t child;
	int s;
	ssize_t n;

	snprintf(dir, sizeof(dir), "%s", crt_path(orphan ? "up/gone" : "gone"));
	if (orphan && mkdir(crt_path("up"), 0755))
		crt_fail("mkdir up: %s", strerror(errno));
	if (mkdir(dir, 0751) || chmod(dir, 0751) || chdir(dir) || rmdir(dir) ||
	    (orphan && rmdir(crt_path("up"))))
		crt_fail("gone: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		crt_wait_term();
		n = readlink("/proc/self/cwd", got, sizeof(got) - 1);
		got[n > 0 ? n : 0] = 0;
		snprintf(want, sizeof(want), "%s (deleted)", dir);
		if (strcmp(got, want) || stat(".", &st) || st.st_nlink)
			_exit(1);
		/* the one directory its parent works in, as before */
		snprintf(got, sizeof(got), "/proc/%d/cwd", (int)getppid());
		_exit(stat(got, &pst) == 0 && pst.st_ino == st.st_ino && pst.st_dev == st.st_dev
			      ? 0
			      : 2);
	}
	crt_own_child(child);
	crt_ready();
	crt_wait_term();
	n = readlink("/proc/self/cwd", got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = 0;
	snprintf(want, sizeof(want), "%s (deleted)", dir);
	crt_check(!strcmp(got, want), "cwd is %s, expected %s", got, want);
	crt_check(stat(".", &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 0 &&
			  (st.st_mode & 07777) == 0751,
		  "cwd: %lu links, mode %o", (unsigned long)st.st_nlink, st.st_mode & 07777);
	crt_check(access(dir, F_OK) && errno == ENOENT, "gone has a name again");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &s, 0) == child && WIFEXITED(s) && !WEXITSTATUS(s),
		  "the child's cwd is wrong (%#x)", s);
	crt_pass();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	crt_init();
	if (!strcmp(mode, "sparse"))
		sparse();
	if (!strcmp(mode, "cwd") || !strcmp(mode, "cwd-orphan"))
		cwd(!strcmp(mode, "cwd-orphan"));
	if (!strcmp(mode, "big"))
		big();
	if (!strcmp(mode, "dir-gone"))
		dir_gone();
	if (!strcmp(mode, "root-gone"))
		root_gone();
	if (!strcmp(mode, "copied"))
		mapped(argv[2]);
	/* run from a copy of ourselves, which is then deleted */
	{
		char self[4096];

		snprintf(self, sizeof(self), "%s", crt_path("delmap.bin"));
		copy_file("/proc/self/exe", self, 0755);
		execv(self, (char *[]){ argv[0], "copied", self, NULL });
		crt_fail("exec %s: %s", self, strerror(errno));
	}
}
