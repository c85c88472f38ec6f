/* A child in another control group than its parent's (as a login session's
 * processes are below sshd's listener): restored with --cgroup CHILD=DIR,
 * the child is made in DIR, its own child follows it there (born after it,
 * from it), and the root and a second child stay in the root's control
 * group.  The control group is one the test makes below its own (cgroup
 * v2), removed at the end; no cgroup v2 to write to: SKIP. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static char dir[1100];
static pid_t grandchild;

/* at exit, after the children are killed (registered before them): the
 * grandchild too, then the control group, once it is empty */
static void remove_cgroup(void)
{
	if (grandchild > 0)
		kill(grandchild, SIGKILL);
	for (int i = 0; i < 200 && rmdir(dir) && errno == EBUSY; i++)
		usleep(10000);
}

static void sleeper(void)
{
	crt_wait_term();
	_exit(0);
}

int main(void)
{
	char mnt[512], procs[1200], own[512], sub[600], buf[32];
	pid_t a, b, c;
	int fd, st;

	crt_init();
	if (crt_cgroup2_mount(mnt, sizeof(mnt)))
		crt_skip("no cgroup2 mount");
	snprintf(own, sizeof(own), "%s", crt_cgroup_of(getpid()));
	snprintf(dir, sizeof(dir), "%s%s/kupdate-crt-%d", mnt, strcmp(own, "/") ? own : "",
		 getpid());
	if (mkdir(dir, 0755))
		crt_skip("cannot make the control group %s: %s", dir, strerror(errno));
	atexit(remove_cgroup);
	snprintf(sub, sizeof(sub), "%s/kupdate-crt-%d", strcmp(own, "/") ? own : "", getpid());

	a = fork();
	if (a == 0)
		sleeper();
	crt_own_child(a);
	b = fork();
	if (b == 0) {
		/* in the control group before its child is born */
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		fd = open(procs, O_WRONLY);
		if (fd < 0 || write(fd, "0", 1) != 1)
			_exit(3);
		close(fd);
		c = fork();
		if (c == 0)
			sleeper();
		crt_wait_term();
		kill(c, SIGTERM);
		_exit(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 4);
	}
	crt_own_child(b);
	/* wait for b's child, and for b to be in its control group */
	for (int i = 0; i < 500; i++) {
		char kids[64];
		char *t;

		snprintf(kids, sizeof(kids), "/proc/%d/task/%d/children", b, b);
		t = crt_read_file(kids, NULL);
		c = t ? atoi(t) : 0;
		free(t);
		if (c > 0 && !strcmp(crt_cgroup_of(b), sub))
			break;
		c = 0;
		usleep(10000);
	}
	if (!c)
		crt_fail("the child %d did not enter %s or fork", b, sub);
	grandchild = c;
	snprintf(buf, sizeof(buf), "%d=", b);
	fd = open(crt_path("cgroup"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dprintf(fd, "%s%s\n", buf, dir) < 0)
		crt_fail("cannot write %s", crt_path("cgroup"));
	close(fd);

	crt_ready();
	crt_wait_term();

	crt_check(!strcmp(crt_cgroup_of(b), sub), "the child %d is in %s, not %s", b,
		  crt_cgroup_of(b), sub);
	crt_check(!strcmp(crt_cgroup_of(c), sub), "its child %d is in %s, not %s", c,
		  crt_cgroup_of(c), sub);
	crt_check(!strcmp(crt_cgroup_of(a), crt_cgroup_of(getpid())),
		  "the second child %d is in %s, not in the root's %s", a, crt_cgroup_of(a),
		  crt_cgroup_of(getpid()));
	kill(a, SIGTERM);
	kill(b, SIGTERM);
	crt_check(waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the second child did not end well (%#x)", st);
	crt_check(waitpid(b, &st, 0) == b && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child in the control group did not end well (%#x)", st);
	grandchild = 0; /* reaped by b */
	crt_pass();
}
