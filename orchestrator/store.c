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

#include "cr-log.h"
#include "cr-util.h"
#include "store.h"

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

/* mp is dir or one of its parents */
static bool path_under(const char *dir, const char *mp)
{
	size_t n = strlen(mp);

	if (!strcmp(mp, "/"))
		return dir[0] == '/';
	return !strncmp(dir, mp, n) && (dir[n] == 0 || dir[n] == '/');
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
	struct mount_table t;
	const struct mount_entry *best = NULL;
	size_t best_len = 0;
	struct stat st, dev;
	StoreMount *sm;
	int ret;

	*out = NULL;
	*why = NULL;
	if (stat(dir, &st))
		return -errno;
	ret = mount_table_read(mountinfo, &t);
	if (ret)
		return ret;
	for (size_t i = 0; i < t.n; i++) {
		const struct mount_entry *m = &t.e[i];

		if (makedev(m->maj, m->min) != st.st_dev || !path_under(dir, m->mp) ||
		    strlen(m->mp) < best_len)
			continue;
		best = m; /* the last of several on one mount point is the one seen */
		best_len = strlen(m->mp);
	}
	ret = 0;
	if (!best)
		*why = "its file system is not in the mount table";
	else if (!strcmp(best->mp, "/"))
		; /* on the root file system: mounted before anything */
	else if (strcmp(best->root, "/"))
		*why = "it is a bind mount of a directory";
	else if (strncmp(best->source, "/dev/", 5) || stat(best->source, &dev) ||
		 !S_ISBLK(dev.st_mode))
		*why = "its file system's source is not a block device";
	else if (fstab_pass(fstab, best->mp) > 0)
		*why = "its fstab entry asks for a file system check first (pass number)";
	else if (!(sm = calloc(1, sizeof(*sm)))) {
		ret = -ENOMEM;
	} else {
		store_mount__init(sm);
		sm->mount_point = xstrdup(best->mp);
		sm->source = xstrdup(best->source);
		sm->fstype = xstrdup(best->fstype);
		sm->has_flags = 1;
		if (!sm->mount_point || !sm->source || !sm->fstype ||
		    store_mount_opts(best->vfs, best->super, &sm->flags, &sm->data)) {
			store_mount_free(sm);
			ret = -ENOMEM;
		} else {
			*out = sm;
		}
	}
	mount_table_free(&t);
	return ret;
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
	struct mount_table t;
	bool found = false;

	if (mount_table_read(NULL, &t))
		return false;
	for (size_t i = 0; i < t.n && !found; i++)
		found = !strcmp(t.e[i].mp, mp);
	mount_table_free(&t);
	return found;
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
