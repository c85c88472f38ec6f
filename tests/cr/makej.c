/* make -j2 of a small C project, caught in the middle: make, its job
 * server (a pipe whose tokens its children hold), the shells, gcc and its
 * cc1 and as at work, their temporary files.  After the restore the build
 * goes on to its end without a word on stderr (make counts its job server's
 * tokens at its end), and every object and the program are byte-identical
 * to those of the same build run without interruption in another
 * directory (relative paths, no debug information: the outputs depend on
 * the sources alone). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crt.h"

#define NSRC 24

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t len = strlen(text);

	if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd))
		crt_fail("cannot write %s: %s", path, strerror(errno));
}

/* sources that keep the optimizer busy for a while each */
static void make_project(const char *dir)
{
	char path[600], text[4096];

	if (mkdir(dir, 0755))
		crt_fail("mkdir %s: %s", dir, strerror(errno));
	for (int i = 0; i < NSRC; i++) {
		int n = 0;

		n += snprintf(text + n, sizeof(text) - n, "unsigned long f%d(unsigned long x)\n{\n",
			      i);
		for (int k = 0; k < 24; k++)
			n += snprintf(text + n, sizeof(text) - n,
				      "\tfor (int i%d = 0; i%d < %d; i%d++)\n"
				      "\t\tx = (x * %du + i%d) ^ (x >> %d);\n",
				      k, k, 7 + (i * 31 + k * 7) % 13, k, 2654435761u + i * 97 + k,
				      k, 1 + (k + i) % 29);
		snprintf(text + n, sizeof(text) - n, "\treturn x;\n}\n");
		snprintf(path, sizeof(path), "%s/f%02d.c", dir, i);
		write_file(path, text);
	}
	{
		int n = snprintf(text, sizeof(text), "#include <stdio.h>\n");

		for (int i = 0; i < NSRC; i++)
			n += snprintf(text + n, sizeof(text) - n,
				      "unsigned long f%d(unsigned long);\n", i);
		n += snprintf(text + n, sizeof(text) - n,
			      "int main(void)\n{\n\tunsigned long x = 1;\n");
		for (int i = 0; i < NSRC; i++)
			n += snprintf(text + n, sizeof(text) - n, "\tx = f%d(x);\n", i);
		snprintf(text + n, sizeof(text) - n, "\tprintf(\"%%lu\\n\", x);\n\treturn 0;\n}\n");
		snprintf(path, sizeof(path), "%s/main.c", dir);
		write_file(path, text);
	}
	snprintf(path, sizeof(path), "%s/Makefile", dir);
	write_file(path, "SRC := $(wildcard *.c)\n"
			 "OBJ := $(SRC:.c=.o)\n"
			 "prog: $(OBJ)\n"
			 "\tgcc -o $@ $(OBJ)\n"
			 "%.o: %.c\n"
			 "\tgcc -O3 -funroll-all-loops -c -o $@ $<\n");
}

static pid_t start_make(const char *dir)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY), err;

		if (chdir(dir))
			_exit(126);
		err = open("make.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(null, 1);
		dup2(err, 2);
		execlp("make", "make", "-s", "-j2", (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		crt_fail("fork: %s", strerror(errno));
	crt_own_child(pid);
	return pid;
}

static int objects(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strlen(e->d_name) > 2 && !strcmp(e->d_name + strlen(e->d_name) - 2, ".o");
	if (d)
		closedir(d);
	return n;
}

static void same(const char *a_dir, const char *b_dir, const char *name)
{
	char pa[600], pb[600], *a, *b;
	size_t la, lb;

	snprintf(pa, sizeof(pa), "%s/%s", a_dir, name);
	snprintf(pb, sizeof(pb), "%s/%s", b_dir, name);
	a = crt_read_file(pa, &la);
	b = crt_read_file(pb, &lb);
	crt_check(a && b, "%s: missing in one of the builds", name);
	crt_check(la == lb && !memcmp(a, b, la), "%s differs from the uninterrupted build's", name);
	free(a);
	free(b);
}

int main(void)
{
	const char *dir = crt_init();
	char build[512], ref[512], name[32];
	pid_t make;
	int n = 0;

	snprintf(build, sizeof(build), "%s/build", dir);
	snprintf(ref, sizeof(ref), "%s/ref", dir);
	make_project(build);
	make_project(ref);
	make = start_make(build);
	/* under way: some objects made, not all */
	for (int i = 0; i < 6000 && (n = objects(build)) < 2; i++)
		usleep(5000);
	crt_check(n >= 2 && n < NSRC + 1 && waitpid(make, NULL, WNOHANG) == 0,
		  "the build was not under way at the dump (%d objects)", n);
	crt_msg("caught with %d of %d objects made", n, NSRC + 1);
	crt_ready();
	crt_wait_term();
	crt_wait_ok(make, "make -j2");
	/* nothing said: no job server token lost ("INTERNAL: Exiting with N
	 * jobserver tokens"), no compiler complaint */
	{
		char path[600], *err;
		size_t len = 0;

		snprintf(path, sizeof(path), "%s/make.err", build);
		err = crt_read_file(path, &len);
		crt_check(err && len == 0, "make said: %.*s", (int)len, err ? err : "");
		free(err);
	}
	crt_wait_ok(start_make(ref), "make -j2 (reference)");
	for (int i = 0; i < NSRC; i++) {
		snprintf(name, sizeof(name), "f%02d.o", i);
		same(build, ref, name);
	}
	same(build, ref, "main.o");
	same(build, ref, "prog");
	crt_pass();
}
