/* kupdate dump, restore, show: the engine on process trees. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "cr.h"
#include "cycle.h"
#include "kupdate.h"
#include "links.h"
#include "recover.h"
#include "term.h"
#include "units.h"

int parse_pid(const char *s, pid_t *pid)
{
	char *e;
	long v = strtol(s, &e, 10);

	if (!*s || *e || v <= 0 || v > 4194304)
		return -1;
	*pid = v;
	return 0;
}

struct external_list {
	const char **paths;
	int n;
};

/* --external-unix PATH: a peer at PATH may be replaced */
static bool allow_external(const char *peer, void *arg)
{
	const struct external_list *l = arg;

	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->paths[i], peer))
			return true;
	return false;
}

/* --linked-unix: the peers outside the tree are in trees the caller dumps
 * with it, stopped as it is */
static bool allow_linked(uint32_t ino, uint32_t peer, void *arg)
{
	(void)ino;
	(void)peer;
	(void)arg;
	return true;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tree", required_argument, NULL, 't' },
		{ "images-dir", required_argument, NULL, 'D' },
		{ "leave-running", no_argument, NULL, 'R' },
		{ "no-page-crc", no_argument, NULL, 'C' },
		{ "ghost-limit", required_argument, NULL, 'g' },
		{ "check", no_argument, NULL, 'c' },
		{ "external-unix", required_argument, NULL, 'x' },
		{ "linked-unix", no_argument, NULL, 'l' },
		{ "pre-dump", no_argument, NULL, 'P' },
		{ "prev", required_argument, NULL, 'p' },
		{ "no-rto-revert", no_argument, NULL, 'N' },
		{ "own-namespaces", no_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cr_dump_opts o = { 0 };
	struct cr_dump_stats st;
	pid_t roots[64];
	const char *ext[16];
	struct external_list el = { ext, 0 };
	struct term_progress tp;
	char what[32];
	int c, ret;

	while ((c = getopt_long(argc, argv, "+t:D:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (o.nr_roots == 64 || parse_pid(optarg, &roots[o.nr_roots])) {
				pr_err("dump: '%s' is not a pid", optarg);
				return 2;
			}
			o.nr_roots++;
			break;
		case 'D':
			o.imgdir = optarg;
			break;
		case 'R':
			o.leave_running = true;
			break;
		case 'C':
			o.no_page_crc = true;
			break;
		case 'N':
			o.no_rto_revert = true;
			break;
		case 'O':
			o.own_namespaces = true;
			break;
		case 'g':
			if (parse_size(optarg, &o.ghost_limit)) {
				pr_err("dump: --ghost-limit '%s' is not a size (bytes, or with K, "
				       "M, G)",
				       optarg);
				return 2;
			}
			break;
		case 'c':
			o.check_only = true;
			break;
		case 'P':
			o.pre_dump = true;
			break;
		case 'p':
			o.prev_dir = optarg;
			break;
		case 'l':
			o.linked_unix = allow_linked;
			break;
		case 'x':
			if (el.n == 16) {
				pr_err("dump: at most 16 --external-unix paths");
				return 2;
			}
			ext[el.n++] = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (o.pre_dump && (o.check_only || o.leave_running)) {
		pr_err("dump: --pre-dump leaves the tree running; it goes with neither --check "
		       "nor --leave-running");
		return 2;
	}
	if (!o.nr_roots || (!o.imgdir && !o.check_only) || optind != argc) {
		pr_err("dump: needs -t PID and -D DIR (or --check) (see kupdate --help)");
		return 2;
	}
	o.roots = roots;
	o.root = roots[0];
	if (el.n) {
		o.external_unix = allow_external;
		o.cb_arg = &el;
	}
	snprintf(what, sizeof(what), "pid %d", roots[0]);
	term_progress_init(&tp, what);
	o.progress = term_progress;
	o.progress_arg = &tp;
	/* what an earlier dump killed here left held goes first; this one's
	 * record lets the next kupdate do the same for it (recover.c) */
	recover_dead_dumps();
	if (!o.check_only && !o.pre_dump)
		write_dump_record(o.imgdir, roots, o.nr_roots);
	/* Ctrl-C: the tree runs on as it was, its connections flow */
	stop_signals_catch();
	cr_log_mark_thread();
	ret = cr_dump(&o, &st);
	/* a state that passes in a moment (-EAGAIN: a vfork in progress, as a
	 * build's shells and make do all the time; a connection waiting to be
	 * accepted): the failed dump left the tree running and no image; it
	 * runs a while and is tried again, as apply does with a unit */
	for (int tries = 1; ret == -EAGAIN && tries < UNIT_AGAIN_TRIES && !cr_stop_requested();
	     tries++) {
		const char *why = cr_log_thread_error();

		printf("kupdate: %s; trying again\n", why ? why : "busy");
		fflush(stdout);
		usleep(UNIT_AGAIN_WAIT_US);
		cr_log_mark_thread();
		ret = cr_dump(&o, &st);
	}
	term_progress_done(&tp);
	if (ret)
		return 1;
	if (o.check_only) {
		char note[96];

		deleted_note(&st, note, sizeof(note));
		printf("pid %d: %u processes, %u threads: can be checkpointed%s%s\n", roots[0],
		       st.processes, st.threads, note[0] ? "; saves " : "", note);
		return 0;
	}
	pr_info("%s %u processes, %u threads, %llu pages (%llu of zeros left out, %llu shared "
		"with a parent); frozen %.3f s, total %.3f s",
		o.pre_dump ? "pre-dumped" : "dumped", st.processes, st.threads,
		(unsigned long long)st.pages, (unsigned long long)st.zero_pages,
		(unsigned long long)st.cow_pages, st.frozen_ns / 1e9, st.total_ns / 1e9);
	return 0;
}

/* --reconnect-unix: a socket whose peer was outside the tree connects to
 * the same path again */
static int reconnect(const char *peer, const char *comm, void *arg)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ret;

	(void)comm;
	(void)arg;
	if (sk < 0)
		return -errno;
	if (peer[0] == '@') {
		strncpy(a.sun_path + 1, peer + 1, sizeof(a.sun_path) - 2);
		ret = connect(sk, (struct sockaddr *)&a,
			      offsetof(struct sockaddr_un, sun_path) + strlen(peer));
	} else {
		strncpy(a.sun_path, peer, sizeof(a.sun_path) - 1);
		ret = connect(sk, (struct sockaddr *)&a, sizeof(a));
	}
	if (ret) {
		ret = -errno;
		close(sk);
		return ret;
	}
	return sk;
}

/* --cgroup PID=DIR: pid is born into the cgroup v2 directory DIR */
static int parse_cgroup_place(const char *arg, struct cr_cgroup_place *p)
{
	_cleanup_free_ char *pid = strdup(arg);
	char *dir = pid ? strchr(pid, '=') : NULL;

	if (!dir || (*dir++ = 0, parse_pid(pid, &p->pid)) || !*dir) {
		pr_err("restore: --cgroup '%s' is not PID=DIR", arg);
		return -EINVAL;
	}
	p->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->fd < 0)
		return pr_errno("restore: --cgroup %s: cannot open the control group %s", arg, dir);
	return 0;
}

int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "images-dir", required_argument, NULL, 'D' },
		{ "detach", no_argument, NULL, 'd' },
		{ "restore-detached", no_argument, NULL, 'd' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "no-page-verify", no_argument, NULL, 'V' },
		{ "reconnect-unix", no_argument, NULL, 'r' },
		{ "no-rto-revert", no_argument, NULL, 'R' },
		{ "namespaces-of", required_argument, NULL, 'n' },
		{ "listen-fds", no_argument, NULL, 'L' },
		{ "cgroup", required_argument, NULL, 'g' },
		{ "linked", required_argument, NULL, 'k' },
		{ "link-dir", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cr_restore_opts o = { 0 };
	const char *peers[16], *rdv = NULL;
	size_t npeers = 0;
	struct cr_unix_link *links = NULL;
	_cleanup_free_ char *rdv_own = NULL;
	struct cr_cgroup_place cg[16];
	_cleanup_free_ int *lfds = NULL;
	pid_t root = 0;
	int c, st = 0, ret;

	while ((c = getopt_long(argc, argv, "+D:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			o.imgdir = optarg;
			break;
		case 'd':
			o.detach = true;
			break;
		case 'p':
			o.pidfile = optarg;
			break;
		case 'V':
			o.no_page_verify = true;
			break;
		case 'r':
			o.open_external = reconnect;
			break;
		case 'R':
			o.no_rto_revert = true;
			break;
		case 'L':
			o.nr_listen_fds = passed_listeners(&lfds);
			o.listen_fds = lfds;
			break;
		case 'n':
			if (parse_pid(optarg, &o.ns_pid)) {
				pr_err("restore: --namespaces-of '%s' is not a pid", optarg);
				return 2;
			}
			break;
		case 'k':
			if (npeers == ARRAY_SIZE(peers)) {
				pr_err("restore: more than %zu --linked", ARRAY_SIZE(peers));
				return 2;
			}
			peers[npeers++] = optarg;
			break;
		case 'K':
			rdv = optarg;
			break;
		case 'g':
			if (o.nr_cgroups == ARRAY_SIZE(cg)) {
				pr_err("restore: more than %zu --cgroup", ARRAY_SIZE(cg));
				return 2;
			}
			if (parse_cgroup_place(optarg, &cg[o.nr_cgroups]))
				return 2;
			o.cgroups = cg;
			o.nr_cgroups++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (!o.imgdir || optind != argc) {
		pr_err("restore: needs -D DIR (see kupdate --help)");
		return 2;
	}
	/* the connections to the trees of --linked, met at --link-dir */
	if (!rdv)
		rdv = rdv_own = xasprintf("%s/links", run_dir());
	if (!rdv || links_gather(o.imgdir, peers, npeers, rdv, &links, &o.nr_links))
		return 1;
	o.links = links;
	ret = cr_restore(&o, &root, &st);
	links_close(&links, &o.nr_links);
	for (size_t i = 0; i < o.nr_cgroups; i++)
		close(cg[i].fd);
	if (ret)
		return 1;
	if (o.detach)
		return 0;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

int cmd_show(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc - 1) {
		pr_err("show: needs one image directory (see kupdate --help)");
		return 2;
	}
	return cr_show(argv[optind], json, stdout) ? 1 : 0;
}
