/* Preserved units: kupdate enable/disable/list, the processes of a unit's
 * cgroup, and the check that a unit can be checkpointed now. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "kupdate.h"
#include "recover.h"
#include "sd.h"
#include "sessions.h"
#include "term.h"
#include "units.h"

const char *wants_dir(void)
{
	const char *d = getenv("KUPDATE_WANTS_DIR");

	return d && *d ? d : "/etc/systemd/system/kupdate.target.wants";
}

/* Does the unit file of a preserved unit live in /run (a transient unit of
 * systemd-run, a runtime unit)?  Its link says so even once the unit has
 * gone and its file with it. */
bool unit_runtime(const char *unit, const char *fragment)
{
	_cleanup_free_ char *link = xasprintf("%s/%s", wants_dir(), unit);
	char target[PATH_MAX];
	ssize_t l = link ? readlink(link, target, sizeof(target) - 1) : -1;

	if (fragment && !strncmp(fragment, "/run/", 5))
		return true;
	if (l <= 0)
		return false;
	target[l] = 0;
	return !strncmp(target, "/run/", 5);
}

bool unit_ended(const struct unit_info *ui)
{
	return strcmp(ui->load, "loaded") || !strcmp(ui->active, "inactive") ||
	       !strcmp(ui->active, "failed");
}

int preserved_drop_ended(struct sd *s, char **v, int *n)
{
	int k = 0;

	for (int i = 0; i < *n; i++) {
		struct unit_info ui;
		bool ended = false;

		if (unit_runtime(v[i], NULL) && !sd_unit_info(s, v[i], &ui)) {
			ended = unit_ended(&ui);
			unit_info_free(&ui);
		}
		if (ended) {
			_cleanup_free_ char *link = xasprintf("%s/%s", wants_dir(), v[i]);

			printf("kupdate: %s: a runtime unit (its file in /run) that has ended: "
			       "no longer preserved\n",
			       v[i]);
			if (link)
				unlink(link);
			free(v[i]);
			continue;
		}
		v[k++] = v[i];
	}
	*n = k;
	return 0;
}

bool unit_name_valid(const char *u)
{
	size_t n = strlen(u);

	if (n < 9 || n > 255 || strcmp(u + n - 8, ".service") || u[0] == '.')
		return false;
	for (const char *p = u; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr(":-_.\\@", *p)))
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int preserved_units(char ***out, int *nr)
{
	DIR *d = opendir(wants_dir());
	struct dirent *de;
	char **v = NULL;
	int n = 0;

	*out = NULL;
	*nr = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char **nv;

		if (!unit_name_valid(de->d_name))
			continue;
		nv = xrealloc_array(v, n + 1, sizeof(*nv));
		if (!nv) {
			closedir(d);
			strv_free(v, n);
			return -ENOMEM;
		}
		v = nv;
		v[n] = xstrdup(de->d_name);
		if (!v[n]) {
			closedir(d);
			strv_free(v, n);
			return -ENOMEM;
		}
		n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	*nr = n;
	return 0;
}

/* every pid of a cgroup and its descendants */
int cgroup_procs(const char *dir, pid_t **v, int *n)
{
	_cleanup_free_ char *procs = NULL, *path = xasprintf("%s/cgroup.procs", dir);
	DIR *d;
	struct dirent *de;
	int ret;

	if (!path)
		return -ENOMEM;
	ret = read_file_at(AT_FDCWD, path, &procs, NULL);
	if (ret)
		return ret;
	for (char *p = procs, *e; *p; p = e) {
		long pid = strtol(p, &e, 10);
		pid_t *nv;

		if (e == p)
			break;
		nv = xrealloc_array(*v, *n + 1, sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		nv[(*n)++] = pid;
	}
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		sub = xasprintf("%s/%s", dir, de->d_name);
		if (!sub) {
			closedir(d);
			return -ENOMEM;
		}
		if (stat(sub, &st) || !S_ISDIR(st.st_mode))
			continue;
		ret = cgroup_procs(sub, v, n);
		if (ret) {
			closedir(d);
			return ret;
		}
	}
	closedir(d);
	return 0;
}

/* Does the unit run processes of its own? */
static bool runs_processes(const struct unit_info *ui)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ pid_t *v = NULL;
	int n = 0;

	if (ui->main_pid > 0)
		return true;
	if (!ui->cgroup || !*ui->cgroup)
		return false;
	dir = xasprintf("%s%s", cgroup_root(), ui->cgroup);
	return dir && !cgroup_procs(dir, &v, &n) && n > 0;
}

int units_follow_parts(struct sd *s, const char *const *in, int n, char ***out, int *nout)
{
	char **v = NULL;
	size_t nv = 0;
	int ret = 0;

	for (int i = 0; !ret && i < n; i++) {
		char **parts = NULL, line[1024] = "";
		struct unit_info ui;
		int added = 0;

		if (!unit_name_valid(in[i]) || sd_unit_info(s, in[i], &ui)) {
			/* the caller names the error */
			ret = strv_add(&v, &nv, in[i]);
			continue;
		}
		if (!runs_processes(&ui) && !sd_unit_parts(s, in[i], &parts))
			for (char **p = parts; p && *p && !ret; p++) {
				size_t l = strlen(line);

				if (!unit_name_valid(*p))
					continue;
				ret = strv_add(&v, &nv, *p);
				added++;
				snprintf(line + l, sizeof(line) - l, "%s%s", l ? ", " : "", *p);
			}
		if (added)
			fprintf(stderr,
				"kupdate: %s runs no process itself: the units that are part of it "
				"(PartOf=%s) are taken in its place: %s\n",
				in[i], in[i], line);
		else if (!ret)
			ret = strv_add(&v, &nv, in[i]);
		for (char **p = parts; p && *p; p++)
			free(*p);
		free(parts);
		unit_info_free(&ui);
	}
	if (ret) {
		strv_free(v, nv);
		return ret;
	}
	*out = v;
	*nout = (int)nv;
	return 0;
}

/* A forking daemon that opened a PAM session for its desktop
 * (tigervncsession) moved itself into the session's logind scope: its
 * unit's own group is empty, its main process is there, with the rest */
static bool main_in_session(pid_t pid)
{
	_cleanup_free_ char *cg = pid > 0 ? cgroup_of_pid(pid) : NULL;
	unsigned uid;
	int end = 0;

	return cg &&
	       sscanf(cg, "/user.slice/user-%u.slice/session-%*[^/.].scope%n", &uid, &end) == 1 &&
	       end > 0 && !cg[end];
}

int unit_members(const char *unit, const struct unit_info *ui, pid_t **out, int *nr)
{
	_cleanup_free_ char *dir = NULL;
	pid_t *v = NULL;
	int n = 0, ret;

	*out = NULL;
	*nr = 0;
	if (!ui->cgroup || !*ui->cgroup) {
		pr_err("unit %s has no control group (is it running?)", unit);
		return -ENOENT;
	}
	dir = xasprintf("%s%s", cgroup_root(), ui->cgroup);
	if (!dir)
		return -ENOMEM;
	ret = cgroup_procs(dir, &v, &n);
	if (ret) {
		pr_err("unit %s: cannot list the processes of %s: %s", unit, dir, strerror(-ret));
		free(v);
		return ret;
	}
	if (!n && main_in_session(ui->main_pid)) {
		v = calloc(1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		v[n++] = ui->main_pid;
	}
	if (!n) {
		pr_err("unit %s has no process", unit);
		free(v);
		return -ENOENT;
	}
	/* the main process first: its tree is the unit's first */
	for (int i = 1; i < n; i++)
		if (v[i] == ui->main_pid) {
			v[i] = v[0];
			v[0] = ui->main_pid;
		}
	*out = v;
	*nr = n;
	return 0;
}

pid_t fork_free_pid(const pid_t *ids, size_t n)
{
	for (int t = 0; t < 64; t++) {
		pid_t p = fork();
		bool taken = false;
		int st;

		if (p <= 0)
			return p < 0 ? -errno : 0;
		for (size_t i = 0; i < n && !taken; i++)
			taken = ids[i] == p;
		if (!taken)
			return p;
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
	}
	return -EEXIST;
}

const char *cgroup_root(void)
{
	const char *d = getenv("KUPDATE_CGROUP_ROOT");

	return d && *d ? d : "/sys/fs/cgroup";
}

char *own_cgroup(void)
{
	return cgroup_of_pid(0);
}

char *cgroup_of_pid(pid_t pid)
{
	char *cg = NULL, path[48];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/cgroup");
	if (read_file_at(AT_FDCWD, path, &cg, NULL) || strncmp(cg, "0::/", 4)) {
		free(cg);
		return NULL;
	}
	cg[strcspn(cg, "\n")] = 0;
	memmove(cg, cg + 3, strlen(cg + 3) + 1);
	return cg;
}

/* SIZE, SIZEK, SIZEM or SIZEG (powers of 1024), above 0 */
int parse_size(const char *s, uint64_t *out)
{
	char *e;
	unsigned long long v = strtoull(s, &e, 10);
	int shift = 0;

	if (e == s || *s == '-')
		return -1;
	if (*e == 'K' || *e == 'k')
		shift = 10;
	else if (*e == 'M' || *e == 'm')
		shift = 20;
	else if (*e == 'G' || *e == 'g')
		shift = 30;
	if (shift)
		e++;
	if (*e || !v || v > (~0ULL >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

void deleted_note(const struct cr_dump_stats *st, char *buf, size_t len)
{
	double b = st->deleted_bytes;
	const char *unit = "bytes";

	buf[0] = 0;
	if (!st->deleted_files)
		return;
	if (b >= 1 << 20) {
		b /= 1 << 20;
		unit = "MiB";
	} else if (b >= 1 << 10) {
		b /= 1 << 10;
		unit = "KiB";
	}
	snprintf(buf, len, "%u deleted file%s (%u mapped), %.*f %s", st->deleted_files,
		 st->deleted_files > 1 ? "s" : "", st->deleted_mapped, unit[0] == 'b' ? 0 : 1, b,
		 unit);
}

/* A dry dump that changes nothing; the first error is the reason.  A check sees its unit as a dump does: frozen by systemd until every
 * process is seized, so that a process that forks or exits meanwhile
 * cannot change the answer (one that exited between the read of the
 * cgroup and its seizure failed the check at random: "pid N exited while
 * being dumped").  A unit its operator froze stays as it is.  While the
 * unit is frozen, a record (cycles/.check-PID.tmp/check: this pid, the
 * unit) lets the next kupdate thaw it if this one dies (recover.c); the
 * caller holds the state lock, so no other kupdate takes it for stale. */
struct check_freeze {
	struct sd *s;
	const char *unit;
	bool frozen;
	struct usessions ss; /* the login sessions it carries, frozen with it */
	const struct unit_socks *others;
	size_t nothers, self;
};

int unit_sockets(const char *unit, const struct unit_info *ui, struct unit_socks *s)
{
	_cleanup_free_ pid_t *pids = NULL;
	int n = 0, ret = unit_members(unit, ui, &pids, &n);

	if (!ret)
		ret = cr_unix_connected(pids, n, &s->v, &s->n);
	if (ret)
		pr_err("unit %s: cannot list its unix sockets: %s", unit, strerror(-ret));
	return ret;
}

void unit_socks_free(struct unit_socks *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

int socks_owner(const struct unit_socks *socks, size_t n, size_t self, uint32_t ino)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; i != self && k < socks[i].n; k++)
			if (socks[i].v[k].ino == ino)
				return (int)i;
	return -1;
}

/* a check: a connection to a unit preserved with it is a link */
static bool check_linked(uint32_t ino, uint32_t peer, void *arg)
{
	const struct check_freeze *cf = arg;

	(void)ino;
	return socks_owner(cf->others, cf->nothers, cf->self, peer) >= 0;
}

static int check_thaw(void *arg)
{
	struct check_freeze *cf = arg;
	int ret = sessions_call(cf->s, &cf->ss, false);

	if (cf->frozen && sd_thaw(cf->s, cf->unit))
		return -EIO;
	cf->frozen = false;
	return ret;
}

/* the sessions below the unit's processes, frozen (when the unit is), and
 * their processes added to members */
static int check_sessions(struct check_freeze *cf, pid_t **members, int *n)
{
	int ret;

	sessions_free(&cf->ss);
	ret = sessions_find(*members, *n, &cf->ss);
	if (ret || !cf->ss.n)
		return ret;
	if (sessions_hold_self(&cf->ss)) {
		pr_err("kupdate runs in the login session %s (%s) of the unit, which a check "
		       "would freeze with it: run it from outside of that session",
		       cf->ss.s[0].id, cf->ss.s[0].scope);
		return -EDEADLK;
	}
	if (cf->frozen && sessions_call(cf->s, &cf->ss, true))
		return -EIO;
	return sessions_members(&cf->ss, members, n);
}

static char *check_record(const char *unit)
{
	char *dir = xasprintf("%s/cycles/.check-%d.tmp", state_dir(), getpid());

	if (!dir)
		return NULL;
	rm_cycle_dir(dir); /* this pid's own, of a kupdate long gone */
	if (mkdir(dir, 0700) || write_unit_record(dir, CHECK_RECORD, &unit, 1)) {
		pr_perror("cannot write the check's record in %s", dir);
		rm_cycle_dir(dir);
		free(dir);
		return NULL;
	}
	return dir;
}

int unit_check(struct sd *s, const char *unit, const struct unit_info *ui, uint64_t ghost_limit,
	       const struct unit_socks *others, size_t nothers, size_t self, char *why, size_t len,
	       struct cr_dump_stats *pst)
{
	_cleanup_free_ pid_t *members = NULL;
	_cleanup_free_ char *rec = NULL;
	struct cr_dump_opts o = { 0 };
	struct cr_dump_stats st = { 0 };
	struct check_freeze cf = { s, unit, false, { NULL, 0 }, others, nothers, self };
	bool freeze = !ui->freezer || !strcmp(ui->freezer, "running");
	int n, ret, devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

	why[0] = 0;
	if (freeze) {
		rec = check_record(unit);
		if (!rec) {
			snprintf(why, len, "cannot keep a record of its freeze in %s/cycles",
				 state_dir());
			if (devnull >= 0)
				close(devnull);
			return -EIO;
		}
	}
	/* a state that passes in a moment (-EAGAIN: a vfork in progress, a
	 * connection waiting to be accepted) is tried again, thawed between */
	for (int tries = 0;; tries++) {
		cr_log_mark();
		if (freeze) {
			ret = sd_freeze(s, unit);
			if (ret) {
				snprintf(why, len, "cannot freeze it for the check: %s",
					 cr_log_first_error() ?: strerror(-ret));
				rm_cycle_dir(rec);
				if (devnull >= 0)
					close(devnull);
				return ret;
			}
			cf.frozen = true;
		}
		if (devnull >= 0)
			cr_log_redirect(devnull, cr_log_fd());
		free(members);
		members = NULL;
		memset(&st, 0, sizeof(st));
		ret = unit_members(unit, ui, &members, &n);
		if (!ret)
			ret = check_sessions(&cf, &members, &n);
		if (!ret) {
			o.members = members;
			o.nr_members = n;
			o.root = members[0];
			o.check_only = true;
			o.own_namespaces = true;
			o.ghost_limit = ghost_limit;
			o.external_unix = journal_replaceable;
			o.linked_unix = others ? check_linked : NULL;
			o.seized = check_thaw;
			o.cb_arg = &cf;
			ret = cr_dump(&o, &st);
		}
		if (devnull >= 0)
			cr_log_redirect(STDERR_FILENO, cr_log_fd());
		if (ret != -EAGAIN || tries + 1 >= UNIT_AGAIN_TRIES ||
		    (cf.frozen && check_thaw(&cf)))
			break;
		usleep(UNIT_AGAIN_WAIT_US);
	}
	if (devnull >= 0)
		close(devnull);
	if (ret)
		snprintf(why, len, "%s", cr_log_first_error() ?: strerror(-ret));
	if (cf.frozen && check_thaw(&cf) && !ret) {
		snprintf(why, len, "cannot thaw it after the check");
		ret = -EIO;
	}
	if (rec && !cf.frozen)
		rm_cycle_dir(rec); /* kept for the recovery while it stays frozen */
	sessions_free(&cf.ss);
	*pst = st;
	return ret;
}

int cmd_enable(int argc, char **argv)
{
	struct sd s;
	int ret = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		printf("usage: kupdate enable UNIT...\n"
		       "Preserve UNIT across kernel updates (kupdate.target wants it).\n");
		return argc < 2 ? 2 : 0;
	}
	if (sd_open(&s))
		return 1;
	if (mkdir_p(wants_dir(), 0755)) {
		pr_perror("cannot create %s", wants_dir());
		sd_close(&s);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct unit_info ui;
		_cleanup_free_ char *link = NULL;

		if (!unit_name_valid(argv[i])) {
			pr_err("'%s' is not a service unit name (NAME.service)", argv[i]);
			ret = 1;
			continue;
		}
		if (sd_unit_info(&s, argv[i], &ui)) {
			ret = 1;
			continue;
		}
		if (strcmp(ui.load, "loaded") || !ui.fragment || !*ui.fragment) {
			pr_err("unit %s is %s: there is no unit file to preserve", argv[i],
			       ui.load);
			unit_info_free(&ui);
			ret = 1;
			continue;
		}
		link = xasprintf("%s/%s", wants_dir(), argv[i]);
		unlink(link);
		if (!link || symlink(ui.fragment, link)) {
			pr_perror("unit %s: cannot create %s", argv[i], link ? link : "the link");
			ret = 1;
		} else {
			printf("%s: preserved across kernel updates (%s -> %s)%s\n", argv[i], link,
			       ui.fragment,
			       unit_runtime(argv[i], ui.fragment)
				       ? "; a runtime unit: its file goes with each cycle, and "
					 "it is preserved until it ends"
				       : "");
		}
		unit_info_free(&ui);
	}
	if (sd_reload(&s))
		ret = 1;
	sd_close(&s);
	return ret;
}

int cmd_disable(int argc, char **argv)
{
	struct sd s;
	int ret = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		printf("usage: kupdate disable UNIT...\n"
		       "Stop preserving UNIT: it is stopped and started the ordinary way.\n");
		return argc < 2 ? 2 : 0;
	}
	for (int i = 1; i < argc; i++) {
		_cleanup_free_ char *link = xasprintf("%s/%s", wants_dir(), argv[i]);

		if (!unit_name_valid(argv[i])) {
			pr_err("'%s' is not a service unit name (NAME.service)", argv[i]);
			ret = 1;
		} else if (unlink(link)) {
			if (errno == ENOENT)
				pr_err("unit %s is not preserved (no %s)", argv[i], link);
			else
				pr_perror("unit %s: cannot remove %s", argv[i], link);
			ret = 1;
		} else {
			printf("%s: no longer preserved\n", argv[i]);
		}
	}
	if (sd_open(&s) == 0) {
		if (sd_reload(&s))
			ret = 1;
		sd_close(&s);
	}
	return ret;
}

/* The namespaces a unit's main process has of its own: those a cycle
 * keeps (restored into the ones systemd builds for the unit anew), and
 * those it does not, marked "!" (the unit is refused) */
static void ns_text(unsigned own, unsigned kept, char *buf, size_t len)
{
	char b[64], *save = NULL;
	size_t o;

	cr_namespace_names(kept, buf, len);
	if (!own)
		snprintf(buf, len, "-");
	cr_namespace_names(own & ~kept, b, sizeof(b));
	o = strlen(buf);
	for (char *t = strtok_r(b, " ", &save); t && o < len; t = strtok_r(NULL, " ", &save))
		o += snprintf(buf + o, len - o, "%s%s!", o ? " " : "", t);
}

static json_object *ns_list(unsigned flags)
{
	json_object *arr = json_object_new_array();
	char names[64], *save = NULL;

	cr_namespace_names(flags, names, sizeof(names));
	for (char *t = strtok_r(names, " ", &save); t; t = strtok_r(NULL, " ", &save))
		json_object_array_add(arr, json_object_new_string(t));
	return arr;
}

static json_object *ns_json(unsigned own, unsigned kept)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "own", ns_list(own));
	json_object_object_add(o, "kept", ns_list(kept));
	return o;
}

/* The containers among a unit's processes: the inits of pid namespaces
 * of their own (the last of their NSpid ids is 1: an nspawn machine's
 * systemd, a podman container's init), their host pids into inits (max
 * of them); how many there are */
static int unit_containers(const struct unit_info *ui, pid_t *inits, int max)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ pid_t *v = NULL;
	int n = 0, found = 0;

	if (!ui->cgroup || !(dir = xasprintf("%s%s", cgroup_root(), ui->cgroup)) ||
	    cgroup_procs(dir, &v, &n))
		return 0;
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *path = xasprintf("/proc/%d/status", v[i]), *buf = NULL;
		const char *l;
		size_t len;
		int ids = 0;
		long last = 0;

		if (!path || read_file_at(AT_FDCWD, path, &buf, &len) ||
		    !(l = strstr(buf, "\nNSpid:")))
			continue;
		for (char *s = (char *)l + 7, *e; *s && *s != '\n'; s = e) {
			long id = strtol(s, &e, 10);

			if (e == s)
				break;
			ids++;
			last = id;
		}
		if (ids > 1 && last == 1) {
			if (found < max)
				inits[found] = v[i];
			found++;
		}
	}
	return found;
}

/* one unit of `kupdate list --json`; why: NULL if not checked */
static json_object *list_json(const char *unit, const struct unit_info *ui,
			      const struct cr_dump_stats *st, bool ok, const char *why)
{
	json_object *e = json_object_new_object();

	json_object_object_add(e, "unit", json_object_new_string(unit));
	json_object_object_add(e, "state", json_object_new_string(ui->active));
	json_object_object_add(e, "main_pid", json_object_new_int(ui->main_pid));
	json_object_object_add(e, "processes", json_object_new_int64(st->processes));
	json_object_object_add(e, "checkpointable", why ? json_object_new_boolean(ok) : NULL);
	json_object_object_add(e, "reason",
			       ok ? NULL : json_object_new_string(why ? why : "not checked"));
	json_object_object_add(e, "deleted_files",
			       ok ? json_object_new_int64(st->deleted_files) : NULL);
	json_object_object_add(e, "deleted_bytes",
			       ok ? json_object_new_int64(st->deleted_bytes) : NULL);
	return e;
}

/* the sockets of each active unit of units[0..n): who is connected to
 * whom among them (such connections are links); NULL without memory */
static struct unit_socks *units_sockets(struct sd *s, char **units, int n)
{
	struct unit_socks *socks = calloc(n ? n : 1, sizeof(*socks));

	for (int i = 0; socks && i < n; i++) {
		struct unit_info ui;

		if (sd_unit_info(s, units[i], &ui))
			continue;
		if (!strcmp(ui.active, "active"))
			unit_sockets(units[i], &ui, &socks[i]);
		unit_info_free(&ui);
	}
	return socks;
}

/* a unit's line of `kupdate list`, or its object added to jarr; why: NULL
 * if not checked */
static void list_row(const char *unit, const struct unit_info *ui, const struct cr_dump_stats *st,
		     bool ok, const char *why, const char *note, json_object *jarr)
{
	unsigned ns_own = 0, ns_kept = 0;
	char nstext[64], kind[32];
	pid_t inits[8];
	int nctr;

	if (ui->main_pid > 0)
		cr_process_namespaces(ui->main_pid, &ns_own, &ns_kept);
	ns_text(ns_own, ns_kept, nstext, sizeof(nstext));
	nctr = unit_containers(ui, inits, 8);
	if (nctr > 1)
		snprintf(kind, sizeof(kind), "%d ctrs", nctr);
	else
		snprintf(kind, sizeof(kind), "%s", nctr ? "container" : "service");
	if (jarr) {
		json_object *e = list_json(unit, ui, st, ok, why), *ctr = json_object_new_array();

		json_object_object_add(e, "namespaces", ns_json(ns_own, ns_kept));
		json_object_object_add(e, "kind",
				       json_object_new_string(nctr ? "container" : "service"));
		for (int k = 0; k < nctr && k < 8; k++)
			json_object_array_add(ctr, json_object_new_int(inits[k]));
		json_object_object_add(e, "container_inits", ctr);
		json_object_array_add(jarr, e);
		return;
	}
	printf("%-32s %-10s %8d %6u  %-10s %-16s %s%s%s%s%s%s\n", unit, ui->active, ui->main_pid,
	       st->processes, kind, nstext,
	       term_c(stdout, ok    ? T_GREEN
			      : why ? T_RED
				    : T_DIM),
	       ok    ? "yes"
	       : why ? why
		     : "not checked",
	       term_c(stdout, T_RESET), ok && note[0] ? " (saves " : "", ok ? note : "",
	       ok && note[0] ? ")" : "");
}

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "no-check", no_argument, NULL, 'n' },
		{ "ghost-limit", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool json = false, check = true;
	uint64_t ghost_limit = 0;
	json_object *jarr = NULL;
	struct unit_socks *socks = NULL;
	char **units;
	int n, c, ret = 0, lockfd = -1;
	struct sd s;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'n':
			check = false;
			break;
		case 'g':
			if (parse_size(optarg, &ghost_limit)) {
				pr_err("list: --ghost-limit '%s' is not a size (bytes, or with K, "
				       "M, "
				       "G)",
				       optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: kupdate list [--json] [--no-check] [--ghost-limit SIZE]\n"
			       "The preserved units, their state, and whether each can be\n"
			       "checkpointed now (a dry dump that changes nothing; each unit\n"
			       "is frozen while its processes are seized, as apply does), with\n"
			       "the files deleted since they started (a library apt replaced)\n"
			       "whose data a dump of it saves (--ghost-limit: as apply's).\n");
			return 0;
		default:
			return 2;
		}
	}
	if (preserved_units(&units, &n)) {
		pr_perror("cannot read %s", wants_dir());
		return 1;
	}
	if (!n) {
		printf(json ? "[ ]\n" : "no preserved unit (kupdate enable UNIT)\n");
		free(units);
		return 0;
	}
	/* the checks freeze their units: not while an apply works on them */
	if (check && (lockfd = lock_state(10)) < 0) {
		strv_free(units, n);
		return 1;
	}
	if (sd_open(&s)) {
		strv_free(units, n);
		if (lockfd >= 0)
			close(lockfd);
		return 1;
	}
	{
		char **parts;
		int np;

		if (units_follow_parts(&s, (const char *const *)units, n, &parts, &np)) {
			sd_close(&s);
			strv_free(units, n);
			if (lockfd >= 0)
				close(lockfd);
			return 1;
		}
		strv_free(units, n);
		units = parts;
		n = np;
	}
	if (check)
		socks = units_sockets(&s, units, n);
	if (json)
		jarr = json_object_new_array();
	else
		printf("%-32s %-10s %8s %6s  %-10s %-16s %s\n", "UNIT", "STATE", "MAINPID", "PROCS",
		       "KIND", "NAMESPACES", "CHECKPOINT");
	for (int i = 0; i < n; i++) {
		struct unit_info ui;
		char why[1024] = "", note[96] = "";
		struct cr_dump_stats st = { 0 };
		bool ok = false;

		if (sd_unit_info(&s, units[i], &ui)) {
			ret = 1;
			continue;
		}
		if (!check)
			snprintf(why, sizeof(why), "not checked");
		else if (strcmp(ui.active, "active"))
			snprintf(why, sizeof(why), "unit is %s", ui.active);
		else
			ok = unit_check(&s, units[i], &ui, ghost_limit, socks, socks ? n : 0, i,
					why, sizeof(why), &st) == 0;
		/* what the dump would save of files deleted since they started */
		deleted_note(&st, note, sizeof(note));
		if (check && !ok)
			ret = 1;
		list_row(units[i], &ui, &st, ok, check ? why : NULL, note, jarr);
		unit_info_free(&ui);
	}
	if (jarr) {
		json_print(jarr, stdout);
		json_object_put(jarr);
	}
	for (int i = 0; socks && i < n; i++)
		unit_socks_free(&socks[i]);
	free(socks);
	sd_close(&s);
	strv_free(units, n);
	if (lockfd >= 0)
		close(lockfd);
	return ret;
}

char *json_escape(const char *s)
{
	size_t n = 0;
	char *out = malloc(strlen(s) * 6 + 1);

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			n += sprintf(out + n, "\\%c", c);
		else if (c < 0x20)
			n += sprintf(out + n, "\\u%04x", c);
		else
			out[n++] = c;
	}
	out[n] = 0;
	return out;
}
