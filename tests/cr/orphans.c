/* A tree with two roots, like a service whose daemon was orphaned: the
 * root's child forks a grandchild and exits; the grandchild, reparented to
 * the runner (a subreaper), is a second root of the dump
 * (--extra-roots-file).  After the restore both come back with their pids,
 * the orphan adopted by the nearest subreaper, and both check their state.
 * With --daemon the orphan is in the session of a dead process. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static volatile unsigned long counter;

int main(int argc, char **argv)
{
	/* --daemon: the child starts a session of its own before it forks the
	 * orphan and exits (a double-forking daemon): the orphan's session and
	 * group are led by a dead process */
	int daemon_mode = argc > 1 && !strcmp(argv[1], "--daemon");
	pid_t child, orphan, me_pgid, me_sid;
	int p[2], st;
	char buf[32];

	crt_init();
	me_pgid = getpgid(0);
	me_sid = getsid(0);
	if (pipe(p))
		crt_fail("pipe: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		if (daemon_mode) {
			if (setsid() < 0)
				_exit(3);
			me_pgid = me_sid = getpid();
		}
		orphan = fork();
		if (orphan == 0) {
			/* the orphan */
			pid_t mine = getpid();

			close(p[0]);
			close(p[1]);
			while (getppid() == 1 || getppid() != getppid())
				;
			/* no crt_ready here: the runner reads the roots file once
			 * the ready file is there, and only the root writes both,
			 * in that order (the orphan's ready file came first once,
			 * on a busy host, and the roots file was not there yet) */
			while (!crt_term)
				counter++;
			if (getpid() != mine || getpgid(0) != me_pgid || getsid(0) != me_sid) {
				FILE *f = fopen(crt_path("orphan.result"), "w");
				fprintf(f, "FAIL ids changed: pid %d/%d pgid %d/%d sid %d/%d\n",
					getpid(), mine, getpgid(0), me_pgid, getsid(0), me_sid);
				fclose(f);
				_exit(1);
			}
			{
				FILE *f = fopen(crt_path("orphan.result"), "w");
				fprintf(f, "PASS %lu\n", counter);
				fclose(f);
			}
			_exit(0);
		}
		snprintf(buf, sizeof(buf), "%d\n", orphan);
		if (write(p[1], buf, strlen(buf)) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	memset(buf, 0, sizeof(buf));
	if (read(p[0], buf, sizeof(buf) - 1) <= 0)
		crt_fail("no orphan pid");
	close(p[0]);
	waitpid(child, &st, 0);
	orphan = atoi(buf);
	/* wait until the orphan has been adopted by the runner */
	for (int i = 0; i < 1000; i++) {
		char path[64], line[256];
		FILE *f;
		int ppid = 0;

		snprintf(path, sizeof(path), "/proc/%d/stat", orphan);
		f = fopen(path, "r");
		if (f && fgets(line, sizeof(line), f))
			sscanf(strrchr(line, ')') + 4, "%d", &ppid);
		if (f)
			fclose(f);
		if (ppid && ppid != getpid() && ppid != child)
			break;
		usleep(1000);
	}
	{
		FILE *f = fopen(crt_path("roots"), "w");
		fprintf(f, "%d\n", orphan);
		fclose(f);
	}
	crt_ready();
	crt_wait_term();
	/* the runner stops the orphan first; its verdict is in a file */
	for (int i = 0; i < 5000 && access(crt_path("orphan.result"), F_OK); i++)
		usleep(1000);
	{
		char *r = crt_read_file(crt_path("orphan.result"), NULL);
		crt_check(r && !strncmp(r, "PASS", 4), "the orphan says: %s", r ? r : "nothing");
	}
	crt_pass();
}
