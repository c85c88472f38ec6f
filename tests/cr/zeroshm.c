/* Pages of zeros in shared memory objects are left out of the images too,
 * and come back as zeros: a shared anonymous mapping, a memfd and a System
 * V segment (marked for removal, as programs often do), each written with a
 * pattern, then every page but one in 7 zeroed again; one page of each
 * keeps only its last byte.  The runner bounds the image size
 * (--max-image-kb): the 44 MiB would be written whole without the check.
 * After the restore every byte is checked, and the three objects are still
 * shared with a child that writes into them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"
#include "zeropat.h"

#define PG ZP_PG

struct obj {
	const char *what;
	unsigned long pages;
	volatile unsigned char *p;
};

static void check(const struct obj *o)
{
	for (unsigned long i = 0; i < o->pages; i++)
		for (unsigned long k = 0; k < PG; k++) {
			/* page 1, byte 1: the child's write, after the restore */
			unsigned char want = i == 1 && k == 1 ? 0x5a : zp_want(i, k);

			crt_check(o->p[i * PG + k] == want, "%s: page %lu byte %lu: %#x, not %#x",
				  o->what, i, k, o->p[i * PG + k], want);
		}
}

int main(void)
{
	struct obj o[3] = {
		{ "shared anonymous mapping", 8192, NULL }, /* 32 MiB */
		{ "memfd", 2048, NULL },		    /* 8 MiB */
		{ "System V segment", 1024, NULL },	    /* 4 MiB */
	};
	int fd, id, status;
	pid_t child;

	crt_init();
	o[0].p = mmap(NULL, o[0].pages * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	fd = memfd_create("zeroshm", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, o[1].pages * PG))
		crt_fail("memfd: %s", strerror(errno));
	o[1].p = mmap(NULL, o[1].pages * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	id = shmget(IPC_PRIVATE, o[2].pages * PG, IPC_CREAT | 0600);
	if (id < 0)
		crt_fail("shmget: %s", strerror(errno));
	o[2].p = shmat(id, NULL, 0);
	if (o[0].p == MAP_FAILED || o[1].p == MAP_FAILED || o[2].p == (void *)-1)
		crt_fail("cannot map the objects: %s", strerror(errno));
	if (shmctl(id, IPC_RMID, NULL))
		crt_fail("IPC_RMID: %s", strerror(errno));
	for (int i = 0; i < 3; i++) {
		zp_write(o[i].p, o[i].pages);
		zp_zero(o[i].p, o[i].pages);
	}

	/* a child sharing the three: after the restore it writes into each */
	child = fork();
	if (child < 0)
		crt_fail("fork: %s", strerror(errno));
	if (!child) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		while (sigwait(&set, &sig))
			;
		for (int i = 0; i < 3; i++)
			o[i].p[PG + 1] = 0x5a;
		_exit(0);
	}
	crt_own_child(child);
	crt_ready();
	crt_wait_term();

	kill(child, SIGUSR1);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		crt_fail("the child did not write into the objects");
	for (int i = 0; i < 3; i++)
		check(&o[i]);
	crt_pass();
}
