/* The process tree: pids, parents, sessions, process groups, zombies.
 * Dump side: check that the tree can be rebuilt, write pstree.img.
 * Restore side: validate pstree.img (the creation itself is restore.c). */
#include <fcntl.h>

#include "dump.h"
#include "image.h"
#include "images/pstree.pb-c.h"
#include "tty.h"
#include "log.h"
#include "pidns.h"
#include "proc.h"
#include "pstree.h"
#include "util.h"

/* Sessions and groups are rebuilt by each process at birth (setsid, or
 * setpgid once the group's leader exists), so every session must be its
 * own or its parent's, and every group must have a leader in the tree —
 * or be the root's, which the root inherits from whoever restores it. */
/* the root of p's tree */
static struct cr_proc *root_of(struct cr_proc *p)
{
	while (p->parent)
		p = p->parent;
	return p;
}

/* A root in another process's session is rebuilt by forking it from that
 * session: from the leader when it is in the tree, from a helper that
 * takes the session's id when the leader is dead.  A session led by a live
 * process outside the tree cannot be joined: the root then belongs to the
 * restoring process's session. */
static int check_root_session(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct cr_proc *leader = dump_find_proc(ctx, p->sid);
	struct proc_stat st;

	if (leader) {
		for (struct cr_proc *a = leader; a; a = a->parent)
			if (a == p) {
				pr_err("pid %d: its session %d is led by its own descendant; such "
				       "a "
				       "tree cannot be rebuilt",
				       p->pid, p->sid);
				return -EOPNOTSUPP;
			}
		leader = dump_find_proc(ctx, p->pgid);
		if (p->pgid != p->pid && !leader) {
			pr_err("pid %d: its process group %d has no leader in the dumped tree "
			       "and is not its session's; such a tree cannot be rebuilt",
			       p->pid, p->pgid);
			return -EOPNOTSUPP;
		}
		return 0;
	}
	if (!parse_stat(p->sid, 0, &st) && st.sid == p->sid) {
		pr_warn("pid %d: its session %d is led by a process outside the dumped tree; "
			"after a restore it belongs to the restoring process's session",
			p->pid, p->sid);
		return 0;
	}
	if (p->pgid != p->pid && p->pgid != p->sid && !dump_find_proc(ctx, p->pgid)) {
		pr_err("pid %d: its process group %d has no leader in the dumped tree and is "
		       "not its session's; such a tree cannot be rebuilt",
		       p->pid, p->pgid);
		return -EOPNOTSUPP;
	}
	p->new_session = true;
	return 0;
}

int check_tree(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i], *leader, *root = root_of(p);

		if (p->parent && p->sid != p->pid && p->sid != p->parent->sid) {
			pr_err("pid %d: its session %d is neither its own nor its parent's (%d); "
			       "such a tree cannot be rebuilt",
			       p->pid, p->sid, p->parent->sid);
			return -EOPNOTSUPP;
		}
		if (!p->parent && p->sid != p->pid) {
			int ret = check_root_session(ctx, p);

			if (ret)
				return ret;
		}
		if (p->pgid == p->pid)
			continue;
		leader = dump_find_proc(ctx, p->pgid);
		if (leader) {
			if (leader->sid != p->sid) {
				pr_err("pid %d: group %d belongs to another session", p->pid,
				       p->pgid);
				return -EOPNOTSUPP;
			}
			continue;
		}
		if (p->pgid == root->pgid && p->sid == root->sid)
			continue; /* the root's own outside group */
		{
			struct proc_stat st;

			/* a group whose leader is dead (a zombie's group, say) is
			 * rebuilt with a helper that takes the leader's pid */
			if (parse_stat(p->pgid, 0, &st) || st.pgid != p->pgid)
				continue;
		}
		pr_err("pid %d: its process group %d is led by pid %d outside the dumped tree; "
		       "dump "
		       "the tree from the group leader",
		       p->pid, p->pgid, p->pgid);
		return -EOPNOTSUPP;
	}
	return 0;
}

int write_pstree(struct cr_dump_ctx *ctx)
{
	struct img_writer w;
	int ret = img_writer_open(&w, ctx->dirfd, "pstree.img", IMG_PSTREE);

	if (ret)
		return ret;
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		PstreeEntry e = PSTREE_ENTRY__INIT;
		int32_t *tids = malloc(sizeof(int32_t) * p->nr_threads);

		if (!tids) {
			img_writer_abort(&w);
			return -ENOMEM;
		}
		for (int k = 0; k < p->nr_threads; k++)
			tids[k] = p->threads[k].tid;
		if (p->pid_depth) {
			e.has_pid_depth = 1;
			e.pid_depth = p->pid_depth;
			e.n_ns_tids = (size_t)p->pid_depth * p->nr_threads;
			e.ns_tids = p->ns_ids;
		}
		e.cgroup = p->cgroup;
		e.has_children_ns_of = p->children_ns_of > 0;
		e.children_ns_of = p->children_ns_of;
		e.pid = p->pid;
		e.ppid = p->parent ? p->parent->pid : 0;
		e.pgid = p->pgid;
		e.sid = p->sid;
		e.n_tids = p->nr_threads;
		e.tids = tids;
		e.state = p->state;
		if (p->state == TASK_STATE__TASK_ZOMBIE) {
			e.has_exit_code = 1;
			e.exit_code = p->exit_code;
		}
		if (p->state == TASK_STATE__TASK_STOPPED) {
			e.has_stop_signal = 1;
			e.stop_signal = p->stop_sig;
		}
		if (p->new_session) {
			e.has_new_session = 1;
			e.new_session = 1;
		}
		if (p->share_fs) {
			e.has_clone_fs = 1;
			e.clone_fs = 1;
		}
		if (p->fdt_owner) {
			e.has_clone_files = 1;
			e.clone_files = 1;
		}
		{
			int fg = 0, ctty = tty_ctty(ctx, p, &fg);

			if (ctty >= 0) {
				e.has_ctty = e.has_ctty_fg = 1;
				e.ctty = ctty;
				e.ctty_fg = fg;
			}
		}
		img_write(&w, &e.base);
		free(tids);
	}
	return img_writer_close(&w);
}

int pstree_validate(PstreeEntry **e, size_t n)
{
	_cleanup_free_ int *parent = NULL;

	if (!n) {
		pr_err("image pstree.img is damaged: no processes");
		return -EINVAL;
	}
	if (e[0]->ppid) {
		pr_err("image pstree.img is damaged: the first process %d has a parent", e[0]->pid);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		/* roots (of a service's several trees) have no parent */
		bool parent_found = e[i]->ppid == 0;

		if (e[i]->pid <= 1 || e[i]->pgid <= 0 || e[i]->sid <= 0) {
			pr_err("image pstree.img is damaged: entry %zu has pid %d pgid %d sid %d",
			       i, e[i]->pid, e[i]->pgid, e[i]->sid);
			return -EINVAL;
		}
		if (e[i]->state != TASK_STATE__TASK_ALIVE &&
		    e[i]->state != TASK_STATE__TASK_ZOMBIE &&
		    e[i]->state != TASK_STATE__TASK_STOPPED) {
			pr_err("image pstree.img is damaged: pid %d has state %d", e[i]->pid,
			       e[i]->state);
			return -EINVAL;
		}
		if (e[i]->clone_fs && (!e[i]->ppid || e[i]->state == TASK_STATE__TASK_ZOMBIE)) {
			pr_err("image pstree.img is damaged: pid %d shares the fs of no parent",
			       e[i]->pid);
			return -EINVAL;
		}
		if (e[i]->clone_files && (!e[i]->ppid || e[i]->state == TASK_STATE__TASK_ZOMBIE)) {
			pr_err("image pstree.img is damaged: pid %d shares the fd table of "
			       "no parent",
			       e[i]->pid);
			return -EINVAL;
		}
		if (e[i]->n_tids < 1 || e[i]->tids[0] != e[i]->pid ||
		    (e[i]->state == TASK_STATE__TASK_ZOMBIE && e[i]->n_tids != 1) ||
		    e[i]->n_tids > 65536) {
			pr_err("image pstree.img is damaged: pid %d has an invalid thread list",
			       e[i]->pid);
			return -EINVAL;
		}
		for (size_t k = 0; k < i; k++) {
			if (e[k]->pid == e[i]->ppid)
				parent_found = true;
			for (size_t a = 0; a < e[k]->n_tids; a++)
				for (size_t b = 0; b < e[i]->n_tids; b++)
					if (e[k]->tids[a] == e[i]->tids[b]) {
						pr_err("image pstree.img is damaged: id %d appears "
						       "twice",
						       e[i]->tids[b]);
						return -EINVAL;
					}
			if (e[k]->pid == e[i]->ppid && e[k]->state == TASK_STATE__TASK_ZOMBIE) {
				pr_err("image pstree.img is damaged: zombie %d has a child",
				       e[k]->pid);
				return -EINVAL;
			}
		}
		for (size_t a = 1; a < e[i]->n_tids; a++)
			for (size_t b = 0; b < a; b++)
				if (e[i]->tids[a] == e[i]->tids[b] || e[i]->tids[a] <= 0) {
					pr_err("image pstree.img is damaged: pid %d lists thread "
					       "%d "
					       "twice",
					       e[i]->pid, e[i]->tids[a]);
					return -EINVAL;
				}
		if (!parent_found) {
			pr_err("image pstree.img is damaged: the parent %d of pid %d is missing",
			       e[i]->ppid, e[i]->pid);
			return -EINVAL;
		}
	}
	parent = xzalloc(n * sizeof(*parent));
	if (!parent)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		parent[i] = -1;
		for (size_t k = 0; k < i && e[i]->ppid; k++)
			if (e[k]->pid == e[i]->ppid)
				parent[i] = k;
	}
	return pidns_validate(e, n, parent);
}

int cr_group_ids(pid_t pid, pid_t pgid, pid_t sid, pid_t out[2])
{
	int n = 0;

	if (pgid > 1 && pgid != pid)
		out[n++] = pgid;
	if (sid > 1 && sid != pid && sid != pgid)
		out[n++] = sid;
	return n;
}

int cr_images_ids(const char *imgdir, pid_t **out, size_t *nr)
{
	_cleanup_close_ int dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct img_reader r;
	ProtobufCMessage *m;
	pid_t *v = NULL;
	size_t n = 0;
	int ret;

	*out = NULL;
	*nr = 0;
	if (dirfd < 0)
		return pr_errno("cannot open image directory %s", imgdir);
	ret = img_reader_open(&r, dirfd, "pstree.img", IMG_PSTREE);
	if (ret)
		return ret;
	while ((ret = img_read(&r, &pstree_entry__descriptor, &m)) > 0) {
		PstreeEntry *e = (PstreeEntry *)m;
		/* its threads, and the ids of groups and sessions rebuilt by
		 * helpers (and, harmlessly, the others) */
		pid_t *nv = xrealloc_array(v, n + e->n_tids + 2, sizeof(*nv));

		if (!nv) {
			protobuf_c_message_free_unpacked(m, NULL);
			ret = -ENOMEM;
			break;
		}
		v = nv;
		for (size_t k = 0; k < e->n_tids; k++)
			v[n++] = e->tids[k];
		n += (size_t)cr_group_ids(e->pid, e->pgid, e->sid, v + n);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	img_reader_close(&r);
	if (ret < 0) {
		free(v);
		return ret;
	}
	*out = v;
	*nr = n;
	return 0;
}
