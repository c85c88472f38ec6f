/* Seccomp: strict mode, or the chain of classic BPF filters of a process.
 *
 * Dump: PTRACE_SECCOMP_GET_FILTER reads each filter of the chain (index 0
 * is the oldest), PTRACE_SECCOMP_GET_METADATA its flags; they are stored
 * oldest first, the order to install them in.  Every thread must have the
 * same chain (threads with filters of their own are refused); a filter that
 * hands syscalls to a user-space supervisor (SECCOMP_RET_USER_NOTIF) is
 * refused, its listener cannot be rebuilt.  While kupdate works inside a
 * process under seccomp (injected syscalls at dump, the restorer and the
 * final munmap at restore) the filters are suspended for it with
 * PTRACE_O_SUSPEND_SECCOMP; they apply again the moment kupdate detaches.
 *
 * Restore: the restorer's main thread installs the filters as the last
 * step of its setup, after credentials and no_new_privs, with
 * SECCOMP_FILTER_FLAG_TSYNC when the process has several threads so that
 * they share the chain as they did (see restorer.c).  When the restored
 * credentials could not install a filter (no no_new_privs and no
 * CAP_SYS_ADMIN: the process installed them as root, then dropped
 * privileges) they go in just before the credentials are set instead. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ptrace.h>

#include "dump.h"
#include "log.h"
#include "restore.h"
#include "restorer/restorer.h"
#include "seccomp.h"
#include "util.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef PTRACE_SECCOMP_GET_METADATA
#define PTRACE_SECCOMP_GET_METADATA 0x420d
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef SECCOMP_FILTER_FLAG_LOG
#define SECCOMP_FILTER_FLAG_LOG 2
#endif

/* the kernel's limits: BPF_MAXINSNS per filter, MAX_INSNS_PER_PATH for a
 * chain (each filter counts 4 more) */
#define MAX_FILTER_INSNS 4096
#define MAX_CHAIN_INSNS	 32768

struct seccomp_md {
	uint64_t filter_off, flags;
};

static long status_num(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

bool seccomp_thread_active(pid_t tid)
{
	_cleanup_free_ char *st = NULL;

	if (read_proc(&st, NULL, "/proc/%d/status", tid))
		return false;
	return status_num(st, "\nSeccomp:\t") > 0;
}

static void free_chain(struct cr_seccomp_filter *f, int n)
{
	for (int i = 0; i < n; i++)
		free(f[i].prog);
	free(f);
}

/* Read the chain of thread tid, oldest first: PTRACE_SECCOMP_GET_FILTER's
 * index 0 is the first filter installed. */
static int read_chain(pid_t pid, pid_t tid, struct cr_seccomp_filter **out, int *nr)
{
	struct cr_seccomp_filter *f = NULL;
	int n = 0, ret;

	for (;;) {
		long cnt = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, n, NULL);
		struct cr_seccomp_filter *nf;

		if (cnt < 0 && errno == ENOENT)
			break;
		if (cnt < 0) {
			ret = -errno;
			if (errno == EINVAL || errno == EIO)
				pr_err("pid %d: thread %d runs under seccomp filters, and this "
				       "kernel "
				       "cannot read them (PTRACE_SECCOMP_GET_FILTER needs "
				       "CONFIG_CHECKPOINT_RESTORE): %s",
				       pid, tid, strerror(errno));
			else
				pr_perror("pid %d: thread %d: cannot read seccomp filter %d", pid,
					  tid, n);
			free_chain(f, n);
			return ret;
		}
		if (cnt < 1 || cnt > MAX_FILTER_INSNS) {
			pr_err("pid %d: thread %d: seccomp filter %d has %ld instructions", pid,
			       tid, n, cnt);
			free_chain(f, n);
			return -EINVAL;
		}
		nf = xrealloc_array(f, n + 1, sizeof(*nf));
		if (!nf) {
			free_chain(f, n);
			return -ENOMEM;
		}
		f = nf;
		memset(&f[n], 0, sizeof(f[n]));
		f[n].len = cnt;
		f[n].prog = calloc(cnt, sizeof(struct sock_filter));
		if (!f[n].prog) {
			free_chain(f, n);
			return -ENOMEM;
		}
		n++;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, n - 1, f[n - 1].prog) != cnt) {
			ret = errno ? -errno : -EIO;
			pr_perror("pid %d: thread %d: cannot read seccomp filter %d", pid, tid,
				  n - 1);
			free_chain(f, n);
			return ret;
		}
		{
			struct seccomp_md md = { n - 1, 0 };

			if (ptrace(PTRACE_SECCOMP_GET_METADATA, tid, sizeof(md), &md) < 0) {
				ret = pr_errno(
					"pid %d: thread %d: cannot read the flags of seccomp "
					"filter %d",
					pid, tid, n - 1);
				free_chain(f, n);
				return ret;
			}
			f[n - 1].flags = md.flags;
		}
	}
	/* index 0 is the oldest (kernel/seccomp.c get_nth_filter counts back
	 * from the newest), the order to install them in */
	*out = f;
	*nr = n;
	return 0;
}

static bool same_chain(const struct cr_seccomp_filter *a, int na, const struct cr_seccomp_filter *b,
		       int nb)
{
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++)
		if (a[i].len != b[i].len || a[i].flags != b[i].flags ||
		    memcmp(a[i].prog, b[i].prog, a[i].len * sizeof(struct sock_filter)))
			return false;
	return true;
}

int dump_seccomp(struct cr_dump_ctx *ctx, struct cr_proc *p, const char *status)
{
	struct cr_seccomp *s = &p->seccomp;
	long mode = status_num(status, "\nSeccomp:\t");
	long count = status_num(status, "\nSeccomp_filters:\t");
	int ret, total = 0;

	(void)ctx;
	s->mode = mode > 0 ? mode : 0;
	if (mode <= 0)
		return 0;
	if (mode == SECCOMP_MODE_STRICT)
		return 0;
	if (mode != SECCOMP_MODE_FILTER) {
		pr_err("pid %d: unknown seccomp mode %ld", p->pid, mode);
		return -EOPNOTSUPP;
	}
	ret = read_chain(p->pid, p->threads[0].tid, &s->filters, &s->nr_filters);
	if (ret)
		return ret;
	if (count >= 0 && count != s->nr_filters) {
		pr_err("pid %d: /proc says %ld seccomp filters, ptrace read %d", p->pid, count,
		       s->nr_filters);
		return -EIO;
	}
	for (int i = 0; i < s->nr_filters; i++) {
		const struct sock_filter *ins = (const struct sock_filter *)s->filters[i].prog;

		total += s->filters[i].len + 4;
		if (s->filters[i].flags & ~(uint32_t)SECCOMP_FILTER_FLAG_LOG) {
			pr_err("pid %d: seccomp filter %d has flags %#x this kupdate does not know",
			       p->pid, i, s->filters[i].flags);
			return -EOPNOTSUPP;
		}
		for (uint32_t k = 0; k < s->filters[i].len; k++)
			if (ins[k].code == (BPF_RET | BPF_K) &&
			    (ins[k].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF) {
				pr_err("pid %d: seccomp filter %d hands system calls to a "
				       "supervisor "
				       "(SECCOMP_RET_USER_NOTIF); its listener cannot be restored",
				       p->pid, i);
				return -EOPNOTSUPP;
			}
	}
	if (total > MAX_CHAIN_INSNS) {
		pr_err("pid %d: its seccomp filters are too long (%d instructions)", p->pid, total);
		return -EOPNOTSUPP;
	}
	for (int t = 1; t < p->nr_threads; t++) {
		struct cr_seccomp_filter *f;
		int n;
		bool same;

		ret = read_chain(p->pid, p->threads[t].tid, &f, &n);
		if (ret)
			return ret;
		same = same_chain(s->filters, s->nr_filters, f, n);
		free_chain(f, n);
		if (!same) {
			pr_err("pid %d: thread %d has seccomp filters of its own (%d, the process "
			       "%d); threads with different filters are not supported",
			       p->pid, p->threads[t].tid, n, s->nr_filters);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

void seccomp_free_dump(struct cr_seccomp *s)
{
	free_chain(s->filters, s->nr_filters);
	s->filters = NULL;
	s->nr_filters = 0;
}

/* Fill the image record; *sc and the arrays live until the write. */
int seccomp_image(const struct cr_seccomp *s, Seccomp *sc, SeccompFilter **fs, SeccompFilter ***fps)
{
	*fs = NULL;
	*fps = NULL;
	if (!s->mode)
		return 0;
	seccomp__init(sc);
	sc->mode = s->mode;
	if (s->nr_filters) {
		*fs = calloc(s->nr_filters, sizeof(**fs));
		*fps = calloc(s->nr_filters, sizeof(**fps));
		if (!*fs || !*fps)
			return -ENOMEM;
	}
	for (int i = 0; i < s->nr_filters; i++) {
		seccomp_filter__init(&(*fs)[i]);
		(*fs)[i].prog.data = s->filters[i].prog;
		(*fs)[i].prog.len = s->filters[i].len * sizeof(struct sock_filter);
		(*fs)[i].has_flags = 1;
		(*fs)[i].flags = s->filters[i].flags;
		(*fps)[i] = &(*fs)[i];
	}
	sc->n_filters = s->nr_filters;
	sc->filters = *fps;
	return 1;
}

/* ------------------------------------------------------------- restore */

int seccomp_check_image(const char *name, const Seccomp *sc)
{
	int total = 0;

	if (!sc)
		return 0;
	if ((sc->mode != SECCOMP_MODE_STRICT && sc->mode != SECCOMP_MODE_FILTER) ||
	    (sc->mode == SECCOMP_MODE_STRICT && sc->n_filters) ||
	    (sc->mode == SECCOMP_MODE_FILTER && !sc->n_filters)) {
		pr_err("image %s is damaged: seccomp mode %u with %zu filters", name, sc->mode,
		       sc->n_filters);
		return -EINVAL;
	}
	for (size_t i = 0; i < sc->n_filters; i++) {
		const SeccompFilter *f = sc->filters[i];
		size_t n = f->prog.len / sizeof(struct sock_filter);

		if (f->prog.len % sizeof(struct sock_filter) || n < 1 || n > MAX_FILTER_INSNS ||
		    (f->flags & ~(uint32_t)SECCOMP_FILTER_FLAG_LOG)) {
			pr_err("image %s is damaged: seccomp filter %zu (%zu bytes, flags %#x)",
			       name, i, f->prog.len, f->flags);
			return -EINVAL;
		}
		total += n + 4;
	}
	if (total > MAX_CHAIN_INSNS) {
		pr_err("image %s is damaged: seccomp filters of %d instructions", name, total);
		return -EINVAL;
	}
	return 0;
}

size_t seccomp_args_len(const Seccomp *sc)
{
	size_t len = 0;

	for (size_t i = 0; sc && i < sc->n_filters; i++)
		len += sizeof(struct rst_seccomp_filter) + ((sc->filters[i]->prog.len + 7) & ~7UL);
	return len;
}

void seccomp_plan(const Seccomp *sc, struct rst_args *args, uint8_t *base, size_t *off)
{
	struct rst_seccomp_filter *rf;

	memset(&args->seccomp, 0, sizeof(args->seccomp));
	if (!sc)
		return;
	args->seccomp.mode = sc->mode;
	args->seccomp.nr = sc->n_filters;
	args->seccomp.off = *off;
	rf = (struct rst_seccomp_filter *)(base + *off);
	*off += sc->n_filters * sizeof(*rf);
	for (size_t i = 0; i < sc->n_filters; i++) {
		rf[i].len = sc->filters[i]->prog.len / sizeof(struct sock_filter);
		rf[i].flags = sc->filters[i]->flags;
		rf[i].off = *off;
		memcpy(base + *off, sc->filters[i]->prog.data, sc->filters[i]->prog.len);
		*off += (sc->filters[i]->prog.len + 7) & ~7UL;
	}
}
