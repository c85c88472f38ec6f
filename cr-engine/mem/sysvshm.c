/* System V shared memory segments attached by the tree.
 *
 * Dump: a /SYSV<key> mapping is a segment whose id is the inode number of
 * the mapping.  shmem.c saves the segment once as a shared memory object
 * (its data through /proc/PID/map_files, as for the other objects) and this
 * file adds what IPC_STAT tells: key, size, permissions, owner, creator,
 * whether IPC_RMID was done (SHM_DEST), SHM_LOCK and the change time.  Each
 * mapping keeps its object id; an attach is the mapping at offset 0 and the
 * mappings right after it that continue it (mprotect splits an attach).
 * An attach that no longer covers its segment (part of it unmapped, or
 * moved apart with mremap) is refused, as are huge page segments and
 * segments of another IPC namespace than the tree's root (which the dump's
 * thread enters: namespaces.c).
 *
 * Restore: before the tree, kupdate creates each segment with its id
 * (/proc/sys/kernel/shm_next_id, then shmget with the key or IPC_PRIVATE,
 * IPC_CREAT|IPC_EXCL), sets owner and mode with IPC_SET, fills it through an
 * attach of its own and detaches.  A segment that outlived its tree on this
 * kernel (a restore without the kexec in between) is taken back when it is
 * provably the same one: same id, key, size, creator and change time, and
 * nobody attached.  Any other segment holding the id or the key makes the
 * restore fail: programs see ids, so a new id cannot be given in secret.
 * The restorer attaches with shmat(id, addr, SHM_REMAP [| SHM_RDONLY]) so
 * that shmdt works afterwards; the segments marked for removal get their
 * IPC_RMID only once every process has attached (sysvshm_commit), and a
 * failed restore removes the segments it created. */
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "dump.h"
#include "log.h"
#include "proc.h"
#include "restore.h"
#include "restorer/restorer.h"
#include "shmem.h"
#include "sysvshm.h"
#include "util.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

#define SHM_NEXT_REL "sys/kernel/shm_next_id" /* in /proc (proc_open) */
#define SHM_NEXT_ID  "/proc/" SHM_NEXT_REL

/* ---------------------------------------------------------------- dump */

bool sysvshm_mapping(const char *path)
{
	size_t n = strlen(path);

	return !strncmp(path, "/SYSV", 5) && n > 10 && !strcmp(path + n - 10, " (deleted)");
}

static int same_ipc_ns(pid_t pid)
{
	char path[64];
	struct stat a, b;

	/* this thread's: a dump works in the tree's IPC namespace (namespaces.c) */
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", pid);
	if (stat(path, &a) || stat("/proc/thread-self/ns/ipc", &b)) {
		int ret = -errno;

		pr_perror("pid %d: cannot read its IPC namespace", pid);
		return ret;
	}
	return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int sysvshm_check_vma(const struct cr_proc *p, const struct cr_vma *v)
{
	int ret = same_ipc_ns(p->pid);

	if (ret < 0)
		return ret;
	if (!ret) {
		pr_err("pid %d: mapping %lx-%lx: System V shared memory (%s) of another IPC "
		       "namespace than the tree's is not supported",
		       p->pid, v->s.start, v->s.end, v->s.path);
		return -EOPNOTSUPP;
	}
	return 0;
}

int sysvshm_describe(int fd, const struct stat *st, struct cr_shm *s, const char *where)
{
	struct shmid_ds ds;
	struct statfs sf;
	int id = (int)st->st_ino;

	if (!fstatfs(fd, &sf) && (uint32_t)sf.f_type == HUGETLBFS_MAGIC) {
		pr_err("%s: System V shared memory segment %d uses huge pages (SHM_HUGETLB), "
		       "which is not supported",
		       where, id);
		return -EOPNOTSUPP;
	}
	if (shmctl(id, IPC_STAT, &ds) < 0) {
		int ret = -errno;

		pr_perror("%s: cannot read System V shared memory segment %d (IPC_STAT)", where,
			  id);
		return ret;
	}
	if ((uint64_t)ds.shm_segsz != (uint64_t)st->st_size) {
		pr_err("%s: System V shared memory segment %d has %lu bytes, its mapping %lu: "
		       "they are not the same segment",
		       where, id, (unsigned long)ds.shm_segsz, (unsigned long)st->st_size);
		return -EINVAL;
	}
	s->sysv_id = id;
	s->sysv_key = ds.shm_perm.__key;
	s->mode = ds.shm_perm.mode & 0777;
	s->uid = ds.shm_perm.uid;
	s->gid = ds.shm_perm.gid;
	s->sysv_cuid = ds.shm_perm.cuid;
	s->sysv_cgid = ds.shm_perm.cgid;
	s->sysv_removed = !!(ds.shm_perm.mode & SHM_DEST);
	s->sysv_locked = !!(ds.shm_perm.mode & SHM_LOCKED);
	s->sysv_ctime = ds.shm_ctime;
	pr_debug("%s: System V segment %d, key %#x, %lu bytes, mode %o%s", where, id,
		 (unsigned)s->sysv_key, (unsigned long)ds.shm_segsz, s->mode,
		 s->sysv_removed ? ", marked for removal" : "");
	return 0;
}

static struct cr_shm *sysv_of(struct cr_dump_ctx *ctx, const struct cr_vma *v)
{
	struct cr_shm *s;

	if (!v->shmid || v->shmid > (uint32_t)ctx->nr_shm)
		return NULL;
	s = &ctx->shm[v->shmid - 1];
	return s->kind == SHMEM_KIND__SHMEM_SYSV ? s : NULL;
}

int sysvshm_check_attaches(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	const struct cr_vma *first = NULL, *prev = NULL;
	const struct cr_shm *fs = NULL;
	uint64_t covered = 0;

	for (int i = 0; i <= p->nr_vmas; i++) {
		const struct cr_vma *v = i < p->nr_vmas ? &p->vmas[i] : NULL;
		const struct cr_shm *s = v ? sysv_of(ctx, v) : NULL;

		/* does v continue the attach in progress? */
		if (first && (!s || v->shmid != first->shmid || v->s.start != prev->s.end ||
			      !v->s.pgoff || v->s.pgoff != covered)) {
			if (covered != fs->size) {
				pr_err("pid %d: System V shared memory segment %d is attached at "
				       "%lx, but only %lu of its %lu bytes are mapped there: an "
				       "attach partly unmapped or moved apart is not supported",
				       p->pid, fs->sysv_id, first->s.start, (unsigned long)covered,
				       (unsigned long)fs->size);
				return -EOPNOTSUPP;
			}
			first = NULL;
		}
		if (!s)
			continue;
		if (!first) {
			if (v->s.pgoff) {
				pr_err("pid %d: mapping %lx-%lx maps System V shared memory "
				       "segment "
				       "%d from offset %#lx: an attach partly unmapped or moved "
				       "apart is not supported",
				       p->pid, v->s.start, v->s.end, s->sysv_id,
				       (unsigned long)v->s.pgoff);
				return -EOPNOTSUPP;
			}
			first = v;
			fs = s;
			covered = 0;
		} else if ((v->s.vmflags & VMF_MAYWRITE) != (first->s.vmflags & VMF_MAYWRITE)) {
			pr_err("pid %d: the attach of System V shared memory segment %d at %lx is "
			       "read-only in part",
			       p->pid, s->sysv_id, first->s.start);
			return -EOPNOTSUPP;
		}
		covered += v->s.end - v->s.start;
		prev = v;
	}
	return 0;
}

int sysvshm_check_outside(struct cr_dump_ctx *ctx)
{
	for (int i = 0; i < ctx->nr_shm; i++) {
		const struct cr_shm *s = &ctx->shm[i];
		unsigned long ours = 0;
		struct shmid_ds ds;

		if (s->kind != SHMEM_KIND__SHMEM_SYSV)
			continue;
		/* the kernel counts mappings, a split attach twice */
		for (int k = 0; k < ctx->nr_procs; k++)
			for (int m = 0; m < ctx->procs[k]->nr_vmas; m++)
				ours += ctx->procs[k]->vmas[m].shmid == s->id;
		if (shmctl(s->sysv_id, IPC_STAT, &ds) < 0) {
			int ret = -errno;

			pr_perror("cannot read System V shared memory segment %d (IPC_STAT)",
				  s->sysv_id);
			return ret;
		}
		if (ds.shm_nattch > ours) {
			pr_err("System V shared memory segment %d is attached by processes outside "
			       "the dumped tree (%lu mappings, %lu of them in the tree): the "
			       "sharing cannot be restored",
			       s->sysv_id, (unsigned long)ds.shm_nattch, ours);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

void sysvshm_fill_entry(const struct cr_shm *s, ShmemEntry *e)
{
	e->has_file_size = e->has_mode = e->has_uid = e->has_gid = 1;
	e->file_size = s->file_size;
	e->mode = s->mode;
	e->uid = s->uid;
	e->gid = s->gid;
	e->has_sysv_id = e->has_sysv_key = e->has_sysv_cuid = e->has_sysv_cgid = 1;
	e->sysv_id = s->sysv_id;
	e->sysv_key = s->sysv_key;
	e->sysv_cuid = s->sysv_cuid;
	e->sysv_cgid = s->sysv_cgid;
	e->has_sysv_removed = e->has_sysv_locked = e->has_sysv_ctime = 1;
	e->sysv_removed = s->sysv_removed;
	e->sysv_locked = s->sysv_locked;
	e->sysv_ctime = s->sysv_ctime;
}

/* ------------------------------------------------------------- restore */

int sysvshm_validate(const ShmemEntry *e, size_t idx)
{
	if (!e->has_sysv_id || e->sysv_id < 0 || !e->has_file_size || !e->file_size ||
	    PAGE_ALIGN(e->file_size) != e->size || !e->has_mode || (e->mode & ~0777U) ||
	    !e->has_uid || !e->has_gid) {
		pr_err("image shmem.img is damaged: System V segment (object %zu) is invalid", idx);
		return -EINVAL;
	}
	return 0;
}

static int set_next_id(int id)
{
	char v[16];
	int n = snprintf(v, sizeof(v), "%d", id), ret = 0;
	int fd = proc_open(SHM_NEXT_REL, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, v, n) != n)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* the segment that holds id now is the one dumped, left behind by its tree
 * (whether anything still has it attached is checked apart) */
static bool same_segment(const ShmemEntry *e, const struct shmid_ds *ds)
{
	return !e->sysv_removed && !(ds->shm_perm.mode & SHM_DEST) &&
	       ds->shm_perm.__key == (e->has_sysv_key ? e->sysv_key : IPC_PRIVATE) &&
	       (uint64_t)ds->shm_segsz == e->file_size && e->has_sysv_cuid &&
	       ds->shm_perm.cuid == e->sysv_cuid && e->has_sysv_cgid &&
	       ds->shm_perm.cgid == e->sysv_cgid && e->has_sysv_ctime &&
	       (int64_t)ds->shm_ctime == e->sysv_ctime;
}

static int create_segment(const ShmemEntry *e)
{
	int id = e->sysv_id, key = e->has_sysv_key ? e->sysv_key : IPC_PRIVATE, got, ret;

	if (key != IPC_PRIVATE) {
		int other = shmget(key, 0, 0);

		if (other >= 0) {
			pr_err("System V shared memory segment %d cannot be restored: its key %#x "
			       "belongs to segment %d",
			       id, (unsigned)key, other);
			return -EEXIST;
		}
	}
	ret = set_next_id(id);
	if (ret) {
		pr_err("System V shared memory segment %d cannot be restored with its id: "
		       "cannot write %s (%s)%s",
		       id, SHM_NEXT_ID, strerror(-ret),
		       ret == -ENOENT ? "; the kernel lacks CONFIG_CHECKPOINT_RESTORE" : "");
		return ret;
	}
	got = shmget(key, e->file_size, IPC_CREAT | IPC_EXCL | (e->mode & 0777));
	if (got < 0) {
		ret = -errno;
		set_next_id(-1); /* unused: no later shmget may take it */
		pr_perror("cannot create System V shared memory segment %d (key %#x, %lu bytes)",
			  id, (unsigned)key, (unsigned long)e->file_size);
		return ret;
	}
	if (got != id) {
		shmctl(got, IPC_RMID, NULL);
		pr_err("System V shared memory segment %d cannot be restored: its id is taken "
		       "(the kernel gave %d)",
		       id, got);
		return -EEXIST;
	}
	return 0;
}

int sysvshm_create(const ShmemEntry *e, int *state, void **mapp)
{
	struct shmid_ds ds;
	int id = e->sysv_id, ret;
	void *map;

	*state = SYSV_NONE;
	if (!shmctl(id, IPC_STAT, &ds)) {
		if (same_segment(e, &ds) && ds.shm_nattch) {
			pr_err("System V shared memory segment %d cannot be restored: it is still "
			       "attached %lu times outside the restored tree",
			       id, (unsigned long)ds.shm_nattch);
			return -EBUSY;
		}
		if (!same_segment(e, &ds)) {
			pr_err("System V shared memory segment %d cannot be restored: its id is "
			       "taken by another segment (key %#x, %lu bytes, %lu attached)",
			       id, (unsigned)ds.shm_perm.__key, (unsigned long)ds.shm_segsz,
			       (unsigned long)ds.shm_nattch);
			return -EEXIST;
		}
		pr_info("System V shared memory segment %d outlived its tree: it is taken back",
			id);
		*state = SYSV_TAKEN;
	} else if (errno != EINVAL && errno != EIDRM) {
		ret = pr_errno("cannot look at System V shared memory segment %d", id);
		return ret;
	} else {
		ret = create_segment(e);
		if (ret)
			return ret;
		*state = SYSV_CREATED;
		if (shmctl(id, IPC_STAT, &ds))
			return pr_errno("cannot look at System V shared memory segment %d", id);
	}
	ds.shm_perm.uid = e->uid;
	ds.shm_perm.gid = e->gid;
	ds.shm_perm.mode = e->mode & 0777;
	if (shmctl(id, IPC_SET, &ds) ||
	    ((e->sysv_locked || (ds.shm_perm.mode & SHM_LOCKED)) &&
	     shmctl(id, e->sysv_locked ? SHM_LOCK : SHM_UNLOCK, NULL))) {
		ret = pr_errno(
			"cannot set owner, mode or lock of System V shared memory segment %d", id);
		return ret;
	}
	map = shmat(id, NULL, 0);
	if (map == (void *)-1)
		return pr_errno("cannot attach System V shared memory segment %d to fill it", id);
	/* what the image does not hold was never written: a segment taken
	 * back loses whatever was written into it since */
	if (*state == SYSV_TAKEN && madvise(map, e->size, MADV_REMOVE)) {
		ret = pr_errno("cannot clear System V shared memory segment %d", id);
		shmdt(map);
		return ret;
	}
	*mapp = map;
	return 0;
}

void sysvshm_detach(void *map)
{
	shmdt(map);
}

int sysvshm_commit(struct rshm *t)
{
	int ret = 0;

	for (size_t i = 0; i < t->n; i++) {
		const ShmemEntry *e = t->e[i];

		if (e->kind != SHMEM_KIND__SHMEM_SYSV || !e->sysv_removed)
			continue;
		if (shmctl(e->sysv_id, IPC_RMID, NULL)) {
			ret = pr_errno("cannot mark System V shared memory segment %d for removal",
				       e->sysv_id);
			break;
		}
	}
	t->sysv_committed = true;
	return ret;
}

void sysvshm_cleanup(struct rshm *t)
{
	if (t->sysv_committed || !t->sysv)
		return;
	for (size_t i = 0; i < t->n; i++)
		if (t->sysv[i] == SYSV_CREATED && shmctl(t->e[i]->sysv_id, IPC_RMID, NULL) &&
		    errno != EINVAL && errno != EIDRM)
			pr_perror("cannot remove System V shared memory segment %d",
				  t->e[i]->sysv_id);
}

static bool continues(const VmaEntry *prev, const VmaEntry *e)
{
	return prev->kind == VMA_KIND__VMA_ANON_SHARED && prev->shmid == e->shmid &&
	       prev->end == e->start && prev->pgoff + (prev->end - prev->start) == e->pgoff &&
	       prev->may_write == e->may_write;
}

int sysvshm_plan(pid_t pid, const struct rmm *mm, size_t i, const struct rshm *shm,
		 struct rst_vma *v)
{
	const VmaEntry *e = mm->vmas[i];
	const ShmemEntry *o;

	if (!e->has_shmid || !e->shmid || e->shmid > shm->n ||
	    shm->e[e->shmid - 1]->kind != SHMEM_KIND__SHMEM_SYSV)
		return 0;
	o = shm->e[e->shmid - 1];
	if (!e->pgoff) {
		/* the attach maps the whole segment: the mappings after this one
		 * must be the rest of it */
		uint64_t covered = e->end - e->start;

		for (size_t k = i + 1; k < mm->nr_vmas && mm->vmas[k]->pgoff &&
				       continues(mm->vmas[k - 1], mm->vmas[k]);
		     k++)
			covered += mm->vmas[k]->end - mm->vmas[k]->start;
		if (covered != o->size) {
			pr_err("image mm-%d.img is damaged: the attach of System V segment %d at "
			       "%lx maps %lu bytes of its %lu",
			       pid, o->sysv_id, (unsigned long)e->start, (unsigned long)covered,
			       (unsigned long)o->size);
			return -EINVAL;
		}
		v->flags |= RST_VMA_SYSV_ATTACH;
	} else {
		if (!i || !continues(mm->vmas[i - 1], e)) {
			pr_err("image mm-%d.img is damaged: mapping %lx-%lx of System V segment %d "
			       "belongs to no attach",
			       pid, (unsigned long)e->start, (unsigned long)e->end, o->sysv_id);
			return -EINVAL;
		}
		v->flags |= RST_VMA_SYSV_PART;
	}
	if (e->has_may_write && !e->may_write)
		v->flags |= RST_VMA_SYSV_RDONLY;
	v->shmid = o->sysv_id;
	v->fd = -1;
	v->pgoff = 0;
	return 1;
}
