/* Recovery from an apply that was killed (SIGKILL, power kept): see recover.c. */
#ifndef KUPDATE_RECOVER_H
#define KUPDATE_RECOVER_H

/* the record an apply keeps in its partial cycle directory while it runs */
int write_apply_record(const char *tmpdir, const char *const *units, int n);
/* Resume the units of every apply that died half-way; 0 if there was none
 * or all went well.  Skipped (0) while an apply holds the state lock. */
int recover_interrupted(void);

#endif
