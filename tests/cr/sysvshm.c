/* System V shared memory survives: a parent and its child share two
 * segments.
 *   A: IPC_PRIVATE, 1 MiB, attached by both, then marked for removal
 *      (IPC_RMID): it must be marked again after the restore and vanish at
 *      the last detach.
 *   B: with a key, mode 0640, a size that is no multiple of the page size,
 *      locked in memory (SHM_LOCK), kept.  The parent's attach is split by an mprotect of its first page;
 *      the child detaches the attach it inherited and attaches B again with
 *      SHM_RDONLY.
 * After the restore the parent checks contents, ids, key, mode, owner and
 * nattch (IPC_STAT), the protections of the attaches (/proc/self/maps), and
 * sharing both ways: it writes into A and B, the child must see both and
 * answer through A.  Both then detach with shmdt, which must work, and A
 * must be gone.  The test removes B itself, whatever the verdict. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define ASZ (1 << 20)
#define BSZ (3 * 4096 + 100)

static int ida = -1, idb = -1;
static pid_t owner;

static void remove_b(void)
{
	if (getpid() == owner && idb >= 0)
		shmctl(idb, IPC_RMID, NULL);
}

static volatile sig_atomic_t poked;
static void on_usr1(int s)
{
	(void)s;
	poked = 1;
}

/* the permissions column of the mapping at addr in /proc/self/maps */
static const char *perms_at(void *addr)
{
	static char perms[8];
	char *maps = crt_read_file("/proc/self/maps", NULL), *line;
	char want[32];

	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	perms[0] = 0;
	for (line = maps; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "")
		if (!strncmp(line, want, strlen(want))) {
			sscanf(line, "%*s %7s", perms);
			break;
		}
	free(maps);
	return perms;
}

static void stat_of(int id, struct shmid_ds *ds, const char *what)
{
	if (shmctl(id, IPC_STAT, ds))
		crt_fail("IPC_STAT of %s (id %d): %s", what, id, strerror(errno));
}

static int child_main(unsigned char *a, unsigned char *b_inherited)
{
	volatile uint64_t *ping = (uint64_t *)(a + ASZ - 64), *pong = (uint64_t *)(a + ASZ - 128);
	unsigned char *b;

	if (shmdt(b_inherited))
		return 10;
	b = shmat(idb, NULL, SHM_RDONLY);
	if (b == (void *)-1)
		return 11;
	for (int i = ASZ / 2; i < ASZ - 4096; i++)
		a[i] = (unsigned char)(i * 7);
	*pong = 1; /* set up */
	while (!crt_term && !poked)
		pause();
	if (!poked)
		return 3;
	/* after the restore: the parent's writes are seen through both */
	if (memcmp(b + BSZ - 8, "B-parent", 8))
		return 12;
	if (strcmp(perms_at(b), "r--s"))
		return 13;
	*pong = *ping; /* echo through A */
	if (shmdt(b) || shmdt(a))
		return 14;
	return 0;
}

int main(void)
{
	unsigned char *a, *b;
	volatile uint64_t *ping, *pong;
	struct shmid_ds ds;
	uint64_t ha, hb;
	unsigned long na, nb;
	key_t key;
	pid_t child;
	int st;

	crt_init();
	owner = getpid();
	atexit(remove_b);
	key = (key_t)(0x6b750000 | (getpid() & 0xffff));
	ida = shmget(IPC_PRIVATE, ASZ, IPC_CREAT | 0600);
	idb = shmget(key, BSZ, IPC_CREAT | IPC_EXCL | 0640);
	if (ida < 0 || idb < 0)
		crt_fail("shmget: %s", strerror(errno));
	a = shmat(ida, NULL, 0);
	b = shmat(idb, NULL, 0);
	if (a == (void *)-1 || b == (void *)-1)
		crt_fail("shmat: %s", strerror(errno));
	if (shmctl(idb, SHM_LOCK, NULL))
		crt_fail("SHM_LOCK: %s", strerror(errno));
	for (int i = 0; i < ASZ / 2; i++)
		a[i] = (unsigned char)(i * 3);
	for (int i = 0; i < BSZ; i++)
		b[i] = (unsigned char)(i * 5 + 1);
	ping = (uint64_t *)(a + ASZ - 64);
	pong = (uint64_t *)(a + ASZ - 128);
	/* split the attach of B in two mappings */
	if (mprotect(b, 4096, PROT_READ))
		crt_fail("mprotect: %s", strerror(errno));

	signal(SIGUSR1, on_usr1);
	child = fork();
	if (child < 0)
		crt_fail("fork: %s", strerror(errno));
	if (child == 0)
		_exit(child_main(a, b));
	crt_own_child(child);
	while (*pong != 1)
		usleep(1000);
	if (shmctl(ida, IPC_RMID, NULL))
		crt_fail("IPC_RMID: %s", strerror(errno));
	ha = crt_hash(a, ASZ - 4096, 0);
	hb = crt_hash(b, BSZ, 0);
	stat_of(ida, &ds, "A");
	na = ds.shm_nattch;
	stat_of(idb, &ds, "B");
	nb = ds.shm_nattch;
	crt_msg("A id %d nattch %lu, B id %d key %#x nattch %lu", ida, na, idb, (unsigned)key, nb);
	crt_ready();
	crt_wait_term();

	crt_check(crt_hash(a, ASZ - 4096, 0) == ha, "the contents of A changed");
	crt_check(crt_hash(b, BSZ, 0) == hb, "the contents of B changed");
	stat_of(ida, &ds, "A");
	crt_check(ds.shm_perm.__key == IPC_PRIVATE && (ds.shm_perm.mode & SHM_DEST),
		  "A is no longer marked for removal (key %#x, mode %#o)",
		  (unsigned)ds.shm_perm.__key, ds.shm_perm.mode);
	crt_check((ds.shm_perm.mode & 0777) == 0600 && ds.shm_segsz == ASZ,
		  "A has mode %#o and %zu bytes", ds.shm_perm.mode & 0777, (size_t)ds.shm_segsz);
	crt_check(ds.shm_nattch == na, "A is attached %lu times, was %lu",
		  (unsigned long)ds.shm_nattch, na);
	stat_of(idb, &ds, "B");
	crt_check(ds.shm_perm.__key == key && !(ds.shm_perm.mode & SHM_DEST),
		  "B has key %#x (mode %#o), expected %#x", (unsigned)ds.shm_perm.__key,
		  ds.shm_perm.mode, (unsigned)key);
	crt_check(ds.shm_perm.mode & SHM_LOCKED, "B is no longer locked (mode %#o)",
		  ds.shm_perm.mode);
	crt_check((ds.shm_perm.mode & 0777) == 0640 && ds.shm_segsz == BSZ,
		  "B has mode %#o and %zu bytes", ds.shm_perm.mode & 0777, (size_t)ds.shm_segsz);
	crt_check(ds.shm_perm.uid == getuid() && ds.shm_perm.gid == getgid(), "B belongs to %d:%d",
		  ds.shm_perm.uid, ds.shm_perm.gid);
	crt_check(ds.shm_nattch == nb, "B is attached %lu times, was %lu",
		  (unsigned long)ds.shm_nattch, nb);
	crt_check(shmget(key, 0, 0) == idb, "the key of B leads to %d, not %d", shmget(key, 0, 0),
		  idb);
	crt_check(!strcmp(perms_at(a), "rw-s"), "A is mapped %s", perms_at(a));
	crt_check(!strcmp(perms_at(b), "r--s"), "the first page of B is mapped %s", perms_at(b));
	crt_check(!strcmp(perms_at(b + 4096), "rw-s"), "the rest of B is mapped %s",
		  perms_at(b + 4096));

	/* sharing, both ways */
	memcpy(b + BSZ - 8, "B-parent", 8);
	*ping = 0x5eedf00dULL;
	kill(child, SIGUSR1);
	crt_check(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the child ended with %#x", st);
	crt_check(*pong == 0x5eedf00dULL,
		  "the child did not answer through A: it is no longer shared (%#lx)",
		  (unsigned long)*pong);

	/* detaches work, and A goes with the last */
	crt_check(!shmdt(b), "shmdt of B: %s", strerror(errno));
	stat_of(idb, &ds, "B");
	crt_check(ds.shm_nattch == 0, "B is still attached %lu times after the detaches",
		  (unsigned long)ds.shm_nattch);
	crt_check(!shmdt(a), "shmdt of A: %s", strerror(errno));
	crt_check(shmctl(ida, IPC_STAT, &ds) < 0 && (errno == EINVAL || errno == EIDRM),
		  "A outlived its last detach");
	crt_pass();
}
