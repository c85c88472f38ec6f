/* Restore of one process tree.
 *
 * 1. Load and validate every image before anything is created.
 * 2. Create the tree: each process is born with its saved pid (clone3 with
 *    set_tid, ns_last_pid as a fallback), takes its session, creates its
 *    children, then joins its process group once every group leader
 *    exists; zombies exit with their saved status.
 * 3. Each live process reopens its files, maps the restorer blob where the
 *    saved layout has a hole, and waits; kupdate seizes them all.
 * 4. The processes jump into the blob, which rebuilds the address space,
 *    creates the threads with their tids and parks each thread on int3.
 * 5. kupdate sets every thread's registers, FPU state and signal mask,
 *    unmaps the blob with an injected munmap, and lets the tree go.
 *
 * The processes of the tree and kupdate synchronise through a shared page
 * (a stage number and a counter, with futexes).  Any failure kills what was
 * created (PTRACE_O_EXITKILL covers kupdate dying itself). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "cr.h"
#include "fault.h"
#include "files.h"
#include "image.h"
#include "log.h"
#include "netlock.h"
#include "proc.h"
#include "pstree.h"
#include "remote.h"
#include "restore.h"
#include "sysvshm.h"
#include "seccomp.h"
#include "tcp.h"
#include "timens.h"
#include "util.h"
#include "vdso.h"

extern const unsigned char restorer_blob[], restorer_blob_end[];

#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
#endif

struct clone_args_k {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size, cgroup;
};

enum stage { ST_FORK = 1, ST_PGID, ST_PREPARE, ST_GO };

struct shared_proc {
	uint64_t blob_start, blob_len, args_addr;
};

struct shared {
	_Atomic uint32_t stage;
	_Atomic uint32_t count;
	_Atomic uint32_t failed; /* a process failed and said why */
	pid_t tool;
	struct shared_proc procs[];
};

/* a process that exists only while the tree is built: the leader of a
 * process group whose real leader was dead at dump time */
struct helper {
	pid_t pid;
	struct rproc *parent;
};

/* a helper that takes the id of a session whose leader was dead at dump
 * and forks the roots that belong to it */
struct session_helper {
	pid_t sid;
};

struct rctx {
	const struct cr_restore_opts *opts;
	int dirfd;
	InventoryEntry *inv;
	PstreeEntry **pstree;
	size_t nr;
	struct rproc *procs;
	size_t nr_live;
	size_t nr_threads;
	struct rfiles files;
	struct rshm shm;
	struct helper *helpers;
	size_t nr_helpers;
	struct session_helper *sessions;
	size_t nr_sessions;
	struct shared *sh;
	size_t sh_len;
	uint64_t xcr0;
};

/* ------------------------------------------------------------ loading */

/* A file that is not the one the dump wrote: say whether it is damaged
 * (a metadata image is checked in full for that) or intact but another
 * dump's.  Always logs one error and returns non-zero. */
static int refuse_file(struct rctx *c, const InventoryFile *f, uint64_t size)
{
	struct img_reader r;
	uint32_t kind = 0;
	int ret;

	ret = img_peek_kind(c->dirfd, f->name, &kind);
	if (!ret && kind != IMG_PAGES && kind != IMG_SHMEM_PAGES) {
		/* logs what is wrong if it is damaged */
		ret = img_reader_open(&r, c->dirfd, f->name, kind);
		if (ret)
			return ret;
		img_reader_close(&r);
		pr_err("image %s does not belong to this dump: its %s differs from what "
		       "inventory.img recorded (a file of another dump or cycle)",
		       f->name, size != f->size ? "size" : "checksum");
		return -EBADMSG;
	}
	if (size < f->size) {
		pr_err("image %s is damaged: truncated (%lu bytes, %lu were written)", f->name,
		       (unsigned long)size, (unsigned long)f->size);
		return -EINVAL;
	}
	if (!ret) {
		struct img_header h;
		_cleanup_close_ int fd = openat(c->dirfd, f->name, O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) &&
		    h.version != IMG_FORMAT_VERSION) {
			pr_err("image %s has format version %u, this kupdate reads version %u",
			       f->name, h.version, IMG_FORMAT_VERSION);
			return -EPROTO;
		}
	}
	pr_err("image %s is damaged or from another dump: its %s differs from what "
	       "inventory.img recorded",
	       f->name, size != f->size ? "size" : "checksum");
	return -EBADMSG;
}

/* The directory holds exactly the files the inventory lists, each as it was
 * written: a file from another dump (or cycle), a missing one or an extra
 * one is refused before anything is restored. */
/* Images hold the memory of services (keys, passwords): only files of our
 * own user (root) that nobody else can change are restored. */
static int check_owner(struct rctx *c, const char *name)
{
	struct stat st;

	if (fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		pr_perror("cannot stat image %s", name);
		return -errno;
	}
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		pr_err("image %s is refused: %s (owner %u, mode %04o); images must be owned by "
		       "uid %u and writable by no one else",
		       name,
		       st.st_uid != geteuid()			       ? "not owned by us"
		       : !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) ? "not a regular file"
								       : "writable by others",
		       st.st_uid, st.st_mode & 07777, geteuid());
		return -EPERM;
	}
	return 0;
}

static int verify_files(struct rctx *c)
{
	int fd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int ret = check_owner(c, ".");

	if (!ret)
		ret = check_owner(c, "inventory.img");
	if (ret)
		goto out;

	for (size_t i = 0; i < c->inv->n_files; i++) {
		const InventoryFile *f = c->inv->files[i];
		uint64_t size;
		uint32_t crc;

		if (!f->name[0] || strchr(f->name, '/') || f->name[0] == '.' ||
		    !strcmp(f->name, "inventory.img")) {
			pr_err("image inventory.img is damaged: file entry %zu has the name "
			       "\"%.64s\"",
			       i, f->name);
			ret = -EINVAL;
			goto out;
		}
		ret = check_owner(c, f->name);
		if (!ret)
			ret = img_fingerprint(c->dirfd, f->name, &size, &crc);
		if (ret)
			goto out;
		if (size != f->size || crc != f->crc) {
			ret = refuse_file(c, f, size);
			goto out;
		}
	}
	while (d && (de = readdir(d))) {
		bool listed = false;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "inventory.img"))
			continue;
		if (!strcmp(de->d_name, "parent")) {
			/* the pre-dump below this dump: a directory of ours too
			 * (its images are checked as they are read) */
			struct stat st;

			if (fstatat(c->dirfd, "parent", &st, 0) || !S_ISDIR(st.st_mode) ||
			    st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
				pr_err("image directory parent (the pre-dump below this dump) is "
				       "refused: missing, not owned by uid %u or writable by "
				       "others",
				       geteuid());
				ret = -EPERM;
				goto out;
			}
			continue;
		}
		/* what is not an image is never read */
		if (strlen(de->d_name) < 5 || strcmp(de->d_name + strlen(de->d_name) - 4, ".img"))
			continue;
		for (size_t i = 0; i < c->inv->n_files && !listed; i++)
			listed = !strcmp(de->d_name, c->inv->files[i]->name);
		if (!listed) {
			pr_err("image %s does not belong to this dump: inventory.img does not list "
			       "it",
			       de->d_name);
			ret = -EBADMSG;
			goto out;
		}
	}
	if (!d) {
		ret = -errno;
		pr_perror("cannot list the image directory %s", c->opts->imgdir);
	}
out:
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return ret;
}

static int load_inventory(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret = img_reader_open(&r, c->dirfd, "inventory.img", IMG_INVENTORY);

	if (ret)
		return ret;
	ret = img_read(&r, &inventory_entry__descriptor, &m);
	img_reader_close(&r);
	if (ret == 0) {
		pr_err("image inventory.img is damaged: it is empty");
		return -EINVAL;
	}
	if (ret < 0)
		return ret;
	c->inv = (InventoryEntry *)m;
	if (c->inv->format_version != IMG_FORMAT_VERSION || c->inv->page_size != PAGE_SIZE) {
		pr_err("images in %s have format %u and page size %u; this kupdate reads format %u "
		       "with %lu-byte pages",
		       c->opts->imgdir, c->inv->format_version, c->inv->page_size,
		       IMG_FORMAT_VERSION, PAGE_SIZE);
		return -EPROTO;
	}
	if (c->inv->pre_dump) {
		pr_err("%s holds a pre-dump (memory only): restore the dump made with --prev "
		       "on top of it",
		       c->opts->imgdir);
		return -EINVAL;
	}
	c->xcr0 = cpu_xcr0();
	if (c->inv->xfeatures & ~c->xcr0) {
		pr_err("the images use CPU state components %#lx that this CPU does not enable "
		       "(XCR0 %#lx); restore on the machine that dumped them",
		       (unsigned long)c->inv->xfeatures, (unsigned long)c->xcr0);
		return -EOPNOTSUPP;
	}
	if (c->opts->cycle_id &&
	    (!c->inv->cycle_id || strcmp(c->inv->cycle_id, c->opts->cycle_id))) {
		pr_err("image inventory.img belongs to cycle %.64s, not to cycle %s: not restored",
		       c->inv->cycle_id ? c->inv->cycle_id : "(none)", c->opts->cycle_id);
		return -EINVAL;
	}
	return verify_files(c);
}

static int load_pstree(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret = img_reader_open(&r, c->dirfd, "pstree.img", IMG_PSTREE);

	if (ret)
		return ret;
	c->pstree = calloc(r.nr ? r.nr : 1, sizeof(*c->pstree));
	if (!c->pstree) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &pstree_entry__descriptor, &m)) > 0)
		c->pstree[c->nr++] = (PstreeEntry *)m;
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	ret = pstree_validate(c->pstree, c->nr);
	if (ret)
		return ret;
	if (c->pstree[0]->state == TASK_STATE__TASK_ZOMBIE) {
		pr_err("image pstree.img is damaged: the root %d is a zombie", c->pstree[0]->pid);
		return -EINVAL;
	}
	if ((uint32_t)c->nr != c->inv->nr_processes || c->pstree[0]->pid != c->inv->root_pid) {
		pr_err("image pstree.img does not match inventory.img (%zu processes, root %d)",
		       c->nr, c->pstree[0]->pid);
		return -EINVAL;
	}
	return 0;
}

static int load_fds(struct rctx *c, struct rproc *rp)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "fds-%d.img", rp->pid);
	ret = img_reader_open(&r, c->dirfd, name, IMG_FDS);
	if (ret)
		return ret;
	rp->fds = calloc(r.nr ? r.nr : 1, sizeof(*rp->fds));
	if (!rp->fds) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &fd_entry__descriptor, &m)) > 0)
		rp->fds[rp->nr_fds++] = (FdEntry *)m;
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	return files_validate_fds(&c->files, rp->fds, rp->nr_fds, name);
}

static int load_images(struct rctx *c)
{
	int ret;

	ret = load_inventory(c);
	if (!ret)
		ret = load_pstree(c);
	if (!ret)
		ret = files_load(c->dirfd, &c->files);
	if (ret)
		return ret;
	c->procs = calloc(c->nr, sizeof(*c->procs));
	if (!c->procs)
		return -ENOMEM;
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		rp->pe = c->pstree[i];
		rp->pid = rp->pe->pid;
		rp->zombie = rp->pe->state == TASK_STATE__TASK_ZOMBIE;
		for (size_t k = 0; k < i; k++)
			if (c->procs[k].pid == rp->pe->ppid)
				rp->parent = &c->procs[k];
		if (rp->parent) {
			struct rproc **nc = xrealloc_array(
				rp->parent->children, rp->parent->nr_children + 1, sizeof(*nc));
			if (!nc)
				return -ENOMEM;
			rp->parent->children = nc;
			nc[rp->parent->nr_children++] = rp;
		}
		if (rp->zombie)
			continue;
		c->nr_live++;
		c->nr_threads += rp->pe->n_tids;
		ret = core_load(c->dirfd, rp->pe, &rp->core);
		if (!ret)
			ret = mem_load(c->dirfd, rp->pid, &rp->mm);
		if (!ret)
			ret = load_fds(c, rp);
		if (!ret)
			ret = signals_load(c->dirfd, rp->pid, &rp->sig);
		if (!ret)
			ret = timers_load(c->dirfd, rp->pe, &rp->timers);
		if (ret)
			return ret;
	}
	return 0;
}

static void free_images(struct rctx *c)
{
	for (size_t i = 0; c->procs && i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		core_free(&rp->core);
		mem_free(&rp->mm);
		signals_free(&rp->sig);
		timers_free(&rp->timers);
		for (size_t k = 0; k < rp->nr_fds; k++)
			fd_entry__free_unpacked(rp->fds[k], NULL);
		free(rp->fds);
		free(rp->children);
	}
	free(c->procs);
	for (size_t i = 0; i < c->nr; i++)
		pstree_entry__free_unpacked(c->pstree[i], NULL);
	free(c->pstree);
	files_free(&c->files);
	if (c->inv)
		inventory_entry__free_unpacked(c->inv, NULL);
}

static int find_helpers(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i], *root = rp;
		pid_t g = rp->pe->pgid;
		bool known;
		struct helper *nh;

		while (root->parent)
			root = root->parent;
		/* a root's own group, and its tree's, come from outside */
		known = !rp->parent || g == root->pe->pgid;
		for (size_t k = 0; k < c->nr && !known; k++)
			known = c->procs[k].pid == g;
		for (size_t k = 0; k < c->nr_helpers && !known; k++)
			known = c->helpers[k].pid == g;
		if (known)
			continue;
		nh = xrealloc_array(c->helpers, c->nr_helpers + 1, sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		c->helpers = nh;
		nh[c->nr_helpers].pid = g;
		nh[c->nr_helpers].parent = rp->parent;
		c->nr_helpers++;
		pr_debug("group %d is rebuilt with a helper under pid %d", g, rp->parent->pid);
	}
	return 0;
}

/* Roots in another process's session: forked from that session, by its
 * leader or by a helper that recreates it. */
static int find_launchers(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		struct session_helper *ns;
		bool known = false;

		if (rp->parent || rp->pe->sid == rp->pid)
			continue;
		for (size_t k = 0; k < c->nr; k++)
			if (c->procs[k].pid == rp->pe->sid)
				rp->launcher = &c->procs[k];
		if (rp->launcher || !rp->pe->new_session)
			continue;
		for (size_t k = 0; k < c->nr_sessions && !known; k++)
			known = c->sessions[k].sid == rp->pe->sid;
		if (known)
			continue;
		ns = xrealloc_array(c->sessions, c->nr_sessions + 1, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		c->sessions = ns;
		ns[c->nr_sessions++].sid = rp->pe->sid;
		pr_debug("session %d is rebuilt with a helper", rp->pe->sid);
	}
	/* a root launched from a tree that is itself launched from the first
	 * root's tree would never be created */
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		size_t steps = 0;

		while (rp && steps++ <= c->nr) {
			while (rp->parent)
				rp = rp->parent;
			rp = rp->launcher;
		}
		if (rp) {
			pr_err("image pstree.img is damaged: the sessions of its roots form a "
			       "cycle");
			return -EINVAL;
		}
	}
	return 0;
}

static int spawn(struct rctx *c, struct rproc *rp, bool clone_parent);

/* Fork, from this process's session, the roots it launches: a short-lived
 * child creates each, then exits, so that the root is adopted by the
 * nearest subreaper (kupdate during the restore). */
static int launch_roots(struct rctx *c, struct rproc *launcher, pid_t sid)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		pid_t t;
		int st;

		if (rp->parent)
			continue;
		if (launcher ? rp->launcher != launcher
			     : !(rp->pe->new_session && rp->pe->sid == sid && !rp->launcher))
			continue;
		t = fork();
		if (t < 0) {
			pr_perror("pid %d: cannot fork to create root %d in its session", getpid(),
				  rp->pid);
			return -errno;
		}
		if (t == 0)
			_exit(spawn(c, rp, false) ? 1 : 0);
		while (waitpid(t, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			return -ECHILD;
	}
	return 0;
}

/* A helper with the session's id: setsid, launch its roots, exit. */
static int spawn_session_helper(struct rctx *c, pid_t sid)
{
	struct clone_args_k ca;
	long r;
	int st;

	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uintptr_t)&sid;
	ca.set_tid_size = 1;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0) {
		if (setsid() < 0) {
			pr_perror("helper %d: cannot create its session", getpid());
			_exit(1);
		}
		_exit(launch_roots(c, NULL, sid) ? 1 : 0);
	}
	if (r != sid) {
		pr_err("pid %d: cannot be created to rebuild its session: %s", sid,
		       r < 0 ? strerror(errno) : "wrong pid");
		if (r > 0)
			kill(r, SIGKILL);
		return -EEXIST;
	}
	while (waitpid(sid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

/* Every saved pid and tid must be free now. */
static int check_ids_free(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; k < c->pstree[i]->n_tids; k++) {
			int id = c->pstree[i]->tids[k];
			struct proc_stat st;

			char path[32];

			snprintf(path, sizeof(path), "/proc/%d", id);
			if (!access(path, F_OK)) {
				pr_err("pid %d is in use (by \"%s\"); the tree cannot be restored "
				       "with "
				       "its pids until it is free",
				       id, parse_stat(id, 0, &st) ? "?" : st.comm);
				return -EBUSY;
			}
		}
	for (size_t i = 0; i < c->nr_helpers; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%d", c->helpers[i].pid);
		if (!access(path, F_OK)) {
			pr_err("pid %d is in use; it is needed to rebuild process group %d",
			       c->helpers[i].pid, c->helpers[i].pid);
			return -EBUSY;
		}
	}
	for (size_t i = 0; i < c->nr_sessions; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%d", c->sessions[i].sid);
		if (!access(path, F_OK)) {
			pr_err("pid %d is in use; it is needed to rebuild session %d",
			       c->sessions[i].sid, c->sessions[i].sid);
			return -EBUSY;
		}
	}
	return 0;
}

static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int max = 2;

	while (d && (de = readdir(d)))
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			max = MAX(max, atoi(de->d_name));
	if (d)
		closedir(d);
	return max;
}

/* ----------------------------------------------------- synchronisation */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static void arrive(struct shared *sh)
{
	atomic_fetch_add(&sh->count, 1);
	futex(&sh->count, FUTEX_WAKE, INT32_MAX, NULL);
}

/* In a restoring process: wait until kupdate opens the stage; leave if
 * kupdate is gone or gave up. */
static void wait_stage(struct shared *sh, uint32_t stage)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	for (;;) {
		uint32_t v = atomic_load(&sh->stage);

		if (v >= stage)
			return;
		if (atomic_load(&sh->failed) || (kill(sh->tool, 0) && errno == ESRCH))
			_exit(1);
		futex(&sh->stage, FUTEX_WAIT, v, &ts);
	}
}

static void __attribute__((noreturn)) task_fail(struct shared *sh)
{
	atomic_store(&sh->failed, 1);
	futex(&sh->count, FUTEX_WAKE, INT32_MAX, NULL);
	_exit(1);
}

/* ------------------------------------------------------ tree creation */

static void __attribute__((noreturn)) task_main(struct rctx *c, struct rproc *rp);

static pid_t spawn_ns_last_pid(pid_t pid, unsigned long flags)
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
	char buf[16];
	long r;

	if (fd < 0 || flock(fd, LOCK_EX))
		return -errno;
	snprintf(buf, sizeof(buf), "%d", pid - 1);
	if (write(fd, buf, strlen(buf)) < 0)
		return -errno;
	r = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
	if (r < 0)
		return -errno;
	if (r > 0 && r != pid) {
		kill(r, SIGKILL);
		return -EEXIST;
	}
	return r;
}

/* Create rp with its saved pid; the child runs task_main. */
static int spawn(struct rctx *c, struct rproc *rp, bool clone_parent)
{
	struct clone_args_k ca;
	pid_t tid = rp->pid;
	long r;

	memset(&ca, 0, sizeof(ca));
	ca.flags = clone_parent ? CLONE_PARENT : 0;
	/* shares cwd, root and umask with its parent (CLONE_FS): files.c
	 * refused any other sharing at dump, and a root other than "/", as
	 * both processes restore the same ones in prepare() */
	if (rp->pe->clone_fs)
		ca.flags |= CLONE_FS;
	/* with CLONE_PARENT the child takes our exit signal; clone3 wants 0 */
	ca.exit_signal = clone_parent ? 0 : SIGCHLD;
	ca.set_tid = (uintptr_t)&tid;
	ca.set_tid_size = 1;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r < 0 && (errno == ENOSYS || errno == E2BIG))
		r = spawn_ns_last_pid(rp->pid, ca.flags);
	if (r == 0)
		task_main(c, rp);
	if (r < 0) {
		int err = errno;

		if (err == EEXIST)
			pr_err("pid %d: cannot be created with its pid: the pid is taken", rp->pid);
		else
			pr_err("pid %d: cannot be created with its pid: %s", rp->pid,
			       strerror(err));
		return -err;
	}
	if (r != rp->pid) {
		pr_err("pid %d: was created as pid %ld", rp->pid, r);
		kill(r, SIGKILL);
		return -EEXIST;
	}
	return 0;
}

static void __attribute__((noreturn)) helper_main(struct rctx *c)
{
	if (setpgid(0, 0)) {
		pr_perror("helper %d: cannot create its process group", getpid());
		task_fail(c->sh);
	}
	arrive(c->sh);
	wait_stage(c->sh, ST_PGID);
	arrive(c->sh);
	wait_stage(c->sh, ST_PREPARE);
	_exit(0);
}

static int spawn_helper(struct rctx *c, pid_t pid)
{
	struct clone_args_k ca;
	long r;

	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uintptr_t)&pid;
	ca.set_tid_size = 1;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		helper_main(c);
	if (r != pid) {
		pr_err("pid %d: cannot be created to rebuild its process group: %s", pid,
		       r < 0 ? strerror(errno) : "wrong pid");
		return -EEXIST;
	}
	return 0;
}

static void __attribute__((noreturn)) become_zombie(struct rproc *rp)
{
	int st = rp->pe->has_exit_code ? rp->pe->exit_code : 0;
	struct rlimit rl = { 0, 0 };

	if (WIFSIGNALED(st)) {
		sigset_t s;

		setrlimit(RLIMIT_CORE, &rl);
		prctl(PR_SET_DUMPABLE, 0);
		signal(WTERMSIG(st), SIG_DFL);
		sigemptyset(&s);
		sigaddset(&s, WTERMSIG(st));
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		kill(getpid(), WTERMSIG(st));
	}
	_exit(WEXITSTATUS(st));
}

/* ------------------------------------------------------- blob building */

int builder_add_string(struct rst_builder *b, const char *s, uint32_t *off)
{
	size_t len = strlen(s) + 1;
	char *ns;

	if (!b->strings_len) {
		b->strings = malloc(1);
		if (!b->strings)
			return -ENOMEM;
		b->strings[0] = 0;
		b->strings_len = 1;
	}
	ns = realloc(b->strings, b->strings_len + len);
	if (!ns)
		return -ENOMEM;
	b->strings = ns;
	memcpy(ns + b->strings_len, s, len);
	*off = b->strings_len; /* relative to the string table; fixed up later */
	b->strings_len += len;
	return 0;
}

int builder_place_fd(struct rst_builder *b, int fd)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, b->next_fd);
	int ret = -errno;

	close(fd);
	if (nfd < 0) {
		pr_err("cannot move a descriptor above %d: %s", b->next_fd, strerror(-ret));
		return ret;
	}
	b->next_fd = nfd + 1;
	return nfd;
}

#define MARGIN (4UL << 20)

/* Map the blob region where the saved layout has a hole that is also free
 * in this process now. */
static void *map_blob_region(struct rproc *rp, uint64_t len, uint64_t task_size)
{
	const struct rmm *mm = &rp->mm;
	uint64_t lo = 1UL << 20;

	for (ssize_t i = mm->nr_vmas; i >= 0; i--) {
		uint64_t g0 = i ? mm->vmas[i - 1]->end : lo;
		uint64_t g1 = (size_t)i < mm->nr_vmas ? mm->vmas[i]->start : task_size;
		uint64_t cand[3];

		if (g1 <= g0 || g1 - g0 < len + 2 * MARGIN)
			continue;
		cand[0] = (g1 - MARGIN - len) & ~(PAGE_SIZE - 1);
		cand[1] = PAGE_ALIGN(g0 + MARGIN);
		cand[2] = PAGE_ALIGN(g0 + (g1 - g0) / 2);
		for (int k = 0; k < 3; k++) {
			void *p;

			if (cand[k] < g0 + MARGIN || cand[k] + len + MARGIN > g1)
				continue;
			p = mmap((void *)cand[k], len, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == (void *)cand[k])
				return p;
			if (p != MAP_FAILED)
				munmap(p, len);
		}
	}
	pr_err("pid %d: found no free place for the restorer in its saved address space", rp->pid);
	return NULL;
}

/* Everything a process needs before it jumps: fds, cwd, the blob. */
/* Credentials into the restorer's form; the groups go at *off in a. */
static void plan_creds(const Creds *cr, struct rst_creds *rc, uint32_t dumpable, void *a,
		       size_t *off)
{
	rc->present = 1;
	rc->uid[0] = cr->uid;
	rc->uid[1] = cr->euid;
	rc->uid[2] = cr->suid;
	rc->uid[3] = cr->fsuid;
	rc->gid[0] = cr->gid;
	rc->gid[1] = cr->egid;
	rc->gid[2] = cr->sgid;
	rc->gid[3] = cr->fsgid;
	rc->cap_inh = cr->cap_inh;
	rc->cap_prm = cr->cap_prm;
	rc->cap_eff = cr->cap_eff;
	rc->cap_bnd = cr->cap_bnd;
	rc->cap_amb = cr->cap_amb;
	rc->securebits = cr->securebits;
	rc->nnp = cr->no_new_privs;
	rc->dumpable = dumpable;
	rc->nr_groups = cr->n_groups;
	rc->groups_off = *off;
	if (cr->n_groups)
		memcpy((char *)a + *off, cr->groups, cr->n_groups * 4);
	*off += (cr->n_groups * 4 + 7) & ~7UL;
}

static int prepare(struct rctx *c, struct rproc *rp, int idx, uint64_t *entry, uint64_t *args_p,
		   uint64_t *stack_p)
{
	struct rst_builder b;
	struct vdso_plan vp;
	const struct rcore *core = &rp->core;
	uint64_t code_len = PAGE_ALIGN(restorer_blob_end - restorer_blob);
	uint64_t park_len, args_len, stacks_len, total, task_size = 0x7ffffffff000ULL;
	int base = 3, dirfd, errfd, logfd = -1, ret;
	unsigned char *region;
	struct rst_args *a;
	size_t off;

	memset(&b, 0, sizeof(b));
	for (size_t i = 0; i < rp->nr_fds; i++)
		base = MAX(base, rp->fds[i]->fd + 1);
	/* our own fds go above the saved ones */
	errfd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, base);
	if (cr_log_fd() >= 0)
		logfd = fcntl(cr_log_fd(), F_DUPFD_CLOEXEC, base);
	dirfd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, base);
	if (dirfd < 0) {
		pr_perror("pid %d: cannot move descriptors above %d", rp->pid, base);
		return -EMFILE;
	}
	cr_log_redirect(errfd, logfd);
	b.next_fd = MAX(MAX(errfd, dirfd), logfd) + 1;
	b.args.close_from = base;
	/* the shared memory objects kupdate created, too */
	for (size_t i = 0; i < c->shm.n; i++) {
		int fd;

		if (c->shm.fds[i] < 0) /* a System V segment, attached by id */
			continue;
		fd = builder_place_fd(&b, c->shm.fds[i]);

		if (fd < 0)
			return fd;
		c->shm.fds[i] = fd;
	}
	/* nothing below base survives but what we restore */
	if (syscall(SYS_close_range, 0, base - 1, 0)) {
		for (int fd = 0; fd < base; fd++)
			close(fd);
	}
	ret = files_prepare_owned(&c->files, rp);
	if (!ret)
		ret = files_restore(&c->files, rp);
	if (ret)
		return ret;
	if (core->task->root && strcmp(core->task->root, "/") && chroot(core->task->root)) {
		ret = -errno;
		pr_perror("pid %d: cannot change root to %s", rp->pid, core->task->root);
		return ret;
	}
	if (core->task->has_umask)
		umask(core->task->umask);
	if (core->task->has_personality && personality(core->task->personality) < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot set its personality %#x", rp->pid,
			  core->task->personality);
		return ret;
	}
	if (core->task->child_subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1)) {
		ret = -errno;
		pr_perror("pid %d: cannot make it a child subreaper", rp->pid);
		return ret;
	}
	if (core->task->has_oom_score_adj) {
		char v[16];
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		int n = snprintf(v, sizeof(v), "%d", core->task->oom_score_adj);

		if (fd < 0 || write(fd, v, n) != n) {
			ret = -errno;
			pr_perror("pid %d: cannot set its oom_score_adj to %d (lowering it needs "
				  "CAP_SYS_RESOURCE)",
				  rp->pid, core->task->oom_score_adj);
			if (fd >= 0)
				close(fd);
			return ret;
		}
		close(fd);
	}
	if (core->task->cwd && chdir(core->task->cwd)) {
		ret = -errno;
		pr_perror("pid %d: cannot change directory to %s", rp->pid, core->task->cwd);
		return ret;
	}

	ret = mem_plan(dirfd, rp->pid, &rp->mm, &c->shm, &b, !c->opts->no_page_verify);
	if (ret)
		return ret;
	b.args.exe_fd = -1;
	if (core->task->exe_path) {
		int fd = open(core->task->exe_path, O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) ||
		    (core->task->has_exe_ino && st.st_ino != core->task->exe_ino)) {
			pr_err("pid %d: its executable %s is gone or was replaced since the dump",
			       rp->pid, core->task->exe_path);
			if (fd >= 0)
				close(fd);
			return -ESTALE;
		}
		b.args.exe_fd = builder_place_fd(&b, fd);
		if (b.args.exe_fd < 0)
			return b.args.exe_fd;
	}
	ret = vdso_plan(rp->pid, &rp->mm, &b, &vp);
	if (ret)
		return ret;
	park_len = vp.park_len;

	/* layout: code | args (vmas, runs, threads, auxv, strings) | park | stacks */
	b.nr_threads = core->nr_threads;
	args_len = sizeof(struct rst_args) + b.nr_vmas * sizeof(struct rst_vma) +
		   b.nr_runs * sizeof(struct rst_run) + b.nr_threads * sizeof(struct rst_thread) +
		   rp->mm.core->n_auxv * 8 + b.strings_len + 64 * sizeof(struct rst_sigaction) +
		   rp->timers.nr * sizeof(struct rst_timer) + 128 * rp->sig.core->n_pending +
		   (core->task->creds ? core->task->creds->n_groups * 4 : 0) +
		   vdso_args_len(&rp->mm) + seccomp_args_len(core->task->seccomp) + 64;
	for (size_t i = 0; i < core->nr_threads; i++)
		args_len +=
			128 * core->threads[i]->n_pending +
			(core->threads[i]->creds ? core->threads[i]->creds->n_groups * 4 + 8 : 0);
	args_len = PAGE_ALIGN(args_len);
	stacks_len = b.nr_threads * RST_STACK_SIZE;
	total = code_len + args_len + PAGE_ALIGN(park_len) + stacks_len;
	for (size_t i = 0; i < rp->mm.nr_vmas; i++)
		if (rp->mm.vmas[i]->end > task_size)
			task_size = (1ULL << 56) - PAGE_SIZE;
	region = map_blob_region(rp, total, task_size);
	if (!region)
		return -ENOMEM;
	if (mprotect(region, code_len + args_len, PROT_READ | PROT_WRITE) ||
	    mprotect(region + total - stacks_len, stacks_len, PROT_READ | PROT_WRITE)) {
		ret = -errno;
		pr_perror("pid %d: cannot set up the restorer", rp->pid);
		return ret;
	}
	memcpy(region, restorer_blob, restorer_blob_end - restorer_blob);
	vdso_place(&vp, &b, (uintptr_t)region);

	a = (struct rst_args *)(region + code_len);
	b.args.magic = RST_MAGIC;
	b.args.version = RST_VERSION;
	b.args.size = args_len;
	b.args.blob_start = (uintptr_t)region;
	b.args.blob_len = total;
	b.args.park_start = (uintptr_t)region + code_len + args_len;
	b.args.task_size = task_size;
	off = sizeof(struct rst_args);
	b.args.nr_vmas = b.nr_vmas;
	b.args.vmas_off = off;
	memcpy((char *)a + off, b.vmas, b.nr_vmas * sizeof(struct rst_vma));
	off += b.nr_vmas * sizeof(struct rst_vma);
	b.args.nr_runs = b.nr_runs;
	b.args.runs_off = off;
	memcpy((char *)a + off, b.runs, b.nr_runs * sizeof(struct rst_run));
	off += b.nr_runs * sizeof(struct rst_run);
	b.args.nr_threads = b.nr_threads;
	b.args.threads_off = off;
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + off) + i;
		const ThreadCore *tc = core->threads[i];

		t->tid = tc->tid;
		t->stack_top = (uintptr_t)region + total - i * RST_STACK_SIZE;
		t->clear_child_tid = tc->clear_child_tid;
		t->robust_list = tc->robust_list;
		t->robust_len = tc->robust_list_len;
		if (tc->rseq) {
			t->has_rseq = 1;
			t->rseq_ptr = tc->rseq->abi_pointer;
			t->rseq_len = tc->rseq->abi_size;
			t->rseq_sig = tc->rseq->signature;
		}
		snprintf(t->comm, sizeof(t->comm), "%s",
			 tc->comm ? tc->comm : (i ? "" : core->task->comm));
		if (tc->has_altstack_sp) {
			t->has_altstack = 1;
			t->altstack_sp = tc->altstack_sp;
			t->altstack_size = tc->altstack_size;
			t->altstack_flags = tc->altstack_flags;
		}
		if (tc->has_sched_attr) {
			memcpy(t->sched_attr, tc->sched_attr.data, tc->sched_attr.len);
			t->sched_attr_len = tc->sched_attr.len;
		}
		if (tc->has_affinity) {
			memcpy(t->affinity, tc->affinity.data, tc->affinity.len);
			t->affinity_len = tc->affinity.len;
		}
		t->pdeathsig = tc->pdeathsig;
	}
	off += b.nr_threads * sizeof(struct rst_thread);
	/* queued signals, per thread then for the whole process */
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + b.args.threads_off) + i;
		const ThreadCore *tc = core->threads[i];

		t->pending_off = off;
		t->nr_pending = tc->n_pending;
		for (size_t k = 0; k < tc->n_pending; k++, off += 128)
			memcpy((char *)a + off, tc->pending[k].data, 128);
	}
	b.args.shared_pending_off = off;
	b.args.nr_shared_pending = rp->sig.core->n_pending;
	for (size_t k = 0; k < rp->sig.core->n_pending; k++, off += 128)
		memcpy((char *)a + off, rp->sig.core->pending[k].data, 128);
	/* timers */
	b.args.timers_off = off;
	b.args.nr_timers = rp->timers.nr;
	for (size_t i = 0; i < rp->timers.nr; i++, off += sizeof(struct rst_timer)) {
		const PosixTimer *pt = rp->timers.timers[i];
		struct rst_timer *tm = (struct rst_timer *)((char *)a + off);

		tm->id = pt->id;
		tm->clock = pt->clock;
		tm->notify = pt->notify;
		tm->signo = pt->signo;
		tm->tid = pt->has_tid ? pt->tid : 0;
		tm->sival = pt->sival;
		tm->value_ns = pt->value_ns;
		tm->interval_ns = pt->interval_ns;
		tm->overrun = pt->has_overrun ? pt->overrun : 0;
		tm->sig_pending = pt->sig_pending;
	}
	if (rp->timers.core->has_read_mono_ns)
		b.args.timers_mono = rp->timers.core->read_mono_ns;
	{
		const Itimer *it[3] = { rp->timers.core->real, rp->timers.core->virt,
					rp->timers.core->prof };

		for (int w = 0; w < 3; w++)
			if (it[w]) {
				b.args.itimers[w][0] = it[w]->value_us;
				b.args.itimers[w][1] = it[w]->interval_us;
			}
	}
	/* limits and credentials */
	b.args.nr_rlimits = core->task->n_rlimits;
	for (size_t i = 0; i < core->task->n_rlimits; i++) {
		b.args.rlimits[i][0] = core->task->rlimits[i]->cur;
		b.args.rlimits[i][1] = core->task->rlimits[i]->max;
	}
	if (core->task->creds)
		plan_creds(core->task->creds, &b.args.creds,
			   core->task->has_dumpable ? core->task->dumpable : 1, a, &off);
	for (size_t i = 0; i < b.nr_threads; i++) {
		struct rst_thread *t = (struct rst_thread *)((char *)a + b.args.threads_off) + i;

		if (i && core->threads[i]->creds)
			plan_creds(core->threads[i]->creds, &t->creds, 1, a, &off);
	}
	seccomp_plan(core->task->seccomp, &b.args, (uint8_t *)a, &off);
	b.args.sigacts_off = off;
	b.args.nr_sigacts = signals_plan(&rp->sig, (struct rst_sigaction *)((char *)a + off));
	off += b.args.nr_sigacts * sizeof(struct rst_sigaction);
	b.args.auxv_off = off;
	b.args.auxv_size = rp->mm.core->n_auxv * 8;
	memcpy((char *)a + off, rp->mm.core->auxv, b.args.auxv_size);
	off += b.args.auxv_size;
	for (size_t i = 0; i < b.nr_vmas; i++) {
		struct rst_vma *v = (struct rst_vma *)((char *)a + b.args.vmas_off) + i;
		if (v->name_off)
			v->name_off += off;
	}
	if (b.strings_len)
		memcpy((char *)a + off, b.strings, b.strings_len);
	off = PAGE_ALIGN(off + b.strings_len);
	ret = vdso_fill(rp->pid, &rp->mm, &vp, (struct rst_vma *)((char *)a + b.args.vmas_off),
			(uint8_t *)a, &off);
	if (ret)
		return ret;
	memcpy(a, &b.args, sizeof(b.args));
	if (mprotect(region, code_len, PROT_READ | PROT_EXEC)) {
		ret = -errno;
		pr_perror("pid %d: cannot set up the restorer", rp->pid);
		return ret;
	}
	free(b.vmas);
	free(b.runs);
	free(b.strings);

	if (cr_log_level() >= CR_LOG_DEBUG) {
		DIR *d = opendir("/proc/self/fd");
		struct dirent *de;
		char line[512] = "";

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.' && strlen(line) < 480)
				snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s",
					 de->d_name);
		if (d)
			closedir(d);
		pr_debug("pid %d: fds before the restorer:%s (close from %d)", rp->pid, line,
			 b.args.close_from);
	}
	c->sh->procs[idx].blob_start = (uintptr_t)region;
	c->sh->procs[idx].blob_len = total;
	c->sh->procs[idx].args_addr = (uintptr_t)a;
	*entry = (uintptr_t)region;
	*args_p = (uintptr_t)a;
	/* as if called: the return address slot keeps the stack ABI-aligned */
	*stack_p = (uintptr_t)region + total - 8;
	return 0;
}

/* glibc registers an rseq area for every thread; ours is about to be
 * unmapped, and the kernel would fault on it at the next return to user
 * mode.  The restorer registers the saved process's areas later. */
static int unregister_rseq(void)
{
#ifdef RSEQ_SIG
	unsigned sizes[2] = { __rseq_size, 32 };
	void *area = (char *)__builtin_thread_pointer() + __rseq_offset;

	if (!__rseq_size)
		return 0;
	for (int i = 0; i < 2; i++)
		if (!syscall(SYS_rseq, area, sizes[i], RSEQ_FLAG_UNREGISTER, RSEQ_SIG))
			return 0;
	if (errno != EINVAL)
		return -errno;
	return -EINVAL;
#else
	return 0;
#endif
}

static void __attribute__((noreturn)) jump(uint64_t entry, uint64_t args, uint64_t stack)
{
	__asm__ volatile("mov %0, %%rsp\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "jmp *%1\n\t" ::"r"(stack),
			 "r"(entry), "D"(args)
			 : "memory");
	__builtin_unreachable();
}

static void __attribute__((noreturn)) task_main(struct rctx *c, struct rproc *rp)
{
	struct shared *sh = c->sh;
	int idx = rp - c->procs;
	uint64_t entry = 0, args = 0, stack = 0;
	sigset_t all;

	/* SIGCHLD stays deliverable (and, at SIG_DFL, is discarded) so that
	 * zombie children leave no pending signal behind */
	sigfillset(&all);
	sigdelset(&all, SIGCHLD);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	if (rp->pe->sid == rp->pid) {
		if (setsid() < 0) {
			pr_perror("pid %d: cannot create its session", rp->pid);
			task_fail(sh);
		}
	} else if (rp->pe->pgid == rp->pid && setpgid(0, 0)) {
		pr_perror("pid %d: cannot create its process group", rp->pid);
		task_fail(sh);
	}
	/* what this process and its descendants share, before they fork */
	if (files_create_owned(&c->files, rp))
		task_fail(sh);
	for (int i = 0; i < rp->nr_children; i++)
		if (spawn(c, rp->children[i], false))
			task_fail(sh);
	for (size_t i = 0; i < c->nr_helpers; i++)
		if (c->helpers[i].parent == rp && spawn_helper(c, c->helpers[i].pid))
			task_fail(sh);
	if (launch_roots(c, rp, 0))
		task_fail(sh);
	arrive(sh);

	wait_stage(sh, ST_PGID);
	if (rp->pe->pgid != getpgid(0) && rp->pe->pgid != rp->pid) {
		if (setpgid(0, rp->pe->pgid)) {
			if (!rp->parent)
				pr_warn("pid %d: its process group %d is outside the tree; it "
					"stays in "
					"group %d",
					rp->pid, rp->pe->pgid, getpgid(0));
			else {
				pr_perror("pid %d: cannot join process group %d", rp->pid,
					  rp->pe->pgid);
				task_fail(sh);
			}
		}
	}
	arrive(sh);

	wait_stage(sh, ST_PREPARE);
	/* helpers have served once every group is joined */
	for (size_t i = 0; i < c->nr_helpers; i++)
		if (c->helpers[i].parent == rp)
			while (waitpid(c->helpers[i].pid, NULL, 0) < 0 && errno == EINTR)
				;
	if (rp->zombie)
		become_zombie(rp);
	if (prepare(c, rp, idx, &entry, &args, &stack))
		task_fail(sh);
	arrive(sh);

	wait_stage(sh, ST_GO);
	if (unregister_rseq()) {
		pr_err("pid %d: cannot unregister the restoring process's rseq area", rp->pid);
		task_fail(sh);
	}
	jump(entry, args, stack);
}

/* --------------------------------------------------------- kupdate side */

/* Wait until n processes arrived.  Once the tree exists (alive_check), a
 * process that dies without a word is noticed too. */
static int wait_count(struct rctx *c, uint32_t n, const char *what, bool alive_check)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int64_t deadline = now_ns(CLOCK_MONOTONIC) + 60LL * 1000000000LL;

	for (;;) {
		uint32_t v = atomic_load(&c->sh->count);

		if (atomic_load(&c->sh->failed))
			return -ECANCELED; /* the process said why */
		if (v >= n)
			return 0;
		if (now_ns(CLOCK_MONOTONIC) > deadline) {
			pr_err("restore timed out while %s (%u of %u processes ready)", what, v, n);
			return -ETIMEDOUT;
		}
		for (size_t i = 0; alive_check && i < c->nr; i++) {
			struct proc_stat st;
			struct rproc *rp = &c->procs[i];

			if (rp->zombie)
				continue;
			if (parse_stat(rp->pid, 0, &st) || st.state == 'Z') {
				pr_err("pid %d died while %s", rp->pid, what);
				return -ESRCH;
			}
		}
		futex(&c->sh->count, FUTEX_WAIT, v, &ts);
	}
}

/* Zombies must be dead before the tree is traced: a SIGCHLD to a traced
 * parent would be queued instead of discarded. */
static int wait_zombies(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct proc_stat st;
		int tries;

		if (!c->procs[i].zombie)
			continue;
		for (tries = 0; tries < 5000; tries++) {
			if (!parse_stat(c->procs[i].pid, 0, &st) && st.state == 'Z')
				break;
			usleep(1000);
		}
		if (tries == 5000) {
			pr_err("pid %d: did not become a zombie again", c->procs[i].pid);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static void open_stage(struct rctx *c, uint32_t stage)
{
	atomic_store(&c->sh->count, 0);
	atomic_store(&c->sh->stage, stage);
	futex(&c->sh->stage, FUTEX_WAKE, INT32_MAX, NULL);
}

static struct rproc *proc_of_tid(struct rctx *c, pid_t tid, int *ti)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		for (size_t k = 0; !rp->zombie && k < rp->pe->n_tids; k++)
			if (rp->pe->tids[k] == tid) {
				*ti = k;
				return rp;
			}
	}
	return NULL;
}

static const char *step_name(uint32_t step)
{
	static const char *const n[RST_STEP_MAX] = {
		[RST_STEP_NONE] = "starting",
		[RST_STEP_PARK] = "moving the vDSO aside",
		[RST_STEP_UNMAP] = "unmapping the old address space",
		[RST_STEP_MOVE] = "placing the vDSO",
		[RST_STEP_MMAP] = "mmap",
		[RST_STEP_FILL] = "reading its pages",
		[RST_STEP_CRC] = "checking its pages",
		[RST_STEP_MPROTECT] = "mprotect",
		[RST_STEP_MADVISE] = "madvise",
		[RST_STEP_MLOCK] = "mlock",
		[RST_STEP_MM] = "setting the mm fields (PR_SET_MM_MAP)",
		[RST_STEP_CLONE] = "creating a thread",
		[RST_STEP_THREAD] = "setting thread state",
		[RST_STEP_RSEQ] = "registering rseq",
		[RST_STEP_SIGACTION] = "setting a signal action",
		[RST_STEP_RLIMIT] =
			"setting a resource limit (raising a hard limit needs CAP_SYS_RESOURCE)",
		[RST_STEP_ITIMER] = "arming an interval timer",
		[RST_STEP_TIMER] = "creating a POSIX timer",
		[RST_STEP_SIGQUEUE] = "queueing a pending signal",
		[RST_STEP_SCHED] = "setting the scheduling policy or affinity",
		[RST_STEP_ALTSTACK] = "setting the alternate signal stack",
		[RST_STEP_CREDS] = "setting credentials",
		[RST_STEP_SECCOMP] = "installing seccomp (index: the filter, oldest first)",
	};
	return step < RST_STEP_MAX && n[step] ? n[step] : "?";
}

/* The blob gave up: say what it was doing. */
static void report_blob_failure(struct rctx *c, struct rproc *rp)
{
	struct rst_args a;
	struct iovec l = { &a, sizeof(a) }, r = { (void *)rp->args_addr, sizeof(a) };

	if (process_vm_readv(rp->pid, &l, 1, &r, 1, 0) != sizeof(a)) {
		pr_err("pid %d: the restorer failed (its report is unreadable)", rp->pid);
		return;
	}
	if (a.err_step == RST_STEP_MMAP || a.err_step == RST_STEP_FILL ||
	    a.err_step == RST_STEP_CRC || a.err_step == RST_STEP_MPROTECT ||
	    a.err_step == RST_STEP_MADVISE || a.err_step == RST_STEP_MLOCK) {
		const VmaEntry *e = NULL;
		size_t n = 0;

		for (size_t i = 0; i < rp->mm.nr_vmas; i++) {
			if (rp->mm.vmas[i]->kind == VMA_KIND__VMA_VDSO ||
			    rp->mm.vmas[i]->kind == VMA_KIND__VMA_VVAR)
				continue;
			if (n++ == a.err_index)
				e = rp->mm.vmas[i];
		}
		if (a.err_step == RST_STEP_CRC) {
			char name[80];

			uint64_t at = rp->helper_bad_addr ? rp->helper_bad_addr : a.err_addr;

			mem_pages_name_at(&rp->mm, rp->pid, at, name, sizeof(name));
			pr_err("pid %d: page data at %lx does not match its checksum: %s is "
			       "damaged",
			       rp->pid, (unsigned long)at, name);
			return;
		}
		pr_err("pid %d: cannot restore mapping %lx-%lx%s%s: %s at %lx failed: %s", rp->pid,
		       e ? (unsigned long)e->start : 0, e ? (unsigned long)e->end : 0,
		       e && e->path ? " " : "", e && e->path ? e->path : "", step_name(a.err_step),
		       (unsigned long)a.err_addr, strerror((int)-a.err));
		return;
	}
	pr_err("pid %d: the restorer failed %s (index %u, address %lx): %s", rp->pid,
	       step_name(a.err_step), a.err_index, (unsigned long)a.err_addr,
	       strerror((int)-a.err));
}

static int seize_all(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL |
			    PTRACE_O_TRACESYSGOOD;

		if (rp->zombie)
			continue;
		/* its seccomp filters go in inside the restorer; they must not
		 * apply to what kupdate does in it until it is let go */
		if (rp->core.task->seccomp)
			opts |= PTRACE_O_SUSPEND_SECCOMP;
		if (ptrace(PTRACE_SEIZE, rp->pid, 0, opts)) {
			int ret = -errno;
			if (rp->core.task->seccomp)
				pr_perror("pid %d: cannot trace it with its seccomp filters "
					  "suspended "
					  "(PTRACE_O_SUSPEND_SECCOMP needs CAP_SYS_ADMIN and "
					  "CONFIG_CHECKPOINT_RESTORE)",
					  rp->pid);
			else
				pr_perror("pid %d: cannot trace it to finish its restore", rp->pid);
			return ret;
		}
		rp->seized = true;
		rp->blob_start = c->sh->procs[i].blob_start;
		rp->blob_len = c->sh->procs[i].blob_len;
		rp->args_addr = c->sh->procs[i].args_addr;
		rp->syscall_ip = rp->blob_start + RST_SYSCALL_OFFSET;
		pr_debug("pid %d: restorer at %lx-%lx, args at %lx", rp->pid,
			 (unsigned long)rp->blob_start,
			 (unsigned long)(rp->blob_start + rp->blob_len),
			 (unsigned long)rp->args_addr);
	}
	return 0;
}

/* Follow the tree through the blob until every thread is parked. */
static int follow_blobs(struct rctx *c)
{
	size_t parked = 0;
	sigset_t chld;
	int64_t deadline;
	uint64_t pages = 0;

	for (size_t i = 0; i < c->nr; i++)
		if (!c->procs[i].zombie)
			pages += c->procs[i].mm.head->nr_pages;
	/* generous: a minute plus ten seconds a GiB */
	deadline = now_ns(CLOCK_MONOTONIC) + (60LL + 10LL * (int64_t)(pages >> 18)) * 1000000000LL;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);

	while (parked < c->nr_threads) {
		int st, ti = 0;
		pid_t tid = waitpid(-1, &st, __WALL | WNOHANG);
		struct rproc *rp;

		if (tid == 0) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };

			if (now_ns(CLOCK_MONOTONIC) > deadline) {
				pr_err("restore timed out: %zu of %zu threads restored", parked,
				       c->nr_threads);
				return -ETIMEDOUT;
			}
			sigtimedwait(&chld, NULL, &ts);
			continue;
		}
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			pr_perror("restore: waiting for the tree");
			return -ECHILD;
		}
		rp = proc_of_tid(c, tid, &ti);
		if (!rp) {
			pr_debug("restore: event %#x of unrelated pid %d", st, tid);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (!atomic_load(&c->sh->failed))
				pr_err("pid %d (thread %d) died during its restore (%s %d)",
				       rp->pid, tid, WIFEXITED(st) ? "exit status" : "signal",
				       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return -ESRCH;
		}
		if (!WIFSTOPPED(st))
			continue;
		switch (st >> 16) {
		case PTRACE_EVENT_CLONE:
		case PTRACE_EVENT_STOP:
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		case PTRACE_EVENT_EXIT:
			report_blob_failure(c, rp);
			return -ECANCELED;
		}
		if (WSTOPSIG(st) == SIGTRAP) {
			struct user_regs_struct r;
			int ret;

			if (ptrace(PTRACE_GETREGS, tid, 0, &r) || r.rip <= rp->blob_start ||
			    r.rip > rp->blob_start + rp->blob_len) {
				pr_err("pid %d: thread %d stopped outside the restorer", rp->pid,
				       tid);
				return -EFAULT;
			}
			/* the blob asks for help with a mapping's pages, or waits
			 * for it to end (its %rax: what came of it) */
			if (r.rip == rp->blob_start + RST_HELPER_START_OFFSET + 1) {
				ret = mem_helper_start(rp->pid, rp->args_addr, r.rdi, r.rsi, r.rdx,
						       &rp->helper);
				if (ret)
					return ret;
				ptrace(PTRACE_CONT, tid, 0, 0);
				continue;
			}
			if (r.rip == rp->blob_start + RST_HELPER_WAIT_OFFSET + 1) {
				r.rax = (unsigned long long)mem_helper_wait(&rp->helper,
									    &rp->helper_bad_addr);
				if (ptrace(PTRACE_SETREGS, tid, 0, &r)) {
					ret = -errno;
					pr_perror("pid %d: cannot hand the fill's result to the "
						  "restorer",
						  rp->pid);
					return ret;
				}
				ptrace(PTRACE_CONT, tid, 0, 0);
				continue;
			}
			rp->parked++;
			parked++;
			continue;
		}
		if (WSTOPSIG(st) == SIGCHLD) {
			/* from a zombie child: discarded, as it would be at SIG_DFL */
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		{
			struct user_regs_struct r;

			memset(&r, 0, sizeof(r));
			ptrace(PTRACE_GETREGS, tid, 0, &r);
			pr_err("pid %d: thread %d got signal %d at %llx while being restored",
			       rp->pid, tid, WSTOPSIG(st), r.rip);
			return -EFAULT;
		}
	}
	return 0;
}

static int run_blobs(struct rctx *c)
{
	int ret = follow_blobs(c);

	/* a fill helper left running by a failure ends with its process */
	for (size_t i = 0; i < c->nr; i++)
		if (c->procs[i].helper) {
			if (!ret)
				pr_err("pid %d: the restorer parked with a fill helper running",
				       c->procs[i].pid);
			ret = ret ? ret : -EPROTO;
			if (c->procs[i].pid > 0)
				kill(c->procs[i].pid, SIGKILL);
			mem_helper_wait(&c->procs[i].helper, &c->procs[i].helper_bad_addr);
		}
	return ret;
}

/* Registers in, blob out, tree loose. */
static int finish(struct rctx *c)
{
	int ret;

	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];
		const ThreadCore *main_tc;
		struct user_regs_struct r;
		long args[6] = { 0 }, res;

		if (rp->zombie)
			continue;
		main_tc = rp->core.threads[0];
		if (ptrace(PTRACE_GETREGS, main_tc->tid, 0, &r)) {
			ret = -errno;
			pr_perror("pid %d: cannot read the restorer's registers", rp->pid);
			return ret;
		}
		args[0] = rp->blob_start;
		args[1] = rp->blob_len;
		ret = remote_syscall(main_tc->tid, rp->syscall_ip, &r, SYS_munmap, args, &res);
		if (ret)
			return ret;
		if (res) {
			pr_err("pid %d: cannot unmap the restorer at %lx: %s", rp->pid,
			       (unsigned long)rp->blob_start, strerror((int)-res));
			return (int)res;
		}
		for (size_t k = 0; k < rp->core.nr_threads; k++) {
			ret = core_set_thread(rp->pid, rp->core.threads[k]);
			if (ret)
				return ret;
		}
	}
	ret = tcp_finish_restore(&c->files, c->procs, c->nr, !c->opts->no_net_unlock);
	if (ret)
		return ret;
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		if (rp->zombie)
			continue;
		for (size_t k = 0; k < rp->core.nr_threads; k++) {
			int sig = (k == 0 && rp->pe->state == TASK_STATE__TASK_STOPPED)
					  ? (rp->pe->has_stop_signal && rp->pe->stop_signal
						     ? (int)rp->pe->stop_signal
						     : SIGSTOP)
					  : 0;

			if (ptrace(PTRACE_DETACH, rp->core.threads[k]->tid, 0, sig))
				pr_perror("pid %d: cannot detach thread %d", rp->pid,
					  rp->core.threads[k]->tid);
		}
		rp->seized = false;
	}
	return 0;
}

/* Nothing of a failed restore survives: kill what was created and wait
 * until it is gone (or a zombie for its parent to reap). */
static void kill_all(struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++)
		kill(c->procs[i].pid, SIGKILL);
	for (size_t i = 0; i < c->nr_helpers; i++)
		kill(c->helpers[i].pid, SIGKILL);
	/* a tracee held in its exit stop only moves on when we let it go */
	for (size_t i = 0; i < c->nr; i++)
		for (size_t k = 0; c->procs[i].seized && k < c->procs[i].pe->n_tids; k++)
			ptrace(PTRACE_DETACH, c->procs[i].pe->tids[k], 0, 0);
	for (size_t i = 0; i < c->nr; i++) {
		for (int tries = 0; tries < 5000; tries++) {
			struct proc_stat st;
			int ws;
			pid_t w;

			/* our tracees report their death to us first; one that
			 * reached its exit stop after the detach above waits
			 * there for us to let it go */
			while ((w = waitpid(-1, &ws, __WALL | WNOHANG)) > 0)
				if (WIFSTOPPED(ws))
					ptrace(PTRACE_DETACH, w, 0, 0);
			if (parse_stat(c->procs[i].pid, 0, &st) || st.state == 'Z' ||
			    st.state == 'X')
				break;
			usleep(1000);
		}
	}
}

static int write_pidfile(const char *path, pid_t pid)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%d\n", pid);

	if (fd < 0 || write_all(fd, buf, n)) {
		pr_perror("cannot write pid file %s", path);
		return -EIO;
	}
	return 0;
}

static bool has_launched_roots(const struct rctx *c)
{
	for (size_t i = 0; i < c->nr; i++)
		if (c->procs[i].launcher)
			return true;
	return false;
}

int cr_restore(const struct cr_restore_opts *o, pid_t *root_pid, int *root_status)
{
	struct rctx c;
	sigset_t chld, old;
	int ret, subreaper = 1, timens_fd = -1;

	memset(&c, 0, sizeof(c));
	c.opts = o;
	c.dirfd = open(o->imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.dirfd < 0) {
		ret = -errno;
		pr_perror("cannot open image directory %s", o->imgdir);
		return ret;
	}
	ret = load_images(&c);
	c.files.open_external = o->open_external;
	c.files.cb_arg = o->cb_arg;
	c.files.shm = &c.shm; /* memfd fds are new descriptions of these objects */
	if (!ret)
		ret = find_helpers(&c);
	if (!ret)
		ret = find_launchers(&c);
	if (!ret)
		ret = check_ids_free(&c);
	if (!ret)
		ret = shmem_restore(c.dirfd, &c.shm, !o->no_page_verify);
	if (!ret)
		ret = files_plan(&c.files, c.procs, c.nr, highest_fd());
	if (ret)
		goto out;

	c.sh_len = PAGE_ALIGN(sizeof(struct shared) + c.nr * sizeof(struct shared_proc));
	c.sh = mmap(NULL, c.sh_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c.sh == MAP_FAILED) {
		c.sh = NULL;
		ret = -ENOMEM;
		goto out;
	}
	c.sh->tool = getpid();

	/* the tree's clocks go on from where they were (timens.c) */
	if (c.inv->has_clock_monotonic_ns && c.inv->has_clock_boottime_ns) {
		ret = timens_enter(c.inv->clock_monotonic_ns, c.inv->clock_boottime_ns, &timens_fd);
		if (ret)
			goto out;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	open_stage(&c, ST_FORK);
	/* what the roots share, then every root (a service may have several trees) */
	if (files_tool_owns(&c.files)) {
		ret = files_create_for_tool(&c.files);
		if (ret)
			goto fail;
	}
	/* roots forked from a session of the tree or a rebuilt one come back
	 * to us, and a non-detached restore can wait for them */
	if ((c.nr_sessions || has_launched_roots(&c)) &&
	    prctl(PR_GET_CHILD_SUBREAPER, &subreaper) == 0 && !subreaper)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	for (size_t i = 0; i < c.nr; i++) {
		if (c.procs[i].parent || c.procs[i].launcher || c.procs[i].pe->new_session)
			continue;
		ret = spawn(&c, &c.procs[i], o->detach);
		if (ret)
			goto fail;
	}
	for (size_t i = 0; i < c.nr_sessions; i++) {
		ret = spawn_session_helper(&c, c.sessions[i].sid);
		if (ret)
			goto fail;
	}
	*root_pid = c.procs[0].pid;

	ret = wait_count(&c, c.nr + c.nr_helpers, "creating processes", false);
	if (!ret)
		ret = files_finish_tool(&c.files);
	if (ret)
		goto fail;
	open_stage(&c, ST_PGID);
	ret = wait_count(&c, c.nr + c.nr_helpers, "joining process groups", true);
	if (ret)
		goto fail;
	open_stage(&c, ST_PREPARE);
	ret = wait_count(&c, c.nr_live, "restoring files and preparing memory", true);
	if (!ret)
		ret = wait_zombies(&c);
	if (ret)
		goto fail;
	ret = seize_all(&c);
	if (!ret && cr_fault("restore")) {
		pr_err("restore: fault injected by KUPDATE_FAULT after the %zu processes were "
		       "created",
		       c.nr);
		ret = -EIO;
	}
	if (ret)
		goto fail;
	open_stage(&c, ST_GO);
	ret = run_blobs(&c);
	/* every process has attached its System V segments: the ones marked
	 * for removal can be marked again */
	if (!ret)
		ret = sysvshm_commit(&c.shm);
	if (ret)
		goto fail;
	ret = finish(&c);
	if (ret)
		goto fail;
	if (o->pidfile)
		write_pidfile(o->pidfile, c.procs[0].pid);
	pr_info("restored %zu processes, %zu threads", c.nr, c.nr_threads);

	if (!o->detach) {
		int st;

		while (waitpid(c.procs[0].pid, &st, 0) < 0 && errno == EINTR)
			;
		*root_status = st;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	goto out;
fail:
	/* whatever failed has been reported; nothing of the tree survives */
	atomic_store(&c.sh->failed, 1);
	kill_all(&c);
	c.shm.sysv_committed = false; /* the segments created go with the tree */
	/* reap what is ours to reap */
	while (waitpid(-1, NULL, __WALL | WNOHANG) > 0)
		;
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	timens_leave(timens_fd);
	if (!subreaper)
		prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (c.sh)
		munmap(c.sh, c.sh_len);
	shmem_free(&c.shm);
	free(c.helpers);
	free(c.sessions);
	free_images(&c);
	close(c.dirfd);
	return ret;
}

int cr_images_check(const char *imgdir)
{
	struct rctx c;
	struct cr_restore_opts o = { .imgdir = imgdir };
	int ret;

	memset(&c, 0, sizeof(c));
	c.opts = &o;
	c.dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.dirfd < 0) {
		ret = -errno;
		pr_perror("cannot open image directory %s", imgdir);
		return ret;
	}
	ret = load_images(&c);
	if (!ret)
		ret = find_helpers(&c);
	if (!ret)
		ret = find_launchers(&c);
	free(c.helpers);
	free(c.sessions);
	free_images(&c);
	close(c.dirfd);
	return ret;
}
