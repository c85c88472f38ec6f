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

struct aunit {
	const char *name;
	struct sd *sd;
	struct unit_info ui;
	pid_t *members;
	int nr_members;
	struct cr_dump_session *sess;
	struct cr_dump_stats st;
	bool frozen;
	char *rel; /* units/NAME, in the cycle directory */
	int64_t frozen_at_rt, t_freeze, t_dumped;
	char *pre;	    /* the pre-dump's directory (--pre-dump), or NULL */
	int64_t predump_ns; /* its time, while the unit ran */
	pid_t *ids;
	size_t nr_ids;
	size_t nr_conns;
	uint64_t bytes;
	int worker;		   /* the dump thread that holds sess (its processes' tracer) */
	uint64_t ghost_limit;	   /* apply --ghost-limit (0: the engine's default) */
	struct usessions sessions; /* the login sessions it carries (sessions.c) */
	CycleSession **srec;	   /* and logind's record of them, for the manifest */
	size_t nsrec;
	bool ended; /* a runtime unit that ended before its freeze: not in the cycle */
};

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

/* systemd's bus connection is used by one thread at a time (the units'
 * freezes and thaws happen in the dump threads) */
static pthread_mutex_t sd_lock = PTHREAD_MUTEX_INITIALIZER;

/* sd_freeze or sd_thaw of the unit */
static int unit_call_locked(int (*fn)(struct sd *, const char *), struct aunit *u)
{
	int ret;

	pthread_mutex_lock(&sd_lock);
	ret = fn(u->sd, u->name);
	pthread_mutex_unlock(&sd_lock);
	return ret;
}

/* the unit and the login sessions it carries, thawed: 0 or -EIO */
static int unit_thaw(struct aunit *u, bool locked)
{
	int ret = 0;

	if (locked)
		pthread_mutex_lock(&sd_lock);
	if (u->frozen && sd_thaw(u->sd, u->name))
		ret = -EIO;
	else
		u->frozen = false;
	if (sessions_call(u->sd, &u->sessions, false))
		ret = -EIO;
	if (locked)
		pthread_mutex_unlock(&sd_lock);
	return ret;
}

/* Has this unit, whose file is in /run (systemd-run's), ended?  Such a
 * job ending before its freeze leaves the cycle without failing it. */
static bool runtime_unit_ended(struct aunit *u)
{
	struct unit_info ui;
	bool ended = false;

	if (!unit_runtime(u->name, u->ui.fragment))
		return false;
	pthread_mutex_lock(&sd_lock);
	if (!sd_unit_info(u->sd, u->name, &ui)) {
		ended = strcmp(ui.load, "loaded") || !strcmp(ui.active, "inactive") ||
			!strcmp(ui.active, "failed");
		unit_info_free(&ui);
	}
	pthread_mutex_unlock(&sd_lock);
	if (ended) {
		u->ended = true;
		printf("kupdate: %s: a runtime unit that ended before its freeze: not in the "
		       "cycle\n",
		       u->name);
		fflush(stdout);
	}
	return ended;
}

static void unit_forget_sessions(struct aunit *u)
{
	sessions_free(&u->sessions);
	for (size_t i = 0; i < u->nsrec; i++)
		cycle_session__free_unpacked(u->srec[i], NULL);
	free(u->srec);
	u->srec = NULL;
	u->nsrec = 0;
}

/* The login sessions below the frozen unit's processes (sshd's): frozen
 * too, their processes added to the unit's, logind's record of each kept
 * for the manifest (sessions.c) */
static int unit_add_sessions(struct aunit *u)
{
	int ret = sessions_find(u->members, u->nr_members, &u->sessions);

	if (ret || !u->sessions.n)
		return ret;
	if (sessions_hold_self(&u->sessions)) {
		pr_err("unit %s: kupdate runs in its login session %s (%s), which would be frozen "
		       "with it: run kupdate apply from outside of that session (another "
		       "session whose unit is not preserved, or systemd-run)",
		       u->name, u->sessions.s[0].id, u->sessions.s[0].scope);
		return -EDEADLK;
	}
	pthread_mutex_lock(&sd_lock);
	ret = sessions_call(u->sd, &u->sessions, true);
	pthread_mutex_unlock(&sd_lock);
	if (!ret)
		ret = sessions_members(&u->sessions, &u->members, &u->nr_members);
	if (!ret)
		ret = sessions_record(&u->sessions, u->members, u->nr_members, &u->srec, &u->nsrec);
	if (!ret) {
		printf("kupdate: %s: with its %d login session%s:", u->name, u->sessions.n,
		       u->sessions.n == 1 ? "" : "s");
		for (int i = 0; i < u->sessions.n; i++)
			printf(" %s", u->sessions.s[i].scope);
		printf("\n");
		fflush(stdout);
	}
	return ret;
}

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

static int64_t rt_ns(void)
{
	return now_ns(CLOCK_REALTIME);
}

static int thaw_seized(void *arg)
{
	struct aunit *u = arg;

	/* every process is in a ptrace stop: thawing lets the engine run code
	 * in them, and nothing of the unit runs on */
	if (unit_thaw(u, true))
		return -EIO;
	if (cr_fault("dump")) {
		pr_err("unit %s: dump fault injected by KUPDATE_FAULT (its processes are seized)",
		       u->name);
		return -EIO;
	}
	return 0;
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

static uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t total = 0;

	while (d && (de = readdir(d))) {
		struct stat st;

		if (!fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode))
			total += st.st_size;
	}
	if (d)
		closedir(d);
	return total;
}

/* --pre-dump: the unit's memory copied while it runs (a moment seized to
 * start tracking its writes); the dump then copies only what was written
 * since.  Its directory sits beside the dump's, which links to it. */
static int predump_unit(struct aunit *u, const char *cycle_id, const char *cycdir)
{
	struct cr_dump_opts o = { 0 };
	struct cr_dump_stats st = { 0 };
	pid_t *members = NULL;
	int nr = 0, ret;
	int64_t t0 = now_ns(CLOCK_MONOTONIC);

	u->pre = xasprintf("%s/units/%s.pre", cycdir, u->name);
	if (!u->pre)
		return -ENOMEM;
	ret = unit_members(u->name, &u->ui, &members, &nr);
	if (ret)
		return ret;
	o.members = members;
	o.nr_members = nr;
	o.root = members[0];
	o.imgdir = u->pre;
	o.cycle_id = cycle_id;
	o.pre_dump = true;
	o.own_namespaces = true;
	o.ghost_limit = u->ghost_limit;
	o.external_unix = journal_replaceable;
	cr_log_mark();
	ret = cr_dump(&o, &st);
	free(members);
	u->predump_ns = now_ns(CLOCK_MONOTONIC) - t0;
	if (!ret) {
		printf("kupdate: %s: pre-dumped %.1f MiB while it ran, in %.3f s\n", u->name,
		       dir_bytes(u->pre) / 1048576.0, u->predump_ns / 1e9);
		fflush(stdout);
	}
	return ret;
}

static int dump_unit(struct aunit *u, const char *cycle_id, const char *cycdir, bool progress,
		     bool no_rto_revert)
{
	_cleanup_free_ char *imgdir = NULL;
	struct cr_dump_opts o = { 0 };
	struct cr_conn *conns = NULL;
	struct term_progress tp;
	int ret;

	u->rel = xasprintf("units/%s", u->name);
	imgdir = xasprintf("%s/%s", cycdir, u->rel);
	if (!u->rel || !imgdir)
		return -ENOMEM;
	if (u->ended || runtime_unit_ended(u))
		return 0;
	printf("kupdate: %s: freezing\n", u->name);
	fflush(stdout);
	u->frozen_at_rt = rt_ns();
	u->t_freeze = now_ns(CLOCK_MONOTONIC);
	ret = unit_call_locked(sd_freeze, u);
	if (ret && runtime_unit_ended(u)) /* between the look and the freeze */
		return 0;
	if (ret)
		return ret;
	u->frozen = true;
	if (cr_fault("freeze")) {
		pr_err("unit %s: freeze fault injected by KUPDATE_FAULT", u->name);
		return -EIO;
	}
	/* frozen: the set of processes cannot change any more */
	ret = unit_members(u->name, &u->ui, &u->members, &u->nr_members);
	if (!ret)
		ret = unit_add_sessions(u);
	if (ret)
		return ret;
	o.members = u->members;
	o.nr_members = u->nr_members;
	o.root = u->members[0];
	o.imgdir = imgdir;
	o.cycle_id = cycle_id;
	o.prev_dir = u->pre;
	o.no_rto_revert = no_rto_revert;
	/* restored into the namespaces systemd builds anew (kupdate-anchor) */
	o.own_namespaces = true;
	o.ghost_limit = u->ghost_limit;
	o.external_unix = journal_replaceable;
	o.seized = thaw_seized;
	o.cb_arg = u;
	term_progress_init(&tp, u->name);
	/* one progress line at a time: none when units are dumped in parallel */
	tp.active = tp.active && progress;
	o.progress = term_progress;
	o.progress_arg = &tp;
	ret = cr_dump_begin(&o, &u->st, &u->sess);
	term_progress_done(&tp);
	if (ret)
		return ret;
	u->t_dumped = now_ns(CLOCK_MONOTONIC);
	ret = cr_images_ids(imgdir, &u->ids, &u->nr_ids);
	if (!ret)
		ret = cr_images_connections(imgdir, &conns, &u->nr_conns);
	free(conns);
	u->bytes = dir_bytes(imgdir) + (u->pre ? dir_bytes(u->pre) : 0);
	printf("kupdate: %s: dumped %u processes, %u threads, %.1f MiB, %zu connections in "
	       "%.3f s\n",
	       u->name, u->st.processes, u->st.threads, u->bytes / 1048576.0, u->nr_conns,
	       (u->t_dumped - u->t_freeze) / 1e9);
	/* files deleted under it (an upgrade): what their data cost */
	if (u->st.deleted_files)
		printf("kupdate: %s: saved %u deleted files (%u mapped), %.1f MiB, in %.3f s\n",
		       u->name, u->st.deleted_files, u->st.deleted_mapped,
		       u->st.deleted_bytes / 1048576.0, u->st.deleted_ns / 1e9);
	fflush(stdout);
	return ret;
}

/* The units are frozen and dumped by threads, as many as CPUs (or
 * --jobs), each taking the next unit not yet taken: the units wait frozen
 * for the last dump, so the dumps' total is in every unit's downtime.  A
 * thread that seized a unit's processes is their tracer (ptrace belongs to
 * a thread) and the only one that can end the unit's session: after the
 * dumps it waits for the verdict, to kill its units (the commit is made)
 * or to resume them (a dump failed, or a later step). */
enum { MAX_JOBS = 16 };
enum verdict { VERDICT_NONE, VERDICT_KILL, VERDICT_RESUME };

struct dumpers;
struct dump_worker {
	struct dumpers *d;
	int idx;
	pthread_t th;
};

struct dumpers {
	struct aunit *u;
	int n, next;
	const char *cycle_id, *cycdir;
	bool no_rto_revert; /* apply --no-rto-revert: for the dumps that fail too */
	int failed;	    /* 1 + the unit whose dump failed first, or 0 */
	int ret;	    /* its error */
	char why[1024];	    /* its first error message, or "" */
	int nr, idle;
	enum verdict verdict;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dump_worker w[MAX_JOBS];
};

static void *dump_worker(void *arg)
{
	struct dump_worker *w = arg;
	struct dumpers *d = w->d;
	enum verdict v;

	for (;;) {
		int i;

		pthread_mutex_lock(&d->mu);
		i = d->failed ? d->n : d->next++;
		pthread_mutex_unlock(&d->mu);
		if (i >= d->n)
			break;
		d->u[i].worker = w->idx;
		/* for the engine's fault checks (tests) */
		cr_fault_set_unit(i + 1, d->u[i].name);
		cr_log_mark_thread();
		int ret = dump_unit(&d->u[i], d->cycle_id, d->cycdir, d->nr == 1, d->no_rto_revert);

		/* a state that passes in a moment (-EAGAIN: a vfork in progress,
		 * a connection waiting to be accepted): the failed dump removed
		 * its images; the unit runs a while, then is frozen again */
		for (int tries = 1; ret == -EAGAIN && tries < UNIT_AGAIN_TRIES && !d->failed;
		     tries++) {
			struct aunit *u = &d->u[i];
			const char *why = cr_log_thread_error();

			if (unit_thaw(u, true))
				break;
			unit_forget_sessions(u);
			printf("kupdate: %s: %s; trying again\n", u->name, why ? why : "busy");
			fflush(stdout);
			free(u->members);
			u->members = NULL;
			u->nr_members = 0;
			free(u->rel);
			u->rel = NULL;
			usleep(UNIT_AGAIN_WAIT_US);
			cr_log_mark_thread();
			ret = dump_unit(u, d->cycle_id, d->cycdir, d->nr == 1, d->no_rto_revert);
		}

		if (ret) {
			pthread_mutex_lock(&d->mu);
			if (!d->failed) {
				/* its own error; one of its page writers' if none */
				const char *why = cr_log_thread_error();

				if (!why)
					why = cr_log_first_error();
				snprintf(d->why, sizeof(d->why), "%s", why ? why : "");
				d->failed = i + 1;
				d->ret = ret;
			}
			pthread_mutex_unlock(&d->mu);
		}
	}
	pthread_mutex_lock(&d->mu);
	d->idle++;
	pthread_cond_broadcast(&d->cv);
	while (d->verdict == VERDICT_NONE)
		pthread_cond_wait(&d->cv, &d->mu);
	v = d->verdict;
	pthread_mutex_unlock(&d->mu);
	/* the kills at the point of no return: each thread its own units */
	for (int i = 0; i < d->n; i++) {
		if (d->u[i].sess && d->u[i].worker == w->idx) {
			cr_dump_end(d->u[i].sess, v == VERDICT_KILL);
			d->u[i].sess = NULL;
		}
	}
	return NULL;
}

/* Freeze and dump every unit; returns when all are dumped or one failed
 * (then the threads took no further unit): d->failed names it (0: no
 * thread could be started).  The
 * sessions stay with the threads until dumpers_end(). */
static int dumpers_run(struct dumpers *d, struct aunit *u, int n, int jobs, const char *cycle_id,
		       const char *cycdir, bool no_rto_revert)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(d, 0, sizeof(*d));
	d->u = u;
	d->n = n;
	d->cycle_id = cycle_id;
	d->cycdir = cycdir;
	d->no_rto_revert = no_rto_revert;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if (jobs <= 0)
		jobs = cpus > 0 ? (int)cpus : 1;
	jobs = jobs < n ? jobs : n;
	jobs = jobs < MAX_JOBS ? jobs : MAX_JOBS;
	/* a page writer's error is found in cr_log_first_error() */
	cr_log_mark();
	d->nr = jobs;
	for (int k = 0; k < jobs; k++) {
		int ret;

		d->w[k].d = d;
		d->w[k].idx = k;
		ret = pthread_create(&d->w[k].th, NULL, dump_worker, &d->w[k]);
		if (ret) {
			/* the threads started take every unit */
			pr_warn("cannot start a dump thread: %s; %d dump at once", strerror(ret),
				k);
			pthread_mutex_lock(&d->mu);
			d->nr = k;
			pthread_mutex_unlock(&d->mu);
			break;
		}
	}
	if (!d->nr) {
		pr_err("cannot start a dump thread: no unit was touched");
		return -1;
	}
	pthread_mutex_lock(&d->mu);
	while (d->idle < d->nr)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	return d->failed ? -1 : 0;
}

/* the threads end their units' sessions (killing them or letting them run
 * on) and are gone; again: nothing */
static void dumpers_end(struct dumpers *d, bool kill_them)
{
	if (!d->u)
		return;
	pthread_mutex_lock(&d->mu);
	d->verdict = kill_them ? VERDICT_KILL : VERDICT_RESUME;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	for (int k = 0; k < d->nr; k++)
		pthread_join(d->w[k].th, NULL);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	d->u = NULL;
}

static void resume_all(struct dumpers *d, struct aunit *u, int n)
{
	dumpers_end(d, false);
	for (int i = 0; i < n; i++) {
		unit_thaw(&u[i], false);
	}
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
		if (runtime_unit_ended(a))
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
	int bad = 0;

	for (int i = 0; i < n; i++) {
		char why[1024], note[96];
		struct cr_dump_stats st = { 0 };

		if (interrupted())
			return -1;
		if (u[i].ended)
			continue;
		if (unit_check(sd, u[i].name, &u[i].ui, ao->ghost_limit, why, sizeof(why), &st)) {
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
