/* Helpers for the checkpoint/restore test programs.
 *
 * A test sets its state up, calls crt_ready(), and waits for SIGTERM
 * (crt_wait_term() or polling crt_term).  Between those two the runner
 * dumps and restores it.  After SIGTERM it checks its state from the
 * inside and ends with crt_pass() or crt_fail(), which print the verdict
 * as the last line of its output and exit. */
#ifndef CRT_H
#define CRT_H

#include <linux/filter.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

extern volatile sig_atomic_t crt_term;

/* a classic BPF filter for a SOCK_DGRAM packet socket (from the IP header
 * on; no fragments, no IP options): IPv4 UDP to port 9999 only */
#define CRT_UDP9999_LEN 6
extern const struct sock_filter crt_udp9999[CRT_UDP9999_LEN];

/* setsid, SIGTERM handler; returns the scratch directory ($CRT_DIR) */
const char *crt_init(void);
void crt_ready(void);
void crt_wait_term(void);
void crt_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void crt_pass(void) __attribute__((noreturn));
void crt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* before crt_ready(): what the test checks does not exist here (exit 77,
 * which the runner reports as a skip with the reason) */
void crt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* fail unless cond, naming what was checked */
#define crt_check(cond, ...)                   \
	do {                                   \
		if (!(cond))                   \
			crt_fail(__VA_ARGS__); \
	} while (0)

/* the cgroup v2 path of pid ("0::PATH" of /proc/PID/cgroup; a static
 * buffer, two in turn), and where cgroup2 is mounted: 0, or -1 */
const char *crt_cgroup_of(pid_t pid);
int crt_cgroup2_mount(char *out, size_t len);
uint64_t crt_hash(const void *p, size_t len, uint64_t h);
char *crt_read_file(const char *path, size_t *len);
char *crt_path(const char *name); /* $CRT_DIR/name, static buffer */
/* a child of the test, killed when the test exits (a failing check must
 * not leave it behind) */
void crt_own_child(pid_t pid);
/* wait for child pid; fail unless it exited with status 0 */
void crt_wait_ok(pid_t pid, const char *what);

#endif
