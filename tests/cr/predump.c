/* Iterative dumps (crrun --pre-dumps N): memory is right after a restore
 * from a dump made on top of pre-dumps, whatever changed in between.
 *
 * After each pre-dump the runner sends SIGUSR2 and the test changes its
 * memory (stage 1: the big changes, later stages: some pages rewritten):
 *  - a region left alone (its pages come from the oldest pre-dump),
 *  - pages rewritten, a region unmapped, one unmapped and mapped again
 *    half written, one dropped with MADV_DONTNEED then partly read and
 *    partly written, two regions swapped with mremap, a new region, a
 *    PROT_NONE region written under a temporary mprotect,
 *  - a thread that rewrites pages all the time, during the pre-dumps too,
 *  - a child forked after the first pre-dump (it inherits the process's
 *    memory and, with the uffd tracking, the userfaultfd) that writes to
 *    its copy.
 * After SIGTERM every page of every region is checked against what was
 * last written there, and no userfaultfd may be left in the process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

#define PG 4096UL

enum { R_A, R_W, R_U, R_R, R_Z, R_M1, R_M2, R_N, R_P, NR_REGIONS };
static const unsigned region_pages[NR_REGIONS] = { 2048, 256, 64, 64, 64, 32, 32, 16, 16 };
static const char *const region_names[NR_REGIONS] = {
	"A", "W", "U", "R", "Z", "M1", "M2", "N", "P"
};

/* what a page holds: the pattern of (id, page, version); version 0 is a
 * zero page, -1 an unmapped one */
struct page_exp {
	int id, page, version;
};

static char *base[NR_REGIONS];
static struct page_exp *exp_[NR_REGIONS];

static uint64_t word(int id, int page, int version, unsigned w)
{
	uint64_t x = ((uint64_t)id << 48) ^ ((uint64_t)page << 24) ^ (uint64_t)version;

	x = (x + w) * 0x9e3779b97f4a7c15ULL;
	return (x ^ (x >> 29)) | 1; /* never a zero word */
}

static void fill_page(char *p, int id, int page, int version)
{
	uint64_t *w = (uint64_t *)p;

	for (unsigned i = 0; i < PG / 8; i++)
		w[i] = word(id, page, version, i);
}

static void write_page(int r, int page, int version)
{
	fill_page(base[r] + page * PG, r, page, version);
	exp_[r][page] = (struct page_exp){ r, page, version };
}

static void map_region(int r, char *at)
{
	base[r] = mmap(at, region_pages[r] * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
	if (base[r] == MAP_FAILED)
		crt_fail("mmap %s: %s", region_names[r], strerror(errno));
}

static void check_region(int r)
{
	for (unsigned pg = 0; pg < region_pages[r]; pg++) {
		const struct page_exp *e = &exp_[r][pg];
		char *p = base[r] + pg * PG;
		const uint64_t *w = (const uint64_t *)p;

		if (e->version < 0) {
			unsigned char v;

			if (mincore(p, PG, &v) == 0 || errno != ENOMEM)
				crt_fail("region %s page %u should be unmapped", region_names[r],
					 pg);
			continue;
		}
		for (unsigned i = 0; i < PG / 8; i++) {
			uint64_t want = e->version ? word(e->id, e->page, e->version, i) : 0;

			if (w[i] != want)
				crt_fail("region %s page %u word %u: %#lx, expected %#lx (page "
					 "%d of %s, version %d)",
					 region_names[r], pg, i, (unsigned long)w[i],
					 (unsigned long)want, e->page, region_names[e->id],
					 e->version);
		}
	}
}

/* ---- a thread that never stops writing */
#define T_PAGES 128
static char *tbase;
static volatile int tstop;
static uint64_t tseq;

static void twrite(uint64_t seq)
{
	uint64_t *w = (uint64_t *)(tbase + (seq % T_PAGES) * PG);

	for (unsigned i = 0; i < PG / 8; i++)
		w[i] = seq * 1000003 + i;
	__atomic_store_n(&tseq, seq, __ATOMIC_RELEASE);
}

static void *writer(void *arg)
{
	struct timespec ts = { 0, 20000 };

	(void)arg;
	for (uint64_t seq = T_PAGES + 1; !tstop; seq++) {
		twrite(seq);
		if (!(seq % 8))
			nanosleep(&ts, NULL);
	}
	return NULL;
}

static void check_writer(void)
{
	uint64_t last = __atomic_load_n(&tseq, __ATOMIC_ACQUIRE);

	for (uint64_t s = last - T_PAGES + 1; s <= last; s++) {
		const uint64_t *w = (const uint64_t *)(tbase + (s % T_PAGES) * PG);

		for (unsigned i = 0; i < PG / 8; i++)
			if (w[i] != s * 1000003 + i)
				crt_fail("writer page %lu word %u: %#lx, expected sequence %lu "
					 "(last %lu)",
					 (unsigned long)(s % T_PAGES), i, (unsigned long)w[i],
					 (unsigned long)s, (unsigned long)last);
	}
}

/* ---- the child forked at stage 1 */
static pid_t child;

static void child_main(void)
{
	sigset_t set;
	int sig;

	tstop = 1; /* no writer thread here */
	write_page(R_A, 100, 50);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
	for (int r = 0; r < NR_REGIONS; r++)
		if (base[r] && r != R_P)
			check_region(r);
	exit(0);
}

static void no_userfaultfd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	char path[300], link[256];

	while (d && (de = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (!strcmp(link, "anon_inode:[userfaultfd]"))
			crt_fail("fd %s is a userfaultfd after the restore", de->d_name);
	}
	if (d)
		closedir(d);
}

static void stage(int k)
{
	char name[32];
	int fd;

	if (k == 1) {
		char *tmp;

		/* new mappings first: they must not land where U was */
		/* swap M1 and M2, contents and all */
		tmp = mmap(NULL, region_pages[R_M1] * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		if (tmp == MAP_FAILED ||
		    mremap(base[R_M1], region_pages[R_M1] * PG, region_pages[R_M1] * PG,
			   MREMAP_MAYMOVE | MREMAP_FIXED, tmp) == MAP_FAILED ||
		    mremap(base[R_M2], region_pages[R_M2] * PG, region_pages[R_M2] * PG,
			   MREMAP_MAYMOVE | MREMAP_FIXED, base[R_M1]) == MAP_FAILED ||
		    mremap(tmp, region_pages[R_M1] * PG, region_pages[R_M1] * PG,
			   MREMAP_MAYMOVE | MREMAP_FIXED, base[R_M2]) == MAP_FAILED)
			crt_fail("mremap: %s", strerror(errno));
		for (unsigned i = 0; i < region_pages[R_M1]; i++) {
			struct page_exp t = exp_[R_M1][i];

			exp_[R_M1][i] = exp_[R_M2][i];
			exp_[R_M2][i] = t;
		}

		map_region(R_N, NULL);
		for (unsigned i = 0; i < region_pages[R_N]; i++)
			write_page(R_N, i, 1);

		munmap(base[R_U], region_pages[R_U] * PG);
		for (unsigned i = 0; i < region_pages[R_U]; i++)
			exp_[R_U][i].version = -1;

		munmap(base[R_R], region_pages[R_R] * PG);
		map_region(R_R, base[R_R]);
		for (unsigned i = 0; i < region_pages[R_R]; i++) {
			exp_[R_R][i].version = 0;
			if (i < region_pages[R_R] / 2)
				write_page(R_R, i, 5);
		}

		madvise(base[R_Z], region_pages[R_Z] * PG, MADV_DONTNEED);
		for (unsigned i = 0; i < region_pages[R_Z]; i++)
			exp_[R_Z][i].version = 0;
		for (unsigned i = 0; i < 10; i++)
			(void)*(volatile char *)(base[R_Z] + i * PG);
		for (unsigned i = 20; i < 30; i++)
			write_page(R_Z, i, 6);

		mprotect(base[R_P], region_pages[R_P] * PG, PROT_READ | PROT_WRITE);
		for (unsigned i = 0; i < region_pages[R_P] / 2; i++)
			write_page(R_P, i, 7);
		mprotect(base[R_P], region_pages[R_P] * PG, PROT_NONE);

		child = fork();
		if (child < 0)
			crt_fail("fork: %s", strerror(errno));
		if (child == 0)
			child_main();
		crt_own_child(child);
	}
	write_page(R_A, (k * 7) % region_pages[R_A], k + 1);
	for (unsigned i = 0; i < region_pages[R_W]; i++)
		if (i % 3 == (unsigned)k % 3)
			write_page(R_W, i, k + 1);

	snprintf(name, sizeof(name), "stage-%d", k);
	fd = open(crt_path(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		crt_fail("cannot create %s: %s", name, strerror(errno));
	close(fd);
}

int main(void)
{
	sigset_t set;
	pthread_t th;
	int sig, k = 0, st;

	crt_init();
	for (int r = 0; r < NR_REGIONS; r++) {
		exp_[r] = calloc(region_pages[r], sizeof(**exp_));
		if (!exp_[r])
			crt_fail("calloc");
		if (r == R_N)
			continue; /* made at stage 1 */
		map_region(r, NULL);
		for (unsigned i = 0; i < region_pages[r]; i++)
			write_page(r, i, 1);
	}
	mprotect(base[R_P], region_pages[R_P] * PG, PROT_NONE);

	tbase = mmap(NULL, T_PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		     0);
	if (tbase == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	for (uint64_t s = 1; s <= T_PAGES; s++)
		twrite(s);

	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&th, NULL, writer, NULL))
		crt_fail("pthread_create");
	crt_ready();
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		if (sig == SIGTERM)
			break;
		stage(++k);
	}
	tstop = 1;
	pthread_join(th, NULL);
	check_writer();
	mprotect(base[R_P], region_pages[R_P] * PG, PROT_READ);
	for (int r = 0; r < NR_REGIONS; r++)
		if (base[r])
			check_region(r);
	no_userfaultfd();
	if (child) {
		kill(child, SIGTERM);
		if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
			crt_fail("the child found its memory wrong (status %#x)", st);
	}
	crt_msg("%d stages, writer at %lu", k, (unsigned long)tseq);
	crt_pass();
}
