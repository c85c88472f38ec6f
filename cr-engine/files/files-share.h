#ifndef CR_FILES_SHARE_H
#define CR_FILES_SHARE_H

/* What fd tables and fs structs processes share, at dump (files-share.c):
 * the checks dump_files (files-dump.c) makes. */
struct cr_dump_ctx;
struct cr_proc;

/* p's fd table and fs struct, shared only down the tree (p->fdt_owner,
 * p->share_fs), or refused */
int files_dump_sharing(struct cr_dump_ctx *ctx, struct cr_proc *p);
/* p, holding POSIX locks through the fd table of holder: none on what
 * the restore closes again (a memfd, its executable, a mapped file) */
int files_check_posix_locks(struct cr_dump_ctx *ctx, const struct cr_proc *holder,
			    struct cr_proc *p);
/* p shares the table of p->fdt_owner: no POSIX lock of it taken by p */
int files_check_sharer_locks(struct cr_proc *p);

#endif
