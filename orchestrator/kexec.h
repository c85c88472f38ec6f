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
int kexec_now(struct sd *s, bool fast);

#endif
