#include <stdlib.h>

#include "crc32c-impl.h"
#include "crc32c.h"

/* KUPDATE_NO_HW_CRC=1 takes the path of CPUs without SSE4.2 (tests) */
int crc32c_hw(void)
{
	static int hw = -1;

	if (hw < 0)
		hw = __builtin_cpu_supports("sse4.2") && !getenv("KUPDATE_NO_HW_CRC");
	return hw;
}

/* made before main: the page writer threads use them at once */
static struct crc32c_tab soft_tab;

__attribute__((constructor)) static void soft_tab_init(void)
{
	crc32c_sw_tab_init(&soft_tab);
}

const struct crc32c_tab *crc32c_soft_tab(void)
{
	return &soft_tab;
}

uint32_t crc32c_soft(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32c_sw_update(~crc, buf, len, &soft_tab);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	/* a constant of the polynomial, computed on first use */
	static uint32_t k_block;

	if (!crc32c_hw())
		return crc32c_soft(crc, buf, len);
	if (!k_block)
		k_block = crc32c_x_pow_bytes(CRC32C_BLOCK);
	return ~crc32c_hw_update(~crc, buf, len, k_block);
}
