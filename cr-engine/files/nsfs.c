/* A namespace file held open: a container's manager keeps its container's
 * network namespace so (systemd-nspawn: its veth, its port forwarding).
 *
 * Dump: the link names the kind and the inode ("net:[4026532241]"); a
 * process of the tree in that namespace is found, the one that made it
 * first (/proc/PID/ns/KIND).  A namespace no process of the tree lives in
 * is refused: kupdate could not make it again.
 * Restore: the namespace exists once its process does, after its holder
 * made its own files (an ancestor: nspawn is its container's parent); a
 * stand-in (an O_PATH descriptor of "/") keeps the fd number, and once
 * every process exists /proc/PID/ns/KIND takes its place in each fd of the
 * holder that held it, with the fd's flags. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump.h"
#include "log.h"
#include "namespaces.h"
#include "nsfs.h"
#include "proc.h"
#include "restore.h"
#include "util.h"

static const char *const kinds[] = { "net", "uts", "ipc", "mnt", "pid", "cgroup", "user" };

/* kind's index in kinds, its inode into *ino; -1 if link names none */
static int parse(const char *link, unsigned long *ino)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		size_t n = strlen(kinds[i]);
		char *end;

		if (strncmp(link, kinds[i], n) || strncmp(link + n, ":[", 2))
			continue;
		*ino = strtoul(link + n + 2, &end, 10);
		return !strcmp(end, "]") ? (int)i : -1;
	}
	return -1;
}

bool nsfs_link(const char *link)
{
	unsigned long ino;

	return parse(link, &ino) >= 0;
}

int nsfs_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	      struct cr_file *f)
{
	unsigned long ino = 0;
	int k = parse(f->path, &ino);
	struct cr_proc *found = NULL;

	(void)fdinfo;
	if (k < 0) {
		pr_err("pid %d: fd %d (%s) names no namespace kupdate knows", p->pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	for (int i = 0; i < ctx->nr_procs && !found; i++) {
		struct cr_proc *q = ctx->procs[i];
		struct stat st, up;

		if (ns_stat(q->pid, kinds[k], &st) || st.st_ino != ino)
			continue;
		/* its maker: the first in it whose parent is not */
		if (!q->parent || ns_stat(q->parent->pid, kinds[k], &up) || up.st_ino != ino)
			found = q;
	}
	for (int i = 0; i < ctx->nr_procs && !found; i++) {
		struct stat st;

		if (!ns_stat(ctx->procs[i]->pid, kinds[k], &st) && st.st_ino == ino)
			found = ctx->procs[i];
	}
	if (!found) {
		pr_err("pid %d: fd %d is a %s namespace (%s) that no process of the tree lives in; "
		       "kupdate cannot make it again",
		       p->pid, fd, kinds[k], f->path);
		return -EOPNOTSUPP;
	}
	f->nsf = calloc(1, sizeof(*f->nsf));
	if (!f->nsf)
		return -ENOMEM;
	nsfs_file__init(f->nsf);
	f->nsf->kind = xstrdup(kinds[k]);
	f->nsf->pid = found->pid;
	return f->nsf->kind ? 0 : -ENOMEM;
}

void nsfs_save(const struct cr_file *f, FileEntry *e)
{
	e->nsf = f->nsf;
}

void nsfs_free_dump(struct cr_file *f)
{
	if (f->nsf)
		free(f->nsf->kind);
	free(f->nsf);
}

int nsfs_validate(const struct rfiles *f, const FileEntry *e)
{
	(void)f;
	for (size_t i = 0; e->nsf && e->nsf->kind && i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(e->nsf->kind, kinds[i]) && e->nsf->pid > 0)
			return 0;
	pr_err("image files.img is damaged: namespace file %u is invalid", e->id);
	return -EINVAL;
}

int nsfs_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		 const char *what)
{
	int fd = open("/", O_PATH | O_CLOEXEC);

	(void)f, (void)e, (void)rp, (void)at;
	return fd < 0 ? pr_errno("%s: cannot hold a place for a namespace file", what) : fd;
}

int nsfs_finish(const FileEntry *e, struct rproc *rp, int at, const char *what)
{
	char rel[64];
	int ns, ret = 0;

	(void)at;
	snprintf(rel, sizeof(rel), "%d/ns/%s", e->nsf->pid, e->nsf->kind);
	ns = proc_open(rel, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return pr_errno("%s: cannot open the %s namespace of pid %d again", what,
				e->nsf->kind, e->nsf->pid);
	for (size_t i = 0; !ret && i < rp->nr_fds; i++) {
		int fd = rp->fds[i]->fd, fl;

		if (rp->fds[i]->file_id != e->id)
			continue;
		fl = fcntl(fd, F_GETFD);
		if (fl < 0 || dup3(ns, fd, fl & FD_CLOEXEC ? O_CLOEXEC : 0) < 0)
			ret = pr_errno("%s: cannot put the %s namespace of pid %d at fd %d", what,
				       e->nsf->kind, e->nsf->pid, fd);
	}
	close(ns);
	return ret;
}
