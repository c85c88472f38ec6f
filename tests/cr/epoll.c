/* An epoll instance survives with its targets, their events and data,
 * whatever they are:
 *  - an eventfd with a count (EPOLLIN, data 0x1111), ready;
 *  - the read end of a pipe holding data (EPOLLIN | EPOLLET), ready;
 *  - a socketpair end (EPOLLOUT, data 0x3333), ready;
 *  - a timerfd not armed (EPOLLIN), not ready;
 *  - another epoll watching an eventfd with a count, ready;
 *  - one file registered under two numbers (fd 40 and its dup 41), with
 *    different data;
 *  - an eventfd with a count registered as fd 50, which was closed since
 *    (the eventfd is still open under another number);
 *  - a pipe holding data registered as fd 51, which is another eventfd
 *    since (dup2 over it);
 * and the epoll is shared with a child (fork), which waits on it too.
 * After the restore the same targets are listed in fdinfo, epoll_wait
 * reports the ready ones with their data, EPOLL_CTL_ADD of a registered
 * number fails with EEXIST and EPOLL_CTL_MOD of it works; fd 50 is still
 * closed and fd 51 still the other eventfd. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static void add(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		crt_fail("epoll_ctl ADD %d: %s", fd, strerror(errno));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the "tfd: ... data: ..." part of each target line, sorted (the kernel
 * lists them in the order of the files' addresses) */
static char *targets(int ep)
{
	char path[64], *buf, *out, *l, *save = NULL, *lines[64];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	buf = crt_read_file(path, NULL);
	if (!buf)
		crt_fail("cannot read %s", path);
	out = calloc(1, strlen(buf) + 1);
	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *pos = strstr(l, " pos:");

		if (strncmp(l, "tfd:", 4))
			continue;
		if (pos)
			*pos = 0;
		if (n < 64)
			lines[n++] = l;
	}
	qsort(lines, n, sizeof(*lines), cmp_str);
	for (int i = 0; i < n; i++) {
		strcat(out, lines[i]);
		strcat(out, "\n");
	}
	free(buf);
	return out;
}

static uint64_t ready_mask(int ep, int timeout)
{
	struct epoll_event ev[16];
	uint64_t seen = 0;
	int n = epoll_wait(ep, ev, 16, timeout);

	for (int i = 0; i < n; i++)
		seen |= 1ULL << (ev[i].data.u64 & 0x3f);
	return seen;
}

int main(void)
{
	int ep, inner, efd, efd2, p[2], sp[2], tfd, f40, st, e50, p51[2], e51;
	char *before, *after;
	uint64_t one = 1, seen;
	pid_t child;
	struct epoll_event ev;

	crt_init();
	ep = epoll_create1(0);
	inner = epoll_create1(EPOLL_CLOEXEC);
	efd = eventfd(3, 0);
	efd2 = eventfd(1, EFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	if (ep < 0 || inner < 0 || efd < 0 || efd2 < 0 || tfd < 0 || pipe(p) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
		crt_fail("setup: %s", strerror(errno));
	if (write(p[1], "x", 1) != 1)
		crt_fail("write");
	f40 = eventfd(0, 0);
	if (f40 < 0 || dup2(f40, 40) != 40 || dup2(40, 41) != 41)
		crt_fail("dup2");
	close(f40);
	/* data: low 6 bits name the target in ready_mask */
	add(ep, efd, EPOLLIN, 0x1100 | 1);
	add(ep, p[0], EPOLLIN | EPOLLET, 0x2200 | 2);
	add(ep, sp[0], EPOLLOUT, 0x3300 | 3);
	add(ep, tfd, EPOLLIN, 0x4400 | 4);
	add(inner, efd2, EPOLLIN, 0x5500 | 5);
	add(ep, inner, EPOLLIN, 0x6600 | 6);
	add(ep, 40, 0, 0x7700 | 7);
	add(ep, 41, EPOLLIN | EPOLLONESHOT, 0x8800 | 8);
	e50 = eventfd(5, 0);
	e51 = eventfd(0, EFD_NONBLOCK);
	if (e50 < 0 || e51 < 0 || pipe(p51) || write(p51[1], "y", 1) != 1 || dup2(e50, 50) != 50)
		crt_fail("setup 50/51: %s", strerror(errno));
	add(ep, 50, EPOLLIN, 0x9900 | 9);
	close(50);
	if (dup2(p51[0], 51) != 51)
		crt_fail("dup2 51");
	add(ep, 51, EPOLLIN, 0xaa00 | 10);
	if (dup2(e51, 51) != 51)
		crt_fail("dup2 51");
	before = targets(ep);

	child = fork();
	if (child == 0) {
		crt_wait_term();
		/* the same instance: it sees the same ready targets */
		_exit(ready_mask(ep, 0) & (1 << 1 | 1 << 3) ? 0 : 1);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	after = targets(ep);
	crt_check(!strcmp(before, after), "the targets differ:\nbefore:\n%safter:\n%s", before,
		  after);
	seen = ready_mask(ep, 100);
	crt_check(seen == (1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 9 | 1 << 10),
		  "ready targets %#lx, expected eventfd, pipe, socket, the inner epoll and the "
		  "targets registered as 50 and 51 (%#x)",
		  (unsigned long)seen, 1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 9 | 1 << 10);
	crt_check(fcntl(50, F_GETFD) < 0 && errno == EBADF, "fd 50 is open");
	crt_check((fcntl(51, F_GETFL) & O_NONBLOCK) && read(51, &one, 8) < 0 && errno == EAGAIN,
		  "fd 51 is not the empty non-blocking eventfd any more");
	one = 1;
	crt_check(ready_mask(inner, 0) == 1 << 5, "the inner epoll lost its eventfd");
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	crt_check(epoll_ctl(ep, EPOLL_CTL_ADD, 41, &ev) < 0 && errno == EEXIST,
		  "fd 41 is not registered");
	crt_check(epoll_ctl(ep, EPOLL_CTL_MOD, 40, &ev) == 0, "fd 40 cannot be modified: %s",
		  strerror(errno));
	crt_check(epoll_ctl(ep, EPOLL_CTL_DEL, tfd, NULL) == 0, "the timerfd cannot be removed");
	crt_check(write(efd, &one, 8) == 8, "eventfd write");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child's epoll is not the same (%#x)", st);
	crt_pass();
}
