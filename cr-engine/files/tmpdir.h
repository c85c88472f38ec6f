/* Directories of a tree's own mount namespace saved whole (tmpdir.c). */
#ifndef CR_TMPDIR_H
#define CR_TMPDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cr_dump_ctx;
struct img_reader;

/* dump: list the directory at point (as the tree sees it) */
int tmpdir_dump(struct cr_dump_ctx *ctx, const char *point);
/* the same for the mount namespace a process of the tree made (owner, a
 * container's init: mntns.c), device nodes kept; its index, or -errno */
int tmpdir_dump_in(struct cr_dump_ctx *ctx, pid_t owner, const char *point);
bool tmpdir_holds(const struct cr_dump_ctx *ctx, pid_t owner, const char *path);
/* write tmpdir-N.img for each; *paths: their paths, in order (the array is
 * the caller's to free, not the strings) */
int tmpdir_write(struct cr_dump_ctx *ctx, char ***paths, size_t *nr);
void tmpdir_free_dump(struct cr_dump_ctx *ctx);

/* restore: the directories are empty in pid's namespace; then, inside the
 * namespace, made again from the images of imgfd */
int tmpdir_check(pid_t pid, char *const *paths, size_t n);
int tmpdir_restore(int imgfd, char *const *paths, size_t n);
/* tmpdir-idx.img, which holds path, made again in directory at */
int tmpdir_restore_at(int imgfd, size_t idx, const char *path, const char *at);
/* the name of saved directory idx's image */
void tmpdir_image_name(size_t idx, char *buf, size_t len);
/* the owners made again as a user namespace names them (a container's
 * mount made again from inside its user namespace): id saved (outside)
 * -> id there, or -1 for one without a name there */
struct tmpdir_ids {
	int64_t (*inside)(void *arg, uint32_t id, bool gid);
	void *arg;
};
/* from its image r, read before (img_reader_open), which it closes */
int tmpdir_restore_read(struct img_reader *r, const char *path, const char *at,
			const struct tmpdir_ids *ids);

#endif
