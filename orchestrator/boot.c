/* The new boot's side of a cycle.
 *
 * kupdate-generator (systemd generator, argv[0]): if the command line names
 * a cycle (kupdate.cycle=ID) that no other boot claimed, every unit of it
 * without a result yet gets a drop-in whose start restores the unit
 * (`kupdate restore-unit`, Type=forking, PIDFile= the restored main pid);
 * the boot wants those units and kupdate-finish.service after them.
 * kupdate-netlock.service (before the network) drops the packets of the
 * saved connections until each unit's restore has put its sockets back.
 * kupdate-finish.service (every boot): units whose restore failed or did not
 * run are started the ordinary way; the pid reservation and the network
 * lock are released, the images removed; cycles of other boots are
 * abandoned (never restored) and their images removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "cr-fault.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "handoff.h"
#include "kupdate.h"
#include "links.h"
#include "sd.h"
#include "sessions.h"
#include "store.h"
#include "units.h"

/* systemd applies a unit's drop-ins in the order of their file names, from
 * every directory together: ours must come last, after an administrator's
 * override.conf (systemctl edit) or any NN-name.conf, or those would undo
 * our Restart=no / ExecStart= */
#define CHECKPOINTED_DROPIN "zz-kupdate-checkpointed.conf"
#define RESTORE_DROPIN	    "zz-kupdate-restore.conf"
#define PID_DIR		    "/run/kupdate"

const char *runtime_unit_dir(void)
{
	const char *d = getenv("KUPDATE_RUNTIME_UNIT_DIR");

	return d && *d ? d : "/run/systemd/system";
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
	_cleanup_free_ char *dir = xstrdup(path), *tmp = xasprintf("%s.tmp", path);
	int fd, ret;

	if (!dir || !tmp)
		return -ENOMEM;
	*strrchr(dir, '/') = 0;
	ret = mkdir_p(dir, 0755);
	if (ret) {
		pr_err("cannot create %s: %s", dir, strerror(-ret));
		return ret;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return pr_errno("cannot write %s", tmp);
	ret = write_all(fd, data, len);
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		pr_err("cannot write %s: %s", path, strerror(-ret));
		unlink(tmp);
	}
	return ret;
}

static int write_text(const char *path, const char *text)
{
	return write_file_atomic(path, text, strlen(text));
}

static char *dropin(const char *dir, const char *unit, const char *name)
{
	return xasprintf("%s/%s.d/%s", dir, unit, name);
}

int write_checkpointed_dropin(const char *unit)
{
	_cleanup_free_ char *p = dropin(runtime_unit_dir(), unit, CHECKPOINTED_DROPIN);
	_cleanup_free_ char *t =
		xasprintf("# kupdate: %s is checkpointed into a kernel update cycle: its\n"
			  "# processes end without the ordinary stop (runtime only)\n"
			  "[Unit]\nOnFailure=\n"
			  "[Service]\nRestart=no\nExecStop=\nExecStopPost=\n"
			  "SuccessExitStatus=SIGKILL\n",
			  unit);

	return p && t ? write_text(p, t) : -ENOMEM;
}

static void remove_dropin(const char *dir, const char *unit, const char *name)
{
	_cleanup_free_ char *p = dropin(dir, unit, name);
	_cleanup_free_ char *d = xasprintf("%s/%s.d", dir, unit);

	if (p)
		unlink(p);
	if (d)
		rmdir(d); /* if empty */
}

void remove_checkpointed_dropin(const char *unit)
{
	remove_dropin(runtime_unit_dir(), unit, CHECKPOINTED_DROPIN);
}

/* At boot a restored unit does not wait for basic.target as a started one
 * does (that is all of sysinit.target: udev's coldplug, ... several seconds
 * in our guests): its processes exist already.  It waits for what its
 * restore needs: the file systems, the sysctls (pid_max), the boot's
 * clean-up of /tmp and /run (after which its files stay), journald (its
 * output goes to a new stream) and the network lock.  Its own unit file's
 * dependencies (After=network.target, ...) still hold. */
#define BOOT_RESTORE_ORDER                                                             \
	"Wants=kupdate-netlock.service\n"                                              \
	"After=kupdate-netlock.service\n"                                              \
	"DefaultDependencies=no\n"                                                     \
	"After=local-fs.target systemd-sysctl.service systemd-tmpfiles-setup.service " \
	"systemd-journald.socket\n"                                                    \
	"Conflicts=shutdown.target\n"                                                  \
	"Before=shutdown.target\n"

/* A restore competes for the CPU with the rest of the boot (udev's
 * coldplug, journald, tmpfiles, the other restores): until the boot is
 * done it gets ten times a unit's default share.  The restored processes
 * get their own nice values and policies back (the images carry them); the
 * weight is the unit's, and once the boot is over its CPUWeight= holds. */
#define BOOT_RESTORE_SERVICE "StartupCPUWeight=1000\n"

const char *anchor_path(void)
{
	const char *a = getenv("KUPDATE_ANCHOR");

	return a && *a ? a : KUPDATE_LIBDIR "/kupdate-anchor";
}

/* A unit whose processes had namespaces of their own: its ExecStartPre= is
 * kupdate-anchor, which systemd runs with the unit's whole sandboxing (no
 * prefix), so that the restore (ExecStart=+, full privileges, the same
 * cgroup) finds the namespaces a fresh start of the unit gets, and
 * restores the tree into them.  The anchor ends by itself after the
 * start's timeout.  It is a process in the cgroup when ExecStart= begins,
 * which systemd refuses for a unit with SendSIGKILL=no (mariadb's: "Will
 * not start SendSIGKILL=no service ... while processes exist"): the
 * drop-in sets it for the restore's start only (the unit's own settings
 * come back with the reload once the boot's restores are done). */
#define RESTORE_TIMEOUT_S 600

int write_restore_dropin(const char *dir, const char *unit, const char *exe, const char *id,
			 bool here, const char *store_deps, unsigned namespaces)
{
	_cleanup_free_ char *p = dropin(dir, unit, RESTORE_DROPIN);
	const char *mounts = store_deps ? store_deps : "";
	_cleanup_free_ char *anchor = namespaces
					      ? xasprintf("SendSIGKILL=yes\nExecStartPre=%s %d\n",
							  anchor_path(), RESTORE_TIMEOUT_S + 60)
					      : xstrdup("");
	_cleanup_free_ char *t =
		xasprintf("# kupdate: this start restores %s from kernel update cycle %s\n"
			  "[Unit]\n%s%s"
			  "[Service]\nType=forking\nPIDFile=" PID_DIR "/%s.pid\nGuessMainPID=no\n"
			  "Restart=no\nRemainAfterExit=no\nTimeoutStartSec=%d\n"
			  "ExecCondition=\nExecStartPre=\nExecStartPost=\nExecStart=\n%s"
			  "ExecStart=+%s restore-unit --cycle %s --unit %s%s\n%s",
			  unit, id, here ? "" : BOOT_RESTORE_ORDER, mounts, unit, RESTORE_TIMEOUT_S,
			  anchor ? anchor : "", exe, id, unit, here ? " --here" : "",
			  here ? "" : BOOT_RESTORE_SERVICE);

	return p && t && anchor ? write_text(p, t) : -ENOMEM;
}

/* Test only (cr-engine/base/fault.h): the boot side takes its faults from
 * kupdate.fault= on the kernel command line (no environment reaches a
 * generator or a unit's ExecStart from the old boot). */
static void fault_from_cmdline(void)
{
	_cleanup_free_ char *c = NULL;
	char *p;

	if (getenv("KUPDATE_FAULT"))
		return;
	if (getenv("KUPDATE_CMDLINE"))
		c = xstrdup(getenv("KUPDATE_CMDLINE"));
	else if (read_file_at(AT_FDCWD, "/proc/cmdline", &c, NULL))
		return;
	for (p = c; p && (p = strstr(p, "kupdate.fault=")); p++) {
		if (p != c && p[-1] != ' ')
			continue;
		p += strlen("kupdate.fault=");
		p[strcspn(p, " \n")] = 0;
		setenv("KUPDATE_FAULT", p, 1);
		return;
	}
}

char *self_exe(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return xstrdup("/usr/sbin/kupdate");
	buf[n] = 0;
	return xstrdup(buf);
}

/* the cycle this boot restores, or NULL: named on the command line, with a
 * manifest, not claimed by another boot */
static char *boot_cycle(CycleManifest **m)
{
	char *id = cmdline_cycle();
	char other[64], me[64];

	*m = NULL;
	if (!id)
		return NULL;
	if (manifest_read(id, m)) {
		pr_warn("the command line names cycle %s, which has no readable manifest in %s: "
			"nothing is restored",
			id, state_dir());
		free(id);
		return NULL;
	}
	if (cycle_claimed_by(id, other, sizeof(other)) == 0 && other[0] &&
	    (current_boot_id(me, sizeof(me)) || strcmp(me, other))) {
		pr_warn("cycle %s was restored by an earlier boot (%s): not again", id, other);
		cycle_manifest__free_unpacked(*m, NULL);
		*m = NULL;
		free(id);
		return NULL;
	}
	return id;
}

static bool has_status(const char *id, const char *unit)
{
	UnitStatus *s;

	if (status_read(id, unit, &s))
		return false;
	unit_status__free_unpacked(s, NULL);
	return true;
}

/* ------------------------------------------------------------ generator */

/* Without a pid reservation (a kernel without our patch, or apply
 * --no-pid-reserve), the saved pids are kept free by moving the pid
 * allocator above all of them before the boot starts anything else:
 * generators run before any unit.  It works while the saved pids are
 * above the ones the boot has used so far (the usual case: services got
 * theirs after the boot), and as long as the allocator does not wrap. */
static void raise_last_pid(const CycleManifest *m)
{
	_cleanup_free_ char *res = NULL, *cur = NULL;
	int32_t max = 0;
	char buf[16];
	int fd;

	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/pid_reserve", &res, NULL) == 0 &&
	    res[strspn(res, " \n")])
		return; /* reserved by the kernel */
	for (size_t i = 0; i < m->n_units; i++)
		for (size_t k = 0; k < m->units[i]->n_ids; k++)
			if (m->units[i]->ids[k] > max)
				max = m->units[i]->ids[k];
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/ns_last_pid", &cur, NULL))
		return;
	if (atoi(cur) >= max) {
		/* the boot has gone past them: those its tasks hold are found
		 * by the restores (the unit is then started the ordinary way) */
		pr_warn("no pid reservation on this kernel: pids are already past the saved ones "
			"(last %d, the highest saved %d)",
			atoi(cur), max);
		return;
	}
	fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	snprintf(buf, sizeof(buf), "%d", max);
	if (fd < 0 || write(fd, buf, strlen(buf)) < 0)
		pr_warn("no pid reservation, and cannot raise ns_last_pid to %d: %s", max,
			strerror(errno));
	else
		pr_warn("no pid reservation on this kernel: pids now start above %d (was %d)", max,
			atoi(cur));
	if (fd >= 0)
		close(fd);
}

/* The restores read their images seconds after the generator runs (the
 * boot goes on to local-fs.target and journald first): their reading from
 * the disk is started now, in the background (readahead), and they find
 * them in memory.  A store (apply --store) is not mounted yet, and on DAX
 * needs none.  Errors do not matter here: the restore meets them. */
void prefetch_cycle_images(const char *id, const CycleManifest *m)
{
	if (m->store)
		return;
	for (size_t i = 0; i < m->n_units; i++) {
		_cleanup_free_ char *dir = cycle_path(id, "%s", m->units[i]->imgdir);
		_cleanup_free_ char *pre = dir ? xasprintf("%s.pre", dir) : NULL;
		const char *dirs[] = { dir, pre }; /* its images, its pre-dump's */

		for (int k = 0; k < 2; k++) {
			DIR *d = dirs[k] ? opendir(dirs[k]) : NULL;
			struct dirent *de;

			while (d && (de = readdir(d))) {
				int fd;

				if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
					continue;
				fd = openat(dirfd(d), de->d_name,
					    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
				if (fd < 0)
					continue;
				posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
				close(fd);
			}
			if (d)
				closedir(d);
		}
	}
}

/* kupdate-store.service: the store's file system mounted from its device
 * node as soon as the root file system is there (store.h); ordered before
 * the store's own .mount unit (of fstab), whose job then completes */
static void write_store_unit(const char *early, const char *exe, const char *id,
			     const StoreMount *sm)
{
	_cleanup_free_ char *p = xasprintf("%s/" STORE_UNIT, early);
	_cleanup_free_ char *parent = xstrdup(sm->mount_point);
	_cleanup_free_ char *mount = unit_name_from_path(sm->mount_point, ".mount");
	_cleanup_free_ char *t = NULL;
	char *slash = parent ? strrchr(parent, '/') : NULL;

	if (!p || !slash || !mount)
		return;
	if (slash == parent)
		slash[1] = 0;
	else
		*slash = 0;
	t = xasprintf("# kupdate: the image store of kernel update cycle %s, mounted from %s\n"
		      "# as soon as the kernel has made it, not after udev announces it\n"
		      "[Unit]\nDescription=Mount the image store of a kernel update (kupdate)\n"
		      "Documentation=man:kupdate(8)\nDefaultDependencies=no\n"
		      "RequiresMountsFor=%s\nBefore=%s kupdate-netlock.service\n"
		      "[Service]\nType=oneshot\nRemainAfterExit=yes\nTimeoutStartSec=60\n"
		      "ExecStart=%s mount-store\n" BOOT_RESTORE_SERVICE,
		      id, sm->source, parent, mount, exe);
	if (t)
		write_text(p, t);
}

/* A unit whose file was in /run (systemd-run's transient units, runtime
 * units) has none in this boot: written again, as a runtime unit
 * (runtime_unit_dir(), which lasts until the next boot as the old one did),
 * unless a file of that name is there already */
static void write_runtime_unit(const CycleUnit *cu)
{
	_cleanup_free_ char *p = NULL;
	struct stat st;

	if (!cu->has_runtime_unit || !unit_name_valid(cu->name))
		return;
	p = xasprintf("%s/%s", runtime_unit_dir(), cu->name);
	if (!p || !lstat(p, &st) || errno != ENOENT)
		return;
	if (!write_file_atomic(p, (const char *)cu->runtime_unit.data, cu->runtime_unit.len))
		pr_info("unit %s: its unit file of the old boot (%s) written again as %s", cu->name,
			cu->runtime_unit_path ?: "in /run", p);
}

/* /tmp through the cycle.  Debian's tmpfiles.d/tmp.conf empties /tmp at
 * every boot ("D /tmp"): in a cycle's boot that would take from the
 * restored processes the files they left there (a build's gcc writes
 * /tmp/ccXXXX.s, as reads it by name afterwards).  For this boot only, an
 * override in /run/tmpfiles.d makes the same directory without emptying it
 * ("d"): the userspace goes on, its /tmp with it.  An administrator's
 * /etc/tmpfiles.d/tmp.conf wins over /run and is left as it is; a /tmp
 * that is a tmpfs is empty in any new boot (not kept: see the man page). */
static void keep_tmp(void)
{
	const char *root = getenv("KUPDATE_TMPFILES_ROOT") ?: "";
	_cleanup_free_ char *etc = xasprintf("%s/etc/tmpfiles.d/tmp.conf", root);
	_cleanup_free_ char *usr = xasprintf("%s/usr/lib/tmpfiles.d/tmp.conf", root);
	_cleanup_free_ char *run = xasprintf("%s/run/tmpfiles.d/tmp.conf", root);
	_cleanup_free_ char *text = NULL, *out = NULL;
	size_t len, o = 0, changed = 0;

	if (!etc || !usr || !run || !access(etc, F_OK) || !access(run, F_OK) ||
	    read_file_at(AT_FDCWD, usr, &text, &len))
		return;
	out = malloc(len + 1);
	if (!out)
		return;
	for (char *l = text, *e; *l; l = e) {
		e = l + strcspn(l, "\n");
		e += *e == '\n';
		memcpy(out + o, l, e - l);
		/* "D /tmp ..." or "D! /tmp ...": the type's letter only */
		if (l[0] == 'D' && strspn(l + 1, "!-=~^+") + 1 < (size_t)(e - l) &&
		    !strncmp(l + 1 + strspn(l + 1, "!-=~^+"), " /tmp ", 6)) {
			out[o] = 'd';
			changed++;
		}
		o += e - l;
	}
	if (changed && !write_file_atomic(run, out, o))
		pr_info("/tmp is kept through this boot (%s: %s empties it at boot)", run, usr);
}

int cmd_generator(int argc, char **argv)
{
	CycleManifest *m;
	_cleanup_free_ char *id = NULL, *exe = self_exe(), *wants = NULL, *after = NULL,
			    *deps = NULL;
	const char *early;
	size_t wl = 0, al = 0;

	/* messages go to the kernel log: journald does not run yet */
	if (!getenv("KUPDATE_CMDLINE")) {
		int kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);

		if (kmsg >= 0)
			cr_log_redirect(kmsg, -1);
	}
	if (argc < 2)
		return 0;
	early = argc > 2 ? argv[2] : argv[1];
	fault_from_cmdline();
	id = boot_cycle(&m);
	if (!id)
		return 0;
	if (cr_fault_unit("generator", 0, NULL)) {
		pr_err("generator fault injected by kupdate.fault=: no unit of cycle %s is set up "
		       "for its restore; kupdate-finish reports them",
		       id);
		cycle_manifest__free_unpacked(m, NULL);
		return 1;
	}
	if (!getenv("KUPDATE_CMDLINE")) /* not in tests */
		raise_last_pid(m);
	keep_tmp();
	prefetch_cycle_images(id, m);
	deps = store_unit_deps(m);
	wants = calloc(1, 1);
	after = calloc(1, 1);
	for (size_t i = 0; i < m->n_units && wants && after && deps; i++) {
		const char *u = m->units[i]->name;
		char *nw, *na;

		if (has_status(id, u))
			continue; /* restored, or handed to an ordinary start */
		write_runtime_unit(m->units[i]);
		if (write_restore_dropin(early, u, exe, id, false, deps, m->units[i]->namespaces))
			continue;
		nw = xasprintf("%s %s", wants, u);
		na = xasprintf("%s %s", after, u);
		free(wants);
		free(after);
		wants = nw;
		after = na;
		wl++;
		al++;
	}
	if (wants && after && wl) {
		_cleanup_free_ char *p1 =
			xasprintf("%s/multi-user.target.d/" RESTORE_DROPIN, early);
		_cleanup_free_ char *t1 =
			xasprintf("# kupdate: units restored from cycle %s\n[Unit]\nWants=%s "
				  "kupdate-finish.service\n",
				  id, wants);
		_cleanup_free_ char *p2 =
			xasprintf("%s/kupdate-finish.service.d/" RESTORE_DROPIN, early);
		/* the images, which it removes and the network lock reads, may be
		 * in a store (apply --store) */
		_cleanup_free_ char *t2 = xasprintf("[Unit]\nAfter=%s\n%s", after, deps);

		if (p1 && t1)
			write_text(p1, t1);
		if (p2 && t2)
			write_text(p2, t2);
		if (m->store) {
			/* the connections to hold are read from the images: the
			 * network must not come up before the store is mounted */
			_cleanup_free_ char *p3 =
				xasprintf("%s/kupdate-netlock.service.d/" RESTORE_DROPIN, early);
			_cleanup_free_ char *t3 = xasprintf("[Unit]\n%s", deps);

			if (p3 && t3)
				write_text(p3, t3);
		}
		if (m->store_mount)
			write_store_unit(early, exe, id, m->store_mount);
		pr_info("cycle %s: %zu units restored at boot", id, wl);
	}
	cycle_manifest__free_unpacked(m, NULL);
	return 0;
}

/* ------------------------------------------------------------ netlock */

static int lock_units(const CycleManifest *m, const char *id, bool lock, const char *only)
{
	int ret = 0;

	for (size_t i = 0; i < m->n_units; i++) {
		_cleanup_free_ char *dir = cycle_path(id, "%s", m->units[i]->imgdir);
		struct cr_conn *c = NULL;
		size_t n = 0;

		if (only && strcmp(only, m->units[i]->name))
			continue;
		/* in a network namespace of its own, made at its start: its
		 * connections are not the host's to hold */
		if (m->units[i]->namespaces & CLONE_NEWNET)
			continue;
		if (!dir || cr_images_connections(dir, &c, &n)) {
			/* images gone (restored, abandoned): nothing to hold; but
			 * before the restores, a store that is not mounted */
			if (lock && m->units[i]->connections)
				pr_warn("%s: its images are not readable (%s%s): its %u "
					"connections are not held",
					m->units[i]->name, m->store ? "is the store mounted? " : "",
					dir ? dir : "", m->units[i]->connections);
			continue;
		}
		if (n && cr_net_lock(c, n, lock))
			ret = -EIO;
		else if (n)
			printf("kupdate: %s: %zu connections %s\n", m->units[i]->name, n,
			       lock ? "held" : "released");
		free(c);
	}
	return ret;
}

int cmd_netlock(int argc, char **argv)
{
	CycleManifest *m;
	_cleanup_free_ char *id = NULL;
	int ret;

	(void)argv;
	if (argc > 1) {
		printf("usage: kupdate netlock\n"
		       "Drop the packets of the connections saved in the cycle this boot\n"
		       "restores, until each unit's restore takes them over (run by\n"
		       "kupdate-netlock.service before the network starts).\n");
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	id = boot_cycle(&m);
	if (!id)
		return 0;
	ret = lock_units(m, id, true, NULL);
	cycle_manifest__free_unpacked(m, NULL);
	return ret ? 1 : 0;
}

int cmd_mount_store(int argc, char **argv)
{
	CycleManifest *m;
	_cleanup_free_ char *id = NULL;
	int ret = 0;

	if (argc > 1) {
		printf("usage: kupdate mount-store\n"
		       "Mount the image store of the cycle this boot restores (apply --store)\n"
		       "from its device node, without waiting for udev (run by\n"
		       "kupdate-store.service, which kupdate-generator writes).\n");
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	fault_from_cmdline();
	id = boot_cycle(&m);
	if (!id)
		return 0;
	if (m->store_mount && cr_fault_unit("store-mount", 0, NULL)) {
		pr_err("store-mount fault injected by kupdate.fault=: %s is left to its own mount "
		       "(fstab), later in the boot",
		       m->store_mount->mount_point);
		ret = -EIO;
	} else if (m->store_mount) {
		ret = store_mount_now(m->store_mount, m->store, 10000);
	}
	cycle_manifest__free_unpacked(m, NULL);
	return ret ? 1 : 0;
}

/* ------------------------------------------------------------ restore-unit */

static const CycleUnit *find_unit(const CycleManifest *m, const char *unit)
{
	for (size_t i = 0; i < m->n_units; i++)
		if (!strcmp(m->units[i]->name, unit))
			return m->units[i];
	return NULL;
}

static void fill_kernel(UnitStatus *s, char *rel, size_t rl, char *boot, size_t bl)
{
	struct utsname un;

	uname(&un);
	snprintf(rel, rl, "%s", un.release);
	current_boot_id(boot, bl);
	s->new_kernel = rel;
	s->new_boot_id = boot;
}

/* The restore's detailed log (every step, with times: kupdate -vv) goes
 * to PID_DIR/restore-UNIT.log unless --log-file names another file; its
 * first line says how long the process took from systemd's fork to here
 * (exec, the dynamic loader). */
static void restore_log_open(const char *unit)
{
	_cleanup_free_ char *p = NULL;
	unsigned long long start;
	int fd;

	if (cr_log_fd() < 0 && !mkdir_p(PID_DIR, 0755) &&
	    (p = xasprintf(PID_DIR "/restore-%s.log", unit))) {
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0)
			cr_log_redirect(STDERR_FILENO, fd);
	}
	if (!cr_process_start(getpid(), &start))
		pr_debug("restore-unit %s: started %.0f ms after systemd forked it", unit,
			 (now_ns(CLOCK_BOOTTIME) -
			  (double)start * 1e9 / (double)sysconf(_SC_CLK_TCK)) /
				 1e6);
	/* the unit's CPU weight (StartupCPUWeight= of the drop-in, while the
	 * boot lasts) */
	{
		_cleanup_free_ char *cg = own_cgroup(), *wp = NULL, *w = NULL;

		if (cg && (wp = xasprintf("%s%s/cpu.weight", cgroup_root(), cg)) &&
		    !read_file_at(AT_FDCWD, wp, &w, NULL))
			pr_debug("restore-unit %s: cpu.weight %.*s", unit, (int)strcspn(w, "\n"),
				 w);
	}
}

/* Where a boot restore's time went, at debug level: the CPU time of
 * kupdate's process (its threads included) against the restore's wall
 * time; the rest went to waiting (for a CPU: the boot starts many units at
 * once, or for a disk). */
static void log_cpu_use(const char *unit, int64_t wall_ns)
{
	struct rusage ru;
	double user, sys;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	user = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3;
	sys = ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
	pr_debug("restore-unit %s: kupdate on a CPU %.1f ms (user %.1f, system %.1f) of %.1f ms",
		 unit, user + sys, user, sys, wall_ns / 1e6);
}

/* Is unit of cycle id ours to restore in this boot?  The boot the cycle
 * was made for (with --here, the boot that made it), claimed by it, the
 * unit not handled yet.  0, or -1 (said). */
static int may_restore(const CycleManifest *m, const char *id, const char *unit, bool here)
{
	_cleanup_free_ char *cmd = cmdline_cycle();
	char me[64];

	current_boot_id(me, sizeof(me));
	if (here ? strcmp(m->old_boot_id, me) : (!cmd || strcmp(cmd, id))) {
		pr_err("unit %s: cycle %s is not the one this boot was started for: not restored",
		       unit, id);
		return -1;
	}
	if (cycle_claim(id)) {
		pr_err("unit %s: cycle %s was claimed by another boot: not restored", unit, id);
		return -1;
	}
	if (has_status(id, unit)) {
		pr_err("unit %s was already handled in this cycle: not restored again", unit);
		return -1;
	}
	return 0;
}

/* The process kupdate-anchor left in our cgroup (the unit's
 * ExecStartPre=): it lives in the namespaces systemd built for the unit.
 * Its pid, or 0 (said). */
static pid_t find_anchor(const char *unit)
{
	_cleanup_free_ char *cg = own_cgroup(), *path = NULL, *procs = NULL;
	char *save = NULL;

	if (!cg || !(path = xasprintf("%s%s/cgroup.procs", cgroup_root(), cg)) ||
	    read_file_at(AT_FDCWD, path, &procs, NULL)) {
		pr_err("unit %s: cannot read the processes of its cgroup", unit);
		return 0;
	}
	for (char *l = strtok_r(procs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		pid_t pid = (pid_t)strtol(l, NULL, 10);
		char exe[64], buf[PATH_MAX];
		ssize_t n;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
		n = readlink(exe, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = 0;
		if (!strcmp(buf, anchor_path()))
			return pid;
	}
	pr_err("unit %s: no kupdate-anchor in its cgroup holds the namespaces systemd builds "
	       "for it (its ExecStartPre= %s failed?)",
	       unit, anchor_path());
	return 0;
}

/* DynamicUser=: the anchor runs as the uid and gid systemd allocated for
 * the unit in this boot; its processes must get the same back */
static int check_dynamic_user(const CycleUnit *cu, pid_t anchor)
{
	_cleanup_free_ char *path = xasprintf("/proc/%d/status", anchor), *st = NULL;
	const char *u, *g;

	if (!cu->has_dynamic_uid)
		return 0;
	if (!path || read_file_at(AT_FDCWD, path, &st, NULL) || !(u = strstr(st, "\nUid:")) ||
	    !(g = strstr(st, "\nGid:"))) {
		pr_err("unit %s: cannot read the credentials of its anchor %d", cu->name, anchor);
		return -EIO;
	}
	if (strtoul(u + 5, NULL, 10) != cu->dynamic_uid ||
	    strtoul(g + 5, NULL, 10) != cu->dynamic_gid) {
		pr_err("unit %s: DynamicUser= gave it uid %lu gid %lu in this boot, and its "
		       "processes ran as uid %u gid %u: not restored",
		       cu->name, strtoul(u + 5, NULL, 10), strtoul(g + 5, NULL, 10),
		       cu->dynamic_uid, cu->dynamic_gid);
		return -ESTALE;
	}
	return 0;
}

/* the unit's position and name for the engine's fault checks (tests) */
static void fault_unit_env(const CycleManifest *m, const CycleUnit *cu, const char *unit)
{
	for (size_t i = 0; i < m->n_units; i++)
		if (m->units[i] == cu) {
			char idx[24];

			snprintf(idx, sizeof(idx), "%zu", i + 1);
			setenv("KUPDATE_FAULT_UNIT", idx, 1);
			setenv("KUPDATE_FAULT_UNIT_NAME", unit, 1);
		}
}

/* The listening sockets the caller passed (systemd's socket activation
 * for a unit triggered by .socket units: LISTEN_FDS from fd 3 on,
 * LISTEN_PID ours): the tree's listeners bound to the same addresses are
 * those (cr_restore_opts.listen_fds); the restored tree does not inherit
 * the rest. */
size_t passed_listeners(int **fds)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	long k = n ? strtol(n, NULL, 10) : 0;

	*fds = NULL;
	if (!pid || strtol(pid, NULL, 10) != getpid() || k <= 0 || k > 256)
		return 0;
	*fds = calloc(k, sizeof(int));
	for (long i = 0; *fds && i < k; i++) {
		(*fds)[i] = 3 + (int)i;
		fcntl(3 + (int)i, F_SETFD, FD_CLOEXEC);
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (*fds)
		pr_debug("%ld listening sockets passed (LISTEN_FDS)", k);
	return *fds ? (size_t)k : 0;
}

/* The tree, into the namespaces systemd built for the unit (held by its
 * anchor), with the login sessions it carries (sessions.c): what of those
 * could not be handed back to logind goes to swhy (else ""). */
/* Its unix connections to units restored apart (links.c): met in
 * $KUPDATE_RUN_DIR/links/ID with the other units' restores */
static int unit_links(const CycleManifest *m, const char *id, const CycleUnit *cu,
		      const char *imgdir, struct cr_unix_link **links, size_t *nr)
{
	_cleanup_free_ char *rdv = xasprintf("%s/links/%s", run_dir(), id);
	char **peers = calloc(m->n_units ? m->n_units : 1, sizeof(char *));
	size_t np = 0;
	int ret = rdv && peers ? 0 : -ENOMEM;

	for (size_t i = 0; !ret && i < m->n_units; i++)
		if (m->units[i] != cu && !(peers[np++] = cycle_path(id, "%s", m->units[i]->imgdir)))
			ret = -ENOMEM;
	if (!ret)
		ret = links_gather(imgdir, (const char *const *)peers, np, rdv, links, nr);
	for (size_t i = 0; peers && i < np; i++)
		free(peers[i]);
	free(peers);
	return ret;
}

static int restore_tree(struct cr_restore_opts *o, const CycleManifest *m, const char *id,
			const CycleUnit *cu, const char *unit, pid_t *root, char *swhy, size_t len)
{
	struct session_holds h = { 0 };
	_cleanup_free_ pid_t *ids = NULL;
	struct cr_unix_link *links = NULL;
	size_t nids = 0;
	int ret = 0, status = 0;

	swhy[0] = 0;
	if (cu->namespaces && !(o->ns_pid = find_anchor(unit)))
		ret = -ESRCH;
	if (!ret && o->ns_pid)
		ret = check_dynamic_user(cu, o->ns_pid);
	if (!ret && cu->n_sessions)
		ret = cr_images_ids(o->imgdir, &ids, &nids);
	if (!ret)
		ret = sessions_prepare(cu);
	if (!ret)
		ret = unit_links(m, id, cu, o->imgdir, &links, &o->nr_links);
	o->links = links;
	if (!ret)
		ret = sessions_hold(cu, ids, nids, &h);
	o->cgroups = h.places;
	o->nr_cgroups = h.nplaces;
	if (!ret)
		ret = cr_restore(o, root, &status);
	links_close(&links, &o->nr_links);
	o->links = NULL;
	if (!ret && cu->n_sessions && sessions_adopt(cu, &h, swhy, len))
		pr_warn("unit %s: %s", unit, swhy);
	sessions_release(&h);
	o->cgroups = NULL;
	o->nr_cgroups = 0;
	if (o->ns_pid > 0)
		kill(o->ns_pid, SIGKILL); /* started by this unit's ExecStartPre= */
	return ret;
}

int cmd_restore_unit(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cycle", required_argument, NULL, 'c' },
		{ "unit", required_argument, NULL, 'u' },
		{ "here", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *id = NULL, *unit = NULL;
	bool here = false;
	CycleManifest *m = NULL;
	const CycleUnit *cu;
	UnitStatus st = UNIT_STATUS__INIT;
	struct cr_restore_opts o = { 0 };
	_cleanup_free_ char *dir = NULL, *pidfile = NULL;
	_cleanup_free_ int *lfds = NULL;
	char rel[128], boot[64], why[1200], swhy[256];
	pid_t root = 0;
	bool unlock_fault;
	int c, ret;
	int64_t t0 = now_ns(CLOCK_MONOTONIC), boot0 = now_ns(CLOCK_BOOTTIME);

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			id = optarg;
			break;
		case 'u':
			unit = optarg;
			break;
		case 'H':
			here = true;
			break;
		case 'h':
			printf("usage: kupdate restore-unit --cycle ID --unit UNIT\n"
			       "Restore UNIT from cycle ID into the calling unit's cgroup (the\n"
			       "ExecStart= of the drop-in kupdate-generator writes).\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!id || !unit || !cycle_id_valid(id) || !unit_name_valid(unit)) {
		pr_err("restore-unit: needs --cycle ID and --unit UNIT");
		return 2;
	}
	fault_from_cmdline();
	restore_log_open(unit);
	if (manifest_read(id, &m)) {
		pr_err("unit %s: cycle %s has no readable manifest in %s", unit, id, state_dir());
		return 1;
	}
	pr_debug("restore-unit %s: manifest of cycle %s read", unit, id);
	cu = find_unit(m, unit);
	if (!cu) {
		pr_err("unit %s is not part of cycle %s", unit, id);
		goto fail_nostatus;
	}
	if (may_restore(m, id, unit, here))
		goto fail_nostatus;
	dir = cycle_path(id, "%s", cu->imgdir);
	pidfile = xasprintf(PID_DIR "/%s.pid", unit);
	if (!dir || !pidfile || mkdir_p(PID_DIR, 0755))
		goto fail_nostatus;
	unlink(pidfile);
	o.imgdir = dir;
	o.cycle_id = id;
	o.detach = true;
	o.pidfile = pidfile;
	o.open_external = journal_stream;
	o.no_rto_revert = m->no_rto_revert;
	o.nr_listen_fds = passed_listeners(&lfds);
	o.listen_fds = lfds;
	fault_unit_env(m, cu, unit);
	unlock_fault = cr_fault("unlock");
	if (unlock_fault)
		o.no_net_unlock = true;
	/* kupdate-finish removes the lock's table after every restore: here,
	 * its check would only slow the restores still running */
	cr_net_lock_keep_table();
	cr_log_mark();
	pr_debug("restore-unit %s: cycle claimed, restoring from %s", unit, dir);
	ret = restore_tree(&o, m, id, cu, unit, &root, swhy, sizeof(swhy));
	if (!ret && swhy[0])
		st.reason = swhy;

	st.name = (char *)unit;
	st.has_old_main_pid = 1;
	st.old_main_pid = cu->main_pid;
	fill_kernel(&st, rel, sizeof(rel), boot, sizeof(boot));
	st.has_restore_ns = 1;
	st.restore_ns = now_ns(CLOCK_MONOTONIC) - t0;
	st.has_boot_at_ns = st.has_restore_start_ns = 1;
	st.restore_start_ns = boot0;
	st.boot_at_ns = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_BOOTTIME);
	/* when systemd started is asked by kupdate-finish (userspace-ns in the
	 * cycle): asked here, systemd answered once done with the start jobs
	 * of the moment, 1-1.5 s later in the emulated guest's boot */
	if (ret) {
		snprintf(why, sizeof(why), "restore failed: %s",
			 cr_log_first_error() ?: strerror(-ret));
		st.result = UNIT_RESULT__UNIT_FAILED;
		st.reason = why;
		status_write(id, &st);
		/* its connections are gone: let their peers hear it */
		lock_units(m, id, false, unit);
		journal_note(id, unit, LOG_ERR, "%s; it will be started the ordinary way", why);
		pr_err("unit %s: %s; kupdate-finish starts it the ordinary way", unit, why);
		cycle_manifest__free_unpacked(m, NULL);
		return 1;
	}
	log_cpu_use(unit, st.restore_ns);
	st.result = UNIT_RESULT__UNIT_RESTORED;
	st.has_new_main_pid = 1;
	st.new_main_pid = root;
	if (unlock_fault) {
		/* its connections stay held: kupdate-finish releases every lock
		 * of the cycle, whatever happened before */
		pr_err("unit %s: network unlock fault injected by kupdate.fault=: its connections "
		       "stay held until kupdate-finish",
		       unit);
		st.reason = "restored; the network unlock failed (fault injected), kupdate-finish "
			    "released it";
	}
	if (cu->has_frozen_at_ns) {
		st.has_downtime_ns = 1;
		st.downtime_ns = now_ns(CLOCK_REALTIME) - cu->frozen_at_ns;
	}
	status_write(id, &st);
	pr_debug("restore-unit %s: status written", unit);
	journal_note(
		id, unit, LOG_INFO,
		"restored from cycle %s: main pid %d, %u processes, restore %.3f s, down %.3f s",
		id, root, cu->processes, st.restore_ns / 1e9, st.downtime_ns / 1e9);
	cycle_manifest__free_unpacked(m, NULL);
	return 0;

fail_nostatus:
	cycle_manifest__free_unpacked(m, NULL);
	return 1;
}

/* ------------------------------------------------------------ finish */

static int release_pid_reserve(void)
{
	int fd = open("/proc/sys/kernel/pid_reserve", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return 0; /* a kernel without our patch */
	if (write(fd, "\n", 1) != 1)
		pr_perror("cannot release the pid reservation");
	close(fd);
	return 0;
}

static void write_result(const char *id, const char *unit, const UnitStatus *prev, int result,
			 const char *reason, pid_t new_pid)
{
	UnitStatus st = UNIT_STATUS__INIT;
	char rel[128], boot[64];

	if (prev)
		st = *prev;
	st.name = (char *)unit;
	st.result = result;
	st.reason = (char *)reason;
	if (new_pid > 0) {
		st.has_new_main_pid = 1;
		st.new_main_pid = new_pid;
	}
	fill_kernel(&st, rel, sizeof(rel), boot, sizeof(boot));
	status_write(id, &st);
}

int finish_cycle(struct sd *s, const char *id, bool here)
{
	CycleManifest *m;
	_cleanup_free_ char *imgs = cycle_path(id, "units");
	bool *cold;
	int ret = 0;

	if (manifest_read(id, &m)) {
		pr_err("cycle %s: no readable manifest; its images are removed", id);
		if (imgs)
			rm_cycle_images(imgs);
		return -EINVAL;
	}
	cold = calloc(m->n_units + 1, sizeof(*cold));
	if (!cold) {
		cycle_manifest__free_unpacked(m, NULL);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n_units; i++) {
		const char *u = m->units[i]->name;
		UnitStatus *st = NULL;

		if (status_read(id, u, &st)) {
			write_result(id, u, NULL, UNIT_RESULT__UNIT_FAILED,
				     "its restore never ran in this boot (see kupdate-generator in "
				     "the kernel log)",
				     0);
			cold[i] = true;
		} else {
			cold[i] = st->result == UNIT_RESULT__UNIT_FAILED;
			unit_status__free_unpacked(st, NULL);
		}
		remove_checkpointed_dropin(u);
		if (here)
			remove_dropin(runtime_unit_dir(), u, RESTORE_DROPIN);
	}
	/* every unit has a result now: the generator writes no drop-in any
	 * more, and the restored units go back to their own settings */
	if (sd_reload(s))
		ret = -EIO;
	for (size_t i = 0; i < m->n_units; i++) {
		const char *u = m->units[i]->name;
		UnitStatus *st = NULL;
		char why[1400];
		int r;

		if (!cold[i])
			continue;
		status_read(id, u, &st);
		sd_reset_failed(s, u);
		r = sd_start(s, u, "replace");
		if (!r)
			r = sd_wait_settled(s, u, 120);
		if (!r) {
			struct unit_info ui;
			pid_t np = 0;

			if (!sd_unit_info(s, u, &ui)) {
				np = ui.main_pid;
				unit_info_free(&ui);
			}
			write_result(id, u, st, UNIT_RESULT__UNIT_COLD_STARTED,
				     st && st->reason ? st->reason : "not restored", np);
			journal_note(id, u, LOG_WARNING, "started the ordinary way (%s)",
				     st && st->reason ? st->reason : "not restored");
			printf("kupdate: %s: started the ordinary way (%s)\n", u,
			       st && st->reason ? st->reason : "not restored");
		} else {
			snprintf(why, sizeof(why), "%s; the ordinary start failed too (%s)",
				 st && st->reason ? st->reason : "not restored",
				 r == -ETIMEDOUT ? "timed out" : "see systemctl status");
			write_result(id, u, st, UNIT_RESULT__UNIT_FAILED, why, 0);
			journal_note(id, u, LOG_ERR, "%s", why);
			pr_err("unit %s: %s", u, why);
			ret = -EIO;
		}
		if (st)
			unit_status__free_unpacked(st, NULL);
	}
	lock_units(m, id, false, NULL);
	release_pid_reserve();
	if (imgs)
		rm_cycle_images(imgs);
	free(cold);
	cycle_manifest__free_unpacked(m, NULL);
	return ret;
}

/* a cycle this boot will not restore: record it, drop its images */
static void abandon(const char *id, const char *me)
{
	CycleManifest *m;
	_cleanup_free_ char *imgs = cycle_path(id, "units");

	if (!imgs || access(imgs, F_OK))
		return;
	if (manifest_read(id, &m) == 0) {
		if (!strcmp(m->old_boot_id, me)) {
			/* made in this boot: waiting for its kexec */
			cycle_manifest__free_unpacked(m, NULL);
			return;
		}
		for (size_t i = 0; i < m->n_units; i++)
			if (!has_status(id, m->units[i]->name))
				write_result(
					id, m->units[i]->name, NULL, UNIT_RESULT__UNIT_ABANDONED,
					"the machine booted without this cycle: nothing restored",
					0);
		journal_note(id, NULL, LOG_WARNING,
			     "cycle %s abandoned: this boot was not started for it; its images are "
			     "removed",
			     id);
		cycle_manifest__free_unpacked(m, NULL);
	}
	rm_cycle_images(imgs);
}

/* the newest cycles are kept for kupdate status, without images */
#define KEEP_CYCLES 10

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sweep(const char *current)
{
	_cleanup_free_ char *dir = xasprintf("%s/cycles", state_dir());
	char me[64] = "", **names = NULL;
	int n = 0;
	DIR *d;
	struct dirent *de;

	current_boot_id(me, sizeof(me));
	d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	while ((de = readdir(d))) {
		char **nn;
		size_t l = strlen(de->d_name);

		if (de->d_name[0] == '.' && l > 5 && !strcmp(de->d_name + l - 4, ".tmp")) {
			/* an apply that never finished (it never made a cycle) */
			_cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);

			if (p)
				rm_cycle_dir(p);
			continue;
		}
		if (!cycle_id_valid(de->d_name))
			continue;
		if (!current || strcmp(current, de->d_name))
			abandon(de->d_name, me);
		nn = xrealloc_array(names, n + 1, sizeof(*nn));
		if (!nn)
			break;
		names = nn;
		names[n] = xstrdup(de->d_name);
		if (names[n])
			n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_name);
	for (int i = 0; i + KEEP_CYCLES < n; i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);

		if (p && (!current || strcmp(current, names[i])))
			rm_cycle_dir(p);
	}
	strv_free(names, n);
}

int cmd_finish(int argc, char **argv)
{
	CycleManifest *m = NULL;
	_cleanup_free_ char *id = NULL;
	struct sd s;
	int ret = 0;

	if (argc > 1) {
		printf("usage: kupdate finish\n"
		       "Complete the cycle this boot restored (start the units that were not\n"
		       "restored, release the pid reservation and the network lock, remove\n"
		       "the images) and abandon cycles of other boots (run at every boot by\n"
		       "kupdate-finish.service).\n");
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	id = boot_cycle(&m);
	if (id) {
		_cleanup_free_ char *up = cycle_path(id, "userspace-ns");
		int64_t us;
		char buf[32];

		cycle_manifest__free_unpacked(m, NULL);
		if (sd_open(&s))
			return 1;
		/* for kupdate status: the boot's phases (status.c) */
		us = sd_userspace_start_ns(&s);
		if (up && us >= 0) {
			snprintf(buf, sizeof(buf), "%lld\n", (long long)us);
			write_text(up, buf);
		}
		ret = finish_cycle(&s, id, false);
		sd_close(&s);
	}
	/* an apply run from a preserved login session waits for its report */
	handoff_report(id);
	sweep(id);
	return ret ? 1 : 0;
}

/* ------------------------------------------------------------ here */

int restore_here(struct sd *s, const char *id)
{
	CycleManifest *m;
	_cleanup_free_ char *exe = self_exe();
	int ret = 0;

	if (manifest_read(id, &m))
		return -EINVAL;
	for (size_t i = 0; i < m->n_units; i++) {
		remove_checkpointed_dropin(m->units[i]->name);
		if (write_restore_dropin(runtime_unit_dir(), m->units[i]->name, exe, id, true, NULL,
					 m->units[i]->namespaces))
			ret = -EIO;
	}
	if (!ret)
		ret = sd_reload(s);
	for (size_t i = 0; !ret && i < m->n_units; i++) {
		const char *u = m->units[i]->name;

		sd_reset_failed(s, u);
		if (sd_start(s, u, "replace") == 0 && sd_wait_settled(s, u, 600) == 0)
			printf("kupdate: %s: restored on this kernel\n", u);
	}
	cycle_manifest__free_unpacked(m, NULL);
	finish_cycle(s, id, true);
	return ret;
}
