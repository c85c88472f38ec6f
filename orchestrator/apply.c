/* kupdate apply: checkpoint the preserved units and kexec into a new kernel.
 *
 *  1 preflight: the kernel loads, the units are active, there is room;
 *    then a runtime drop-in per unit tells systemd not to restart it nor
 *    run its stop commands when it is retired (one daemon reload, before
 *    any unit is frozen: it counts in no unit's downtime)
 *  2 per unit, in threads that each take the next unit (--jobs, one a
 *    CPU): freeze (systemd), seize every process of its cgroup, thaw (the
 *    processes stay stopped under ptrace), dump; the engine locks the
 *    unit's TCP connections in the network
 *  3 manifest, fsync, rename: the cycle is ready; the kernel, loaded at
 *    preflight with the cycle id and the pids then running, is loaded
 *    again only if the dumps saved other pids (pid reservation)
 *  4 the units' processes are killed (the engine puts their sockets back
 *    in repair mode just before: no FIN, no RST; the drop-ins keep systemd
 *    from restarting them)
 *  5 kexec, through systemd or at once (--fast)
 * A failure in 1-3 resumes every unit as it was, removes the partial cycle
 * and does not kexec; its last message names the phase (the drop-ins go,
 * and a unit that stopped meanwhile is started again).  A kexec that fails
 * after 4 restores the units from the cycle on this kernel.  An apply that
 * is killed (SIGKILL) leaves its partial cycle directory behind: the next
 * kupdate command finds it and resumes its units (recover.c).
 * Test-only fault injection: cr-engine/base/fault.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "cr-fault.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "dump-units.h"
#include "handoff.h"
#include "kexec.h"
#include "kimage.h"
#include "kupdate.h"
#include "recover.h"
#include "sd.h"
#include "sessions.h"
#include "store.h"
#include "term.h"
#include "units.h"

struct apply_opts {
	const char *kernel, *initrd, *append;
	char *store;		 /* --store, made absolute */
	StoreMount *store_mount; /* its file system, mounted early by the new boot */
	bool dry_run, fast, no_kexec, no_reserve, pre_dump, no_rto_revert, after_apt;
	int jobs;	      /* --jobs: units dumped at once (0: one a CPU) */
	uint64_t ghost_limit; /* --ghost-limit, 0: the engine's default */
};

/* the kexec is queued: the report of an apply handed over from a login
 * session comes from the new boot (handoff.c) */
static bool jump_queued;

static void usage_apply(FILE *f)
{
	fputs("usage: kupdate apply [VMLINUZ] [--initrd FILE] [--append ARGS | --reuse-cmdline]\n"
	      "                     [--unit UNIT]... [--dry-run] [--fast] [--no-pid-reserve]\n"
	      "                     [--pre-dump] [--store DIR] [--jobs N] [--no-rto-revert]\n"
	      "                     [--ghost-limit SIZE] [--after-apt]\n"
	      "Checkpoint the preserved units (kupdate list), kexec into VMLINUZ and restore\n"
	      "them there with their pids, memory and connections.  Without VMLINUZ: the\n"
	      "newest kernel installed in /boot (vmlinuz-RELEASE, by version), with its\n"
	      "initrd.img-RELEASE, if it is newer than the running one.\n"
	      "  --initrd FILE     the new kernel's initramfs\n"
	      "  --append ARGS     the new kernel's command line (default: the running one's)\n"
	      "  --reuse-cmdline   the running kernel's command line (the default)\n"
	      "  --unit UNIT       preserve UNIT (repeatable; default: every preserved unit)\n"
	      "  --dry-run         check everything, change nothing, do not kexec\n"
	      "  --fast            jump at once after syncing, without stopping the rest of\n"
	      "                    the system through systemd\n"
	      "  --no-pid-reserve  no pid_reserve= for a new kernel without kupdate's patch:\n"
	      "                    its boot moves the pid allocator above the saved pids\n"
	      "                    (chosen by itself when the image has no pid_reserve=)\n"
	      "  --pre-dump        copy the units' memory while they run first; frozen,\n"
	      "                    only the pages written since are copied\n"
	      "  --store DIR       write the images into DIR (a file system of its own that\n"
	      "                    survives the kexec: ext4 with the dax option on the pmem\n"
	      "                    device of a memmap= region keeps every page in RAM), not\n"
	      "                    the state directory\n"
	      "  --jobs N          dump N units at once (default: one a CPU; every unit\n"
	      "                    stays frozen until the last one is dumped)\n"
	      "  --no-rto-revert   send the remote peers of TCP connections no ICMP errors\n"
	      "                    that cut their retransmission timeout short after the\n"
	      "                    restores (or a failed dump) (RFC 6069; a peer socket\n"
	      "                    with IP_RECVERR sees one EHOSTUNREACH from them)\n"
	      "  --ghost-limit SIZE the most data of a file deleted while open or mapped\n"
	      "                    (a library an upgrade replaced) saved, per file (K, M,\n"
	      "                    G; default 1M open only, 256M mapped or run); kupdate\n"
	      "                    list shows them\n"
	      "  --after-apt       first wait (30 min at most) until apt and dpkg are done\n"
	      "                    (their lock is free): auto-apply, kupdate(8)\n"
	      "On any failure before the kexec the units keep running as they were.\n",
	      f);
}

/* anon + shmem of a unit's cgroup: what its images will hold at most */
static uint64_t unit_memory(const struct aunit *u)
{
	_cleanup_free_ char *path = NULL, *stat = NULL;
	uint64_t total = 0;

	if (!u->ui.cgroup)
		return 0;
	path = xasprintf("%s%s/memory.stat", cgroup_root(), u->ui.cgroup);
	if (!path || read_file_at(AT_FDCWD, path, &stat, NULL))
		return 0;
	for (char *l = stat; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long long v;

		if (sscanf(l, "anon %llu", &v) == 1 || sscanf(l, "shmem %llu", &v) == 1)
			total += v;
	}
	return total;
}

static int check_room(struct aunit *u, int n, const char *dir)
{
	struct statvfs sv;
	uint64_t need = 0, avail;

	if (cr_fault_unit("room-check-off", 0, NULL))
		return 0;
	for (int i = 0; i < n; i++)
		need += u[i].ended ? 0 : unit_memory(&u[i]);
	if (statvfs(dir, &sv)) {
		pr_perror("cannot look at %s", dir);
		return -errno;
	}
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	/* page images are at most the memory, plus some metadata */
	if (avail < need + need / 16 + (16 << 20)) {
		pr_err("not enough room for the images in %s: %llu MiB free, the units hold up "
		       "to %llu MiB",
		       dir, (unsigned long long)(avail >> 20), (unsigned long long)(need >> 20));
		return -ENOSPC;
	}
	return 0;
}

#define RESERVE_MARGIN 256

/* The ids the dump will save (pstree.c: cr_images_ids), read from the
 * running units: every thread, and the process groups and sessions led
 * by others.  The kernel is loaded at preflight with these reserved, and
 * loaded again after the dumps only if the dumps saved other ids (a
 * process came or went in between): a kexec_file_load is 0.5 s of every
 * unit's downtime in our emulated guests. */
static char *live_reserve(struct aunit *u, int n)
{
	pid_t *all = NULL;
	size_t nr = 0;
	char *out = NULL;
	_cleanup_free_ char *last = NULL;

	for (int i = 0; i < n; i++) {
		pid_t *m = NULL;
		int nm = 0;

		if (u[i].ended)
			continue;
		if (unit_members(u[i].name, &u[i].ui, &m, &nm))
			goto fail;
		for (int k = 0; k < nm; k++) {
			/* a process gone meanwhile: the dumps will differ, the
			 * kernel is loaded again */
			if (cr_process_ids(m[k], &all, &nr) == -ENOMEM) {
				free(m);
				goto fail;
			}
		}
		free(m);
	}
	/* and a margin after the last pid given out: a thread a unit starts
	 * before its dump (a pool's: MariaDB's, apache's) takes one of those */
	if (!read_file_at(AT_FDCWD, "/proc/sys/kernel/ns_last_pid", &last, NULL)) {
		long l = strtol(last, NULL, 10);
		pid_t *more = xrealloc_array(all, nr + RESERVE_MARGIN, sizeof(*all));

		if (!more)
			goto fail;
		all = more;
		for (int k = 1; k <= RESERVE_MARGIN && l > 0; k++)
			all[nr++] = (pid_t)(l + k);
	}
	out = pid_ranges(all, nr);
fail:
	free(all);
	return out;
}

static int write_manifest(struct aunit *u, int n, const char *id, const char *cycdir,
			  const struct apply_opts *ao, const char *cmdline, const char *reserve,
			  const char *store, int64_t started, int64_t preflight)
{
	CycleManifest m = CYCLE_MANIFEST__INIT;
	CycleUnit *cu = calloc(n, sizeof(*cu));
	CycleUnit **pcu = calloc(n, sizeof(*pcu));
	char **rt = calloc(n, sizeof(*rt)); /* runtime unit files */
	struct utsname un;
	char boot[64];
	_cleanup_close_ int dirfd = open(cycdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t rtlen;
	int ret = 0;

	if (!cu || !pcu || !rt || dirfd < 0) {
		ret = dirfd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	uname(&un);
	current_boot_id(boot, sizeof(boot));
	m.id = (char *)id;
	m.format_version = CYCLE_FORMAT_VERSION;
	m.tool_version = CR_TOOL_VERSION;
	m.old_kernel = un.release;
	m.old_boot_id = boot;
	m.created_ns = rt_ns();
	m.kernel_path = (char *)ao->kernel;
	m.cmdline = (char *)cmdline;
	m.pid_reserve = (char *)reserve;
	m.store = (char *)store;
	m.store_mount = ao->store_mount;
	m.has_no_rto_revert = ao->no_rto_revert;
	m.no_rto_revert = ao->no_rto_revert;
	m.has_started_ns = m.has_preflight_ns = 1;
	m.started_ns = started;
	m.preflight_ns = preflight;
	for (int i = 0, j = 0; i < n; i++) {
		if (u[i].ended)
			continue;
		m.n_units = ++j;
		pcu[j - 1] = &cu[i];
		cycle_unit__init(&cu[i]);
		cu[i].name = (char *)u[i].name;
		cu[i].imgdir = u[i].rel;
		cu[i].main_pid = u[i].members[0];
		cu[i].n_ids = u[i].nr_ids;
		cu[i].ids = u[i].ids;
		cu[i].has_frozen_ns = cu[i].has_dump_ns = cu[i].has_image_bytes = 1;
		cu[i].frozen_ns = u[i].t_dumped - u[i].t_freeze;
		cu[i].dump_ns = u[i].st.total_ns;
		cu[i].image_bytes = u[i].bytes;
		cu[i].has_processes = cu[i].has_connections = cu[i].has_frozen_at_ns = 1;
		cu[i].processes = u[i].st.processes;
		cu[i].has_containers = u[i].st.containers > 0;
		cu[i].containers = u[i].st.containers;
		cu[i].connections = u[i].nr_conns;
		cu[i].frozen_at_ns = u[i].frozen_at_rt;
		cu[i].n_sessions = u[i].nsrec;
		cu[i].sessions = u[i].srec;
		cu[i].has_namespaces = u[i].st.namespaces != 0;
		cu[i].namespaces = u[i].st.namespaces;
		if (unit_runtime(u[i].name, u[i].ui.fragment) && u[i].ui.fragment) {
			ret = read_file_at(AT_FDCWD, u[i].ui.fragment, &rt[i], &rtlen);
			if (ret) {
				pr_err("unit %s: cannot read its unit file %s: %s", u[i].name,
				       u[i].ui.fragment, strerror(-ret));
				goto out;
			}
			cu[i].has_runtime_unit = 1;
			cu[i].runtime_unit.data = (uint8_t *)rt[i];
			cu[i].runtime_unit.len = rtlen;
			cu[i].runtime_unit_path = u[i].ui.fragment;
		}
		if (u[i].ui.dynamic_user) {
			cu[i].has_dynamic_uid = cu[i].has_dynamic_gid = 1;
			cu[i].dynamic_uid = u[i].ui.uid;
			cu[i].dynamic_gid = u[i].ui.gid;
		}
	}
	m.units = pcu;
	ret = manifest_write(dirfd, &m);
	/* the images and the manifest reach the disk before the cycle exists */
	if (!ret && syncfs(dirfd))
		ret = -errno;
	if (ret)
		pr_err("cannot write the cycle manifest in %s: %s", cycdir, strerror(-ret));
out:
	for (int i = 0; rt && i < n; i++)
		free(rt[i]);
	free(rt);
	free(cu);
	free(pcu);
	return ret;
}

/* the images in the store reach it before the manifest names them (the
 * state directory's are synced with the manifest) */
static int sync_store(const char *store)
{
	_cleanup_close_ int fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || syncfs(fd)) {
		pr_perror("cannot sync the image store %s", store);
		return -errno;
	}
	return 0;
}

static int publish(const char *tmp, const char *final)
{
	_cleanup_free_ char *parent = xasprintf("%s/cycles", state_dir());
	_cleanup_free_ char *last = xasprintf("%s/last", state_dir());
	_cleanup_free_ char *lasttmp = xasprintf("%s/.last.tmp", state_dir());
	_cleanup_close_ int pfd = -1;

	if (!parent || !last || !lasttmp)
		return -ENOMEM;
	if (rename(tmp, final)) {
		pr_perror("cannot mark the cycle ready (rename %s to %s)", tmp, final);
		return -errno;
	}
	unlink(lasttmp);
	if (symlink(strrchr(final, '/') + 1, lasttmp) == 0 && rename(lasttmp, last)) {
		/* only status uses it */
	}
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd >= 0)
		fsync(pfd);
	return 0;
}

/* when the jump was asked for (kupdate status: the shutdown and kexec
 * phase ends when the new kernel starts) */
static void mark_kexec(const char *cycdir)
{
	_cleanup_free_ char *p = xasprintf("%s/kexec-at", cycdir);
	char buf[32];
	int fd = p ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;

	if (fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%lld\n", (long long)rt_ns());
	if (write(fd, buf, strlen(buf)) < 0 || fsync(fd)) {
		/* only a report suffers */
	}
	close(fd);
}

/* When the units are retired, systemd must neither restart them nor run
 * their stop commands: a runtime drop-in per unit says so.  It is put in
 * place, with the daemon reload it needs, before the first freeze, so the
 * reload (3.5 s on the emulated test guest) counts in no unit's frozen or
 * down time.  Until the freeze a unit runs under it: one that dies of
 * itself meanwhile is not restarted by systemd, so a failed apply starts
 * it again (undo_handover). */
static int prepare_handover(struct sd *sd, struct aunit *u, int n)
{
	int ret = 0;

	for (int i = 0; i < n && !ret; i++)
		ret = write_checkpointed_dropin(u[i].name);
	if (!ret)
		ret = sd_reload(sd);
	if (ret) {
		pr_err("cannot prepare the units' hand-over (runtime drop-ins in %s, daemon "
		       "reload): %s",
		       runtime_unit_dir(), strerror(-ret));
		for (int i = 0; i < n; i++)
			remove_checkpointed_dropin(u[i].name);
		sd_reload(sd);
	}
	return ret;
}

/* a failed apply: the drop-ins go, and a unit that stopped meanwhile is
 * started again, as its Restart= would have */
static void undo_handover(struct sd *sd, struct aunit *u, int n)
{
	for (int i = 0; i < n; i++)
		remove_checkpointed_dropin(u[i].name);
	sd_reload(sd);
	for (int i = 0; i < n; i++)
		if (!unit_runtime(u[i].name, u[i].ui.fragment)) /* a job ended stays so */
			restart_if_stopped(sd, u[i].name, "during the failed apply");
}

/* how the new boot mounts the store's file system: at once from its
 * device node (kupdate-store.service), or through fstab when it cannot */
static int store_of(struct apply_opts *ao)
{
	const char *why;
	int ret;

	store_mount_free(ao->store_mount);
	ao->store_mount = NULL;
	ret = store_mount_find(ao->store, NULL, NULL, &ao->store_mount, &why);
	if (ret) {
		pr_err("--store %s: cannot read its mount: %s", ao->store, strerror(-ret));
		return ret;
	}
	if (why)
		printf("kupdate: note: the new boot mounts the store %s only when its fstab entry "
		       "does, after udev has announced its device (%s); the restores wait for "
		       "it\n",
		       ao->store, why);
	return 0;
}

static int parse_apply(int argc, char **argv, struct apply_opts *ao, const char ***units, int *nr)
{
	static const struct option opts[] = {
		{ "initrd", required_argument, NULL, 'i' },
		{ "after-apt", no_argument, NULL, 'W' },
		{ "append", required_argument, NULL, 'a' },
		{ "reuse-cmdline", no_argument, NULL, 'r' },
		{ "unit", required_argument, NULL, 'u' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "fast", no_argument, NULL, 'f' },
		{ "no-kexec", no_argument, NULL, 'K' },
		{ "no-pid-reserve", no_argument, NULL, 'P' },
		{ "pre-dump", no_argument, NULL, 'M' },
		{ "store", required_argument, NULL, 'S' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "no-rto-revert", no_argument, NULL, 'R' },
		{ "ghost-limit", required_argument, NULL, 'g' },
		{ "handoff", required_argument, NULL, 'O' }, /* handoff.c: the worker */
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "u:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			ao->initrd = optarg;
			break;
		case 'a':
			ao->append = optarg;
			break;
		case 'r':
			ao->append = NULL;
			break;
		case 'u': {
			const char **nu = xrealloc_array(*units, *nr + 1, sizeof(*nu));

			if (!nu)
				return 1;
			*units = nu;
			nu[(*nr)++] = optarg;
			break;
		}
		case 'n':
			ao->dry_run = true;
			break;
		case 'f':
			ao->fast = true;
			break;
		case 'K':
			ao->no_kexec = true;
			break;
		case 'M':
			ao->pre_dump = true;
			break;
		case 'R':
			ao->no_rto_revert = true;
			break;
		case 'W':
			ao->after_apt = true;
			break;
		case 'O':
			break;
		case 'g':
			if (parse_size(optarg, &ao->ghost_limit)) {
				pr_err("apply: --ghost-limit '%s' is not a size (bytes, or with K, "
				       "M, G)",
				       optarg);
				return 2;
			}
			break;
		case 'j': {
			char *end;
			long j = strtol(optarg, &end, 10);

			if (*end || end == optarg || j < 1 || j > MAX_JOBS) {
				pr_err("--jobs %s: give a number of units to dump at once, 1 to %d",
				       optarg, MAX_JOBS);
				return 2;
			}
			ao->jobs = (int)j;
			break;
		}
		case 'P':
			ao->no_reserve = true;
			break;
		case 'S': {
			struct stat st;

			free(ao->store);
			ao->store = realpath(optarg, NULL);
			if (!ao->store || stat(ao->store, &st) || !S_ISDIR(st.st_mode)) {
				pr_err("--store %s: not a directory; make it (on a file system "
				       "that "
				       "survives the kexec) and mount it",
				       optarg);
				return 2;
			}
			if (strpbrk(ao->store, " \t\n\\%$\"'")) {
				/* the new boot's units name it (RequiresMountsFor=) */
				pr_err("--store %s: a path with spaces, quotes, '\\', '%%' or '$' "
				       "cannot be named in a unit file: choose another",
				       ao->store);
				return 2;
			}
			if (st.st_uid != 0 || (st.st_mode & 022)) {
				pr_err("--store %s: must be root's and writable by no one else "
				       "(the "
				       "restore refuses images others could change): chown root "
				       "and chmod 700 it",
				       optarg);
				return 2;
			}
			if (store_of(ao))
				return 2;
			break;
		}
		case 'h':
			usage_apply(stdout);
			return -1;
		default:
			usage_apply(stderr);
			return 2;
		}
	}
	if (optind < argc - 1) {
		pr_err("apply: one kernel image at most (see kupdate apply --help)");
		return 2;
	}
	/* none: the newest installed (cmd_apply) */
	ao->kernel = optind < argc ? argv[optind] : NULL;
	return 0;
}

/* Ctrl-C, SIGTERM, SIGHUP before the point of no return: checked
 * between the steps (the dumps check it themselves) */
static bool interrupted(void)
{
	int sig = cr_stop_requested();

	if (sig)
		pr_err("interrupted (%s)", strsignal(sig));
	return sig != 0;
}

/* the state directory, 0700, locked against a second apply (or a
 * check: kupdate list); wait_s seconds at most for another kupdate's lock */
int lock_state(int wait_s)
{
	_cleanup_free_ char *cyc = xasprintf("%s/cycles", state_dir());
	_cleanup_free_ char *lock = xasprintf("%s/lock", state_dir());
	int fd;

	if (!cyc || !lock)
		return -ENOMEM;
	if (mkdir_p(cyc, 0700)) {
		pr_perror("cannot create %s", cyc);
		return -errno;
	}
	chmod(state_dir(), 0700);
	chmod(cyc, 0700);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_perror("cannot open %s", lock);
		return -errno;
	}
	for (int i = 0; flock(fd, LOCK_EX | LOCK_NB) && i < wait_s * 20; i++)
		usleep(50000);
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		pr_err("another kupdate apply, restore or list is running (%s is locked)", lock);
		close(fd);
		return -EBUSY;
	}
	return fd;
}

/* The kernel loaded at preflight, with the command line of the cycle as
 * far as it is known now (the ids the units use now reserved), or with
 * --dry-run of no cycle: that command line, or NULL.  *id: the cycle's. */
static char *preflight_load(struct aunit *u, int n, const struct apply_opts *ao, char **id)
{
	_cleanup_free_ char *guess = NULL;
	char *cmdline;

	if (!ao->dry_run) {
		*id = new_cycle_id();
		guess = *id && !ao->no_reserve ? live_reserve(u, n) : NULL;
		cmdline = *id ? kexec_cmdline(ao->append, *id, guess) : NULL;
	} else {
		cmdline = kexec_cmdline(ao->append, "0", NULL);
	}
	if (cmdline && kexec_load_kernel(ao->kernel, ao->initrd, cmdline)) {
		free(cmdline);
		return NULL;
	}
	return cmdline;
}

/* the final command line loaded, unless the preflight's was the same (0)
 * or serves (1: the cycle's is the preflight's) */
static int final_load(const struct apply_opts *ao, const char *pre_cmdline, const char *cmdline)
{
	if (cr_fault_unit("kexec-load", 0, NULL)) {
		pr_err("cannot load %s: kexec-load fault injected by KUPDATE_FAULT", ao->kernel);
		return -1;
	}
	if (pre_cmdline && !strcmp(pre_cmdline, cmdline)) {
		printf("kupdate: %s was loaded at preflight with this command line\n", ao->kernel);
		return 0;
	}
	/* its reservation holds every id the dumps saved (threads that came
	 * since are in its margin): the cycle goes with that command line */
	if (pre_cmdline && cmdline_covers(pre_cmdline, cmdline)) {
		printf("kupdate: %s was loaded at preflight with this command line (its pid "
		       "reservation covers every id the dumps saved)\n",
		       ao->kernel);
		return 1;
	}
	return kexec_load_kernel(ao->kernel, ao->initrd, cmdline) ? -1 : 0;
}

/* the cycle's command line, its kernel loaded with it (or with the
 * preflight's, which serves it), or NULL */
static char *cycle_load(const struct apply_opts *ao, const char *id, const char *reserve,
			const char *pre_cmdline)
{
	char *cmdline = kexec_cmdline(ao->append, id, ao->no_reserve ? NULL : reserve);
	int r = cmdline ? final_load(ao, pre_cmdline, cmdline) : -1;

	if (r == 1) {
		free(cmdline);
		return xstrdup(pre_cmdline);
	}
	if (r < 0) {
		free(cmdline);
		return NULL;
	}
	return cmdline;
}

/* the hand-over (prepare_handover), its time counted with the preflight's:
 * it is before any freeze */
static int timed_handover(struct sd *sd, struct aunit *u, int n, int64_t *preflight_ns)
{
	int64_t t_ho = now_ns(CLOCK_MONOTONIC);

	if (prepare_handover(sd, u, n))
		return -1;
	*preflight_ns += now_ns(CLOCK_MONOTONIC) - t_ho;
	return 0;
}

static void note_checkpointed(const struct aunit *u, int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (!u[i].ended)
			journal_note(id, u[i].name, 6, "checkpointed: %u processes, frozen %.3f s",
				     u[i].st.processes,
				     (now_ns(CLOCK_MONOTONIC) - u[i].t_freeze) / 1e9);
}

static void apply_opts_free(struct apply_opts *ao)
{
	free(ao->store);
	store_mount_free(ao->store_mount);
}

/* no kernel named: the one apt installed last (and its initrd) */
static int choose_kernel(struct apply_opts *ao, char **next, char **next_initrd,
			 char **next_release)
{
	if (ao->kernel)
		return 0;
	if (next_kernel(next, next_initrd, next_release, true))
		return -1;
	ao->kernel = *next;
	if (!ao->initrd)
		ao->initrd = *next_initrd;
	printf("kupdate: updating into the newest kernel installed, %s (%s%s%s)\n", *next_release,
	       *next, ao->initrd ? ", initrd " : ", no initrd", ao->initrd ? ao->initrd : "");
	return 0;
}

/* A kernel without kupdate's patch (a distribution's) ignores pid_reserve=
 * and would hand it to init: its boot moves the pid allocator above the
 * saved pids instead, as --no-pid-reserve asks.  An image that cannot be
 * read is left to the default (kexec itself says what is wrong with it). */
static void reserve_for_kernel(struct apply_opts *ao)
{
	struct kimage_info ki;

	if (ao->no_reserve || kimage_read(ao->kernel, &ki))
		return;
	if (ki.pid_reserve == 0) {
		ao->no_reserve = true;
		printf("kupdate: %s%s%s has no pid_reserve= (a kernel without kupdate's patch): "
		       "its boot moves the pid allocator above the saved pids instead\n",
		       ao->kernel, ki.release[0] ? ", " : "", ki.release);
	}
	kimage_free(&ki);
}

/* no unit named: the preserved ones (kupdate enable) */
static int preserved_names(struct sd *sd, const char ***names, int *nr_names, char ***preserved,
			   int *nr_pres)
{
	if (preserved_units(preserved, nr_pres)) {
		pr_perror("cannot read %s", wants_dir());
		return -1;
	}
	preserved_drop_ended(sd, *preserved, nr_pres);
	if (!*nr_pres) {
		pr_err("no unit is preserved: kupdate enable UNIT, or name them with "
		       "--unit");
		return -1;
	}
	*names = xrealloc_array(NULL, *nr_pres, sizeof(**names));
	if (!*names)
		return -1;
	for (int i = 0; i < *nr_pres; i++)
		(*names)[i] = (*preserved)[i];
	*nr_names = *nr_pres;
	return 0;
}

/* an umbrella unit: the units that are part of it, in names */
static int follow_names(struct sd *sd, const char ***names, int *nr_names, char ***followed,
			int *nr_followed)
{
	const char **nn;

	if (units_follow_parts(sd, *names, *nr_names, followed, nr_followed))
		return -1;
	nn = xrealloc_array(*names, *nr_followed ? *nr_followed : 1, sizeof(*nn));
	if (!nn)
		return -1;
	*names = nn;
	for (int i = 0; i < *nr_followed; i++)
		(*names)[i] = (*followed)[i];
	*nr_names = *nr_followed;
	return 0;
}

/* Preflight of the units: each named, active, with a main process.  *n:
 * the units whose info is to be freed (the failing one included). */
static int preflight_units(struct sd *sd, struct aunit *u, const char **names, int nr_names,
			   const struct apply_opts *ao, int *n)
{
	for (*n = 0; *n < nr_names; (*n)++) {
		struct aunit *a = &u[*n];

		a->name = names[*n];
		a->sd = sd;
		a->ghost_limit = ao->ghost_limit;
		if (!unit_name_valid(a->name)) {
			pr_err("'%s' is not a service unit name (NAME.service)", a->name);
			return -1;
		}
		if (sd_unit_info(sd, a->name, &a->ui))
			return -1;
		if (runtime_unit_ended(a, &a->ui))
			continue;
		if (strcmp(a->ui.active, "active") || a->ui.main_pid <= 0) {
			pr_err("unit %s is %s (%s) with no main process; start it, or leave it out "
			       "(kupdate disable %s)",
			       a->name, a->ui.active, a->ui.sub, a->name);
			(*n)++;
			return -1;
		}
	}
	return 0;
}

/* apply --dry-run: each unit checked as a dump would see it; the exit
 * status, or -1 if interrupted */
static int dry_run_report(struct sd *sd, struct aunit *u, int n, const struct apply_opts *ao)
{
	_cleanup_free_ struct unit_socks *socks = calloc(n ? n : 1, sizeof(*socks));
	int bad = 0;

	if (!socks)
		return -1;
	/* their connections to each other are links */
	link_groups(u, n);
	for (int i = 0; i < n; i++)
		socks[i] = u[i].socks;
	for (int i = 0; i < n; i++) {
		char why[1024], note[96];
		struct cr_dump_stats st = { 0 };

		if (interrupted())
			return -1;
		if (u[i].ended)
			continue;
		if (unit_check(sd, u[i].name, &u[i].ui, ao->ghost_limit, socks, n, i, why,
			       sizeof(why), &st)) {
			printf("kupdate: %s: cannot be checkpointed: %s\n", u[i].name, why);
			bad++;
		} else {
			deleted_note(&st, note, sizeof(note));
			printf("kupdate: %s: %u processes, can be checkpointed%s%s\n", u[i].name,
			       st.processes, note[0] ? "; saves " : "", note);
		}
	}
	printf("kupdate: dry run: %s loads; %d of %d units ready; nothing was changed\n",
	       ao->kernel, n - bad, n);
	return bad ? 1 : 0;
}

/* The partial cycle directory tmp and its units directory: there, or with
 * --store a symlink to STORE/ID/units (*store_dir: STORE/ID).  On failure
 * nothing is left. */
static int make_cycle_dir(const char *tmp, const char *id, const struct apply_opts *ao,
			  char **store_dir)
{
	_cleanup_free_ char *units = NULL, *sdir = NULL, *sunits = NULL;

	if (mkdir(tmp, 0700)) {
		pr_perror("cannot create the cycle directory %s", tmp);
		return -1;
	}
	units = xasprintf("%s/units", tmp);
	sdir = ao->store ? xasprintf("%s/%s", ao->store, id) : NULL;
	sunits = sdir ? xasprintf("%s/units", sdir) : NULL;
	if (!units || (ao->store && !sunits)) {
		rm_rf(tmp);
		return -1;
	}
	if (ao->store) {
		/* the images in the store, reached through the cycle's units */
		if (mkdir(sdir, 0700) || mkdir(sunits, 0700) || symlink(sunits, units)) {
			pr_perror("cannot create the cycle's images directory %s", sunits);
			rmdir(sunits);
			rmdir(sdir);
			rm_rf(tmp);
			return -1;
		}
		printf("kupdate: images in %s (--store)\n", sunits);
		*store_dir = take_ptr(&sdir);
	} else if (mkdir(units, 0700)) {
		pr_perror("cannot create %s/units", tmp);
		rm_rf(tmp);
		return -1;
	}
	return 0;
}

/* apply --pre-dump: every unit's memory first, while they all run */
static int predump_units(struct aunit *u, int n, const char *id, const char *tmp,
			 int64_t *preflight_ns)
{
	for (int i = 0; i < n; i++) {
		int ret = u[i].ended ? 0 : predump_unit(&u[i], id, tmp);

		/* reported with the preflight too: the units ran meanwhile */
		*preflight_ns += u[i].predump_ns;
		if (ret) {
			const char *why = cr_log_first_error();

			pr_err("unit %s cannot be pre-dumped%s%s; every unit keeps running, "
			       "nothing was kexec'd",
			       u[i].name, why ? ": " : "", why ? why : "");
			return -1;
		}
	}
	return 0;
}

/* the dump of a unit failed: said, and noted in the journal; the unit,
 * or NULL if none is to blame */
static const char *report_dump_failure(const struct dumpers *d, struct aunit *u, const char *id)
{
	int i = d->failed - 1;
	const char *why = d->why[0] ? d->why : NULL;

	if (i < 0)
		return NULL;
	pr_err("unit %s cannot be checkpointed%s%s; every unit keeps running, "
	       "nothing was kexec'd",
	       u[i].name, why ? ": " : "", why ? why : "");
	journal_note(id, u[i].name, 3, "checkpoint failed: %s; cycle abandoned",
		     why ? why : strerror(-d->ret));
	return u[i].name;
}

/* every id the dumps saved, as pid_reserve= ranges */
static char *dumped_reserve(const struct aunit *u, int n)
{
	size_t total = 0, k = 0;
	pid_t *all;
	char *r;

	for (int i = 0; i < n; i++)
		total += u[i].nr_ids;
	all = calloc(total ? total : 1, sizeof(*all));
	if (!all)
		return NULL;
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < u[i].nr_ids; j++)
			all[k++] = u[i].ids[j];
	r = pid_ranges(all, total);
	free(all);
	return r;
}

/* 5. The jump into the new kernel (or, with --no-kexec, the restore here):
 * the exit status.  *loaded: false once the kernel is no longer ours to
 * unload. */
static int jump(struct sd *sd, const struct apply_opts *ao, const char *id, const char *final,
		bool *loaded)
{
	if (getenv("KUPDATE_TEST_NO_JUMP")) {
		/* tests: the cycle is ready and the kernel loaded, but the
		 * machine is left to boot some other way */
		printf("kupdate: KUPDATE_TEST_NO_JUMP: cycle %s ready, not jumping\n", id);
		*loaded = false;
		return 0;
	}
	if (ao->no_kexec) {
		printf("kupdate: --no-kexec: restoring the units on this kernel\n");
		return restore_here(sd, id) ? 1 : 0;
	}
	printf("kupdate: kexec into %s (%s)\n", ao->kernel, ao->fast ? "now" : "through systemd");
	fflush(stdout);
	mark_kexec(final);
	if (cr_fault_unit("kexec-exec", 0, NULL))
		pr_err("kexec-exec fault injected by KUPDATE_FAULT");
	if (cr_fault_unit("kexec-exec", 0, NULL) || kexec_now(sd, ao->fast)) {
		pr_err("the kexec failed (phase kexec-exec): restoring the units from cycle %s on "
		       "this kernel",
		       id);
		restore_here(sd, id);
		return 1;
	}
	*loaded = false; /* the jump is queued */
	jump_queued = true;
	return 0;
}

/* the last word of a failed apply: what was left as it was */
static void report_apply_failure(const char *phase, const char *phase_unit)
{
	if (!strcmp(phase, "preflight"))
		pr_err("apply failed in phase preflight: nothing was changed");
	else if (!strcmp(phase, "kexec-exec"))
		pr_err("apply failed in phase kexec-exec: the units were restored on this "
		       "kernel from the cycle (kupdate status)");
	else
		pr_err("apply failed in phase %s%s%s: every unit was resumed as it was, no "
		       "cycle is ready, nothing was kexec'd",
		       phase, phase_unit ? " of " : "", phase_unit ? phase_unit : "");
}

static void aunits_free(struct aunit *u, int n)
{
	for (int i = 0; i < n; i++) {
		unit_info_free(&u[i].ui);
		free(u[i].members);
		unit_forget_sessions(&u[i]);
		free(u[i].ids);
		free(u[i].rel);
		free(u[i].pre);
		unit_socks_free(&u[i].socks);
	}
	free(u);
}

/* 1 when the apply runs in a login session one of the units carries: its
 * work was handed to a unit of its own, followed until its end (*rc: its
 * status); -1 on a failure to hand it over; 0 otherwise */
static int handed_over(struct sd *sd, const char **names, int n, int argc, char **argv, int *rc)
{
	_cleanup_free_ char *file = NULL;
	int ret = handoff_start(sd, names, n, argc, argv, &file);

	if (ret <= 0)
		return ret < 0 ? -1 : 0;
	sd_close(sd); /* nothing held while it is dumped with its session */
	*rc = handoff_follow(file);
	return 1;
}

/* the options, the kernel to jump to, the pid reservation: 0, -1 (done:
 * --help), or an exit status */
static int apply_args(int argc, char **argv, struct apply_opts *ao, const char ***names, int *nr,
		      char **next, char **next_initrd, char **next_release)
{
	int ret = parse_apply(argc, argv, ao, names, nr);

	/* auto-apply (hook.c): apt's hook scheduled us while apt ran */
	if (!ret && ao->after_apt && wait_after_apt(1800))
		ret = 1;
	if (!ret && choose_kernel(ao, next, next_initrd, next_release))
		ret = 1;
	if (!ret)
		reserve_for_kernel(ao);
	return ret;
}

static int apply_main(int argc, char **argv, bool worker)
{
	struct apply_opts ao = { 0 };
	const char **names = NULL;
	char **preserved = NULL, **followed = NULL;
	int nr_names = 0, nr_pres = 0, nr_followed = 0, n = 0, ret, lockfd = -1, rc = 1;
	struct aunit *u = NULL;
	struct sd sd = { 0 };
	_cleanup_free_ char *id = NULL, *tmp = NULL, *final = NULL, *cmdline = NULL,
			    *reserve = NULL, *pre_cmdline = NULL, *store_dir = NULL, *next = NULL,
			    *next_initrd = NULL, *next_release = NULL;
	bool loaded = false, handover = false;
	struct dumpers dumpers = { 0 };
	int64_t t_start = now_ns(CLOCK_MONOTONIC), rt_start = rt_ns(), preflight_ns = 0;
	/* where a failure happened, for its last message */
	const char *phase = "preflight", *phase_unit = NULL;

	ret = apply_args(argc, argv, &ao, &names, &nr_names, &next, &next_initrd, &next_release);
	if (ret) {
		free(names);
		apply_opts_free(&ao);
		return ret < 0 ? 0 : ret;
	}
	/* up to the point of no return an interruption resumes every unit */
	stop_signals_catch();
	if (sd_open(&sd) ||
	    (!nr_names && preserved_names(&sd, &names, &nr_names, &preserved, &nr_pres)) ||
	    follow_names(&sd, &names, &nr_names, &followed, &nr_followed))
		goto out;
	/* from a login session the units carry: the work goes to a unit */
	ret = worker ? 0 : handed_over(&sd, names, nr_names, argc, argv, &rc);
	if (ret) {
		ao.dry_run = true; /* a failure is the worker's to report */
		goto out;
	}
	u = calloc(nr_names > 0 ? (size_t)nr_names : 1, sizeof(*u));
	if (!u)
		goto out;

	/* 1. preflight: units, kernel, room */
	if (preflight_units(&sd, u, names, nr_names, &ao, &n))
		goto out;
	if (cr_fault_unit("preflight", 0, NULL)) {
		pr_err("preflight fault injected by KUPDATE_FAULT");
		goto out;
	}
	pre_cmdline = preflight_load(u, n, &ao, &id);
	if (!pre_cmdline)
		goto out;
	loaded = true;
	lockfd = lock_state(0);
	if (lockfd < 0 || check_room(u, n, ao.store ? ao.store : state_dir()) || interrupted())
		goto out;
	preflight_ns = now_ns(CLOCK_MONOTONIC) - t_start;
	if (ao.dry_run) {
		ret = dry_run_report(&sd, u, n, &ao);
		if (ret >= 0)
			rc = ret;
		goto out;
	}

	/* 2. dump every unit */
	phase = "dump";
	tmp = id ? xasprintf("%s/cycles/.%s.tmp", state_dir(), id) : NULL;
	final = id ? cycle_path(id, NULL) : NULL;
	if (!tmp || !final) {
		pr_perror("cannot create the cycle directory %s", tmp ? tmp : "");
		goto out;
	}
	if (make_cycle_dir(tmp, id, &ao, &store_dir))
		goto out;
	journal_note(id, NULL, 6, "cycle %s: checkpointing %d units for %s", id, n, ao.kernel);
	if (write_unit_record(tmp, APPLY_RECORD, (const char *const *)names, n))
		goto abort;
	phase = "hand-over";
	if (timed_handover(&sd, u, n, &preflight_ns))
		goto abort;
	handover = true;
	if (interrupted())
		goto abort;
	phase = "dump";
	if (ao.pre_dump && predump_units(u, n, id, tmp, &preflight_ns))
		goto abort;
	if (dumpers_run(&dumpers, u, n, ao.jobs, id, tmp, ao.no_rto_revert)) {
		phase_unit = report_dump_failure(&dumpers, u, id);
		goto abort;
	}
	if (interrupted())
		goto abort;

	/* 3. the cycle: pids to keep free, the final command line, manifest */
	phase = "kexec-load";
	reserve = dumped_reserve(u, n);
	cmdline = reserve ? cycle_load(&ao, id, reserve, pre_cmdline) : NULL;
	if (!cmdline)
		goto abort;
	phase = "manifest";
	if ((store_dir && sync_store(store_dir)) ||
	    write_manifest(u, n, id, tmp, &ao, cmdline, reserve, store_dir, rt_start, preflight_ns))
		goto abort;
	if (cr_fault_unit("manifest", 0, NULL)) {
		pr_err("cannot mark the cycle ready: manifest fault injected by KUPDATE_FAULT");
		goto abort;
	}
	if (interrupted() || publish(tmp, final))
		goto abort;
	/* the cycle is ready: it is carried out whatever comes */
	stop_signals_ignore();
	printf("kupdate: cycle %s ready in %s\n", id, final);

	/* 4. the point of no return */
	phase = "retire";
	/* after this the units are dead: their processes are killed without
	 * FIN or RST (prepare_handover keeps systemd from restarting them or
	 * running their stop commands) */
	dumpers_end(&dumpers, true);
	note_checkpointed(u, n, id);
	free(tmp);
	tmp = NULL;

	/* 5. kexec */
	phase = "kexec-exec";
	rc = jump(&sd, &ao, id, final, &loaded);
	goto out;

abort:
	resume_all(&dumpers, u, n);
	if (tmp)
		rm_cycle_dir(tmp);
	if (handover)
		undo_handover(&sd, u, n);
out:
	if (rc && !ao.dry_run)
		report_apply_failure(phase, phase_unit);
	if (loaded)
		kexec_unload();
	if (u) {
		resume_all(&dumpers, u, n);
		aunits_free(u, n);
	}
	if (lockfd >= 0)
		close(lockfd);
	sd_close(&sd);
	free(names);
	apply_opts_free(&ao);
	strv_free(preserved, nr_pres);
	strv_free(followed, nr_followed);
	return rc;
}

int cmd_apply(int argc, char **argv)
{
	const char *file = handoff_arg(argc, argv);
	int rc;

	if (file && handoff_worker_begin(file))
		return 1;
	rc = apply_main(argc, argv, file != NULL);
	if (file)
		handoff_worker_end(rc, jump_queued);
	return rc;
}
