/* The memory of the tests of left-out pages of zeros (zerofill, zeroshm):
 * pages written with a pattern (a byte every 512, and the last one), then
 * every page but one in 7 zeroed again; page ZP_LASTBYTE keeps only its
 * last byte. */
#ifndef ZEROPAT_H
#define ZEROPAT_H

#include <stdbool.h>
#include <string.h>

#define ZP_PG	    4096UL
#define ZP_LASTBYTE 5

static inline unsigned char zp_pattern(unsigned long page, unsigned long k)
{
	return (unsigned char)(1 + (page * 31 + k) % 251);
}

static inline bool zp_kept(unsigned long page)
{
	return page % 7 == 0;
}

static inline void zp_write(volatile unsigned char *p, unsigned long pages)
{
	for (unsigned long i = 0; i < pages; i++)
		for (unsigned long k = 0; k < ZP_PG; k += 512)
			p[i * ZP_PG + k] = zp_pattern(i, k);
	for (unsigned long i = 0; i < pages; i++)
		p[i * ZP_PG + ZP_PG - 1] = zp_pattern(i, ZP_PG - 1);
}

static inline void zp_zero(volatile unsigned char *p, unsigned long pages)
{
	for (unsigned long i = 0; i < pages; i++)
		if (!zp_kept(i))
			memset((void *)(p + i * ZP_PG), 0, i == ZP_LASTBYTE ? ZP_PG - 1 : ZP_PG);
}

/* byte k of page i after both */
static inline unsigned char zp_want(unsigned long i, unsigned long k)
{
	if (zp_kept(i) && k % 512 == 0)
		return zp_pattern(i, k);
	if ((zp_kept(i) || i == ZP_LASTBYTE) && k == ZP_PG - 1)
		return zp_pattern(i, k);
	return 0;
}

#endif
