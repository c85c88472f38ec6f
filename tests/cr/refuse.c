/* A state the engine cannot checkpoint yet must make the dump refuse with
 * a message naming it, and leave the process running untouched: this
 * program holds such a state (argv[1] says which), keeps counting, and
 * checks after SIGTERM that it kept running through the failed dump. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/io_uring.h>
#include <linux/netlink.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static volatile uint64_t count;
static pid_t child;

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "netlink";
	uint64_t before;

	crt_init();
	if (!strcmp(what, "netlink")) {
		if (socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE) < 0)
			crt_fail("socket: %s", strerror(errno));
	} else if (!strcmp(what, "iouring")) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		if (syscall(SYS_io_uring_setup, 4, &p) < 0)
			crt_fail("io_uring_setup: %s", strerror(errno));
	} else if (!strcmp(what, "clonefiles")) {
		/* a child sharing our fd table, like fork(2) otherwise */
		child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (child < 0)
			crt_fail("clone: %s", strerror(errno));
		if (child == 0) {
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
	} else if (!strcmp(what, "mntns")) {
		/* a private mount namespace, as a sandboxed unit has */
		if (unshare(CLONE_NEWNS))
			crt_fail("unshare: %s", strerror(errno));
	} else if (!strcmp(what, "ptrace")) {
		/* a child traced by this process: a tracer inside the tree */
		int st;

		child = fork();
		if (child < 0)
			crt_fail("fork: %s", strerror(errno));
		if (child == 0) {
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
		if (ptrace(PTRACE_SEIZE, child, 0, 0))
			crt_fail("PTRACE_SEIZE: %s", strerror(errno));
		(void)st;
	} else if (!strcmp(what, "vfork")) {
		/* a child between vfork() and exec: it runs on our memory while we
		 * wait; it gets us ready and goes after 4 s */
		pid_t c = vfork();

		if (c == 0) {
			struct timespec ts = { 4, 0 };

			crt_ready();
			syscall(SYS_nanosleep, &ts, NULL);
			_exit(42);
		}
		if (c < 0)
			crt_fail("vfork: %s", strerror(errno));
		{
			int st;

			crt_check(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 42,
				  "the vfork child ended with %#x", st);
		}
		crt_wait_term();
		crt_pass();
	} else if (!strcmp(what, "none")) {
		/* the state comes from the runner (e.g. kupdate's own limits) */
	} else {
		crt_fail("unknown state %s", what);
	}
	crt_ready();
	while (!crt_term)
		count++;
	before = count;
	for (int i = 0; i < 1000; i++)
		count++;
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	crt_check(count == before + 1000, "counter broken");
	crt_check(before > 1000000, "the process hardly ran (%lu)", (unsigned long)before);
	crt_pass();
}
