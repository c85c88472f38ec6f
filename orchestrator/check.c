/* kupdate check: the kernel interfaces an update cycle needs, probed on the
 * running kernel (each by using it on something of our own: a child we
 * fork, sockets on the loopback, our own memory), and for a kernel image or
 * config given as argument, what its configuration enables.
 *
 * Nothing is changed: the network lock's ruleset goes to the kernel in
 * nftables' check mode, kexec_file_load is called with flags it must refuse
 * before it reads anything, clone3 asks for a pid that is taken. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-check.h"
#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "kexec.h"
#include "kimage.h"
#include "kupdate.h"
#include "term.h"
#include "units.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef PR_SET_MM
#define PR_SET_MM 35
#endif
#ifndef PR_SET_MM_MAP_SIZE
#define PR_SET_MM_MAP_SIZE 15
#endif
#ifndef TCP_REPAIR_WINDOW
#define TCP_REPAIR_WINDOW 29
#endif
#ifndef SO_PEEK_OFF
#define SO_PEEK_OFF 42
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

typedef int (*probe_fn)(char *d, size_t len);

#define OK(...)	     (snprintf(d, len, __VA_ARGS__), 0)
#define MISSING(...) (snprintf(d, len, __VA_ARGS__), -1)

/* ------------------------------------------------------------ probes */

static int p_caps(char *d, size_t len)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct c[2];
	static const struct {
		int cap;
		const char *name;
	} need[] = {
		{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE" },
		{ CAP_NET_ADMIN, "CAP_NET_ADMIN" },
		{ CAP_SYS_BOOT, "CAP_SYS_BOOT" },
		{ CAP_KILL, "CAP_KILL" },
	};
	char miss[160] = "";
	bool cr;

	if (syscall(SYS_capget, &h, c))
		return MISSING("capget: %s", strerror(errno));
#define HAS(cap) (!!(c[(cap) / 32].effective & (1U << ((cap) % 32))))
	cr = HAS(CAP_SYS_ADMIN) || HAS(CAP_CHECKPOINT_RESTORE);
	for (size_t i = 0; i < ARRAY_SIZE(need); i++)
		if (!HAS(need[i].cap))
			snprintf(miss + strlen(miss), sizeof(miss) - strlen(miss), " %s",
				 need[i].name);
	if (!cr)
		snprintf(miss + strlen(miss), sizeof(miss) - strlen(miss),
			 " CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE");
#undef HAS
	if (miss[0])
		return MISSING("this process lacks%s (run kupdate as root)", miss);
	return OK("CAP_SYS_PTRACE, CAP_NET_ADMIN, CAP_SYS_BOOT, CAP_KILL, %s",
		  c[0].effective & (1U << CAP_SYS_ADMIN) ? "CAP_SYS_ADMIN"
							 : "CAP_CHECKPOINT_RESTORE");
}

/* a child of ours that waits to be killed */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
			;
	}
}

static int p_ptrace(char *d, size_t len)
{
	pid_t pid = sleeper();
	int st, ret;

	if (pid < 0)
		return MISSING("fork: %s", strerror(errno));
	if (ptrace(PTRACE_SEIZE, pid, 0, 0)) {
		ret = errno;
		reap(pid);
		return MISSING("PTRACE_SEIZE of a child: %s%s", strerror(ret),
			       ret == EPERM ? " (Yama ptrace_scope, or no CAP_SYS_PTRACE)" : "");
	}
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0)) {
		ret = errno;
		reap(pid);
		return MISSING("PTRACE_INTERRUPT: %s", strerror(ret));
	}
	ret = waitpid(pid, &st, __WALL);
	reap(pid);
	if (ret != pid || !WIFSTOPPED(st) || (st >> 16) != PTRACE_EVENT_STOP)
		return MISSING("PTRACE_INTERRUPT did not stop the child in a group stop");
	return OK("PTRACE_SEIZE and PTRACE_INTERRUPT stop a child");
}

static int p_map_files(char *d, size_t len)
{
	_cleanup_free_ char *maps = NULL;
	char path[96], target[256];
	unsigned long a, b;
	ssize_t n;

	if (read_file_at(AT_FDCWD, "/proc/self/maps", &maps, NULL) ||
	    sscanf(maps, "%lx-%lx", &a, &b) != 2)
		return MISSING("cannot read /proc/self/maps");
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", a, b);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return MISSING("readlink %s: %s%s", path, strerror(errno),
			       errno == ENOENT ? " (no CONFIG_CHECKPOINT_RESTORE)" : "");
	return OK("/proc/PID/map_files links are readable");
}

static int p_kcmp(char *d, size_t len)
{
	_cleanup_close_ int a = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int b = a >= 0 ? fcntl(a, F_DUPFD_CLOEXEC, 0) : -1;
	_cleanup_close_ int c = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	pid_t me = getpid();
	long same, diff;

	if (a < 0 || b < 0 || c < 0)
		return MISSING("cannot open test files: %s", strerror(errno));
	same = syscall(SYS_kcmp, me, me, KCMP_FILE, a, b);
	if (same < 0)
		return MISSING("kcmp(KCMP_FILE): %s%s", strerror(errno),
			       errno == ENOSYS ? " (no CONFIG_KCMP / CONFIG_CHECKPOINT_RESTORE)"
					       : "");
	diff = syscall(SYS_kcmp, me, me, KCMP_FILE, a, c);
	if (same != 0 || diff == 0)
		return MISSING("kcmp(KCMP_FILE) gives wrong answers (%ld, %ld)", same, diff);
	return OK("kcmp tells shared files apart");
}

/* clone3's arguments up to set_tid_size (kernel 5.5) */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size;
};

static int p_set_tid(char *d, size_t len)
{
	pid_t want = getpid(); /* taken: the kernel must say EEXIST */
	struct clone_args_v2 ca = { .exit_signal = SIGCHLD,
				    .set_tid = (uintptr_t)&want,
				    .set_tid_size = 1 };
	long r = syscall(SYS_clone3, &ca, sizeof(ca));

	if (r == 0)
		_exit(0); /* cannot happen: the pid is ours */
	if (r > 0) {
		reap(r);
		return MISSING("clone3 with set_tid gave pid %ld instead of refusing a taken one",
			       r);
	}
	if (errno == EEXIST)
		return OK("clone3 with set_tid chooses the pid (a taken one is refused)");
	if (errno == ENOSYS)
		return MISSING("no clone3 (kernel older than 5.3)");
	if (errno == E2BIG || errno == EINVAL)
		return MISSING("clone3 has no set_tid (kernel older than 5.5)");
	if (errno == EPERM)
		return MISSING("clone3 set_tid: EPERM (needs CAP_SYS_ADMIN or "
			       "CAP_CHECKPOINT_RESTORE in the pid namespace's owner)");
	return MISSING("clone3 with set_tid: %s", strerror(errno));
}

static bool has_cap(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct c[2];

	return !syscall(SYS_capget, &h, c) && (c[cap / 32].effective & (1U << (cap % 32)));
}

static int p_ns_last_pid(char *d, size_t len)
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return MISSING("/proc/sys/kernel/ns_last_pid: %s", strerror(errno));
	/* the kernel checks the capability at write time; writing would move
	 * the pid allocator of the whole machine */
	if (!has_cap(CAP_SYS_ADMIN) && !has_cap(CAP_CHECKPOINT_RESTORE))
		return MISSING("/proc/sys/kernel/ns_last_pid is there, but writing it needs "
			       "CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE");
	return OK("/proc/sys/kernel/ns_last_pid is there, and this process may write it");
}

static int p_pid_reserve(char *d, size_t len)
{
	_cleanup_free_ char *v = NULL;

	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/pid_reserve", &v, NULL))
		return MISSING("no /proc/sys/kernel/pid_reserve (kupdate's kernel patch)");
	v[strcspn(v, "\n")] = 0;
	return OK("kernel.pid_reserve is there (now: %s)", *v ? v : "nothing reserved");
}

static int p_set_mm(char *d, size_t len)
{
	unsigned int size = 0;

	if (prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, &size, 0, 0))
		return MISSING("prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE): %s%s", strerror(errno),
			       errno == EINVAL ? " (no CONFIG_CHECKPOINT_RESTORE)" : "");
	return OK("prctl(PR_SET_MM_MAP) is there (struct of %u bytes)", size);
}

static int loopback_pair(int *l, int *c, int *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	*l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*a = -1;
	if (*l < 0 || *c < 0 || bind(*l, (struct sockaddr *)&sa, sizeof(sa)) || listen(*l, 1) ||
	    getsockname(*l, (struct sockaddr *)&sa, &sl) ||
	    connect(*c, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	*a = accept4(*l, NULL, NULL, SOCK_CLOEXEC);
	return *a < 0 ? -errno : 0;
}

static int p_tcp_repair(char *d, size_t len)
{
	_cleanup_close_ int l = -1, c = -1, a = -1;
	struct tcp_repair_window w;
	socklen_t wl = sizeof(w), sl;
	int on = 1, q = TCP_SEND_QUEUE, ret;
	unsigned seq;

	ret = loopback_pair(&l, &c, &a);
	if (ret)
		return MISSING("cannot set up a loopback connection: %s", strerror(-ret));
	if (setsockopt(c, SOL_TCP, TCP_REPAIR, &on, sizeof(on)))
		return MISSING("TCP_REPAIR: %s%s", strerror(errno),
			       errno == EPERM ? " (needs CAP_NET_ADMIN)" : "");
	sl = sizeof(seq);
	if (setsockopt(c, SOL_TCP, TCP_REPAIR_QUEUE, &q, sizeof(q)) ||
	    getsockopt(c, SOL_TCP, TCP_QUEUE_SEQ, &seq, &sl))
		return MISSING("TCP_REPAIR_QUEUE/TCP_QUEUE_SEQ: %s", strerror(errno));
	if (getsockopt(c, SOL_TCP, TCP_REPAIR_WINDOW, &w, &wl))
		return MISSING("TCP_REPAIR_WINDOW: %s (kernel older than 4.8)", strerror(errno));
	/* closed in repair mode: the socket goes without a FIN */
	return OK("TCP_REPAIR, TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ, TCP_REPAIR_WINDOW on a loopback "
		  "connection");
}

static int p_peek_off(char *d, size_t len)
{
	int sv[2] = { -1, -1 }, off = 1;
	char buf[4] = "";
	ssize_t n = -1;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return MISSING("socketpair: %s", strerror(errno));
	if (write(sv[0], "ab", 2) == 2 &&
	    !setsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off)))
		n = recv(sv[1], buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	close(sv[0]);
	close(sv[1]);
	if (n != 1 || buf[0] != 'b')
		return MISSING("SO_PEEK_OFF on a unix stream socket does not peek at an offset");
	return OK("SO_PEEK_OFF peeks into a unix socket's queue");
}

static int p_sock_diag(char *d, size_t len)
{
	_cleanup_close_ int l = -1, c = -1, a = -1;
	int sv[2] = { -1, -1 }, ret;
	struct stat su, si;
	ino_t ino[2];
	bool seen[2];

	ret = loopback_pair(&l, &c, &a);
	if (ret)
		return MISSING("cannot set up a loopback connection: %s", strerror(-ret));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return MISSING("socketpair: %s", strerror(errno));
	fstat(sv[0], &su);
	fstat(c, &si);
	ino[0] = su.st_ino;
	ino[1] = si.st_ino;
	cr_log_mark();
	ret = cr_check_sock_diag(ino, 2, seen);
	close(sv[0]);
	close(sv[1]);
	if (ret)
		return MISSING("%s", cr_log_first_error() ?: strerror(-ret));
	if (!seen[0] || !seen[1])
		return MISSING("sock_diag does not list our own %s socket (CONFIG_%s)",
			       seen[0] ? "TCP" : "unix", seen[0] ? "INET_DIAG" : "UNIX_DIAG");
	return OK("sock_diag lists unix and TCP sockets (netlink, libnl-3)");
}

static int p_memfd(char *d, size_t len)
{
	int fd = memfd_create("kupdate-check", MFD_CLOEXEC);

	if (fd < 0)
		return MISSING("memfd_create: %s", strerror(errno));
	close(fd);
	return OK("memfd_create");
}

static int p_pagemap(char *d, size_t len)
{
	_cleanup_close_ int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	volatile char page[4096] __attribute__((aligned(4096)));
	uint64_t e;

	page[0] = 1;
	if (fd < 0)
		return MISSING("/proc/self/pagemap: %s", strerror(errno));
	if (pread(fd, &e, 8, (uintptr_t)page / 4096 * 8) != 8)
		return MISSING("reading /proc/self/pagemap: %s", strerror(errno));
	if (!(e & (1ULL << 63)))
		return MISSING("/proc/self/pagemap does not show a present page");
	return OK("/proc/PID/pagemap shows present pages");
}

static int p_pagemap_scan(char *d, size_t len)
{
	int ret = cr_check_pagemap_scan();

	if (ret < 0)
		return MISSING("ioctl(PAGEMAP_SCAN): %s (kernel older than 6.7)", strerror(-ret));
	if (ret == 0)
		return MISSING("PAGEMAP_SCAN misses a present page");
	return OK("ioctl(PAGEMAP_SCAN) finds present pages");
}

static int p_soft_dirty(char *d, size_t len)
{
	_cleanup_close_ int cr = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	_cleanup_close_ int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t before = 0, after = 0;
	int ret;

	if (p == MAP_FAILED)
		return MISSING("mmap: %s", strerror(errno));
	p[0] = 1;
	if (cr < 0 || pm < 0 || write(cr, "4", 1) != 1) {
		ret = errno;
		munmap(p, 4096);
		return MISSING("cannot clear the soft-dirty bits: %s", strerror(ret));
	}
	if (pread(pm, &before, 8, (uintptr_t)p / 4096 * 8) != 8)
		before = 1ULL << 55;
	p[0] = 2;
	if (pread(pm, &after, 8, (uintptr_t)p / 4096 * 8) != 8)
		after = 0;
	munmap(p, 4096);
	if ((before & (1ULL << 55)) || !(after & (1ULL << 55)))
		return MISSING(
			"a written page is not marked soft-dirty (no CONFIG_MEM_SOFT_DIRTY)");
	return OK("clear_refs 4 and the pagemap soft-dirty bit track writes");
}

static int p_uffd_wp(char *d, size_t len)
{
	int ret = cr_uffd_wp_async();

	if (ret == -ENOSYS)
		return MISSING("no userfaultfd (no CONFIG_USERFAULTFD)");
	if (ret)
		return MISSING("userfaultfd without asynchronous write-protection (kernel 6.7+): "
			       "%s",
			       strerror(-ret));
	return OK("userfaultfd with asynchronous write-protection tracks writes");
}

static int p_timens(char *d, size_t len)
{
	pid_t pid;
	int st;

	if (access("/proc/self/ns/time", F_OK))
		return MISSING("no /proc/self/ns/time (no CONFIG_TIME_NS, kernel older than 5.6)");
	pid = fork();
	if (pid == 0) {
		int fd;

		if (unshare(CLONE_NEWTIME))
			_exit(1);
		fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "monotonic 1 0\n", 14) != 14)
			_exit(2);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return MISSING("fork: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return MISSING("a child cannot %s",
			       WIFEXITED(st) && WEXITSTATUS(st) == 1
				       ? "create a time namespace (unshare CLONE_NEWTIME)"
				       : "set the clock offsets of a new time namespace");
	return OK("a new time namespace takes clock offsets");
}

static int p_freezer(char *d, size_t len)
{
	_cleanup_free_ char *cg = NULL, *path = NULL;
	struct statfs sf;
	const char *root = cgroup_root();

	if (statfs(root, &sf) || sf.f_type != CGROUP2_SUPER_MAGIC)
		return MISSING("%s is not a cgroup v2 hierarchy (boot with the unified "
			       "hierarchy)",
			       root);
	cg = own_cgroup();
	if (!cg)
		return MISSING("this process is not in a cgroup v2 group");
	/* the root group has no freezer: look at ours or at systemd's */
	path = xasprintf("%s%s/cgroup.freeze", root, strcmp(cg, "/") ? cg : "/init.scope");
	if (!path)
		return -ENOMEM;
	if (access(path, F_OK))
		return MISSING("no %s (kernel older than 5.2)", path);
	return OK("cgroup v2 with cgroup.freeze");
}

static int p_systemd(char *d, size_t len)
{
	char *ver = NULL;
	int r = sd_systemd_version(&ver);

	if (r < 0)
		return MISSING("systemd does not answer on the system bus: %s (kupdate apply "
			       "freezes and tracks services through systemd)",
			       strerror(-r));
	r = OK("systemd %s on the system bus", ver);
	free(ver);
	return r;
}

static int p_kexec(char *d, size_t len)
{
	_cleanup_free_ char *dis = NULL, *lock = NULL;
	/* no valid flags: the kernel refuses them before it looks at anything */
	long r = syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 1UL << 30);

	if (r == 0)
		return MISSING("kexec_file_load accepted invalid flags");
	if (errno == ENOSYS)
		return MISSING("kexec_file_load: ENOSYS (no CONFIG_KEXEC_FILE)");
	if (errno == EPERM) {
		read_file_at(AT_FDCWD, "/proc/sys/kernel/kexec_load_disabled", &dis, NULL);
		return MISSING("kexec_file_load: EPERM (%s)",
			       dis && atoi(dis) ? "kernel.kexec_load_disabled is set"
						: "needs CAP_SYS_BOOT");
	}
	if (errno != EINVAL)
		return MISSING("kexec_file_load: %s", strerror(errno));
	if (!read_file_at(AT_FDCWD, "/sys/kernel/security/lockdown", &lock, NULL) &&
	    !strstr(lock, "[none]")) {
		lock[strcspn(lock, "\n")] = 0;
		return OK("kexec_file_load is there; lockdown %s: only signed kernels load", lock);
	}
	return OK("kexec_file_load is there (nothing was loaded)");
}

static int p_nftables(char *d, size_t len)
{
	char why[256];
	int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC), ret;

	/* libnftables says some things on stderr itself: they go into why */
	fflush(stderr);
	if (saved >= 0 && null >= 0)
		dup2(null, STDERR_FILENO);
	ret = cr_check_net_lock(why, sizeof(why));
	if (saved >= 0 && null >= 0)
		dup2(saved, STDERR_FILENO);
	if (saved >= 0)
		close(saved);
	if (null >= 0)
		close(null);

	if (ret)
		return MISSING("nftables refuses the lock's table: %s", why);
	return OK("nftables takes the network lock's table (checked, not applied)");
}

static int p_vdso(char *d, size_t len)
{
	_cleanup_free_ char *maps = NULL;

	if (read_file_at(AT_FDCWD, "/proc/self/maps", &maps, NULL) || !strstr(maps, "[vdso]"))
		return MISSING("no [vdso] in /proc/self/maps");
	return OK("[vdso]%s mapped", strstr(maps, "[vvar]") ? " and [vvar]" : "");
}

/* ------------------------------------------------------------- table */

enum need { NEED_REQUIRED, NEED_OPTIONAL };

struct check {
	const char *name;
	enum need need;
	probe_fn probe;
	/* any of these options enables it in a kernel's config; NULL: always
	 * there, or not a kernel option */
	const char *const config[4];
	int min_major, min_minor; /* in a target kernel */
	bool target_required;	  /* the new kernel needs it for the restore */
	const char *without;
};

static const struct check checks[] = {
	{ "capabilities",
	  NEED_REQUIRED,
	  p_caps,
	  { NULL },
	  0,
	  0,
	  false,
	  "kupdate cannot seize, dump or kexec anything" },
	{ "systemd",
	  NEED_REQUIRED,
	  p_systemd,
	  { NULL },
	  0,
	  0,
	  false,
	  "services cannot be frozen, found or restored in their units" },
	{ "ptrace",
	  NEED_REQUIRED,
	  p_ptrace,
	  { NULL },
	  3,
	  4,
	  false,
	  "the processes of a service cannot be seized: nothing can be dumped" },
	{ "map_files",
	  NEED_REQUIRED,
	  p_map_files,
	  { "CONFIG_CHECKPOINT_RESTORE" },
	  0,
	  0,
	  false,
	  "file mappings (libraries, shared memory) cannot be identified: no dump" },
	{ "kcmp",
	  NEED_REQUIRED,
	  p_kcmp,
	  { "CONFIG_KCMP", "CONFIG_CHECKPOINT_RESTORE" },
	  0,
	  0,
	  false,
	  "shared files, fd tables and mms cannot be told apart: no dump" },
	{ "clone3_set_tid",
	  NEED_REQUIRED,
	  p_set_tid,
	  { NULL },
	  5,
	  5,
	  true,
	  "processes cannot be restored with their pids" },
	{ "ns_last_pid",
	  NEED_OPTIONAL,
	  p_ns_last_pid,
	  { "CONFIG_CHECKPOINT_RESTORE" },
	  0,
	  0,
	  false,
	  "no fallback for clone3 set_tid, and a new kernel without kupdate's pid_reserve "
	  "patch cannot move its pid allocator above the saved pids" },
	{ "prctl_set_mm",
	  NEED_REQUIRED,
	  p_set_mm,
	  { "CONFIG_CHECKPOINT_RESTORE" },
	  0,
	  0,
	  true,
	  "a restored process cannot get its saved memory layout (brk, stack, auxv)" },
	{ "pid_reserve",
	  NEED_OPTIONAL,
	  p_pid_reserve,
	  { NULL },
	  0,
	  0,
	  false,
	  "this kernel, booted by a cycle, cannot keep the saved pids free from the start: "
	  "a task of early boot may take one (the unit is then cold-started); "
	  "apply goes without pid_reserve= for such a target by itself" },
	{ "pagemap",
	  NEED_REQUIRED,
	  p_pagemap,
	  { "CONFIG_PROC_PAGE_MONITOR" },
	  0,
	  0,
	  false,
	  "present and swapped pages cannot be found: no memory dump" },
	{ "pagemap_scan",
	  NEED_OPTIONAL,
	  p_pagemap_scan,
	  { "CONFIG_PROC_PAGE_MONITOR" },
	  6,
	  7,
	  false,
	  "the dump reads /proc/PID/pagemap, 8 bytes a page (slower on big services)" },
	{ "tcp_repair",
	  NEED_REQUIRED,
	  p_tcp_repair,
	  { "CONFIG_INET" },
	  4,
	  8,
	  true,
	  "established TCP connections cannot be saved or restored" },
	{ "unix_peek_off",
	  NEED_REQUIRED,
	  p_peek_off,
	  { "CONFIG_UNIX" },
	  0,
	  0,
	  false,
	  "data queued in unix sockets cannot be read without consuming it: no dump" },
	{ "sock_diag",
	  NEED_REQUIRED,
	  p_sock_diag,
	  { "CONFIG_UNIX_DIAG" },
	  0,
	  0,
	  false,
	  "unix socket peers and TCP connections cannot be found: no dump of sockets" },
	{ "sock_diag_inet",
	  NEED_REQUIRED,
	  NULL,
	  { "CONFIG_INET_DIAG" },
	  0,
	  0,
	  false,
	  "TCP connections cannot be found (config only: probed with sock_diag)" },
	{ "memfd",
	  NEED_REQUIRED,
	  p_memfd,
	  { "CONFIG_MEMFD_CREATE", "CONFIG_TMPFS" },
	  0,
	  0,
	  true,
	  "memfd files and shared anonymous memory cannot be restored" },
	{ "time_namespace",
	  NEED_REQUIRED,
	  p_timens,
	  { "CONFIG_TIME_NS" },
	  5,
	  6,
	  true,
	  "restored processes would see CLOCK_MONOTONIC and CLOCK_BOOTTIME jump" },
	{ "cgroup2_freezer",
	  NEED_REQUIRED,
	  p_freezer,
	  { "CONFIG_CGROUPS" },
	  5,
	  2,
	  true,
	  "services cannot be frozen while they are dumped" },
	{ "nftables",
	  NEED_REQUIRED,
	  p_nftables,
	  { "CONFIG_NF_TABLES" },
	  0,
	  0,
	  true,
	  "the network lock cannot hold TCP connections: peers could get resets" },
	{ "nftables_inet",
	  NEED_REQUIRED,
	  NULL,
	  { "CONFIG_NF_TABLES_INET" },
	  0,
	  0,
	  true,
	  "the lock's inet table cannot exist (config only: probed with nftables)" },
	{ "kexec_file_load",
	  NEED_REQUIRED,
	  p_kexec,
	  { "CONFIG_KEXEC_FILE" },
	  0,
	  0,
	  false,
	  "the new kernel cannot be loaded: no cycle (in a target kernel: no next update "
	  "from it)" },
	{ "vdso",
	  NEED_REQUIRED,
	  p_vdso,
	  { NULL },
	  0,
	  0,
	  false,
	  "restored processes could not read the clock through the new kernel's vDSO" },
	{ "soft_dirty",
	  NEED_OPTIONAL,
	  p_soft_dirty,
	  { "CONFIG_MEM_SOFT_DIRTY" },
	  0,
	  0,
	  false,
	  "a pre-dump (apply --pre-dump) tracks written pages with userfaultfd "
	  "write-protection instead (userfaultfd_wp); with neither, apply --pre-dump fails and "
	  "every unit's whole memory is copied while it is frozen" },
	{ "userfaultfd_wp",
	  NEED_OPTIONAL,
	  p_uffd_wp,
	  { "CONFIG_USERFAULTFD" },
	  6,
	  7,
	  false,
	  "a pre-dump (apply --pre-dump) tracks written pages with soft-dirty bits instead "
	  "(soft_dirty); with neither, apply --pre-dump fails and every unit's whole memory "
	  "is copied while it is frozen" },
};

/* -------------------------------------------------------- the target */

/* The modules an option built as a module (=m) needs loaded for what
 * kupdate does with it (socket diagnostics of TCP need tcp_diag beside
 * inet_diag); none for the options that cannot be modules. */
static const char *const *option_modules(const char *opt)
{
	static const struct {
		const char *opt;
		const char *mods[3];
	} map[] = {
		{ "CONFIG_UNIX", { "unix" } },
		{ "CONFIG_UNIX_DIAG", { "unix_diag" } },
		{ "CONFIG_INET_DIAG", { "inet_diag", "tcp_diag" } },
		{ "CONFIG_NF_TABLES", { "nf_tables" } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (!strcmp(map[i].opt, opt))
			return map[i].mods;
	return NULL;
}

static const char *modules_dir(void)
{
	const char *d = getenv("KUPDATE_MODULES_DIR");

	return d && *d ? d : "/lib/modules";
}

/* Whether the target's modules directory has each module OPT needs: 1
 * yes, 0 no (*why names the first one missing), -1 cannot tell (no
 * release: a config file's header does not say the distribution's). */
static int target_modules(const struct kimage_info *ki, const char *opt, char *why, size_t wlen)
{
	const char *const *mods = option_modules(opt);

	if (!mods)
		return 1;
	if (!ki->release[0] || !strcmp(ki->kind, "config"))
		return -1;
	return kmod_installed(modules_dir(), ki->release, mods, why, wlen);
}

/* enabled: 1, disabled: 0, cannot tell: -1; *opt gets the deciding option;
 * an option built as a module whose module is not installed for the
 * target is disabled, *mod saying which (else mod is "") */
static int target_option(const struct kimage_info *ki, const char *const config[4], int min_major,
			 int min_minor, const char **opt, char *val, size_t vlen, char *mod,
			 size_t mlen)
{
	*opt = NULL;
	val[0] = 0;
	mod[0] = 0;
	if (min_major && ki->major &&
	    (ki->major < min_major || (ki->major == min_major && ki->minor < min_minor)))
		return 0;
	if (!config[0])
		return ki->major ? 1 : -1;
	if (!ki->config)
		return -1;
	for (int i = 0; i < 4 && config[i]; i++) {
		const char *v = kconfig_get(ki->config, config[i], val, vlen);

		*opt = config[i];
		if (v && !strcmp(v, "y"))
			return 1;
		if (v && !strcmp(v, "m"))
			return target_modules(ki, config[i], mod, mlen) ? 1 : 0;
	}
	*opt = config[0];
	val[0] = 0;
	return 0;
}

/* -------------------------------------------------------------- main */

static void usage_check(FILE *f)
{
	fputs("usage: kupdate check [--json] [VMLINUZ|CONFIG]\n"
	      "Whether a kernel update cycle can run: probe each kernel interface the\n"
	      "engine needs on the running kernel (each is used on something of kupdate's\n"
	      "own; nothing is changed) and say what breaks without it.  With a kernel\n"
	      "image (bzImage or vmlinux with CONFIG_IKCONFIG) or a config file (plain or\n"
	      "gzipped, e.g. /boot/config-RELEASE), also what that kernel's configuration\n"
	      "enables (an image without it: the config-RELEASE beside it).  Without\n"
	      "one: the kernel apply would update into, the newest installed in /boot,\n"
	      "if it is newer than the running one.\n"
	      "  --json   one JSON object (schema in kupdate(8))\n"
	      "Exit status: 0 when a cycle can run (every required interface is there, and\n"
	      "the target enables every required option it can be read for), 1 when not,\n"
	      "2 on a usage error.\n",
	      f);
}

/* what the probes of this kernel found */
struct check_run {
	int res[ARRAY_SIZE(checks)];
	char detail[ARRAY_SIZE(checks)][320];
	int missing_req; /* required interfaces missing here */
	int target_bad;	 /* required options the target kernel lacks */
};

/* every probe; they log nothing on their own: each says what it found */
static void run_probes(struct check_run *r)
{
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		r->detail[i][0] = 0;
		r->res[i] =
			checks[i].probe ? checks[i].probe(r->detail[i], sizeof(r->detail[i])) : 0;
		if (checks[i].probe && r->res[i] && checks[i].need == NEED_REQUIRED)
			r->missing_req++;
	}
}

/* the target kernel's image and configuration, as JSON; the required
 * options it lacks are added to miss */
static json_object *target_json(const struct kimage_info *ki, const char *target, json_object *miss,
				struct check_run *r)
{
	json_object *t = json_object_new_object(), *ta = json_object_new_array();

	json_object_object_add(t, "path", json_object_new_string(target));
	json_object_object_add(t, "kind", json_object_new_string(ki->kind));
	json_object_object_add(t, "release",
			       ki->release[0] ? json_object_new_string(ki->release) : NULL);
	json_object_object_add(t, "compression",
			       ki->compression ? json_object_new_string(ki->compression) : NULL);
	json_object_object_add(t, "config_source",
			       ki->config_source ? json_object_new_string(ki->config_source)
						 : NULL);
	json_object_object_add(t, "config_unreadable",
			       ki->config ? NULL : json_object_new_string(ki->why));
	json_object_object_add(t, "pid_reserve_patch",
			       ki->pid_reserve < 0 ? NULL
						   : json_object_new_boolean(ki->pid_reserve));
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		const char *opt;
		char val[128], mod[320];
		int en = target_option(ki, checks[i].config, checks[i].min_major,
				       checks[i].min_minor, &opt, val, sizeof(val), mod,
				       sizeof(mod));
		json_object *e;

		if (!checks[i].config[0] && !checks[i].min_major)
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(checks[i].name));
		json_object_object_add(e, "required",
				       json_object_new_boolean(checks[i].target_required));
		json_object_object_add(e, "enabled", en < 0 ? NULL : json_object_new_boolean(en));
		json_object_object_add(e, "option", opt ? json_object_new_string(opt) : NULL);
		json_object_object_add(e, "value", val[0] ? json_object_new_string(val) : NULL);
		json_object_object_add(e, "module_missing",
				       mod[0] ? json_object_new_string(mod) : NULL);
		json_object_array_add(ta, e);
		if (en == 0 && checks[i].target_required) {
			char tn[64];

			r->target_bad++;
			snprintf(tn, sizeof(tn), "target:%s", checks[i].name);
			json_object_array_add(miss, json_object_new_string(tn));
		}
	}
	json_object_object_add(t, "checks", ta);
	return t;
}

static int check_json(FILE *o, const char *release, struct check_run *r,
		      const struct kimage_info *ki, const char *target)
{
	json_object *root = json_object_new_object(), *arr = json_object_new_array();
	json_object *miss = json_object_new_array();
	bool ok;

	json_object_object_add(root, "kupdate_version", json_object_new_string(CR_TOOL_VERSION));
	json_object_object_add(root, "kernel", json_object_new_string(release));
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		json_object *e;

		if (!checks[i].probe)
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(checks[i].name));
		json_object_object_add(e, "required",
				       json_object_new_boolean(checks[i].need == NEED_REQUIRED));
		json_object_object_add(e, "ok", json_object_new_boolean(r->res[i] == 0));
		json_object_object_add(e, "detail", json_object_new_string(r->detail[i]));
		json_object_object_add(e, "without", json_object_new_string(checks[i].without));
		json_object_array_add(arr, e);
		if (r->res[i] && checks[i].need == NEED_REQUIRED)
			json_object_array_add(miss, json_object_new_string(checks[i].name));
	}
	json_object_object_add(root, "checks", arr);
	json_object_object_add(root, "target", ki ? target_json(ki, target, miss, r) : NULL);
	ok = !r->missing_req && !r->target_bad;
	json_object_object_add(root, "cycle_possible", json_object_new_boolean(ok));
	json_object_object_add(root, "missing", miss);
	json_print(root, o);
	json_object_put(root);
	return ok ? 0 : 1;
}

/* the target kernel's image and configuration, as text */
static void target_text(FILE *o, const struct kimage_info *ki, const char *target,
			struct check_run *r)
{
	fprintf(o, "\n%starget %s%s: %s", term_c(o, T_BOLD), target, term_c(o, T_RESET), ki->kind);
	if (ki->release[0])
		fprintf(o, " %s", ki->release);
	if (ki->compression && strcmp(ki->compression, "none"))
		fprintf(o, " (%s)", ki->compression);
	fprintf(o, ", pid_reserve patch: %s\n",
		ki->pid_reserve < 0 ? "cannot tell"
		: ki->pid_reserve   ? "yes"
				  : "no (apply goes without it: the new boot raises ns_last_pid)");
	if (!ki->config)
		fprintf(o, "  configuration: cannot be read: %s\n", ki->why);
	else
		fprintf(o, "  configuration: from %s\n",
			!strcmp(ki->config_source, "IKCONFIG") ? "the image (IKCONFIG)"
							       : "the file");
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		const char *opt;
		char val[128], what[512], mod[320];
		int en = target_option(ki, checks[i].config, checks[i].min_major,
				       checks[i].min_minor, &opt, val, sizeof(val), mod,
				       sizeof(mod));
		bool req = checks[i].target_required;

		if (!checks[i].config[0] && !checks[i].min_major)
			continue;
		if (opt)
			snprintf(what, sizeof(what), "%s%s%s%s%s", opt, val[0] ? "=" : " unset",
				 val, mod[0] ? ", but " : "", mod);
		else
			snprintf(what, sizeof(what), "%s %d.%d or later",
				 en ? "kernel" : "needs kernel", checks[i].min_major,
				 checks[i].min_minor);
		if (en == 0 && req)
			r->target_bad++;
		fprintf(o, "  %s%-8s%s %-16s %s%s\n",
			term_c(o, en > 0   ? T_GREEN
				  : en < 0 ? T_DIM
				  : req	   ? T_RED
					   : T_YELLOW),
			en > 0	 ? "enabled"
			: en < 0 ? "unknown"
			: req	 ? "MISSING"
				 : "off",
			term_c(o, T_RESET), checks[i].name, en < 0 ? "cannot tell" : what,
			en == 0 && req ? " (the restore needs it)" : "");
	}
}

static int check_text(FILE *o, const char *release, struct check_run *r,
		      const struct kimage_info *ki, const char *target)
{
	bool ok;

	fprintf(o, "%srunning kernel %s%s\n", term_c(o, T_BOLD), release, term_c(o, T_RESET));
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		bool req = checks[i].need == NEED_REQUIRED;

		if (!checks[i].probe)
			continue;
		if (!r->res[i])
			fprintf(o, "  %s%-8s%s %-16s %s\n", term_c(o, T_GREEN), "ok",
				term_c(o, T_RESET), checks[i].name, r->detail[i]);
		else
			fprintf(o, "  %s%-8s%s %-16s %s\n%27s%swithout it: %s%s\n",
				term_c(o, req ? T_RED : T_YELLOW), req ? "MISSING" : "absent",
				term_c(o, T_RESET), checks[i].name, r->detail[i], "",
				term_c(o, T_DIM), checks[i].without, term_c(o, T_RESET));
	}
	if (ki)
		target_text(o, ki, target, r);
	ok = !r->missing_req && !r->target_bad;
	fputc('\n', o);
	if (ok)
		fprintf(o, "%sa kernel update cycle can run%s\n", term_c(o, T_GREEN),
			term_c(o, T_RESET));
	else
		fprintf(o,
			"%sno kernel update cycle can run%s: %d required interface%s missing "
			"here%s%s\n",
			term_c(o, T_RED), term_c(o, T_RESET), r->missing_req,
			r->missing_req == 1 ? "" : "s", r->target_bad ? ", more in the target" : "",
			r->target_bad ? " kernel" : "");
	return ok ? 0 : 1;
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct check_run r = { 0 };
	struct kimage_info ki;
	bool json = false, have_target = false;
	const char *target = NULL;
	_cleanup_free_ char *next = NULL, *next_initrd = NULL, *next_release = NULL;
	struct utsname un;
	int c, ret;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage_check(stdout);
			return 0;
		default:
			usage_check(stderr);
			return 2;
		}
	}
	if (argc - optind > 1) {
		pr_err("check: at most one kernel image or config file (see kupdate check "
		       "--help)");
		return 2;
	}
	if (optind < argc) {
		target = argv[optind];
	} else if (!next_kernel(&next, &next_initrd, &next_release, false)) {
		/* what apply would update into */
		target = next;
		if (!json)
			printf("kupdate: checking the newest kernel installed, %s (%s)\n",
			       next_release, next);
	}
	if (target) {
		if (kimage_read(target, &ki))
			return 1;
		have_target = true;
	}
	uname(&un);
	run_probes(&r);
	if (json)
		ret = check_json(stdout, un.release, &r, have_target ? &ki : NULL, target);
	else
		ret = check_text(stdout, un.release, &r, have_target ? &ki : NULL, target);
	if (have_target)
		kimage_free(&ki);
	return ret;
}
