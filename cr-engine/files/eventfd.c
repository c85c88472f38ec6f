/* eventfd: the counter and EFD_SEMAPHORE.
 *
 * Dump: fdinfo gives the counter (eventfd-count, hex) and, since Linux 6.5,
 * eventfd-semaphore.  Older kernels do not show the semaphore flag: it is
 * probed on kupdate's own descriptor of the eventfd (pidfd_getfd): one
 * read(2) tells a semaphore (it returns 1) from a plain counter (it
 * returns everything), and the counter is put back as it was.  The tree is
 * stopped meanwhile.
 * Restore: eventfd(2) with the flags, then the counter is written in (it
 * may exceed the unsigned int eventfd(2) takes). */
#include <fcntl.h>
#include <sys/eventfd.h>

#include "dump.h"
#include "eventfd.h"
#include "fdinfo.h"
#include "log.h"
#include "sockets.h"
#include "util.h"

static int efd_read(int fd, uint64_t *v)
{
	return read(fd, v, 8) == 8 ? 0 : -errno;
}

static int efd_write(int fd, uint64_t v)
{
	return write(fd, &v, 8) == 8 ? 0 : -errno;
}

/* Semaphore or not, leaving the counter at count. */
static int probe_semaphore(struct cr_proc *p, int fd, uint64_t count, bool *sem)
{
	_cleanup_close_ int efd = sk_dup(p, fd);
	uint64_t v = 0;
	int fl, ret;

	if (efd < 0)
		return efd;
	fl = fcntl(efd, F_GETFL);
	if (fl < 0 || fcntl(efd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	if (count >= 2) {
		ret = efd_read(efd, &v);
		if (!ret)
			ret = efd_write(efd, v);
	} else {
		/* count + (2 - count) == 2; a semaphore gives 1 of them */
		ret = efd_write(efd, 2 - count);
		if (!ret)
			ret = efd_read(efd, &v);
		if (!ret && v == 2 && count)
			ret = efd_write(efd, count);
		if (!ret && v == 1 && !count)
			ret = efd_read(efd, &(uint64_t){ 0 });
	}
	fcntl(efd, F_SETFL, fl);
	if (ret) {
		pr_err("pid %d: fd %d: cannot probe the eventfd for EFD_SEMAPHORE: %s", p->pid, fd,
		       strerror(-ret));
		return ret;
	}
	*sem = v == 1;
	return 0;
}

int eventfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		 struct cr_file *f)
{
	const char *c = fdinfo_find(fdinfo, "eventfd-count:");
	const char *s = fdinfo_find(fdinfo, "eventfd-semaphore:");
	EventfdFile *e;
	bool sem = false;
	int ret;

	if (!c) {
		pr_err("pid %d: fd %d: the eventfd's fdinfo has no eventfd-count", p->pid, fd);
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	eventfd_file__init(e);
	f->efd = e;
	e->count = strtoull(c, NULL, 16);
	if (s) {
		sem = strtoul(s, NULL, 10) != 0;
	} else {
		ret = probe_semaphore(p, fd, e->count, &sem);
		if (ret)
			return ret;
	}
	e->has_semaphore = 1;
	e->semaphore = sem;
	return 0;
}

void eventfd_save(const struct cr_file *f, FileEntry *e)
{
	e->efd = f->efd;
}

void eventfd_free_dump(struct cr_file *f)
{
	free(f->efd);
}

int eventfd_validate(const struct rfiles *f, const FileEntry *e)
{
	if (!e->efd || e->efd->count == UINT64_MAX) {
		pr_err("image files.img is damaged: eventfd %u is invalid", e->id);
		return -EINVAL;
	}
	return 0;
}

int eventfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what)
{
	int flags = EFD_CLOEXEC | (e->flags & O_NONBLOCK ? EFD_NONBLOCK : 0);
	int fd, ret;

	if (e->efd->has_semaphore && e->efd->semaphore)
		flags |= EFD_SEMAPHORE;
	fd = eventfd(0, flags);
	if (fd < 0)
		return pr_errno("%s: cannot create an eventfd", what);
	if (e->efd->count && (ret = efd_write(fd, e->efd->count))) {
		pr_err("%s: cannot set the eventfd's counter to %lu: %s", what,
		       (unsigned long)e->efd->count, strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}
