/* crrun: run one checkpoint/restore test program.
 *
 *   crrun [options] TEST [ARGS...]
 *
 * Starts TEST (a session leader, stdin /dev/null, output to a log), waits
 * for it to be ready, dumps it with `kupdate dump`, checks the whole tree is
 * gone, restores it with `kupdate restore --detach`, checks every process
 * is back with its pid and parent, sends SIGTERM and reads the verdict the
 * test prints as its last line.  Exit 0 = PASS, 1 = FAIL, 77 = SKIP.
 *
 * --pre-dumps N: before each dump, N chained `kupdate dump --pre-dump`
 * while the tree runs; after each one the test gets SIGUSR2 and changes
 * its memory (it creates $CRT_DIR/stage-K when done); the dump then goes
 * with --prev on the last pre-dump (not with --no-prev: a pre-dump no dump
 * builds on, whose tracking the dump must remove).  --skip-if RE: a pre-dump failing with
 * a message matching RE (a kernel without the feature) skips the test.
 *
 * --expect-dump-killed: the dump is expected to die of SIGKILL (a fault
 * injected with --kupdate-env KUPDATE_FAULT=kill-dump): the whole tree must
 * run on, no longer traced nor stopped; with --netns, the network lock the
 * dump left must be there; `kupdate recover` must find the dump's record
 * and release its connections (no element left in the lock, the record
 * gone); then the test gets SIGTERM and gives its verdict.
 *
 * --win-probes N (with --netns): each restore must make the namespace send
 * at least N TCP window probes (TcpExt TCPWinProbe): three a connection.
 *
 * --rto-revert N (with --peer in a namespace of its own): each restore must
 * make the peer's namespace receive at least N ICMP destination-unreachable
 * messages (Icmp InDestUnreachs), none of them malformed (InErrors,
 * InCsumErrors) and not all out of the connection's window (TcpExt
 * OutOfWindowIcmps); 0: none at all.  Then the peer's data must be
 * acknowledged again, and how long after the restore that took is shown.
 *
 * --linked-root-file NAME: the test writes there the pid of the root of a
 * second tree, connected to its own by unix sockets.  Each iteration dumps
 * that tree first into IMG.link, left running (the dump of a tree kills
 * it, and the test's dump would see its sockets' peers closed), then the
 * test's, both with --linked-unix; the second tree is killed then;
 * the two restores (--linked the other's images, rendezvous in
 * $dir/links) go in turn: the second tree's first at even iterations, the
 * test's first at odd ones.  The second tree must come back with its pid
 * and as our child, and end with exit 0 when given SIGTERM at the end.
 *
 * The runner is a child subreaper (PID 1 here reaps no orphans) and only
 * ever signals processes it started.
 *
 * This file holds the run itself: the test, the dump and the restore, the
 * checks around them and the options.  What the runner does to the dumped
 * state between the dump and the restore (--corrupt, --drop-sysvshm,
 * --squat-sysvshm, --rmdirs-file) is in crrun-damage.c, the network side (--netns, --peer)
 * in crrun-net.c, the processes of the tree as /proc shows them in
 * crrun-procs.c, and what they share in crrun.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crrun.h"

struct opts o = { .iterations = 1, .max_image_kb = -1, .timeout = 60, .rto_revert = -1 };

char workdir[256];

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* listening sockets the next run() passes as a service manager does
 * (fds 3..., LISTEN_FDS, LISTEN_PID): --activate-tcp, --activate-unix */
int pass_fds[2], n_pass;

/* Run a command, output to a file; returns its exit status or -1. */
static int run(char *const argv[], const char *out_path, double *secs)
{
	double t0 = now();
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		/* like a service manager would: nothing but 0, 1 and 2, and the
		 * listeners it passes */
		for (int i = 0; i < n_pass; i++) {
			int t = fcntl(pass_fds[i], F_DUPFD, 100 + i);

			if (t < 0 || dup2(t, 3 + i) != 3 + i)
				_exit(126);
		}
		for (int i = 3 + n_pass; i < 1024; i++)
			close(i);
		if (n_pass) {
			char v[16];

			snprintf(v, sizeof(v), "%d", n_pass);
			setenv("LISTEN_FDS", v, 1);
			snprintf(v, sizeof(v), "%d", getpid());
			setenv("LISTEN_PID", v, 1);
		}
		if (o.kupdate_nofile > 0) {
			struct rlimit rl = { o.kupdate_nofile, o.kupdate_nofile };

			setrlimit(RLIMIT_NOFILE, &rl);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (secs)
		*secs = now() - t0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, n + 1);
	if (fread(buf, 1, n, f) != (size_t)n)
		buf[0] = 0;
	fclose(f);
	return buf;
}

void show_file(const char *title, const char *path)
{
	char *s = slurp(path), *line, *save = NULL;

	diag("--- %s", title);
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		diag("  %s", line);
	free(s);
}

static long dir_kb(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	long kb = 0;

	while (d && (de = readdir(d))) {
		char p[512];
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (!stat(p, &st) && S_ISREG(st.st_mode))
			kb += st.st_size / 1024;
	}
	if (d)
		closedir(d);
	return kb;
}

/* --expect-images PATTERN=N: exactly N files of the dump match PATTERN */
static bool images_as_expected(const char *path)
{
	const char *eq = strrchr(o.expect_images, '=');
	char pat[256];
	DIR *d = opendir(path);
	struct dirent *de;
	long n = 0, want;

	if (!eq || eq == o.expect_images || (size_t)(eq - o.expect_images) >= sizeof(pat)) {
		diag("--expect-images wants PATTERN=N, not %s", o.expect_images);
		if (d)
			closedir(d);
		return false;
	}
	snprintf(pat, sizeof(pat), "%.*s", (int)(eq - o.expect_images), o.expect_images);
	want = atol(eq + 1);
	while (d && (de = readdir(d)))
		n += !fnmatch(pat, de->d_name, 0);
	if (d)
		closedir(d);
	if (n != want)
		diag("%ld image files match %s, %ld expected", n, pat, want);
	return n == want;
}

static bool matches(const char *text, const char *re)
{
	regex_t r;
	bool m;

	if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB))
		return false;
	m = regexec(&r, text, 0, NULL, 0) == 0;
	regfree(&r);
	return m;
}

/* "{dir}" in an option becomes the work directory; "{cat:NAME}" the first
 * line of the file NAME the test wrote there (a pid known once it runs) */
static char *subst(const char *opt)
{
	static char bufs[16][1024];
	static int next;
	char *b = bufs[next++ % 16], *text, path[512];
	const char *p = strstr(opt, "{dir}");
	const char *c = strstr(opt, "{cat:"), *e = c ? strchr(c, '}') : NULL;

	if (c && e) {
		snprintf(path, sizeof(path), "%s/%.*s", workdir, (int)(e - c - 5), c + 5);
		text = slurp(path);
		snprintf(b, 1024, "%.*s%.*s%s", (int)(c - opt), opt,
			 text ? (int)strcspn(text, "\n") : 0, text ? text : "", e + 1);
		free(text);
		return b;
	}
	if (!p)
		return (char *)opt;
	snprintf(b, 1024, "%.*s%s%s", (int)(p - opt), opt, workdir, p + 5);
	return b;
}

static pid_t extra_roots[16];
static int nr_extra_roots;
static pid_t linked_root; /* --linked-root-file */

/* After the killed dump: its record is there, and `kupdate recover` finds
 * it, walks the whole tree (nprocs processes), releases what the dump held
 * (no element left in the network lock) and removes it. */
/* a connection held by the network lock in kupdate's network namespace, or
 * in one of the tree's processes' (a container's own) */
static bool lock_holds(const struct proc_info *procs, int n)
{
	if (!run_ip("nft list table inet kupdate 2>/dev/null | grep -q 'elements = {'"))
		return true;
	for (int i = 0; i < n; i++)
		if (!run_ip("nsenter --net=/proc/%d/ns/net nft list table inet kupdate 2>/dev/null "
			    "| "
			    "grep -q 'elements = {'",
			    procs[i].pid))
			return true;
	return false;
}

static int recover_killed_dump(const struct proc_info *procs, int nprocs)
{
	char rec[512], out[512], want[64];
	char *argv[] = { (char *)o.kupdate, "recover", NULL };
	char *text;
	int rc, ok;

	snprintf(rec, sizeof(rec), "%s/dumps", workdir);
	if (run_ip("ls %s/dumps/[0-9]* >/dev/null 2>&1", workdir)) {
		diag("the killed dump left no record in %s", rec);
		return -1;
	}
	snprintf(out, sizeof(out), "%s/recover.out", workdir);
	rc = run(argv, out, NULL);
	text = slurp(out);
	snprintf(want, sizeof(want), "recovery: %d processes of its tree", nprocs);
	ok = rc == 0 && text && matches(text, "a dump .pid [0-9]*. into .* was killed") &&
	     strstr(text, want) &&
	     (!o.netns || matches(text, "[1-9][0-9]* released from the network lock"));
	if (!ok) {
		diag("kupdate recover (exit %d) did not release the killed dump's tree", rc);
		show_file("kupdate recover", out);
	} else {
		char *l = strstr(text, "processes of its tree");

		while (l && l > text && l[-1] != '\n')
			l--;
		diag("%s", l ? l : text);
	}
	free(text);
	if (!ok)
		return -1;
	if (o.netns && lock_holds(procs, nprocs)) {
		diag("the network lock still holds connections after kupdate recover");
		return -1;
	}
	if (!run_ip("ls %s/dumps/[0-9]* >/dev/null 2>&1", workdir)) {
		diag("kupdate recover left the record in %s", rec);
		return -1;
	}
	return 0;
}

/* --expect-dump-killed: kupdate died of SIGKILL in the middle of the dump */
static int check_dump_killed(const struct proc_info *procs, int n, int rc, const char *out)
{
	char why[160] = "";
	double end = now() + 5;

	if (rc != 128 + SIGKILL) {
		diag("expected kupdate to die of SIGKILL (exit %d), got exit %d", 128 + SIGKILL,
		     rc);
		show_file("kupdate dump", out);
		return -1;
	}
	{
		char *text = slurp(out);

		diag("dump killed as expected: %s", strtok(text, "\n") ? text : "(no output)");
		free(text);
	}
	/* its tracer gone, the kernel lets every thread go */
	for (int i = 0; i < n; i++)
		while (runs_free(procs[i].pid, why, sizeof(why))) {
			if (now() > end) {
				diag("after the killed dump: %s", why);
				return -1;
			}
			usleep(2000);
		}
	if (o.netns && !lock_holds(procs, n)) {
		diag("the killed dump left no network lock: it died before it locked a "
		     "connection");
		return -1;
	}
	return recover_killed_dump(procs, n);
}

static const char *dump_prev; /* --prev for the next dump */
static bool dump_pre;	      /* the next dump is a --pre-dump */

static int do_dump(pid_t root, const char *img, bool leave_running, const char *out, double *secs)
{
	char pid_s[17][16];
	char *argv[80];
	int a = 0;

	snprintf(pid_s[0], sizeof(pid_s[0]), "%d", root);
	argv[a++] = (char *)o.kupdate;
	argv[a++] = "dump";
	argv[a++] = "-t";
	argv[a++] = pid_s[0];
	for (int i = 0; i < nr_extra_roots; i++) {
		snprintf(pid_s[i + 1], sizeof(pid_s[0]), "%d", extra_roots[i]);
		argv[a++] = "-t";
		argv[a++] = pid_s[i + 1];
	}
	if (o.check) {
		argv[a++] = "--check";
	} else {
		argv[a++] = "-D";
		argv[a++] = (char *)img;
	}
	if (leave_running)
		argv[a++] = "--leave-running";
	if (dump_pre)
		argv[a++] = "--pre-dump";
	if (dump_prev) {
		argv[a++] = "--prev";
		argv[a++] = (char *)dump_prev;
	}
	if (o.own_ns && !o.ns_unasked)
		argv[a++] = "--own-namespaces";
	if (linked_root)
		argv[a++] = "--linked-unix";
	for (int i = 0; i < o.n_dump_extra && a < 74; i++)
		argv[a++] = subst(o.dump_extra[i]);
	argv[a] = NULL;
	return run(argv, out, secs);
}

/* --fork-storm: a process that forks without pause (each child exits at
 * once), so that pids are taken all through the restore, as in a boot */
static pid_t fork_storm(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(120);
		for (;;) {
			pid_t c = fork();

			if (c == 0)
				_exit(0);
			if (c > 0)
				waitpid(c, NULL, 0);
		}
	}
	return pid;
}

static int do_restore(const char *img, const char *pidfile, const char *out, double *secs)
{
	char *argv[32] = { (char *)o.kupdate, "restore",   "-D",	   (char *)img,
			   "--detach",	      "--pidfile", (char *)pidfile };
	char holder[16];
	int a = 7;

	if (o.own_ns) {
		/* the tree keeps the namespaces of the last holder alive */
		ns_holder_stop();
		if (o.host_mount_late && host_late_before_holder()) {
			diag("cannot bind another network namespace: %s", strerror(errno));
			return -1;
		}
		if (ns_holder_start())
			return -1;
		if (o.host_mount_late && host_late_mount()) {
			diag("cannot mount the host's tmpfs again: %s", strerror(errno));
			return -1;
		}
		snprintf(holder, sizeof(holder), "%d", ns_holder);
		argv[a++] = "--namespaces-of";
		argv[a++] = holder;
	}

	static char peer[600], rdv[300];

	if (linked_root) {
		snprintf(peer, sizeof(peer), "%s.link", img);
		snprintf(rdv, sizeof(rdv), "%s/links", workdir);
		argv[a++] = "--linked";
		argv[a++] = peer;
		argv[a++] = "--link-dir";
		argv[a++] = rdv;
	}
	for (int i = 0; i < o.n_restore_extra && a < 26; i++)
		argv[a++] = subst(o.restore_extra[i]);
	if (o.activate_port || o.activate_unix) {
		if (activate())
			return -1;
		argv[a++] = "--listen-fds";
	}
	argv[a] = NULL;
	if (o.fork_storm) {
		pid_t storm = fork_storm();
		int ret = run(argv, out, secs);

		if (storm > 0) {
			kill(storm, SIGKILL);
			waitpid(storm, NULL, 0);
		}
		return ret;
	}
	return run(argv, out, secs);
}

/* --linked-root-file: the second tree dumped into IMG.link, before the
 * test's tree */
static int linked_dump(const char *img, int it)
{
	char dir[600], out[600], pid_s[16];
	char *argv[] = { (char *)o.kupdate, "dump", "-t", pid_s, "-D", dir, "--linked-unix",
			 "--leave-running", NULL };
	int rc;

	snprintf(pid_s, sizeof(pid_s), "%d", linked_root);
	snprintf(dir, sizeof(dir), "%s.link", img);
	snprintf(out, sizeof(out), "%s/dump-link-%d.out", workdir, it);
	rc = run(argv, out, NULL);
	if (rc) {
		diag("the dump of the linked tree failed (exit %d)", rc);
		show_file("kupdate dump (linked tree)", out);
		return -1;
	}
	return 0;
}

/* ... ended once the test's tree is dumped */
static int linked_end(void)
{
	int st;

	kill_tree(linked_root);
	if (wait_exit(linked_root, 10, &st)) {
		diag("the linked tree's root %d is still alive after SIGKILL", linked_root);
		return -1;
	}
	return 0;
}

/* ... and restored from there, --linked the test's images: back with its
 * pid, our child */
static int linked_restore(const char *img, int it)
{
	char dir[600], out[600], pidf[600], rdv[300];
	char *argv[] = { (char *)o.kupdate, "restore",	  "-D", dir,
			 "--detach",	    "--pidfile",  pidf, "--linked",
			 (char *)img,	    "--link-dir", rdv,	NULL };
	pid_t pp = 0;
	char *p;
	int rc;

	snprintf(dir, sizeof(dir), "%s.link", img);
	snprintf(out, sizeof(out), "%s/restore-link-%d.out", workdir, it);
	snprintf(pidf, sizeof(pidf), "%s/linked.pid", workdir);
	snprintf(rdv, sizeof(rdv), "%s/links", workdir);
	rc = run(argv, out, NULL);
	if (rc) {
		diag("the restore of the linked tree failed (exit %d)", rc);
		show_file("kupdate restore (linked tree)", out);
		return -1;
	}
	p = slurp(pidf);
	rc = p ? atoi(p) : 0;
	free(p);
	if (rc != linked_root || read_ppid(linked_root, &pp, &(char){ 0 }) || pp != getpid()) {
		diag("the linked tree came back as pid %d with parent %d, expected %d, ours (%d)",
		     rc, pp, linked_root, getpid());
		return -1;
	}
	diag("iteration %d: the linked tree restored %s the test's", it,
	     it % 2 ? "after" : "before");
	return 0;
}

/* --pre-dumps: the chain of pre-dumps of iteration it, the test changing
 * its memory after each; dump_prev names the last one */
static int pre_dumps(pid_t root, int it, const char *log)
{
	static char pre[512];
	char out[512], stage[512], prev[512] = "";
	double secs;

	for (int k = 0; k < o.pre_dumps; k++) {
		int rc;
		double t0;

		snprintf(pre, sizeof(pre), "%s/pre-%d-%d", workdir, it, k);
		snprintf(out, sizeof(out), "%s/pre-dump-%d-%d.out", workdir, it, k);
		dump_pre = true;
		dump_prev = prev[0] ? prev : NULL;
		rc = do_dump(root, pre, false, out, &secs);
		dump_pre = false;
		dump_prev = NULL;
		if (rc) {
			char *text = slurp(out);
			bool skip = o.skip_if && matches(text, o.skip_if);

			free(text);
			show_file("kupdate dump --pre-dump", out);
			kill_tree(root);
			if (skip) {
				diag("skipped: the pre-dump is not possible here");
				return 77;
			}
			diag("pre-dump %d failed (exit %d)", k, rc);
			return 1;
		}
		if (!alive(root)) {
			diag("the tree did not survive pre-dump %d", k);
			show_file("test output", log);
			return 1;
		}
		diag("pre-dump %d: %.3f s, %ld KiB", k, secs, dir_kb(pre));
		/* the test changes its memory now */
		snprintf(stage, sizeof(stage), "%s/stage-%d", workdir, it * o.pre_dumps + k + 1);
		kill(root, SIGUSR2);
		t0 = now();
		while (access(stage, F_OK)) {
			if (now() - t0 > o.timeout || !alive(root)) {
				diag("the test did not change its memory after pre-dump %d", k);
				show_file("test output", log);
				kill_tree(root);
				return 1;
			}
			usleep(2000);
		}
		snprintf(prev, sizeof(prev), "%s", pre);
	}
	if (o.pre_dumps && !o.no_prev)
		dump_prev = pre;
	return 0;
}

static int test_main(char **targv)
{
	char ready[512], log[512], img[512], out[512], pidfile[512];
	struct proc_info before[512], after[512];
	int nbefore, st;
	pid_t root;
	double t0;

	snprintf(ready, sizeof(ready), "%s/ready", workdir);
	snprintf(log, sizeof(log), "%s/test.log", workdir);
	snprintf(pidfile, sizeof(pidfile), "%s/restored.pid", workdir);

	root = o.own_ns ? ns_fork(false) : fork();
	if (root == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_RDONLY);

		setsid();
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		for (int i = 3; i < 1024; i++)
			if (!o.own_netns || (i != 40 && i != 41)) /* crrun-ns.c's */
				close(i);
		setenv("CRT_DIR", workdir, 1);
		if (chdir(workdir))
			_exit(126);
		execv(targv[0], targv);
		_exit(127);
	}
	t0 = now();
	while (access(ready, F_OK)) {
		if (waitpid(root, &st, WNOHANG) == root) {
			if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
				char *text = slurp(log);

				char *why = strtok(text, "\n");

				if (why && !strncmp(why, "SKIP: ", 6))
					why += 6;
				diag("skipped: %s", why ? why : "(no reason given)");
				free(text);
				return 77;
			}
			diag("the test exited before it was ready (status %#x)", st);
			show_file("test output", log);
			return 1;
		}
		if (now() - t0 > o.timeout) {
			diag("the test did not get ready in %d s", o.timeout);
			kill_tree(root);
			return 1;
		}
		usleep(2000);
	}
	usleep(20000); /* let it settle into its wait */
	if (o.peer && !o.one_way && wait_peer_progress(20, 30, "before the dump")) {
		kill_tree(root);
		return 1;
	}
	/* one way: 20 records of the peer's acknowledged */
	for (double end = now() + 30; o.peer && o.one_way && peer_acked(NULL) < 20 * 1016;) {
		if (now() > end || waitpid(peer_pid, NULL, WNOHANG) == peer_pid) {
			diag("the server acknowledged %lld bytes of the peer's before the dump, "
			     "expected 20 records within 30 s",
			     peer_acked(NULL));
			kill_tree(root);
			return 1;
		}
		usleep(10000);
	}

	if (o.leave_running) {
		double secs;

		long long icmp_lr[IC_N] = { 0 };

		snprintf(img, sizeof(img), "%s/img-lr", workdir);
		snprintf(out, sizeof(out), "%s/dump-lr.out", workdir);
		if (o.rto_revert >= 0)
			icmp_counters(icmp_lr);
		if (do_dump(root, img, true, out, &secs)) {
			diag("dump --leave-running failed");
			show_file("kupdate dump", out);
			kill_tree(root);
			return 1;
		}
		diag("dump --leave-running: %.3f s", secs);
		if (!alive(root)) {
			diag("the tree did not survive dump --leave-running");
			show_file("test output", log);
			return 1;
		}
		/* its pids are the running tree's: the restore refuses before it
		 * makes anything, naming the pid and who holds it */
		if (o.restore_running) {
			char rout[600], *text;
			double rsecs;
			bool ok;
			int rc;

			snprintf(rout, sizeof(rout), "%s/restore-lr.out", workdir);
			rc = do_restore(img, pidfile, rout, &rsecs);
			text = slurp(rout);
			ok = rc != 0 && alive(root) &&
			     matches(text,
				     o.running_fail
					     ? o.running_fail
					     : "pid [0-9]+ is in use \\(by \"[^\"]+\"\\); the tree "
					       "cannot be restored with its pids until it is free");
			free(text);
			if (!ok) {
				diag("a restore while the tree runs: expected a refusal (/%s/), "
				     "the "
				     "tree untouched (restore exit %d, tree %s)",
				     o.running_fail ? o.running_fail : "pid in use", rc,
				     alive(root) ? "alive" : "gone");
				show_file("kupdate restore", rout);
				kill_tree(root);
				return 1;
			}
			diag("a restore while the tree runs: refused, the tree untouched");
		}
		/* its connections go on, the peers told at once (tcp.c); what
		 * the peer wrote meanwhile, dropped by the lock, counts */
		peer_acked(&icmp_lr[IC_ACKED]);
		if (o.rto_revert >= 0 && check_rto_revert(icmp_lr, now(), root)) {
			kill_tree(root);
			return 1;
		}
		if (o.peer && !o.one_way) {
			long n = peer_progress();

			if (n < 0 ||
			    wait_peer_progress(n + 100, 30, "after dump --leave-running")) {
				kill_tree(root);
				return 1;
			}
		}
		usleep(50000);
	}

	if (o.extra_roots_file) {
		char path[512], *text, *p, *e;

		snprintf(path, sizeof(path), "%s/%s", workdir, o.extra_roots_file);
		text = slurp(path);
		for (p = text; nr_extra_roots < 16; p = e) {
			long v = strtol(p, &e, 10);

			if (e == p)
				break;
			extra_roots[nr_extra_roots++] = v;
		}
		free(text);
		if (!nr_extra_roots) {
			diag("the test named no extra roots in %s", path);
			kill_tree(root);
			return 1;
		}
	}

	if (o.linked_root_file) {
		char path[512], *text;

		snprintf(path, sizeof(path), "%s/%s", workdir, o.linked_root_file);
		text = slurp(path);
		linked_root = text ? atoi(text) : 0;
		free(text);
		if (linked_root <= 0) {
			diag("the test named no linked tree's root in %s", path);
			kill_tree(root);
			return 1;
		}
	}

	for (int it = 0; it < o.iterations; it++) {
		double dsecs, rsecs, t_restored;
		long long icmp0[IC_N] = { 0 };
		long probes;
		char prev[600];
		bool damage;
		int rc;

		rc = pre_dumps(root, it, log);
		if (rc)
			return rc;
		nbefore = collect_tree(root, before, 512);
		for (int r = 0; r < nr_extra_roots; r++)
			nbefore += collect_tree(extra_roots[r], before + nbefore, 512 - nbefore);
		collect_sysvshm(before, nbefore);
		snprintf(img, sizeof(img), "%s/img-%d", workdir, it);
		snprintf(out, sizeof(out), "%s/dump-%d.out", workdir, it);
		if (linked_root && linked_dump(img, it)) {
			kill_tree(root);
			return 1;
		}
		rc = do_dump(root, img, false, out, &dsecs);
		dump_prev = NULL;
		/* a refused dump leaves both trees running, as an apply would */
		if (linked_root && rc == 0 && !o.check && linked_end()) {
			kill_tree(root);
			return 1;
		}
		/* a dump that ended, however, took its record away (recover.c) */
		if (!o.expect_dump_killed &&
		    !run_ip("ls %s/dumps/[0-9]* >/dev/null 2>&1", workdir)) {
			diag("the dump (exit %d) left its record in %s/dumps", rc, workdir);
			kill_tree(root);
			return 1;
		}
		if (o.expect_dump_killed) {
			if (check_dump_killed(before, nbefore, rc, out)) {
				kill_tree(root);
				return 1;
			}
			goto verdict;
		}
		if (o.expect_dump_fail) {
			char *text = slurp(out);
			bool ok = rc != 0 && matches(text, o.expect_dump_fail);

			if (!ok) {
				diag("expected the dump to fail with /%s/", o.expect_dump_fail);
				show_file("kupdate dump", out);
				free(text);
				kill_tree(root);
				return 1;
			}
			diag("dump refused as expected: %s", strtok(text, "\n"));
			free(text);
			if (!alive(root)) {
				diag("the tree died although the dump failed");
				return 1;
			}
			if (access(img, F_OK) == 0 && dir_kb(img) > 0) {
				diag("a failed dump left images in %s", img);
				kill_tree(root);
				return 1;
			}
			/* in our own network namespace: the network lock of the
			 * failed dump must be gone (no connection left in the set) */
			if (o.netns && run_ip("nft list table inet kupdate 2>/dev/null | grep -q "
					      "'elements = {'") == 0) {
				diag("a failed dump left the network lock in place");
				system("nft list table inet kupdate >&2");
				kill_tree(root);
				return 1;
			}
			goto verdict;
		}
		if (rc) {
			diag("dump failed (exit %d)", rc);
			show_file("kupdate dump", out);
			kill_tree(root);
			return 1;
		}
		if (o.check) {
			/* a check changes nothing: every process is still there, in
			 * the state it had (a zombie stays a zombie) */
			for (int i = 0; i < nbefore; i++) {
				pid_t pp;
				char now;

				if (read_ppid(before[i].pid, &pp, &now) == 0 &&
				    (now == 'Z') == (before[i].state == 'Z'))
					continue;
				diag("pid %d died during dump --check", before[i].pid);
				kill_tree(root);
				return 1;
			}
			show_file("kupdate dump --check", out);
			goto verdict;
		}
		for (int r = 0; r < nr_extra_roots; r++)
			if (wait_exit(extra_roots[r], 10, &st)) {
				diag("the root %d is still alive after the dump", extra_roots[r]);
				kill_tree(root);
				return 1;
			}
		/* the tree must be gone; the root is our child */
		if (wait_exit(root, 10, &st)) {
			diag("the root %d is still alive after the dump", root);
			kill_tree(root);
			return 1;
		}
		for (int i = 0; i < nbefore; i++)
			for (int k = 0; k < 500 && alive(before[i].pid); k++)
				usleep(2000);
		for (int i = 0; i < nbefore; i++)
			if (alive(before[i].pid)) {
				diag("pid %d of the tree is still alive after the dump",
				     before[i].pid);
				return 1;
			}
		reap_all();
		if (o.max_image_kb >= 0 && dir_kb(img) > o.max_image_kb) {
			diag("images take %ld KiB, more than the %ld KiB expected", dir_kb(img),
			     o.max_image_kb);
			return 1;
		}
		if (o.expect_images && !images_as_expected(img))
			return 1;

		if (o.drop_sysvshm && drop_sysvshm())
			return 1;
		if (o.rmdirs_file && rmdirs_listed())
			return 1;
		/* a swap takes a file of the previous dump: the last iteration */
		damage = o.corrupt && (strncmp(o.corrupt, "swap:", 5) || it == o.iterations - 1);
		if (it > 0)
			snprintf(prev, sizeof(prev), "%s/img-%d", workdir, it - 1);
		if (damage && corrupt_images(img, it > 0 ? prev : NULL)) {
			diag("cannot damage the images as asked");
			return 1;
		}
		if (o.pause_ms)
			usleep(o.pause_ms * 1000);
		snprintf(out, sizeof(out), "%s/restore-%d.out", workdir, it);
		probes = o.win_probes ? tcpext_counter("TCPWinProbe") : 0;
		if (o.rto_revert >= 0)
			icmp_counters(icmp0);
		if (linked_root && it % 2 == 0 && linked_restore(img, it))
			return 1;
		rc = do_restore(img, pidfile, out, &rsecs);
		t_restored = now();
		if (o.win_probes)
			probes = tcpext_counter("TCPWinProbe") - probes;
		if (o.expect_restore_fail && (!o.corrupt || damage)) {
			char *text = slurp(out);
			bool ok = rc != 0 && matches(text, o.expect_restore_fail);

			if (!ok) {
				diag("expected the restore to fail with /%s/",
				     o.expect_restore_fail);
				show_file("kupdate restore", out);
				free(text);
				kill_tree(root);
				return 1;
			}
			/* damaged images: one clear error line, no more */
			if (o.corrupt) {
				int errs = 0;

				for (char *l = strstr(text, "error:"); l;
				     l = strstr(l + 1, "error:"))
					errs++;
				if (errs != 1) {
					diag("expected one error line, got %d", errs);
					show_file("kupdate restore", out);
					free(text);
					return 1;
				}
			}
			diag("restore refused as expected: %s", strtok(text, "\n"));
			free(text);
			if (check_no_tree_shm())
				return 1;
			for (int i = 0; i < nbefore; i++)
				if (alive(before[i].pid)) {
					diag("a failed restore left pid %d behind", before[i].pid);
					kill_tree(root);
					return 1;
				}
			return 0;
		}
		if (rc) {
			diag("restore failed (exit %d)", rc);
			show_file("kupdate restore", out);
			kill_tree(root);
			return 1;
		}
		if (linked_root && it % 2 == 1 && linked_restore(img, it)) {
			kill_tree(root);
			return 1;
		}
		/* in our own network namespace: the restore released the lock of
		 * the connections it put back, the last one removing the table */
		if (o.netns && !run_ip("nft list table inet kupdate >/dev/null 2>&1")) {
			diag("the restore left the network lock in place");
			system("nft list table inet kupdate >&2");
			kill_tree(root);
			return 1;
		}
		/* each connection leaves repair mode with three window probes (a
		 * BSD-derived peer counts them as duplicate ACKs: tcp.c) */
		if (o.win_probes && probes < o.win_probes) {
			diag("the restore sent %ld window probes, expected at least %d", probes,
			     o.win_probes);
			kill_tree(root);
			return 1;
		}
		if (o.rto_revert >= 0 && check_rto_revert(icmp0, t_restored, root)) {
			kill_tree(root);
			return 1;
		}
		{
			char *p = slurp(pidfile);
			pid_t rp = atoi(p);

			free(p);
			if (rp != root) {
				diag("restore reported root pid %d, expected %d", rp, root);
				kill_tree(rp > 0 ? rp : root);
				return 1;
			}
		}
		if (o.own_ns && ns_check_restored(root)) {
			kill_tree(root);
			return 1;
		}
		{
			int nafter = collect_tree(root, after, 512);

			for (int r = 0; r < nr_extra_roots; r++) {
				pid_t pp = 0;
				char stc;

				nafter +=
					collect_tree(extra_roots[r], after + nafter, 512 - nafter);
				if (read_ppid(extra_roots[r], &pp, &stc) || pp != getpid()) {
					diag("the extra root %d came back with parent %d, expected "
					     "us (%d)",
					     extra_roots[r], pp, getpid());
					kill_tree(root);
					return 1;
				}
			}

			/* a tree whose processes come and go (a build): the
			 * processes seen before the dump need not be those it
			 * had at the dump; the root came back, the test's own
			 * checks say the rest */
			for (int i = 0; i < (o.churn ? 0 : nbefore); i++) {
				bool found = false;

				for (int k = 0; k < nafter; k++)
					if (after[k].pid == before[i].pid) {
						found = true;
						if (i && after[k].ppid != before[i].ppid) {
							diag("pid %d came back with parent %d, was "
							     "%d",
							     before[i].pid, after[k].ppid,
							     before[i].ppid);
							kill_tree(root);
							return 1;
						}
					}
				if (!found) {
					diag("pid %d did not come back", before[i].pid);
					kill_tree(root);
					return 1;
				}
			}
			if (!o.churn && nafter != nbefore) {
				diag("%d processes before the dump, %d after the restore", nbefore,
				     nafter);
				kill_tree(root);
				return 1;
			}
		}
		diag("iteration %d: %d processes, images %ld KiB, dump %.3f s, restore %.3f s", it,
		     nbefore, dir_kb(img), dsecs, rsecs);
		if (o.peer && !o.one_way) {
			long n = peer_progress();

			if (n < 0 || wait_peer_progress(n + 100, 60, "after the restore")) {
				kill_tree(root);
				return 1;
			}
		}
		/* a swap needs this dump for the next iteration */
		if (!o.keep && !(o.corrupt && !strncmp(o.corrupt, "swap:", 5))) {
			char *rm[] = { "/bin/rm", "-rf", img, NULL }, link[600];

			run(rm, "/dev/null", NULL);
			snprintf(link, sizeof(link), "%s.link", img);
			rm[2] = link;
			run(rm, "/dev/null", NULL);
			for (int k = 0; k < o.pre_dumps; k++) {
				char pre[512];

				snprintf(pre, sizeof(pre), "%s/pre-%d-%d", workdir, it, k);
				rm[2] = pre;
				run(rm, "/dev/null", NULL);
			}
		}
		usleep(20000);
	}

verdict:
	for (int r = 0; r < nr_extra_roots; r++) {
		int est;

		if (getppid() && read_ppid(extra_roots[r], &(pid_t){ 0 }, &(char){ 0 })) {
			diag("the extra root %d is gone", extra_roots[r]);
			kill_tree(root);
			return 1;
		}
		kill(extra_roots[r], SIGTERM);
		if (wait_exit(extra_roots[r], o.timeout, &est) || !WIFEXITED(est) ||
		    WEXITSTATUS(est)) {
			diag("the extra root %d did not end well (%#x)", extra_roots[r], est);
			kill_tree(root);
			return 1;
		}
	}
	if (o.peer && stop_peer()) {
		diag("the peer saw a problem");
		kill_tree(root);
		return 1;
	}
	kill(root, SIGTERM);
	if (wait_exit(root, o.timeout, &st)) {
		diag("the test did not finish within %d s of SIGTERM", o.timeout);
		show_file("test output", log);
		kill_tree(root);
		return 1;
	}
	/* the linked tree: its own verdict, once the test's is given */
	if (linked_root) {
		int lst = 0;

		kill(linked_root, SIGTERM);
		if (wait_exit(linked_root, o.timeout, &lst) || !WIFEXITED(lst) ||
		    WEXITSTATUS(lst)) {
			diag("the linked tree's root %d did not end well (%#x)", linked_root, lst);
			show_file("test output", log);
			return 1;
		}
	}
	{
		char *text = slurp(log), *last = text, *p;
		bool pass;

		for (p = text; *p; p++)
			if (*p == '\n' && p[1])
				last = p + 1;
		pass = !strncmp(last, "PASS", 4) && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!pass) {
			diag("test verdict: exit %#x", st);
			show_file("test output", log);
		}
		free(text);
		return pass ? 0 : 1;
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "kupdate", required_argument, NULL, 'k' },
		{ "iterations", required_argument, NULL, 'i' },
		{ "leave-running", no_argument, NULL, 'l' },
		{ "restore-running", no_argument, NULL, 'b' },
		{ "churn", no_argument, NULL, 'd' },
		{ "host-mount-late", no_argument, NULL, 'e' },
		{ "running-fail", required_argument, NULL, 'c' },
		{ "max-image-kb", required_argument, NULL, 'm' },
		{ "expect-images", required_argument, NULL, 'I' },
		{ "timeout", required_argument, NULL, 't' },
		{ "expect-dump-fail", required_argument, NULL, 'F' },
		{ "expect-restore-fail", required_argument, NULL, 'R' },
		{ "expect-dump-killed", no_argument, NULL, 'D' },
		{ "dump-opt", required_argument, NULL, 'o' },
		{ "keep", no_argument, NULL, 'K' },
		{ "corrupt", required_argument, NULL, 'X' },
		{ "kupdate-env", required_argument, NULL, 'E' },
		{ "kupdate-nofile", required_argument, NULL, 'n' },
		{ "netns", no_argument, NULL, 'N' },
		{ "peer", required_argument, NULL, 'P' },
		{ "peer-arg", required_argument, NULL, 'A' },
		{ "peer-local", no_argument, NULL, 'O' },
		{ "pause-ms", required_argument, NULL, 'W' },
		{ "check", no_argument, NULL, 'H' },
		{ "extra-roots-file", required_argument, NULL, 'Z' },
		{ "linked-root-file", required_argument, NULL, 'y' },
		{ "restore-opt", required_argument, NULL, 'r' },
		{ "drop-sysvshm", no_argument, NULL, 'S' },
		{ "rmdirs-file", required_argument, NULL, '2' },
		{ "squat-sysvshm", no_argument, NULL, 'Q' },
		{ "pre-dumps", required_argument, NULL, 'p' },
		{ "skip-if", required_argument, NULL, 's' },
		{ "no-prev", no_argument, NULL, 'V' },
		{ "win-probes", required_argument, NULL, 'w' },
		{ "rto-revert", required_argument, NULL, 'T' },
		{ "one-way", no_argument, NULL, '1' },
		{ "own-ns", no_argument, NULL, 'M' },
		{ "ns-holder-differs", no_argument, NULL, 'Y' },
		{ "ns-unasked", no_argument, NULL, 'U' },
		{ "own-userns", no_argument, NULL, 'J' },
		{ "fork-storm", no_argument, NULL, 'G' },
		{ "own-netns", no_argument, NULL, 'B' },
		{ "private-dev", no_argument, NULL, 'v' },
		{ "activate-tcp", required_argument, NULL, 'a' },
		{ "activate-unix", required_argument, NULL, 'u' },
		{ 0 },
	};
	char *extra[16];
	int c, ret;

	o.kupdate = getenv("KUPDATE") ? getenv("KUPDATE") : "build/bin/kupdate";
	o.dump_extra = extra;
	while ((c = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (c) {
		case 'k':
			o.kupdate = optarg;
			break;
		case 'M':
			o.own_ns = true;
			break;
		case 'Y':
			o.ns_holder_differs = true;
			break;
		case 'U':
			o.ns_unasked = true;
			break;
		case 'J':
			o.own_ns = o.own_userns = true;
			break;
		case 'G':
			o.fork_storm = true;
			break;
		case 'B':
			o.own_ns = o.own_netns = true;
			break;
		case 'v':
			o.own_ns = o.private_dev = true;
			break;
		case 'a':
			o.activate_port = atoi(optarg);
			break;
		case 'u':
			o.activate_unix = optarg;
			break;
		case 'i':
			o.iterations = atoi(optarg);
			break;
		case 'l':
			o.leave_running = true;
			break;
		case 'b':
			o.leave_running = o.restore_running = true;
			break;
		case 'd':
			o.churn = true;
			break;
		case 'e':
			o.host_mount_late = o.own_ns = true;
			break;
		case 'c':
			o.leave_running = o.restore_running = true;
			o.running_fail = optarg;
			break;
		case 'm':
			o.max_image_kb = atol(optarg);
			break;
		case 'I':
			o.expect_images = optarg;
			break;
		case 't':
			o.timeout = atoi(optarg);
			break;
		case 'F':
			o.expect_dump_fail = optarg;
			break;
		case 'R':
			o.expect_restore_fail = optarg;
			break;
		case 'D':
			o.expect_dump_killed = true;
			break;
		case 'o':
			if (o.n_dump_extra < 16)
				extra[o.n_dump_extra++] = optarg;
			break;
		case 'K':
			o.keep = true;
			break;
		case 'X':
			o.corrupt = optarg;
			break;
		case 'N':
			o.netns = true;
			break;
		case 'P':
			o.peer = optarg;
			break;
		case 'O':
			o.peer_local = true;
			break;
		case 'W':
			o.pause_ms = atoi(optarg);
			break;
		case 'H':
			o.check = true;
			break;
		case 'Z':
			o.extra_roots_file = optarg;
			break;
		case 'y':
			o.linked_root_file = optarg;
			break;
		case 'S':
			o.drop_sysvshm = true;
			break;
		case '2':
			o.rmdirs_file = optarg;
			break;
		case 'Q':
			o.drop_sysvshm = o.squat_sysvshm = true;
			break;
		case 'p':
			o.pre_dumps = atoi(optarg);
			break;
		case 's':
			o.skip_if = optarg;
			break;
		case 'w':
			o.win_probes = atoi(optarg);
			break;
		case 'T':
			o.rto_revert = atoi(optarg);
			break;
		case '1':
			o.one_way = true;
			break;
		case 'V':
			o.no_prev = true;
			break;
		case 'r':
			if (o.n_restore_extra < 8)
				o.restore_extra[o.n_restore_extra++] = optarg;
			break;
		case 'A':
			if (o.n_peer_args < 8)
				o.peer_args[o.n_peer_args++] = optarg;
			break;
		case 'E':
			/* for the kupdate commands (the test sees it too) */
			putenv(optarg);
			break;
		case 'n':
			/* kupdate runs with a lower RLIMIT_NOFILE than the test */
			o.kupdate_nofile = atol(optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: crrun [options] TEST [ARGS...]\n");
		return 2;
	}
	if (o.netns && enter_netns())
		return 1;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		perror("crrun: PR_SET_CHILD_SUBREAPER");
		return 1;
	}
	{
		const char *tmp = getenv("CRT_TMP") ? getenv("CRT_TMP") : "/tmp";
		snprintf(workdir, sizeof(workdir), "%s/crtest.XXXXXX", tmp);
		if (!mkdtemp(workdir)) {
			perror("crrun: mkdtemp");
			return 1;
		}
		chmod(workdir, 0755);
		/* the records of kupdate's dumps (recover.c) stay with the test */
		setenv("KUPDATE_RUN_DIR", workdir, 1);
	}
	{
		/* the test runs in the work directory: absolute paths */
		static char prog[4096], kup[4096];

		if (!realpath(argv[optind], prog) || !realpath(o.kupdate, kup)) {
			fprintf(stderr, "crrun: cannot find %s or %s\n", argv[optind], o.kupdate);
			return 1;
		}
		argv[optind] = prog;
		o.kupdate = kup;
	}
	if (o.peer && (!o.netns || start_peer())) {
		diag("--peer needs --netns and a working ip(8)");
		return 1;
	}
	if (o.host_mount_late && host_late_mount()) {
		diag("--host-mount-late: cannot mount a tmpfs: %s", strerror(errno));
		return 1;
	}
	ret = test_main(&argv[optind]);
	ns_holder_stop();
	host_late_umount();
	remove_our_shm();
	if (peer_pid) {
		kill(peer_pid, SIGKILL);
		waitpid(peer_pid, NULL, 0);
	}
	reap_all();
	kill_leftovers();
	if ((ret == 0 || ret == 77) && !o.keep) {
		char *rm[] = { "/bin/rm", "-rf", workdir, NULL };
		run(rm, "/dev/null", NULL);
	} else {
		diag("work directory kept: %s", workdir);
	}
	return ret;
}
