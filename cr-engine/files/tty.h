#ifndef CR_TTY_H
#define CR_TTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "images/files.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_file;
struct rfiles;
struct rproc;

/* a pseudo-terminal end: the master multiplexer or /dev/pts/N */
bool tty_is_pty(const char *link, const struct stat *st);
/* f->path: its link */
int tty_dump(struct cr_dump_ctx *ctx, struct cr_proc *p, int fd, const char *fdinfo,
	     struct cr_file *f);
/* once every fd is dumped: each slave's master is in the tree, and every
 * description of a pair carries the pair's state */
int tty_finish_dump(struct cr_dump_ctx *ctx);
/* a session leader's controlling terminal, if it is a pair of the tree:
 * its index, or -1 */
int tty_ctty(struct cr_dump_ctx *ctx, struct cr_proc *p, int *fg);
/* its part of the files.img entry; what its dump allocated, freed */
void tty_save(const struct cr_file *f, FileEntry *e);
void tty_free_dump(struct cr_file *f);

/* sound, and the only master of its index in f */
int tty_validate(const struct rfiles *f, const FileEntry *e);

/* restore: the pairs this process made */
struct rpty {
	uint32_t index;
	int master; /* the pair's master, or -1 */
	bool termios_done;
	bool hung_up; /* made for hung-up slaves: their master closes unused */
};
struct rtty {
	struct rpty *p;
	size_t n;
	int floor; /* the masters are kept at or above this fd (files-restore.c) */
};
/* a new description of e's end of its pair, making the pair first */
int tty_restore(const struct rfiles *f, const FileEntry *e, struct rproc *rp, int at,
		const char *what);
void tty_close_pairs(struct rtty *t);
/* Make the pair whose master is on master_fd this session leader's
 * controlling terminal. */
int tty_set_ctty(int master_fd, uint32_t index, pid_t pid);
/* its foreground process group, once every group exists */
int tty_set_fg(pid_t fg, pid_t pid);

#endif
