/* Links: unix connections between two trees dumped together (a database
 * unit and the unit of a client connected over its socket).
 *
 * Before the freeze the caller asks which sockets of its trees are
 * connected, and to what (cr_unix_connected), to stop both ends' trees
 * before either's queues are read.  The dump keeps such a socket as linked
 * (cr_linked_unix_fn, unix.c): its own queue, name and options in its own
 * images.  At restore one party makes the connection again from the two
 * image directories (cr_unix_link_pair): both ends, each with its queue and
 * options, named as they were; each tree's restore then takes its end
 * (cr_restore_opts.links, fdkind.c).  Who makes it and how the other end
 * reaches the other restore is the caller's. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cr.h"
#include "files.h"
#include "images/files.pb-c.h"
#include "log.h"
#include "proc.h"
#include "sockdiag.h"
#include "unix.h"
#include "util.h"

/* every FileEntry of files.img in dir (freed by free_entries) */
static int load_entries(const char *dir, FileEntry ***out, size_t *nr)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	*out = NULL;
	*nr = 0;
	if (dfd < 0)
		return pr_errno("cannot open image directory %s", dir);
	ret = files_read(dfd, out, nr);
	close(dfd);
	return ret;
}

static void free_entries(FileEntry **e, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		file_entry__free_unpacked(e[i], NULL);
	free(e);
}

static const UnixSk *find_linked(FileEntry **e, size_t nr, uint32_t ino)
{
	for (size_t i = 0; i < nr; i++)
		if (e[i]->kind == FILE_KIND__FILE_UNIX && e[i]->usk && e[i]->usk->linked &&
		    e[i]->usk->ino == ino)
			return e[i]->usk;
	return NULL;
}

int cr_images_links(const char *imgdir, struct cr_unix_link **out, size_t *nr)
{
	FileEntry **e;
	size_t ne;
	int ret = load_entries(imgdir, &e, &ne);

	*out = NULL;
	*nr = 0;
	for (size_t i = 0; !ret && i < ne; i++) {
		const UnixSk *u = e[i]->usk;
		struct cr_unix_link *n;

		if (e[i]->kind != FILE_KIND__FILE_UNIX || !u || !u->linked)
			continue;
		n = realloc(*out, (*nr + 1) * sizeof(**out));
		if (!n) {
			ret = -ENOMEM;
			break;
		}
		*out = n;
		n[(*nr)++] = (struct cr_unix_link){ u->ino, u->peer, -1 };
	}
	free_entries(e, ne);
	if (ret) {
		free(*out);
		*out = NULL;
		*nr = 0;
	}
	return ret;
}

int cr_unix_link_pair(const char *imgdir, uint32_t ino, const char *peer_dir, uint32_t peer,
		      int *fd, int *peer_fd)
{
	FileEntry **ea = NULL, **eb = NULL;
	size_t na = 0, nb = 0;
	const UnixSk *a, *b;
	char what[96];
	int ret = load_entries(imgdir, &ea, &na);

	if (!ret)
		ret = load_entries(peer_dir, &eb, &nb);
	if (ret)
		goto out;
	snprintf(what, sizeof(what), "the link of unix sockets %u and %u", ino, peer);
	a = find_linked(ea, na, ino);
	b = find_linked(eb, nb, peer);
	if (!a || !b || a->peer != peer || b->peer != ino || a->type != b->type) {
		pr_err("%s: %s holds no linked socket %u connected to socket %u of %s", what,
		       !a ? imgdir : peer_dir, !a ? ino : peer, !a ? peer : ino,
		       !a ? peer_dir : imgdir);
		ret = -ENOENT;
		goto out;
	}
	ret = unix_create_pair(a, b, fd, peer_fd, what, false);
out:
	free_entries(ea, na);
	free_entries(eb, nb);
	return ret;
}

/* the inode of fd's socket, or 0 */
static uint32_t socket_ino(int dfd, const char *name)
{
	char link[64];
	ssize_t n = readlinkat(dfd, name, link, sizeof(link) - 1);
	unsigned long ino;

	if (n <= 0)
		return 0;
	link[n] = 0;
	return sscanf(link, "socket:[%lu]", &ino) == 1 ? (uint32_t)ino : 0;
}

static int cmp_link(const void *a, const void *b)
{
	uint32_t x = ((const struct cr_unix_link *)a)->ino,
		 y = ((const struct cr_unix_link *)b)->ino;

	return x < y ? -1 : x > y;
}

int cr_unix_connected(const pid_t *pids, size_t n, struct cr_unix_link **out, size_t *nr)
{
	struct sk_table t = { 0 };
	int ret = sockdiag_collect(&t);

	for (size_t i = 0; !ret && i < n; i++) {
		char rel[32];
		int dfd;
		DIR *d;
		struct dirent *de;

		snprintf(rel, sizeof(rel), "%d/fd", pids[i]);
		dfd = proc_open(rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (!d) {
			if (dfd >= 0)
				close(dfd);
			continue; /* gone since: it holds nothing */
		}
		while (!ret && (de = readdir(d))) {
			uint32_t ino = de->d_name[0] != '.' ? socket_ino(dirfd(d), de->d_name) : 0;
			const struct sk_diag *s = ino ? sockdiag_find(&t, ino) : NULL;
			struct cr_unix_link *m;

			if (!s || s->family != AF_UNIX || !s->peer)
				continue;
			m = realloc(*out, (*nr + 1) * sizeof(**out));
			if (!m) {
				ret = -ENOMEM;
				break;
			}
			*out = m;
			m[(*nr)++] = (struct cr_unix_link){ ino, s->peer, -1 };
		}
		closedir(d);
	}
	sockdiag_free(&t);
	/* a socket several fds or processes hold: once */
	if (!ret && *nr > 1) {
		size_t k = 0;

		qsort(*out, *nr, sizeof(**out), cmp_link);
		for (size_t i = 0; i < *nr; i++)
			if (!k || (*out)[k - 1].ino != (*out)[i].ino)
				(*out)[k++] = (*out)[i];
		*nr = k;
	}
	return ret;
}
