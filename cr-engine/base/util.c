#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <time.h>

#include "log.h"
#include "util.h"

void *xzalloc(size_t size)
{
	void *p = calloc(1, size ? size : 1);
	if (!p)
		pr_err("out of memory allocating %zu bytes", size);
	return p;
}

void *xrealloc_array(void *p, size_t nmemb, size_t size)
{
	void *r;

	if (size && nmemb > SIZE_MAX / size) {
		pr_err("allocation overflow: %zu x %zu", nmemb, size);
		return NULL;
	}
	r = realloc(p, (nmemb * size) != 0 ? nmemb * size : 1);
	if (!r)
		pr_err("out of memory allocating %zu bytes", nmemb * size);
	return r;
}

int strv_add(char ***v, size_t *n, const char *s)
{
	char **nv;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return 0;
	nv = xrealloc_array(*v, *n + 1, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = xstrdup(s);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

char *xstrdup(const char *s)
{
	char *r = strdup(s);
	if (!r)
		pr_err("out of memory");
	return r;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *r;

	va_start(ap, fmt);
	if (vasprintf(&r, fmt, ap) < 0)
		r = NULL;
	va_end(ap);
	if (!r)
		pr_err("out of memory");
	return r;
}

int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= n;
	}
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int pread_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

int read_file_at(int dirfd, const char *path, char **bufp, size_t *lenp)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, len = 0;
	char *buf, *nb;

	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap) {
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			free(buf);
			return n;
		}
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = 0;
	*bufp = buf;
	if (lenp)
		*lenp = len;
	return 0;
}

int kmod_installed(const char *dir, const char *release, const char *const *names, char *why,
		   size_t wlen)
{
	_cleanup_free_ char *path = xasprintf("%s/%s/modules.dep", dir, release), *dep = NULL;

	if (!path)
		return -ENOMEM;
	if (read_file_at(AT_FDCWD, path, &dep, NULL)) {
		snprintf(why, wlen, "its modules are not installed (no %s)", path);
		return 0;
	}
	for (size_t i = 0; names[i]; i++) {
		char needle[64];
		const char *p = dep, *line = NULL;
		_cleanup_free_ char *file = NULL;

		/* "kernel/net/netfilter/nf_tables.ko.xz: ..." at a line's start,
		 * not among another module's dependencies after its colon */
		snprintf(needle, sizeof(needle), "/%s.ko", names[i]);
		while (!line && (p = strstr(p, needle))) {
			const char *e = p + strlen(needle), *b = p;

			p = e;
			if (*e != ':' && *e != '.')
				continue;
			while (b > dep && b[-1] != '\n')
				b--;
			if (memchr(b, ':', p - b) == NULL)
				line = b;
		}
		if (!line) {
			snprintf(why, wlen, "module %s is not in %s", names[i], path);
			return 0;
		}
		file = xasprintf("%s/%s/%.*s", dir, release, (int)strcspn(line, ":"), line);
		if (!file)
			return -ENOMEM;
		if (access(file, R_OK)) {
			snprintf(why, wlen, "module %s: %s: %s", names[i], file, strerror(errno));
			return 0;
		}
	}
	return 1;
}

int read_proc(char **buf, size_t *len, const char *fmt, ...)
{
	char path[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return read_file_at(AT_FDCWD, path, buf, len);
}

int64_t now_ns(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int fd_move_above(int fd, int floor)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	int ret = -errno;

	close(fd);
	if (nfd < 0) {
		pr_err("cannot move a descriptor above %d: %s", floor, strerror(-ret));
		return ret;
	}
	return nfd;
}

int dl_load(const char *env, const char *lib, const char *const *names, void **const *ptrs,
	    size_t n, char *why, size_t len)
{
	const char *path = env ? getenv(env) : NULL;
	void *h = dlopen(path && *path ? path : lib, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *e = dlerror();

		snprintf(why, len, "%s", e ? e : "not found");
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		*ptrs[i] = dlsym(h, names[i]);
		if (!*ptrs[i]) {
			snprintf(why, len, "it has no %s", names[i]);
			for (size_t k = 0; k < n; k++)
				*ptrs[k] = NULL;
			return -ENOENT;
		}
	}
	return 0; /* the library stays loaded: its functions are in use */
}
