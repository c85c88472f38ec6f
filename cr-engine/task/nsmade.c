/* The namespaces a process of the tree made for itself and its
 * descendants, as a container's init does, rather than ones a caller
 * builds (namespaces.c): its UTS namespace (its names), an IPC namespace
 * without System V objects, a network namespace (netns.c), its mount
 * namespace (mntns.c); its pid namespace is pidns.c's.
 *
 * Dump: ns_check_proc (namespaces.c) finds the process that made one (its
 * namespace is not its parent's nor the root's) and nsmade_check keeps it
 * or refuses it; recorded in its core image (task_core.made_ns).
 * Restore: the process unshares them right after its birth, before it
 * forks, and sets their contents (ns_restore_made; mntns_restore).
 * The host and domain names are read and set here for namespaces.c's UTS
 * namespace too. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cr-util.h"
#include "dump.h"
#include "images/core.pb-c.h"
#include "fault.h"
#include "log.h"
#include "netlock.h"
#include "namespaces.h"
#include "proc.h"
#include "restore-ctx.h"
#include "tcp.h"
#include "util.h"

/* the tree's host and domain names, read in a thread that joined its UTS
 * namespace (a thread may: its own nsproxy changes) */
struct uts_read {
	struct utsname u;
	int err;
};

static void *uts_thread(void *arg)
{
	struct uts_read *r = arg;

	if (uname(&r->u))
		r->err = -errno;
	return NULL;
}

int ns_read_names(pid_t pid, char **host, char **domain)
{
	struct uts_read r = { .err = 0 };
	int ret = proc_run_in_ns(pid, "uts", uts_thread, &r);

	if (!ret && r.err)
		ret = r.err;
	if (ret) {
		pr_err("pid %d: cannot read its host name: %s", pid, strerror(-ret));
		return ret;
	}
	*host = xstrdup(r.u.nodename);
	*domain = xstrdup(r.u.domainname);
	return *host && *domain ? 0 : -ENOMEM;
}

int ns_set_names(const char *host, const char *domain)
{
	struct utsname u;

	if (uname(&u))
		return -errno;
	if (host && strcmp(u.nodename, host) && sethostname(host, strlen(host)))
		return pr_errno("cannot set the tree's host name %s", host);
	if (domain && strcmp(u.domainname, domain) && setdomainname(domain, strlen(domain)))
		return pr_errno("cannot set the tree's domain name %s", domain);
	return 0;
}

/* the System V objects of pid's IPC namespace, read in a thread that
 * joined it (/proc/sysvipc answers for the reader's) */
struct ipc_count {
	int n;
};

static void *ipc_count_thread(void *arg)
{
	static const char *const files[] = { "/proc/sysvipc/shm", "/proc/sysvipc/sem",
					     "/proc/sysvipc/msg" };
	struct ipc_count *r = arg;

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char *buf;
		size_t len;

		if (read_file_at(AT_FDCWD, files[i], &buf, &len))
			continue;
		for (char *s = strchr(buf, '\n'); s && s[1]; s = strchr(s + 1, '\n'))
			r->n++; /* a line under the header */
		free(buf);
	}
	return NULL;
}

int nsmade_check(struct cr_dump_ctx *ctx, struct cr_proc *p, unsigned bit, const char *what)
{
	if (ctx->ns && (ctx->ns->own & CLONE_NEWUSER)) {
		pr_err("pid %d (%s) made a %s of its own inside a tree with a user namespace "
		       "of its own: kupdate cannot restore both yet",
		       p->pid, p->stat.comm, what);
		return -EOPNOTSUPP;
	}
	/* inside a container's user namespace: its maker's (userns.c), and
	 * a UTS or IPC namespace of a process born inside, which unshares it
	 * there again (a service's ProtectHostname= in a booted container) */
	if (userns_check_member(p, (bit == CLONE_NEWUTS || bit == CLONE_NEWIPC) &&
						   userns_born_inside(p)
					   ? NULL
					   : what))
		return -EOPNOTSUPP;
	if (bit == CLONE_NEWUSER) {
		int ret = userns_made(ctx, p);

		if (ret)
			return ret;
	}
	if (bit == CLONE_NEWIPC) {
		struct ipc_count r = { 0 };
		int ret = proc_run_in_ns(p->pid, "ipc", ipc_count_thread, &r);

		if (ret) {
			pr_err("pid %d: cannot look at its IPC namespace: %s", p->pid,
			       strerror(-ret));
			return ret;
		}
		if (r.n) {
			pr_err("pid %d (%s) made an IPC namespace of its own inside the tree, "
			       "which holds %d System V objects; kupdate restores only an "
			       "empty one there",
			       p->pid, p->stat.comm, r.n);
			return -EOPNOTSUPP;
		}
	}
	if (bit == CLONE_NEWUTS) {
		int ret = ns_read_names(p->pid, &p->made_hostname, &p->made_domainname);

		if (ret)
			return ret;
	}
	if (bit == CLONE_NEWNET) {
		int ret = netns_made(ctx, p);

		if (ret)
			return ret;
	}
	if (bit == CLONE_NEWCGROUP) {
		int ret = cgroups_ns_root(ctx, p);

		if (ret)
			return ret;
	}
	p->made_ns |= bit;
	return 0;
}

bool ns_made_save(const struct cr_proc *p, NsMade *m, char **names)
{
	if (!p->made_ns)
		return false;
	if (p->made_ns & CLONE_NEWUTS)
		names[m->n_kinds++] = "uts";
	if (p->made_ns & CLONE_NEWIPC)
		names[m->n_kinds++] = "ipc";
	if (p->made_ns & CLONE_NEWNS)
		names[m->n_kinds++] = "mnt";
	if (p->made_ns & CLONE_NEWNET) {
		names[m->n_kinds++] = "net";
		m->has_lo_up = 1;
		m->lo_up = p->made_lo_up;
	}
	if (p->made_ns & CLONE_NEWCGROUP) {
		names[m->n_kinds++] = "cgroup";
		m->cgroup_root = p->cgroup_ns_root;
	}
	if (p->made_ns & CLONE_NEWUSER) {
		names[m->n_kinds++] = "user";
		m->uid_map = p->made_uid_map;
		m->gid_map = p->made_gid_map;
		m->setgroups = p->made_setgroups;
	}
	m->kinds = names;
	m->hostname = p->made_hostname;
	m->domainname = p->made_domainname;
	m->n_links = p->nr_made_links;
	m->links = p->made_links;
	m->n_mounts = p->nr_made_mounts;
	m->mounts = p->made_mounts;
	return true;
}

/* ---------------------------------------------------------- restore */

/* the tree's connections held in repair mode, locked in the namespace
 * the maker just made before its veth pairs bring the peers' packets in
 * (lifted by tcp_finish_restore in each namespace) */
static int lock_made(const struct rctx *c, pid_t pid)
{
	struct cr_conn *v = calloc(c->files.nr_files + 1, sizeof(*v));
	size_t n = 0;
	int ret;

	if (!v)
		return -ENOMEM;
	for (size_t f = 0; f < c->files.nr_files; f++)
		if (inet_is_repaired(c->files.files[f]))
			inet_conn(c->files.files[f]->isk, &v[n++]);
	ret = n ? netlock_add(v, n) : 0;
	free(v);
	if (ret)
		pr_err("pid %d: cannot lock the tree's %zu connections in its network namespace",
		       pid, n);
	return ret;
}

/* seconds since the dump ended (a lease's lifetimes go on) */
static uint32_t since_dump(const struct rctx *c)
{
	int64_t now = now_ns(CLOCK_REALTIME), then = c->inv ? (int64_t)c->inv->dump_time_ns : now;

	return now > then ? (uint32_t)((now - then) / 1000000000) : 0;
}

int ns_restore_made(const struct rctx *c, struct rproc *rp)
{
	const NsMade *m = rp->zombie ? NULL : rp->core.task->made_ns;
	struct netlinks_rst nl;
	int flags = 0, ret = 0;

	if (!m)
		return 0;
	for (size_t i = 0; i < m->n_kinds; i++) {
		if (!strcmp(m->kinds[i], "mnt") || !strcmp(m->kinds[i], "user"))
			continue; /* mntns.c, userns.c */
		/* first: the namespace's root is where it is made (in a user
		 * namespace it made: by its parent, userns.c) */
		if (!strcmp(m->kinds[i], "cgroup")) {
			ret = userns_joins(rp) ? userns_join(rp, "cgroup")
					       : cgroups_make_ns(c, rp, m->cgroup_root);
			if (ret)
				return ret;
			continue;
		}
		if (!strcmp(m->kinds[i], "net")) {
			flags |= CLONE_NEWNET;
			continue;
		}
		if (strcmp(m->kinds[i], "uts") && strcmp(m->kinds[i], "ipc")) {
			pr_err("image core-%d.img is damaged: it made a namespace \"%s\"", rp->pid,
			       m->kinds[i]);
			return -EINVAL;
		}
		flags |= !strcmp(m->kinds[i], "uts") ? CLONE_NEWUTS : CLONE_NEWIPC;
	}
	if ((flags & CLONE_NEWNET) && netlinks_restore_prepare(m, &nl))
		return -EIO;
	if (flags && userns_joins(rp)) {
		/* made by its parent in its user namespace, which owns them */
		for (size_t i = 0; !ret && i < m->n_kinds; i++)
			if (!strcmp(m->kinds[i], "net") || !strcmp(m->kinds[i], "uts") ||
			    !strcmp(m->kinds[i], "ipc"))
				ret = userns_join(rp, m->kinds[i]);
	} else if (flags && unshare(flags)) {
		ret = pr_errno("pid %d: cannot make its namespaces again (%s%s)", rp->pid,
			       m->kinds[0], m->n_kinds > 1 ? ", ..." : "");
	}
	if (!ret && (flags & CLONE_NEWNET)) {
		if (m->lo_up && netns_lo_up())
			ret = pr_errno("pid %d: cannot bring the loopback of its network "
				       "namespace up",
				       rp->pid);
		if (!ret && m->n_links)
			ret = lock_made(c, rp->pid);
		if (!ret)
			ret = netlinks_restore(m, &nl, rp->pid, since_dump(c));
		if (!ret && m->n_links && cr_fault("slow-made-net")) {
			fprintf(stderr,
				"kupdate: slow-made-net fault (KUPDATE_FAULT): 1.5 s with "
				"pid %d's veth pairs up, its connections not made yet\n",
				rp->pid);
			usleep(1500000);
		}
	}
	if (flags & CLONE_NEWNET)
		netlinks_restore_done(&nl);
	if (!ret && (flags & CLONE_NEWUTS))
		ret = ns_set_names(m->hostname, m->domainname);
	return ret;
}
