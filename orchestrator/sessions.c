/* The logind sessions a preserved unit carries.
 *
 * sshd forks a process per connection; pam_systemd (libpam-systemd, on a
 * standard Debian server) asks logind for a session, and logind moves that
 * process into a scope of its own, user.slice/user-UID.slice/session-ID.scope,
 * where the user's shell and commands follow it.  The session's processes
 * are the listener's children, in another cgroup than ssh.service: dumping
 * the unit alone would leave them parentless, killing it would end them.
 *
 * So a unit carries the sessions whose scope holds a process below one of
 * its own: apply freezes the scopes with the unit, dumps their processes
 * with the unit's (one tree: the listener and its sessions), and keeps in
 * the manifest logind's record of each session (/run/systemd/sessions/ID,
 * the user's /run/systemd/users/UID) and its FIFO, whose write end the
 * session's first process holds: logind ends a session when that end is
 * closed.
 *
 * In the new boot the unit's restore makes the FIFO again before the
 * engine opens it and asks systemd for each session's scope
 * (StartTransientUnit, as logind does at a login) with a holder process of
 * its own, since systemd starts no empty scope; the engine then makes the
 * session's processes in the scope's cgroup (clone3 CLONE_INTO_CGROUP)
 * and the rest of the tree in the unit's.  Made afterwards instead, with
 * the restored processes listed, a scope failed when one of them (a
 * `sleep`) ended between the listing and systemd's move, and systemd 252
 * moves nothing into a running scope that is not delegated.  After the
 * restore the holders end, logind's records are written back and logind
 * restarted if it runs: logind reads its state from those files when it
 * starts (it is built to be restarted), finds the scope running and the
 * FIFO held, and lists the session again (loginctl).  Every wait is
 * bounded: sd.c's timeout for each call, 10 s for a holder's move. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "sessions.h"
#include "units.h"

#define LOGIND_SESSIONS "/run/systemd/sessions"
#define LOGIND_USERS	"/run/systemd/users"
#define MAX_DEPTH	256

static const char *logind_dir(const char *dflt, const char *env)
{
	const char *d = getenv(env);

	return d && *d ? d : dflt;
}

static bool is_member(pid_t pid, const pid_t *m, int n)
{
	for (int i = 0; i < n; i++)
		if (m[i] == pid)
			return true;
	return false;
}

/* Is pid below one of members (its parent, its parent's parent...)? */
static bool below(pid_t pid, const pid_t *members, int nr)
{
	for (int depth = 0; pid > 1 && depth < MAX_DEPTH; depth++) {
		pid_t pp;

		if (cr_process_parent(pid, &pp))
			return false;
		if (is_member(pp, members, nr))
			return true;
		pid = pp;
	}
	return false;
}

static int add_session(struct usessions *ss, const char *slice, const char *scope, uint32_t uid)
{
	struct usession *v = xrealloc_array(ss->s, ss->n + 1, sizeof(*v)), *s;
	size_t l = strlen(scope);

	if (!v)
		return -ENOMEM;
	ss->s = v;
	s = &v[ss->n];
	memset(s, 0, sizeof(*s));
	s->uid = uid;
	s->scope = xstrdup(scope);
	s->slice = xstrdup(slice);
	s->id = strndup(scope + 8, l - 8 - 6); /* session-ID.scope */
	s->cgroup = xasprintf("/user.slice/%s/%s", slice, scope);
	ss->n++;
	return s->scope && s->slice && s->id && s->cgroup ? 0 : -ENOMEM;
}

static bool session_scope_name(const char *n)
{
	size_t l = strlen(n);

	return l > 14 && !strncmp(n, "session-", 8) && !strcmp(n + l - 6, ".scope");
}

/* the scopes of one user's slice */
static int find_in_slice(const char *slice, uint32_t uid, const pid_t *members, int nr,
			 struct usessions *ss)
{
	_cleanup_free_ char *dir = xasprintf("%s/user.slice/%s", cgroup_root(), slice);
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : pr_errno("cannot read %s", dir);
	while (!ret && (de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;
		_cleanup_free_ pid_t *procs = NULL;
		int np = 0;
		bool carried = false;

		if (!session_scope_name(de->d_name))
			continue;
		sub = xasprintf("%s/%s", dir, de->d_name);
		if (!sub) {
			ret = -ENOMEM;
			break;
		}
		if (cgroup_procs(sub, &procs, &np))
			continue; /* gone meanwhile */
		/* a member itself in it: a daemon that opened the session
		 * for its own process (tigervncsession) */
		for (int i = 0; i < np && !carried; i++)
			carried = below(procs[i], members, nr) || is_member(procs[i], members, nr);
		if (carried)
			ret = add_session(ss, slice, de->d_name, uid);
	}
	closedir(d);
	return ret;
}

int sessions_find(const pid_t *members, int nr, struct usessions *ss)
{
	_cleanup_free_ char *dir = xasprintf("%s/user.slice", cgroup_root());
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : pr_errno("cannot read %s", dir);
	while (!ret && (de = readdir(d))) {
		unsigned uid;
		char tail[16];

		if (sscanf(de->d_name, "user-%u%15s", &uid, tail) != 2 || strcmp(tail, ".slice"))
			continue;
		ret = find_in_slice(de->d_name, uid, members, nr, ss);
	}
	closedir(d);
	return ret;
}

int sessions_members(const struct usessions *ss, pid_t **members, int *nr)
{
	for (int i = 0; i < ss->n; i++) {
		_cleanup_free_ char *dir = xasprintf("%s%s", cgroup_root(), ss->s[i].cgroup);
		_cleanup_free_ pid_t *procs = NULL;
		int np = 0, ret;

		if (!dir)
			return -ENOMEM;
		ret = cgroup_procs(dir, &procs, &np);
		if (ret) {
			pr_err("session %s: cannot list the processes of %s: %s", ss->s[i].id, dir,
			       strerror(-ret));
			return ret;
		}
		for (int k = 0; k < np; k++) {
			pid_t *v;

			if (is_member(procs[k], *members, *nr))
				continue;
			v = xrealloc_array(*members, *nr + 1, sizeof(*v));
			if (!v)
				return -ENOMEM;
			*members = v;
			v[(*nr)++] = procs[k];
		}
	}
	return 0;
}

int sessions_call(struct sd *s, struct usessions *ss, bool freeze)
{
	int ret = 0;

	for (int i = 0; i < ss->n; i++) {
		if (ss->s[i].frozen == freeze)
			continue;
		if (freeze ? sd_freeze(s, ss->s[i].scope) : sd_thaw(s, ss->s[i].scope)) {
			ret = -EIO;
			continue;
		}
		ss->s[i].frozen = freeze;
	}
	return ret;
}

bool sessions_hold_self(const struct usessions *ss)
{
	_cleanup_free_ char *own = own_cgroup();

	for (int i = 0; own && i < ss->n; i++)
		if (!strcmp(own, ss->s[i].cgroup))
			return true;
	return false;
}

void sessions_free(struct usessions *ss)
{
	for (int i = 0; i < ss->n; i++) {
		free(ss->s[i].id);
		free(ss->s[i].scope);
		free(ss->s[i].slice);
		free(ss->s[i].cgroup);
	}
	free(ss->s);
	ss->s = NULL;
	ss->n = 0;
}

/* the value of KEY= in logind's record (malloc'd), or NULL */
static char *state_value(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == '=')
			return strndup(l + kl + 1, strcspn(l + kl + 1, "\n"));
	return NULL;
}

static int record_one(const struct usession *u, const pid_t *members, int nr, CycleSession *cs)
{
	_cleanup_free_ char *path =
		xasprintf("%s/%s", logind_dir(LOGIND_SESSIONS, "KUPDATE_LOGIND_SESSIONS"), u->id);
	_cleanup_free_ char *upath =
		xasprintf("%s/%u", logind_dir(LOGIND_USERS, "KUPDATE_LOGIND_USERS"), u->uid);
	_cleanup_free_ char *dir = xasprintf("%s%s", cgroup_root(), u->cgroup);
	_cleanup_free_ char *user = NULL;
	_cleanup_free_ pid_t *procs = NULL;
	char *text = NULL, *utext = NULL;
	size_t len = 0, ulen = 0;
	int np = 0, ret;
	struct stat st;

	if (!path || !upath || !dir)
		return -ENOMEM;
	ret = read_file_at(AT_FDCWD, path, &text, &len);
	if (ret) {
		pr_err("session %s (%s) has no record of logind's in %s: %s; is it a logind "
		       "session?",
		       u->id, u->scope, path, strerror(-ret));
		return ret;
	}
	cs->state.data = (uint8_t *)text;
	cs->state.len = len;
	if (!read_file_at(AT_FDCWD, upath, &utext, &ulen)) {
		cs->has_user_state = 1;
		cs->user_state.data = (uint8_t *)utext;
		cs->user_state.len = ulen;
	}
	cs->id = xstrdup(u->id);
	cs->scope = xstrdup(u->scope);
	cs->slice = xstrdup(u->slice);
	cs->uid = u->uid;
	user = state_value(text, "USER");
	cs->description = xasprintf("Session %s of User %s", u->id, user ? user : "?");
	cs->fifo = state_value(text, "FIFO");
	if (cs->fifo) {
		if (stat(cs->fifo, &st) || !S_ISFIFO(st.st_mode))
			return pr_errno("session %s: its FIFO %s is not there", u->id, cs->fifo);
		cs->has_fifo_mode = 1;
		cs->fifo_mode = st.st_mode & 07777;
	}
	if (!cs->id || !cs->scope || !cs->slice || !cs->description)
		return -ENOMEM;
	ret = cgroup_procs(dir, &procs, &np);
	if (ret)
		return ret;
	cs->pids = calloc(np ? np : 1, sizeof(*cs->pids));
	if (!cs->pids)
		return -ENOMEM;
	for (int i = 0; i < np; i++)
		if (is_member(procs[i], members, nr))
			cs->pids[cs->n_pids++] = procs[i];
	return 0;
}

int sessions_record(const struct usessions *ss, const pid_t *members, int nr, CycleSession ***out,
		    size_t *nout)
{
	CycleSession **v = calloc(ss->n ? ss->n : 1, sizeof(*v));
	int ret = 0;

	*out = NULL;
	*nout = 0;
	if (!v)
		return -ENOMEM;
	for (int i = 0; i < ss->n && !ret; i++) {
		v[i] = calloc(1, sizeof(**v));
		if (!v[i]) {
			ret = -ENOMEM;
			break;
		}
		cycle_session__init(v[i]);
		ret = record_one(&ss->s[i], members, nr, v[i]);
	}
	if (ret) {
		for (int i = 0; i < ss->n; i++)
			if (v[i])
				cycle_session__free_unpacked(v[i], NULL);
		free(v);
		return ret;
	}
	*out = v;
	*nout = ss->n;
	return 0;
}

/* ------------------------------------------------------------ restore */

static bool safe_name(const char *s)
{
	return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* A child that holds a session's scope until the restore has made the
 * session's processes in it (systemd starts a scope only with a process
 * to put in it).  Its pid must not be one the restore needs: one that is
 * is given up for the next. */
static pid_t holder_start(const pid_t *ids, size_t nids)
{
	pid_t p = fork_free_pid(ids, nids);

	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return p;
}

static void holder_end(pid_t *p)
{
	int st;

	if (*p > 0) {
		kill(*p, SIGKILL);
		waitpid(*p, &st, 0);
	}
	*p = 0;
}

/* Does pid's cgroup v2 path end with "/name"? */
static char *cgroup_named(pid_t pid, const char *name)
{
	char *cg = cgroup_of_pid(pid);
	size_t l = cg ? strlen(cg) : 0, n = strlen(name);

	if (cg && l > n && cg[l - n - 1] == '/' && !strcmp(cg + l - n, name))
		return cg;
	free(cg);
	return NULL;
}

#define SCOPE_WAIT_MS 10000

/* Session i's scope, started with a holder; its cgroup open in h->fds[i]
 * and a place there for each of its saved processes */
static int hold_scope(struct session_holds *h, const CycleSession *cs, size_t i, const pid_t *ids,
		      size_t nids)
{
	_cleanup_free_ char *cg = NULL, *dir = NULL;
	struct cr_cgroup_place *pl;
	pid_t p = holder_start(ids, nids);
	int ret;

	if (p < 0)
		return pr_err("session %s: cannot fork a process to start %s: %s", cs->id,
			      cs->scope, strerror(-p)),
		       (int)p;
	h->holder[i] = p;
	ret = sd_start_scope(&h->sd, cs->scope, cs->slice, cs->description ?: cs->scope, &p, 1);
	if (ret) {
		sd_reset_failed(&h->sd, cs->scope);
		return ret;
	}
	/* the job runs after systemd's answer: bounded wait for the move */
	for (int ms = 0; !(cg = cgroup_named(p, cs->scope)) && ms < SCOPE_WAIT_MS; ms += 10)
		usleep(10000);
	if (!cg) {
		pr_err("session %s: its holder %d is not in %s after %d s", cs->id, p, cs->scope,
		       SCOPE_WAIT_MS / 1000);
		return -ETIMEDOUT;
	}
	dir = xasprintf("%s%s", cgroup_root(), cg);
	if (!dir)
		return -ENOMEM;
	h->fds[i] = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (h->fds[i] < 0)
		return pr_errno("session %s: cannot open its control group %s", cs->id, dir);
	pl = xrealloc_array(h->places, h->nplaces + cs->n_pids, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	h->places = pl;
	for (size_t k = 0; k < cs->n_pids; k++)
		pl[h->nplaces++] = (struct cr_cgroup_place){ .pid = cs->pids[k], .fd = h->fds[i] };
	return 0;
}

static int make_fifo(const CycleSession *cs, const char *dir)
{
	if (!cs->fifo)
		return 0;
	if (mkdir_p(dir, 0755))
		return pr_errno("cannot make %s", dir);
	if ((mkfifo(cs->fifo, 0600) && errno != EEXIST) ||
	    chmod(cs->fifo, cs->has_fifo_mode ? cs->fifo_mode : 0600))
		return pr_errno("session %s: cannot make its FIFO %s again", cs->id, cs->fifo);
	return 0;
}

int sessions_prepare(const CycleUnit *cu)
{
	const char *dir = logind_dir(LOGIND_SESSIONS, "KUPDATE_LOGIND_SESSIONS");

	for (size_t i = 0; i < cu->n_sessions; i++) {
		int ret = make_fifo(cu->sessions[i], dir);

		if (ret)
			return ret;
	}
	return 0;
}

int sessions_hold(const CycleUnit *cu, const pid_t *ids, size_t nids, struct session_holds *h)
{
	size_t n = cu->n_sessions;

	memset(h, 0, sizeof(*h));
	if (!n)
		return 0;
	h->holder = calloc(n, sizeof(*h->holder));
	h->fds = malloc(n * sizeof(*h->fds));
	if (!h->holder || !h->fds) {
		free(h->holder);
		free(h->fds);
		memset(h, 0, sizeof(*h));
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		h->fds[i] = -1;
	h->n = n;
	h->sd_ret = sd_open(&h->sd);
	for (size_t i = 0; !h->sd_ret && i < n; i++) {
		const CycleSession *cs = cu->sessions[i];

		if (!safe_name(cs->id) || !safe_name(cs->scope) || !safe_name(cs->slice))
			continue;
		/* not fatal: the session is made in the unit's group, and its
		 * scope asked for after the restore (sessions_adopt) */
		if (hold_scope(h, cs, i, ids, nids)) {
			pr_warn("session %s: its scope %s could not be made before the restore; "
				"its processes are made in the unit's control group",
				cs->id, cs->scope);
			holder_end(&h->holder[i]);
		}
	}
	return 0;
}

void sessions_release(struct session_holds *h)
{
	for (size_t i = 0; i < h->n; i++) {
		holder_end(&h->holder[i]);
		if (h->fds[i] >= 0)
			close(h->fds[i]);
	}
	if (h->n && !h->sd_ret)
		sd_close(&h->sd);
	free(h->holder);
	free(h->fds);
	free(h->places);
	memset(h, 0, sizeof(*h));
}

/* The processes of the session now: those of its saved pids still there
 * and their children, in this process's cgroup (the unit's, where the
 * restore made them and where their children forked since are) */
static int session_now(const CycleSession *cs, pid_t **out, int *nout)
{
	_cleanup_free_ char *own = own_cgroup(), *dir = NULL;
	_cleanup_free_ pid_t *procs = NULL;
	int np = 0, ret;

	*out = NULL;
	*nout = 0;
	dir = own ? xasprintf("%s%s", cgroup_root(), own) : NULL;
	if (!dir)
		return -ENOMEM;
	ret = cgroup_procs(dir, &procs, &np);
	if (ret)
		return ret;
	for (int i = 0; i < np; i++) {
		pid_t *v;

		if (!is_member(procs[i], (const pid_t *)cs->pids, cs->n_pids) &&
		    !below(procs[i], (const pid_t *)cs->pids, cs->n_pids))
			continue;
		v = xrealloc_array(*out, *nout + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		*out = v;
		v[(*nout)++] = procs[i];
	}
	return 0;
}

/* The session's scope with its processes of now (systemd 252 moves
 * processes only into a new scope, not into a running one that is not
 * delegated: AttachProcessesToUnit refuses).  A process gone between the
 * listing and systemd's move fails the call: the scope left behind is reset
 * and the processes listed again, 4 times in all. */
static int session_scope(struct sd *s, const CycleSession *cs)
{
	int ret = -ESRCH;

	for (int t = 0; t < 4 && ret; t++) {
		_cleanup_free_ pid_t *now = NULL;
		int n = 0;

		ret = session_now(cs, &now, &n);
		if (ret)
			return ret;
		if (!n) {
			pr_err("session %s: none of its processes is left to put in %s", cs->id,
			       cs->scope);
			return -ESRCH;
		}
		ret = sd_start_scope(s, cs->scope, cs->slice, cs->description ?: cs->scope, now, n);
		if (ret)
			sd_reset_failed(s, cs->scope);
	}
	return ret;
}

int sessions_adopt(const CycleUnit *cu, struct session_holds *h, char *what, size_t len)
{
	const char *sdir = logind_dir(LOGIND_SESSIONS, "KUPDATE_LOGIND_SESSIONS");
	const char *udir = logind_dir(LOGIND_USERS, "KUPDATE_LOGIND_USERS");
	int bad = 0;

	what[0] = 0;
	if (!cu->n_sessions)
		return 0;
	if (h->sd_ret) {
		snprintf(what, len,
			 "its %zu login sessions were restored, but systemd cannot be "
			 "reached to give them their scopes",
			 cu->n_sessions);
		return h->sd_ret;
	}
	for (size_t i = 0; i < cu->n_sessions; i++) {
		const CycleSession *cs = cu->sessions[i];
		_cleanup_free_ char *path = NULL, *upath = NULL;
		struct stat st;

		if (!safe_name(cs->id) || !safe_name(cs->scope) || !safe_name(cs->slice)) {
			bad++;
			continue;
		}
		/* the scope runs with the session's processes in it, made
		 * there; without a holder, it is asked for now.  The scope
		 * first: logind drops a session whose scope is not running
		 * when it reads its record */
		if (h->holder[i])
			holder_end(&h->holder[i]);
		else if (session_scope(&h->sd, cs)) {
			bad++;
			continue;
		}
		path = xasprintf("%s/%s", sdir, cs->id);
		upath = xasprintf("%s/%u", udir, cs->uid);
		if (!path || !upath || write_file_atomic(path, cs->state.data, cs->state.len)) {
			bad++;
			continue;
		}
		/* a user logged in again in this boot has a record of logind's own */
		if (cs->has_user_state && stat(upath, &st) && errno == ENOENT &&
		    write_file_atomic(upath, cs->user_state.data, cs->user_state.len))
			bad++;
	}
	/* logind reads the records when it starts: now, if it runs already */
	if (sd_try_restart(&h->sd, "systemd-logind.service"))
		bad++;
	if (bad) {
		snprintf(what, len,
			 "%d of its %zu login sessions could not be handed back to logind "
			 "(their processes run on in the unit's control group)",
			 bad, cu->n_sessions);
		return -EIO;
	}
	return 0;
}
