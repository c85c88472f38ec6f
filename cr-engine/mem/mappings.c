/* Memory, dump side: a process's mappings (smaps, VmFlags, map_files),
 * each classified for the restore (memory.h), its auxv and brk, and the
 * links of /proc/PID (exe, cwd, root). */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "dump.h"
#include "ghost.h"
#include "log.h"
#include "namespaces.h"
#include "mappings.h"
#include "proc.h"
#include "remote.h"
#include "restorer/restorer.h"
#include "shmem.h"
#include "sysvshm.h"
#include "util.h"

static void vma_madv(struct cr_vma *v)
{
	unsigned f = v->s.vmflags;

	v->madv = ((f & VMF_DONTFORK) ? RST_MADV_DONTFORK : 0) |
		  ((f & VMF_DONTDUMP) ? RST_MADV_DONTDUMP : 0) |
		  ((f & VMF_HUGEPAGE) ? RST_MADV_HUGEPAGE : 0) |
		  ((f & VMF_NOHUGEPAGE) ? RST_MADV_NOHUGEPAGE : 0) |
		  ((f & VMF_MERGEABLE) ? RST_MADV_MERGEABLE : 0) |
		  ((f & VMF_WIPEONFORK) ? RST_MADV_WIPEONFORK : 0) |
		  ((f & VMF_SEQ_READ) ? RST_MADV_SEQUENTIAL : 0) |
		  ((f & VMF_RAND_READ) ? RST_MADV_RANDOM : 0);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* a path from /proc ("PATH (deleted)") of a file st that was deleted,
 * rather than one whose name ends so */
static bool deleted_path(const struct cr_dump_ctx *ctx, const char *path, const struct stat *st)
{
	char buf[PATH_MAX + 64];
	struct stat named;

	if (!ends_with(path, " (deleted)"))
		return false;
	return st->st_nlink == 0 || stat(dump_path(ctx, path, buf, sizeof(buf)), &named) ||
	       named.st_dev != st->st_dev || named.st_ino != st->st_ino;
}

/* path leads to the file st from the tree's (or the container's) root */
static bool leads_to(const struct cr_dump_ctx *ctx, const char *path, const struct stat *st)
{
	char buf[PATH_MAX + 64];
	struct stat named;

	return !stat(dump_path(ctx, path, buf, sizeof(buf)), &named) &&
	       named.st_dev == st->st_dev && named.st_ino == st->st_ino;
}

/* A mapping of a socket: a packet socket's ring (packet.c), which the
 * process holds an fd of; its content is the socket's to save */
static int ring_vma(struct cr_proc *p, struct cr_vma *v)
{
	char dir[64], link[64], want[64];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", p->pid);
	snprintf(want, sizeof(want), "%.40s", v->s.path);
	v->ring_fd = -1;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);

		if (n > 0 && (link[n] = 0, !strcmp(link, want))) {
			v->ring_fd = atoi(de->d_name);
			break;
		}
	}
	if (d)
		closedir(d);
	if (v->ring_fd < 0 || !v->s.shared) {
		pr_err("pid %d: mapping %lx-%lx maps %s, %s", p->pid, v->s.start, v->s.end,
		       v->s.path,
		       v->s.shared ? "whose fd the process no longer holds: it cannot be mapped "
				     "again"
				   : "privately");
		return -EOPNOTSUPP;
	}
	v->kind = VMA_KIND__VMA_PACKET_RING;
	return 0;
}

static int classify_vma(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_vma *v)
{
	char *path = v->s.path;

	if (!strcmp(path, "[vdso]")) {
		v->special = path;
		v->kind = VMA_KIND__VMA_VDSO;
		return 0;
	}
	if (!strncmp(path, "[vvar", 5)) {
		v->special = path;
		v->kind = VMA_KIND__VMA_VVAR;
		return 0;
	}
	if (v->s.vmflags & (VMF_IO | VMF_PFNMAP)) {
		pr_err("pid %d: mapping %lx-%lx (%s) maps device memory, which cannot be saved",
		       p->pid, v->s.start, v->s.end, path);
		return -EOPNOTSUPP;
	}
	if (!strncmp(path, "socket:[", 8))
		return ring_vma(p, v);
	if (path[0] == '[') {
		v->special = path;
		if (!strcmp(path, "[heap]") || !strncmp(path, "[stack", 6)) {
			v->kind = v->s.shared ? VMA_KIND__VMA_ANON_SHARED
					      : VMA_KIND__VMA_ANON_PRIVATE;
		} else if (!strncmp(path, "[anon:", 6) && ends_with(path, "]")) {
			v->kind = VMA_KIND__VMA_ANON_PRIVATE;
			v->name = strndup(path + 6, strlen(path) - 7);
			if (!v->name)
				return -ENOMEM;
		} else {
			pr_err("pid %d: mapping %lx-%lx %s is of a kind that cannot be restored",
			       p->pid, v->s.start, v->s.end, path);
			return -EOPNOTSUPP;
		}
	} else if (!path[0]) {
		v->kind = v->s.shared ? VMA_KIND__VMA_ANON_SHARED : VMA_KIND__VMA_ANON_PRIVATE;
	} else {
		char mf[96];
		struct stat st;

		if (v->s.shared && sysvshm_mapping(path)) {
			v->kind = VMA_KIND__VMA_ANON_SHARED;
			int ret = sysvshm_check_vma(p, v);

			return ret ? ret : shmem_dump_vma(ctx, p, v);
		}
		if (v->s.shared &&
		    (!strncmp(path, "/dev/zero", 9) || !strncmp(path, "/memfd:", 7)) &&
		    ends_with(path, " (deleted)")) {
			v->kind = VMA_KIND__VMA_ANON_SHARED;
			return shmem_dump_vma(ctx, p, v);
		}
		if (!strncmp(path, "/memfd:", 7)) {
			pr_err("pid %d: mapping %lx-%lx: private mappings of a memfd (%s) are not "
			       "supported yet",
			       p->pid, v->s.start, v->s.end, path);
			return -EOPNOTSUPP;
		}
		if (ends_with(path, " (deleted)") && !strncmp(path, "/SYSV", 5)) {
			pr_err("pid %d: mapping %lx-%lx: System V shared memory (%s) is not "
			       "supported yet",
			       p->pid, v->s.start, v->s.end, path);
			return -EOPNOTSUPP;
		}
		snprintf(mf, sizeof(mf), "/proc/%d/map_files/%lx-%lx", p->pid, v->s.start,
			 v->s.end);
		/* the link's mode tells how the file was opened for the mapping */
		if (!lstat(mf, &st))
			v->open_rw = !!(st.st_mode & S_IWUSR);
		if (stat(mf, &st)) {
			int ret = -errno;
			pr_perror("pid %d: cannot stat %s (%s)", p->pid, mf, path);
			return ret;
		}
		/* a deleted file (a library apt replaced): saved once, made
		 * again at restore (ghost.c), which refuses one that still
		 * has another name */
		if (deleted_path(ctx, path, &st)) {
			char what[96];
			int ret;

			path[strlen(path) - 10] = 0;
			snprintf(what, sizeof(what), "pid %d: mapping %lx-%lx maps", p->pid,
				 v->s.start, v->s.end);
			ret = ghost_save(ctx, mf, what, path, &st, true, &v->ghost_id);
			if (ret)
				return ret;
		} else if (ctx->mnt_owner && !ns_saved_path(ctx, ctx->mnt_owner, path) &&
			   !leads_to(ctx, path, &st)) {
			/* in a container: the file must be in its root (a
			 * program that pivoted away from its own binary) */
			pr_err("pid %d: mapping %lx-%lx maps %s, which that path does not lead "
			       "to from its root (the file is outside it); kupdate cannot map it "
			       "again",
			       p->pid, v->s.start, v->s.end, path);
			return -EOPNOTSUPP;
		}
		v->ino = st.st_ino;
		v->file_size = st.st_size;
		v->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
		v->kind = v->s.shared ? VMA_KIND__VMA_FILE_SHARED : VMA_KIND__VMA_FILE_PRIVATE;
	}
	if (v->kind == VMA_KIND__VMA_ANON_SHARED) {
		/* [anon_shmem:NAME] and the like: a mapping with no file to reach */
		pr_err("pid %d: mapping %lx-%lx (%s): shared memory without a file is not "
		       "supported",
		       p->pid, v->s.start, v->s.end, path);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int read_vdso(struct cr_proc *p, struct cr_vma *v)
{
	size_t len = v->s.end - v->s.start;
	struct iovec l, r;

	p->vdso_image = malloc(len);
	if (!p->vdso_image)
		return -ENOMEM;
	l.iov_base = p->vdso_image;
	l.iov_len = len;
	r.iov_base = (void *)v->s.start;
	r.iov_len = len;
	if (process_vm_readv(p->pid, &l, 1, &r, 1, 0) != (ssize_t)len) {
		int ret = -errno;
		pr_perror("pid %d: cannot read its vDSO at %lx", p->pid, v->s.start);
		return ret;
	}
	p->vdso_len = len;
	p->vdso_start = v->s.start;
	return 0;
}

/* a link of /proc/PID whose target was removed: " (deleted)" taken off */
static bool strip_deleted(char *s)
{
	if (!ends_with(s, " (deleted)"))
		return false;
	s[strlen(s) - 10] = 0;
	return true;
}

static int read_links(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char path[64], buf[PATH_MAX + 1];
	ssize_t n;
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if (!stat(path, &st)) {
			p->exe_ino = st.st_ino;
			/* replaced: the file it maps, saved with its mappings,
			 * or on its own */
			if (deleted_path(ctx, buf, &st) && strip_deleted(buf)) {
				char what[64];

				p->exe_ghost_id = ghost_find(ctx, st.st_dev, st.st_ino);
				snprintf(what, sizeof(what), "pid %d: its executable is", p->pid);
				ret = p->exe_ghost_id ? 0
						      : ghost_save(ctx, path, what, buf, &st, true,
								   &p->exe_ghost_id);
				if (ret)
					return ret;
			}
		}
		p->exe_path = xstrdup(buf);
	}
	snprintf(path, sizeof(path), "/proc/%d/cwd", p->pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		/* removed (rmdir): made again at restore, where it was, which
		 * needs its parent there */
		if (!stat(path, &st) && !st.st_nlink && strip_deleted(buf)) {
			char *slash = strrchr(buf, '/');
			struct stat pst;

			if (slash && slash != buf) {
				char rbuf[PATH_MAX + 64];

				*slash = 0;
				ret = stat(dump_path(ctx, buf, rbuf, sizeof(rbuf)), &pst) ? -errno
				      : S_ISDIR(pst.st_mode)				  ? 0
							     : -ENOTDIR;
				*slash = '/';
			} else {
				ret = slash ? 0 : -EINVAL;
			}
			if (ret) {
				pr_err("pid %d: its working directory %s was removed, and so was "
				       "its parent; kupdate cannot make it again",
				       p->pid, buf);
				return -EOPNOTSUPP;
			}
			p->cwd_deleted = true;
			p->cwd_mode = st.st_mode & 07777;
			p->cwd_uid = st.st_uid;
			p->cwd_gid = st.st_gid;
			p->cwd_ino = st.st_ino;
		}
		p->cwd = xstrdup(buf);
	}
	snprintf(path, sizeof(path), "/proc/%d/root", p->pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if (!stat(path, &st) && !st.st_nlink && strip_deleted(buf)) {
			pr_err("pid %d: its root directory %s was removed; kupdate cannot restore "
			       "a process chrooted there",
			       p->pid, buf);
			return -EOPNOTSUPP;
		}
		p->root = xstrdup(buf);
	}
	{
		_cleanup_free_ char *pers = NULL;

		if (!read_proc(&pers, NULL, "/proc/%d/personality", p->pid))
			p->personality = strtoul(pers, NULL, 16);
	}
	return 0;
}

int dump_mm(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct smaps_vma *sv;
	int nr, ret;

	ret = parse_smaps(p->pid, &sv, &nr);
	if (ret)
		return ret;
	p->vmas = xzalloc(sizeof(*p->vmas) * (nr ? nr : 1));
	if (!p->vmas) {
		free_smaps(sv, nr);
		return -ENOMEM;
	}
	int i;
	for (i = 0; i < nr; i++) {
		struct cr_vma *v;

		if (!strcmp(sv[i].path, "[vsyscall]")) {
			free(sv[i].path);
			continue;
		}
		/* from here on p->vmas owns the path */
		v = &p->vmas[p->nr_vmas++];
		v->s = sv[i];
		ret = classify_vma(ctx, p, v);
		if (ret)
			break;
		vma_madv(v);
		if (v->kind == VMA_KIND__VMA_VDSO) {
			ret = read_vdso(p, v);
			if (ret)
				break;
		}
	}
	for (i = i + 1; i < nr; i++)
		free(sv[i].path);
	free(sv);
	if (!ret)
		ret = sysvshm_check_attaches(ctx, p);
	if (ret)
		return ret;

	{
		_cleanup_free_ char *auxv = NULL;
		size_t len;

		ret = read_proc(&auxv, &len, "/proc/%d/auxv", p->pid);
		if (ret) {
			pr_err("pid %d: cannot read auxv: %s", p->pid, strerror(-ret));
			return ret;
		}
		p->nr_auxv = len / 8;
		p->auxv = malloc(len ? len : 8);
		if (!p->auxv)
			return -ENOMEM;
		memcpy(p->auxv, auxv, len);
	}

	/* the current brk is known only to the task itself */
	{
		long args[6] = { 0 }, res;
		struct cr_thread *t = &p->threads[0];

		ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_brk, args, &res);
		if (ret)
			return ret;
		p->brk = res;
	}
	return read_links(ctx, p);
}
