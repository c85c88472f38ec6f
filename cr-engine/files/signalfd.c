/* signalfd: the set of signals it reads.
 *
 * Dump: fdinfo's sigmask (hex, bit n-1 for signal n).  The signals the
 * process has pending are part of the process (signals.c), not of the
 * signalfd.
 * Restore: signalfd(2) with that mask. */
#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "dump.h"
#include "fdinfo.h"
#include "log.h"
#include "signalfd.h"
#include "util.h"

int signalfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		  struct cr_file *f)
{
	const char *m = fdinfo_find(fdinfo, "sigmask:");
	SignalfdFile *s;

	if (!m) {
		pr_err("pid %d: fd %d: the signalfd's fdinfo has no sigmask", p->pid, fd);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	signalfd_file__init(s);
	s->sigmask = strtoull(m, NULL, 16);
	f->sfd = s;
	return 0;
}

void signalfd_save(const struct cr_file *f, FileEntry *e)
{
	e->sfd = f->sfd;
}

void signalfd_free_dump(struct cr_file *f)
{
	SignalfdFile *s = f->sfd;

	free(s);
}

int signalfd_validate(const struct rfiles *f, const FileEntry *e)
{
	if (!e->sfd) {
		pr_err("image files.img is damaged: signalfd %u has no mask", e->id);
		return -EINVAL;
	}
	return 0;
}

int signalfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		     const char *what)
{
	uint64_t mask = e->sfd->sigmask;
	sigset_t set;
	int fd;

	/* the kernel's sigset: one 64-bit word on x86-64 (glibc's sigaddset
	 * refuses its own reserved signals, which a process may still read) */
	sigemptyset(&set);
	memcpy(&set, &mask, sizeof(mask));
	fd = signalfd(-1, &set, SFD_CLOEXEC | (e->flags & O_NONBLOCK ? SFD_NONBLOCK : 0));
	if (fd < 0)
		return pr_errno("%s: cannot create a signalfd for mask %#lx", what,
				(unsigned long)mask);
	return fd;
}
