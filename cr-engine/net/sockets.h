#ifndef CR_SOCKETS_H
#define CR_SOCKETS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

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

/* the listening sockets a service manager passed the restore (socket
 * activation: cr_restore_opts.listen_fds), each taken once */
struct sk_listeners {
	const int *fds;
	size_t n;
	bool *used;
};
/* a copy of the passed listener of type bound to addr (marked taken),
 * -ENOENT when none is, or another -errno */
int sk_take_listener(struct sk_listeners *l, int type, const struct sockaddr *addr, socklen_t len,
		     const char *what);

#endif
