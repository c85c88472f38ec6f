/* Update cycles on disk.
 *
 *   $KUPDATE_STATE_DIR (default /var/lib/kupdate)/
 *     cycles/.ID.tmp/       being written: not a cycle yet
 *     cycles/ID/            ready: renamed into place once complete and synced
 *       manifest.img        the cycle (cycle.proto), with a magic and a crc
 *       units/UNIT/         the engine's images of the unit
 *       claimed             the boot id of the boot that restores it
 *       status-UNIT.img     the result for each unit, in that boot
 *     last -> cycles/ID     the most recent cycle, for kupdate status
 *
 * Directories are 0700 and files 0600, owned by root.  A cycle is restored
 * at most once, in the boot that claims it (the one whose command line
 * names it); any other cycle found at boot is stale and removed. */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "cr-log.h"
#include "cr-msgfile.h"
#include "cr-util.h"
#include "cycle.h"
#include "store.h"

const char *run_dir(void)
{
	const char *d = getenv("KUPDATE_RUN_DIR");

	return d && *d ? d : "/run/kupdate";
}

const char *state_dir(void)
{
	const char *d = getenv("KUPDATE_STATE_DIR");

	return d && *d ? d : "/var/lib/kupdate";
}

char *cycle_path(const char *id, const char *fmt, ...)
{
	char tail[512] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(tail, sizeof(tail), fmt, ap);
		va_end(ap);
	}
	return xasprintf("%s/cycles/%s%s%s", state_dir(), id, fmt ? "/" : "", tail);
}

int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int rm_rf(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int ret = 0;

	if (!d)
		return unlink(path) && errno != ENOENT ? -errno : 0;
	while ((de = readdir(d))) {
		char *p;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", path, de->d_name);
		if (!p) {
			ret = -ENOMEM;
			break;
		}
		if (!lstat(p, &st) && S_ISDIR(st.st_mode))
			ret = rm_rf(p);
		else if (unlink(p))
			ret = -errno;
		free(p);
	}
	closedir(d);
	if (rmdir(path) && !ret)
		ret = -errno;
	return ret;
}

int rm_cycle_images(const char *units)
{
	struct stat st;

	if (!lstat(units, &st) && S_ISLNK(st.st_mode)) {
		char *target = realpath(units, NULL);
		size_t l = target ? strlen(target) : 0;

		/* STORE/ID/units: the images, then STORE/ID if nothing else is there */
		if (l > 6 && !strcmp(target + l - 6, "/units")) {
			rm_rf(target);
			target[l - 6] = 0;
			rmdir(target);
		}
		free(target);
		return unlink(units) && errno != ENOENT ? -errno : 0;
	}
	return rm_rf(units);
}

int rm_cycle_dir(const char *dir)
{
	_cleanup_free_ char *units = xasprintf("%s/units", dir);

	if (units)
		rm_cycle_images(units);
	return rm_rf(dir);
}

int current_boot_id(char *buf, size_t len)
{
	_cleanup_free_ char *b = NULL;
	int ret = read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", &b, NULL);

	if (ret)
		return ret;
	b[strcspn(b, "\n")] = 0;
	snprintf(buf, len, "%s", b);
	return 0;
}

char *new_cycle_id(void)
{
	struct timespec ts;
	struct tm tm;
	uint16_t r = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = ts.tv_nsec & 0xffff;
	return xasprintf("%04d%02d%02dT%02d%02d%02d-%04x", tm.tm_year + 1900, tm.tm_mon + 1,
			 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, r);
}

bool cycle_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (!n || n > 64 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
		      (id[i] >= 'A' && id[i] <= 'Z') || id[i] == '-' || id[i] == '_'))
			return false;
	return true;
}

int manifest_write(int dirfd, const CycleManifest *m)
{
	return cr_msgfile_write(dirfd, "manifest.img", CYCLE_KIND_MANIFEST, &m->base);
}

int manifest_validate(const CycleManifest *m)
{
	if (!cycle_id_valid(m->id) || m->format_version != CYCLE_FORMAT_VERSION) {
		pr_err("the cycle manifest is damaged or of another format (%u)",
		       m->format_version);
		return -EINVAL;
	}
	/* written into a unit file's RequiresMountsFor= by the generator */
	if (m->store &&
	    (m->store[0] != '/' || strstr(m->store, "..") || strpbrk(m->store, " \t\n\\%$\"'"))) {
		pr_err("the cycle manifest is damaged: image store '%s'", m->store);
		return -EINVAL;
	}
	if (store_mount_validate(m))
		return -EINVAL;
	for (size_t i = 0; i < m->n_units; i++) {
		const CycleUnit *u = m->units[i];

		if (!u->name[0] || strchr(u->name, '/') || !u->imgdir[0] ||
		    strstr(u->imgdir, "..") || u->imgdir[0] == '/' || u->main_pid <= 0 ||
		    u->n_ids > (1 << 22)) {
			pr_err("the cycle manifest is damaged: unit %zu", i);
			return -EINVAL;
		}
		for (size_t k = 0; k < u->n_ids; k++)
			if (u->ids[k] <= 0) {
				pr_err("the cycle manifest is damaged: unit %s has pid %d", u->name,
				       u->ids[k]);
				return -EINVAL;
			}
	}
	return 0;
}

int manifest_parse(const unsigned char *data, size_t len, CycleManifest **out)
{
	ProtobufCMessage *m;
	int ret = cr_msgfile_parse("manifest.img", CYCLE_KIND_MANIFEST, data, len,
				   &cycle_manifest__descriptor, &m);

	*out = NULL;
	if (ret)
		return ret;
	ret = manifest_validate((CycleManifest *)m);
	if (ret) {
		protobuf_c_message_free_unpacked(m, NULL);
		return ret;
	}
	*out = (CycleManifest *)m;
	return 0;
}

int manifest_read(const char *id, CycleManifest **out)
{
	_cleanup_free_ char *dir = cycle_path(id, NULL);
	_cleanup_close_ int dirfd = -1;
	ProtobufCMessage *m;
	int ret;

	*out = NULL;
	if (!dir)
		return -ENOMEM;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	ret = cr_msgfile_read(dirfd, "manifest.img", CYCLE_KIND_MANIFEST,
			      &cycle_manifest__descriptor, &m);
	if (ret)
		return ret;
	ret = manifest_validate((CycleManifest *)m);
	if (ret) {
		protobuf_c_message_free_unpacked(m, NULL);
		return ret;
	}
	if (strcmp(((CycleManifest *)m)->id, id)) {
		pr_err("cycle %s holds the manifest of cycle %s", id, ((CycleManifest *)m)->id);
		protobuf_c_message_free_unpacked(m, NULL);
		return -EINVAL;
	}
	*out = (CycleManifest *)m;
	return 0;
}

static char *status_name(const char *unit)
{
	return xasprintf("status-%s.img", unit);
}

int status_write(const char *id, const UnitStatus *s)
{
	_cleanup_free_ char *dir = cycle_path(id, NULL), *name = status_name(s->name);
	_cleanup_close_ int dirfd = -1;
	int ret;

	if (!dir || !name)
		return -ENOMEM;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	ret = cr_msgfile_write(dirfd, name, CYCLE_KIND_UNIT_STATUS, &s->base);
	if (!ret)
		fsync(dirfd);
	return ret;
}

int status_read(const char *id, const char *unit, UnitStatus **out)
{
	_cleanup_free_ char *dir = cycle_path(id, NULL), *name = status_name(unit);
	_cleanup_close_ int dirfd = -1;
	ProtobufCMessage *m;
	int ret;

	*out = NULL;
	if (!dir || !name)
		return -ENOMEM;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	if (faccessat(dirfd, name, F_OK, 0))
		return -ENOENT;
	ret = cr_msgfile_read(dirfd, name, CYCLE_KIND_UNIT_STATUS, &unit_status__descriptor, &m);
	if (ret)
		return ret;
	*out = (UnitStatus *)m;
	return 0;
}

/* The boot that claimed the cycle, or "" if none did. */
int cycle_claimed_by(const char *id, char *boot, size_t len)
{
	_cleanup_free_ char *p = cycle_path(id, "claimed");
	_cleanup_free_ char *b = NULL;
	char link[64];
	ssize_t n;
	int ret;

	boot[0] = 0;
	if (!p)
		return -ENOMEM;
	n = readlink(p, link, sizeof(link) - 1);
	if (n >= 0) {
		link[n] = 0;
		snprintf(boot, len, "%s", link);
		return 0;
	}
	if (errno == ENOENT)
		return 0;
	/* a regular file holding the boot id (kupdate before 2026-12-04) */
	ret = read_file_at(AT_FDCWD, p, &b, NULL);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	b[strcspn(b, "\n")] = 0;
	snprintf(boot, len, "%s", b);
	return 0;
}

/* Claim the cycle for this boot; 0 if it is ours (now or already),
 * -EALREADY if another boot claimed it.  The claim is a symbolic link
 * whose target is the boot id: it appears whole, so that units restoring
 * at the same time never read a half-written one, and it costs no
 * fsync (a file's did, 0.04-0.29 s in each of seven restores at once in
 * the emulated boot).  A claim that a power loss takes away is harmless:
 * only the boot the kexec made names the cycle. */
int cycle_claim(const char *id)
{
	char me[64], other[64];
	_cleanup_free_ char *p = cycle_path(id, "claimed");
	int ret;

	if (!p)
		return -ENOMEM;
	ret = current_boot_id(me, sizeof(me));
	if (ret)
		return ret;
	if (symlink(me, p) && errno != EEXIST)
		return -errno;
	ret = cycle_claimed_by(id, other, sizeof(other));
	if (ret)
		return ret;
	return strcmp(me, other) ? -EALREADY : 0;
}

/* Read the cycle id named on the kernel command line, or NULL. */
char *cmdline_cycle(void)
{
	_cleanup_free_ char *c = NULL;
	char *p, *e;

	/* KUPDATE_CMDLINE stands for /proc/cmdline in tests */
	if (getenv("KUPDATE_CMDLINE"))
		c = xstrdup(getenv("KUPDATE_CMDLINE"));
	else if (read_file_at(AT_FDCWD, "/proc/cmdline", &c, NULL))
		return NULL;
	if (!c)
		return NULL;
	for (p = c; (p = strstr(p, "kupdate.cycle=")); p++) {
		if (p != c && p[-1] != ' ')
			continue;
		p += strlen("kupdate.cycle=");
		e = p + strcspn(p, " \n");
		*e = 0;
		return cycle_id_valid(p) ? xstrdup(p) : NULL;
	}
	return NULL;
}
