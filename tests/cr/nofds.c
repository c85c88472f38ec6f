/* A process with no file descriptors at all (a daemon that closed them
 * all): its child here.  After the restore it runs, still without any fd. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	if (!d)
		crt_fail("%s: %s", path, strerror(errno));
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void)
{
	int st, ready[2];
	pid_t child;
	char c;

	crt_init();
	if (pipe(ready))
		crt_fail("pipe: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		close(ready[0]);
		for (int fd = 0; fd < 1024; fd++)
			if (fd != ready[1])
				close(fd);
		close(ready[1]); /* the parent reads EOF: no fd left */
		for (;;)
			pause();
	}
	crt_own_child(child);
	close(ready[1]);
	if (read(ready[0], &c, 1) != 0)
		crt_fail("the child did not close its fds");
	close(ready[0]);
	crt_check(count_fds(child) == 0, "the child holds %d fds before the dump",
		  count_fds(child));

	crt_ready();
	crt_wait_term();

	crt_check(kill(child, 0) == 0, "the child is gone after the restore");
	crt_check(count_fds(child) == 0, "the child holds %d fds after the restore",
		  count_fds(child));
	kill(child, SIGKILL);
	crt_check(waitpid(child, &st, 0) == child && WIFSIGNALED(st),
		  "the child did not end by the signal");
	crt_pass();
}
