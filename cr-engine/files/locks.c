/* File locks held by the tree: flock(2), POSIX (fcntl F_SETLK) and OFD
 * (F_OFD_SETLK) locks.
 *
 * Dump: each fd's fdinfo lists, on "lock:" lines, the locks held through
 * it: flock and OFD locks of its open file description, and the POSIX
 * locks its process took through that description.  Leases and anything
 * else are refused.
 * Restore: flock and OFD locks are taken on the description as soon as it
 * is made (regfile.c); POSIX locks by their process, with its pid, once its
 * fd table is complete and every other fd it had of the file for the
 * restore is closed (closing any fd of a file drops the POSIX locks a
 * process holds on it).  The dumped processes are gone by then, so a lock
 * can only fail if something outside the tree took it meanwhile. */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>

#include "fdinfo.h"
#include "locks.h"
#include "log.h"
#include "util.h"

#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

static int add(FileLock ***arr, size_t *n, int kind, bool write, uint64_t start, bool has_end,
	       uint64_t end)
{
	FileLock *l, **na = xrealloc_array(*arr, *n + 1, sizeof(*na));

	if (!na)
		return -ENOMEM;
	*arr = na;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	file_lock__init(l);
	l->kind = kind;
	l->write = write;
	if (kind != LOCK_KIND__LOCK_FLOCK) {
		l->has_start = 1;
		l->start = start;
		l->has_end = has_end;
		l->end = end;
	}
	na[(*n)++] = l;
	return 0;
}

int locks_parse(pid_t pid, int fd, const char *path, const char *fdinfo, FileLock ***desc,
		size_t *nr_desc, FileLock ***posix, size_t *nr_posix)
{
	const char *l;

	for (l = fdinfo_find(fdinfo, "lock:"); l; l = fdinfo_find(l, "lock:")) {
		char kind[16], adv[16], type[16], endw[24];
		unsigned long long start;
		int owner, ret;
		bool write;

		if (sscanf(l, " %*d: %15s %15s %15s %d %*s %llu %23s", kind, adv, type, &owner,
			   &start, endw) != 6) {
			pr_err("pid %d: fd %d (%s): cannot parse a lock line of its fdinfo", pid,
			       fd, path);
			return -EINVAL;
		}
		if (strcmp(adv, "ADVISORY") ||
		    (strcmp(kind, "FLOCK") && strcmp(kind, "POSIX") && strcmp(kind, "OFDLCK")) ||
		    (strcmp(type, "READ") && strcmp(type, "WRITE"))) {
			pr_err("pid %d: fd %d (%s) holds a %s %s %s lock (a lease, or a kind of "
			       "lock "
			       "kupdate cannot restore)",
			       pid, fd, path, kind, adv, type);
			return -EOPNOTSUPP;
		}
		write = !strcmp(type, "WRITE");
		if (!strcmp(kind, "FLOCK"))
			ret = add(desc, nr_desc, LOCK_KIND__LOCK_FLOCK, write, 0, false, 0);
		else
			ret = add(!strcmp(kind, "POSIX") ? posix : desc,
				  !strcmp(kind, "POSIX") ? nr_posix : nr_desc,
				  !strcmp(kind, "POSIX") ? LOCK_KIND__LOCK_POSIX
							 : LOCK_KIND__LOCK_OFD,
				  write, start, strcmp(endw, "EOF") != 0, strtoull(endw, NULL, 10));
		if (ret)
			return ret;
	}
	return 0;
}

void locks_free(FileLock **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

int locks_validate(FileLock *const *l, size_t n, bool posix, const char *img)
{
	for (size_t i = 0; i < n; i++) {
		bool ok;

		switch (l[i]->kind) {
		case LOCK_KIND__LOCK_FLOCK:
			ok = !posix;
			break;
		case LOCK_KIND__LOCK_OFD:
			ok = !posix && l[i]->has_start;
			break;
		case LOCK_KIND__LOCK_POSIX:
			ok = posix && l[i]->has_start;
			break;
		default:
			ok = false;
		}
		if (ok && l[i]->has_start &&
		    (l[i]->start > INT64_MAX ||
		     (l[i]->has_end && (l[i]->end < l[i]->start || l[i]->end >= INT64_MAX))))
			ok = false;
		if (!ok) {
			pr_err("image %s is damaged: a file lock is invalid", img);
			return -EINVAL;
		}
	}
	return 0;
}

static int set_range_lock(int fd, int cmd, const FileLock *l)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = l->write ? F_WRLCK : F_RDLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = l->start;
	fl.l_len = l->has_end ? (off_t)(l->end - l->start + 1) : 0;
	return fcntl(fd, cmd, &fl) ? -errno : 0;
}

static void describe(const FileLock *l, char *buf, size_t len)
{
	const char *k = l->kind == LOCK_KIND__LOCK_FLOCK ? "flock"
			: l->kind == LOCK_KIND__LOCK_OFD ? "OFD"
							 : "POSIX";

	if (l->kind == LOCK_KIND__LOCK_FLOCK)
		snprintf(buf, len, "%s %s lock", k, l->write ? "exclusive" : "shared");
	else if (l->has_end)
		snprintf(buf, len, "%s %s lock on bytes %" PRIu64 "-%" PRIu64, k,
			 l->write ? "write" : "read", l->start, l->end);
	else
		snprintf(buf, len, "%s %s lock from byte %" PRIu64 " to the end", k,
			 l->write ? "write" : "read", l->start);
}

static int fail(int ret, const FileLock *l, const char *what, const char *path)
{
	char d[96];

	describe(l, d, sizeof(d));
	if (ret == -EAGAIN || ret == -EWOULDBLOCK || ret == -EACCES)
		pr_err("%s: cannot take the %s on %s again: something outside the tree holds a "
		       "conflicting lock now",
		       what, d, path);
	else
		pr_err("%s: cannot take the %s on %s again: %s", what, d, path, strerror(-ret));
	return ret;
}

int locks_apply_desc(int fd, const FileEntry *e, const char *what)
{
	for (size_t i = 0; i < e->n_locks; i++) {
		const FileLock *l = e->locks[i];
		int ret;

		if (l->kind == LOCK_KIND__LOCK_FLOCK)
			ret = flock(fd, (l->write ? LOCK_EX : LOCK_SH) | LOCK_NB) ? -errno : 0;
		else
			ret = set_range_lock(fd, F_OFD_SETLK, l);
		if (ret)
			return fail(ret, l, what, e->path);
	}
	return 0;
}

int locks_apply_posix(int fd, const FdEntry *e, const char *what)
{
	for (size_t i = 0; i < e->n_locks; i++) {
		int ret = set_range_lock(fd, F_SETLK, e->locks[i]);

		if (ret) {
			char path[64];

			snprintf(path, sizeof(path), "fd %d", e->fd);
			return fail(ret, e->locks[i], what, path);
		}
	}
	return 0;
}
