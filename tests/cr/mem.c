/* Memory survives with its exact layout:
 *  - heap grown with brk, stack contents, a partially populated region,
 *    PROT_NONE guards with data under them, mprotect'ed and unmapped holes,
 *    a MAP_GROWSDOWN region, a named anonymous region,
 *  - a private file mapping with copied-on-write pages (the file itself
 *    untouched), a shared file mapping whose writes reach the file,
 *  - /proc/self/maps identical, the mm fields of /proc/self/stat, auxv,
 *    cmdline and environ identical.
 * Contents are checked with hashes taken before the dump. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "crt.h"

#define PG 4096UL

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

static char maps_before[1 << 16], maps_after[1 << 16];
static char stat_before[4096], stat_after[4096];
static char auxv_before[1024], auxv_after[1024];
static char cmd_before[4096], cmd_after[4096];

static size_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		crt_fail("open %s: %s", path, strerror(errno));
	while ((n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	return len;
}

/* fields 26-28 and 45-51 of stat: code, stack, data, brk, args, env */
static void mm_fields(const char *stat, char *out, size_t cap)
{
	const char *p = strrchr(stat, ')');
	int field = 2;
	size_t o = 0;

	out[0] = 0;
	for (p = p + 1; *p && o < cap - 32; p++) {
		if (*p != ' ')
			continue;
		field++;
		if ((field >= 26 && field <= 28) || (field >= 45 && field <= 51)) {
			long v = strtol(p + 1, NULL, 10);
			o += snprintf(out + o, cap - o, "%d=%ld ", field, v);
		}
	}
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 31 + seed + (i >> 12));
}

struct region {
	const char *what;
	unsigned char *p;
	size_t len;
	uint64_t hash;
	int prot; /* readable now? if not, make it readable to check */
};

static struct region regs[16];
static int nregs;

static void track(const char *what, void *p, size_t len, int prot)
{
	regs[nregs].what = what;
	regs[nregs].p = p;
	regs[nregs].len = len;
	regs[nregs].prot = prot;
	nregs++;
}

static uint64_t hash_region(struct region *r)
{
	uint64_t h;

	if (!(r->prot & PROT_READ))
		mprotect(r->p, r->len, PROT_READ);
	h = crt_hash(r->p, r->len, 0);
	if (!(r->prot & PROT_READ))
		mprotect(r->p, r->len, r->prot);
	return h;
}

int main(int argc, char **argv)
{
	const char *dir = crt_init();
	unsigned char stack_data[8192];
	unsigned char *heap, *sparse, *guarded, *holes, *grows, *named, *priv, *shared;
	char orig_file[PG * 4], path_priv[512], path_shared[512], buf[PG];
	int fd_shared;
	void *brk0;

	(void)argc;
	(void)argv;
	(void)dir;
	fill(stack_data, sizeof(stack_data), 1);
	track("stack", stack_data, sizeof(stack_data), PROT_READ);

	/* heap through brk */
	brk0 = sbrk(0);
	heap = sbrk(64 * PG);
	if (heap == (void *)-1)
		crt_fail("sbrk: %s", strerror(errno));
	fill(heap, 64 * PG, 2);
	track("heap", heap, 64 * PG, PROT_READ | PROT_WRITE);

	/* partially populated: every third page of 4 MiB */
	sparse = mmap(NULL, 1024 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < 1024; i += 3)
		fill(sparse + i * PG, PG, i);
	track("sparse", sparse, 1024 * PG, PROT_READ | PROT_WRITE);

	/* guard pages with data under them */
	guarded = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(guarded, 16 * PG, 3);
	mprotect(guarded, PG, PROT_NONE);
	mprotect(guarded + 8 * PG, 2 * PG, PROT_NONE);
	track("guarded", guarded + PG, 7 * PG, PROT_READ | PROT_WRITE);
	track("guard", guarded + 8 * PG, 2 * PG, PROT_NONE);

	/* holes: a read-only part and an unmapped part */
	holes = mmap(NULL, 32 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(holes, 32 * PG, 4);
	munmap(holes + 10 * PG, 4 * PG);
	mprotect(holes + 20 * PG, 4 * PG, PROT_READ);
	track("holes-lo", holes, 10 * PG, PROT_READ | PROT_WRITE);
	track("holes-ro", holes + 20 * PG, 4 * PG, PROT_READ);
	track("holes-hi", holes + 24 * PG, 8 * PG, PROT_READ | PROT_WRITE);

	/* grows down */
	grows = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
	if (grows == MAP_FAILED)
		crt_fail("MAP_GROWSDOWN: %s", strerror(errno));
	fill(grows + 4 * PG, 4 * PG, 5);
	track("growsdown", grows + 4 * PG, 4 * PG, PROT_READ | PROT_WRITE);

	/* named anonymous memory (kernels without anon names just skip it) */
	named = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)named, 4 * PG, "kupdate-test");
	fill(named, 4 * PG, 6);
	track("named", named, 4 * PG, PROT_READ | PROT_WRITE);

	/* private file mapping, two pages written (COW), two left alone */
	snprintf(path_priv, sizeof(path_priv), "%s", crt_path("private.dat"));
	fill((unsigned char *)orig_file, sizeof(orig_file), 7);
	{
		int fd = open(path_priv, O_RDWR | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || write(fd, orig_file, sizeof(orig_file)) != sizeof(orig_file))
			crt_fail("cannot write %s", path_priv);
		priv = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		close(fd);
	}
	memset(priv + PG, 0xab, PG);
	memset(priv + 3 * PG + 100, 0xcd, 50);
	track("private-file", priv, 4 * PG, PROT_READ | PROT_WRITE);

	/* shared file mapping */
	snprintf(path_shared, sizeof(path_shared), "%s", crt_path("shared.dat"));
	fd_shared = open(path_shared, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd_shared < 0 || ftruncate(fd_shared, 4 * PG))
		crt_fail("cannot create %s", path_shared);
	shared = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd_shared, 0);
	fill(shared, 4 * PG, 8);
	track("shared-file", shared, 4 * PG, PROT_READ | PROT_WRITE);

	for (int i = 0; i < nregs; i++)
		regs[i].hash = hash_region(&regs[i]);
	slurp("/proc/self/maps", maps_before, sizeof(maps_before));
	slurp("/proc/self/stat", buf, sizeof(buf));
	mm_fields(buf, stat_before, sizeof(stat_before));
	slurp("/proc/self/auxv", auxv_before, sizeof(auxv_before));
	slurp("/proc/self/cmdline", cmd_before, sizeof(cmd_before));

	crt_ready();
	crt_wait_term();

	slurp("/proc/self/maps", maps_after, sizeof(maps_after));
	if (strcmp(maps_before, maps_after)) {
		printf("maps before the dump:\n%s\nmaps after the restore:\n%s\n", maps_before,
		       maps_after);
		crt_fail("/proc/self/maps changed");
	}
	slurp("/proc/self/stat", buf, sizeof(buf));
	mm_fields(buf, stat_after, sizeof(stat_after));
	crt_check(!strcmp(stat_before, stat_after), "mm fields changed: before %s, after %s",
		  stat_before, stat_after);
	crt_check(!memcmp(auxv_before, auxv_after,
			  slurp("/proc/self/auxv", auxv_after, sizeof(auxv_after))),
		  "auxv changed");
	slurp("/proc/self/cmdline", cmd_after, sizeof(cmd_after));
	crt_check(!strcmp(cmd_before, cmd_after), "cmdline changed: %s", cmd_after);
	crt_check(sbrk(0) == heap + 64 * PG, "brk is %p, expected %p (start %p)", sbrk(0),
		  heap + 64 * PG, brk0);

	for (int i = 0; i < nregs; i++)
		crt_check(hash_region(&regs[i]) == regs[i].hash, "contents of %s (%p) changed",
			  regs[i].what, (void *)regs[i].p);

	/* the private mapping's untouched pages still come from the file, and
	 * the file has none of the private writes */
	{
		int fd = open(path_priv, O_RDONLY);
		char now[PG * 4];

		crt_check(fd >= 0 && read(fd, now, sizeof(now)) == sizeof(now), "cannot read %s",
			  path_priv);
		close(fd);
		crt_check(!memcmp(now, orig_file, sizeof(now)), "%s was modified", path_priv);
		crt_check(!memcmp(priv, orig_file, PG) &&
				  !memcmp(priv + 2 * PG, orig_file + 2 * PG, PG),
			  "unmodified private pages differ from the file");
	}
	/* the shared mapping still writes through to the file */
	shared[10] = 0x77;
	crt_check(pread(fd_shared, buf, 16, 0) == 16 && buf[10] == 0x77,
		  "a write to the shared mapping does not reach the file");
	/* the heap still grows */
	crt_check(sbrk(PG) != (void *)-1, "brk cannot grow after the restore");
	/* growsdown still grows */
	grows[3 * PG] = 1;
	crt_pass();
}
