/* kupdate apply run from a login session that a preserved unit carries
 * (an operator logged in over ssh, ssh.service preserved: sessions.c).
 *
 * Such an apply cannot do the work itself: the session it runs in is
 * frozen, dumped and killed with the unit, and a process cannot dump
 * itself.  So it hands the work over: a transient service,
 * kupdate-apply-PID.service, runs the same apply with --handoff FILE, its
 * output going to FILE (state directory, handoff/PID.log: on the disk that
 * survives the kexec).  The apply in the session becomes a follower: it
 * prints what FILE gains, every 200 ms, holding nothing open between two
 * reads, so that it is dumped with its session like any process there, and
 * restored with it in the new boot, where it goes on reading where it
 * stopped.  The worker's last lines before the kexec come next, then
 * kupdate-finish (after every restore) appends the cycle's report, the
 * status table, and the end line.
 *
 * FILE's protocol, lines the follower does not print:
 *   kupdate-handoff: pid N    the worker runs (first line)
 *   kupdate-handoff: exit N   the apply ended with status N (last line)
 * Bounds: a worker not started after 30 s, a worker gone in the same boot
 * without its end line, no end line 15 minutes into the new boot: the
 * follower says so and exits 1; the apply itself goes on, or went on, in
 * its unit (kupdate status, journalctl -u UNIT). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cycle.h"
#include "handoff.h"
#include "kupdate.h"
#include "sessions.h"
#include "units.h"

#define TAG	       "kupdate-handoff: "
#define POLL_US	       200000
#define START_POLLS    150  /* 30 s for the worker to say its pid */
#define NEW_BOOT_POLLS 4500 /* 15 min in the new boot for kupdate-finish */

static char *handoff_dir(void)
{
	return xasprintf("%s/handoff", state_dir());
}

const char *handoff_arg(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--handoff"))
			return argv[i + 1];
	return NULL;
}

/* Does this process run in a login session one of the units carries? */
static bool in_carried_session(struct sd *s, const char *const *names, int n, char *unit,
			       size_t ulen, char *scope, size_t slen)
{
	bool held = false;

	for (int i = 0; i < n && !held; i++) {
		struct unit_info ui;
		struct usessions ss = { 0 };
		pid_t *m = NULL;
		int nm = 0;

		if (sd_unit_info(s, names[i], &ui))
			continue;
		if (!unit_members(names[i], &ui, &m, &nm) && !sessions_find(m, nm, &ss) &&
		    sessions_hold_self(&ss)) {
			_cleanup_free_ char *own = own_cgroup();

			held = true;
			snprintf(unit, ulen, "%s", names[i]);
			snprintf(scope, slen, "%s",
				 own && strrchr(own, '/') ? strrchr(own, '/') + 1 : "?");
		}
		sessions_free(&ss);
		free(m);
		unit_info_free(&ui);
	}
	return held;
}

/* s appended to the NULL-terminated *v of *n strings (repeats kept) */
static int vec_push(char ***v, size_t *n, const char *s)
{
	char **nv = xrealloc_array(*v, *n + 2, sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n + 1] = NULL;
	nv[*n] = xstrdup(s);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* KUPDATE_* of the environment (the tests' switches), NULL-terminated */
static char **kupdate_env(size_t *n)
{
	extern char **environ;
	char **v = NULL;

	*n = 0;
	for (char **e = environ; *e; e++)
		if (!strncmp(*e, "KUPDATE_", 8) && vec_push(&v, n, *e))
			break;
	if (vec_push(&v, n, "KUPDATE_HANDOFF=1")) {
		strv_free(v, *n);
		return NULL;
	}
	return v;
}

int handoff_start(struct sd *s, const char *const *names, int n, int argc, char **argv, char **file)
{
	char unit[256], scope[256], worker[64];
	_cleanup_free_ char *dir = handoff_dir(), *exe = NULL;
	char **args = NULL, **env = NULL;
	size_t na = 0, ne = 0;
	int fd, ret = 0;

	*file = NULL;
	if (!in_carried_session(s, names, n, unit, sizeof(unit), scope, sizeof(scope)))
		return 0;
	exe = self_exe();
	if (!dir || !exe)
		return -ENOMEM;
	*file = xasprintf("%s/%d.log", dir, getpid());
	snprintf(worker, sizeof(worker), "kupdate-apply-%d.service", getpid());
	if (!*file || mkdir_p(dir, 0700))
		return pr_errno("cannot make %s", dir);
	fd = open(*file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return pr_errno("cannot write %s", *file);
	close(fd);
	ret = vec_push(&args, &na, exe);
	for (int i = 0; !ret && i < argc; i++) /* argv[0]: apply */
		ret = vec_push(&args, &na, argv[i]);
	if (!ret)
		ret = vec_push(&args, &na, "--handoff");
	if (!ret)
		ret = vec_push(&args, &na, *file);
	env = ret ? NULL : kupdate_env(&ne);
	if (!env)
		ret = -ENOMEM;
	if (!ret) {
		char desc[512];

		snprintf(desc, sizeof(desc), "kupdate apply, for login session %s", scope);
		ret = sd_start_service(s, worker, desc, args, env);
	}
	strv_free(args, na);
	strv_free(env, ne);
	if (ret) {
		unlink(*file);
		return ret;
	}
	printf("kupdate: this login session (%s) is preserved with %s: the apply runs in %s "
	       "and reports here, on the new kernel too\n",
	       scope, unit, worker);
	fflush(stdout);
	return 1;
}

static volatile sig_atomic_t interrupted_flag;

static void on_int(int sig)
{
	(void)sig;
	interrupted_flag = 1;
}

/* the lines of buf[0..*len) that are complete: printed, or taken as the
 * protocol's; the rest moved to the front.  Returns the exit status once
 * the end line came, else -1. */
static int take_lines(char *buf, size_t *len, pid_t *worker)
{
	char *p = buf, *nl;
	int rc = -1;

	while (rc < 0 && (nl = memchr(p, '\n', buf + *len - p))) {
		*nl = 0;
		if (!strncmp(p, TAG "pid ", strlen(TAG "pid ")))
			*worker = atoi(p + strlen(TAG "pid "));
		else if (!strncmp(p, TAG "exit ", strlen(TAG "exit ")))
			rc = atoi(p + strlen(TAG "exit "));
		else
			printf("%s\n", p);
		p = nl + 1;
	}
	fflush(stdout);
	*len -= p - buf;
	memmove(buf, p, *len);
	return rc;
}

int handoff_follow(const char *file)
{
	char boot0[64] = "", boot[64], buf[8192];
	size_t len = 0;
	off_t off = 0;
	pid_t worker = 0;
	unsigned polls = 0, new_polls = 0;
	struct sigaction sa = { .sa_handler = on_int };

	sigaction(SIGINT, &sa, NULL);
	current_boot_id(boot0, sizeof(boot0));
	for (;;) {
		int fd = open(file, O_RDONLY | O_CLOEXEC), rc = -1;
		bool new_boot;
		ssize_t r = 0;

		if (fd >= 0) {
			while (rc < 0 &&
			       (r = pread(fd, buf + len, sizeof(buf) - 1 - len, off)) > 0) {
				off += r;
				len += r;
				rc = take_lines(buf, &len, &worker);
				if (len == sizeof(buf) - 1) { /* a line longer than buf */
					fwrite(buf, 1, len, stdout);
					len = 0;
				}
			}
			close(fd);
		}
		if (rc >= 0) {
			unlink(file);
			return rc;
		}
		if (fd < 0 && errno != ENOENT) {
			pr_errno("cannot read %s, where the apply reports", file);
			return 1;
		}
		if (interrupted_flag) {
			fprintf(stderr,
				"kupdate: interrupted; the apply goes on in "
				"kupdate-apply-%d.service "
				"(its output: %s; kupdate status)\n",
				getpid(), file);
			return 130;
		}
		new_boot = current_boot_id(boot, sizeof(boot)) == 0 && strcmp(boot, boot0);
		if (new_boot && ++new_polls > NEW_BOOT_POLLS) {
			pr_err("no report from kupdate-finish 15 minutes into the new boot: see "
			       "kupdate status and journalctl -u kupdate-finish");
			return 1;
		}
		if (!new_boot && !worker && ++polls > START_POLLS) {
			pr_err("kupdate-apply-%d.service did not start within 30 s: see journalctl "
			       "-u kupdate-apply-%d.service",
			       getpid(), getpid());
			unlink(file);
			return 1;
		}
		if (!new_boot && worker && kill(worker, 0) && errno == ESRCH) {
			/* a last read for what it wrote before it ended */
			if (!polls++)
				continue;
			pr_err("the apply (pid %d, kupdate-apply-%d.service) ended without its "
			       "report: see journalctl -u kupdate-apply-%d.service",
			       worker, getpid(), getpid());
			unlink(file);
			return 1;
		}
		usleep(POLL_US);
	}
}

int handoff_worker_begin(const char *file)
{
	int fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC);

	if (fd < 0)
		return pr_errno("cannot write %s, where the apply reports", file);
	if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
		close(fd);
		return pr_errno("cannot write %s", file);
	}
	close(fd);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf(TAG "pid %d\n", getpid());
	fflush(stdout);
	return 0;
}

void handoff_worker_end(int rc, bool kexec_queued)
{
	fflush(stderr);
	if (!rc && kexec_queued) {
		fflush(stdout);
		return;
	}
	printf(TAG "exit %d\n", rc);
	fflush(stdout);
}

/* one follower's file: the report appended, then the end line */
static void report_one(const char *path, const char *id)
{
	_cleanup_free_ char *text = NULL;
	pid_t child;
	int status = 0, fd;

	if (read_file_at(AT_FDCWD, path, &text, NULL) || strstr(text, "\n" TAG "exit "))
		return;
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child == 0) {
		char *argv[] = { "status", "--cycle", (char *)id, NULL };
		int rc;

		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(1);
		printf("kupdate: on the new kernel: the cycle's report (kupdate status):\n");
		fflush(stdout);
		optind = 0; /* getopt anew: kupdate's own parsing came before */
		rc = cmd_status(3, argv) ? 1 : 0;
		fflush(stdout); /* _exit flushes nothing */
		fflush(stderr);
		_exit(rc);
	}
	if (child < 0 || waitpid(child, &status, 0) < 0)
		status = 1 << 8;
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0) {
		dprintf(fd, TAG "exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 1);
		close(fd);
	}
}

void handoff_report(const char *id)
{
	_cleanup_free_ char *dir = handoff_dir();
	struct dirent *de;
	DIR *d = dir ? opendir(dir) : NULL;

	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		int pid = atoi(de->d_name);

		if (pid <= 0 || !strstr(de->d_name, ".log"))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		if (!p)
			continue;
		/* a follower that is not there any more reads nothing */
		if (kill(pid, 0) && errno == ESRCH)
			unlink(p);
		else if (id)
			report_one(p, id);
	}
	closedir(d);
}
