/* The units of an apply, frozen and dumped by threads: dump-units.c */
#ifndef KUPDATE_DUMP_UNITS_H
#define KUPDATE_DUMP_UNITS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cr-util.h"
#include "cr.h"
#include "cycle.pb-c.h"
#include "sd.h"
#include "sessions.h"
#include "units.h"

struct aunit {
	const char *name;
	struct sd *sd;
	struct unit_info ui;
	pid_t *members;
	int nr_members;
	struct cr_dump_session *sess;
	struct cr_dump_stats st;
	bool frozen;
	char *rel; /* units/NAME, in the cycle directory */
	int64_t frozen_at_rt, t_freeze, t_dumped;
	char *pre;	    /* the pre-dump's directory (--pre-dump), or NULL */
	int64_t predump_ns; /* its time, while the unit ran */
	pid_t *ids;
	size_t nr_ids;
	size_t nr_conns;
	uint64_t bytes;
	int worker;		   /* the dump thread that holds sess (its processes' tracer) */
	uint64_t ghost_limit;	   /* apply --ghost-limit (0: the engine's default) */
	struct usessions sessions; /* the login sessions it carries (sessions.c) */
	CycleSession **srec;	   /* and logind's record of them, for the manifest */
	size_t nsrec;
	bool ended; /* a runtime unit that ended before its freeze: not in the cycle */
	/* unix connections among the units (link_groups): its sockets with a
	 * peer, its group (the lowest index of the units connected to it, each
	 * frozen before any of them is seized), the connections kept as links */
	struct unit_socks socks;
	int group;
	bool taken, rescanned;
	unsigned links;
	struct aunit *all; /* the apply's units, all[0..nall) */
	int nall;
};

static inline int64_t rt_ns(void)
{
	return now_ns(CLOCK_REALTIME);
}

/* The units are frozen and dumped by threads, as many as CPUs (or
 * --jobs), each taking the next unit not yet taken: the units wait frozen
 * for the last dump, so the dumps' total is in every unit's downtime.  A
 * thread that seized a unit's processes is their tracer (ptrace belongs to
 * a thread) and the only one that can end the unit's session: after the
 * dumps it waits for the verdict, to kill its units (the commit is made)
 * or to resume them (a dump failed, or a later step). */
enum { MAX_JOBS = 16 };
enum verdict { VERDICT_NONE, VERDICT_KILL, VERDICT_RESUME };

struct dumpers;
struct dump_worker {
	struct dumpers *d;
	int idx;
	pthread_t th;
};

struct dumpers {
	struct aunit *u;
	int n, next;
	const char *cycle_id, *cycdir;
	bool no_rto_revert; /* apply --no-rto-revert: for the dumps that fail too */
	int failed;	    /* 1 + the unit whose dump failed first, or 0 */
	int ret;	    /* its error */
	char why[1024];	    /* its first error message, or "" */
	int nr, idle;
	enum verdict verdict;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dump_worker w[MAX_JOBS];
};

/* the unit and the login sessions it carries, thawed (locked: take the
 * bus's lock): 0 or -EIO */
int unit_thaw(struct aunit *u, bool locked);
void unit_forget_sessions(struct aunit *u);
/* a runtime unit (its file in /run) that has ended, said; u->ended set.
 * ui: its state just read, or NULL to ask systemd now */
bool runtime_unit_ended(struct aunit *u, const struct unit_info *ui);
/* Who is connected to whom by unix sockets among the n units (a client
 * unit to a database unit's socket): u[i].socks, u[i].group, said
 * (dumpers_run does it; a unit whose sockets cannot be listed is on its
 * own). */
void link_groups(struct aunit *u, int n);
/* apply --pre-dump: the unit's memory while it runs */
int predump_unit(struct aunit *u, const char *cycle_id, const char *cycdir);
int dumpers_run(struct dumpers *d, struct aunit *u, int n, int jobs, const char *cycle_id,
		const char *cycdir, bool no_rto_revert);
void dumpers_end(struct dumpers *d, bool kill_them);
/* every unit thawed, the threads gone */
void resume_all(struct dumpers *d, struct aunit *u, int n);

#endif
