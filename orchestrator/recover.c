/* Recovery from an interrupted apply, and from a killed dump (below).
 *
 * An apply that dies between freezing its first unit and making the cycle
 * ready (SIGKILL, OOM) cannot undo what it did: a unit may be left frozen,
 * the packets of its TCP connections dropped by the network lock (nftables
 * table inet kupdate), a kernel loaded for kexec.  (Its ptrace hold ends
 * with it: the kernel detaches and resumes the tracees.)  Its sockets are
 * ordinary ones: the engine leaves repair mode as soon as it has read a
 * connection and enters it again only just before it kills the tree, after
 * the cycle is ready (cr-engine/net/tcp.c); only a socket whose queues were
 * being read when apply died is left in repair mode.
 *
 * While it works, apply keeps a record in its partial cycle directory
 * (cycles/.ID.tmp/apply: its pid, then one unit per line) and holds the
 * state lock.  The next kupdate command (apply, status, list, enable,
 * disable: kupdate.c) finds a partial directory whose lock is free, and for
 * each unit of its record: thaws it, takes its established TCP sockets out
 * of repair mode and removes their network lock elements (the engine's
 * cr_tcp_release);
 * removes its hand-over drop-in (daemon reload) and starts it again if it
 * stopped meanwhile;
 * then unloads the kexec kernel and removes the partial directory; unless
 * this boot restores a cycle (kupdate.cycle= on the command line), the
 * whole network lock goes: nothing else can hold one here.  At boot
 * kupdate-finish removes such directories too (boot.c: sweep).
 *
 * Between the death of kupdate (its processes resume at once, their tracer
 * gone) and the recovery, a service reads and writes its connections as
 * usual, their packets held back by the lock until the recovery removes it:
 * nothing is lost (tests/cr: fault-kill-dump-tcp).  What it cannot save: a
 * socket caught in repair mode (above) refuses reads (EPERM) until then,
 * and a service that meets that typically closes the connection. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "boot.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "kexec.h"
#include "recover.h"
#include "sd.h"
#include "units.h"

int write_unit_record(const char *tmpdir, const char *name, const char *const *units, int n)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", tmpdir, name);
	FILE *f;
	int fd, ret = 0;

	if (!p)
		return -ENOMEM;
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		ret = pr_errno("cannot write %s", p);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	fprintf(f, "%d\n", getpid());
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\n", units[i]);
	if (fflush(f) || fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (ret)
		pr_err("cannot write %s: %s", p, strerror(-ret));
	return ret;
}

static void recover_unit(struct sd *s, const char *unit)
{
	struct unit_info ui;
	_cleanup_free_ char *procs = NULL, *path = NULL;
	struct cr_tcp_release rel = { 0 };
	bool thawed = false;

	if (sd_unit_info(s, unit, &ui))
		return;
	if (ui.freezer && strcmp(ui.freezer, "running")) {
		thawed = sd_thaw(s, unit) == 0;
		if (!thawed)
			pr_err("recovery: cannot thaw %s", unit);
	}
	path = ui.cgroup ? xasprintf("%s%s/cgroup.procs", cgroup_root(), ui.cgroup) : NULL;
	if (path && read_file_at(AT_FDCWD, path, &procs, NULL) == 0)
		for (char *l = procs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (atoi(l) > 0)
				cr_tcp_release(atoi(l), false, &rel);
	fprintf(stderr,
		"kupdate: recovery: %s: %s, %u TCP connections out of repair mode, %u "
		"connections checked against the network lock\n",
		unit, thawed ? "thawed" : "not frozen", rel.repaired, rel.unlocked);
	journal_note(NULL, unit, LOG_WARNING,
		     "recovered after an interrupted kupdate apply: %s, %u connections out of "
		     "repair mode",
		     thawed ? "thawed" : "not frozen", rel.repaired);
	unit_info_free(&ui);
}

static void recover_one(struct sd *s, const char *dir, const char *name)
{
	_cleanup_free_ char *tmp = xasprintf("%s/%s", dir, name);
	_cleanup_free_ char *rec = tmp ? xasprintf("%s/" APPLY_RECORD, tmp) : NULL;
	_cleanup_free_ char *chk = tmp ? xasprintf("%s/" CHECK_RECORD, tmp) : NULL;
	_cleanup_free_ char *text = NULL;
	char *l, *nl;
	int n = 0;

	if (!tmp || !rec || !chk)
		return;
	if (read_file_at(AT_FDCWD, chk, &text, NULL) == 0) {
		/* a check (units.c: unit_check) froze its unit: that is all */
		fprintf(stderr,
			"kupdate: recovery: a check (pid %d) died with its unit frozen; thawing "
			"it\n",
			atoi(text));
		for (l = strchr(text, '\n'); l && *++l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl = 0;
			if (unit_name_valid(l)) {
				recover_unit(s, l);
				n++;
			}
		}
	} else if (read_file_at(AT_FDCWD, rec, &text, NULL) == 0) {
		_cleanup_free_ char *cyc = cmdline_cycle();
		char *end = text + strlen(text), *first = strchr(text, '\n');

		fprintf(stderr,
			"kupdate: recovery: an apply (pid %d) died before its cycle was ready; "
			"resuming its units\n",
			atoi(text));
		first = first ? first + 1 : NULL;
		for (l = first; l && *l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl++ = 0;
			if (unit_name_valid(l)) {
				recover_unit(s, l);
				remove_checkpointed_dropin(l);
				n++;
			}
		}
		/* the hand-over drop-ins (apply.c: prepare_handover) go; a unit
		 * that stopped while they held is started again */
		if (n && sd_reload(s) == 0) {
			for (l = first; l && l < end; l += strlen(l) + 1)
				if (unit_name_valid(l))
					restart_if_stopped(s, l, "while kupdate was interrupted");
		}
		/* the kernel it loaded: no cycle goes with it */
		kexec_unload();
		if (!cyc && cr_net_unlock_all() == 0)
			fprintf(stderr, "kupdate: recovery: the network lock it left is removed\n");
	}
	rm_cycle_dir(tmp);
	if (n)
		fprintf(stderr, "kupdate: recovery: %d units resumed, partial cycle %s removed\n",
			n, name);
}

int recover_interrupted(void)
{
	_cleanup_free_ char *dir = xasprintf("%s/cycles", state_dir());
	_cleanup_free_ char *lock = xasprintf("%s/lock", state_dir());
	_cleanup_close_ int lfd = -1;
	struct sd s = { 0 };
	bool opened = false;
	DIR *d;
	struct dirent *de;
	int n = 0;

	if (!dir || !lock)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (de->d_name[0] != '.' || l < 6 || strcmp(de->d_name + l - 4, ".tmp"))
			continue;
		if (lfd < 0) {
			lfd = open(lock, O_RDWR | O_CLOEXEC);
			/* an apply at work holds it: its directory is not stale */
			if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB))
				break;
		}
		if (!opened) {
			if (sd_open(&s))
				break;
			opened = true;
		}
		recover_one(&s, dir, de->d_name);
		n++;
	}
	closedir(d);
	if (opened)
		sd_close(&s);
	return n;
}

/* ------------------------------------------------------ killed dumps
 *
 * A plain `kupdate dump` that dies (SIGKILL, OOM) in the middle of its work
 * leaves the connections it had read in the network lock: its tree runs on
 * (the tracer gone, the kernel resumes it) but their packets are dropped
 * until someone removes the elements.  While it works, the dump keeps a
 * record, $KUPDATE_RUN_DIR/dumps/PID (default /run/kupdate: the lock does
 * not outlive the boot either), locked with flock: the network namespace
 * it ran in, its image directory and the roots of its tree.  It removes the
 * record when it ends, whatever the outcome (a dump that fails undoes its
 * own work; one that completes leaves the lock for the restore).  A record
 * nobody holds belongs to a dump that died: `kupdate recover`, and the
 * commands listed in kupdate.c, take every socket of that tree out of
 * repair mode and remove their elements from the lock, in the namespace
 * the dump ran in (a record of another namespace is left for a kupdate run
 * there). */

static unsigned long long netns_ino(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (unsigned long long)st.st_ino;
}

static int dump_record_fd = -1;
static char *dump_record_path;

static void dump_record_remove(void)
{
	if (dump_record_path) {
		unlink(dump_record_path);
		free(dump_record_path);
		dump_record_path = NULL;
	}
	if (dump_record_fd >= 0) {
		close(dump_record_fd);
		dump_record_fd = -1;
	}
}

int write_dump_record(const char *imgdir, const pid_t *roots, int n)
{
	_cleanup_free_ char *dir = xasprintf("%s/dumps", run_dir());
	FILE *f = NULL;
	int fd = -1, ret = 0;

	if (!dir)
		return -ENOMEM;
	if (mkdir_p(dir, 0700)) {
		ret = -errno;
		goto fail;
	}
	dump_record_path = xasprintf("%s/%d", dir, getpid());
	if (!dump_record_path)
		return -ENOMEM;
	fd = open(dump_record_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		ret = -errno;
		goto fail;
	}
	dump_record_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	f = fdopen(fd, "w");
	if (dump_record_fd < 0 || !f) {
		ret = -errno;
		goto fail;
	}
	fd = -1;
	fprintf(f, "pid %d\nnetns %llu\nimages %s\n", getpid(), netns_ino(), imgdir);
	/* with its start time: a pid used again since is someone else */
	for (int i = 0; i < n; i++) {
		unsigned long long start;

		fprintf(f, "root %d %llu\n", roots[i],
			cr_process_start(roots[i], &start) ? 0ULL : start);
	}
	if (fclose(f)) {
		f = NULL;
		ret = -errno;
		goto fail;
	}
	atexit(dump_record_remove);
	return 0;
fail:
	pr_warn("cannot keep the record %s/%d (%s): were this dump killed, its connections "
		"would stay held until 'nft delete table inet kupdate'",
		dir, getpid(), strerror(-ret));
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (dump_record_path)
		unlink(dump_record_path);
	free(dump_record_path);
	dump_record_path = NULL;
	if (dump_record_fd >= 0)
		close(dump_record_fd);
	dump_record_fd = -1;
	return ret;
}

/* true if the record was of this namespace, handled and removed */
static bool recover_dump(const char *path)
{
	_cleanup_free_ char *text = NULL, *images = NULL;
	unsigned long long ns = 0;
	struct cr_tcp_release rel = { 0 };
	int owner = 0, roots = 0;

	if (read_file_at(AT_FDCWD, path, &text, NULL))
		return false;
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char *nl = strchr(l, '\n');

		if (!strncmp(l, "pid ", 4))
			owner = atoi(l + 4);
		else if (!strncmp(l, "netns ", 6))
			ns = strtoull(l + 6, NULL, 10);
		else if (!strncmp(l, "images ", 7) && !images)
			images = nl ? strndup(l + 7, nl - l - 7) : strdup(l + 7);
	}
	if (ns != netns_ino())
		return false; /* for a kupdate run in that namespace */
	fprintf(stderr,
		"kupdate: recovery: a dump (pid %d) into %s was killed before it finished; "
		"resuming its tree's connections\n",
		owner, images ? images : "?");
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char *e;
		long pid;
		unsigned long long start, now;

		if (strncmp(l, "root ", 5))
			continue;
		pid = strtol(l + 5, &e, 10);
		start = strtoull(e, NULL, 10);
		roots++;
		if (pid > 0 && !cr_process_start(pid, &now) && now == start)
			cr_tcp_release(pid, true, &rel);
	}
	if (rel.processes)
		fprintf(stderr,
			"kupdate: recovery: %u processes of its tree run on: %u TCP connections "
			"out of repair mode, %u released from the network lock; the images in "
			"%s are incomplete: remove them\n",
			rel.processes, rel.repaired, rel.unlocked, images ? images : "?");
	else
		fprintf(stderr,
			"kupdate: recovery: its tree (%d roots) no longer runs: nothing to "
			"release (its images in %s may be complete: check with 'kupdate "
			"show')\n",
			roots, images ? images : "?");
	syslog(LOG_WARNING,
	       "kupdate: recovered after a killed dump (pid %d) into %s: %u processes, %u "
	       "connections released",
	       owner, images ? images : "?", rel.processes, rel.unlocked);
	unlink(path);
	return true;
}

int recover_dead_dumps(void)
{
	_cleanup_free_ char *dir = xasprintf("%s/dumps", run_dir());
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (de->d_name[0] == '.' || atoi(de->d_name) == getpid())
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		fd = p ? open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
		/* a dump at work holds it; one that ended removed it */
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) || fstat(fd, &st) || !st.st_nlink)
			continue;
		n += recover_dump(p);
	}
	if (d)
		closedir(d);
	return n;
}
