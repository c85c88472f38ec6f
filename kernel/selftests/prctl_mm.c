// SPDX-License-Identifier: GPL-2.0
/*
 * PR_SET_MM / PR_SET_MM_MAP: start_brk, arg and env areas, auxv; and the
 * /proc/PID/stat fields, /proc/PID/cmdline, environ and auxv that show them.
 */
#include "ktap.h"
#include "util.h"
#include <elf.h>
#include <linux/prctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>

/* /proc/self/stat fields 4..nf-1 into f[], 1-based as in proc(5); returns the last field read */
static int stat_fields(unsigned long *f, int nf)
{
	char buf[2048], *p;
	int i;

	if (read_file("/proc/self/stat", buf, sizeof(buf)) <= 0)
		return -1;
	p = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
	if (!p || strlen(p) < 4)
		return -1;
	p += 4; /* ") S " */
	for (i = 4; i < nf && *p && *p != '\n'; i++)
		f[i] = strtoul(p, &p, 10);
	return i - 1;
}

static int fill_map(struct prctl_mm_map *m)
{
	unsigned long f[64] = { 0 };

	if (stat_fields(f, 53) < 52)
		return -1;
	memset(m, 0, sizeof(*m));
	m->start_code = f[26];
	m->end_code = f[27];
	m->start_stack = f[28];
	m->start_data = f[45];
	m->end_data = f[46];
	m->start_brk = f[47];
	m->brk = syscall(SYS_brk, 0);
	m->arg_start = f[48];
	m->arg_end = f[49];
	m->env_start = f[50];
	m->env_end = f[51];
	m->exe_fd = -1;
	return 0;
}

int main(void)
{
	static const char args0[] = "kupdate\0--restored\0";
	static const char env0[] = "KUPDATE=1\0CYCLE=42\0";
	char *args, *env;
	unsigned long f[64] = { 0 }, auxv[64], newauxv[64];
	struct prctl_mm_map m;
	unsigned int size = 0;
	char buf[4096];
	ssize_t n;
	int ret, i;

	ktap_plan(8);

	/* the kernel reads cmdline and environ only from anonymous memory (FOLL_ANON) */
	args = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (args == MAP_FAILED)
		ktap_bail("mmap");
	memcpy(args, args0, sizeof(args0));
	env = args + 1024;
	memcpy(env, env0, sizeof(env0));

	ret = prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, (unsigned long)&size, 0, 0);
	ktap_ok(ret == 0 && size == sizeof(struct prctl_mm_map),
		"PR_SET_MM_MAP_SIZE is sizeof(struct prctl_mm_map) (%u)", size);

	/* start_brk: grow the heap by two pages, move start_brk up by one */
	if (fill_map(&m))
		ktap_bail("/proc/self/stat");
	if (syscall(SYS_brk, m.brk + 2 * 4096) != (long)(m.brk + 2 * 4096))
		ktap_bail("brk");
	m.brk += 2 * 4096;
	m.start_brk = (m.start_brk + 4096) & ~4095UL;
	ret = prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&m, sizeof(m), 0);
	ktap_ok(ret == 0, "PR_SET_MM_MAP with a new start_brk (%s)", ret ? strerror(errno) : "ok");
	stat_fields(f, 53);
	ktap_ok(f[47] == m.start_brk, "/proc/self/stat field 47 (start_brk) is %#llx (%#lx)",
		(unsigned long long)m.start_brk, f[47]);

	/* arg and env areas */
	fill_map(&m);
	m.arg_start = (unsigned long)args;
	m.arg_end = (unsigned long)args + sizeof(args0) - 1;
	m.env_start = (unsigned long)env;
	m.env_end = (unsigned long)env + sizeof(env0) - 1;
	ret = prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&m, sizeof(m), 0);
	ktap_ok(ret == 0, "PR_SET_MM_MAP with new arg and env areas (%s)",
		ret ? strerror(errno) : "ok");
	stat_fields(f, 53);
	ktap_ok(f[48] == m.arg_start && f[49] == m.arg_end && f[50] == m.env_start &&
			f[51] == m.env_end,
		"/proc/self/stat fields 48-51 (arg_start..env_end) follow");
	n = read_file("/proc/self/cmdline", buf, sizeof(buf));
	ktap_ok(n == sizeof(args0) - 1 && !memcmp(buf, args, n),
		"/proc/self/cmdline shows the new arguments (%zd bytes, '%s')", n, buf);
	n = read_file("/proc/self/environ", buf, sizeof(buf));
	ktap_ok(n == sizeof(env0) - 1 && !memcmp(buf, env, n),
		"/proc/self/environ shows the new environment (%zd bytes, '%s')", n, buf);

	/* auxv: the same vector with AT_HWCAP2 (or the first entry) changed */
	n = read_file("/proc/self/auxv", (char *)auxv, sizeof(auxv));
	if (n <= 0 || n % (2 * sizeof(long)))
		ktap_bail("/proc/self/auxv");
	memcpy(newauxv, auxv, n);
	for (i = 0; newauxv[i] != AT_NULL && i < 62; i += 2)
		if (newauxv[i] == AT_HWCAP2 || newauxv[i] == AT_CLKTCK)
			break;
	newauxv[i + 1] ^= 0x5a5a;
	fill_map(&m);
	m.auxv = (__u64 *)newauxv;
	m.auxv_size = n;
	ret = prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&m, sizeof(m), 0);
	{
		unsigned long seen[64];
		ssize_t sn = read_file("/proc/self/auxv", (char *)seen, sizeof(seen));

		ktap_ok(ret == 0 && sn >= n && !memcmp(seen, newauxv, n),
			"PR_SET_MM_MAP auxv: /proc/self/auxv shows the new vector (%s)",
			ret ? strerror(errno) : "ok");
	}

	return ktap_finish();
}
