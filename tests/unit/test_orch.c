/* Unit tests of the orchestrator's pure parts: the pid reservation ranges,
 * the new kernel's command line, names, the cycle manifest (written, read
 * back, refused when damaged), unit results, the generator's drop-ins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "cycle.h"
#include "kexec.h"
#include "kupdate.h"
#include "log.h"
#include "proc.h"
#include "sessions.h"
#include "store.h"
#include "units.h"
#include "util.h"

static char tmpdir[64];

static void test_pid_ranges(void **state)
{
	pid_t a[] = { 7, 5, 6, 100, 101, 5, 300 };
	pid_t many[200];
	char *r;
	int commas = 0;

	(void)state;
	r = pid_ranges(a, 7);
	assert_string_equal(r, "5-7,100-101,300-300");
	free(r);
	r = pid_ranges(a, 0);
	assert_string_equal(r, "");
	free(r);
	/* at most 32 ranges: the closest are joined, every id stays covered */
	for (int i = 0; i < 200; i++)
		many[i] = 10 + i * 10 + (i % 7);
	r = pid_ranges(many, 200);
	for (char *p = r; *p; p++)
		commas += *p == ',';
	assert_true(commas <= 31);
	for (int i = 0; i < 200; i++) {
		bool covered = false;
		char *s = r;

		while (*s) {
			long lo = strtol(s, &s, 10), hi = strtol(s + 1, &s, 10);

			covered |= many[i] >= lo && many[i] <= hi;
			if (*s == ',')
				s++;
		}
		assert_true(covered);
	}
	free(r);
}

static void test_cmdline(void **state)
{
	char *c;

	(void)state;
	c = kexec_cmdline("console=ttyS0 root=/dev/vda", "20261203T000000-abcd", "5-7,9-9");
	assert_string_equal(c, "console=ttyS0 root=/dev/vda kupdate.cycle=20261203T000000-abcd "
			       "pid_reserve=5-7,9-9");
	free(c);
	c = kexec_cmdline("quiet", NULL, NULL);
	assert_string_equal(c, "quiet");
	free(c);
}

/* a kernel loaded at preflight serves the cycle when its command line is
 * the same but for a pid reservation that holds the cycle's */
static void test_cmdline_covers(void **state)
{
	const char *pre = "quiet kupdate.cycle=X pid_reserve=100-120,300-600";

	(void)state;
	assert_true(cmdline_covers(pre, pre));
	assert_true(
		cmdline_covers(pre, "quiet kupdate.cycle=X pid_reserve=100-101,105-105,400-450"));
	assert_false(cmdline_covers(pre, "quiet kupdate.cycle=X pid_reserve=100-101,601-601"));
	assert_false(cmdline_covers(pre, "quiet kupdate.cycle=X pid_reserve=99-101"));
	assert_false(cmdline_covers(pre, "quiet kupdate.cycle=Y pid_reserve=100-101"));
	assert_false(
		cmdline_covers("quiet kupdate.cycle=X", "quiet kupdate.cycle=X pid_reserve=5"));
	assert_true(cmdline_covers(pre, "quiet kupdate.cycle=X"));
}

static void test_names(void **state)
{
	char *e;

	(void)state;
	assert_true(unit_name_valid("redis-server.service"));
	assert_true(unit_name_valid("getty@tty1.service"));
	assert_false(unit_name_valid("redis.socket"));
	assert_false(unit_name_valid("../x.service"));
	assert_false(unit_name_valid("a b.service"));
	assert_false(unit_name_valid(".service"));
	assert_true(cycle_id_valid("20261203T045532-7d6c"));
	assert_false(cycle_id_valid("../etc"));
	assert_false(cycle_id_valid(".hidden"));
	assert_false(cycle_id_valid(""));
	e = json_escape("a\"b\\c\nd");
	assert_string_equal(e, "a\\\"b\\\\c\\u000ad");
	free(e);
}

static CycleManifest *sample(CycleUnit *u, CycleUnit **pu, int32_t *ids)
{
	static CycleManifest m;

	cycle_manifest__init(&m);
	cycle_unit__init(u);
	u->name = "demo.service";
	u->imgdir = "units/demo.service";
	u->main_pid = 42;
	u->n_ids = 2;
	u->ids = ids;
	pu[0] = u;
	m.id = "20261203T045532-7d6c";
	m.format_version = CYCLE_FORMAT_VERSION;
	m.tool_version = "test";
	m.old_kernel = "6.1.0";
	m.old_boot_id = "b";
	m.created_ns = 1;
	m.n_units = 1;
	m.units = pu;
	return &m;
}

static void test_manifest(void **state)
{
	CycleUnit u, *pu[1];
	int32_t ids[2] = { 42, 43 };
	CycleManifest *m = sample(&u, pu, ids), *back;
	char dir[128];
	int dfd;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/cycles/%s", tmpdir, m->id);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(manifest_write(dfd, m), 0);
	close(dfd);
	assert_int_equal(manifest_read(m->id, &back), 0);
	assert_string_equal(back->units[0]->name, "demo.service");
	assert_int_equal(back->units[0]->n_ids, 2);
	cycle_manifest__free_unpacked(back, NULL);

	/* a manifest that names paths outside its cycle, or bad pids, is refused */
	u.imgdir = "../../etc";
	assert_int_not_equal(manifest_validate(m), 0);
	u.imgdir = "units/demo.service";
	ids[1] = -1;
	assert_int_not_equal(manifest_validate(m), 0);
	ids[1] = 43;
	u.name = "a/b";
	assert_int_not_equal(manifest_validate(m), 0);
	u.name = "demo.service";
	m->format_version = 99;
	assert_int_not_equal(manifest_validate(m), 0);
	m->format_version = CYCLE_FORMAT_VERSION;
	assert_int_equal(manifest_validate(m), 0);
}

static void test_manifest_damage(void **state)
{
	char path[160];
	unsigned char *data;
	size_t len;
	int fd;
	struct stat st;

	(void)state;
	snprintf(path, sizeof(path), "%s/cycles/20261203T045532-7d6c/manifest.img", tmpdir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	fstat(fd, &st);
	len = st.st_size;
	data = malloc(len);
	assert_int_equal(read(fd, data, len), (ssize_t)len);
	close(fd);
	/* every truncation and every single bit flip is refused */
	for (size_t cut = 0; cut < len; cut++) {
		CycleManifest *m = NULL;

		assert_int_not_equal(manifest_parse(data, cut, &m), 0);
		assert_null(m);
	}
	for (size_t i = 0; i < len * 8; i++) {
		CycleManifest *m = NULL;

		data[i / 8] ^= 1 << (i % 8);
		assert_int_not_equal(manifest_parse(data, len, &m), 0);
		assert_null(m);
		data[i / 8] ^= 1 << (i % 8);
	}
	free(data);
}

static void test_status(void **state)
{
	UnitStatus s = UNIT_STATUS__INIT, *back;

	(void)state;
	s.name = "demo.service";
	s.result = UNIT_RESULT__UNIT_COLD_STARTED;
	s.reason = "restore failed: pages-42.img is damaged";
	assert_int_equal(status_write("20261203T045532-7d6c", &s), 0);
	assert_int_equal(status_read("20261203T045532-7d6c", "demo.service", &back), 0);
	assert_int_equal(back->result, UNIT_RESULT__UNIT_COLD_STARTED);
	assert_string_equal(back->reason, s.reason);
	unit_status__free_unpacked(back, NULL);
	assert_int_not_equal(status_read("20261203T045532-7d6c", "other.service", &back), 0);
}

static void test_dropins(void **state)
{
	char dir[128], path[256], *text;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/early", tmpdir);
	assert_int_equal(write_restore_dropin(dir, "demo.service", "/usr/sbin/kupdate",
					      "20261203T045532-7d6c", false, NULL, 0),
			 0);
	snprintf(path, sizeof(path), "%s/demo.service.d/zz-kupdate-restore.conf", dir);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_non_null(strstr(text, "Type=forking\n"));
	assert_non_null(strstr(text, "PIDFile=/run/kupdate/demo.service.pid\n"));
	assert_non_null(strstr(text, "ExecStart=\nExecStart=+/usr/sbin/kupdate restore-unit "
				     "--cycle 20261203T045532-7d6c --unit demo.service\n"));
	assert_non_null(strstr(text, "After=kupdate-netlock.service"));
	/* restored at boot without waiting for basic.target, but still
	 * stopped at shutdown */
	assert_non_null(strstr(text, "DefaultDependencies=no\n"));
	assert_non_null(strstr(text, "After=local-fs.target systemd-sysctl.service "
				     "systemd-tmpfiles-setup.service systemd-journald.socket\n"));
	assert_non_null(strstr(text, "Conflicts=shutdown.target\n"));
	/* ahead of the rest of the boot for the CPU, in [Service] */
	assert_non_null(strstr(strstr(text, "[Service]"), "StartupCPUWeight=1000\n"));
	/* no namespaces of its own: none of the unit's ExecStartPre= runs */
	assert_null(strstr(text, "ExecStartPre=/"));
	free(text);
	/* with namespaces of its own (mount, UTS): kupdate-anchor, with no
	 * prefix (the unit's sandboxing applies), before the restore; the
	 * anchor in the cgroup must not stop a SendSIGKILL=no unit's start */
	setenv("KUPDATE_ANCHOR", "/usr/lib/kupdate/kupdate-anchor", 1);
	assert_int_equal(write_restore_dropin(dir, "demo.service", "/usr/sbin/kupdate",
					      "20261203T045532-7d6c", false, NULL, 0x04020000),
			 0);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_non_null(strstr(text, "ExecStartPre=\nExecStartPost=\nExecStart=\n"
				     "SendSIGKILL=yes\n"
				     "ExecStartPre=/usr/lib/kupdate/kupdate-anchor 660\n"
				     "ExecStart=+/usr/sbin/kupdate restore-unit"));
	unsetenv("KUPDATE_ANCHOR");
	free(text);
	setenv("KUPDATE_RUNTIME_UNIT_DIR", dir, 1);
	assert_int_equal(write_checkpointed_dropin("demo.service"), 0);
	snprintf(path, sizeof(path), "%s/demo.service.d/zz-kupdate-checkpointed.conf", dir);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_non_null(strstr(text, "Restart=no\n"));
	assert_non_null(strstr(text, "SuccessExitStatus=SIGKILL\n"));
	free(text);
	remove_checkpointed_dropin("demo.service");
	assert_int_not_equal(access(path, F_OK), 0);
}

/* pages of the file at path in the page cache */
static size_t resident(const char *path, size_t len)
{
	int fd = open(path, O_RDONLY);
	void *p = fd >= 0 ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	unsigned char vec[1024];
	size_t n = 0;

	assert_true(p != MAP_FAILED && len / 4096 <= sizeof(vec));
	assert_int_equal(mincore(p, len, vec), 0);
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	munmap(p, len);
	close(fd);
	return n;
}

/* the generator starts reading a cycle's images (and its pre-dump's) into
 * the page cache; with a store it leaves them alone */
static void test_prefetch(void **state)
{
	CycleUnit u, *pu[1];
	int32_t ids[2] = { 42, 43 };
	CycleManifest *m = sample(&u, pu, ids);
	const size_t len = 4 << 20;
	char path[2][320], dir[256];
	char *buf = malloc(len);
	struct timespec ts = { 0, 20000000 };

	(void)state;
	m->id = "20261203T070000-0001";
	memset(buf, 0x5a, len);
	for (int k = 0; k < 2; k++) {
		int fd;

		snprintf(dir, sizeof(dir), "%s/cycles/%s/units/demo.service%s", tmpdir, m->id,
			 k ? ".pre" : "");
		assert_int_equal(mkdir_p(dir, 0700), 0);
		snprintf(path[k], sizeof(path[k]), "%s/pages-42.img", dir);
		fd = open(path[k], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
		assert_int_equal(fsync(fd), 0);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	free(buf);
	if (resident(path[0], len) == len / 4096 || resident(path[1], len) == len / 4096)
		skip(); /* a file system that keeps them all in memory (tmpfs) */
	m->store = "/var/lib/kupdate-store";
	prefetch_cycle_images(m->id, m);
	assert_true(resident(path[0], len) < len / 4096);
	m->store = NULL;
	prefetch_cycle_images(m->id, m);
	for (int i = 0; i < 250 && (resident(path[0], len) < len / 4096 ||
				    resident(path[1], len) < len / 4096);
	     i++)
		nanosleep(&ts, NULL);
	assert_int_equal(resident(path[0], len), len / 4096);
	assert_int_equal(resident(path[1], len), len / 4096);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* the units that read a store's images (the lock, the restored unit,
 * kupdate-finish) have text in their drop-in from the generator in early */
static void expect_store_dropins(const char *early, const char *text)
{
	const char *const units[] = { "kupdate-netlock.service", "demo.service",
				      "kupdate-finish.service" };
	char path[256], *t;

	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s.d/zz-kupdate-restore.conf", early, units[i]);
		assert_int_equal(read_file_at(AT_FDCWD, path, &t, NULL), 0);
		assert_non_null(strstr(t, text));
		free(t);
	}
}

/* the generator: a drop-in for each unit of the named cycle that has no
 * result yet, the boot wanting them, nothing for another cycle */
#define RT_UNIT "[Service]\nExecStart=/bin/sleep 100\n"

static void test_generator(void **state)
{
	CycleUnit u[2], *pu[2];
	int32_t ids[2] = { 42, 43 };
	CycleManifest *m = sample(&u[0], pu, ids);
	UnitStatus s = UNIT_STATUS__INIT;
	char dir[128], early[160], path[256], rdir[160], *text;
	char *argv[] = { "kupdate-generator", early, early, early, NULL };
	int dfd;

	(void)state;
	cycle_unit__init(&u[1]);
	u[1].name = "done.service";
	u[1].imgdir = "units/done.service";
	u[1].main_pid = 50;
	pu[1] = &u[1];
	m->n_units = 2;
	m->id = "20261203T060000-0001";
	/* demo.service was a transient unit (systemd-run): its file again as a
	 * runtime unit; done.service's is not written (restored already) */
	u[0].has_runtime_unit = u[1].has_runtime_unit = 1;
	u[0].runtime_unit.data = u[1].runtime_unit.data = (uint8_t *)RT_UNIT;
	u[0].runtime_unit.len = u[1].runtime_unit.len = strlen(RT_UNIT);
	u[0].runtime_unit_path = "/run/systemd/transient/demo.service";
	snprintf(rdir, sizeof(rdir), "%s/runtime-units", tmpdir);
	setenv("KUPDATE_RUNTIME_UNIT_DIR", rdir, 1);
	snprintf(dir, sizeof(dir), "%s/cycles/%s", tmpdir, m->id);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(manifest_write(dfd, m), 0);
	close(dfd);
	s.name = "done.service";
	s.result = UNIT_RESULT__UNIT_RESTORED;
	assert_int_equal(status_write(m->id, &s), 0);

	snprintf(early, sizeof(early), "%s/gen-other", tmpdir);
	setenv("KUPDATE_CMDLINE", "quiet kupdate.cycle=20261203T060000-0002", 1);
	assert_int_equal(cmd_generator(4, argv), 0);
	assert_int_not_equal(access(early, F_OK), 0);

	snprintf(path, sizeof(path), "%s/usr/lib/tmpfiles.d", rdir);
	assert_int_equal(mkdir_p(path, 0755), 0);
	strcat(path, "/tmp.conf");
	put(path, "# x\nD /tmp 1777 root root -\n#q /var/tmp 1777 root root 30d\n");
	setenv("KUPDATE_TMPFILES_ROOT", rdir, 1);
	snprintf(early, sizeof(early), "%s/gen", tmpdir);
	setenv("KUPDATE_CMDLINE", "quiet kupdate.cycle=20261203T060000-0001 pid_reserve=42-43", 1);
	assert_int_equal(cmd_generator(4, argv), 0);
	snprintf(path, sizeof(path), "%s/demo.service.d/zz-kupdate-restore.conf", early);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/done.service.d/zz-kupdate-restore.conf", early);
	assert_int_not_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/multi-user.target.d/zz-kupdate-restore.conf", early);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_non_null(strstr(text, "Wants= demo.service kupdate-finish.service"));
	free(text);
	snprintf(path, sizeof(path), "%s/kupdate-netlock.service.d/zz-kupdate-restore.conf", early);
	assert_int_not_equal(access(path, F_OK), 0); /* no store: nothing to wait for */
	snprintf(path, sizeof(path), "%s/demo.service", rdir);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_string_equal(text, RT_UNIT);
	free(text);
	snprintf(path, sizeof(path), "%s/done.service", rdir);
	assert_int_not_equal(access(path, F_OK), 0);
	unsetenv("KUPDATE_RUNTIME_UNIT_DIR");
	/* /tmp kept through the cycle's boot: Debian's "D /tmp" made "d" */
	snprintf(path, sizeof(path), "%s/run/tmpfiles.d/tmp.conf", rdir);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_string_equal(text, "# x\nd /tmp 1777 root root -\n#q /var/tmp 1777 root root 30d\n");
	free(text);

	/* with apply --store: the network lock, the restores and kupdate-finish
	 * wait for the store's mount */
	m->store = "/var/lib/kupdate-store/20261203T060000-0001";
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(manifest_write(dfd, m), 0);
	close(dfd);
	snprintf(early, sizeof(early), "%s/gen-store", tmpdir);
	setenv("KUPDATE_CMDLINE", "quiet kupdate.cycle=20261203T060000-0001 pid_reserve=42-43", 1);
	assert_int_equal(cmd_generator(4, argv), 0);
	expect_store_dropins(early, "RequiresMountsFor=/var/lib/kupdate-store/"
				    "20261203T060000-0001\n");
	m->store = NULL;
	unsetenv("KUPDATE_CMDLINE");
	unsetenv("KUPDATE_TMPFILES_ROOT");
	m->n_units = 1;
}

/* apply --store: the restore waits for the store's mount, a cycle's units
 * symlink takes its target with it, a manifest naming a strange store is
 * refused */
static void test_store(void **state)
{
	CycleUnit u, *pu[1];
	int32_t ids[2] = { 42, 43 };
	CycleManifest *m = sample(&u, pu, ids);
	char dir[128], store[160], cyc[160], path[256], *text, *deps;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/store-early", tmpdir);
	m->store = "/var/lib/kupdate-store/20261203T045532-7d6c";
	deps = store_unit_deps(m);
	assert_string_equal(deps,
			    "RequiresMountsFor=/var/lib/kupdate-store/20261203T045532-7d6c\n");
	assert_int_equal(write_restore_dropin(dir, "demo.service", "/usr/sbin/kupdate",
					      "20261203T045532-7d6c", false, deps, 0),
			 0);
	free(deps);
	snprintf(path, sizeof(path), "%s/demo.service.d/zz-kupdate-restore.conf", dir);
	assert_int_equal(read_file_at(AT_FDCWD, path, &text, NULL), 0);
	assert_non_null(
		strstr(text, "RequiresMountsFor=/var/lib/kupdate-store/20261203T045532-7d6c\n"));
	free(text);

	/* STORE/ID/units with an image, the cycle's units linking to it */
	snprintf(store, sizeof(store), "%s/store/20261203T045532-7d6c/units", tmpdir);
	assert_int_equal(mkdir_p(store, 0700), 0);
	snprintf(path, sizeof(path), "%s/pages-1.img", store);
	{
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

		assert_true(fd >= 0);
		close(fd);
	}
	snprintf(cyc, sizeof(cyc), "%s/cycle", tmpdir);
	assert_int_equal(mkdir_p(cyc, 0700), 0);
	snprintf(path, sizeof(path), "%s/units", cyc);
	assert_int_equal(symlink(store, path), 0);
	assert_int_equal(rm_cycle_dir(cyc), 0);
	assert_int_not_equal(access(cyc, F_OK), 0);
	assert_int_not_equal(access(store, F_OK), 0);
	snprintf(path, sizeof(path), "%s/store/20261203T045532-7d6c", tmpdir);
	assert_int_not_equal(access(path, F_OK), 0); /* STORE/ID too */
	snprintf(path, sizeof(path), "%s/store", tmpdir);
	assert_int_equal(access(path, F_OK), 0); /* not the store itself */

	m->store = "/var/lib/kupdate-store/x";
	assert_int_equal(manifest_validate(m), 0);
	m->store = "relative/x";
	assert_int_not_equal(manifest_validate(m), 0);
	m->store = "/a b\nExecStart=/bin/evil";
	assert_int_not_equal(manifest_validate(m), 0);
	m->store = NULL;
}

/* a block device of this machine, for the mount table's sources */
static const char *some_block_device(void)
{
	static const char *const cand[] = { "/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1",
					    "/dev/zram0" };
	struct stat st;

	for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++)
		if (!stat(cand[i], &st) && S_ISBLK(st.st_mode))
			return cand[i];
	return NULL;
}

static void write_str(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void expect_name(const char *path, const char *name)
{
	char *n = unit_name_from_path(path, ".mount");

	assert_string_equal(n, name);
	free(n);
}

/* a cycle is claimed by one boot: this one, again and again; not when
 * another boot has it (a symbolic link to its boot id, or the regular file
 * of earlier versions) */
static void test_claim(void **state)
{
	char dir[160], path[200], boot[64], me[64];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/cycles/20261204T030000-0004", tmpdir);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	assert_int_equal(current_boot_id(me, sizeof(me)), 0);
	assert_int_equal(cycle_claimed_by("20261204T030000-0004", boot, sizeof(boot)), 0);
	assert_string_equal(boot, "");
	assert_int_equal(cycle_claim("20261204T030000-0004"), 0);
	assert_int_equal(cycle_claim("20261204T030000-0004"), 0);
	assert_int_equal(cycle_claimed_by("20261204T030000-0004", boot, sizeof(boot)), 0);
	assert_string_equal(boot, me);
	snprintf(path, sizeof(path), "%s/claimed", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("0123-another-boot", path), 0);
	assert_int_equal(cycle_claim("20261204T030000-0004"), -EALREADY);
	assert_int_equal(unlink(path), 0);
	write_str(path, "0123-an-older-claim\n");
	assert_int_equal(cycle_claimed_by("20261204T030000-0004", boot, sizeof(boot)), 0);
	assert_string_equal(boot, "0123-an-older-claim");
	assert_int_equal(cycle_claim("20261204T030000-0004"), -EALREADY);
	assert_int_equal(rm_cycle_dir(dir), 0);
}

/* the store's file system: how it is mounted, read from the mount table
 * (a fake one here), written into the manifest, mounted by
 * kupdate-store.service in the new boot, which the generator writes */
/* the mount table shared by the store's mount and inotify's watches:
 * optional fields, escapes, lines that are not mounts */
static void test_mount_table(void **state)
{
	char info[256];
	struct mount_table t;

	(void)state;
	snprintf(info, sizeof(info), "%s/mountinfo-escapes", tmpdir);
	write_str(info, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
			"not a mount line\n"
			"30 22 0:5 /sub\\134dir /a\\040b\\011c rw master:3 propagate_from:2 - "
			"tmpfs my\\040src rw,size=4k\n"
			"31 22 7:1 / /mnt rw - \n");
	assert_int_equal(mount_table_read(info, &t), 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(t.e[0].mp, "/");
	assert_int_equal(t.e[0].maj, 254);
	assert_string_equal(t.e[0].fstype, "ext4");
	assert_string_equal(t.e[1].root, "/sub\\dir");
	assert_string_equal(t.e[1].mp, "/a b\tc");
	assert_string_equal(t.e[1].vfs, "rw");
	assert_string_equal(t.e[1].fstype, "tmpfs");
	assert_string_equal(t.e[1].source, "my src");
	assert_string_equal(t.e[1].super, "rw,size=4k");
	assert_int_equal(t.e[1].min, 5);
	mount_table_free(&t);
	assert_int_equal(mount_table_read("/nonexistent/mountinfo", &t), -ENOENT);
	/* this process's own table has its root */
	assert_int_equal(mount_table_read(NULL, &t), 0);
	assert_true(t.n > 0);
	mount_table_free(&t);
}

static void test_store_mount(void **state)
{
	CycleUnit u, *pu[1];
	int32_t ids[2] = { 42, 43 };
	CycleManifest *m = sample(&u, pu, ids), *back;
	StoreMount sm = STORE_MOUNT__INIT, *found;
	const char *dev = some_block_device(), *why;
	char mnt[128], store[160], info[160], fstab[160], text[1024], path[256], early[160],
		dir[160], *s;
	char *argv[] = { "kupdate-generator", early, early, early, NULL };
	uint64_t flags;
	struct stat st;
	int dfd;

	(void)state;
	/* mountinfo's options as mount(2)'s flags and data */
	assert_int_equal(store_mount_opts("rw,nosuid,nodev,relatime",
					  "rw,dax=always,errors=remount-ro", &flags, &s),
			 0);
	assert_int_equal(flags, MS_NOSUID | MS_NODEV | MS_RELATIME);
	assert_string_equal(s, "dax=always,errors=remount-ro");
	free(s);
	assert_int_equal(store_mount_opts("ro,noatime", "ro,sync", &flags, &s), 0);
	assert_int_equal(flags, MS_RDONLY | MS_NOATIME | MS_SYNCHRONOUS);
	assert_string_equal(s, "");
	free(s);

	/* systemd's unit names of paths */
	expect_name("/var/lib/kupdate-store", "var-lib-kupdate\\x2dstore.mount");
	expect_name("/", "-.mount");
	expect_name("//srv//img/", "srv-img.mount");
	expect_name("/.a/b c.d", "\\x2ea-b\\x20c.d.mount");

	if (!dev) {
		print_message("no block device on this machine: the mount table part skipped\n");
		return;
	}
	/* two mounts, one with a space in its mount point (\040 in mountinfo) */
	snprintf(mnt, sizeof(mnt), "%s/m nt", tmpdir);
	snprintf(store, sizeof(store), "%s/store", mnt);
	assert_int_equal(mkdir_p(store, 0700), 0);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	snprintf(store, sizeof(store), "%s/store", mnt);
	assert_int_equal(mkdir_p(store, 0700), 0);
	assert_int_equal(stat(store, &st), 0);
	snprintf(info, sizeof(info), "%s/mountinfo", tmpdir);
	snprintf(fstab, sizeof(fstab), "%s/fstab", tmpdir);
#define ROOT_LINE "1 0 %u:%u / / rw,relatime shared:1 - ext4 /dev/root rw\n"
	snprintf(text, sizeof(text),
		 ROOT_LINE
		 "2 1 %u:%u / %s/mnt rw,nosuid,relatime shared:2 - ext4 %s rw,dax=always\n"
		 "3 1 %u:%u / %s/m\\040nt rw - ext4 %s rw\n",
		 major(st.st_dev), minor(st.st_dev), major(st.st_dev), minor(st.st_dev), tmpdir,
		 dev, major(st.st_dev), minor(st.st_dev), tmpdir, dev);
	write_str(info, text);
	write_str(fstab, "# fstab\n/dev/root / ext4 defaults 0 1\n");
	snprintf(path, sizeof(path), "%s/m nt/store", tmpdir);
	assert_int_equal(store_mount_find(path, info, fstab, &found, &why), 0);
	assert_non_null(found);
	snprintf(path, sizeof(path), "%s/m nt", tmpdir);
	assert_string_equal(found->mount_point, path);
	store_mount_free(found);
	assert_int_equal(store_mount_find(store, info, fstab, &found, &why), 0);
	assert_non_null(found);
	assert_null(why);
	assert_string_equal(found->mount_point, mnt);
	assert_string_equal(found->source, dev);
	assert_string_equal(found->fstype, "ext4");
	assert_int_equal(found->flags, MS_NOSUID | MS_RELATIME);
	assert_string_equal(found->data, "dax=always");

	/* into the manifest and back, then the generator's unit (a cycle
	 * whose unit has no result yet) */
	m->id = "20261203T070000-0003";
	m->store = store;
	m->store_mount = found;
	snprintf(dir, sizeof(dir), "%s/cycles/%s", tmpdir, m->id);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(manifest_write(dfd, m), 0);
	close(dfd);
	assert_int_equal(manifest_read(m->id, &back), 0);
	assert_non_null(back->store_mount);
	assert_string_equal(back->store_mount->mount_point, mnt);
	assert_string_equal(back->store_mount->data, "dax=always");
	cycle_manifest__free_unpacked(back, NULL);
	snprintf(early, sizeof(early), "%s/gen-store-mount", tmpdir);
	snprintf(text, sizeof(text), "quiet kupdate.cycle=%s", m->id);
	setenv("KUPDATE_CMDLINE", text, 1);
	assert_int_equal(cmd_generator(4, argv), 0);
	unsetenv("KUPDATE_CMDLINE");
	snprintf(path, sizeof(path), "%s/kupdate-store.service", early);
	assert_int_equal(read_file_at(AT_FDCWD, path, &s, NULL), 0);
	snprintf(text, sizeof(text), "RequiresMountsFor=%s\n", tmpdir);
	assert_non_null(strstr(s, text));
	/* ordered before the mount unit of tmpdir/mnt */
	assert_non_null(strstr(s, "-mnt.mount kupdate-netlock.service\n"));
	assert_non_null(strstr(s, "DefaultDependencies=no\n"));
	assert_non_null(strstr(s, " mount-store\n"));
	free(s);
	expect_store_dropins(early, "Wants=kupdate-store.service\nAfter=kupdate-store.service\n");
	store_mount_free(found);
	m->store_mount = NULL;

	/* cases the new boot leaves to fstab, saying why */
	write_str(fstab, "/dev/pmem0 /elsewhere ext4 dax 0 0\n");
	snprintf(text, sizeof(text), "/dev/pmem0 %s/mnt ext4 dax 0 2\n", tmpdir);
	write_str(fstab, text);
	assert_int_equal(store_mount_find(store, info, fstab, &found, &why), 0);
	assert_null(found);
	assert_non_null(strstr(why, "check"));
	snprintf(text, sizeof(text), ROOT_LINE "2 1 %u:%u /sub %s/mnt rw shared:2 - ext4 %s rw\n",
		 major(st.st_dev), minor(st.st_dev), major(st.st_dev), minor(st.st_dev), tmpdir,
		 dev);
	write_str(info, text);
	assert_int_equal(store_mount_find(store, info, NULL, &found, &why), 0);
	assert_null(found);
	assert_non_null(strstr(why, "bind mount"));
	snprintf(text, sizeof(text), ROOT_LINE "2 1 %u:%u / %s/mnt rw shared:2 - tmpfs tmpfs rw\n",
		 major(st.st_dev), minor(st.st_dev), major(st.st_dev), minor(st.st_dev), tmpdir);
	write_str(info, text);
	assert_int_equal(store_mount_find(store, info, NULL, &found, &why), 0);
	assert_null(found);
	assert_non_null(strstr(why, "block device"));
	snprintf(text, sizeof(text), ROOT_LINE, major(st.st_dev), minor(st.st_dev));
	write_str(info, text);
	assert_int_equal(store_mount_find(store, info, NULL, &found, &why), 0);
	assert_null(found);
	assert_null(why); /* the root file system: nothing to do */
	snprintf(text, sizeof(text), ROOT_LINE, major(st.st_dev) + 1, minor(st.st_dev));
	write_str(info, text);
	assert_int_equal(store_mount_find(store, info, NULL, &found, &why), 0);
	assert_null(found);
	assert_non_null(strstr(why, "mount table"));
#undef ROOT_LINE

	/* at boot: a device that never comes is given up quickly; a mount
	 * point that is one already is left alone */
	sm.mount_point = mnt;
	sm.source = "/dev/kupdate-test-absent";
	sm.fstype = "ext4";
	assert_int_equal(store_mount_now(&sm, store, 50), -ENODEV);
	sm.mount_point = "/";
	assert_int_equal(store_mount_now(&sm, store, 50), 0);

	/* what a manifest may say */
	m->store = "/var/lib/kupdate-store/x";
	m->store_mount = &sm;
	sm.mount_point = "/var/lib/kupdate-store";
	sm.source = "/dev/pmem0";
	assert_int_equal(manifest_validate(m), 0);
	sm.mount_point = "/srv";
	assert_int_not_equal(manifest_validate(m), 0);
	sm.mount_point = "/";
	assert_int_not_equal(manifest_validate(m), 0);
	sm.mount_point = "/var/lib/kupdate-store";
	sm.source = "tmpfs";
	assert_int_not_equal(manifest_validate(m), 0);
	sm.source = "/dev/pmem0";
	m->store = NULL;
	assert_int_not_equal(manifest_validate(m), 0);
	m->store_mount = NULL;
}

/* sessions.c on a made-up cgroup tree and logind state: a scope holding a
 * child of a member is carried, whole; one holding only others is not;
 * logind's record and the FIFO's mode are kept, and the FIFO is made
 * again for the restore */
static void test_sessions(void **state)
{
	char root[160], path[320], text[900], fifo[340];
	pid_t me = getpid(), kid = fork(), *members;
	struct usessions ss = { 0 };
	CycleSession **rec = NULL;
	CycleUnit cu = CYCLE_UNIT__INIT;
	size_t nrec = 0;
	int n = 1;
	struct stat st;

	(void)state;
	if (!kid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	assert_true(kid > 0);
	snprintf(root, sizeof(root), "%s/cg", tmpdir);
	snprintf(path, sizeof(path), "%s/user.slice/user-0.slice/session-7.scope", root);
	assert_int_equal(mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/user.slice/user-0.slice/session-7.scope/cgroup.procs",
		 root);
	snprintf(text, sizeof(text), "%d\n", kid);
	put(path, text);
	snprintf(path, sizeof(path), "%s/user.slice/user-1000.slice/session-c2.scope", root);
	assert_int_equal(mkdir_p(path, 0755), 0);
	strcat(path, "/cgroup.procs");
	put(path, "1\n");
	setenv("KUPDATE_CGROUP_ROOT", root, 1);
	snprintf(path, sizeof(path), "%s/logind/sessions", tmpdir);
	assert_int_equal(mkdir_p(path, 0755), 0);
	setenv("KUPDATE_LOGIND_SESSIONS", path, 1);
	snprintf(fifo, sizeof(fifo), "%s/7.ref", path);
	assert_int_equal(mkfifo(fifo, 0620), 0);
	assert_int_equal(chmod(fifo, 0620), 0); /* past the umask */
	snprintf(text, sizeof(text),
		 "UID=0\nUSER=root\nSCOPE=session-7.scope\nFIFO=%s\nLEADER=%d\n", fifo, kid);
	strcat(path, "/7");
	put(path, text);
	snprintf(path, sizeof(path), "%s/logind/users", tmpdir);
	setenv("KUPDATE_LOGIND_USERS", path, 1);

	members = malloc(sizeof(*members));
	assert_non_null(members);
	members[0] = me;
	assert_int_equal(sessions_find(members, n, &ss), 0);
	assert_int_equal(ss.n, 1);
	assert_string_equal(ss.s[0].id, "7");
	assert_string_equal(ss.s[0].scope, "session-7.scope");
	assert_string_equal(ss.s[0].slice, "user-0.slice");
	assert_false(sessions_hold_self(&ss));
	assert_int_equal(sessions_members(&ss, &members, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(members[1], kid);
	assert_int_equal(sessions_record(&ss, members, n, &rec, &nrec), 0);
	assert_int_equal(nrec, 1);
	assert_string_equal(rec[0]->fifo, fifo);
	assert_int_equal(rec[0]->fifo_mode, 0620);
	assert_string_equal(rec[0]->description, "Session 7 of User root");
	assert_int_equal(rec[0]->n_pids, 1);
	assert_int_equal(rec[0]->pids[0], kid);
	assert_memory_equal(rec[0]->state.data, text, strlen(text));
	assert_false(rec[0]->has_user_state);

	/* the restore's side: the FIFO again, with its mode */
	unlink(fifo);
	cu.n_sessions = nrec;
	cu.sessions = rec;
	assert_int_equal(sessions_prepare(&cu), 0);
	assert_int_equal(stat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0620);

	/* members without a child there (a pid nobody has): nothing to carry */
	sessions_free(&ss);
	members[0] = 4194000;
	n = 1;
	assert_int_equal(sessions_find(members, n, &ss), 0);
	assert_int_equal(ss.n, 0);
	/* a member in the scope itself (tigervncsession's daemon, which opened
	 * the session for its own process): carried */
	members[0] = kid;
	assert_int_equal(sessions_find(members, n, &ss), 0);
	assert_int_equal(ss.n, 1);
	assert_string_equal(ss.s[0].scope, "session-7.scope");
	sessions_free(&ss);

	cycle_session__free_unpacked(rec[0], NULL);
	free(rec);
	free(members);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	unsetenv("KUPDATE_CGROUP_ROOT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pid_ranges),     cmocka_unit_test(test_cmdline),
		cmocka_unit_test(test_cmdline_covers), cmocka_unit_test(test_names),
		cmocka_unit_test(test_manifest),       cmocka_unit_test(test_manifest_damage),
		cmocka_unit_test(test_status),	       cmocka_unit_test(test_dropins),
		cmocka_unit_test(test_generator),      cmocka_unit_test(test_store),
		cmocka_unit_test(test_store_mount),    cmocka_unit_test(test_mount_table),
		cmocka_unit_test(test_claim),	       cmocka_unit_test(test_prefetch),
		cmocka_unit_test(test_sessions),
	};
	char cmd[96];
	int ret;

	cr_log_init("test_orch", CR_LOG_ERROR - 1, -1);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_orch.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	setenv("KUPDATE_STATE_DIR", tmpdir, 1);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd)) {
		/* leave it */
	}
	return ret;
}
