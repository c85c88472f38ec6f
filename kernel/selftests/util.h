/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers shared by the selftests: sysctl files, capabilities, clone3. */
#ifndef KUPDATE_SELFTEST_UTIL_H
#define KUPDATE_SELFTEST_UTIL_H

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

/* Read a whole small file into buf (NUL-terminated); returns length or -errno. */
static inline ssize_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	if (n < 0)
		len = -errno;
	close(fd);
	buf[len < 0 ? 0 : len] = '\0';
	return len;
}

/* Write a string to a file in one write(); returns 0 or -errno. */
static inline int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int err = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0)
		err = -errno;
	else if ((size_t)n != strlen(s))
		err = -EIO;
	close(fd);
	return err;
}

static inline long read_long(const char *path)
{
	char buf[64];

	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

static inline int write_long(const char *path, long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", v);
	return write_file(path, buf);
}

/* Drop CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE from the effective and permitted sets. */
static inline int drop_cr_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	int caps[] = { CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE };

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	for (unsigned i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		data[caps[i] / 32].effective &= ~(1u << (caps[i] % 32));
		data[caps[i] / 32].permitted &= ~(1u << (caps[i] % 32));
		data[caps[i] / 32].inheritable &= ~(1u << (caps[i] % 32));
	}
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	return 0;
}

/*
 * fork() through clone3(), with the child's PID given by set_tid when tid > 0.
 * Returns like fork(): the child's pid, 0 in the child, -1 with errno set.
 */
static inline pid_t clone3_pid(pid_t tid)
{
	struct clone_args args;
	pid_t set_tid[1] = { tid };

	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	if (tid > 0) {
		args.set_tid = (uint64_t)(uintptr_t)set_tid;
		args.set_tid_size = 1;
	}
	return syscall(SYS_clone3, &args, sizeof(args));
}

/* Wait for a child; returns its exit status, or 128+signal, or -1. */
static inline int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

/* Fork a child that exits at once; returns its pid (reaped) or -errno. */
static inline pid_t fork_pid(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(0);
	wait_child(pid);
	return pid;
}

/* Is pid inside kernel.pid_reserve (kupdate's patch)?  0 when there is no such sysctl. */
static inline int pid_reserved(long pid)
{
	char buf[1024], *p = buf;

	if (read_file("/proc/sys/kernel/pid_reserve", buf, sizeof(buf)) <= 0)
		return 0;
	while (*p && *p != '\n') {
		long first = strtol(p, &p, 10), last = first;

		if (*p == '-')
			last = strtol(p + 1, &p, 10);
		if (pid >= first && pid <= last)
			return 1;
		if (*p == ',')
			p++;
		else
			break;
	}
	return 0;
}

#endif
