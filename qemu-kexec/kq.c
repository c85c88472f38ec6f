// SPDX-License-Identifier: GPL-2.0
/*
 * kq: host side of the kupdate QEMU harness's agent channel.  Connects to
 * the unix socket QEMU serves for the guest's virtio-serial port and talks
 * to kq-agent (protocol: kq-proto.h, qemu-kexec/README.md).
 *
 *   kq [-t SECS] SOCKET ping [--not BOOT_ID]
 *        wait until the agent answers (and, with --not, runs in another
 *        boot than BOOT_ID); prints "BOOT_ID RELEASE UPTIME"
 *   kq [-t SECS] SOCKET exec COMMAND...
 *        run COMMAND (joined by spaces) with /bin/sh -c in the guest;
 *        its stdout/stderr are copied to ours; exits with its status
 *
 * Exit status: the command's (0-255; 128+N if killed by signal N) for exec,
 * 0 for ping; 252 = the guest rebooted (e.g. kexec) while the command ran;
 * 253 = timed out (for exec the command's process group got SIGKILL);
 * 254 = connection lost (QEMU exited); 255 = usage or connection error.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kq-proto.h"

#define EX_REBOOTED 252
#define EX_TIMEOUT  253
#define EX_LOST	    254
#define EX_ERROR    255

struct conn {
	int fd;
	char *buf;
	size_t len;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int send_frame(struct conn *c, const char *type, unsigned long id, const char *data,
		      size_t len)
{
	char hdr[KQ_MAX_HEADER];
	int hl = snprintf(hdr, sizeof(hdr), KQ_MAGIC "%s %lu %zu\n", type, id, len);

	if (write(c->fd, hdr, hl) != hl)
		return -1;
	while (len) {
		ssize_t w = write(c->fd, data, len);

		if (w <= 0)
			return -1;
		data += w;
		len -= w;
	}
	return 0;
}

/*
 * Read the next frame, waiting until 'deadline' (or up to 'tick' seconds,
 * whichever is sooner).  Returns 1 with a frame, 0 on timeout, -1 on EOF.
 */
static int next_frame(struct conn *c, double deadline, double tick, char *type, unsigned long *id,
		      char **data, size_t *dlen)
{
	size_t ml = strlen(KQ_MAGIC);
	double until = now() + tick < deadline ? now() + tick : deadline;

	for (;;) {
		char *m = memmem(c->buf, c->len, KQ_MAGIC, ml), *nl;
		size_t plen, hl;

		if (m && m != c->buf) {
			c->len -= m - c->buf;
			memmove(c->buf, m, c->len);
		} else if (!m && c->len >= ml) {
			memmove(c->buf, c->buf + c->len - (ml - 1), ml - 1);
			c->len = ml - 1;
		}
		if (m && (nl = memchr(c->buf, '\n', c->len))) {
			*nl = '\0';
			if (sscanf(c->buf + ml, "%15s %lu %zu", type, id, &plen) != 3 ||
			    plen > KQ_MAX_PAYLOAD || nl - c->buf > KQ_MAX_HEADER) {
				c->buf[0] = '#'; /* resync past this magic */
				continue;
			}
			hl = nl + 1 - c->buf;
			if (c->len >= hl + plen) {
				static char payload[KQ_MAX_PAYLOAD + 1];

				memcpy(payload, c->buf + hl, plen);
				payload[plen] = '\0';
				c->len -= hl + plen;
				memmove(c->buf, c->buf + hl + plen, c->len);
				*data = payload;
				*dlen = plen;
				return 1;
			}
			*nl = '\n';
		}
		{
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			double left = until - now();
			ssize_t r;

			if (left <= 0)
				return 0;
			if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
				continue;
			r = read(c->fd, c->buf + c->len,
				 2 * (KQ_MAX_PAYLOAD + KQ_MAX_HEADER) - c->len);
			if (r <= 0)
				return -1;
			c->len += r;
		}
	}
}

/* Ping until a PONG answers one of our pings from a boot other than 'not'. */
static int wait_agent(struct conn *c, double deadline, const char * not, unsigned long *next_id,
		      char *ident, size_t isize)
{
	unsigned long first = *next_id;

	while (now() < deadline) {
		char type[16], *data;
		unsigned long id;
		size_t len;
		int r;

		if (send_frame(c, KQ_PING, (*next_id)++, "", 0))
			return EX_LOST;
		while ((r = next_frame(c, deadline, 1.0, type, &id, &data, &len)) == 1) {
			if (strcmp(type, KQ_PONG) || id < first || id >= *next_id)
				continue;
			if (not &&!strncmp(data, not, strlen(not )) && data[strlen(not )] == ' ')
				continue;
			snprintf(ident, isize, "%s", data);
			return 0;
		}
		if (r < 0)
			return EX_LOST;
	}
	return EX_TIMEOUT;
}

static int usage(void)
{
	fprintf(stderr, "usage: kq [-t SECS] SOCKET ping [--not BOOT_ID]\n"
			"       kq [-t SECS] SOCKET exec COMMAND...\n");
	return EX_ERROR;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double timeout = 60, deadline;
	unsigned long next_id;
	char ident[256], boot[64];
	struct conn c = { 0 };
	int i = 1, r;

	if (argc > 2 && !strcmp(argv[1], "-t")) {
		timeout = atof(argv[2]);
		i = 3;
	}
	if (argc - i < 2)
		return usage();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[i]);
	c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "kq: connect %s: %s\n", argv[i], strerror(errno));
		return EX_ERROR;
	}
	c.buf = malloc(2 * (KQ_MAX_PAYLOAD + KQ_MAX_HEADER));
	if (!c.buf)
		return EX_ERROR;
	deadline = now() + timeout;
	/* ids unique across invocations, so stale answers never match */
	next_id = ((unsigned long)time(NULL) % 100000) * 10000 + (getpid() % 10000) * 1;
	next_id = next_id * 16;

	if (!strcmp(argv[i + 1], "ping")) {
		const char *not = NULL;

		if (argc - i == 4 && !strcmp(argv[i + 2], "--not"))
			not = argv[i + 3];
		else if (argc - i != 2)
			return usage();
		r = wait_agent(&c, deadline, not, &next_id, ident, sizeof(ident));
		if (r == 0)
			printf("%s\n", ident);
		else
			fprintf(stderr, "kq: no answer from the agent%s within %.0f s\n",
				not ? " in a new boot" : "", timeout);
		return r;
	}
	if (strcmp(argv[i + 1], "exec") || argc - i < 3)
		return usage();

	r = wait_agent(&c, deadline, NULL, &next_id, ident, sizeof(ident));
	if (r) {
		fprintf(stderr, "kq: no answer from the agent within %.0f s\n", timeout);
		return r;
	}
	sscanf(ident, "%63s", boot);
	{
		size_t total = 0;
		char *cmd, type[16], *data;
		unsigned long id, cid = next_id++;
		size_t len;

		for (int k = i + 2; k < argc; k++)
			total += strlen(argv[k]) + 1;
		cmd = calloc(1, total + 1);
		for (int k = i + 2; k < argc; k++) {
			strcat(cmd, argv[k]);
			if (k + 1 < argc)
				strcat(cmd, " ");
		}
		if (strlen(cmd) > KQ_MAX_PAYLOAD || send_frame(&c, KQ_EXEC, cid, cmd, strlen(cmd)))
			return EX_LOST;
		for (;;) {
			r = next_frame(&c, deadline, 3600, type, &id, &data, &len);
			if (r < 0) {
				fprintf(stderr, "kq: connection lost (QEMU gone?)\n");
				return EX_LOST;
			}
			if (r == 0) {
				fprintf(stderr, "kq: command timed out after %.0f s: %s\n", timeout,
					cmd);
				send_frame(&c, KQ_KILL, cid, "9", 1);
				usleep(200 * 1000);
				return EX_TIMEOUT;
			}
			if (!strcmp(type, KQ_HELLO)) {
				if (strncmp(data, boot, strlen(boot))) {
					fprintf(stderr,
						"kq: guest rebooted during the command (%s)\n",
						data);
					return EX_REBOOTED;
				}
				continue;
			}
			if (id != cid)
				continue;
			if (!strcmp(type, KQ_OUT))
				fwrite(data, 1, len, stdout);
			else if (!strcmp(type, KQ_ERR))
				fwrite(data, 1, len, stderr);
			else if (!strcmp(type, KQ_EXIT))
				return atoi(data);
			fflush(stdout);
		}
	}
}
