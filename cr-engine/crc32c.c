#include "crc32c-impl.h"
#include "crc32c.h"

static uint32_t crc32c_sw(uint32_t c, const unsigned char *p, size_t len)
{
	while (len--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0U - (c & 1)));
	}
	return c;
}

int crc32c_hw(void)
{
	return __builtin_cpu_supports("sse4.2");
}

uint32_t crc32c_soft(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32c_sw(~crc, buf, len);
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
