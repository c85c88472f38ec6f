/* The units of an apply, frozen and dumped by threads (dump-units.h):
 * each thread takes the next unit, freezes it with the login sessions it
 * carries, seizes and dumps it, and holds its processes until the verdict
 * (killed once the cycle is committed, resumed otherwise).  apply.c runs
 * the phases around them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr-fault.h"
#include "cr-log.h"
#include "dump-units.h"
#include "term.h"
#include "units.h"

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
int unit_thaw(struct aunit *u, bool locked)
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
bool runtime_unit_ended(struct aunit *u, const struct unit_info *ui)
{
	struct unit_info now;
	bool ended = false;

	if (!unit_runtime(u->name, u->ui.fragment))
		return false;
	if (ui) {
		ended = unit_ended(ui);
	} else {
		pthread_mutex_lock(&sd_lock);
		if (!sd_unit_info(u->sd, u->name, &now)) {
			ended = unit_ended(&now);
			unit_info_free(&now);
		}
		pthread_mutex_unlock(&sd_lock);
	}
	if (ended) {
		u->ended = true;
		printf("kupdate: %s: a runtime unit that ended before its freeze: not in the "
		       "cycle\n",
		       u->name);
		fflush(stdout);
	}
	return ended;
}

void unit_forget_sessions(struct aunit *u)
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

static int group_root(struct aunit *u, int i)
{
	while (u[i].group != i)
		i = u[i].group;
	return i;
}

void link_groups(struct aunit *u, int n)
{
	_cleanup_free_ struct unit_socks *socks = NULL;

	for (int i = 0; i < n; i++) {
		u[i].group = i;
		u[i].all = u;
		u[i].nall = n;
		u[i].taken = u[i].rescanned = false;
		u[i].links = 0;
		unit_socks_free(&u[i].socks);
		/* one that cannot be listed (gone) is on its own */
		if (!u[i].ended)
			unit_sockets(u[i].name, &u[i].ui, &u[i].socks);
	}
	/* without memory for this list each is on its own: their connections
	 * are refused at the dump, as outside peers are */
	socks = calloc(n > 0 ? (size_t)n : 1, sizeof(*socks));
	for (int i = 0; socks && i < n; i++)
		socks[i] = u[i].socks;
	for (int i = 0; socks && i < n; i++)
		for (size_t k = 0; k < u[i].socks.n; k++) {
			int j = socks_owner(socks, n, i, u[i].socks.v[k].peer), a, b;

			if (j < 0)
				continue;
			a = group_root(u, i);
			b = group_root(u, j);
			if (a != b)
				u[MAX(a, b)].group = MIN(a, b);
		}
	for (int i = 0; i < n; i++)
		u[i].group = group_root(u, i);
	for (int i = 0; i < n; i++) {
		char names[512];
		size_t len = 0;
		int nm = 0;

		if (u[i].group != i)
			continue;
		names[0] = 0;
		for (int k = 0; k < n; k++)
			if (u[k].group == i && len < sizeof(names)) {
				len += snprintf(names + len, sizeof(names) - len, "%s%s",
						nm++ ? ", " : "", u[k].name);
			}
		if (nm > 1) {
			printf("kupdate: %s: connected by unix sockets: frozen together, their "
			       "connections kept\n",
			       names);
			fflush(stdout);
		}
	}
}

/* A connection to a unit of its group (all frozen now) is a link; their
 * sockets are listed again, frozen: a connection made since link_groups
 * is found.  One to any other unit stays refused. */
static bool dump_linked(uint32_t ino, uint32_t peer, void *arg)
{
	struct aunit *u = arg;
	bool found = false;

	(void)ino;
	for (int m = 0; m < u->nall; m++) {
		struct aunit *o = &u->all[m];

		if (o == u || o->group != u->group || o->ended)
			continue;
		if (!u->rescanned) {
			unit_socks_free(&o->socks);
			if (unit_sockets(o->name, &o->ui, &o->socks))
				continue;
		}
		for (size_t q = 0; q < o->socks.n && !found; q++)
			found = o->socks.v[q].ino == peer;
	}
	u->rescanned = true;
	if (found)
		u->links++;
	return found;
}

/* --pre-dump: the unit's memory copied while it runs (a moment seized to
 * start tracking its writes); the dump then copies only what was written
 * since.  Its directory sits beside the dump's, which links to it. */
int predump_unit(struct aunit *u, const char *cycle_id, const char *cycdir)
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

/* the unit frozen (u->frozen), or found ended (u->ended): 0 or -errno */
static int freeze_unit(struct aunit *u)
{
	int ret;

	if (u->ended || runtime_unit_ended(u, NULL))
		return 0;
	printf("kupdate: %s: freezing\n", u->name);
	fflush(stdout);
	u->frozen_at_rt = rt_ns();
	u->t_freeze = now_ns(CLOCK_MONOTONIC);
	ret = unit_call_locked(sd_freeze, u);
	if (ret && runtime_unit_ended(u, NULL)) /* between the look and the freeze */
		return 0;
	if (ret)
		return ret;
	u->frozen = true;
	return 0;
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
	if (!u->frozen) {
		ret = freeze_unit(u);
		if (ret || u->ended)
			return ret;
	}
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
	o.linked_unix = dump_linked;
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
	if (u->links)
		printf("kupdate: %s: %u unix connections to units dumped with it, kept\n", u->name,
		       u->links);
	/* files deleted under it (an upgrade): what their data cost */
	if (u->st.deleted_files)
		printf("kupdate: %s: saved %u deleted files (%u mapped), %.1f MiB, in %.3f s\n",
		       u->name, u->st.deleted_files, u->st.deleted_mapped,
		       u->st.deleted_bytes / 1048576.0, u->st.deleted_ns / 1e9);
	fflush(stdout);
	return ret;
}

/* a unit whose dump met a state that passes in a moment, before it was
 * seized: thawed, what its dump found forgotten, to be frozen and dumped
 * again; -1 if it cannot be thawed */
static int unit_again(struct aunit *u)
{
	if (unit_thaw(u, true))
		return -1;
	unit_forget_sessions(u);
	free(u->members);
	u->members = NULL;
	u->nr_members = 0;
	free(u->rel);
	u->rel = NULL;
	return 0;
}

/* unit i dumped; alone in its group, a state that passes in a moment
 * (-EAGAIN: a vfork in progress, a connection waiting to be accepted) is
 * tried again: the failed dump removed its images, the unit runs a while,
 * then is frozen again.  Not a unit of a group: the others stay seized */
static int dump_one(struct dumpers *d, int i, bool alone)
{
	struct aunit *u = &d->u[i];
	int ret;

	/* for the engine's fault checks (tests) */
	cr_fault_set_unit(i + 1, u->name);
	cr_log_mark_thread();
	ret = dump_unit(u, d->cycle_id, d->cycdir, d->nr == 1, d->no_rto_revert);
	for (int tries = 1; alone && ret == -EAGAIN && tries < UNIT_AGAIN_TRIES && !d->failed;
	     tries++) {
		const char *why = cr_log_thread_error();

		if (unit_again(u))
			break;
		printf("kupdate: %s: %s; trying again\n", u->name, why ? why : "busy");
		fflush(stdout);
		usleep(UNIT_AGAIN_WAIT_US);
		cr_log_mark_thread();
		ret = dump_unit(u, d->cycle_id, d->cycdir, d->nr == 1, d->no_rto_revert);
	}
	return ret;
}

/* connected units: each frozen before any is seized, so that none writes
 * into a queue already read; then each dumped.  *i: the unit that failed */
static int dump_group(struct dumpers *d, int g, int size, int *i)
{
	int ret = 0;

	for (int k = 0; size > 1 && k < d->n && !ret; k++)
		if (d->u[k].group == g) {
			*i = k;
			ret = freeze_unit(&d->u[k]);
		}
	for (int k = 0; k < d->n && !ret; k++)
		if (d->u[k].group == g) {
			*i = k;
			ret = dump_one(d, k, size == 1);
		}
	return ret;
}

static int first_of(const struct dumpers *d, int g)
{
	for (int k = 0; k < d->n; k++)
		if (d->u[k].group == g)
			return k;
	return -1;
}

/* A group whose first unit met a state that passes in a moment (a vfork in
 * progress), before any of its units was seized: every unit of it thawed,
 * to be frozen and dumped again after a while.  0, or -1 if one cannot be
 * thawed (the error stands) */
static int again_group(struct dumpers *d, int g, int i)
{
	const char *why = cr_log_thread_error();

	for (int k = 0; k < d->n; k++) {
		struct aunit *u = &d->u[k];

		if (u->group == g && unit_again(u))
			return -1;
	}
	printf("kupdate: %s: %s; trying again with the units connected to it\n", d->u[i].name,
	       why ? why : "busy");
	fflush(stdout);
	usleep(UNIT_AGAIN_WAIT_US);
	cr_log_mark_thread();
	return 0;
}

static void *dump_worker(void *arg)
{
	struct dump_worker *w = arg;
	struct dumpers *d = w->d;
	enum verdict v;

	for (;;) {
		int g = -1, i = -1, size = 0, ret = 0;

		/* the next group of units not taken, all of it */
		pthread_mutex_lock(&d->mu);
		for (int k = 0; !d->failed && k < d->n && g < 0; k++)
			if (!d->u[k].taken)
				g = d->u[k].group;
		for (int k = 0; g >= 0 && k < d->n; k++)
			if (d->u[k].group == g) {
				d->u[k].taken = true;
				d->u[k].worker = w->idx;
				size++;
			}
		pthread_mutex_unlock(&d->mu);
		if (g < 0)
			break;
		for (int tries = 1;; tries++) {
			ret = dump_group(d, g, size, &i);
			if (ret != -EAGAIN || i != first_of(d, g) || size == 1 ||
			    tries >= UNIT_AGAIN_TRIES || d->failed || again_group(d, g, i))
				break;
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
int dumpers_run(struct dumpers *d, struct aunit *u, int n, int jobs, const char *cycle_id,
		const char *cycdir, bool no_rto_revert)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(d, 0, sizeof(*d));
	link_groups(u, n);
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
void dumpers_end(struct dumpers *d, bool kill_them)
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

void resume_all(struct dumpers *d, struct aunit *u, int n)
{
	dumpers_end(d, false);
	for (int i = 0; i < n; i++) {
		unit_thaw(&u[i], false);
	}
}
