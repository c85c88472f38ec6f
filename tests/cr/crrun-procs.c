/* The runner's view of the processes it started (crrun.h): the tree below
 * a root, whether a process lives and runs free (not traced, not stopped),
 * and the end of what a test left behind.  Read from /proc; only processes
 * of our own tree are signalled. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crrun.h"

int read_ppid(pid_t pid, pid_t *ppid, char *state)
{
	char path[64], buf[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%c %d", state, ppid) != 2)
		return -1;
	return 0;
}

/* The processes of the tree rooted at root (all threads' children). */
int collect_tree(pid_t root, struct proc_info *out, int max)
{
	int n = 0;

	out[n].pid = root;
	if (read_ppid(root, &out[n].ppid, &out[n].state))
		return 0;
	n++;
	for (int i = 0; i < n && n < max; i++) {
		char path[64];
		DIR *d;
		struct dirent *de;

		snprintf(path, sizeof(path), "/proc/%d/task", out[i].pid);
		d = opendir(path);
		while (d && (de = readdir(d)) && n < max) {
			char cpath[320], buf[4096], *p, *e;
			FILE *f;

			if (!isdigit((unsigned char)de->d_name[0]))
				continue;
			snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", out[i].pid,
				 de->d_name);
			f = fopen(cpath, "r");
			if (!f)
				continue;
			if (fgets(buf, sizeof(buf), f)) {
				for (p = buf; n < max; p = e) {
					long c = strtol(p, &e, 10);
					if (e == p)
						break;
					pid_t pp;

					out[n].pid = c;
					out[n].ppid = out[i].pid;
					if (read_ppid(c, &pp, &out[n].state))
						out[n].state = '?';
					n++;
				}
			}
			fclose(f);
		}
		if (d)
			closedir(d);
	}
	return n;
}

bool alive(pid_t pid)
{
	pid_t pp;
	char st;

	return read_ppid(pid, &pp, &st) == 0 && st != 'Z' && st != 'X';
}

void kill_tree(pid_t root)
{
	struct proc_info t[512];
	int n = collect_tree(root, t, 512);

	for (int i = 0; i < n; i++)
		kill(t[i].pid, SIGKILL);
}

/* Reap every child (we are a subreaper: orphans of the test come to us). */
void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Whatever of the test is still alive at the end (a failed run may leave
 * restored processes or orphans, which came to us as the subreaper): our
 * children, each with its tree, are killed, then reaped. */
void kill_leftovers(void)
{
	char path[64], buf[4096];

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", getpid());
	for (int round = 0; round < 10; round++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		char *p = buf, *end;
		int killed = 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		for (long pid; (pid = strtol(p, &end, 10)) > 0; p = end) {
			kill_tree((pid_t)pid);
			killed++;
		}
		if (!killed)
			return;
		if (round == 0)
			diag("killing %d process(es) the test left behind", killed);
		usleep(20000);
		reap_all();
	}
}

int wait_exit(pid_t pid, int timeout, int *status)
{
	double end = now() + timeout;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now() > end)
			return -1;
		usleep(2000);
	}
}

/* TracerPid of /proc/PID/task/TID/status, or -1 */
int tracer_of(pid_t pid, int tid)
{
	char path[96], line[256];
	int tracer = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %d", &tracer) == 1)
			break;
	if (f)
		fclose(f);
	return tracer;
}

/* every thread of pid runs on: not traced, not stopped; 0 or -1 (why) */
int runs_free(pid_t pid, char *why, size_t wl)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d) {
		snprintf(why, wl, "pid %d is gone", pid);
		return -1;
	}
	while (!ret && (de = readdir(d))) {
		char spath[128], buf[512], *p, st = '?';
		FILE *f;
		int tracer, tid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		tid = atoi(de->d_name);
		tracer = tracer_of(pid, tid);
		snprintf(spath, sizeof(spath), "/proc/%d/task/%d/stat", pid, tid);
		f = fopen(spath, "r");
		if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
			st = p[2];
		if (f)
			fclose(f);
		if (tracer != 0) {
			snprintf(why, wl, "thread %d of pid %d is traced by %d", tid, pid, tracer);
			ret = -1;
		} else if (st == 't' || st == 'T' || st == 'Z' || st == 'X' || st == '?') {
			snprintf(why, wl, "thread %d of pid %d is in state %c", tid, pid, st);
			ret = -1;
		}
	}
	closedir(d);
	return ret;
}
