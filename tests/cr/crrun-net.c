/* crrun's network side (see crrun.c).
 *
 * --netns puts the runner, and so the test, kupdate and its network lock,
 * in a network namespace of its own.  --peer starts a program outside the
 * tree that talks to it: in one more namespace, linked by a veth pair, or
 * in ours with --peer-local.  The peer writes how many records it has
 * received to $CRT_DIR/peer-progress, and gives its verdict as the last
 * line of its output when it gets SIGTERM.  --activate-tcp and
 * --activate-unix make the listeners each restore is passed (activate()).
 * --rto-revert counts the ICMP messages the peer's namespace received
 * (check_rto_revert()).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crrun.h"

pid_t peer_pid;

int run_ip(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd) == 0 ? 0 : -1;
}

/* The peer runs in a network namespace of its own, linked to ours by a
 * veth pair: 10.77.0.1 here, 10.77.0.2 there. */
int start_peer(void)
{
	int up[2], go[2];
	char c = 0, log[512], prog[4096];

	if (!realpath(o.peer, prog)) {
		diag("peer program %s not found", o.peer);
		return -1;
	}
	snprintf(log, sizeof(log), "%s/peer.log", workdir);
	if (pipe(up) || pipe(go))
		return -1;
	peer_pid = fork();
	if (peer_pid == 0) {
		char *argv[12];
		int a = 0, fd;

		if (!o.peer_local &&
		    (unshare(CLONE_NEWNET) || write(up[1], &c, 1) != 1 || read(go[0], &c, 1) != 1))
			_exit(120);
		if (!o.peer_local &&
		    (run_ip("ip link set lo up") || run_ip("ip addr add 10.77.0.2/24 dev kv1") ||
		     run_ip("ip link set kv1 up")))
			_exit(121);
		/* IPv6 too where the kernel has it (tcpserver v6) */
		if (!o.peer_local)
			run_ip("ip -6 addr add fd77::2/64 dev kv1 nodad 2>/dev/null");
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("CRT_DIR", workdir, 1);
		argv[a++] = prog;
		for (int i = 0; i < o.n_peer_args; i++)
			argv[a++] = o.peer_args[i];
		argv[a] = NULL;
		execv(prog, argv);
		_exit(127);
	}
	if (!o.peer_local &&
	    (read(up[0], &c, 1) != 1 ||
	     run_ip("ip link add kv0 type veth peer name kv1 netns %d", peer_pid) ||
	     run_ip("ip addr add 10.77.0.1/24 dev kv0") || run_ip("ip link set kv0 up") ||
	     (run_ip("ip -6 addr add fd77::1/64 dev kv0 nodad 2>/dev/null"), 0) ||
	     write(go[1], &c, 1) != 1)) {
		diag("cannot set up the peer's network namespace");
		return -1;
	}
	close(up[0]);
	close(up[1]);
	close(go[0]);
	close(go[1]);
	return 0;
}

/* records the peer has received so far, or -1 if it died */
long peer_progress(void)
{
	char path[512];
	FILE *f;
	long n = 0;

	if (waitpid(peer_pid, NULL, WNOHANG) == peer_pid) {
		peer_pid = 0;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/peer-progress", workdir);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

int wait_peer_progress(long want, int secs, const char *when)
{
	double end = now() + secs;
	long n;

	while ((n = peer_progress()) >= 0 && n < want) {
		if (now() > end) {
			diag("the peer received %ld records %s, expected %ld within %d s", n, when,
			     want, secs);
			return -1;
		}
		usleep(10000);
	}
	if (n < 0) {
		char path[512];

		snprintf(path, sizeof(path), "%s/peer.log", workdir);
		diag("the peer died %s", when);
		show_file("peer output", path);
		return -1;
	}
	return 0;
}

int stop_peer(void)
{
	char path[512], *text, *last;
	int st = 0;

	if (!peer_pid)
		return -1;
	kill(peer_pid, SIGTERM);
	waitpid(peer_pid, &st, 0);
	snprintf(path, sizeof(path), "%s/peer.log", workdir);
	text = slurp(path);
	last = strrchr(text, '\n');
	while (last && last > text && last[1] == 0) {
		*last = 0;
		last = strrchr(text, '\n');
	}
	last = last ? last + 1 : text;
	diag("peer: %s", last);
	st = (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strncmp(last, "PASS", 4)) ? 0 : -1;
	free(text);
	return st;
}

/* A network namespace of our own, with lo up: the test, kupdate (and its
 * network lock) and any peer live in it, nothing touches the host's. */
int enter_netns(void)
{
	struct ifreq ifr;
	int sk;

	if (unshare(CLONE_NEWNET)) {
		perror("crrun: unshare(CLONE_NEWNET)");
		return -1;
	}
	sk = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (sk < 0 || ioctl(sk, SIOCGIFFLAGS, &ifr) < 0) {
		perror("crrun: lo");
		return -1;
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sk, SIOCSIFFLAGS, &ifr) < 0) {
		perror("crrun: bringing lo up");
		return -1;
	}
	close(sk);
	return 0;
}

/* A TcpExt counter of our network namespace (/proc/net/netstat: a line of
 * names, then a line of values), or -1. */
/* a counter of /proc/PID/net/FILE (snmp, netstat): the line after the one
 * that names SECTION ("TcpExt:", "Icmp:"); pid 0 is our own namespace;
 * -1 if it is not there */
long net_counter(pid_t pid, const char *file, const char *section, const char *name)
{
	char path[128];
	FILE *f;
	char *names = NULL, *vals = NULL, *s1, *s2;
	size_t n1 = 0, n2 = 0, sl = strlen(section);
	long v = -1;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, file);
	else
		snprintf(path, sizeof(path), "/proc/self/net/%s", file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (getline(&names, &n1, f) > 0 && strncmp(names, section, sl))
		;
	if (names && !strncmp(names, section, sl) && getline(&vals, &n2, f) > 0) {
		char *n = strtok_r(names, " \n", &s1), *x = strtok_r(vals, " \n", &s2);

		for (; n && x && v < 0;
		     n = strtok_r(NULL, " \n", &s1), x = strtok_r(NULL, " \n", &s2))
			if (!strcmp(n, name))
				v = atol(x);
	}
	free(names);
	free(vals);
	fclose(f);
	return v;
}

/* a counter of /proc/PID/net/snmp6 ("Icmp6InDestUnreachs  12" a line);
 * 0 if there is none (no IPv6) */
long net_counter6(pid_t pid, const char *name)
{
	char path[128], n[64];
	long v, r = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/snmp6", pid ? pid : getpid());
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fscanf(f, "%63s %ld", n, &v) == 2)
		if (!strcmp(n, name))
			r = v;
	fclose(f);
	return r;
}

long tcpext_counter(const char *name)
{
	return net_counter(0, "netstat", "TcpExt:", name);
}

/* the peer's own view, from its progress file: the bytes of the stream
 * the server has acknowledged (field 4; written: what the peer has written,
 * field 5); -1 if it does not say */
long long peer_acked(long long *written)
{
	char path[512];
	long long a = -1, w = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/peer-progress", workdir);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%*d %*d %*f %lld %lld", &a, &w) != 2)
			a = w = -1;
		fclose(f);
	}
	if (written)
		*written = w;
	return a;
}

/* What a stalled connection needs to be understood, for a failure in a
 * guest whose work directory is gone with it: the tree's root (state and
 * where it waits), every TCP socket of the namespace with its counters,
 * the namespace's TCP drop and reset counters and the peer's output. */
static void show_command(const char *title, const char *cmd)
{
	char line[1024];
	FILE *f = popen(cmd, "r");

	diag("--- %s", title);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");

		while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
			n--;
		line[n] = 0;
		diag("  %s", line);
	}
	pclose(f);
}

void show_net_state(pid_t root)
{
	char cmd[256], path[512];

	snprintf(cmd, sizeof(cmd), "cut -d' ' -f1-3 /proc/%d/stat; cat /proc/%d/wchan; echo", root,
		 root);
	show_command("the tree's root: pid, name, state; wait channel", cmd);
	show_command("TCP sockets here (ss -tnoemi)", "ss -tnoemi 2>&1");
	show_command("TCP counters here (nstat, drops, resets, PAWS, windows)",
		     "nstat -asz 2>&1 | grep -Ei "
		     "'drop|prune|collapse|reset|rst|paws|retrans|window|ofo|abort|ack'"
		     " | awk '$2 != 0'");
	if (peer_pid) {
		snprintf(path, sizeof(path), "%s/peer.log", workdir);
		show_file("peer output", path);
		snprintf(path, sizeof(path), "%s/peer-progress", workdir);
		show_file("peer progress (records, ..., acknowledged, written)", path);
	}
}

/* the listeners a service manager would have made in a new boot for the
 * test's addresses, their inodes in $CRT_DIR/passed for the test to
 * compare with its own after the restore */
int activate(void)
{
	char path[600];
	FILE *f;

	for (int i = 0; i < n_pass; i++)
		close(pass_fds[i]);
	n_pass = 0;
	if (o.activate_port) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(o.activate_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int)) ||
		    bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16)) {
			diag("cannot make the passed listener on port %d: %s", o.activate_port,
			     strerror(errno));
			return -1;
		}
		pass_fds[n_pass++] = s;
	}
	if (o.activate_unix) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (strlen(workdir) + strlen(o.activate_unix) + 2 > sizeof(a.sun_path))
			return -1;
		memcpy(a.sun_path, path,
		       snprintf(path, sizeof(path), "%s/%s", workdir, o.activate_unix) + 1);
		unlink(a.sun_path);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16)) {
			diag("cannot make the passed listener %s: %s", a.sun_path, strerror(errno));
			return -1;
		}
		pass_fds[n_pass++] = s;
	}
	snprintf(path, sizeof(path), "%s/passed", workdir);
	f = fopen(path, "w");
	for (int i = 0; f && i < n_pass; i++) {
		struct stat st;

		fstat(pass_fds[i], &st);
		fprintf(f, "%lu\n", (unsigned long)st.st_ino);
	}
	if (!f || fclose(f))
		return -1;
	return 0;
}

/* --rto-revert: the ICMP messages the restore sent the peer's namespace,
 * and what the peer had written before it, acknowledged */
void icmp_counters(long long v[IC_N])
{
	v[IC_DEST_UNREACH] = net_counter(peer_pid, "snmp", "Icmp:", "InDestUnreachs") +
			     net_counter6(peer_pid, "Icmp6InDestUnreachs");
	v[IC_ERRORS] = net_counter(peer_pid, "snmp", "Icmp:", "InErrors") +
		       net_counter6(peer_pid, "Icmp6InErrors");
	v[IC_CSUM_ERRORS] = net_counter(peer_pid, "snmp", "Icmp:", "InCsumErrors") +
			    net_counter6(peer_pid, "Icmp6InCsumErrors");
	v[IC_OUT_OF_WINDOW] = net_counter(peer_pid, "netstat", "TcpExt:", "OutOfWindowIcmps");
	v[IC_LOCKED] = net_counter(peer_pid, "netstat", "TcpExt:", "LockDroppedIcmps");
	peer_acked(&v[IC_ACKED]); /* written: all of it acknowledged is the goal */
}

int check_rto_revert(const long long before[IC_N], double t_restored, pid_t root)
{
	long long after[IC_N], d[IC_N];
	double end, acked_after = -1;

	if (before[IC_DEST_UNREACH] < 0) {
		diag("--rto-revert: cannot read the ICMP counters");
		return -1;
	}
	/* all the peer had written before the restore acknowledged, what the
	 * lock dropped included: the peer has retransmitted it */
	if (peer_pid && before[IC_ACKED] >= 0) {
		for (end = now() + 60; peer_acked(NULL) < before[IC_ACKED];) {
			if (now() > end) {
				diag("FAIL: the server did not acknowledge what the peer had "
				     "written before the restore within 60 s of it");
				show_net_state(root);
				return -1;
			}
			usleep(2000);
		}
		acked_after = now() - t_restored;
	}
	/* the messages cross the veth pair in the restore's softirq: give a
	 * busy machine a moment all the same */
	end = now() + (o.rto_revert ? 2 : 0.1);
	do {
		icmp_counters(after);
		for (int i = 0; i < IC_ACKED; i++)
			d[i] = after[i] - before[i];
		if (o.rto_revert && d[IC_DEST_UNREACH] >= o.rto_revert)
			break;
		usleep(20000);
	} while (now() < end);
	diag("the peer's namespace received %lld ICMP destination-unreachable messages (%lld out "
	     "of the "
	     "connection's window, %lld while its socket was busy, %lld malformed)",
	     d[IC_DEST_UNREACH], d[IC_OUT_OF_WINDOW], d[IC_LOCKED],
	     d[IC_ERRORS] + d[IC_CSUM_ERRORS]);
	if (acked_after >= 0)
		diag("all the peer had written before was acknowledged %.3f s after kupdate "
		     "returned",
		     acked_after);
	if (!o.rto_revert && d[IC_DEST_UNREACH]) {
		diag("FAIL: expected none");
		return -1;
	}
	if (o.rto_revert && (d[IC_DEST_UNREACH] < o.rto_revert || d[IC_ERRORS] ||
			     d[IC_CSUM_ERRORS] || d[IC_OUT_OF_WINDOW] >= d[IC_DEST_UNREACH])) {
		diag("FAIL: expected at least %d, none malformed, not all out of the window",
		     o.rto_revert);
		return -1;
	}
	return 0;
}
