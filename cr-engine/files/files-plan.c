/* Which process creates each open file description and pipe of a restore
 * (files_plan): the closest common ancestor of the processes that hold it,
 * or kupdate itself for what several trees share; and the transport fd
 * numbers, above every fd the images name, each description travels on
 * until its holders place it.  The descriptions are made by files-restore.c,
 * which calls nothing here: the plan only reads (fdinfo.c's lookups). */
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdinfo.h"
#include "files.h"
#include "log.h"
#include "restore-ctx.h"
#include "tty.h"
#include "util.h"

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
	if (a == FILES_TOOL || b == FILES_TOOL)
		return FILES_TOOL;
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
	/* different trees: only kupdate is above both */
	return a ? a : FILES_TOOL;
}

/* the description of the master of /dev/pts/index someone holds, or -1 */
static ssize_t live_master(const struct rfiles *f, uint32_t index)
{
	for (size_t i = 0; i < f->nr_files; i++)
		if (f->files[i]->kind == FILE_KIND__FILE_TTY && f->files[i]->tty->master &&
		    f->files[i]->tty->index == index && f->desc[i].owner)
			return i;
	return -1;
}

/* What refers across images: memfds to shmem.img, epoll targets to the fd
 * table of the process that fills the epoll, slaves and controlling
 * terminals to their pseudo-terminal's master. */
static int plan_check(const struct rfiles *f, struct rproc *procs, size_t nr)
{
	for (size_t k = 0; k < nr; k++)
		if (!procs[k].zombie && procs[k].pe->has_ctty &&
		    (procs[k].pe->sid != procs[k].pid || live_master(f, procs[k].pe->ctty) < 0)) {
			pr_err("image pstree.img is damaged: pid %d cannot have /dev/pts/%u as its "
			       "controlling terminal",
			       procs[k].pid, procs[k].pe->ctty);
			return -EINVAL;
		}
	for (size_t i = 0; i < f->nr_files; i++) {
		const FileEntry *e = f->files[i];
		const struct rproc *filler = NULL;

		if (!f->desc[i].owner)
			continue;
		if (e->kind == FILE_KIND__FILE_MEMFD &&
		    (!f->shm || e->shmid < 1 || e->shmid > f->shm->n ||
		     f->shm->e[e->shmid - 1]->kind != SHMEM_KIND__SHMEM_MEMFD)) {
			pr_err("image files.img refers to memfd %u, which shmem.img lacks",
			       e->shmid);
			return -EINVAL;
		}
		if (e->kind == FILE_KIND__FILE_TTY && !e->tty->master && !e->tty->hung_up &&
		    live_master(f, e->tty->index) < 0) {
			/* slaves are opened through their master */
			pr_err("image files.img is damaged: /dev/pts/%u has no master",
			       e->tty->index);
			return -EINVAL;
		}
		if (e->kind != FILE_KIND__FILE_EPOLL)
			continue;
		for (size_t k = 0; k < nr && !filler; k++)
			if (procs[k].pid == e->ep->pid && !procs[k].zombie)
				filler = &procs[k];
		for (size_t t = 0; filler && t < e->ep->n_targets; t++)
			if (!files_holds(filler, e->ep->targets[t]->file_id))
				filler = NULL;
		if (!filler || !files_holds(filler, e->id)) {
			pr_err("image files.img is damaged: the targets of epoll %u do not match "
			       "the fds of pid %d",
			       e->id, e->ep->pid);
			return -EINVAL;
		}
	}
	return 0;
}

/* the other end of unix socket i's connection in the images, or -1 */
static ssize_t peer_of(const struct rfiles *f, size_t i)
{
	const UnixSk *u = f->files[i]->usk;

	if (f->files[i]->kind != FILE_KIND__FILE_UNIX || u->pending || u->external || u->linked ||
	    !u->has_peer)
		return -1;
	for (size_t j = 0; j < f->nr_files; j++) {
		const UnixSk *o = f->files[j]->usk;

		if (j != i && f->files[j]->kind == FILE_KIND__FILE_UNIX && o->ino == u->peer &&
		    o->has_peer && o->peer == u->ino)
			return j;
	}
	return -1;
}

/* Files in flight (SCM_RIGHTS): the process that fills a carrier's queue
 * (its maker, which makes both ends of a pair) must hold each file it
 * carries, so each is made by a common ancestor of that maker and of its
 * holders (on a transport fd, where the maker finds it).  A socket in
 * flight carries more, and a pair's makers are one: repeated until
 * nothing moves (owners only go up the tree). */
static int plan_inflight(struct rfiles *f)
{
	_cleanup_free_ ssize_t *peer = NULL;
	bool any = false, moved = true;

	for (size_t i = 0; i < f->nr_files; i++) {
		const UnixSk *u = f->files[i]->usk;

		for (size_t m = 0; f->files[i]->kind == FILE_KIND__FILE_UNIX && m < u->n_queue; m++)
			if (u->queue[m]->n_fds) {
				f->desc[i].carrier = any = true;
				break;
			}
	}
	if (!any)
		return 0;
	peer = calloc(f->nr_files, sizeof(*peer));
	if (!peer)
		return -ENOMEM;
	for (size_t i = 0; i < f->nr_files; i++)
		peer[i] = peer_of(f, i);
	while (moved) {
		moved = false;
		for (size_t i = 0; i < f->nr_files; i++) {
			ssize_t j = peer[i];
			const UnixSk *u = f->files[i]->usk;

			if (j >= 0 && f->desc[i].owner && f->desc[j].owner &&
			    f->desc[i].owner != f->desc[j].owner) {
				f->desc[i].owner = f->desc[j].owner =
					common_ancestor(f->desc[i].owner, f->desc[j].owner);
				moved = true;
			}
			if (!f->desc[i].carrier || !f->desc[i].owner)
				continue;
			for (size_t m = 0; m < u->n_queue; m++)
				for (size_t k = 0; k < u->queue[m]->n_fds; k++) {
					struct rdesc *x =
						&f->desc[files_index(f, u->queue[m]->fds[k])];
					struct rproc *o =
						common_ancestor(x->owner, f->desc[i].owner);

					x->inflight = true;
					if (o != x->owner) {
						x->owner = o;
						moved = true;
					}
				}
		}
	}
	return 0;
}

int files_plan(struct rfiles *f, struct rproc *procs, size_t nr, int fd_floor)
{
	int maxfd = fd_floor, next, ret;
	struct rproc *everyone = NULL;
	struct rlimit rl;

	for (size_t i = 0; i < nr; i++) {
		struct rproc *rp = &procs[i];

		for (size_t k = 0; k < rp->nr_fds; k++) {
			size_t fi = files_index(f, rp->fds[k]->file_id);
			struct rdesc *d = &f->desc[fi];

			maxfd = MAX(maxfd, rp->fds[k]->fd);
			if (d->owner != rp)
				d->nholders++;
			if (!d->first)
				d->first = rp;
			d->owner = common_ancestor(d->owner, rp);
		}
	}
	ret = plan_inflight(f);
	if (ret)
		return ret;
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
		/* pending, or bound in a container's mount namespace, which
		 * is made after its owner's files (unix_bind_late) */
		if (u->pending || u->has_bound_in) {
			f->desc[i].late = true;
			continue;
		}
		if (u->external || u->linked)
			continue; /* the caller makes a new connection */
		if (!u->has_peer)
			continue;
		for (size_t j = 0; j < f->nr_files; j++) {
			const UnixSk *o = f->files[j]->usk;

			if (j != i && f->files[j]->kind == FILE_KIND__FILE_UNIX &&
			    o->ino == u->peer && o->has_peer && o->peer == u->ino &&
			    f->desc[j].owner && f->desc[i].owner) {
				struct rproc *own =
					common_ancestor(f->desc[i].owner, f->desc[j].owner);

				f->desc[i].pair = j;
				f->desc[j].pair = i;
				f->desc[i].owner = f->desc[j].owner = own;
				break;
			}
		}
		if (f->desc[i].pair < 0)
			f->desc[i].late = true;
	}
	for (size_t i = 0; i < nr; i++)
		if (!procs[i].zombie)
			everyone = common_ancestor(everyone, &procs[i]);
	next = maxfd + 1;
	f->tbase = next;
	f->tend = next; /* grows below */
	for (size_t i = 0; i < f->nr_files; i++) {
		FileEntry *e = f->files[i];
		struct rdesc *d = &f->desc[i];

		d->tfd = -1;
		d->via = -1;
		if (!d->owner)
			continue; /* held by nobody alive: a zombie's, say */
		if (e->kind == FILE_KIND__FILE_PIPE || e->kind == FILE_KIND__FILE_FIFO) {
			d->owner = f->pipe_owner[pipe_index(f, e->pipe_id)];
			d->tfd = next++;
		} else if (e->kind == FILE_KIND__FILE_MEMFD || e->kind == FILE_KIND__FILE_TTY ||
			   e->has_ghost_id) {
			/* one object (a memfd kupdate made, an unlinked file made
			 * again) for every process: their common ancestor opens
			 * every description of it before it forks */
			d->owner = everyone;
			d->tfd = next++;
		} else if (d->nholders > 1 || d->pair >= 0 || d->carrier || d->inflight ||
			   (e->kind == FILE_KIND__FILE_UNIX && e->usk->has_name &&
			    e->usk->name.len)) {
			/* shared, half of a pair, bound (it must exist before anyone
			 * connects to it), carrying fds in its queue or carried */
			d->tfd = next++;
		}
	}
	f->tend = next;
	f->tty->floor = next;
	ret = plan_check(f, procs, nr);
	if (ret)
		return ret;
	/* transport fds may go beyond the usual soft limit */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)next + 64 &&
	    rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)next + 1024);
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return 0;
}
