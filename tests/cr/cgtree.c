/* A delegated control group subtree and a cgroup namespace made inside the
 * tree (a container's, as nspawn's payload with its init's own group):
 * below the root's group the test makes T, T/a and T/b; the root's child
 * A moves into T, makes a cgroup namespace there (T its root), and moves
 * into T/a; its child B moves into T/b.  Where the kernel lets T enable
 * the pids controller for its children, T/b gets pids.max 7.
 *
 * After the restore (with --rmdirs-file the groups are removed after each
 * dump, as a new boot has none): A and B in the same groups, seen from
 * the root (T/a, T/b) and from inside their namespace (/a, /b); A and B
 * in one cgroup namespace, not the root's; T's controllers and T/b's
 * pids.max as they were.
 *
 * "flat": A makes its cgroup namespace in the root's own group, B stays
 * there too: both see themselves at "/" after the restore.
 *
 * A watches B's cgroup.events (IN_MODIFY, as systemd watches its units'):
 * the watch survives the restore, whose groups are new files (with
 * --rmdirs-file), and once B ends after it (T/b no longer populated) A
 * gets the event on it ("flat": the root's group's cgroup.controllers, which a
 * top group has too, no event).
 * "queued": A watches T's events instead (its namespace's root, which
 * holds no process itself), and reads nothing before the dump; the test
 * freezes and thaws T then, which queues events on the watch (as the
 * freeze of a container's unit queues them on its systemd's watches);
 * after the restore A gets an event on the watch (made again: a freeze
 * and thaw of T; nothing else changes T's events then, populated since
 * A's birth: without it, no event, seen).
 * "emptywatch": A watches the cgroup.events of T/e, which holds no
 * process (as systemd watches its slices): T/e is made again too.
 *
 * "super": the root moves itself into T/super, beside the container, as
 * systemd-nspawn does in its unit's group; A's namespace is rooted at
 * T/ctr, A in T/ctr/a, B in T/ctr/b.  The restore is given T as the
 * root's place (--cgroup ROOT=T, written to the file "cgroup"): the root
 * is born in T/super again, A and B below T/ctr. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static struct shared {
	volatile int ready, done, b_end;
	char a_in[256], b_in[256], msg[600];
} * sh;

static char t[1200], host_t[600], nsroot[1250];
static bool pids, flat, super, emptywatch, queued;

static int move_to(const char *dir)
{
	char p[1300];
	int fd, ok;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	fd = open(p, O_WRONLY);
	ok = fd >= 0 && write(fd, "0", 1) == 1;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

static void rm_groups(void)
{
	char p[1300];

	snprintf(p, sizeof(p), "%s/b", nsroot);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/a", nsroot);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/e", nsroot);
	rmdir(p);
	if (super) {
		/* the root leaves T/super first */
		snprintf(p, sizeof(p), "%s/..", t);
		move_to(p);
		rmdir(nsroot);
		snprintf(p, sizeof(p), "%s/super", t);
		rmdir(p);
	}
	rmdir(t);
}

static unsigned long ns_ino(pid_t pid)
{
	char p[64];
	struct stat st;

	snprintf(p, sizeof(p), "/proc/%d/ns/cgroup", pid);
	return stat(p, &st) ? 0 : st.st_ino;
}

static void __attribute__((noreturn)) b_main(void)
{
	char dir[1300];

	snprintf(dir, sizeof(dir), "%s/b", nsroot);
	if (!flat && move_to(dir))
		_exit(3);
	snprintf(sh->b_in, sizeof(sh->b_in), "%s", crt_cgroup_of(getpid()));
	while (!sh->done || (queued && !sh->b_end))
		usleep(10000);
	/* after the restore: its view again */
	_exit(strcmp(crt_cgroup_of(getpid()), sh->b_in) ? 4 : 0);
}

static void __attribute__((noreturn)) a_main(void)
{
	char dir[1300], ev[1400], buf[4096] __attribute__((aligned(8)));
	struct pollfd pf;
	bool got;
	pid_t b;
	int st, in, w;

	snprintf(dir, sizeof(dir), "%s/a", nsroot);
	if (flat ? unshare(CLONE_NEWCGROUP)
		 : move_to(nsroot) || unshare(CLONE_NEWCGROUP) || move_to(dir))
		_exit(2);
	b = fork();
	if (b == 0)
		b_main();
	while (!sh->b_in[0])
		usleep(10000);
	/* B's group's events (T/e's: emptywatch), as seen from the root */
	if (flat) /* the root's group, where B stays */
		snprintf(ev, sizeof(ev), "%s/../cgroup.controllers", t);
	else
		snprintf(ev, sizeof(ev), "%s/%s/cgroup.events", nsroot,
			 emptywatch ? "e"
			 : queued   ? "."
				    : "b");
	in = inotify_init1(IN_CLOEXEC);
	w = in < 0 ? -1 : inotify_add_watch(in, ev, IN_MODIFY);
	if (w < 0)
		_exit(5);
	snprintf(sh->a_in, sizeof(sh->a_in), "%s", crt_cgroup_of(getpid()));
	sh->ready = 1;
	while (!sh->done)
		usleep(10000);
	/* queued: made again, before B ends */
	pf = (struct pollfd){ .fd = in, .events = POLLIN };
	got = !queued || (poll(&pf, 1, 3000) == 1 && read(in, buf, sizeof(buf)) >= 16 &&
			  ((struct inotify_event *)buf)->wd == w &&
			  (((struct inotify_event *)buf)->mask & IN_MODIFY));
	sh->b_end = 1;
	if (!got)
		snprintf(sh->msg, sizeof(sh->msg),
			 "the event queued at the dump on A's watch of %.300s was not made again",
			 ev);
	else if (strcmp(crt_cgroup_of(getpid()), sh->a_in))
		snprintf(sh->msg, sizeof(sh->msg), "A sees itself in %s, not %s",
			 crt_cgroup_of(getpid()), sh->a_in);
	else if (waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st))
		snprintf(sh->msg, sizeof(sh->msg), "B: status %#x (4: it sees another group)", st);
	/* B gone, T/b no longer populated: its cgroup.events changed (flat:
	 * the root's group is still populated, no event) */
	else if (!flat && !emptywatch && !queued &&
		 (pf = (struct pollfd){ .fd = in, .events = POLLIN },
		  poll(&pf, 1, 3000) != 1 || read(in, buf, sizeof(buf)) < 16 ||
			  ((struct inotify_event *)buf)->wd != w ||
			  !(((struct inotify_event *)buf)->mask & IN_MODIFY)))
		snprintf(sh->msg, sizeof(sh->msg),
			 "A's watch of %.300s gave no IN_MODIFY within 3 s of B's end", ev);
	_exit(sh->msg[0] ? 1 : 0);
}

/* dir's cgroup.freeze set to v, and its cgroup.events saying so */
static int freeze(const char *dir, const char *v)
{
	char p[1300], want[16], *ev = NULL;
	bool ok = false;
	FILE *f;

	snprintf(p, sizeof(p), "%s/cgroup.freeze", dir);
	f = fopen(p, "w");
	if (!f || fputs(v, f) < 0 || fclose(f))
		return -1;
	snprintf(p, sizeof(p), "%s/cgroup.events", dir);
	snprintf(want, sizeof(want), "frozen %s", v);
	for (int i = 0; i < 500 && !ok; i++) {
		ev = crt_read_file(p, NULL);
		ok = ev && strstr(ev, want);
		free(ev);
		if (!ok)
			usleep(10000);
	}
	return ok ? 0 : -1;
}

static char *knob(const char *dir, const char *name)
{
	char p[1300], *s;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	s = crt_read_file(p, NULL);
	if (s)
		s[strcspn(s, "\n")] = 0;
	return s;
}

int main(int argc, char **argv)
{
	char mnt[512], own[512], p[1300], want[700];
	pid_t a;
	FILE *f;

	flat = argc > 1 && !strcmp(argv[1], "flat");
	super = argc > 1 && !strcmp(argv[1], "super");
	emptywatch = argc > 1 && !strcmp(argv[1], "emptywatch");
	queued = argc > 1 && !strcmp(argv[1], "queued");
	crt_init();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		crt_fail("mmap: %s", strerror(errno));
	if (crt_cgroup2_mount(mnt, sizeof(mnt)))
		crt_skip("no cgroup2 mount");
	snprintf(own, sizeof(own), "%s", crt_cgroup_of(getpid()));
	snprintf(host_t, sizeof(host_t), "%s/kupdate-cgt-%d", strcmp(own, "/") ? own : "",
		 getpid());
	snprintf(t, sizeof(t), "%s%s", mnt, host_t);
	if (mkdir(t, 0755))
		crt_skip("cannot make the control group %s: %s", t, strerror(errno));
	snprintf(nsroot, sizeof(nsroot), "%s%s", t, super ? "/ctr" : "");
	atexit(rm_groups);
	if (super) {
		snprintf(p, sizeof(p), "%s/super", t);
		if (mkdir(p, 0755) || mkdir(nsroot, 0755))
			crt_fail("mkdir %s and %s: %s", p, nsroot, strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/a", nsroot);
	if (mkdir(p, 0755))
		crt_fail("mkdir %s: %s", p, strerror(errno));
	snprintf(p, sizeof(p), "%s/b", nsroot);
	if (mkdir(p, 0755))
		crt_fail("mkdir %s: %s", p, strerror(errno));
	snprintf(p, sizeof(p), "%s/e", nsroot);
	if (emptywatch && mkdir(p, 0755))
		crt_fail("mkdir %s: %s", p, strerror(errno));
	/* the pids controller for T's children, where the root's group has it */
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", nsroot);
	f = fopen(p, "w");
	pids = f && fputs("+pids", f) >= 0 && fflush(f) == 0;
	if (f)
		fclose(f);
	if (pids) {
		snprintf(p, sizeof(p), "%s/b/pids.max", nsroot);
		f = fopen(p, "w");
		pids = f && fputs("7", f) >= 0 && fflush(f) == 0;
		if (f)
			fclose(f);
	}
	crt_msg("the pids controller %s", pids ? "enabled for T's children, T/b's pids.max 7"
					       : "not available below the test's group");
	f = fopen(crt_path("cgdirs"), "w");
	if (!f || fprintf(f, "%s\n%s/a\n%s/b\n", t, t, t) < 0 ||
	    (emptywatch && fprintf(f, "%s/e\n", t) < 0) || fclose(f))
		crt_fail("cannot write %s", crt_path("cgdirs"));
	if (super) {
		f = fopen(crt_path("cgroup"), "w");
		if (!f || fprintf(f, "%d=%s\n", getpid(), t) < 0 || fclose(f))
			crt_fail("cannot write %s", crt_path("cgroup"));
		snprintf(p, sizeof(p), "%s/super", t);
		if (move_to(p))
			crt_fail("cannot move into %s: %s", p, strerror(errno));
	}
	a = fork();
	if (a == 0)
		a_main();
	crt_own_child(a);
	for (int i = 0; !sh->ready; i++) {
		if (i > 1000 || waitpid(a, NULL, WNOHANG) == a)
			crt_fail("A did not get into its groups and namespace in 10 s");
		usleep(10000);
	}
	/* queued: events on A's watch of T, which it does not read */
	if (queued) {
		snprintf(p, sizeof(p), "%s", nsroot);
		if (freeze(p, "1") || freeze(p, "0"))
			crt_fail("cannot freeze and thaw %s", p);
	}
	crt_ready();
	crt_wait_term();

	snprintf(want, sizeof(want), "%s%s/a", host_t, super ? "/ctr" : "");
	if (super)
		crt_check(!strcmp(crt_cgroup_of(getpid()), strcat(strcpy(p, host_t), "/super")),
			  "the root is in %s, not %s", crt_cgroup_of(getpid()), p);
	if (flat)
		snprintf(want, sizeof(want), "%s", own);
	crt_check(!strcmp(crt_cgroup_of(a), want), "A is in %s, not %s", crt_cgroup_of(a), want);
	crt_check(!strcmp(sh->a_in, flat ? "/" : "/a") && !strcmp(sh->b_in, flat ? "/" : "/b"),
		  "before the dump A and B saw themselves in %s and %s", sh->a_in, sh->b_in);
	crt_check(ns_ino(a) && ns_ino(a) != ns_ino(getpid()),
		  "A is in the root's cgroup namespace");
	snprintf(p, sizeof(p), "%s/e", nsroot);
	crt_check(!emptywatch || !access(p, F_OK), "%s, which A watches, was not made again", p);
	if (pids) {
		char *ctl = knob(nsroot, "cgroup.subtree_control"), *max = NULL;

		snprintf(p, sizeof(p), "%s/b", nsroot);
		max = knob(p, "pids.max");
		crt_check(ctl && strstr(ctl, "pids"), "T's controllers are '%s', not pids",
			  ctl ? ctl : "?");
		crt_check(max && !strcmp(max, "7"), "T/b's pids.max is %s, not 7", max ? max : "?");
		free(ctl);
		free(max);
	}
	sh->done = 1;
	crt_wait_ok(a, "A");
	crt_check(!sh->msg[0], "%s", sh->msg);
	crt_pass();
}
