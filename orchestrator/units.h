/* Preserved units and their processes. */
#ifndef KUPDATE_UNITS_H
#define KUPDATE_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cr.h"
#include "sd.h"

/* where `kupdate enable` links units ($KUPDATE_WANTS_DIR overrides) */
const char *wants_dir(void);
/* the cgroup v2 mount ($KUPDATE_CGROUP_ROOT overrides) */
const char *cgroup_root(void);
/* this process's cgroup v2 group ("/system.slice/x.service", "/" for the
 * root), malloc'd; NULL if it is in none */
char *own_cgroup(void);
/* the same for process pid (0: this one) */
char *cgroup_of_pid(pid_t pid);
bool unit_name_valid(const char *unit);
/* Does the unit's file live in /run (transient, runtime), by fragment or
 * by the link of kupdate enable? */
bool unit_runtime(const char *unit, const char *fragment);
/* a unit not loaded (systemd forgot it), inactive or failed */
bool unit_ended(const struct unit_info *ui);
/* the preserved units v[0..n) without those whose file was in /run and
 * that have ended (their link removed, said) */
int preserved_drop_ended(struct sd *s, char **v, int *n);
int preserved_units(char ***out, int *nr);
/* The units to work on for units in[0..n): each as it is, but a unit that
 * runs no process itself and has units that are PartOf= it (an umbrella,
 * as Debian ships several: NAME.service and its NAME@INSTANCE.service)
 * gives those instead, said on stderr.  *out: a malloc'd array of
 * malloc'd names, without duplicates. */
int units_follow_parts(struct sd *s, const char *const *in, int n, char ***out, int *nout);
/* every process of the unit's cgroup and its sub-cgroups, main pid first */
/* the processes of control group directory dir and of those below it,
 * appended to *v: 0 or -errno */
int cgroup_procs(const char *dir, pid_t **v, int *n);
int unit_members(const char *unit, const struct unit_info *ui, pid_t **out, int *nr);
/* fork a child whose pid is none of ids[0..n): a helper that lives while
 * restores still take their saved pids (a session's scope holder, the
 * holder of a link's other end).  0 in the child, its pid in the parent,
 * -EEXIST after 64 tries, or another -errno */
pid_t fork_free_pid(const pid_t *ids, size_t n);
/* A dump that fails with -EAGAIN (a vfork in progress, a connection
 * waiting to be accepted: a state that passes) is tried again after the
 * unit ran for UNIT_AGAIN_WAIT_US, UNIT_AGAIN_TRIES times in all. */
#define UNIT_AGAIN_TRIES   25
#define UNIT_AGAIN_WAIT_US 40000
/* The unix sockets connected to a peer that a unit's processes hold
 * (cr_unix_connected): who is connected to whom among preserved units, a
 * client unit to a database unit's socket say (their connections are kept
 * as links, the units frozen together). */
struct unit_socks {
	struct cr_unix_link *v;
	size_t n;
};
int unit_sockets(const char *unit, const struct unit_info *ui, struct unit_socks *s);
void unit_socks_free(struct unit_socks *s);
/* the index of the unit of socks[0..n) other than self holding socket ino,
 * or -1 */
int socks_owner(const struct unit_socks *socks, size_t n, size_t self, uint32_t ino);
/* a dry dump of the unit, frozen while it is seized; on failure why says
 * what stands in the way; st: its processes, and the deleted files a dump
 * would save.  others[0..nothers), but self: the sockets of the units
 * preserved with it (its connections to them are links), or NULL.  The
 * caller holds the state lock. */
int unit_check(struct sd *s, const char *unit, const struct unit_info *ui, uint64_t ghost_limit,
	       const struct unit_socks *others, size_t nothers, size_t self, char *why, size_t len,
	       struct cr_dump_stats *st);
/* SIZE, SIZEK, SIZEM or SIZEG (powers of 1024), above 0: 0, or -1 (the
 * --ghost-limit of dump, apply and list) */
int parse_size(const char *s, uint64_t *out);
/* "N deleted file(s), SIZE" a dump of st's tree saves, or "" */
void deleted_note(const struct cr_dump_stats *st, char *buf, size_t len);
/* "..." with JSON escapes, malloc'd */
char *json_escape(const char *s);

#endif
