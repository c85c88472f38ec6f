/* The logind sessions a preserved unit carries (sshd's): sessions.c */
#ifndef KUPDATE_SESSIONS_H
#define KUPDATE_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cycle.pb-c.h"
#include "sd.h"

struct usession {
	char *id;     /* logind's session id */
	char *scope;  /* session-ID.scope */
	char *slice;  /* user-UID.slice */
	char *cgroup; /* the scope's control group, below the cgroup root */
	uint32_t uid;
	bool frozen;
};

struct usessions {
	struct usession *s;
	int n;
};

/* The login session scopes holding a process below one of members (the
 * unit's processes): added to *ss (none found: *ss stays empty).  0 or
 * -errno, said. */
int sessions_find(const pid_t *members, int nr, struct usessions *ss);
/* every process of the sessions' scopes appended to *members, once */
int sessions_members(const struct usessions *ss, pid_t **members, int *nr);
/* freeze (or thaw) each session's scope; fn is sd_freeze or sd_thaw */
int sessions_call(struct sd *s, struct usessions *ss, bool freeze);
/* logind's record of each session, for the cycle's manifest: malloc'd
 * CycleSession array (cycle_session__free_unpacked frees each) */
int sessions_record(const struct usessions *ss, const pid_t *members, int nr, CycleSession ***out,
		    size_t *nout);
void sessions_free(struct usessions *ss);
/* Does this process run in one of the sessions? */
bool sessions_hold_self(const struct usessions *ss);

/* In the boot that restores the unit, before its restore: the sessions'
 * FIFOs (the engine opens them by name).  0 or -errno, said. */
int sessions_prepare(const CycleUnit *cu);
/* Then each session's scope, started with a holder process (whose pid is
 * none of ids), so that the engine makes the session's processes in it
 * (h->places, for CLONE_INTO_CGROUP).  A scope that cannot be made is said
 * and left to sessions_adopt.  0, or -ENOMEM. */
struct session_holds {
	struct sd sd;
	int sd_ret;			/* sd_open's */
	size_t n;			/* the unit's sessions */
	pid_t *holder;			/* per session: its scope's holder, or 0 */
	int *fds;			/* per session: its scope's cgroup, or -1 */
	struct cr_cgroup_place *places; /* for cr_restore_opts.cgroups */
	size_t nplaces;
};
int sessions_hold(const CycleUnit *cu, const pid_t *ids, size_t nids, struct session_holds *h);
/* After the restore: the holders gone (the scopes hold the sessions'
 * processes), a scope not made before asked for with the processes of the
 * session now, logind's records written, logind told (restarted if it
 * runs).  what: a line saying what failed, for the unit's status.  0 or
 * -errno. */
int sessions_adopt(const CycleUnit *cu, struct session_holds *h, char *what, size_t len);
/* the holders ended (an empty scope stops), the groups closed */
void sessions_release(struct session_holds *h);

#endif
