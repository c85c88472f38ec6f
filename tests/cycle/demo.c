/* kupdate-demo: the services of the update cycle tests and of `make demo`.
 *
 *   kupdate-demo counter UNIXPATH PORT
 *       A counter that lives only in memory, one tick every 100 ms of the
 *       service's own running time (a checkpointed service does not tick),
 *       and 8 MiB of memory filled from a seed.  On the unix socket and on
 *       TCP PORT it answers each line: "get" -> "N PID", "check" -> "ok N PID"
 *       when the memory still holds its pattern, "bad ..." otherwise,
 *       "clock" -> its CLOCK_MONOTONIC in ms, "time" -> every entry of the
 *       vDSO the process was given (found through AT_SYSINFO_EHDR and called
 *       directly): "vdso RT_MS GTOD_MS TIME_S CPU RES_NS" in the
 *       CLOCK_REALTIME milliseconds of clock_gettime and gettimeofday, time's
 *       seconds, getcpu's cpu and clock_getres's resolution, or "novdso WHY".
 *       Connections stay open as long as the client keeps them.
 *   kupdate-demo pipe UNIXPATH
 *       Two processes: the parent writes a sequence into a pipe every 50 ms,
 *       the child checks it arrives complete and in order and keeps its
 *       counts in shared memory; "get" -> "sent S received R errors E".
 *   kupdate-demo log
 *       Prints "tick N pid P" on stdout every second (the journal's stream).
 *   kupdate-demo iouring
 *       Holds an io_uring instance, which kupdate cannot checkpoint.
 *   kupdate-demo echo PORT
 *       Sends back every byte received on TCP PORT, in order (the record
 *       stream of the cycle tests checks them on the other side).
 *   kupdate-demo private UNIXPATH [shm]
 *       For a unit in a network namespace of its own: a TCP listener on
 *       127.0.0.1 and a connection to it, and a unix socket pair, both ends
 *       held; every 100 ms a sequence number goes one way, and the far end
 *       sends back each one that came.  With "shm", a System V segment of
 *       256 KiB filled from a seed.  On UNIXPATH: "get" -> "tcp T unix U
 *       errors E shm S port L>C pid P lag G late N maxlag M": the numbers
 *       back in order, the errors (a number lost, repeated or out of order,
 *       a connection ended), the segment ok, bad or none, the connection's
 *       ports; the TCP numbers sent and not back yet, the ticks at which a
 *       number was back later than the tick after next, the most ever
 *       outstanding (a late segment is a pause, a stall keeps G growing).
 *   kupdate-demo query UNIXPATH LINE
 *       Sends LINE to a demo's unix socket and prints the answer. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64
#define MEM  (8u << 20)

static int listen_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16)) {
		fprintf(stderr, "demo: unix socket %s: %s\n", path, strerror(errno));
		exit(1);
	}
	return s;
}

static int listen_tcp(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16)) {
		fprintf(stderr, "demo: tcp port %d: %s\n", port, strerror(errno));
		exit(1);
	}
	return s;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct conn {
	int fd;
	char buf[256];
	size_t len;
};

/* a line-oriented server over listening sockets; answer() fills out */
static void serve(int *ls, int nls, void (*answer)(const char *line, char *out, size_t len),
		  void (*tick)(void), int tick_ms)
{
	struct conn c[MAXC];
	int nc = 0;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		struct pollfd p[MAXC + 4];
		struct timespec now;
		int n = 0, to;
		long long left;

		for (int i = 0; i < nls; i++)
			p[n++] = (struct pollfd){ ls[i], POLLIN, 0 };
		for (int i = 0; i < nc; i++)
			p[n++] = (struct pollfd){ c[i].fd, POLLIN, 0 };
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (next.tv_sec - now.tv_sec) * 1000LL + (next.tv_nsec - now.tv_nsec) / 1000000;
		to = left < 0 ? 0 : left > tick_ms ? tick_ms : (int)left;
		if (poll(p, n, to) < 0 && errno != EINTR)
			exit(1);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > next.tv_sec ||
		    (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
			/* ticks count running time: after a pause (a checkpoint,
			 * or another kernel's clock) the count goes on from here */
			tick();
			next = now;
			next.tv_nsec += tick_ms * 1000000L;
			if (next.tv_nsec >= 1000000000L) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000L;
			}
		}
		for (int i = 0; i < nls; i++)
			if (p[i].revents & POLLIN) {
				int fd = accept4(ls[i], NULL, NULL, SOCK_CLOEXEC);

				if (fd >= 0 && nc < MAXC)
					c[nc++] = (struct conn){ .fd = fd };
				else if (fd >= 0)
					close(fd);
			}
		for (int i = nls; i < n; i++) {
			struct conn *k;
			ssize_t r;
			char *nl;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			k = NULL;
			for (int j = 0; j < nc; j++)
				if (c[j].fd == p[i].fd)
					k = &c[j];
			if (!k)
				continue;
			r = read(k->fd, k->buf + k->len, sizeof(k->buf) - 1 - k->len);
			if (r <= 0) {
				close(k->fd);
				*k = c[--nc];
				continue;
			}
			k->len += r;
			k->buf[k->len] = 0;
			while ((nl = strchr(k->buf, '\n'))) {
				char out[256];

				*nl = 0;
				answer(k->buf, out, sizeof(out));
				if (write(k->fd, out, strlen(out)) < 0) {
					/* the client went away */
				}
				memmove(k->buf, nl + 1, k->len - (nl + 1 - k->buf) + 1);
				k->len = strlen(k->buf);
			}
			if (k->len == sizeof(k->buf) - 1)
				k->len = 0;
		}
	}
}

/* ------------------------------------------------------------ counter */

static uint64_t counter;
static unsigned char *mem;
static uint64_t seed = 0x9e3779b97f4a7c15ULL;

static void fill(void)
{
	uint64_t s = seed;

	mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		exit(1);
	for (size_t i = 0; i < MEM / 8; i++)
		((uint64_t *)mem)[i] = xorshift(&s);
}

static long check_mem(void)
{
	uint64_t s = seed;

	for (size_t i = 0; i < MEM / 8; i++)
		if (((uint64_t *)mem)[i] != xorshift(&s))
			return (long)i;
	return -1;
}

static void counter_tick(void)
{
	counter++;
}

/* A symbol of the vDSO mapped at AT_SYSINFO_EHDR, by its dynamic symbol
 * table (after a restore on another kernel: whatever the engine put
 * there must answer). */
static void *vdso_sym(const char *name)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Phdr *ph;
	const Elf64_Dyn *dyn = NULL;
	const Elf64_Sym *sym = NULL;
	const char *str = NULL;
	const uint32_t *hash = NULL;
	uintptr_t base = 0;

	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return NULL;
	ph = (const Elf64_Phdr *)((const char *)eh + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !base)
			base = (uintptr_t)eh + ph[i].p_offset - ph[i].p_vaddr;
		else if (ph[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)((const char *)eh + ph[i].p_offset);
	}
	if (!dyn || !base)
		return NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			sym = (const Elf64_Sym *)(base + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			str = (const char *)(base + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_HASH)
			hash = (const uint32_t *)(base + dyn->d_un.d_ptr);
	}
	if (!sym || !str || !hash)
		return NULL;
	for (uint32_t i = 0; i < hash[1]; i++) /* nchain: the number of symbols */
		if (sym[i].st_shndx != SHN_UNDEF && !strcmp(str + sym[i].st_name, name))
			return (void *)(base + sym[i].st_value);
	return NULL;
}

static void vdso_answer(char *out, size_t len)
{
	int (*gettime)(clockid_t, struct timespec *) = vdso_sym("__vdso_clock_gettime");
	int (*gtod)(struct timeval *, void *) = vdso_sym("__vdso_gettimeofday");
	time_t (*vtime)(time_t *) = vdso_sym("__vdso_time");
	long (*getcpu)(unsigned *, unsigned *, void *) = vdso_sym("__vdso_getcpu");
	int (*getres)(clockid_t, struct timespec *) = vdso_sym("__vdso_clock_getres");
	struct timespec ts, res;
	struct timeval tv;
	unsigned cpu = ~0u, node;

	if (!gettime || !gtod || !vtime || !getcpu || !getres) {
		snprintf(out, len, "novdso an entry is missing\n");
		return;
	}
	if (gettime(CLOCK_REALTIME, &ts) || gtod(&tv, NULL) || getcpu(&cpu, &node, NULL) ||
	    getres(CLOCK_MONOTONIC, &res)) {
		snprintf(out, len, "novdso a call failed\n");
		return;
	}
	snprintf(out, len, "vdso %lld %lld %lld %u %ld\n",
		 ts.tv_sec * 1000LL + ts.tv_nsec / 1000000, tv.tv_sec * 1000LL + tv.tv_usec / 1000,
		 (long long)vtime(NULL), cpu, res.tv_nsec);
}

static void counter_answer(const char *line, char *out, size_t len)
{
	if (!strcmp(line, "get")) {
		snprintf(out, len, "%llu %d\n", (unsigned long long)counter, getpid());
	} else if (!strcmp(line, "check")) {
		long bad = check_mem();

		if (bad < 0)
			snprintf(out, len, "ok %llu %d\n", (unsigned long long)counter, getpid());
		else
			snprintf(out, len, "bad memory at word %ld\n", bad);
	} else if (!strcmp(line, "clock")) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		snprintf(out, len, "%lld\n", ts.tv_sec * 1000LL + ts.tv_nsec / 1000000);
	} else if (!strcmp(line, "time")) {
		vdso_answer(out, len);
	} else {
		snprintf(out, len, "? get, check, clock or time\n");
	}
}

/* ------------------------------------------------------------ pipe */

struct pipe_state {
	uint64_t sent, received, errors;
};
static struct pipe_state *ps;

static int pipe_wfd = -1;

static void pipe_writer_tick(void)
{
	uint64_t v = ps->sent + 1;

	if (write(pipe_wfd, &v, sizeof(v)) == sizeof(v))
		ps->sent = v;
}

static void pipe_answer(const char *line, char *out, size_t len)
{
	if (!strcmp(line, "get"))
		snprintf(out, len, "sent %llu received %llu errors %llu\n",
			 (unsigned long long)ps->sent, (unsigned long long)ps->received,
			 (unsigned long long)ps->errors);
	else
		snprintf(out, len, "? get\n");
}

static void pipe_reader(int rfd)
{
	for (;;) {
		uint64_t v;
		ssize_t r = read(rfd, &v, sizeof(v));

		if (r == 0)
			_exit(0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (r != sizeof(v) || v != ps->received + 1)
			ps->errors++;
		ps->received = v;
	}
}

/* ------------------------------------------------------------ echo */

struct echo_conn {
	int fd;
	char buf[65536];
	size_t len;
};

/* every byte received goes back, in order, on the same connection */
static void echo_server(int port)
{
	static struct echo_conn c[MAXC];
	int ls = listen_tcp(port), nc = 0;

	for (;;) {
		struct pollfd p[MAXC + 1];

		p[0] = (struct pollfd){ ls, POLLIN, 0 };
		for (int i = 0; i < nc; i++)
			p[i + 1] =
				(struct pollfd){ c[i].fd,
						 (short)(c[i].len < sizeof(c[i].buf) ? POLLIN : 0) |
							 (c[i].len ? POLLOUT : 0),
						 0 };
		if (poll(p, nc + 1, -1) < 0 && errno != EINTR)
			exit(1);
		if (p[0].revents & POLLIN) {
			int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0 && nc < MAXC) {
				c[nc].fd = fd;
				c[nc++].len = 0;
			} else if (fd >= 0) {
				close(fd);
			}
		}
		for (int i = 0; i < nc; i++) {
			struct echo_conn *k = &c[i];
			short re = p[i + 1].revents;
			ssize_t r;

			if (p[i + 1].fd != k->fd)
				continue;
			if (re & POLLIN) {
				r = read(k->fd, k->buf + k->len, sizeof(k->buf) - k->len);
				if (r <= 0) {
					close(k->fd);
					*k = c[--nc];
					continue;
				}
				k->len += r;
			}
			if (k->len) {
				r = write(k->fd, k->buf, k->len);
				if (r > 0) {
					memmove(k->buf, k->buf + r, k->len - r);
					k->len -= r;
				}
			}
		}
	}
}

/* ------------------------------------------------------------ private */

/* one way of a pair: numbers go from `to` to `from`, which sends each
 * back; each end reads what has come, so a number that comes late is read
 * at a later tick (counted, never an error) and one that is lost, repeated
 * or out of order is an error */
struct way {
	int to, from;
	uint64_t far_next, near_next; /* the numbers each end waits for next */
	unsigned char far_buf[8], near_buf[8];
	size_t far_len, near_len; /* part of a number read (a stream may cut it) */
	uint64_t ok, late, maxlag;
};

static struct {
	struct way tcp, unx;
	uint64_t seq, errors;
	unsigned char *shm;
	unsigned lport, cport;
} pv;

#define SHM_SIZE (256u << 10)

/* the numbers that have come on fd, each given to got(); false when the
 * connection ended or failed */
static bool take(int fd, unsigned char *buf, size_t *len, void (*got)(struct way *, uint64_t),
		 struct way *w)
{
	for (;;) {
		ssize_t r = recv(fd, buf + *len, 8 - *len, MSG_DONTWAIT);
		uint64_t v;

		if (r < 0)
			return errno == EAGAIN || errno == EINTR;
		if (r == 0)
			return false;
		*len += r;
		if (*len < 8)
			continue;
		memcpy(&v, buf, 8);
		*len = 0;
		got(w, v);
	}
}

static void far_got(struct way *w, uint64_t v)
{
	if (v != w->far_next || send(w->from, &v, 8, 0) != 8)
		pv.errors++;
	w->far_next = v + 1;
}

static void near_got(struct way *w, uint64_t v)
{
	if (v != w->near_next)
		pv.errors++;
	else
		w->ok++;
	w->near_next = v + 1;
}

/* one tick of a way: the far end sends back what came, this end counts
 * what came back, then sends the next number; the number sent two ticks
 * ago and not back yet is late (on loopback it is back within the tick
 * after its own) */
static void trip(struct way *w)
{
	uint64_t lag;

	if (!take(w->from, w->far_buf, &w->far_len, far_got, w) ||
	    !take(w->to, w->near_buf, &w->near_len, near_got, w))
		pv.errors++;
	lag = pv.seq - w->near_next;
	if (lag > 1)
		w->late++;
	if (lag > w->maxlag)
		w->maxlag = lag;
	if (send(w->to, &pv.seq, 8, 0) != 8)
		pv.errors++;
}

static void private_tick(void)
{
	trip(&pv.tcp);
	trip(&pv.unx);
	pv.seq++;
}

static const char *shm_state(void)
{
	uint64_t s = seed;

	if (!pv.shm)
		return "none";
	for (size_t i = 0; i < SHM_SIZE; i += 8) {
		uint64_t v = xorshift(&s);

		if (memcmp(pv.shm + i, &v, 8))
			return "bad";
	}
	return "ok";
}

static void private_answer(const char *line, char *out, size_t len)
{
	if (!strcmp(line, "get"))
		snprintf(out, len,
			 "tcp %llu unix %llu errors %llu shm %s port %u>%u pid %d lag %llu late "
			 "%llu maxlag %llu\n",
			 (unsigned long long)pv.tcp.ok, (unsigned long long)pv.unx.ok,
			 (unsigned long long)pv.errors, shm_state(), pv.cport, pv.lport, getpid(),
			 (unsigned long long)(pv.seq - pv.tcp.near_next),
			 (unsigned long long)(pv.tcp.late + pv.unx.late),
			 (unsigned long long)(pv.tcp.maxlag > pv.unx.maxlag ? pv.tcp.maxlag
									    : pv.unx.maxlag));
	else
		snprintf(out, len, "?\n");
}

static void private_setup(bool shm)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), u[2];

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &al)) {
		fprintf(stderr, "demo: loopback listener: %s\n", strerror(errno));
		exit(1);
	}
	pv.lport = ntohs(a.sin_port);
	pv.tcp.to = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pv.tcp.to < 0 || connect(pv.tcp.to, (struct sockaddr *)&a, sizeof(a)) ||
	    (pv.tcp.from = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u)) {
		fprintf(stderr, "demo: loopback connection: %s\n", strerror(errno));
		exit(1);
	}
	al = sizeof(a);
	getsockname(pv.tcp.to, (struct sockaddr *)&a, &al);
	pv.cport = ntohs(a.sin_port);
	pv.unx.to = u[0];
	pv.unx.from = u[1];
	if (shm) {
		int id = shmget(IPC_PRIVATE, SHM_SIZE, IPC_CREAT | 0600);
		uint64_t s = seed;

		pv.shm = id < 0 ? NULL : shmat(id, NULL, 0);
		if (!pv.shm || pv.shm == (void *)-1) {
			fprintf(stderr, "demo: System V segment: %s\n", strerror(errno));
			exit(1);
		}
		for (size_t i = 0; i < SHM_SIZE; i += 8) {
			uint64_t v = xorshift(&s);

			memcpy(pv.shm + i, &v, 8);
		}
	}
	/* the listener stays open: a listening socket in the namespace */
}

/* ------------------------------------------------------------ query */

static int query(const char *path, const char *line)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	char buf[512];
	ssize_t n;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "query: %s: %s\n", path, strerror(errno));
		return 1;
	}
	snprintf(buf, sizeof(buf), "%s\n", line);
	if (write(s, buf, strlen(buf)) < 0)
		return 1;
	n = read(s, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	fputs(buf, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "counter") && argc == 4) {
		int ls[2] = { listen_unix(argv[2]), listen_tcp(atoi(argv[3])) };

		fill();
		serve(ls, 2, counter_answer, counter_tick, 100);
	} else if (!strcmp(mode, "pipe") && argc == 3) {
		int p[2], ls;
		pid_t child;

		ps = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (ps == MAP_FAILED || pipe(p))
			return 1;
		child = fork();
		if (child == 0) {
			close(p[1]);
			pipe_reader(p[0]);
		}
		close(p[0]);
		pipe_wfd = p[1];
		ls = listen_unix(argv[2]);
		serve(&ls, 1, pipe_answer, pipe_writer_tick, 50);
	} else if (!strcmp(mode, "log") && argc == 2) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		for (unsigned long n = 1;; n++) {
			printf("tick %lu pid %d\n", n, getpid());
			sleep(1);
		}
	} else if (!strcmp(mode, "iouring") && argc == 2) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		if (syscall(SYS_io_uring_setup, 4, &p) < 0) {
			perror("io_uring_setup");
			return 1;
		}
		for (;;)
			pause();
	} else if (!strcmp(mode, "echo") && argc == 3) {
		echo_server(atoi(argv[2]));
	} else if (!strcmp(mode, "private") && (argc == 3 || argc == 4)) {
		int ls = listen_unix(argv[2]);

		private_setup(argc == 4 && !strcmp(argv[3], "shm"));
		serve(&ls, 1, private_answer, private_tick, 100);
	} else if (!strcmp(mode, "query") && argc == 4) {
		return query(argv[2], argv[3]);
	}
	fprintf(stderr, "usage: kupdate-demo counter UNIXPATH PORT | pipe UNIXPATH | log | "
			"iouring | echo PORT | private UNIXPATH [shm] | query UNIXPATH LINE\n");
	return 2;
}
