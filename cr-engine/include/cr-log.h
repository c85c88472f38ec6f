/* Logging, shared by the engine and its caller (the orchestrator logs
 * through it too: one prefix, one level, one log file, and the first error
 * of a step is the reason recorded for it).  Errors are logged once, where
 * the context (pid, fd, path, address) is known; callers only propagate the
 * negative errno. */
#ifndef CR_LOG_PUBLIC_H
#define CR_LOG_PUBLIC_H

#include <errno.h>
#include <stdarg.h>
#include <string.h>

enum cr_log_level { CR_LOG_ERROR = 0, CR_LOG_WARN = 1, CR_LOG_INFO = 2, CR_LOG_DEBUG = 3 };

/* Logging is configured once at start-up, before any work: this is the one
 * piece of process-wide state of the engine. */
void cr_log_init(const char *prog, int level, int log_fd);
int cr_log_level(void);
/* Send messages to other fds (a restoring process moves its stderr and log
 * out of the way of the fds it restores). */
void cr_log_redirect(int err_fd, int log_fd);
int cr_log_fd(void);
void cr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Number of errors logged so far (lets a caller avoid a second, vaguer
 * message for a failure that was already explained). */
unsigned cr_log_errors(void);
/* The first error logged since cr_log_mark(), by this process or one it
 * forked since cr_log_init() (NULL if none): the reason an orchestrator
 * records for a unit. */
void cr_log_mark(void);
const char *cr_log_first_error(void);
/* The first error this thread logged since it called cr_log_mark_thread()
 * (NULL if none, or if it never called it): a dump's own, when several run
 * at once in threads.  Errors of the threads it started are not in it. */
void cr_log_mark_thread(void);
const char *cr_log_thread_error(void);

#define pr_err(fmt, ...)   cr_log(CR_LOG_ERROR, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...)  cr_log(CR_LOG_WARN, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...)  cr_log(CR_LOG_INFO, fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) cr_log(CR_LOG_DEBUG, fmt, ##__VA_ARGS__)

/* errno-preserving "error: ...: strerror" helper */
#define pr_perror(fmt, ...) cr_log(CR_LOG_ERROR, fmt ": %s", ##__VA_ARGS__, strerror(errno))

/* The same, as the error a function returns: -errno, read before the
 * message's arguments are evaluated.  `return pr_errno("cannot open %s",
 * path);` is the whole error path of a failed call. */
#define pr_errno(fmt, ...)                                                         \
	({                                                                         \
		int errno_ = errno;                                                \
		cr_log(CR_LOG_ERROR, fmt ": %s", ##__VA_ARGS__, strerror(errno_)); \
		-errno_;                                                           \
	})

#endif
