#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
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

/* The first error since cr_log_mark(), shared with the processes forked
 * afterwards (a restore's errors happen in the processes it creates). */
struct first_error {
	_Atomic int taken;
	char msg[1024];
};
static struct first_error *first_err;

/* and the first error logged by this thread since cr_log_mark_thread()
 * (apply dumps its units in threads at once) */
static __thread struct {
	bool on, taken;
	char msg[1024];
} thread_err;

void cr_log_init(const char *prog, int level, int log_fd)
{
	cfg.prog = prog;
	cfg.level = level;
	cfg.fd = log_fd;
	if (!first_err) {
		void *p = mmap(NULL, sizeof(*first_err), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED)
			first_err = p;
	}
}

void cr_log_mark(void)
{
	if (first_err) {
		first_err->msg[0] = 0;
		atomic_store(&first_err->taken, 0);
	}
}

void cr_log_mark_thread(void)
{
	thread_err.on = true;
	thread_err.taken = false;
	thread_err.msg[0] = 0;
}

const char *cr_log_thread_error(void)
{
	return thread_err.taken ? thread_err.msg : NULL;
}

const char *cr_log_first_error(void)
{
	return first_err && atomic_load(&first_err->taken) == 2 ? first_err->msg : NULL;
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

	if (level == CR_LOG_ERROR) {
		int zero = 0;

		cfg.errors++;
		if (first_err && atomic_compare_exchange_strong(&first_err->taken, &zero, 1)) {
			va_start(ap, fmt);
			vsnprintf(first_err->msg, sizeof(first_err->msg), fmt, ap);
			va_end(ap);
			atomic_store(&first_err->taken, 2);
		}
		if (thread_err.on && !thread_err.taken) {
			va_start(ap, fmt);
			vsnprintf(thread_err.msg, sizeof(thread_err.msg), fmt, ap);
			va_end(ap);
			thread_err.taken = true;
		}
	}
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
