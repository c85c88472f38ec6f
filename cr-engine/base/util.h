/* Helpers of the engine: the public ones (cr-engine/include/cr-util.h:
 * cleanup attributes, checked allocations and reads, clocks, dlopen, the
 * mount table) and those only the engine uses. */
#ifndef CR_UTIL_H
#define CR_UTIL_H

#include "cr-util.h"

#ifndef PAGE_SIZE
#define PAGE_SIZE 4096UL
#endif
#ifndef PAGE_SHIFT
#define PAGE_SHIFT 12
#endif
#define PAGE_ALIGN(x) (((x) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1))

/* fd moved to the lowest free number >= floor (close-on-exec), the old
 * number closed: the new number, or -errno (logged) */
int fd_move_above(int fd, int floor);

/* Read a /proc file relative to /proc. */
int read_proc(char **buf, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* XCR0, the CPU state components XSAVE covers; 0 on a CPU (or a QEMU model
 * such as qemu64) without XSAVE, whose FPU/SSE state is the 512-byte
 * FXSAVE area */
uint64_t cpu_xcr0(void);

#endif
