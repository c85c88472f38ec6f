/* crrun's damage between the dump and the restore (see crrun.c).
 *
 * --corrupt damages one image of the dump the way a disk or an operator
 * could (cut, a flipped bit, a wrong format version, loose permissions, a
 * file of the previous dump), for the restore to refuse it.
 *
 * --drop-sysvshm removes the System V segments the tree had attached, as a
 * kexec would, and --squat-sysvshm gives the id of the last one to a
 * segment of ours.  For that the runner notes the tree's segments before
 * each dump, removes its own at the end, and checks that a failed restore
 * leaves none of the tree's behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crrun.h"

/* Damage the first image whose name starts with the prefix (or, if it has
 * a '*', matches it as a shell pattern: "pages-*.1.img"):
 *   truncate:P  cut it to half its size
 *   flip:P      flip one bit (page data: inside the first page)
 *   flipqN:P    flip one bit N quarters (1-3) into the file
 *   version:P   give its header format version 99
 *   chmod:P     make it writable by others (0666)
 *   chown:P     give it to another user (65534)
 *   swap:P      replace it by the same file of the previous dump (prev) */
int corrupt_images(const char *img, const char *prev)
{
	const char *colon = strchr(o.corrupt, ':');
	const char *prefix = colon ? colon + 1 : "";
	bool flip = !strncmp(o.corrupt, "flip:", 5) || !strncmp(o.corrupt, "flipq", 5);
	const char *slash = strrchr(prefix, '/');
	char dir[1024], path[1400] = "", name[256] = "";
	DIR *d;
	struct dirent *de;

	/* "parent/pages-": an image of the layer below (--pre-dumps) */
	if (slash) {
		snprintf(dir, sizeof(dir), "%s/%.*s", img, (int)(slash - prefix), prefix);
		prefix = slash + 1;
	} else {
		snprintf(dir, sizeof(dir), "%s", img);
	}
	d = opendir(dir);
	while (d && (de = readdir(d)))
		if ((strchr(prefix, '*') ? !fnmatch(prefix, de->d_name, 0)
					 : !strncmp(de->d_name, prefix, strlen(prefix))) &&
		    strstr(de->d_name, ".img")) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			snprintf(name, sizeof(name), "%s", de->d_name);
			break;
		}
	if (d)
		closedir(d);
	if (!path[0]) {
		diag("no image named %s* to damage", prefix);
		return -1;
	}
	if (!strncmp(o.corrupt, "swap:", 5)) {
		char from[1024], cmp[2200];
		int in, out;
		ssize_t n;
		char buf[65536];

		snprintf(from, sizeof(from), "%s/%s", prev ? prev : "", name);
		/* an identical file would prove nothing */
		snprintf(cmp, sizeof(cmp), "cmp -s '%s' '%s'", from, path);
		if (prev && system(cmp) == 0) {
			diag("%s is the same in both dumps: nothing to swap", name);
			return -1;
		}
		in = prev ? open(from, O_RDONLY) : -1;
		if (in < 0) {
			diag("no %s in the previous dump to swap in (needs --iterations 2)", name);
			return -1;
		}
		out = open(path, O_WRONLY | O_TRUNC);
		if (out < 0) {
			close(in);
			return -1;
		}
		while ((n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, n) != n) {
				n = -1;
				break;
			}
		close(in);
		close(out);
		if (n < 0)
			return -1;
		diag("replaced %s by the one of the previous dump", path);
		return 0;
	}
	{
		struct stat st;
		int fd = open(path, O_RDWR);

		if (fd < 0 || fstat(fd, &st))
			return -1;
		if (!strncmp(o.corrupt, "chmod:", 6)) {
			/* writable by others */
			if (fchmod(fd, 0666))
				return -1;
			diag("made %s mode 0666", path);
		} else if (!strncmp(o.corrupt, "chown:", 6)) {
			/* another user's (nobody) */
			if (fchown(fd, 65534, 65534))
				return -1;
			diag("gave %s to uid 65534", path);
		} else if (!strncmp(o.corrupt, "version:", 8)) {
			uint16_t v = 99;

			/* struct img_header: magic, kind, then the u16 version */
			if (pwrite(fd, &v, 2, 8) != 2)
				return -1;
			diag("set the format version of %s to 99", path);
		} else if (flip) {
			/* page data: a byte inside the first page; others: the middle */
			off_t off = !strncmp(prefix, "pages", 5) ? 4096 + 123 : st.st_size / 2;

			if (!strncmp(o.corrupt, "flipq", 5))
				off = st.st_size / 4 * (o.corrupt[5] - '0') + 123;
			unsigned char c;

			if (pread(fd, &c, 1, off) != 1)
				return -1;
			c ^= 0x10;
			if (pwrite(fd, &c, 1, off) != 1)
				return -1;
			diag("flipped a bit at offset %ld of %s", (long)off, path);
		} else {
			if (ftruncate(fd, st.st_size / 2))
				return -1;
			diag("truncated %s from %ld to %ld bytes", path, (long)st.st_size,
			     (long)st.st_size / 2);
		}
		close(fd);
	}
	return 0;
}

/* System V segments: the tree's (attached at the last dump) and ours */
static int tree_shm[64], nr_tree_shm;
static int our_shm[64], nr_our_shm;

void collect_sysvshm(const struct proc_info *procs, int n)
{
	nr_tree_shm = 0;
	for (int i = 0; i < n; i++) {
		char path[64], line[1024];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/maps", procs[i].pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long ino;
			int known = 0;

			if (!strstr(line, "/SYSV") ||
			    sscanf(line, "%*s %*s %*s %*s %lu", &ino) != 1)
				continue;
			for (int k = 0; k < nr_tree_shm; k++)
				known |= tree_shm[k] == (int)ino;
			if (!known && nr_tree_shm < 64)
				tree_shm[nr_tree_shm++] = (int)ino;
		}
		fclose(f);
	}
}

void remove_our_shm(void)
{
	for (int i = 0; i < nr_our_shm; i++)
		shmctl(our_shm[i], IPC_RMID, NULL);
	nr_our_shm = 0;
}

/* The tree is gone: so are the segments it had, as after a kexec, and with
 * --squat-sysvshm a segment of ours takes the id of the last one. */
int drop_sysvshm(void)
{
	for (int i = 0; i < nr_tree_shm; i++) {
		char v[16];
		int fd, n, id;

		if (shmctl(tree_shm[i], IPC_RMID, NULL) && errno != EINVAL && errno != EIDRM) {
			diag("cannot remove segment %d of the tree: %s", tree_shm[i],
			     strerror(errno));
			return -1;
		}
		/* the last one only: the restore creates the others first, and
		 * must remove them when it fails on this one */
		if (!o.squat_sysvshm || i != nr_tree_shm - 1)
			continue;
		n = snprintf(v, sizeof(v), "%d", tree_shm[i]);
		fd = open("/proc/sys/kernel/shm_next_id", O_WRONLY);
		if (fd < 0 || write(fd, v, n) != n) {
			diag("cannot write shm_next_id: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
		if (id >= 0 && nr_our_shm < 64)
			our_shm[nr_our_shm++] = id;
		if (id != tree_shm[i]) {
			diag("cannot take id %d for a segment of ours (got %d)", tree_shm[i], id);
			return -1;
		}
	}
	return 0;
}

/* a failed restore leaves none of the tree's segments behind */
int check_no_tree_shm(void)
{
	struct shmid_ds ds;

	for (int i = 0; i < nr_tree_shm; i++) {
		bool ours = false;

		for (int k = 0; k < nr_our_shm; k++)
			ours |= our_shm[k] == tree_shm[i];
		if (!ours && shmctl(tree_shm[i], IPC_STAT, &ds) == 0) {
			diag("a failed restore left System V segment %d behind", tree_shm[i]);
			return -1;
		}
	}
	return 0;
}

/* The directories the test listed in --rmdirs-file, children first: the
 * tree's processes are reaped, their control groups empty (a removal
 * waits 2 s at most for the kernel to let go of them) */
int rmdirs_listed(void)
{
	char path[4200], *lines[64];
	int n = 0, ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", workdir, o.rmdirs_file);
	f = fopen(path, "r");
	if (!f) {
		diag("--rmdirs-file: cannot read %s", path);
		return -1;
	}
	while (n < 64 && fgets(path, sizeof(path), f)) {
		path[strcspn(path, "\n")] = 0;
		if (path[0] && !(lines[n++] = strdup(path)))
			n--;
	}
	fclose(f);
	while (n-- > 0) {
		int i = 0;

		while (rmdir(lines[n]) && errno == EBUSY && i++ < 200)
			usleep(10000);
		if (access(lines[n], F_OK) == 0) {
			diag("--rmdirs-file: cannot remove %s: %s", lines[n], strerror(errno));
			ret = -1;
		}
		free(lines[n]);
	}
	return ret;
}
