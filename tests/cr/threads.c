/* Eight threads survive, each with its tid, its registers, its signal mask,
 * its TLS and its name, while blocked in a futex (condition variable), in
 * nanosleep, in read, or computing.  After the restore every thread is
 * woken, checks its own state, and is joined (which relies on the tid
 * address the kernel clears at thread exit). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "crt.h"

#define NT 8

enum kind { K_FUTEX, K_SLEEP, K_READ, K_COMPUTE };

struct th {
	pthread_t pt;
	int idx;
	enum kind kind;
	pid_t tid;
	int fd;
	volatile int ready;
	char result[160];
	uint64_t work;
};

static struct th ths[NT];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int done;
static __thread uint64_t tls;
static __thread volatile sig_atomic_t poked;

static void on_usr1(int s)
{
	(void)s;
	poked = 1;
}

static void *thread_main(void *arg)
{
	struct th *t = arg;
	sigset_t mine, now;
	char name[16], path[96], comm[32] = "";
	uint64_t expect_tls;
	int fd;

	t->tid = syscall(SYS_gettid);
	tls = 0xabcdef00ULL + t->idx;
	expect_tls = tls;
	sigemptyset(&mine);
	sigaddset(&mine, SIGRTMIN + t->idx);
	pthread_sigmask(SIG_SETMASK, &mine, NULL);
	snprintf(name, sizeof(name), "worker-%d", t->idx);
	pthread_setname_np(pthread_self(), name);
	t->ready = 1;

	switch (t->kind) {
	case K_FUTEX:
		pthread_mutex_lock(&mu);
		while (!done)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		break;
	case K_SLEEP:
		while (!done) {
			struct timespec ts = { 3600, 0 };
			nanosleep(&ts, NULL);
		}
		break;
	case K_READ:
		while (!done) {
			char c;
			ssize_t n = read(t->fd, &c, 1);

			if (n < 0 && errno != EINTR) {
				snprintf(t->result, sizeof(t->result), "read: %s", strerror(errno));
				return NULL;
			}
		}
		break;
	case K_COMPUTE:
		while (!done)
			t->work = t->work * 6364136223846793005ULL + 1442695040888963407ULL;
		break;
	}

	if (syscall(SYS_gettid) != t->tid)
		snprintf(t->result, sizeof(t->result), "tid changed from %d to %ld", t->tid,
			 syscall(SYS_gettid));
	else if (tls != expect_tls)
		snprintf(t->result, sizeof(t->result), "TLS changed");
	else if (pthread_sigmask(SIG_SETMASK, NULL, &now) ||
		 sigismember(&now, SIGRTMIN + t->idx) != 1 ||
		 sigismember(&now, SIGRTMIN + (t->idx + 1) % NT) != 0)
		snprintf(t->result, sizeof(t->result), "signal mask changed");
	else {
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", t->tid);
		fd = open(path, O_RDONLY);
		if (fd >= 0) {
			ssize_t n = read(fd, comm, sizeof(comm) - 1);
			comm[n > 0 ? n : 0] = 0;
			close(fd);
		}
		comm[strcspn(comm, "\n")] = 0;
		if (strcmp(comm, name))
			snprintf(t->result, sizeof(t->result), "name is '%s', expected '%s'", comm,
				 name);
		else
			snprintf(t->result, sizeof(t->result), "ok");
	}
	return NULL;
}

static int task_ids(pid_t *ids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && n < max)
			ids[n++] = atoi(de->d_name);
	if (d)
		closedir(d);
	return n;
}

static int cmp(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

int main(void)
{
	struct sigaction sa;
	pid_t before[NT + 8], after[NT + 8];
	int nb, na;

	crt_init();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: blocking calls return EINTR */

	for (int i = 0; i < NT; i++) {
		ths[i].idx = i;
		ths[i].kind = (enum kind)(i % 4);
		ths[i].fd = -1;
		if (ths[i].kind == K_READ) {
			ths[i].fd = posix_openpt(O_RDWR | O_NOCTTY);
			if (ths[i].fd < 0)
				crt_fail("posix_openpt: %s", strerror(errno));
		}
		if (pthread_create(&ths[i].pt, NULL, thread_main, &ths[i]))
			crt_fail("pthread_create failed");
	}
	for (int i = 0; i < NT; i++)
		while (!ths[i].ready)
			usleep(1000);
	usleep(50000); /* let them block */
	nb = task_ids(before, NT + 8);
	qsort(before, nb, sizeof(pid_t), cmp);
	crt_check(nb == NT + 1, "%d threads before the dump", nb);

	crt_ready();
	crt_wait_term();

	na = task_ids(after, NT + 8);
	qsort(after, na, sizeof(pid_t), cmp);
	crt_check(na == nb && !memcmp(before, after, nb * sizeof(pid_t)),
		  "the set of thread ids changed (%d threads now)", na);

	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int round = 0; round < 50; round++)
		for (int i = 0; i < NT; i++)
			if (ths[i].kind == K_SLEEP || ths[i].kind == K_READ)
				pthread_kill(ths[i].pt, SIGUSR1);
	for (int i = 0; i < NT; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 20;
		crt_check(pthread_timedjoin_np(ths[i].pt, NULL, &ts) == 0,
			  "thread %d (tid %d) could not be joined", i, ths[i].tid);
		crt_check(!strcmp(ths[i].result, "ok"), "thread %d (tid %d): %s", i, ths[i].tid,
			  ths[i].result);
	}
	crt_pass();
}
