/* kbench-work: the workloads `make bench` checkpoints and restores.
 *
 *   kbench-work mem MIB                  MIB of touched, non-zero memory
 *   kbench-work wss MIB HOT_MIB PAGES    the same, and it keeps rewriting
 *                                        PAGES pages a millisecond of a
 *                                        HOT_MIB working set
 *   kbench-work tree N                   N small processes (root, 9 children,
 *                                        their children)
 *   kbench-work fds N                    N open descriptions of one file,
 *                                        each at its own offset
 *   kbench-work tcpsrv N PORTFILE        a loopback TCP server echoing on N
 *                                        accepted connections
 *   kbench-work tcpcli N PORTFILE        the N clients (not dumped)
 *
 * Each one writes $BENCH_READY when it is set up.  SIGUSR1: check the whole
 * state now and print "OK n" (or "FAIL why"); SIGTERM: check and end with
 * "PASS" (exit 0) or "FAIL why" (exit 1).  Output goes to stdout, which the
 * driver points at a log file.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

static volatile sig_atomic_t got_usr1, got_term;
static unsigned checks;

static void on_sig(int sig)
{
	if (sig == SIGUSR1)
		got_usr1 = 1;
	else
		got_term = 1;
}

/* The signals stay blocked except where a workload waits for them
 * (sigsuspend, ppoll), so none is missed; block=0 for a workload that
 * polls the flags instead. */
static void setup_signals(int block)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static void ready(void)
{
	const char *path = getenv("BENCH_READY");
	int fd;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("cannot create %s: %s", path, strerror(errno));
	close(fd);
}

/* Wait for a signal; returns 1 on SIGTERM, 0 on SIGUSR1. */
static int wait_signal(void)
{
	sigset_t none;

	sigemptyset(&none);
	while (!got_usr1 && !got_term)
		sigsuspend(&none);
	if (got_term)
		return 1;
	got_usr1 = 0;
	return 0;
}

static void report(int term)
{
	if (term) {
		printf("PASS\n");
		exit(0);
	}
	printf("OK %u\n", ++checks);
}

/* ---------------------------------------------------------------- memory */

static inline uint64_t mix(uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL;

	return x ^ (x >> 29);
}

static uint64_t *map_filled(size_t bytes)
{
	uint64_t *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("cannot map %zu MiB: %s", bytes >> 20, strerror(errno));
	for (size_t i = 0; i < bytes / 8; i++)
		p[i] = mix(i);
	return p;
}

static void check_filled(const uint64_t *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (p[i] != mix(i))
			fail("word %zu (page %zu) holds %#llx, expected %#llx", i, i / 512,
			     (unsigned long long)p[i], (unsigned long long)mix(i));
}

static int work_mem(size_t mib)
{
	size_t bytes = mib << 20;
	uint64_t *p = map_filled(bytes);

	ready();
	for (;;) {
		int term = wait_signal();

		check_filled(p, 0, bytes / 8);
		report(term);
	}
	return 0;
}

/* The hot pages: page k holds hash(k, seq[k]) in every word. */
static inline uint64_t hot_word(uint64_t page, uint64_t seq)
{
	return mix(page * 0x100000001b3ULL + seq) | 1;
}

static int work_wss(size_t mib, size_t hot_mib, unsigned per_ms)
{
	size_t bytes = mib << 20, hot = (hot_mib << 20) / 4096;
	uint64_t *p = map_filled(bytes), *seq = calloc(hot, sizeof(*seq));
	uint64_t rnd = 88172645463325252ULL;
	struct timespec ms = { 0, 1000000 };

	if (!seq || hot == 0 || hot_mib > mib)
		fail("bad working set: %zu MiB of %zu MiB", hot_mib, mib);
	for (size_t k = 0; k < hot; k++)
		for (size_t w = 0; w < 512; w++)
			p[k * 512 + w] = hot_word(k, 0);
	ready();
	for (;;) {
		for (unsigned n = 0; n < per_ms; n++) {
			size_t k;
			uint64_t v;

			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			k = rnd % hot;
			v = hot_word(k, seq[k] + 1);
			for (size_t w = 0; w < 512; w++)
				p[k * 512 + w] = v;
			seq[k]++;
		}
		nanosleep(&ms, NULL);
		if (got_usr1 || got_term) {
			int term = got_term;

			got_usr1 = 0;
			for (size_t k = 0; k < hot; k++)
				for (size_t w = 0; w < 512; w++)
					if (p[k * 512 + w] != hot_word(k, seq[k]))
						fail("hot page %zu word %zu is stale (seq %llu)", k,
						     w, (unsigned long long)seq[k]);
			check_filled(p, hot * 512, bytes / 8);
			report(term);
		}
	}
}

/* ------------------------------------------------------------------ tree */

/* A small process: 64 KiB of its own pattern; SIGTERM: check, reap its
 * children, exit 0 if all is well. */
static int tree_member(unsigned id, pid_t *kids, int nkids)
{
	size_t words = 64 * 1024 / 8;
	uint64_t *p = map_filled(64 * 1024);
	int ok;

	p[0] = id;
	while (!wait_signal())
		;
	ok = p[0] == id;
	for (size_t i = 1; i < words; i++)
		ok &= p[i] == mix(i);
	for (int i = 0; i < nkids; i++) {
		int st;

		kill(kids[i], SIGTERM);
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			ok = 0;
	}
	return ok ? 0 : 1;
}

static int work_tree(unsigned n)
{
	enum { FANOUT = 9 };
	pid_t kids[FANOUT];
	int nk = 0, ready_fd[2];
	unsigned per = n > 1 + FANOUT ? (n - 1 - FANOUT) / FANOUT : 0, made = 1;

	if (pipe(ready_fd))
		fail("pipe: %s", strerror(errno));
	for (int c = 0; c < FANOUT && made < n; c++) {
		unsigned mine = c == FANOUT - 1 ? n - made - 1 : per;
		pid_t pid;

		if (made + 1 + mine > n)
			mine = n - made - 1;
		pid = fork();
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			pid_t g[1024];
			int ng = 0;

			for (unsigned k = 0; k < mine && k < 1024; k++) {
				pid_t q = fork();

				if (q < 0)
					_exit(2);
				if (q == 0) {
					close(ready_fd[0]);
					if (write(ready_fd[1], "g", 1) != 1)
						_exit(2);
					close(ready_fd[1]);
					_exit(tree_member(1000 + c * 1024 + k, NULL, 0));
				}
				g[ng++] = q;
			}
			close(ready_fd[0]);
			if (write(ready_fd[1], "c", 1) != 1)
				_exit(2);
			close(ready_fd[1]);
			_exit(tree_member(c + 1, g, ng));
		}
		kids[nk++] = pid;
		made += 1 + mine;
	}
	close(ready_fd[1]);
	for (unsigned got = 1; got < made;) {
		char c;
		ssize_t r = read(ready_fd[0], &c, 1);

		if (r == 1)
			got++;
		else if (r == 0 || errno != EINTR)
			fail("a member of the tree died while setting up");
	}
	close(ready_fd[0]);
	{
		uint64_t *p = map_filled(64 * 1024);

		ready();
		for (;;) {
			int term = wait_signal();

			check_filled(p, 0, 64 * 1024 / 8);
			for (int i = 0; i < nk; i++)
				if (kill(kids[i], 0))
					fail("child %d is gone", kids[i]);
			if (term) {
				for (int i = 0; i < nk; i++) {
					int st;

					kill(kids[i], SIGTERM);
					if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) ||
					    WEXITSTATUS(st))
						fail("the subtree of child %d failed its check "
						     "(%#x)",
						     kids[i], st);
				}
			}
			report(term);
		}
	}
}

/* ------------------------------------------------------------------- fds */

static int work_fds(unsigned n)
{
	struct rlimit rl;
	char path[] = "/tmp/kbench-fds-XXXXXX";
	int fd = mkstemp(path), first = -1, last = -1;

	if (fd < 0 || ftruncate(fd, 1 << 20))
		fail("cannot create %s: %s", path, strerror(errno));
	close(fd);
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < n + 64) {
		rl.rlim_cur = rl.rlim_max;
		if (rl.rlim_cur < n + 64 || setrlimit(RLIMIT_NOFILE, &rl))
			fail("RLIMIT_NOFILE (hard %llu) is too low for %u fds",
			     (unsigned long long)rl.rlim_max, n);
	}
	for (unsigned i = 0; i < n; i++) {
		int f = open(path, O_RDWR);

		if (f < 0)
			fail("open #%u: %s", i, strerror(errno));
		if (lseek(f, f, SEEK_SET) != f)
			fail("lseek: %s", strerror(errno));
		if (first < 0)
			first = f;
		last = f;
	}
	ready();
	for (;;) {
		int term = wait_signal();

		for (int f = first; f <= last; f++)
			if (lseek(f, 0, SEEK_CUR) != f)
				fail("fd %d is at offset %lld", f,
				     (long long)lseek(f, 0, SEEK_CUR));
		if (term)
			unlink(path);
		report(term);
	}
}

/* ------------------------------------------------------------------- tcp */

static int work_tcpsrv(unsigned n, const char *portfile)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct pollfd *pf = calloc(n, sizeof(*pf));
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	unsigned got = 0;
	FILE *f;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!pf || ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, n) ||
	    getsockname(ls, (struct sockaddr *)&a, &al))
		fail("cannot listen: %s", strerror(errno));
	f = fopen(portfile, "w");
	if (!f || fprintf(f, "%u\n", ntohs(a.sin_port)) < 0 || fclose(f))
		fail("cannot write %s", portfile);
	while (got < n) {
		int s = accept(ls, NULL, NULL);

		if (s < 0 && errno == EINTR)
			continue;
		if (s < 0)
			fail("accept: %s", strerror(errno));
		pf[got].fd = s;
		pf[got].events = POLLIN;
		got++;
	}
	ready();
	for (;;) {
		sigset_t none;
		int r;

		sigemptyset(&none);
		r = ppoll(pf, n, NULL, &none);

		if (got_term || got_usr1) {
			int term = got_term;

			got_usr1 = 0;
			report(term);
		}
		if (r < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
		for (unsigned i = 0; r > 0 && i < n; i++) {
			char buf[64];
			ssize_t k;

			if (!pf[i].revents)
				continue;
			k = read(pf[i].fd, buf, sizeof(buf));
			if (k <= 0)
				fail("connection %u: %s", i,
				     k ? strerror(errno) : "closed by the peer");
			if (write(pf[i].fd, buf, k) != k)
				fail("connection %u: write: %s", i, strerror(errno));
		}
	}
}

static int work_tcpcli(unsigned n, const char *portfile)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int *s = calloc(n, sizeof(*s));
	unsigned port = 0;
	FILE *f;

	for (int tries = 0; tries < 500; tries++) {
		f = fopen(portfile, "r");
		if (f && fscanf(f, "%u", &port) == 1 && port) {
			fclose(f);
			break;
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	if (!s || !port)
		fail("no port in %s", portfile);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(port);
	for (unsigned i = 0; i < n; i++) {
		s[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (s[i] < 0 || connect(s[i], (struct sockaddr *)&a, sizeof(a)))
			fail("connection %u: %s", i, strerror(errno));
	}
	ready();
	for (;;) {
		int term = wait_signal();

		/* every connection echoes a byte of its own */
		for (unsigned i = 0; i < n; i++) {
			char c = 'a' + i % 26, r = 0;
			struct pollfd p = { s[i], POLLIN, 0 };

			if (write(s[i], &c, 1) != 1)
				fail("connection %u: write: %s", i, strerror(errno));
			if (poll(&p, 1, 10000) != 1 || read(s[i], &r, 1) != 1 || r != c)
				fail("connection %u: no echo", i);
		}
		report(term);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	unsigned long a1 = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;

	setup_signals(strcmp(mode, "wss") != 0);
	if (!strcmp(mode, "mem") && argc == 3)
		return work_mem(a1);
	if (!strcmp(mode, "wss") && argc == 5)
		return work_wss(a1, strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10));
	if (!strcmp(mode, "tree") && argc == 3)
		return work_tree(a1);
	if (!strcmp(mode, "fds") && argc == 3)
		return work_fds(a1);
	if (!strcmp(mode, "tcpsrv") && argc == 4)
		return work_tcpsrv(a1, argv[3]);
	if (!strcmp(mode, "tcpcli") && argc == 4)
		return work_tcpcli(a1, argv[3]);
	fprintf(stderr, "usage: kbench-work mem MIB | wss MIB HOT_MIB PAGES | tree N | fds N | "
			"tcpsrv N PORTFILE | tcpcli N PORTFILE\n");
	return 2;
}
