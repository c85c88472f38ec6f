/* A mount namespace that a process of the tree made for itself and its
 * descendants: a container's root (a directory, an overlay), its /proc,
 * /sys, /dev, /run and /tmp, the host paths bound into it.
 *
 * Dump (the process's /proc/PID/mountinfo, next to kupdate's): each mount
 * is made again one of three ways, or the dump is refused naming it:
 *  - a new mount of a kind that needs no source on a disk (proc, sysfs,
 *    devpts, mqueue, cgroup2, overlay: its directories are host paths in
 *    its options), with its superblock options; a tmpfs that no mount of
 *    kupdate's shows is one, its contents saved whole (tmpdir.c, device
 *    nodes kept: a container's /dev holds them);
 *  - a bind of a path of kupdate's namespace: a host mount of the same
 *    device whose root holds the mount's root;
 *  - a bind of a path of the namespace's own, from a mount listed before
 *    it (nspawn binds /proc/sys read-only over itself).
 * The per-mount flags (read-only, nosuid, nodev, noexec, atime) are kept,
 * and the propagation (peer groups, slaves) between its mounts.  The
 * processes of the namespace are looked at through their own
 * /proc/PID/root (dump.c).  In a user namespace its maker made, the mounts
 * made from inside it (not locked together with the others: mntlock.c)
 * are marked.
 *
 * Restore: the maker, right after its birth and before it forks, unshares
 * the mount namespace, makes it private, builds the tree under a staging
 * directory of /run (/run/kupdate-ctr-PID, which kupdate removes once the
 * tree is restored), parents first, and enters it with pivot_root, the old
 * root detached.  Its descendants inherit it.  The init of a pid namespace
 * its user namespace owns makes the mounts that need that pid namespace
 * (its /proc) itself, and those made from inside, unlocked, through a
 * child that takes root's ids there (make_inside), in their order. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "files.h"
#include "image.h"
#include "images/core.pb-c.h"
#include "log.h"
#include "proc.h"
#include "mntns.h"
#include "namespaces.h"
#include "restore.h"
#include "restore-ctx.h"
#include "tmpdir.h"
#include "util.h"

static const char *const fresh_kinds[] = {
	"proc", "sysfs", "devpts", "mqueue", "cgroup2", "overlay"
};

static const struct {
	const char *name;
	unsigned long flag;
} mnt_flags[] = {
	{ "ro", MS_RDONLY },	     { "nosuid", MS_NOSUID },
	{ "nodev", MS_NODEV },	     { "noexec", MS_NOEXEC },
	{ "noatime", MS_NOATIME },   { "nodiratime", MS_NODIRATIME },
	{ "relatime", MS_RELATIME }, { "strictatime", MS_STRICTATIME },
};

static unsigned long parse_flags(const char *opts)
{
	unsigned long f = 0;
	char *s = xstrdup(opts), *save = NULL;

	for (char *t = s ? strtok_r(s, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < ARRAY_SIZE(mnt_flags); i++)
			if (!strcmp(t, mnt_flags[i].name))
				f |= mnt_flags[i].flag;
	free(s);
	return f;
}

/* a superblock's options without rw/ro (the mount's flags say) */
static char *fs_options(const char *super)
{
	size_t len = strlen(super);
	char *out = malloc(len + 1), *s = xstrdup(super), *save = NULL;
	size_t o = 0;

	if (!out || !s) {
		free(out);
		free(s);
		return NULL;
	}
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (strcmp(t, "rw") && strcmp(t, "ro"))
			o += snprintf(out + o, len + 1 - o, "%s%s", o ? "," : "", t);
	out[o] = 0;
	free(s);
	return out;
}

/* root (a path of a file system) under the root of mount m: the rest, or NULL */
static const char *under(const char *root, const char *mroot)
{
	size_t l = strlen(mroot);

	if (!strcmp(mroot, "/"))
		return root;
	if (strncmp(root, mroot, l) || (root[l] && root[l] != '/'))
		return NULL;
	return root + l;
}

/* mountinfo's root of a bind of something removed since */
static bool is_deleted(const char *root)
{
	size_t l = strlen(root);

	return l >= 9 && !strcmp(root + l - 9, "//deleted");
}

#define DELETED_MAX (1U << 20)

/* e binds a file since removed from src, a tmpfs of the namespace's own
 * (nspawn binds such files over /proc/sys/kernel/random/boot_id and, a
 * FIFO, over /proc/kmsg): its contents, mode and owner, read through the
 * mount itself (a FIFO's queued bytes are not kept).  Anything else
 * removed is refused. */
static int deleted_file(const struct cr_proc *p, const struct mount_entry *e,
			const struct mount_entry *src, MadeMount *x)
{
	char path[PATH_MAX];
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/root%s", p->pid, e->mp);
	if (!src || strcmp(src->fstype, "tmpfs") || lstat(path, &st) ||
	    !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)) || st.st_size > (off_t)DELETED_MAX) {
		pr_err("pid %d (%s): its mount namespace's mount on %s binds %s, which was "
		       "removed since; kupdate makes again only a file or FIFO of a tmpfs of the "
		       "namespace's own, of %u KiB at most",
		       p->pid, p->stat.comm, e->mp, e->root, DELETED_MAX >> 10);
		return -EOPNOTSUPP;
	}
	x->has_deleted_uid = x->has_deleted_gid = 1;
	x->deleted_uid = st.st_uid;
	x->deleted_gid = st.st_gid;
	if (S_ISFIFO(st.st_mode)) {
		x->has_deleted_fifo = x->deleted_fifo = 1;
		x->has_deleted_data = x->has_deleted_mode = 1;
		x->deleted_mode = st.st_mode & 07777;
		return 0;
	}
	ret = read_file_at(AT_FDCWD, path, &buf, &len);
	if (ret)
		return pr_err("pid %d: cannot read %s: %s", p->pid, e->mp, strerror(-ret)), ret;
	x->has_deleted_data = x->has_deleted_mode = 1;
	x->deleted_data.data = (uint8_t *)buf;
	x->deleted_data.len = len;
	x->deleted_mode = st.st_mode & 07777;
	return 0;
}

static void free_mounts(MadeMount **m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		made_mount__free_unpacked(m[i], NULL);
	free(m);
}

/* disk id d as an idmapped mount shows it in kupdate's namespace */
static uint32_t idmapped(const struct ns_idmap *map, size_t nr, uint32_t d)
{
	for (size_t i = 0; i < nr; i++)
		if (d >= map[i].inside && d - map[i].inside < map[i].count)
			return map[i].outside + (d - map[i].inside);
	return 65534; /* unmapped: the overflow id */
}

/* the owner of name (or of the directories themselves) through the mount
 * (via) and on the host agree with the maps; one that is another mount's
 * root there (its /proc, its /dev) is not compared */
static bool same_owner(const char *via, const char *host, const char *name,
		       const struct ns_idmap *u, size_t nu, const struct ns_idmap *g, size_t ng,
		       dev_t dev)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat sa, sb;

	snprintf(a, sizeof(a), "%s/%s", via, name);
	snprintf(b, sizeof(b), "%s/%s", host, name);
	if (lstat(a, &sa) || lstat(b, &sb) || sa.st_dev != dev)
		return true; /* gone meanwhile, or another mount: nothing to compare */
	return sa.st_uid == idmapped(u, nu, sb.st_uid) && sa.st_gid == idmapped(g, ng, sb.st_gid);
}

/* An idmapped bind (nspawn's root with --private-users and idmapping):
 * kept when its ids map as those of the user namespace p made (nspawn
 * maps its root so): the owners of its root and of the first 64 entries
 * in it, through the mount and on the host, agree with those maps (the
 * kernel does not show a mount's mapping itself). */
static int check_idmap(struct cr_proc *p, const struct mount_entry *e, const char *host_path,
		       MadeMount *x)
{
	struct ns_idmap u[NS_IDMAP_MAX], g[NS_IDMAP_MAX];
	char via[PATH_MAX], *um = NULL, *gm = NULL, *sg = NULL;
	size_t nu = 0, ng = 0;
	struct stat vst;
	int n = 0;
	bool ok;
	DIR *d;

	if (!p->parent || ns_same(p->pid, p->parent->pid, "user")) {
		pr_err("pid %d (%s): its mount namespace's mount on %s is idmapped, and it made no "
		       "user namespace whose ids it could take; kupdate cannot restore it",
		       p->pid, p->stat.comm, e->mp);
		return -EOPNOTSUPP;
	}
	if (ns_read_idmaps(p->pid, "the user namespace it made", &um, &gm, &sg))
		return -EIO;
	ok = !ns_parse_idmap(um, u, &nu) && !ns_parse_idmap(gm, g, &ng);
	free(um);
	free(gm);
	free(sg);
	snprintf(via, sizeof(via), "/proc/%d/root%s", p->pid, e->mp);
	ok = ok && !stat(via, &vst) && same_owner(via, host_path, ".", u, nu, g, ng, vst.st_dev);
	d = ok ? opendir(host_path) : NULL;
	for (struct dirent *de; d && ok && n < 64 && (de = readdir(d)); n++)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ok = same_owner(via, host_path, de->d_name, u, nu, g, ng, vst.st_dev);
	if (d)
		closedir(d);
	if (!ok) {
		pr_err("pid %d (%s): its mount namespace's mount on %s is idmapped otherwise than "
		       "the user namespace it made maps ids; kupdate cannot restore it",
		       p->pid, p->stat.comm, e->mp);
		return -EOPNOTSUPP;
	}
	x->has_idmap_maker = x->idmap_maker = 1;
	return 0;
}

static bool is_idmapped(const struct mount_entry *e)
{
	char *s = xstrdup(e->vfs), *save = NULL;
	bool found = false;

	for (char *t = s ? strtok_r(s, ",", &save) : NULL; t && !found;
	     t = strtok_r(NULL, ",", &save))
		found = !strcmp(t, "idmapped");
	free(s);
	return found;
}

/* one mount of p's namespace, i its index in t, into x */
static int one_mount(struct cr_dump_ctx *ctx, struct cr_proc *p, const struct mount_table *t,
		     size_t i, const struct mount_table *host, const char *host_root, MadeMount *x)
{
	const struct mount_entry *e = &t->e[i];
	char path[PATH_MAX], root[PATH_MAX];
	struct stat st;
	bool fresh = false, deleted = false;

	x->point = xstrdup(e->mp);
	x->fstype = xstrdup(e->fstype);
	x->has_flags = 1;
	x->flags = parse_flags(e->vfs);
	snprintf(path, sizeof(path), "/proc/%d/root%s", p->pid, e->mp);
	if (!lstat(path, &st) && !S_ISDIR(st.st_mode))
		x->has_file = x->file = 1;
	if (is_deleted(e->root)) {
		snprintf(root, sizeof(root), "%.*s", (int)strlen(e->root) - 9, e->root);
		deleted = true;
	} else {
		snprintf(root, sizeof(root), "%s", e->root);
	}
	for (size_t k = 0; k < ARRAY_SIZE(fresh_kinds); k++)
		fresh |= !strcmp(e->fstype, fresh_kinds[k]) && !strcmp(e->root, "/");
	/* a bind of a mount listed before it, inside */
	for (size_t k = i; !fresh && k-- > 0;) {
		const char *rest = under(root, t->e[k].root);

		if (t->e[k].maj != e->maj || t->e[k].min != e->min || !rest)
			continue;
		if (deleted) {
			int ret = deleted_file(p, e, &t->e[k], x);

			if (ret)
				return ret;
		}
		x->bind_inside = xasprintf("%s%s%s", strcmp(t->e[k].mp, "/") ? t->e[k].mp : "",
					   *rest == '/' || !*rest ? "" : "/", rest);
		if (!*x->bind_inside) {
			free(x->bind_inside);
			x->bind_inside = xstrdup("/");
		}
		return x->bind_inside ? 0 : -ENOMEM;
	}
	if (deleted)
		return deleted_file(p, e, NULL, x);
	/* a bind of a path of its parent's namespace */
	for (size_t k = 0; !fresh && k < host->n; k++) {
		const char *rest = under(e->root, host->e[k].root);

		if (host->e[k].maj != e->maj || host->e[k].min != e->min || !rest)
			continue;
		x->bind = xasprintf(
			"%s%s", strcmp(host->e[k].mp, "/") || !*rest ? host->e[k].mp : "", rest);
		if (!x->bind)
			return -ENOMEM;
		snprintf(path, sizeof(path), "%s%s", host_root, x->bind);
		if (stat(path, &st)) {
			pr_err("pid %d (%s): its mount namespace's mount on %s binds %s, which is "
			       "not there in its parent's namespace now",
			       p->pid, p->stat.comm, e->mp, x->bind);
			return -EOPNOTSUPP;
		}
		return is_idmapped(e) ? check_idmap(p, e, path, x) : 0;
	}
	if (is_idmapped(e)) {
		pr_err("pid %d (%s): its mount namespace's mount of %s on %s is idmapped and not a "
		       "bind of a path its parent sees; kupdate cannot restore it",
		       p->pid, p->stat.comm, e->fstype, e->mp);
		return -EOPNOTSUPP;
	}
	/* a directory of a new mount of a kind that needs no source, which
	 * is not mounted itself (nspawn's /sys/block...: of a sysfs of the
	 * container's network namespace) */
	for (size_t k = 0; k < ARRAY_SIZE(fresh_kinds) && !fresh; k++)
		if (!strcmp(e->fstype, fresh_kinds[k]) && strcmp(e->fstype, "overlay")) {
			x->fresh_root = xstrdup(e->root);
			if (!x->fresh_root)
				return -ENOMEM;
			fresh = true;
		}
	/* a file system in memory, its contents saved (ramfs: a unit's
	 * credentials, /run/credentials/UNIT in a booted container) */
	if ((!strcmp(e->fstype, "tmpfs") || !strcmp(e->fstype, "ramfs")) && !strcmp(e->root, "/"))
		fresh = true;
	if (!fresh) {
		pr_err("pid %d (%s): its mount namespace's mount of %s (%s) on %s is neither a new "
		       "mount kupdate can make again nor a bind of a path its parent sees; "
		       "kupdate cannot restore it",
		       p->pid, p->stat.comm, e->fstype, e->source, e->mp);
		return -EOPNOTSUPP;
	}
	x->source = xstrdup(e->source);
	x->fs_options = fs_options(e->super);
	if (!x->source || !x->fs_options)
		return -ENOMEM;
	if (!strcmp(e->fstype, "tmpfs") || !strcmp(e->fstype, "ramfs")) {
		int idx = tmpdir_dump_in(ctx, p->pid, e->mp);

		if (idx < 0)
			return idx;
		x->has_tmpdir = 1;
		x->tmpdir = idx;
	}
	return 0;
}

/* path lies strictly below dir */
static bool strictly_under(const char *path, const char *dir)
{
	const char *rest = under(path, dir);

	return rest && rest[0] == '/' && rest[1];
}

/* A directory bound recursively over itself (nspawn's /run/host): mount r,
 * whose parent also holds mounts below r's path (hidden under r), and
 * whose children are their copies (same point, file system and root).
 * Each hidden mount and each copy is marked; false if r is no such bind
 * (a copy missing: then the hidden ones are refused as such). */
static bool find_rbind(const struct mount_table *t, size_t r, MadeMount **m)
{
	const struct mount_entry *e = &t->e[r];
	bool any = false;

	for (int pass = 0; pass < 2; pass++)
		for (size_t h = 1; h < t->n; h++) {
			const struct mount_entry *x = &t->e[h];
			bool copied = false;

			if (h == r || x->parent != e->parent || !strictly_under(x->mp, e->mp))
				continue;
			for (size_t c = 1; c < t->n && !copied; c++) {
				const struct mount_entry *y = &t->e[c];

				if (y->parent != e->id || strcmp(y->mp, x->mp) ||
				    y->maj != x->maj || y->min != x->min ||
				    strcmp(y->root, x->root) ||
				    (m[c]->has_copy_of && m[c]->copy_of != (int32_t)h))
					continue;
				copied = true;
				if (pass) {
					m[c]->has_copy_of = 1;
					m[c]->copy_of = (int32_t)h;
				}
			}
			if (!copied)
				return false; /* (first pass: nothing marked) */
			if (pass) {
				m[h]->has_hidden_by = 1;
				m[h]->hidden_by = (int32_t)r;
			}
			any = true;
		}
	if (any)
		m[r]->has_rbind = m[r]->rbind = 1;
	return any;
}

/* Mount i is made on its path in mountinfo's order: the mount it lies on
 * must be the topmost one there by then (not one that another hides) */
static int check_hidden(const struct cr_proc *p, const struct mount_table *t, size_t i,
			MadeMount *const *m)
{
	const struct mount_entry *e = &t->e[i];
	size_t best = 0, blen = 0;
	bool found = false;

	if (!i)
		return 0;
	for (size_t k = 0; k < i; k++) {
		const char *mp = t->e[k].mp;
		size_t l = strcmp(mp, "/") ? strlen(mp) : 0;

		if (m[k]->has_hidden_by)
			continue; /* under a recursive bind that copies it */
		if (strncmp(e->mp, mp, l) || (e->mp[l] && e->mp[l] != '/') || (found && l < blen))
			continue;
		best = k;
		blen = l;
		found = true;
	}
	if (found && t->e[best].id == e->parent && strcmp(t->e[best].mp, e->mp))
		return 0;
	pr_err("pid %d (%s): its mount namespace's mount on %s lies on a mount that another "
	       "one hides (or hides one itself); kupdate does not make hidden mounts again",
	       p->pid, p->stat.comm, e->mp);
	return -EOPNOTSUPP;
}

/* its peer group and master, among the namespace's own mounts or its
 * parent's (a slave of one of those); a peer of a parent's mount would
 * send mounts out of the container: refused */
static int propagation(const struct cr_proc *p, const struct mount_table *t, size_t i,
		       const struct mount_table *host, MadeMount *x)
{
	const struct mount_entry *e = &t->e[i];

	for (size_t k = 0; e->shared && k < host->n; k++)
		if (host->e[k].shared == e->shared) {
			pr_err("pid %d (%s): its mount namespace's mount on %s is a peer of its "
			       "parent's mount on %s (mounts propagate out of it); kupdate does "
			       "not make that again",
			       p->pid, p->stat.comm, e->mp, host->e[k].mp);
			return -EOPNOTSUPP;
		}
	if (e->shared) {
		x->has_shared = x->shared = 1;
		for (size_t k = 0; k < i && !x->has_peer_of; k++)
			if (t->e[k].shared == e->shared) {
				x->has_peer_of = 1;
				x->peer_of = k;
			}
	}
	if (!e->master || x->has_peer_of)
		return 0; /* a peer has its group's master */
	for (size_t k = 0; k < t->n; k++)
		if (k != i && t->e[k].shared == e->master) {
			x->has_slave_of = 1;
			x->slave_of = k;
			return 0;
		}
	for (size_t k = 0; k < host->n; k++)
		if (host->e[k].shared == e->master) {
			x->slave_of_parent = xstrdup(host->e[k].mp);
			return x->slave_of_parent ? 0 : -ENOMEM;
		}
	pr_err("pid %d (%s): its mount namespace's mount on %s is a slave of a peer group "
	       "(%u) that neither it nor its parent's namespace has; kupdate cannot make that "
	       "again",
	       p->pid, p->stat.comm, e->mp, e->master);
	return -EOPNOTSUPP;
}

int mntns_dump(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *path = xasprintf("/proc/%d/mountinfo", p->pid);
	struct mount_table t, host;
	MadeMount **m = NULL;
	char host_root[32];
	int ret;

	if (!path)
		return -ENOMEM;
	ret = mount_table_read(path, &t);
	if (ret)
		return pr_err("pid %d: cannot read its mounts: %s", p->pid, strerror(-ret)), ret;
	/* binds and propagation come from the namespace it was made from */
	snprintf(host_root, sizeof(host_root), "/proc/%d/root", p->parent->pid);
	{
		_cleanup_free_ char *up = xasprintf("/proc/%d/mountinfo", p->parent->pid);

		ret = up ? mount_table_read(up, &host) : -ENOMEM;
	}
	if (ret) {
		mount_table_free(&t);
		return ret;
	}
	if (!t.n || strcmp(t.e[0].mp, "/")) {
		pr_err("pid %d (%s): its mount namespace has no root mount it sees (a chroot "
		       "inside it?); kupdate cannot restore it",
		       p->pid, p->stat.comm);
		ret = -EOPNOTSUPP;
	}
	m = t.n ? xzalloc(t.n * sizeof(*m)) : NULL;
	if (!ret && !m)
		ret = -ENOMEM;
	for (size_t i = 0; !ret && i < t.n; i++) {
		m[i] = xzalloc(sizeof(**m));
		if (!m[i])
			ret = -ENOMEM;
		else
			made_mount__init(m[i]);
	}
	/* in a user namespace it made: which mounts it made from inside */
	if (!ret && !ns_same(p->pid, p->parent->pid, "user")) {
		bool *inside = xzalloc(t.n);

		ret = inside ? mntlock_probe(p->pid, &t, inside) : -ENOMEM;
		for (size_t i = 1; !ret && i < t.n; i++) {
			m[i]->has_inside = m[i]->inside = inside[i];
			if (inside[i])
				pr_debug("pid %d: its mount on %s was made inside its user "
					 "namespace",
					 p->pid, t.e[i].mp);
		}
		free(inside);
	}
	/* recursive binds over themselves: what they hide is made first */
	for (size_t i = 1; !ret && i < t.n; i++)
		if (!m[i]->has_hidden_by && !m[i]->has_copy_of)
			find_rbind(&t, i, m);
	for (size_t i = 0; !ret && i < t.n; i++) {
		if (!m[i]->has_hidden_by)
			ret = check_hidden(p, &t, i, m);
		if (!ret)
			ret = one_mount(ctx, p, &t, i, &host, host_root, m[i]);
		if (!ret && m[i]->rbind &&
		    (!m[i]->bind_inside || strcmp(m[i]->bind_inside, t.e[i].mp))) {
			pr_err("pid %d (%s): its mount namespace's mount on %s hides mounts it "
			       "copies, and is no bind of its own path; kupdate cannot make it "
			       "again",
			       p->pid, p->stat.comm, t.e[i].mp);
			ret = -EOPNOTSUPP;
		}
		if (!ret)
			ret = propagation(p, &t, i, &host, m[i]);
	}
	if (!ret) {
		p->made_mounts = m;
		p->nr_made_mounts = t.n;
		pr_info("pid %d (%s) made a mount namespace of its own: %zu mounts", p->pid,
			p->stat.comm, t.n);
	} else if (m) {
		size_t n = 0;

		while (n < t.n && m[n])
			n++;
		free_mounts(m, n);
	}
	mount_table_free(&t);
	mount_table_free(&host);
	return ret;
}

void mntns_free_dump(struct cr_proc *p)
{
	free_mounts(p->made_mounts, p->nr_made_mounts);
	p->made_mounts = NULL;
	p->nr_made_mounts = 0;
}

/* ---------------------------------------------------------- restore */

static int make_point(const char *path, bool file)
{
	struct stat st;

	if (!lstat(path, &st))
		return 0;
	if (file) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

static int mount_made(struct rctx *c, const struct rproc *rp, const char *stage,
		      const MadeMount *m);

/* a copy a recursive bind made (made_mount.copy_of): private first, as
 * mount_one() leaves a mount, then its own flags */
static int copy_flags(const struct rproc *rp, const char *stage, const MadeMount *m)
{
	unsigned long flags = m->has_flags ? m->flags : 0;
	char target[PATH_MAX];

	snprintf(target, sizeof(target), "%s%s", stage, m->point);
	if (mount(NULL, target, NULL, MS_PRIVATE, NULL) ||
	    mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL))
		return pr_errno("pid %d: cannot set the flags of %s, made by the bind over %s",
				rp->pid, m->point, m->point);
	return 0;
}

/* made private first: a bind of its parent's mount is a slave of that
 * one's group (the namespace was made a slave of its parent's); its
 * propagation comes once every mount exists (set_groups) */
static int mount_one(struct rctx *c, const struct rproc *rp, const char *stage, const MadeMount *m)
{
	char target[PATH_MAX];
	int ret = mount_made(c, rp, stage, m);

	snprintf(target, sizeof(target), "%s%s", stage, strcmp(m->point, "/") ? m->point : "");
	if (!ret && mount(NULL, target, NULL, MS_PRIVATE, NULL))
		ret = pr_errno("pid %d: cannot make %s private", rp->pid, m->point);
	return ret;
}

#ifndef MOVE_MOUNT_SET_GROUP
#define MOVE_MOUNT_SET_GROUP 0x00000100
#endif

/* to joins the peer group of from, and takes its master (5.15) */
static int set_group(const char *from, const char *to)
{
	return syscall(SYS_move_mount, AT_FDCWD, from, AT_FDCWD, to, MOVE_MOUNT_SET_GROUP) ? -errno
											   : 0;
}

static void point_of(const char *stage, const MadeMount *m, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", stage, strcmp(m->point, "/") ? m->point : "");
	if (!buf[0]) /* the root, after the pivot */
		snprintf(buf, len, "/");
}

enum { G_SLAVE = 1, G_SHARED = 2 };

/* mount i's propagation, once what it depends on is set: its group's first
 * member, its master's; what: G_SLAVE, G_SHARED or both */
static int set_one_group(const struct rproc *rp, const NsMade *made, const char *stage, size_t i,
			 int what)
{
	const MadeMount *m = made->mounts[i];
	char to[PATH_MAX], from[PATH_MAX];
	int ret = 0;

	point_of(stage, m, to, sizeof(to));
	if (m->has_peer_of) {
		point_of(stage, made->mounts[m->peer_of], from, sizeof(from));
		ret = set_group(from, to);
	} else {
		if ((what & G_SLAVE) && (m->has_slave_of || m->slave_of_parent)) {
			if (m->has_slave_of)
				point_of(stage, made->mounts[m->slave_of], from, sizeof(from));
			else
				snprintf(from, sizeof(from), "%s", m->slave_of_parent);
			ret = set_group(from, to);
			if (!ret && mount(NULL, to, NULL, MS_SLAVE, NULL))
				ret = -errno;
		}
		if (!ret && (what & G_SHARED) && m->shared &&
		    mount(NULL, to, NULL, MS_SHARED, NULL))
			ret = -errno;
	}
	if (ret)
		pr_err("pid %d: cannot make the propagation of %s again: %s", rp->pid, m->point,
		       strerror(-ret));
	return ret;
}

static int dep_of(const MadeMount *m)
{
	return m->has_peer_of ? m->peer_of : m->has_slave_of ? m->slave_of : -1;
}

/* Before the pivot (late false), with the mounts under stage: every
 * propagation but a shared root's (pivot_root refuses a shared root) and
 * what takes its group; after it (late true, stage ""), those.  In rounds:
 * a mount waits for the mount whose group it takes. */
static int set_groups(const struct rproc *rp, const NsMade *made, const char *stage, bool late,
		      bool *done, bool *is_late)
{
	size_t n = made->n_mounts, left = 0;

	if (!late) {
		is_late[0] = made->mounts[0]->shared;
		for (size_t round = 0; round < n; round++)
			for (size_t i = 1; i < n; i++) {
				int dep = dep_of(made->mounts[i]);

				if (dep >= 0 && (size_t)dep < n && is_late[dep])
					is_late[i] = true;
			}
	}
	for (size_t i = 0; i < n; i++)
		left += !done[i] && is_late[i] == late;
	for (size_t round = 0; left && round <= n; round++)
		for (size_t i = 0; i < n; i++) {
			int dep = dep_of(made->mounts[i]), ret;

			if (done[i] || is_late[i] != late ||
			    (dep >= 0 && ((size_t)dep >= n || !done[dep])))
				continue;
			/* a shared root's master was set before the pivot */
			ret = set_one_group(rp, made, stage, i,
					    !i && late ? G_SHARED : G_SLAVE | G_SHARED);
			if (ret)
				return ret;
			done[i] = true;
			left--;
		}
	/* a shared root: its master now, its group after the pivot */
	if (!left && !late && is_late[0])
		return set_one_group(rp, made, stage, 0, G_SLAVE);
	if (left) {
		pr_err("pid %d: the mount propagation of its namespace loops (damaged image)",
		       rp->pid);
		return -EINVAL;
	}
	return 0;
}

/* the removed file m binds, made again at path with its contents */
static int make_deleted(const struct rproc *rp, const MadeMount *m, const char *path,
			const struct tmpdir_ids *ids)
{
	int64_t uid = m->deleted_uid, gid = m->deleted_gid;
	int fd, ret = 0;

	if (ids && m->has_deleted_uid) {
		uid = ids->inside(ids->arg, m->deleted_uid, false);
		gid = ids->inside(ids->arg, m->deleted_gid, true);
		if (uid < 0 || gid < 0) {
			pr_err("pid %d: %s: its owner %u:%u has no id in its user namespace",
			       rp->pid, m->bind_inside, m->deleted_uid, m->deleted_gid);
			return -EINVAL;
		}
	}

	if (m->deleted_fifo) {
		if (mkfifo(path, 0600) || chmod(path, m->deleted_mode & 07777) ||
		    (m->has_deleted_uid && lchown(path, (uid_t)uid, (gid_t)gid)))
			return pr_errno("pid %d: cannot make the FIFO %s again", rp->pid,
					m->bind_inside);
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return pr_errno("pid %d: cannot make %s again", rp->pid, m->bind_inside);
	if (write(fd, m->deleted_data.data, m->deleted_data.len) != (ssize_t)m->deleted_data.len ||
	    fchmod(fd, m->deleted_mode & 07777) ||
	    (m->has_deleted_uid && fchown(fd, (uid_t)uid, (gid_t)gid)))
		ret = pr_errno("pid %d: cannot fill %s again", rp->pid, m->bind_inside);
	close(fd);
	return ret;
}

/* m, a directory of a new mount of its kind (made_mount.fresh_root): that
 * mount made on a directory beside the stage, the directory bound on
 * target, the mount gone */
static int fresh_dir(const struct rproc *rp, const char *stage, const MadeMount *m,
		     const char *target, unsigned long flags)
{
	char tmp[PATH_MAX], src[PATH_MAX];
	int ret = 0;

	if (!stage[0]) {
		pr_err("pid %d: a directory of a new %s on %s, on its /proc: kupdate cannot make "
		       "that again",
		       rp->pid, m->fstype, m->point);
		return -EOPNOTSUPP;
	}
	snprintf(tmp, sizeof(tmp), "%s.fresh", stage);
	snprintf(src, sizeof(src), "%s%s", tmp, m->fresh_root);
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return pr_errno("pid %d: cannot make %s", rp->pid, tmp);
	if (mount(m->source ? m->source : "none", tmp, m->fstype, 0,
		  m->fs_options && *m->fs_options ? m->fs_options : NULL))
		ret = pr_errno("pid %d: cannot mount a %s to bind its %s on %s", rp->pid, m->fstype,
			       m->fresh_root, m->point);
	else if (mount(src, target, NULL, MS_BIND, NULL) ||
		 (flags && mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)))
		ret = pr_errno("pid %d: cannot bind the %s of a new %s on %s", rp->pid,
			       m->fresh_root, m->fstype, m->point);
	umount2(tmp, MNT_DETACH);
	rmdir(tmp);
	return ret;
}

/* src bound on target with the ids of the user namespace rp made (made
 * for it before, userns.c); -1 with errno */
static int bind_idmapped(const struct rproc *rp, const char *src, const char *target)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
	int fd, ret = 0;

	if (rp->um.user < 0) {
		errno = EINVAL;
		return -1;
	}
	attr.userns_fd = (uint64_t)rp->um.user;
	fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return -1;
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) ||
	    move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH))
		ret = -1;
	{
		int err = errno;

		close(fd);
		errno = err;
	}
	return ret;
}

/* ------- the container's own mounts, made again from inside its user namespace */

/* the id maps of the user namespace the init made, and the image of the
 * mount being made, read before its maker took root's ids there */
struct inside_map {
	struct ns_idmap u[NS_IDMAP_MAX], g[NS_IDMAP_MAX];
	size_t nu, ng;
	struct img_reader tmpdir;
};

/* set in a child of the init making one such mount (make_inside) */
static struct inside_map *inside_now;

static int inside_map(const struct rproc *rp, struct inside_map *im)
{
	const NsMade *made = rp->core.task->made_ns;

	if (!made || ns_parse_idmap(made->uid_map, im->u, &im->nu) ||
	    ns_parse_idmap(made->gid_map, im->g, &im->ng)) {
		pr_err("image core-%d.img is damaged: the id maps of its user namespace cannot be "
		       "read",
		       rp->pid);
		return -EINVAL;
	}
	return 0;
}

static int64_t id_inside(void *arg, uint32_t id, bool gid)
{
	const struct inside_map *im = arg;
	const struct ns_idmap *map = gid ? im->g : im->u;
	size_t nr = gid ? im->ng : im->nu;

	for (size_t i = 0; i < nr; i++)
		if (id >= map[i].outside && id - map[i].outside < map[i].count)
			return (int64_t)map[i].inside + (id - map[i].outside);
	return -1;
}

/* a superblock's options with uid= and gid= (a tmpfs's owner) as the user
 * namespace names them; NULL for none, or an error said */
static char *inside_options(const struct rproc *rp, struct inside_map *im, const MadeMount *m)
{
	size_t len = m->fs_options ? strlen(m->fs_options) : 0, o = 0;
	char *out, *s, *save = NULL;

	if (!m->fs_options)
		return NULL;
	out = malloc(len + 64);
	s = xstrdup(m->fs_options);
	if (!out || !s) {
		free(out);
		free(s);
		return NULL;
	}
	out[0] = 0;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool gid = !strncmp(t, "gid=", 4);
		int64_t id;

		if (strncmp(t, "uid=", 4) && !gid) {
			o += snprintf(out + o, len + 64 - o, "%s%s", o ? "," : "", t);
			continue;
		}
		id = id_inside(im, (uint32_t)strtoul(t + 4, NULL, 10), gid);
		if (id < 0) {
			pr_err("pid %d: its mount of %s on %s belongs to %s, which has no id in "
			       "its user namespace",
			       rp->pid, m->fstype, m->point, t);
			free(out);
			out = NULL;
			break;
		}
		o += snprintf(out + o, len + 64 - o, "%s%.4s%lld", o ? "," : "", t, (long long)id);
	}
	free(s);
	return out;
}

static int mount_made(struct rctx *c, const struct rproc *rp, const char *stage, const MadeMount *m)
{
	unsigned long flags = m->has_flags ? m->flags : 0;
	char target[PATH_MAX], src[PATH_MAX];
	/* made from inside its user namespace: ids as that one names them */
	bool in = inside_now != NULL;
	struct tmpdir_ids ids = { id_inside, inside_now };
	_cleanup_free_ char *in_opts = NULL;
	const char *fsopts = m->fs_options;
	int ret;

	if (in) {
		in_opts = inside_options(rp, inside_now, m);
		if (m->fs_options && !in_opts)
			return -EINVAL;
		fsopts = in_opts;
	}

	snprintf(target, sizeof(target), "%s%s", stage, strcmp(m->point, "/") ? m->point : "");
	ret = make_point(target, m->has_file && m->file);
	if (ret)
		return pr_err("pid %d: cannot make the mount point %s: %s", rp->pid, m->point,
			      strerror(-ret)),
		       ret;
	if (m->bind || m->bind_inside) {
		if (m->bind)
			snprintf(src, sizeof(src), "%s", m->bind);
		else
			snprintf(src, sizeof(src), "%s%s", stage,
				 strcmp(m->bind_inside, "/") ? m->bind_inside : "");
		if (m->has_deleted_data && m->bind_inside) {
			ret = make_deleted(rp, m, src, in ? &ids : NULL);
			if (ret)
				return ret;
		}
		if (m->idmap_maker
			    ? bind_idmapped(rp, src, target)
			    : mount(src, target, NULL, MS_BIND | (m->rbind ? MS_REC : 0), NULL))
			return pr_errno("pid %d: cannot bind %s on %s again%s", rp->pid,
					m->bind ? m->bind : m->bind_inside, m->point,
					m->idmap_maker ? " (idmapped)" : "");
		/* removed again: the bind keeps it */
		if (m->has_deleted_data && m->bind_inside && unlink(src))
			return pr_errno("pid %d: cannot remove %s again", rp->pid, m->bind_inside);
		if (flags && mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL))
			return pr_errno("pid %d: cannot set the flags of %s again", rp->pid,
					m->point);
		return 0;
	}
	if (m->fresh_root)
		return fresh_dir(rp, stage, m, target, flags);
	if (mount(m->source ? m->source : "none", target, m->fstype, flags,
		  fsopts && *fsopts ? fsopts : NULL))
		return pr_errno("pid %d: cannot mount %s on %s again (options %s)", rp->pid,
				m->fstype, m->point, fsopts ? fsopts : "");
	if (m->has_tmpdir) {
		/* its contents, writable until they are in */
		bool ro = flags & MS_RDONLY;

		if (ro && mount(NULL, target, NULL, MS_REMOUNT | (flags & ~MS_RDONLY),
				fsopts && *fsopts ? fsopts : NULL))
			return pr_errno("pid %d: cannot fill %s", rp->pid, m->point);
		ret = in ? tmpdir_restore_read(&inside_now->tmpdir, m->point, target, &ids)
			 : tmpdir_restore_at(c->dirfd, m->tmpdir, m->point, target);
		if (!ret && ro &&
		    mount(NULL, target, NULL, MS_REMOUNT | flags,
			  fsopts && *fsopts ? fsopts : NULL))
			ret = pr_errno("pid %d: cannot make %s read-only again", rp->pid, m->point);
		return ret;
	}
	return 0;
}

void mntns_stage(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "/run/kupdate-ctr-%d", pid);
}

/* mount i lies on, or binds a path of, one of the mounts marked before it */
static bool on_marked(const NsMade *made, size_t i, const bool *marked)
{
	const MadeMount *m = made->mounts[i];

	for (size_t j = 1; j < i; j++)
		if (marked[j] &&
		    (under(m->point, made->mounts[j]->point) ||
		     (m->bind_inside && under(m->bind_inside, made->mounts[j]->point))))
			return true;
	return false;
}

/* mount i is one the init of a pid namespace its user namespace owns
 * makes itself, once born (its pid namespace's /proc), or lies on, or
 * binds a path of, one of those */
static bool made_by_init(const NsMade *made, size_t i, const bool *by_init)
{
	const MadeMount *m = made->mounts[i];

	return (!m->bind && !m->bind_inside && !strcmp(m->fstype, "proc")) ||
	       on_marked(made, i, by_init);
}

/* mount i is one the container made from inside its user namespace (not
 * locked: mntlock.c) that the init can make again there (make_inside),
 * needing no path outside, or lies on, or binds a path of, one of those */
static bool made_inside(const NsMade *made, size_t i, const bool *inside)
{
	const MadeMount *m = made->mounts[i];

	return (m->inside && !m->bind && !m->idmap_maker && !m->rbind && !m->has_copy_of &&
		!m->has_hidden_by && !m->fresh_root && strcmp(m->fstype, "overlay")) ||
	       on_marked(made, i, inside);
}

/* a namespace of its own (a slave of its parent's: nothing made here goes
 * out, and a mount that was a slave of a parent's group can be again,
 * set_groups), its mounts under stage, parents first, but those the
 * init makes itself (by_init) and those made from inside its user
 * namespace (inside: make_inside), left out, with their
 * propagation, set late; every propagation that can be set before the
 * pivot */
static int build(struct rctx *c, const struct rproc *rp, const char *stage, bool *by_init,
		 bool *inside, bool *done, bool *is_late)
{
	const NsMade *made = rp->core.task->made_ns;
	int ret = 0;

	if (mkdir(stage, 0700) && errno != EEXIST)
		return pr_errno("pid %d: cannot make %s to build its mounts in", rp->pid, stage);
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL))
		return pr_errno("pid %d: cannot make its mount namespace again", rp->pid);
	for (size_t i = 0; !ret && i < made->n_mounts; i++) {
		const MadeMount *m = made->mounts[i];

		if (by_init && i && made_by_init(made, i, by_init)) {
			by_init[i] = is_late[i] = true;
			continue;
		}
		if (inside && i && made_inside(made, i, inside)) {
			inside[i] = is_late[i] = true;
			continue;
		}
		/* made with the recursive bind over them, before it */
		if (m->has_hidden_by)
			continue;
		if (m->rbind)
			for (size_t h = 0; !ret && h < made->n_mounts; h++)
				if (made->mounts[h]->has_hidden_by &&
				    made->mounts[h]->hidden_by == (int32_t)i)
					ret = mount_one(c, rp, stage, made->mounts[h]);
		/* made by it: its own flags */
		ret = ret	       ? ret
		      : m->has_copy_of ? copy_flags(rp, stage, m)
				       : mount_one(c, rp, stage, m);
	}
	if (!ret)
		ret = set_groups(rp, made, stage, false, done, is_late);
	return ret;
}

/* into the root built under stage: the old root goes on top of the new
 * one, and is detached; then the propagation left */
static int enter(const struct rproc *rp, const char *stage, bool *done, bool *is_late)
{
	if (chdir(stage) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/"))
		return pr_errno("pid %d: cannot enter its root again (pivot_root)", rp->pid);
	return set_groups(rp, rp->core.task->made_ns, "", true, done, is_late);
}

int mntns_build(struct rctx *c, struct rproc *rp)
{
	const NsMade *made = rp->core.task->made_ns;
	bool *by_init;
	char stage[64];
	int ret;

	if (!made || !made->n_mounts)
		return 0;
	mntns_stage(rp->pid, stage, sizeof(stage));
	by_init = xzalloc(made->n_mounts);
	rp->um.mnt_done = xzalloc(made->n_mounts);
	rp->um.mnt_late = xzalloc(made->n_mounts);
	rp->um.mnt_inside = xzalloc(made->n_mounts);
	if (!by_init || !rp->um.mnt_done || !rp->um.mnt_late || !rp->um.mnt_inside)
		return -ENOMEM;
	ret = build(c, rp, stage, by_init, rp->um.mnt_inside, rp->um.mnt_done, rp->um.mnt_late);
	free(by_init);
	/* moved over the old root, which stays under it, as nspawn's outer
	 * child does: the init may mount its pid namespace's /proc only where
	 * a proc is fully visible (the kernel looks at the covered ones too);
	 * pivot_root would refuse the copy's locked root anyway */
	if (!ret &&
	    (chdir(stage) || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") || chdir("/")))
		ret = pr_errno("pid %d: cannot move its root over the old one", rp->pid);
	/* the sockets bound there, before the copy locks its mounts */
	if (!ret)
		ret = files_bind_in_container(&c->files, rp->pid);
	return ret;
}

#define INSIDE_MOUNT_MS 30000

/* in a child of the init, in its user namespace, as its root: mount m */
static void __attribute__((noreturn))
inside_child(struct rctx *c, const struct rproc *rp, const MadeMount *m)
{
	static struct inside_map im;
	char name[64];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (inside_map(rp, &im))
		_exit(1);
	/* its image read with kupdate's ids, before it takes root's there */
	if (m->has_tmpdir) {
		tmpdir_image_name(m->tmpdir, name, sizeof(name));
		if (img_reader_open(&im.tmpdir, c->dirfd, name, IMG_TMPDIR))
			_exit(1);
	}
	setfsgid(0);
	setfsuid(0);
	if (setfsuid(-1) != 0 || setfsgid(-1) != 0) {
		pr_err("pid %d: its user namespace has no root to make its mount on %s as", rp->pid,
		       m->point);
		_exit(1);
	}
	inside_now = &im;
	_exit(mount_one(c, rp, "", m) ? 1 : 0);
}

/* made by a child of the init, which takes root's ids in its user
 * namespace (files made there with kupdate's have no owner), but not the
 * init itself: it reads its images afterwards */
static int make_inside(struct rctx *c, const struct rproc *rp, const MadeMount *m)
{
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + INSIDE_MOUNT_MS * 1000000LL;
	int st = 0;
	pid_t ch, w;

	ch = fork();
	if (ch < 0)
		return pr_errno("pid %d: cannot fork to make its mount on %s", rp->pid, m->point);
	if (ch == 0)
		inside_child(c, rp, m);
	while ((w = waitpid(ch, &st, WNOHANG)) == 0 && now_ns(CLOCK_MONOTONIC) < deadline)
		usleep(1000);
	if (w == 0) {
		kill(ch, SIGKILL);
		waitpid(ch, &st, 0);
		pr_err("pid %d: its mount on %s was not made within %d s", rp->pid, m->point,
		       INSIDE_MOUNT_MS / 1000);
		return -ETIMEDOUT;
	}
	if (w < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		pr_err("pid %d: its mount on %s, made again inside its user namespace, failed",
		       rp->pid, m->point);
		return -EIO;
	}
	return 0;
}

int mntns_restore(struct rctx *c, const struct rproc *rp)
{
	const NsMade *made = rp->zombie ? NULL : rp->core.task->made_ns;
	_cleanup_free_ bool *done = NULL, *is_late = NULL;
	char stage[64];
	int ret = 0;

	if (!made || !made->n_mounts)
		return 0;
	mntns_stage(rp->pid, stage, sizeof(stage));
	if (rp->um.born) {
		/* the init, in the copy its builder made: its own mounts */
		bool *by_init = xzalloc(made->n_mounts);
		/* files made as its root (its own ids are set last): ids of
		 * kupdate's have no name there */

		if (!by_init)
			return -ENOMEM;
		/* in their order: those it made from inside too, not locked */
		for (size_t i = 1; !ret && i < made->n_mounts; i++)
			if ((by_init[i] = made_by_init(made, i, by_init)))
				ret = mount_one(c, rp, "", made->mounts[i]);
			else if (rp->um.mnt_inside && rp->um.mnt_inside[i])
				ret = make_inside(c, rp, made->mounts[i]);
		free(by_init);
		if (!ret)
			ret = set_groups(rp, made, "", true, rp->um.mnt_done, rp->um.mnt_late);
		if (!ret)
			pr_debug("pid %d: its mount namespace made again in its user namespace, "
				 "%zu mounts",
				 rp->pid, made->n_mounts);
		return ret;
	}
	done = xzalloc(made->n_mounts);
	is_late = xzalloc(made->n_mounts);
	if (!done || !is_late)
		return -ENOMEM;
	ret = build(c, rp, stage, NULL, NULL, done, is_late);
	if (!ret)
		ret = enter(rp, stage, done, is_late);
	/* the sockets of its ancestors bound there (nspawn's notify socket) */
	if (!ret)
		ret = files_bind_in_container(&c->files, rp->pid);
	/* in a user namespace it made: into a copy that namespace owns */
	if (!ret)
		ret = userns_copy_mounts(rp);
	if (ret)
		return ret;
	pr_debug("pid %d: its mount namespace made again, %zu mounts", rp->pid, made->n_mounts);
	return 0;
}

void mntns_cleanup(const struct rctx *c)
{
	for (size_t i = 0; c->procs && i < c->nr; i++) {
		const struct rproc *rp = &c->procs[i];
		char stage[64];

		if (rp->zombie || !rp->core.task || !rp->core.task->made_ns ||
		    !rp->core.task->made_ns->n_mounts)
			continue;
		mntns_stage(rp->pid, stage, sizeof(stage));
		if (rmdir(stage) && errno != ENOENT)
			pr_warn("cannot remove %s: %s", stage, strerror(errno));
	}
}
