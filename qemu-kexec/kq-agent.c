// SPDX-License-Identifier: GPL-2.0
/*
 * kq-agent: guest side of the kupdate QEMU harness.  Serves the virtio-serial
 * port "org.kupdate.agent": runs commands with /bin/sh -c and streams their
 * stdout, stderr and exit status back (protocol in kq-proto.h and
 * qemu-kexec/README.md).  Started by kupdate-agent.service in the Debian
 * guest and by /init in the busybox initramfs; static, no dependencies.
 *
 * While no host client is connected the port reports POLLHUP and writes
 * would block: the agent then polls the port every 100 ms and drops output.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kq-proto.h"

#define OUT_HIGH_WATER (1 << 20)
#define MAX_CMDS       64

struct cmd {
	unsigned long id;
	pid_t pid;
	int fd[2]; /* stdout, stderr pipes; -1 at EOF */
	int status;
	int exited;
};

struct agent {
	int port;
	int connected;
	int sigfd;
	char *obuf;
	size_t olen, ocap;
	char *ibuf;
	size_t ilen;
	struct cmd cmds[MAX_CMDS];
	int ncmds;
	char ident[160];
};

static void logmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("kq-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int queue_frame(struct agent *a, const char *type, unsigned long id, const void *data,
		       size_t len)
{
	char hdr[KQ_MAX_HEADER];
	int hl;

	if (!a->connected)
		return 0;
	hl = snprintf(hdr, sizeof(hdr), KQ_MAGIC "%s %lu %zu\n", type, id, len);
	if (a->olen + hl + len > a->ocap) {
		size_t cap = (a->olen + hl + len) * 2;
		char *p = realloc(a->obuf, cap);

		if (!p)
			return -ENOMEM;
		a->obuf = p;
		a->ocap = cap;
	}
	memcpy(a->obuf + a->olen, hdr, hl);
	memcpy(a->obuf + a->olen + hl, data, len);
	a->olen += hl + len;
	return 0;
}

static void ident(struct agent *a)
{
	char boot[64] = "unknown";
	struct utsname u;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = read(fd, boot, sizeof(boot) - 1);

		boot[n > 0 ? n : 0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		close(fd);
	}
	uname(&u);
	snprintf(a->ident, sizeof(a->ident), "%s %s", boot, u.release);
}

/* The /dev node of the virtio-serial port named KQ_PORT_NAME, or -1. */
static int open_port(void)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *e;
	int fd = -1;

	if (!d)
		return -1;
	while (fd < 0 && (e = readdir(d))) {
		char path[300], name[64] = "";
		int nfd;
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
		nfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nfd < 0)
			continue;
		n = read(nfd, name, sizeof(name) - 1);
		close(nfd);
		name[n > 0 ? n : 0] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, KQ_PORT_NAME))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", e->d_name);
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			logmsg("open %s: %s", path, strerror(errno));
	}
	closedir(d);
	return fd;
}

static void start_cmd(struct agent *a, unsigned long id, const char *cmdline)
{
	int out[2], err[2];
	struct cmd *c;
	sigset_t all;
	pid_t pid;

	if (a->ncmds == MAX_CMDS || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		queue_frame(a, KQ_ERR, id, "kq-agent: cannot start\n", 23);
		queue_frame(a, KQ_EXIT, id, "127", 3);
		return;
	}
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		setsid();
		dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (chdir("/"))
			_exit(127);
		execl("/bin/sh", "sh", "-c", cmdline, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (pid < 0) {
		close(out[0]);
		close(err[0]);
		queue_frame(a, KQ_EXIT, id, "127", 3);
		return;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	c = &a->cmds[a->ncmds++];
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->pid = pid;
	c->fd[0] = out[0];
	c->fd[1] = err[0];
}

static void handle_frame(struct agent *a, const char *type, unsigned long id, char *data,
			 size_t len)
{
	data[len] = '\0';
	if (!strcmp(type, KQ_PING)) {
		char buf[200];
		struct timespec ts;

		clock_gettime(CLOCK_BOOTTIME, &ts);
		snprintf(buf, sizeof(buf), "%s %ld.%02ld", a->ident, (long)ts.tv_sec,
			 ts.tv_nsec / 10000000);
		queue_frame(a, KQ_PONG, id, buf, strlen(buf));
	} else if (!strcmp(type, KQ_EXEC)) {
		start_cmd(a, id, data);
	} else if (!strcmp(type, KQ_KILL)) {
		for (int i = 0; i < a->ncmds; i++)
			if (a->cmds[i].id == id && !a->cmds[i].exited)
				kill(-a->cmds[i].pid, atoi(data) > 0 ? atoi(data) : SIGKILL);
	} else {
		logmsg("unknown frame type %s", type);
	}
}

/* Parse complete frames out of ibuf, resynchronising on the magic. */
static void parse_input(struct agent *a)
{
	size_t ml = strlen(KQ_MAGIC);

	for (;;) {
		char type[16], *nl, *m;
		unsigned long id;
		size_t len, hl;

		m = memmem(a->ibuf, a->ilen, KQ_MAGIC, ml);
		if (!m) {
			/* keep a possible partial magic at the end */
			size_t keep = a->ilen < ml ? a->ilen : ml - 1;

			memmove(a->ibuf, a->ibuf + a->ilen - keep, keep);
			a->ilen = keep;
			return;
		}
		if (m != a->ibuf) {
			a->ilen -= m - a->ibuf;
			memmove(a->ibuf, m, a->ilen);
		}
		nl = memchr(a->ibuf, '\n', a->ilen < KQ_MAX_HEADER ? a->ilen : KQ_MAX_HEADER);
		if (!nl) {
			if (a->ilen < KQ_MAX_HEADER)
				return; /* header incomplete */
			goto skip;
		}
		*nl = '\0';
		if (sscanf(a->ibuf + ml, "%15s %lu %zu", type, &id, &len) != 3 ||
		    len > KQ_MAX_PAYLOAD) {
			*nl = '\n';
			goto skip;
		}
		*nl = '\n';
		hl = nl + 1 - a->ibuf;
		if (a->ilen < hl + len)
			return; /* payload incomplete */
		{
			char saved = a->ibuf[hl + len];

			handle_frame(a, type, id, a->ibuf + hl, len);
			a->ibuf[hl + len] = saved;
		}
		a->ilen -= hl + len;
		memmove(a->ibuf, a->ibuf + hl + len, a->ilen);
		continue;
	skip:
		a->ilen -= 1;
		memmove(a->ibuf, a->ibuf + 1, a->ilen);
	}
}

static void set_connected(struct agent *a, int connected)
{
	if (connected == a->connected)
		return;
	a->connected = connected;
	if (connected) {
		queue_frame(a, KQ_HELLO, 0, a->ident, strlen(a->ident));
	} else {
		a->olen = 0; /* nobody to read it */
		a->ilen = 0;
	}
}

static void reap(struct agent *a)
{
	struct signalfd_siginfo si;
	int st;
	pid_t pid;

	while (read(a->sigfd, &si, sizeof(si)) == sizeof(si))
		;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (int i = 0; i < a->ncmds; i++) {
			if (a->cmds[i].pid != pid)
				continue;
			a->cmds[i].exited = 1;
			a->cmds[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
	}
}

static void finish_cmds(struct agent *a)
{
	for (int i = 0; i < a->ncmds; i++) {
		struct cmd *c = &a->cmds[i];
		char buf[16];

		if (!c->exited || c->fd[0] >= 0 || c->fd[1] >= 0)
			continue;
		snprintf(buf, sizeof(buf), "%d", c->status);
		queue_frame(a, KQ_EXIT, c->id, buf, strlen(buf));
		a->cmds[i--] = a->cmds[--a->ncmds];
	}
}

int main(void)
{
	static char chunk[65536];
	struct pollfd pfd[2 + 2 * MAX_CMDS];
	struct cmd *owner[2 + 2 * MAX_CMDS];
	int which[2 + 2 * MAX_CMDS];
	struct agent a;
	sigset_t mask;

	memset(&a, 0, sizeof(a));
	a.port = -1;
	a.ibuf = malloc(KQ_MAX_HEADER + KQ_MAX_PAYLOAD + 1);
	if (!a.ibuf)
		return 1;
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/root", 0);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	a.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	ident(&a);
	logmsg("starting (%s)", a.ident);

	for (;;) {
		int n = 0, timeout = 100, port_idx = -1;

		if (a.port < 0) {
			a.port = open_port();
			if (a.port >= 0)
				logmsg("port " KQ_PORT_NAME " open");
		}
		pfd[n].fd = a.sigfd;
		pfd[n++].events = POLLIN;
		if (a.port >= 0 && a.connected) {
			port_idx = n;
			pfd[n].fd = a.port;
			pfd[n++].events = POLLIN | (a.olen ? POLLOUT : 0);
			timeout = -1;
		}
		if (a.olen < OUT_HIGH_WATER) {
			for (int i = 0; i < a.ncmds; i++) {
				for (int k = 0; k < 2; k++) {
					if (a.cmds[i].fd[k] < 0)
						continue;
					owner[n] = &a.cmds[i];
					which[n] = k;
					pfd[n].fd = a.cmds[i].fd[k];
					pfd[n++].events = POLLIN;
				}
			}
		}
		if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
			logmsg("poll: %s", strerror(errno));
			sleep(1);
			continue;
		}

		if (pfd[0].revents)
			reap(&a);
		for (int i = 1; i < n; i++) {
			ssize_t r;

			if (i == port_idx || !pfd[i].revents)
				continue;
			r = read(pfd[i].fd, chunk, sizeof(chunk));
			if (r > 0) {
				queue_frame(&a, which[i] ? KQ_ERR : KQ_OUT, owner[i]->id, chunk, r);
			} else if (r == 0 || errno != EAGAIN) {
				close(pfd[i].fd);
				owner[i]->fd[which[i]] = -1;
			}
		}
		finish_cmds(&a);

		if (a.port < 0)
			continue;
		if (port_idx < 0) {
			struct pollfd p = { .fd = a.port, .events = POLLIN };

			if (poll(&p, 1, 0) < 0)
				continue;
			set_connected(&a, !(p.revents & POLLHUP));
			continue;
		}
		if (pfd[port_idx].revents & (POLLHUP | POLLERR)) {
			set_connected(&a, 0);
			continue;
		}
		if (pfd[port_idx].revents & POLLIN) {
			ssize_t r = read(a.port, a.ibuf + a.ilen,
					 KQ_MAX_HEADER + KQ_MAX_PAYLOAD - a.ilen);

			if (r > 0) {
				a.ilen += r;
				parse_input(&a);
			} else if (r < 0 && errno != EAGAIN) {
				logmsg("read port: %s; reopening", strerror(errno));
				close(a.port);
				a.port = -1;
				a.connected = 0;
				continue;
			}
		}
		if (a.olen && (pfd[port_idx].revents & POLLOUT)) {
			ssize_t w = write(a.port, a.obuf, a.olen);

			if (w > 0) {
				a.olen -= w;
				memmove(a.obuf, a.obuf + w, a.olen);
			} else if (w < 0 && errno != EAGAIN) {
				logmsg("write port: %s", strerror(errno));
				set_connected(&a, 0);
			}
		}
	}
}
