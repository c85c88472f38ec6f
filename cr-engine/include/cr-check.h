/* The kernel interfaces the engine relies on, each tried on something of
 * the caller's own (its own sockets, its own memory): for `kupdate check`,
 * which reports them before an update relies on them.  Nothing is changed.
 * (cr.h has cr_uffd_wp_async, the pre-dump's.) */
#ifndef CR_CHECK_H
#define CR_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Does sock_diag (netlink, as the dump lists sockets) list the sockets of
 * inodes ino[0..n-1]?  seen[i] says for each.  0, or -errno if it cannot
 * list sockets at all (logged: cr_log_first_error() says why). */
int cr_check_sock_diag(const ino_t *ino, size_t n, bool *seen);

/* Does nftables take the network lock's table, sets and rules?  Checked by
 * the kernel in nftables' check mode: nothing is applied.  0, or -errno
 * with the reason in why (libnftables missing, the kernel's refusal). */
int cr_check_net_lock(char *why, size_t len);

/* Does the PAGEMAP_SCAN ioctl (Linux 6.7) on /proc/self/pagemap find a
 * page of ours present?  1 if it does, 0 if it misses it, -errno if the
 * ioctl fails (-EINVAL, -ENOTTY: a kernel without it) or the pagemap
 * cannot be opened; the dump falls back to reading pagemap without it. */
int cr_check_pagemap_scan(void);

#endif
