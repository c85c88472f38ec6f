#ifndef CR_CRC32C_H
#define CR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli), the checksum of every image file.  Uses the SSE4.2
 * instruction when the CPU has it. crc32c(0, ...) starts a new sum. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
int crc32c_hw(void);
/* the portable path, for tests and CPUs without SSE4.2 */
uint32_t crc32c_soft(uint32_t crc, const void *buf, size_t len);
/* its tables (crc32c-impl.h), which the restorer gets a copy of */
struct crc32c_tab;
const struct crc32c_tab *crc32c_soft_tab(void);

#endif
