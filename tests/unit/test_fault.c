/* The test-only fault switch (cr-engine/fault.h): which phase and unit a
 * KUPDATE_FAULT spec names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fault.h"

static void test_spec(void **state)
{
	(void)state;
	unsetenv("KUPDATE_FAULT");
	assert_false(cr_fault_unit("dump", 1, "a.service"));
	setenv("KUPDATE_FAULT", "dump", 1);
	assert_true(cr_fault_unit("dump", 1, "a.service"));
	assert_true(cr_fault_unit("dump", 0, NULL));
	assert_false(cr_fault_unit("kill-dump", 1, NULL));
	assert_false(cr_fault_unit("dum", 1, NULL));
	setenv("KUPDATE_FAULT", "freeze:2,kill-dump:b.service,manifest", 1);
	assert_false(cr_fault_unit("freeze", 1, "a.service"));
	assert_true(cr_fault_unit("freeze", 2, "b.service"));
	assert_false(cr_fault_unit("freeze", 12, NULL));
	assert_true(cr_fault_unit("kill-dump", 7, "b.service"));
	assert_false(cr_fault_unit("kill-dump", 2, "b.servic"));
	assert_false(cr_fault_unit("dump", 2, "b.service"));
	assert_true(cr_fault_unit("manifest", 0, NULL));
	setenv("KUPDATE_FAULT_UNIT", "2", 1);
	setenv("KUPDATE_FAULT_UNIT_NAME", "x.service", 1);
	assert_true(cr_fault("freeze"));
	setenv("KUPDATE_FAULT_UNIT", "3", 1);
	assert_false(cr_fault("freeze"));
	setenv("KUPDATE_FAULT", "freeze:", 1);
	assert_false(cr_fault("freeze"));
	unsetenv("KUPDATE_FAULT");
	unsetenv("KUPDATE_FAULT_UNIT");
	unsetenv("KUPDATE_FAULT_UNIT_NAME");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
