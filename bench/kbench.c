/* kbench: `make bench`.  Checkpoints and restores the workloads of
 * kbench-work with kupdate (and, with --criu, with CRIU in the same run,
 * alternating), and prints per case the medians of dump wall time, frozen
 * time, restore time, image size and the tool's peak RSS, the dump
 * throughput against the image store's own write rate, and kupdate/CRIU
 * ratios.  For mem256 and mem1g it also prints the floor of a dump on this
 * machine (measure_floor): what no tool writing checksummed images could
 * go below.
 *
 *   kbench --kupdate PATH --work PATH [--criu PATH] [--store DIR]
 *          [--runs N] [--cases a,b,...] [--warm]
 *
 * Every workload checks its whole state after each restore (SIGUSR1) and
 * at the end (SIGTERM): a figure of a run whose restore came back wrong is
 * not printed, the case fails.  Runs in a network namespace of its own and
 * as a child subreaper; signals only processes it started.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"

#define MAX_RUNS  15
#define MAX_PROCS 256

enum tool_kind { T_KUPDATE, T_KUPDATE_PRE, T_CRIU, T_CRIU_PRE, T_MAX };
static const char *const tool_names[T_MAX] = { "kupdate", "kupdate+pre", "criu", "criu+pre" };

static struct {
	const char *kupdate, *criu, *work, *cases;
	char store[512]; /* our own directory inside the chosen store */
	int runs;
	bool criu_pre; /* CRIU can track dirty memory here */
	bool warm;     /* memory touched just before each timed step */
	const char *criu_pre_why;
} o = { .runs = 5 };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every workload started (its own session: the pid is its process group,
 * which a restore keeps), to end them if kbench is stopped or dies. */
static pid_t started[64];
static volatile sig_atomic_t nr_started;

static void end_workloads(void)
{
	for (int i = 0; i < nr_started; i++) {
		kill(-started[i], SIGKILL);
		kill(started[i], SIGKILL);
	}
	nr_started = 0;
}

static void on_stop(int sig)
{
	char *rm[] = { "/bin/rm", "-rf", o.store, NULL };
	pid_t pid;

	end_workloads();
	if (o.store[0] && (pid = fork()) == 0) {
		execv(rm[0], rm);
		_exit(127);
	}
	if (o.store[0] && pid > 0)
		waitpid(pid, NULL, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kbench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	end_workloads();
	exit(1);
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	ssize_t r;

	if (!b)
		die("out of memory");
	if (fd < 0) {
		b[0] = 0;
		if (len)
			*len = 0;
		return b;
	}
	while ((r = read(fd, b + n, cap - n)) > 0) {
		n += r;
		if (n == cap) {
			char *nb = realloc(b, 2 * cap + 1);

			if (!nb)
				die("out of memory");
			b = nb;
			cap *= 2;
		}
	}
	close(fd);
	b[n] = 0;
	if (len)
		*len = n;
	return b;
}

static void show_tail(const char *title, const char *path)
{
	char *t = slurp(path, NULL);
	size_t n = strlen(t);
	const char *s = n > 3000 ? t + n - 3000 : t;

	fprintf(stderr, "--- %s (%s)\n%s\n---\n", title, path, s);
	free(t);
}

/* -------------------------------------------------------- child processes */

struct result {
	int status;
	double secs;
	long maxrss_kb;
};

/* Run argv with its output in out; wall time and peak RSS of the child. */
static struct result run(char *const argv[], const char *out)
{
	struct result r = { -1, 0, 0 };
	double t0 = now();
	struct rusage ru;
	pid_t pid = fork();
	int st;

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_RDONLY);

		if (fd < 0 || nul < 0)
			_exit(126);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		execv(argv[0], argv);
		_exit(127);
	}
	while (wait4(pid, &st, 0, &ru) < 0)
		if (errno != EINTR)
			die("wait4: %s", strerror(errno));
	r.secs = now() - t0;
	r.maxrss_kb = ru.ru_maxrss;
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r;
}

static void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Once a workload's process and process group are gone (reaped), their
 * number may be anyone's: end_workloads must not signal it any more. */
static void forget_workload(pid_t pid)
{
	reap_all();
	if (!(kill(-pid, 0) && errno == ESRCH && kill(pid, 0) && errno == ESRCH))
		return;
	for (int i = 0; i < nr_started; i++)
		if (started[i] == pid) {
			started[i] = started[nr_started - 1];
			nr_started--;
			return;
		}
}

static bool alive(pid_t pid)
{
	char path[64], buf[512], *p;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[2] != 'Z' && p[2] != 'X';
}

/* pids of the tree rooted at root */
static int collect_tree(pid_t root, pid_t *out, int max)
{
	int n = 0;

	out[n++] = root;
	for (int i = 0; i < n && n < max; i++) {
		char path[128];
		DIR *d;
		struct dirent *de;

		snprintf(path, sizeof(path), "/proc/%d/task", out[i]);
		d = opendir(path);
		while (d && (de = readdir(d)) && n < max) {
			char cpath[300], *text, *p, *e;

			if (!isdigit((unsigned char)de->d_name[0]))
				continue;
			snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", out[i],
				 de->d_name);
			text = slurp(cpath, NULL);
			for (p = text; n < max; p = e) {
				long c = strtol(p, &e, 10);

				if (e == p)
					break;
				out[n++] = c;
			}
			free(text);
		}
		if (d)
			closedir(d);
	}
	return n;
}

static bool wait_gone(const pid_t *pids, int n, double secs)
{
	double end = now() + secs;

	for (;;) {
		bool any = false;

		reap_all();
		for (int i = 0; i < n && !any; i++)
			any = alive(pids[i]);
		if (!any)
			return true;
		if (now() > end)
			return false;
		usleep(1000);
	}
}

static void kill_tree(pid_t root)
{
	pid_t t[MAX_PROCS];
	int n = collect_tree(root, t, MAX_PROCS);

	for (int i = 0; i < n; i++)
		kill(t[i], SIGKILL);
	wait_gone(t, n, 5);
	forget_workload(root);
}

/* ------------------------------------------------------------- workloads */

struct instance {
	char dir[600]; /* work directory: logs, ready files */
	pid_t root, client;
	unsigned checks;
};

static pid_t spawn(const char *dir, const char *name, char *const argv[])
{
	char log[800], ready[700];
	pid_t pid;

	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	snprintf(ready, sizeof(ready), "%s/%s.ready", dir, name);
	unlink(ready);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_RDONLY);

		if (fd < 0 || nul < 0 || chdir(dir))
			_exit(126);
		setsid();
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		setenv("BENCH_READY", ready, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (nr_started < (int)(sizeof(started) / sizeof(started[0])))
		started[nr_started++] = pid;
	return pid;
}

static bool wait_ready(const char *dir, const char *name, pid_t pid, double secs)
{
	char ready[800], log[800];
	double end = now() + secs;

	snprintf(ready, sizeof(ready), "%s/%s.ready", dir, name);
	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	while (access(ready, F_OK)) {
		if (!alive(pid) || now() > end) {
			fprintf(stderr, "kbench: workload %s did not get ready\n", name);
			show_tail("workload output", log);
			return false;
		}
		usleep(2000);
	}
	return true;
}

/* Lines "OK n" / "PASS" / "FAIL why" the workload printed. */
static int count_lines(const char *path, const char *prefix, char *fail, size_t fail_len)
{
	char *t = slurp(path, NULL), *line, *save = NULL;
	int n = 0;

	for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, prefix, strlen(prefix)))
			n++;
		if (fail && !strncmp(line, "FAIL", 4))
			snprintf(fail, fail_len, "%s", line);
	}
	free(t);
	return n;
}

/* Ask a workload to check its whole state; true when it says OK. */
static bool check_now(struct instance *in, const char *name, pid_t pid, unsigned *count)
{
	char log[800], why[512] = "";
	double end = now() + 120;

	snprintf(log, sizeof(log), "%s/%s.log", in->dir, name);
	kill(pid, SIGUSR1);
	for (;;) {
		int n = count_lines(log, "OK ", why, sizeof(why));

		if (why[0]) {
			fprintf(stderr, "kbench: %s: %s\n", name, why);
			return false;
		}
		if (n > (int)*count) {
			*count = n;
			return true;
		}
		if (!alive(pid) || now() > end) {
			fprintf(stderr, "kbench: %s did not answer its check\n", name);
			show_tail("workload output", log);
			return false;
		}
		usleep(2000);
	}
}

static __attribute__((noinline)) bool finish(struct instance *in, const char *name, pid_t pid)
{
	char log[800], why[512] = "";
	double end = now() + 120;

	snprintf(log, sizeof(log), "%s/%s.log", in->dir, name);
	kill(pid, SIGTERM);
	for (;;) {
		if (count_lines(log, "PASS", why, sizeof(why)) > 0) {
			wait_gone(&pid, 1, 10);
			return true;
		}
		if (why[0] || !alive(pid) || now() > end) {
			fprintf(stderr, "kbench: %s did not pass its final check: %s\n", name,
				why[0] ? why : "no verdict");
			kill_tree(pid);
			return false;
		}
		usleep(2000);
	}
}

/* ------------------------------------------------------------------ cases */

struct bcase {
	const char *name, *what;
	char *argv[6]; /* kbench-work arguments */
	uint64_t mem_mib;
	bool tcp, tree, predump;
	bool floor; /* measure the floor of a dump of mem_mib here (not for
		     * 4 GiB: its three rounds took 47 s, a floor of
		     * 1.04-1.28 s against kupdate's 1.19-1.55 s) */
};

static struct bcase cases[] = {
	{ "mem256", "256 MiB touched", { "mem", "256" }, 256, .floor = true },
	{ "mem1g", "1 GiB touched", { "mem", "1024" }, 1024, .floor = true },
	{ "mem4g", "4 GiB touched", { "mem", "4096" }, 4096, .tcp = false },
	{ "wss1g",
	  "1 GiB, rewrites 16 MiB at 64 pages/ms",
	  { "wss", "1024", "16", "64" },
	  1024,
	  .predump = true },
	{ "tree100", "100 processes", { "tree", "100" }, 16, .tree = true },
	{ "fds10k", "10,000 open fds", { "fds", "10000" }, 16, .tcp = false },
	{ "tcp1k", "1,000 TCP connections", { "tcpsrv", "1000", "port" }, 16, .tcp = true },
};

static bool start_instance(const struct bcase *c, struct instance *in, const char *tag)
{
	char *argv[8] = { (char *)o.work };
	int a = 1;

	snprintf(in->dir, sizeof(in->dir), "%s/w-%s-%s", o.store, c->name, tag);
	if (mkdir(in->dir, 0700) && errno != EEXIST)
		die("mkdir %s: %s", in->dir, strerror(errno));
	for (int i = 0; c->argv[i]; i++)
		argv[a++] = c->argv[i];
	argv[a] = NULL;
	in->checks = 0;
	in->client = 0;
	unlink("port");
	in->root = spawn(in->dir, "work", argv);
	if (c->tcp) {
		char *cargv[] = { (char *)o.work, "tcpcli", c->argv[1], "port", NULL };

		in->client = spawn(in->dir, "client", cargv);
		if (!wait_ready(in->dir, "client", in->client, 60))
			return false;
	}
	return wait_ready(in->dir, "work", in->root, 300);
}

static bool check_instance(struct instance *in)
{
	unsigned dummy = 0;

	if (!check_now(in, "work", in->root, &in->checks))
		return false;
	if (in->client) {
		char log[800];

		snprintf(log, sizeof(log), "%s/client.log", in->dir);
		dummy = count_lines(log, "OK ", NULL, 0);
		return check_now(in, "client", in->client, &dummy);
	}
	return true;
}

static __attribute__((noinline)) bool end_instance(struct instance *in)
{
	bool ok = true;

	/* the client's last check needs the server; once the server has
	 * ended, the client has nothing left to check: it is killed */
	if (in->client) {
		char log[800];
		unsigned n;

		snprintf(log, sizeof(log), "%s/client.log", in->dir);
		n = count_lines(log, "OK ", NULL, 0);
		ok = check_now(in, "client", in->client, &n);
	}
	ok = finish(in, "work", in->root) && ok;
	forget_workload(in->root);
	if (in->client) {
		kill(in->client, SIGKILL);
		wait_gone(&in->client, 1, 10);
		forget_workload(in->client);
	}
	return ok;
}

/* ----------------------------------------------------------- measurement */

struct sample {
	double predump, dump, frozen, restore;
	double image_mib;
	double rss_mib;
};

static double dir_mib(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	double b = 0;

	while (d && (de = readdir(d))) {
		char p[1200];
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (!lstat(p, &st) && S_ISREG(st.st_mode))
			b += st.st_size;
	}
	if (d)
		closedir(d);
	return b / (1 << 20);
}

static void rm_rf(const char *path)
{
	char *argv[] = { "/bin/rm", "-rf", (char *)path, NULL };

	run(argv, "/dev/null");
}

/* kupdate -v prints "...; frozen X s, total Y s" */
static double kupdate_frozen(const char *out)
{
	char *t = slurp(out, NULL), *p = strstr(t, "frozen ");
	double v = p ? strtod(p + 7, NULL) : -1;

	free(t);
	return v;
}

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (int s = 0; *p < end && s < 64; s += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			break;
	}
	return v;
}

/* CRIU's stats-dump: two magics, a length, then a stats_entry whose field
 * 1 is the dump's stats: freezing_time (1) and frozen_time (2) in us.
 * The frozen time reported is their sum, from the first stop to the end,
 * as kupdate's is. */
static double criu_frozen(const char *imgdir)
{
	char path[800];
	size_t len;
	uint8_t *t;
	const uint8_t *p, *end;
	uint64_t freezing = 0, frozen = 0;
	bool found = false;

	snprintf(path, sizeof(path), "%s/stats-dump", imgdir);
	t = (uint8_t *)slurp(path, &len);
	if (len < 12) {
		free(t);
		return -1;
	}
	p = t + 12;
	end = t + len;
	while (p < end) {
		uint64_t key = varint(&p, end);

		if ((key & 7) == 2) {
			uint64_t l = varint(&p, end);
			const uint8_t *q = p, *qe = p + l;

			if (qe > end)
				break;
			if (key >> 3 == 1) {
				found = true;
				while (q < qe) {
					uint64_t k = varint(&q, qe);

					if ((k & 7) == 0) {
						uint64_t v = varint(&q, qe);

						if (k >> 3 == 1)
							freezing = v;
						else if (k >> 3 == 2)
							frozen = v;
					} else if ((k & 7) == 2) {
						q += varint(&q, qe);
					} else if ((k & 7) == 5) {
						q += 4;
					} else if ((k & 7) == 1) {
						q += 8;
					} else {
						break;
					}
				}
			}
			p = qe;
		} else if ((key & 7) == 0) {
			varint(&p, end);
		} else {
			break;
		}
	}
	free(t);
	return found ? (freezing + frozen) / 1e6 : -1;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

/* This VM hands the memory it frees back to its host (free page
 * reporting), and the next first touch of such a page is a fault in the
 * host: a dump writes an image as large as the workload into fresh pages, a
 * restore fills as many, and which of them the host took back depends on
 * the seconds before.  With --warm, the store gets that much data (and 64
 * MiB more) written and removed just before each timed dump and restore,
 * for both tools: the pages they then take were touched a moment ago. */
static void warm_memory(const struct bcase *c)
{
	enum { BLK = 1 << 20 };
	static char *buf;
	char path[700];
	int fd;

	if (!o.warm)
		return;
	if (!buf) {
		buf = malloc(BLK);
		if (!buf)
			die("out of memory");
		memset(buf, 0x5a, BLK);
	}
	snprintf(path, sizeof(path), "%s/warm", o.store);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	for (uint64_t i = 0; i < c->mem_mib + 64; i++)
		if (write(fd, buf, BLK) != BLK)
			die("cannot write %s: %s", path, strerror(errno));
	close(fd);
	unlink(path);
}

/* One dump and restore of in by tool; false if anything went wrong. */
static bool one_run(const struct bcase *c, struct instance *in, int tool, int runno,
		    struct sample *s)
{
	char img[700], pre[700], out[800], pidf[800], pid_s[16], *argv[32];
	pid_t before[MAX_PROCS];
	int nbefore, a = 0;
	bool criu = tool == T_CRIU || tool == T_CRIU_PRE;
	struct result r;

	memset(s, 0, sizeof(*s));
	snprintf(img, sizeof(img), "%s/img-%s-%s-%d", o.store, c->name, tool_names[tool], runno);
	snprintf(pre, sizeof(pre), "%s/pre-%s-%s-%d", o.store, c->name, tool_names[tool], runno);
	snprintf(pid_s, sizeof(pid_s), "%d", in->root);
	snprintf(pidf, sizeof(pidf), "%s/restored.pid", in->dir);
	nbefore = collect_tree(in->root, before, MAX_PROCS);

	if (tool == T_KUPDATE_PRE || tool == T_CRIU_PRE) {
		if (criu) {
			char *pargv[] = { (char *)o.criu,
					  "pre-dump",
					  "-t",
					  pid_s,
					  "-D",
					  pre,
					  "-o",
					  (snprintf(out, sizeof(out), "%s/predump.log", in->dir),
					   out),
					  "--tcp-established",
					  "--network-lock",
					  "nftables",
					  NULL };
			mkdir(pre, 0700);
			r = run(pargv, "/dev/null");
		} else {
			char *pargv[] = { (char *)o.kupdate, "-v", "dump", "-t", pid_s, "-D", pre,
					  "--pre-dump",	     NULL };
			snprintf(out, sizeof(out), "%s/predump.out", in->dir);
			r = run(pargv, out);
		}
		if (r.status) {
			fprintf(stderr, "kbench: %s: %s pre-dump failed (exit %d)\n", c->name,
				tool_names[tool], r.status);
			show_tail("pre-dump output", out);
			return false;
		}
		s->predump = r.secs;
		s->rss_mib = r.maxrss_kb / 1024.0;
	}

	warm_memory(c);
	if (criu) {
		char log[800];

		snprintf(log, sizeof(log), "%s/dump.log", in->dir);
		mkdir(img, 0700);
		argv[a++] = (char *)o.criu;
		argv[a++] = "dump";
		argv[a++] = "-t";
		argv[a++] = pid_s;
		argv[a++] = "-D";
		argv[a++] = img;
		argv[a++] = "-o";
		argv[a++] = log;
		argv[a++] = "--tcp-established";
		argv[a++] = "--network-lock";
		argv[a++] = "nftables";
		if (tool == T_CRIU_PRE) {
			argv[a++] = "--prev-images-dir";
			argv[a++] = pre;
			argv[a++] = "--track-mem";
		}
		argv[a] = NULL;
		snprintf(out, sizeof(out), "%s/dump.out", in->dir);
		r = run(argv, out);
		if (r.status)
			snprintf(out, sizeof(out), "%s", log);
	} else {
		argv[a++] = (char *)o.kupdate;
		argv[a++] = "-v";
		argv[a++] = "dump";
		argv[a++] = "-t";
		argv[a++] = pid_s;
		argv[a++] = "-D";
		argv[a++] = img;
		if (tool == T_KUPDATE_PRE) {
			argv[a++] = "--prev";
			argv[a++] = pre;
		}
		argv[a] = NULL;
		snprintf(out, sizeof(out), "%s/dump.out", in->dir);
		r = run(argv, out);
	}
	if (r.status) {
		fprintf(stderr, "kbench: %s: %s dump failed (exit %d)\n", c->name, tool_names[tool],
			r.status);
		show_tail("dump output", out);
		return false;
	}
	s->dump = r.secs;
	s->rss_mib = max2(s->rss_mib, r.maxrss_kb / 1024.0);
	s->frozen = criu ? criu_frozen(img) : kupdate_frozen(out);
	s->image_mib = dir_mib(img) + dir_mib(pre);
	if (!wait_gone(before, nbefore, 30)) {
		fprintf(stderr, "kbench: %s: the tree is still there after the %s dump\n", c->name,
			tool_names[tool]);
		return false;
	}

	a = 0;
	unlink(pidf);
	warm_memory(c);
	if (criu) {
		char log[800];

		snprintf(log, sizeof(log), "%s/restore.log", in->dir);
		argv[a++] = (char *)o.criu;
		argv[a++] = "restore";
		argv[a++] = "-D";
		argv[a++] = img;
		argv[a++] = "-d";
		argv[a++] = "--pidfile";
		argv[a++] = pidf;
		argv[a++] = "-o";
		argv[a++] = log;
		argv[a++] = "--tcp-established";
		argv[a++] = "--network-lock";
		argv[a++] = "nftables";
		argv[a] = NULL;
		snprintf(out, sizeof(out), "%s/restore.out", in->dir);
		r = run(argv, out);
		if (r.status)
			snprintf(out, sizeof(out), "%s", log);
	} else {
		argv[a++] = (char *)o.kupdate;
		argv[a++] = "restore";
		argv[a++] = "-D";
		argv[a++] = img;
		argv[a++] = "--detach";
		argv[a++] = "--pidfile";
		argv[a++] = pidf;
		argv[a] = NULL;
		snprintf(out, sizeof(out), "%s/restore.out", in->dir);
		r = run(argv, out);
	}
	if (r.status) {
		fprintf(stderr, "kbench: %s: %s restore failed (exit %d)\n", c->name,
			tool_names[tool], r.status);
		show_tail("restore output", out);
		return false;
	}
	s->restore = r.secs;
	s->rss_mib = max2(s->rss_mib, r.maxrss_kb / 1024.0);
	{
		char *t = slurp(pidf, NULL);
		pid_t rp = atoi(t);

		free(t);
		if (rp != in->root) {
			fprintf(stderr, "kbench: %s: %s restored pid %d, expected %d\n", c->name,
				tool_names[tool], rp, in->root);
			return false;
		}
	}
	{
		pid_t after[MAX_PROCS];
		int nafter = collect_tree(in->root, after, MAX_PROCS);

		if (nafter != nbefore) {
			fprintf(stderr, "kbench: %s: %d processes before the %s dump, %d after\n",
				c->name, nbefore, tool_names[tool], nafter);
			return false;
		}
	}
	if (!check_instance(in))
		return false;
	rm_rf(img);
	rm_rf(pre);
	return true;
}

/* ---------------------------------------------------------------- report */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* the median of v[0..n), which it sorts */
static double median_of(double *v, int n)
{
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double median(const struct sample *s, int n, size_t off)
{
	double v[MAX_RUNS];

	for (int i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&s[i] + off);
	return median_of(v, n);
}

#define MED(s, n, f) median(s, n, offsetof(struct sample, f))

static double store_rate; /* GB/s */

static void print_header(void)
{
	printf("%-8s %-12s %8s %8s %8s %9s %9s %8s %9s %6s\n", "case", "tool", "pre-dump", "dump s",
	       "frozen s", "restore s", "image MiB", "RSS MiB", "dump GB/s", "%store");
}

static void print_row(const char *cname, int tool, const struct sample *s, int n)
{
	double dump = MED(s, n, dump), img = MED(s, n, image_mib);
	double gbs = dump > 0 ? img * (1 << 20) / 1e9 / dump : 0;
	char pre[16] = "-";

	if (tool == T_KUPDATE_PRE || tool == T_CRIU_PRE)
		snprintf(pre, sizeof(pre), "%.3f", MED(s, n, predump));
	printf("%-8s %-12s %8s %8.3f %8.3f %9.3f %9.1f %8.1f %9.2f %5.0f%%\n", cname,
	       tool_names[tool], pre, dump, MED(s, n, frozen), MED(s, n, restore), img,
	       MED(s, n, rss_mib), gbs, store_rate > 0 ? 100 * gbs / store_rate : 0);
}

static void print_ratio(const char *cname, const char *label, const struct sample *k, int nk,
			const struct sample *c, int nc)
{
	printf("%-8s %-12s %8s %7.2fx %7.2fx %8.2fx %8.2fx %7.2fx\n", cname, label, "",
	       MED(k, nk, dump) / MED(c, nc, dump), MED(k, nk, frozen) / MED(c, nc, frozen),
	       MED(k, nk, restore) / MED(c, nc, restore),
	       MED(k, nk, image_mib) / MED(c, nc, image_mib),
	       MED(k, nk, rss_mib) / MED(c, nc, rss_mib));
}

/* ------------------------------------------------------------ conditions */

static uint64_t mem_available_mib(void)
{
	char *t = slurp("/proc/meminfo", NULL), *p = strstr(t, "MemAvailable:");
	uint64_t kb = p ? strtoull(p + 13, NULL, 10) : 0;

	free(t);
	return kb / 1024;
}

static void conditions(const char *when)
{
	char *la = slurp("/proc/loadavg", NULL);
	char *argv[] = { "/usr/bin/pgrep", "-c", "-f", "qemu-system", NULL };
	char out[700], *q;
	struct result r;

	snprintf(out, sizeof(out), "%s/pgrep.out", o.store);
	r = run(argv, out);
	q = slurp(out, NULL);
	la[strcspn(la, "\n")] = 0;
	q[strcspn(q, "\n")] = 0;
	printf("# %s: load average %s; qemu-system processes: %s; MemAvailable %llu MiB\n", when,
	       la, r.status <= 1 ? q : "?", (unsigned long long)mem_available_mib());
	free(la);
	free(q);
}

/* The store's own write rate: 1 GiB with write(2) in 4 MiB blocks into a
 * new file (the way the dump writes), median of 3; and memcpy's. */
static void measure_store(const char *dir)
{
	enum { BLK = 4 << 20, TOTAL = 1 << 30 };
	char *buf = malloc(BLK), path[700];
	double w[3], m[3];
	struct statfs sf;
	char *src, *dst;

	if (!buf)
		die("out of memory");
	for (size_t i = 0; i < BLK; i++)
		buf[i] = (char)(i * 131 + 7);
	snprintf(path, sizeof(path), "%s/store-rate", dir);
	for (int k = 0; k < 3; k++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		double t0 = now();

		if (fd < 0)
			die("cannot create %s: %s", path, strerror(errno));
		for (size_t done = 0; done < TOTAL; done += BLK)
			if (write(fd, buf, BLK) != BLK)
				die("cannot write %s: %s", path, strerror(errno));
		close(fd);
		w[k] = TOTAL / 1e9 / (now() - t0);
		unlink(path);
	}
	src = mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED)
		die("cannot map 2 GiB for the memcpy figure");
	memset(src, 1, TOTAL);
	memset(dst, 2, TOTAL);
	for (int k = 0; k < 3; k++) {
		double t0 = now();

		memcpy(dst, src, TOTAL);
		m[k] = TOTAL / 1e9 / (now() - t0);
	}
	munmap(src, TOTAL);
	munmap(dst, TOTAL);
	qsort(w, 3, sizeof(w[0]), cmp_double);
	qsort(m, 3, sizeof(m[0]), cmp_double);
	store_rate = w[1];
	statfs(dir, &sf);
	printf("# store %s (%s): write(2) rate %.2f GB/s; memcpy %.1f GB/s (1 GiB, median of "
	       "3)\n",
	       dir,
	       sf.f_type == 0x01021994	 ? "tmpfs"
	       : sf.f_type == 0xef53	 ? "ext4 page cache"
	       : sf.f_type == 0x58465342 ? "xfs page cache"
					 : "other",
	       w[1], m[1]);
	free(buf);
}

static void enter_netns(void)
{
	struct ifreq ifr;
	int sk;

	if (unshare(CLONE_NEWNET))
		die("unshare(CLONE_NEWNET): %s", strerror(errno));
	sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (sk < 0 || ioctl(sk, SIOCGIFFLAGS, &ifr))
		die("lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sk, SIOCSIFFLAGS, &ifr))
		die("bringing lo up: %s", strerror(errno));
	close(sk);
}

static bool wanted(const char *name)
{
	const char *p = o.cases;
	size_t l = strlen(name);

	if (!p || !*p)
		return true;
	while (p && *p) {
		if (!strncmp(p, name, l) && (p[l] == ',' || !p[l]))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

static void criu_can_pre_dump(void)
{
	char out[700], *argv[] = { (char *)o.criu, "check", "--feature", "mem_dirty_track", NULL };
	struct result r;

	snprintf(out, sizeof(out), "%s/criu-check.out", o.store);
	r = run(argv, out);
	o.criu_pre = r.status == 0;
	o.criu_pre_why = "this kernel has no soft-dirty bits, which CRIU's pre-dump needs";
	if (!o.criu_pre)
		printf("# criu pre-dump: not run: %s (criu check --feature mem_dirty_track "
		       "fails)\n",
		       o.criu_pre_why);
}

/* -------------------------------------------------------------- the floor */

/* The least a dump of a process with mem_mib of memory into this store can
 * take, whatever the tool, with the checksum kupdate's images carry: the
 * process's own memory moved into two new files of the store by two threads
 * without being copied out of it first (vmsplice into a pipe, splice into
 * the file: the one copy CRIU's parasite makes), the crc32c of that memory
 * on two threads, and the death of the process (the kernel freeing its
 * memory; both tools wait for it).  Measured in a child of kbench that
 * plays the dumped process; no stop, no memory map, no image besides the
 * pages, so a real dump can only be slower. */
enum { FLOOR_THREADS = 2, FLOOR_PIPE = 1 << 20, FLOOR_ROUNDS = 3 };

struct floor_part {
	const char *mem;
	size_t len;
	char path[700];
	uint32_t crc;
	bool failed;
};

static void *floor_move(void *arg)
{
	struct floor_part *fp = arg;
	int pfd[2], fd = open(fp->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || pipe2(pfd, O_CLOEXEC)) {
		fp->failed = true;
		return NULL;
	}
	fcntl(pfd[1], F_SETPIPE_SZ, FLOOR_PIPE);
	for (size_t off = 0; off < fp->len && !fp->failed;) {
		size_t want = fp->len - off < FLOOR_PIPE ? fp->len - off : FLOOR_PIPE;
		struct iovec iov = { (void *)(fp->mem + off), want };
		ssize_t n = vmsplice(pfd[1], &iov, 1, 0);

		if (n <= 0) {
			fp->failed = true;
			break;
		}
		for (ssize_t moved = 0; moved < n;) {
			ssize_t k = splice(pfd[0], NULL, fd, NULL, n - moved, SPLICE_F_MOVE);

			if (k <= 0) {
				fp->failed = true;
				break;
			}
			moved += k;
		}
		off += n;
	}
	close(pfd[0]);
	close(pfd[1]);
	close(fd);
	return NULL;
}

static void *floor_sum(void *arg)
{
	struct floor_part *fp = arg;

	fp->crc = crc32c(0, fp->mem, fp->len);
	return NULL;
}

/* both threads' work on fp, timed */
static double floor_step(struct floor_part *fp, void *(*fn)(void *))
{
	pthread_t th[FLOOR_THREADS];
	double t0 = now();

	for (int i = 0; i < FLOOR_THREADS; i++)
		if (pthread_create(&th[i], NULL, fn, &fp[i]))
			return -1;
	for (int i = 0; i < FLOOR_THREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < FLOOR_THREADS; i++)
		if (fp[i].failed)
			return -1;
	return now() - t0;
}

/* The dumped process's part: its memory, kbench's warming of the store
 * (done here: done by kbench instead, the same moves took 0.6-0.8 s instead
 * of 0.15-0.2 s for 1 GiB), then the two timed steps; answers their times
 * and waits to be killed. */
static __attribute__((noreturn)) void floor_child(const struct bcase *c, int res)
{
	size_t len = c->mem_mib << 20;
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	struct floor_part fp[FLOOR_THREADS];
	double t[2] = { -1, -1 };
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (mem == MAP_FAILED)
		_exit(1);
	/* no page of zeros: a dump leaves those out */
	for (size_t i = 0; i < len; i += 4096) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(mem + i, &x, sizeof(x));
	}
	for (int i = 0; i < FLOOR_THREADS; i++) {
		fp[i] = (struct floor_part){ .mem = mem + i * (len / FLOOR_THREADS),
					     .len = len / FLOOR_THREADS };
		snprintf(fp[i].path, sizeof(fp[i].path), "%s/floor.%d", o.store, i);
	}
	warm_memory(c);
	t[0] = floor_step(fp, floor_move);
	if (t[0] >= 0)
		t[1] = floor_step(fp, floor_sum);
	for (int i = 0; i < FLOOR_THREADS; i++)
		unlink(fp[i].path);
	if (write(res, t, sizeof(t)) != sizeof(t))
		_exit(1);
	for (;;)
		pause();
}

/* One round: move, sum and death times of a process of c's size */
static bool floor_round(const struct bcase *c, double out[3])
{
	double t[2] = { -1, -1 }, t0;
	int res[2], st;
	pid_t pid;
	bool ok;

	if (pipe2(res, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0)
		floor_child(c, res[1]);
	close(res[1]);
	ok = read(res[0], t, sizeof(t)) == sizeof(t) && t[0] >= 0 && t[1] >= 0;
	t0 = now();
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	out[0] = t[0];
	out[1] = t[1];
	out[2] = now() - t0;
	close(res[0]);
	return ok;
}

/* The floor's row, below the tools' rows of c, and its ratio to CRIU's
 * dump (criu_dump <= 0: CRIU did not run). */
static void measure_floor(const struct bcase *c, double criu_dump)
{
	double r[FLOOR_ROUNDS][3], v[FLOOR_ROUNDS], m[3], total;

	for (int i = 0; i < FLOOR_ROUNDS; i++)
		if (!floor_round(c, r[i])) {
			printf("%-8s %-12s could not be measured (the child's memory, its "
			       "threads, or vmsplice and splice into %s failed)\n",
			       c->name, "floor", o.store);
			return;
		}
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < FLOOR_ROUNDS; i++)
			v[i] = r[i][k];
		m[k] = median_of(v, FLOOR_ROUNDS);
	}
	total = m[0] + m[1] + m[2];
	printf("%-8s %-12s %8s %8.3f %8s %9s %9.1f %8s %9.2f %5.0f%%\n", c->name, "floor", "-",
	       total, "-", "-", (double)c->mem_mib, "-", (c->mem_mib << 20) / 1e9 / total,
	       store_rate > 0 ? 100 * (c->mem_mib << 20) / 1e9 / total / store_rate : 0);
	if (criu_dump > 0)
		printf("%-8s %-12s %8s %7.2fx\n", c->name, "floor/criu", "", total / criu_dump);
	printf("# %s floor: moved %.3f s + crc32c %.3f s + death %.3f s (medians of %d)\n", c->name,
	       m[0], m[1], m[2], FLOOR_ROUNDS);
}

static bool run_case(struct bcase *c)
{
	int tools[T_MAX], nt = 0;
	struct instance in[T_MAX];
	static struct sample s[T_MAX][MAX_RUNS];
	bool failed[T_MAX] = { false };
	uint64_t need, avail = mem_available_mib();
	bool ok = true;

	tools[nt++] = T_KUPDATE;
	if (c->predump)
		tools[nt++] = T_KUPDATE_PRE;
	if (o.criu) {
		tools[nt++] = T_CRIU;
		if (c->predump && o.criu_pre)
			tools[nt++] = T_CRIU_PRE;
	}
	/* one workload per tool family, plus the images of one dump */
	need = c->mem_mib * ((o.criu ? 2 : 1) + 1) + 1024;
	if (need > avail) {
		printf("%-8s skipped: needs about %llu MiB of memory, %llu MiB available\n",
		       c->name, (unsigned long long)need, (unsigned long long)avail);
		return true;
	}
	for (int t = 0; t < nt; t++) {
		if (tools[t] == T_KUPDATE_PRE || tools[t] == T_CRIU_PRE) {
			in[t] = in[t - 1]; /* same workload as the plain tool */
			continue;
		}
		if (!start_instance(c, &in[t], tool_names[tools[t]]))
			return false;
		if (!check_instance(&in[t]))
			return false;
	}
	for (int r = 0; r < o.runs && ok; r++)
		/* alternate which tool goes first */
		for (int k = 0; k < nt && ok; k++) {
			int t = r % 2 ? nt - 1 - k : k;
			int shared =
				(tools[t] == T_KUPDATE_PRE || tools[t] == T_CRIU_PRE) ? t - 1 : -1;
			struct instance *ip = shared >= 0 ? &in[shared] : &in[t];
			bool criu = tools[t] == T_CRIU || tools[t] == T_CRIU_PRE;

			if (failed[t] || (shared >= 0 && failed[shared]))
				continue;
			ok = one_run(c, ip, tools[t], r, &s[t][r]);
			if (!ok && criu) {
				/* CRIU failing is a figure of its own, not the case's
				 * failure: kupdate's figures stand */
				printf("%-8s %-12s failed on run %d (its output above)\n", c->name,
				       tool_names[tools[t]], r + 1);
				failed[t] = true;
				if (shared < 0) {
					kill_tree(ip->root);
					if (ip->client)
						kill_tree(ip->client);
				}
				ok = true;
			}
		}
	for (int t = 0; t < nt; t++)
		if (tools[t] != T_KUPDATE_PRE && tools[t] != T_CRIU_PRE && !failed[t])
			ok &= end_instance(&in[t]);
	if (!ok) {
		printf("%-8s FAILED (see above)\n", c->name);
		return false;
	}
	for (int t = 0; t < nt; t++)
		if (!failed[t])
			print_row(c->name, tools[t], s[t], o.runs);
	for (int t = 0; t < nt; t++) {
		int base = tools[t] == T_KUPDATE ? T_CRIU : tools[t] == T_KUPDATE_PRE ? T_CRIU : -1;
		int bi = -1;

		for (int u = 0; u < nt; u++)
			if (tools[u] == base && !failed[u])
				bi = u;
		if (bi >= 0) {
			char label[40];

			snprintf(label, sizeof(label), "%s/criu",
				 tools[t] == T_KUPDATE ? "ratio" : "pre");
			print_ratio(c->name, label, s[t], o.runs, s[bi], o.runs);
		}
	}
	for (int t = 0; t < nt; t++)
		if (tools[t] == T_KUPDATE_PRE) {
			for (int u = 0; u < nt; u++)
				if (tools[u] == T_CRIU_PRE && !failed[u])
					print_ratio(c->name, "pre/criu+pre", s[t], o.runs, s[u],
						    o.runs);
		}
	if (c->floor) {
		double criu_dump = -1;

		for (int t = 0; t < nt; t++)
			if (tools[t] == T_CRIU && !failed[t])
				criu_dump = MED(s[t], o.runs, dump);
		measure_floor(c, criu_dump);
	}
	fflush(stdout);
	return true;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "kupdate", required_argument, NULL, 'k' },
		{ "criu", required_argument, NULL, 'c' },
		{ "work", required_argument, NULL, 'w' },
		{ "store", required_argument, NULL, 's' },
		{ "runs", required_argument, NULL, 'r' },
		{ "cases", required_argument, NULL, 'C' },
		{ "warm", no_argument, NULL, 'W' },
		{ 0 },
	};
	const char *store = "/dev/shm";
	double t0 = now();
	int c, failed = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'k':
			o.kupdate = optarg;
			break;
		case 'c':
			o.criu = *optarg ? optarg : NULL;
			break;
		case 'w':
			o.work = optarg;
			break;
		case 's':
			store = optarg;
			break;
		case 'r':
			o.runs = atoi(optarg);
			break;
		case 'C':
			o.cases = optarg;
			break;
		case 'W':
			o.warm = true;
			break;
		default:
			return 2;
		}
	}
	if (!o.kupdate || !o.work || o.runs < 1 || o.runs > MAX_RUNS)
		die("usage: kbench --kupdate PATH --work PATH [--criu PATH] [--store DIR] "
		    "[--runs 1-%d] [--cases a,b] [--warm]",
		    MAX_RUNS);
	{
		/* the workloads run in their own directories: absolute paths */
		static char k[4096], w[4096], cr[4096];

		if (!realpath(o.kupdate, k) || !realpath(o.work, w) ||
		    (o.criu && !realpath(o.criu, cr)))
			die("cannot find %s, %s or %s", o.kupdate, o.work, o.criu ? o.criu : "");
		o.kupdate = k;
		o.work = w;
		if (o.criu)
			o.criu = cr;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		die("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	signal(SIGHUP, on_stop);
	enter_netns();
	snprintf(o.store, sizeof(o.store), "%s/kbench.%d", store, getpid());
	if (mkdir(o.store, 0700))
		die("cannot create %s: %s", o.store, strerror(errno));
	/* kupdate dump's records (recover.c) stay with the benchmark */
	setenv("KUPDATE_RUN_DIR", o.store, 1);
	setvbuf(stdout, NULL, _IOLBF, 0);

	printf("# kbench: kupdate %s%s%s; %d runs a case, medians; times in seconds\n", o.kupdate,
	       o.criu ? ", CRIU " : "", o.criu ? o.criu : "", o.runs);
	conditions("start");
	measure_store(o.store);
	if (o.criu)
		criu_can_pre_dump();
	printf("# frozen: from the first stop of the tree to its release (kupdate: its -v "
	       "report; CRIU: freezing_time + frozen_time of stats-dump)\n");
	if (o.warm)
		printf("# warm: before each timed dump and restore, the case's memory (+64 MiB) "
		       "written to the store and removed, for both tools (this VM hands freed "
		       "memory back to its host: BENCH_WARM=0 measures without)\n");
	printf("# RSS: peak of the tool's own process (dump or restore); dump GB/s: image "
	       "bytes / dump wall time; %%store: of the store's write rate\n");
	print_header();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (wanted(cases[i].name) && !run_case(&cases[i]))
			failed++;
	conditions("end");
	printf("# %s in %.0f s\n", failed ? "FAILED" : "done", now() - t0);
	end_workloads();
	rm_rf(o.store);
	return failed ? 1 : 0;
}
