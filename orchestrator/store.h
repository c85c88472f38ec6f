/* The image store's file system (apply --store) in the new boot.
 *
 * systemd mounts a file system of /etc/fstab once udev has announced its
 * device, seconds after the kernel made the node in devtmpfs (in our
 * emulated guests, /dev/pmem0 exists at 2 s and its mount started at 10 s).
 * The network lock, every restore and kupdate-finish read the images, so
 * they would all wait for it.  apply records how the store's file system
 * was mounted; the new boot's kupdate-store.service (written by the
 * generator) mounts it from its device node at once, and the pending
 * .mount job of fstab, if any, completes when systemd sees the mount. */
#ifndef KUPDATE_STORE_H
#define KUPDATE_STORE_H

#include <stdint.h>

#include "cycle.h"

#define STORE_UNIT "kupdate-store.service"

/* How the file system holding dir is mounted, from mountinfo (NULL: this
 * process's) and fstab (NULL: /etc/fstab).  0 with *out NULL when the new
 * boot cannot or need not mount it itself; *why (static text, or NULL
 * when there is nothing to say: the root file system) tells why.
 * -errno when dir or mountinfo cannot be read. */
int store_mount_find(const char *dir, const char *mountinfo, const char *fstab, StoreMount **out,
		     const char **why);
void store_mount_free(StoreMount *sm);

/* mountinfo's per-mount (vfs) and super block options as mount(2)'s flags
 * and data (malloc'd, "" when none) */
int store_mount_opts(const char *vfs, const char *super, uint64_t *flags, char **data);

/* systemd's name for the unit of a path (systemd-escape --path):
 * /var/lib/kupdate-store -> var-lib-kupdate\x2dstore + suffix; malloc'd */
char *unit_name_from_path(const char *path, const char *suffix);

/* Mount sm at boot: nothing if its mount point is one already; else wait
 * up to wait_ms for the device node, mount it, and check that it holds
 * store (the cycle's directory in it), unmounting it if not.  0, or
 * -errno with the reason logged. */
int store_mount_now(const StoreMount *sm, const char *store, int wait_ms);

/* the [Unit] lines of a unit that reads the images of m: the store's
 * mount (RequiresMountsFor=) and kupdate-store.service when m has one;
 * "" without a store; malloc'd */
char *store_unit_deps(const CycleManifest *m);

/* a manifest's store_mount is safe to write into a unit file and to mount */
int store_mount_validate(const CycleManifest *m);

#endif
