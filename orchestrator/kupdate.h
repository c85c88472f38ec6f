/* kupdate: the commands. */
#ifndef KUPDATE_H
#define KUPDATE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

void usage(FILE *out);
int parse_pid(const char *s, pid_t *pid);

/* engine_cmds.c: the engine as it is */
int cmd_dump(int argc, char **argv);
int cmd_restore(int argc, char **argv);
/* boot.c: the listening sockets passed by a service manager (LISTEN_FDS,
 * LISTEN_PID), for cr_restore_opts.listen_fds; their count */
size_t passed_listeners(int **fds);
int cmd_show(int argc, char **argv);

/* units.c, apply.c, boot.c, status.c: the update cycle */
int cmd_enable(int argc, char **argv);
int cmd_disable(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_apply(int argc, char **argv);
/* the state lock's fd (apply.c), or -errno when another kupdate holds it
 * after wait_s seconds */
int lock_state(int wait_s);
int cmd_status(int argc, char **argv);
int cmd_generator(int argc, char **argv);
int cmd_netlock(int argc, char **argv);
int cmd_mount_store(int argc, char **argv);
int cmd_restore_unit(int argc, char **argv);
int cmd_finish(int argc, char **argv);

/* hook.c: following apt */
struct kupdate_conf {
	bool auto_apply; /* auto-apply = yes: apply a kernel apt installed */
};
/* /etc/kupdate/kupdate.conf ($KUPDATE_CONF) */
const char *conf_path(void);
/* read it (absent: the defaults); unknown settings are warned of */
int conf_read(struct kupdate_conf *c);
int cmd_kernel_installed(int argc, char **argv);
/* until apt and dpkg are done (their frontend lock is free), at most
 * timeout_s; 0, or -ETIMEDOUT said */
int wait_after_apt(int timeout_s);

/* check.c */
int cmd_check(int argc, char **argv);

#endif
