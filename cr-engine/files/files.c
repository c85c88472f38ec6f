/* File descriptors and the open file descriptions behind them.
 *
 * Dump: every fd of /proc/PID/fd is described once per open file
 * description: kcmp(KCMP_FILE) finds fds that were dup'd or inherited, in
 * one process or across the tree.  Regular files, directories and
 * character devices are reopened by path with their flags and offset;
 * pipes and FIFOs refer to a pipe object (pipes.c).  Files in flight in
 * unix sockets (SCM_RIGHTS), which kupdate received when it peeked their
 * queues, are matched the same way once every process is dumped; one no
 * process holds is a description of its own, held by kupdate meanwhile.
 *
 * Restore: a description held by one process is opened by that process in
 * place.  A description held by several processes (so that they keep
 * sharing its offset, or the two ends of one pipe) is created by the
 * closest common ancestor of its holders before it forks, on a "transport"
 * fd above every fd the tree uses; the holders inherit it, dup it onto
 * their fd numbers, and the restorer closes every transport fd at the end.
 * Who creates what, and on which transport fd: files-plan.c.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "epoll.h"
#include "eventfd.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "inotify.h"
#include "locks.h"
#include "log.h"
#include "pipes.h"
#include "shmem.h"
#include "signalfd.h"
#include "timerfd.h"
#include "tty.h"
#include "sockdiag.h"
#include "sockets.h"
#include "tcp.h"
#include "unix.h"
#include "restore.h"
#include "util.h"

#define SETFL_MASK (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK)

static int kcmp_file(pid_t p1, int fd1, pid_t p2, int fd2)
{
	return syscall(SYS_kcmp, p1, p2, KCMP_FILE, fd1, fd2);
}

const char *fdinfo_find(const char *fdinfo, const char *key)
{
	size_t n = strlen(key);

	/* keys start a line */
	for (const char *p = fdinfo; (p = strstr(p, key)); p += n)
		if (p == fdinfo || p[-1] == '\n')
			return p + n;
	return NULL;
}

static int parse_fdinfo(pid_t pid, int fd, char **buf, uint64_t *pos, uint32_t *flags)
{
	const char *p;
	int ret = read_proc(buf, NULL, "/proc/%d/fdinfo/%d", pid, fd);

	if (ret)
		return ret;
	p = fdinfo_find(*buf, "pos:");
	*pos = p ? strtoull(p, NULL, 10) : 0;
	p = fdinfo_find(*buf, "flags:");
	*flags = p ? strtoul(p, NULL, 8) : 0;
	return 0;
}

/* anonymous-inode files this kupdate restores */
static int anon_kind(const char *link)
{
	static const struct {
		const char *link;
		int kind;
	} k[] = {
		{ "anon_inode:[eventfd]", FILE_KIND__FILE_EVENTFD },
		{ "anon_inode:[signalfd]", FILE_KIND__FILE_SIGNALFD },
		{ "anon_inode:[timerfd]", FILE_KIND__FILE_TIMERFD },
		{ "anon_inode:[eventpoll]", FILE_KIND__FILE_EPOLL },
		{ "anon_inode:inotify", FILE_KIND__FILE_INOTIFY },
	};

	for (size_t i = 0; i < ARRAY_SIZE(k); i++)
		if (!strcmp(link, k[i].link))
			return k[i].kind;
	return 0;
}

static const char *unsupported_kind(const char *link)
{
	static const struct {
		const char *prefix, *what;
	} k[] = {
		{ "anon_inode:[io_uring]", "an io_uring instance" },
		{ "anon_inode:[userfaultfd]", "a userfaultfd" },
		{ "anon_inode:[fanotify]", "a fanotify instance" },
		{ "anon_inode:[perf_event]", "a perf event" },
		{ "anon_inode:[pidfd]", "a pidfd" },
		{ "pidfd:", "a pidfd" },
		{ "anon_inode:bpf", "a BPF object" },
		{ "anon_inode:[vfio", "a VFIO device" },
		{ "anon_inode:kvm", "a KVM object" },
		{ "anon_inode:", "an anonymous-inode object" },
	};

	if (anon_kind(link))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(k); i++)
		if (!strncmp(link, k[i].prefix, strlen(k[i].prefix)))
			return k[i].what;
	return NULL;
}

/* /dev/tty can be opened again after a restore if the controlling
 * terminal is a pseudo-terminal (tty.c restores those) */
static bool ctty_is_pty(pid_t pid)
{
	_cleanup_free_ char *buf = NULL;
	unsigned long tty_nr = 0;
	char *e;

	if (read_proc(&buf, NULL, "/proc/%d/stat", pid) || !(e = strrchr(buf, ')')) ||
	    sscanf(e + 2, "%*c %*d %*d %*d %lu", &tty_nr) != 1)
		return false;
	return major(tty_nr) >= 136 && major(tty_nr) <= 143;
}

/* the descriptions each kind can hold flock and OFD locks on */
static bool lockable(int kind)
{
	return kind == FILE_KIND__FILE_REG || kind == FILE_KIND__FILE_DIR ||
	       kind == FILE_KIND__FILE_CHR || kind == FILE_KIND__FILE_MEMFD;
}

static int anon_dump(struct cr_proc *p, int fd, const char *fdinfo, struct cr_file *f)
{
	switch (f->kind) {
	case FILE_KIND__FILE_EVENTFD:
		return eventfd_dump(p, fd, fdinfo, f);
	case FILE_KIND__FILE_SIGNALFD:
		return signalfd_dump(p, fd, fdinfo, f);
	case FILE_KIND__FILE_TIMERFD:
		return timerfd_dump(p, fd, fdinfo, f);
	case FILE_KIND__FILE_EPOLL:
		return epoll_dump(p, fd, fdinfo, f);
	case FILE_KIND__FILE_INOTIFY:
		return inotify_dump(p, fd, fdinfo, f);
	}
	return -EINVAL;
}

static int socket_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, struct cr_file *f,
		       uint32_t *id)
{
	const struct sk_diag *d;
	struct sk_diag probed;
	int ret;

	if (!ctx->sk_collected) {
		struct stat a, b;
		char ns[64];

		snprintf(ns, sizeof(ns), "/proc/%d/ns/net", p->pid);
		if (!stat(ns, &a) && !stat("/proc/self/ns/net", &b) && a.st_ino != b.st_ino) {
			pr_err("pid %d lives in another network namespace; run kupdate inside it "
			       "(for example with ip netns exec, or nsenter --net)",
			       p->pid);
			return -EOPNOTSUPP;
		}
		ret = sockdiag_collect(&ctx->sk);
		if (ret)
			return ret;
		ctx->sk_collected = true;
	}
	d = sockdiag_find(&ctx->sk, f->ino);
	if (!d) {
		/* unbound TCP or UDP, or refused with what it is (sockdiag.c) */
		char what[96];
		int sk = sk_dup(p, fd);

		if (sk < 0)
			return sk;
		snprintf(what, sizeof(what), "pid %d: fd %d (%s)", p->pid, fd, f->path);
		ret = sockdiag_probe(sk, f->ino, &probed, what);
		close(sk);
		if (ret)
			return ret;
		d = &probed;
	}
	*id = f->id;
	if (d->family == AF_UNIX) {
		f->kind = FILE_KIND__FILE_UNIX;
		return unix_dump(ctx, p, fd, d, f);
	}
	if ((d->family == AF_INET || d->family == AF_INET6) &&
	    (d->protocol == IPPROTO_TCP || d->protocol == IPPROTO_UDP)) {
		f->kind = FILE_KIND__FILE_INET;
		return inet_dump(ctx, p, fd, d, f);
	}
	pr_err("pid %d: fd %d: sockets of family %d are not supported", p->pid, fd, d->family);
	return -EOPNOTSUPP;
}

/* The description of fd of pid among the files dumped so far: *id its id
 * (0: none), *at where a new one goes in ctx->file_order.  A binary search
 * in the files ordered by device, inode and, for one inode, kcmp's order
 * of the open file descriptions: a process with 10,000 descriptions of one
 * file costs 14 kcmp calls a fd, not 10,000. */
static int find_file(struct cr_dump_ctx *ctx, pid_t pid, int fd, const struct stat *st,
		     uint32_t *id, int *at)
{
	int lo = 0, hi = ctx->nr_files;

	*id = 0;
	while (lo < hi) {
		int mid = (lo + hi) / 2, c;
		const struct cr_file *f = &ctx->files[ctx->file_order[mid]];

		if (f->dev != st->st_dev)
			c = f->dev < st->st_dev ? -1 : 1;
		else if (f->ino != st->st_ino)
			c = f->ino < st->st_ino ? -1 : 1;
		else {
			c = kcmp_file(f->owner_pid, f->owner_fd, pid, fd);
			if (c == 0) {
				*id = f->id;
				return 0;
			}
			if (c != 1 && c != 2) {
				int ret = c < 0 ? -errno : -EINVAL;

				pr_err("pid %d: fd %d: kcmp cannot order it against fd %d of pid "
				       "%d: %s",
				       pid, fd, f->owner_fd, f->owner_pid, strerror(-ret));
				return ret;
			}
			c = c == 1 ? -1 : 1; /* 1: the existing one comes first */
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return 0;
}

/* kind: what the link says the fd is; FILE_KIND__FILE_REG for a path
 * (refined from st), a memfd, an anonymous-inode kind, or 0 for a ghost */
static int add_file(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *link, int kind,
		    const char *fdinfo, const struct stat *st, uint64_t pos, uint32_t flags,
		    uint32_t *id, struct cr_file **out)
{
	struct cr_file *f, *nf;
	int ret, lo = 0, *no;

	*out = NULL;
	ret = find_file(ctx, p->pid, fd, st, id, &lo);
	if (ret || *id)
		return ret;
	no = xrealloc_array(ctx->file_order, ctx->nr_files + 1, sizeof(*no));
	if (!no)
		return -ENOMEM;
	ctx->file_order = no;
	nf = xrealloc_array(ctx->files, ctx->nr_files + 1, sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	ctx->files = nf;
	f = &nf[ctx->nr_files];
	memset(f, 0, sizeof(*f));
	f->id = ++ctx->next_file_id;
	f->path = xstrdup(link);
	if (!f->path)
		return -ENOMEM;
	memmove(&no[lo + 1], &no[lo], (ctx->nr_files - lo) * sizeof(*no));
	no[lo] = ctx->nr_files;
	ctx->nr_files++;
	f->flags = flags & ~O_CLOEXEC;
	f->pos = pos;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = st->st_size;
	f->rdev = st->st_rdev;
	f->owner_pid = p->pid;
	f->owner_fd = fd;
	*out = f;
	if (!strncmp(link, "socket:", 7))
		return socket_dump(ctx, p, fd, f, id);
	*id = f->id;
	if (kind && kind != FILE_KIND__FILE_REG) {
		f->kind = kind;
		if (kind == FILE_KIND__FILE_MEMFD)
			return shmem_dump_fd(ctx, p->pid, fd, link, &f->shmid);
		if (kind == FILE_KIND__FILE_TTY)
			return tty_dump(p, fd, link, f);
		return anon_dump(p, fd, fdinfo, f);
	}
	if (!kind) {
		/* an unlinked file: its path without " (deleted)" */
		size_t n = strlen(f->path);

		if (n > 10 && !strcmp(f->path + n - 10, " (deleted)"))
			f->path[n - 10] = 0;
		if (S_ISFIFO(st->st_mode)) {
			ret = fifo_removed_dump(p->pid, fd, st, f);
			if (ret)
				return ret;
			kind = FILE_KIND__FILE_FIFO;
		} else {
			f->kind = FILE_KIND__FILE_REG;
			return ghost_dump(ctx, p, fd, st, f);
		}
	}
	if (!strncmp(link, "pipe:", 5))
		f->kind = FILE_KIND__FILE_PIPE;
	else if (S_ISFIFO(st->st_mode))
		f->kind = FILE_KIND__FILE_FIFO;
	else if (S_ISDIR(st->st_mode))
		f->kind = FILE_KIND__FILE_DIR;
	else if (S_ISCHR(st->st_mode))
		f->kind = FILE_KIND__FILE_CHR;
	else
		f->kind = FILE_KIND__FILE_REG;
	if (f->kind == FILE_KIND__FILE_PIPE || f->kind == FILE_KIND__FILE_FIFO) {
		f->pipe_id = st->st_ino;
		ret = pipe_dump(ctx, p->pid, fd, f->pipe_id);
		if (ret)
			return ret;
	}
	*id = f->id;
	return 0;
}

static int cmp_fd(const void *a, const void *b)
{
	const struct cr_fd *x = a, *y = b;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

/* the locks of one fd: those of its description once (when it is new),
 * the POSIX locks of its process on the first of its fds of that description */
static int dump_locks(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
		      uint32_t id, bool is_new, struct cr_fd *cfd)
{
	FileLock **desc = NULL, **posix = NULL;
	size_t nd = 0, np = 0;
	struct cr_file *f = NULL;
	int ret;

	for (int i = 0; i < ctx->nr_files && !f; i++)
		if (ctx->files[i].id == id)
			f = &ctx->files[i];
	if (!f)
		return -EINVAL;
	ret = locks_parse(p->pid, fd, f->path, fdinfo, &desc, &nd, &posix, &np);
	if (ret || (!nd && !np))
		goto out;
	if (!lockable(f->kind)) {
		pr_err("pid %d: fd %d (%s) holds a file lock on a kind of file kupdate cannot "
		       "restore locks on",
		       p->pid, fd, f->path);
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (is_new) {
		f->locks = desc;
		f->nr_locks = nd;
		desc = NULL;
		nd = 0;
	}
	for (int k = 0; k < p->nr_fds; k++)
		if (p->fds[k].file_id == id)
			goto out; /* seen through another fd of this process already */
	if (np) {
		struct cr_lockset *ns =
			xrealloc_array(ctx->posix_locks, ctx->nr_posix_locks + 1, sizeof(*ns));

		if (!ns) {
			ret = -ENOMEM;
			goto out;
		}
		ctx->posix_locks = ns;
		ns[ctx->nr_posix_locks].l = posix;
		ns[ctx->nr_posix_locks].n = np;
		ctx->nr_posix_locks++;
		cfd->locks = posix;
		cfd->nr_locks = np;
		posix = NULL;
		np = 0;
	}
out:
	locks_free(desc, nd);
	locks_free(posix, np);
	return ret;
}

/* Is the owner of a description's signals (SIGIO, SIGURG) a thread, a
 * process or a process group of the dumped tree?  Nothing else exists
 * after the restore. */
static bool owner_in_tree(const struct cr_dump_ctx *ctx, uint32_t type, pid_t pid)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		const struct cr_proc *q = ctx->procs[i];

		if (q->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		if ((type == F_OWNER_PGRP && q->pgid == pid) ||
		    (type == F_OWNER_PID && q->pid == pid))
			return true;
		for (int t = 0; type == F_OWNER_TID && t < q->nr_threads; t++)
			if (q->threads[t].tid == pid)
				return true;
	}
	return false;
}

/* The owner and signal of a socket's description (SIGURG goes to its
 * owner), or of any description with O_ASYNC: read through kupdate's own
 * descriptor of it, the same open file description. */
static int dump_owner(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, struct cr_file *f)
{
	struct f_owner_ex own = { 0 };
	int sk, sig;

	if (!(f->flags & O_ASYNC) && f->kind != FILE_KIND__FILE_UNIX &&
	    f->kind != FILE_KIND__FILE_INET)
		return 0;
	sk = sk_dup(p, fd);
	if (sk < 0)
		return sk;
	if (fcntl(sk, F_GETOWN_EX, &own) || (sig = fcntl(sk, F_GETSIG)) < 0) {
		int ret = -errno;

		pr_perror("pid %d: fd %d (%s): cannot read the owner of its signals", p->pid, fd,
			  f->path);
		close(sk);
		return ret;
	}
	close(sk);
	if (!own.pid && !sig)
		return 0;
	if (own.pid && !owner_in_tree(ctx, own.type, own.pid)) {
		pr_err("pid %d: fd %d (%s): its signals (F_SETOWN) go to %s %d, outside the "
		       "dumped tree",
		       p->pid, fd, f->path,
		       own.type == F_OWNER_PGRP	 ? "process group"
		       : own.type == F_OWNER_TID ? "thread"
						 : "process",
		       own.pid);
		return -EOPNOTSUPP;
	}
	f->has_owner = true;
	f->own_type = own.type;
	f->own_pid = own.pid;
	f->own_sig = sig;
	return 0;
}

static int dump_one_fd(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd)
{
	char lpath[96], link[PATH_MAX + 1];
	_cleanup_free_ char *fdinfo = NULL;
	struct stat st;
	struct cr_fd *nfds, cfd;
	struct cr_file *nf;
	const char *what;
	uint64_t pos;
	uint32_t flags, id;
	ssize_t n;
	int kind = FILE_KIND__FILE_REG, ret;

	snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%d", p->pid, fd);
	n = readlink(lpath, link, sizeof(link) - 1);
	if (n < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot read the link of fd %d", p->pid, fd);
		return ret;
	}
	link[n] = 0;
	if (!strcmp(link, "anon_inode:[userfaultfd]")) {
		/* the tracking of a pre-dump no dump followed: it goes */
		ret = track_leftover(ctx, p, fd);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	what = unsupported_kind(link);
	if (what) {
		pr_err("pid %d: fd %d is %s (%s), which this kupdate cannot dump yet", p->pid, fd,
		       what, link);
		return -EOPNOTSUPP;
	}
	if (stat(lpath, &st)) {
		ret = -errno;
		pr_perror("pid %d: cannot stat fd %d (%s)", p->pid, fd, link);
		return ret;
	}
	if (anon_kind(link)) {
		kind = anon_kind(link);
	} else if (tty_is_pty(link, &st)) {
		kind = FILE_KIND__FILE_TTY;
	} else if (!strcmp(link, "/dev/tty") && !ctty_is_pty(p->pid)) {
		pr_err("pid %d: fd %d is /dev/tty, and its controlling terminal is not a "
		       "pseudo-terminal kupdate restores",
		       p->pid, fd);
		return -EOPNOTSUPP;
	} else if (!strncmp(link, "/memfd:", 7) && S_ISREG(st.st_mode)) {
		kind = FILE_KIND__FILE_MEMFD;
	} else {
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISCHR(st.st_mode) &&
		    !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode)) {
			pr_err("pid %d: fd %d (%s) is of a kind this kupdate cannot dump yet",
			       p->pid, fd, link);
			return -EOPNOTSUPP;
		}
		if (link[0] != '/' && strncmp(link, "pipe:", 5) && strncmp(link, "socket:", 7)) {
			pr_err("pid %d: fd %d (%s) has no path to reopen it by", p->pid, fd, link);
			return -EOPNOTSUPP;
		}
		if (link[0] == '/' &&
		    (st.st_nlink == 0 || (n > 10 && !strcmp(link + n - 10, " (deleted)"))))
			kind = 0; /* a ghost */
	}
	ret = parse_fdinfo(p->pid, fd, &fdinfo, &pos, &flags);
	if (ret) {
		pr_err("pid %d: cannot read fdinfo of fd %d: %s", p->pid, fd, strerror(-ret));
		return ret;
	}
	ret = add_file(ctx, p, fd, link, kind, fdinfo, &st, pos, flags, &id, &nf);
	if (!ret && nf)
		ret = dump_owner(ctx, p, fd, nf);
	if (ret)
		return ret;
	memset(&cfd, 0, sizeof(cfd));
	cfd.fd = fd;
	cfd.file_id = id;
	cfd.cloexec = !!(flags & O_CLOEXEC);
	ret = dump_locks(ctx, p, fd, fdinfo, id, nf != NULL, &cfd);
	if (ret)
		return ret;
	nfds = xrealloc_array(p->fds, p->nr_fds + 1, sizeof(*nfds));
	if (!nfds)
		return -ENOMEM;
	p->fds = nfds;
	nfds[p->nr_fds++] = cfd;
	return 0;
}

static struct cr_proc *fdt_of(struct cr_proc *q)
{
	return q->fdt_owner ? q->fdt_owner : q;
}

/* A file in flight that no process holds: the kinds kupdate dumps without
 * a holder (NULL, *kind set), else what it is, for the refusal.  Kinds
 * whose restore needs a holder (an epoll's targets, an inotify watch's
 * ghost, a terminal's session, a memfd's or a deleted file's object made
 * for every process, a TCP connection's lock) are left out. */
static const char *inflight_refused(struct cr_dump_ctx *ctx, const char *link,
				    const struct stat *st, int *kind)
{
	const char *what = unsupported_kind(link);
	size_t n = strlen(link);

	*kind = FILE_KIND__FILE_REG;
	if (what)
		return what;
	if (anon_kind(link)) {
		*kind = anon_kind(link);
		return *kind == FILE_KIND__FILE_EPOLL	  ? "an epoll instance"
		       : *kind == FILE_KIND__FILE_INOTIFY ? "an inotify instance"
							  : NULL;
	}
	if (!strncmp(link, "socket:", 7)) {
		const struct sk_diag *d = sockdiag_find(&ctx->sk, st->st_ino);

		return d && d->family == AF_UNIX ? NULL : "a socket other than a unix one";
	}
	if (!strncmp(link, "pipe:", 5))
		return NULL;
	if (tty_is_pty(link, st) || !strcmp(link, "/dev/tty"))
		return "a terminal";
	if (!strncmp(link, "/memfd:", 7))
		return "a memfd";
	if (link[0] != '/')
		return "a file without a path to reopen it by";
	if (st->st_nlink == 0 || (n > 10 && !strcmp(link + n - 10, " (deleted)")))
		return "a deleted file";
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISCHR(st->st_mode) &&
	    !S_ISFIFO(st->st_mode))
		return "a file of a kind kupdate cannot dump";
	return NULL;
}

static int resolve_inflight(struct cr_dump_ctx *ctx, int i)
{
	struct cr_inflight in = ctx->inflight[i]; /* the array grows meanwhile */
	char lpath[64], link[PATH_MAX + 1];
	_cleanup_free_ char *fdinfo = NULL;
	pid_t self = getpid();
	struct cr_file *nf;
	const char *what;
	struct stat st;
	uint64_t pos;
	uint32_t flags, id;
	int kind, at, ret;
	ssize_t n;

	snprintf(lpath, sizeof(lpath), "/proc/self/fd/%d", in.kfd);
	n = readlink(lpath, link, sizeof(link) - 1);
	if (n < 0 || stat(lpath, &st)) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot look at a file descriptor in flight in its unix "
			  "socket",
			  in.pid, in.fd);
		return ret;
	}
	link[n] = 0;
	ret = find_file(ctx, self, in.kfd, &st, &id, &at);
	if (ret)
		return ret;
	if (id) { /* the tree holds it: that file */
		close(in.kfd);
		ctx->inflight[i].kfd = -1;
		in.m->fds[in.slot] = id;
		return 0;
	}
	what = inflight_refused(ctx, link, &st, &kind);
	if (what) {
		pr_err("pid %d: fd %d: its unix socket holds in flight (SCM_RIGHTS) %s (%s), "
		       "which no process of the dumped tree holds; kupdate cannot dump it there",
		       in.pid, in.fd, what, link);
		return -EOPNOTSUPP;
	}
	ret = parse_fdinfo(self, in.kfd, &fdinfo, &pos, &flags);
	if (ret)
		return ret;
	if (fdinfo_find(fdinfo, "lock:")) {
		pr_err("pid %d: fd %d: its unix socket holds in flight (SCM_RIGHTS) %s, with a "
		       "lock on it, which no process of the dumped tree holds; kupdate cannot "
		       "dump it there",
		       in.pid, in.fd, link);
		return -EOPNOTSUPP;
	}
	if (!ctx->self) {
		ctx->self = xzalloc(sizeof(*ctx->self));
		if (!ctx->self)
			return -ENOMEM;
		ctx->self->pid = self;
		ctx->self->pidfd = -1;
	}
	ctx->via_pid = in.pid;
	ctx->via_fd = in.fd;
	ret = add_file(ctx, ctx->self, in.kfd, link, kind, fdinfo, &st, pos, flags, &id, &nf);
	if (nf) {
		nf->inflight_only = true;
		nf->via_pid = in.pid;
		nf->via_fd = in.fd;
	}
	if (!ret && nf)
		ret = dump_owner(ctx, ctx->self, in.kfd, nf);
	if (!ret && nf && nf->has_owner) {
		pr_err("pid %d: fd %d: its unix socket holds in flight (SCM_RIGHTS) %s, whose "
		       "signals go to an owner (F_SETOWN) and which no process of the dumped tree "
		       "holds; kupdate cannot dump it there",
		       in.pid, in.fd, link);
		ret = -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	/* kept open: a later fd in flight may be the same (kcmp) */
	in.m->fds[in.slot] = id;
	return 0;
}

int files_resolve_inflight(struct cr_dump_ctx *ctx)
{
	/* a socket in flight may hold more in its own queue: they are added */
	for (int i = 0; i < ctx->nr_inflight; i++) {
		int ret = resolve_inflight(ctx, i);

		if (ret)
			return ret;
	}
	return 0;
}

/* fd tables (CLONE_FILES) and fs structs (CLONE_FS) shared with processes
 * dumped before p (its parent among them).  An fs struct shared with the
 * parent is restored with CLONE_FS (restore.c), which also covers the
 * parent's other children that share it.  So is an fd table: the nearest
 * ancestor that does not share its parent's (p->fdt_owner) dumps it, and
 * every process of the chain below is created with CLONE_FILES.  A table
 * shared any other way (with a sibling, a grandparent, a process outside
 * the tree) cannot be built again by clone(2) from the restored tree. */
static int dump_sharing(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	p->share_fs = p->parent && p->parent->state != TASK_STATE__TASK_ZOMBIE &&
		      syscall(SYS_kcmp, p->pid, p->parent->pid, KCMP_FS, 0, 0) == 0;
	if (p->share_fs && p->root && strcmp(p->root, "/")) {
		pr_err("pid %d shares its cwd and root (CLONE_FS) with its parent and has the "
		       "root %s; kupdate cannot restore that",
		       p->pid, p->root);
		return -EOPNOTSUPP;
	}
	p->fdt_owner = NULL;
	if (p->parent && p->parent->state != TASK_STATE__TASK_ZOMBIE &&
	    syscall(SYS_kcmp, p->pid, p->parent->pid, KCMP_FILES, 0, 0) == 0)
		p->fdt_owner = fdt_of(p->parent);
	for (int i = 0; i < ctx->nr_procs && ctx->procs[i] != p; i++) {
		struct cr_proc *q = ctx->procs[i];

		if (q->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		if ((!p->fdt_owner || fdt_of(q) != p->fdt_owner) &&
		    syscall(SYS_kcmp, p->pid, q->pid, KCMP_FILES, 0, 0) == 0) {
			if (p->parent)
				pr_err("pid %d shares its fd table (CLONE_FILES) with pid %d but "
				       "not with its parent %d; kupdate restores a table shared "
				       "only down the process tree, from parent to child",
				       p->pid, q->pid, p->parent->pid);
			else
				pr_err("pid %d shares its fd table (CLONE_FILES) with pid %d but "
				       "has no parent in the dumped tree; kupdate restores a "
				       "table shared only down the process tree, from parent to "
				       "child",
				       p->pid, q->pid);
			return -EOPNOTSUPP;
		}
		if (!p->share_fs && syscall(SYS_kcmp, p->pid, q->pid, KCMP_FS, 0, 0) == 0) {
			pr_err("pid %d shares its cwd and root (CLONE_FS) with pid %d but not with "
			       "its parent; kupdate cannot restore that",
			       p->pid, q->pid);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

/* kcmp(KCMP_FILES) orders fd tables (by their obfuscated addresses) */
static int cmp_fdt(const void *a, const void *b)
{
	long r = syscall(SYS_kcmp, *(const pid_t *)a, *(const pid_t *)b, KCMP_FILES, 0, 0);

	return r == 1 ? -1 : r == 2 ? 1 : 0;
}

int files_check_outside(struct cr_dump_ctx *ctx)
{
	_cleanup_free_ pid_t *own = calloc(ctx->nr_procs ? ctx->nr_procs : 1, sizeof(pid_t));
	DIR *d;
	struct dirent *de;
	int n = 0, ret = 0;

	if (!own)
		return -ENOMEM;
	for (int i = 0; i < ctx->nr_procs; i++)
		if (ctx->procs[i]->state != TASK_STATE__TASK_ZOMBIE && !ctx->procs[i]->fdt_owner)
			own[n++] = ctx->procs[i]->pid;
	if (!n)
		return 0;
	qsort(own, n, sizeof(*own), cmp_fdt);
	d = opendir("/proc");
	if (!d) {
		ret = -errno;
		pr_perror("cannot list the processes (/proc)");
		return ret;
	}
	while (!ret && (de = readdir(d))) {
		pid_t x = atoi(de->d_name);
		bool ours = x == getpid();
		int lo = 0, hi = n;

		for (int i = 0; i < ctx->nr_procs && !ours && x > 0; i++)
			ours = ctx->procs[i]->pid == x;
		if (x <= 0 || ours)
			continue;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			long r = syscall(SYS_kcmp, x, own[mid], KCMP_FILES, 0, 0);

			if (r < 0)
				break; /* gone, or a kernel thread */
			if (r == 0) {
				pr_err("pid %d shares its fd table (CLONE_FILES) with pid %d, "
				       "which is outside the dumped tree; kupdate cannot "
				       "restore that",
				       own[mid], x);
				ret = -EOPNOTSUPP;
				break;
			}
			if (r == 1)
				hi = mid;
			else
				lo = mid + 1;
		}
	}
	closedir(d);
	return ret;
}

/* A POSIX lock belongs to the fd table, and shows in its fdinfo with the
 * pid of the process that took it; the restore takes a shared table's
 * locks in the process that restores the table, p->fdt_owner, which would
 * change that pid. */
static int check_sharer_posix_locks(struct cr_proc *p)
{
	const struct cr_proc *o = p->fdt_owner;

	for (int k = 0; k < o->nr_fds; k++) {
		_cleanup_free_ char *buf = NULL;
		uint64_t pos;
		uint32_t flags;

		if (!o->fds[k].nr_locks)
			continue;
		if (parse_fdinfo(p->pid, o->fds[k].fd, &buf, &pos, &flags))
			continue;
		for (const char *l = fdinfo_find(buf, "lock:"); l; l = fdinfo_find(l, "lock:")) {
			char kind[16];
			int owner;

			if (sscanf(l, " %*d: %15s %*s %*s %d", kind, &owner) == 2 &&
			    !strcmp(kind, "POSIX") && owner == p->pid) {
				pr_err("pid %d: fd %d: a POSIX lock taken by pid %d through the fd "
				       "table it shares with pid %d (CLONE_FILES) would come back "
				       "as pid %d's; kupdate cannot restore that",
				       p->pid, o->fds[k].fd, p->pid, o->pid, o->pid);
				return -EOPNOTSUPP;
			}
		}
	}
	return 0;
}

/* A POSIX lock is dropped when its process closes any fd of the file: the
 * restore closes the fds it used to map the process's files, to set its
 * executable and to create its shared memory (see restore.c, memory.c).
 * p holds the locks through fd table of holder (itself, or the process
 * that restores the table p shares). */
static int check_posix_locks(struct cr_dump_ctx *ctx, const struct cr_proc *holder,
			     struct cr_proc *p)
{
	for (int k = 0; k < holder->nr_fds; k++) {
		const struct cr_file *f = NULL;

		if (!holder->fds[k].nr_locks)
			continue;
		for (int i = 0; i < ctx->nr_files && !f; i++)
			if (ctx->files[i].id == holder->fds[k].file_id)
				f = &ctx->files[i];
		if (!f)
			return -EINVAL;
		if (f->kind == FILE_KIND__FILE_MEMFD || (p->exe_ino && p->exe_ino == f->ino)) {
			pr_err("pid %d: fd %d: POSIX locks on %s, %s, cannot be restored", p->pid,
			       holder->fds[k].fd, f->path,
			       f->kind == FILE_KIND__FILE_MEMFD ? "a memfd" : "its executable");
			return -EOPNOTSUPP;
		}
		for (int v = 0; v < p->nr_vmas; v++)
			if (p->vmas[v].s.ino == f->ino && p->vmas[v].s.dev_major == major(f->dev) &&
			    p->vmas[v].s.dev_minor == minor(f->dev)) {
				pr_err("pid %d: fd %d: POSIX locks on %s, which the process also "
				       "maps, cannot be restored",
				       p->pid, holder->fds[k].fd, f->path);
				return -EOPNOTSUPP;
			}
	}
	return 0;
}

int dump_files(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char dpath[64];
	DIR *d;
	struct dirent *de;
	int ret = dump_sharing(ctx, p);

	if (ret)
		return ret;
	/* its fds are those of the table's owner, dumped already */
	if (p->fdt_owner) {
		ret = check_posix_locks(ctx, p->fdt_owner, p);
		if (!ret)
			ret = check_sharer_posix_locks(p);
		if (ret)
			return ret;
		goto spanning;
	}

	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", p->pid);
	d = opendir(dpath);
	if (!d) {
		ret = -errno;
		pr_perror("pid %d: cannot list its fds (%s)", p->pid, dpath);
		return ret;
	}
	while ((de = readdir(d)) && !ret) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		ret = dump_one_fd(ctx, p, atoi(de->d_name));
	}
	closedir(d);
	if (!ret && p->nr_fds) /* qsort wants a valid array even for none */
		qsort(p->fds, p->nr_fds, sizeof(*p->fds), cmp_fd);
	if (!ret)
		ret = epoll_resolve(ctx, p);
	if (!ret)
		ret = check_posix_locks(ctx, p, p);
spanning:
	/* what spans processes, once the last one is done */
	for (int i = ctx->nr_procs - 1; i >= 0 && !ret; i--) {
		if (ctx->procs[i]->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		if (ctx->procs[i] == p)
			ret = tty_finish_dump(ctx);
		if (!ret && ctx->procs[i] == p)
			ret = inotify_finish_dump(ctx);
		break;
	}
	return ret;
}

int write_files(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "files.img", IMG_FILES);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_files; i++) {
		struct cr_file *f = &ctx->files[i];
		FileEntry e = FILE_ENTRY__INIT;
		FileOwner owner = FILE_OWNER__INIT;

		e.id = f->id;
		e.kind = f->kind;
		e.path = f->path;
		e.flags = f->flags;
		e.has_pos = e.has_ino = e.has_size = 1;
		e.pos = f->pos;
		e.ino = f->ino;
		e.size = f->size;
		if (f->kind == FILE_KIND__FILE_CHR) {
			e.has_rdev = 1;
			e.rdev = f->rdev;
		}
		if (f->kind == FILE_KIND__FILE_PIPE || f->kind == FILE_KIND__FILE_FIFO) {
			e.has_pipe_id = 1;
			e.pipe_id = f->pipe_id;
		}
		e.usk = f->usk;
		e.isk = f->isk;
		e.efd = f->efd;
		e.sfd = f->sfd;
		e.tmr = f->tmr;
		e.ep = f->ep;
		e.ify = f->ify;
		if (f->kind == FILE_KIND__FILE_MEMFD) {
			e.has_shmid = 1;
			e.shmid = f->shmid;
		}
		if (f->ghost_id) {
			e.has_ghost_id = 1;
			e.ghost_id = f->ghost_id;
		}
		if (f->fifo_removed) {
			e.has_fifo_removed = e.fifo_removed = 1;
			e.has_fifo_mode = e.has_fifo_uid = e.has_fifo_gid = 1;
			e.fifo_mode = f->fifo_mode;
			e.fifo_uid = f->fifo_uid;
			e.fifo_gid = f->fifo_gid;
		}
		e.n_locks = f->nr_locks;
		e.locks = f->locks;
		e.tty = f->tty;
		if (f->has_owner) {
			e.owner = &owner;
			owner.type = f->own_type;
			owner.pid = f->own_pid;
			owner.signum = f->own_sig;
		}
		img_write(&w, &e.base);
	}
	ret = img_writer_close(&w);
	if (ret)
		return ret;

	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		char name[64];

		if (p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		snprintf(name, sizeof(name), "fds-%d.img", p->pid);
		ret = img_writer_open(&w, ctx->dirfd, name, IMG_FDS);
		if (ret)
			return ret;
		for (int k = 0; k < p->nr_fds; k++) {
			FdEntry e = FD_ENTRY__INIT;

			e.fd = p->fds[k].fd;
			e.file_id = p->fds[k].file_id;
			e.cloexec = p->fds[k].cloexec;
			e.n_locks = p->fds[k].nr_locks;
			e.locks = p->fds[k].locks;
			img_write(&w, &e.base);
		}
		ret = img_writer_close(&w);
		if (ret)
			return ret;
	}
	return 0;
}

void free_files(struct cr_dump_ctx *ctx)
{
	free(ctx->file_order);
	ctx->file_order = NULL;
	for (int i = 0; i < ctx->nr_files; i++) {
		free(ctx->files[i].path);
		unix_free_dump(ctx->files[i].usk);
		inet_free_dump(ctx->files[i].isk);
		eventfd_free_dump(ctx->files[i].efd);
		signalfd_free_dump(ctx->files[i].sfd);
		timerfd_free_dump(ctx->files[i].tmr);
		epoll_free_dump(ctx->files[i].ep);
		free(ctx->files[i].ep_where);
		inotify_free_dump(ctx->files[i].ify);
		tty_free_dump(ctx->files[i].tty);
		locks_free(ctx->files[i].locks, ctx->files[i].nr_locks);
	}
	free(ctx->files);
	ctx->files = NULL;
	ctx->nr_files = 0;
	/* the processes (and their fds) may be gone already */
	for (int i = 0; i < ctx->nr_posix_locks; i++)
		locks_free(ctx->posix_locks[i].l, ctx->posix_locks[i].n);
	free(ctx->posix_locks);
	ctx->posix_locks = NULL;
	ctx->nr_posix_locks = 0;
	ghost_free_dump(ctx);
	for (int i = 0; i < ctx->nr_inflight; i++)
		if (ctx->inflight[i].kfd >= 0)
			close(ctx->inflight[i].kfd);
	free(ctx->inflight);
	ctx->inflight = NULL;
	ctx->nr_inflight = 0;
	if (ctx->self && ctx->self->pidfd >= 0)
		close(ctx->self->pidfd);
	free(ctx->self);
	ctx->self = NULL;
}

/* ------------------------------------------------------------- restore */

int files_load(int dirfd, struct rfiles *f)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret;

	memset(f, 0, sizeof(*f));
	ret = img_reader_open(&r, dirfd, "files.img", IMG_FILES);
	if (ret)
		return ret;
	f->files = calloc(r.nr ? r.nr : 1, sizeof(*f->files));
	if (!f->files) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &file_entry__descriptor, &m)) > 0)
		f->files[f->nr_files++] = (FileEntry *)m;
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	ret = pipes_load(dirfd, &f->pipes, &f->nr_pipes);
	if (ret)
		return ret;
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		bool piped = e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO;

		if (e->kind < FILE_KIND__FILE_REG || e->kind > FILE_KIND__FILE_TTY || !e->path[0] ||
		    (piped && !e->has_pipe_id) ||
		    (e->kind == FILE_KIND__FILE_MEMFD && !e->has_shmid) ||
		    (e->has_ghost_id && e->kind != FILE_KIND__FILE_REG) ||
		    (e->fifo_removed && (e->kind != FILE_KIND__FILE_FIFO || e->path[0] != '/')) ||
		    (e->n_locks && !lockable(e->kind))) {
			pr_err("image files.img is damaged: entry %zu has an invalid kind or path",
			       i);
			return -EINVAL;
		}
		if (locks_validate(e->locks, e->n_locks, false, "files.img"))
			return -EINVAL;
		if (e->owner && ((e->owner->type != F_OWNER_TID && e->owner->type != F_OWNER_PID &&
				  e->owner->type != F_OWNER_PGRP) ||
				 e->owner->pid < 0 || e->owner->signum > 64)) {
			pr_err("image files.img is damaged: entry %zu has an invalid signal owner",
			       i);
			return -EINVAL;
		}
		switch (e->kind) {
		case FILE_KIND__FILE_EVENTFD:
			ret = eventfd_validate(e);
			break;
		case FILE_KIND__FILE_SIGNALFD:
			ret = signalfd_validate(e);
			break;
		case FILE_KIND__FILE_TIMERFD:
			ret = timerfd_validate(e);
			break;
		case FILE_KIND__FILE_EPOLL:
			ret = epoll_validate(e);
			break;
		case FILE_KIND__FILE_INOTIFY:
			ret = inotify_validate(e);
			break;
		case FILE_KIND__FILE_TTY:
			ret = tty_validate(e);
			for (size_t k = 0; !ret && k < i; k++)
				if (f->files[k]->kind == FILE_KIND__FILE_TTY && e->tty->master &&
				    f->files[k]->tty->master &&
				    f->files[k]->tty->index == e->tty->index) {
					pr_err("image files.img is damaged: two masters of "
					       "/dev/pts/%u",
					       e->tty->index);
					ret = -EINVAL;
				}
			break;
		default:
			ret = 0;
		}
		if (ret)
			return ret;
		if (e->has_ghost_id) {
			ret = files_load_ghost(dirfd, f, e->ghost_id, NULL);
			if (ret)
				return ret;
		}
		/* the dump writes them in the order of their ids, which
		 * files_index() relies on */
		if (i && e->id <= f->files[i - 1]->id) {
			pr_err("image files.img is damaged: file %u appears twice or out of order",
			       e->id);
			return -EINVAL;
		}
		if ((e->kind == FILE_KIND__FILE_UNIX && unix_validate(e)) ||
		    (e->kind == FILE_KIND__FILE_INET && inet_validate(e)))
			return -EINVAL;
		if (piped && !files_pipe(f, e->pipe_id)) {
			pr_err("image files.img refers to pipe %lu, which pipes.img lacks",
			       (unsigned long)e->pipe_id);
			return -EINVAL;
		}
	}
	/* the files queued messages carry (SCM_RIGHTS) are in files.img */
	for (size_t i = 0; i < f->nr_files; i++) {
		const UnixSk *u = f->files[i]->usk;

		for (size_t q = 0; f->files[i]->kind == FILE_KIND__FILE_UNIX && q < u->n_queue; q++)
			for (size_t k = 0; k < u->queue[q]->n_fds; k++)
				if (u->queue[q]->n_fds > 253 ||
				    files_index(f, u->queue[q]->fds[k]) == (size_t)-1) {
					pr_err("image files.img is damaged: unix socket %u carries "
					       "file %u in flight, which it lacks",
					       f->files[i]->id, u->queue[q]->fds[k]);
					return -EINVAL;
				}
	}
	f->desc = calloc(f->nr_files ? f->nr_files : 1, sizeof(*f->desc));
	f->pipe_owner = calloc(f->nr_pipes ? f->nr_pipes : 1, sizeof(*f->pipe_owner));
	f->tty = calloc(1, sizeof(*f->tty));
	if (!f->desc || !f->pipe_owner || !f->tty)
		return -ENOMEM;
	return 0;
}

void files_free(struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		ghost_free(&f->ghosts[i]);
	free(f->ghosts);
	if (f->tty) {
		tty_close_pairs(f->tty);
		free(f->tty->p);
		free(f->tty);
	}
	for (size_t i = 0; i < f->nr_files; i++)
		file_entry__free_unpacked(f->files[i], NULL);
	free(f->files);
	pipes_free(f->pipes, f->nr_pipes);
	free(f->desc);
	free(f->pipe_owner);
	memset(f, 0, sizeof(*f));
}

int files_load_ghost(int dirfd, struct rfiles *f, uint32_t id, struct rghost **out)
{
	struct rghost *ng = files_ghost(f, id);
	int ret;

	if (!ng) {
		ng = xrealloc_array(f->ghosts, f->nr_ghosts + 1, sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		f->ghosts = ng;
		ng += f->nr_ghosts;
		ret = ghost_load(dirfd, id, ng);
		f->nr_ghosts++;
		if (ret)
			return ret;
	}
	if (out)
		*out = ng;
	return 0;
}

struct rghost *files_ghost(const struct rfiles *f, uint32_t id)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		if (f->ghosts[i].e && f->ghosts[i].e->id == id)
			return &f->ghosts[i];
	return NULL;
}

PipeEntry *files_pipe(const struct rfiles *f, uint64_t id)
{
	for (size_t i = 0; i < f->nr_pipes; i++)
		if (f->pipes[i]->id == id)
			return f->pipes[i];
	return NULL;
}

/* files.img is in the order of the ids (files_load checks it) */
size_t files_index(const struct rfiles *f, uint32_t id)
{
	size_t lo = 0, hi = f->nr_files;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->files[mid]->id == id)
			return mid;
		if (f->files[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (size_t)-1;
}

bool files_holds(const struct rproc *rp, uint32_t file_id)
{
	for (size_t k = 0; k < rp->nr_fds; k++)
		if (rp->fds[k]->file_id == file_id)
			return true;
	return false;
}

/* the flock and OFD locks of a description just made */
static int with_locks(int nfd, const FileEntry *e, pid_t pid, int fd)
{
	char what[96];
	int ret;

	if (!e->n_locks)
		return nfd;
	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	ret = locks_apply_desc(nfd, e, what);
	if (ret) {
		close(nfd);
		return ret;
	}
	return nfd;
}

/* /proc files get new inode numbers with every instance of a process: a
 * /proc/PID file of the restored tree is the same file again */
static bool on_procfs(int fd)
{
	struct statfs sf;

	return !fstatfs(fd, &sf) && sf.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */;
}

static int open_file(const FileEntry *f, pid_t pid, int fd)
{
	int flags = (f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY)) | O_CLOEXEC;
	struct stat st;
	int nfd, ret;

	if (f->kind == FILE_KIND__FILE_DIR)
		flags |= O_DIRECTORY;
	nfd = open(f->path, flags);
	if (nfd < 0) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot reopen %s", pid, fd, f->path);
		return ret;
	}
	if (fstat(nfd, &st)) {
		ret = -errno;
		close(nfd);
		return ret;
	}
	if (f->kind == FILE_KIND__FILE_CHR) {
		if (!S_ISCHR(st.st_mode) || (f->has_rdev && st.st_rdev != f->rdev)) {
			pr_err("pid %d: fd %d: %s is no longer the character device %u:%u", pid, fd,
			       f->path, major(f->rdev), minor(f->rdev));
			close(nfd);
			return -ESTALE;
		}
	} else if (f->has_ino && st.st_ino != f->ino && !on_procfs(nfd)) {
		pr_err("pid %d: fd %d: %s was replaced since the dump (inode %lu, was %lu)", pid,
		       fd, f->path, (unsigned long)st.st_ino, (unsigned long)f->ino);
		close(nfd);
		return -ESTALE;
	}
	if (f->kind == FILE_KIND__FILE_REG && !(f->flags & O_PATH) && f->has_pos &&
	    lseek(nfd, f->pos, SEEK_SET) != (off_t)f->pos) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot seek %s to %lu", pid, fd, f->path,
			  (unsigned long)f->pos);
		close(nfd);
		return ret ? ret : -EIO;
	}
	return with_locks(nfd, f, pid, fd);
}

static int lift(const struct rfiles *f, int fd);

/* A memfd or an unlinked file: a new description of the object kupdate
 * (or an ancestor) made, reached through /proc/self/fd. */
static int open_object(const FileEntry *e, int obj, pid_t pid, int fd)
{
	int flags = (e->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY)) | O_CLOEXEC;
	char path[64];
	int nfd, ret;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", obj);
	nfd = open(path, flags);
	if (nfd < 0) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot open %s again", pid, fd, e->path);
		return ret;
	}
	if (!(e->flags & O_PATH) && e->has_pos && lseek(nfd, e->pos, SEEK_SET) != (off_t)e->pos) {
		ret = -errno;
		pr_perror("pid %d: fd %d: cannot seek %s to %lu", pid, fd, e->path,
			  (unsigned long)e->pos);
		close(nfd);
		return ret ? ret : -EIO;
	}
	return with_locks(nfd, e, pid, fd);
}

static int open_memfd(const struct rfiles *f, const FileEntry *e, pid_t pid, int fd)
{
	int obj = shmem_fd(f->shm, e->shmid, NULL);

	if (obj < 0) {
		pr_err("pid %d: fd %d: memfd %u was not made", pid, fd, e->shmid);
		return -EINVAL;
	}
	return open_object(e, obj, pid, fd);
}

static int open_ghost(const struct rfiles *f, const FileEntry *e, pid_t pid, int fd)
{
	struct rghost *g = files_ghost(f, e->ghost_id);

	/* made by kupdate for the mappings: the same inode */
	if (g->fd < 0 && g->map_fd >= 0)
		return open_object(e, g->map_fd, pid, fd);
	if (g->fd < 0) {
		int gfd = ghost_create(g, e->path);

		if (gfd < 0)
			return gfd;
		/* above every transport, out of the way of their placement */
		g->fd = lift(f, gfd);
		if (g->fd < 0)
			return g->fd;
	}
	return open_object(e, g->fd, pid, fd);
}

/* An fd of the ghost id made again, in this process, for what must reach
 * its inode (an inotify watch): a description of it on its transport fd,
 * or the ghost kupdate (or this process) made, made now if not yet. */
int files_ghost_fd(const struct rfiles *f, uint32_t id, const char *path)
{
	struct rghost *g = files_ghost(f, id);

	if (!g)
		return -EINVAL;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->has_ghost_id && f->files[i]->ghost_id == id &&
		    f->desc[i].tfd >= 0 && fcntl(f->desc[i].tfd, F_GETFD) >= 0)
			return f->desc[i].tfd;
	if (g->fd >= 0)
		return g->fd;
	if (g->map_fd >= 0 && fcntl(g->map_fd, F_GETFD) >= 0)
		return g->map_fd;
	g->fd = ghost_create(g, path);
	if (g->fd >= 0)
		g->fd = lift(f, g->fd);
	return g->fd;
}

/* the files made again once every description of them is open */
static void close_ghosts(struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_ghosts; i++)
		if (f->ghosts[i].fd >= 0) {
			close(f->ghosts[i].fd);
			f->ghosts[i].fd = -1;
		}
}

static int set_fl(int fd, uint32_t flags, const char *what)
{
	if (fcntl(fd, F_SETFL, flags & SETFL_MASK)) {
		int ret = -errno;
		pr_perror("cannot set the flags %#x of %s", flags, what);
		return ret;
	}
	return 0;
}

/* Move an fd that must stay open while transports are placed above every
 * transport number, where no placement can clobber it. */
static int lift(const struct rfiles *f, int fd)
{
	return fd_move_above(fd, f->tend);
}

/* Put fd on exactly the number want (closing what was there). */
static int place(int fd, int want)
{
	if (fd == want)
		return 0;
	if (dup3(fd, want, O_CLOEXEC) < 0) {
		int ret = -errno;
		pr_perror("cannot place a descriptor on fd %d", want);
		close(fd);
		return ret;
	}
	close(fd);
	return 0;
}

/* Create one pipe object and every description of it, on transport fds. */
static int create_pipe_descs(struct rfiles *f, size_t pi, pid_t pid)
{
	PipeEntry *pe = f->pipes[pi];
	int p[2] = { -1, -1 }, anchor = -1, ret = 0;
	const char *fifo = NULL;

	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_FIFO && f->files[i]->pipe_id == pe->id)
			fifo = f->files[i]->path;
	if (fifo) {
		anchor = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (anchor < 0) {
			ret = -errno;
			pr_perror("pid %d: cannot open the FIFO %s", pid, fifo);
			return ret;
		}
		anchor = lift(f, anchor);
		if (anchor < 0)
			return anchor;
		ret = pipe_fill(pe, anchor);
	} else {
		if (pipe2(p, O_CLOEXEC)) {
			ret = -errno;
			pr_perror("pid %d: cannot create a pipe", pid);
			return ret;
		}
		p[0] = lift(f, p[0]);
		p[1] = lift(f, p[1]);
		if (p[0] < 0 || p[1] < 0) {
			if (p[0] >= 0)
				close(p[0]);
			if (p[1] >= 0)
				close(p[1]);
			return -EMFILE;
		}
		ret = pipe_fill(pe, p[1]);
	}
	for (size_t i = 0; i < f->nr_files && !ret; i++) {
		FileEntry *e = f->files[i];
		int acc = e->flags & O_ACCMODE, fd;
		char path[64];

		if ((e->kind != FILE_KIND__FILE_PIPE && e->kind != FILE_KIND__FILE_FIFO) ||
		    e->pipe_id != pe->id || f->desc[i].tfd < 0)
			continue;
		/* each description its own open of the pipe: both ends are open
		 * meanwhile, so none of these opens waits */
		if (!fifo)
			snprintf(path, sizeof(path), "/proc/self/fd/%d",
				 acc == O_WRONLY ? p[1] : p[0]);
		fd = open(fifo ? fifo : path, acc | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			pr_perror("pid %d: cannot open an end of pipe %lu", pid,
				  (unsigned long)pe->id);
			break;
		}
		ret = set_fl(fd, e->flags, e->path);
		if (!ret)
			ret = place(fd, f->desc[i].tfd);
	}
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (anchor >= 0)
		close(anchor);
	return ret;
}

/* A FIFO whose path was removed is made there for its opens, then removed. */
static int create_pipe(struct rfiles *f, size_t pi, pid_t pid)
{
	const FileEntry *removed = NULL;
	int ret;

	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_FIFO &&
		    f->files[i]->pipe_id == f->pipes[pi]->id && f->files[i]->fifo_removed)
			removed = f->files[i];
	if (removed && (ret = fifo_make(removed, pid)))
		return ret;
	ret = create_pipe_descs(f, pi, pid);
	if (removed)
		fifo_unmake(removed);
	return ret;
}

/* A description that is neither a pipe nor half of a pair. */
static int create_desc(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd)
{
	pid_t pid = rp->pid;
	char what[96];

	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	switch (e->kind) {
	case FILE_KIND__FILE_UNIX:
		if (e->usk->external) {
			char peer[120];
			int nfd;

			snprintf(peer, sizeof(peer), "%.*s", (int)e->usk->peer_name.len,
				 (char *)e->usk->peer_name.data);
			if (!f->open_external) {
				pr_err("%s: its peer %s was outside the dumped tree, and nothing "
				       "here can make a new connection to it",
				       what, peer);
				return -EOPNOTSUPP;
			}
			/* named after the process that holds it */
			if (rp == FILES_TOOL)
				rp = f->desc[files_index(f, e->id)].first;
			nfd = f->open_external(peer, rp->core.task->comm, f->cb_arg);
			if (nfd < 0)
				pr_err("%s: cannot open a new connection to %s: %s", what, peer,
				       strerror(-nfd));
			return nfd;
		}
		return unix_create(e->usk, what, NULL);
	case FILE_KIND__FILE_INET:
		return inet_create(e->isk, what);
	case FILE_KIND__FILE_EVENTFD:
		return eventfd_restore(e, what);
	case FILE_KIND__FILE_SIGNALFD:
		return signalfd_restore(e, what);
	case FILE_KIND__FILE_TIMERFD:
		return timerfd_restore(e, what);
	case FILE_KIND__FILE_EPOLL:
		return epoll_restore(e, what);
	case FILE_KIND__FILE_INOTIFY:
		return inotify_restore(f, e, what);
	case FILE_KIND__FILE_MEMFD:
		return open_memfd(f, e, pid, fd);
	case FILE_KIND__FILE_TTY:
		return tty_restore(f->tty, e, what);
	default:
		if (e->has_ghost_id)
			return open_ghost(f, e, pid, fd);
		return open_file(e, pid, fd);
	}
}

static int late_desc(const struct rfiles *f, size_t i, int sk, pid_t pid, int fd)
{
	char what[96];

	if (!f->desc[i].late)
		return 0;
	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	return unix_connect_late(sk, f->files[i]->usk, what);
}

/* A session leader takes its terminal before it forks (its session
 * inherits it) and before anything opens /dev/tty. */
static int take_ctty(struct rfiles *f, struct rproc *rp)
{
	if (rp == FILES_TOOL || !rp->pe->has_ctty)
		return 0;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_TTY && f->files[i]->tty->master &&
		    f->files[i]->tty->index == rp->pe->ctty && f->desc[i].tfd >= 0)
			return tty_set_ctty(f->desc[i].tfd, rp->pe->ctty, rp->pid);
	return -EINVAL;
}

/* the fd of a file in flight, in the process that fills a queue */
static int inflight_fd(void *arg, uint32_t id)
{
	const struct rfiles *f = arg;
	size_t i = files_index(f, id);

	if (i == (size_t)-1 || f->desc[i].tfd < 0 || fcntl(f->desc[i].tfd, F_GETFD) < 0)
		return -EBADF;
	return f->desc[i].tfd;
}

/* Once every description rp makes exists (and those its ancestors made,
 * which it inherited): the queues that carry fds, each message with the
 * files it carried.  A description in flight that no process holds gets
 * its file status flags first (a holder would set them, finish_status). */
static int fill_carriers(struct rfiles *f, struct rproc *rp)
{
	struct unix_fds res = { inflight_fd, f };
	int ret;

	for (size_t i = 0; i < f->nr_files; i++) {
		const FileEntry *e = f->files[i];
		char what[96];

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 || !f->desc[i].inflight ||
		    f->desc[i].first || e->kind == FILE_KIND__FILE_PIPE ||
		    e->kind == FILE_KIND__FILE_FIFO || (e->flags & O_PATH))
			continue;
		snprintf(what, sizeof(what), "file %u (%s), in flight", e->id, e->path);
		ret = set_fl(f->desc[i].tfd, e->flags, what);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < f->nr_files; i++) {
		const struct rdesc *d = &f->desc[i];
		int pair = d->pair;
		char what[96];

		if (d->owner != rp || d->tfd < 0 ||
		    !(d->carrier || (pair >= 0 && f->desc[pair].carrier)) ||
		    (pair >= 0 && (size_t)pair < i))
			continue;
		if (pair >= 0) {
			snprintf(what, sizeof(what), "pid %d: unix socket pair %u/%u", rp->pid,
				 f->files[i]->usk->ino, f->files[pair]->usk->ino);
			ret = unix_fill_pair(d->tfd, f->desc[pair].tfd, f->files[i]->usk,
					     f->files[pair]->usk, what, &res);
		} else {
			snprintf(what, sizeof(what), "pid %d: unix socket %u", rp->pid,
				 f->files[i]->usk->ino);
			ret = unix_fill(d->tfd, d->via, f->files[i]->usk, what, &res);
			f->desc[i].via = -1; /* closed */
		}
		if (ret)
			return ret;
	}
	return 0;
}

int files_create_owned(struct rfiles *f, struct rproc *rp)
{
	int ret;

	/* pseudo-terminals first: then the controlling terminal */
	for (size_t i = 0; i < f->nr_files; i++) {
		int fd;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 ||
		    f->files[i]->kind != FILE_KIND__FILE_TTY)
			continue;
		fd = create_desc(f, f->files[i], rp, f->desc[i].tfd);
		if (fd < 0)
			return fd;
		ret = place(fd, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	tty_close_pairs(f->tty);
	ret = take_ctty(f, rp);
	if (ret)
		return ret;
	for (size_t pi = 0; pi < f->nr_pipes; pi++) {
		if (f->pipe_owner[pi] != rp)
			continue;
		ret = create_pipe(f, pi, rp->pid);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		int fd, pair = f->desc[i].pair;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 ||
		    e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO ||
		    e->kind == FILE_KIND__FILE_TTY)
			continue;
		if (pair >= 0) {
			int fa, fb;
			char what[96];

			if ((size_t)pair < i)
				continue; /* made with its other end */
			snprintf(what, sizeof(what), "pid %d: unix socket pair %u/%u", rp->pid,
				 e->usk->ino, f->files[pair]->usk->ino);
			ret = unix_create_pair(e->usk, f->files[pair]->usk, &fa, &fb, what,
					       f->desc[i].carrier || f->desc[pair].carrier);
			if (ret)
				return ret;
			/* fb must survive fa's placement */
			fb = lift(f, fb);
			if (fb < 0) {
				close(fa);
				return fb;
			}
			ret = place(fa, f->desc[i].tfd);
			if (!ret)
				ret = place(fb, f->desc[pair].tfd);
			if (ret)
				return ret;
			continue;
		}
		if (f->desc[i].carrier) {
			char what[96];
			int via = -1;

			snprintf(what, sizeof(what), "pid %d: unix socket %u", rp->pid,
				 e->usk->ino);
			fd = unix_create(e->usk, what, &via);
			if (fd >= 0 && via >= 0) {
				f->desc[i].via = lift(f, via);
				if (f->desc[i].via < 0) {
					close(fd);
					return -EMFILE;
				}
			}
		} else {
			fd = create_desc(f, e, rp, f->desc[i].tfd);
		}
		if (fd < 0)
			return fd;
		ret = place(fd, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	ret = fill_carriers(f, rp);
	close_ghosts(f);
	return ret;
}

int files_prepare_owned(struct rfiles *f, struct rproc *rp)
{
	for (size_t i = 0; i < f->nr_files; i++) {
		int ret;

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 || !f->desc[i].late)
			continue;
		ret = late_desc(f, i, f->desc[i].tfd, rp->pid, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	return 0;
}

void files_unlink_removed(const struct rfiles *f, bool failed)
{
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_UNIX)
			unix_unlink_removed(f->files[i]->usk, failed);
}

/* rp holds the transport fds of what its ancestors (and kupdate) made */
static bool inherited(const struct rproc *owner, const struct rproc *rp)
{
	if (owner == FILES_TOOL)
		return true;
	for (; rp; rp = rp->parent)
		if (rp == owner)
			return true;
	return false;
}

/* The file status flags that open(2) and the kinds' own calls do not set
 * (O_ASYNC never; a socket is made without any), and the owner of the
 * description's signals, once every process exists: an owner can be any
 * process or group of the tree.  Set on each fd: a description several
 * processes share gets the same values again. */
static int finish_status(const FileEntry *e, pid_t pid, int fd)
{
	bool sock = e->kind == FILE_KIND__FILE_UNIX || e->kind == FILE_KIND__FILE_INET;
	char what[96];
	int ret;

	if (e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO ||
	    (e->flags & O_PATH))
		return 0; /* set where the pipe's descriptions are made; none on O_PATH */
	if (e->owner) {
		struct f_owner_ex own = { .type = e->owner->type, .pid = e->owner->pid };

		if ((own.pid && fcntl(fd, F_SETOWN_EX, &own)) ||
		    (e->owner->signum && fcntl(fd, F_SETSIG, (int)e->owner->signum))) {
			ret = -errno;
			pr_perror("pid %d: fd %d (%s): cannot give its signals to %d again", pid,
				  fd, e->path, e->owner->pid);
			return ret;
		}
	}
	if (!sock && !(e->flags & SETFL_MASK))
		return 0;
	snprintf(what, sizeof(what), "pid %d: fd %d (%s)", pid, fd, e->path);
	return set_fl(fd, e->flags, what);
}

/* Once the fd table of rp is complete: its epolls are filled, and its
 * POSIX locks taken, after every other fd it held of their files for the
 * restore is gone (closing one would drop them). */
static int finish_fds(struct rfiles *f, struct rproc *rp)
{
	bool posix = false;
	char what[96];
	int ret;

	for (size_t i = 0; i < rp->nr_fds; i++) {
		const FileEntry *e = f->files[files_index(f, rp->fds[i]->file_id)];
		bool first = true;

		ret = finish_status(e, rp->pid, rp->fds[i]->fd);
		if (ret)
			return ret;

		posix |= rp->fds[i]->n_locks > 0;
		if (e->kind != FILE_KIND__FILE_EPOLL || e->ep->pid != rp->pid)
			continue;
		for (size_t k = 0; k < i; k++)
			first &= rp->fds[k]->file_id != e->id;
		if (!first)
			continue;
		snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[i]->fd);
		ret = epoll_fill(rp->fds[i]->fd, e, rp->fds, rp->nr_fds, what);
		if (ret)
			return ret;
	}
	if (rp->pe->has_ctty && rp->pe->has_ctty_fg && rp->pe->ctty_fg > 0 &&
	    (ret = tty_set_fg(rp->pe->ctty_fg, rp->pid)))
		return ret;
	if (!posix)
		return 0;
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].tfd >= 0 && f->desc[i].owner && inherited(f->desc[i].owner, rp))
			close(f->desc[i].tfd);
	for (size_t i = 0; i < rp->nr_fds; i++) {
		if (!rp->fds[i]->n_locks)
			continue;
		snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[i]->fd);
		ret = locks_apply_posix(rp->fds[i]->fd, rp->fds[i], what);
		if (ret)
			return ret;
	}
	return 0;
}

int files_restore(struct rfiles *f, struct rproc *rp)
{
	for (size_t i = 0; i < rp->nr_fds; i++) {
		const FdEntry *e = rp->fds[i];
		size_t fi = files_index(f, e->file_id);
		const struct rdesc *d = &f->desc[fi];
		int nfd = -1;

		if (d->tfd >= 0) {
			nfd = fcntl(d->tfd, F_DUPFD_CLOEXEC, 0);
			if (nfd < 0) {
				int ret = -errno;
				pr_perror("pid %d: fd %d: its inherited description is missing",
					  rp->pid, e->fd);
				return ret;
			}
		} else {
			/* this process alone holds it: dup an fd placed already */
			for (size_t k = 0; k < i; k++)
				if (rp->fds[k]->file_id == e->file_id) {
					nfd = fcntl(rp->fds[k]->fd, F_DUPFD_CLOEXEC, 0);
					if (nfd < 0)
						return -errno;
					break;
				}
			if (nfd < 0) {
				nfd = create_desc(f, f->files[fi], rp, e->fd);
				if (nfd < 0)
					return nfd;
				if (late_desc(f, fi, nfd, rp->pid, e->fd)) {
					close(nfd);
					return -EINVAL;
				}
			}
		}
		if (nfd != e->fd) {
			if (dup3(nfd, e->fd, e->cloexec ? O_CLOEXEC : 0) < 0) {
				int ret = -errno;
				pr_perror("pid %d: cannot place fd %d", rp->pid, e->fd);
				close(nfd);
				return ret;
			}
			close(nfd);
		} else if (!e->cloexec) {
			fcntl(nfd, F_SETFD, 0);
		}
	}
	return finish_fds(f, rp);
}

int files_restore_sharer(struct rfiles *f, struct rproc *rp)
{
	/* its children, all forked, have them; the table's restorer does not
	 * need them (it would hold them itself otherwise) */
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->desc[i].owner == rp && f->desc[i].tfd >= 0)
			close(f->desc[i].tfd);
	if (rp->pe->has_ctty && rp->pe->has_ctty_fg && rp->pe->ctty_fg > 0)
		return tty_set_fg(rp->pe->ctty_fg, rp->pid);
	return 0;
}

int files_validate_fds(const struct rfiles *f, FdEntry **fds, size_t nr_fds, const char *img)
{
	for (size_t i = 0; i < nr_fds; i++) {
		if (fds[i]->fd < 0 || fds[i]->fd >= (1 << 20)) {
			pr_err("image %s is damaged: fd number %d", img, fds[i]->fd);
			return -EINVAL;
		}
		if (i && fds[i]->fd <= fds[i - 1]->fd) {
			pr_err("image %s is damaged: fds out of order", img);
			return -EINVAL;
		}
		if (files_index(f, fds[i]->file_id) == (size_t)-1) {
			pr_err("image %s is damaged: fd %d refers to unknown file %u", img,
			       fds[i]->fd, fds[i]->file_id);
			return -EINVAL;
		}
		if (locks_validate(fds[i]->locks, fds[i]->n_locks, true, img) ||
		    (fds[i]->n_locks &&
		     !lockable(f->files[files_index(f, fds[i]->file_id)]->kind))) {
			pr_err("image %s is damaged: fd %d has invalid locks", img, fds[i]->fd);
			return -EINVAL;
		}
	}
	return 0;
}
