/* Recovery from an apply that was killed (SIGKILL, power kept): see recover.c. */
#ifndef KUPDATE_RECOVER_H
#define KUPDATE_RECOVER_H

#include <sys/types.h>

/* The record an apply keeps in its partial cycle directory while it runs
 * (APPLY_RECORD), or a check while its unit is frozen (CHECK_RECORD): its
 * pid, then one unit a line. */
#define APPLY_RECORD "apply"
#define CHECK_RECORD "check"
int write_unit_record(const char *tmpdir, const char *name, const char *const *units, int n);
/* Resume the units of every apply that died half-way; the number of such
 * applies.  Skipped (0) while an apply holds the state lock. */
int recover_interrupted(void);

/* A plain dump's record while it runs (removed at exit); a warning and
 * an error code if it cannot be kept (the dump goes on without it). */
int write_dump_record(const char *imgdir, const pid_t *roots, int n);
/* Release the connections of every dump of this network namespace that
 * died before it ended; the number of such dumps. */
int recover_dead_dumps(void);

#endif
