/* Restore, step 1: every image of the tree loaded and validated before
 * anything is created (restore.c). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "image.h"
#include "ghost.h"
#include "log.h"
#include "parts.h"
#include "pstree.h"
#include "util.h"

#include "restore-ctx.h"

/* ------------------------------------------------------------ loading */

/* A file that is not the one the dump wrote: say whether it is damaged
 * (a metadata image is checked in full for that) or intact but another
 * dump's.  Always logs one error and returns non-zero. */
static int refuse_file(struct rctx *c, const InventoryFile *f, uint64_t size)
{
	struct img_reader r;
	uint32_t kind = 0;
	int ret;

	ret = img_peek_kind(c->dirfd, f->name, &kind);
	if (!ret && kind != IMG_PAGES && kind != IMG_SHMEM_PAGES) {
		/* logs what is wrong if it is damaged */
		ret = img_reader_open(&r, c->dirfd, f->name, kind);
		if (ret)
			return ret;
		img_reader_close(&r);
		pr_err("image %s does not belong to this dump: its %s differs from what "
		       "inventory.img recorded (a file of another dump or cycle)",
		       f->name, size != f->size ? "size" : "checksum");
		return -EBADMSG;
	}
	if (size < f->size) {
		pr_err("image %s is damaged: truncated (%lu bytes, %lu were written)", f->name,
		       (unsigned long)size, (unsigned long)f->size);
		return -EINVAL;
	}
	if (!ret) {
		struct img_header h;
		_cleanup_close_ int fd = openat(c->dirfd, f->name, O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && pread(fd, &h, sizeof(h), 0) == sizeof(h) &&
		    h.version != IMG_FORMAT_VERSION) {
			pr_err("image %s has format version %u, this kupdate reads version %u",
			       f->name, h.version, IMG_FORMAT_VERSION);
			return -EPROTO;
		}
	}
	pr_err("image %s is damaged or from another dump: its %s differs from what "
	       "inventory.img recorded",
	       f->name, size != f->size ? "size" : "checksum");
	return -EBADMSG;
}

/* The directory holds exactly the files the inventory lists, each as it was
 * written: a file from another dump (or cycle), a missing one or an extra
 * one is refused before anything is restored. */
/* Images hold the memory of services (keys, passwords): only files of our
 * own user (root) that nobody else can change are restored. */
static int check_owner(struct rctx *c, const char *name)
{
	struct stat st;

	if (fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		pr_perror("cannot stat image %s", name);
		return -errno;
	}
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		pr_err("image %s is refused: %s (owner %u, mode %04o); images must be owned by "
		       "uid %u and writable by no one else",
		       name,
		       st.st_uid != geteuid()			       ? "not owned by us"
		       : !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) ? "not a regular file"
								       : "writable by others",
		       st.st_uid, st.st_mode & 07777, geteuid());
		return -EPERM;
	}
	return 0;
}

static int verify_files(struct rctx *c)
{
	int fd = fcntl(c->dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int ret = check_owner(c, ".");

	if (!ret)
		ret = check_owner(c, "inventory.img");
	if (ret)
		goto out;

	for (size_t i = 0; i < c->inv->n_files; i++) {
		const InventoryFile *f = c->inv->files[i];
		uint64_t size;
		uint32_t crc;

		if (!f->name[0] || strchr(f->name, '/') || f->name[0] == '.' ||
		    !strcmp(f->name, "inventory.img")) {
			pr_err("image inventory.img is damaged: file entry %zu has the name "
			       "\"%.64s\"",
			       i, f->name);
			ret = -EINVAL;
			goto out;
		}
		ret = check_owner(c, f->name);
		if (!ret)
			ret = img_fingerprint(c->dirfd, f->name, &size, &crc);
		if (ret)
			goto out;
		if (size != f->size || crc != f->crc) {
			ret = refuse_file(c, f, size);
			goto out;
		}
	}
	while (d && (de = readdir(d))) {
		bool listed = false;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "inventory.img"))
			continue;
		if (!strcmp(de->d_name, "parent")) {
			/* the pre-dump below this dump: a directory of ours too
			 * (its images are checked as they are read) */
			struct stat st;

			if (fstatat(c->dirfd, "parent", &st, 0) || !S_ISDIR(st.st_mode) ||
			    st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
				pr_err("image directory parent (the pre-dump below this dump) is "
				       "refused: missing, not owned by uid %u or writable by "
				       "others",
				       geteuid());
				ret = -EPERM;
				goto out;
			}
			continue;
		}
		/* what is not an image is never read */
		if (strlen(de->d_name) < 5 || strcmp(de->d_name + strlen(de->d_name) - 4, ".img"))
			continue;
		for (size_t i = 0; i < c->inv->n_files && !listed; i++)
			listed = !strcmp(de->d_name, c->inv->files[i]->name);
		if (!listed) {
			pr_err("image %s does not belong to this dump: inventory.img does not list "
			       "it",
			       de->d_name);
			ret = -EBADMSG;
			goto out;
		}
	}
	if (!d)
		ret = pr_errno("cannot list the image directory %s", c->opts->imgdir);
out:
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return ret;
}

static int load_inventory(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret = img_reader_open(&r, c->dirfd, "inventory.img", IMG_INVENTORY);

	if (ret)
		return ret;
	ret = img_read_first(&r, &inventory_entry__descriptor, &m);
	img_reader_close(&r);
	if (ret)
		return ret;
	c->inv = (InventoryEntry *)m;
	if (c->inv->format_version != IMG_FORMAT_VERSION || c->inv->page_size != PAGE_SIZE) {
		pr_err("images in %s have format %u and page size %u; this kupdate reads format %u "
		       "with %lu-byte pages",
		       c->opts->imgdir, c->inv->format_version, c->inv->page_size,
		       IMG_FORMAT_VERSION, PAGE_SIZE);
		return -EPROTO;
	}
	if (c->inv->pre_dump) {
		pr_err("%s holds a pre-dump (memory only): restore the dump made with --prev "
		       "on top of it",
		       c->opts->imgdir);
		return -EINVAL;
	}
	c->xcr0 = cpu_xcr0();
	if (c->inv->xfeatures & ~c->xcr0) {
		pr_err("the images use CPU state components %#lx that this CPU does not enable "
		       "(XCR0 %#lx); restore on the machine that dumped them",
		       (unsigned long)c->inv->xfeatures, (unsigned long)c->xcr0);
		return -EOPNOTSUPP;
	}
	if (c->opts->cycle_id &&
	    (!c->inv->cycle_id || strcmp(c->inv->cycle_id, c->opts->cycle_id))) {
		pr_err("image inventory.img belongs to cycle %.64s, not to cycle %s: not restored",
		       c->inv->cycle_id ? c->inv->cycle_id : "(none)", c->opts->cycle_id);
		return -EINVAL;
	}
	return verify_files(c);
}

static int load_pstree(struct rctx *c)
{
	struct img_reader r;
	ProtobufCMessage *m;
	int ret = img_reader_open(&r, c->dirfd, "pstree.img", IMG_PSTREE);

	if (ret)
		return ret;
	c->pstree = calloc(r.nr ? r.nr : 1, sizeof(*c->pstree));
	if (!c->pstree) {
		img_reader_close(&r);
		return -ENOMEM;
	}
	while ((ret = img_read(&r, &pstree_entry__descriptor, &m)) > 0)
		c->pstree[c->nr++] = (PstreeEntry *)m;
	img_reader_close(&r);
	if (ret < 0)
		return ret;
	ret = pstree_validate(c->pstree, c->nr);
	if (ret)
		return ret;
	if (c->pstree[0]->state == TASK_STATE__TASK_ZOMBIE) {
		pr_err("image pstree.img is damaged: the root %d is a zombie", c->pstree[0]->pid);
		return -EINVAL;
	}
	if ((uint32_t)c->nr != c->inv->nr_processes || c->pstree[0]->pid != c->inv->root_pid) {
		pr_err("image pstree.img does not match inventory.img (%zu processes, root %d)",
		       c->nr, c->pstree[0]->pid);
		return -EINVAL;
	}
	return 0;
}

int load_images(struct rctx *c)
{
	int ret;

	ret = load_inventory(c);
	if (!ret)
		ret = load_pstree(c);
	if (!ret)
		ret = files_load(c->dirfd, &c->files);
	if (ret)
		return ret;
	c->procs = calloc(c->nr, sizeof(*c->procs));
	if (!c->procs)
		return -ENOMEM;
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		rp->pe = c->pstree[i];
		rp->pid = rp->pe->pid;
		rp->cwd_fd = -1;
		userns_fds_init(&rp->um);
		rp->zombie = rp->pe->state == TASK_STATE__TASK_ZOMBIE;
		for (size_t k = 0; k < i; k++)
			if (c->procs[k].pid == rp->pe->ppid)
				rp->parent = &c->procs[k];
		if (rp->parent) {
			struct rproc **nc = xrealloc_array(
				rp->parent->children, rp->parent->nr_children + 1, sizeof(*nc));
			if (!nc)
				return -ENOMEM;
			rp->parent->children = nc;
			nc[rp->parent->nr_children++] = rp;
		}
		if (rp->zombie)
			continue;
		c->nr_live++;
		c->nr_threads += rp->pe->n_tids;
		ret = 0;
		for (size_t k = 0; !ret && k < nr_proc_parts; k++)
			if (proc_parts[k].load)
				ret = proc_parts[k].load(c, rp);
		if (ret)
			return ret;
	}
	/* pages a child shares with its parent: both premap them */
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *rp = &c->procs[i], *pp = rp->parent;

		if (rp->zombie)
			continue;
		ret = mem_link_cow(rp->pid, &rp->mm, pp ? pp->pid : 0,
				   pp && !pp->zombie ? &pp->mm : NULL);
		if (ret)
			return ret;
	}
	/* the rst_prepare()s of a shared fd table's processes: one at a time,
	 * the one that restores it last (restore-blob.c) */
	for (size_t i = 0; i < c->nr; i++) {
		struct rproc *o = &c->procs[i], *prev = NULL;

		if (!o->fdt_shared)
			continue;
		for (size_t k = i + 1; k < c->nr; k++)
			if (c->procs[k].fdt == o) {
				c->procs[k].fdt_prev = prev;
				prev = &c->procs[k];
			}
		o->fdt_prev = prev;
	}
	return 0;
}

void free_images(struct rctx *c)
{
	for (size_t i = 0; c->procs && i < c->nr; i++) {
		struct rproc *rp = &c->procs[i];

		for (size_t k = 0; k < nr_proc_parts; k++)
			if (proc_parts[k].free)
				proc_parts[k].free(rp);
		free(rp->children);
	}
	free(c->procs);
	for (size_t i = 0; i < c->nr; i++)
		pstree_entry__free_unpacked(c->pstree[i], NULL);
	free(c->pstree);
	files_free(&c->files);
	if (c->inv)
		inventory_entry__free_unpacked(c->inv, NULL);
}
