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

#include "cr-log.h"
#include "cr.h"
#include "kupdate.h"
#include "recover.h"

void usage(FILE *out)
{
	fputs("usage: kupdate [-v] [--log-file FILE] COMMAND [OPTIONS]\n"
	      "\n"
	      "Update the kernel of a running machine without losing its services: the\n"
	      "preserved services are checkpointed, the new kernel is kexec'd, and the\n"
	      "services are restored there with their pids, memory and connections.\n"
	      "\n"
	      "Kernel updates:\n"
	      "  apply [VMLINUZ] [--initrd FILE] [--append ARGS | --reuse-cmdline]\n"
	      "        [--unit UNIT]... [--dry-run] [--fast]\n"
	      "      Checkpoint the preserved units and kexec into VMLINUZ (default: the\n"
	      "      newest kernel installed); they are restored at its boot.  On any\n"
	      "      failure before the kexec they keep running.\n"
	      "  status [--json] [--cycle ID]\n"
	      "      The last cycle: kernels, and per unit restored or cold-started (why),\n"
	      "      pids, frozen, dump, restore and down times.\n"
	      "  enable UNIT... | disable UNIT...\n"
	      "      Preserve a service across kernel updates (kupdate.target wants it), or\n"
	      "      stop preserving it.\n"
	      "  list [--json] [--no-check]\n"
	      "      The preserved units and whether each can be checkpointed now.\n"
	      "  check [--json] [VMLINUZ|CONFIG]\n"
	      "      Whether a cycle can run: the kernel interfaces kupdate needs, probed\n"
	      "      on the running kernel, and what a new kernel's configuration enables.\n"
	      "  kernel-installed VERSION [IMAGE]\n"
	      "      What apt's kernel hook runs: can that kernel replace the running one\n"
	      "      without restarting the preserved units?  (auto-apply = yes in\n"
	      "      /etc/kupdate/kupdate.conf: applied once apt has finished.)\n"
	      "  recover\n"
	      "      Resume what a killed kupdate left: the units an apply had frozen, the\n"
	      "      connections a dump had locked (apply, status, list, enable, disable\n"
	      "      and dump do it first too).\n"
	      "\n"
	      "Process trees:\n"
	      "  dump -t PID -D DIR [--leave-running] [--check] [--external-unix PATH]\n"
	      "       [--linked-unix] [--no-page-crc] [--ghost-limit SIZE] [--pre-dump]\n"
	      "       [--prev PREVDIR] [--no-rto-revert] [--own-namespaces]\n"
	      "      Checkpoint the process tree rooted at PID (-t again for more roots)\n"
	      "      into the image directory DIR.  Without --leave-running the tree is\n"
	      "      gone when dump returns 0; on failure it keeps running as before and\n"
	      "      DIR holds no images (its TCP peers get the ICMP errors of restore,\n"
	      "      unless --no-rto-revert).  --check: only check that it could be.\n"
	      "      --external-unix PATH: a unix socket connected to PATH outside the\n"
	      "      tree is saved, to be reconnected at restore (--reconnect-unix).\n"
	      "      --linked-unix: a unix stream or seqpacket socket connected to a\n"
	      "      socket outside the tree is kept as a link to the peer's tree, which\n"
	      "      the caller dumps too, both stopped; restore names it back.\n"
	      "      --ghost-limit: the most data (holes left out) of a file that was\n"
	      "      unlinked while open or mapped (a library apt replaced) that is\n"
	      "      saved, per file (bytes, or with K, M or G; default 1M for a file\n"
	      "      only open, 256M for one mapped or run).\n"
	      "      --pre-dump: save only memory, copied while the tree runs again (it\n"
	      "      is stopped only to arm the tracking of its writes), for a later\n"
	      "      dump with --prev DIR, which copies only the pages written since\n"
	      "      and refers to DIR for the others (DIR must stay until restored).\n"
	      "      Pre-dumps can be chained with --prev too.  Writes are tracked with\n"
	      "      soft-dirty bits, or userfaultfd write-protection where the kernel\n"
	      "      has no soft-dirty (KUPDATE_DIRTY_TRACK=soft-dirty|uffd chooses).\n"
	      "      --own-namespaces: the tree may live in mount, UTS, IPC, user and\n"
	      "      network namespaces of its own (a unit's PrivateTmp=, ProtectSystem=,\n"
	      "      ProtectHostname=, PrivateUsers=, PrivateNetwork=);\n"
	      "      the contents of its private /tmp and tmpfs mounts are saved.\n"
	      "  restore -D DIR [-d|--detach] [--pidfile FILE] [--no-page-verify]\n"
	      "          [--reconnect-unix] [--no-rto-revert] [--namespaces-of PID]\n"
	      "          [--listen-fds] [--cgroup PID=DIR] [--linked PEERDIR]\n"
	      "          [--link-dir DIR]\n"
	      "      Recreate the tree with its pids.  With --detach, return once it runs\n"
	      "      (its parent is the caller); otherwise wait and exit with the root's\n"
	      "      status.  --pidfile receives the root pid.  Each remote peer of a TCP\n"
	      "      connection gets ICMP errors that cut its retransmission timeout\n"
	      "      short (RFC 6069), unless --no-rto-revert.  --namespaces-of PID: a\n"
	      "      tree dumped with its own namespaces is restored into those of PID,\n"
	      "      which must be equivalent (the same kinds, the same extra mounts).\n"
	      "      --listen-fds: the listening sockets passed as systemd passes them\n"
	      "      (LISTEN_FDS, LISTEN_PID) stand for the tree's bound to the same\n"
	      "      addresses (a socket-activated unit's, which the manager holds).\n"
	      "      --cgroup PID=DIR: process PID (and its children) is made in the\n"
	      "      cgroup v2 directory DIR, not in its parent's (repeatable).\n"
	      "      --linked PEERDIR: the images of a tree dumped with this one whose\n"
	      "      sockets are connected to this tree's (linked at its dump;\n"
	      "      repeatable).  The restore of either tree that comes first makes\n"
	      "      the connections; a child of it holds the other ends until the\n"
	      "      other restore takes them (at most 120 s), meeting in --link-dir\n"
	      "      (default $KUPDATE_RUN_DIR/links).\n"
	      "  show DIR [--json]\n"
	      "      Decode every image of DIR.\n"
	      "\n"
	      "Boot-time commands (run by kupdate's systemd units): mount-store, netlock,\n"
	      "restore-unit, finish; kupdate-generator is this program under that name.\n"
	      "\n"
	      "Options:\n"
	      "  -v, --verbose        more messages (repeat for debug)\n"
	      "  --log-file FILE      write a detailed log to FILE\n"
	      "  -h, --help           this help\n"
	      "  --version            print the version\n"
	      "\n"
	      "Environment: KUPDATE_STATE_DIR (default /var/lib/kupdate), KUPDATE_RUN_DIR\n"
	      "(default /run/kupdate).\n"
	      "Exit status: 0 on success; 1 with one line on stderr naming what failed;\n"
	      "2 on a usage error.  See kupdate(8).\n",
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

	{
		const char *base = strrchr(argv[0], '/');

		base = base ? base + 1 : argv[0];
		if (!strcmp(base, "kupdate-generator")) {
			cr_log_init("kupdate-generator", CR_LOG_WARN, -1);
			return cmd_generator(argc, argv);
		}
	}
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
	optind = 0; /* a full reset: subcommands parse with their own ordering */
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
	{
		static const struct {
			const char *name;
			int (*fn)(int, char **);
		} cmds[] = {
			{ "apply", cmd_apply },
			{ "status", cmd_status },
			{ "enable", cmd_enable },
			{ "disable", cmd_disable },
			{ "list", cmd_list },
			{ "check", cmd_check },
			{ "netlock", cmd_netlock },
			{ "restore-unit", cmd_restore_unit },
			{ "finish", cmd_finish },
			{ "mount-store", cmd_mount_store },
			{ "kernel-installed", cmd_kernel_installed },
		};

		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			if (!strcmp(cmd, cmds[i].name)) {
				/* the ordinary commands first resume what a killed
				 * apply left stopped (recover.c) */
				if (i < 5) {
					recover_interrupted();
					recover_dead_dumps();
				}
				return cmds[i].fn(argc, argv);
			}
	}
	if (!strcmp(cmd, "recover")) {
		int n;

		if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			usage(stdout);
			return 0;
		}
		if (argc > 1) {
			fprintf(stderr, "kupdate: error: recover takes no argument (see kupdate "
					"--help)\n");
			return 2;
		}
		n = recover_dead_dumps();
		if (recover_interrupted() + n <= 0)
			printf("kupdate: nothing to recover: no apply nor dump was interrupted\n");
		return 0;
	}
	if (!strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "kupdate: error: unknown command '%s' (see kupdate --help)\n", cmd);
	return 2;
}
