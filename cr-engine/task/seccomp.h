/* Seccomp filters and strict mode (seccomp.c). */
#ifndef CR_SECCOMP_H
#define CR_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "images/seccomp.pb-c.h"

struct cr_dump_ctx;
struct cr_proc;
struct cr_seccomp;
struct rst_args;

/* dump */
bool seccomp_thread_active(pid_t tid);
int dump_seccomp(struct cr_dump_ctx *ctx, struct cr_proc *p, const char *status);
void seccomp_free_dump(struct cr_seccomp *s);
/* 1 and *sc filled when the process has seccomp, 0 when not, -errno */
int seccomp_image(const struct cr_seccomp *s, Seccomp *sc, SeccompFilter **fs,
		  SeccompFilter ***fps);

/* restore */
int seccomp_check_image(const char *name, const Seccomp *sc);
size_t seccomp_args_len(const Seccomp *sc);
void seccomp_plan(const Seccomp *sc, struct rst_args *args, uint8_t *base, size_t *off);

#endif
