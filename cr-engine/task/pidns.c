/* Pid namespaces of the tree's own: a container's init, which a process
 * of the tree forked into a new pid namespace (systemd-nspawn, podman's
 * conmon and runtime), and the init's descendants.  Each of them has a pid
 * in every namespace from the dumper's down to its own, and keeps them all.
 *
 * Dump: the ids of every thread in the namespaces below the dumper's are
 * read from /proc/PID/task/TID/status (NSpid) and written to pstree.img,
 * innermost first (pstree_entry.ns_tids, pid_depth entries per tid).  The
 * tree must be rebuildable by forking: a process in a pid namespace other
 * than its parent's is that namespace's init (pid 1 there), one level
 * down; every process of such a namespace is in the tree; a process whose
 * children would be born in another namespace than its own (it called
 * unshare or setns of CLONE_NEWPID) is refused, as is a process that entered a
 * namespace from outside (setns: nsenter, podman exec), a process group
 * inside one whose leader is gone, and a pid namespace in a tree with a
 * user namespace of its own.  ns_last_pid of a namespace is not kept: the
 * next fork in it takes the lowest free pid above the highest restored.
 *
 * Restore: an init is forked with CLONE_NEWPID, every process and thread
 * with clone3's set_tid holding its ids from its own namespace up to the
 * restorer's.  A process group or session id is given to setpgid() as the
 * process's own namespace sees it (pidns_view). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "images/pstree.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "pidns.h"
#include "proc.h"
#include "restore.h"
#include "restore-ctx.h"
#include "util.h"

/* ------------------------------------------------------------ dump */

/* NSpid of tid: the ids, outermost (kupdate's /proc) first; how many */
static int read_nspid(pid_t pid, pid_t tid, pid_t *ids, int max)
{
	char path[64], *buf, *line;
	size_t len;
	int n = 0, ret;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	ret = read_file_at(AT_FDCWD, path, &buf, &len);
	if (ret)
		return ret;
	line = strstr(buf, "\nNSpid:");
	if (line) {
		char *s = line + 7, *end;

		for (long v; n <= max && (v = strtol(s, &end, 10), end != s); s = end)
			if (n < max)
				ids[n++] = v;
			else
				n++;
	}
	free(buf);
	if (!line)
		return 1; /* a kernel without NSpid: one namespace */
	return n;
}

struct pidns_of {
	dev_t dev;
	ino_t ino;
	struct cr_proc *init;
};

static int read_ids(struct cr_proc *p)
{
	pid_t ids[PIDNS_DEPTH_MAX + 2];

	for (int k = 0; k < p->nr_threads; k++) {
		int n = read_nspid(p->pid, p->threads[k].tid, ids, PIDNS_DEPTH_MAX + 2);

		if (n < 0)
			return pr_errno("pid %d: cannot read the pid namespaces of thread %d",
					p->pid, p->threads[k].tid);
		if (n > PIDNS_DEPTH_MAX + 1) {
			pr_err("pid %d (%s) lives %d pid namespaces below kupdate's; kupdate "
			       "restores %d at most",
			       p->pid, p->stat.comm, n - 1, PIDNS_DEPTH_MAX);
			return -EOPNOTSUPP;
		}
		if (!k) {
			p->pid_depth = n - 1;
			if (p->pid_depth) {
				p->ns_ids = xzalloc(sizeof(int32_t) * p->nr_threads * p->pid_depth);
				if (!p->ns_ids)
					return -ENOMEM;
			}
		} else if (n - 1 != p->pid_depth) {
			pr_err("pid %d: its thread %d lives in another pid namespace", p->pid,
			       p->threads[k].tid);
			return -EOPNOTSUPP;
		}
		for (int j = 0; j < p->pid_depth; j++)
			p->ns_ids[k * p->pid_depth + j] = ids[n - 1 - j];
	}
	return 0;
}

/* p's pid namespace is a child of its parent's (or of kupdate's) */
static int check_nesting(struct cr_proc *p)
{
	struct stat up, want;
	pid_t above = p->parent ? p->parent->pid : 0;
	char path[64];
	int fd, pfd;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pr_errno("pid %d: cannot open its pid namespace", p->pid);
	pfd = ioctl(fd, NS_GET_PARENT);
	close(fd);
	if (pfd < 0 || fstat(pfd, &up) || ns_stat(above, "pid", &want)) {
		if (pfd >= 0)
			close(pfd);
		return pr_errno("pid %d: cannot look at its pid namespace's parent", p->pid);
	}
	close(pfd);
	if (up.st_ino != want.st_ino || up.st_dev != want.st_dev || p->ns_ids[0] != 1 ||
	    p->pid_depth != (p->parent ? p->parent->pid_depth : 0) + 1) {
		pr_err("pid %d (%s) lives in a pid namespace that %s, as pid %d there; it "
		       "entered it from outside (setns: nsenter, podman exec, machinectl "
		       "shell), which kupdate cannot restore",
		       p->pid, p->stat.comm,
		       p->parent ? "its parent is not in" : "is not kupdate's", p->ns_ids[0]);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* the process that leads group or session id in p's namespace, as the
 * restore rebuilds it: one of the tree in the same namespace, or the one
 * the namespace's init took from outside */
static int check_group(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_proc *init, pid_t id,
		       const char *what)
{
	struct cr_proc *l = dump_find_proc(ctx, id);

	if (l) {
		for (struct cr_proc *a = l; a; a = a->parent)
			if (a == init)
				return 0;
	}
	if (id == (!strcmp(what, "session") ? init->sid : init->pgid))
		return 0;
	pr_err("pid %d (%s): its %s %d has no leader in its pid namespace (that of pid %d); "
	       "kupdate cannot rebuild it there",
	       p->pid, p->stat.comm, what, id, init->pid);
	return -EOPNOTSUPP;
}

/* every process of the namespaces is in the tree */
static int check_members(struct cr_dump_ctx *ctx, const struct pidns_of *ns, int n)
{
	for (int i = 0; i < n; i++) {
		struct stat st = { .st_dev = ns[i].dev, .st_ino = ns[i].ino };
		pid_t x = dump_ns_outsider(ctx, "pid", &st);
		struct proc_stat ps;

		if (!x)
			continue;
		pr_err("pid %d (%s) lives in the pid namespace of pid %d (%s, its init) but is "
		       "not in the dumped tree",
		       x, parse_stat(x, 0, &ps) ? "?" : ps.comm, ns[i].init->pid,
		       ns[i].init->stat.comm);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* p's children are born in another pid namespace than its own: kept when
 * it is the namespace of a child of p, its init (unshare --pid --fork),
 * which p joins again once that child is made; p->children_ns_of */
static int children_ns(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *q = ctx->procs[i];
		struct stat st;

		if (q->parent != p || q->pid_depth != p->pid_depth + 1 || q->ns_ids[0] != 1 ||
		    ns_stat(q->pid, "pid", &st) || st.st_ino != p->kids_ns_ino)
			continue;
		if (p->nr_threads > 1) {
			pr_err("pid %d (%s) has %d threads and its children born in the pid "
			       "namespace of its child %d: kupdate cannot make its threads "
			       "again there",
			       p->pid, p->stat.comm, p->nr_threads, q->pid);
			return -EOPNOTSUPP;
		}
		p->children_ns_of = q->pid;
		return 0;
	}
	pr_err("pid %d (%s) changed the pid namespace its children are born in (unshare or "
	       "setns of CLONE_NEWPID) to another than its own and than any child's of its "
	       "own, which kupdate cannot restore",
	       p->pid, p->stat.comm);
	return -EOPNOTSUPP;
}

int pidns_dump(struct cr_dump_ctx *ctx)
{
	struct pidns_of *ns = NULL;
	int nr = 0, ret = 0;

	for (int i = 0; !ret && i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		struct stat own, kids, up;

		ret = read_ids(p);
		/* a zombie has no namespaces left to look at */
		if (ret || p->state == TASK_STATE__TASK_ZOMBIE)
			continue;
		if (ns_stat(p->pid, "pid", &own)) {
			ret = pr_errno("pid %d: cannot look at its pid namespace", p->pid);
			break;
		}
		/* (unshare --pid --fork: its child's, below); none to look at:
		 * unshared, and no process born there yet */
		if (ns_stat(p->pid, "pid_for_children", &kids)) {
			pr_err("pid %d (%s) changed the pid namespace its children are born in "
			       "(unshare of CLONE_NEWPID) to a new one where no process is born "
			       "yet, which kupdate cannot restore",
			       p->pid, p->stat.comm);
			ret = -EOPNOTSUPP;
			break;
		}
		if (kids.st_ino != own.st_ino || kids.st_dev != own.st_dev)
			p->kids_ns_ino = kids.st_ino;
		if (!p->pid_depth)
			continue;
		if (ctx->ns && (ctx->ns->own & CLONE_NEWUSER)) {
			pr_err("pid %d (%s) lives in a pid namespace of its own, in a tree with a "
			       "user namespace of its own: kupdate cannot restore both yet",
			       p->pid, p->stat.comm);
			ret = -EOPNOTSUPP;
			break;
		}
		if (p->parent && p->pid_depth == p->parent->pid_depth) {
			if (!ns_stat(p->parent->pid, "pid", &up) && up.st_ino == own.st_ino &&
			    up.st_dev == own.st_dev)
				continue;
			pr_err("pid %d (%s) lives in another pid namespace than its parent %d, "
			       "as pid %d there: it entered it from outside (setns), which "
			       "kupdate cannot restore",
			       p->pid, p->stat.comm, p->parent->pid, p->ns_ids[0]);
			ret = -EOPNOTSUPP;
			break;
		}
		ret = check_nesting(p);
		if (ret)
			break;
		ns = xrealloc_array(ns, nr + 1, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		ns[nr++] = (struct pidns_of){ own.st_dev, own.st_ino, p };
	}
	for (int i = 0; !ret && i < ctx->nr_procs; i++)
		if (ctx->procs[i]->kids_ns_ino)
			ret = children_ns(ctx, ctx->procs[i]);
	/* groups and sessions inside: their leaders in the same namespace */
	for (int i = 0; !ret && i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i], *init = p;

		if (!p->pid_depth)
			continue;
		while (init->parent && !(init->pid_depth == p->pid_depth && init->ns_ids[0] == 1))
			init = init->parent;
		ret = check_group(ctx, p, init, p->pgid, "process group");
		if (!ret)
			ret = check_group(ctx, p, init, p->sid, "session");
	}
	if (!ret && nr)
		ret = check_members(ctx, ns, nr);
	if (!ret && nr)
		pr_info("%d pid namespace%s of the tree's own, their inits %d%s", nr,
			nr > 1 ? "s" : "", ns[0].init->pid, nr > 1 ? "..." : "");
	free(ns);
	return ret;
}

/* ---------------------------------------------------------- restore */

int pidns_children_setns(const struct rproc *rp)
{
	char rel[32];
	int fd, ret = 0;

	if (rp->zombie || !rp->pe->has_children_ns_of)
		return 0;
	snprintf(rel, sizeof(rel), "%d/ns/pid", rp->pe->children_ns_of);
	fd = proc_open(rel, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWPID))
		ret = pr_errno("pid %d: cannot have its children born in the pid namespace of its "
			       "child %d again",
			       rp->pid, rp->pe->children_ns_of);
	if (fd >= 0)
		close(fd);
	return ret;
}

int pidns_depth(const struct rproc *rp)
{
	return rp->pe->has_pid_depth ? (int)rp->pe->pid_depth : 0;
}

bool pidns_makes(const struct rproc *rp)
{
	int d = pidns_depth(rp);

	return d && d > (rp->parent ? pidns_depth(rp->parent) : 0);
}

pid_t pidns_id_at(const struct rproc *rp, size_t k, int level)
{
	int d = pidns_depth(rp);

	if (!level || level > d)
		return rp->pe->tids[k];
	return rp->pe->ns_tids[k * d + (d - level)];
}

pid_t pidns_self(const struct rproc *rp, size_t k)
{
	return pidns_id_at(rp, k, pidns_depth(rp));
}

size_t pidns_set_tid(const struct rproc *rp, size_t k, pid_t *out)
{
	int d = pidns_depth(rp);

	for (int j = 0; j < d; j++)
		out[j] = rp->pe->ns_tids[k * d + j];
	out[d] = rp->pe->tids[k];
	return d + 1;
}

pid_t pidns_view(const struct rctx *c, const struct rproc *rp, pid_t pid)
{
	int d = pidns_depth(rp);
	const struct rproc *init = rp, *q = NULL;

	if (!d)
		return pid;
	while (!pidns_makes(init))
		init = init->parent;
	for (size_t i = 0; i < c->nr && !q; i++)
		if (c->procs[i].pid == pid)
			q = &c->procs[i];
	for (const struct rproc *a = q; a && pidns_depth(a) >= d; a = a->parent)
		if (a == init)
			return pidns_id_at(q, 0, d);
	return 0;
}

int pidns_validate(PstreeEntry **e, size_t n, const int *parent)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t d = e[i]->has_pid_depth ? e[i]->pid_depth : 0;
		uint32_t up =
			parent[i] >= 0 && e[parent[i]]->has_pid_depth ? e[parent[i]]->pid_depth : 0;

		if (d > PIDNS_DEPTH_MAX || e[i]->n_ns_tids != d * e[i]->n_tids ||
		    (d != up && d != up + 1)) {
			pr_err("image pstree.img is damaged: pid %d has %u pid namespaces and %zu "
			       "ids in them",
			       e[i]->pid, d, e[i]->n_ns_tids);
			return -EINVAL;
		}
		for (size_t k = 0; k < e[i]->n_ns_tids; k++)
			if (e[i]->ns_tids[k] <= 0) {
				pr_err("image pstree.img is damaged: pid %d has id %d in a pid "
				       "namespace",
				       e[i]->pid, e[i]->ns_tids[k]);
				return -EINVAL;
			}
		if (d == up + 1 && e[i]->ns_tids[0] != 1) {
			pr_err("image pstree.img is damaged: pid %d makes a pid namespace but is "
			       "pid %d there, not 1",
			       e[i]->pid, e[i]->ns_tids[0]);
			return -EINVAL;
		}
	}
	return 0;
}
