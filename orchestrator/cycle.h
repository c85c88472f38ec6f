#ifndef KUPDATE_CYCLE_H
#define KUPDATE_CYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cycle.pb-c.h"

#define CYCLE_FORMAT_VERSION 1
/* the kinds of the cycle's files in the engine's container (cr-msgfile.h;
 * kupdate-images(5)) */
#define CYCLE_KIND_MANIFEST    100 /* manifest.img: one cycle_manifest */
#define CYCLE_KIND_UNIT_STATUS 101 /* status-UNIT.img: one unit_status */

const char *state_dir(void);
/* $KUPDATE_RUN_DIR, default /run/kupdate: what lasts until the next boot */
const char *run_dir(void);
/* $state/cycles/ID[/fmt...], malloc'd */
char *cycle_path(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mkdir_p(const char *path, mode_t mode);
int rm_rf(const char *path);
/* A cycle's images, DIR/units: a directory, or with apply --store a symlink
 * to STORE/ID/units, which goes too.  rm_cycle_dir: a whole cycle. */
int rm_cycle_images(const char *units);
int rm_cycle_dir(const char *dir);
int current_boot_id(char *buf, size_t len);
char *new_cycle_id(void);
bool cycle_id_valid(const char *id);

int manifest_write(int dirfd, const CycleManifest *m);
int manifest_read(const char *id, CycleManifest **out);
int manifest_validate(const CycleManifest *m);
/* parse a manifest held in memory (the fuzz target); data stays the caller's */
int manifest_parse(const unsigned char *data, size_t len, CycleManifest **out);

int status_write(const char *id, const UnitStatus *s);
int status_read(const char *id, const char *unit, UnitStatus **out);

int cycle_claimed_by(const char *id, char *boot, size_t len);
int cycle_claim(const char *id);
char *cmdline_cycle(void);

#endif
