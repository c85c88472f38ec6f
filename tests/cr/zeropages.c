/* Only pages that hold data are written: 256 MiB are mapped, every page is
 * read and 16 pages are written.  The runner bounds the image size
 * (--max-image-kb); the test checks that the written pages survived and the
 * read ones are still zero.  A read maps the shared zero page, which the
 * dump skips by its pfn without reading it; a kernel that gives a read
 * fault a frame of its own instead (seen: 6.18.44-fc) has the dump find
 * those pages' zeros by reading them (zerofill tests that on its own). */
#include <string.h>
#include <sys/mman.h>

#include "crt.h"

#define PG   4096UL
#define SIZE (256UL << 20)

int main(void)
{
	volatile unsigned char *p;
	unsigned long sum = 0;

	crt_init();
	p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		crt_fail("mmap failed");
	madvise((void *)p, SIZE, MADV_NOHUGEPAGE);
	for (unsigned long off = 0; off < SIZE; off += PG)
		sum += p[off];
	for (int i = 0; i < 16; i++)
		memset((void *)(p + i * 997 * PG), 0x40 + i, PG);
	crt_ready();
	crt_wait_term();
	crt_check(sum == 0, "fresh memory was not zero");
	for (int i = 0; i < 16; i++)
		for (unsigned long k = 0; k < PG; k++)
			crt_check(p[i * 997 * PG + k] == 0x40 + i, "written page %d changed", i);
	for (unsigned long off = 0; off < SIZE; off += PG)
		sum += p[off] ? (off / PG % 997 ? 1 : 0) : 0;
	crt_check(sum == 0, "a page that was never written is not zero");
	crt_pass();
}
