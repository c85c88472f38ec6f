/* Loading the new kernel (kexec_file_load), its command line, the pid
 * reservation it carries (pid_reserve=, kernel/README.md), and the jump. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "kexec.h"
#include "sd.h"

#ifndef KEXEC_FILE_UNLOAD
#define KEXEC_FILE_UNLOAD	0x00000001
#define KEXEC_FILE_NO_INITRAMFS 0x00000004
#endif

int kexec_load_kernel(const char *kernel, const char *initrd, const char *cmdline)
{
	_cleanup_close_ int kfd = open(kernel, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int ifd = initrd ? open(initrd, O_RDONLY | O_CLOEXEC) : -1;
	long r;

	if (kfd < 0) {
		int ret = -errno;
		pr_perror("cannot open the kernel %s", kernel);
		return ret;
	}
	if (initrd && ifd < 0) {
		int ret = -errno;
		pr_perror("cannot open the initrd %s", initrd);
		return ret;
	}
	r = syscall(SYS_kexec_file_load, kfd, ifd, strlen(cmdline) + 1, cmdline,
		    initrd ? 0 : KEXEC_FILE_NO_INITRAMFS);
	if (r) {
		int ret = -errno;

		if (errno == ENOSYS)
			pr_err("this kernel cannot kexec (no CONFIG_KEXEC_FILE)");
		else if (errno == ENOEXEC)
			pr_err("%s is not a kernel image this kernel can load", kernel);
		else if (errno == EKEYREJECTED || errno == EPERM)
			pr_err("the kernel refuses to load %s: %s (unsigned image under lockdown "
			       "or "
			       "secure boot?)",
			       kernel, strerror(errno));
		else
			pr_err("cannot load the kernel %s: %s", kernel, strerror(errno));
		return ret;
	}
	return 0;
}

void kexec_unload(void)
{
	syscall(SYS_kexec_file_load, -1, -1, 0, NULL, KEXEC_FILE_UNLOAD);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

char *pid_ranges(pid_t *ids, size_t n)
{
	struct {
		pid_t a, b;
	} r[4096];
	size_t nr = 0, len = 0;
	char *out;

	if (!n)
		return xstrdup("");
	qsort(ids, n, sizeof(*ids), cmp_pid);
	for (size_t i = 0; i < n; i++) {
		if (nr && ids[i] <= r[nr - 1].b + 1) {
			if (ids[i] > r[nr - 1].b)
				r[nr - 1].b = ids[i];
			continue;
		}
		if (nr == ARRAY_SIZE(r)) {
			r[nr - 1].b = ids[n - 1];
			break;
		}
		r[nr].a = r[nr].b = ids[i];
		nr++;
	}
	/* the kernel takes 32 ranges: join the two closest until it fits */
	while (nr > 32) {
		size_t best = 1;

		for (size_t i = 1; i < nr; i++)
			if (r[i].a - r[i - 1].b < r[best].a - r[best - 1].b)
				best = i;
		r[best - 1].b = r[best].b;
		memmove(&r[best], &r[best + 1], (nr - best - 1) * sizeof(r[0]));
		nr--;
	}
	out = malloc(nr * 24 + 1);
	if (!out)
		return NULL;
	out[0] = 0;
	for (size_t i = 0; i < nr; i++)
		len += sprintf(out + len, i ? ",%d-%d" : "%d-%d", r[i].a, r[i].b);
	return out;
}

/* The command line of the new kernel: ours (--append), or the running one's
 * without a previous cycle's parameters, plus the cycle and the pids. */
char *kexec_cmdline(const char *append, const char *cycle, const char *reserve)
{
	_cleanup_free_ char *cur = NULL;
	char *out, *tok, *save = NULL;
	size_t cap, len = 0;

	if (append) {
		cur = xstrdup(append);
	} else if (read_file_at(AT_FDCWD, "/proc/cmdline", &cur, NULL)) {
		pr_err("cannot read the running kernel's command line");
		return NULL;
	}
	if (!cur)
		return NULL;
	cap = strlen(cur) + 256 + (reserve ? strlen(reserve) : 0);
	out = malloc(cap);
	if (!out)
		return NULL;
	out[0] = 0;
	for (tok = strtok_r(cur, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		if (!append &&
		    (!strncmp(tok, "kupdate.cycle=", 14) || !strncmp(tok, "pid_reserve=", 12) ||
		     !strncmp(tok, "BOOT_IMAGE=", 11)))
			continue;
		len += snprintf(out + len, cap - len, "%s%s", len ? " " : "", tok);
	}
	if (cycle)
		len += snprintf(out + len, cap - len, "%skupdate.cycle=%s", len ? " " : "", cycle);
	if (reserve && *reserve)
		len += snprintf(out + len, cap - len, " pid_reserve=%s", reserve);
	return out;
}

/* "a-b,c" into ranges; their count, or -1 */
static int parse_ranges(const char *s, long (*r)[2], int max)
{
	int n = 0;

	while (s && *s && *s != ' ') {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s || n == max)
			return -1;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		r[n][0] = a;
		r[n++][1] = b;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* the command line without its pid_reserve=, and that token's value */
static char *split_reserve(const char *cmdline, const char **reserve)
{
	char *c = xstrdup(cmdline), *p;

	*reserve = NULL;
	if (!c)
		return NULL;
	p = strstr(c, " pid_reserve=");
	if (p) {
		char *end = strchr(p + 1, ' ');

		*reserve = cmdline + (p - c) + 13;
		memmove(p, end ? end : p + strlen(p), strlen(end ? end : p + strlen(p)) + 1);
	}
	return c;
}

bool cmdline_covers(const char *a, const char *b)
{
	const char *ra, *rb;
	_cleanup_free_ char *ca = split_reserve(a, &ra), *cb = split_reserve(b, &rb);
	long x[64][2], y[64][2];
	int nx, ny;

	if (!ca || !cb || strcmp(ca, cb))
		return false;
	if (!rb)
		return true;
	nx = ra ? parse_ranges(ra, x, 64) : 0;
	ny = parse_ranges(rb, y, 64);
	if (nx < 0 || ny < 0)
		return false;
	for (int j = 0; j < ny; j++) {
		bool in = false;

		for (int i = 0; i < nx && !in; i++)
			in = y[j][0] >= x[i][0] && y[j][1] <= x[i][1];
		if (!in)
			return false;
	}
	return true;
}

int kexec_now(struct sd *s, bool fast)
{
	sync();
	if (fast) {
		/* nothing else is stopped: the jump is immediate */
		reboot(LINUX_REBOOT_CMD_KEXEC);
		pr_perror("kexec failed");
		return -errno;
	}
	/* systemd stops the rest of the system cleanly, then jumps */
	return sd_start(s, "kexec.target", "replace-irreversibly");
}

const char *boot_dir(void)
{
	const char *d = getenv("KUPDATE_BOOT_DIR");

	return d && *d ? d : "/boot";
}

int next_kernel(char **kernel, char **initrd, char **release, bool say)
{
	const char *dir = boot_dir();
	_cleanup_free_ char *best = NULL;
	struct utsname un;
	struct dirent *de;
	DIR *d;

	*kernel = *initrd = *release = NULL;
	d = opendir(dir);
	if (!d) {
		int ret = -errno;

		pr_perror("cannot read %s to find the newest kernel installed", dir);
		return ret;
	}
	while ((de = readdir(d))) {
		const char *r = de->d_name + 8;
		_cleanup_free_ char *p = NULL;
		struct stat st;

		/* not vmlinuz.old and the like, nor an image of ours */
		if (strncmp(de->d_name, "vmlinuz-", 8) || !*r || strstr(r, ".dpkg-") ||
		    strstr(r, ".bak"))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		if (!p || stat(p, &st) || !S_ISREG(st.st_mode))
			continue;
		if (!best || strverscmp(r, best) > 0) {
			free(best);
			best = xstrdup(r);
		}
	}
	closedir(d);
	uname(&un);
	if (!best || strverscmp(best, un.release) <= 0) {
		if (say)
			pr_err("no kernel newer than the running one (%s) is installed in %s%s%s: "
			       "name the kernel to update into (kupdate apply VMLINUZ)",
			       un.release, dir, best ? "; the newest is " : "", best ? best : "");
		return -ENOENT;
	}
	*kernel = xasprintf("%s/vmlinuz-%s", dir, best);
	*initrd = xasprintf("%s/initrd.img-%s", dir, best);
	if (*initrd && access(*initrd, R_OK)) {
		free(*initrd);
		*initrd = NULL;
	}
	*release = take_ptr(&best);
	return *kernel ? 0 : -ENOMEM;
}
