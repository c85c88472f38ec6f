/* Shared memory survives and stays shared: a MAP_SHARED|MAP_ANONYMOUS
 * region written before the dump by a parent and its child, and a memfd
 * mapping.  After the restore the parent writes a word that the child must
 * see and echo back through the same memory, and both check the contents.
 * The process also holds many fds, so the objects' descriptors must not
 * collide with restored ones. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define SZ  (1 << 20)
#define MSZ (64 << 10)

static volatile sig_atomic_t poked;
static void on_usr1(int s)
{
	(void)s;
	poked = 1;
}

int main(void)
{
	unsigned char *shared, *mfd;
	volatile uint64_t *ping, *pong;
	uint64_t h_shared, h_mfd;
	int memfd, st;
	pid_t child;

	crt_init();
	for (int i = 0; i < 8; i++)
		if (open("/dev/null", O_RDONLY) < 0)
			crt_fail("open: %s", strerror(errno));
	shared = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memfd = memfd_create("kupdate-test", 0);
	if (shared == MAP_FAILED || memfd < 0 || ftruncate(memfd, MSZ))
		crt_fail("cannot set up shared memory: %s", strerror(errno));
	mfd = mmap(NULL, MSZ, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	close(memfd); /* only the mapping keeps it */
	for (int i = 0; i < SZ / 2; i++)
		shared[i] = (unsigned char)(i * 3);
	for (int i = 0; i < MSZ; i++)
		mfd[i] = (unsigned char)(i * 5 + 1);
	ping = (uint64_t *)(shared + SZ - 64);
	pong = (uint64_t *)(shared + SZ - 128);

	signal(SIGUSR1, on_usr1);
	child = fork();
	if (child == 0) {
		for (int i = SZ / 2; i < SZ - 4096; i++)
			shared[i] = (unsigned char)(i * 7);
		*pong = 1; /* set up */
		while (!crt_term && !poked)
			pause();
		if (!poked)
			_exit(3);
		*pong = *ping; /* echo what the parent wrote after the restore */
		_exit(0);
	}
	while (*pong != 1)
		usleep(1000);
	h_shared = crt_hash(shared, SZ - 4096, 0);
	h_mfd = crt_hash(mfd, MSZ, 0);
	crt_ready();
	crt_wait_term();

	crt_check(crt_hash(shared, SZ - 4096, 0) == h_shared, "shared anonymous memory changed");
	crt_check(crt_hash(mfd, MSZ, 0) == h_mfd, "memfd memory changed");
	*ping = 0x5eedf00dULL;
	kill(child, SIGUSR1);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "child ended with %#x", st);
	crt_check(*pong == 0x5eedf00dULL,
		  "the child did not see the parent's write: memory is no longer shared (%#lx)",
		  (unsigned long)*pong);
	{
		char *maps = crt_read_file("/proc/self/maps", NULL);
		crt_check(maps && strstr(maps, "/memfd:kupdate-test"), "the memfd lost its name");
	}
	crt_pass();
}
