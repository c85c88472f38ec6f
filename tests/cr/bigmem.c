/* A process with 1 GiB (or argv[1] MiB) of touched memory: the contents
 * after the restore match a checksum taken before the dump.  "bigmem N
 * holes": only every other MiB is touched (one mapping, many runs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "crt.h"

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	size_t words = mib * (1 << 20) / 8, mib_words = (1 << 20) / 8;
	int holes = argc > 2 && !strcmp(argv[2], "holes");
	uint64_t *p, x = 0x9e3779b97f4a7c15ULL, sum = 0, now = 0;

	crt_init();
	p = mmap(NULL, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		crt_fail("cannot map %zu MiB", mib);
	for (size_t i = 0; i < words; i++) {
		if (holes && (i / mib_words) % 2) {
			i += mib_words - 1;
			continue;
		}
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
	/* the holes read as zeros (the zero page: nothing to dump) */
	for (size_t i = 0; i < words; i++)
		sum = sum * 31 + p[i];
	crt_msg("%zu MiB %s", mib, holes ? "mapped, every other MiB filled" : "filled");
	crt_ready();
	crt_wait_term();
	for (size_t i = 0; i < words; i++)
		now = now * 31 + p[i];
	crt_check(now == sum, "checksum of %zu MiB differs after the restore", mib);
	crt_pass();
}
