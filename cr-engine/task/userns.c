/* A user namespace that a process of the tree made for itself and its
 * descendants, with the other namespaces it made owned by it (a sandbox:
 * unshare --user --map-user=... --net --mount, bwrap --unshare-user).  The
 * owner matters: root inside may mount, set the host name or configure
 * the network only in namespaces its user namespace owns.
 *
 * Dump: the maker's uid_map, gid_map and setgroups, as kupdate's
 * namespace reads them (ns_made: uid_map...).  Kept when every namespace it
 * made is owned by it, the pid namespace it is the init of too (a
 * container's: systemd-nspawn -U, below).  A UTS or IPC namespace made by a
 * process born inside it (in the pid namespace its maker is the init of)
 * is made again there by that process, as any process of the tree makes
 * one (nsmade.c): a service's ProtectHostname= in a booted container.
 * Refused, naming the process: a user namespace inside it, another
 * namespace made by another process inside it (a service's mount
 * namespace in a booted container: not yet), a process with threads in a
 * pid namespace below the tree's, made before the user namespace (root
 * of the user namespace may not set their ids there).
 *
 * Restore: the maker's parent, before the maker is born, has a helper
 * unshare the user namespace, writes the maps, and has it unshare there
 * the network, UTS, IPC and cgroup namespaces the maker made (the helper
 * moved into the cgroup namespace's root first): they are owned by the
 * user namespace.  The maker, born in kupdate's user namespace with its
 * privileges, joins them, makes its mounts as before in a mount namespace
 * of its own, then has a last helper join the user namespace and unshare
 * a copy of it, which the maker enters: the mounts are locked together in
 * it as the kernel locks those of a less privileged copy.  Every process
 * of the namespace enters it last (restorer.c: enter_userns), its ids as
 * the namespace names them (ns_id_inside).
 *
 * The init of a pid namespace the user namespace owns (systemd-nspawn -U
 * clones its container's init into both at once): the kernel makes a new
 * pid namespace's owner the user namespace of the process that clones it,
 * and gives a file of one only once a process lives there, so the init is
 * born inside, without kupdate's privileges, and restores itself there
 * (userns_clone_init).  Its parent forks a builder, which joins the
 * namespaces made for it, builds its mounts but its /proc (mntns.c:
 * mntns_build), moves them over the old root as nspawn's outer child
 * does, moves into the cgroup namespace's root, enters the user
 * namespace, copies the mounts into a namespace it owns, and clones the
 * init with CLONE_NEWPID and CLONE_PARENT: pid 1 inside, its parent's
 * child.  Its pid outside comes through ns_last_pid, set by its parent
 * (or kupdate) under the lock.  The init mounts its /proc itself, and
 * its descendants, born inside too, get their ids inside from set_tid
 * (root of the user namespace may set them in a pid namespace it owns)
 * and their host pids from kupdate (lastpid.c: lp_ask); their threads
 * likewise (restorer.h: RST_TID_PREP_OFFSET).  A process with threads in a
 * pid namespace made before the user namespace is refused: root of the
 * user namespace may not set its ids there. */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "images/core.pb-c.h"
#include "log.h"
#include "namespaces.h"
#include "pidns.h"
#include "proc.h"
#include "restore.h"
#include "restore-ctx.h"
#include "util.h"

/* the namespaces a maker's user namespace must own, and their flags */
static const struct {
	const char *name;
	int flag;
} owned[] = {
	{ "mnt", CLONE_NEWNS },	 { "uts", CLONE_NEWUTS },	{ "ipc", CLONE_NEWIPC },
	{ "net", CLONE_NEWNET }, { "cgroup", CLONE_NEWCGROUP },
};

/* ------------------------------------------------------------ dump */

struct cr_proc *userns_maker(struct cr_proc *p)
{
	while (p && !(p->made_ns & CLONE_NEWUSER))
		p = p->parent;
	return p;
}

/* the inode of the user namespace that owns pid's namespace kind */
int userns_owner_ino(pid_t pid, const char *kind, ino_t *ino)
{
	char path[64];
	struct stat st;
	int fd, ufd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kind);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ufd = ioctl(fd, NS_GET_USERNS);
	if (ufd < 0 || fstat(ufd, &st))
		ret = -errno;
	else
		*ino = st.st_ino;
	close(fd);
	if (ufd >= 0)
		close(ufd);
	return ret;
}

int userns_made(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct cr_proc *up = userns_maker(p->parent);
	struct ns_idmap map[NS_IDMAP_MAX];
	struct stat own;
	size_t nr;

	(void)ctx;
	if (up) {
		pr_err("pid %d (%s) made a user namespace inside the one pid %d made, which "
		       "kupdate cannot restore",
		       p->pid, p->stat.comm, up->pid);
		return -EOPNOTSUPP;
	}
	if (p->kids_ns_ino) {
		pr_err("pid %d (%s) made a user namespace and changed the pid namespace its "
		       "children are born in (unshare --user --pid --fork), which kupdate cannot "
		       "restore yet",
		       p->pid, p->stat.comm);
		return -EOPNOTSUPP;
	}
	if (ns_stat(p->pid, "user", &own))
		return pr_errno("pid %d: cannot look at its user namespace", p->pid);
	/* the init of a pid namespace, made with it (systemd-nspawn -U) */
	if (!ns_same(p->pid, p->parent->pid, "pid")) {
		ino_t ino = 0;
		int ret = userns_owner_ino(p->pid, "pid", &ino);

		if (ret)
			return pr_err("pid %d: cannot find the owner of its pid namespace: %s",
				      p->pid, strerror(-ret)),
			       ret;
		if (ino != own.st_ino) {
			pr_err("pid %d (%s) made a user namespace and is the init of a pid "
			       "namespace that it does not own (made before it), which kupdate "
			       "cannot restore",
			       p->pid, p->stat.comm);
			return -EOPNOTSUPP;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(owned); i++) {
		ino_t ino = 0;
		int ret;

		if (ns_same(p->pid, p->parent->pid, owned[i].name))
			continue;
		ret = userns_owner_ino(p->pid, owned[i].name, &ino);
		if (ret) {
			pr_err("pid %d: cannot find the owner of its %s namespace: %s", p->pid,
			       owned[i].name, strerror(-ret));
			return ret;
		}
		if (ino != own.st_ino) {
			pr_err("pid %d (%s) made a user namespace and a %s namespace that it does "
			       "not own (made before it), which kupdate cannot restore",
			       p->pid, p->stat.comm, owned[i].name);
			return -EOPNOTSUPP;
		}
	}
	if (ns_read_idmaps(p->pid, "the user namespace it made", &p->made_uid_map, &p->made_gid_map,
			   &p->made_setgroups))
		return -EIO;
	if (!*p->made_uid_map || !*p->made_gid_map) {
		pr_err("pid %d (%s) made a user namespace without id maps (%s), where its "
		       "processes have no ids, which kupdate cannot restore",
		       p->pid, p->stat.comm, *p->made_uid_map ? "no gid_map" : "no uid_map");
		return -EOPNOTSUPP;
	}
	if (ns_parse_idmap(p->made_uid_map, map, &nr) ||
	    ns_parse_idmap(p->made_gid_map, map, &nr)) {
		pr_err("pid %d (%s) made a user namespace whose id maps have more than %d lines, "
		       "which kupdate cannot restore",
		       p->pid, p->stat.comm, NS_IDMAP_MAX);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* p lives in the pid namespace whose init made the user namespace p is in
 * (a booted container's): the restore makes it there, inside */
bool userns_born_inside(struct cr_proc *p)
{
	struct cr_proc *m = userns_maker(p);

	return m && m->parent && m->pid_depth > m->parent->pid_depth &&
	       p->pid_depth == m->pid_depth;
}

int userns_check_member(struct cr_proc *p, const char *made_what)
{
	struct cr_proc *m = userns_maker(made_what ? p->parent : p);

	if (!m)
		return 0;
	if (made_what) {
		pr_err("pid %d (%s) made a %s inside the user namespace pid %d made (a "
		       "container's), which kupdate cannot restore yet",
		       p->pid, p->stat.comm, made_what, m->pid);
		return -EOPNOTSUPP;
	}
	/* threads get their ids from set_tid in a pid namespace the user
	 * namespace owns (its maker is the init), not in one made before it */
	if (p->pid_depth > 0 && p->nr_threads > 1 && !userns_born_inside(p)) {
		pr_err("pid %d (%s) has %d threads in a pid namespace made before the user "
		       "namespace pid %d made: kupdate cannot make its threads again there",
		       p->pid, p->stat.comm, p->nr_threads, m->pid);
		return -EOPNOTSUPP;
	}
	return 0;
}

void userns_free_dump(struct cr_proc *p)
{
	free(p->made_uid_map);
	free(p->made_gid_map);
	free(p->made_setgroups);
}

/* ---------------------------------------------------------- restore */

static bool made_user(const NsMade *m)
{
	for (size_t i = 0; m && i < m->n_kinds; i++)
		if (!strcmp(m->kinds[i], "user"))
			return true;
	return false;
}

static int made_flag(const char *kind)
{
	for (size_t i = 0; i < ARRAY_SIZE(owned); i++)
		if (!strcmp(owned[i].name, kind))
			return owned[i].flag;
	return 0;
}

void userns_fds_init(struct usermade *u)
{
	for (size_t i = 0; i < ARRAY_SIZE(u->fd); i++)
		u->fd[i] = -1;
	u->user = -1;
	u->born = false;
	u->mnt_done = u->mnt_late = NULL;
}

void userns_fds_close(struct usermade *u, bool user_too)
{
	for (size_t i = 0; i < ARRAY_SIZE(u->fd); i++)
		if (u->fd[i] >= 0) {
			close(u->fd[i]);
			u->fd[i] = -1;
		}
	if (user_too && u->user >= 0) {
		close(u->user);
		u->user = -1;
	}
}

/* One byte each way between a helper and the process it serves: 'u' its
 * user namespace made (or joined), with its pid as kupdate's /proc names
 * it (its namespaces and maps are found there), 'g' go on, 'd' done, 'e'
 * failed (then errno). */
static int say(int sk, char what, int val)
{
	char buf[1 + sizeof(int)];

	buf[0] = what;
	memcpy(buf + 1, &val, sizeof(val));
	return write(sk, buf, sizeof(buf)) == (ssize_t)sizeof(buf) ? 0 : -EPIPE;
}

static int hear(int sk, char want, int *val)
{
	char buf[1 + sizeof(int)];
	ssize_t n;

	do
		n = read(sk, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(buf))
		return -EPIPE;
	memcpy(val, buf + 1, sizeof(*val));
	if (buf[0] == 'e')
		return *val ? -*val : -EIO;
	return buf[0] == want ? 0 : -EPROTO;
}

/* A helper's life: into the user namespace (a new one when userns_fd is
 * -1), then, told to go on, the namespaces of flags made there; it stays
 * until its peer closes the socket, that its namespaces be opened. */
static void __attribute__((noreturn)) helper(int sk, int userns_fd, int flags)
{
	pid_t me = proc_self_pid();
	int v = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (userns_fd >= 0 ? setns(userns_fd, CLONE_NEWUSER) : unshare(CLONE_NEWUSER)) {
		say(sk, 'e', errno);
		_exit(1);
	}
	if (say(sk, 'u', me) || hear(sk, 'g', &v))
		_exit(1);
	if (flags && unshare(flags)) {
		say(sk, 'e', errno);
		_exit(1);
	}
	say(sk, 'd', 0);
	while (read(sk, &v, sizeof(v)) > 0)
		;
	_exit(0);
}

struct helper_run {
	pid_t pid;  /* as fork named it */
	pid_t proc; /* as kupdate's /proc names it */
	int sk;
};

static int helper_start(struct helper_run *h, int userns_fd, int flags)
{
	int sk[2], v, ret;

	h->pid = h->proc = -1;
	h->sk = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk))
		return -errno;
	h->pid = fork();
	if (h->pid == 0) {
		close(sk[0]);
		helper(sk[1], userns_fd, flags);
	}
	close(sk[1]);
	h->sk = sk[0];
	if (h->pid < 0)
		return -errno;
	ret = hear(h->sk, 'u', &v);
	if (ret)
		return ret;
	h->proc = v;
	return v > 0 ? 0 : -ESRCH;
}

static int helper_go(struct helper_run *h)
{
	int ret = say(h->sk, 'g', 0), v;

	return ret ? ret : hear(h->sk, 'd', &v);
}

static void helper_end(struct helper_run *h)
{
	if (h->sk >= 0)
		close(h->sk);
	h->sk = -1;
	if (h->pid > 0)
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	h->pid = -1;
}

static int open_ns(pid_t proc, const char *kind)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "%d/ns/%s", proc, kind);
	return proc_open(rel, O_RDONLY | O_CLOEXEC);
}

/* "a b c;d e f" as /proc/PID/uid_map wants it */
static int write_map(pid_t proc, const char *file, const char *text)
{
	char rel[64], *buf = xstrdup(text);
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	for (char *s = buf; *s; s++)
		if (*s == ';')
			*s = '\n';
	snprintf(rel, sizeof(rel), "%d/%s", proc, file);
	fd = proc_open(rel, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

int userns_prepare(const struct rctx *c, struct rproc *rp)
{
	const NsMade *m = rp->zombie ? NULL : rp->core.task->made_ns;
	struct helper_run h;
	int flags = 0, ret;

	userns_fds_init(&rp->um);
	if (!made_user(m))
		return 0;
	for (size_t i = 0; i < m->n_kinds; i++)
		if (strcmp(m->kinds[i], "mnt"))
			flags |= made_flag(m->kinds[i]);
	ret = helper_start(&h, -1, flags);
	if (ret)
		pr_err("pid %d: cannot make its user namespace again: %s", rp->pid, strerror(-ret));
	else if ((!strcmp(m->setgroups ? m->setgroups : "", "deny") &&
		  (ret = write_map(h.proc, "setgroups", "deny"))) ||
		 (ret = write_map(h.proc, "uid_map", m->uid_map ? m->uid_map : "")) ||
		 (ret = write_map(h.proc, "gid_map", m->gid_map ? m->gid_map : "")))
		pr_err("pid %d: cannot write the id maps of its user namespace (%s): %s", rp->pid,
		       m->uid_map ? m->uid_map : "", strerror(-ret));
	if (!ret && (flags & CLONE_NEWCGROUP))
		ret = cgroups_move_pid(c, m->cgroup_root, h.pid);
	if (!ret && (ret = helper_go(&h)))
		pr_err("pid %d: cannot make its namespaces again in its user namespace: %s",
		       rp->pid, strerror(-ret));
	if (!ret) {
		rp->um.user = open_ns(h.proc, "user");
		ret = rp->um.user < 0 ? -errno : 0;
	}
	for (size_t i = 0; !ret && i < ARRAY_SIZE(owned); i++) {
		if (!(flags & owned[i].flag))
			continue;
		rp->um.fd[i] = open_ns(h.proc, owned[i].name);
		if (rp->um.fd[i] < 0)
			ret = pr_errno("pid %d: cannot open the %s namespace made for it", rp->pid,
				       owned[i].name);
	}
	helper_end(&h);
	if (ret)
		userns_fds_close(&rp->um, true);
	return ret;
}

/* ------------------------------------- the init of a pid namespace */

bool userns_init_born_inside(const struct rproc *rp)
{
	const NsMade *m = rp->zombie ? NULL : rp->core.task->made_ns;

	return made_user(m) && pidns_makes(rp);
}

/* B, the builder, for the init: the namespaces made for it joined, its
 * mounts built (those it makes itself left) and copied into a namespace
 * its user namespace owns, into its cgroup namespace's root, into the
 * user namespace; then, each time it is told, it clones the init into a
 * new pid namespace (CLONE_PARENT: the init is its parent's child) and
 * says what clone gave.  Returns 0 in the init, once told it has its
 * pid. */
#define GO_END UINT32_MAX /* the init has its pid, or its parent gave up */

static int wait_go(_Atomic uint32_t *go, uint32_t seen)
{
	if (!lp_spin(go, seen, 10LL * 1000000000LL))
		return -ETIMEDOUT;
	return atomic_load(go) == GO_END ? 1 : 0;
}

static int builder(struct rctx *c, struct rproc *rp, struct clone_args_k *ca, int skb, int ski,
		   _Atomic uint32_t *go, int (*build_mounts)(struct rctx *, struct rproc *))
{
	const NsMade *m = rp->core.task->made_ns;
	int ret = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (size_t i = 0; !ret && i < m->n_kinds; i++)
		if (!strcmp(m->kinds[i], "net") || !strcmp(m->kinds[i], "uts") ||
		    !strcmp(m->kinds[i], "ipc"))
			ret = userns_join(rp, m->kinds[i]);
	if (!ret)
		ret = build_mounts(c, rp);
	for (size_t i = 0; !ret && i < m->n_kinds; i++)
		if (!strcmp(m->kinds[i], "cgroup"))
			ret = cgroups_move_pid(c, m->cgroup_root, 0);
	if (!ret && setns(rp->um.user, CLONE_NEWUSER))
		ret = pr_errno("pid %d: cannot enter the user namespace made for it", rp->pid);
	/* its mounts copied into a namespace the user namespace owns, locked
	 * together there (the root and cwd go with them) */
	for (size_t i = 0; !ret && i < m->n_kinds; i++)
		if (!strcmp(m->kinds[i], "mnt") && unshare(CLONE_NEWNS))
			ret = pr_errno("pid %d: cannot copy its mounts into its user namespace",
				       rp->pid);
	for (size_t i = 0; !ret && i < m->n_kinds; i++)
		if (!strcmp(m->kinds[i], "cgroup"))
			ret = userns_join(rp, "cgroup");
	userns_fds_close(&rp->um, true);
	if (ret) {
		say(skb, 'e', -ret);
		_exit(1);
	}
	if (say(skb, 'u', 0))
		_exit(1);
	for (uint32_t seen = 0;; seen++) {
		long r;

		/* spinning: the clone must follow the setting of ns_last_pid
		 * closely, before something else forks (a socket's wakeup is
		 * too slow for a busy boot); 10 s at most */
		if (wait_go(go, seen))
			_exit(0);
		r = syscall(SYS_clone3, ca, sizeof(*ca));

		if (r == 0) {
			char verdict = 0;

			close(skb);
			if (read(ski, &verdict, 1) != 1 || verdict != 'y')
				_exit(0);
			close(ski);
			rp->um.born = true;
			return 0;
		}
		if (say(skb, r < 0 ? 'e' : 'd', r < 0 ? errno : (int)r) || r < 0)
			break;
	}
	_exit(0);
}

pid_t userns_clone_init(struct rctx *c, struct rproc *rp, struct clone_args_k *ca, pid_t want,
			bool privileged, int (*build_mounts)(struct rctx *, struct rproc *))
{
	int skb[2] = { -1, -1 }, ski[2] = { -1, -1 }, v = 0, ret = 0;
	pid_t b, got = -1;
	struct tid_hold hold = { .fd = -1 };
	_Atomic uint32_t *go;

	if (ca->flags & CLONE_PARENT) {
		pr_err("pid %d: the init of a container's pid and user namespaces cannot be "
		       "restored as a detached root",
		       rp->pid);
		errno = EINVAL;
		return -1;
	}
	/* its pid inside is 1; its pid outside, through ns_last_pid */
	ca->flags |= CLONE_PARENT;
	ca->exit_signal = 0;
	ca->set_tid = ca->set_tid_size = 0;
	go = mmap(NULL, sizeof(*go), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (go == MAP_FAILED)
		return -1;
	atomic_store(go, 0);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, skb) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ski))
		ret = -errno;
	b = ret ? -1 : fork();
	if (b == 0) {
		close(skb[0]);
		close(ski[0]);
		if (!builder(c, rp, ca, skb[1], ski[1], go, build_mounts)) {
			munmap(go, sizeof(*go));
			return 0; /* the init */
		}
	}
	if (b < 0 && !ret)
		ret = -errno;
	close(skb[1]);
	close(ski[1]);
	if (!ret && (ret = hear(skb[0], 'u', &v)))
		pr_err("pid %d: cannot prepare its namespaces and mounts in the user namespace "
		       "made for it: %s",
		       rp->pid, strerror(-ret));
	/* something else forking meanwhile may take the pid: tried again */
	for (int k = 0; !ret && k < 50 && got != want; k++) {
		char verdict;

		ret = privileged ? tid_prepare(want, &hold) : lp_ask(c->sh, want);
		if (ret)
			break;
		atomic_fetch_add(go, 1);
		ret = hear(skb[0], 'd', &v);
		if (privileged)
			tid_done(&hold);
		else
			lp_cloned(c->sh);
		if (ret) {
			pr_err("pid %d: cannot be born the init of its pid namespace in its user "
			       "namespace: %s",
			       rp->pid, strerror(-ret));
			break;
		}
		got = v;
		verdict = got == want ? 'y' : 'n';
		if (write(ski[0], &verdict, 1) != 1)
			ret = -errno;
		if (got != want)
			while (waitpid(got, NULL, __WALL) < 0 && errno == EINTR)
				;
	}
	atomic_store(go, GO_END);
	close(skb[0]);
	close(ski[0]);
	if (b > 0)
		while (waitpid(b, NULL, 0) < 0 && errno == EINTR)
			;
	munmap(go, sizeof(*go));
	if (!ret && got != want) {
		pr_err("pid %d: its pid was taken by another process 50 times", rp->pid);
		ret = -EEXIST;
	}
	if (ret) {
		errno = -ret;
		return -1;
	}
	return got;
}

void userns_spawn_end(struct rproc *rp)
{
	/* the child has its copies */
	userns_fds_close(&rp->um, true);
}

bool userns_joins(const struct rproc *rp)
{
	return rp->um.user >= 0 || rp->um.born;
}

int userns_join(struct rproc *rp, const char *kind)
{
	int flag = made_flag(kind);

	if (rp->um.born)
		return 0; /* born in it */

	for (size_t i = 0; i < ARRAY_SIZE(owned); i++) {
		if (owned[i].flag != flag)
			continue;
		if (rp->um.fd[i] < 0 || setns(rp->um.fd[i], flag))
			return pr_errno("pid %d: cannot join the %s namespace made for it in its "
					"user namespace",
					rp->pid, kind);
		close(rp->um.fd[i]);
		rp->um.fd[i] = -1;
		return 0;
	}
	pr_err("pid %d: no %s namespace was made for it", rp->pid, kind);
	return -EINVAL;
}

int userns_copy_mounts(const struct rproc *rp)
{
	struct helper_run h;
	int ret, fd = -1;

	if (rp->um.user < 0)
		return 0;
	ret = helper_start(&h, rp->um.user, CLONE_NEWNS);
	if (!ret)
		ret = helper_go(&h);
	if (!ret) {
		fd = open_ns(h.proc, "mnt");
		if (fd < 0 || setns(fd, CLONE_NEWNS))
			ret = -errno;
	}
	if (ret)
		pr_err("pid %d: cannot copy its mounts into a mount namespace its user namespace "
		       "owns: %s",
		       rp->pid, strerror(-ret));
	if (fd >= 0)
		close(fd);
	helper_end(&h);
	return ret;
}

int userns_enter_later(struct rctx *c, struct rproc *rp)
{
	const NsMade *m;

	if (rp->um.user < 0 && !rp->um.born)
		return 0;
	m = rp->core.task->made_ns;
	userns_fds_close(&rp->um, false);
	if (ns_parse_idmap(m->uid_map, c->ns_uidmap, &c->ns_nr_uidmap) ||
	    ns_parse_idmap(m->gid_map, c->ns_gidmap, &c->ns_nr_gidmap)) {
		pr_err("image core-%d.img is damaged: the id maps of its user namespace cannot be "
		       "read",
		       rp->pid);
		return -EINVAL;
	}
	/* born in it (the init of a pid namespace it owns): its descendants
	 * too; otherwise this process and its descendants enter it last */
	if (rp->um.born)
		c->ns_in_userns = true;
	else
		c->ns_userns_fd = rp->um.user;
	rp->um.user = -1;
	return 0;
}
