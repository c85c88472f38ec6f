/* kupdate apply from a login session a preserved unit carries: handoff.c */
#ifndef KUPDATE_HANDOFF_H
#define KUPDATE_HANDOFF_H

#include <stdbool.h>

#include "sd.h"

/* the FILE of --handoff FILE in argv, or NULL */
const char *handoff_arg(int argc, char **argv);
/* When this process runs in a login session one of the units (names)
 * carries: the same apply started in kupdate-apply-PID.service with
 * --handoff *file (malloc'd), said; 1.  Not in such a session: 0.  A
 * failure: -errno, said. */
int handoff_start(struct sd *s, const char *const *names, int n, int argc, char **argv,
		  char **file);
/* print what file gains until its end line, within the bounds of
 * handoff.c; returns the apply's exit status */
int handoff_follow(const char *file);
/* the worker (apply --handoff FILE): its output into FILE, its pid said */
int handoff_worker_begin(const char *file);
/* its end line, unless a kexec is queued (the new boot's kupdate-finish
 * writes it then, after the report) */
void handoff_worker_end(int rc, bool kexec_queued);
/* kupdate-finish: the report of cycle id for every follower waiting for
 * one (id NULL: only the files of followers gone are removed) */
void handoff_report(const char *id);

#endif
