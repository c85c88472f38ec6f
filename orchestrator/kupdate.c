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
#include "kupdate.h"
#include "log.h"

void usage(FILE *out)
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
