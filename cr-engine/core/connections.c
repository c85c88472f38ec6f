/* The established TCP connections of an image directory (cr.h), for the
 * network lock of a caller that must put it in place before the tree is
 * restored.  Reads the directory's files image (files.c), above both it and
 * the sockets (tcp.c). */
#include <fcntl.h>

#include "cr.h"
#include "files.h"
#include "log.h"
#include "tcp.h"
#include "util.h"

int cr_images_connections(const char *imgdir, struct cr_conn **out, size_t *nr)
{
	_cleanup_close_ int dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct rfiles f;
	struct cr_conn *v = NULL;
	size_t n = 0;
	int ret;

	*out = NULL;
	*nr = 0;
	if (dirfd < 0)
		return pr_errno("cannot open image directory %s", imgdir);
	ret = files_load(dirfd, &f);
	for (size_t i = 0; !ret && i < f.nr_files; i++) {
		struct cr_conn *nv;

		if (!inet_is_repaired(f.files[i]))
			continue;
		nv = xrealloc_array(v, n + 1, sizeof(*nv));
		if (!nv) {
			ret = -ENOMEM;
			break;
		}
		v = nv;
		inet_conn(f.files[i]->isk, &v[n++]);
	}
	files_free(&f);
	if (ret) {
		free(v);
		return ret;
	}
	*out = v;
	*nr = n;
	return 0;
}
