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
#include <systemd/sd-bus.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "log.h"
#include "sd.h"
#include "util.h"

#define DEST   "org.freedesktop.systemd1"
#define MPATH  "/org/freedesktop/systemd1"
#define MIFACE "org.freedesktop.systemd1.Manager"

int sd_open(struct sd *s)
{
	int r;

	memset(s, 0, sizeof(*s));
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
	if (r < 0) {
		pr_err("unit %s: cannot read its state: %s", unit, strerror(-r));
		unit_info_free(ui);
	}
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

int sd_mask_runtime(struct sd *s, const char *unit, bool mask)
{
	sd_bus_message *m = NULL, *reply = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_message_new_method_call(s->bus, &m, DEST, MPATH, MIFACE,
					   mask ? "MaskUnitFiles" : "UnmaskUnitFiles");
	if (r >= 0)
		r = sd_bus_message_append_strv(m, (char *[]){ (char *)unit, NULL });
	if (r >= 0)
		r = mask ? sd_bus_message_append(m, "bb", 1, 1) : sd_bus_message_append(m, "b", 1);
	if (r >= 0)
		r = sd_bus_call(s->bus, m, 0, &err, &reply);
	if (r < 0)
		pr_err("unit %s: cannot %s it: %s", unit, mask ? "mask" : "unmask",
		       err.message ? err.message : strerror(-r));
	sd_bus_error_free(&err);
	sd_bus_message_unref(m);
	sd_bus_message_unref(reply);
	return r < 0 ? r : 0;
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

/* journald's stdout stream for a restored process: it attributes the
 * stream to the unit of the process that opens it (we run in the unit) */
int journal_stream(const char *peer, const char *comm, void *arg)
{
	int fd;

	(void)arg;
	if (strcmp(peer, JOURNAL_STDOUT))
		return -EOPNOTSUPP;
	fd = sd_journal_stream_fd(comm, LOG_INFO, 1);
	return fd;
}

bool journal_replaceable(const char *peer, void *arg)
{
	(void)arg;
	return !strcmp(peer, JOURNAL_STDOUT);
}

void journal_note(const char *cycle, const char *unit, int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_journal_send("MESSAGE=kupdate: %s", msg, "PRIORITY=%d", prio,
			"SYSLOG_IDENTIFIER=kupdate", "KUPDATE_CYCLE=%s", cycle ? cycle : "",
			"KUPDATE_UNIT=%s", unit ? unit : "", NULL);
}

int sd_wait_settled(struct sd *s, const char *unit, int timeout_s)
{
	int64_t start = now_ns(CLOCK_MONOTONIC);

	for (;;) {
		struct unit_info ui;
		int64_t waited;
		int r = sd_unit_info(s, unit, &ui);

		if (r)
			return r;
		r = !strcmp(ui.active, "active")     ? 0
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
