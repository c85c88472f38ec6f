/* A signalfd survives with its mask: SIGUSR1 and SIGRTMIN+2 (and glibc's
 * reserved signal 33) are read through it after the restore; SIGUSR2,
 * blocked but not in its mask, is not.  A non-blocking second signalfd
 * with another mask is inherited by a child and reads the child's own
 * signals. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static uint64_t fdinfo_mask(int fd)
{
	char path[64], *buf, *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	buf = crt_read_file(path, NULL);
	p = buf ? strstr(buf, "sigmask:") : NULL;
	return p ? strtoull(p + 8, NULL, 16) : 0;
}

int main(void)
{
	sigset_t set;
	struct signalfd_siginfo si;
	uint64_t want = (1ULL << (SIGUSR1 - 1)) | (1ULL << (SIGRTMIN + 2 - 1)) | (1ULL << 32);
	uint64_t raw = want;
	int sfd, sfd2, st;
	pid_t child;
	struct pollfd pfd;

	crt_init();
	/* everything but SIGTERM, 32 and 33 included (glibc's sigprocmask
	 * will not block those) */
	{
		uint64_t m = ~(1ULL << (SIGTERM - 1));

		if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &m, NULL, 8))
			crt_fail("rt_sigprocmask: %s", strerror(errno));
	}
	/* the kernel's view of the set, signal 33 included */
	sigemptyset(&set);
	memcpy(&set, &raw, 8);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sfd2 = signalfd(-1, &set, SFD_NONBLOCK);
	if (sfd < 0 || sfd2 < 0)
		crt_fail("signalfd: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		crt_wait_term();
		kill(getpid(), SIGUSR2);
		if (read(sfd2, &si, sizeof(si)) != sizeof(si) || si.ssi_signo != SIGUSR2)
			_exit(1);
		_exit(read(sfd2, &si, sizeof(si)) < 0 && errno == EAGAIN ? 0 : 2);
	}
	crt_own_child(child);

	crt_ready();
	crt_wait_term();

	crt_check(fdinfo_mask(sfd) == want, "the mask is %#lx, expected %#lx",
		  (unsigned long)fdinfo_mask(sfd), (unsigned long)want);
	crt_check(fcntl(sfd2, F_GETFL) & O_NONBLOCK, "sfd2 lost O_NONBLOCK");
	kill(getpid(), SIGUSR2);
	kill(getpid(), SIGUSR1);
	kill(getpid(), SIGRTMIN + 2);
	kill(getpid(), 33);
	crt_check(read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo == SIGUSR1,
		  "SIGUSR1 was not read through the signalfd");
	crt_check(read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo == 33,
		  "signal 33 was not read through the signalfd (got %u)", si.ssi_signo);
	crt_check(read(sfd, &si, sizeof(si)) == sizeof(si) &&
			  si.ssi_signo == (unsigned)SIGRTMIN + 2,
		  "SIGRTMIN+2 was not read through the signalfd (got %u)", si.ssi_signo);
	pfd.fd = sfd;
	pfd.events = POLLIN;
	crt_check(poll(&pfd, 1, 0) == 0, "the signalfd reads SIGUSR2, which is not in its mask");
	kill(child, SIGTERM);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child's signalfd failed (%#x)", st);
	crt_pass();
}
