#ifndef KUPDATE_SD_H
#define KUPDATE_SD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define JOURNAL_STDOUT "/run/systemd/journal/stdout"

struct sd {
	struct sd_bus *bus;
};

struct unit_info {
	char *active;	/* ActiveState */
	char *load;	/* LoadState */
	char *freezer;	/* FreezerState */
	char *cgroup;	/* ControlGroup, services only */
	char *fragment; /* FragmentPath: the unit file */
	char *sub;	/* SubState */
	pid_t main_pid;
	bool dynamic_user; /* DynamicUser=: uid and gid were allocated for it */
	uint32_t uid, gid; /* its UID and GID properties (services only) */
};

int sd_open(struct sd *s);
/* systemd's version, asked on the system bus (kupdate check); malloc'd */
int sd_systemd_version(char **ver);
void sd_close(struct sd *s);
int sd_unit_info(struct sd *s, const char *unit, struct unit_info *ui);
void unit_info_free(struct unit_info *ui);
/* the units that are PartOf= unit (its ConsistsOf=): a NULL-terminated
 * malloc'd array of malloc'd names */
int sd_unit_parts(struct sd *s, const char *unit, char ***out);
int sd_freeze(struct sd *s, const char *unit);
int sd_thaw(struct sd *s, const char *unit);
int sd_kill(struct sd *s, const char *unit, int sig);
int sd_mask_runtime(struct sd *s, const char *unit, bool mask);
int sd_reload(struct sd *s);
/* CLOCK_MONOTONIC when systemd started in this boot (the kernel's own boot
 * ends there), ns; -1 if unknown */
int64_t sd_userspace_start_ns(struct sd *s);
int sd_start(struct sd *s, const char *unit, const char *mode);
int sd_reset_failed(struct sd *s, const char *unit);
/* restart the unit if it runs (TryRestartUnit), without waiting */
int sd_try_restart(struct sd *s, const char *unit);
/* a transient service running argv (argv[0] a path) with envp
 * (NULL-terminated), removed once it ended */
int sd_start_service(struct sd *s, const char *unit, const char *description, char *const *argv,
		     char *const *envp);
/* a transient scope holding these processes (StartTransientUnit), in slice */
int sd_start_scope(struct sd *s, const char *scope, const char *slice, const char *description,
		   const pid_t *pids, size_t nr);
/* a unit neither active nor starting is started again (failed state reset
 * first), and that is said: for the units of an apply that failed, which
 * ran for a moment without their Restart= (WHEN: "during ...") */
void restart_if_stopped(struct sd *s, const char *unit, const char *when);
/* wait until the unit settles (active, failed or inactive, no job): 0 if
 * active, -ENOENT/-EIO otherwise, -ETIMEDOUT */
int sd_wait_settled(struct sd *s, const char *unit, int timeout_s);

/* the engine's hooks for stdout/stderr streams to journald */
bool journal_replaceable(const char *peer, void *arg);
int journal_stream(const char *peer, const char *comm, void *arg);
/* a line in the journal with KUPDATE_CYCLE= and KUPDATE_UNIT= fields */
void journal_note(const char *cycle, const char *unit, int prio, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
