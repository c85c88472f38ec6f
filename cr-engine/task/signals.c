/* Signals: dispositions (handler, flags, mask, restorer) of a process.
 *
 * Dump: /proc/PID/status says which signals are caught or ignored; those
 * (with their flags, mask and restorer, which an ignored signal keeps too)
 * and SIGCHLD (whose SA_NOCLDSTOP/SA_NOCLDWAIT matter even at SIG_DFL) are
 * read with rt_sigaction run inside the task.  Restore: the restorer
 * installs them just before the threads park (restorer.c). */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "dump.h"
#include "image.h"
#include "images/signals.pb-c.h"
#include "log.h"
#include "remote.h"
#include "restore.h"
#include "signals.h"
#include "util.h"

struct ksigaction {
	uint64_t handler, flags, restorer, mask;
};

static uint64_t status_mask(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

int dump_sigactions(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	_cleanup_free_ char *status = NULL;
	struct cr_thread *t = &p->threads[0];
	uint64_t caught, ignored;
	int ret;

	(void)ctx;
	ret = read_proc(&status, NULL, "/proc/%d/status", p->pid);
	if (ret) {
		pr_err("pid %d: cannot read its status: %s", p->pid, strerror(-ret));
		return ret;
	}
	caught = status_mask(status, "\nSigCgt:");
	ignored = status_mask(status, "\nSigIgn:");
	p->nr_sigacts = 0;
	for (int sig = 1; sig <= 64; sig++) {
		uint64_t bit = 1ULL << (sig - 1);
		struct cr_sigaction *sa = &p->sigacts[p->nr_sigacts];

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if ((caught & bit) || (ignored & bit) || sig == SIGCHLD) {
			struct ksigaction k;
			long args[6] = { sig, 0, 0, 8 }, res;

			ret = remote_syscall_out(t->tid, p->syscall_ip, &t->regs, SYS_rt_sigaction,
						 args, 2, &k, sizeof(k), &res);
			if (ret)
				return ret;
			if (res) {
				pr_err("pid %d: cannot read the action of signal %d: %s", p->pid,
				       sig, strerror((int)-res));
				return (int)res;
			}
			if (k.handler == 0 && k.flags == 0)
				continue;
			sa->handler = k.handler;
			sa->flags = k.flags;
			sa->restorer = k.restorer;
			sa->mask = k.mask;
		} else {
			continue;
		}
		sa->sig = sig;
		p->nr_sigacts++;
	}
	return 0;
}

#ifndef PTRACE_PEEKSIGINFO
#define PTRACE_PEEKSIGINFO 0x4209
#endif
#define PEEKSIGINFO_SHARED 1

struct peeksiginfo_args {
	uint64_t off;
	uint32_t flags;
	int32_t nr;
};

/* Queued signals, read without dequeueing them (PTRACE_PEEKSIGINFO). */
static int peek_pending(pid_t tid, uint32_t flags, uint8_t (**out)[128], int *nr)
{
	uint8_t(*v)[128] = NULL;
	int n = 0;

	for (;;) {
		struct peeksiginfo_args a = { n, flags, 32 };
		uint8_t(*nv)[128] = xrealloc_array(v, n + 32, 128);
		long got;

		if (!nv) {
			free(v);
			return -ENOMEM;
		}
		v = nv;
		got = ptrace(PTRACE_PEEKSIGINFO, tid, &a, v[n]);
		if (got < 0) {
			int ret = -errno;
			pr_perror("tid %d: cannot read its pending signals", tid);
			free(v);
			return ret;
		}
		n += got;
		if (got < 32)
			break;
	}
	*out = v;
	*nr = n;
	return 0;
}

int dump_pending(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	int ret;

	(void)ctx;
	ret = peek_pending(p->pid, PEEKSIGINFO_SHARED, &p->shared_pending, &p->nr_shared_pending);
	for (int i = 0; !ret && i < p->nr_threads; i++)
		ret = peek_pending(p->threads[i].tid, 0, &p->threads[i].pending,
				   &p->threads[i].nr_pending);
	return ret;
}

int write_signals(struct cr_dump_ctx *ctx, struct cr_proc *p)
{
	struct img_writer w;
	char name[64];
	int ret;

	snprintf(name, sizeof(name), "signals-%d.img", p->pid);
	ret = img_writer_open(&w, ctx->dirfd, name, IMG_SIGNALS);
	if (ret)
		return ret;
	{
		SignalsCore sc = SIGNALS_CORE__INIT;
		ProtobufCBinaryData *pb = calloc(p->nr_shared_pending + 1, sizeof(*pb));

		if (!pb) {
			img_writer_abort(&w);
			return -ENOMEM;
		}
		for (int i = 0; i < p->nr_shared_pending; i++) {
			pb[i].data = p->shared_pending[i];
			pb[i].len = 128;
		}
		sc.n_pending = p->nr_shared_pending;
		sc.pending = pb;
		img_write(&w, &sc.base);
		free(pb);
	}
	for (int i = 0; i < p->nr_sigacts; i++) {
		SigactionEntry e = SIGACTION_ENTRY__INIT;

		e.sig = p->sigacts[i].sig;
		e.handler = p->sigacts[i].handler;
		e.flags = p->sigacts[i].flags;
		e.restorer = p->sigacts[i].restorer;
		e.mask = p->sigacts[i].mask;
		img_write(&w, &e.base);
	}
	return img_writer_close(&w);
}

/* ------------------------------------------------------------- restore */

void signals_free(struct rsignals *s)
{
	if (s->core)
		signals_core__free_unpacked(s->core, NULL);
	for (size_t i = 0; i < s->nr_acts; i++)
		sigaction_entry__free_unpacked(s->acts[i], NULL);
	free(s->acts);
	memset(s, 0, sizeof(*s));
}

int signals_load(int dirfd, pid_t pid, struct rsignals *s)
{
	struct img_reader r;
	ProtobufCMessage *m;
	char name[64];
	uint64_t seen = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	snprintf(name, sizeof(name), "signals-%d.img", pid);
	ret = img_reader_open(&r, dirfd, name, IMG_SIGNALS);
	if (ret)
		return ret;
	ret = img_read_first(&r, &signals_core__descriptor, &m);
	if (ret) {
		img_reader_close(&r);
		return ret;
	}
	s->core = (SignalsCore *)m;
	for (size_t i = 0; i < s->core->n_pending; i++)
		if (s->core->pending[i].len != 128) {
			pr_err("image %s is damaged: a pending signal of %zu bytes", name,
			       s->core->pending[i].len);
			img_reader_close(&r);
			return -EINVAL;
		}
	s->acts = calloc(r.nr ? r.nr : 1, sizeof(*s->acts));
	if (!s->acts) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &sigaction_entry__descriptor, &m)) > 0) {
		SigactionEntry *e = (SigactionEntry *)m;

		s->acts[s->nr_acts++] = e;
		if (e->sig < 1 || e->sig > 64 || e->sig == SIGKILL || e->sig == SIGSTOP ||
		    (seen & (1ULL << (e->sig - 1)))) {
			pr_err("image %s is damaged: an action for signal %u", name, e->sig);
			ret = -EINVAL;
			break;
		}
		seen |= 1ULL << (e->sig - 1);
	}
	img_reader_close(&r);
	if (ret < 0) {
		signals_free(s);
		return ret;
	}
	return 0;
}

size_t signals_plan(const struct rsignals *s, struct rst_sigaction *out)
{
	for (size_t i = 0; i < s->nr_acts; i++) {
		out[i].sig = s->acts[i]->sig;
		out[i].handler = s->acts[i]->handler;
		out[i].flags = s->acts[i]->flags;
		out[i].restorer = s->acts[i]->restorer;
		out[i].mask = s->acts[i]->mask;
	}
	return s->nr_acts;
}
