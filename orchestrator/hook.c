/* Following apt: /etc/kernel/postinst.d/zz-kupdate runs `kupdate
 * kernel-installed VERSION IMAGE` each time a kernel package is installed
 * (after initramfs-tools made its initrd).  It tells the operator whether
 * the new kernel can replace the running one without restarting the
 * preserved units, and with which command; with auto-apply = yes in
 * kupdate.conf it has systemd run `kupdate apply --after-apt` once apt has
 * finished.  It never fails the package's installation: it says what went
 * wrong and exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "kexec.h"
#include "kupdate.h"
#include "units.h"

extern char **environ;

const char *conf_path(void)
{
	const char *p = getenv("KUPDATE_CONF");

	return p && *p ? p : "/etc/kupdate/kupdate.conf";
}

int conf_read(struct kupdate_conf *c)
{
	FILE *f = fopen(conf_path(), "re");
	char line[512];
	int nr = 0;

	memset(c, 0, sizeof(*c));
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		char *k = line, *v, *e;

		nr++;
		k += strspn(k, " \t");
		if (*k == '#' || *k == '\n' || !*k)
			continue;
		v = strchr(k, '=');
		if (!v) {
			pr_warn("%s:%d: not 'key = value': ignored", conf_path(), nr);
			continue;
		}
		for (e = v; e > k && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*e = 0;
		v++;
		v += strspn(v, " \t");
		v[strcspn(v, " \t\n#")] = 0;
		if (!strcmp(k, "auto-apply")) {
			if (!strcmp(v, "yes"))
				c->auto_apply = true;
			else if (strcmp(v, "no"))
				pr_warn("%s:%d: auto-apply is yes or no, not '%s': taken as no",
					conf_path(), nr, v);
		} else {
			pr_warn("%s:%d: unknown setting '%s': ignored", conf_path(), nr, k);
		}
	}
	fclose(f);
	return 0;
}

/* `kupdate check --json IMAGE` run as a child, at most 60 s: its verdict
 * (cycle_possible) and what it says is missing, here or in the target */
static int check_image(const char *image, bool *possible, char *missing, size_t len)
{
	char self[PATH_MAX], *argv[] = { "kupdate", "check", "--json", (char *)image, NULL };
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	posix_spawn_file_actions_t fa;
	_cleanup_free_ char *out = NULL;
	size_t olen = 0, ocap = 0;
	int pfd[2], st = 0, ret = 0;
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + 60LL * 1000000000LL;
	json_object *root, *a;
	pid_t pid;

	*possible = false;
	missing[0] = 0;
	if (sl < 0 || pipe2(pfd, O_CLOEXEC))
		return -errno;
	self[sl] = 0;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	ret = -posix_spawn(&pid, self, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (ret) {
		close(pfd[0]);
		return ret;
	}
	for (;;) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		int64_t left = (deadline - now_ns(CLOCK_MONOTONIC)) / 1000000;
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			pr_err("kupdate check %s did not answer within 60 s", image);
			kill(pid, SIGKILL);
			ret = -ETIMEDOUT;
			break;
		}
		if (olen + 4096 > ocap) {
			char *no = realloc(out, ocap + 65536);

			if (!no) {
				ret = -ENOMEM;
				kill(pid, SIGKILL);
				break;
			}
			out = no;
			ocap += 65536;
		}
		n = read(pfd[0], out + olen, ocap - olen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		olen += n;
	}
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (ret)
		return ret;
	if (!out)
		return -EIO;
	out[olen] = 0;
	root = json_tokener_parse(out);
	if (!root)
		return -EBADMSG;
	if (json_object_object_get_ex(root, "cycle_possible", &a))
		*possible = json_object_get_boolean(a);
	if (json_object_object_get_ex(root, "missing", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			size_t l = strlen(missing);

			snprintf(missing + l, len - l, "%s%s", l ? ", " : "",
				 json_object_get_string(json_object_array_get_idx(a, i)));
		}
	json_object_put(root);
	return 0;
}

/* systemd runs `kupdate apply --after-apt` (the newest kernel installed)
 * a moment from now, as a transient unit */
static int schedule_apply(void)
{
	const char *run =
		getenv("KUPDATE_SYSTEMD_RUN") ? getenv("KUPDATE_SYSTEMD_RUN") : "systemd-run";
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *argv[] = { (char *)run,
			 "--unit=kupdate-auto-apply",
			 "--description=kupdate: the kernel update apt installed, once apt is done",
			 "--on-active=10s",
			 "--timer-property=AccuracySec=1s",
			 self,
			 "apply",
			 "--after-apt",
			 NULL };
	pid_t pid;
	int st = 0, ret;

	if (n < 0)
		return -errno;
	self[n] = 0;
	ret = -posix_spawnp(&pid, run, NULL, NULL, argv, environ);
	if (ret) {
		pr_err("cannot run %s: %s", run, strerror(-ret));
		return ret;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		pr_err("%s failed (%#x): is an automatic apply already scheduled "
		       "(systemctl list-timers kupdate-auto-apply)?",
		       run, st);
		return -EIO;
	}
	return 0;
}

static void usage_hook(FILE *f)
{
	fputs("usage: kupdate kernel-installed VERSION [IMAGE]\n"
	      "What /etc/kernel/postinst.d/zz-kupdate runs when a kernel package is\n"
	      "installed: says whether kernel VERSION (IMAGE, default /boot/vmlinuz-VERSION)\n"
	      "can replace the running one without restarting the preserved units, and\n"
	      "with which command; with auto-apply = yes in /etc/kupdate/kupdate.conf,\n"
	      "has systemd run 'kupdate apply --after-apt' once apt has finished.\n"
	      "Exits 0 whatever it finds: it never fails a package's installation.\n",
	      f);
}

int cmd_kernel_installed(int argc, char **argv)
{
	_cleanup_free_ char *image = NULL, *next = NULL, *next_initrd = NULL, *next_rel = NULL;
	char missing[1024], names[1024] = "";
	struct kupdate_conf conf;
	struct utsname un;
	char **units = NULL;
	bool possible;
	int n = 0, ret;

	if (argc < 2 || argc > 3 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage_hook(argc < 2 || argc > 3 ? stderr : stdout);
		return argc < 2 || argc > 3 ? 2 : 0;
	}
	uname(&un);
	if (!strcmp(argv[1], un.release))
		return 0; /* the running kernel, installed again */
	image = argc > 2 ? xstrdup(argv[2]) : xasprintf("%s/vmlinuz-%s", boot_dir(), argv[1]);
	if (!image)
		return 0;
	ret = conf_read(&conf);
	if (ret)
		pr_warn("cannot read %s: %s; auto-apply is off", conf_path(), strerror(-ret));
	if (preserved_units(&units, &n) || !n) {
		printf("kupdate: linux %s installed; no unit is preserved across kernel updates "
		       "(kupdate enable UNIT): nothing for kupdate to do\n",
		       argv[1]);
		strv_free(units, n);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		size_t l = strlen(names);

		snprintf(names + l, sizeof(names) - l, "%s%s", i ? ", " : "", units[i]);
	}
	strv_free(units, n);
	printf("kupdate: linux %s installed; %d unit%s preserved across kernel updates (%s)\n",
	       argv[1], n, n == 1 ? " is" : "s are", names);
	if (!next_kernel(&next, &next_initrd, &next_rel, false) && strcmp(next, image))
		printf("kupdate: note: it is not the newest kernel installed: kupdate apply "
		       "would update into %s\n",
		       next_rel);
	ret = check_image(image, &possible, missing, sizeof(missing));
	if (ret) {
		printf("kupdate: cannot check %s (%s): run kupdate check %s\n", image,
		       strerror(-ret), image);
		return 0;
	}
	if (!possible) {
		printf("kupdate: it cannot replace the running kernel without restarting them: "
		       "%s missing (kupdate check %s says why); reboot as usual, or fix that "
		       "and run kupdate apply\n",
		       missing[0] ? missing : "interfaces", image);
		if (conf.auto_apply)
			printf("kupdate: auto-apply is on (%s), but nothing was scheduled\n",
			       conf_path());
		return 0;
	}
	printf("kupdate: it can replace the running kernel without restarting them: run "
	       "'kupdate apply' when you choose ('kupdate list' checks each unit now)\n");
	if (!conf.auto_apply)
		return 0;
	if (schedule_apply())
		printf("kupdate: auto-apply is on (%s), but the apply could not be scheduled: "
		       "run kupdate apply yourself\n",
		       conf_path());
	else
		printf("kupdate: auto-apply is on (%s): kupdate apply runs once apt has "
		       "finished (journalctl -u kupdate-auto-apply)\n",
		       conf_path());
	return 0;
}

int wait_after_apt(int timeout_s)
{
	const char *lock = getenv("KUPDATE_DPKG_LOCK") ? getenv("KUPDATE_DPKG_LOCK")
						       : "/var/lib/dpkg/lock-frontend";
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t)timeout_s * 1000000000LL;
	_cleanup_close_ int fd = open(lock, O_RDONLY | O_CLOEXEC);
	bool said = false;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		if (fcntl(fd, F_GETLK, &fl))
			return -errno;
		if (fl.l_type == F_UNLCK)
			return 0;
		if (now_ns(CLOCK_MONOTONIC) > deadline) {
			pr_err("apt or dpkg (pid %d) still holds %s after %d s: not applying",
			       fl.l_pid, lock, timeout_s);
			return -ETIMEDOUT;
		}
		if (!said)
			printf("kupdate: waiting for apt or dpkg (pid %d, holding %s) to finish, "
			       "at most %d s\n",
			       fl.l_pid, lock, timeout_s);
		said = true;
		usleep(500000);
	}
}
