/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/pattern against its own definition (egw_pattern.h): a second,
 * byte-at-a-time implementation written from the header's text, anchored
 * to splitmix64's published first output; then fill and check over a pool,
 * and that check sees a single wrong byte, a wrong aux record and runs
 * that fall short.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "egw_pattern.h"

/* The header's "mix", written out again. */
static uint64_t
ref_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Byte i of token t's embedding, as the header defines it. */
static uint8_t
ref_emb_byte(uint64_t room, uint32_t t, size_t i)
{
	uint64_t s = ref_mix(room ^ ((uint64_t)t << 20));
	uint64_t w = ref_mix(s + (i - i % 8));

	return (uint8_t)(w >> (8 * (i % 8)));
}

static void
test_values_follow_the_definition(void)
{
	static const uint64_t rooms[] = { 0, 1, 0x0102030405060708ull,
					  UINT64_MAX, 0xab00000000000777ull };
	static const uint32_t tokens[] = { 0, 1, 127, 128, 4095, UINT32_MAX };
	uint8_t out[37]; /* not a multiple of 8: the last word cut short */

	/* splitmix64 seeded with 0: its first output, as published */
	CU_ASSERT_EQUAL(ref_mix(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
	/* the worked example the documentation gives a third party: room
	 * 0x2710 (10000 tokens), token 0 */
	{
		static const uint8_t want[8] = { 0x18, 0x43, 0x1c, 0xea,
						 0x58, 0x18, 0xbb, 0xcd };
		int32_t m[3];

		CU_ASSERT_EQUAL(ref_mix(0x2710), 0x994a0f4abab2e080ull);
		egw_pattern_emb(0x2710, 0, out, 8);
		CU_ASSERT_EQUAL(memcmp(out, want, 8), 0);
		CU_ASSERT_EQUAL(egw_pattern_fill_id(0x2710, 0), 0x2710);
		egw_pattern_mrope(0x2710, 0, m);
		CU_ASSERT(m[0] == 0 && m[1] == 0 && m[2] == 0);
	}
	for (size_t r = 0; r < sizeof(rooms) / sizeof(rooms[0]); r++) {
		for (size_t k = 0; k < sizeof(tokens) / sizeof(tokens[0]); k++) {
			uint64_t room = rooms[r];
			uint32_t t = tokens[k];
			int32_t m[3];

			egw_pattern_emb(room, t, out, sizeof(out));
			for (size_t i = 0; i < sizeof(out); i++)
				CU_ASSERT_EQUAL(out[i], ref_emb_byte(room, t, i));
			CU_ASSERT_EQUAL((uint32_t)egw_pattern_fill_id(room, t),
					t ^ (uint32_t)(room & 0xffffffffu));
			egw_pattern_mrope(room, t, m);
			CU_ASSERT_EQUAL((uint32_t)m[0], t);
			CU_ASSERT_EQUAL((uint32_t)m[1], (uint32_t)((uint64_t)t * 3 % (1ull << 32)));
			CU_ASSERT_EQUAL((uint32_t)m[2], (uint32_t)(room >> 32));
		}
	}
}

static struct egw_pool *
mkpool(bool mrope)
{
	struct egw_pool_geom g = { .capacity_tokens = 64 * 16, .block_tokens = 16,
				   .hidden_size = 10, .dtype_bytes = 2,
				   .mrope = mrope, .aux_bytes = 64 };
	struct egw_pool *p = NULL;

	CU_ASSERT_FATAL(egw_pool_create(&g, NULL, 0, &p) == 0);
	return p;
}

static void
test_fill_then_check_and_every_fault_seen(void)
{
	for (int mrope = 0; mrope < 2; mrope++) {
		struct egw_pool *p = mkpool(mrope);
		/* two runs, out of order in memory: tokens follow the runs */
		const struct egw_run runs[2] = { { 10, 3 }, { 2, 2 } };
		const uint64_t room = 0x1200000000000045ull;
		const uint32_t total = 70; /* 3 x 16 + 22: last block part-filled */
		uint8_t *e;
		const struct egw_aux_rec *aux;
		uint8_t want[20];

		CU_ASSERT_EQUAL(egw_pattern_fill(p, room, total, runs, 2), 0);
		CU_ASSERT_EQUAL(egw_pattern_check(p, room, total, runs, 2, 10, false), 0);
		CU_ASSERT_EQUAL(egw_pattern_check(p, room, total, runs, 2, 10, true), 0);
		/* token 50 is the 3rd token of run 1's first block (block 2) */
		e = egw_pool_addr(p, EGW_KIND_EMB, 2, 50 - 48);
		egw_pattern_emb(room, 50, want, sizeof(want));
		CU_ASSERT_EQUAL(memcmp(e, want, sizeof(want)), 0);
		CU_ASSERT_EQUAL(*(int32_t *)egw_pool_addr(p, EGW_KIND_FILL_IDS, 2, 2),
				egw_pattern_fill_id(room, 50));
		aux = egw_pool_addr(p, EGW_KIND_AUX, 10, 0);
		CU_ASSERT_EQUAL(aux->total_tokens, total);
		CU_ASSERT_EQUAL(aux->cookie, room);
		CU_ASSERT_EQUAL(aux->mrope_delta, EGW_PATTERN_MROPE_DELTA);
		CU_ASSERT_EQUAL(aux->block_tokens, 16);
		/* one wrong byte: one mismatch; a wrong aux record: one more */
		e[19] ^= 0x40;
		CU_ASSERT_EQUAL(egw_pattern_check(p, room, total, runs, 2, 10, false), 1);
		CU_ASSERT_EQUAL(egw_pattern_check(p, room, total, runs, 2, 10, true), 0);
		CU_ASSERT_EQUAL(egw_pattern_check(p, room ^ 1, total, runs, 2, 10, true), 1);
		e[19] ^= 0x40;
		/* another room's data, or runs too short for the total */
		CU_ASSERT(egw_pattern_check(p, room + 1, total, runs, 2, 10, false) > 1);
		CU_ASSERT_EQUAL(egw_pattern_check(p, room, total, runs, 1, 10, false), 1);
		CU_ASSERT_EQUAL(egw_pattern_fill(p, room, total, runs, 1), -EINVAL);
		egw_pool_destroy(p);
	}
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "values_follow_the_definition", test_values_follow_the_definition },
		{ "fill_then_check_and_every_fault_seen",
		  test_fill_then_check_and_every_fault_seen },
		{ NULL, NULL },
	};
	return cu_run("pattern", tests);
}
