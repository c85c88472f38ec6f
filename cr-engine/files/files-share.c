/* What processes share at dump beyond open file descriptions: fd tables
 * (CLONE_FILES) and fs structs (CLONE_FS), within the tree and with
 * processes outside it, and the POSIX locks a shared table holds. */
#include <dirent.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "dump.h"
#include "fdinfo.h"
#include "files-share.h"
#include "files.h"
#include "log.h"
#include "util.h"

static struct cr_proc *fdt_of(struct cr_proc *q)
{
	return q->fdt_owner ? q->fdt_owner : q;
}

/* fd tables (CLONE_FILES) and fs structs (CLONE_FS) shared with processes
 * dumped before p (its parent among them).  An fs struct shared with the
 * parent is restored with CLONE_FS (restore.c), which also covers the
 * parent's other children that share it.  So is an fd table: the nearest
 * ancestor that does not share its parent's (p->fdt_owner) dumps it, and
 * every process of the chain below is created with CLONE_FILES.  A table
 * shared any other way (with a sibling, a grandparent, a process outside
 * the tree) cannot be built again by clone(2) from the restored tree. */
int files_dump_sharing(struct cr_dump_ctx *ctx, struct cr_proc *p)
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
	if (!d)
		return pr_errno("cannot list the processes (/proc)");
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
int files_check_sharer_locks(struct cr_proc *p)
{
	const struct cr_proc *o = p->fdt_owner;

	for (int k = 0; k < o->nr_fds; k++) {
		_cleanup_free_ char *buf = NULL;
		uint64_t pos;
		uint32_t flags;

		if (!o->fds[k].nr_locks)
			continue;
		if (fdinfo_read(p->pid, o->fds[k].fd, &buf, &pos, &flags))
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
int files_check_posix_locks(struct cr_dump_ctx *ctx, const struct cr_proc *holder,
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
