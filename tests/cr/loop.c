/* The program continues exactly where it was: a tight loop keeps one
 * counter in a register and one in memory and folds every step into a
 * hash; a lost or repeated iteration, or registers restored out of step
 * with memory, breaks the invariants checked after SIGTERM. */
#include <stdint.h>

#include "crt.h"

static volatile uint64_t mem_count;
static volatile uint64_t chain;

static uint64_t step(uint64_t h, uint64_t i)
{
	return (h ^ i) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
}

int main(void)
{
	uint64_t reg = 0, h = 0;

	crt_init();
	crt_ready();
	while (!crt_term) {
		reg++;
		mem_count = mem_count + 1;
		h = step(h, reg);
		chain = h;
		if (mem_count != reg)
			crt_fail("register counter %lu and memory counter %lu diverged",
				 (unsigned long)reg, (unsigned long)mem_count);
	}
	{
		uint64_t check = 0;

		for (uint64_t i = 1; i <= reg; i++)
			check = step(check, i);
		crt_check(check == chain && check == h,
			  "hash chain of %lu iterations does not match: an iteration was lost or "
			  "repeated",
			  (unsigned long)reg);
		crt_msg("%lu iterations", (unsigned long)reg);
	}
	crt_pass();
}
