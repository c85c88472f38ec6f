#ifndef CR_SOCKETS_H
#define CR_SOCKETS_H

#include "images/sockets.pb-c.h"

struct cr_proc;

/* kupdate's own descriptor of fd of p (pidfd_getfd) */
int sk_dup(struct cr_proc *p, int fd);
/* an int socket option into *v (0 on failure); 0 or -errno */
int sk_getint(int sk, int level, int opt, int *v);
/* set an int socket option; logs "WHAT: cannot set NAME" and returns -errno */
int sk_setint(int sk, int level, int opt, int v, const char *name, const char *what);
int sk_opts_dump(int sk, SkOpts *o, int family);
int sk_opts_restore(int sk, const SkOpts *o, const char *what);

#endif
