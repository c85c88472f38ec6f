/* The test-only fault switch (cr-engine/base/fault.h): which phase and unit a
 * KUPDATE_FAULT spec names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
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

/* apply's dump threads: each names its unit for its own checks, over the
 * environment's, and leaves the others' alone */
struct unit_thread {
	int idx;
	const char *name;
	pthread_barrier_t *both_set;
	bool freeze, dump;
};

static void *unit_thread(void *arg)
{
	struct unit_thread *t = arg;

	cr_fault_set_unit(t->idx, t->name);
	/* both threads have set theirs before either asks */
	pthread_barrier_wait(t->both_set);
	t->freeze = cr_fault("freeze");
	t->dump = cr_fault("dump");
	return NULL;
}

static void test_thread_unit(void **state)
{
	pthread_barrier_t b;
	struct unit_thread t[2] = { { 1, "a.service", &b, false, false },
				    { 2, "b.service", &b, false, false } };
	pthread_t th[2];

	(void)state;
	setenv("KUPDATE_FAULT", "freeze:2,dump:a.service", 1);
	setenv("KUPDATE_FAULT_UNIT", "2", 1);
	pthread_barrier_init(&b, NULL, 2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, unit_thread, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&b);
	assert_false(t[0].freeze);
	assert_true(t[0].dump);
	assert_true(t[1].freeze);
	assert_false(t[1].dump);
	/* this thread set nothing: the environment's unit (2) */
	assert_true(cr_fault("freeze"));
	assert_false(cr_fault("dump"));
	cr_fault_set_unit(1, "a.service");
	assert_false(cr_fault("freeze"));
	cr_fault_set_unit(-1, NULL);
	assert_true(cr_fault("freeze"));
	unsetenv("KUPDATE_FAULT");
	unsetenv("KUPDATE_FAULT_UNIT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec),
		cmocka_unit_test(test_thread_unit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
