/* Unit tests of what kupdate prints for people and programs: kupdate
 * status --json on a cycle written here has the shape kupdate(8) documents
 * (checked with json-c), the human table is aligned and carries no escape
 * sequences when stdout is not a terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cycle.h"
#include "kupdate.h"
#include "log.h"
#include "util.h"

static char tmpdir[64];
#define CYCLE "20261203T045532-7d6c"

/* run a command with stdout into a file; its text */
static char *capture(int (*fn)(int, char **), char **argv, int *rc)
{
	char path[128], *text = NULL;
	int argc = 0, fd, saved;

	while (argv[argc])
		argc++;
	snprintf(path, sizeof(path), "%s/out", tmpdir);
	fflush(stdout);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	saved = dup(1);
	dup2(fd, 1);
	close(fd);
	optind = 0;
	*rc = fn(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	return text;
}

/* the units' freeze times, as apply writes them (two dumped at once) */
static bool with_freeze_times;
static bool with_boot_times; /* the restores' start, kupdate-finish's userspace-ns */

static void write_cycle(void)
{
	static int32_t ids[3] = { 42, 43, 44 };
	CycleUnit u[2], *pu[2] = { &u[0], &u[1] };
	CycleManifest m = CYCLE_MANIFEST__INIT;
	UnitStatus s = UNIT_STATUS__INIT;
	char dir[128], last[128];
	int dfd;

	cycle_unit__init(&u[0]);
	u[0].name = "web \"front\".service"; /* a name JSON must escape */
	u[0].imgdir = "units/web.service";
	u[0].main_pid = 42;
	u[0].n_ids = 2;
	u[0].ids = ids;
	u[0].has_frozen_ns = u[0].has_dump_ns = u[0].has_image_bytes = 1;
	u[0].frozen_ns = 250000000;
	u[0].dump_ns = 200000000;
	u[0].image_bytes = 1 << 20;
	u[0].has_processes = u[0].has_connections = 1;
	u[0].processes = 2;
	u[0].connections = 3;
	cycle_unit__init(&u[1]);
	u[1].name = "db.service";
	u[1].imgdir = "units/db.service";
	u[1].main_pid = 44;
	u[1].n_ids = 1;
	u[1].ids = ids + 2;
	if (with_freeze_times) {
		/* web: frozen at T, dumped T+50..T+250 ms; db: frozen at
		 * T+10, dumped T+50..T+310; kexec asked for at T+400 */
		int64_t t = 1796278153100000000LL;
		char kp[256];

		u[0].has_frozen_at_ns = u[1].has_frozen_at_ns = 1;
		u[0].frozen_at_ns = t;
		u[1].frozen_at_ns = t + 10000000;
		u[1].has_frozen_ns = u[1].has_dump_ns = 1;
		u[1].frozen_ns = 300000000;
		u[1].dump_ns = 260000000;
		snprintf(dir, sizeof(dir), "%s/cycles/%s", tmpdir, CYCLE);
		assert_int_equal(mkdir_p(dir, 0700), 0);
		snprintf(kp, sizeof(kp), "%s/kexec-at", dir);
		dfd = open(kp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		assert_true(dfd >= 0);
		assert_true(dprintf(dfd, "%lld\n", (long long)(t + 400000000)) > 0);
		close(dfd);
	}
	m.id = CYCLE;
	m.format_version = CYCLE_FORMAT_VERSION;
	m.tool_version = "test";
	m.old_kernel = "6.1.0-kupdate";
	m.old_boot_id = "another-boot";
	m.created_ns = 1796278153000000000LL;
	m.has_started_ns = m.has_preflight_ns = 1;
	m.started_ns = 1796278153000000000LL;
	m.preflight_ns = 50000000;
	m.n_units = 2;
	m.units = pu;
	snprintf(dir, sizeof(dir), "%s/cycles/%s", tmpdir, CYCLE);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(manifest_write(dfd, &m), 0);
	close(dfd);
	s.name = "web \"front\".service";
	s.result = UNIT_RESULT__UNIT_RESTORED;
	s.new_kernel = "6.12.57-kupdate";
	s.has_new_main_pid = 1;
	s.new_main_pid = 42;
	s.has_restore_ns = s.has_downtime_ns = 1;
	s.restore_ns = 30000000;
	s.downtime_ns = 9000000000LL;
	if (with_boot_times) {
		/* systemd started 2.5 s into the boot, the restore 4 s */
		char up[256];

		s.has_restore_start_ns = s.has_boot_at_ns = 1;
		s.restore_start_ns = 4000000000LL;
		s.boot_at_ns = 1796278160000000000LL;
		snprintf(up, sizeof(up), "%s/userspace-ns", dir);
		dfd = open(up, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		assert_true(dfd >= 0);
		assert_true(dprintf(dfd, "2500000000\n") > 0);
		close(dfd);
	}
	assert_int_equal(status_write(CYCLE, &s), 0);
	s.name = "db.service";
	s.result = UNIT_RESULT__UNIT_COLD_STARTED;
	s.reason = "restore failed:\tpid 44 is taken";
	s.has_new_main_pid = 0;
	assert_int_equal(status_write(CYCLE, &s), 0);
	snprintf(last, sizeof(last), "%s/last", tmpdir);
	unlink(last);
	assert_int_equal(symlink(CYCLE, last), 0);
}

static json_object *member(json_object *o, const char *key, json_type type)
{
	json_object *v = NULL;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no \"%s\"", key);
	if (type != json_type_null)
		assert_int_equal(json_object_get_type(v), type);
	return v;
}

static void test_status_json(void **state)
{
	char *argv[] = { "status", "--json", NULL };
	static const char *const phases[] = { "preflight",
					      "freeze",
					      "dump",
					      "commit_and_stop",
					      "shutdown_and_kexec",
					      "kernel_boot",
					      "systemd_to_restore",
					      "restore" };
	static const char *const nums[] = { "old_main_pid", "new_main_pid", "processes",
					    "connections",  "image_bytes",  "frozen_ns",
					    "dump_ns",	    "restore_ns",   "downtime_ns" };
	json_object *root, *units, *u0, *u1, *ph;
	char *text;
	int rc;

	(void)state;
	write_cycle();
	text = capture(cmd_status, argv, &rc);
	assert_int_equal(rc, 0);
	root = json_tokener_parse(text);
	if (!root)
		fail_msg("not JSON: %s", text);
	assert_string_equal(json_object_get_string(member(root, "cycle", json_type_string)), CYCLE);
	member(root, "created", json_type_string);
	assert_string_equal(json_object_get_string(member(root, "old_kernel", json_type_string)),
			    "6.1.0-kupdate");
	assert_string_equal(json_object_get_string(member(root, "new_kernel", json_type_string)),
			    "6.12.57-kupdate");
	assert_string_equal(json_object_get_string(member(root, "state", json_type_string)),
			    "done");
	units = member(root, "units", json_type_array);
	assert_int_equal(json_object_array_length(units), 2);
	u0 = json_object_array_get_idx(units, 0);
	u1 = json_object_array_get_idx(units, 1);
	assert_string_equal(json_object_get_string(member(u0, "unit", json_type_string)),
			    "web \"front\".service");
	assert_string_equal(json_object_get_string(member(u0, "result", json_type_string)),
			    "restored");
	assert_true(json_object_is_type(member(u0, "reason", json_type_null), json_type_null));
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		member(u0, nums[i], json_type_int);
		member(u1, nums[i], json_type_int);
	}
	assert_int_equal(json_object_get_int64(member(u0, "downtime_ns", json_type_int)),
			 9000000000LL);
	assert_int_equal(json_object_get_int(member(u0, "connections", json_type_int)), 3);
	assert_string_equal(json_object_get_string(member(u1, "result", json_type_string)),
			    "cold-started");
	assert_string_equal(json_object_get_string(member(u1, "reason", json_type_string)),
			    "restore failed:\tpid 44 is taken");
	ph = member(root, "phases_ns", json_type_object);
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		member(ph, phases[i], json_type_int);
	assert_int_equal(json_object_get_int64(member(ph, "preflight", json_type_int)), 50000000);
	json_object_put(root);
	free(text);
}

/* `status --json`'s phase NAME of the cycle write_cycle made, in ns */
static int64_t phase(const char *name)
{
	char *argv[] = { "status", "--json", NULL };
	json_object *root;
	char *text;
	int64_t v;
	int rc;

	text = capture(cmd_status, argv, &rc);
	assert_int_equal(rc, 0);
	root = json_tokener_parse(text);
	if (!root)
		fail_msg("not JSON: %s", text);
	v = json_object_get_int64(
		member(member(root, "phases_ns", json_type_object), name, json_type_int));
	json_object_put(root);
	free(text);
	return v;
}

/* a file of the cycle goes, for the tests that follow */
static void remove_cycle_file(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/cycles/%s/%s", tmpdir, CYCLE, name);
	unlink(path);
}

/* units dumped at once: the phases are wall time, not the sum of the
 * units' times (freeze 50 ms, dump 260 ms, commit+stop 90 ms: summed,
 * 90 ms, 460 ms and a negative commit) */
static void test_status_phases_parallel(void **state)
{
	(void)state;
	with_freeze_times = true;
	write_cycle();
	with_freeze_times = false;
	assert_int_equal(phase("freeze"), 50000000);
	assert_int_equal(phase("dump"), 260000000);
	assert_int_equal(phase("commit_and_stop"), 90000000);
	remove_cycle_file("kexec-at");
}

/* the boot's phases come from the restores' start and the time systemd
 * started, which kupdate-finish records in the cycle (userspace-ns) */
static void test_status_boot_phases(void **state)
{
	(void)state;
	with_boot_times = true;
	write_cycle();
	with_boot_times = false;
	assert_int_equal(phase("kernel_boot"), 2500000000LL);
	assert_int_equal(phase("systemd_to_restore"), 1500000000LL);
	assert_int_equal(phase("restore"), 30000000);
	remove_cycle_file("userspace-ns");
}

static void test_status_human(void **state)
{
	char *argv[] = { "status", NULL };
	char *text, *hdr, *row;
	size_t col;
	int rc;

	(void)state;
	write_cycle();
	text = capture(cmd_status, argv, &rc);
	assert_int_equal(rc, 0);
	assert_null(strchr(text, '\033')); /* not a terminal: no colours */
	hdr = strstr(text, "UNIT ");
	row = strstr(text, "\ndb.service");
	assert_non_null(hdr);
	assert_non_null(row);
	row++;
	/* the RESULT column starts at the same place in the header and a row */
	col = strstr(hdr, "RESULT") - hdr;
	assert_memory_equal(row + col, "cold-started", 12);
	assert_non_null(strstr(text, "kernel: 6.1.0-kupdate -> 6.12.57-kupdate"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_json),
		cmocka_unit_test(test_status_phases_parallel),
		cmocka_unit_test(test_status_boot_phases),
		cmocka_unit_test(test_status_human),
	};
	int ret;

	strcpy(tmpdir, "/tmp/kupdate-output-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	setenv("KUPDATE_STATE_DIR", tmpdir, 1);
	unsetenv("NO_COLOR");
	cr_log_init("test_output", CR_LOG_ERROR, -1);
	ret = cmocka_run_group_tests_name("output", tests, NULL, NULL);
	rm_rf(tmpdir);
	return ret;
}
