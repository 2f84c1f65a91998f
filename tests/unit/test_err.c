/* SPDX-License-Identifier: BSD-3-Clause */
/* The one list of codes (egw_err.h) as each library reads it: the gateway's
 * text and key, the client's reason, the proto's refusal reasons. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cu_main.h"
#include "egw_client.h"
#include "egw_err.h"
#include "egw_proto.h"

/* codes 0..25 are on the wire already (doc/protocol.md); the list only grows */
#define WIRE_CODES_PUBLISHED 26

static int
code_of(int w)
{
	return w == 0 ? 0 : -(EGW_ERR_BASE + w);
}

/* every pair of texts of a table apart; none the fallback */
static void
assert_distinct(const char *(*text)(int), const char *fallback)
{
	for (int a = 0; a < EGW_E_COUNT; a++) {
		const char *ta = text(code_of(a));

		CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
		CU_ASSERT_STRING_NOT_EQUAL(ta, fallback);
		CU_ASSERT(ta[0] != '\0');
		for (int b = 0; b < a; b++)
			CU_ASSERT_STRING_NOT_EQUAL(ta, text(code_of(b)));
	}
}

static void
test_list_covers_the_published_codes(void)
{
	CU_ASSERT(EGW_E_COUNT >= WIRE_CODES_PUBLISHED);
	CU_ASSERT_EQUAL(EGW_E_UNKNOWN_ROOM, EGW_ERR_BASE + 1);
	CU_ASSERT_EQUAL(EGW_E_UNKNOWN_PEER, EGW_ERR_BASE + 22);
	CU_ASSERT_EQUAL(EGW_E_NAME, EGW_ERR_BASE + 25);
	for (int w = 0; w < EGW_E_COUNT; w++)
		CU_ASSERT_EQUAL(egw_err_to_wire(egw_err_from_wire((uint16_t)w)),
				w);
	CU_ASSERT_EQUAL(egw_err_from_wire(EGW_E_COUNT), EGW_E_END);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_END), UINT16_MAX);
}

static void
test_gateway_texts_are_distinct(void)
{
	assert_distinct(egw_strerror, "unknown error");
	assert_distinct(egw_err_key, "unknown_error");
	CU_ASSERT_STRING_EQUAL(egw_strerror(EGW_E_NAME),
			       egw_strerror(-EGW_E_NAME));
	CU_ASSERT_STRING_EQUAL(egw_strerror(-EBUSY), strerror(EBUSY));
	CU_ASSERT_STRING_EQUAL(egw_strerror(-(int)EGW_E_END), "unknown error");
}

static void
test_client_reasons_cover_every_code(void)
{
	assert_distinct(egw_client_strerror, "unknown embgw error");
	/* the codes a REGISTER refusal carries, past the old table's end */
	CU_ASSERT_STRING_EQUAL(egw_client_strerror(-(EGW_ERR_BASE + 23)),
			       "pool geometries differ");
	CU_ASSERT_STRING_EQUAL(egw_client_strerror(-EGW_E_PEER_DEAD),
			       "peer dead");
	CU_ASSERT_STRING_EQUAL(egw_client_strerror(-ENOENT), strerror(ENOENT));
	CU_ASSERT_STRING_EQUAL(egw_client_strerror(-(int)EGW_E_END),
			       "unknown embgw error");
	CU_ASSERT_STRING_EQUAL(egw_client_strerror(-EGW_ERR_BASE),
			       "unknown embgw error");
}

static void
test_proto_reasons_are_distinct(void)
{
	CU_ASSERT(EGW_PE_MAX > EGW_PE_SESSION);
	for (int a = 0; a < EGW_PE_MAX; a++) {
		const char *ta = egw_proto_strerror((enum egw_proto_err)a);

		CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
		CU_ASSERT_STRING_NOT_EQUAL(ta, "unknown error");
		for (int b = 0; b < a; b++)
			CU_ASSERT_STRING_NOT_EQUAL(ta,
				egw_proto_strerror((enum egw_proto_err)b));
	}
	CU_ASSERT_STRING_EQUAL(egw_proto_strerror(EGW_PE_MAX), "unknown error");
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "list_covers_the_published_codes",
		  test_list_covers_the_published_codes },
		{ "gateway_texts_are_distinct", test_gateway_texts_are_distinct },
		{ "client_reasons_cover_every_code",
		  test_client_reasons_cover_every_code },
		{ "proto_reasons_are_distinct", test_proto_reasons_are_distinct },
		{ NULL, NULL },
	};
	return cu_run("err", tests);
}
