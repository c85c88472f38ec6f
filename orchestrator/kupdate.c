/* kupdate: command line. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "cr.h"
#include "log.h"

static void usage(FILE *out)
{
	fputs("usage: kupdate [-v] [--log-file FILE] COMMAND [OPTIONS]\n"
	      "\n"
	      "Checkpoint and restore process trees (the engine of kernel updates\n"
	      "that keep services running).\n"
	      "\n"
	      "Commands:\n"
	      "  dump -t PID -D DIR [--leave-running] [--no-page-crc] [--ghost-limit SIZE]\n"
	      "      Checkpoint the process tree rooted at PID into the image directory\n"
	      "      DIR.  Without --leave-running the tree is gone when dump returns 0;\n"
	      "      on failure it keeps running as before and DIR holds no images.\n"
	      "      --ghost-limit: the largest open file that was unlinked whose data\n"
	      "      is saved (bytes, or with K, M or G; default 1M); larger ones make\n"
	      "      the dump fail.\n"
	      "  restore -D DIR [-d|--detach] [--pidfile FILE] [--no-page-verify]\n"
	      "      Recreate the tree with its pids.  With --detach, return once it runs\n"
	      "      (its parent is the caller); otherwise wait and exit with the root's\n"
	      "      status.  --pidfile receives the root pid.\n"
	      "  show DIR [--json]\n"
	      "      Decode every image of DIR.\n"
	      "\n"
	      "Options:\n"
	      "  -v, --verbose        more messages (repeat for debug)\n"
	      "  --log-file FILE      write a detailed log to FILE\n"
	      "  -h, --help           this help\n"
	      "  --version            print the version\n"
	      "\n"
	      "Exit status: 0 on success; 1 with one line on stderr naming what failed.\n"
	      "See kupdate(8).\n",
	      out);
}

static int parse_pid(const char *s, pid_t *pid)
{
	char *e;
	long v = strtol(s, &e, 10);

	if (!*s || *e || v <= 0 || v > 4194304)
		return -1;
	*pid = v;
	return 0;
}

/* SIZE, SIZEK, SIZEM or SIZEG (powers of 1024), above 0 */
static int parse_size(const char *s, uint64_t *out)
{
	char *e;
	unsigned long long v = strtoull(s, &e, 10);
	int shift = 0;

	if (e == s || *s == '-')
		return -1;
	if (*e == 'K' || *e == 'k')
		shift = 10;
	else if (*e == 'M' || *e == 'm')
		shift = 20;
	else if (*e == 'G' || *e == 'g')
		shift = 30;
	if (shift)
		e++;
	if (*e || !v || v > (~0ULL >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tree", required_argument, NULL, 't' },
		{ "images-dir", required_argument, NULL, 'D' },
		{ "leave-running", no_argument, NULL, 'R' },
		{ "no-page-crc", no_argument, NULL, 'C' },
		{ "ghost-limit", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cr_dump_opts o = { 0 };
	struct cr_dump_stats st;
	int c, ret;

	while ((c = getopt_long(argc, argv, "+t:D:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_pid(optarg, &o.root)) {
				pr_err("dump: '%s' is not a pid", optarg);
				return 1;
			}
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
		case 'g':
			if (parse_size(optarg, &o.ghost_limit)) {
				pr_err("dump: --ghost-limit '%s' is not a size (bytes, or with K, M, G)",
				       optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (!o.root || !o.imgdir || optind != argc) {
		pr_err("dump: needs -t PID and -D DIR (see kupdate --help)");
		return 2;
	}
	ret = cr_dump(&o, &st);
	if (ret)
		return 1;
	pr_info("dumped %u processes, %u threads, %llu pages; frozen %.3f s, total %.3f s",
		st.processes, st.threads, (unsigned long long)st.pages, st.frozen_ns / 1e9,
		st.total_ns / 1e9);
	return 0;
}

static int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "images-dir", required_argument, NULL, 'D' },
		{ "detach", no_argument, NULL, 'd' },
		{ "restore-detached", no_argument, NULL, 'd' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "no-page-verify", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cr_restore_opts o = { 0 };
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
	ret = cr_restore(&o, &root, &st);
	if (ret)
		return 1;
	if (o.detach)
		return 0;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

static int cmd_show(int argc, char **argv)
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "log-file", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c, level = CR_LOG_WARN, log_fd = -1;
	const char *cmd;

	while ((c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			level++;
			break;
		case 'L':
			log_fd = open(optarg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (log_fd < 0) {
				fprintf(stderr, "kupdate: error: cannot open log file %s: %s\n",
					optarg, strerror(errno));
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("kupdate %s\n", CR_TOOL_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 1;
	if (level > CR_LOG_DEBUG)
		level = CR_LOG_DEBUG;
	cr_log_init("kupdate", level, log_fd);
	/* a restore or dump in progress must not die of a closed pipe */
	signal(SIGPIPE, SIG_IGN);

	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc, argv);
	if (!strcmp(cmd, "restore"))
		return cmd_restore(argc, argv);
	if (!strcmp(cmd, "show"))
		return cmd_show(argc, argv);
	if (!strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "kupdate: error: unknown command '%s' (see kupdate --help)\n", cmd);
	return 2;
}
