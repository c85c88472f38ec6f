/* CRC-32C arithmetic shared by the engine and the freestanding restorer:
 * no libc, only compiler builtins. */
#ifndef CR_CRC32C_IMPL_H
#define CR_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_POLY  0x82f63b78U /* reflected Castagnoli polynomial */
#define CRC32C_BLOCK 4096

/* a * b mod P, reflected representation (x^0 is bit 31) */
static inline uint32_t crc32c_gf2_mul(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = 1U << 31; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return prod;
}

/* x^(8*nbytes) mod P: multiplying a crc register by it appends nbytes of
 * zeros */
static inline uint32_t crc32c_x_pow_bytes(uint64_t nbytes)
{
	uint32_t result = 1U << 31; /* x^0 */
	uint32_t sq = 1U << 23;	    /* x^8 */

	while (nbytes) {
		if (nbytes & 1)
			result = crc32c_gf2_mul(result, sq);
		sq = crc32c_gf2_mul(sq, sq);
		nbytes >>= 1;
	}
	return result;
}

/* Raw register update without SSE4.2, four bits at a time (CPUs such as
 * QEMU's qemu64 model lack the instruction). */
static inline uint32_t crc32c_sw_update(uint32_t c, const unsigned char *p, size_t len)
{
	static const uint32_t nib[16] = {
		0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3,
		0x61c69362, 0x7198540d, 0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9,
		0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75,
	};

	while (len--) {
		c ^= *p++;
		c = (c >> 4) ^ nib[c & 15];
		c = (c >> 4) ^ nib[c & 15];
	}
	return c;
}

/* Raw register update with the SSE4.2 instruction: three independent
 * streams over 3 x 4 KiB blocks, joined with k = x^(8*4096) mod P. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc32c_hw_update(uint32_t c0, const unsigned char *p, size_t len, uint32_t k)
{
	uint64_t c = c0;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 3 * CRC32C_BLOCK) {
		const uint64_t *a = (const uint64_t *)p;
		const uint64_t *b = (const uint64_t *)(p + CRC32C_BLOCK);
		const uint64_t *d = (const uint64_t *)(p + 2 * CRC32C_BLOCK);
		uint64_t c1 = 0, c2 = 0;

		for (int i = 0; i < CRC32C_BLOCK / 8; i++) {
			c = __builtin_ia32_crc32di(c, a[i]);
			c1 = __builtin_ia32_crc32di(c1, b[i]);
			c2 = __builtin_ia32_crc32di(c2, d[i]);
		}
		c = crc32c_gf2_mul(k, (uint32_t)c) ^ (uint32_t)c1;
		c = crc32c_gf2_mul(k, (uint32_t)c) ^ (uint32_t)c2;
		p += 3 * CRC32C_BLOCK;
		len -= 3 * CRC32C_BLOCK;
	}
	while (len >= 8) {
		c = __builtin_ia32_crc32di(c, *(const uint64_t *)p);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}

#endif
