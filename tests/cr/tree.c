/* A process tree of four levels with the same pids, parents, sessions and
 * process groups after the restore, and a zombie that keeps its status.
 *
 *   root (session and group leader)
 *    |- a           same session and group as root
 *    |   `- a1      own process group
 *    |       `- a1x in a1's group
 *    |- b           own session (setsid)
 *    |   `- b1      in b's session and group
 *    `- z           exited with status 42, not reaped: a zombie
 *
 * Every process records what it saw before the dump and checks it again
 * after SIGTERM; parents check their children's exit statuses. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

struct ids {
	pid_t pid, ppid, sid, pgid;
};

static struct ids me;
static pid_t kids[4];
static int nkids;

static void record(void)
{
	me.pid = getpid();
	me.ppid = getppid();
	me.sid = getsid(0);
	me.pgid = getpgid(0);
}

static void announce(const char *name)
{
	char f[64];
	int fd;

	snprintf(f, sizeof(f), "up.%s", name);
	fd = open(crt_path(f), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	close(fd);
}

/* check ids, stop and check the children, exit 0 or 1 */
static void __attribute__((noreturn)) finish(const char *name)
{
	int bad = 0;

	if (getpid() != me.pid || getppid() != me.ppid || getsid(0) != me.sid ||
	    getpgid(0) != me.pgid) {
		printf("%s: ids changed: pid %d/%d ppid %d/%d sid %d/%d pgid %d/%d\n", name,
		       getpid(), me.pid, getppid(), me.ppid, getsid(0), me.sid, getpgid(0),
		       me.pgid);
		bad = 1;
	}
	for (int i = 0; i < nkids; i++) {
		int st;

		kill(kids[i], SIGTERM);
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("%s: child %d ended badly (%#x)\n", name, kids[i], st);
			bad = 1;
		}
	}
	exit(bad);
}

static pid_t start(const char *name, void (*setup)(void), void (*more)(void))
{
	pid_t p = fork();

	if (p < 0)
		crt_fail("fork: %s", strerror(errno));
	if (p == 0) {
		nkids = 0;
		if (setup)
			setup();
		if (more)
			more();
		record();
		announce(name);
		crt_wait_term();
		finish(name);
	}
	kids[nkids++] = p;
	return p;
}

static void own_group(void)
{
	setpgid(0, 0);
}
static void own_session(void)
{
	setsid();
}
static void a1_kids(void)
{
	start("a1x", NULL, NULL);
}
static void a_kids(void)
{
	start("a1", own_group, a1_kids);
}
static void b_kids(void)
{
	start("b1", NULL, NULL);
}

int main(void)
{
	pid_t z;
	const char *names[] = { "a", "a1", "a1x", "b", "b1" };

	crt_init();
	record();
	start("a", NULL, a_kids);
	start("b", own_session, b_kids);
	z = fork();
	if (z == 0)
		_exit(42);
	for (int i = 0; i < 5; i++) {
		char f[64];

		snprintf(f, sizeof(f), "up.%s", names[i]);
		while (access(crt_path(f), F_OK))
			usleep(1000);
	}
	/* the zombie must be a zombie before the dump */
	for (;;) {
		char path[64], buf[256];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/stat", z);
		f = fopen(path, "r");
		if (f && fgets(buf, sizeof(buf), f) && strstr(buf, ") Z ")) {
			fclose(f);
			break;
		}
		if (f)
			fclose(f);
		usleep(1000);
	}
	crt_ready();
	crt_wait_term();

	crt_check(getpid() == me.pid && getsid(0) == me.sid && getpgid(0) == me.pgid,
		  "root ids changed");
	{
		char path[64], buf[256];
		FILE *f;
		int st;

		snprintf(path, sizeof(path), "/proc/%d/stat", z);
		f = fopen(path, "r");
		crt_check(f && fgets(buf, sizeof(buf), f) && strstr(buf, ") Z "),
			  "pid %d is no longer a zombie", z);
		fclose(f);
		crt_check(waitpid(z, &st, 0) == z, "cannot reap the zombie %d", z);
		crt_check(WIFEXITED(st) && WEXITSTATUS(st) == 42,
			  "the zombie's status is %#x, expected exit 42", st);
	}
	for (int i = 0; i < nkids; i++) {
		int st;

		kill(kids[i], SIGTERM);
		crt_check(waitpid(kids[i], &st, 0) == kids[i], "cannot wait for child %d", kids[i]);
		crt_check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "subtree of %d reported a problem (status %#x)", kids[i], st);
	}
	crt_pass();
}
