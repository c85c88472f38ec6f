// SPDX-License-Identifier: GPL-2.0
/*
 * Soft-dirty tracking: writing 4 to /proc/PID/clear_refs clears bit 55 of
 * every pagemap entry; a later write to a page sets it again for that page only.
 */
#include "ktap.h"
#include "util.h"
#include <stdint.h>
#include <sys/mman.h>

#define PM_SOFT_DIRTY (1ULL << 55)
#define PM_PRESENT    (1ULL << 63)
#define NPAGES	      8

static int pagemap(int fd, void *addr, uint64_t *e, int n)
{
	off_t off = ((uintptr_t)addr / 4096) * sizeof(uint64_t);

	return pread(fd, e, n * sizeof(uint64_t), off) == (ssize_t)(n * sizeof(uint64_t)) ? 0 : -1;
}

static int count(const uint64_t *e, int n, uint64_t bit)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += !!(e[i] & bit);
	return c;
}

int main(void)
{
	uint64_t e[NPAGES];
	volatile char *p;
	char *q;
	int fd;

	ktap_plan(6);

	fd = open("/proc/self/pagemap", O_RDONLY);
	p = mmap(NULL, NPAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fd < 0 || p == MAP_FAILED)
		ktap_bail("setup");
	for (int i = 0; i < NPAGES; i++)
		p[i * 4096] = 1;

	ktap_ok(!pagemap(fd, (void *)p, e, NPAGES) && count(e, NPAGES, PM_PRESENT) == NPAGES &&
			count(e, NPAGES, PM_SOFT_DIRTY) == NPAGES,
		"soft-dirty: freshly written pages are present and soft-dirty");

	ktap_ok(write_file("/proc/self/clear_refs", "4") == 0, "soft-dirty: clear_refs accepts 4");
	pagemap(fd, (void *)p, e, NPAGES);
	ktap_ok(count(e, NPAGES, PM_SOFT_DIRTY) == 0 && count(e, NPAGES, PM_PRESENT) == NPAGES,
		"soft-dirty: bit 55 clear on all pages after clear_refs (%d set)",
		count(e, NPAGES, PM_SOFT_DIRTY));

	p[2 * 4096 + 10] = 2;
	p[5 * 4096 + 10] = 2;
	(void)p[3 * 4096]; /* a read does not dirty */
	pagemap(fd, (void *)p, e, NPAGES);
	ktap_ok(count(e, NPAGES, PM_SOFT_DIRTY) == 2 && (e[2] & PM_SOFT_DIRTY) &&
			(e[5] & PM_SOFT_DIRTY),
		"soft-dirty: exactly the two written pages have bit 55 again");

	ktap_ok(write_file("/proc/self/clear_refs", "4") == 0 &&
			!pagemap(fd, (void *)p, e, NPAGES) && count(e, NPAGES, PM_SOFT_DIRTY) == 0,
		"soft-dirty: a second clear_refs clears them again");

	/* A new mapping is soft-dirty as a whole (VM_SOFTDIRTY) */
	q = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q == MAP_FAILED)
		ktap_bail("mmap");
	q[0] = 1;
	ktap_ok(!pagemap(fd, q, e, 1) && (e[0] & PM_SOFT_DIRTY) && (e[0] & PM_PRESENT),
		"soft-dirty: a page of a mapping created after clear_refs is soft-dirty");
	return ktap_finish();
}
