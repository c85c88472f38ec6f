/* Processes that share their cwd, root and umask (CLONE_FS) still share
 * them after the restore: two children were cloned with CLONE_FS; after
 * the restore the first changes directory and umask, and the parent and
 * the second child see both.  A third child, forked normally, keeps its
 * own. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

int main(void)
{
	char dir[1024], cwd[PATH_MAX];
	pid_t shared, shared2, own;
	int st;

	snprintf(dir, sizeof(dir), "%s", crt_init());
	if (chdir(dir) || mkdir("sub", 0755))
		crt_fail("setup: %s", strerror(errno));
	umask(022);
	/* like fork(2), with CLONE_FS */
	shared = syscall(SYS_clone, CLONE_FS | SIGCHLD, 0, NULL, NULL, 0);
	if (shared < 0)
		crt_fail("clone: %s", strerror(errno));
	if (shared == 0) {
		crt_wait_term();
		umask(077);
		_exit(chdir("sub") ? 1 : 0);
	}
	crt_own_child(shared);
	shared2 = syscall(SYS_clone, CLONE_FS | SIGCHLD, 0, NULL, NULL, 0);
	if (shared2 < 0)
		crt_fail("clone: %s", strerror(errno));
	if (shared2 == 0) {
		crt_wait_term();
		_exit(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd + strlen(dir), "/sub") &&
				      umask(0) == 077
			      ? 0
			      : 1);
	}
	crt_own_child(shared2);
	own = fork();
	if (own == 0) {
		crt_wait_term();
		_exit(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, dir) && umask(0) == 022 ? 0 : 1);
	}
	crt_own_child(own);

	crt_ready();
	crt_wait_term();

	kill(shared, SIGTERM);
	crt_check(waitpid(shared, &st, 0) == shared && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the sharing child failed (%#x)", st);
	crt_check(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd + strlen(dir), "/sub"),
		  "the child's chdir did not move us: we are in %s", cwd);
	/* (umask(2) sets it too: put it back for the second child) */
	crt_check(umask(077) == 077, "the child's umask did not change ours");
	kill(shared2, SIGTERM);
	crt_check(waitpid(shared2, &st, 0) == shared2 && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the second sharing child does not see the first one's cwd and umask (%#x)", st);
	kill(own, SIGTERM);
	crt_check(waitpid(own, &st, 0) == own && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the other child's cwd or umask changed (%#x)", st);
	crt_pass();
}
