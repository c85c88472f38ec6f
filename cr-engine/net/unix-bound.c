/* Where a unix socket's file lives when its name alone does not say: bound
 * through a directory's descriptor (/proc/self/fd/N/FILE, which only that
 * moment's fd N resolves), in the mount namespace a container's init made
 * (nspawn's notify socket at /run/host/notify, which its holder outside
 * does not see), or at a path since removed.  The dump finds the directory
 * or the container, the restore binds there again (unix.c decides when). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dump.h"
#include "log.h"
#include "namespaces.h"
#include "proc.h"
#include "unix.h"
#include "unix-int.h"
#include "util.h"

/* ------------------------------------------------------------ dump */

/* A socket bound at path, which is gone: the path must be free and its
 * directory still there, for the restore to bind it there again. */
int unix_removed_path(struct cr_proc *p, int fd, const char *path, const char *rpath, UnixSk *u)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path) + 40];
	struct stat st;
	char *slash;

	if (!lstat(rpath, &st)) {
		pr_err("pid %d: fd %d: the unix socket was bound at %s, which was removed and is "
		       "now another file; it cannot be bound there again",
		       p->pid, fd, path);
		return -EOPNOTSUPP;
	}
	/* rpath is /proc/PID/root and path: its last slash is path's */
	snprintf(dir, sizeof(dir), "%s", rpath);
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = 0;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		pr_err("pid %d: fd %d: the unix socket was bound at %s, removed with its "
		       "directory; it cannot be bound there again",
		       p->pid, fd, path);
		return -EOPNOTSUPP;
	}
	u->has_removed = u->removed = 1;
	return 0;
}

/* A socket bound at path in the mount namespace a container's init made
 * (nspawn's outer child binds its notify socket at /run/host/notify
 * there), which its holder does not see: the process that made it, found
 * through its root; 0 if none */
pid_t unix_bound_in_container(struct cr_dump_ctx *ctx, const char *path, uint32_t ino,
			      struct stat *st)
{
	for (int i = 0; i < ctx->nr_procs; i++) {
		struct cr_proc *q = ctx->procs[i];
		char rpath[sizeof(((struct sockaddr_un *)0)->sun_path) + 48];

		/* a mount namespace q made: not its parent's, not the root's */
		if (!q->parent || ns_same(q->pid, q->parent->pid, "mnt") ||
		    ns_same(q->pid, ctx->procs[0]->pid, "mnt"))
			continue;
		snprintf(rpath, sizeof(rpath), "/proc/%d/root%s", q->pid, path);
		if (!lstat(rpath, st) && st->st_ino == ino && S_ISSOCK(st->st_mode))
			return q->pid;
	}
	return 0;
}

/* "/proc/self/fd/N/FILE": N and FILE (one component); false otherwise */
bool unix_through_fd(const char *name, int *n, const char **file)
{
	const char *s = name + 14;
	char *end;
	long v;

	if (strncmp(name, "/proc/self/fd/", 14))
		return false;
	v = strtol(s, &end, 10);
	if (end == s || *end != '/' || v < 0 || v > INT_MAX || !end[1] || strchr(end + 1, '/'))
		return false;
	*n = v;
	*file = end + 1;
	return true;
}

/* A socket bound through a descriptor of a directory (name: /proc/self/
 * fd/N/FILE): the directory, found among those of p's open files and its
 * cwd by the socket file's inode; into u->bound_dir */
int unix_find_bound_dir(struct cr_proc *p, int fd, const char *name, const char *file, uint64_t ino,
			UnixSk *u)
{
	char lpath[320], link[PATH_MAX], cand[PATH_MAX + 32];
	struct dirent *de;
	DIR *d;

	snprintf(lpath, sizeof(lpath), "/proc/%d/fd", p->pid);
	d = opendir(lpath);
	for (bool cwd = true; d;) {
		struct stat st;
		ssize_t n;

		if (cwd) {
			snprintf(lpath, sizeof(lpath), "/proc/%d/cwd", p->pid);
			cwd = false;
		} else if ((de = readdir(d))) {
			snprintf(lpath, sizeof(lpath), "/proc/%d/fd/%s", p->pid, de->d_name);
		} else {
			break;
		}
		n = readlink(lpath, link, sizeof(link) - 1);
		if (n <= 0 || link[0] != '/')
			continue;
		link[n] = 0;
		/* the directory itself, or the one a file of it is in */
		for (int up = 0; up < 2; up++) {
			char *slash;

			snprintf(cand, sizeof(cand), "/proc/%d/root%s/%s", p->pid, link, file);
			if (!lstat(cand, &st) && S_ISSOCK(st.st_mode) && st.st_ino == ino) {
				closedir(d);
				u->bound_dir = xstrdup(link);
				u->has_file_mode = u->has_file_uid = u->has_file_gid = 1;
				u->file_mode = st.st_mode & 07777;
				u->file_uid = st.st_uid;
				u->file_gid = st.st_gid;
				return u->bound_dir ? 0 : -ENOMEM;
			}
			slash = strrchr(link, '/');
			if (!slash || slash == link)
				break;
			*slash = 0;
		}
	}
	if (d)
		closedir(d);
	pr_err("pid %d: fd %d: the unix socket was bound as %s, through a directory's "
	       "descriptor, and no open file of the process is in a directory that holds its "
	       "socket file now; kupdate cannot bind it there again",
	       p->pid, fd, name);
	return -EOPNOTSUPP;
}

/* ---------------------------------------------------------- restore */

socklen_t unix_make_addr(struct sockaddr_un *a, const ProtobufCBinaryData *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, name->data, MIN(name->len, sizeof(a->sun_path)));
	return offsetof(struct sockaddr_un, sun_path) + MIN(name->len, sizeof(a->sun_path));
}

/* bound through /proc/self/fd/N/FILE, with fd N the directory for that
 * moment (whatever N is in this process meanwhile is put back): the same
 * name, the file in the same directory */
int unix_bind_through_fd(int sk, const UnixSk *u, const char *what)
{
	struct sockaddr_un a;
	socklen_t len = unix_make_addr(&a, &u->name);
	const char *file;
	struct stat st;
	int n, dfd, saved = -1, flags = 0, ret = 0;

	if (!unix_through_fd(a.sun_path, &n, &file)) {
		pr_err("%s: image is damaged: a socket bound through %s is named %s", what,
		       u->bound_dir, a.sun_path);
		return -EINVAL;
	}
	dfd = open(u->bound_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return pr_errno("%s: cannot open %s to bind its unix socket in", what,
				u->bound_dir);
	/* the dead socket file of the dump is replaced */
	if (!fstatat(dfd, file, &st, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(st.st_mode))
		unlinkat(dfd, file, 0);
	if (dfd != n) {
		flags = fcntl(n, F_GETFD);
		if (flags >= 0)
			saved = fcntl(n, F_DUPFD_CLOEXEC, 0);
		if ((flags >= 0 && saved < 0) || dup2(dfd, n) < 0)
			ret = -errno;
	}
	if (!ret && bind(sk, (struct sockaddr *)&a, len))
		ret = -errno;
	if (dfd != n) {
		if (saved >= 0) {
			dup2(saved, n);
			fcntl(n, F_SETFD, flags);
			close(saved);
		} else {
			close(n);
		}
	}
	if (!ret && u->has_file_mode &&
	    (fchownat(dfd, file, u->file_uid, u->file_gid, AT_SYMLINK_NOFOLLOW) ||
	     fchmodat(dfd, file, u->file_mode, 0)))
		ret = -errno;
	close(dfd);
	if (ret)
		pr_err("%s: cannot bind the unix socket to %s in %s: %s", what, file, u->bound_dir,
		       strerror(-ret));
	return ret;
}

/* the nearest mount root at or above dir (a path of ours), read-only:
 * its path into out; false if dir is writable */
static bool ro_cover(const char *dir, char *out, size_t len)
{
	struct statvfs vfs;

	if (statvfs(dir[0] ? dir : "/", &vfs) || !(vfs.f_flag & ST_RDONLY))
		return false;
	snprintf(out, len, "%s", dir);
	for (;;) {
		struct statx sx;
		char *slash;

		if (!statx(AT_FDCWD, out[0] ? out : "/", 0, STATX_BASIC_STATS, &sx) &&
		    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
		    (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
			return out[0] != 0; /* not the root itself */
		slash = strrchr(out, '/');
		if (!slash)
			return false;
		*slash = 0;
	}
}

/* the helper of unix_bind_in_built(): 0, or an errno */
static int bind_built_helper(int sk, const UnixSk *u, const struct sockaddr_un *a, socklen_t len)
{
	char dir[sizeof(a->sun_path)], cover[sizeof(a->sun_path)];

	snprintf(dir, sizeof(dir), "%s", a->sun_path);
	*strrchr(dir, '/') = 0;
	/* a copy of its own, private: what it unmounts goes nowhere */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return errno;
	for (int k = 0; k < 8 && ro_cover(dir, cover, sizeof(cover)); k++)
		if (umount2(cover, MNT_DETACH))
			return errno;
	if (bind(sk, (const struct sockaddr *)a, len))
		return errno;
	if (u->has_file_mode &&
	    (chown(a->sun_path, u->file_uid, u->file_gid) || chmod(a->sun_path, u->file_mode)))
		return errno;
	return 0;
}

int unix_bind_in_built(int sk, const UnixSk *u, const char *what)
{
	struct sockaddr_un a;
	socklen_t len = unix_make_addr(&a, &u->name);
	int res = 0, pfd[2], st;
	pid_t h;

	if (u->name.len < 2 || a.sun_path[0] != '/') {
		pr_err("%s: image files.img is damaged: a unix socket bound in a container has "
		       "no absolute path",
		       what);
		return -EINVAL;
	}
	if (pipe2(pfd, O_CLOEXEC))
		return pr_errno("%s: cannot bind the unix socket in its container", what);
	h = fork();
	if (h == 0) {
		close(pfd[0]);
		res = bind_built_helper(sk, u, &a, len);
		_exit(write(pfd[1], &res, sizeof(res)) == sizeof(res) && !res ? 0 : 1);
	}
	close(pfd[1]);
	if (h > 0 && read(pfd[0], &res, sizeof(res)) != sizeof(res))
		res = EPIPE;
	close(pfd[0]);
	if (h < 0)
		return pr_errno("%s: cannot fork to bind the unix socket in its container", what);
	while (waitpid(h, &st, 0) < 0 && errno == EINTR)
		;
	if (res)
		pr_err("%s: cannot bind the unix socket to %s in its container: %s", what,
		       a.sun_path, strerror(res));
	return -res;
}
