#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static struct {
	const char *prog;
	int level;
	int fd; /* extra log file, or -1 */
	unsigned errors;
	int err_fd; /* where messages for the user go */
} cfg = { "kupdate", CR_LOG_WARN, -1, 0, STDERR_FILENO };

void cr_log_init(const char *prog, int level, int log_fd)
{
	cfg.prog = prog;
	cfg.level = level;
	cfg.fd = log_fd;
}

int cr_log_level(void)
{
	return cfg.level;
}

void cr_log_redirect(int err_fd, int log_fd)
{
	cfg.err_fd = err_fd;
	cfg.fd = log_fd;
}

int cr_log_fd(void)
{
	return cfg.fd;
}

unsigned cr_log_errors(void)
{
	return cfg.errors;
}

void cr_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = { "error: ", "warning: ", "", "" };
	char buf[1024];
	int saved = errno, n;
	va_list ap;

	if (level == CR_LOG_ERROR)
		cfg.errors++;
	if (level > cfg.level && (cfg.fd < 0 || level > CR_LOG_DEBUG))
		return;

	n = snprintf(buf, sizeof(buf), "%s: %s", cfg.prog, tag[level]);
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	va_end(ap);
	n = strlen(buf);
	if (n < (int)sizeof(buf) - 1) {
		buf[n++] = '\n';
		buf[n] = 0;
	} else {
		buf[sizeof(buf) - 2] = '\n';
	}
	n = strlen(buf);
	if (level <= cfg.level) {
		if (write(cfg.err_fd, buf, n) < 0) {
			/* nowhere left to report it */
		}
	}
	if (cfg.fd >= 0) {
		struct timespec ts;
		char pfx[40];
		int m;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		m = snprintf(pfx, sizeof(pfx), "(%ld.%06ld) %d ", (long)ts.tv_sec,
			     ts.tv_nsec / 1000, (int)getpid());
		if (write(cfg.fd, pfx, m) < 0 || write(cfg.fd, buf, n) < 0) {
			/* ignore */
		}
	}
	errno = saved;
}
