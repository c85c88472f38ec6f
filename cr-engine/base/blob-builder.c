/* The blob builder's primitives (blob-builder.h): below the planner
 * (restore-blob.c) and the kinds that add to what it plans. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "blob-builder.h"
#include "log.h"
#include "util.h"

int builder_add_string(struct rst_builder *b, const char *s, uint32_t *off)
{
	size_t len = strlen(s) + 1;
	char *ns;

	if (!b->strings_len) {
		b->strings = malloc(1);
		if (!b->strings)
			return -ENOMEM;
		b->strings[0] = 0;
		b->strings_len = 1;
	}
	ns = realloc(b->strings, b->strings_len + len);
	if (!ns)
		return -ENOMEM;
	b->strings = ns;
	memcpy(ns + b->strings_len, s, len);
	*off = b->strings_len; /* relative to the string table; fixed up later */
	b->strings_len += len;
	return 0;
}

int builder_place_fd(struct rst_builder *b, int fd)
{
	int nfd = fd_move_above(fd, b->next_fd);

	if (nfd >= 0)
		b->next_fd = nfd + 1;
	return nfd;
}

int builder_copy_fd(struct rst_builder *b, int fd)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, b->next_fd);

	if (nfd < 0) {
		int ret = -errno;

		pr_perror("cannot copy a descriptor above %d", b->next_fd);
		return ret;
	}
	b->next_fd = nfd + 1;
	return nfd;
}
