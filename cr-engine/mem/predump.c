/* Dirty tracking for iterative dumps (--pre-dump, --prev).
 *
 * A pre-dump arms the tracking of writes while the tree is stopped, lets it
 * run, and copies its memory meanwhile; the dump that follows (--prev) asks
 * which pages were written since and copies only those, marking the others
 * in_parent.  A page counts as unchanged only if it is present now, was not
 * written since the arming and the parent images hold it; anything else
 * (a page the pre-dump could not read, a mapping replaced or moved, a
 * process that is not the one pre-dumped) is copied again.
 *
 * Two ways to know what was written:
 *  - soft-dirty (CONFIG_MEM_SOFT_DIRTY, our guest kernels): "4" into
 *    /proc/PID/clear_refs arms it, bit 55 of /proc/PID/pagemap tells;
 *  - asynchronous userfaultfd write-protection (kernels from 6.7 without
 *    soft-dirty, like the development host): a userfaultfd with
 *    UFFD_FEATURE_WP_ASYNC is created inside the process (injected
 *    syscalls) and its private mappings registered for write-protection;
 *    PAGEMAP_SCAN with PM_SCAN_WP_MATCHING write-protects the pages, and
 *    later reports PAGE_IS_WRITTEN.  In async mode a write to a protected
 *    page never stops the writer: the kernel lifts the protection and the
 *    write goes on, so the process never waits for us, not even when no
 *    dump follows.  The userfaultfd stays in the process (close-on-exec)
 *    between the two dumps; the dump closes it, which undoes the
 *    registration.  If the process closed it meanwhile, or it is not the
 *    one recorded, nothing is taken from the parent for this process.
 *
 * KUPDATE_DIRTY_TRACK=soft-dirty|uffd chooses (tests: the host has no
 * soft-dirty); default: soft-dirty where the kernel has it, else uffd.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "dump.h"
#include "image.h"
#include "images/inventory.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "log.h"
#include "predump.h"
#include "remote.h"
#include "sockets.h"
#include "util.h"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#include "pagescan.h"
/* UFFD_FEATURE_THREAD_ID changes nothing here (with asynchronous
 * write-protection alone no message is ever read): it only makes the set
 * of features one a process of its own would hardly ask for, so that a
 * dump can tell a pre-dump's leftover userfaultfd (track_leftover) */
#define TRACK_UFFD_FEATURES \
	(UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_THREAD_ID)

#define PM_PRESENT    (1ULL << 63)
#define PM_SWAPPED    (1ULL << 62)
#define PM_SOFT_DIRTY (1ULL << 55)

/* user addresses end below this (47 bits; PAGEMAP_SCAN stops at the last
 * mapping anyway) */
#define USER_END 0x7ffffffff000ULL

static bool have_soft_dirty(void)
{
	volatile char *p =
		mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	_cleanup_close_ int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t e = 0;

	if (p == MAP_FAILED)
		return false;
	p[0] = 1; /* a new page of a new mapping is soft-dirty, if the kernel tracks it */
	if (fd < 0 || pread(fd, &e, 8, ((uintptr_t)p / PAGE_SIZE) * 8) != 8)
		e = 0;
	munmap((void *)p, PAGE_SIZE);
	return (e & PM_PRESENT) && (e & PM_SOFT_DIRTY);
}

static int have_uffd_wp_async(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = TRACK_UFFD_FEATURES };
	_cleanup_close_ int fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api))
		return -errno;
	return 0;
}

int cr_uffd_wp_async(void)
{
	return have_uffd_wp_async();
}

int track_method(int *track)
{
	const char *env = getenv("KUPDATE_DIRTY_TRACK");
	bool sd = have_soft_dirty();
	int ret;

	if (env && !strcmp(env, "soft-dirty")) {
		if (!sd) {
			pr_err("pre-dump: KUPDATE_DIRTY_TRACK=soft-dirty, but this kernel has no "
			       "soft-dirty bits (CONFIG_MEM_SOFT_DIRTY)");
			return -EOPNOTSUPP;
		}
		*track = DIRTY_TRACK__TRACK_SOFT_DIRTY;
		return 0;
	}
	if (env && strcmp(env, "uffd")) {
		pr_err("pre-dump: KUPDATE_DIRTY_TRACK is '%s'; it can be soft-dirty or uffd", env);
		return -EINVAL;
	}
	if (sd && !env) {
		*track = DIRTY_TRACK__TRACK_SOFT_DIRTY;
		return 0;
	}
	ret = have_uffd_wp_async();
	if (ret) {
		pr_err("pre-dump: this kernel can track written pages neither with soft-dirty "
		       "bits nor with asynchronous userfaultfd write-protection (kernel 6.7+): "
		       "%s",
		       strerror(-ret));
		return -EOPNOTSUPP;
	}
	*track = DIRTY_TRACK__TRACK_UFFD_WP;
	return 0;
}

/* the userfaultfds the parent dump left, by inode: a process forked since
 * holds a copy, which goes too */
static int prev_uffds(struct cr_dump_ctx *ctx)
{
	_cleanup_close_ int dfd = fcntl(ctx->prev_dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	int ret = 0;

	if (!d)
		return -errno;
	dfd = -1;
	while (!ret && (de = readdir(d))) {
		struct img_reader r;
		ProtobufCMessage *m;
		uint64_t *n;

		if (strncmp(de->d_name, "pagemap-", 8))
			continue;
		ret = img_reader_open(&r, ctx->prev_dirfd, de->d_name, IMG_PAGEMAP);
		if (ret)
			break;
		ret = img_read(&r, &pagemap_head__descriptor, &m);
		img_reader_close(&r);
		if (ret <= 0) {
			pr_err("previous image %s is damaged", de->d_name);
			ret = ret ? ret : -EINVAL;
			break;
		}
		ret = 0;
		if (((PagemapHead *)m)->has_uffd_ino) {
			n = xrealloc_array(ctx->prev_uffd, ctx->nr_prev_uffd + 1, sizeof(*n));
			if (!n)
				ret = -ENOMEM;
			else {
				ctx->prev_uffd = n;
				n[ctx->nr_prev_uffd++] = ((PagemapHead *)m)->uffd_ino;
			}
		}
		pagemap_head__free_unpacked((PagemapHead *)m, NULL);
	}
	closedir(d);
	return ret;
}

int prev_open(struct cr_dump_ctx *ctx)
{
	const char *dir = ctx->opts->prev_dir;
	struct img_reader r;
	ProtobufCMessage *m;
	char real[PATH_MAX];
	int ret;

	if (!realpath(dir, real))
		return pr_errno("--prev %s", dir);
	ctx->prev_dirfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ctx->prev_dirfd < 0)
		return pr_errno("cannot open the previous image directory %s", real);
	ret = img_reader_open(&r, ctx->prev_dirfd, "inventory.img", IMG_INVENTORY);
	if (ret) {
		pr_err("--prev %s: not an image directory", real);
		return ret;
	}
	ret = img_read(&r, &inventory_entry__descriptor, &m);
	img_reader_close(&r);
	if (ret <= 0) {
		pr_err("--prev %s: its inventory.img is damaged", real);
		return ret ? ret : -EINVAL;
	}
	inventory_entry__free_unpacked((InventoryEntry *)m, NULL);
	ret = prev_uffds(ctx);
	if (ret)
		return ret;
	/* beside the new directory (an update cycle keeps both in one
	 * directory, renamed when it is published): a relative link */
	{
		char me[PATH_MAX], *slash_me, *slash_real;

		if (realpath(ctx->opts->imgdir, me) && (slash_me = strrchr(me, '/')) &&
		    (slash_real = strrchr(real, '/')) && slash_me - me == slash_real - real &&
		    !strncmp(me, real, slash_me - me) && strlen(slash_real) + 3 < sizeof(real)) {
			memmove(real + 2, slash_real, strlen(slash_real) + 1);
			real[0] = real[1] = '.';
		}
	}
	if (!ctx->opts->check_only && symlinkat(real, ctx->dirfd, "parent"))
		return pr_errno("cannot link %s/parent to %s", ctx->opts->imgdir, real);
	return 0;
}

/* the file of fd in pid, if it is a userfaultfd: its inode */
static int uffd_ino(pid_t pid, int fd, uint64_t *ino)
{
	char path[64], link[64];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -errno;
	link[n] = 0;
	if (strcmp(link, "anon_inode:[userfaultfd]"))
		return -ENOENT;
	if (stat(path, &st))
		return -errno;
	*ino = st.st_ino;
	return 0;
}

static int remote_close(struct cr_proc *p, int fd)
{
	long args[6] = { fd }, res;
	int ret = remote_syscall(p->threads[0].tid, p->syscall_ip, &p->threads[0].regs, SYS_close,
				 args, &res);

	if (!ret && res < 0)
		ret = res;
	if (ret)
		pr_err("pid %d: cannot close the userfaultfd %d of the dirty tracking: %s", p->pid,
		       fd, strerror(-ret));
	return ret;
}

/* copies of the parent dump's userfaultfds in p (forked since) */
static int close_inherited(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	int ret = 0;

	if (!ctx->nr_prev_uffd)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", p->pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		uint64_t ino;
		int fd = atoi(de->d_name);

		if (de->d_name[0] == '.' || uffd_ino(p->pid, fd, &ino))
			continue;
		for (int i = 0; i < ctx->nr_prev_uffd; i++)
			if (ctx->prev_uffd[i] == ino) {
				pr_debug(
					"pid %d: closing fd %d, a copy of a pre-dump's userfaultfd",
					p->pid, fd);
				ret = remote_close(p, fd);
				break;
			}
	}
	closedir(d);
	return ret;
}

int push_range(struct cr_range **v, int *n, int *cap, uint64_t start, uint64_t end)
{
	if (*n && (*v)[*n - 1].end == start) {
		(*v)[*n - 1].end = end;
		return 0;
	}
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 64;
		struct cr_range *nv = xrealloc_array(*v, c, sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[*n].start = start;
	(*v)[*n].end = end;
	(*n)++;
	return 0;
}

/* uffd-wp: the ranges present and not written since the arming */
static int uffd_clean(struct cr_proc *p, int pm_fd, struct cr_range **out, int *nr)
{
	struct page_region regs[512];
	struct pm_scan_arg arg;
	uint64_t start = 0;
	int cap = 0, ret;

	*out = NULL;
	*nr = 0;
	while (start < USER_END) {
		long n;

		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = start;
		arg.end = USER_END;
		arg.vec = (uintptr_t)regs;
		arg.vec_len = ARRAY_SIZE(regs);
		arg.category_inverted = PAGE_IS_WRITTEN;
		arg.category_mask = PAGE_IS_WRITTEN;
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		n = ioctl(pm_fd, PAGEMAP_SCAN, &arg);
		if (n < 0)
			return pr_errno("pid %d: PAGEMAP_SCAN for written pages", p->pid);
		for (long i = 0; i < n; i++) {
			ret = push_range(out, nr, &cap, regs[i].start, regs[i].end);
			if (ret)
				return ret;
		}
		if (arg.walk_end <= start)
			break;
		start = arg.walk_end;
	}
	return 0;
}

/* soft-dirty: which pages of the parent's runs are present and clean */
static int soft_dirty_clean(struct cr_proc *p, int pm_fd, PagemapEntry **runs, size_t nr_runs,
			    struct cr_range **out, int *nr)
{
	enum { CHUNK = 8192 };
	_cleanup_free_ uint64_t *buf = malloc(CHUNK * 8);
	int cap = 0, ret;

	*out = NULL;
	*nr = 0;
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < nr_runs; i++) {
		uint64_t a = runs[i]->vaddr, end = a + runs[i]->nr_pages * PAGE_SIZE;

		while (a < end) {
			uint64_t n = MIN((uint64_t)CHUNK, (end - a) / PAGE_SIZE);

			ret = pread_all(pm_fd, buf, n * 8, (a / PAGE_SIZE) * 8);
			if (ret) {
				pr_err("pid %d: cannot read pagemap at %lx: %s", p->pid,
				       (unsigned long)a, strerror(-ret));
				return ret;
			}
			for (uint64_t k = 0; k < n; k++) {
				uint64_t e = buf[k];

				if ((e & (PM_PRESENT | PM_SWAPPED)) && !(e & PM_SOFT_DIRTY)) {
					ret = push_range(out, nr, &cap, a + k * PAGE_SIZE,
							 a + (k + 1) * PAGE_SIZE);
					if (ret)
						return ret;
				}
			}
			a += n * PAGE_SIZE;
		}
	}
	return 0;
}

/* a ∩ (union of the runs) */
static int intersect(const struct cr_range *a, int na, PagemapEntry **runs, size_t nr_runs,
		     struct cr_range **out, int *nr)
{
	int cap = 0, ret;
	size_t j = 0;

	*out = NULL;
	*nr = 0;
	for (int i = 0; i < na; i++) {
		while (j < nr_runs && runs[j]->vaddr + runs[j]->nr_pages * PAGE_SIZE <= a[i].start)
			j++;
		for (size_t k = j; k < nr_runs && runs[k]->vaddr < a[i].end; k++) {
			uint64_t s = MAX(a[i].start, runs[k]->vaddr),
				 e = MIN(a[i].end, runs[k]->vaddr + runs[k]->nr_pages * PAGE_SIZE);

			/* its parent process's pages: that dump holds no data */
			if (s < e && !runs[k]->cow_parent) {
				ret = push_range(out, nr, &cap, s, e);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

int prev_collect(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_reader r;
	ProtobufCMessage *m;
	PagemapHead *h = NULL;
	PagemapEntry **runs = NULL;
	size_t nr_runs = 0;
	_cleanup_free_ struct cr_range *clean = NULL;
	int nr_clean = 0;
	_cleanup_close_ int pm_fd = -1;
	char name[64];
	int ret;

	if (ctx->prev_dirfd < 0 || p->state == TASK_STATE__TASK_ZOMBIE)
		return 0;
	snprintf(name, sizeof(name), "pagemap-%d.img", p->pid);
	if (faccessat(ctx->prev_dirfd, name, F_OK, 0))
		return close_inherited(ctx, p); /* not in the parent: copied in full */
	ret = img_reader_open(&r, ctx->prev_dirfd, name, IMG_PAGEMAP);
	if (ret)
		return ret;
	ret = img_read(&r, &pagemap_head__descriptor, &m);
	if (ret <= 0) {
		pr_err("previous image %s is damaged", name);
		img_reader_close(&r);
		return ret ? ret : -EINVAL;
	}
	h = (PagemapHead *)m;
	runs = calloc(r.nr ? r.nr : 1, sizeof(*runs));
	if (!runs) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &pagemap_entry__descriptor, &m)) > 0)
		runs[nr_runs++] = (PagemapEntry *)m;
	if (ret < 0)
		goto out;
	ret = 0;
	if (!h->has_start_time || h->start_time != p->stat.starttime) {
		pr_info("pid %d is not the process of the previous dump: copied in full", p->pid);
		goto out;
	}
	snprintf(name, sizeof(name), "/proc/%d/pagemap", p->pid);
	pm_fd = open(name, O_RDONLY | O_CLOEXEC);
	if (pm_fd < 0) {
		ret = pr_errno("pid %d: cannot open %s", p->pid, name);
		goto out;
	}
	switch (h->has_tracking ? h->tracking : DIRTY_TRACK__TRACK_NONE) {
	case DIRTY_TRACK__TRACK_SOFT_DIRTY:
		ret = soft_dirty_clean(p, pm_fd, runs, nr_runs, &clean, &nr_clean);
		break;
	case DIRTY_TRACK__TRACK_UFFD_WP: {
		uint64_t ino;

		if (!h->has_uffd_fd || uffd_ino(p->pid, h->uffd_fd, &ino) || ino != h->uffd_ino) {
			pr_info("pid %d: the userfaultfd of the pre-dump is gone: copied in full",
				p->pid);
			break;
		}
		ret = uffd_clean(p, pm_fd, &clean, &nr_clean);
		/* disarmed whatever happened: the process goes on without it.
		 * The last close of a userfaultfd undoes the registration and
		 * the write-protection of every page (100 ms a GiB): a dump
		 * keeps a copy so that this happens once the tree is released,
		 * not while it is stopped.  A pre-dump arms a new one right
		 * after, which the old registration would prevent. */
		if (!ctx->opts->pre_dump) {
			int held = sk_dup(p, h->uffd_fd);
			int *n = held >= 0 ? xrealloc_array(ctx->held_uffd, ctx->nr_held_uffd + 1,
							    sizeof(*n))
					   : NULL;

			if (n) {
				ctx->held_uffd = n;
				n[ctx->nr_held_uffd++] = held;
			} else if (held >= 0) {
				close(held);
			}
		}
		if (remote_close(p, h->uffd_fd) && !ret)
			ret = -EIO;
		break;
	}
	default:
		pr_info("pid %d: the previous dump tracks no writes: copied in full", p->pid);
		break;
	}
	if (!ret && nr_clean) {
		/* uffd: clean ranges of the whole address space; soft-dirty
		 * ones are within the parent's runs already */
		ret = intersect(clean, nr_clean, runs, nr_runs, &p->inpar, &p->nr_inpar);
	}
	if (!ret) {
		uint64_t n = 0;

		for (int i = 0; i < p->nr_inpar; i++)
			n += (p->inpar[i].end - p->inpar[i].start) / PAGE_SIZE;
		pr_debug("pid %d: %lu pages unchanged since the previous dump", p->pid,
			 (unsigned long)n);
	}
out:
	if (!ret)
		ret = close_inherited(ctx, p);
	img_reader_close(&r);
	for (size_t i = 0; i < nr_runs; i++)
		pagemap_entry__free_unpacked(runs[i], NULL);
	free(runs);
	if (h)
		pagemap_head__free_unpacked(h, NULL);
	return ret;
}

static int arm_uffd(struct cr_proc *p)
{
	struct cr_thread *t = &p->threads[0];
	struct uffdio_api api = { .api = UFFD_API, .features = TRACK_UFFD_FEATURES };
	long args[6] = { O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY }, res;
	_cleanup_close_ int pm_fd = -1;
	char path[64];
	int fd, ret;

	ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_userfaultfd, args, &res);
	if (!ret && res < 0)
		ret = res;
	if (ret) {
		pr_err("pid %d: cannot create a userfaultfd in it: %s", p->pid, strerror(-ret));
		return ret;
	}
	fd = res;
	p->uffd_fd = fd;
	memset(args, 0, sizeof(args));
	args[0] = fd;
	args[1] = UFFDIO_API;
	ret = remote_syscall_buf(t->tid, p->syscall_ip, &t->regs, SYS_ioctl, args, 2, &api,
				 sizeof(api), &res);
	if (!ret && res < 0)
		ret = res;
	if (ret) {
		pr_err("pid %d: UFFDIO_API (asynchronous write-protection): %s", p->pid,
		       strerror(-ret));
		return ret;
	}
	ret = uffd_ino(p->pid, fd, &p->uffd_ino);
	if (ret)
		return ret;
	/* every private mapping whose pages a dump saves */
	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];
		struct uffdio_register reg = { .range = { v->s.start, v->s.end - v->s.start },
					       .mode = UFFDIO_REGISTER_MODE_WP };

		if ((v->kind != VMA_KIND__VMA_ANON_PRIVATE &&
		     v->kind != VMA_KIND__VMA_FILE_PRIVATE) ||
		    (v->s.vmflags & VMF_DROPPABLE))
			continue;
		memset(args, 0, sizeof(args));
		args[0] = fd;
		args[1] = UFFDIO_REGISTER;
		ret = remote_syscall_buf(t->tid, p->syscall_ip, &t->regs, SYS_ioctl, args, 2, &reg,
					 sizeof(reg), &res);
		if (ret)
			return ret;
		/* a mapping that cannot be registered counts as written */
		if (res < 0)
			pr_debug("pid %d: cannot register %lx-%lx for write-protection: %s", p->pid,
				 v->s.start, v->s.end, strerror(-res));
	}
	/* write-protect what is there: written pages lose it again */
	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	pm_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pm_fd < 0)
		return pr_errno("pid %d: cannot open %s", p->pid, path);
	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];
		struct pm_scan_arg arg;
		uint64_t start = v->s.start;

		if ((v->kind != VMA_KIND__VMA_ANON_PRIVATE &&
		     v->kind != VMA_KIND__VMA_FILE_PRIVATE) ||
		    (v->s.vmflags & VMF_DROPPABLE))
			continue;
		while (start < v->s.end) {
			memset(&arg, 0, sizeof(arg));
			arg.size = sizeof(arg);
			arg.flags = PM_SCAN_WP_MATCHING;
			arg.start = start;
			arg.end = v->s.end;
			arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
			if (ioctl(pm_fd, PAGEMAP_SCAN, &arg) < 0)
				return pr_errno(
					"pid %d: cannot write-protect %lx-%lx (PAGEMAP_SCAN)",
					p->pid, v->s.start, v->s.end);
			if (arg.walk_end <= start)
				break;
			start = arg.walk_end;
		}
	}
	return 0;
}

int track_arm(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	char path[64];
	int fd, ret = 0;

	if (p->state == TASK_STATE__TASK_ZOMBIE)
		return 0;
	if (ctx->track == DIRTY_TRACK__TRACK_UFFD_WP) {
		ret = arm_uffd(p);
		if (ret)
			track_disarm(ctx, p);
		return ret;
	}
	snprintf(path, sizeof(path), "/proc/%d/clear_refs", p->pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "4", 1) != 1)
		ret = pr_errno("pid %d: cannot clear its soft-dirty bits (%s)", p->pid, path);
	if (fd >= 0)
		close(fd);
	return ret;
}

void track_disarm(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	(void)ctx;
	if (p->uffd_fd >= 0) {
		remote_close(p, p->uffd_fd);
		p->uffd_fd = -1;
	}
}

int track_leftover(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd)
{
	_cleanup_free_ char *info = NULL;
	unsigned long long api = 0, features = 0;
	unsigned flags = 0;
	const char *f, *a;

	(void)ctx;
	if (read_proc(&info, NULL, "/proc/%d/fdinfo/%d", p->pid, fd))
		return 0;
	f = strstr(info, "flags:");
	a = strstr(info, "API:");
	if (!f || !a || sscanf(f, "flags: %o", &flags) != 1 ||
	    sscanf(a, "API: %llx:%llx", &api, &features) != 2)
		return 0;
	/* created by arm_uffd: exactly these flags and features (the kernel
	 * adds its own "initialized" bit 31) */
	if (api != UFFD_API || (features & 0x7fffffffULL) != TRACK_UFFD_FEATURES ||
	    (flags & (O_CLOEXEC | O_NONBLOCK)) != (O_CLOEXEC | O_NONBLOCK))
		return 0;
	pr_info("pid %d: fd %d is the userfaultfd of a pre-dump no dump followed: closed", p->pid,
		fd);
	return remote_close(p, fd) ? -EIO : 1;
}
