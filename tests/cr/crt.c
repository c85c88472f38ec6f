#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

const struct sock_filter crt_udp9999[CRT_UDP9999_LEN] = {
	BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),	       /* protocol */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 3), /* UDP */
	BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 22),	       /* destination port */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 9999, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, 0xffff),
	BPF_STMT(BPF_RET | BPF_K, 0),
};

volatile sig_atomic_t crt_term;
static const char *dir;

static void on_term(int sig)
{
	(void)sig;
	crt_term = 1;
}

const char *crt_init(void)
{
	struct sigaction sa;

	dir = getenv("CRT_DIR");
	if (!dir)
		dir = ".";
	if (getsid(0) != getpid())
		setsid();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IONBF, 0);
	return dir;
}

static pid_t children[16];
static int nr_children;

static void kill_children(void)
{
	/* only those still ours and running: a reaped pid may be anyone's now */
	for (int i = 0; i < nr_children; i++)
		if (waitpid(children[i], NULL, WNOHANG) == 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
		}
}

void crt_own_child(pid_t pid)
{
	if (!nr_children)
		atexit(kill_children);
	if (nr_children < 16)
		children[nr_children++] = pid;
}

void crt_wait_ok(pid_t pid, const char *what)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			crt_fail("waitpid %s: %s", what, strerror(errno));
	crt_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s ended with status %#x", what, st);
}

char *crt_path(const char *name)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

void crt_ready(void)
{
	int fd = open(crt_path("ready"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		crt_fail("cannot create the ready file: %s", strerror(errno));
	close(fd);
}

void crt_wait_term(void)
{
	sigset_t term, old;
	struct timespec tick = { 0, 100 * 1000 * 1000 };

	/* SIGTERM blocked between the test and the wait, or a signal
	 * arriving in between would be waited for forever; and a wait with a
	 * timeout, as in a threaded test SIGTERM may be handled by another
	 * thread than the one waiting */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, &old);
	sigdelset(&old, SIGTERM);
	while (!crt_term)
		ppoll(NULL, 0, &tick, &old);
	sigprocmask(SIG_UNBLOCK, &term, NULL);
}

void crt_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void crt_pass(void)
{
	printf("PASS\n");
	exit(0);
}

void crt_fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

void crt_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(77);
}

uint64_t crt_hash(const void *p, size_t len, uint64_t h)
{
	const unsigned char *c = p;

	/* FNV-1a, 64 bit */
	if (!h)
		h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= c[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

char *crt_read_file(const char *path, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, len = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = malloc(cap);
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap)
			buf = realloc(buf, cap *= 2);
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
}

/* the cgroup v2 line of /proc/PID/cgroup ("0::PATH"), static buffer */
const char *crt_cgroup_of(pid_t pid)
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
int crt_cgroup2_mount(char *out, size_t len)
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
