/* Clocks of a tree across a dump and restore (timens.c). */
#ifndef CR_TIMENS_H
#define CR_TIMENS_H

#include <stdint.h>
#include <sys/types.h>

/* pid shares first's time namespace (first 0: no comparison) */
int timens_check(pid_t pid, pid_t first);
/* CLOCK_MONOTONIC and CLOCK_BOOTTIME as pid sees them now */
int timens_clocks(pid_t pid, int64_t *mono, int64_t *boot);
/* the children created from now on live in a new time namespace whose
 * clocks read mono and boot now; *saved lets timens_leave go back */
int timens_enter(int64_t mono, int64_t boot, int *saved);
void timens_leave(int saved);

#endif
