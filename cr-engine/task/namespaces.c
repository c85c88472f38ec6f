/* Namespaces: a tree in mount, UTS and IPC namespaces of its own (a
 * systemd unit's PrivateTmp=, ProtectSystem=, ProtectHostname=,
 * PrivateIPC=...).
 *
 * The engine does not build such namespaces: the caller gives the restore
 * a process that lives in equivalent ones (cr_restore_opts.ns_pid; in a
 * cycle, a process systemd started with the unit's own sandboxing, so that
 * the confinement is exactly the unit's), kupdate enters them before it
 * forks the tree, and every process is created inside.
 *
 * Dump: every process of the tree must share its parent's namespaces (one
 * that made its own, unshare(1) inside a unit, is refused naming it), but
 * for a UTS namespace and an IPC namespace without System V objects that
 * a process made for itself and its descendants (a container's init):
 * recorded in its core image (task_core.made_ns, its names), made again by
 * the process right after its birth (ns_restore_made); those
 * of the root that are not kupdate's must be allowed (cr_dump_opts.
 * own_namespaces) and be a mount, UTS or IPC namespace.  Recorded in
 * namespaces.img: which are the tree's own, its host and domain names, and
 * the mounts its mount namespace has that kupdate's has not (the
 * sandboxing: read-only remounts, inaccessible paths, private /tmp and
 * /dev), with a systemd-private-* directory name made "*".  Paths the dump
 * checks are looked up through /proc/ROOT/root (dump_path(), dump.h).  The
 * contents of the directories no file system outside keeps (tmpdir.c) are
 * saved with them.
 *
 * Restore: the given process's namespaces must be the tree's own exactly
 * where the images say so, and its mounts that kupdate's lack must be the
 * recorded ones (a unit whose ReadWritePaths= changed, a path gone, is
 * refused before anything is created); kupdate enters them, sets the names
 * back, fills the saved directories, and leaves them once the tree runs. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "image.h"
#include "images/namespaces.pb-c.h"
#include "log.h"
#include "proc.h"
#include "namespaces.h"
#include "mntns.h"
#include "netlock.h"
#include "restore-ctx.h"
#include "tmpdir.h"
#include "util.h"

static const struct ns_kind {
	const char *name;
	unsigned bit;	  /* its CLONE_NEW* */
	int flag;	  /* the same where the tree may have it of its own, else 0 */
	const char *what; /* in messages */
} kinds[] = {
	{ "mnt", CLONE_NEWNS, CLONE_NEWNS, "mount namespace" },
	{ "uts", CLONE_NEWUTS, CLONE_NEWUTS, "UTS namespace" },
	{ "ipc", CLONE_NEWIPC, CLONE_NEWIPC, "IPC namespace" },
	{ "net", CLONE_NEWNET, CLONE_NEWNET, "network namespace" },
	{ "pid", CLONE_NEWPID, 0, "pid namespace (a container)" },
	{ "user", CLONE_NEWUSER, CLONE_NEWUSER, "user namespace" },
	{ "cgroup", CLONE_NEWCGROUP, 0, "cgroup namespace" },
};

/* ------------------------------------------------------------ dump */

int cr_process_namespaces(pid_t pid, unsigned *own, unsigned *kept)
{
	struct stat st;
	int ret;

	*own = *kept = 0;
	ret = ns_stat(pid, "mnt", &st);
	if (ret)
		return ret;
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!ns_same(pid, 0, kinds[i].name)) {
			*own |= kinds[i].bit;
			if (kinds[i].flag)
				*kept |= kinds[i].bit;
		}
	return 0;
}

void cr_namespace_names(unsigned flags, char *buf, size_t len)
{
	size_t o = 0;

	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if ((flags & kinds[i].bit) && o < len)
			o += snprintf(buf + o, len - o, "%s%s", o ? " " : "", kinds[i].name);
}

bool ns_proc_made_mnt(const struct cr_dump_ctx *ctx, const struct cr_proc *p)
{
	return p->parent && !ns_same(p->pid, p->parent->pid, "mnt") &&
	       !ns_same(p->pid, ctx->procs[0]->pid, "mnt");
}

/* Every process shares its parent's namespaces, or made a UTS or IPC
 * namespace of its own (a container's init) that its descendants share;
 * pid namespaces are pidns.c's */
int ns_check_proc(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	pid_t root = ctx->procs[0]->pid, up = p->parent ? p->parent->pid : root;

	if (p->pid == root)
		return 0; /* ns_dump() looked at it */
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		int ret;

		if (kinds[i].bit == CLONE_NEWPID || ns_same(p->pid, up, kinds[i].name))
			continue;
		/* made again by p alone: no other process of the tree
		 * entered it (setns) */
		for (int k = 0; k < ctx->nr_procs && ctx->procs[k] != p; k++)
			if ((ctx->procs[k]->made_ns & kinds[i].bit) &&
			    ns_same(p->pid, ctx->procs[k]->pid, kinds[i].name)) {
				pr_err("pid %d (%s) entered the %s that pid %d made (setns), which "
				       "kupdate cannot restore",
				       p->pid, p->stat.comm, kinds[i].what, ctx->procs[k]->pid);
				return -EOPNOTSUPP;
			}
		/* marked by dump.c before the process was looked at */
		if (kinds[i].bit == CLONE_NEWNS && (p->made_ns & CLONE_NEWNS)) {
			ret = (ctx->ns && (ctx->ns->own & CLONE_NEWUSER)) || userns_maker(p->parent)
				      ? nsmade_check(ctx, p, kinds[i].bit, kinds[i].what)
				      : mntns_dump(ctx, p);
			if (ret)
				return ret;
			continue;
		}
		if ((kinds[i].bit == CLONE_NEWUTS || kinds[i].bit == CLONE_NEWIPC ||
		     kinds[i].bit == CLONE_NEWNET || kinds[i].bit == CLONE_NEWCGROUP ||
		     kinds[i].bit == CLONE_NEWUSER) &&
		    p->parent && !ns_same(p->pid, root, kinds[i].name)) {
			ret = nsmade_check(ctx, p, kinds[i].bit, kinds[i].what);
			if (ret)
				return ret;
			continue;
		}
		pr_err("pid %d (%s) made a %s of its own inside the tree (unshare), which "
		       "kupdate cannot restore; the tree's root %d lives in another",
		       p->pid, p->stat.comm, kinds[i].what, root);
		return -EOPNOTSUPP;
	}
	/* its threads, in a container's pid and user namespaces */
	return userns_check_member(p, NULL);
}

/* a systemd-private-BOOTID-UNIT-RANDOM component becomes systemd-private-*:
 * the same unit's private directory in another boot */
static char *normalize_root(const char *root)
{
	char *s = xstrdup(root), *p;

	if (s && (p = strstr(s, "/systemd-private-"))) {
		char *end = strchr(p + 1, '/');

		memcpy(p, "/systemd-private-*", 18);
		if (end)
			memmove(p + 18, end, strlen(end) + 1);
		else
			p[18] = 0;
	}
	return s;
}

static bool same_mount(const struct mount_entry *a, const struct mount_entry *b)
{
	return !strcmp(a->mp, b->mp) && !strcmp(a->fstype, b->fstype) &&
	       !strcmp(a->root, b->root) && !strcmp(a->vfs, b->vfs) && a->maj == b->maj &&
	       a->min == b->min;
}

/* the mounts of table t that host has not: what the sandboxing made */
static int mounts_delta(const struct mount_table *t, const struct mount_table *host, NsMount ***out,
			size_t *nr)
{
	NsMount **m = NULL;
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct mount_entry *e = &t->e[i];
		bool found = false;
		NsMount *x;

		for (size_t j = 0; j < host->n && !found; j++)
			found = same_mount(e, &host->e[j]);
		if (found)
			continue;
		m = xrealloc_array(m, n + 1, sizeof(*m));
		x = m ? xzalloc(sizeof(*x)) : NULL;
		if (!x)
			goto nomem;
		m[n++] = x;
		ns_mount__init(x);
		x->point = xstrdup(e->mp);
		x->fstype = xstrdup(e->fstype);
		x->root = normalize_root(e->root);
		x->options = xstrdup(e->vfs);
		if (!x->point || !x->fstype || !x->root || !x->options)
			goto nomem;
	}
	*out = m;
	*nr = n;
	return 0;
nomem:
	for (size_t i = 0; i < n; i++)
		ns_mount__free_unpacked(m[i], NULL);
	free(m);
	return -ENOMEM;
}

static void free_mounts(NsMount **m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ns_mount__free_unpacked(m[i], NULL);
	free(m);
}

/* Directories whose contents nothing outside the namespace keeps: a
 * systemd PrivateTmp= directory, a whole tmpfs that no mount of kupdate's
 * namespace shows (TemporaryFileSystem=, ProtectHome=tmpfs), but not /dev
 * (PrivateDevices=), whose nodes the namespace's maker makes.  Not a bind
 * of a directory of a tmpfs (systemd's inaccessible nodes under /run),
 * nor a tmpfs kupdate's namespace shows too (it is the host's). */
static bool saved_whole(const struct mount_entry *e, const struct mount_table *host)
{
	size_t n = strlen(e->root);

	if (strstr(e->root, "/systemd-private-") && n > 4 && !strcmp(e->root + n - 4, "/tmp"))
		return true;
	if (strcmp(e->fstype, "tmpfs") || strcmp(e->root, "/") || !strcmp(e->mp, "/dev") ||
	    !strncmp(e->mp, "/dev/", 5))
		return false;
	for (size_t j = 0; j < host->n; j++)
		if (host->e[j].maj == e->maj && host->e[j].min == e->min)
			return false;
	return true;
}

static int read_uts(pid_t pid, struct cr_ns *ns)
{
	return ns_read_names(pid, &ns->hostname, &ns->domainname);
}

static int read_mounts(struct cr_dump_ctx *ctx, struct cr_ns *ns)
{
	struct mount_table t = { 0 }, host = { 0 };
	_cleanup_free_ char *path = xasprintf("/proc/%d/mountinfo", ctx->procs[0]->pid);
	int ret;

	if (!path)
		return -ENOMEM;
	ret = mount_table_read(path, &t);
	if (!ret)
		ret = mount_table_read(NULL, &host);
	if (!ret)
		ret = mounts_delta(&t, &host, &ns->mounts, &ns->nr_mounts);
	if (ret)
		pr_err("pid %d: cannot read its mount table: %s", ctx->procs[0]->pid,
		       strerror(-ret));
	for (size_t i = 0; i < t.n && !ret; i++)
		if (saved_whole(&t.e[i], &host))
			ret = tmpdir_dump(ctx, t.e[i].mp);
	if (!ret && host.n) {
		ns->host_points = xrealloc_array(NULL, host.n, sizeof(char *));
		ns->host_copies = xrealloc_array(NULL, host.n, sizeof(char *));
		if (!ns->host_points || !ns->host_copies)
			ret = -ENOMEM;
		for (size_t i = 0; !ret && i < host.n; i++) {
			bool copy = false;

			ns->host_points[i] = xstrdup(host.e[i].mp);
			ret = ns->host_points[i] ? 0 : -ENOMEM;
			ns->nr_host_points = i + 1;
			/* shown as the host shows it (not the root) */
			for (size_t j = 0; j < t.n && !copy && strcmp(host.e[i].mp, "/"); j++)
				copy = same_mount(&t.e[j], &host.e[i]);
			if (!ret && copy) {
				ns->host_copies[ns->nr_host_copies] = xstrdup(host.e[i].mp);
				ret = ns->host_copies[ns->nr_host_copies++] ? 0 : -ENOMEM;
			}
		}
	}
	mount_table_free(&t);
	mount_table_free(&host);
	return ret;
}

static int enter_ipc(pid_t pid, struct cr_ns *ns)
{
	char path[64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ns->ipc_saved = open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ns->ipc_saved < 0 || setns(fd, CLONE_NEWIPC))
		ret = pr_errno("pid %d: cannot enter its IPC namespace", pid);
	if (fd >= 0)
		close(fd);
	return ret;
}

int ns_dump(struct cr_dump_ctx *ctx)
{
	pid_t root = ctx->procs[0]->pid;
	struct cr_ns *ns = xzalloc(sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	ns->ipc_saved = ns->net_fd = ns->net_saved = -1;
	ctx->ns = ns;
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		/* made again by the restore (pidns.c), not entered */
		if (kinds[i].bit == CLONE_NEWPID || ns_same(root, 0, kinds[i].name))
			continue;
		if (!kinds[i].flag) {
			pr_err("pid %d lives in its own %s, which this kupdate cannot restore; run "
			       "the service without it",
			       root, kinds[i].what);
			return -EOPNOTSUPP;
		}
		if (!ctx->opts->own_namespaces) {
			pr_err("pid %d lives in its own %s; its restore needs a process in an "
			       "equivalent one (kupdate dump --own-namespaces, restore "
			       "--namespaces-of PID)",
			       root, kinds[i].what);
			return -EOPNOTSUPP;
		}
		ns->own |= kinds[i].flag;
	}
	if (ns->own & CLONE_NEWNS)
		snprintf(ctx->root_prefix, sizeof(ctx->root_prefix), "/proc/%d/root", root);
	if (ns->own & CLONE_NEWUTS) {
		int ret = read_uts(root, ns);

		if (ret)
			return ret;
	}
	if (ns->own & CLONE_NEWUSER) {
		int ret = ns_read_idmaps(root, "its user namespace", &ns->uid_map, &ns->gid_map,
					 &ns->setgroups);

		if (ret)
			return ret;
	}
	/* its System V segments are looked at (IPC_STAT) from inside: this
	 * thread enters the namespace (a thread may) until the dump ends */
	if (ns->own & CLONE_NEWIPC) {
		int ret = enter_ipc(root, ns);

		if (ret)
			return ret;
	}
	/* and its network namespace, as long as it looks at the tree */
	if (ns->own & CLONE_NEWNET) {
		int ret = netns_dump(ctx);

		if (ret)
			return ret;
	}
	if (ns->own & CLONE_NEWNS)
		return read_mounts(ctx, ns);
	return 0;
}

bool ns_saved_path(const struct cr_dump_ctx *ctx, pid_t owner, const char *path)
{
	return ctx->ns && tmpdir_holds(ctx, owner, path);
}

int ns_write(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;
	NsEntry e = NS_ENTRY__INIT;
	char *own[ARRAY_SIZE(kinds)];
	struct img_writer w;
	int ret;

	if (!ns)
		return 0;
	if (!ns->own) {
		/* a container's tmpfs contents (mntns.c), with no namespace of
		 * the tree's own */
		char **paths = NULL;
		size_t n;

		ret = tmpdir_write(ctx, &paths, &n);
		free(paths);
		return ret;
	}
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (ns->own & kinds[i].flag)
			own[e.n_own++] = (char *)kinds[i].name;
	e.own = own;
	e.hostname = ns->hostname;
	e.domainname = ns->domainname;
	e.n_mounts = ns->nr_mounts;
	e.mounts = ns->mounts;
	e.n_host_points = ns->nr_host_points;
	e.host_points = ns->host_points;
	e.n_host_copies = ns->nr_host_copies;
	e.host_copies = ns->host_copies;
	e.uid_map = ns->uid_map;
	e.gid_map = ns->gid_map;
	e.setgroups = ns->setgroups;
	e.n_net_addrs = ns->nr_net_addrs;
	e.net_addrs = ns->net_addrs;
	ret = tmpdir_write(ctx, &e.tmpdirs, &e.n_tmpdirs);
	if (ret)
		return ret;
	ret = img_writer_open(&w, ctx->dirfd, "namespaces.img", IMG_NS);
	if (!ret) {
		img_write(&w, &e.base);
		ret = img_writer_close(&w);
	}
	free(e.tmpdirs);
	return ret;
}

void ns_dump_done(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	if (!ns || ns->ipc_saved < 0)
		return;
	if (setns(ns->ipc_saved, CLONE_NEWIPC))
		pr_perror("cannot go back to kupdate's own IPC namespace");
	close(ns->ipc_saved);
	ns->ipc_saved = -1;
}

void ns_free_dump(struct cr_dump_ctx *ctx)
{
	struct cr_ns *ns = ctx->ns;

	if (!ns)
		return;
	ns_dump_done(ctx);
	netns_leave(ctx);
	if (ns->net_fd >= 0)
		close(ns->net_fd);
	strv_free(ns->net_addrs, ns->nr_net_addrs);
	free(ns->conns);
	tmpdir_free_dump(ctx);
	free_mounts(ns->mounts, ns->nr_mounts);
	for (size_t i = 0; i < ns->nr_host_points; i++)
		free(ns->host_points[i]);
	free(ns->host_points);
	for (size_t i = 0; i < ns->nr_host_copies; i++)
		free(ns->host_copies[i]);
	free(ns->host_copies);
	free(ns->hostname);
	free(ns->domainname);
	free(ns->uid_map);
	free(ns->gid_map);
	free(ns->setgroups);
	free(ns);
	ctx->ns = NULL;
}

/* ------------------------------------------------------------ restore */

static int own_flags(const NsEntry *e, int *flags)
{
	*flags = 0;
	for (size_t i = 0; i < e->n_own; i++) {
		size_t k;

		for (k = 0; k < ARRAY_SIZE(kinds); k++)
			if (kinds[k].flag && !strcmp(e->own[i], kinds[k].name))
				break;
		if (k == ARRAY_SIZE(kinds)) {
			pr_err("image namespaces.img names a namespace this kupdate cannot enter: "
			       "%s",
			       e->own[i]);
			return -EINVAL;
		}
		*flags |= kinds[k].flag;
	}
	return 0;
}

/* The same mount: point, type, root and options.  The root of a namespace
 * file's bind (nsfs: "net:[4026532291]", as `ip netns` or another unit
 * binds one at /run/netns/NAME) is that namespace's inode, another in every
 * boot: not compared (CI cold-started redis-server, whose namespace held
 * the host's bind of demo-netns-setup's namespace, "lacks the tree's mount
 * of net:[...]" with the new boot's bind in its place). */
static bool mount_in(const NsMount *m, NsMount *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(m->point, set[i]->point) && !strcmp(m->fstype, set[i]->fstype) &&
		    (!strcmp(m->fstype, "nsfs") || !strcmp(m->root, set[i]->root)) &&
		    !strcmp(m->options, set[i]->options))
			return true;
	return false;
}

/* The host's namespaces, for a restore: pid 1's (systemd runs a unit's
 * command with its network and IPC namespaces even when the command's "+"
 * lifts the rest, and kupdate may be that command), or kupdate's own where
 * pid 1's cannot be looked at. */
static pid_t host_ref(void)
{
	struct stat st;

	return ns_stat(1, "mnt", &st) ? 0 : 1;
}

static bool in_list(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* A mount of the sandboxing over a mount point of the host's counts only
 * if the host had it at the dump and has it now: the host's own mounts
 * come and go (a disk mounted later in the boot), not the unit's
 * configuration.  And one the given namespace has beyond the tree's (extra)
 * not where the tree's showed the host's mount as it is (but the root):
 * the host mounted it after the unit started, the propagation brought it
 * in unchanged, and a start of the unit now confines it (ProtectSystem=
 * makes it read-only, as the rest).  Known limit: a change of the unit's
 * configuration that only confines such a mount point more is taken for
 * that; the restored tree is then confined as a start of the new
 * configuration. */
static bool has_point(const struct mount_table *t, const char *point)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->e[i].mp, point))
			return true;
	return false;
}

static bool counts(const char *point, const NsEntry *e, const struct mount_table *host, bool extra)
{
	bool then = in_list(e->host_points, e->n_host_points, point), now = has_point(host, point);

	if (extra && then && in_list(e->host_copies, e->n_host_copies, point))
		return false;
	return then == now;
}

/* A host mount point the given namespace has no mount at, while the host
 * has one there now: the host mounted it after this boot made the
 * namespace (a copy of the host's table at that moment), so what the tree
 * had there is not the unit's to miss (a network namespace `ip netns` or
 * another unit binds at /run/netns/NAME while the restore's anchor starts:
 * redis-server was cold-started so in a CI run). */
static bool host_mounted_later(const char *point, const NsEntry *e, const struct mount_table *host,
			       const struct mount_table *t)
{
	return in_list(e->host_points, e->n_host_points, point) && has_point(host, point) &&
	       !has_point(t, point);
}

/* the mounts the given process has beyond the host's are those recorded */
static int check_mounts(const NsEntry *e, pid_t pid)
{
	struct mount_table t = { 0 }, host = { 0 };
	_cleanup_free_ char *path = xasprintf("/proc/%d/mountinfo", pid);
	NsMount **now = NULL;
	size_t nr = 0;
	int ret;

	if (!path)
		return -ENOMEM;
	ret = mount_table_read(path, &t);
	if (!ret)
		ret = mount_table_read(host_ref() ? "/proc/1/mountinfo" : NULL, &host);
	if (!ret)
		ret = mounts_delta(&t, &host, &now, &nr);
	if (ret) {
		pr_err("pid %d: cannot read its mount table: %s", pid, strerror(-ret));
		goto out;
	}
	for (size_t i = 0; i < e->n_mounts && !ret; i++)
		if (counts(e->mounts[i]->point, e, &host, false) &&
		    !mount_in(e->mounts[i], now, nr) &&
		    !host_mounted_later(e->mounts[i]->point, e, &host, &t)) {
			pr_err("the mount namespace of pid %d lacks the tree's mount of %s on %s "
			       "(%s %s): the namespace's configuration changed since the dump",
			       pid, e->mounts[i]->root, e->mounts[i]->point, e->mounts[i]->fstype,
			       e->mounts[i]->options);
			ret = -ESTALE;
		}
	for (size_t i = 0; i < nr && !ret; i++)
		if (counts(now[i]->point, e, &host, true) &&
		    !mount_in(now[i], e->mounts, e->n_mounts)) {
			pr_err("the mount namespace of pid %d has a mount the tree's had not: %s "
			       "on "
			       "%s (%s %s): the namespace's configuration changed since the dump",
			       pid, now[i]->root, now[i]->point, now[i]->fstype, now[i]->options);
			ret = -ESTALE;
		}
out:
	mount_table_free(&t);
	mount_table_free(&host);
	free_mounts(now, nr);
	return ret;
}

/* the given process's user namespace maps the ids as the tree's did */
static int check_userns(const NsEntry *e, pid_t pid)
{
	const char *names[] = { "uid_map", "gid_map", "setgroups" };
	const char *want[] = { e->uid_map, e->gid_map, e->setgroups };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		_cleanup_free_ char *now = ns_read_squeezed(pid, names[i]);

		if (!want[i]) {
			pr_err("image namespaces.img is damaged: it has no %s", names[i]);
			return -EINVAL;
		}
		if (!now || strcmp(now, want[i])) {
			pr_err("the user namespace of pid %d has %s '%s', the tree's had '%s': the "
			       "namespace's configuration changed since the dump",
			       pid, names[i], now ? now : "(unreadable)", want[i]);
			return -ESTALE;
		}
	}
	return 0;
}

uint32_t ns_id_inside(const struct rctx *c, uint32_t id, bool gid)
{
	const struct ns_idmap *map = gid ? c->ns_gidmap : c->ns_uidmap;
	size_t nr = gid ? c->ns_nr_gidmap : c->ns_nr_uidmap;

	if (c->ns_userns_fd < 0 && !c->ns_in_userns)
		return id;
	for (size_t i = 0; i < nr; i++)
		if (id >= map[i].outside && id - map[i].outside < map[i].count)
			return map[i].inside + (id - map[i].outside);
	return 65534; /* unmapped: the overflow id (the dump's view had it mapped) */
}

static int check_given(const NsEntry *e, int own, pid_t pid)
{
	pid_t host = host_ref();

	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		bool theirs = !ns_same(pid, host, kinds[i].name);
		bool want = kinds[i].flag && (own & kinds[i].flag);

		if (theirs == want)
			continue;
		if (want)
			pr_err("the tree lived in its own %s, and pid %d, whose namespaces it is "
			       "to be restored into, lives in the host's",
			       kinds[i].what, pid);
		else
			pr_err("pid %d, whose namespaces the tree is to be restored into, lives in "
			       "its own %s, and the tree lived in the host's",
			       pid, kinds[i].what);
		return -ESTALE;
	}
	if (own & CLONE_NEWUSER) {
		int ret = check_userns(e, pid);

		if (ret)
			return ret;
	}
	if (own & CLONE_NEWNET) {
		int ret = netns_check(e, pid);

		if (ret)
			return ret;
	}
	return (own & CLONE_NEWNS) ? check_mounts(e, pid) : 0;
}

void ns_restore_init(struct rctx *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(c->ns_saved); i++)
		c->ns_saved[i] = -1;
	c->ns_cwd = -1;
	c->ns_userns_fd = -1;
}

/* A mount namespace is refused (EINVAL) to a process whose fs_struct is
 * shared: a thread of its own, or a task made with CLONE_FS; say which */
static int setns_failed(int flag, const char *what, pid_t pid)
{
	int err = errno;
	_cleanup_free_ char *st = NULL;
	const char *t;

	if (flag == CLONE_NEWNS && err == EINVAL &&
	    !read_file_at(AT_FDCWD, "/proc/thread-self/status", &st, NULL) &&
	    (t = strstr(st, "\nThreads:"))) {
		pr_err("cannot enter the %s of pid %d: %s (kupdate has %d threads: a mount "
		       "namespace is entered only by a process that shares its file system "
		       "context with no other)",
		       what, pid, strerror(err), atoi(t + 9));
		return -err;
	}
	errno = err;
	return pr_errno("cannot enter the %s of pid %d", what, pid);
}

static int enter(struct rctx *c, pid_t pid, int own)
{
	int fds[ARRAY_SIZE(kinds)], ret = proc_pin(true);

	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		fds[i] = -1;
	if (!ret && (own & CLONE_NEWUSER)) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		c->ns_userns_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (c->ns_userns_fd < 0)
			return pr_errno("cannot open the user namespace of pid %d", pid);
	}
	if (ret) {
		pr_err("cannot keep kupdate's /proc: %s", strerror(-ret));
		return ret;
	}
	if (own & CLONE_NEWNS) {
		/* setns() of a mount namespace moves the cwd to its root */
		c->ns_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (c->ns_cwd < 0)
			return pr_errno("cannot keep kupdate's working directory");
	}
	/* every descriptor opened first: once in its mount namespace, /proc
	 * is the tree's */
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		char path[64];

		/* (systemd may have started kupdate in it already; a user
		 * namespace each process enters itself, last: restorer.c) */
		if (!(own & kinds[i].flag) || ns_same(pid, 0, kinds[i].name) ||
		    kinds[i].flag == CLONE_NEWUSER)
			continue;
		snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[i].name);
		c->ns_saved[i] = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kinds[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (c->ns_saved[i] < 0 || fds[i] < 0) {
			ret = pr_errno("cannot open the %s of pid %d", kinds[i].what, pid);
			break;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(kinds) && !ret; i++) {
		if (fds[i] < 0)
			continue;
		if (setns(fds[i], kinds[i].flag))
			ret = setns_failed(kinds[i].flag, kinds[i].what, pid);
		else
			c->ns_entered |= kinds[i].flag;
	}
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return ret;
}

int ns_restore_enter(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	NsEntry *e;
	int own, ret;

	if (faccessat(c->dirfd, "namespaces.img", F_OK, 0)) {
		if (c->opts->ns_pid)
			return check_given(&(NsEntry)NS_ENTRY__INIT, 0, c->opts->ns_pid);
		return 0;
	}
	ret = img_reader_open(&r, c->dirfd, "namespaces.img", IMG_NS);
	if (ret)
		return ret;
	ret = img_read_first(&r, &ns_entry__descriptor, &m);
	img_reader_close(&r);
	if (ret)
		return ret;
	e = (NsEntry *)m;
	ret = own_flags(e, &own);
	if (!ret && !c->opts->ns_pid) {
		pr_err("the tree lived in namespaces of its own (%s%s%s); its restore needs a "
		       "process living in equivalent ones (restore --namespaces-of PID)",
		       e->n_own ? e->own[0] : "", e->n_own > 1 ? ", " : "",
		       e->n_own > 1 ? e->own[1] : "");
		ret = -EOPNOTSUPP;
	}
	if (!ret)
		ret = check_given(e, own, c->opts->ns_pid);
	if (!ret && (own & CLONE_NEWUSER) &&
	    (ns_parse_idmap(e->uid_map, c->ns_uidmap, &c->ns_nr_uidmap) ||
	     ns_parse_idmap(e->gid_map, c->ns_gidmap, &c->ns_nr_gidmap))) {
		pr_err("image namespaces.img is damaged: its id maps cannot be read");
		ret = -EINVAL;
	}
	if (!ret)
		ret = tmpdir_check(c->opts->ns_pid, e->tmpdirs, e->n_tmpdirs);
	if (!ret)
		ret = enter(c, c->opts->ns_pid, own);
	if (!ret && (own & CLONE_NEWUTS))
		ret = ns_set_names(e->hostname, e->domainname);
	/* its network lock is its namespace's (netns.c) */
	if (!ret && (own & CLONE_NEWNET))
		netlock_in_tree_netns(true);
	if (!ret)
		ret = tmpdir_restore(c->dirfd, e->tmpdirs, e->n_tmpdirs);
	ns_entry__free_unpacked(e, NULL);
	if (!ret && own)
		pr_info("restoring into the namespaces of pid %d", c->opts->ns_pid);
	return ret;
}

void ns_restore_leave(struct rctx *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		if (c->ns_saved[i] < 0)
			continue;
		if ((c->ns_entered & kinds[i].flag) && setns(c->ns_saved[i], kinds[i].flag))
			pr_perror("cannot go back to kupdate's own %s", kinds[i].what);
		close(c->ns_saved[i]);
		c->ns_saved[i] = -1;
	}
	if (c->ns_cwd >= 0) {
		if (fchdir(c->ns_cwd))
			pr_perror("cannot go back to kupdate's working directory");
		close(c->ns_cwd);
		c->ns_cwd = -1;
	}
	c->ns_entered = 0;
	netlock_in_tree_netns(false);
	if (c->ns_userns_fd >= 0)
		close(c->ns_userns_fd);
	c->ns_userns_fd = -1;
	proc_pin(false);
}
