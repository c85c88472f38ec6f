/* Credentials: user and group ids (real, effective, saved, fs),
 * supplementary groups, every capability set, securebits and
 * no_new_privs, read from /proc/PID/status (securebits by running prctl in
 * the task), and seccomp (seccomp.c).  Threads with credentials of their
 * own are refused.  Restore: each thread of the restored process sets
 * them as its very last step in the restorer (restorer.c). */
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "dump.h"
#include "log.h"
#include "remote.h"
#include "seccomp.h"
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

static int thread_creds_differ(struct cr_proc *p, const char *main_status)
{
	static const char *const keys[] = { "\nUid:",	 "\nGid:",    "\nGroups:", "\nCapPrm:",
					    "\nCapEff:", "\nCapBnd:", "\nSeccomp:" };

	for (int i = 1; i < p->nr_threads; i++) {
		_cleanup_free_ char *st = NULL;

		if (read_proc(&st, NULL, "/proc/%d/task/%d/status", p->pid, p->threads[i].tid))
			continue;
		for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
			const char *a = strstr(main_status, keys[k]), *b = strstr(st, keys[k]);

			if (a && b && strncmp(a, b, strcspn(a + 1, "\n") + 1)) {
				pr_err("pid %d: thread %d has credentials of its own (%s); this is "
				       "not "
				       "supported",
				       p->pid, p->threads[i].tid, keys[k] + 1);
				return 1;
			}
		}
	}
	return 0;
}

int dump_creds(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *status = NULL;
	struct cr_creds *c = &p->creds;
	struct cr_thread *t = &p->threads[0];
	long args[6] = { PR_GET_SECUREBITS }, res;
	const char *g;
	int ret;

	ret = read_proc(&status, NULL, "/proc/%d/status", p->pid);
	if (ret)
		return ret;
	if (ids(status, "\nUid:", c->uid) || ids(status, "\nGid:", c->gid)) {
		pr_err("pid %d: cannot parse its ids in /proc/%d/status", p->pid, p->pid);
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
	if (thread_creds_differ(p, status))
		return -EOPNOTSUPP;
	ret = dump_seccomp(ctx, p, status);
	if (ret)
		return ret;
	ret = remote_syscall(t->tid, p->syscall_ip, &t->regs, SYS_prctl, args, &res);
	if (ret)
		return ret;
	c->securebits = res >= 0 ? res : 0;
	return 0;
}
