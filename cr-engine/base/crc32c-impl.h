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

/* Without SSE4.2 (CPUs such as QEMU's qemu64 model lack the instruction):
 * slicing by 8, eight table lookups for eight bytes (t[0] is the classic
 * byte table, t[k] the same byte followed by k zero bytes).  The tables are
 * made at run time (crc32c_sw_tab_init: 8 KiB); the restorer gets kupdate's
 * copy in its arguments. */
struct crc32c_tab {
	uint32_t t[8][256];
};

static inline void crc32c_sw_tab_init(struct crc32c_tab *tab)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (CRC32C_POLY & (0U - (c & 1)));
		tab->t[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			tab->t[k][n] = (tab->t[k - 1][n] >> 8) ^ tab->t[0][tab->t[k - 1][n] & 0xff];
}

/* raw register update (x86: little-endian) */
static inline uint32_t crc32c_sw_update(uint32_t c, const unsigned char *p, size_t len,
					const struct crc32c_tab *tab)
{
	const uint32_t(*t)[256] = tab->t;

	while (len && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
		len--;
	}
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v = *(const uint64_t *)p ^ c;

		c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^
		    t[4][(v >> 24) & 0xff] ^ t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^
		    t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
	}
	while (len--)
		c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
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
