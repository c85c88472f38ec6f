/* The process tree: pids, parents, sessions, process groups, zombies.
 * Dump side: check that the tree can be rebuilt, write pstree.img.
 * Restore side: validate pstree.img (the creation itself is restore.c). */
#include "dump.h"
#include "image.h"
#include "images/pstree.pb-c.h"
#include "tty.h"
#include "log.h"
#include "proc.h"
#include "pstree.h"
#include "util.h"

/* Sessions and groups are rebuilt by each process at birth (setsid, or
 * setpgid once the group's leader exists), so every session must be its
 * own or its parent's, and every group must have a leader in the tree —
 * or be the root's, which the root inherits from whoever restores it. */
int check_tree(struct cr_dump_ctx *ctx)
{
	struct cr_proc *root = ctx->procs[0];

	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i], *leader;

		if (p != root && p->sid != p->pid && p->sid != p->parent->sid) {
			pr_err("pid %d: its session %d is neither its own nor its parent's (%d); "
			       "such a tree cannot be rebuilt",
			       p->pid, p->sid, p->parent->sid);
			return -EOPNOTSUPP;
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
	if (root->sid != root->pid)
		pr_warn("pid %d: the root's session %d is outside the dumped tree; after a restore "
			"it belongs to the restoring process's session",
			root->pid, root->sid);
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
		if (p->share_fs) {
			e.has_clone_fs = 1;
			e.clone_fs = 1;
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
	if (!n) {
		pr_err("image pstree.img is damaged: no processes");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		bool parent_found = i == 0;

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
	return 0;
}
