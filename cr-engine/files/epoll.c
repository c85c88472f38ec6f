/* epoll: the registered targets, with their events and data.
 *
 * Dump: fdinfo lists each target as "tfd: N events: X data: D", N being the
 * fd number it was registered under (an item is a file and that number).
 * kcmp(KCMP_EPOLL_TFD) finds which fd of the process holds the target
 * file: usually fd N itself, but N may have been closed or reused since
 * the file was registered.  The target is that fd's description, dumped
 * like any other; a target the process holds no fd of is refused.
 * Restore: the instance is created empty like any description; the
 * process whose fds the targets were found in registers them under their
 * numbers once its whole fd table is restored, so every target, whatever
 * its kind (another epoll, an eventfd, a socket...), exists by then.  A
 * target whose number is not (or is another file) in that table is put
 * on the number just for EPOLL_CTL_ADD, and what was there is put back. */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/kcmp.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "epoll.h"
#include "fdinfo.h"
#include "restore-ctx.h"
#include "log.h"
#include "util.h"

#define MAX_TARGETS (1 << 20)

/* the fds of a process with their inodes, read once per epoll */
struct fd_ino {
	int fd;
	dev_t dev;
	ino_t ino;
};

static int list_fds(pid_t pid, struct fd_ino **out, int *n)
{
	char path[64];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct fd_ino *nf;
		struct stat st;

		if (de->d_name[0] < '0' || de->d_name[0] > '9' ||
		    fstatat(dirfd(d), de->d_name, &st, 0))
			continue;
		nf = xrealloc_array(*out, *n + 1, sizeof(*nf));
		if (!nf) {
			closedir(d);
			return -ENOMEM;
		}
		*out = nf;
		nf[*n].fd = atoi(de->d_name);
		nf[*n].dev = st.st_dev;
		nf[*n].ino = st.st_ino;
		(*n)++;
	}
	closedir(d);
	return 0;
}

/* the fd of p that holds the target in slot (of inode ino on the
 * superblock sdev), or -1 */
static int find(struct cr_proc *p, const struct kcmp_epoll_slot *slot, const struct fd_ino *fds,
		int n, unsigned long ino, unsigned sdev)
{
	for (int i = 0; i < n; i++)
		if (fds[i].ino == ino && fds[i].dev == makedev(sdev >> 20, sdev & 0xfffff) &&
		    syscall(SYS_kcmp, p->pid, p->pid, KCMP_EPOLL_TFD, fds[i].fd, slot) == 0)
			return fds[i].fd;
	return -1;
}

int epoll_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	       struct cr_file *f)
{
	EpollFile *ep = calloc(1, sizeof(*ep));
	_cleanup_free_ struct fd_ino *fds = NULL;
	int nfds = -1;
	const char *l;

	if (!ep)
		return -ENOMEM;
	epoll_file__init(ep);
	f->ep = ep;
	ep->pid = p->pid;
	for (l = fdinfo_find(fdinfo, "tfd:"); l; l = fdinfo_find(l, "tfd:")) {
		struct kcmp_epoll_slot slot = { .efd = fd };
		unsigned long long data;
		unsigned events;
		EpollTarget *t, **nt;
		int tfd, where, *nw;
		unsigned long ino;
		unsigned sdev;

		if (sscanf(l, "%d events: %x data: %llx pos:%*d ino:%lx sdev:%x", &tfd, &events,
			   &data, &ino, &sdev) != 5 ||
		    tfd < 0) {
			pr_err("pid %d: fd %d: cannot parse the epoll's fdinfo", p->pid, fd);
			return -EINVAL;
		}
		/* several targets may share a number (a file registered, closed,
		 * and another registered under its number): toff tells them apart */
		slot.tfd = tfd;
		for (size_t k = 0; k < ep->n_targets; k++)
			slot.toff += ep->targets[k]->fd == tfd;
		where = tfd;
		if (syscall(SYS_kcmp, p->pid, p->pid, KCMP_EPOLL_TFD, tfd, &slot)) {
			/* not (or no longer) under its number: look for it */
			if (nfds < 0) {
				nfds = 0;
				if (list_fds(p->pid, &fds, &nfds))
					return -ENOMEM;
			}
			where = find(p, &slot, fds, nfds, ino, sdev);
		}
		if (where < 0) {
			pr_err("pid %d: fd %d is an epoll watching a file registered as fd %d, "
			       "which "
			       "this process holds no fd of any more; kupdate cannot restore such "
			       "a "
			       "target",
			       p->pid, fd, tfd);
			return -EOPNOTSUPP;
		}
		if (ep->n_targets >= MAX_TARGETS) {
			pr_err("pid %d: fd %d: the epoll has too many targets", p->pid, fd);
			return -E2BIG;
		}
		nt = xrealloc_array(ep->targets, ep->n_targets + 1, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		ep->targets = nt;
		t = calloc(1, sizeof(*t));
		if (!t)
			return -ENOMEM;
		epoll_target__init(t);
		t->fd = tfd;
		t->events = events;
		t->data = data;
		nt[ep->n_targets++] = t;
		nw = xrealloc_array(f->ep_where, ep->n_targets, sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		f->ep_where = nw;
		nw[ep->n_targets - 1] = where;
	}
	return 0;
}

int epoll_resolve(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	for (int i = 0; i < ctx->nr_files; i++) {
		EpollFile *ep = ctx->files[i].ep;

		if (!ep || ep->pid != p->pid)
			continue;
		for (size_t k = 0; k < ep->n_targets; k++) {
			EpollTarget *t = ep->targets[k];
			int j, where = ctx->files[i].ep_where[k];

			for (j = 0; j < p->nr_fds && p->fds[j].fd != where; j++)
				;
			if (j == p->nr_fds) {
				pr_err("pid %d: an epoll watches fd %d, which is gone", p->pid,
				       where);
				return -ESTALE;
			}
			t->file_id = p->fds[j].file_id;
		}
	}
	return 0;
}

void epoll_save(const struct cr_file *f, FileEntry *e)
{
	e->ep = f->ep;
}

void epoll_free_dump(struct cr_file *f)
{
	EpollFile *e = f->ep;

	free(f->ep_where);
	if (!e)
		return;
	for (size_t i = 0; i < e->n_targets; i++)
		free(e->targets[i]);
	free(e->targets);
	free(e);
}

int epoll_validate(const struct rfiles *f, const FileEntry *e)
{
	if (!e->ep || e->ep->n_targets > MAX_TARGETS) {
		pr_err("image files.img is damaged: epoll %u is invalid", e->id);
		return -EINVAL;
	}
	for (size_t i = 0; i < e->ep->n_targets; i++)
		if (e->ep->targets[i]->fd < 0 || e->ep->targets[i]->fd >= (1 << 20)) {
			pr_err("image files.img is damaged: epoll %u has a target fd %d", e->id,
			       e->ep->targets[i]->fd);
			return -EINVAL;
		}
	return 0;
}

int epoll_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		  const char *what)
{
	int fd = epoll_create1(EPOLL_CLOEXEC);

	(void)e;
	if (fd < 0)
		return pr_errno("%s: cannot create an epoll instance", what);
	return fd;
}

static const FdEntry *fd_of(FdEntry *const *fds, size_t n, int fd, uint32_t file_id)
{
	for (size_t k = 0; k < n; k++)
		if ((fd >= 0 && fds[k]->fd == fd) || (fd < 0 && fds[k]->file_id == file_id))
			return fds[k];
	return NULL;
}

/* register t, its file on its number for the time of EPOLL_CTL_ADD */
static int add_moved(int epfd, const EpollTarget *t, struct epoll_event *ev, FdEntry *const *fds,
		     size_t n)
{
	const FdEntry *src = fd_of(fds, n, -1, t->file_id), *there = fd_of(fds, n, t->fd, 0);
	int saved = -1, ret = 0;

	if (!src)
		return -ENOENT;
	if (there) {
		saved = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);
		if (saved < 0)
			return -errno;
	}
	if (dup3(src->fd, t->fd, O_CLOEXEC) < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, t->fd, ev))
		ret = -errno;
	if (there) {
		if (dup3(saved, t->fd, there->cloexec ? O_CLOEXEC : 0) < 0 && !ret)
			ret = -errno;
		close(saved);
	} else {
		close(t->fd);
	}
	return ret;
}

int epoll_fill(int epfd, const FileEntry *e, FdEntry *const *fds, size_t n, const char *what)
{
	for (size_t i = 0; i < e->ep->n_targets; i++) {
		const EpollTarget *t = e->ep->targets[i];
		const FdEntry *fe = fd_of(fds, n, t->fd, 0);
		struct epoll_event ev = { .events = t->events, .data.u64 = t->data };
		int ret = 0;

		if (fe && fe->file_id == t->file_id)
			ret = epoll_ctl(epfd, EPOLL_CTL_ADD, t->fd, &ev) ? -errno : 0;
		else
			ret = add_moved(epfd, t, &ev, fds, n);
		if (ret) {
			pr_err("%s: cannot register fd %d (events %#x) with the epoll: %s", what,
			       t->fd, t->events, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int epoll_finish(const FileEntry *e, struct rproc *rp, int fd, const char *what)
{
	/* filled by the process whose fds its targets were found in */
	if (e->ep->pid != rp->pid)
		return 0;
	return epoll_fill(fd, e, rp->fds, rp->nr_fds, what);
}
