#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/mman.h>

#include "log.h"
#include "proc.h"
#include "util.h"

int parse_stat(pid_t pid, pid_t tid, struct proc_stat *st)
{
	_cleanup_free_ char *buf = NULL;
	char *p, *e;
	unsigned long long f[64];
	int n = 0, ret;

	if (tid)
		ret = read_proc(&buf, NULL, "/proc/%d/task/%d/stat", pid, tid);
	else
		ret = read_proc(&buf, NULL, "/proc/%d/stat", pid);
	if (ret)
		return ret;
	memset(st, 0, sizeof(*st));
	p = strchr(buf, '(');
	e = strrchr(buf, ')');
	if (!p || !e || e < p) {
		pr_err("pid %d: unexpected /proc/%d/stat format", pid, pid);
		return -EINVAL;
	}
	st->pid = atoi(buf);
	snprintf(st->comm, sizeof(st->comm), "%.*s", (int)(e - p - 1), p + 1);
	p = e + 2;
	st->state = *p;
	p += 1;
	/* fields from 4 (ppid) on are numbers; f[4] is ppid */
	for (n = 4; n < 64 && *p; n++) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			break;
		f[n] = strtoull(p, &p, 10);
	}
	if (n <= 52) {
		pr_err("pid %d: /proc/%d/stat has only %d fields", pid, pid, n - 1);
		return -EINVAL;
	}
	st->ppid = f[4];
	st->pgid = f[5];
	st->sid = f[6];
	st->flags = f[9];
	st->num_threads = f[20];
	st->starttime = f[22];
	st->start_code = f[26];
	st->end_code = f[27];
	st->start_stack = f[28];
	st->start_data = f[45];
	st->end_data = f[46];
	st->start_brk = f[47];
	st->arg_start = f[48];
	st->arg_end = f[49];
	st->env_start = f[50];
	st->env_end = f[51];
	st->exit_code = (int)f[52];
	return 0;
}

static unsigned parse_vmflags(const char *s)
{
	static const struct {
		char name[3];
		unsigned bit;
	} map[] = {
		{ "sh", VMF_SHARED },	  { "mw", VMF_MAYWRITE },  { "gd", VMF_GROWSDOWN },
		{ "lo", VMF_LOCKED },	  { "io", VMF_IO },	   { "pf", VMF_PFNMAP },
		{ "dc", VMF_DONTFORK },	  { "dd", VMF_DONTDUMP },  { "hg", VMF_HUGEPAGE },
		{ "nh", VMF_NOHUGEPAGE }, { "mg", VMF_MERGEABLE }, { "wf", VMF_WIPEONFORK },
		{ "nr", VMF_NORESERVE },  { "me", VMF_MAYEXEC },   { "sr", VMF_SEQ_READ },
		{ "rr", VMF_RAND_READ },  { "dp", VMF_DROPPABLE },
	};
	unsigned r = 0;

	while (*s) {
		while (*s == ' ')
			s++;
		if (!s[0] || !s[1])
			break;
		for (size_t i = 0; i < ARRAY_SIZE(map); i++)
			if (s[0] == map[i].name[0] && s[1] == map[i].name[1])
				r |= map[i].bit;
		s += 2;
	}
	return r;
}

void free_smaps(struct smaps_vma *v, int nr)
{
	for (int i = 0; i < nr; i++)
		free(v[i].path);
	free(v);
}

static bool is_vma_header(const char *line)
{
	const char *p = line;

	while (isxdigit((unsigned char)*p))
		p++;
	return p != line && *p == '-';
}

static int parse_vmas(pid_t pid, const char *file, struct smaps_vma **out, int *nr)
{
	_cleanup_fclose_ FILE *f = NULL;
	char path[64], *line = NULL;
	size_t cap = 0;
	struct smaps_vma *v = NULL, *cur = NULL;
	int n = 0, alloc = 0, ret = 0;

	/* 0: the caller, which may not see its own pid in /proc (a process
	 * restored in a pid namespace of its own), nor /proc at all (in a
	 * container's root): through kupdate's pinned /proc */
	if (pid) {
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
		f = fopen(path, "re");
	} else {
		int fd;

		snprintf(path, sizeof(path), "self/%s", file);
		fd = proc_open(path, O_RDONLY | O_CLOEXEC);
		f = fd < 0 ? NULL : fdopen(fd, "re");
		if (fd >= 0 && !f)
			close(fd);
	}
	if (!f)
		return pr_errno("pid %d: cannot open %s", pid, path);
	while (getline(&line, &cap, f) > 0) {
		if (is_vma_header(line)) {
			char perms[8];
			int off = 0;
			char *pp;

			if (n == alloc) {
				struct smaps_vma *nv;

				alloc = alloc ? alloc * 2 : 64;
				nv = xrealloc_array(v, alloc, sizeof(*v));
				if (!nv) {
					ret = -ENOMEM;
					goto out;
				}
				v = nv;
			}
			cur = &v[n++];
			memset(cur, 0, sizeof(*cur));
			if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &cur->start, &cur->end,
				   perms, &cur->pgoff, &cur->dev_major, &cur->dev_minor, &cur->ino,
				   &off) < 7) {
				pr_err("pid %d: cannot parse smaps line: %s", pid, line);
				ret = -EINVAL;
				n--;
				goto out;
			}
			pp = line + off;
			pp[strcspn(pp, "\n")] = 0;
			cur->path = xstrdup(pp);
			if (!cur->path) {
				ret = -ENOMEM;
				n--;
				goto out;
			}
			cur->prot = (perms[0] == 'r' ? PROT_READ : 0) |
				    (perms[1] == 'w' ? PROT_WRITE : 0) |
				    (perms[2] == 'x' ? PROT_EXEC : 0);
			cur->shared = perms[3] == 's';
			continue;
		}
		if (!cur)
			continue;
		if (!strncmp(line, "Rss:", 4))
			cur->rss_kb = strtoul(line + 4, NULL, 10);
		else if (!strncmp(line, "Swap:", 5))
			cur->swap_kb = strtoul(line + 5, NULL, 10);
		else if (!strncmp(line, "Anonymous:", 10))
			cur->anon_kb = strtoul(line + 10, NULL, 10);
		else if (!strncmp(line, "VmFlags:", 8))
			cur->vmflags = parse_vmflags(line + 8);
	}
out:
	free(line);
	if (ret) {
		free_smaps(v, n);
		return ret;
	}
	*out = v;
	*nr = n;
	return 0;
}

int parse_smaps(pid_t pid, struct smaps_vma **out, int *nr)
{
	return parse_vmas(pid, "smaps", out, nr);
}

/* /proc/PID/maps: the same without Rss and VmFlags, and without the walk
 * of every page table that smaps costs (60 ms a GiB while the tree is
 * stopped) */
int parse_maps(pid_t pid, struct smaps_vma **out, int *nr)
{
	return parse_vmas(pid, "maps", out, nr);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

int list_tasks(pid_t pid, pid_t **tids)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	pid_t *t = NULL;
	int n = 0, alloc = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		if (n == alloc) {
			pid_t *nt;

			alloc = alloc ? alloc * 2 : 16;
			nt = xrealloc_array(t, alloc, sizeof(*t));
			if (!nt) {
				free(t);
				closedir(d);
				return -ENOMEM;
			}
			t = nt;
		}
		t[n++] = atoi(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(t, n, sizeof(*t), cmp_pid);
	*tids = t;
	return n;
}

static int add_pid(pid_t **arr, int *n, int *alloc, pid_t p)
{
	for (int i = 0; i < *n; i++)
		if ((*arr)[i] == p)
			return 0;
	if (*n == *alloc) {
		pid_t *na;

		*alloc = *alloc ? *alloc * 2 : 16;
		na = xrealloc_array(*arr, *alloc, sizeof(pid_t));
		if (!na)
			return -ENOMEM;
		*arr = na;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

static int scan_children(pid_t pid, pid_t **kids)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t *k = NULL;
	int n = 0, alloc = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct proc_stat st;
		pid_t p;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		p = atoi(de->d_name);
		if (parse_stat(p, 0, &st))
			continue;
		if (st.ppid == pid && add_pid(&k, &n, &alloc, p)) {
			free(k);
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (n)
		qsort(k, n, sizeof(*k), cmp_pid);
	*kids = k;
	return n;
}

int list_children(pid_t pid, pid_t **kids)
{
	_cleanup_free_ pid_t *tids = NULL;
	pid_t *k = NULL;
	int nt, n = 0, alloc = 0;

	nt = list_tasks(pid, &tids);
	if (nt < 0)
		return nt;
	for (int i = 0; i < nt; i++) {
		_cleanup_free_ char *buf = NULL;
		char *p;
		int ret = read_proc(&buf, NULL, "/proc/%d/task/%d/children", pid, tids[i]);

		if (ret == -ENOENT && i == 0) {
			free(k);
			return scan_children(pid, kids);
		}
		if (ret == -ENOENT)
			continue;
		if (ret) {
			free(k);
			return ret;
		}
		for (p = buf; *p;) {
			char *e;
			long c = strtol(p, &e, 10);

			if (e == p)
				break;
			if (add_pid(&k, &n, &alloc, c)) {
				free(k);
				return -ENOMEM;
			}
			p = e;
		}
	}
	if (n)
		qsort(k, n, sizeof(*k), cmp_pid);
	*kids = k;
	return n;
}

static void unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

/* split one mountinfo line in place: 0, or -1 if it is not one */
static int mount_line(char *line, struct mount_entry *m)
{
	char *f[32];
	int n = 0, dash = -1;

	for (char *save = NULL, *t = strtok_r(line, " ", &save); t && n < 32;
	     t = strtok_r(NULL, " ", &save)) {
		if (dash < 0 && n >= 6 && !strcmp(t, "-"))
			dash = n;
		f[n++] = t;
	}
	if (dash < 0 || n < dash + 4 || sscanf(f[2], "%u:%u", &m->maj, &m->min) != 2)
		return -1;
	m->root = f[3];
	m->mp = f[4];
	m->vfs = f[5];
	m->fstype = f[dash + 1];
	m->source = f[dash + 2];
	m->super = f[dash + 3];
	m->id = atoi(f[0]);
	m->parent = atoi(f[1]);
	m->shared = m->master = 0;
	for (int i = 6; i < dash; i++) {
		if (!strncmp(f[i], "shared:", 7))
			m->shared = strtoul(f[i] + 7, NULL, 10);
		else if (!strncmp(f[i], "master:", 7))
			m->master = strtoul(f[i] + 7, NULL, 10);
	}
	unescape_octal(m->root);
	unescape_octal(m->mp);
	unescape_octal(m->source);
	return 0;
}

int mount_table_read(const char *path, struct mount_table *t)
{
	return mount_table_read_at(AT_FDCWD, path ? path : "/proc/self/mountinfo", t);
}

int mount_table_read_at(int dirfd, const char *path, struct mount_table *t)
{
	size_t lines = 1;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = read_file_at(dirfd, path, &t->buf, NULL);
	if (ret)
		return ret;
	for (const char *c = t->buf; *c; c++)
		lines += *c == '\n';
	t->e = calloc(lines, sizeof(*t->e));
	if (!t->e) {
		mount_table_free(t);
		return -ENOMEM;
	}
	for (char *save = NULL, *l = strtok_r(t->buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save))
		if (!mount_line(l, &t->e[t->n]))
			t->n++;
	return 0;
}

void mount_table_free(struct mount_table *t)
{
	free(t->e);
	free(t->buf);
	memset(t, 0, sizeof(*t));
}

static int pinned_proc = -1;

int proc_pin(bool pin)
{
	if (pin && pinned_proc < 0) {
		pinned_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (pinned_proc < 0)
			return -errno;
	} else if (!pin && pinned_proc >= 0) {
		close(pinned_proc);
		pinned_proc = -1;
	}
	return 0;
}

int proc_pinned(void)
{
	return pinned_proc;
}

void proc_repin(int fd)
{
	pinned_proc = fd;
}

pid_t proc_self_pid(void)
{
	char buf[32];
	ssize_t n = pinned_proc >= 0 ? readlinkat(pinned_proc, "self", buf, sizeof(buf) - 1)
				     : readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n <= 0)
		return -1;
	buf[n] = 0;
	return atoi(buf);
}

int proc_open(const char *rel, int flags)
{
	char path[128];

	if (pinned_proc >= 0)
		return openat(pinned_proc, rel, flags);
	snprintf(path, sizeof(path), "/proc/%s", rel);
	return open(path, flags);
}

struct ns_thread {
	void *(*fn)(void *);
	void *arg;
	int fd, err;
};

/* The thread's first act: a file system context of its own.  A thread
 * shares the process's (CLONE_FS), and the kernel drops its share only
 * after the thread's exit has woken pthread_join(): meanwhile setns() of a
 * mount namespace, which wants the context unshared, fails with EINVAL
 * (seen on a busy boot: the restore of a unit in UTS and mount namespaces
 * of its own failed "cannot enter the mount namespace"). */
static void *ns_thread_main(void *p)
{
	struct ns_thread *t = p;

	unshare(CLONE_FS);
	if (setns(t->fd, 0)) {
		t->err = -errno;
		return NULL;
	}
	return t->fn(t->arg);
}

int proc_run_in_ns(pid_t pid, const char *name, void *(*fn)(void *), void *arg)
{
	struct ns_thread t = { fn, arg, -1, 0 };
	char path[64];
	pthread_t th;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, name);
	t.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t.fd < 0)
		return pr_errno("pid %d: cannot open its %s namespace", pid, name);
	ret = -pthread_create(&th, NULL, ns_thread_main, &t);
	if (!ret)
		pthread_join(th, NULL);
	else
		pr_err("pid %d: cannot make a thread to enter its %s namespace: %s", pid, name,
		       strerror(-ret));
	close(t.fd);
	if (!ret && t.err) {
		pr_err("pid %d: cannot enter its %s namespace: %s", pid, name, strerror(-t.err));
		ret = t.err;
	}
	return ret;
}

int ns_stat(pid_t pid, const char *name, struct stat *st)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	return stat(path, st) ? -errno : 0;
}

bool ns_same(pid_t a, pid_t b, const char *name)
{
	struct stat x, y;

	/* a kernel without that kind of namespace: all share the one */
	if (ns_stat(a, name, &x) || ns_stat(b, name, &y))
		return true;
	return x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

/* a file of /proc/PID with its blanks made one space, trimmed */
char *ns_read_squeezed(pid_t pid, const char *name)
{
	_cleanup_free_ char *t = NULL;
	char *out, *o;

	if (read_proc(&t, NULL, "/proc/%d/%s", pid, name))
		return NULL;
	out = o = xzalloc(strlen(t) + 1);
	for (const char *s = t; out && *s; s++) {
		bool blank = *s == ' ' || *s == '\t' || *s == '\n';

		if (blank && (o == out || o[-1] == ' ' || o[-1] == ';'))
			continue;
		*o++ = *s == '\n' ? ';' : blank ? ' ' : *s;
	}
	while (out && o > out && (o[-1] == ' ' || o[-1] == ';'))
		*--o = 0;
	return out;
}

/* "inside outside count;..." into map; 0 or -EINVAL */
int ns_parse_idmap(const char *text, struct ns_idmap *map, size_t *nr)
{
	const char *s = text;

	*nr = 0;
	while (s && *s) {
		struct ns_idmap m;
		int used = 0;

		if (*nr == NS_IDMAP_MAX ||
		    sscanf(s, "%u %u %u%n", &m.inside, &m.outside, &m.count, &used) != 3)
			return -EINVAL;
		map[(*nr)++] = m;
		s += used;
		while (*s == ';' || *s == ' ')
			s++;
	}
	return 0;
}

int ns_read_idmaps(pid_t pid, const char *what, char **uid, char **gid, char **setgroups)
{
	*uid = ns_read_squeezed(pid, "uid_map");
	*gid = ns_read_squeezed(pid, "gid_map");
	*setgroups = ns_read_squeezed(pid, "setgroups");
	if (!*uid || !*gid || !*setgroups) {
		pr_err("pid %d: cannot read the id maps of %s", pid, what);
		return -EIO;
	}
	return 0;
}
