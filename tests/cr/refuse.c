/* A state the engine cannot checkpoint yet must make the dump refuse with
 * a message naming it, and leave the process running untouched: this
 * program holds such a state (argv[1] says which), keeps counting, and
 * checks after SIGTERM that it kept running through the failed dump. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <linux/netlink.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crt.h"

static volatile uint64_t count;

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "netlink";
	uint64_t before;

	crt_init();
	if (!strcmp(what, "netlink")) {
		if (socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE) < 0)
			crt_fail("socket: %s", strerror(errno));
	} else if (!strcmp(what, "eventfd")) {
		if (eventfd(3, 0) < 0)
			crt_fail("eventfd: %s", strerror(errno));
	} else {
		crt_fail("unknown state %s", what);
	}
	crt_ready();
	while (!crt_term)
		count++;
	before = count;
	for (int i = 0; i < 1000; i++)
		count++;
	crt_check(count == before + 1000, "counter broken");
	crt_check(before > 1000000, "the process hardly ran (%lu)", (unsigned long)before);
	crt_pass();
}
