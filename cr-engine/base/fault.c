/* Test-only fault injection: see fault.h. */
#include <stdlib.h>
#include <string.h>

#include "fault.h"

bool cr_fault_unit(const char *phase, int idx, const char *name)
{
	const char *spec = getenv("KUPDATE_FAULT"), *p;
	size_t pl = strlen(phase);

	if (!spec || !*spec)
		return false;
	for (p = spec; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
		size_t len = strcspn(p, ","), al;
		const char *arg;
		char *end;
		long n;

		if (len < pl || strncmp(p, phase, pl) || (len > pl && p[pl] != ':'))
			continue;
		if (len == pl)
			return true;
		arg = p + pl + 1;
		al = len - pl - 1;
		n = strtol(arg, &end, 10);
		if (end == arg + al && al > 0) {
			if (n == idx)
				return true;
		} else if (name && strlen(name) == al && !strncmp(arg, name, al)) {
			return true;
		}
	}
	return false;
}

/* a thread that works on one unit says which (apply's parallel dumps) */
static __thread int thread_unit = -1;
static __thread const char *thread_unit_name;

void cr_fault_set_unit(int idx, const char *name)
{
	thread_unit = idx;
	thread_unit_name = name;
}

bool cr_fault(const char *phase)
{
	const char *u;

	if (thread_unit >= 0)
		return cr_fault_unit(phase, thread_unit, thread_unit_name);
	u = getenv("KUPDATE_FAULT_UNIT");
	return cr_fault_unit(phase, u ? atoi(u) : 0, getenv("KUPDATE_FAULT_UNIT_NAME"));
}
