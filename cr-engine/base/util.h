/* Small helpers shared by the engine: cleanup attributes, checked reads. */
#ifndef CR_UTIL_H
#define CR_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#ifndef PAGE_SIZE
#define PAGE_SIZE 4096UL
#endif
#ifndef PAGE_SHIFT
#define PAGE_SHIFT 12
#endif
#define PAGE_ALIGN(x) (((x) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1))
#define MIN(a, b)     ((a) < (b) ? (a) : (b))
#define MAX(a, b)     ((a) > (b) ? (a) : (b))

static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_close_	 __attribute__((cleanup(closep)))
#define _cleanup_free_	 __attribute__((cleanup(freep)))
#define _cleanup_fclose_ __attribute__((cleanup(fclosep)))

/* Hand an fd out of a _cleanup_close_ variable. */
static inline int take_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
static inline void *take_ptr(void *pp)
{
	void *r = *(void **)pp;
	*(void **)pp = NULL;
	return r;
}

void *xzalloc(size_t size);
void *xrealloc_array(void *p, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* read()/write() the whole buffer, retrying on EINTR and short transfers;
 * return 0 or -errno (-EIO on a short read at end of file). */
int read_all(int fd, void *buf, size_t len);
int write_all(int fd, const void *buf, size_t len);
int pread_all(int fd, void *buf, size_t len, off_t off);
int pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* fd moved to the lowest free number >= floor (close-on-exec), the old
 * number closed: the new number, or -errno (logged) */
int fd_move_above(int fd, int floor);

/* Read a whole (small, e.g. /proc) file into a NUL-terminated malloc'd
 * buffer; *len gets its length.  Returns 0 or -errno. */
int read_file_at(int dirfd, const char *path, char **buf, size_t *len);
/* Read a /proc file relative to /proc. */
int read_proc(char **buf, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int64_t now_ns(int clock);

/* Load a shared library when it is first needed (dlopen): lib, or the
 * path in environment variable env (tests: one that is not there), and
 * its symbols names[i] into *ptrs[i].  0, or -ENOENT with why filled in
 * and every *ptrs[i] NULL. */
int dl_load(const char *env, const char *lib, const char *const *names, void **const *ptrs,
	    size_t n, char *why, size_t len);
/* XCR0, the CPU state components XSAVE covers; 0 on a CPU (or a QEMU model
 * such as qemu64) without XSAVE, whose FPU/SSE state is the 512-byte
 * FXSAVE area */
uint64_t cpu_xcr0(void);

#endif
