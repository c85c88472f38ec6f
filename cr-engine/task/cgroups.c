/* The control groups below the tree root's (cgroup v2): a service's
 * delegated subtree (Delegate=), a container's (nspawn's payload, its
 * init's init.scope and system.slice...), and the cgroup namespace a
 * process of the tree made with one of them as its root.
 *
 * Dump: each process's control group is read from /proc/PID/cgroup; one
 * below the root's is recorded relative to it (pstree_entry.cgroup), one
 * elsewhere (a login session's scope) is left to the caller's placing, as
 * before.  When the root moved itself into a group beside the rest of the
 * tree (nspawn's supervisor), the groups are recorded below their common
 * parent, the root's own too, and the root is born there again.  The
 * groups that hold a process of the tree, and those between them and the
 * root's, are recorded (cgroup.img), parents first, with their
 * cgroup.subtree_control and the limits of the controllers each one's
 * parent enables for it (a known set of knobs: memory.max, pids.max,
 * cpu.weight...); an empty group of the subtree is not (a container's
 * systemd makes its units' again as they start), unless a process of the
 * tree watches one of its files (inotify.c: systemd, its slices).  A threaded subtree is
 * refused.
 * A cgroup namespace's root is found from inside it: the process's path
 * there is its host path less the root.
 *
 * Restore: the directories are made below the one the root is born in
 * (one there already is used as it is: its controllers and limits are
 * not touched), before the tree is forked; each process is born into its
 * own with clone3's CLONE_INTO_CGROUP (restore.c).  A namespace's maker
 * moves itself into the namespace's root, unshares, and moves back into
 * its own.  Once every process is in place, the subtree_control files of
 * the groups it made are written top-down (the root's too, if it lacks
 * what it enabled), then their limits (a controller is enabled for a group
 * only when the group has no process of its own).  A failed restore
 * removes the directories it made. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "image.h"
#include "images/cgroup.pb-c.h"
#include "images/core.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "proc.h"
#include "restore-ctx.h"
#include "util.h"

/* the limits recorded, per controller: written back as read */
static const char *const knobs[] = {
	"cpu.weight",	   "cpu.max",	       "cpu.idle",    "memory.min",
	"memory.low",	   "memory.high",      "memory.max",  "memory.swap.high",
	"memory.swap.max", "memory.oom.group", "pids.max",    "io.weight",
	"io.max",	   "cpuset.cpus",      "cpuset.mems", "cpuset.cpus.partition",
};

/* the cgroup v2 mount point of kupdate's mount namespace, into buf */
static int cgroup2_mount(char *buf, size_t len)
{
	struct mount_table t;
	int ret = -ENOENT;

	if (mount_table_read(NULL, &t))
		return -EIO;
	for (size_t i = 0; i < t.n && ret; i++)
		if (!strcmp(t.e[i].fstype, "cgroup2") && !strcmp(t.e[i].root, "/")) {
			snprintf(buf, len, "%s", t.e[i].mp);
			ret = 0;
		}
	mount_table_free(&t);
	return ret;
}

/* the v2 line of a /proc/.../cgroup file ("0::PATH"): PATH, allocated */
static char *v2_path(const char *file)
{
	char *buf = NULL, *ret = NULL;
	size_t len;

	if (read_file_at(AT_FDCWD, file, &buf, &len))
		return NULL;
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, "0::", 3)) {
			l[strcspn(l, "\n")] = 0;
			ret = xstrdup(l + 3);
			break;
		}
	free(buf);
	return ret;
}

/* below: path relative to base ("" base itself), or NULL */
static const char *below(const char *path, const char *base)
{
	size_t n = strlen(base);

	if (!strcmp(base, "/"))
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, base, n) || (path[n] && path[n] != '/'))
		return NULL;
	return path[n] ? path + n + 1 : "";
}

/* ------------------------------------------------------------ dump */

static char *read_knob(int dirfd, const char *name)
{
	char *buf = NULL;
	size_t len;

	if (read_file_at(dirfd, name, &buf, &len)) {
		free(buf);
		return NULL;
	}
	while (len && buf[len - 1] == '\n')
		buf[--len] = 0;
	return buf;
}

static bool enabled(const char *subtree_control, const char *knob)
{
	size_t n = strcspn(knob, ".");

	for (const char *s = subtree_control; s && *s;) {
		size_t w = strcspn(s, " \n");

		if (w == n && !strncmp(s, knob, n))
			return true;
		s += w;
		s += strspn(s, " \n");
	}
	return false;
}

static int add_dir(struct cr_dump_ctx *ctx, const char *rel, const char *parent_ctl)
{
	struct cr_cgroups *g = &ctx->cg;
	_cleanup_free_ char *path = xasprintf("%s/%s", g->base_fs, rel);
	CgroupDir *d, **v;
	int dirfd;
	char *type;

	if (!path)
		return -ENOMEM;
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return pr_errno("cannot open the control group %s", path);
	type = read_knob(dirfd, "cgroup.type");
	if (type && strcmp(type, "domain")) {
		pr_err("the control group %s below the tree's is %s: kupdate does not make a "
		       "threaded subtree again",
		       path, type);
		free(type);
		close(dirfd);
		return -EOPNOTSUPP;
	}
	free(type);
	d = calloc(1, sizeof(*d));
	v = xrealloc_array(g->dirs, g->nr_dirs + 1, sizeof(*v));
	if (!d || !v) {
		free(d);
		close(dirfd);
		return -ENOMEM;
	}
	g->dirs = v;
	cgroup_dir__init(d);
	g->dirs[g->nr_dirs++] = d;
	d->path = xstrdup(rel);
	d->subtree_control = read_knob(dirfd, "cgroup.subtree_control");
	d->knobs = calloc(ARRAY_SIZE(knobs), sizeof(*d->knobs));
	if (!d->path || !d->knobs) {
		close(dirfd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ARRAY_SIZE(knobs); i++) {
		CgroupKnob *k;
		char *val;

		if (!enabled(parent_ctl, knobs[i]) || !(val = read_knob(dirfd, knobs[i])))
			continue;
		k = calloc(1, sizeof(*k));
		if (!k) {
			free(k);
			free(val);
			close(dirfd);
			return -ENOMEM;
		}
		cgroup_knob__init(k);
		k->name = (char *)knobs[i];
		k->value = val;
		d->knobs[d->n_knobs++] = k;
	}
	close(dirfd);
	return 0;
}

/* rel and the groups between it and the root's, parents first */
static int add_path(struct cr_dump_ctx *ctx, const char *rel)
{
	struct cr_cgroups *g = &ctx->cg;
	_cleanup_free_ char *pre = xstrdup(rel);
	int ret = 0;

	if (!pre)
		return -ENOMEM;
	for (char *s = pre; !ret && s;) {
		const char *ctl = g->root_ctl;
		char *slash = strchr(s, '/');
		bool have = false;

		if (slash)
			*slash = 0;
		for (size_t i = 0; i < g->nr_dirs && !have; i++)
			have = !strcmp(g->dirs[i]->path, pre);
		/* its parent's controllers (recorded just before) */
		if (strrchr(pre, '/')) {
			char *last = strrchr(pre, '/');

			*last = 0;
			for (size_t i = 0; i < g->nr_dirs; i++)
				if (!strcmp(g->dirs[i]->path, pre))
					ctl = g->dirs[i]->subtree_control;
			*last = '/';
		}
		if (!have)
			ret = add_dir(ctx, pre, ctl);
		if (slash)
			*slash = '/';
		s = slash ? slash + 1 : NULL;
	}
	return ret;
}

/* The group the others are recorded below: the root's, or its parent when
 * the root moved itself into a group of its own beside the rest of the
 * tree (systemd-nspawn's "supervisor", its container in "payload", both in
 * the unit's group).  A slice holds units, never a tree of one: the base
 * does not go up to one, nor to the top. */
static char *tree_base(struct cr_dump_ctx *ctx, char *const *paths)
{
	const char *root = paths[0];
	_cleanup_free_ char *parent = xstrdup(root);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	size_t n;

	if (!slash || slash == parent)
		return xstrdup(root);
	*slash = 0;
	n = strlen(parent);
	if (n >= 6 && !strcmp(parent + n - 6, ".slice"))
		return xstrdup(root);
	for (int i = 1; i < ctx->nr_procs; i++) {
		if (paths[i] && !below(paths[i], root) && below(paths[i], parent)) {
			pr_debug("pid %d is in %s, beside the root's %s: the groups are recorded "
				 "below %s",
				 ctx->procs[i]->pid, paths[i], root, parent);
			return xstrdup(parent);
		}
	}
	return xstrdup(root);
}

/* each process's group (NULL: none in cgroup v2, or gone), read once */
static char **read_paths(const struct cr_dump_ctx *ctx)
{
	char **paths = xzalloc(ctx->nr_procs * sizeof(*paths)), file[64];

	for (int i = 0; paths && i < ctx->nr_procs; i++) {
		snprintf(file, sizeof(file), "/proc/%d/cgroup", ctx->procs[i]->pid);
		paths[i] = v2_path(file);
	}
	return paths;
}

static void free_paths(const struct cr_dump_ctx *ctx, char **paths)
{
	for (int i = 0; paths && i < ctx->nr_procs; i++)
		free(paths[i]);
	free(paths);
}

static int record_groups(struct cr_dump_ctx *ctx, char *const *paths, const char *mnt)
{
	struct cr_cgroups *g = &ctx->cg;
	_cleanup_free_ char *base = tree_base(ctx, paths);
	bool any = false;
	int ret = 0;

	if (!base)
		return -ENOMEM;
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *p = ctx->procs[i];
		const char *rel = paths[i] ? below(paths[i], base) : NULL;

		if (rel && !(p->cgroup = xstrdup(rel)))
			return -ENOMEM;
		any |= (rel && rel[0]) || !ns_same(p->pid, ctx->procs[0]->pid, "cgroup");
	}
	g->base = xstrdup(base);
	g->base_fs = xasprintf("%s%s", mnt, strcmp(base, "/") ? base : "");
	if (!g->base || !g->base_fs)
		return -ENOMEM;
	/* a tree all in one group and cgroup namespace records nothing: its
	 * processes are born where the restore's root is, as ever */
	if (!any)
		return 0;
	{
		int fd = open(g->base_fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			return pr_errno("cannot open the control group %s", g->base_fs);
		g->root_ctl = read_knob(fd, "cgroup.subtree_control");
		close(fd);
	}
	for (int i = 0; i < ctx->nr_procs && !ret; i++)
		if (ctx->procs[i]->cgroup && ctx->procs[i]->cgroup[0])
			ret = add_path(ctx, ctx->procs[i]->cgroup);
	if (!ret)
		g->recorded = true;
	return ret;
}

int cgroups_dump(struct cr_dump_ctx *ctx)
{
	char mnt[PATH_MAX], **paths;
	int ret;

	if (!ctx->nr_procs || cgroup2_mount(mnt, sizeof(mnt)))
		return 0; /* no cgroup v2: nothing recorded, nothing placed */
	paths = read_paths(ctx);
	if (!paths)
		return -ENOMEM;
	/* the root's: none, nothing recorded, nothing placed */
	ret = paths[0] ? record_groups(ctx, paths, mnt) : 0;
	free_paths(ctx, paths);
	return ret;
}

int cgroups_record(struct cr_dump_ctx *ctx, const char *rel)
{
	if (!ctx->cg.recorded || !rel || !rel[0])
		return -ENOENT;
	pr_debug("the control group %s/%s, which holds no process of the tree, is recorded: "
		 "a process watches it",
		 ctx->cg.base, rel);
	return add_path(ctx, rel);
}

int cgroups_made_again(const struct cr_dump_ctx *ctx, const char *group, const char **relp)
{
	const struct cr_cgroups *g = &ctx->cg;
	const char *rel = g->base ? below(group, g->base) : NULL;

	*relp = rel;
	if (!rel)
		return -1;
	if (!rel[0])
		return 1;
	for (size_t i = 0; g->recorded && i < g->nr_dirs; i++)
		if (!strcmp(g->dirs[i]->path, rel))
			return 1;
	return 0;
}

/* the path of the calling thread's process in pid's cgroup namespace */
struct cgns_read {
	pid_t pid;
	char *path;
	int err;
};

static void *cgns_thread(void *arg)
{
	struct cgns_read *r = arg;
	char file[64];

	/* /proc/PID/cgroup answers relative to the reader's namespace root */
	snprintf(file, sizeof(file), "/proc/%d/cgroup", r->pid);
	r->path = v2_path(file);
	r->err = r->path ? 0 : -EIO;
	return NULL;
}

int cgroups_ns_root(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct cgns_read r = { .pid = p->pid };
	const char *in;
	size_t lh, li;
	int ret;

	if (!ctx->cg.recorded || !p->cgroup) {
		pr_err("pid %d (%s) made a cgroup namespace of its own, rooted outside the "
		       "control groups below the tree's root (cgroup v2 only)",
		       p->pid, p->stat.comm);
		return -EOPNOTSUPP;
	}
	ret = proc_run_in_ns(p->pid, "cgroup", cgns_thread, &r);
	if (!ret)
		ret = r.err;
	if (ret) {
		free(r.path);
		pr_err("pid %d: cannot read its control group in its cgroup namespace: %s", p->pid,
		       strerror(-ret));
		return ret;
	}
	/* host: BASE/ROOT/INSIDE, inside: /INSIDE (or "/" at the root) */
	in = r.path[0] == '/' ? r.path + 1 : r.path;
	lh = strlen(p->cgroup);
	li = strlen(in);
	if (!li)
		p->cgroup_ns_root = xstrdup(p->cgroup);
	else if (lh == li && !strcmp(p->cgroup, in))
		p->cgroup_ns_root = xstrdup("");
	else if (lh > li && p->cgroup[lh - li - 1] == '/' && !strcmp(p->cgroup + lh - li, in))
		p->cgroup_ns_root = strndup(p->cgroup, lh - li - 1);
	else {
		pr_err("pid %d (%s) made a cgroup namespace whose root kupdate cannot place "
		       "below the tree's control group (its group %s there, /%s inside)",
		       p->pid, p->stat.comm, p->cgroup, in);
		free(r.path);
		return -EOPNOTSUPP;
	}
	free(r.path);
	return p->cgroup_ns_root ? 0 : -ENOMEM;
}

int cgroups_write(struct cr_dump_ctx *ctx)
{
	struct cr_cgroups *g = &ctx->cg;
	CgroupEntry e = CGROUP_ENTRY__INIT;
	struct img_writer w;
	int ret;

	if (!g->recorded)
		return 0;
	e.n_dirs = g->nr_dirs;
	e.dirs = g->dirs;
	e.root_subtree_control = g->root_ctl;
	ret = img_writer_open(&w, ctx->dirfd, "cgroup.img", IMG_CGROUP);
	if (ret)
		return ret;
	ret = img_write(&w, &e.base);
	if (ret) {
		img_writer_abort(&w);
		return ret;
	}
	return img_writer_close(&w);
}

void cgroups_free_dump(struct cr_dump_ctx *ctx)
{
	struct cr_cgroups *g = &ctx->cg;

	for (size_t i = 0; i < g->nr_dirs; i++) {
		CgroupDir *d = g->dirs[i];

		for (size_t k = 0; k < d->n_knobs; k++) {
			free(d->knobs[k]->value);
			free(d->knobs[k]);
		}
		free(d->knobs);
		free(d->path);
		free(d->subtree_control);
		free(d);
	}
	free(g->dirs);
	free(g->base);
	free(g->base_fs);
	free(g->root_ctl);
	memset(g, 0, sizeof(*g));
}

/* ---------------------------------------------------------- restore */

static int dir_index(const struct rcgroups *g, const char *rel)
{
	for (size_t i = 0; g->img && i < g->img->n_dirs; i++)
		if (!strcmp(g->img->dirs[i]->path, rel))
			return (int)i;
	return -1;
}

/* the fd of the group rel below the root's ("" the root's own), or -1 */
static int fd_of(const struct rcgroups *g, const char *rel)
{
	int i;

	if (!rel)
		return -1;
	if (!rel[0])
		return g->base_fd;
	i = dir_index(g, rel);
	return i < 0 ? -1 : g->fds[i];
}

/* where the root is born: its place given by the caller, or ours */
static char *restore_base(const struct rctx *c)
{
	char mnt[PATH_MAX], link[64], path[PATH_MAX];
	_cleanup_free_ char *own = NULL;
	ssize_t n;

	for (size_t i = 0; i < c->opts->nr_cgroups; i++)
		if (c->opts->cgroups[i].pid == c->procs[0].pid) {
			snprintf(link, sizeof(link), "/proc/self/fd/%d", c->opts->cgroups[i].fd);
			n = readlink(link, path, sizeof(path) - 1);
			if (n <= 0)
				return NULL;
			path[n] = 0;
			return xstrdup(path);
		}
	own = v2_path("/proc/self/cgroup");
	if (!own || cgroup2_mount(mnt, sizeof(mnt)))
		return NULL;
	return xasprintf("%s%s", mnt, strcmp(own, "/") ? own : "");
}

static int load(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m = NULL;
	int ret = img_reader_open(&r, c->dirfd, "cgroup.img", IMG_CGROUP);

	if (ret)
		return ret;
	ret = img_read_first(&r, &cgroup_entry__descriptor, &m);
	img_reader_close(&r);
	if (ret)
		return ret;
	c->cg.img = (CgroupEntry *)m;
	return 0;
}

int cgroups_restore_prepare(struct rctx *c)
{
	struct rcgroups *g = &c->cg;
	size_t n;
	int ret;

	g->base_fd = -1;
	for (size_t i = 0; i < c->nr; i++)
		c->procs[i].cg_fd = -1;
	if (faccessat(c->dirfd, "cgroup.img", F_OK, 0))
		return 0;
	ret = load(c);
	if (ret)
		return ret;
	n = g->img->n_dirs;
	g->base_fs = restore_base(c);
	g->fds = malloc((n + 1) * sizeof(*g->fds));
	g->made = calloc(n + 1, sizeof(*g->made));
	if (!g->base_fs || !g->fds || !g->made)
		return pr_err("cannot find the control group the tree's root is born in (cgroup "
			      "v2)"),
		       -ENOENT;
	g->base_fd = open(g->base_fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g->base_fd < 0)
		return pr_errno("cannot open the control group %s", g->base_fs);
	for (size_t i = 0; i < n; i++)
		g->fds[i] = -1;
	for (size_t i = 0; i < n; i++) {
		const char *rel = g->img->dirs[i]->path;

		if (!rel[0] || rel[0] == '/' || strstr(rel, "..")) {
			pr_err("image cgroup.img is damaged: a control group '%s'", rel);
			return -EINVAL;
		}
		if (mkdirat(g->base_fd, rel, 0755) && errno != EEXIST)
			return pr_errno("cannot make the control group %s/%s", g->base_fs, rel);
		g->made[i] = errno != EEXIST;
		errno = 0;
		g->fds[i] = openat(g->base_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (g->fds[i] < 0)
			return pr_errno("cannot open the control group %s/%s", g->base_fs, rel);
	}
	for (size_t i = 0; i < c->nr; i++) {
		const char *rel = c->procs[i].pe->cgroup;

		if (rel && (c->procs[i].cg_fd = fd_of(g, rel)) < 0) {
			pr_err("image pstree.img is damaged: pid %d's control group %s is not in "
			       "cgroup.img",
			       c->procs[i].pid, rel);
			return -EINVAL;
		}
	}
	return 0;
}

static int move_self(int dirfd, const char *what, pid_t pid)
{
	int fd = openat(dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	int ret = fd < 0 || write(fd, "0", 1) != 1 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	if (ret)
		pr_err("pid %d: cannot move into %s: %s", pid, what, strerror(-ret));
	return ret;
}

int cgroups_move_pid(const struct rctx *c, const char *rel, pid_t pid)
{
	int dirfd = fd_of(&c->cg, rel), fd, ret = 0;
	char buf[16];

	if (dirfd < 0) {
		pr_err("image cgroup.img is damaged: it has no control group %s",
		       rel ? rel : "(none)");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%d", pid);
	fd = openat(dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		ret = pr_errno("cannot move pid %d into the control group %s", pid, rel);
	if (fd >= 0)
		close(fd);
	return ret;
}

int cgroups_make_ns(const struct rctx *c, const struct rproc *rp, const char *root)
{
	int rootfd = fd_of(&c->cg, root);
	int ret;

	if (rootfd < 0 || rp->cg_fd < 0) {
		pr_err("image core-%d.img is damaged: its cgroup namespace's root %s is not in "
		       "cgroup.img",
		       rp->pid, root ? root : "(none)");
		return -EINVAL;
	}
	ret = move_self(rootfd, "the root of its cgroup namespace", rp->pid);
	if (!ret && unshare(CLONE_NEWCGROUP))
		ret = pr_errno("pid %d: cannot make its cgroup namespace again", rp->pid);
	if (!ret)
		ret = move_self(rp->cg_fd, "its control group", rp->pid);
	return ret;
}

static int write_knob(int dirfd, const char *dir, const char *name, const char *value)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return pr_errno("cannot open %s of the control group %s", name, dir);
	/* io.max and io.weight: a line at a time */
	for (const char *l = value; *l && !ret;) {
		size_t n = strcspn(l, "\n");

		if (n && write(fd, l, n) != (ssize_t)n)
			ret = pr_errno("cannot set %s of the control group %s to '%.*s'", name, dir,
				       (int)n, l);
		l += n;
		l += *l == '\n';
	}
	close(fd);
	return ret;
}

/* "cpu memory" -> "+cpu +memory" */
static int enable(int dirfd, const char *dir, const char *ctl)
{
	char buf[512];
	size_t o = 0;

	for (const char *s = ctl; *s && o < sizeof(buf) - 2;) {
		size_t w = strcspn(s, " \n");

		if (w)
			o += snprintf(buf + o, sizeof(buf) - o, "%s+%.*s", o ? " " : "", (int)w, s);
		s += w;
		s += strspn(s, " \n");
	}
	buf[o] = 0;
	return o ? write_knob(dirfd, dir, "cgroup.subtree_control", buf) : 0;
}

#define RENOTIFY_MS 2000

/* the frozen line of the group's cgroup.events says frozen */
static bool is_frozen(int dirfd, bool frozen)
{
	_cleanup_free_ char *ev = read_knob(dirfd, "cgroup.events");

	return ev && strstr(ev, frozen ? "frozen 1" : "frozen 0");
}

int cgroups_renotify(const struct rctx *c, const char *rel)
{
	int dirfd = fd_of(&c->cg, rel), own = -1, ret;
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + RENOTIFY_MS * 1000000LL;
	_cleanup_free_ char *base = NULL, *v = NULL;
	bool was;

	if (dirfd < 0 && !rel[0] && (base = restore_base(c)))
		dirfd = own = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		pr_err("the control group %s/%s was not made again: its watchers' events cannot "
		       "be made again",
		       c->cg.base_fs ? c->cg.base_fs : "(the root's)", rel);
		return -ENOENT;
	}
	v = read_knob(dirfd, "cgroup.freeze");
	was = v && v[0] == '1';
	ret = write_knob(dirfd, rel, "cgroup.freeze", was ? "0" : "1");
	/* its processes are stopped: the freezer counts them frozen at once */
	while (!ret && !is_frozen(dirfd, !was) && now_ns(CLOCK_MONOTONIC) < deadline)
		usleep(1000);
	if (!ret && !is_frozen(dirfd, !was)) {
		pr_err("the control group '%s' did not %s within %d s", rel,
		       was ? "thaw" : "freeze", RENOTIFY_MS / 1000);
		ret = -ETIMEDOUT;
	}
	if (write_knob(dirfd, rel, "cgroup.freeze", was ? "1" : "0") && !ret)
		ret = -EIO;
	if (own >= 0)
		close(own);
	return ret;
}

int cgroups_restore_finish(struct rctx *c)
{
	struct rcgroups *g = &c->cg;
	const char *want;
	char *have = NULL;
	int ret = 0;

	if (!g->img)
		return 0;
	/* the root's controllers for the groups below, if it lacks them */
	want = g->img->root_subtree_control;
	if (want && want[0]) {
		have = read_knob(g->base_fd, "cgroup.subtree_control");
		if (!have || strcmp(have, want))
			ret = enable(g->base_fd, g->base_fs, want);
		free(have);
	}
	for (size_t i = 0; i < g->img->n_dirs && !ret; i++)
		if (g->made[i] && g->img->dirs[i]->subtree_control)
			ret = enable(g->fds[i], g->img->dirs[i]->path,
				     g->img->dirs[i]->subtree_control);
	for (size_t i = 0; i < g->img->n_dirs && !ret; i++) {
		const CgroupDir *d = g->img->dirs[i];

		for (size_t k = 0; g->made[i] && k < d->n_knobs && !ret; k++)
			ret = write_knob(g->fds[i], d->path, d->knobs[k]->name, d->knobs[k]->value);
	}
	return ret;
}

void cgroups_restore_done(struct rctx *c, bool failed)
{
	struct rcgroups *g = &c->cg;
	size_t n = g->img ? g->img->n_dirs : 0;

	for (size_t i = n; i-- > 0;) {
		if (g->fds && g->fds[i] >= 0)
			close(g->fds[i]);
		/* (its processes are gone, or it stays) */
		if (failed && g->made && g->made[i] && g->base_fd >= 0)
			unlinkat(g->base_fd, g->img->dirs[i]->path, AT_REMOVEDIR);
	}
	if (g->base_fd >= 0)
		close(g->base_fd);
	if (g->img)
		cgroup_entry__free_unpacked(g->img, NULL);
	free(g->fds);
	free(g->made);
	free(g->base_fs);
	memset(g, 0, sizeof(*g));
	g->base_fd = -1;
}
