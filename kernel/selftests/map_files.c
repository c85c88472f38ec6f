// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/PID/map_files: opening a link gives the mapped file (same inode);
 * two tasks sharing an anonymous shared mapping see the same inode.
 */
#include "ktap.h"
#include "util.h"
#include <sys/mman.h>
#include <sys/stat.h>

static int stat_map(pid_t pid, void *start, size_t len, struct stat *st)
{
	char path[128];
	int fd, err = 0;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, (unsigned long)start,
		 (unsigned long)start + len);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st))
		err = -errno;
	close(fd);
	return err;
}

int main(void)
{
	const size_t len = 4 * 4096;
	char tmpl[] = "/tmp/map_files.XXXXXX", link[256], path[128];
	struct stat fst, mst, pst, cst, ost;
	void *fmap, *shm, *other;
	int fd, pipefd[2], rpipe[2], ok;
	ssize_t n;
	pid_t pid;

	ktap_plan(6);

	fd = mkstemp(tmpl);
	if (fd < 0 || ftruncate(fd, len) || fstat(fd, &fst))
		ktap_bail("temporary file");
	fmap = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (fmap == MAP_FAILED)
		ktap_bail("mmap file");

	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)fmap,
		 (unsigned long)fmap + len);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	ktap_ok(n > 0 && !strcmp(link, tmpl),
		"map_files: link of a file mapping names the file (%s)", link);

	ok = !stat_map(getpid(), fmap, len, &mst) && mst.st_ino == fst.st_ino &&
	     mst.st_dev == fst.st_dev;
	ktap_ok(ok, "map_files: opening the link gives the mapped file's inode (%lu)",
		(unsigned long)fst.st_ino);
	unlink(tmpl);
	ktap_ok(!stat_map(getpid(), fmap, len, &mst) && mst.st_ino == fst.st_ino,
		"map_files: still opens after the file was unlinked");

	shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	other = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED || other == MAP_FAILED || pipe(pipefd) || pipe(rpipe))
		ktap_bail("mmap shared anonymous");
	pid = fork();
	if (pid == 0) {
		char c;

		/* Child: report its own view, then wait to be looked at */
		if (stat_map(getpid(), shm, len, &cst))
			cst.st_ino = 0;
		if (write(pipefd[1], &cst, sizeof(cst)) != sizeof(cst))
			_exit(1);
		if (read(rpipe[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	if (read(pipefd[0], &cst, sizeof(cst)) != sizeof(cst))
		ktap_bail("child");
	ok = !stat_map(getpid(), shm, len, &pst) && cst.st_ino && pst.st_ino == cst.st_ino &&
	     pst.st_dev == cst.st_dev;
	ktap_ok(ok,
		"map_files: parent and child see the same inode for a shared anonymous mapping "
		"(%lu, %lu)",
		(unsigned long)pst.st_ino, (unsigned long)cst.st_ino);
	ok = !stat_map(pid, shm, len, &cst) && cst.st_ino == pst.st_ino;
	ktap_ok(ok, "map_files: the child's mapping seen through /proc/<child>/map_files has that "
		    "inode");
	ok = !stat_map(getpid(), other, len, &ost) && ost.st_ino != pst.st_ino;
	ktap_ok(ok, "map_files: another shared anonymous mapping has another inode (%lu)",
		(unsigned long)ost.st_ino);
	if (write(rpipe[1], "x", 1) != 1)
		ktap_info("could not release the child");
	wait_child(pid);

	return ktap_finish();
}
