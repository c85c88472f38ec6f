/* A container's root: the init of a pid namespace of its own (the child of
 * a monitor, as in pidns.c) made a mount namespace and pivoted into a
 * tmpfs root holding files, with host /usr bound read-only, the test's own
 * directory and a host data directory bound read-write, a tmpfs /tmp with
 * a file, a symlink and a hard link, /tmp/rh bound recursively over itself
 * read-only with a host file bound in it before (nspawn's /run/host: the
 * first bind hidden under the copy), a read-only ramfs /etc/cred with a
 * file (a unit's credentials), a tmpfs /dev with a null node, its
 * namespace's /proc and /proc/sys bound read-only over itself.  Init holds
 * /tmp/t open at offset 3 and /data as its cwd; its child C holds
 * /data/f.
 *
 * After the restore both find the same mounts (point, type, per-mount
 * options, root), the same contents, offsets and cwd, /dev/null a working
 * device, /usr and /proc/sys read-only, /proc their namespace's, and a
 * write to /data reaches the host directory; the monitor's own mount
 * namespace has none of it, and the staging directory of the restore is
 * gone.
 *
 * "ctrroot noproc": the container has no /proc (the restore reaches its
 * own through kupdate's); "ctrroot shared": propagation inside, as
 * nspawn's: the root shared with a peer bound at /rootpeer, /tmp shared
 * with a peer at /tmp2 and a slave at /tmps (compared through mountinfo's
 * groups, numbered by first appearance); "ctrroot hidden": a tmpfs mounted
 * over another on /hid: refused; "ctrroot away": the test's own directory
 * is not bound in, its binary is outside the container's root: refused;
 * "ctrroot deleted": a FIFO of /tmp (mode 0620, owner 4242:4343) bound at
 * /etc/kfifo, then removed (as nspawn's /proc/kmsg), made again so; and
 * a file of /tmp bound at /etc/bootid, then removed (as
 * nspawn's boot_id): made again, bound, removed.
 *
 * "ctrroot user": a sandbox in a user namespace, built the way
 * systemd-nspawn -U builds a container: a process of the host's user
 * namespace makes the mount namespace and the root, then clones the init
 * into new user, mount, UTS, IPC and network namespaces at once (the
 * init's user namespace owns the others, its mount namespace is a copy
 * whose mounts are locked together), writes its id maps (0 -> 200000,
 * 65536 ids) and exits; no pid namespace, no /proc, C runs as uid 1000
 * inside.  After the restore, besides the above: the maps are the same,
 * every namespace of init's is owned by its user namespace, C shares them,
 * init and C find their ids inside (0, 1000) and the host sees theirs
 * (200000, 201000); init, root inside, may set its host name and mount a
 * tmpfs (its user namespace owns its UTS and mount namespaces), and may
 * neither make /usr writable nor unmount /data (locked, as before).
 * "ctrroot userpid": the same with a pid namespace (nspawn's container):
 * the root is moved over the old one (not pivoted), and init, pid 1
 * inside, mounts its namespace's /proc and binds /proc/sys read-only
 * itself, from inside its user namespace, as nspawn's inner child does;
 * after the restore, also: init is pid 1 inside with its host pid, C
 * has its pid inside, and its two threads their tids inside (and out:
 * crrun), the pid namespace is owned by the user namespace, /proc is
 * theirs and /proc/sys read-only.  "ctrroot-userpid-busy": the same while
 * something forks all the time: each host pid and tid, taken through
 * ns_last_pid, is made again when another process took it.  /data is an
 * idmapped bind there (0 -> 200000, as the user namespace maps ids, as
 * nspawn's root): root inside owns /data/f, owned by 0 on the disk.
 * /sys is a read-only tmpfs with /sys/class a read-only bind of a directory
 * of a sysfs that is not mounted itself (nspawn's /sys).
 * "ctrroot idmapother": /data idmapped otherwise (0 -> 300000): refused.
 * The monitor holds a datagram socket the maker bound at /tmp/host/notify
 * in the container, /tmp/host then bound read-only over itself (nspawn's
 * notify socket at /run/host/notify, which the monitor does not see):
 * after the restore it is bound there again, and init's datagram sent to
 * that path from inside reaches it; it holds init's network namespace at
 * two fds (one close-on-exec), each that namespace again after the restore.
 * "ctrroot nsaway": the monitor holds the network namespace of a process
 * gone: refused.
 * "ctrroot userpidsub": as userpid, and C, born inside, makes UTS and IPC
 * namespaces of its own there and names its host "csub" (a service's
 * ProtectHostname= in a booted container): after the restore they are
 * C's own again, owned by init's user namespace, and C's host name is
 * "csub", init's "ctr".
 * Refused: "ctrroot usersub", C makes a UTS namespace inside
 * the user namespace, C not born there (no pid namespace: the restore
 * makes it in kupdate's user namespace, which would own it);
 * "ctrroot usermnt": as userpid, C makes a mount namespace (a service's
 * sandbox in a booted container: not yet);
 * "ctrroot userorder", the init is cloned into the other namespaces first
 * and makes its user namespace after (they are not owned by it). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

enum { S_INIT, S_C, NSLOTS };

static struct shared {
	volatile int go;
	int shared_tmp, noproc, hidden, away, deleted, user, usersub, userorder, userpid;
	int idmapother, subns, submnt;
	pid_t init_host;
	pid_t pid_inside[NSLOTS]; /* as their pid namespace names them */
	volatile pid_t c_tids[2]; /* userpid: C's threads, inside */
	int maps[2];		  /* user: init waits on it for its id maps */
	char dir[PATH_MAX];
	struct {
		volatile int ready, done, ok;
		char msg[300];
	} s[NSLOTS];
} * sh;

/* shared:N and master:N of mountinfo's optional fields, N numbered by
 * first appearance (the ids differ after a restore, not the relations) */
static void groups(char *rest, char *out, size_t len)
{
	static unsigned seen[64];
	static size_t nseen;
	size_t o = 0;

	if (!rest) {
		nseen = 0;
		return;
	}
	out[0] = 0;
	for (char *save = NULL, *t = strtok_r(rest, " ", &save); t && strcmp(t, "-");
	     t = strtok_r(NULL, " ", &save)) {
		char *colon = strchr(t, ':');
		unsigned id = colon ? strtoul(colon + 1, NULL, 10) : 0;
		size_t k = 0;

		if (!colon || strncmp(t, "propagate_from", 14) == 0)
			continue;
		while (k < nseen && seen[k] != id)
			k++;
		if (k == nseen && nseen < 64)
			seen[nseen++] = id;
		o += snprintf(out + o, len - o, " %.*s:%zu", (int)(colon - t), t, k);
	}
}

/* the mounts as "point type options root groups" lines, ids and devices
 * left out */
static char *mounts(const char *path)
{
	char *buf = crt_read_file(path, NULL), *out, *save = NULL;
	size_t o = 0, cap;

	if (!buf)
		return NULL;
	cap = 2 * strlen(buf) + 1;
	out = calloc(1, cap);
	groups(NULL, NULL, 0);
	for (char *l = strtok_r(buf, "\n", &save); l && out; l = strtok_r(NULL, "\n", &save)) {
		char root[PATH_MAX], mp[PATH_MAX], opts[256], rest[1024], g[256], *dash;

		if (sscanf(l, "%*d %*d %*s %4095s %4095s %255s %1023[^\n]", root, mp, opts, rest) !=
		    4)
			continue;
		dash = strstr(rest, "- ");
		o += snprintf(out + o, cap - o, "%s %.*s %s %s", mp,
			      dash ? (int)strcspn(dash + 2, " ") : 1, dash ? dash + 2 : "?", opts,
			      root);
		groups(rest, g, sizeof(g));
		o += snprintf(out + o, cap - o, "%s\n", g);
	}
	free(buf);
	return out;
}

static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static bool has(const char *path, const char *text)
{
	char *b = crt_read_file(path, NULL);
	bool ok = b && !strcmp(b, text);

	free(b);
	return ok;
}

static bool has_task(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
	return tid > 0 && !access(path, F_OK);
}

/* userpid: C's threads, each with its tid in both pid namespaces */
static void *c_thread(void *arg)
{
	sh->c_tids[(long)arg] = (pid_t)syscall(SYS_gettid);
	for (;;)
		pause();
	return NULL;
}

static bool send_notify(void);

/* the container's view, checked by init and by C */
static void check(int slot, const char *before, int fd, off_t off, const char *cwd_want)
{
	char *now = sh->noproc ? NULL : mounts("/proc/self/mountinfo"), cwd[PATH_MAX] = "";
	char *m = sh->s[slot].msg;
	struct stat st;
	struct statvfs vfs;
	struct utsname u;
	size_t len = sizeof(sh->s[slot].msg);
	int w = -1;

	if (!sh->noproc && (!now || strcmp(now, before)))
		snprintf(m, len, "mounts differ: now\n%.120s\nwere\n%.120s", now ? now : "?",
			 before);
	else if (!has("/etc/hostname", "ctr\n") || !has("/tmp/t", "tmpdata") ||
		 !has("/tmp/hard", "tmpdata") || !has("/tmp/sym", "tmpdata") ||
		 !has("/data/f", "hostdata") || !has("/tmp/rh/f", "hostdata") ||
		 (sh->userpid && access("/sys/class/net", F_OK)) ||
		 (slot == S_INIT && !has("/etc/cred/key", "secret-1")))
		snprintf(m, len, "contents differ");
	else if (lseek(fd, 0, SEEK_CUR) != off)
		snprintf(m, len, "offset %ld, not %ld", (long)lseek(fd, 0, SEEK_CUR), (long)off);
	else if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, cwd_want))
		snprintf(m, len, "cwd %s, not %s", cwd, cwd_want);
	else if (stat("/dev/null", &st) || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3) ||
		 (w = open("/dev/null", O_WRONLY)) < 0 || write(w, "x", 1) != 1)
		snprintf(m, len, "/dev/null is not a working null device (%s)", strerror(errno));
	else if (close(w), open("/usr/.kupdate-w", O_WRONLY | O_CREAT, 0600) >= 0 || errno != EROFS)
		snprintf(m, len, "/usr is not read-only");
	else if (sh->deleted &&
		 (!has("/etc/bootid", "boot-id-123") || !access("/tmp/.kdel", F_OK) ||
		  stat("/etc/kfifo", &st) || !S_ISFIFO(st.st_mode) ||
		  (st.st_mode & 07777) != 0620 || st.st_uid != 4242 || st.st_gid != 4343 ||
		  !access("/tmp/.kfifo", F_OK)))
		snprintf(m, len, "the removed file bound at /etc/bootid is not as it was");
	/* (root of a user namespace has no write access there anyway: the
	 * mount's flag is what counts) */
	else if (!sh->noproc && (statvfs("/proc/sys/kernel", &vfs) || !(vfs.f_flag & ST_RDONLY)))
		snprintf(m, len, "/proc/sys is not read-only");
	else if (sh->noproc ? !access("/proc/1", F_OK) : !has("/proc/1/comm", "ctrroot\n"))
		snprintf(m, len, "/proc is not its pid namespace's");
	else if (slot == S_INIT && sh->userpid && !send_notify())
		snprintf(m, len, "cannot send to the monitor's /tmp/host/notify: %s",
			 strerror(errno));
	else if (sh->userpid && !sh->idmapother &&
		 (stat("/data/f", &st) || st.st_uid != 0 || st.st_gid != 0))
		snprintf(m, len,
			 "/data/f is owned by %u:%u inside, not 0:0 (its idmapping is lost)",
			 st.st_uid, st.st_gid);
	else if (getpid() != sh->pid_inside[slot])
		snprintf(m, len, "pid %d inside, was %d", getpid(), sh->pid_inside[slot]);
	else if (slot == S_C && sh->userpid &&
		 (!has_task(sh->c_tids[0]) || !has_task(sh->c_tids[1])))
		snprintf(m, len, "its threads %d and %d are not there inside", sh->c_tids[0],
			 sh->c_tids[1]);
	else if (sh->user && !sh->userorder && getuid() != (slot == S_INIT ? 0u : 1000u))
		snprintf(m, len, "uid %u inside its user namespace", getuid());
	else if (sh->subns && (uname(&u) || strcmp(u.nodename, slot == S_C ? "csub" : "ctr")))
		snprintf(m, len, "host name \"%s\", not \"%s\"", u.nodename,
			 slot == S_C ? "csub" : "ctr");
	else
		sh->s[slot].ok = 1;
	free(now);
	sh->s[slot].done = 1;
}

static void wait_go(void)
{
	while (!sh->go)
		usleep(10000);
}

static void user_c(void);

static void __attribute__((noreturn)) child_c(const char *before)
{
	int fd = open("/data/f", O_RDONLY);
	char b[4];

	user_c();
	/* (a copy lists its mounts in the tree's order, not in the order
	 * they were made) */
	if (sh->submnt)
		before = mounts("/proc/self/mountinfo");
	if (fd < 0 || !before || read(fd, b, 4) != 4 || chdir("/tmp"))
		_exit(2);
	sh->pid_inside[S_C] = getpid();
	for (long k = 0; sh->userpid && k < 2; k++) {
		pthread_t t;

		if (pthread_create(&t, NULL, c_thread, (void *)k))
			_exit(2);
		while (!sh->c_tids[k])
			usleep(1000);
	}
	sh->s[S_C].ready = 1;
	wait_go();
	check(S_C, before, fd, 4, "/tmp");
	_exit(0);
}

#define MNT(src, dst, type, flags, data)                \
	do {                                            \
		if (mount(src, dst, type, flags, data)) \
			_exit(10 + __LINE__ % 80);      \
	} while (0)

/* userpid: the maker hands the monitor a datagram socket it bound at
 * /tmp/host/notify in the container, /tmp/host then bound read-only over
 * itself: nspawn's notify socket at /run/host/notify */
static int pass[2] = { -1, -1 };

static void make_notify(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = "n", .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/host/notify");
	if (mkdir("/tmp/host", 0755) || s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    chmod(a.sun_path, 0755) || lchown(a.sun_path, 200000, 200000))
		_exit(33);
	MNT("/tmp/host", "/tmp/host", NULL, MS_BIND, NULL);
	MNT(NULL, "/tmp/host", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &s, sizeof(int));
	if (sendmsg(pass[1], &mh, 0) != 1)
		_exit(34);
	close(s);
}

static int take_notify(void)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char b;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cm;
	int fd = -1;

	if (recvmsg(pass[0], &mh, 0) != 1 || !(cm = CMSG_FIRSTHDR(&mh)))
		crt_fail("the maker handed no notify socket");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	close(pass[0]);
	close(pass[1]);
	return fd;
}

/* the monitor: its notify socket bound at /tmp/host/notify, where init's
 * datagram came */
static void check_notify(int fd, const char *when, bool ping)
{
	struct sockaddr_un a;
	socklen_t len = sizeof(a);
	char b[8] = "";

	crt_check(!getsockname(fd, (struct sockaddr *)&a, &len) &&
			  !strcmp(a.sun_path, "/tmp/host/notify"),
		  "%s: the monitor's notify socket is not bound at /tmp/host/notify", when);
	if (ping)
		crt_check(recv(fd, b, sizeof(b), MSG_DONTWAIT) == 4 && !memcmp(b, "ping", 4),
			  "%s: init's datagram to /tmp/host/notify did not reach the monitor's "
			  "socket",
			  when);
}

/* init: a datagram to the monitor's notify socket */
static bool send_notify(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	bool ok;

	snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/host/notify");
	ok = s >= 0 && sendto(s, "ping", 4, 0, (struct sockaddr *)&a, sizeof(a)) == 4;
	close(s);
	return ok;
}

/* userpid: host bound at path with ids mapped as the container's user
 * namespace maps them (0 -> 200000), through a user namespace of those
 * maps made for it, as nspawn maps its root with --private-users */
static void bind_idmapped(const char *host, const char *path)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
	int sk[2], fd, ufd, tree;
	char rel[64], b;
	pid_t u;

	if (pipe(sk))
		_exit(30);
	u = fork();
	if (u == 0) {
		close(sk[1]);
		if (unshare(CLONE_NEWUSER))
			_exit(1);
		read(sk[0], &b, 1); /* until the maker is done with it */
		_exit(0);
	}
	close(sk[0]);
	for (int k = 0; k < 2; k++) {
		usleep(k ? 0 : 20000);
		snprintf(rel, sizeof(rel), "/proc/%d/%s", u, k ? "gid_map" : "uid_map");
		for (int tries = 0; (fd = open(rel, O_WRONLY)) >= 0; tries++) {
			ssize_t n = write(
				fd, sh->idmapother ? "0 300000 65536\n" : "0 200000 65536\n", 15);

			close(fd);
			if (n == 15)
				break;
			if (tries > 100)
				_exit(31);
			usleep(10000);
		}
		if (fd < 0)
			_exit(31);
	}
	snprintf(rel, sizeof(rel), "/proc/%d/ns/user", u);
	ufd = open(rel, O_RDONLY);
	attr.userns_fd = ufd;
	tree = open_tree(AT_FDCWD, host, OPEN_TREE_CLONE);
	if (ufd < 0 || tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) ||
	    move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH))
		_exit(32);
	close(tree);
	close(ufd);
	close(sk[1]);
	waitpid(u, NULL, 0);
}

/* the container's mounts, and into its root (pivot_root) */
static void build_root(void)
{
	char exe[PATH_MAX], exedir[PATH_MAX], path[PATH_MAX + 64], root[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0 || unshare(sh->user ? CLONE_NEWNS : CLONE_NEWNS | CLONE_NEWUTS))
		_exit(3);
	exe[n] = 0;
	snprintf(exedir, sizeof(exedir), "%s", exe);
	dirname(exedir);
	MNT(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	snprintf(root, sizeof(root), "%s/newroot", sh->dir);
	MNT("ctr", root, "tmpfs", 0, "mode=755,size=16m");
	snprintf(path, sizeof(path),
		 "mkdir -p %.300s/usr %.300s/proc %.300s/tmp %.300s/dev %.300s/data %.300s/etc",
		 root, root, root, root, root, root);
	if (system(path))
		_exit(4);
	/* /tmp first: the test's directory may be under it (a clone in /tmp) */
	snprintf(path, sizeof(path), "%s/tmp", root);
	MNT("tmp", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=8m");
	snprintf(path, sizeof(path), "mkdir -p %.300s%.300s", root, exedir);
	if (system(path))
		_exit(4);
	snprintf(path, sizeof(path), "%s/etc/hostname", root);
	put(path, "ctr\n");
	snprintf(path, sizeof(path), "%s/usr", root);
	MNT("/usr", path, NULL, MS_BIND, NULL);
	MNT(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
	snprintf(path, sizeof(path), "%.300s%.300s", root, exedir);
	if (!sh->away)
		MNT(exedir, path, NULL, MS_BIND, NULL);
	{
		char host[PATH_MAX + 16];

		snprintf(host, sizeof(host), "%s/hostdata", sh->dir);
		snprintf(path, sizeof(path), "%s/data", root);
		if (sh->userpid)
			bind_idmapped(host, path);
		else
			MNT(host, path, NULL, MS_BIND, NULL);
	}
	snprintf(path, sizeof(path), "%s/tmp/t", root);
	put(path, "tmpdata");
	snprintf(exedir, sizeof(exedir), "%.300s/tmp/hard", root);
	if (link(path, exedir))
		_exit(5);
	snprintf(exedir, sizeof(exedir), "%.300s/tmp/sym", root);
	if (symlink("t", exedir))
		_exit(6);
	if (sh->deleted) {
		/* nspawn's boot_id: a file of its /tmp bound over another, then
		 * removed */
		char src[PATH_MAX + 32];

		snprintf(src, sizeof(src), "%s/tmp/.kdel", root);
		snprintf(path, sizeof(path), "%s/etc/bootid", root);
		if (put(src, "boot-id-123") || put(path, ""))
			_exit(13);
		MNT(src, path, NULL, MS_BIND, NULL);
		if (unlink(src))
			_exit(14);
		/* and nspawn's /proc/kmsg: a FIFO so, owned by another */
		snprintf(src, sizeof(src), "%s/tmp/.kfifo", root);
		snprintf(path, sizeof(path), "%s/etc/kfifo", root);
		if (mkfifo(src, 0600) || chmod(src, 0620) || lchown(src, 4242, 4343) ||
		    put(path, ""))
			_exit(13);
		MNT(src, path, NULL, MS_BIND, NULL);
		if (unlink(src))
			_exit(14);
	}
	/* nspawn's /run/host: a host file bound into a directory of the
	 * container's tmpfs, then that directory bound recursively over
	 * itself, read-only, its copy of the file read-only, nosuid, nodev,
	 * noexec: the first bind of the file hidden under the second */
	snprintf(path, sizeof(path), "%s/tmp/rh", root);
	if (mkdir(path, 0755))
		_exit(37);
	snprintf(path, sizeof(path), "%s/tmp/rh/f", root);
	if (put(path, ""))
		_exit(37);
	{
		char host[PATH_MAX + 32];

		snprintf(host, sizeof(host), "%s/hostdata/f", sh->dir);
		MNT(host, path, NULL, MS_BIND, NULL);
	}
	snprintf(path, sizeof(path), "%s/tmp/rh", root);
	MNT(path, path, NULL, MS_BIND | MS_REC, NULL);
	MNT(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
	snprintf(path, sizeof(path), "%s/tmp/rh/f", root);
	MNT(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
	/* userpid: nspawn's /sys, a read-only tmpfs with a directory of a
	 * sysfs (of a network namespace of the maker's) bound read-only on
	 * it, the sysfs itself not mounted */
	if (sh->userpid) {
		char tmp[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/sys", root);
		if (mkdir(path, 0755))
			_exit(38);
		MNT("sys", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755");
		snprintf(path, sizeof(path), "%s/sys/class", root);
		snprintf(tmp, sizeof(tmp), "%s/sysfs", sh->dir);
		if (mkdir(path, 0755) || mkdir(tmp, 0755))
			_exit(38);
		/* mounted by a child in a network namespace of its own */
		{
			pid_t k = fork();
			int st;

			if (k == 0)
				_exit(unshare(CLONE_NEWNET) ||
				      mount("sysfs", tmp, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
					    NULL));
			if (k < 0 || waitpid(k, &st, 0) != k || st)
				_exit(39);
		}
		strcat(tmp, "/class");
		MNT(tmp, path, NULL, MS_BIND, NULL);
		MNT(NULL, path, NULL,
		    MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		snprintf(tmp, sizeof(tmp), "%s/sysfs", sh->dir);
		if (umount2(tmp, MNT_DETACH))
			_exit(38);
		snprintf(path, sizeof(path), "%s/sys", root);
		MNT(NULL, path, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "mode=755");
	}
	/* a unit's credentials, as systemd gives them: a read-only ramfs */
	snprintf(path, sizeof(path), "%s/etc/cred", root);
	if (mkdir(path, 0755))
		_exit(35);
	MNT("ramfs", path, "ramfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=700");
	snprintf(path, sizeof(path), "%s/etc/cred/key", root);
	if (put(path, "secret-1") || (sh->user && !sh->userorder && lchown(path, 200000, 200000)))
		_exit(36);
	snprintf(path, sizeof(path), "%s/etc/cred", root);
	if (sh->user && !sh->userorder && lchown(path, 200000, 200000))
		_exit(36);
	MNT(NULL, path, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=700");
	snprintf(path, sizeof(path), "%s/dev", root);
	MNT("dev", path, "tmpfs", MS_NOSUID, "mode=755");
	snprintf(path, sizeof(path), "%s/dev/null", root);
	if (mknod(path, S_IFCHR | 0666, makedev(1, 3)))
		_exit(7);
	/* a node of the container's tmpfs opens nowhere in a user namespace
	 * but the initial one: nspawn binds the host's over it */
	if (sh->user)
		MNT("/dev/null", path, NULL, MS_BIND, NULL);
	/* the container's own files owned by its root (nspawn chowns them,
	 * or maps them) */
	if (sh->user && !sh->userorder) {
		static const char *const own[] = { "",	       "/tmp",	"/tmp/t",
						   "/tmp/sym", "/etc",	"/etc/hostname",
						   "/dev",     "/data", "/data/f" };

		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
			/* (200000 is none of the other idmapping's ids) */
			if (sh->idmapother && !strncmp(own[k], "/data", 5))
				continue;
			snprintf(path, sizeof(path), "%s%s", root, own[k]);
			if (lchown(path, 200000, 200000))
				_exit(19);
		}
	}
	if (!sh->noproc && !sh->userpid) {
		snprintf(path, sizeof(path), "%s/proc", root);
		MNT("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		snprintf(path, sizeof(path), "%s/proc/sys", root);
		MNT(path, path, NULL, MS_BIND, NULL);
		MNT(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
	}
	/* userpid: moved over the old root, as nspawn's outer child does: the
	 * init mounts its own /proc in its user namespace, which the kernel
	 * allows only where a proc is fully visible (the covered one) */
	if (sh->userpid
		    ? chdir(root) || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".")
		    : chdir(root) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH))
		_exit(8);
	if (sh->userpid)
		make_notify();
	if (chdir("/data"))
		_exit(8);
}

/* userpid: init, root in its user and pid namespaces, mounts their /proc
 * and binds /proc/sys read-only over itself, as nspawn's inner child; and
 * a tmpfs of its own on /tmp/own (root's inside), with a directory and a
 * file of user 1000, the directory bound on /tmp/ownb (the container's
 * systemd's /run/credentials/UNIT): not locked, it may unmount them */
static void own_proc(void)
{
	if (!sh->userpid)
		return;
	MNT("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	MNT("/proc/sys", "/proc/sys", NULL, MS_BIND, NULL);
	MNT(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
	if (mkdir("/tmp/own", 0755) || mkdir("/tmp/ownb", 0755))
		_exit(9);
	MNT("own", "/tmp/own", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0750,uid=0,gid=0,size=1m");
	if (mkdir("/tmp/own/sub", 0700) || chown("/tmp/own/sub", 1000, 1000) ||
	    put("/tmp/own/sub/f", "own") || chown("/tmp/own/sub/f", 1000, 1000))
		_exit(9);
	MNT("/tmp/own/sub", "/tmp/ownb", NULL, MS_BIND, NULL);
}

/* locked mounts (user): /usr stays read-only, /data cannot be unmounted */
static const char *locked(void)
{
	if (!mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL))
		return "/usr could be made writable: its mount is not locked read-only";
	if (!umount2("/data", MNT_DETACH))
		return "/data could be unmounted: its mount is not locked";
	return NULL;
}

static void __attribute__((noreturn)) init_main(void)
{
	char *before;
	int fd, st;
	pid_t c;

	if (!sh->user)
		build_root();
	/* root inside, as nspawn's inner child makes itself once mapped */
	else if (!sh->userorder && (setgroups(0, NULL) || setresgid(0, 0, 0) ||
				    setresuid(0, 0, 0) || sethostname("ctr", 3)))
		_exit(15);
	else
		own_proc();
	if (sh->shared_tmp) {
		/* /tmp's group: a peer, a slave; then the root's, with a peer */
		MNT(NULL, "/tmp", NULL, MS_SHARED, NULL);
		if (mkdir("/tmp2", 0755) || mkdir("/tmps", 0755) || mkdir("/rootpeer", 0755))
			_exit(11);
		MNT("/tmp", "/tmp2", NULL, MS_BIND, NULL);
		MNT("/tmp", "/tmps", NULL, MS_BIND, NULL);
		MNT(NULL, "/tmps", NULL, MS_SLAVE, NULL);
		MNT(NULL, "/", NULL, MS_SHARED, NULL);
		MNT("/", "/rootpeer", NULL, MS_BIND, NULL);
	}
	if (sh->hidden) {
		if (mkdir("/hid", 0755))
			_exit(12);
		MNT("h1", "/hid", "tmpfs", 0, NULL);
		MNT("h2", "/hid", "tmpfs", 0, NULL);
	}
	if (sh->user && locked())
		_exit(16);
	fd = open("/tmp/t", O_RDWR);
	if (fd < 0 || lseek(fd, 3, SEEK_SET) != 3)
		_exit(9);
	sh->pid_inside[S_INIT] = getpid();
	before = sh->noproc ? strdup("") : mounts("/proc/self/mountinfo");
	c = fork();
	if (c == 0)
		child_c(before);
	while (!sh->s[S_C].ready)
		usleep(10000);
	sh->s[S_INIT].ready = 1;
	wait_go();
	check(S_INIT, before, fd, 3, "/data");
	/* (idmapother: /data is nobody's to root inside) */
	if (sh->s[S_INIT].ok && !sh->idmapother && put("/data/g", "after"))
		snprintf(sh->s[S_INIT].msg, sizeof(sh->s[S_INIT].msg), "cannot write /data/g");
	waitpid(c, &st, 0);
	if (sh->user && !sh->userorder && sh->s[S_INIT].ok) {
		const char *l = locked();
		struct stat own;
		char *m = sh->s[S_INIT].msg;
		size_t len = sizeof(sh->s[S_INIT].msg);

		if (l)
			snprintf(m, len, "%s", l);
		else if (sh->userpid && (stat("/tmp/ownb/f", &own) || own.st_uid != 1000 ||
					 own.st_gid != 1000 || !has("/tmp/ownb/f", "own")))
			snprintf(m, len, "/tmp/ownb/f is not user 1000's file with its contents");
		else if (sh->userpid && (umount2("/tmp/ownb", 0) || umount2("/tmp/own", 0)))
			snprintf(m, len,
				 "it cannot unmount /tmp/ownb or /tmp/own, which it mounted itself "
				 "(locked by the restore?): %s",
				 strerror(errno));
		else if (sethostname("ctr2", 4))
			snprintf(m, len, "root inside cannot set its host name: %s",
				 strerror(errno));
		else if (mount("t2", "/tmp", "tmpfs", 0, NULL))
			snprintf(m, len, "root inside cannot mount a tmpfs: %s", strerror(errno));
		else
			snprintf(m, len, "ok");
		sh->s[S_INIT].ok = !strcmp(m, "ok");
	}
	_exit(0);
}

/* C drops to uid 1000 inside (user) */
static void user_c(void)
{
	if (sh->usersub && unshare(CLONE_NEWUTS))
		_exit(18);
	if (sh->subns && (unshare(CLONE_NEWUTS | CLONE_NEWIPC) || sethostname("csub", 4)))
		_exit(18);
	if (sh->submnt && unshare(CLONE_NEWNS))
		_exit(18);
	if (sh->user && !sh->userorder &&
	    (setgroups(0, NULL) || setresgid(1000, 1000, 1000) || setresuid(1000, 1000, 1000)))
		_exit(17);
}

/* "user": the maker builds the root in the host's user namespace, then
 * clones the init into new user, pid, mount, UTS, IPC and network
 * namespaces, as nspawn's outer child does, and writes its maps through
 * the host's /proc (kept open: the maker left it behind) */
static pid_t make_user_init(void)
{
	int procfd = open("/proc", O_PATH | O_DIRECTORY), fd;
	char rel[64];
	pid_t i;

	if (procfd < 0 || pipe(sh->maps))
		_exit(20);
	build_root();
	i = syscall(SYS_clone,
		    (sh->userorder ? 0 : CLONE_NEWUSER) | (sh->userpid ? CLONE_NEWPID : 0) |
			    CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | SIGCHLD,
		    NULL, NULL, NULL, NULL);
	if (i == 0) {
		char b;

		close(sh->maps[1]);
		close(procfd);
		if (read(sh->maps[0], &b, 1) != 1)
			_exit(21);
		close(sh->maps[0]);
		if (sh->userorder && unshare(CLONE_NEWUSER))
			_exit(25);
		prctl(PR_SET_NAME, "ctrroot");
		init_main();
	}
	if (i < 0)
		_exit(22);
	for (int k = 0; k < 2 && !sh->userorder; k++) {
		static const char *const files[] = { "uid_map", "gid_map" };

		snprintf(rel, sizeof(rel), "%d/%s", i, files[k]);
		fd = openat(procfd, rel, O_WRONLY);
		if (fd < 0 || write(fd, "0 200000 65536\n", 15) != 15)
			_exit(23);
		close(fd);
	}
	if (write(sh->maps[1], "g", 1) != 1)
		_exit(24);
	return i;
}

static unsigned long ino_of(pid_t pid, const char *ns)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, ns);
	return stat(path, &st) ? 0 : st.st_ino;
}

/* the user namespace that owns pid's namespace ns */
static unsigned long owner_of(pid_t pid, const char *ns)
{
	char path[64];
	struct stat st;
	int fd, u;
	unsigned long ino = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, ns);
	fd = open(path, O_RDONLY);
	u = fd < 0 ? -1 : ioctl(fd, NS_GET_USERNS);
	if (u >= 0 && !fstat(u, &st))
		ino = st.st_ino;
	if (fd >= 0)
		close(fd);
	if (u >= 0)
		close(u);
	return ino;
}

/* "user": the monitor's view of init and its child C */
static void user_checks(pid_t init, const char *when)
{
	static const char *const owned[] = { "mnt", "uts", "ipc", "net", "pid" };
	size_t nr = sizeof(owned) / sizeof(owned[0]) - !sh->userpid;
	char path[64], *t;
	unsigned long u = ino_of(init, "user");
	pid_t c;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", init, init);
	t = crt_read_file(path, NULL);
	c = t ? atoi(t) : 0;
	free(t);
	crt_check(c > 0, "%s: init %d has no child", when, init);
	crt_check(u && u != ino_of(getpid(), "user"), "%s: init is in the monitor's user namespace",
		  when);
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", init, k ? "gid_map" : "uid_map");
		t = crt_read_file(path, NULL);
		crt_check(t && strtoul(t, &t, 10) == 0 && strtoul(t, &t, 10) == 200000 &&
				  strtoul(t, &t, 10) == 65536,
			  "%s: init's %s is not 0 200000 65536", when, k ? "gid_map" : "uid_map");
	}
	for (size_t k = 0; k < nr; k++) {
		bool own = sh->subns && (!strcmp(owned[k], "uts") || !strcmp(owned[k], "ipc"));

		crt_check(owner_of(init, owned[k]) == u,
			  "%s: init's %s namespace is not owned by its user namespace", when,
			  owned[k]);
		crt_check(own ? ino_of(c, owned[k]) != ino_of(init, owned[k])
			      : ino_of(c, owned[k]) == ino_of(init, owned[k]),
			  own ? "%s: C is in init's %s namespace, not its own"
			      : "%s: C is not in init's %s namespace",
			  when, owned[k]);
		crt_check(!own || owner_of(c, owned[k]) == u,
			  "%s: C's %s namespace is not owned by init's user namespace", when,
			  owned[k]);
	}
	crt_check(ino_of(c, "user") == u, "%s: C is not in init's user namespace", when);
	if (sh->userpid) {
		char want[64], *st;

		snprintf(path, sizeof(path), "/proc/%d/status", init);
		snprintf(want, sizeof(want), "\nNSpid:\t%d\t1\n", init);
		st = crt_read_file(path, NULL);
		crt_check(st && strstr(st, want),
			  "%s: init is not pid 1 of its pid namespace, pid %d outside", when, init);
		free(st);
	}
	for (int k = 0; k < 2; k++) {
		char want[80], *st;

		snprintf(path, sizeof(path), "/proc/%d/status", k ? c : init);
		snprintf(want, sizeof(want), "\nUid:\t%d\t%d\t%d\t%d\n", k ? 201000 : 200000,
			 k ? 201000 : 200000, k ? 201000 : 200000, k ? 201000 : 200000);
		st = crt_read_file(path, NULL);
		crt_check(st && strstr(st, want), "%s: %s's host uids are not %d", when,
			  k ? "C" : "init", k ? 201000 : 200000);
		free(st);
	}
	crt_msg("%s: init %d and C %d in a user namespace owning their others, ids 0 and 1000 "
		"inside",
		when, init, c);
}

int main(int argc, char **argv)
{
	const char *dir = crt_init();
	char path[PATH_MAX + 32], run[64], *mi;
	struct stat a, b;
	pid_t h;
	int notify, netns[2] = { -1, -1 };

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	sh->shared_tmp = argc > 1 && !strcmp(argv[1], "shared");
	sh->noproc = argc > 1 && !strcmp(argv[1], "noproc");
	sh->hidden = argc > 1 && !strcmp(argv[1], "hidden");
	sh->away = argc > 1 && !strcmp(argv[1], "away");
	sh->deleted = argc > 1 && !strcmp(argv[1], "deleted");
	sh->usersub = argc > 1 && !strcmp(argv[1], "usersub");
	sh->userorder = argc > 1 && !strcmp(argv[1], "userorder");
	sh->idmapother = argc > 1 && !strcmp(argv[1], "idmapother");
	sh->subns = argc > 1 && !strcmp(argv[1], "userpidsub");
	sh->submnt = argc > 1 && !strcmp(argv[1], "usermnt");
	sh->userpid = argc > 1 &&
		      (!strcmp(argv[1], "userpid") || sh->idmapother || sh->subns || sh->submnt);
	sh->user = (argc > 1 && !strcmp(argv[1], "user")) || sh->usersub || sh->userorder ||
		   sh->userpid;
	sh->noproc |= sh->user && !sh->userpid;
	if (!realpath(dir, sh->dir))
		crt_fail("realpath %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/newroot", sh->dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/hostdata", sh->dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/hostdata/f", sh->dir);
	if (put(path, "hostdata"))
		crt_fail("cannot write %s", path);
	/* "nsaway": the monitor holds the network namespace of a process gone
	 * (refused: nothing of the tree lives there) */
	if (argc > 1 && !strcmp(argv[1], "nsaway")) {
		int gate[2];
		pid_t g;
		char b;

		if (pipe(gate) || (g = fork()) < 0)
			crt_fail("cannot start the holder of a network namespace");
		if (g == 0) {
			if (unshare(CLONE_NEWNET) || write(gate[1], "u", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		if (read(gate[0], &b, 1) != 1)
			crt_fail("the holder made no network namespace");
		snprintf(path, sizeof(path), "/proc/%d/ns/net", g);
		if (open(path, O_RDONLY) < 0)
			crt_fail("cannot open %s: %s", path, strerror(errno));
		kill(g, SIGKILL);
		waitpid(g, NULL, 0);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (sh->userpid && socketpair(AF_UNIX, SOCK_STREAM, 0, pass))
		crt_fail("socketpair: %s", strerror(errno));
	if ((h = fork()) == 0) {
		pid_t i;

		if (sh->user) {
			sh->init_host = make_user_init();
			_exit(0);
		}
		if (unshare(CLONE_NEWPID))
			_exit(4);
		i = fork();
		if (i == 0) {
			prctl(PR_SET_NAME, "ctrroot");
			init_main();
		}
		sh->init_host = i;
		_exit(i > 0 ? 0 : 5);
	}
	crt_wait_ok(h, "the namespace's maker");
	notify = sh->userpid ? take_notify() : -1;
	/* userpid: the monitor holds init's network namespace at two fds, one
	 * close-on-exec (nspawn holds its container's) */
	if (sh->userpid) {
		snprintf(path, sizeof(path), "/proc/%d/ns/net", sh->init_host);
		netns[0] = open(path, O_RDONLY | O_CLOEXEC);
		netns[1] = netns[0] < 0 ? -1 : dup(netns[0]);
		if (netns[1] < 0)
			crt_fail("cannot hold init's network namespace: %s", strerror(errno));
	}
	crt_own_child(sh->init_host);
	for (int n = 0; !sh->s[S_INIT].ready; n++) {
		int st;

		if (waitpid(sh->init_host, &st, WNOHANG) == sh->init_host)
			crt_fail("init ended while setting up: status %#x", st);
		if (n > 1000)
			crt_fail("the container did not start");
		usleep(10000);
	}
	/* the monitor's view of them too (the container may have no /proc) */
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", sh->init_host);
	mi = mounts(path);
	if (sh->user && !sh->userorder && !sh->usersub && !sh->submnt)
		user_checks(sh->init_host, "before");
	crt_ready();
	crt_wait_term();
	if (sh->user && !sh->userorder && !sh->usersub && !sh->submnt)
		user_checks(sh->init_host, "after");
	{
		char *now = mounts(path);

		crt_check(mi && now && !strcmp(mi, now),
			  "init's mounts differ: now\n%.200s\nwere\n%.200s", now ? now : "?",
			  mi ? mi : "?");
		free(now);
	}

	/* the monitor's namespace shows none of the container's mounts, and
	 * the restore's staging directory is gone */
	snprintf(path, sizeof(path), "%s/newroot", sh->dir);
	crt_check(!stat(path, &a) && !stat(sh->dir, &b) && a.st_dev == b.st_dev,
		  "%s is a mount point in the monitor's namespace", path);
	snprintf(run, sizeof(run), "/run/kupdate-ctr-%d", sh->init_host);
	crt_check(access(run, F_OK) && errno == ENOENT, "%s is still there", run);

	if (notify >= 0)
		check_notify(notify, "after", false);
	for (int k = 0; sh->userpid && k < 2; k++) {
		struct stat x, y;
		int fl = fcntl(netns[k], F_GETFD);

		snprintf(path, sizeof(path), "/proc/%d/ns/net", sh->init_host);
		crt_check(!fstat(netns[k], &x) && !stat(path, &y) && x.st_ino == y.st_ino &&
				  x.st_dev == y.st_dev,
			  "after: the monitor's fd %d is not init's network namespace", netns[k]);
		crt_check(fl >= 0 && !!(fl & FD_CLOEXEC) == !k,
			  "after: the monitor's fd %d has lost its close-on-exec flag (%d)",
			  netns[k], fl);
	}
	sh->go = 1;
	for (int n = 0; !(sh->s[S_INIT].done && sh->s[S_C].done); n++) {
		if (n > 1000)
			crt_fail("no verdict in 10 s");
		usleep(10000);
	}
	crt_wait_ok(sh->init_host, "init");
	if (notify >= 0)
		check_notify(notify, "after", true);
	for (int i = 0; i < NSLOTS; i++)
		crt_check(sh->s[i].ok, "%s: %s", i ? "C" : "init", sh->s[i].msg);
	snprintf(path, sizeof(path), "%s/hostdata/g", sh->dir);
	crt_check(sh->idmapother || has(path, "after"), "init's write to /data did not reach %s",
		  path);
	crt_pass();
}
