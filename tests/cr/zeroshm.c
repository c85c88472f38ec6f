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

#define PG	 4096UL
#define LASTBYTE 5 /* the page that keeps only its last byte */

struct obj {
	const char *what;
	unsigned long pages;
	volatile unsigned char *p;
};

static unsigned char pattern(unsigned long page, unsigned long k)
{
	return (unsigned char)(1 + (page * 31 + k) % 251);
}

static bool kept(unsigned long page)
{
	return page % 7 == 0;
}

static void fill(struct obj *o)
{
	for (unsigned long i = 0; i < o->pages; i++) {
		for (unsigned long k = 0; k < PG; k += 512)
			o->p[i * PG + k] = pattern(i, k);
		o->p[i * PG + PG - 1] = pattern(i, PG - 1);
	}
	for (unsigned long i = 0; i < o->pages; i++)
		if (!kept(i))
			memset((void *)(o->p + i * PG), 0, i == LASTBYTE ? PG - 1 : PG);
}

static void check(const struct obj *o)
{
	for (unsigned long i = 0; i < o->pages; i++)
		for (unsigned long k = 0; k < PG; k++) {
			unsigned char want = 0;

			if (kept(i) && k % 512 == 0)
				want = pattern(i, k);
			if ((kept(i) || i == LASTBYTE) && k == PG - 1)
				want = pattern(i, k);
			if (i == 1 && k == 1)
				want = 0x5a; /* the child's write, after the restore */
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
	for (int i = 0; i < 3; i++)
		fill(&o[i]);

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
