/* pages.c: the page data of a process's private memory, dump side and
 * restore side.  A dump writes it with up to PAGES_MAX_FILES threads, each
 * into a file of its own (pages-PID.img, pages-PID.N.img); the restore
 * gives the restorer the files and, for a large mapping, fills a share of
 * it from outside on a thread of its own (the fill helper). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "crc32c.h"
#include "dump.h"
#include "image.h"
#include "images/pagemap.pb-c.h"
#include "log.h"
#include "pages.h"
#include "restore.h"
#include "restorer/restorer.h"
#include "util.h"

/* ---------------------------------------------------------------- dump */

/* Copy [vaddr, +len) of the process into buf with process_vm_readv, or
 * through /proc/PID/mem for unreadable mappings, a process that may share
 * pages (pages_may_share), and where the first fails;
 * quiet: returns 0 or a negative errno. */
static int copy_pages(struct cr_proc *p, void *buf, uint64_t vaddr, uint64_t len, bool readable)
{
	if (readable && !pages_may_share(p)) {
		struct iovec l = { buf, len }, r = { (void *)vaddr, len };
		ssize_t n = process_vm_readv(p->pid, &l, 1, &r, 1, 0);

		if (n == (ssize_t)len)
			return 0;
		/* fall back to /proc/PID/mem, which can read any page */
	}
	if (pread_all(p->mem_fd, buf, len, vaddr))
		return errno ? -errno : -EIO;
	return 0;
}

bool pages_may_share(const struct cr_proc *p)
{
	return p->parent || p->nr_children;
}

const struct cr_vma *mem_vma_at(const struct cr_proc *p, uint64_t addr)
{
	for (int i = 0; i < p->nr_vmas; i++)
		if (addr >= p->vmas[i].s.start && addr < p->vmas[i].s.end)
			return &p->vmas[i];
	return NULL;
}

bool pages_zeros_skippable(const struct cr_vma *v)
{
	return v && v->kind == VMA_KIND__VMA_ANON_PRIVATE;
}

/* a page of zeros; most pages that are not differ in their first bytes */
static bool page_is_zero(const unsigned char *page)
{
	const uint64_t *w = (const void *)page;

	if (w[0])
		return false;
	for (size_t c = 0; c < PAGE_SIZE / 8; c += 64) {
		uint64_t acc = 0;

		for (size_t i = 0; i < 64; i++)
			acc |= w[c + i];
		if (acc)
			return false;
	}
	return true;
}

uint64_t pages_data_span(const unsigned char *buf, uint64_t np, uint64_t *pos, uint64_t *start)
{
	uint64_t j = *pos, zeros;

	while (j < np && page_is_zero(buf + j * PAGE_SIZE))
		j++;
	zeros = j - *pos;
	*start = j;
	while (j < np && !page_is_zero(buf + j * PAGE_SIZE))
		j++;
	*pos = j;
	return zeros;
}

int pages_push_run(struct cr_pagerun **out, int *n, int *cap, const struct cr_pagerun *r)
{
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 64;
		struct cr_pagerun *nr = xrealloc_array(*out, c, sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		*out = nr;
		*cap = c;
	}
	(*out)[(*n)++] = *r;
	return 0;
}

int pages_emit(struct pages_out *o, uint64_t vaddr, const unsigned char *buf, uint64_t len,
	       bool zeros)
{
	uint64_t np = len / PAGE_SIZE;

	for (uint64_t j = 0; j < np;) {
		uint64_t k = j;
		struct cr_pagerun *last;
		int ret;

		if (zeros) {
			uint64_t z = pages_data_span(buf, np, &j, &k);

			o->zero_pages += z;
			if (z)
				o->open = false; /* a gap in the run */
		} else {
			j = np;
		}
		if (j == k)
			continue;
		if (!o->open) {
			struct cr_pagerun nr = { .vaddr = vaddr + k * PAGE_SIZE, .file = o->file };

			ret = pages_push_run(&o->runs, &o->nr, &o->cap, &nr);
			if (ret)
				return ret;
			o->open = true;
		}
		last = &o->runs[o->nr - 1];
		if (o->crc)
			last->crc = crc32c(last->crc, buf + k * PAGE_SIZE, (j - k) * PAGE_SIZE);
		last->nr_pages += j - k;
		ret = pwrite_all(o->fd, buf + k * PAGE_SIZE, (j - k) * PAGE_SIZE,
				 (off_t)(PAGES_DATA_OFFSET + o->written * PAGE_SIZE));
		if (ret)
			return ret;
		o->written += j - k;
	}
	return 0;
}

/* The page data is written by up to PW_MAX_THREADS threads, each into a
 * file of its own: the pages are cut in as many parts of about the same
 * size (a run that straddles two parts becomes two runs, each with its own
 * file and sum), part 0 goes to pages-PID.img, part N to pages-PID.N.img.
 * A thread reads its part (copy_pages) in PW_BUF steps, sums each
 * step while it is in the cache and appends it to its file.  One file per
 * thread because every write to a tmpfs file takes that file's inode lock:
 * two threads writing one file took turns (bench/README.md).  Pages of
 * zeros in private anonymous memory are left out (pages_emit): the
 * restore's fresh memory is zeros, and a kernel without the shared zero
 * page (this host's) gives even a page only ever read a frame of its own. */
enum { PW_MAX_THREADS = PAGES_MAX_FILES, PW_BUF = 512 << 10, PW_MIN_PART = 4 << 20 };

struct pw_part {
	struct cr_proc *p;
	struct pages_out o;
	char name[64];
	int first_run, end_run; /* its runs in p->runs */
	uint64_t nr_pages;
	int err;
};

static int pw_write(struct pw_part *w, unsigned char *buf)
{
	for (int i = w->first_run; i < w->end_run; i++) {
		struct cr_pagerun *r = &w->p->runs[i];
		uint64_t len = r->nr_pages * PAGE_SIZE;
		const struct cr_vma *v;
		bool readable, zeros;
		int ret;

		w->o.open = false;
		if (run_nodata(r)) {
			ret = pages_push_run(&w->o.runs, &w->o.nr, &w->o.cap, r);
			if (ret)
				return ret;
			continue;
		}
		v = mem_vma_at(w->p, r->vaddr);
		readable = v && (v->s.prot & PROT_READ);
		zeros = pages_zeros_skippable(v);
		for (uint64_t done = 0; done < len;) {
			uint64_t n = MIN(len - done, (uint64_t)PW_BUF), a = r->vaddr + done;

			if (cr_stop_requested())
				return -EINTR; /* the dump says so */
			ret = copy_pages(w->p, buf, a, n, readable);

			if (ret) {
				pr_err("pid %d: cannot read memory at %lx (+%lu bytes): %s",
				       w->p->pid, (unsigned long)a, (unsigned long)n,
				       strerror(-ret));
				return ret;
			}
			ret = pages_emit(&w->o, a, buf, n, zeros);
			if (ret) {
				pr_err("cannot write image %s: %s", w->name, strerror(-ret));
				return ret;
			}
			done += n;
		}
	}
	return 0;
}

static void *pw_worker(void *arg)
{
	struct pw_part *w = arg;
	unsigned char *buf = malloc(PW_BUF);

	w->err = buf ? pw_write(w, buf) : -ENOMEM;
	free(buf);
	return NULL;
}

/* One thread a CPU, at most PW_MAX_THREADS, and parts of at least
 * PW_MIN_PART (a small process of a big tree has one file);
 * KUPDATE_PAGE_THREADS=N sets it (measurements). */
static int pw_threads(uint64_t nr_pages)
{
	const char *e = getenv("KUPDATE_PAGE_THREADS");
	long n = e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);

	if (!e && (uint64_t)n * PW_MIN_PART > nr_pages * PAGE_SIZE)
		n = (long)(nr_pages * PAGE_SIZE / PW_MIN_PART);
	if (n > PW_MAX_THREADS)
		n = PW_MAX_THREADS;
	if ((uint64_t)n > nr_pages)
		n = (long)nr_pages;
	return n < 1 ? 1 : (int)n;
}

/* Cut p->runs into nt parts of about the same number of pages (runs with
 * data; those without go with the part they lie in), set each run's file
 * and fill parts[].first_run/end_run/nr_pages (nt 1: one part, no cut). */
static int pw_split(struct cr_proc *p, int nt, struct pw_part *parts)
{
	uint64_t per = (p->nr_pages + nt - 1) / nt, in_part = 0;
	struct cr_pagerun *out;
	int n = 0, part = 0;

	out = xrealloc_array(NULL, (size_t)p->nr_runs + nt, sizeof(*out));
	if (!out)
		return -ENOMEM;
	parts[0].first_run = 0;
	for (int i = 0; i < p->nr_runs; i++) {
		struct cr_pagerun r = p->runs[i];

		while (!run_nodata(&r) && part < nt - 1 && in_part + r.nr_pages >= per) {
			uint64_t take = per - in_part;

			if (take) {
				out[n] = r;
				out[n].nr_pages = take;
				out[n++].file = (uint32_t)part;
				r.vaddr += take * PAGE_SIZE;
				r.nr_pages -= take;
			}
			parts[part].nr_pages = per;
			parts[part].end_run = n;
			parts[++part].first_run = n;
			in_part = 0;
		}
		if (!r.nr_pages)
			continue;
		r.file = (uint32_t)part;
		out[n++] = r;
		if (!run_nodata(&r))
			in_part += r.nr_pages;
	}
	parts[part].nr_pages = in_part;
	parts[part].end_run = n;
	free(p->runs);
	p->runs = out;
	p->nr_runs = n;
	p->nr_page_files = part + 1;
	return 0;
}

void mem_pages_header(unsigned char *hdr, pid_t pid, uint32_t file, uint64_t nr_pages)
{
	struct pages_header h;

	memset(hdr, 0, PAGES_DATA_OFFSET);
	memset(&h, 0, sizeof(h));
	h.h.magic = IMG_MAGIC;
	h.h.kind = IMG_PAGES;
	h.h.version = IMG_FORMAT_VERSION;
	h.h.hdr_size = sizeof(h);
	h.nr_pages = nr_pages;
	h.pid = (uint32_t)pid;
	h.file = file;
	memcpy(hdr, &h, sizeof(h));
}

int mem_pages_name(char *buf, size_t size, pid_t pid, uint32_t file)
{
	if (file)
		return snprintf(buf, size, "pages-%d.%u.img", pid, file);
	return snprintf(buf, size, "pages-%d.img", pid);
}

static int pw_open(struct cr_dump_ctx *ctx, struct pw_part *w)
{
	unsigned char hdr[PAGES_DATA_OFFSET];
	int ret;

	mem_pages_name(w->name, sizeof(w->name), w->p->pid, w->o.file);
	w->o.fd = openat(ctx->dirfd, w->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w->o.fd < 0)
		return pr_errno("cannot create image %s", w->name);
	/* its page count is known once the zeros are left out: the header
	 * is written again then */
	mem_pages_header(hdr, w->p->pid, w->o.file, w->nr_pages);
	ret = write_all(w->o.fd, hdr, sizeof(hdr));
	if (ret)
		pr_err("cannot write image %s: %s", w->name, strerror(-ret));
	return ret;
}

/* the parts' runs, in order, become the process's: what was written */
static int pw_collect(struct cr_proc *p, struct pw_part *parts, int nt)
{
	struct cr_pagerun *runs;
	int n = 0;

	for (int i = 0; i < nt; i++)
		n += parts[i].o.nr;
	runs = xrealloc_array(NULL, n ? n : 1, sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	n = 0;
	p->nr_pages = 0;
	p->zero_pages = 0;
	for (int i = 0; i < nt; i++) {
		memcpy(runs + n, parts[i].o.runs, parts[i].o.nr * sizeof(*runs));
		n += parts[i].o.nr;
		p->nr_pages += parts[i].o.written;
		p->zero_pages += parts[i].o.zero_pages;
	}
	free(p->runs);
	p->runs = runs;
	p->nr_runs = n;
	if (p->zero_pages)
		pr_debug("pid %d: %lu pages of zeros left out", p->pid,
			 (unsigned long)p->zero_pages);
	return 0;
}

int mem_write_pages(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct pw_part parts[PW_MAX_THREADS];
	pthread_t tids[PW_MAX_THREADS];
	int nt = pw_threads(p->nr_pages), started = 0, ret;

	memset(parts, 0, sizeof(parts));
	for (int i = 0; i < nt; i++) {
		parts[i].p = p;
		parts[i].o.crc = !ctx->opts->no_page_crc;
		parts[i].o.file = (uint32_t)i;
		parts[i].o.fd = -1;
	}
	ret = pw_split(p, nt, parts);
	if (ret)
		return ret;
	nt = p->nr_page_files;
	for (int i = 0; i < nt && !ret; i++)
		ret = pw_open(ctx, &parts[i]);
	if (!ret) {
		for (; started < nt - 1; started++)
			if (pthread_create(&tids[started], NULL, pw_worker, &parts[started + 1]))
				break;
		/* parts no thread could be started for are written here */
		for (int i = started + 1; i < nt; i++)
			pw_worker(&parts[i]);
		pw_worker(&parts[0]);
		for (int i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
		for (int i = 0; i < nt && !ret; i++)
			ret = parts[i].err;
	}
	for (int i = 0; i < nt && !ret; i++) {
		unsigned char hdr[PAGES_DATA_OFFSET];

		if (parts[i].o.written == parts[i].nr_pages)
			continue;
		mem_pages_header(hdr, p->pid, parts[i].o.file, parts[i].o.written);
		ret = pwrite_all(parts[i].o.fd, hdr, sizeof(hdr), 0);
		if (ret)
			pr_err("cannot write image %s: %s", parts[i].name, strerror(-ret));
	}
	for (int i = 0; i < nt; i++) {
		if (parts[i].o.fd < 0)
			continue;
		if (close(parts[i].o.fd) && !ret) {
			ret = -errno;
			pr_err("cannot write image %s: %s", parts[i].name, strerror(-ret));
		}
	}
	if (!ret)
		ret = pw_collect(p, parts, nt);
	for (int i = 0; i < nt; i++)
		free(parts[i].o.runs);
	return ret;
}

/* ------------------------------------------------------------- restore */

static int open_pages(int dirfd, pid_t pid, uint32_t file, uint64_t nr_pages)
{
	struct pages_header h;
	struct stat st;
	char name[64];
	int fd;

	mem_pages_name(name, sizeof(name), pid, file);
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pr_errno("cannot open image %s", name);
	if (fstat(fd, &st) || pread(fd, &h, sizeof(h), 0) != sizeof(h)) {
		pr_err("image %s is damaged: cannot read its header", name);
		close(fd);
		return -EINVAL;
	}
	if (h.h.magic != IMG_MAGIC || h.h.kind != IMG_PAGES || h.h.version != IMG_FORMAT_VERSION ||
	    h.nr_pages != nr_pages || h.pid != (uint32_t)pid || h.file != file) {
		pr_err("image %s is damaged or belongs to another dump (header: kind %u, version "
		       "%u, %lu pages, pid %u, file %u)",
		       name, h.h.kind, h.h.version, (unsigned long)h.nr_pages, h.pid, h.file);
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size != PAGES_DATA_OFFSET + nr_pages * PAGE_SIZE) {
		pr_err("image %s is damaged: %lu bytes where %lu were written", name,
		       (unsigned long)st.st_size,
		       (unsigned long)(PAGES_DATA_OFFSET + nr_pages * PAGE_SIZE));
		close(fd);
		return -EINVAL;
	}
	return fd;
}

void mem_pages_name_at(const struct rmm *mm, pid_t pid, uint64_t addr, char *buf, size_t size)
{
	for (size_t i = 0; i < mm->nr_runs; i++) {
		const PagemapEntry *e = mm->runs[i];

		if (addr < e->vaddr || addr >= e->vaddr + e->nr_pages * PAGE_SIZE)
			continue;
		if (e->in_parent) {
			snprintf(buf, size, "a parent layer's pages-%d.img", pid);
			return;
		}
		if (e->cow_parent) {
			snprintf(buf, size, "its parent process's pages");
			return;
		}
		mem_pages_name(buf, size, pid, mem_run_file(e));
		return;
	}
	mem_pages_name(buf, size, pid, 0);
}

int mem_open_page_files(int dirfd, pid_t pid, const char *name, const PagemapHead *head,
			PagemapEntry *const *runs, size_t nr, uint64_t *off, int *fds,
			struct rst_builder *b)
{
	uint32_t nf = head->has_nr_files ? head->nr_files : 1;
	uint64_t at[PAGES_MAX_FILES];

	if (nf < 1 || nf > PAGES_MAX_FILES) {
		pr_err("image %s is damaged: it names %u page files (1 to %d)", name, nf,
		       PAGES_MAX_FILES);
		return -EINVAL;
	}
	for (uint32_t f = 0; f < nf; f++)
		at[f] = PAGES_DATA_OFFSET;
	for (size_t i = 0; i < nr; i++) {
		uint32_t f = mem_run_file(runs[i]);

		off[i] = 0;
		if (mem_run_nodata(runs[i]))
			continue;
		if (f >= nf) {
			pr_err("image %s is damaged: run %zu at %lx is in page file %u of %u", name,
			       i, (unsigned long)runs[i]->vaddr, f, nf);
			return -EINVAL;
		}
		off[i] = at[f];
		at[f] += runs[i]->nr_pages * PAGE_SIZE;
	}
	for (uint32_t f = 0; f < nf; f++) {
		int fd = open_pages(dirfd, pid, f, (at[f] - PAGES_DATA_OFFSET) / PAGE_SIZE);

		if (fd < 0)
			return fd;
		fds[f] = builder_place_fd(b, fd);
		if (fds[f] < 0)
			return fds[f];
	}
	return 0;
}

/* ----------------------------------------------- restore: fill helper */

/* A share of a mapping's pages filled from outside while the blob fills
 * the rest (RST_HELPER_* in restorer.h): the two halves take their page
 * faults, copies and sums on two CPUs.  The data goes through a buffer
 * (pread from the page image, process_vm_writev into the process); the
 * image fds are the process's own, reached through /proc/PID/fd. */
struct fill_helper {
	pid_t pid;
	struct rst_run *runs; /* the share: runs[0] from byte first_off on */
	uint32_t nr;
	uint64_t first_off;
	uint32_t verify;
	pthread_t thread;
	bool threaded;
	long result;
	uint64_t bad_addr; /* the run whose data did not match its sum */
};

/* page files the helper may read: every layer's */
enum { HELPER_FDS = PAGES_MAX_LAYERS * PAGES_MAX_FILES };

static int helper_fd(struct fill_helper *h, int num, int (*cache)[2], int *nc)
{
	char path[64];
	int fd;

	for (int i = 0; i < *nc; i++)
		if (cache[i][0] == num)
			return cache[i][1];
	if (*nc == HELPER_FDS)
		return -EMFILE;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", h->pid, num);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;
		pr_perror("pid %d: cannot open its page image (fd %d)", h->pid, num);
		return ret;
	}
	cache[*nc][0] = num;
	cache[(*nc)++][1] = fd;
	return fd;
}

static long helper_fill(struct fill_helper *h)
{
	enum { STEP = 512 << 10 };
	_cleanup_free_ unsigned char *buf = malloc(STEP);
	int cache[HELPER_FDS][2], nc = 0;
	long result = 0;

	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < h->nr && result >= 0; i++) {
		const struct rst_run *r = &h->runs[i];
		uint64_t len = r->nr_pages * PAGE_SIZE, a = i ? 0 : h->first_off;
		bool check = h->verify && !(r->flags & RST_RUN_NOCRC);
		uint32_t c = 0;
		int fd = helper_fd(h, r->fd, cache, &nc);

		if (fd < 0) {
			result = fd;
			break;
		}
		for (; a < len; a += STEP) {
			uint64_t n = MIN(len - a, (uint64_t)STEP);
			struct iovec l = { buf, n }, rv = { (void *)(r->vaddr + a), n };
			int ret = pread_all(fd, buf, n, r->file_off + a);

			if (ret) {
				pr_err("pid %d: cannot read its page image at %lu: %s", h->pid,
				       (unsigned long)(r->file_off + a), strerror(-ret));
				result = ret;
				break;
			}
			if (check)
				c = crc32c(c, buf, n);
			if (process_vm_writev(h->pid, &l, 1, &rv, 1, 0) != (ssize_t)n) {
				result = errno ? -errno : -EIO;
				pr_perror("pid %d: cannot write its pages at %lx", h->pid,
					  (unsigned long)(r->vaddr + a));
				break;
			}
		}
		if (result < 0)
			break;
		if (!i && h->first_off)
			result = c; /* the blob sums the whole run */
		else if (check && c != r->crc) {
			/* the blob reports it, kupdate names the image */
			h->bad_addr = r->vaddr;
			pr_debug("pid %d: the page data of %lx-%lx does not match its checksum",
				 h->pid, (unsigned long)r->vaddr, (unsigned long)(r->vaddr + len));
			result = -EBADMSG;
		}
	}
	for (int i = 0; i < nc; i++)
		close(cache[i][1]);
	return result;
}

static void *helper_main(void *arg)
{
	struct fill_helper *h = arg;

	h->result = helper_fill(h);
	return NULL;
}

int mem_helper_start(pid_t pid, uint64_t args_addr, uint64_t first_run, uint64_t off,
		     uint64_t end_run, struct fill_helper **out)
{
	struct fill_helper *h;
	struct rst_args a;
	struct iovec l = { &a, sizeof(a) }, r = { (void *)args_addr, sizeof(a) };
	ssize_t len;

	if (*out) {
		pr_err("pid %d: the restorer asked for a second fill helper", pid);
		return -EPROTO;
	}
	if (process_vm_readv(pid, &l, 1, &r, 1, 0) != sizeof(a) || a.magic != RST_MAGIC ||
	    first_run >= end_run || end_run > a.nr_runs || off % PAGE_SIZE) {
		pr_err("pid %d: the restorer asked for a fill helper with bad arguments (runs "
		       "%lu-%lu, offset %lu)",
		       pid, (unsigned long)first_run, (unsigned long)end_run, (unsigned long)off);
		return -EPROTO;
	}
	h = xzalloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->pid = pid;
	h->nr = end_run - first_run;
	h->first_off = off;
	h->verify = a.verify_crc;
	h->runs = xrealloc_array(NULL, h->nr, sizeof(*h->runs));
	if (!h->runs) {
		free(h);
		return -ENOMEM;
	}
	len = h->nr * sizeof(*h->runs);
	l = (struct iovec){ h->runs, len };
	r = (struct iovec){ (void *)(args_addr + a.runs_off + first_run * sizeof(*h->runs)), len };
	if (process_vm_readv(pid, &l, 1, &r, 1, 0) != len ||
	    off >= h->runs[0].nr_pages * PAGE_SIZE) {
		pr_err("pid %d: cannot read the runs the fill helper is to fill", pid);
		free(h->runs);
		free(h);
		return -EPROTO;
	}
	h->threaded = !pthread_create(&h->thread, NULL, helper_main, h);
	if (!h->threaded)
		h->result = helper_fill(h);
	*out = h;
	return 0;
}

long mem_helper_wait(struct fill_helper **hp, uint64_t *bad_addr)
{
	struct fill_helper *h = *hp;
	long ret;

	if (!h)
		return -EPROTO;
	if (h->threaded)
		pthread_join(h->thread, NULL);
	ret = h->result;
	if (h->bad_addr)
		*bad_addr = h->bad_addr;
	free(h->runs);
	free(h);
	*hp = NULL;
	return ret;
}
