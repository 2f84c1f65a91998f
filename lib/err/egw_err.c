/* SPDX-License-Identifier: BSD-3-Clause */
#include <limits.h>
#include <string.h>

#include "egw_err.h"

/* The list is the contract: a row out of order, a gap or a repeated wire
 * value would shift every code after it on the wire and in the clients'
 * results. Rows are counted by position and each must sit at its wire
 * value; EGW_E_END then lands one past the last. */
enum {
#define POS(n, w, key, text, brief) ERR_POS_##n,
	EGW_ERR_LIST(POS)
#undef POS
	ERR_ROWS
};

#define CHECK(n, w, key, text, brief) \
	_Static_assert(ERR_POS_##n == (w), \
		       "EGW_E_" #n ": wire value " #w " not its row"); \
	_Static_assert(sizeof(key) > 1 && sizeof(text) > 1 && \
		       sizeof(brief) > 1, "EGW_E_" #n ": empty key or text");
EGW_ERR_LIST(CHECK)
#undef CHECK
_Static_assert(ERR_ROWS == EGW_E_COUNT, "EGW_E_END is not one past the list");
_Static_assert(EGW_E_COUNT <= UINT16_MAX, "wire values are 16 bits");

#define TEXT(n, w, key, text, brief) text,
static const char *const err_text[EGW_E_COUNT] = { EGW_ERR_LIST(TEXT) };
#undef TEXT
#define KEY(n, w, key, text, brief) key,
static const char *const err_keys[EGW_E_COUNT] = { EGW_ERR_LIST(KEY) };
#undef KEY

/* the wire value of a code given negated or not, or -1 for a non-code */
static int
wire_of(int rc)
{
	int v;

	if (rc == INT_MIN)
		return -1;
	v = rc < 0 ? -rc : rc;
	if (v == 0)
		return 0;
	if (v > EGW_ERR_BASE && v < EGW_E_END)
		return v - EGW_ERR_BASE;
	return -1;
}

const char *
egw_strerror(int rc)
{
	int w = wire_of(rc);

	if (w >= 0)
		return err_text[w];
	if (rc != INT_MIN && rc < 0 && -rc < EGW_ERR_BASE)
		return strerror(-rc); /* errno: the C library's text */
	if (rc > 0 && rc < EGW_ERR_BASE)
		return strerror(rc);
	return "unknown error";
}

const char *
egw_err_key(int rc)
{
	int w = wire_of(rc);

	return w >= 0 ? err_keys[w] : "unknown_error";
}
