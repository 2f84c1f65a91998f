/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stubs for the unit tests: a function the code under test calls, defined
 * in the test binary instead of the library that normally provides it.
 * DEFINE_STUB gives it a return value the test can set with MOCK_SET and
 * put back with MOCK_CLEAR; DEFINE_STUB_V is a call that does nothing.
 */
#ifndef EGW_STUB_H
#define EGW_STUB_H

#define DEFINE_STUB(fn, ret, dargs, val)                                     \
	static ret const ut_##fn##_default __attribute__((unused)) = val;     \
	ret ut_##fn = val;                                                   \
	ret fn dargs                                                         \
	{                                                                    \
		return ut_##fn;                                              \
	}

#define DEFINE_STUB_V(fn, dargs)                                             \
	void fn dargs                                                        \
	{                                                                    \
	}

#define MOCK_SET(fn, val) (ut_##fn = (val))
#define MOCK_CLEAR(fn) (ut_##fn = ut_##fn##_default)

/* a stub's return value, for the test files that set it */
#define DECLARE_STUB(fn, ret) extern ret ut_##fn

#endif /* EGW_STUB_H */
