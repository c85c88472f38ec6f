#ifndef CR_REGFILE_H
#define CR_REGFILE_H

/* The kinds reopened by path (regular files, directories, character
 * devices, FIFOs), deleted files (a ghost made again) and memfds
 * (regfile.c): their rows of the fd-kind table. */
#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_file;
struct cr_proc;
struct rfiles;
struct rproc;

/* dump: a memfd's shared memory object (shmem.c); f->path its link */
int memfd_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	       struct cr_file *f);
/* their parts of the files.img entry */
void reg_save(const struct cr_file *f, FileEntry *e);
void chr_save(const struct cr_file *f, FileEntry *e);
void memfd_save(const struct cr_file *f, FileEntry *e);
/* restore: a new description, by its path, or of its ghost */
int regfile_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		    const char *what);
int memfd_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		  const char *what);

#endif
