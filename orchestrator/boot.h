/* The restore side of a cycle: generator, network lock, restore-unit,
 * finish, and the units' drop-ins. */
#ifndef KUPDATE_BOOT_H
#define KUPDATE_BOOT_H

#include <stdbool.h>
#include <stddef.h>

#include "cycle.h"

struct sd;

/* path written whole or not at all (a file beside it, renamed), its
 * directory made if missing: 0 or -errno, said */
int write_file_atomic(const char *path, const void *data, size_t len);
/* this program's path (/proc/self/exe), /usr/sbin/kupdate if unreadable;
 * malloc'd */
char *self_exe(void);
/* /run/systemd/system ($KUPDATE_RUNTIME_UNIT_DIR overrides) */
const char *runtime_unit_dir(void);
/* a dumped unit must neither restart nor run its stop commands when its
 * processes are killed */
int write_checkpointed_dropin(const char *unit);
void remove_checkpointed_dropin(const char *unit);
/* the drop-in that makes a unit's start restore it from cycle id; store:
 * apply --store's directory, which the restore waits to be mounted;
 * namespaces: those its tree had of its own (CLONE_NEW*), which systemd
 * builds anew for kupdate-anchor before the restore */
int write_restore_dropin(const char *dir, const char *unit, const char *exe, const char *id,
			 bool here, const char *store, unsigned namespaces);
/* kupdate-anchor, as installed (KUPDATE_ANCHOR in tests) */
const char *anchor_path(void);
/* start reading the images of cycle id from the disk in the background
 * (the generator: the restores come seconds later) */
void prefetch_cycle_images(const char *id, const CycleManifest *m);
/* restore the units of cycle id on this kernel (the kexec failed) */
int restore_here(struct sd *s, const char *id);
/* cold-start what was not restored, record, clean up (kupdate finish) */
int finish_cycle(struct sd *s, const char *id, bool here);

#endif
