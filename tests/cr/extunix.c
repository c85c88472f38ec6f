/* A unix stream socket connected to a server outside the dumped tree, as
 * a service's stdout is connected to journald.  The server is an orphaned
 * grandchild of the test (adopted by the runner, so not dumped); it answers
 * every line with "N:line", N being the number of its connection.
 *
 * The dump is told the peer may be replaced (--external-unix PATH); the
 * restore connects the same path again (--reconnect-unix).  After the
 * restore the socket has its fd number and flags, talks to the server on a
 * new connection (number 2) and the server saw the line sent before the
 * dump on connection 1.  Without --external-unix the dump refuses
 * naming the socket and its peer (tests.list: refuse-extunix). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define SK_FD 9

/* the test is alive (it is briefly absent between a dump and its restore) */
static bool test_alive(pid_t test)
{
	char path[64], line[256];
	FILE *f;
	bool alive = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", test);
	f = fopen(path, "r");
	if (f && fgets(line, sizeof(line), f))
		alive = strrchr(line, ')') && strrchr(line, ')')[2] != 'Z';
	if (f)
		fclose(f);
	return alive;
}

/* wait until fd is readable; exit once the test has been gone for 5 s */
static void wait_readable(int fd, pid_t test)
{
	int gone = 0;

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };

		if (poll(&pfd, 1, 200) > 0)
			return;
		gone = test_alive(test) ? 0 : gone + 1;
		if (gone > 25)
			_exit(0);
	}
}

static void serve(int ls, pid_t test)
{
	FILE *log;

	/* out of the test's session: an id in use as a session keeps the
	 * test's pid taken */
	setsid();
	log = fopen(crt_path("server.log"), "w");

	for (int n = 1; n <= 2; n++) {
		int c;
		char buf[256], out[300];
		ssize_t r;

		wait_readable(ls, test);
		c = accept(ls, NULL, NULL);
		if (c < 0)
			_exit(1);
		for (;;) {
			wait_readable(c, test);
			r = read(c, buf, sizeof(buf) - 1);
			if (r <= 0)
				break;
			buf[r] = 0;
			fprintf(log, "%d:%s", n, buf);
			fflush(log);
			snprintf(out, sizeof(out), "%d:%s", n, buf);
			if (write(c, out, strlen(out)) < 0)
				break;
		}
		close(c);
	}
	_exit(0);
}

static void talk(int sk, const char *line, const char *want)
{
	char buf[256];
	ssize_t r;
	fd_set rf;

	crt_check(write(sk, line, strlen(line)) == (ssize_t)strlen(line), "write: %s",
		  strerror(errno));
	FD_ZERO(&rf);
	FD_SET(sk, &rf);
	struct timeval tv = { 10, 0 };
	crt_check(select(sk + 1, &rf, NULL, NULL, &tv) == 1, "no answer to %s", line);
	r = read(sk, buf, sizeof(buf) - 1);
	crt_check(r > 0, "read: %s", r < 0 ? strerror(errno) : "end of file");
	buf[r] = 0;
	crt_check(!strcmp(buf, want), "the server answered '%s', not '%s'", buf, want);
}

int main(int argc, char **argv)
{
	/* --refused: the dump refuses and the test goes on on its first
	 * connection */
	bool refused = argc > 1 && !strcmp(argv[1], "--refused");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int ls, sk;
	pid_t child, test = getpid();
	char *log = NULL;

	crt_init();
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", crt_path("ext.sock"));
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 4))
		crt_fail("server socket: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		if (fork() == 0)
			serve(ls, test);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(ls);

	sk = socket(AF_UNIX, SOCK_STREAM, 0);
	if (sk < 0 || connect(sk, (struct sockaddr *)&a, sizeof(a)))
		crt_fail("connect: %s", strerror(errno));
	if (dup2(sk, SK_FD) < 0)
		crt_fail("dup2: %s", strerror(errno));
	close(sk);
	fcntl(SK_FD, F_SETFD, FD_CLOEXEC);
	talk(SK_FD, "before\n", "1:before\n");

	crt_ready();
	crt_wait_term();

	crt_check(fcntl(SK_FD, F_GETFD) == FD_CLOEXEC, "fd %d lost FD_CLOEXEC", SK_FD);
	{
		int type = 0;
		socklen_t l = sizeof(type);

		crt_check(!getsockopt(SK_FD, SOL_SOCKET, SO_TYPE, &type, &l) && type == SOCK_STREAM,
			  "fd %d is not a stream socket", SK_FD);
	}
	talk(SK_FD, "after\n", refused ? "1:after\n" : "2:after\n");
	close(SK_FD);
	for (int i = 0; i < 100; i++) {
		log = crt_read_file(crt_path("server.log"), NULL);
		if (log && strstr(log, ":after"))
			break;
		free(log);
		log = NULL;
		usleep(10000);
	}
	crt_check(log && !strcmp(log, refused ? "1:before\n1:after\n" : "1:before\n2:after\n"),
		  "the server saw '%s'", log ? log : "");
	crt_pass();
}
