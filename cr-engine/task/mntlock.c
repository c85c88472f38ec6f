/* Which mounts of a container's mount namespace its own processes made.
 *
 * A mount namespace copied into a less privileged user namespace has its
 * mounts locked together (the kernel's MNT_LOCKED): root of that user
 * namespace may not unmount them, nor lift their read-only, nosuid...
 * flags, and so may not reveal what they cover.  Mounts made afterwards
 * from inside (nspawn's inner child: /proc, /sys; the container's
 * systemd: /run/credentials/UNIT, /run/lock) are not locked, and the
 * container unmounts them at will (its systemd does when it sets up a
 * service's mount namespace, or at shutdown).  A restore that made them
 * all outside would lock them all.
 *
 * mountinfo does not say which are locked; unmounting them does.  A
 * helper joins the container's user and mount namespaces and its root,
 * makes a private copy of the namespace (unshare in the same user
 * namespace keeps the locks and adds none; private: nothing it does
 * reaches the container's), and tries to unmount each mount of the copy,
 * the newest first; the kernel refuses the locked ones (EINVAL).  A mount
 * that is not the one its path leads to in the copy (hidden by another)
 * is taken for locked, as it was before: made outside. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-util.h"
#include "log.h"
#include "mntns.h"
#include "namespaces.h"
#include "util.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

#define LOCK_PROBE_MS 5000

static int find_index(const struct mount_table *t, int id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i].id == id)
			return (int)i;
	return -1;
}

/* map[i]: the id in the copy c of mount i of the original t (0: none),
 * found down the tree: same parent, point, root and device */
static void map_copy(const struct mount_table *t, const struct mount_table *c, int *map)
{
	bool *used = xzalloc(c->n ? c->n : 1);

	if (!used)
		return;
	for (size_t i = 0; i < t->n; i++) {
		int pi = i ? find_index(t, t->e[i].parent) : -1;
		int want_parent = pi >= 0 ? map[pi] : 0;

		map[i] = 0;
		if (i && !want_parent)
			continue;
		for (size_t k = 0; k < c->n; k++) {
			const struct mount_entry *a = &t->e[i], *b = &c->e[k];

			if (used[k] || strcmp(a->mp, b->mp) || strcmp(a->root, b->root) ||
			    a->maj != b->maj || a->min != b->min || (i && b->parent != want_parent))
				continue;
			used[k] = true;
			map[i] = b->id;
			break;
		}
	}
	free(used);
}

static int mount_id_of(const char *path, int *id)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx))
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	*id = (int)stx.stx_mnt_id;
	return 0;
}

/* in the helper: 'i' (made inside) or 'l' (locked) for each mount of t */
static void __attribute__((noreturn)) probe(pid_t pid, const struct mount_table *t, int out)
{
	char path[64], *res = calloc(t->n + 1, 1);
	int procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC), rootfd, ufd, mfd;
	struct mount_table c;
	int *map = calloc(t->n + 1, sizeof(*map));

	snprintf(path, sizeof(path), "%d/root", pid);
	rootfd = openat(procfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%d/ns/user", pid);
	ufd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%d/ns/mnt", pid);
	mfd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
	if (!res || !map || procfd < 0 || rootfd < 0 || ufd < 0 || mfd < 0 ||
	    setns(ufd, CLONE_NEWUSER) || setns(mfd, CLONE_NEWNS) || fchdir(rootfd) || chroot(".") ||
	    unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount_table_read_at(procfd, "self/mountinfo", &c))
		_exit(1);
	map_copy(t, &c, map);
	memset(res, 'l', t->n);
	/* newest first: a mount on top of another goes before it */
	for (size_t i = t->n; i-- > 1;) {
		int id = 0;

		if (!map[i] || mount_id_of(t->e[i].mp, &id) || id != map[i])
			continue;
		if (!umount2(t->e[i].mp, MNT_DETACH))
			res[i] = 'i';
		else if (errno != EINVAL)
			_exit(2);
	}
	_exit(write(out, res, t->n) == (ssize_t)t->n ? 0 : 3);
}

/* pid's mount namespace is owned by its user namespace */
static bool owned(pid_t pid)
{
	struct stat u;
	ino_t o = 0;

	return !userns_owner_ino(pid, "mnt", &o) && !ns_stat(pid, "user", &u) && u.st_ino == o;
}

int mntlock_probe(pid_t pid, const struct mount_table *t, bool *inside)
{
	int fds[2], st = 0, ret = 0;
	struct pollfd pf;
	size_t got = 0;
	char *res;
	pid_t h;

	memset(inside, 0, t->n * sizeof(*inside));
	/* (made before its user namespace: refused, userns.c) */
	if (!owned(pid))
		return 0;
	res = calloc(t->n + 1, 1);
	if (!res || pipe2(fds, O_CLOEXEC)) {
		free(res);
		return -ENOMEM;
	}
	h = fork();
	if (h == 0) {
		close(fds[0]);
		probe(pid, t, fds[1]);
	}
	close(fds[1]);
	if (h < 0) {
		ret = -errno;
		goto out;
	}
	pf = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	while (got < t->n) {
		ssize_t n;
		int r = poll(&pf, 1, LOCK_PROBE_MS);

		if (r <= 0) {
			ret = r ? -errno : -ETIMEDOUT;
			break;
		}
		n = read(fds[0], res + got, t->n - got);
		if (n <= 0)
			break;
		got += n;
	}
	if (ret == -ETIMEDOUT)
		kill(h, SIGKILL);
	waitpid(h, &st, 0);
	if (!ret && (got != t->n || !WIFEXITED(st) || WEXITSTATUS(st)))
		ret = -EIO;
	if (ret) {
		pr_err("pid %d: cannot tell which mounts of its mount namespace it made itself "
		       "(a helper in a copy of it%s, status %#x): %s",
		       pid, ret == -ETIMEDOUT ? " did not answer within 5 s" : "", st,
		       strerror(-ret));
		goto out;
	}
	for (size_t i = 0; i < t->n; i++)
		inside[i] = res[i] == 'i';
out:
	close(fds[0]);
	free(res);
	return ret;
}
