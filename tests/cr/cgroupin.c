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

/* the cgroup v2 line of /proc/PID/cgroup ("0::PATH"), static buffer */
static const char *cgroup_of(pid_t pid)
{
	static char line[2][512];
	static int next;
	char *b = line[next++ % 2], path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	b[0] = 0;
	f = fopen(path, "r");
	while (f && fgets(b, 512, f))
		if (!strncmp(b, "0::", 3)) {
			b[strcspn(b, "\n")] = 0;
			memmove(b, b + 3, strlen(b + 3) + 1);
			break;
		}
	if (f)
		fclose(f);
	return b;
}

/* where cgroup2 is mounted (the first one of /proc/self/mountinfo) */
static int cgroup2_mount(char *out, size_t len)
{
	char line[1024], mnt[512];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int found = 0;

	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - cgroup2 ");

		if (sep && sscanf(line, "%*s %*s %*s %*s %511s", mnt) == 1) {
			snprintf(out, len, "%s", mnt);
			found = 1;
		}
	}
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

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
	if (cgroup2_mount(mnt, sizeof(mnt)))
		crt_skip("no cgroup2 mount");
	snprintf(own, sizeof(own), "%s", cgroup_of(getpid()));
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
		if (c > 0 && !strcmp(cgroup_of(b), sub))
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

	crt_check(!strcmp(cgroup_of(b), sub), "the child %d is in %s, not %s", b, cgroup_of(b),
		  sub);
	crt_check(!strcmp(cgroup_of(c), sub), "its child %d is in %s, not %s", c, cgroup_of(c),
		  sub);
	crt_check(!strcmp(cgroup_of(a), cgroup_of(getpid())),
		  "the second child %d is in %s, not in the root's %s", a, cgroup_of(a),
		  cgroup_of(getpid()));
	kill(a, SIGTERM);
	kill(b, SIGTERM);
	crt_check(waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the second child did not end well (%#x)", st);
	crt_check(waitpid(b, &st, 0) == b && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child in the control group did not end well (%#x)", st);
	grandchild = 0; /* reaped by b */
	crt_pass();
}
