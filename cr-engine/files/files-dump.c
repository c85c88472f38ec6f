/* Collecting a process's fds at dump: every fd of /proc/PID/fd is described
 * once per open file description: kcmp(KCMP_FILE) finds fds that were
 * dup'd or inherited, in one process or across the tree.  Regular files,
 * directories and character devices are reopened by path with their flags
 * and offset; pipes and FIFOs refer to a pipe object (pipes.c); the other
 * kinds are their rows' of the fd-kind table (fdkind.c).  Files in flight
 * in unix sockets (SCM_RIGHTS), which kupdate received when it peeked their
 * queues, are matched the same way once every process is dumped; one no
 * process holds is a description of its own, held by kupdate meanwhile.
 * What the fd tables share across processes: files-share.c. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "fdinfo.h"
#include "fdkind.h"
#include "files-share.h"
#include "files.h"
#include "namespaces.h"
#include "ghost.h"
#include "locks.h"
#include "log.h"
#include "pipes.h"
#include "predump.h"
#include "sockdiag.h"
#include "sockets.h"
#include "tty.h"
#include "util.h"

static int kcmp_file(pid_t p1, int fd1, pid_t p2, int fd2)
{
	return syscall(SYS_kcmp, p1, p2, KCMP_FILE, fd1, fd2);
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

static int socket_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, struct cr_file *f,
		       uint32_t *id)
{
	const struct sk_diag *d;
	struct sk_diag probed;
	int ret;

	if (!ctx->sk_collected) {
		ret = sockdiag_collect(&ctx->sk);
		if (!ret)
			ret = netns_collect_outer(ctx);
		if (ret)
			return ret;
		ctx->sk_collected = true;
	}
	/* its namespace's sockets, if it is not this thread's (one made
	 * inside the tree; refused otherwise) */
	ret = netns_merge_made(ctx, p);
	if (ret)
		return ret;
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
	if (d->outer && d->name_len > 1 && !d->name[0]) {
		pr_err("pid %d: fd %d: its unix socket is bound to an abstract name in kupdate's "
		       "network namespace, not in the tree's own: the restore would bind it in "
		       "the tree's",
		       p->pid, fd);
		return -EOPNOTSUPP;
	}
	*id = f->id;
	for (size_t k = 0; k < nr_fd_kinds; k++)
		if (fd_kinds[k].sk_match && fd_kinds[k].sk_match(d)) {
			f->kind = fd_kinds[k].kind;
			return fd_kinds[k].sk_dump(ctx, p, fd, d, f);
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
 * (refined from st), a memfd, a terminal, an anonymous-inode kind (their
 * rows' dump), or 0 for a ghost */
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
	f->mnt_owner = ctx->mnt_owner;
	*out = f;
	if (!strncmp(link, "socket:", 7))
		return socket_dump(ctx, p, fd, f, id);
	*id = f->id;
	if (kind && kind != FILE_KIND__FILE_REG) {
		f->kind = kind;
		return fd_kind(kind)->dump(ctx, p, fd, fdinfo, f);
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
	else if (S_ISLNK(st->st_mode))
		f->kind = FILE_KIND__FILE_SYMLINK;
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
	if (!fd_kind_lockable(f->kind)) {
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

	if (!(f->flags & O_ASYNC) && !fd_kind_socket(f->kind))
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

/* The restore reopens a file by its path, as the tree sees it: that path
 * must lead to the same file now; for a character device, to the same
 * device (a unit's stdin is the host's /dev/null, opened before systemd
 * made its private /dev, whose node of the same device its path finds). */
static bool reachable(const struct cr_dump_ctx *ctx, const char *path, const struct stat *st)
{
	char buf[PATH_MAX + 64];
	struct stat now;

	if ((S_ISLNK(st->st_mode) ? lstat : stat)(dump_path(ctx, path, buf, sizeof(buf)), &now))
		return false;
	if (S_ISCHR(st->st_mode))
		return S_ISCHR(now.st_mode) && now.st_rdev == st->st_rdev;
	return now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* p lives in a mount namespace a process of the tree made (a container)
 * and holds a file description a process outside it holds too (a log file
 * it inherited from its monitor, outside its root): restored by that one,
 * with the path it sees, and inherited */
static bool known_outside(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const struct stat *st)
{
	uint32_t id = 0;
	int lo = 0;

	return ctx->mnt_owner && !find_file(ctx, p->pid, fd, st, &id, &lo) && id;
}

static int dump_one_fd(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd)
{
	char lpath[96], link[PATH_MAX + 1];
	_cleanup_free_ char *fdinfo = NULL;
	struct stat st;
	struct cr_fd *nfds, cfd;
	struct cr_file *nf;
	const struct fd_kind *k;
	const char *what;
	uint64_t pos;
	uint32_t flags, id;
	ssize_t n;
	int kind = FILE_KIND__FILE_REG, ret;

	snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%d", p->pid, fd);
	n = readlink(lpath, link, sizeof(link) - 1);
	if (n < 0)
		return pr_errno("pid %d: cannot read the link of fd %d", p->pid, fd);
	link[n] = 0;
	if (!strcmp(link, "anon_inode:[userfaultfd]")) {
		/* the tracking of a pre-dump no dump followed: it goes */
		ret = track_leftover(ctx, p, fd);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	what = fd_kind_unsupported(link);
	if (what) {
		const char *hint = fd_kind_hint(link);

		pr_err("pid %d: fd %d is %s (%s), which this kupdate cannot dump yet%s%s", p->pid,
		       fd, what, link, hint ? "; " : "", hint ? hint : "");
		return -EOPNOTSUPP;
	}
	if (stat(lpath, &st))
		return pr_errno("pid %d: cannot stat fd %d (%s)", p->pid, fd, link);
	k = fd_kind_by_link(link);
	if (k) {
		kind = k->kind;
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
		    !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode) && !S_ISLNK(st.st_mode)) {
			pr_err("pid %d: fd %d (%s) is of a kind this kupdate cannot dump yet "
			       "(mode %#o)",
			       p->pid, fd, link, st.st_mode & S_IFMT);
			return -EOPNOTSUPP;
		}
		/* an fd of a symbolic link itself: O_PATH | O_NOFOLLOW */
		if (S_ISLNK(st.st_mode) &&
		    (st.st_nlink == 0 || (n > 10 && !strcmp(link + n - 10, " (deleted)")))) {
			pr_err("pid %d: fd %d is a symbolic link removed since it was opened (%s); "
			       "kupdate cannot restore it",
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
		else if (link[0] == '/' && !reachable(ctx, link, &st) &&
			 !known_outside(ctx, p, fd, &st)) {
			pr_err("pid %d: fd %d: %s is not the file its path leads to now (a mount "
			       "over it, or over a directory above it); its restore would open "
			       "another",
			       p->pid, fd, link);
			return -EOPNOTSUPP;
		}
	}
	ret = fdinfo_read(p->pid, fd, &fdinfo, &pos, &flags);
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

/* A file in flight that no process holds: the kinds kupdate dumps without
 * a holder (NULL, *kind set), else what it is, for the refusal.  Kinds
 * whose restore needs a holder (an epoll's targets, an inotify watch's
 * ghost, a terminal's session, a memfd's or a deleted file's object made
 * for every process, a TCP connection's lock) are left out. */
static const char *inflight_refused(struct cr_dump_ctx *ctx, const char *link,
				    const struct stat *st, int *kind)
{
	const struct fd_kind *k = fd_kind_by_link(link);
	const char *what = fd_kind_unsupported(link);
	size_t n = strlen(link);

	*kind = FILE_KIND__FILE_REG;
	if (what)
		return what;
	if (k) {
		*kind = k->kind;
		return k->needs_holder ? k->name : NULL;
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
	if (n < 0 || stat(lpath, &st))
		return pr_errno(
			"pid %d: fd %d: cannot look at a file descriptor in flight in its unix "
			"socket",
			in.pid, in.fd);
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
	ret = fdinfo_read(self, in.kfd, &fdinfo, &pos, &flags);
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

int dump_files(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char dpath[64];
	DIR *d;
	struct dirent *de;
	int ret = files_dump_sharing(ctx, p);

	if (ret)
		return ret;
	/* its fds are those of the table's owner, dumped already */
	if (p->fdt_owner) {
		ret = files_check_posix_locks(ctx, p->fdt_owner, p);
		if (!ret)
			ret = files_check_sharer_locks(p);
		if (ret)
			return ret;
		goto spanning;
	}

	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", p->pid);
	d = opendir(dpath);
	if (!d)
		return pr_errno("pid %d: cannot list its fds (%s)", p->pid, dpath);
	while ((de = readdir(d)) && !ret) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		ret = dump_one_fd(ctx, p, atoi(de->d_name));
	}
	closedir(d);
	if (!ret && p->nr_fds) /* qsort wants a valid array even for none */
		qsort(p->fds, p->nr_fds, sizeof(*p->fds), cmp_fd);
	for (size_t k = 0; k < nr_fd_kinds && !ret; k++)
		if (fd_kinds[k].dump_proc)
			ret = fd_kinds[k].dump_proc(ctx, p);
	if (!ret)
		ret = files_check_posix_locks(ctx, p, p);
spanning:
	/* what spans processes, once the last one is done */
	for (int i = ctx->nr_procs - 1; i >= 0 && !ret; i--) {
		if (ctx->procs[i]->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		for (size_t k = 0; k < nr_fd_kinds && !ret && ctx->procs[i] == p; k++)
			if (fd_kinds[k].dump_tree)
				ret = fd_kinds[k].dump_tree(ctx);
		break;
	}
	return ret;
}
