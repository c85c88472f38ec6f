/* eventfds survive with their counters and flags:
 *  - a plain counter at 5;
 *  - an EFD_SEMAPHORE counter at 3, non-blocking: three reads of 1, then
 *    EAGAIN;
 *  - a counter above 2^32 (eventfd(2) itself takes an unsigned int);
 *  - a counter at 0 shared with a child (fork): what the child writes
 *    after the restore, the parent reads. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define BIG 0x123456789abULL

int main(void)
{
	int plain, sem, big, shared, st;
	uint64_t v;
	pid_t child;

	crt_init();
	plain = eventfd(5, 0);
	sem = eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
	big = eventfd(0, EFD_CLOEXEC);
	shared = eventfd(0, 0);
	v = BIG;
	if (plain < 0 || sem < 0 || big < 0 || shared < 0 || write(big, &v, 8) != 8)
		crt_fail("eventfd: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		crt_wait_term();
		v = 42;
		_exit(write(shared, &v, 8) == 8 ? 0 : 1);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	crt_check(!(fcntl(plain, F_GETFL) & O_NONBLOCK), "plain gained O_NONBLOCK");
	crt_check(fcntl(sem, F_GETFL) & O_NONBLOCK, "the semaphore lost O_NONBLOCK");
	crt_check(fcntl(big, F_GETFD) & FD_CLOEXEC, "big lost FD_CLOEXEC");
	crt_check(read(plain, &v, 8) == 8 && v == 5, "plain read %lu, expected 5",
		  (unsigned long)v);
	for (int i = 0; i < 3; i++)
		crt_check(read(sem, &v, 8) == 8 && v == 1,
			  "semaphore read %d gave %lu: EFD_SEMAPHORE or its count was lost", i,
			  (unsigned long)v);
	crt_check(read(sem, &v, 8) < 0 && errno == EAGAIN, "the semaphore holds more than 3");
	crt_check(read(big, &v, 8) == 8 && v == BIG, "big read %#lx, expected %#llx",
		  (unsigned long)v, BIG);
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child could not write");
	crt_check(read(shared, &v, 8) == 8 && v == 42,
		  "the shared eventfd read %lu: not one object with the child's", (unsigned long)v);
	crt_pass();
}
