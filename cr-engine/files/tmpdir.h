/* Directories of a tree's own mount namespace saved whole (tmpdir.c). */
#ifndef CR_TMPDIR_H
#define CR_TMPDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cr_dump_ctx;

/* dump: list the directory at point (as the tree sees it) */
int tmpdir_dump(struct cr_dump_ctx *ctx, const char *point);
bool tmpdir_holds(const struct cr_dump_ctx *ctx, const char *path);
/* write tmpdir-N.img for each; *paths: their paths, in order (the array is
 * the caller's to free, not the strings) */
int tmpdir_write(struct cr_dump_ctx *ctx, char ***paths, size_t *nr);
void tmpdir_free_dump(struct cr_dump_ctx *ctx);

/* restore: the directories are empty in pid's namespace; then, inside the
 * namespace, made again from the images of imgfd */
int tmpdir_check(pid_t pid, char *const *paths, size_t n);
int tmpdir_restore(int imgfd, char *const *paths, size_t n);

#endif
