/* Pages written full of zeros are left out of the images, and come back as
 * zeros: private anonymous memory only, where a restore's fresh memory is
 * zeros.  A private file mapping's copied page that holds zeros must be
 * saved all the same (left out, it would come back as the file's data).
 *
 * 64 MiB of private anonymous memory are written with a pattern, then
 * every page but one in 7 is zeroed again; one page keeps only its last
 * byte.  A private mapping of a file of 0xab bytes gets two of its pages
 * zeroed (copied on write).  The runner bounds the image size
 * (--max-image-kb): 64 MiB would be written without the check for zeros.
 *
 * With `pre` the zeroing comes after the pre-dump (crrun --pre-dumps 1:
 * SIGUSR2): the pre-dump holds the pattern, and the pages zeroed since
 * must come back as zeros, not as the pre-dump's data. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crt.h"
#include "zeropat.h"

#define PG     ZP_PG
#define NPAGES (16384UL) /* 64 MiB */
#define FPAGES 16

static volatile unsigned char *anon, *fmap;

static void zero_them(void)
{
	zp_zero(anon, NPAGES);
	memset((void *)(fmap + 3 * PG), 0, PG);
	memset((void *)(fmap + 9 * PG), 0, PG);
}

int main(int argc, char **argv)
{
	bool pre = argc > 1 && !strcmp(argv[1], "pre");
	unsigned char buf[PG];
	sigset_t set;
	int fd, sig, stage = 0;
	char name[32];

	crt_init();
	anon = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED)
		crt_fail("mmap failed");
	madvise((void *)anon, NPAGES * PG, MADV_NOHUGEPAGE);
	zp_write(anon, NPAGES);

	fd = open(crt_path("data"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	memset(buf, 0xab, sizeof(buf));
	for (int i = 0; i < FPAGES; i++)
		if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
			crt_fail("cannot write the data file");
	fmap = mmap(NULL, FPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (fmap == MAP_FAILED)
		crt_fail("mmap of the file failed");
	close(fd);
	fmap[0] = 0xab; /* a copied page that is not zeros */

	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (!pre)
		zero_them();
	crt_ready();
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		if (sig == SIGTERM)
			break;
		/* after the pre-dump */
		zero_them();
		snprintf(name, sizeof(name), "stage-%d", ++stage);
		fd = open(crt_path(name), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	}

	for (unsigned long i = 0; i < NPAGES; i++) {
		for (unsigned long k = 0; k < PG; k++) {
			unsigned char want = zp_want(i, k);

			crt_check(anon[i * PG + k] == want,
				  "anonymous page %lu byte %lu: %#x, not %#x", i, k,
				  anon[i * PG + k], want);
		}
	}
	for (unsigned long i = 0; i < FPAGES; i++)
		for (unsigned long k = 0; k < PG; k++) {
			unsigned char want = i == 3 || i == 9 ? 0 : 0xab;

			crt_check(fmap[i * PG + k] == want,
				  "page %lu of the private file mapping, byte %lu: %#x, not %#x", i,
				  k, fmap[i * PG + k], want);
		}
	crt_pass();
}
