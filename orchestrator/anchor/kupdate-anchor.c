/* kupdate-anchor: the namespaces of a preserved unit, as systemd builds
 * them from the unit's configuration in the boot that restores it.
 *
 * kupdate-generator's drop-in runs it as the unit's ExecStartPre=, with no
 * prefix: systemd applies the unit's whole sandboxing to it (its mount,
 * UTS and IPC namespaces, its private /tmp, its user, seccomp filter and
 * capability bounding set).  It forks a child that stays in the unit's
 * cgroup, holding the namespaces, and returns; `kupdate restore-unit`
 * (ExecStart=, run with full privileges in the same cgroup) finds the
 * child, checks the unit's namespaces against the ones its tree had,
 * restores the tree into them and ends the child.  The child ends by
 * itself after SECONDS (default 900) whatever happens.
 *
 * It runs under the unit's system call filter: it calls only what every
 * filter systemd offers (@system-service) lets through, fork, a sleep and
 * exit.  It is installed under /usr/lib, which a unit's ExecPaths= allows
 * whenever its program can load its libraries. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long secs = argc > 1 ? strtol(argv[1], NULL, 10) : 900;
	struct timespec end;
	pid_t pid;

	if (secs <= 0 || secs > 86400) {
		fprintf(stderr, "usage: kupdate-anchor [SECONDS]\n");
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("kupdate-anchor: fork");
		return 1;
	}
	if (pid > 0)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL))
		;
	return 0;
}
