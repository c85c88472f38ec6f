/* The table of fd kinds (fdkind.h): one row per FILE_KIND__*, naming the
 * kind's own functions (files/KIND.c, net/ for sockets).  The sockets'
 * rows adapt net/'s entry points (unix_dump, inet_create...) to the
 * record here, so that net/ needs no part of it. */
#include <netinet/in.h>
#include <sys/socket.h>

#include "dump.h"
#include "epoll.h"
#include "eventfd.h"
#include "fdinfo.h"
#include "fdkind.h"
#include "files.h"
#include "inotify.h"
#include "log.h"
#include "nsfs.h"
#include "packet.h"
#include "pipes.h"
#include "regfile.h"
#include "restore-ctx.h"
#include "signalfd.h"
#include "sockdiag.h"
#include "tcp.h"
#include "timerfd.h"
#include "tty.h"
#include "unix.h"
#include "util.h"

/* ------------------------------------------------------- unix sockets */

static bool unix_match(const struct sk_diag *d)
{
	return d->family == AF_UNIX;
}

static void unix_save(const struct cr_file *f, FileEntry *e)
{
	e->usk = f->usk;
}

static void unix_free(struct cr_file *f)
{
	unix_free_dump(f->usk);
}

static int unix_check(const struct rfiles *f, const FileEntry *e)
{
	return unix_validate(e) ? -EINVAL : 0;
}

/* a socket whose peer was outside the tree: a new connection to it, made
 * by the caller's open_external, else one of the tree's own */
static int unix_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd,
			const char *what)
{
	char peer[120];
	int nfd;

	if (e->usk->linked) {
		for (size_t i = 0; i < f->nr_links; i++) {
			if (f->links[i].ino != e->usk->ino)
				continue;
			nfd = fcntl(f->links[i].fd, F_DUPFD_CLOEXEC, 0);
			return nfd < 0 ? pr_errno("%s: cannot take its end of the link", what)
				       : nfd;
		}
		pr_err("%s: its end of the link to socket %u was not given", what, e->usk->peer);
		return -ENOENT;
	}
	if (!e->usk->external)
		return unix_create(e->usk, f->listeners, what, NULL);
	snprintf(peer, sizeof(peer), "%.*s", (int)e->usk->peer_name.len,
		 (char *)e->usk->peer_name.data);
	if (!f->open_external) {
		pr_err("%s: its peer %s was outside the dumped tree, and nothing here can make a "
		       "new connection to it",
		       what, peer);
		return -EOPNOTSUPP;
	}
	/* named after the process that holds it */
	if (rp == FILES_TOOL)
		rp = f->desc[files_index(f, e->id)].first;
	nfd = f->open_external(peer, rp->core.task->comm, f->cb_arg);
	if (nfd < 0)
		pr_err("%s: cannot open a new connection to %s: %s", what, peer, strerror(-nfd));
	return nfd;
}

/* -------------------------------------------------- TCP and UDP sockets */

static bool inet_match(const struct sk_diag *d)
{
	return (d->family == AF_INET || d->family == AF_INET6) &&
	       (d->protocol == IPPROTO_TCP || d->protocol == IPPROTO_UDP);
}

static void inet_save(const struct cr_file *f, FileEntry *e)
{
	e->isk = f->isk;
}

static void inet_free(struct cr_file *f)
{
	inet_free_dump(f->isk);
}

static int inet_check(const struct rfiles *f, const FileEntry *e)
{
	return inet_validate(e) ? -EINVAL : 0;
}

static int inet_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd,
			const char *what)
{
	return inet_create(e->isk, f->listeners, what);
}

/* ------------------------------------------------------- packet sockets */

static bool packet_match(const struct sk_diag *d)
{
	return d->family == AF_PACKET;
}

static void packet_save(const struct cr_file *f, FileEntry *e)
{
	e->psk = f->psk;
}

static void packet_free(struct cr_file *f)
{
	packet_free_dump(f->psk);
}

static int packet_check(const struct rfiles *f, const FileEntry *e)
{
	return packet_validate(e) ? -EINVAL : 0;
}

static int packet_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int fd,
			  const char *what)
{
	return packet_create(e->psk, what);
}

/* ---------------------------------------------------------------- the table */

const struct fd_kind fd_kinds[] = {
	{
		.kind = FILE_KIND__FILE_REG,
		.name = "a regular file",
		.lockable = true,
		.save = reg_save,
		.restore = regfile_restore,
	},
	{
		.kind = FILE_KIND__FILE_DIR,
		.name = "a directory",
		.lockable = true,
		.restore = regfile_restore,
	},
	{
		/* open(O_PATH | O_NOFOLLOW): systemd's watch of /etc/localtime */
		.kind = FILE_KIND__FILE_SYMLINK,
		.name = "a symbolic link",
		.restore = regfile_restore,
	},
	{
		.kind = FILE_KIND__FILE_CHR,
		.name = "a character device",
		.lockable = true,
		.save = chr_save,
		.restore = regfile_restore,
	},
	{
		.kind = FILE_KIND__FILE_PIPE,
		.name = "a pipe",
		.save = pipe_save,
		.restore = regfile_restore, /* its descriptions travel: files-restore.c */
	},
	{
		.kind = FILE_KIND__FILE_FIFO,
		.name = "a FIFO",
		.save = fifo_save,
		.restore = regfile_restore,
	},
	{
		.kind = FILE_KIND__FILE_MEMFD,
		.name = "a memfd",
		.lockable = true,
		.dump = memfd_dump,
		.save = memfd_save,
		.restore = memfd_restore,
	},
	{
		/* before the inotify row: its dump_tree ran first */
		.kind = FILE_KIND__FILE_TTY,
		.name = "a terminal",
		.dump = tty_dump,
		.dump_tree = tty_finish_dump,
		.save = tty_save,
		.free = tty_free_dump,
		.validate = tty_validate,
		.restore = tty_restore,
	},
	{
		.kind = FILE_KIND__FILE_UNIX,
		.name = "a unix socket",
		.sk_match = unix_match,
		.sk_dump = unix_dump,
		.save = unix_save,
		.free = unix_free,
		.validate = unix_check,
		.restore = unix_restore,
	},
	{
		.kind = FILE_KIND__FILE_INET,
		.name = "a TCP or UDP socket",
		.sk_match = inet_match,
		.sk_dump = inet_dump,
		.save = inet_save,
		.free = inet_free,
		.validate = inet_check,
		.restore = inet_restore,
	},
	{
		.kind = FILE_KIND__FILE_PACKET,
		.name = "a packet socket",
		.sk_match = packet_match,
		.sk_dump = packet_dump,
		.save = packet_save,
		.free = packet_free,
		.validate = packet_check,
		.restore = packet_restore,
	},
	{
		.kind = FILE_KIND__FILE_EVENTFD,
		.name = "an eventfd",
		.link = "anon_inode:[eventfd]",
		.dump = eventfd_dump,
		.save = eventfd_save,
		.free = eventfd_free_dump,
		.validate = eventfd_validate,
		.restore = eventfd_restore,
	},
	{
		.kind = FILE_KIND__FILE_SIGNALFD,
		.name = "a signalfd",
		.link = "anon_inode:[signalfd]",
		.dump = signalfd_dump,
		.save = signalfd_save,
		.free = signalfd_free_dump,
		.validate = signalfd_validate,
		.restore = signalfd_restore,
	},
	{
		.kind = FILE_KIND__FILE_TIMERFD,
		.name = "a timerfd",
		.link = "anon_inode:[timerfd]",
		.dump = timerfd_dump,
		.save = timerfd_save,
		.free = timerfd_free_dump,
		.validate = timerfd_validate,
		.restore = timerfd_restore,
	},
	{
		.kind = FILE_KIND__FILE_EPOLL,
		.name = "an epoll instance",
		.link = "anon_inode:[eventpoll]",
		.needs_holder = true, /* its targets */
		.dump = epoll_dump,
		.dump_proc = epoll_resolve,
		.save = epoll_save,
		.free = epoll_free_dump,
		.validate = epoll_validate,
		.restore = epoll_restore,
		.finish = epoll_finish,
	},
	{
		.kind = FILE_KIND__FILE_INOTIFY,
		.name = "an inotify instance",
		.link = "anon_inode:inotify",
		.needs_holder = true, /* a watch's ghost */
		.dump = inotify_dump,
		.dump_tree = inotify_finish_dump,
		.save = inotify_save,
		.free = inotify_free_dump,
		.validate = inotify_validate,
		.restore = inotify_restore,
	},
	{
		.kind = FILE_KIND__FILE_NSFS,
		.name = "a namespace file",
		.link_match = nsfs_link,
		.dump = nsfs_dump,
		.save = nsfs_save,
		.free = nsfs_free_dump,
		.validate = nsfs_validate,
		.restore = nsfs_restore,
		.finish = nsfs_finish,
	},
};

const size_t nr_fd_kinds = ARRAY_SIZE(fd_kinds);

const struct fd_kind *fd_kind(int kind)
{
	for (size_t i = 0; i < ARRAY_SIZE(fd_kinds); i++)
		if (fd_kinds[i].kind == kind)
			return &fd_kinds[i];
	return NULL;
}

const struct fd_kind *fd_kind_by_link(const char *link)
{
	for (size_t i = 0; i < ARRAY_SIZE(fd_kinds); i++)
		if ((fd_kinds[i].link && !strcmp(link, fd_kinds[i].link)) ||
		    (fd_kinds[i].link_match && fd_kinds[i].link_match(link)))
			return &fd_kinds[i];
	return NULL;
}

const char *fd_kind_unsupported(const char *link)
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

	if (fd_kind_by_link(link))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(k); i++)
		if (!strncmp(link, k[i].prefix, strlen(k[i].prefix)))
			return k[i].what;
	return NULL;
}

const char *fd_kind_hint(const char *link)
{
	/* the one an operator meets most: a program's asynchronous I/O,
	 * which it can be told to do by other means */
	if (!strcmp(link, "anon_inode:[io_uring]"))
		return "a program that can do its I/O without one can be configured so "
		       "(MariaDB: innodb_use_native_aio = 0)";
	return NULL;
}

bool fd_kind_lockable(int kind)
{
	const struct fd_kind *k = fd_kind(kind);

	return k && k->lockable;
}

bool fd_kind_socket(int kind)
{
	const struct fd_kind *k = fd_kind(kind);

	return k && k->sk_dump;
}
