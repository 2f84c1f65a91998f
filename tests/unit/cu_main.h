/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared main() for the CUnit suites: register, run, exit non-zero on any
 * failure so meson (and CI) see it. */
#ifndef EGW_CU_MAIN_H
#define EGW_CU_MAIN_H

#include <stdio.h>
#include <stdlib.h>
#include <CUnit/Basic.h>

struct cu_test {
	const char *name;
	void (*fn)(void);
};

static inline int
cu_run(const char *suite, const struct cu_test *tests)
{
	CU_pSuite s;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite(suite, NULL, NULL);
	if (s == NULL)
		return 2;
	for (const struct cu_test *t = tests; t->name != NULL; t++)
		if (CU_add_test(s, t->name, t->fn) == NULL)
			return 2;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	if (CU_get_number_of_tests_run() == 0)
		failed = 1;
	CU_cleanup_registry();
	return failed == 0 ? 0 : 1;
}

#endif
