/* SPDX-License-Identifier: BSD-3-Clause */
/* The one list of codes (egw_err.h) as each library reads it: the gateway's
 * text and key, the client's reason, the proto's refusal reasons. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "cu_main.h"
#include "egw_client.h"
#include "egw_err.h"
#include "egw_proto.h"

static const char *doc_dir; /* argv[1]: the repository's doc/ */

/* codes 0..25 are on the wire (doc/protocol.md); the list only grows */
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
	CU_ASSERT(EGW_PROTO_ERR_MAX > EGW_PROTO_ERR_SESSION);
	for (int a = 0; a < EGW_PROTO_ERR_MAX; a++) {
		const char *ta = egw_proto_strerror((enum egw_proto_err)a);

		CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
		CU_ASSERT_STRING_NOT_EQUAL(ta, "unknown error");
		for (int b = 0; b < a; b++)
			CU_ASSERT_STRING_NOT_EQUAL(ta,
				egw_proto_strerror((enum egw_proto_err)b));
	}
	CU_ASSERT_STRING_EQUAL(egw_proto_strerror(EGW_PROTO_ERR_MAX),
			       "unknown error");
}

/* One "| code | NAME |" cell pair of protocol.md's table into names[code]. */
static void
doc_pair(const char *code, const char *name, char names[][32], int *seen)
{
	char nm[32];
	int c;

	if (sscanf(code, " %d", &c) != 1 || sscanf(name, " %31[A-Z_]", nm) != 1)
		return;
	CU_ASSERT_FATAL(c > 0 && c < 64);
	snprintf(names[c], sizeof(names[c]), "%s", nm);
	(*seen)++;
}

static void
test_protocol_doc_lists_the_same_codes(void)
{
#define NAME(n, w, key, text, brief) #n,
	static const char *const list[EGW_E_COUNT] = { EGW_ERR_LIST(NAME) };
#undef NAME
	char path[512], line[256], names[64][32] = { { 0 } };
	bool in_table = false;
	int seen = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/protocol.md", doc_dir);
	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		char *cell[6] = { 0 };
		int n = 0;

		if (strncmp(line, "### Error codes", 15) == 0)
			in_table = true;
		else if (in_table && line[0] == '#')
			break; /* the table's section ended */
		if (!in_table || line[0] != '|')
			continue;
		for (char *t = strtok(line + 1, "|"); t != NULL && n < 6;
		     t = strtok(NULL, "|"))
			cell[n++] = t;
		if (n >= 2)
			doc_pair(cell[0], cell[1], names, &seen);
		if (n >= 5)
			doc_pair(cell[3], cell[4], names, &seen);
	}
	fclose(f);
	CU_ASSERT_EQUAL(seen, EGW_E_COUNT - 1);
	for (int w = 1; w < EGW_E_COUNT; w++)
		CU_ASSERT_STRING_EQUAL(names[w], list[w]);
}

int
main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "list_covers_the_published_codes",
		  test_list_covers_the_published_codes },
		{ "gateway_texts_are_distinct", test_gateway_texts_are_distinct },
		{ "client_reasons_cover_every_code",
		  test_client_reasons_cover_every_code },
		{ "proto_reasons_are_distinct", test_proto_reasons_are_distinct },
		{ "protocol_doc_lists_the_same_codes",
		  test_protocol_doc_lists_the_same_codes },
		{ NULL, NULL },
	};
	doc_dir = argc > 1 ? argv[1] : "doc";
	return cu_run("err", tests);
}
