#ifndef KUPDATE_KEXEC_H
#define KUPDATE_KEXEC_H

#include <stdbool.h>
#include <sys/types.h>

struct sd;

int kexec_load_kernel(const char *kernel, const char *initrd, const char *cmdline);
void kexec_unload(void);
/* "a-b,c-d" covering every id, at most 32 ranges (sorts ids) */
char *pid_ranges(pid_t *ids, size_t n);
char *kexec_cmdline(const char *append, const char *cycle, const char *reserve);
/* command line a holds what b does, its pid_reserve= ranges at least b's
 * (the kernel loaded with a serves a cycle whose command line is b) */
bool cmdline_covers(const char *a, const char *b);
int kexec_now(struct sd *s, bool fast);

/* The kernel the machine would boot next, as apt installs them: the
 * newest vmlinuz-RELEASE in /boot ($KUPDATE_BOOT_DIR) by version order,
 * with its initrd.img-RELEASE if there is one (*initrd NULL if not).
 * -ENOENT if none is newer than the running kernel (said if say);
 * malloc'd strings. */
int next_kernel(char **kernel, char **initrd, char **release, bool say);
/* /boot, or $KUPDATE_BOOT_DIR (tests) */
const char *boot_dir(void);

#endif
