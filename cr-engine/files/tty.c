/* Pseudo-terminals: a master (/dev/ptmx) and its slave (/dev/pts/N) held
 * by the tree, with the slave's termios, the window size and the lock;
 * the controlling terminal of a session leader, when it is such a pair,
 * with its foreground process group.
 *
 * Dump: kupdate's own descriptor of each end (pidfd_getfd) gives the
 * index (TIOCGPTN), the lock (TIOCGPTLCK), the window size and, on a
 * slave, the termios.  A tty cannot be read without consuming what it
 * holds, so the data queued in each direction is read with the slave in
 * raw mode and written straight back (the tree is stopped); a canonical
 * reader then finds it as one line.  A slave whose master is outside the
 * tree and data queued on a pair without a slave in the tree are refused.
 * A slave hung up by its master's close (a daemon started from a session
 * that ended) is a description of its own: reads give end of file, writes
 * and terminal calls EIO, and no termios can be read.
 * Restore: the common ancestor of the whole tree makes every pair before
 * it forks (files-restore.c), with its old index: the multiplexer hands out the
 * lowest free index, so it is opened until the index comes up (the
 * stand-ins below it are closed again); a lock taken by nobody is lifted.
 * Slave descriptions are opened through the master (TIOCGPTPEER) with
 * O_NOCTTY; with the first one the queued data is written back (in raw
 * mode), then the termios is set.  A session leader takes its
 * controlling terminal (TIOCSCTTY) before it forks, so that its session
 * inherits it, and sets the foreground group once every group exists.
 * A hung-up slave is opened through a pair made for it alone, with its
 * index again when that is free (else the lowest free one, with a warning:
 * only the name its fd shows differs), whose master is closed at once. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <termios.h>

#include "dump.h"
#include "files.h"
#include "log.h"
#include "sockets.h"
#include "tty.h"
#include "util.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#define PTS_MAJOR_FIRST 136
#define PTS_MAJOR_LAST	143
#define MAX_INDEX	(1U << 20)
#define MAX_QUEUED	(1U << 20)

bool tty_is_pty(const char *link, const struct stat *st)
{
	if (!S_ISCHR(st->st_mode))
		return false;
	if (major(st->st_rdev) == 5 && minor(st->st_rdev) == 2)
		return true; /* /dev/ptmx, /dev/pts/ptmx */
	return major(st->st_rdev) >= PTS_MAJOR_FIRST && major(st->st_rdev) <= PTS_MAJOR_LAST &&
	       !strncmp(link, "/dev/pts/", 9);
}

static TtyTermios *get_termios(int fd)
{
	struct termios t;
	TtyTermios *tt;

	if (tcgetattr(fd, &t))
		return NULL;
	tt = calloc(1, sizeof(*tt) + NCCS);
	if (!tt)
		return NULL;
	tty_termios__init(tt);
	tt->iflag = t.c_iflag;
	tt->oflag = t.c_oflag;
	tt->cflag = t.c_cflag;
	tt->lflag = t.c_lflag;
	tt->line = t.c_line;
	tt->cc.len = NCCS;
	tt->cc.data = (uint8_t *)(tt + 1);
	memcpy(tt->cc.data, t.c_cc, NCCS);
	tt->ispeed = cfgetispeed(&t);
	tt->ospeed = cfgetospeed(&t);
	return tt;
}

int tty_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	     struct cr_file *f)
{
	const char *link = f->path; /* its /proc/PID/fd link */
	_cleanup_close_ int dfd = sk_dup(p, fd);
	struct winsize ws;
	TtyFile *t;
	unsigned idx = 0;
	int queued = 0, lock = 0;

	if (dfd < 0)
		return dfd;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	tty_file__init(t);
	f->tty = t;
	t->master = strncmp(link, "/dev/pts/", 9) || !strcmp(link, "/dev/pts/ptmx");
	if (strstr(link, " (deleted)")) {
		/* its master closed: /dev/pts/N is gone */
		if (t->master)
			return -EINVAL;
		t->has_hung_up = t->hung_up = 1;
		t->index = strtoul(link + 9, NULL, 10);
		t->ptmx = strdup("/dev/ptmx");
		return t->ptmx ? 0 : -ENOMEM;
	}
	if (t->master) {
		if (ioctl(dfd, TIOCGPTN, &idx) || ioctl(dfd, TIOCGPTLCK, &lock)) {
			pr_perror("pid %d: fd %d: cannot query the pseudo-terminal master %s",
				  p->pid, fd, link);
			return -EOPNOTSUPP;
		}
		t->has_locked = 1;
		t->locked = lock;
	} else {
		idx = strtoul(link + 9, NULL, 10);
		t->termios = get_termios(dfd);
		if (!t->termios) {
			pr_perror("pid %d: fd %d: cannot read the termios of %s", p->pid, fd, link);
			return -EOPNOTSUPP;
		}
	}
	t->index = idx;
	t->ptmx = strdup(t->master ? link : "/dev/ptmx");
	if (!t->ptmx)
		return -ENOMEM;
	if (!ioctl(dfd, TIOCGWINSZ, &ws)) {
		t->has_rows = t->has_cols = t->has_xpixel = t->has_ypixel = 1;
		t->rows = ws.ws_row;
		t->cols = ws.ws_col;
		t->xpixel = ws.ws_xpixel;
		t->ypixel = ws.ws_ypixel;
	}
	/* what a master alone holds cannot be saved (see tty_finish_dump) */
	if (t->master && !ioctl(dfd, FIONREAD, &queued) && queued)
		t->out_data.len = queued;
	return 0;
}

static void raw_mode(struct termios *t)
{
	t->c_lflag &= ~(ICANON | ECHO | ECHOE | ECHOK | ECHONL | ISIG | IEXTEN);
	t->c_iflag &= ~(ICRNL | INLCR | IGNCR | ISTRIP | IXON | IXOFF | INPCK | PARMRK | BRKINT |
			IUCLC | IMAXBEL);
	t->c_oflag &= ~OPOST;
	t->c_cc[VMIN] = 0;
	t->c_cc[VTIME] = 0;
}

/* read what fd holds (nonblocking, or VMIN 0) */
static int drain(int fd, ProtobufCBinaryData *b)
{
	uint8_t buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		uint8_t *nb;

		if (n == 0 || (n < 0 && errno == EAGAIN))
			return 0;
		if (n < 0)
			return -errno;
		nb = realloc(b->data, b->len + n);
		if (!nb)
			return -ENOMEM;
		memcpy(nb + b->len, buf, n);
		b->data = nb;
		b->len += n;
	}
}

/* Put in (the slave's input) and out (the master's) back through the pair
 * m/s, whose slave is in raw mode, and wait until the tty holds them. */
static int inject(int m, int s, const ProtobufCBinaryData *in, const ProtobufCBinaryData *out)
{
	int ret = 0;

	if (in->len)
		ret = write_all(m, in->data, in->len);
	if (!ret && out->len)
		ret = write_all(s, out->data, out->len);
	for (int tries = 0; !ret && tries < 2000; tries++) {
		int qi = 0, qo = 0;

		/* the tty moves written bytes to the reader's side in a worker */
		if (ioctl(s, FIONREAD, &qi) || ioctl(m, FIONREAD, &qo))
			return -errno;
		if ((size_t)qi >= in->len && (size_t)qo >= out->len)
			return 0;
		usleep(500);
	}
	return ret ? ret : -ETIMEDOUT;
}

/* The data queued in both directions of a pair, read and written back. */
static int save_queues(struct cr_dump_ctx *ctx, const struct cr_file *mf, const struct cr_file *sf,
		       ProtobufCBinaryData *in, ProtobufCBinaryData *out)
{
	struct cr_proc *mp = dump_find_proc(ctx, mf->owner_pid),
		       *sp = dump_find_proc(ctx, sf->owner_pid);
	_cleanup_close_ int m = mp ? sk_dup(mp, mf->owner_fd) : -EINVAL;
	_cleanup_close_ int s = sp ? sk_dup(sp, sf->owner_fd) : -EINVAL;
	struct termios t, raw;
	int mfl, ret;

	if (m < 0 || s < 0 || tcgetattr(s, &t) || (mfl = fcntl(m, F_GETFL)) < 0)
		return m < 0 ? m : s < 0 ? s : -errno;
	raw = t;
	raw_mode(&raw);
	if (tcsetattr(s, TCSANOW, &raw))
		return -errno;
	ret = fcntl(m, F_SETFL, mfl | O_NONBLOCK) ? -errno : 0;
	if (!ret)
		ret = drain(s, in);
	if (!ret)
		ret = drain(m, out);
	if (!ret)
		ret = inject(m, s, in, out);
	fcntl(m, F_SETFL, mfl);
	if (tcsetattr(s, TCSANOW, &t) && !ret)
		ret = -errno;
	return ret;
}

static TtyTermios *copy_termios(const TtyTermios *s)
{
	TtyTermios *tt = calloc(1, sizeof(*tt) + NCCS);

	if (!tt)
		return NULL;
	*tt = *s;
	tt->cc.data = (uint8_t *)(tt + 1);
	memcpy(tt->cc.data, s->cc.data, NCCS);
	return tt;
}

int tty_finish_dump(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_files; i++) {
		TtyFile *t = ctx->files[i].tty, *m = NULL, *s = NULL;
		const struct cr_file *mf = NULL, *sf = NULL;

		if (!t || t->hung_up)
			continue;
		for (int k = 0; k < ctx->nr_files; k++) {
			TtyFile *o = ctx->files[k].tty;

			if (!o || o->hung_up || o->index != t->index)
				continue;
			if (o->master && m) {
				pr_err("pseudo-terminal /dev/pts/%u has two masters in the tree",
				       t->index);
				return -EOPNOTSUPP;
			}
			if (o->master) {
				m = o;
				mf = &ctx->files[k];
			} else if (!s) {
				s = o;
				sf = &ctx->files[k];
			}
		}
		if (!m) {
			pr_err("pid %d: fd %d is the pseudo-terminal /dev/pts/%u, whose master is "
			       "outside the tree; kupdate cannot restore it",
			       ctx->files[i].owner_pid, ctx->files[i].owner_fd, t->index);
			return -EOPNOTSUPP;
		}
		/* the queues, once per pair (on the master's entry) */
		if (t == m) {
			int ret = 0;

			if (!s && m->out_data.len) {
				pr_err("pid %d: fd %d: the pseudo-terminal /dev/pts/%u holds %zu "
				       "unread "
				       "bytes and no slave of it is in the tree to save them "
				       "through",
				       mf->owner_pid, mf->owner_fd, m->index, m->out_data.len);
				return -EOPNOTSUPP;
			}
			m->out_data.len = 0;
			if (s && !ctx->check_only)
				ret = save_queues(ctx, mf, sf, &m->in_data, &m->out_data);
			if (ret) {
				pr_err("pid %d: fd %d: cannot save the data queued in /dev/pts/%u: "
				       "%s",
				       mf->owner_pid, mf->owner_fd, m->index, strerror(-ret));
				return ret;
			}
			m->has_in_data = m->in_data.len > 0;
			m->has_out_data = m->out_data.len > 0;
		}
		/* what the pair is, on every description of it */
		if (t != m) {
			free(t->ptmx);
			t->ptmx = strdup(m->ptmx);
			if (!t->ptmx)
				return -ENOMEM;
			t->has_locked = 1;
			t->locked = m->locked;
		}
		if (s && !t->termios) {
			t->termios = copy_termios(s->termios);
			if (!t->termios)
				return -ENOMEM;
		}
	}
	/* the data, on every description of its pair */
	for (int i = 0; i < ctx->nr_files; i++) {
		TtyFile *t = ctx->files[i].tty;

		for (int k = 0; t && !t->master && !t->hung_up && k < ctx->nr_files; k++) {
			TtyFile *m = ctx->files[k].tty;

			if (!m || !m->master || m->index != t->index)
				continue;
			t->has_in_data = m->has_in_data;
			t->has_out_data = m->has_out_data;
			t->in_data.data = malloc(m->in_data.len + 1);
			t->out_data.data = malloc(m->out_data.len + 1);
			if (!t->in_data.data || !t->out_data.data)
				return -ENOMEM;
			if (m->in_data.len)
				memcpy(t->in_data.data, m->in_data.data, m->in_data.len);
			if (m->out_data.len)
				memcpy(t->out_data.data, m->out_data.data, m->out_data.len);
			t->in_data.len = m->in_data.len;
			t->out_data.len = m->out_data.len;
		}
	}
	return 0;
}

int tty_ctty(struct cr_dump_ctx *ctx, struct cr_proc *p, int *fg)
{
	_cleanup_free_ char *buf = NULL;
	unsigned long tty_nr;
	char *e;
	int tpgid, idx;

	if (p->sid != p->pid || p->state == TASK_STATE__TASK_ZOMBIE ||
	    read_proc(&buf, NULL, "/proc/%d/stat", p->pid))
		return -1;
	e = strrchr(buf, ')');
	/* ") S ppid pgrp session tty_nr tpgid" */
	if (!e || sscanf(e + 2, "%*c %*d %*d %*d %lu %d", &tty_nr, &tpgid) != 2 || !tty_nr)
		return -1;
	if (major(tty_nr) < PTS_MAJOR_FIRST || major(tty_nr) > PTS_MAJOR_LAST) {
		pr_warn("pid %d: its controlling terminal (%u:%u) is not a pseudo-terminal of the "
			"tree; it has none after a restore",
			p->pid, major(tty_nr), minor(tty_nr));
		return -1;
	}
	idx = (major(tty_nr) - PTS_MAJOR_FIRST) * 256 + minor(tty_nr);
	for (int i = 0; i < ctx->nr_files; i++)
		if (ctx->files[i].tty && ctx->files[i].tty->master &&
		    ctx->files[i].tty->index == (uint32_t)idx) {
			*fg = tpgid;
			return idx;
		}
	pr_warn("pid %d: its controlling terminal /dev/pts/%d is not held by the tree; it has none "
		"after a restore",
		p->pid, idx);
	return -1;
}

void tty_save(const struct cr_file *f, FileEntry *e)
{
	e->tty = f->tty;
}

void tty_free_dump(struct cr_file *f)
{
	TtyFile *t = f->tty;

	if (!t)
		return;
	free(t->ptmx);
	free(t->termios);
	free(t->in_data.data);
	free(t->out_data.data);
	free(t);
}

int tty_validate(const struct rfiles *f, const FileEntry *e)
{
	const TtyFile *t = e->tty;

	if (!t || t->index >= MAX_INDEX || strncmp(t->ptmx, "/dev/", 5) || strstr(t->ptmx, "..") ||
	    (t->termios && t->termios->cc.len != NCCS) || (t->has_rows && t->rows > 65535) ||
	    (t->has_cols && t->cols > 65535) || (t->has_xpixel && t->xpixel > 65535) ||
	    (t->has_ypixel && t->ypixel > 65535) || t->in_data.len > MAX_QUEUED ||
	    t->out_data.len > MAX_QUEUED || ((t->in_data.len || t->out_data.len) && !t->termios) ||
	    (t->hung_up && (t->master || t->termios || t->in_data.len || t->out_data.len))) {
		pr_err("image files.img is damaged: pseudo-terminal %u is invalid", e->id);
		return -EINVAL;
	}
	for (size_t k = 0; f->files[k] != e; k++)
		if (f->files[k]->kind == FILE_KIND__FILE_TTY && t->master &&
		    f->files[k]->tty->master && f->files[k]->tty->index == t->index) {
			pr_err("image files.img is damaged: two masters of /dev/pts/%u", t->index);
			return -EINVAL;
		}
	return 0;
}

/* The multiplexer hands out the lowest free index: open it until idx comes
 * up, holding the stand-ins meanwhile. */
static int open_index(const char *ptmx, uint32_t idx, const char *what)
{
	int *held = NULL, nheld = 0, fd = -1, ret = 0;

	for (;;) {
		unsigned got;
		int *nh;

		fd = open(ptmx, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || ioctl(fd, TIOCGPTN, &got)) {
			ret = pr_errno("%s: cannot open a pseudo-terminal by %s", what, ptmx);
			break;
		}
		if (got == idx)
			break;
		if (got > idx) {
			pr_err("%s: /dev/pts/%u is taken; the pseudo-terminal cannot have its "
			       "index "
			       "again",
			       what, idx);
			ret = -EBUSY;
			break;
		}
		nh = realloc(held, (nheld + 1) * sizeof(*held));
		if (!nh) {
			ret = -ENOMEM;
			break;
		}
		held = nh;
		held[nheld++] = fd;
		fd = -1;
	}
	for (int i = 0; i < nheld; i++)
		close(held[i]);
	free(held);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	return fd;
}

static int set_termios(int fd, const TtyTermios *tt, const char *what)
{
	struct termios t;

	memset(&t, 0, sizeof(t));
	t.c_iflag = tt->iflag;
	t.c_oflag = tt->oflag;
	t.c_cflag = tt->cflag;
	t.c_lflag = tt->lflag;
	t.c_line = tt->line;
	memcpy(t.c_cc, tt->cc.data, NCCS);
	if (cfsetispeed(&t, tt->ispeed) || cfsetospeed(&t, tt->ospeed) ||
	    tcsetattr(fd, TCSANOW, &t)) {
		int ret = -errno;
		pr_perror("%s: cannot set the terminal's attributes", what);
		return ret;
	}
	return 0;
}

/* the data queued at dump time, written through the pair with the slave
 * in raw mode (before its own termios is set) */
static int restore_queues(int m, int s, const TtyFile *tf, const char *what)
{
	struct termios t;
	int ret;

	if (!tf->in_data.len && !tf->out_data.len)
		return 0;
	if (tcgetattr(s, &t))
		return -errno;
	raw_mode(&t);
	ret = tcsetattr(s, TCSANOW, &t) ? -errno : 0;
	if (!ret)
		ret = inject(m, s, &tf->in_data, &tf->out_data);
	if (ret)
		pr_err("%s: cannot put the %zu + %zu queued bytes back into /dev/pts/%u: %s", what,
		       tf->in_data.len, tf->out_data.len, tf->index, strerror(-ret));
	return ret;
}

static struct rpty *make_pair(struct rtty *t, const TtyFile *tf, const char *what)
{
	struct rpty *np;
	int fd, unlock = 0;

	for (size_t i = 0; i < t->n; i++)
		if (t->p[i].index == tf->index && t->p[i].hung_up == tf->hung_up)
			return &t->p[i];
	fd = open_index(tf->ptmx, tf->index, what);
	if (fd == -EBUSY && tf->hung_up) {
		unsigned got = 0;

		/* only the name its fds show differs */
		fd = open(tf->ptmx, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			pr_perror("%s: cannot open a pseudo-terminal by %s", what, tf->ptmx);
		else if (!ioctl(fd, TIOCGPTN, &got))
			pr_warn("%s: the hung-up pseudo-terminal /dev/pts/%u comes back as "
				"/dev/pts/%u",
				what, tf->index, got);
	}
	if (fd < 0)
		return NULL;
	/* out of the way of the fds files-restore.c places meanwhile */
	if (fd < t->floor) {
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, t->floor);

		close(fd);
		if (nfd < 0) {
			pr_perror("%s: cannot move a pseudo-terminal above fd %d", what, t->floor);
			return NULL;
		}
		fd = nfd;
	}
	if (tf->has_rows) {
		struct winsize ws = { tf->rows, tf->cols, tf->xpixel, tf->ypixel };

		if (ioctl(fd, TIOCSWINSZ, &ws)) {
			pr_perror("%s: cannot set the window size of /dev/pts/%u", what, tf->index);
			close(fd);
			return NULL;
		}
	}
	if (!(tf->has_locked && tf->locked) && ioctl(fd, TIOCSPTLCK, &unlock)) {
		pr_perror("%s: cannot unlock /dev/pts/%u", what, tf->index);
		close(fd);
		return NULL;
	}
	np = realloc(t->p, (t->n + 1) * sizeof(*np));
	if (!np) {
		close(fd);
		return NULL;
	}
	t->p = np;
	np[t->n].index = tf->index;
	np[t->n].master = fd;
	np[t->n].termios_done = false;
	np[t->n].hung_up = tf->hung_up;
	return &np[t->n++];
}

int tty_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		const char *what)
{
	const TtyFile *tf = e->tty;
	struct rpty *pair = make_pair(f->tty, tf, what);
	int fd, ret;

	if (!pair)
		return -EIO;
	if (tf->master) {
		fd = fcntl(pair->master, F_DUPFD_CLOEXEC, 0);
		if (fd < 0 || fcntl(fd, F_SETFL, e->flags & O_NONBLOCK)) {
			ret = pr_errno("%s: cannot set up the master of /dev/pts/%u", what,
				       tf->index);
			if (fd >= 0)
				close(fd);
			return ret;
		}
		return fd;
	}
	fd = ioctl(pair->master, TIOCGPTPEER,
		   (e->flags & (O_ACCMODE | O_NONBLOCK | O_APPEND)) | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		char path[32];

		snprintf(path, sizeof(path), "/dev/pts/%u", tf->index);
		fd = open(path,
			  (e->flags & (O_ACCMODE | O_NONBLOCK | O_APPEND)) | O_NOCTTY | O_CLOEXEC);
	}
	if (fd < 0)
		return pr_errno("%s: cannot open /dev/pts/%u", what, tf->index);
	if (!pair->termios_done && tf->termios) {
		ret = restore_queues(pair->master, fd, tf, what);
		if (!ret)
			ret = set_termios(fd, tf->termios, what);
		if (ret) {
			close(fd);
			return ret;
		}
		pair->termios_done = true;
	}
	return fd;
}

void tty_close_pairs(struct rtty *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->p[i].master >= 0) {
			close(t->p[i].master);
			t->p[i].master = -1;
		}
}

int tty_set_ctty(int master_fd, uint32_t index, pid_t pid)
{
	int s = ioctl(master_fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC), ret = 0;

	if (s < 0 || ioctl(s, TIOCSCTTY, 0))
		ret = pr_errno("pid %d: cannot make /dev/pts/%u its controlling terminal", pid,
			       index);
	if (s >= 0)
		close(s);
	return ret;
}

int tty_set_fg(pid_t fg, pid_t pid)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC), ret = 0;

	if (fd < 0 || tcsetpgrp(fd, fg))
		ret = pr_errno("pid %d: cannot make group %d the foreground of its terminal", pid,
			       fg);
	if (fd >= 0)
		close(fd);
	return ret;
}
