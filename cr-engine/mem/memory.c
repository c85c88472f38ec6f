/* Memory: mappings, mm fields, auxv, vDSO and page contents.
 *
 * Dump: the mappings come from smaps (VmFlags, Rss, Anonymous), files are
 * identified through map_files, the pages to save are those present or
 * swapped and not the zero page (for private file mappings: only the
 * copied-on-write ones), found with the PAGEMAP_SCAN ioctl where the kernel
 * has it and /proc/PID/pagemap otherwise.  Page data is copied with
 * process_vm_readv (/proc/PID/mem for mappings without PROT_READ, and for
 * processes that may share pages with others: pages_may_share) into
 * pages-PID.img, raw and page aligned, with a crc32c per run.  Pages a
 * child shares copy-on-write with its parent (the same frame at the same
 * address) are the parent's: the child's pagemap says so (cow_parent) and
 * holds no data for them.
 *
 * Restore: mem_plan() turns the images into the restorer's list of
 * mappings and page runs (restorer/restorer.c maps them).  A mapping whose
 * pages a process shares with its parent or a child is premapped: made and
 * filled before the process forks its children (mem_premap, in the
 * process), at an address of its own; a child that inherits it clears what
 * is not its parent's and writes its own pages; each restorer then moves
 * it into place (RST_VMA_PREMAP). */
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "crc32c.h"
#include "dump.h"
#include "files.h"
#include "ghost.h"
#include "image.h"
#include "images/mm.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "log.h"
#include "memory.h"
#include "pages.h"
#include "remote.h"
#include "restore.h"
#include "shmem.h"
#include "sysvshm.h"
#include "vdso.h"
#include "restorer/restorer.h"
#include "util.h"

#include "pagescan.h"

#define PM_PRESENT  (1ULL << 63)
#define PM_SWAPPED  (1ULL << 62)
#define PM_FILE	    (1ULL << 61)
#define PM_PFN_MASK ((1ULL << 55) - 1)

/* ---------------------------------------------------------------- dump */

static uint64_t pfn_of(void *addr)
{
	_cleanup_close_ int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t e;

	if (fd < 0 || pread(fd, &e, 8, ((uintptr_t)addr / PAGE_SIZE) * 8) != 8)
		return 0;
	return (e & PM_PRESENT) ? (e & PM_PFN_MASK) : 0;
}

/* The zero page's pfn, to skip pages never written (needs CAP_SYS_ADMIN to
 * see pfns; without it nothing is skipped, which is only slower). */
void mem_find_zero_pfns(struct cr_dump_ctx *ctx)
{
	volatile char *p = mmap(NULL, PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	(void)p[0];
	ctx->zero_pfn = pfn_of((void *)p);
	munmap((void *)p, PAGE_SIZE);
}

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
static bool deleted_path(const char *path, const struct stat *st)
{
	struct stat named;

	if (!ends_with(path, " (deleted)"))
		return false;
	return st->st_nlink == 0 || stat(path, &named) || named.st_dev != st->st_dev ||
	       named.st_ino != st->st_ino;
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
			return sysvshm_dump_vma(ctx, p, v);
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
		if (deleted_path(path, &st)) {
			char what[96];
			int ret;

			path[strlen(path) - 10] = 0;
			snprintf(what, sizeof(what), "pid %d: mapping %lx-%lx maps", p->pid,
				 v->s.start, v->s.end);
			ret = ghost_save(ctx, mf, what, path, &st, true, &v->ghost_id);
			if (ret)
				return ret;
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
			if (deleted_path(buf, &st) && strip_deleted(buf)) {
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
				*slash = 0;
				ret = stat(buf, &pst)	     ? -errno
				      : S_ISDIR(pst.st_mode) ? 0
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

/* Runs never span two mappings: the restorer fills one mapping at a time. */
static int add_run(struct cr_proc *p, const struct cr_vma *v, uint64_t vaddr, uint64_t nr)
{
	struct cr_pagerun *last = p->nr_runs ? &p->runs[p->nr_runs - 1] : NULL;

	if (last && last->vaddr >= v->s.start &&
	    last->vaddr + last->nr_pages * PAGE_SIZE == vaddr) {
		last->nr_pages += nr;
	} else {
		struct cr_pagerun *n = xrealloc_array(p->runs, p->nr_runs + 1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->runs = n;
		n[p->nr_runs].vaddr = vaddr;
		n[p->nr_runs].nr_pages = nr;
		n[p->nr_runs].crc = 0;
		n[p->nr_runs].in_parent = false;
		n[p->nr_runs].cow = false;
		p->nr_runs++;
	}
	p->nr_pages += nr;
	return 0;
}

/* PAGEMAP_SCAN: the kernel reports the matching ranges directly. */
static int scan_vma_ioctl(struct cr_proc *p, int pm_fd, struct cr_vma *v)
{
	struct page_region regs[512];
	struct pm_scan_arg arg;
	uint64_t start = v->s.start;
	bool file = v->kind == VMA_KIND__VMA_FILE_PRIVATE;

	while (start < v->s.end) {
		long n;

		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = start;
		arg.end = v->s.end;
		arg.vec = (uintptr_t)regs;
		arg.vec_len = ARRAY_SIZE(regs);
		arg.category_inverted = PAGE_IS_PFNZERO | (file ? PAGE_IS_FILE : 0);
		arg.category_mask = PAGE_IS_PFNZERO | (file ? PAGE_IS_FILE : 0);
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		n = ioctl(pm_fd, PAGEMAP_SCAN, &arg);
		if (n < 0)
			return -errno;
		for (long i = 0; i < n; i++) {
			int ret = add_run(p, v, regs[i].start,
					  (regs[i].end - regs[i].start) / PAGE_SIZE);
			if (ret)
				return ret;
		}
		if (arg.walk_end <= start)
			break;
		start = arg.walk_end;
	}
	return 0;
}

/* /proc/PID/pagemap: 8 bytes a page. */
static int scan_vma_read(struct cr_dump_ctx *ctx, struct cr_proc *p, int pm_fd, struct cr_vma *v)
{
	enum { CHUNK = 8192 };
	uint64_t buf[CHUNK];
	bool file = v->kind == VMA_KIND__VMA_FILE_PRIVATE;

	for (uint64_t a = v->s.start; a < v->s.end;) {
		uint64_t n = MIN((uint64_t)CHUNK, (v->s.end - a) / PAGE_SIZE);
		int ret = pread_all(pm_fd, buf, n * 8, (a / PAGE_SIZE) * 8);

		if (ret) {
			pr_err("pid %d: cannot read pagemap at %lx: %s", p->pid, (unsigned long)a,
			       strerror(-ret));
			return ret;
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t e = buf[i];
			bool want = (e & PM_SWAPPED) ||
				    ((e & PM_PRESENT) && !(file && (e & PM_FILE)) &&
				     !(ctx->zero_pfn && (e & PM_PFN_MASK) == ctx->zero_pfn));
			if (want) {
				ret = add_run(p, v, a + i * PAGE_SIZE, 1);
				if (ret)
					return ret;
			}
		}
		a += n * PAGE_SIZE;
	}
	return 0;
}

/* Split the runs along the sorted ranges rg: the pages there are marked
 * in_parent (their data is left to the parent images) or, cow, shared with
 * the parent process; the others keep what they were. */
static int mark_runs(struct cr_proc *p, const struct cr_range *rg, int nrg, bool cow)
{
	struct cr_pagerun *out = NULL;
	int n = 0, cap = 0, k = 0;

	if (!nrg)
		return 0;
	p->nr_pages = 0;
	for (int i = 0; i < p->nr_runs; i++) {
		uint64_t a = p->runs[i].vaddr, end = a + p->runs[i].nr_pages * PAGE_SIZE;

		while (a < end) {
			uint64_t b;
			bool in;

			while (k < nrg && rg[k].end <= a)
				k++;
			if (k < nrg && rg[k].start <= a) {
				in = true;
				b = MIN(end, rg[k].end);
			} else {
				in = false;
				b = k < nrg ? MIN(end, rg[k].start) : end;
			}
			if (n == cap) {
				struct cr_pagerun *nr;

				cap = cap ? cap * 2 : 64;
				nr = xrealloc_array(out, cap, sizeof(*nr));
				if (!nr) {
					free(out);
					return -ENOMEM;
				}
				out = nr;
			}
			out[n] = p->runs[i];
			out[n].vaddr = a;
			out[n].nr_pages = (b - a) / PAGE_SIZE;
			out[n].crc = 0;
			if (in && cow) {
				out[n].cow = true;
				out[n].in_parent = false;
			} else if (in) {
				out[n].in_parent = true;
			}
			if (!run_nodata(&out[n]))
				p->nr_pages += out[n].nr_pages;
			n++;
			a = b;
		}
	}
	free(p->runs);
	p->runs = out;
	p->nr_runs = n;
	return 0;
}

/* Can pages of v (p's) be its parent's pv, kept shared at restore?  Both
 * private anonymous, v within pv, neither a stack that grows (it cannot be
 * moved into place) nor droppable. */
static bool cow_candidate(const struct cr_vma *v, const struct cr_vma *pv)
{
	unsigned no = VMF_GROWSDOWN | VMF_DROPPABLE;

	return v->kind == VMA_KIND__VMA_ANON_PRIVATE && pv &&
	       pv->kind == VMA_KIND__VMA_ANON_PRIVATE && !(v->s.vmflags & no) &&
	       !(pv->s.vmflags & no) && v->s.start >= pv->s.start && v->s.end <= pv->s.end &&
	       v->s.rss_kb > 0;
}

/* The pages p still shares copy-on-write with its parent: present in both
 * at the same address with the same frame (pagemap; pfns need
 * CAP_SYS_ADMIN, without which none is found).  A frame seen in both at
 * once holds the same data for both: the parent's dump saves it, and the
 * restore lets p inherit it (premaps), so a prefork server's workers do not
 * come back with a copy each. */
static int find_cow(struct cr_dump_ctx *ctx, struct cr_proc *p, struct cr_range **out, int *nr)
{
	enum { CHUNK = 4096 };
	_cleanup_free_ uint64_t *mine = NULL, *theirs = NULL;
	_cleanup_close_ int fd = -1, pfd = -1;
	struct cr_proc *pp = p->parent;
	char path[64];
	int cap = 0;

	*out = NULL;
	*nr = 0;
	if (!pp || pp->state == TASK_STATE__TASK_ZOMBIE || !ctx->zero_pfn ||
	    getenv("KUPDATE_NO_COW"))
		return 0;
	mine = malloc(CHUNK * 8);
	theirs = malloc(CHUNK * 8);
	if (!mine || !theirs)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pp->pid);
	pfd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pfd < 0) {
		int ret = -errno;

		pr_perror("pid %d: cannot open the pagemaps of it and its parent %d", p->pid,
			  pp->pid);
		return ret;
	}
	for (int i = 0; i < p->nr_vmas; i++) {
		const struct cr_vma *v = &p->vmas[i];

		if (!cow_candidate(v, mem_vma_at(pp, v->s.start)))
			continue;
		for (uint64_t a = v->s.start; a < v->s.end;) {
			uint64_t n = MIN((uint64_t)CHUNK, (v->s.end - a) / PAGE_SIZE);
			int ret = pread_all(fd, mine, n * 8, (a / PAGE_SIZE) * 8);

			if (!ret)
				ret = pread_all(pfd, theirs, n * 8, (a / PAGE_SIZE) * 8);
			if (ret) {
				pr_err("pid %d: cannot read the pagemaps at %lx: %s", p->pid,
				       (unsigned long)a, strerror(-ret));
				return ret;
			}
			for (uint64_t k = 0; k < n; k++) {
				uint64_t f = mine[k] & PM_PFN_MASK;

				if (!(mine[k] & PM_PRESENT) || !(theirs[k] & PM_PRESENT) || !f ||
				    f == ctx->zero_pfn || f != (theirs[k] & PM_PFN_MASK))
					continue;
				ret = push_range(out, nr, &cap, a + k * PAGE_SIZE,
						 a + (k + 1) * PAGE_SIZE);
				if (ret)
					return ret;
			}
			a += n * PAGE_SIZE;
		}
	}
	return 0;
}

static int open_mem(struct cr_proc *p, int *pm_fd)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	*pm_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*pm_fd < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot open %s", p->pid, path);
		return ret;
	}
	if (p->mem_fd >= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (p->mem_fd < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot open %s", p->pid, path);
		return ret;
	}
	return 0;
}

int mem_scan_pages(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_close_ int pm_fd = -1;
	int ret;

	ret = open_mem(p, &pm_fd);
	if (ret)
		return ret;
	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];

		if (v->kind != VMA_KIND__VMA_ANON_PRIVATE && v->kind != VMA_KIND__VMA_FILE_PRIVATE)
			continue;
		if (v->s.rss_kb + v->s.swap_kb == 0)
			continue;
		if (v->kind == VMA_KIND__VMA_FILE_PRIVATE && v->s.anon_kb + v->s.swap_kb == 0)
			continue;
		ret = -ENOTTY;
		if (ctx->have_pagemap_scan != 0 && !getenv("KUPDATE_NO_PAGEMAP_SCAN")) {
			ret = scan_vma_ioctl(p, pm_fd, v);
			if (ret == -ENOTTY || ret == -EINVAL)
				ctx->have_pagemap_scan = 0;
			else if (!ret)
				ctx->have_pagemap_scan = 1;
		}
		if (ret == -ENOTTY || ret == -EINVAL)
			ret = scan_vma_read(ctx, p, pm_fd, v);
		if (ret) {
			pr_err("pid %d: cannot scan pages of %lx-%lx: %s", p->pid, v->s.start,
			       v->s.end, strerror(-ret));
			return ret;
		}
	}
	return mark_runs(p, p->inpar, p->nr_inpar, false);
}

int dump_pages(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ struct cr_range *cow = NULL;
	int ret = mem_scan_pages(ctx, p), nr_cow = 0;

	if (!ret)
		ret = find_cow(ctx, p, &cow, &nr_cow);
	if (!ret)
		ret = mark_runs(p, cow, nr_cow, true);
	if (ret)
		return ret;
	for (int i = 0; i < p->nr_runs; i++)
		if (p->runs[i].cow)
			p->cow_pages += p->runs[i].nr_pages;
	if (p->cow_pages)
		pr_debug("pid %d: %lu pages shared copy-on-write with its parent %d", p->pid,
			 (unsigned long)p->cow_pages, p->parent->pid);
	ctx->cow_pages += p->cow_pages;
	ret = mem_write_pages(ctx, p);
	ctx->total_pages += p->nr_pages;
	ctx->zero_pages += p->zero_pages;
	return ret;
}

/* Pre-dump: the process runs while its pages are copied.  A page it unmaps
 * meanwhile cannot be read: it is left out (the dump that follows copies
 * whatever is there then), and the runs are cut around it; so are pages
 * of zeros in private anonymous memory (pages_emit). */
int mem_write_predump(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	enum { BUF = 512 << 10 };
	_cleanup_free_ unsigned char *buf = NULL;
	struct pages_out o = { .fd = -1, .crc = !ctx->opts->no_page_crc };
	unsigned char hdr[PAGES_DATA_OFFSET];
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "pages-%d.img", p->pid);
	o.fd = openat(ctx->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (o.fd < 0) {
		ret = -errno;
		pr_perror("cannot create image %s", name);
		return ret;
	}
	buf = malloc(BUF);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	p->nr_page_files = 1; /* written as it is read, by one thread */
	for (int i = 0; i < p->nr_runs; i++) {
		struct cr_pagerun *r = &p->runs[i];
		uint64_t left = r->nr_pages * PAGE_SIZE, a = r->vaddr;
		const struct cr_vma *v = mem_vma_at(p, r->vaddr);

		o.open = false;
		if (run_nodata(r)) {
			ret = pages_push_run(&o.runs, &o.nr, &o.cap, r);
			if (ret)
				goto out;
			continue;
		}
		while (left) {
			uint64_t chunk = MIN(left, (uint64_t)BUF), len = 0, step;
			struct iovec l = { buf, chunk }, rv = { (void *)a, chunk };
			ssize_t k = pages_may_share(p) ? pread(p->mem_fd, buf, chunk, a)
						       : process_vm_readv(p->pid, &l, 1, &rv, 1, 0);

			if (k > 0)
				len = (uint64_t)k & ~(PAGE_SIZE - 1);
			/* the rest page by page through /proc/PID/mem, which
			 * reads unreadable mappings too, up to a page gone */
			while (len < chunk &&
			       pread(p->mem_fd, buf + len, PAGE_SIZE, a + len) == PAGE_SIZE)
				len += PAGE_SIZE;
			if (len) {
				ret = pages_emit(&o, a, buf, len, pages_zeros_skippable(v));
				if (ret)
					goto werr;
			}
			step = len;
			if (len < chunk) {
				pr_debug("pid %d: page %lx went away during the pre-dump", p->pid,
					 (unsigned long)(a + len));
				step += PAGE_SIZE;
				o.open = false;
			}
			a += step;
			left -= step;
		}
	}
	mem_pages_header(hdr, p->pid, 0, o.written);
	ret = pwrite_all(o.fd, hdr, sizeof(hdr), 0);
	if (ret)
		goto werr;
	ret = close(o.fd) ? -errno : 0;
	o.fd = -1;
	if (ret)
		goto werr;
	free(p->runs);
	p->runs = o.runs;
	o.runs = NULL;
	p->nr_runs = o.nr;
	p->nr_pages = o.written;
	p->zero_pages = o.zero_pages;
	ctx->total_pages += o.written;
	ctx->zero_pages += o.zero_pages;
	return write_pagemap(ctx, p);
werr:
	pr_err("cannot write image %s: %s", name, strerror(-ret));
out:
	if (o.fd >= 0)
		close(o.fd);
	free(o.runs);
	return ret;
}

/* vDSO symbols: offsets of the functions, to redirect them on a kernel
 * whose vDSO differs (vdso.c). */
static int vdso_symbols(struct cr_proc *p, VdsoSymbol ***out, size_t *nr)
{
	struct vdso_sym *syms;
	VdsoSymbol **v;
	size_t n;

	*out = NULL;
	*nr = 0;
	if (vdso_parse(p->vdso_image, p->vdso_len, &syms, &n)) {
		pr_warn("pid %d: the vDSO is not an ELF image this kupdate understands", p->pid);
		return 0;
	}
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free(syms);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = xzalloc(sizeof(**v));
		if (!v[i]) {
			for (size_t k = 0; k < i; k++) {
				free(v[k]->name);
				free(v[k]);
			}
			free(v);
			free(syms);
			return -ENOMEM;
		}
		vdso_symbol__init(v[i]);
		v[i]->name = xstrdup(syms[i].name);
		v[i]->offset = syms[i].offset;
	}
	free(syms);
	*out = v;
	*nr = n;
	return 0;
}

int write_mm(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_writer w;
	MmCore mm = MM_CORE__INIT;
	VdsoSymbol **syms = NULL;
	size_t nsyms = 0;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "mm-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_MM);
	if (ret)
		return ret;
	mm.start_code = p->stat.start_code;
	mm.end_code = p->stat.end_code;
	mm.start_data = p->stat.start_data;
	mm.end_data = p->stat.end_data;
	mm.start_brk = p->stat.start_brk;
	mm.brk = p->brk;
	mm.start_stack = p->stat.start_stack;
	mm.arg_start = p->stat.arg_start;
	mm.arg_end = p->stat.arg_end;
	mm.env_start = p->stat.env_start;
	mm.env_end = p->stat.env_end;
	mm.n_auxv = p->nr_auxv;
	mm.auxv = p->auxv;
	if (p->vdso_image) {
		mm.has_vdso_image = 1;
		mm.vdso_image.data = p->vdso_image;
		mm.vdso_image.len = p->vdso_len;
		ret = vdso_symbols(p, &syms, &nsyms);
		if (ret) {
			img_writer_abort(&w);
			return ret;
		}
		mm.vdso_symbols = syms;
		mm.n_vdso_symbols = nsyms;
	}
	img_write(&w, &mm.base);
	for (size_t i = 0; i < nsyms; i++) {
		free(syms[i]->name);
		free(syms[i]);
	}
	free(syms);

	for (int i = 0; i < p->nr_vmas; i++) {
		struct cr_vma *v = &p->vmas[i];
		VmaEntry e = VMA_ENTRY__INIT;

		e.start = v->s.start;
		e.end = v->s.end;
		e.prot = v->s.prot;
		e.kind = v->kind;
		if (v->kind == VMA_KIND__VMA_FILE_PRIVATE || v->kind == VMA_KIND__VMA_FILE_SHARED) {
			e.has_pgoff = e.has_ino = e.has_file_size = e.has_mtime_ns = 1;
			e.pgoff = v->s.pgoff;
			e.path = v->s.path;
			e.ino = v->ino;
			e.file_size = v->file_size;
			e.mtime_ns = v->mtime_ns;
			e.has_may_write = 1;
			e.may_write = !!(v->s.vmflags & VMF_MAYWRITE);
			e.has_open_rw = 1;
			e.open_rw = v->open_rw;
			if (v->ghost_id) {
				e.has_ghost_id = 1;
				e.ghost_id = v->ghost_id;
			}
		}
		if (v->s.vmflags & VMF_GROWSDOWN) {
			e.has_growsdown = 1;
			e.growsdown = 1;
		}
		if (v->s.vmflags & VMF_LOCKED) {
			e.has_locked = 1;
			e.locked = 1;
		}
		if (v->s.vmflags & VMF_DROPPABLE) {
			e.has_droppable = 1;
			e.droppable = 1;
		}
		if (v->s.vmflags & VMF_NORESERVE) {
			e.has_noreserve = 1;
			e.noreserve = 1;
		}
		if (v->madv) {
			e.has_madv = 1;
			e.madv = v->madv;
		}
		e.name = v->name;
		if (v->shmid) {
			e.has_shmid = 1;
			e.shmid = v->shmid;
			e.has_pgoff = 1;
			e.pgoff = v->s.pgoff;
			e.has_may_write = 1;
			e.may_write = !!(v->s.vmflags & VMF_MAYWRITE);
		}
		if (v->special)
			e.special = (char *)v->special;
		img_write(&w, &e.base);
	}
	ret = img_writer_close(&w);
	if (ret)
		return ret;

	return write_pagemap(ctx, p);
}

int write_pagemap(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	PagemapHead h = PAGEMAP_HEAD__INIT;
	struct img_writer w;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "pagemap-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_PAGEMAP);
	if (ret)
		return ret;
	h.nr_pages = p->nr_pages;
	h.crc_valid = !ctx->opts->no_page_crc;
	h.has_start_time = 1;
	h.start_time = p->stat.starttime;
	if (ctx->opts->pre_dump) {
		h.has_tracking = 1;
		h.tracking = ctx->track;
		if (p->uffd_fd >= 0) {
			h.has_uffd_fd = h.has_uffd_ino = 1;
			h.uffd_fd = p->uffd_fd;
			h.uffd_ino = p->uffd_ino;
		}
	}
	if (p->nr_page_files > 1) {
		h.has_nr_files = 1;
		h.nr_files = (uint32_t)p->nr_page_files;
	}
	img_write(&w, &h.base);
	for (int i = 0; i < p->nr_runs; i++) {
		PagemapEntry e = PAGEMAP_ENTRY__INIT;

		e.vaddr = p->runs[i].vaddr;
		e.nr_pages = p->runs[i].nr_pages;
		if (p->runs[i].in_parent) {
			e.has_in_parent = 1;
			e.in_parent = 1;
		} else if (p->runs[i].cow) {
			e.has_cow_parent = 1;
			e.cow_parent = 1;
		} else {
			e.has_crc32c = 1;
			e.crc32c = p->runs[i].crc;
			if (p->nr_page_files > 1 && p->runs[i].file) {
				e.has_file = 1;
				e.file = p->runs[i].file;
			}
		}
		img_write(&w, &e.base);
	}
	return img_writer_close(&w);
}

/* ------------------------------------------------------------- restore */

#define TASK_SIZE_MAX (1ULL << 56)

void mem_free(struct rmm *mm)
{
	if (mm->core)
		mm_core__free_unpacked(mm->core, NULL);
	for (size_t i = 0; i < mm->nr_vmas; i++)
		vma_entry__free_unpacked(mm->vmas[i], NULL);
	free(mm->vmas);
	if (mm->head)
		pagemap_head__free_unpacked(mm->head, NULL);
	for (size_t i = 0; i < mm->nr_runs; i++)
		pagemap_entry__free_unpacked(mm->runs[i], NULL);
	free(mm->runs);
	free(mm->premap);
	memset(mm, 0, sizeof(*mm));
}

static bool page_aligned(uint64_t x)
{
	return !(x & (PAGE_SIZE - 1));
}

static int validate_mm(pid_t pid, struct rmm *mm)
{
	const char *img = "mm";
	uint64_t total = 0;
	size_t v = 0;

	if (mm->core->n_auxv % 2 || mm->core->n_auxv > 128) {
		pr_err("image %s-%d.img is damaged: auxv of %zu words", img, pid, mm->core->n_auxv);
		return -EINVAL;
	}
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		VmaEntry *e = mm->vmas[i];

		if (e->start >= e->end || !page_aligned(e->start) || !page_aligned(e->end) ||
		    e->end > TASK_SIZE_MAX || (i && e->start < mm->vmas[i - 1]->end)) {
			pr_err("image mm-%d.img is damaged: mapping %zu (%lx-%lx) is out of order "
			       "or "
			       "misaligned",
			       pid, i, (unsigned long)e->start, (unsigned long)e->end);
			return -EINVAL;
		}
		switch (e->kind) {
		case VMA_KIND__VMA_ANON_PRIVATE:
		case VMA_KIND__VMA_VDSO:
		case VMA_KIND__VMA_VVAR:
			break;
		case VMA_KIND__VMA_ANON_SHARED:
			if (!e->has_shmid || !page_aligned(e->pgoff)) {
				pr_err("image mm-%d.img is damaged: shared mapping %lx-%lx without "
				       "an "
				       "object",
				       pid, (unsigned long)e->start, (unsigned long)e->end);
				return -EINVAL;
			}
			break;
		case VMA_KIND__VMA_FILE_PRIVATE:
		case VMA_KIND__VMA_FILE_SHARED:
			if (!e->path || e->path[0] != '/' || !page_aligned(e->pgoff)) {
				pr_err("image mm-%d.img is damaged: file mapping %lx-%lx without a "
				       "valid path or offset",
				       pid, (unsigned long)e->start, (unsigned long)e->end);
				return -EINVAL;
			}
			break;
		default:
			pr_err("image mm-%d.img: mapping %lx-%lx has kind %d, which this kupdate "
			       "cannot restore",
			       pid, (unsigned long)e->start, (unsigned long)e->end, e->kind);
			return -EINVAL;
		}
		if (e->prot & ~7U) {
			pr_err("image mm-%d.img is damaged: mapping %lx has protection %#x", pid,
			       (unsigned long)e->start, e->prot);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < mm->nr_runs; i++) {
		PagemapEntry *r = mm->runs[i];
		uint64_t end = r->vaddr + r->nr_pages * PAGE_SIZE;

		if (!page_aligned(r->vaddr) || !r->nr_pages || r->nr_pages > (1ULL << 36) ||
		    end <= r->vaddr ||
		    (i &&
		     r->vaddr < mm->runs[i - 1]->vaddr + mm->runs[i - 1]->nr_pages * PAGE_SIZE)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx is out of order or "
			       "invalid",
			       pid, i, (unsigned long)r->vaddr);
			return -EINVAL;
		}
		while (v < mm->nr_vmas && mm->vmas[v]->end <= r->vaddr)
			v++;
		if (v == mm->nr_vmas || r->vaddr < mm->vmas[v]->start || end > mm->vmas[v]->end ||
		    (mm->vmas[v]->kind != VMA_KIND__VMA_ANON_PRIVATE &&
		     mm->vmas[v]->kind != VMA_KIND__VMA_FILE_PRIVATE)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx (+%lu pages) lies "
			       "outside any private mapping",
			       pid, i, (unsigned long)r->vaddr, (unsigned long)r->nr_pages);
			return -EINVAL;
		}
		if (r->cow_parent &&
		    (r->in_parent || mm->vmas[v]->kind != VMA_KIND__VMA_ANON_PRIVATE ||
		     mm->vmas[v]->growsdown || mm->vmas[v]->droppable)) {
			pr_err("image pagemap-%d.img is damaged: run %zu at %lx is said to be the "
			       "parent's pages, in a mapping that cannot have them",
			       pid, i, (unsigned long)r->vaddr);
			return -EINVAL;
		}
		if (!mem_run_nodata(r))
			total += r->nr_pages;
	}
	if (total != mm->head->nr_pages) {
		pr_err("image pagemap-%d.img is damaged: runs hold %lu pages, header says %lu", pid,
		       (unsigned long)total, (unsigned long)mm->head->nr_pages);
		return -EINVAL;
	}
	return 0;
}

int mem_load(int dirfd, pid_t pid, struct rmm *mm)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	int ret;

	memset(mm, 0, sizeof(*mm));
	snprintf(name, sizeof(name), "mm-%d.img", pid);
	ret = img_reader_open(&r, dirfd, name, IMG_MM);
	if (ret)
		return ret;
	ret = img_read(&r, &mm_core__descriptor, &m);
	if (ret == 0) {
		pr_err("image %s is damaged: it is empty", name);
		ret = -EINVAL;
	}
	if (ret < 0)
		goto out;
	mm->core = (MmCore *)m;
	mm->vmas = calloc(r.nr, sizeof(*mm->vmas));
	if (!mm->vmas) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &vma_entry__descriptor, &m)) > 0)
		mm->vmas[mm->nr_vmas++] = (VmaEntry *)m;
	if (ret < 0)
		goto out;
	img_reader_close(&r);

	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = img_reader_open(&r, dirfd, name, IMG_PAGEMAP);
	if (ret)
		goto out;
	ret = img_read(&r, &pagemap_head__descriptor, &m);
	if (ret == 0) {
		pr_err("image %s is damaged: it is empty", name);
		ret = -EINVAL;
	}
	if (ret < 0)
		goto out;
	mm->head = (PagemapHead *)m;
	mm->runs = calloc(r.nr, sizeof(*mm->runs));
	if (!mm->runs) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &pagemap_entry__descriptor, &m)) > 0)
		mm->runs[mm->nr_runs++] = (PagemapEntry *)m;
	if (ret < 0)
		goto out;
	mm->premap = calloc(mm->nr_vmas ? mm->nr_vmas : 1, sizeof(*mm->premap));
	if (!mm->premap) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < mm->nr_vmas; i++)
		mm->premap[i].pvma = -1;
	ret = validate_mm(pid, mm);
out:
	img_reader_close(&r);
	if (ret)
		mem_free(mm);
	return ret;
}

struct map_file {
	const char *path;
	uint32_t ghost_id;
	int flags;
	int fd;
};

/* A deleted file: kupdate made it again (ghost.c) and holds it read-only;
 * opened again through /proc/self/fd with the mapping's mode. */
static int open_ghost_mapped(pid_t pid, const VmaEntry *e, const struct rfiles *files, int flags)
{
	const struct rghost *g = files_ghost(files, e->ghost_id);
	char self[64];
	int fd;

	if (!g || g->map_fd < 0) {
		pr_err("pid %d: mapping %lx of the deleted file %s: the file was not made again",
		       pid, (unsigned long)e->start, e->path);
		return -EINVAL;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", g->map_fd);
	fd = open(self, flags | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;

		pr_perror("pid %d: cannot open the deleted file %s mapped at %lx again", pid,
			  e->path, (unsigned long)e->start);
		return ret;
	}
	return fd;
}

static int open_mapped(pid_t pid, const VmaEntry *e, const struct rfiles *files,
		       struct map_file **cache, size_t *n, struct rst_builder *b)
{
	int flags = ((e->kind == VMA_KIND__VMA_FILE_SHARED && e->may_write) || e->open_rw)
			    ? O_RDWR
			    : O_RDONLY;
	uint32_t gid = e->has_ghost_id ? e->ghost_id : 0;
	struct map_file *nc;
	struct stat st;
	int fd, ret;

	for (size_t i = 0; i < *n; i++)
		if ((*cache)[i].flags == flags && (*cache)[i].ghost_id == gid &&
		    !strcmp((*cache)[i].path, e->path))
			return (*cache)[i].fd;
	fd = gid ? open_ghost_mapped(pid, e, files, flags) : open(e->path, flags | O_CLOEXEC);
	if (gid && fd < 0)
		return fd;
	if (fd < 0) {
		ret = -errno;
		pr_perror("pid %d: cannot open %s mapped at %lx", pid, e->path,
			  (unsigned long)e->start);
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* a deleted file is kupdate's own copy: nothing can have changed it */
	if (!gid &&
	    ((e->has_ino && st.st_ino != e->ino) ||
	     (e->kind == VMA_KIND__VMA_FILE_PRIVATE &&
	      ((e->has_file_size && (uint64_t)st.st_size != e->file_size) ||
	       (e->has_mtime_ns &&
		(int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec != e->mtime_ns))))) {
		pr_err("pid %d: %s (mapped at %lx) changed since the dump; its process cannot be "
		       "restored on top of a different file",
		       pid, e->path, (unsigned long)e->start);
		close(fd);
		return -ESTALE;
	}
	fd = builder_place_fd(b, fd);
	if (fd < 0)
		return fd;
	nc = realloc(*cache, (*n + 1) * sizeof(**cache));
	if (!nc)
		return -ENOMEM;
	*cache = nc;
	nc[*n].path = e->path;
	nc[*n].ghost_id = gid;
	nc[*n].flags = flags;
	nc[*n].fd = fd;
	(*n)++;
	return fd;
}

/* This process's own fd to a shared memory object (one per object). */
static int shm_fd_for(pid_t pid, const VmaEntry *e, const struct rshm *shm, int *cache,
		      struct rst_builder *b)
{
	uint64_t size;
	int fd = shmem_fd(shm, e->shmid, &size);

	if (fd < 0 || e->pgoff + (e->end - e->start) > size) {
		pr_err("pid %d: mapping %lx-%lx refers to shared memory object %u, which the "
		       "images do not hold",
		       pid, (unsigned long)e->start, (unsigned long)e->end, e->shmid);
		return -EINVAL;
	}
	if (cache[e->shmid - 1] >= 0)
		return cache[e->shmid - 1];
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	fd = builder_place_fd(b, fd);
	if (fd >= 0)
		cache[e->shmid - 1] = fd;
	return fd;
}

/* Layered images: a dump made with --prev refers to its parent directory
 * (the `parent` symlink) for the pages that did not change, and a parent
 * may itself have one.  Each layer's pagemap is read once, its page image
 * becomes one more helper fd of the restorer. */
#define MAX_LAYERS PAGES_MAX_LAYERS

struct layer {
	int dirfd; /* -1: not loaded */
	int pages_fd[PAGES_MAX_FILES];
	PagemapHead *head;
	PagemapEntry **runs;
	uint64_t *off; /* data offset of each run without in_parent */
	size_t nr;
};

static void layers_free(struct layer **lp)
{
	struct layer *l = *lp;

	if (!l)
		return;
	for (int i = 0; i < MAX_LAYERS; i++) {
		if (l[i].dirfd >= 0)
			close(l[i].dirfd);
		if (l[i].head)
			pagemap_head__free_unpacked(l[i].head, NULL);
		for (size_t k = 0; k < l[i].nr; k++)
			pagemap_entry__free_unpacked(l[i].runs[k], NULL);
		free(l[i].runs);
		free(l[i].off);
	}
	free(l);
}

static int grow_runs(struct rst_builder *b, size_t *cap)
{
	struct rst_run *n;

	if (b->nr_runs < *cap)
		return 0;
	n = xrealloc_array(b->runs, *cap * 2, sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + *cap, 0, *cap * sizeof(*n));
	b->runs = n;
	*cap *= 2;
	return 0;
}

/* layers[depth] is the parent of the directory child_fd */
static int load_layer(int child_fd, pid_t pid, struct layer *l, int depth, struct rst_builder *b)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	uint64_t total = 0;
	int ret;

	l->dirfd = openat(child_fd, "parent", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0) {
		ret = -errno;
		pr_perror("pid %d: its pagemap refers to a parent image directory, which cannot "
			  "be opened (layer %d)",
			  pid, depth + 1);
		return ret;
	}
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = img_reader_open(&r, l->dirfd, name, IMG_PAGEMAP);
	if (ret)
		return ret;
	ret = img_read(&r, &pagemap_head__descriptor, &m);
	if (ret == 0) {
		pr_err("parent image %s (layer %d) is damaged: it is empty", name, depth + 1);
		ret = -EINVAL;
	}
	if (ret < 0)
		goto out;
	l->head = (PagemapHead *)m;
	l->runs = calloc(r.nr ? r.nr : 1, sizeof(*l->runs));
	l->off = calloc(r.nr ? r.nr : 1, sizeof(*l->off));
	if (!l->runs || !l->off) {
		ret = -ENOMEM;
		goto out;
	}
	while ((ret = img_read(&r, &pagemap_entry__descriptor, &m)) > 0) {
		PagemapEntry *e = (PagemapEntry *)m;
		uint64_t end = e->vaddr + e->nr_pages * PAGE_SIZE;

		l->runs[l->nr] = e;
		if (!page_aligned(e->vaddr) || !e->nr_pages || e->nr_pages > (1ULL << 36) ||
		    end <= e->vaddr || end > TASK_SIZE_MAX ||
		    (l->nr && e->vaddr < l->runs[l->nr - 1]->vaddr +
						 l->runs[l->nr - 1]->nr_pages * PAGE_SIZE)) {
			pr_err("parent image %s (layer %d) is damaged: run %zu at %lx is out of "
			       "order or invalid",
			       name, depth + 1, l->nr, (unsigned long)e->vaddr);
			l->nr++;
			ret = -EINVAL;
			goto out;
		}
		if (!mem_run_nodata(e))
			total += e->nr_pages;
		l->nr++;
	}
	if (ret < 0)
		goto out;
	if (total != l->head->nr_pages) {
		pr_err("parent image %s (layer %d) is damaged: runs hold %lu pages, header says "
		       "%lu",
		       name, depth + 1, (unsigned long)total, (unsigned long)l->head->nr_pages);
		ret = -EINVAL;
		goto out;
	}
	ret = mem_open_page_files(l->dirfd, pid, name, l->head, l->runs, l->nr, l->off, l->pages_fd,
				  b);
out:
	img_reader_close(&r);
	return ret;
}

/* Pages [vaddr, +nr) are in the parent of the layer whose directory is
 * child_fd: add restorer runs reading them from where they are. */
static int resolve_parent(int child_fd, pid_t pid, struct layer *layers, int depth, uint64_t vaddr,
			  uint64_t nr, struct rst_builder *b, size_t *cap)
{
	struct layer *l = &layers[depth];
	uint64_t a = vaddr, end = vaddr + nr * PAGE_SIZE;
	size_t lo = 0, hi;
	int ret;

	if (depth >= MAX_LAYERS) {
		pr_err("pid %d: more than %d layers of images (a loop of parent links?)", pid,
		       MAX_LAYERS);
		return -ELOOP;
	}
	if (l->dirfd < 0) {
		ret = load_layer(child_fd, pid, l, depth, b);
		if (ret)
			return ret;
	}
	/* the first run ending after a */
	hi = l->nr;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l->runs[mid]->vaddr + l->runs[mid]->nr_pages * PAGE_SIZE <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; a < end; i++) {
		const PagemapEntry *e = i < l->nr ? l->runs[i] : NULL;
		uint64_t e_end, piece_end;

		if (!e || e->vaddr > a) {
			pr_err("pid %d: page %lx is said to be in the parent images (layer %d), "
			       "which do not hold it",
			       pid, (unsigned long)a, depth + 1);
			return -EINVAL;
		}
		e_end = e->vaddr + e->nr_pages * PAGE_SIZE;
		piece_end = MIN(end, e_end);
		if (e->cow_parent) {
			pr_err("pid %d: page %lx is said to be in the parent images (layer %d), "
			       "which hold it as its parent process's",
			       pid, (unsigned long)a, depth + 1);
			return -EINVAL;
		}
		if (e->in_parent) {
			ret = resolve_parent(l->dirfd, pid, layers, depth + 1, a,
					     (piece_end - a) / PAGE_SIZE, b, cap);
		} else {
			struct rst_run *r;

			ret = grow_runs(b, cap);
			if (!ret) {
				r = &b->runs[b->nr_runs++];
				r->vaddr = a;
				r->nr_pages = (piece_end - a) / PAGE_SIZE;
				r->file_off = l->off[i] + (a - e->vaddr);
				r->fd = l->pages_fd[mem_run_file(e)];
				r->crc = e->crc32c;
				/* the crc covers the parent's whole run */
				if (a != e->vaddr || piece_end != e_end || !l->head->crc_valid)
					r->flags |= RST_RUN_NOCRC;
			}
		}
		if (ret)
			return ret;
		a = piece_end;
	}
	return 0;
}

/* Where the data of a process's pages is: its own layer's page files, and
 * the layers below (in_parent runs) */
struct run_src {
	int dirfd;
	pid_t pid;
	const struct rmm *mm;
	const uint64_t *off; /* each run's data offset in its page file */
	const int *pages_fd;
	struct layer *layers;
	size_t cap; /* of b->runs */
};

/* The runs of s->mm from *run on that start before end, added to b with
 * where their data is; the parent's pages (cow_parent) are left out: the
 * process inherits them. */
static int plan_runs(struct run_src *s, size_t *run, uint64_t end, struct rst_builder *b)
{
	for (; *run < s->mm->nr_runs && s->mm->runs[*run]->vaddr < end; (*run)++) {
		const PagemapEntry *pe = s->mm->runs[*run];
		struct rst_run *r;
		int ret;

		if (pe->cow_parent)
			continue;
		if (pe->in_parent) {
			ret = resolve_parent(s->dirfd, s->pid, s->layers, 0, pe->vaddr,
					     pe->nr_pages, b, &s->cap);
			if (ret)
				return ret;
			continue;
		}
		ret = grow_runs(b, &s->cap);
		if (ret)
			return ret;
		r = &b->runs[b->nr_runs++];
		r->vaddr = pe->vaddr;
		r->nr_pages = pe->nr_pages;
		r->file_off = s->off[*run];
		r->crc = pe->crc32c;
		r->fd = s->pages_fd[mem_run_file(pe)];
	}
	return 0;
}

static struct layer *layers_new(void)
{
	struct layer *l = calloc(MAX_LAYERS, sizeof(*l));

	for (int i = 0; l && i < MAX_LAYERS; i++) {
		l[i].dirfd = -1;
		for (int f = 0; f < PAGES_MAX_FILES; f++)
			l[i].pages_fd[f] = -1;
	}
	return l;
}

int mem_plan(int dirfd, pid_t pid, const struct rmm *mm, const struct rshm *shm,
	     const struct rfiles *files, struct rst_builder *b, bool verify)
{
	_cleanup_free_ int *shm_cache = malloc(sizeof(int) * (shm->n ? shm->n : 1));
	_cleanup_free_ struct map_file *cache = NULL;
	_cleanup_free_ uint64_t *off = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*off));
	size_t ncache = 0, run = 0;
	int pages_fd[PAGES_MAX_FILES], ret;
	char name[64];

	__attribute__((cleanup(layers_free))) struct layer *layers = layers_new();
	struct run_src src = {
		dirfd, pid, mm, off, pages_fd, layers, mm->nr_runs ? mm->nr_runs : 1
	};

	if (!shm_cache || !off || !layers)
		return -ENOMEM;
	for (size_t i = 0; i < shm->n; i++)
		shm_cache[i] = -1;
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = mem_open_page_files(dirfd, pid, name, mm->head, mm->runs, mm->nr_runs, off, pages_fd,
				  b);
	if (ret)
		return ret;
	b->args.pages_fd = pages_fd[0];
	/* the restorer checks with the SSE4.2 instruction (1), or without (2) */
	b->args.verify_crc = verify && mm->head->crc_valid ? (crc32c_hw() ? 1 : 2) : 0;
	b->args.populate = !getenv("KUPDATE_NO_POPULATE");
	/* mappings of 32 MiB and more: kupdate fills half (on another CPU) */
	b->args.fill_helper =
		sysconf(_SC_NPROCESSORS_ONLN) > 1 && !getenv("KUPDATE_NO_FILL_HELPER") ? 8192 : 0;

	/* one more for a vDSO proxy (vdso.c) */
	b->vmas = calloc(mm->nr_vmas + 1, sizeof(*b->vmas));
	b->runs = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*b->runs));
	if (!b->vmas || !b->runs)
		return -ENOMEM;
	for (size_t i = 0; i < mm->nr_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		struct rst_vma *v;

		if (e->kind == VMA_KIND__VMA_VDSO || e->kind == VMA_KIND__VMA_VVAR)
			continue;
		v = &b->vmas[b->nr_vmas++];
		v->start = e->start;
		v->end = e->end;
		v->prot = e->prot;
		v->fd = -1;
		v->mmap_flags = (e->kind == VMA_KIND__VMA_FILE_SHARED ||
				 e->kind == VMA_KIND__VMA_ANON_SHARED)
					? MAP_SHARED
					: MAP_PRIVATE;
		if (e->growsdown)
			v->mmap_flags |= MAP_GROWSDOWN;
		if (e->noreserve)
			v->mmap_flags |= MAP_NORESERVE;
		if (e->droppable)
			v->mmap_flags = (v->mmap_flags & ~MAP_PRIVATE) | 0x08 /* MAP_DROPPABLE */;
		if (e->kind == VMA_KIND__VMA_FILE_PRIVATE || e->kind == VMA_KIND__VMA_FILE_SHARED) {
			ret = open_mapped(pid, e, files, &cache, &ncache, b);
			if (ret < 0)
				return ret;
			v->fd = ret;
			v->pgoff = e->pgoff;
		} else if (e->kind == VMA_KIND__VMA_ANON_SHARED) {
			ret = sysvshm_plan(pid, mm, i, shm, v);
			if (ret < 0)
				return ret;
			if (!ret) {
				ret = shm_fd_for(pid, e, shm, shm_cache, b);
				if (ret < 0)
					return ret;
				v->fd = ret;
				v->pgoff = e->pgoff;
			}
		}
		v->madv = e->has_madv ? e->madv : 0;
		if (e->locked)
			v->flags |= RST_VMA_LOCKED;
		if (e->name) {
			ret = builder_add_string(b, e->name, &v->name_off);
			if (ret)
				return ret;
		}
		v->first_run = b->nr_runs;
		if (mm->premap[i].at) {
			/* made and filled already (mem_premap) */
			v->flags |= RST_VMA_PREMAP;
			v->premap = mm->premap[i].at;
			while (run < mm->nr_runs && mm->runs[run]->vaddr < e->end)
				run++;
			continue;
		}
		ret = plan_runs(&src, &run, e->end, b);
		if (ret)
			return ret;
		v->nr_runs = b->nr_runs - v->first_run;
	}

	b->args.start_code = mm->core->start_code;
	b->args.end_code = mm->core->end_code;
	b->args.start_data = mm->core->start_data;
	b->args.end_data = mm->core->end_data;
	b->args.start_brk = mm->core->start_brk;
	b->args.brk = mm->core->brk;
	b->args.start_stack = mm->core->start_stack;
	b->args.arg_start = mm->core->arg_start;
	b->args.arg_end = mm->core->arg_end;
	b->args.env_start = mm->core->env_start;
	b->args.env_end = mm->core->env_end;
	return 0;
}

/* ------------------------------------------- restore: copy-on-write sharing */

/* the mapping of mm that holds [start, end), or -1 */
static int vma_holding(const struct rmm *mm, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < mm->nr_vmas; i++)
		if (mm->vmas[i]->start <= start && end <= mm->vmas[i]->end)
			return (int)i;
	return -1;
}

int mem_link_cow(pid_t pid, struct rmm *mm, pid_t ppid, struct rmm *parent)
{
	size_t v = 0;

	for (size_t i = 0; i < mm->nr_runs; i++) {
		const PagemapEntry *r = mm->runs[i];
		const VmaEntry *e;
		int pv;

		if (!r->cow_parent)
			continue;
		while (mm->vmas[v]->end <= r->vaddr) /* validate_mm: within one */
			v++;
		if (mm->premap[v].want)
			continue;
		e = mm->vmas[v];
		pv = parent ? vma_holding(parent, e->start, e->end) : -1;
		if (pv < 0 || parent->vmas[pv]->kind != VMA_KIND__VMA_ANON_PRIVATE ||
		    parent->vmas[pv]->growsdown || parent->vmas[pv]->droppable) {
			pr_err("image pagemap-%d.img is damaged: its pages at %lx are said to be "
			       "its parent's, and its parent%s has no mapping that can hold them",
			       pid, (unsigned long)r->vaddr, parent ? "" : " (not in the images)");
			return -EINVAL;
		}
		mm->premap[v].want = true;
		mm->premap[v].pvma = pv;
		parent->premap[pv].want = true;
		pr_debug("pid %d: %lx-%lx inherits its parent %d's pages", pid,
			 (unsigned long)e->start, (unsigned long)e->end, ppid);
	}
	return 0;
}

uint64_t mem_premap_park_len(const struct rmm *mm)
{
	uint64_t len = 0;

	for (size_t i = 0; i < mm->nr_vmas; i++) {
		uint64_t l = mm->vmas[i]->end - mm->vmas[i]->start;

		if (mm->premap[i].at)
			len += l + (l >= RST_HUGE ? RST_HUGE : 0);
	}
	return len;
}

/* A new private anonymous area for e, at an address with e's offset in a
 * huge page. */
static long premap_new(const VmaEntry *e)
{
	uint64_t len = e->end - e->start, slack = len >= RST_HUGE ? RST_HUGE : 0, a, lead;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (e->noreserve ? MAP_NORESERVE : 0);
	void *p = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, flags, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	a = (uintptr_t)p;
	lead = slack ? (e->start - a) & (RST_HUGE - 1) : 0;
	if (lead)
		munmap(p, lead);
	if (slack - lead)
		munmap((char *)p + lead + len, slack - lead);
	return (long)(a + lead);
}

/* Fill [run) of a premapped mapping of e that is at `at` now. */
static int premap_fill(pid_t pid, const VmaEntry *e, uint64_t at, const struct rst_run *r,
		       bool verify)
{
	unsigned char *dst = (unsigned char *)(uintptr_t)(at + (r->vaddr - e->start));
	uint64_t len = r->nr_pages * PAGE_SIZE;
	int ret = pread_all(r->fd, dst, len, r->file_off);

	if (ret) {
		pr_err("pid %d: cannot read its pages at %lx (+%lu) from the images: %s", pid,
		       (unsigned long)r->vaddr, (unsigned long)r->nr_pages, strerror(-ret));
		return ret;
	}
	if (verify && !(r->flags & RST_RUN_NOCRC) && crc32c(0, dst, len) != r->crc) {
		pr_err("pid %d: its pages at %lx (+%lu) do not match their checksum in the "
		       "images",
		       pid, (unsigned long)r->vaddr, (unsigned long)r->nr_pages);
		return -EBADMSG;
	}
	return 0;
}

static int premap_zero(pid_t pid, const VmaEntry *e, uint64_t from, uint64_t to, uint64_t at)
{
	if (to > from &&
	    madvise((void *)(uintptr_t)(at + (from - e->start)), to - from, MADV_DONTNEED)) {
		int ret = -errno;

		pr_perror("pid %d: cannot clear its pages at %lx-%lx", pid, (unsigned long)from,
			  (unsigned long)to);
		return ret;
	}
	return 0;
}

/* Of the parent's pages inherited for e (at `at` now), clear those that
 * are not the parent's: the pages this process had not, or had of its own
 * (premap_fill writes those after). */
static int premap_zero_own(pid_t pid, const struct rmm *mm, const VmaEntry *e, uint64_t at)
{
	uint64_t a = e->start;
	int ret;

	/* validate_mm: a run lies within one mapping */
	for (size_t i = 0; i < mm->nr_runs && mm->runs[i]->vaddr < e->end; i++) {
		const PagemapEntry *r = mm->runs[i];

		if (!r->cow_parent || r->vaddr < e->start)
			continue;
		ret = premap_zero(pid, e, a, r->vaddr, at);
		if (ret)
			return ret;
		a = r->vaddr + r->nr_pages * PAGE_SIZE;
	}
	return premap_zero(pid, e, a, e->end, at);
}

static void layers_close_pages(struct layer *l, const PagemapHead *head, const int *fds)
{
	for (uint32_t f = 0; f < (head->has_nr_files ? head->nr_files : 1); f++)
		if (fds[f] >= 0)
			close(fds[f]);
	for (int i = 0; l && i < MAX_LAYERS; i++)
		for (int f = 0; f < PAGES_MAX_FILES; f++)
			if (l[i].pages_fd[f] >= 0)
				close(l[i].pages_fd[f]);
}

int mem_premap(int dirfd, pid_t pid, struct rmm *mm, const struct rmm *parent, bool verify)
{
	_cleanup_free_ uint64_t *off = NULL;
	__attribute__((cleanup(layers_free))) struct layer *layers = NULL;
	struct rst_builder b;
	int pages_fd[PAGES_MAX_FILES], ret = 0;
	size_t i, run = 0;
	struct run_src src;
	char name[64];

	for (i = 0; i < mm->nr_vmas && !mm->premap[i].want; i++)
		;
	if (i == mm->nr_vmas)
		return 0;
	memset(&b, 0, sizeof(b));
	for (int f = 0; f < PAGES_MAX_FILES; f++)
		pages_fd[f] = -1;
	off = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*off));
	layers = layers_new();
	b.runs = calloc(mm->nr_runs ? mm->nr_runs : 1, sizeof(*b.runs));
	if (!off || !layers || !b.runs) {
		free(b.runs);
		return -ENOMEM;
	}
	src = (struct run_src){
		dirfd, pid, mm, off, pages_fd, layers, mm->nr_runs ? mm->nr_runs : 1
	};
	snprintf(name, sizeof(name), "pagemap-%d.img", pid);
	ret = mem_open_page_files(dirfd, pid, name, mm->head, mm->runs, mm->nr_runs, off, pages_fd,
				  &b);
	for (i = 0; !ret && i < mm->nr_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		struct rpremap *pm = &mm->premap[i];
		long at;

		if (!pm->want)
			continue;
		while (run < mm->nr_runs && mm->runs[run]->vaddr < e->start)
			run++;
		if (pm->pvma >= 0) {
			/* the parent's, inherited: what is not its goes */
			const struct rpremap *pp = parent ? &parent->premap[pm->pvma] : NULL;

			if (!pp || !pp->at) {
				pr_err("pid %d: its parent did not make its mapping at %lx first",
				       pid, (unsigned long)e->start);
				ret = -EINVAL;
				break;
			}
			at = (long)(pp->at + (e->start - parent->vmas[pm->pvma]->start));
			ret = premap_zero_own(pid, mm, e, (uint64_t)at);
		} else {
			at = premap_new(e);
			if (at < 0) {
				ret = (int)at;
				pr_err("pid %d: cannot make its mapping %lx-%lx: %s", pid,
				       (unsigned long)e->start, (unsigned long)e->end,
				       strerror(-ret));
			}
		}
		b.nr_runs = 0;
		if (!ret)
			ret = plan_runs(&src, &run, e->end, &b);
		for (size_t k = 0; !ret && k < b.nr_runs; k++)
			ret = premap_fill(pid, e, (uint64_t)at, &b.runs[k], verify);
		if (!ret)
			pm->at = (uint64_t)at;
	}
	layers_close_pages(layers, mm->head, pages_fd);
	free(b.runs);
	return ret;
}
