/* Pages a child shares copy-on-write with its parent are still shared after
 * the restore (issue 26), as in a prefork server whose workers share the
 * master's heap.  The parent fills 32 MiB, then forks:
 *   c1: writes pages 0-99 (its own now), drops 100-149 (zeros again),
 *       makes the last 256 pages read-only (two mappings inside the
 *       parent's one), and forks g, which writes 200-209;
 *   c2: writes every page (shares nothing);
 * and the parent writes 300-309 after the forks (the children keep the
 * old contents there).  Before the dump and after the restore the parent
 * reads the frames of every page of the four processes
 * (/proc/PID/pagemap, root only) and checks exactly which are shared, and
 * that the tree's proportional set size did not grow; then each process
 * checks its contents.
 *
 * argv[1] "noshare": the same tree, where no page is shared (c1 and g
 * write every page): nothing may come back shared.
 * argv[1] "pre": the parent writes 300-309 after a pre-dump (SIGUSR2),
 * which must have left every shared page shared (it reads the pages of a
 * running tree); the dump that follows then finds those changed. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define NPAGES 8192
#define PG     4096UL
#define RO_AT  (NPAGES - 256)

static unsigned char *area;
static bool noshare, pre;

/* the word at the start of page i as process `who` wrote it */
static uint64_t word(char who, size_t i)
{
	return crt_hash(&i, sizeof(i), (uint64_t)who * 0x9e3779b97f4a7c15ULL);
}

static void fill(char who, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		uint64_t w = word(who, i);

		memset(area + i * PG, who, PG);
		memcpy(area + i * PG, &w, sizeof(w));
	}
}

/* which process's data page i must hold in process `me` ('0': zeros) */
static char expect(char me, size_t i)
{
	if (me == 'p')
		return i >= 300 && i < 310 ? 'P' : 'p';
	if (me == '2')
		return '2';
	if (noshare)
		return me == 'g' && i >= 200 && i < 210 ? 'g' : '1';
	if (i < 100)
		return '1';
	if (i < 150)
		return '0';
	if (me == 'g' && i >= 200 && i < 210)
		return 'g';
	return 'p';
}

static int check_contents(char me)
{
	for (size_t i = 0; i < NPAGES; i++) {
		char who = expect(me, i);
		unsigned char *pg = area + i * PG;
		uint64_t w = who == '0' ? 0 : word(who, i);

		if (memcmp(pg, &w, sizeof(w)) || pg[8] != (who == '0' ? 0 : (unsigned char)who) ||
		    pg[PG - 1] != pg[8]) {
			crt_msg("%c: page %zu holds the wrong data (expected %c's)", me, i, who);
			return 1;
		}
	}
	return 0;
}

/* a child: says it is set up, waits for the word to check, checks */
static void child_wait(int ready, int go, char me)
{
	char b = me;

	if (write(ready, &b, 1) != 1)
		_exit(3);
	if (read(go, &b, 1) != 1)
		_exit(4);
	_exit(check_contents(me) ? 1 : 0);
}

static void pfns(pid_t pid, uint64_t *out)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, out, NPAGES * 8, (uintptr_t)area / PG * 8) != NPAGES * 8)
		crt_fail("cannot read %s: %s", path, strerror(errno));
	close(fd);
	for (size_t i = 0; i < NPAGES; i++)
		out[i] = out[i] >> 63 ? out[i] & ((1ULL << 55) - 1) : 0;
}

/* pages present in both with the same frame */
static size_t shared(const uint64_t *a, const uint64_t *b, size_t from, size_t to)
{
	size_t n = 0;

	for (size_t i = from; i < to; i++)
		n += a[i] && a[i] == b[i];
	return n;
}

static long pss_kb(pid_t pid)
{
	char path[64], *s, *p;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	s = crt_read_file(path, NULL);
	if (s && (p = strstr(s, "\nPss:")))
		kb = strtol(p + 5, NULL, 10);
	free(s);
	return kb;
}

static uint64_t f[4][NPAGES];

/* what is shared between p, c1, g and c2 */
static void check_sharing(const char *when, const pid_t *pid)
{
	size_t p1, c1g, c2, pg, present = 0;

	for (int k = 0; k < 4; k++)
		pfns(pid[k], f[k]);
	if (!f[0][0])
		crt_fail("%s: no page frame numbers in /proc/PID/pagemap (not root?)", when);
	p1 = shared(f[0], f[1], 0, NPAGES);
	pg = shared(f[0], f[2], 0, NPAGES);
	c1g = shared(f[1], f[2], 0, NPAGES);
	c2 = shared(f[0], f[3], 0, NPAGES) + shared(f[1], f[3], 0, NPAGES);
	for (size_t i = 100; i < 150; i++)
		present += !!f[1][i];
	crt_msg("%s: parent and c1 share %zu pages, c1 and g %zu, parent and g %zu, c2 %zu", when,
		p1, c1g, pg, c2);
	crt_check(!c2, "%s: c2 shares %zu pages, having written all", when, c2);
	if (noshare) {
		crt_check(!p1 && !pg, "%s: pages are shared with the parent (%zu, %zu)", when, p1,
			  pg);
		crt_check(c1g == NPAGES - 10, "%s: c1 and g share %zu pages, not %d", when, c1g,
			  NPAGES - 10);
		return;
	}
	/* all but 0-149 (c1's own or dropped) and 300-309 (the parent's since) */
	crt_check(p1 == NPAGES - 160, "%s: the parent and c1 share %zu pages, not %d", when, p1,
		  NPAGES - 160);
	/* those, less 200-209 (g's own) */
	crt_check(pg == NPAGES - 170, "%s: the parent and g share %zu pages, not %d", when, pg,
		  NPAGES - 170);
	/* c1's own pages too: all it has, but g's own */
	crt_check(c1g == NPAGES - 60, "%s: c1 and g share %zu pages, not %d", when, c1g,
		  NPAGES - 60);
	crt_check(shared(f[0], f[1], RO_AT, NPAGES) == 256,
		  "%s: c1's read-only part is not the parent's", when);
	crt_check(!present, "%s: %zu of the pages c1 dropped are there", when, present);
}

int main(int argc, char **argv)
{
	int ready[2], go[2], st;
	pid_t pid[4];
	long pss0 = 0, pss1 = 0;
	char b;

	crt_init();
	noshare = argc > 1 && !strcmp(argv[1], "noshare");
	pre = argc > 1 && !strcmp(argv[1], "pre");
	area = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED || pipe(ready) || pipe(go))
		crt_fail("setup: %s", strerror(errno));
	fill('p', 0, NPAGES);
	pid[0] = getpid();
	pid[1] = fork();
	if (pid[1] == 0) {
		int gst;
		pid_t g;

		fill('1', 0, noshare ? NPAGES : 100);
		if (!noshare && madvise(area + 100 * PG, 50 * PG, MADV_DONTNEED))
			_exit(5);
		if (mprotect(area + RO_AT * PG, (NPAGES - RO_AT) * PG, PROT_READ))
			_exit(5);
		g = fork();
		if (g == 0) {
			fill('g', 200, 210);
			child_wait(ready[1], go[0], 'g');
		}
		if (g < 0)
			_exit(6);
		if (write(ready[1], "1", 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(4);
		st = check_contents('1');
		if (waitpid(g, &gst, 0) != g || !WIFEXITED(gst) || WEXITSTATUS(gst))
			_exit(7);
		_exit(st);
	}
	crt_own_child(pid[1]);
	pid[3] = fork();
	if (pid[3] == 0) {
		fill('2', 0, NPAGES);
		child_wait(ready[1], go[0], '2');
	}
	crt_own_child(pid[3]);
	for (int k = 0; k < 4 - 1; k++)
		crt_check(read(ready[0], &b, 1) == 1, "a child did not start");
	if (!pre)
		fill('P', 300, 310);
	/* g is c1's only child */
	{
		char path[64], *s;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid[1], pid[1]);
		s = crt_read_file(path, NULL);
		pid[2] = s ? atoi(s) : 0;
		free(s);
		crt_check(pid[2] > 0, "cannot find c1's child");
	}
	if (pre) {
		sigset_t set;
		int sig = 0, fd;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &set, NULL);
		crt_ready();
		while (sigwait(&set, &sig) || sig != SIGUSR2)
			;
		fill('P', 300, 310);
		check_sharing("after the pre-dump", pid);
		for (int k = 0; k < 4; k++)
			pss0 += pss_kb(pid[k]);
		fd = open(crt_path("stage-1"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	} else {
		check_sharing("before", pid);
		for (int k = 0; k < 4; k++)
			pss0 += pss_kb(pid[k]);
		crt_ready();
	}
	crt_wait_term();

	check_sharing("after", pid);
	for (int k = 0; k < 4; k++)
		pss1 += pss_kb(pid[k]);
	crt_msg("the tree's Pss: %ld kB before, %ld kB after", pss0, pss1);
	/* the restore adds nothing of size: 1 MiB and 5% of slack */
	crt_check(pss1 <= pss0 + pss0 / 20 + 1024, "the tree's Pss grew from %ld kB to %ld kB",
		  pss0, pss1);
	crt_check(write(go[1], "ggg", 3) == 3, "cannot wake the children");
	crt_check(!check_contents('p'), "the parent's pages changed");
	crt_check(waitpid(pid[1], &st, 0) == pid[1] && WIFEXITED(st) && !WEXITSTATUS(st),
		  "c1 or g found wrong data (%#x)", st);
	crt_check(waitpid(pid[3], &st, 0) == pid[3] && WIFEXITED(st) && !WEXITSTATUS(st),
		  "c2 found wrong data (%#x)", st);
	crt_pass();
}
