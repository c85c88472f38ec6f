/* kupdate status: the last cycle, per unit. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "cycle.h"
#include "kupdate.h"
#include "term.h"
#include "units.h"

static const char *result_name(int r)
{
	switch (r) {
	case UNIT_RESULT__UNIT_RESTORED:
		return "restored";
	case UNIT_RESULT__UNIT_COLD_STARTED:
		return "cold-started";
	case UNIT_RESULT__UNIT_FAILED:
		return "failed";
	case UNIT_RESULT__UNIT_ABANDONED:
		return "abandoned";
	}
	return "?";
}

static char *last_cycle(void)
{
	_cleanup_free_ char *link = xasprintf("%s/last", state_dir());
	char buf[PATH_MAX];
	ssize_t n;

	if (!link)
		return NULL;
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return cycle_id_valid(buf) ? xstrdup(buf) : NULL;
}

static void ms(char *buf, size_t len, bool has, uint64_t ns)
{
	if (has)
		snprintf(buf, len, "%.0f ms", ns / 1e6);
	else
		snprintf(buf, len, "-");
}

static const char *fmt_s(int64_t ns, int slot)
{
	static char b[8][24];

	if (ns < 0)
		return "-";
	snprintf(b[slot], sizeof(b[slot]), "%.2f s", ns / 1e9);
	return b[slot];
}

static json_object *jstr(const char *v)
{
	return v ? json_object_new_string(v) : NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Freeze and dump as wall time: from the first unit's freeze to the end
 * of the last dump (units are dumped several at once), of which *dump is
 * the time some dump ran and *freeze the rest; *end is when the last dump
 * ended (realtime ns).  Without the units' freeze times (older manifests)
 * the dumps are taken as one after the other.  -1 when not known. */
static void freeze_dump_wall(const CycleManifest *m, int64_t *freeze, int64_t *dump, int64_t *end)
{
	int64_t frozen = 0, dumps = 0, first = INT64_MAX, last = INT64_MIN, upto = INT64_MIN;
	int64_t(*iv)[2] = calloc(m->n_units ? m->n_units : 1, sizeof(*iv));
	size_t n = 0;

	*end = -1;
	for (size_t i = 0; i < m->n_units; i++) {
		const CycleUnit *u = m->units[i];

		frozen += u->frozen_ns;
		dumps += u->dump_ns;
		if (!iv || !u->has_frozen_at_ns || !u->has_frozen_ns || !u->has_dump_ns)
			continue;
		iv[n][1] = (int64_t)u->frozen_at_ns + (int64_t)u->frozen_ns;
		iv[n][0] = iv[n][1] - (int64_t)u->dump_ns;
		first = (int64_t)u->frozen_at_ns < first ? (int64_t)u->frozen_at_ns : first;
		last = iv[n][1] > last ? iv[n][1] : last;
		n++;
	}
	if (!n || n != m->n_units) {
		/* one after the other */
		*freeze = frozen - dumps;
		*dump = dumps;
		free(iv);
		return;
	}
	/* the length of the union of the dumps' intervals */
	qsort(iv, n, sizeof(*iv), cmp_i64);
	dumps = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t from = iv[i][0] > upto ? iv[i][0] : upto;

		if (iv[i][1] > from)
			dumps += iv[i][1] - from;
		upto = iv[i][1] > upto ? iv[i][1] : upto;
	}
	*dump = dumps;
	*freeze = last - first - dumps;
	*end = last;
	free(iv);
}

/* The cycle's phases, measured on both sides of the kexec (wall clock;
 * the two kernels' clocks agree through the hardware clock). */
static void print_phases(const char *id, const CycleManifest *m, UnitStatus **st, json_object *json)
{
	_cleanup_free_ char *kp = cycle_path(id, "kexec-at"), *kt = NULL;
	int64_t frozen = 0, dump = 0, dumped_at, kexec_at = 0, boot_at = 0, to_restore = -1,
		restore_max = 0;
	int64_t userspace = -1;
	const char *names[] = { "preflight",
				"freeze",
				"dump",
				"commit_and_stop",
				"shutdown_and_kexec",
				"kernel_boot",
				"systemd_to_restore",
				"restore" };
	int64_t v[8];

	freeze_dump_wall(m, &frozen, &dump, &dumped_at);
	for (size_t i = 0; i < m->n_units; i++) {
		if (!st[i] || !st[i]->has_restore_start_ns)
			continue;
		boot_at = st[i]->boot_at_ns;
		if (st[i]->has_userspace_ns)
			userspace = st[i]->userspace_ns;
		if (to_restore < 0 || (int64_t)st[i]->restore_start_ns < to_restore)
			to_restore = st[i]->restore_start_ns;
		if ((int64_t)st[i]->restore_ns > restore_max)
			restore_max = st[i]->restore_ns;
	}
	if (kp && !read_file_at(AT_FDCWD, kp, &kt, NULL))
		kexec_at = atoll(kt);
	if (userspace < 0) {
		/* recorded by kupdate-finish (earlier versions: by each restore) */
		_cleanup_free_ char *up = cycle_path(id, "userspace-ns"), *ut = NULL;

		if (up && !read_file_at(AT_FDCWD, up, &ut, NULL))
			userspace = atoll(ut);
	}
	v[0] = m->has_preflight_ns ? (int64_t)m->preflight_ns : -1;
	v[1] = frozen; /* freezing the units (the dumps run frozen) */
	v[2] = dump;
	if (kexec_at && dumped_at >= 0)
		v[3] = kexec_at - dumped_at;
	else if (kexec_at && m->has_started_ns)
		v[3] = kexec_at - (int64_t)m->started_ns - v[0] - frozen - dump;
	else
		v[3] = -1;
	v[4] = kexec_at && boot_at ? boot_at - kexec_at : -1;
	/* the new kernel's boot up to systemd, then systemd up to the first
	 * restore (CLOCK_MONOTONIC and CLOCK_BOOTTIME agree: no suspend) */
	v[5] = to_restore >= 0 ? userspace : -1;
	v[6] = to_restore >= 0 && userspace >= 0 ? to_restore - userspace : -1;
	v[7] = to_restore >= 0 ? restore_max : -1;
	if (json) {
		json_object *ph = json_object_new_object();

		/* -1: not measured (the phase did not happen, or not yet) */
		for (int i = 0; i < 8; i++)
			json_object_object_add(ph, names[i], json_object_new_int64(v[i]));
		json_object_object_add(json, "phases_ns", ph);
		return;
	}
	printf("phases: preflight %s, freeze %s, dump %s, commit+stop %s, shutdown+kexec %s, "
	       "kernel boot %s, systemd to restore %s, restore (network unlock included) %s\n",
	       fmt_s(v[0], 0), fmt_s(v[1], 1), fmt_s(v[2], 2), fmt_s(v[3], 3), fmt_s(v[4], 4),
	       fmt_s(v[5], 5), fmt_s(v[6], 6), fmt_s(v[7], 7));
}

/* the cycle and each unit as JSON, into a new object */
static json_object *status_json(const char *id, const char *when, const CycleManifest *m,
				UnitStatus *const *st, const char *new_kernel, bool pending)
{
	json_object *units = json_object_new_array(), *jroot = json_object_new_object();

	json_object_object_add(jroot, "cycle", jstr(id));
	json_object_object_add(jroot, "created", jstr(when));
	json_object_object_add(jroot, "old_kernel", jstr(m->old_kernel));
	json_object_object_add(jroot, "new_kernel", jstr(new_kernel));
	json_object_object_add(jroot, "state", jstr(pending ? "ready" : "done"));
	for (size_t i = 0; i < m->n_units; i++) {
		const CycleUnit *u = m->units[i];
		const UnitStatus *s = st[i];
		json_object *e = json_object_new_object();

		json_object_object_add(e, "unit", jstr(u->name));
		json_object_object_add(e, "result",
				       jstr(s	      ? result_name(s->result)
					    : pending ? "checkpointed"
						      : "pending"));
		json_object_object_add(e, "reason", jstr(s ? s->reason : NULL));
		json_object_object_add(e, "old_main_pid", json_object_new_int(u->main_pid));
		json_object_object_add(
			e, "new_main_pid",
			json_object_new_int(s && s->has_new_main_pid ? s->new_main_pid : 0));
		json_object_object_add(e, "processes", json_object_new_int64(u->processes));
		json_object_object_add(e, "containers", json_object_new_int64(u->containers));
		json_object_object_add(e, "connections", json_object_new_int64(u->connections));
		json_object_object_add(e, "image_bytes", json_object_new_int64(u->image_bytes));
		json_object_object_add(e, "frozen_ns", json_object_new_int64(u->frozen_ns));
		json_object_object_add(e, "dump_ns", json_object_new_int64(u->dump_ns));
		json_object_object_add(e, "restore_ns",
				       json_object_new_int64(s ? s->restore_ns : 0));
		json_object_object_add(e, "downtime_ns",
				       json_object_new_int64(s ? s->downtime_ns : 0));
		json_object_array_add(units, e);
	}
	json_object_object_add(jroot, "units", units);
	return jroot;
}

/* the cycle and a line for each unit, as text */
static void status_text(const char *id, const char *when, const CycleManifest *m,
			UnitStatus *const *st, const char *new_kernel, bool pending)
{
	printf("cycle %s, created %s\n", id, when);
	printf("kernel: %s -> %s\n", m->old_kernel,
	       new_kernel ? new_kernel
	       : pending  ? "(waiting for the kexec)"
			  : "?");
	printf("%-28s %-12s %15s %10s %10s %10s %10s  %s\n", "UNIT", "RESULT", "PID OLD->NEW",
	       "FROZEN", "DUMP", "RESTORE", "DOWNTIME", "REASON");
	for (size_t i = 0; i < m->n_units; i++) {
		const CycleUnit *u = m->units[i];
		const UnitStatus *s = st[i];
		char pids[40], fz[24], dp[24], rs[24], dt[24], ctr[40] = "";
		const char *res;
		enum term_colour col;

		if (s && s->has_new_main_pid)
			snprintf(pids, sizeof(pids), "%d->%d", u->main_pid, s->new_main_pid);
		else
			snprintf(pids, sizeof(pids), "%d->-", u->main_pid);
		ms(fz, sizeof(fz), u->has_frozen_ns, u->frozen_ns);
		ms(dp, sizeof(dp), u->has_dump_ns, u->dump_ns);
		ms(rs, sizeof(rs), s && s->has_restore_ns, s ? s->restore_ns : 0);
		ms(dt, sizeof(dt), s && s->has_downtime_ns, s ? s->downtime_ns : 0);
		res = s ? result_name(s->result) : pending ? "checkpointed" : "pending";
		col = !s					    ? T_DIM
		      : s->result == UNIT_RESULT__UNIT_RESTORED	    ? T_GREEN
		      : s->result == UNIT_RESULT__UNIT_COLD_STARTED ? T_YELLOW
								    : T_RED;
		if (u->containers)
			snprintf(ctr, sizeof(ctr), "%s%u container%s", s && s->reason ? "; " : "",
				 u->containers, u->containers > 1 ? "s" : "");
		printf("%-28s %s%-12s%s %15s %10s %10s %10s %10s  %s%s\n", u->name,
		       term_c(stdout, col), res, term_c(stdout, T_RESET), pids, fz, dp, rs, dt,
		       s && s->reason ? s->reason : "", ctr);
	}
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "cycle", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_free_ char *id = NULL;
	CycleManifest *m;
	bool json = false, pending;
	char me[64] = "", when[64];
	const char *new_kernel = NULL;
	UnitStatus **st;
	json_object *jroot = NULL;
	int c, ret;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'c':
			id = xstrdup(optarg);
			break;
		case 'h':
			printf("usage: kupdate status [--json] [--cycle ID]\n"
			       "The last kernel update cycle (or cycle ID): the kernels, and per\n"
			       "unit whether it was restored or started the ordinary way and why,\n"
			       "its pids, frozen, dump, restore and down times.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!id)
		id = last_cycle();
	if (!id) {
		if (json)
			printf("{ \"cycle\": null }\n");
		else
			printf("no kernel update cycle yet (%s/last)\n", state_dir());
		return 0;
	}
	ret = manifest_read(id, &m);
	if (ret) {
		pr_err("cycle %s: cannot read its manifest: %s", id, strerror(-ret));
		return 1;
	}
	st = calloc(m->n_units + 1, sizeof(*st));
	if (!st) {
		cycle_manifest__free_unpacked(m, NULL);
		return 1;
	}
	for (size_t i = 0; i < m->n_units; i++) {
		status_read(id, m->units[i]->name, &st[i]);
		if (st[i] && st[i]->new_kernel && !new_kernel)
			new_kernel = st[i]->new_kernel;
	}
	current_boot_id(me, sizeof(me));
	pending = !strcmp(m->old_boot_id, me) && !new_kernel;
	{
		time_t t = m->created_ns / 1000000000ULL;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	}
	if (json)
		jroot = status_json(id, when, m, st, new_kernel, pending);
	else
		status_text(id, when, m, st, new_kernel, pending);
	print_phases(id, m, st, jroot);
	if (jroot) {
		json_print(jroot, stdout);
		json_object_put(jroot);
	}
	for (size_t i = 0; i < m->n_units; i++)
		if (st[i])
			unit_status__free_unpacked(st[i], NULL);
	free(st);
	cycle_manifest__free_unpacked(m, NULL);
	return 0;
}
