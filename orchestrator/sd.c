/* systemd over D-Bus (sd-bus): units, their cgroup and main pid, freezing,
 * killing, masking, reloading, kexec. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "sd.h"

/* libsystemd (sd-bus) and the libraries it brings (libgcrypt,
 * libgpg-error, liblz4, libcap) are loaded by the commands that talk to
 * systemd, when they first do: not at every start of kupdate.  A restore
 * at boot, the generator, the network lock and the store's mount use
 * none of it (journald's two sockets are spoken to directly, below). */
#define LIBSYSTEMD "libsystemd.so.0"
#define SD_FUNCS(X)                       \
	X(sd_bus_call)                    \
	X(sd_bus_error_free)              \
	X(sd_bus_flush_close_unref)       \
	X(sd_bus_get_property)            \
	X(sd_bus_get_property_string)     \
	X(sd_bus_get_property_strv)       \
	X(sd_bus_get_property_trivial)    \
	X(sd_bus_message_append)          \
	X(sd_bus_message_append_strv)     \
	X(sd_bus_message_close_container) \
	X(sd_bus_message_open_container)  \
	X(sd_bus_message_appendv)         \
	X(sd_bus_message_new_method_call) \
	X(sd_bus_message_read)            \
	X(sd_bus_message_unref)           \
	X(sd_bus_new)                     \
	X(sd_bus_open_system)             \
	X(sd_bus_set_address)             \
	X(sd_bus_start)                   \
	X(sd_bus_unref)
static struct {
#define X(f) __typeof__(&f) f;
	SD_FUNCS(X)
#undef X
} sdl;
static char sdl_error[256];
static pthread_once_t sdl_once = PTHREAD_ONCE_INIT;

static void sdl_load(void)
{
#define X(f) #f,
	static const char *const names[] = { SD_FUNCS(X) };
#undef X
#define X(f) (void **)&sdl.f,
	static void **const ptrs[] = { SD_FUNCS(X) };
#undef X

	dl_load("KUPDATE_LIBSYSTEMD", LIBSYSTEMD, names, ptrs, ARRAY_SIZE(names), sdl_error,
		sizeof(sdl_error));
}

/* 0 once libsystemd is there, or -ENOENT, said */
static int sdl_ready(void)
{
	pthread_once(&sdl_once, sdl_load);
	if (sdl.sd_bus_new)
		return 0;
	pr_err("cannot load " LIBSYSTEMD " (%s): kupdate talks to systemd through it; install "
	       "the libsystemd0 package",
	       sdl_error);
	return -ENOENT;
}

/* from here on, sd-bus's functions are the loaded ones */
#define sd_bus_call		       (*sdl.sd_bus_call)
#define sd_bus_error_free	       (*sdl.sd_bus_error_free)
#define sd_bus_flush_close_unref       (*sdl.sd_bus_flush_close_unref)
#define sd_bus_get_property	       (*sdl.sd_bus_get_property)
#define sd_bus_get_property_string     (*sdl.sd_bus_get_property_string)
#define sd_bus_get_property_strv       (*sdl.sd_bus_get_property_strv)
#define sd_bus_get_property_trivial    (*sdl.sd_bus_get_property_trivial)
#define sd_bus_message_append	       (*sdl.sd_bus_message_append)
#define sd_bus_message_append_strv     (*sdl.sd_bus_message_append_strv)
#define sd_bus_message_appendv	       (*sdl.sd_bus_message_appendv)
#define sd_bus_message_close_container (*sdl.sd_bus_message_close_container)
#define sd_bus_message_open_container  (*sdl.sd_bus_message_open_container)
#define sd_bus_message_new_method_call (*sdl.sd_bus_message_new_method_call)
#define sd_bus_message_read	       (*sdl.sd_bus_message_read)
#define sd_bus_message_unref	       (*sdl.sd_bus_message_unref)
#define sd_bus_new		       (*sdl.sd_bus_new)
#define sd_bus_open_system	       (*sdl.sd_bus_open_system)
#define sd_bus_set_address	       (*sdl.sd_bus_set_address)
#define sd_bus_start		       (*sdl.sd_bus_start)
#define sd_bus_unref		       (*sdl.sd_bus_unref)

#define DEST   "org.freedesktop.systemd1"
#define MPATH  "/org/freedesktop/systemd1"
#define MIFACE "org.freedesktop.systemd1.Manager"

int sd_open(struct sd *s)
{
	int r;

	memset(s, 0, sizeof(*s));
	r = sdl_ready();
	if (r)
		return r;
	/* as root, straight to systemd: no bus daemon needed (early boot,
	 * shutdown); otherwise through the system bus */
	if (geteuid() == 0 && access("/run/systemd/private", F_OK) == 0) {
		r = sd_bus_new(&s->bus);
		if (r >= 0)
			r = sd_bus_set_address(s->bus, "unix:path=/run/systemd/private");
		if (r >= 0)
			r = sd_bus_start(s->bus);
		if (r >= 0)
			return 0;
		sd_bus_unref(s->bus);
		s->bus = NULL;
	}
	r = sd_bus_open_system(&s->bus);
	if (r < 0) {
		pr_err("cannot reach systemd on the system bus: %s (is this a systemd system?)",
		       strerror(-r));
		return r;
	}
	return 0;
}

void sd_close(struct sd *s)
{
	if (s->bus)
		sd_bus_flush_close_unref(s->bus);
	s->bus = NULL;
}

static int call(struct sd *s, const char *path, const char *iface, const char *method,
		sd_bus_message **reply, const char *what, const char *sig, ...)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL;
	va_list ap;
	int r;

	r = sd_bus_message_new_method_call(s->bus, &m, DEST, path, iface, method);
	if (r >= 0 && sig) {
		va_start(ap, sig);
		r = sd_bus_message_appendv(m, sig, ap);
		va_end(ap);
	}
	if (r >= 0)
		r = sd_bus_call(s->bus, m, 120 * 1000000ULL, &err, reply);
	if (r < 0)
		pr_err("%s: %s", what, err.message ? err.message : strerror(-r));
	sd_bus_error_free(&err);
	sd_bus_message_unref(m);
	return r < 0 ? r : 0;
}

/* the unit's object path (loading it if needed) */
static int unit_path(struct sd *s, const char *unit, char **path)
{
	sd_bus_message *reply = NULL;
	const char *p;
	char what[256];
	int r;

	snprintf(what, sizeof(what), "unit %s", unit);
	r = call(s, MPATH, MIFACE, "LoadUnit", &reply, what, "s", unit);
	if (r < 0)
		return r;
	r = sd_bus_message_read(reply, "o", &p);
	if (r >= 0)
		*path = xstrdup(p);
	sd_bus_message_unref(reply);
	return r < 0 ? r : (*path ? 0 : -ENOMEM);
}

static int get_string(struct sd *s, const char *path, const char *iface, const char *prop,
		      char **out)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r = sd_bus_get_property_string(s->bus, DEST, path, iface, prop, &err, out);

	sd_bus_error_free(&err);
	return r;
}

/* the id of the unit's pending job (a start waiting for its dependencies,
 * say), 0 if none */
static uint32_t unit_job(struct sd *s, const char *unit)
{
	_cleanup_free_ char *path = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	uint32_t id = 0;
	const char *jp;

	if (unit_path(s, unit, &path) < 0 ||
	    sd_bus_get_property(s->bus, DEST, path, "org.freedesktop.systemd1.Unit", "Job", &err,
				&reply, "(uo)") < 0 ||
	    sd_bus_message_read(reply, "(uo)", &id, &jp) < 0)
		id = 0;
	sd_bus_message_unref(reply);
	sd_bus_error_free(&err);
	return id;
}

int sd_unit_info(struct sd *s, const char *unit, struct unit_info *ui)
{
	_cleanup_free_ char *path = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	uint32_t pid = 0;
	int r;

	memset(ui, 0, sizeof(*ui));
	r = unit_path(s, unit, &path);
	if (r < 0)
		return r;
	r = get_string(s, path, "org.freedesktop.systemd1.Unit", "ActiveState", &ui->active);
	if (r >= 0)
		r = get_string(s, path, "org.freedesktop.systemd1.Unit", "LoadState", &ui->load);
	if (r >= 0)
		r = get_string(s, path, "org.freedesktop.systemd1.Unit", "SubState", &ui->sub);
	if (r >= 0)
		get_string(s, path, "org.freedesktop.systemd1.Unit", "FreezerState", &ui->freezer);
	if (r >= 0)
		get_string(s, path, "org.freedesktop.systemd1.Unit", "FragmentPath", &ui->fragment);
	if (r >= 0 && get_string(s, path, "org.freedesktop.systemd1.Service", "ControlGroup",
				 &ui->cgroup) < 0)
		ui->cgroup = NULL; /* not a service */
	if (r >= 0 &&
	    sd_bus_get_property_trivial(s->bus, DEST, path, "org.freedesktop.systemd1.Service",
					"MainPID", &err, 'u', &pid) >= 0)
		ui->main_pid = pid;
	sd_bus_error_free(&err);
	if (r >= 0 && ui->cgroup) {
		int dyn = 0;

		if (sd_bus_get_property_trivial(s->bus, DEST, path,
						"org.freedesktop.systemd1.Service", "DynamicUser",
						&err, 'b', &dyn) >= 0)
			ui->dynamic_user = dyn;
		sd_bus_error_free(&err);
		sd_bus_get_property_trivial(s->bus, DEST, path, "org.freedesktop.systemd1.Service",
					    "UID", &err, 'u', &ui->uid);
		sd_bus_error_free(&err);
		sd_bus_get_property_trivial(s->bus, DEST, path, "org.freedesktop.systemd1.Service",
					    "GID", &err, 'u', &ui->gid);
		sd_bus_error_free(&err);
	}
	if (r < 0) {
		pr_err("unit %s: cannot read its state: %s", unit, strerror(-r));
		unit_info_free(ui);
	}
	return r < 0 ? r : 0;
}

int sd_unit_parts(struct sd *s, const char *unit, char ***out)
{
	_cleanup_free_ char *path = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r;

	*out = NULL;
	r = unit_path(s, unit, &path);
	if (r >= 0)
		r = sd_bus_get_property_strv(s->bus, DEST, path, "org.freedesktop.systemd1.Unit",
					     "ConsistsOf", &err, out);
	if (r < 0)
		pr_err("unit %s: cannot read the units that are part of it: %s", unit,
		       err.message ? err.message : strerror(-r));
	sd_bus_error_free(&err);
	return r < 0 ? r : 0;
}

void unit_info_free(struct unit_info *ui)
{
	free(ui->active);
	free(ui->load);
	free(ui->freezer);
	free(ui->cgroup);
	free(ui->fragment);
	free(ui->sub);
	memset(ui, 0, sizeof(*ui));
}

static int unit_call(struct sd *s, const char *unit, const char *method, const char *what)
{
	_cleanup_free_ char *path = NULL;
	char w[256];
	int r = unit_path(s, unit, &path);

	if (r < 0)
		return r;
	snprintf(w, sizeof(w), "unit %s: %s", unit, what);
	return call(s, path, "org.freedesktop.systemd1.Unit", method, NULL, w, NULL);
}

int sd_freeze(struct sd *s, const char *unit)
{
	return unit_call(s, unit, "Freeze", "cannot freeze it");
}

int sd_thaw(struct sd *s, const char *unit)
{
	return unit_call(s, unit, "Thaw", "cannot thaw it");
}

int sd_kill(struct sd *s, const char *unit, int sig)
{
	char w[256];

	snprintf(w, sizeof(w), "unit %s: cannot kill it", unit);
	return call(s, MPATH, MIFACE, "KillUnit", NULL, w, "ssi", unit, "all", sig);
}

/* Send the message m that a caller built (r: how its building went),
 * waiting at most usec (0: sd-bus's default); a failure is said after
 * what.  m is released.  0 or -errno. */
static int send_built(struct sd *s, sd_bus_message *m, int r, uint64_t usec, const char *what)
{
	sd_bus_message *reply = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;

	if (r >= 0)
		r = sd_bus_call(s->bus, m, usec, &err, &reply);
	if (r < 0)
		pr_err("%s: %s", what, err.message ? err.message : strerror(-r));
	sd_bus_error_free(&err);
	sd_bus_message_unref(m);
	sd_bus_message_unref(reply);
	return r < 0 ? r : 0;
}

/* StartTransientUnit's call up to its properties' array, opened: the
 * caller appends the properties, transient_send closes and sends it */
static int transient_begin(struct sd *s, const char *unit, sd_bus_message **m)
{
	int r = sd_bus_message_new_method_call(s->bus, m, DEST, MPATH, MIFACE,
					       "StartTransientUnit");

	if (r >= 0)
		r = sd_bus_message_append(*m, "ss", unit, "fail");
	if (r >= 0)
		r = sd_bus_message_open_container(*m, 'a', "(sv)");
	return r;
}

static int transient_send(struct sd *s, sd_bus_message *m, int r, const char *what)
{
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_append(m, "a(sa(sv))", 0);
	return send_built(s, m, r, 120 * 1000000ULL, what);
}

int sd_mask_runtime(struct sd *s, const char *unit, bool mask)
{
	sd_bus_message *m = NULL;
	char w[256];
	int r;

	snprintf(w, sizeof(w), "unit %s: cannot %s it", unit, mask ? "mask" : "unmask");
	r = sd_bus_message_new_method_call(s->bus, &m, DEST, MPATH, MIFACE,
					   mask ? "MaskUnitFiles" : "UnmaskUnitFiles");
	if (r >= 0)
		r = sd_bus_message_append_strv(m, (char *[]){ (char *)unit, NULL });
	if (r >= 0)
		r = mask ? sd_bus_message_append(m, "bb", 1, 1) : sd_bus_message_append(m, "b", 1);
	return send_built(s, m, r, 0, w);
}

int64_t sd_userspace_start_ns(struct sd *s)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	uint64_t us = 0;

	if (sd_bus_get_property_trivial(s->bus, "org.freedesktop.systemd1", MPATH, MIFACE,
					"UserspaceTimestampMonotonic", &err, 't', &us) < 0)
		us = 0;
	sd_bus_error_free(&err);
	return us ? (int64_t)us * 1000 : -1;
}

int sd_reload(struct sd *s)
{
	return call(s, MPATH, MIFACE, "Reload", NULL, "cannot reload systemd", NULL);
}

int sd_start(struct sd *s, const char *unit, const char *mode)
{
	char w[256];

	snprintf(w, sizeof(w), "unit %s: cannot start it", unit);
	return call(s, MPATH, MIFACE, "StartUnit", NULL, w, "ss", unit, mode);
}

int sd_try_restart(struct sd *s, const char *unit)
{
	char w[256];

	snprintf(w, sizeof(w), "unit %s: cannot restart it", unit);
	return call(s, MPATH, MIFACE, "TryRestartUnit", NULL, w, "ss", unit, "replace");
}

int sd_start_scope(struct sd *s, const char *scope, const char *slice, const char *description,
		   const pid_t *pids, size_t nr)
{
	sd_bus_message *m = NULL;
	char w[320];
	int r = transient_begin(s, scope, &m);

	snprintf(w, sizeof(w), "cannot start the scope %s with its %zu processes", scope, nr);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)(sv)(sv)", "Slice", "s", slice, "Description",
					  "s", description, "SendSIGHUP", "b", 1);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sv");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", "PIDs");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'v', "au");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "u");
	for (size_t i = 0; r >= 0 && i < nr; i++)
		r = sd_bus_message_append(m, "u", (uint32_t)pids[i]);
	for (int k = 0; r >= 0 && k < 3; k++) /* a, v, r */
		r = sd_bus_message_close_container(m);
	return transient_send(s, m, r, w);
}

int sd_start_service(struct sd *s, const char *unit, const char *description, char *const *argv,
		     char *const *envp)
{
	sd_bus_message *m = NULL;
	char w[320];
	int r = transient_begin(s, unit, &m);

	snprintf(w, sizeof(w), "cannot start %s", unit);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)(sv)", "Description", "s", description,
					  "CollectMode", "s", "inactive-or-failed");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sv");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", "Environment");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'v', "as");
	if (r >= 0)
		r = sd_bus_message_append_strv(m, (char **)envp);
	for (int k = 0; r >= 0 && k < 2; k++) /* v, r */
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sv");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", "ExecStart");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'v', "a(sasb)");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sasb)");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sasb");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", argv[0]);
	if (r >= 0)
		r = sd_bus_message_append_strv(m, (char **)argv);
	if (r >= 0)
		r = sd_bus_message_append(m, "b", 0);
	for (int k = 0; r >= 0 && k < 4; k++) /* r, a, v, r */
		r = sd_bus_message_close_container(m);
	return transient_send(s, m, r, w);
}

int sd_reset_failed(struct sd *s, const char *unit)
{
	char w[256];

	snprintf(w, sizeof(w), "unit %s: cannot reset its failed state", unit);
	return call(s, MPATH, MIFACE, "ResetFailedUnit", NULL, w, "s", unit);
}

void restart_if_stopped(struct sd *s, const char *unit, const char *when)
{
	struct unit_info ui;
	bool stopped;

	if (sd_unit_info(s, unit, &ui))
		return;
	stopped = ui.active && strcmp(ui.active, "active") && strcmp(ui.active, "activating") &&
		  strcmp(ui.active, "reloading");
	unit_info_free(&ui);
	if (!stopped)
		return;
	sd_reset_failed(s, unit);
	if (sd_start(s, unit, "replace"))
		pr_err("unit %s stopped %s and does not start again: see systemctl status %s", unit,
		       when, unit);
	else
		fprintf(stderr, "kupdate: unit %s stopped %s: started again\n", unit, when);
}

static int unix_connect(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* journald's stdout stream for a restored process: it attributes the
 * stream to the unit of the process that opens it (we run in the unit).
 * The stream starts with journald's header: the identifier, the unit
 * (empty: the peer's), the priority, whether lines carry <N> prefixes,
 * and the forwards to syslog, kmsg and the console (journald's). */
int journal_stream(const char *peer, const char *comm, void *arg)
{
	char hdr[128];
	int fd, n, ret;

	(void)arg;
	if (strcmp(peer, JOURNAL_STDOUT))
		return -EOPNOTSUPP;
	fd = unix_connect(JOURNAL_STDOUT, SOCK_STREAM);
	if (fd < 0)
		return fd;
	shutdown(fd, SHUT_RD);
	/* room for a burst of output, as journald's own clients ask */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){ 8 << 20 }, sizeof(int));
	n = snprintf(hdr, sizeof(hdr), "%s\n\n%d\n1\n0\n0\n0\n", comm, LOG_INFO);
	ret = write_all(fd, hdr, (size_t)n);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

bool journal_replaceable(const char *peer, void *arg)
{
	(void)arg;
	return !strcmp(peer, JOURNAL_STDOUT);
}

/* one record through journald's native socket: FIELD=value lines (the
 * values here hold no newline) */
void journal_note(const char *cycle, const char *unit, int prio, const char *fmt, ...)
{
	char msg[1024], rec[1400];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *c = msg; *c; c++)
		if (*c == '\n')
			*c = ' ';
	n = snprintf(rec, sizeof(rec),
		     "MESSAGE=kupdate: %s\nPRIORITY=%d\nSYSLOG_IDENTIFIER=kupdate\n"
		     "KUPDATE_CYCLE=%s\nKUPDATE_UNIT=%s\n",
		     msg, prio, cycle ? cycle : "", unit ? unit : "");
	if (n < 0 || (size_t)n >= sizeof(rec))
		n = (int)sizeof(rec) - 1;
	fd = unix_connect("/run/systemd/journal/socket", SOCK_DGRAM);
	if (fd < 0)
		return;
	if (send(fd, rec, (size_t)n, MSG_NOSIGNAL) < 0)
		pr_debug("journal: %s", strerror(errno));
	close(fd);
}

int sd_wait_settled(struct sd *s, const char *unit, int timeout_s)
{
	int64_t start = now_ns(CLOCK_MONOTONIC);

	for (;;) {
		struct unit_info ui;
		int64_t waited;
		/* a start job waiting for the unit's dependencies (basic.target
		 * in a boot, seconds in a small virtual machine) leaves it
		 * inactive, or failed from an earlier start.  The job is read
		 * before the state: read after, a job that ended between the
		 * two reads left the state of before it (failed, from the
		 * restore) with no job to wait for (a CI run's B->A) */
		bool job = unit_job(s, unit);
		int r = sd_unit_info(s, unit, &ui);

		if (r)
			return r;
		r = job				     ? -EINPROGRESS
		    : !strcmp(ui.active, "active")   ? 0
		    : !strcmp(ui.active, "failed")   ? -EIO
		    : !strcmp(ui.active, "inactive") ? -ENOENT
						     : -EINPROGRESS;
		unit_info_free(&ui);
		waited = now_ns(CLOCK_MONOTONIC) - start;
		/* a start job may not have begun yet: give it 2 s to */
		if (r == 0 || (r != -EINPROGRESS && waited > 2000000000LL))
			return r;
		if (waited > (int64_t)timeout_s * 1000000000LL)
			return -ETIMEDOUT;
		usleep(100 * 1000);
	}
}

int sd_systemd_version(char **ver)
{
	sd_bus *bus = NULL;
	int r = sdl_ready();

	*ver = NULL;
	if (r)
		return r;
	r = sd_bus_open_system(&bus);
	if (r < 0)
		return r;
	r = sd_bus_get_property_string(bus, DEST, MPATH, MIFACE, "Version", NULL, ver);
	sd_bus_flush_close_unref(bus);
	return r < 0 ? r : 0;
}
