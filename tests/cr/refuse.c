/* A state the engine cannot checkpoint yet must make the dump refuse with
 * a message naming it, and leave the process running untouched: this
 * program holds such a state (argv[1] says which), keeps counting, and
 * checks after SIGTERM that it kept running through the failed dump. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/io_uring.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

static volatile uint64_t count;
static pid_t child, child2, outside_fdt;
static int outside_quit = -1, outside_gone = -1;
static pid_t outside;

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "netlink";
	uint64_t before;

	crt_init();
	if (!strcmp(what, "netlink")) {
		if (socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE) < 0)
			crt_fail("socket: %s", strerror(errno));
	} else if (!strcmp(what, "packet")) {
		/* with a TPACKET_V2 receive ring (frames: libpcap's in its
		 * immediate mode) */
		struct tpacket_req r = { .tp_block_size = 4096,
					 .tp_block_nr = 4,
					 .tp_frame_size = 2048,
					 .tp_frame_nr = 8 };
		int sk = socket(AF_PACKET, SOCK_RAW, 0);

		if (sk < 0 ||
		    setsockopt(sk, SOL_PACKET, PACKET_VERSION, &(int){ TPACKET_V2 }, sizeof(int)) ||
		    setsockopt(sk, SOL_PACKET, PACKET_RX_RING, &r, sizeof(r)) ||
		    mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, sk, 0) == MAP_FAILED)
			crt_fail("a packet socket with a ring: %s", strerror(errno));
	} else if (!strcmp(what, "raw")) {
		if (socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6) < 0)
			crt_fail("socket: %s", strerror(errno));
	} else if (!strcmp(what, "otherns")) {
		/* an unbound TCP socket made in a network namespace the
		 * process then left */
		int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

		if (self < 0 || unshare(CLONE_NEWNET) || socket(AF_INET, SOCK_STREAM, 0) < 0 ||
		    setns(self, CLONE_NEWNET))
			crt_fail("a socket in another network namespace: %s", strerror(errno));
		close(self);
	} else if (!strcmp(what, "tcpfailed")) {
		/* a TCP socket whose non-blocking connect was refused: state
		 * CLOSE, its error not read yet (a blocking connect that fails
		 * makes it a new socket again, and that one is dumped) */
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					 .sin_port = htons(9) };
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct pollfd pf = { c, POLLOUT, 0 };

		if (c < 0 || !connect(c, (struct sockaddr *)&a, sizeof(a)) ||
		    (errno != EINPROGRESS && errno != ECONNREFUSED) || poll(&pf, 1, 5000) != 1)
			crt_fail("a refused connection: %s", strerror(errno));
	} else if (!strcmp(what, "iouring")) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		if (syscall(SYS_io_uring_setup, 4, &p) < 0)
			crt_fail("io_uring_setup: %s", strerror(errno));
	} else if (!strcmp(what, "clonefiles-sibling")) {
		/* two children sharing an fd table we no longer share: the
		 * first made the second with CLONE_FILES | CLONE_PARENT, then
		 * we took a copy of ours (unshare) */
		int sync[2];

		if (pipe(sync))
			crt_fail("pipe: %s", strerror(errno));
		child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (child < 0)
			crt_fail("clone: %s", strerror(errno));
		if (child == 0) {
			pid_t b = syscall(SYS_clone, CLONE_FILES | CLONE_PARENT | SIGCHLD, 0, NULL,
					  NULL, 0);

			if (b == 0) {
				crt_wait_term();
				_exit(0);
			}
			if (b < 0 || write(sync[1], &b, sizeof(b)) != sizeof(b))
				_exit(1);
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
		if (read(sync[0], &child2, sizeof(child2)) != sizeof(child2) || child2 <= 0)
			crt_fail("the child did not clone its sibling");
		crt_own_child(child2);
		if (unshare(CLONE_FILES))
			crt_fail("unshare: %s", strerror(errno));
		close(sync[0]);
		close(sync[1]);
	} else if (!strcmp(what, "clonefiles-orphan") || !strcmp(what, "clonefiles-root")) {
		/* our fd table shared with a process outside the tree: a
		 * grandchild cloned with CLONE_FILES by a child cloned so,
		 * which exited: the runner (a subreaper) adopted it.  With
		 * clonefiles-root it is a second root of the dump, which
		 * shares our table, not its parent's. */
		int sync[2];

		if (pipe(sync))
			crt_fail("pipe: %s", strerror(errno));
		child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (child < 0)
			crt_fail("clone: %s", strerror(errno));
		if (child == 0) {
			pid_t b = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);

			if (b == 0) {
				crt_wait_term();
				_exit(0);
			}
			_exit(b < 0 || write(sync[1], &b, sizeof(b)) != sizeof(b));
		}
		if (read(sync[0], &outside_fdt, sizeof(outside_fdt)) != sizeof(outside_fdt) ||
		    outside_fdt <= 0)
			crt_fail("the child did not clone its child");
		waitpid(child, NULL, 0);
		child = 0;
		/* until the runner adopted it */
		for (int i = 0; i < 5000; i++) {
			char path[64], *st;
			int pp = 0;

			snprintf(path, sizeof(path), "/proc/%d/stat", outside_fdt);
			st = crt_read_file(path, NULL);
			if (st && strrchr(st, ')'))
				sscanf(strrchr(st, ')') + 4, "%d", &pp);
			free(st);
			if (pp && pp != getpid())
				break;
			usleep(1000);
		}
		close(sync[0]);
		close(sync[1]);
		if (!strcmp(what, "clonefiles-root")) {
			FILE *f = fopen(crt_path("roots"), "w");

			if (!f || fprintf(f, "%d\n", outside_fdt) < 0 || fclose(f))
				crt_fail("cannot write the roots file");
		}
	} else if (!strcmp(what, "clonefiles-lockmap")) {
		/* our POSIX lock on a file a child sharing our fd table maps:
		 * the restore closes the fd it maps the file with after the
		 * lock is taken (which drops it) */
		int sync[2], fd = open(crt_path("lockmap"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };

		if (fd < 0 || ftruncate(fd, 4096) || fcntl(fd, F_SETLK, &fl) || pipe(sync))
			crt_fail("setup: %s", strerror(errno));
		child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (child < 0)
			crt_fail("clone: %s", strerror(errno));
		if (child == 0) {
			if (mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED ||
			    write(sync[1], "m", 1) != 1)
				_exit(1);
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
		if (read(sync[0], &(char){ 0 }, 1) != 1)
			crt_fail("the child did not map the file");
		close(sync[0]);
		close(sync[1]);
	} else if (!strcmp(what, "clonefiles-lock")) {
		/* a child sharing our fd table took a POSIX lock through it */
		int sync[2], fd = open(crt_path("locked"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);

		if (fd < 0 || pipe(sync))
			crt_fail("setup: %s", strerror(errno));
		child = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
		if (child < 0)
			crt_fail("clone: %s", strerror(errno));
		if (child == 0) {
			struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };

			if (fcntl(fd, F_SETLK, &fl) || write(sync[1], "l", 1) != 1)
				_exit(1);
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
		if (read(sync[0], &(char){ 0 }, 1) != 1)
			crt_fail("the child did not take its lock");
		close(sync[0]);
		close(sync[1]);
	} else if (!strcmp(what, "synsent") || !strcmp(what, "tcppending")) {
		/* a listener with a connection not accepted yet; with synsent,
		 * also a connection still being opened (SYN_SENT, on the lowest
		 * descriptor of the three: its refusal comes first): the
		 * listener's backlog is full, and it drops its SYNs */
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t al = sizeof(a);
		int o = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);

		if (o < 0 || l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) ||
		    listen(l, !strcmp(what, "synsent") ? 0 : 4) ||
		    getsockname(l, (struct sockaddr *)&a, &al) ||
		    connect(c, (struct sockaddr *)&a, sizeof(a)))
			crt_fail("loopback connection: %s", strerror(errno));
		if (!strcmp(what, "synsent")) {
			struct tcp_info ti;
			socklen_t tl = sizeof(ti);

			usleep(50000);
			if (connect(o, (struct sockaddr *)&a, sizeof(a)) == 0 ||
			    errno != EINPROGRESS)
				crt_fail("connect to a full backlog: %s", strerror(errno));
			usleep(100000);
			if (getsockopt(o, IPPROTO_TCP, TCP_INFO, &ti, &tl) ||
			    ti.tcpi_state != TCP_SYN_SENT)
				crt_fail("the second connection is not in SYN_SENT (state %d)",
					 ti.tcpi_state);
		} else {
			close(o);
		}
	} else if (!strcmp(what, "sysvshm")) {
		/* a System V segment attached, already marked for removal, and
		 * the second half of the attach unmapped: shmat could not
		 * restore that */
		int id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
		char *p = id < 0 ? NULL : shmat(id, NULL, 0);

		if (!p || p == (void *)-1)
			crt_fail("shmget/shmat: %s", strerror(errno));
		shmctl(id, IPC_RMID, NULL);
		p[0] = 1;
		if (munmap(p + 32768, 32768))
			crt_fail("munmap: %s", strerror(errno));
	} else if (!strcmp(what, "sysvshm-outside")) {
		/* a System V segment also attached by a process outside the
		 * tree (an orphan: crrun, a subreaper, adopts it), which goes
		 * when our end of a pipe closes, and is gone before we end */
		int id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600), quit[2], gone[2];
		char *p = id < 0 ? NULL : shmat(id, NULL, 0), c;
		pid_t mid;

		if (!p || p == (void *)-1 || pipe(quit) || pipe(gone))
			crt_fail("shmget/shmat/pipe: %s", strerror(errno));
		shmctl(id, IPC_RMID, NULL);
		mid = fork();
		if (mid == 0) {
			if (fork() == 0) {
				pid_t me = getpid();

				close(quit[1]);
				close(gone[0]);
				if (write(gone[1], &me, sizeof(me)) != sizeof(me))
					_exit(1);
				p[0] = 1;
				while (read(quit[0], &c, 1) < 0 && errno == EINTR)
					;
				_exit(0);
			}
			_exit(0);
		}
		if (mid < 0 || waitpid(mid, NULL, 0) != mid)
			crt_fail("fork: %s", strerror(errno));
		close(quit[0]);
		close(gone[1]);
		while (!p[0])
			usleep(1000);
		if (read(gone[0], &outside, sizeof(outside)) != sizeof(outside))
			crt_fail("the outside process did not start");
		outside_gone = gone[0];
		outside_quit = quit[1];
	} else if (!strcmp(what, "mntns")) {
		/* a private mount namespace, as a sandboxed unit has */
		if (unshare(CLONE_NEWNS))
			crt_fail("unshare: %s", strerror(errno));
	} else if (!strcmp(what, "ptrace")) {
		/* a child traced by this process: a tracer inside the tree */
		int st;

		child = fork();
		if (child < 0)
			crt_fail("fork: %s", strerror(errno));
		if (child == 0) {
			crt_wait_term();
			_exit(0);
		}
		crt_own_child(child);
		if (ptrace(PTRACE_SEIZE, child, 0, 0))
			crt_fail("PTRACE_SEIZE: %s", strerror(errno));
		(void)st;
	} else if (!strcmp(what, "vfork")) {
		/* a child between vfork() and exec: it runs on our memory while we
		 * wait; it gets us ready and goes after 4 s */
		pid_t c = vfork();

		if (c == 0) {
			struct timespec ts = { 4, 0 };

			crt_ready();
			syscall(SYS_nanosleep, &ts, NULL);
			_exit(42);
		}
		if (c < 0)
			crt_fail("vfork: %s", strerror(errno));
		{
			int st;

			crt_check(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 42,
				  "the vfork child ended with %#x", st);
		}
		crt_wait_term();
		crt_pass();
	} else if (!strcmp(what, "none")) {
		/* the state comes from the runner (e.g. kupdate's own limits) */
	} else {
		crt_fail("unknown state %s", what);
	}
	crt_ready();
	while (!crt_term)
		count++;
	before = count;
	for (int i = 0; i < 1000; i++)
		count++;
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	if (child2 > 0) {
		kill(child2, SIGTERM);
		waitpid(child2, NULL, 0);
	}
	if (outside_fdt > 0) /* the runner reaps it */
		kill(outside_fdt, SIGTERM);
	if (outside_quit >= 0) {
		char c;

		close(outside_quit);
		while (read(outside_gone, &c, 1) < 0 && errno == EINTR)
			;
		/* a zombie of crrun's, for it to reap before it ends */
		for (int i = 0; i < 5000; i++) {
			char path[64], *st;
			bool zombie;

			snprintf(path, sizeof(path), "/proc/%d/stat", outside);
			st = crt_read_file(path, NULL);
			zombie = !st || (strrchr(st, ')') && strrchr(st, ')')[2] == 'Z');
			free(st);
			if (zombie)
				break;
			usleep(1000);
		}
	}
	crt_check(count == before + 1000, "counter broken");
	crt_check(before > 1000000, "the process hardly ran (%lu)", (unsigned long)before);
	crt_pass();
}
