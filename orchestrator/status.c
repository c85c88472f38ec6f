/* kupdate status: the last cycle, per unit. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cycle.h"
#include "kupdate.h"
#include "log.h"
#include "units.h"
#include "util.h"

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

static void jstr(const char *key, const char *v, bool comma)
{
	char *e = v ? json_escape(v) : NULL;

	if (e)
		printf("\"%s\": \"%s\"%s", key, e, comma ? ", " : "");
	else
		printf("\"%s\": null%s", key, comma ? ", " : "");
	free(e);
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
			printf("{\"cycle\": null}\n");
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
	if (json) {
		printf("{");
		jstr("cycle", id, true);
		jstr("created", when, true);
		jstr("old_kernel", m->old_kernel, true);
		jstr("new_kernel", new_kernel, true);
		jstr("state", pending ? "ready" : "done", true);
		printf("\"units\": [");
		for (size_t i = 0; i < m->n_units; i++) {
			const CycleUnit *u = m->units[i];
			const UnitStatus *s = st[i];

			printf("%s\n  {", i ? "," : "");
			jstr("unit", u->name, true);
			jstr("result", s ? result_name(s->result) : "pending", true);
			jstr("reason", s ? s->reason : NULL, true);
			printf("\"old_main_pid\": %d, \"new_main_pid\": %d, \"processes\": %u, "
			       "\"connections\": %u, \"image_bytes\": %llu, \"frozen_ns\": %llu, "
			       "\"dump_ns\": %llu, \"restore_ns\": %llu, \"downtime_ns\": %llu}",
			       u->main_pid, s && s->has_new_main_pid ? s->new_main_pid : 0,
			       u->processes, u->connections, (unsigned long long)u->image_bytes,
			       (unsigned long long)u->frozen_ns, (unsigned long long)u->dump_ns,
			       s ? (unsigned long long)s->restore_ns : 0ULL,
			       s ? (unsigned long long)s->downtime_ns : 0ULL);
		}
		printf("%s]}\n", m->n_units ? "\n" : "");
	} else {
		printf("cycle %s, created %s\n", id, when);
		printf("kernel: %s -> %s\n", m->old_kernel,
		       new_kernel ? new_kernel
		       : pending  ? "(waiting for the kexec)"
				  : "?");
		printf("%-28s %-12s %15s %10s %10s %10s %10s  %s\n", "UNIT", "RESULT",
		       "PID OLD->NEW", "FROZEN", "DUMP", "RESTORE", "DOWNTIME", "REASON");
		for (size_t i = 0; i < m->n_units; i++) {
			const CycleUnit *u = m->units[i];
			const UnitStatus *s = st[i];
			char pids[40], fz[24], dp[24], rs[24], dt[24];

			if (s && s->has_new_main_pid)
				snprintf(pids, sizeof(pids), "%d->%d", u->main_pid,
					 s->new_main_pid);
			else
				snprintf(pids, sizeof(pids), "%d->-", u->main_pid);
			ms(fz, sizeof(fz), u->has_frozen_ns, u->frozen_ns);
			ms(dp, sizeof(dp), u->has_dump_ns, u->dump_ns);
			ms(rs, sizeof(rs), s && s->has_restore_ns, s ? s->restore_ns : 0);
			ms(dt, sizeof(dt), s && s->has_downtime_ns, s ? s->downtime_ns : 0);
			printf("%-28s %-12s %15s %10s %10s %10s %10s  %s\n", u->name,
			       s	 ? result_name(s->result)
			       : pending ? "checkpointed"
					 : "pending",
			       pids, fz, dp, rs, dt, s && s->reason ? s->reason : "");
		}
	}
	for (size_t i = 0; i < m->n_units; i++)
		if (st[i])
			unit_status__free_unpacked(st[i], NULL);
	free(st);
	cycle_manifest__free_unpacked(m, NULL);
	return 0;
}
