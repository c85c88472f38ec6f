/* Small C helpers, deliberately public: the engine and the orchestrator
 * share them (cleanup attributes, checked allocations and reads, clocks,
 * libraries loaded when needed, the mount table).  Nothing here knows a
 * process tree or an image: that is cr.h. */
#ifndef CR_UTIL_PUBLIC_H
#define CR_UTIL_PUBLIC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
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

/* malloc and friends that log what they could not allocate (NULL then) */
void *xzalloc(size_t size);
void *xrealloc_array(void *p, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* a copy of s appended to the n strings of *v, unless one of them is s
 * already: 0 or -ENOMEM */
int strv_add(char ***v, size_t *n, const char *s);
void strv_free(char **v, size_t n);

/* read()/write() the whole buffer, retrying on EINTR and short transfers;
 * return 0 or -errno (-EIO on a short read at end of file). */
int read_all(int fd, void *buf, size_t len);
int write_all(int fd, const void *buf, size_t len);
int pread_all(int fd, void *buf, size_t len, off_t off);
int pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* Read a whole (small) file into a NUL-terminated malloc'd buffer; *len
 * (if not NULL) gets its length.  Returns 0 or -errno. */
int read_file_at(int dirfd, const char *path, char **buf, size_t *len);
/* Whether kernel RELEASE's modules in DIR (/lib/modules) hold each module
 * of NAMES (NULL-terminated): listed in RELEASE/modules.dep and its file
 * there.  1 yes; 0 no, why names the first missing and how; -ENOMEM. */
int kmod_installed(const char *dir, const char *release, const char *const *names, char *why,
		   size_t wlen);

/* the clock (CLOCK_MONOTONIC, CLOCK_BOOTTIME, ...) in nanoseconds */
int64_t now_ns(int clock);

/* Load a shared library when it is first needed (dlopen): lib, or the
 * path in environment variable env (tests: one that is not there), and
 * its symbols names[i] into *ptrs[i].  0, or -ENOENT with why filled in
 * and every *ptrs[i] NULL. */
int dl_load(const char *env, const char *lib, const char *const *names, void **const *ptrs,
	    size_t n, char *why, size_t len);

/* One line of a mount table (/proc/PID/mountinfo), its strings unescaped
 * (mountinfo writes space, tab, newline and backslash as \ooo). */
struct mount_entry {
	char *root;   /* the directory of the file system mounted there */
	char *mp;     /* the mount point */
	char *vfs;    /* the per-mount options */
	char *fstype; /* after the "-" */
	char *source;
	char *super; /* the superblock's options */
	unsigned maj, min;
	int id, parent; /* mount ids */
	/* propagation: its peer group (shared:N) and the group it is a slave
	 * of (master:N), 0 for none */
	unsigned shared, master;
};

struct mount_table {
	struct mount_entry *e; /* in the table's order */
	size_t n;
	char *buf; /* the strings */
};

/* path: a mountinfo file, or NULL for /proc/self/mountinfo.  0 or -errno;
 * lines that are not a mount are left out. */
int mount_table_read(const char *path, struct mount_table *t);
/* path relative to dirfd (a /proc of another namespace's process) */
int mount_table_read_at(int dirfd, const char *path, struct mount_table *t);
void mount_table_free(struct mount_table *t);

#endif
