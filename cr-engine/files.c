/* File descriptors and the open file descriptions behind them.
 *
 * Dump: every fd of /proc/PID/fd is described once per open file
 * description: kcmp(KCMP_FILE) finds fds that were dup'd or inherited, in
 * one process or across the tree.  Regular files, directories and
 * character devices are reopened by path with their flags and offset;
 * pipes and FIFOs refer to a pipe object (pipes.c).
 *
 * Restore: a description held by one process is opened by that process in
 * place.  A description held by several processes (so that they keep
 * sharing its offset, or the two ends of one pipe) is created by the
 * closest common ancestor of its holders before it forks, on a "transport"
 * fd above every fd the tree uses; the holders inherit it, dup it onto
 * their fd numbers, and the restorer closes every transport fd at the end.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "files.h"
#include "image.h"
#include "images/files.pb-c.h"
#include "log.h"
#include "pipes.h"
#include "sockdiag.h"
#include "tcp.h"
#include "unix.h"
#include "restore.h"
#include "util.h"

#define SETFL_MASK (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK)

static int kcmp_file(pid_t p1, int fd1, pid_t p2, int fd2)
{
	return syscall(SYS_kcmp, p1, p2, KCMP_FILE, fd1, fd2);
}

static int parse_fdinfo(pid_t pid, int fd, uint64_t *pos, uint32_t *flags)
{
	_cleanup_free_ char *buf = NULL;
	char *p;
	int ret = read_proc(&buf, NULL, "/proc/%d/fdinfo/%d", pid, fd);

	if (ret)
		return ret;
	p = strstr(buf, "pos:");
	*pos = p ? strtoull(p + 4, NULL, 10) : 0;
	p = strstr(buf, "flags:");
	*flags = p ? strtoul(p + 6, NULL, 8) : 0;
	return 0;
}

static const char *unsupported_kind(const char *link)
{
	if (!strncmp(link, "anon_inode:", 11))
		return "an anonymous-inode object (eventfd, epoll, timerfd, signalfd...)";
	return NULL;
}

static int socket_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, struct cr_file *f,
		       uint32_t *id)
{
	const struct sk_diag *d;
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
		pr_err("pid %d: fd %d (%s): sock_diag does not know this socket: a kind this "
		       "kupdate cannot dump (netlink, packet, raw...) or one of another network "
		       "namespace",
		       p->pid, fd, f->path);
		return -EOPNOTSUPP;
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

static int add_file(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *link,
		    const struct stat *st, uint64_t pos, uint32_t flags, uint32_t *id)
{
	struct cr_file *f, *nf;
	int ret;

	for (int i = 0; i < ctx->nr_files; i++) {
		f = &ctx->files[i];
		if (f->dev != st->st_dev || f->ino != st->st_ino)
			continue;
		if (kcmp_file(f->owner_pid, f->owner_fd, p->pid, fd) == 0) {
			*id = f->id;
			return 0;
		}
	}
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
	ctx->nr_files++;
	f->flags = flags & ~O_CLOEXEC;
	f->pos = pos;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = st->st_size;
	f->rdev = st->st_rdev;
	f->owner_pid = p->pid;
	f->owner_fd = fd;
	if (!strncmp(link, "socket:", 7))
		return socket_dump(ctx, p, fd, f, id);
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

static int dump_one_fd(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd)
{
	char lpath[96], link[PATH_MAX + 1];
	struct stat st;
	struct cr_fd *nfds;
	const char *what;
	uint64_t pos;
	uint32_t flags, id;
	ssize_t n;
	int ret;

	snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%d", p->pid, fd);
	n = readlink(lpath, link, sizeof(link) - 1);
	if (n < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot read the link of fd %d", p->pid, fd);
		return ret;
	}
	link[n] = 0;
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
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISCHR(st.st_mode) &&
	    !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode)) {
		pr_err("pid %d: fd %d (%s) is of a kind this kupdate cannot dump yet", p->pid, fd,
		       link);
		return -EOPNOTSUPP;
	}
	if (link[0] != '/' && strncmp(link, "pipe:", 5) && strncmp(link, "socket:", 7)) {
		pr_err("pid %d: fd %d (%s) has no path to reopen it by", p->pid, fd, link);
		return -EOPNOTSUPP;
	}
	if (link[0] == '/' &&
	    (st.st_nlink == 0 || (n > 10 && !strcmp(link + n - 10, " (deleted)")))) {
		pr_err("pid %d: fd %d refers to the deleted file %s; unlinked open files are not "
		       "supported yet",
		       p->pid, fd, link);
		return -EOPNOTSUPP;
	}
	ret = parse_fdinfo(p->pid, fd, &pos, &flags);
	if (ret) {
		pr_err("pid %d: cannot read fdinfo of fd %d: %s", p->pid, fd, strerror(-ret));
		return ret;
	}
	ret = add_file(ctx, p, fd, link, &st, pos, flags, &id);
	if (ret)
		return ret;
	nfds = xrealloc_array(p->fds, p->nr_fds + 1, sizeof(*nfds));
	if (!nfds)
		return -ENOMEM;
	p->fds = nfds;
	nfds[p->nr_fds].fd = fd;
	nfds[p->nr_fds].file_id = id;
	nfds[p->nr_fds].cloexec = !!(flags & O_CLOEXEC);
	p->nr_fds++;
	return 0;
}

int dump_files(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char dpath[64];
	DIR *d;
	struct dirent *de;
	int ret = 0;

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
	if (!ret)
		qsort(p->fds, p->nr_fds, sizeof(*p->fds), cmp_fd);
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
	for (int i = 0; i < ctx->nr_files; i++) {
		free(ctx->files[i].path);
		unix_free_dump(ctx->files[i].usk);
		inet_free_dump(ctx->files[i].isk);
	}
	free(ctx->files);
	ctx->files = NULL;
	ctx->nr_files = 0;
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

		if (e->kind < FILE_KIND__FILE_REG || e->kind > FILE_KIND__FILE_INET || !e->path[0] ||
		    (piped && !e->has_pipe_id)) {
			pr_err("image files.img is damaged: entry %zu has an invalid kind or path", i);
			return -EINVAL;
		}
		for (size_t k = 0; k < i; k++)
			if (f->files[k]->id == e->id) {
				pr_err("image files.img is damaged: file %u appears twice", e->id);
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
	f->desc = calloc(f->nr_files ? f->nr_files : 1, sizeof(*f->desc));
	f->pipe_owner = calloc(f->nr_pipes ? f->nr_pipes : 1, sizeof(*f->pipe_owner));
	if (!f->desc || !f->pipe_owner)
		return -ENOMEM;
	return 0;
}

void files_free(struct rfiles *f)
{
	for (size_t i = 0; i < f->nr_files; i++)
		file_entry__free_unpacked(f->files[i], NULL);
	free(f->files);
	pipes_free(f->pipes, f->nr_pipes);
	free(f->desc);
	free(f->pipe_owner);
	memset(f, 0, sizeof(*f));
}

PipeEntry *files_pipe(const struct rfiles *f, uint64_t id)
{
	for (size_t i = 0; i < f->nr_pipes; i++)
		if (f->pipes[i]->id == id)
			return f->pipes[i];
	return NULL;
}

static size_t file_index(const struct rfiles *f, uint32_t id)
{
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->id == id)
			return i;
	return (size_t)-1;
}

static size_t pipe_index(const struct rfiles *f, uint64_t id)
{
	for (size_t i = 0; i < f->nr_pipes; i++)
		if (f->pipes[i]->id == id)
			return i;
	return (size_t)-1;
}

static int depth(const struct rproc *p)
{
	int d = 0;

	for (; p->parent; p = p->parent)
		d++;
	return d;
}

/* closest common ancestor (a process is its own ancestor) */
static struct rproc *common_ancestor(struct rproc *a, struct rproc *b)
{
	int da, db;

	if (!a)
		return b;
	da = depth(a);
	db = depth(b);
	while (da > db) {
		a = a->parent;
		da--;
	}
	while (db > da) {
		b = b->parent;
		db--;
	}
	while (a != b) {
		a = a->parent;
		b = b->parent;
	}
	return a;
}

int files_plan(struct rfiles *f, struct rproc *procs, size_t nr, int fd_floor)
{
	int maxfd = fd_floor, next;
	struct rlimit rl;

	for (size_t i = 0; i < nr; i++) {
		struct rproc *rp = &procs[i];

		for (size_t k = 0; k < rp->nr_fds; k++) {
			size_t fi = file_index(f, rp->fds[k]->file_id);
			struct rdesc *d = &f->desc[fi];

			maxfd = MAX(maxfd, rp->fds[k]->fd);
			if (d->owner != rp)
				d->nholders++;
			d->owner = common_ancestor(d->owner, rp);
		}
	}
	/* a pipe is made where all of its ends can be inherited from */
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		size_t pi;

		if (e->kind != FILE_KIND__FILE_PIPE && e->kind != FILE_KIND__FILE_FIFO)
			continue;
		pi = pipe_index(f, e->pipe_id);
		if (f->desc[i].owner)
			f->pipe_owner[pi] = common_ancestor(f->pipe_owner[pi], f->desc[i].owner);
	}
	/* unix sockets: the two ends of a connection in the tree are one
	 * object; a socket connected to another (bound) one connects late */
	for (size_t i = 0; i < f->nr_files; i++)
		f->desc[i].pair = -1;
	for (size_t i = 0; i < f->nr_files; i++) {
		const UnixSk *u = f->files[i]->usk;

		if (f->files[i]->kind != FILE_KIND__FILE_UNIX || f->desc[i].pair >= 0)
			continue;
		if (u->pending) {
			f->desc[i].late = true;
			continue;
		}
		if (!u->has_peer)
			continue;
		for (size_t j = 0; j < f->nr_files; j++) {
			const UnixSk *o = f->files[j]->usk;

			if (j != i && f->files[j]->kind == FILE_KIND__FILE_UNIX && o->ino == u->peer &&
			    o->has_peer && o->peer == u->ino && f->desc[j].owner && f->desc[i].owner) {
				struct rproc *own = common_ancestor(f->desc[i].owner, f->desc[j].owner);

				f->desc[i].pair = j;
				f->desc[j].pair = i;
				f->desc[i].owner = f->desc[j].owner = own;
				break;
			}
		}
		if (f->desc[i].pair < 0)
			f->desc[i].late = true;
	}
	next = maxfd + 1;
	f->tbase = next;
	f->tend = next; /* grows below */
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		struct rdesc *d = &f->desc[i];

		d->tfd = -1;
		if (!d->owner)
			continue; /* held by nobody alive: a zombie's, say */
		if (e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO) {
			d->owner = f->pipe_owner[pipe_index(f, e->pipe_id)];
			d->tfd = next++;
		} else if (d->nholders > 1 || d->pair >= 0 ||
			   (e->kind == FILE_KIND__FILE_UNIX && e->usk->has_name && e->usk->name.len)) {
			/* shared, half of a pair, or bound (it must exist before anyone
			 * connects to it) */
			d->tfd = next++;
		}
	}
	f->tend = next;
	/* transport fds may go beyond the usual soft limit */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)next + 64 &&
	    rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)next + 1024);
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return 0;
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
	} else if (f->has_ino && st.st_ino != f->ino) {
		pr_err("pid %d: fd %d: %s was replaced since the dump (inode %lu, was %lu)", pid, fd,
		       f->path, (unsigned long)st.st_ino, (unsigned long)f->ino);
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
	return nfd;
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
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, f->tend);
	int ret = -errno;

	close(fd);
	if (nfd < 0) {
		pr_err("cannot move a descriptor above %d: %s", f->tend, strerror(-ret));
		return ret;
	}
	return nfd;
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
static int create_pipe(struct rfiles *f, size_t pi, pid_t pid)
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
			snprintf(path, sizeof(path), "/proc/self/fd/%d", acc == O_WRONLY ? p[1] : p[0]);
		fd = open(fifo ? fifo : path, acc | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			pr_perror("pid %d: cannot open an end of pipe %lu", pid, (unsigned long)pe->id);
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

/* A description that is neither a pipe nor half of a pair. */
static int create_desc(const FileEntry *e, pid_t pid, int fd)
{
	char what[96];

	snprintf(what, sizeof(what), "pid %d: fd %d", pid, fd);
	switch (e->kind) {
	case FILE_KIND__FILE_UNIX:
		return unix_create(e->usk, what);
	case FILE_KIND__FILE_INET:
		return inet_create(e->isk, what);
	default:
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

int files_create_owned(struct rfiles *f, struct rproc *rp)
{
	int ret;

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

		if (f->desc[i].owner != rp || f->desc[i].tfd < 0 || e->kind == FILE_KIND__FILE_PIPE ||
		    e->kind == FILE_KIND__FILE_FIFO)
			continue;
		if (pair >= 0) {
			int fa, fb;
			char what[96];

			if ((size_t)pair < i)
				continue; /* made with its other end */
			snprintf(what, sizeof(what), "pid %d: unix socket pair %u/%u", rp->pid,
				 e->usk->ino, f->files[pair]->usk->ino);
			ret = unix_create_pair(e->usk, f->files[pair]->usk, &fa, &fb, what);
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
		fd = create_desc(e, rp->pid, f->desc[i].tfd);
		if (fd < 0)
			return fd;
		ret = place(fd, f->desc[i].tfd);
		if (ret)
			return ret;
	}
	return 0;
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

int files_restore(struct rfiles *f, struct rproc *rp)
{
	for (size_t i = 0; i < rp->nr_fds; i++) {
		const FdEntry *e = rp->fds[i];
		size_t fi = file_index(f, e->file_id);
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
				nfd = create_desc(f->files[fi], rp->pid, e->fd);
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
		if (file_index(f, fds[i]->file_id) == (size_t)-1) {
			pr_err("image %s is damaged: fd %d refers to unknown file %u", img,
			       fds[i]->fd, fds[i]->file_id);
			return -EINVAL;
		}
	}
	return 0;
}
