/* Recovery from an interrupted apply.
 *
 * An apply that dies between freezing its first unit and making the cycle
 * ready (SIGKILL, OOM) cannot undo what it did: a unit may be left frozen,
 * the packets of its TCP connections dropped by the network lock (nftables
 * table inet kupdate), a kernel loaded for kexec.  (Its ptrace hold ends
 * with it: the kernel detaches and resumes the tracees.)  Its sockets are
 * ordinary ones: the engine leaves repair mode as soon as it has read a
 * connection and enters it again only just before it kills the tree, after
 * the cycle is ready (cr-engine/tcp.c); only a socket whose queues were
 * being read when apply died is left in repair mode.
 *
 * While it works, apply keeps a record in its partial cycle directory
 * (cycles/.ID.tmp/apply: its pid, then one unit per line) and holds the
 * state lock.  The next kupdate command (apply, status, list, enable,
 * disable: kupdate.c) finds a partial directory whose lock is free, and for
 * each unit of its record: thaws it, takes its established TCP sockets out
 * of repair mode (pidfd_getfd) and removes their network lock elements;
 * removes its hand-over drop-in (daemon reload) and starts it again if it
 * stopped meanwhile;
 * then unloads the kexec kernel and removes the partial directory; unless
 * this boot restores a cycle (kupdate.cycle= on the command line), the
 * whole network lock goes: nothing else can hold one here.  At boot
 * kupdate-finish removes such directories too (boot.c: sweep).
 *
 * Between the death of kupdate (its processes resume at once, their tracer
 * gone) and the recovery, a service reads and writes its connections as
 * usual, their packets held back by the lock until the recovery removes it:
 * nothing is lost (tests/cr: fault-kill-dump-tcp).  What it cannot save: a
 * socket caught in repair mode (above) refuses reads (EPERM) until then,
 * and a service that meets that typically closes the connection. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "boot.h"
#include "cr.h"
#include "cycle.h"
#include "kexec.h"
#include "log.h"
#include "recover.h"
#include "sd.h"
#include "units.h"
#include "util.h"

#define RECORD "apply"

int write_apply_record(const char *tmpdir, const char *const *units, int n)
{
	_cleanup_free_ char *p = xasprintf("%s/" RECORD, tmpdir);
	FILE *f;
	int fd, ret = 0;

	if (!p)
		return -ENOMEM;
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		ret = -errno;
		pr_perror("cannot write %s", p);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	fprintf(f, "%d\n", getpid());
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\n", units[i]);
	if (fflush(f) || fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (ret)
		pr_err("cannot write %s: %s", p, strerror(-ret));
	return ret;
}

static void sock_conn(int sk, int family, struct cr_conn *c)
{
	struct sockaddr_storage l, r;
	socklen_t ll = sizeof(l), rl = sizeof(r);

	memset(c, 0, sizeof(*c));
	c->family = family;
	if (getsockname(sk, (struct sockaddr *)&l, &ll) ||
	    getpeername(sk, (struct sockaddr *)&r, &rl))
		return;
	if (family == AF_INET) {
		const struct sockaddr_in *a = (void *)&l, *b = (void *)&r;

		memcpy(c->laddr, &a->sin_addr, 4);
		memcpy(c->raddr, &b->sin_addr, 4);
		c->lport = ntohs(a->sin_port);
		c->rport = ntohs(b->sin_port);
	} else {
		const struct sockaddr_in6 *a = (void *)&l, *b = (void *)&r;

		memcpy(c->laddr, &a->sin6_addr, 16);
		memcpy(c->raddr, &b->sin6_addr, 16);
		c->lport = ntohs(a->sin6_port);
		c->rport = ntohs(b->sin6_port);
	}
}

/* every TCP socket of pid: out of repair mode, its packets flowing */
static void release_sockets(pid_t pid, unsigned *repaired, unsigned *unlocked)
{
	char path[64];
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	DIR *d;
	struct dirent *de;

	if (pidfd < 0) {
		pr_warn("recovery: pid %d: pidfd_open: %s", pid, strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		int fd = atoi(de->d_name), sk, dom = 0, proto = 0, rep = 0, off = 0;
		socklen_t l = sizeof(int);
		struct cr_conn c;

		if (de->d_name[0] == '.')
			continue;
		sk = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		if (sk < 0) {
			pr_warn("recovery: pid %d fd %d: pidfd_getfd: %s", pid, fd,
				strerror(errno));
			continue;
		}
		if (getsockopt(sk, SOL_SOCKET, SO_DOMAIN, &dom, &l) ||
		    getsockopt(sk, SOL_SOCKET, SO_PROTOCOL, &proto, &l) ||
		    (dom != AF_INET && dom != AF_INET6) || proto != IPPROTO_TCP) {
			close(sk);
			continue;
		}
		if (getsockopt(sk, SOL_TCP, TCP_REPAIR, &rep, &l) == 0 && rep) {
			if (setsockopt(sk, SOL_TCP, TCP_REPAIR, &off, sizeof(off)))
				pr_perror("pid %d fd %d: cannot take the socket out of repair mode",
					  pid, fd);
			else
				(*repaired)++;
		}
		sock_conn(sk, dom, &c);
		if (c.lport && c.rport && cr_net_lock(&c, 1, false) == 0)
			(*unlocked)++;
		close(sk);
	}
	if (d)
		closedir(d);
	close(pidfd);
}

static void recover_unit(struct sd *s, const char *unit)
{
	struct unit_info ui;
	_cleanup_free_ char *procs = NULL, *path = NULL;
	unsigned repaired = 0, unlocked = 0;
	bool thawed = false;

	if (sd_unit_info(s, unit, &ui))
		return;
	if (ui.freezer && strcmp(ui.freezer, "running")) {
		thawed = sd_thaw(s, unit) == 0;
		if (!thawed)
			pr_err("recovery: cannot thaw %s", unit);
	}
	path = ui.cgroup ? xasprintf("%s%s/cgroup.procs", cgroup_root(), ui.cgroup) : NULL;
	if (path && read_file_at(AT_FDCWD, path, &procs, NULL) == 0)
		for (char *l = procs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (atoi(l) > 0)
				release_sockets(atoi(l), &repaired, &unlocked);
	fprintf(stderr,
		"kupdate: recovery: %s: %s, %u TCP connections out of repair mode, %u "
		"connections checked against the network lock\n",
		unit, thawed ? "thawed" : "not frozen", repaired, unlocked);
	journal_note(NULL, unit, LOG_WARNING,
		     "recovered after an interrupted kupdate apply: %s, %u connections out of "
		     "repair mode",
		     thawed ? "thawed" : "not frozen", repaired);
	unit_info_free(&ui);
}

static void recover_one(struct sd *s, const char *dir, const char *name)
{
	_cleanup_free_ char *tmp = xasprintf("%s/%s", dir, name);
	_cleanup_free_ char *rec = tmp ? xasprintf("%s/" RECORD, tmp) : NULL;
	_cleanup_free_ char *text = NULL;
	char *l, *nl;
	int n = 0;

	if (!tmp || !rec)
		return;
	if (read_file_at(AT_FDCWD, rec, &text, NULL) == 0) {
		_cleanup_free_ char *cyc = cmdline_cycle();
		char *end = text + strlen(text), *first = strchr(text, '\n');

		fprintf(stderr,
			"kupdate: recovery: an apply (pid %d) died before its cycle was ready; "
			"resuming its units\n",
			atoi(text));
		first = first ? first + 1 : NULL;
		for (l = first; l && *l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl++ = 0;
			if (unit_name_valid(l)) {
				recover_unit(s, l);
				remove_checkpointed_dropin(l);
				n++;
			}
		}
		/* the hand-over drop-ins (apply.c: prepare_handover) go; a unit
		 * that stopped while they held is started again */
		if (n && sd_reload(s) == 0) {
			for (l = first; l && l < end; l += strlen(l) + 1)
				if (unit_name_valid(l))
					restart_if_stopped(s, l, "while kupdate was interrupted");
		}
		/* the kernel it loaded: no cycle goes with it */
		kexec_unload();
		if (!cyc && cr_net_unlock_all() == 0)
			fprintf(stderr, "kupdate: recovery: the network lock it left is removed\n");
	}
	rm_cycle_dir(tmp);
	if (n)
		fprintf(stderr, "kupdate: recovery: %d units resumed, partial cycle %s removed\n",
			n, name);
}

int recover_interrupted(void)
{
	_cleanup_free_ char *dir = xasprintf("%s/cycles", state_dir());
	_cleanup_free_ char *lock = xasprintf("%s/lock", state_dir());
	_cleanup_close_ int lfd = -1;
	struct sd s = { 0 };
	bool opened = false;
	DIR *d;
	struct dirent *de;

	if (!dir || !lock)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (de->d_name[0] != '.' || l < 6 || strcmp(de->d_name + l - 4, ".tmp"))
			continue;
		if (lfd < 0) {
			lfd = open(lock, O_RDWR | O_CLOEXEC);
			/* an apply at work holds it: its directory is not stale */
			if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB))
				break;
		}
		if (!opened) {
			if (sd_open(&s))
				break;
			opened = true;
		}
		recover_one(&s, dir, de->d_name);
	}
	closedir(d);
	if (opened)
		sd_close(&s);
	return 0;
}
