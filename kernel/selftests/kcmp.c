// SPDX-License-Identifier: GPL-2.0
/*
 * kcmp(): KCMP_FILE (same open file description), KCMP_VM (same mm),
 * KCMP_FILES (same fd table); 0 means equal, 1/2 order, 3 not equal.
 */
#include "ktap.h"
#include "util.h"
#include <linux/kcmp.h>
#include <pthread.h>

static long kcmp(pid_t a, pid_t b, int type, unsigned long x, unsigned long y)
{
	return syscall(SYS_kcmp, a, b, type, x, y);
}

static pid_t thread_tid;
static int release_pipe[2];

static void *thread_fn(void *arg)
{
	char c;

	(void)arg;
	thread_tid = syscall(SYS_gettid);
	if (read(release_pipe[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

int main(void)
{
	pid_t self = getpid(), child;
	int fd1, fd2, fd3, sync_pipe[2];
	pthread_t th;
	long r1, r2;

	ktap_plan(9);

	fd1 = open("/proc/self/stat", O_RDONLY);
	fd2 = dup(fd1);
	fd3 = open("/proc/self/stat", O_RDONLY);
	if (fd1 < 0 || fd2 < 0 || fd3 < 0 || pipe(release_pipe) || pipe(sync_pipe))
		ktap_bail("setup");

	ktap_ok(kcmp(self, self, KCMP_FILE, fd1, fd2) == 0,
		"KCMP_FILE: an fd and its dup are equal");
	r1 = kcmp(self, self, KCMP_FILE, fd1, fd3);
	r2 = kcmp(self, self, KCMP_FILE, fd3, fd1);
	ktap_ok((r1 == 1 && r2 == 2) || (r1 == 2 && r2 == 1),
		"KCMP_FILE: two opens of one file differ, with a consistent order (%ld/%ld)", r1,
		r2);
	ktap_ok(kcmp(self, self, KCMP_FILE, fd1, 999) < 0 && errno == EBADF,
		"KCMP_FILE: a closed fd gives EBADF");

	if (pthread_create(&th, NULL, thread_fn, NULL))
		ktap_bail("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);

	child = fork();
	if (child == 0) {
		char c;

		if (read(sync_pipe[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}

	ktap_ok(kcmp(self, thread_tid, KCMP_VM, 0, 0) == 0, "KCMP_VM: a thread shares the mm");
	r1 = kcmp(self, child, KCMP_VM, 0, 0);
	ktap_ok(r1 == 1 || r1 == 2, "KCMP_VM: a forked child has another mm (%ld)", r1);
	ktap_ok(kcmp(self, thread_tid, KCMP_FILES, 0, 0) == 0,
		"KCMP_FILES: a thread shares the fd table");
	r1 = kcmp(self, child, KCMP_FILES, 0, 0);
	ktap_ok(r1 == 1 || r1 == 2, "KCMP_FILES: a forked child has its own fd table (%ld)", r1);
	ktap_ok(kcmp(self, child, KCMP_FILE, fd1, fd1) == 0,
		"KCMP_FILE: a forked child's inherited fd is the same file");
	ktap_ok(kcmp(self, child, KCMP_FS, 0, 0) != 0 && kcmp(self, thread_tid, KCMP_FS, 0, 0) == 0,
		"KCMP_FS: shared with the thread, not with the forked child");

	if (write(sync_pipe[1], "x", 1) != 1 || write(release_pipe[1], "x", 1) != 1)
		ktap_info("release failed");
	wait_child(child);
	pthread_join(th, NULL);
	return ktap_finish();
}
