/* Two private anonymous mappings side by side, alike in everything
 * /proc/PID/maps shows, but separate VMAs (each has its own anon_vma: the
 * second was filled elsewhere and moved next to the first with mremap; a
 * mapping inherited through fork is another way to get there).  A restore
 * that maps them plainly one after the other gets them merged into one.
 * Checks: the same two entries in maps after the restore, both contents. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crt.h"

#define PG 4096

/* the maps lines covering [a, b), joined */
static void maps_of(uintptr_t a, uintptr_t b, char *out, size_t len)
{
	char *m = crt_read_file("/proc/self/maps", NULL), *l, *save = NULL;

	out[0] = 0;
	for (l = strtok_r(m, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned long s, e;

		if (sscanf(l, "%lx-%lx", &s, &e) == 2 && s < b && e > a) {
			strncat(out, l, len - strlen(out) - 2);
			strcat(out, "\n");
		}
	}
	free(m);
}

int main(void)
{
	char before[1024], after[1024];
	unsigned char *a, *b, *moved;
	int lines = 0;

	crt_init();
	/* room for both, then the second half given back */
	a = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	crt_check(a != MAP_FAILED, "mmap");
	munmap(a + 4 * PG, 4 * PG);
	memset(a, 0x5a, 4 * PG);
	/* far from the first, so that it cannot merge with it there */
	b = MAP_FAILED;
	for (uintptr_t d = 1UL << 32; b == MAP_FAILED && d < 1UL << 40; d <<= 1)
		b = mmap(a - d, 4 * PG, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	crt_check(b != MAP_FAILED, "mmap");
	memset(b, 0xa5, 4 * PG);
	moved = mremap(b, 4 * PG, 4 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, a + 4 * PG);
	crt_check(moved == a + 4 * PG, "mremap next to the first mapping");
	maps_of((uintptr_t)a, (uintptr_t)a + 8 * PG, before, sizeof(before));
	for (char *p = before; (p = strchr(p, '\n')); p++)
		lines++;
	crt_check(lines == 2, "setup: expected two separate mappings, maps shows:\n%s", before);
	crt_msg("before:\n%s", before);

	crt_ready();
	crt_wait_term();

	maps_of((uintptr_t)a, (uintptr_t)a + 8 * PG, after, sizeof(after));
	crt_check(!strcmp(before, after), "the mappings changed: before\n%safter\n%s", before,
		  after);
	for (int i = 0; i < 4 * PG; i++)
		crt_check(a[i] == 0x5a && a[4 * PG + i] == 0xa5, "contents differ at %d", i);
	crt_pass();
}
