/* --own-ns: the test lives in mount, UTS and IPC namespaces of its own,
 * made the way a service manager sandboxes a service: a tmpfs on
 * $CRT_DIR/private (a private /tmp), $CRT_DIR/ro bound read-only,
 * $CRT_DIR/hidden covered by an empty read-only tmpfs of mode 0 (an
 * inaccessible path), the host name "crtest-ns".  kupdate dumps it with
 * --own-namespaces; each restore goes into the namespaces of a holder made
 * the same way anew (--namespaces-of), as systemd makes a unit's anew at
 * its start.  --ns-holder-differs: the holder lacks the read-only bind (a
 * unit whose configuration changed): the restore must refuse.
 * --own-userns: in a user namespace too, made first (its other namespaces
 * are its own), mapping root to itself and uid 1000 inside to nobody
 * outside, with setgroups denied, as systemd's PrivateUsers= maps a unit's
 * root and user (to themselves there: here an id that differs, so that the
 * restore must translate); the map is written by the runner (only the
 * parent namespace can); with --ns-holder-differs the holder maps 1000 to
 * 1000.
 * --own-netns: in a network namespace too, its loopback up (as systemd's
 * PrivateNetwork= makes it), holding fds 40 and 41, a unix pair made
 * before the namespace; with --ns-holder-differs the holder's
 * loopback stays down (its mounts are the same).
 * --private-dev: /dev is a tmpfs of its own with null, zero and urandom
 * (systemd's PrivateDevices=).
 * --host-mount-late: a tmpfs the host (the runner's namespace) has on
 * $CRT_DIR/late, which the test's namespace confines read-only (a mount
 * of the host's, as ProtectSystem= makes one); each restore's holder is
 * made while the host has it not, and the host mounts it again before the
 * restore (as a boot mounts while a unit's anchor starts): not the unit's
 * configuration, the restore goes on.  And a network namespace's file
 * bound at $CRT_DIR/nsbind (as `ip netns add` binds at /run/netns/NAME),
 * confined nosuid: before each restore, another namespace is bound there
 * (a new boot's): its root (net:[INODE]) differs, the restore goes on. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crrun.h"

pid_t ns_holder;

static int sub(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", workdir, name);
	return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

/* the child's id maps, written from here (the parent namespace) */
static int map_user(pid_t pid, bool differs)
{
	const char *map = differs ? "0 0 1\n1000 1000 1\n" : "0 0 1\n1000 65534 1\n";
	const char *files[] = { "setgroups", "uid_map", "gid_map" };
	const char *text[] = { "deny", map, map };

	for (int i = 0; i < 3; i++) {
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/%s", pid, files[i]);
		f = fopen(path, "w");
		if (!f || fputs(text[i], f) < 0 || fclose(f)) {
			diag("cannot write %s: %s", path, strerror(errno));
			if (f)
				fclose(f);
			return -1;
		}
	}
	return 0;
}

/* fork a child in new namespaces made as the test's were (user namespace
 * first, mapped from here): 0 in the child, its pid here, -1 */
pid_t ns_fork(bool differs)
{
	int up[2], down[2];
	char c = 0;
	pid_t pid;

	if (pipe(up) || pipe(down))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		if (o.own_userns && (unshare(CLONE_NEWUSER) || write(up[1], "u", 1) != 1 ||
				     read(down[0], &c, 1) != 1 || c != 'g'))
			_exit(124);
		close(up[1]);
		close(down[0]);
		if (ns_setup(differs && !o.own_userns))
			_exit(125);
		return 0;
	}
	close(up[1]);
	close(down[0]);
	if (pid > 0 && o.own_userns) {
		bool ok = read(up[0], &c, 1) == 1 && !map_user(pid, differs);

		if (write(down[1], ok ? "g" : "x", 1) != 1 || !ok) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			pid = -1;
		}
	}
	close(up[0]);
	close(down[1]);
	return pid;
}

/* the loopback of a new network namespace up */
static int lo_up(void)
{
	struct ifreq r = { .ifr_name = "lo" };
	int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = -1;

	if (sk >= 0 && !ioctl(sk, SIOCGIFFLAGS, &r)) {
		r.ifr_flags |= IFF_UP;
		ret = ioctl(sk, SIOCSIFFLAGS, &r);
	}
	if (sk >= 0)
		close(sk);
	return ret;
}

/* --private-dev: /dev a tmpfs of its own with null, zero and urandom, as
 * systemd's PrivateDevices= makes it (the host's devices out of reach) */
static int private_dev(void)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = { { "/dev/null", 1, 3 }, { "/dev/zero", 1, 5 }, { "/dev/urandom", 1, 9 } };

	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=4m"))
		return -1;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (mknod(nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) ||
		    chmod(nodes[i].name, 0666))
			return -1;
	return 0;
}

static char late[512], nsbind[512];
static pid_t ns_owner; /* the process whose network namespace is bound */

/* a network namespace of our own, held by a child, bound at nsbind: a
 * namespace file's bind (nsfs), as `ip netns add` makes one */
static int bind_netns(void)
{
	char src[64];
	int p[2], fd;
	char c;

	if (pipe(p))
		return -1;
	ns_owner = fork();
	if (ns_owner == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWNET))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (ns_owner < 0 || read(p[0], &c, 1) != 1) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	snprintf(nsbind, sizeof(nsbind), "%s/nsbind", workdir);
	fd = open(nsbind, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	snprintf(src, sizeof(src), "/proc/%d/ns/net", ns_owner);
	return mount(src, nsbind, NULL, MS_BIND, NULL);
}

int host_late_mount(void)
{
	if (sub(late, sizeof(late), "late"))
		return -1;
	if (mount("tmpfs", late, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m"))
		return -1;
	return nsbind[0] ? 0 : bind_netns();
}

/* before a holder is made: the tmpfs gone (mounted again after it), and
 * another namespace bound (the holder has that one) */
int host_late_before_holder(void)
{
	umount2(late, MNT_DETACH);
	umount2(nsbind, MNT_DETACH);
	if (ns_owner > 0) {
		kill(ns_owner, SIGKILL);
		waitpid(ns_owner, NULL, 0);
		ns_owner = 0;
	}
	return bind_netns();
}

void host_late_umount(void)
{
	if (late[0])
		umount2(late, MNT_DETACH);
	if (nsbind[0])
		umount2(nsbind, MNT_DETACH);
	if (ns_owner > 0) {
		kill(ns_owner, SIGKILL);
		waitpid(ns_owner, NULL, 0);
		ns_owner = 0;
	}
}

int ns_setup(bool differs)
{
	char priv[512], ro[512], hidden[512];

	if (o.own_netns) {
		int sp[2];

		/* a unix pair made outside the namespace, fds 40 and 41 (as
		 * systemd makes a unit's stdout stream to journald) */
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) || dup2(sp[0], 40) != 40 ||
		    dup2(sp[1], 41) != 41 || close(sp[0]) || close(sp[1]))
			return -1;
		if (unshare(CLONE_NEWNET) || (!differs && lo_up()))
			return -1;
		differs = false; /* the loopback differs, not the mounts */
	}

	if (sub(priv, sizeof(priv), "private") || sub(ro, sizeof(ro), "ro") ||
	    sub(hidden, sizeof(hidden), "hidden"))
		return -1;
	if (unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", priv, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"))
		return -1;
	if (!differs && (mount(ro, ro, NULL, MS_BIND, NULL) ||
			 mount(NULL, ro, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL)))
		return -1;
	if (mount("tmpfs", hidden, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=000,size=4k") ||
	    sethostname("crtest-ns", 9))
		return -1;
	if (o.private_dev && private_dev())
		return -1;
	/* the host's mounts, confined (a holder made without them has none):
	 * the tmpfs read-only, the namespace file's bind nosuid */
	if (o.host_mount_late) {
		mount(NULL, late, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		      NULL);
		mount(NULL, nsbind, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID, NULL);
	}
	return 0;
}

/* a holder in new namespaces made as the test's were; 0 or -1 */
int ns_holder_start(void)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = ns_fork(o.ns_holder_differs);
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		alarm(300); /* bounded, whatever happens to the runner */
		pause();
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1) {
		close(p[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		diag("cannot make the namespaces of a holder: %s", strerror(errno));
		return -1;
	}
	close(p[0]);
	ns_holder = pid;
	return 0;
}

void ns_holder_stop(void)
{
	if (ns_holder > 0) {
		kill(ns_holder, SIGKILL);
		waitpid(ns_holder, NULL, 0);
	}
	ns_holder = 0;
}

/* the restored root lives in the holder's namespaces */
int ns_check_restored(pid_t root)
{
	static const char *const kinds[] = { "mnt", "uts", "ipc", "net", "user" };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char a[64], b[64];
		struct stat x, y;

		if ((!strcmp(kinds[i], "user") && !o.own_userns) ||
		    (!strcmp(kinds[i], "net") && !o.own_netns))
			continue;
		snprintf(a, sizeof(a), "/proc/%d/ns/%s", root, kinds[i]);
		snprintf(b, sizeof(b), "/proc/%d/ns/%s", ns_holder, kinds[i]);
		if (stat(a, &x) || stat(b, &y) || x.st_ino != y.st_ino) {
			diag("FAIL: the restored root %d is not in the %s namespace of the "
			     "holder %d",
			     root, kinds[i], ns_holder);
			return -1;
		}
	}
	return 0;
}
