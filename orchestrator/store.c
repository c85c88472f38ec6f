/* The image store's file system in the new boot (store.h). */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "store.h"
#include "util.h"

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif

static const struct {
	const char *name;
	uint64_t flag;
} vfs_opts[] = {
	{ "rw", 0 },
	{ "ro", MS_RDONLY },
	{ "nosuid", MS_NOSUID },
	{ "nodev", MS_NODEV },
	{ "noexec", MS_NOEXEC },
	{ "sync", MS_SYNCHRONOUS },
	{ "dirsync", MS_DIRSYNC },
	{ "mand", MS_MANDLOCK },
	{ "noatime", MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME },
	{ "relatime", MS_RELATIME },
	{ "strictatime", MS_STRICTATIME },
	{ "lazytime", MS_LAZYTIME },
	{ "nosymfollow", MS_NOSYMFOLLOW },
};

static int vfs_opt(const char *o, size_t len, uint64_t *flag)
{
	for (size_t i = 0; i < ARRAY_SIZE(vfs_opts); i++)
		if (strlen(vfs_opts[i].name) == len && !strncmp(o, vfs_opts[i].name, len)) {
			*flag = vfs_opts[i].flag;
			return 1;
		}
	return 0;
}

int store_mount_opts(const char *vfs, const char *super, uint64_t *flags, char **data)
{
	size_t dl = 0;
	char *d = calloc(1, strlen(super) + 1);

	if (!d)
		return -ENOMEM;
	*flags = 0;
	for (const char *p = vfs; *p;) {
		size_t n = strcspn(p, ",");
		uint64_t f;

		if (vfs_opt(p, n, &f))
			*flags |= f; /* the rest (idmapped) cannot be asked of mount(2) */
		p += n + (p[n] == ',');
	}
	for (const char *p = super; *p;) {
		size_t n = strcspn(p, ",");
		uint64_t f;

		if (vfs_opt(p, n, &f)) {
			*flags |= f;
		} else if (n) {
			if (dl)
				d[dl++] = ',';
			memcpy(d + dl, p, n);
			dl += n;
		}
		p += n + (p[n] == ',');
	}
	d[dl] = 0;
	*data = d;
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

/* mp is dir or one of its parents */
static bool path_under(const char *dir, const char *mp)
{
	size_t n = strlen(mp);

	if (!strcmp(mp, "/"))
		return dir[0] == '/';
	return !strncmp(dir, mp, n) && (dir[n] == 0 || dir[n] == '/');
}

struct minfo {
	char *root, *mp, *vfs, *fstype, *source, *super;
	unsigned maj, min;
};

/* split one mountinfo line in place: 0, or -1 if it is not one */
static int parse_line(char *line, struct minfo *mi)
{
	char *f[32];
	int n = 0, dash = -1;

	for (char *save = NULL, *t = strtok_r(line, " ", &save); t && n < 32;
	     t = strtok_r(NULL, " ", &save)) {
		if (dash < 0 && n >= 6 && !strcmp(t, "-"))
			dash = n;
		f[n++] = t;
	}
	if (dash < 0 || n < dash + 4 || sscanf(f[2], "%u:%u", &mi->maj, &mi->min) != 2)
		return -1;
	mi->root = f[3];
	mi->mp = f[4];
	mi->vfs = f[5];
	mi->fstype = f[dash + 1];
	mi->source = f[dash + 2];
	mi->super = f[dash + 3];
	unescape(mi->root);
	unescape(mi->mp);
	unescape(mi->source);
	return 0;
}

/* the fstab entry of mount point mp asks for a file system check */
static int fstab_pass(const char *fstab, const char *mp)
{
	FILE *f = setmntent(fstab ? fstab : "/etc/fstab", "re");
	struct mntent *e;
	int pass = 0;

	while (f && (e = getmntent(f)))
		if (!strcmp(e->mnt_dir, mp))
			pass = e->mnt_passno;
	if (f)
		endmntent(f);
	return pass;
}

void store_mount_free(StoreMount *sm)
{
	if (!sm)
		return;
	free(sm->mount_point);
	free(sm->source);
	free(sm->fstype);
	free(sm->data);
	free(sm);
}

int store_mount_find(const char *dir, const char *mountinfo, const char *fstab, StoreMount **out,
		     const char **why)
{
	_cleanup_free_ char *buf = NULL;
	struct minfo best = { 0 };
	size_t best_len = 0;
	struct stat st, dev;
	StoreMount *sm;
	int ret;

	*out = NULL;
	*why = NULL;
	if (stat(dir, &st))
		return -errno;
	ret = mountinfo ? read_file_at(AT_FDCWD, mountinfo, &buf, NULL)
			: read_proc(&buf, NULL, "/proc/self/mountinfo");
	if (ret)
		return ret;
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		struct minfo mi;

		if (parse_line(l, &mi) || makedev(mi.maj, mi.min) != st.st_dev ||
		    !path_under(dir, mi.mp) || strlen(mi.mp) < best_len)
			continue;
		best = mi; /* the last of several on one mount point is the one seen */
		best_len = strlen(mi.mp);
	}
	if (!best.mp) {
		*why = "its file system is not in the mount table";
		return 0;
	}
	if (!strcmp(best.mp, "/"))
		return 0; /* on the root file system: mounted before anything */
	if (strcmp(best.root, "/")) {
		*why = "it is a bind mount of a directory";
		return 0;
	}
	if (strncmp(best.source, "/dev/", 5) || stat(best.source, &dev) || !S_ISBLK(dev.st_mode)) {
		*why = "its file system's source is not a block device";
		return 0;
	}
	if (fstab_pass(fstab, best.mp) > 0) {
		*why = "its fstab entry asks for a file system check first (pass number)";
		return 0;
	}
	sm = calloc(1, sizeof(*sm));
	if (!sm)
		return -ENOMEM;
	store_mount__init(sm);
	sm->mount_point = xstrdup(best.mp);
	sm->source = xstrdup(best.source);
	sm->fstype = xstrdup(best.fstype);
	sm->has_flags = 1;
	if (!sm->mount_point || !sm->source || !sm->fstype ||
	    store_mount_opts(best.vfs, best.super, &sm->flags, &sm->data)) {
		store_mount_free(sm);
		return -ENOMEM;
	}
	*out = sm;
	return 0;
}

char *unit_name_from_path(const char *path, const char *suffix)
{
	size_t len = strlen(path);
	char *s = malloc(4 * len + strlen(suffix) + 2), *w = s;
	const char *p = path;

	if (!s)
		return NULL;
	while (*p == '/')
		p++;
	if (!*p)
		*w++ = '-';
	for (bool first = true; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '/') {
			while (p[1] == '/')
				p++;
			if (p[1])
				*w++ = '-';
			continue;
		}
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == ':' || c == '_' || (c == '.' && !first))
			*w++ = (char)c;
		else
			w += sprintf(w, "\\x%02x", c);
		first = false;
	}
	strcpy(w, suffix);
	return s;
}

static bool is_mount_point(const char *mp)
{
	_cleanup_free_ char *buf = NULL;

	if (read_proc(&buf, NULL, "/proc/self/mountinfo"))
		return false;
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		struct minfo mi;

		if (!parse_line(l, &mi) && !strcmp(mi.mp, mp))
			return true;
	}
	return false;
}

int store_mount_now(const StoreMount *sm, const char *store, int wait_ms)
{
	int64_t t0 = now_ns(CLOCK_MONOTONIC), waited;
	struct stat st;

	if (is_mount_point(sm->mount_point)) {
		printf("kupdate: %s is mounted already: nothing to do\n", sm->mount_point);
		return 0;
	}
	while (stat(sm->source, &st) || !S_ISBLK(st.st_mode)) {
		if (now_ns(CLOCK_MONOTONIC) - t0 > (int64_t)wait_ms * 1000000) {
			pr_err("the image store's device %s did not appear within %d s: %s is "
			       "left to its own mount (fstab), later in the boot",
			       sm->source, wait_ms / 1000, sm->mount_point);
			return -ENODEV;
		}
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	waited = now_ns(CLOCK_MONOTONIC) - t0;
	if (mount(sm->source, sm->mount_point, sm->fstype, sm->flags,
		  sm->data && *sm->data ? sm->data : NULL)) {
		int e = errno;

		pr_err("cannot mount the image store %s (%s) on %s with options '%s': %s; it is "
		       "left to its own mount (fstab), later in the boot",
		       sm->source, sm->fstype, sm->mount_point, sm->data ? sm->data : "",
		       strerror(e));
		return -e;
	}
	if (stat(store, &st) || !S_ISDIR(st.st_mode)) {
		int e = errno;

		if (!stat(store, &st))
			e = ENOTDIR; /* it is there, not a directory */

		umount2(sm->mount_point, 0);
		pr_err("%s holds no %s: not the image store of this cycle (was the device "
		       "renamed?); unmounted it",
		       sm->source, store);
		return -e;
	}
	printf("kupdate: image store %s mounted on %s (%s%s%s), %.2f s into the boot%s\n",
	       sm->source, sm->mount_point, sm->fstype, sm->data && *sm->data ? ", " : "",
	       sm->data ? sm->data : "", now_ns(CLOCK_BOOTTIME) / 1e9,
	       waited > 20 * 1000000 ? " (waited for its device)" : "");
	return 0;
}

char *store_unit_deps(const CycleManifest *m)
{
	if (!m->store)
		return xstrdup("");
	if (!m->store_mount)
		return xasprintf("RequiresMountsFor=%s\n", m->store);
	return xasprintf("RequiresMountsFor=%s\nWants=" STORE_UNIT "\nAfter=" STORE_UNIT "\n",
			 m->store);
}

int store_mount_validate(const CycleManifest *m)
{
	const StoreMount *sm = m->store_mount;

	if (!sm)
		return 0;
	/* RequiresMountsFor= of its parent goes into a unit file */
	if (!m->store || sm->mount_point[0] != '/' || strstr(sm->mount_point, "..") ||
	    strpbrk(sm->mount_point, " \t\n\\%$\"'") || !path_under(m->store, sm->mount_point) ||
	    !strcmp(sm->mount_point, "/") || strncmp(sm->source, "/dev/", 5) ||
	    strstr(sm->source, "..") || !sm->fstype[0]) {
		pr_err("the cycle manifest is damaged: image store mount '%s' from '%s'",
		       sm->mount_point, sm->source);
		return -EINVAL;
	}
	return 0;
}
