/* Credentials: user and group ids (real, effective, saved, fs),
 * supplementary groups, every capability set, securebits and
 * no_new_privs, read from /proc/PID/status (securebits by running prctl in
 * the task), and seccomp (seccomp.c); threads with credentials of their
 * own keep them.  Restore: each thread of the restored process sets
 * them as its very last step in the restorer (restorer.c). */
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "dump.h"
#include "log.h"
#include "remote.h"
#include "seccomp.h"
#include "task.h"
#include "util.h"

static int ids(const char *status, const char *key, uint32_t out[4])
{
	const char *p = strstr(status, key);

	if (!p || sscanf(p + strlen(key), "%u %u %u %u", &out[0], &out[1], &out[2], &out[3]) != 4)
		return -EINVAL;
	return 0;
}

static uint64_t hexfield(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

/* Credentials are per thread in Linux: most processes have the same in
 * every thread, some (a thread calling setresuid(2) directly, not through
 * glibc, which changes all) have their own.  Seccomp must be the same
 * (seccomp.c compares the filters). */
static int parse_creds(pid_t pid, pid_t tid, const char *status, struct cr_creds *c)
{
	const char *g;

	memset(c, 0, sizeof(*c));
	if (ids(status, "\nUid:", c->uid) || ids(status, "\nGid:", c->gid)) {
		pr_err("pid %d: cannot parse the ids of thread %d in its status", pid, tid);
		return -EINVAL;
	}
	g = strstr(status, "\nGroups:");
	for (g = g ? g + 8 : ""; *g && *g != '\n';) {
		char *e;
		unsigned long v = strtoul(g, &e, 10);
		uint32_t *ng;

		if (e == g) {
			g++;
			continue;
		}
		ng = xrealloc_array(c->groups, c->nr_groups + 1, sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		c->groups = ng;
		ng[c->nr_groups++] = v;
		g = e;
	}
	c->cap_inh = hexfield(status, "\nCapInh:");
	c->cap_prm = hexfield(status, "\nCapPrm:");
	c->cap_eff = hexfield(status, "\nCapEff:");
	c->cap_bnd = hexfield(status, "\nCapBnd:");
	c->cap_amb = hexfield(status, "\nCapAmb:");
	c->nnp = hexfield(status, "\nNoNewPrivs:") != 0;
	return 0;
}

static int read_securebits(struct cr_proc *p, struct cr_thread *t, struct cr_creds *c)
{
	long args[6] = { PR_GET_SECUREBITS }, res;
	int ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, &res);

	if (ret)
		return ret;
	c->securebits = res >= 0 ? res : 0;
	return 0;
}

static bool same_creds(const struct cr_creds *a, const struct cr_creds *b)
{
	return !memcmp(a->uid, b->uid, sizeof(a->uid)) && !memcmp(a->gid, b->gid, sizeof(a->gid)) &&
	       a->nr_groups == b->nr_groups &&
	       (!a->nr_groups || !memcmp(a->groups, b->groups, a->nr_groups * sizeof(uint32_t))) &&
	       a->cap_inh == b->cap_inh && a->cap_prm == b->cap_prm && a->cap_eff == b->cap_eff &&
	       a->cap_bnd == b->cap_bnd && a->cap_amb == b->cap_amb &&
	       a->securebits == b->securebits && a->nnp == b->nnp;
}

static int thread_creds(struct cr_proc *p, const char *main_status)
{
	const char *ms = strstr(main_status, "\nSeccomp:");

	for (int i = 1; i < p->nr_threads; i++) {
		struct cr_thread *t = &p->threads[i];
		_cleanup_free_ char *st = NULL;
		struct cr_creds c;
		const char *ts;
		int ret;

		ret = read_proc(&st, NULL, "/proc/%d/task/%d/status", p->pid, t->tid);
		if (ret) {
			pr_err("pid %d: cannot read the status of thread %d: %s", p->pid, t->tid,
			       strerror(-ret));
			return ret;
		}
		ts = strstr(st, "\nSeccomp:");
		if (ms && ts && strncmp(ms, ts, strcspn(ms + 1, "\n") + 1)) {
			pr_err("pid %d: thread %d has a seccomp mode of its own; this is not "
			       "supported",
			       p->pid, t->tid);
			return -EOPNOTSUPP;
		}
		ret = parse_creds(p->pid, t->tid, st, &c);
		if (!ret)
			ret = read_securebits(p, t, &c);
		if (ret) {
			free(c.groups);
			return ret;
		}
		if (same_creds(&c, &p->creds)) {
			free(c.groups);
			continue;
		}
		t->creds = malloc(sizeof(*t->creds));
		if (!t->creds) {
			free(c.groups);
			return -ENOMEM;
		}
		*t->creds = c;
	}
	return 0;
}

int dump_creds(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *status = NULL;
	int ret;

	ret = read_proc(&status, NULL, "/proc/%d/status", p->pid);
	if (ret)
		return ret;
	ret = parse_creds(p->pid, p->pid, status, &p->creds);
	if (!ret)
		ret = read_securebits(p, &p->threads[0], &p->creds);
	if (!ret)
		ret = thread_creds(p, status);
	if (!ret)
		ret = dump_seccomp(ctx, p, status);
	return ret;
}
