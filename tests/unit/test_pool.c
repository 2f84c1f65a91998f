/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "egw_pool.h"

static struct egw_pool_geom
geom(uint32_t blocks)
{
	struct egw_pool_geom g = {
		.capacity_tokens = blocks * 128, .block_tokens = 128,
		.hidden_size = 16, .dtype_bytes = 2, .mrope = true,
		.aux_bytes = 64,
	};
	return g;
}

static struct egw_pool *
mk(uint32_t blocks)
{
	struct egw_pool_geom g = geom(blocks);
	struct egw_pool *p = NULL;

	CU_ASSERT_FATAL(egw_pool_create(&g, NULL, 0, &p) == 0);
	return p;
}

static void
test_geometry_and_addresses(void)
{
	struct egw_pool_geom g = geom(64);
	struct egw_pool *p = mk(64);
	uint8_t *emb = egw_pool_region(p, EGW_KIND_EMB);

	CU_ASSERT_EQUAL(egw_pool_geom_unit_bytes(&g, EGW_KIND_EMB), 32);
	CU_ASSERT_EQUAL(egw_pool_geom_unit_bytes(&g, EGW_KIND_FILL_IDS), 4);
	CU_ASSERT_EQUAL(egw_pool_geom_unit_bytes(&g, EGW_KIND_MROPE), 12);
	CU_ASSERT_EQUAL(egw_pool_geom_unit_bytes(&g, EGW_KIND_AUX), 64);
	/* kind k of block b token t lives at base[k] + (b * bt + t) * unit */
	CU_ASSERT_PTR_EQUAL(egw_pool_addr(p, EGW_KIND_EMB, 3, 5),
			    emb + (3 * 128 + 5) * 32);
	CU_ASSERT_PTR_EQUAL(egw_pool_addr(p, EGW_KIND_AUX, 7, 0),
			    (uint8_t *)egw_pool_region(p, EGW_KIND_AUX) + 7 * 64);
	CU_ASSERT_PTR_NULL(egw_pool_addr(p, EGW_KIND_EMB, 64, 0));
	CU_ASSERT_PTR_NULL(egw_pool_addr(p, EGW_KIND_EMB, 0, 128));
	CU_ASSERT_PTR_NULL(egw_pool_addr(p, EGW_KIND_AUX, 0, 1));
	for (int k = 0; k < EGW_KIND_MAX; k++)
		CU_ASSERT_EQUAL((uintptr_t)egw_pool_region(p, k) % EGW_POOL_ALIGN, 0);
	/* the last byte of every region is inside the pool memory */
	CU_ASSERT((uint8_t *)egw_pool_addr(p, EGW_KIND_AUX, 63, 0) + 64 <=
		  (uint8_t *)egw_pool_mem(p) + egw_pool_geom_mem_bytes(&g));
	egw_pool_destroy(p);

	g.mrope = false;
	CU_ASSERT_EQUAL(egw_pool_geom_unit_bytes(&g, EGW_KIND_MROPE), 0);
	g = geom(4);
	g.capacity_tokens = 100; /* not whole blocks */
	CU_ASSERT_EQUAL(egw_pool_geom_check(&g), -EINVAL);
	g = geom(4);
	g.aux_bytes = 8; /* smaller than the aux record */
	CU_ASSERT_EQUAL(egw_pool_geom_check(&g), -EINVAL);
	g = geom(4);
	g.dtype_bytes = 3;
	CU_ASSERT_EQUAL(egw_pool_geom_check(&g), -EINVAL);
}

static void
test_alloc_tokens_is_whole_blocks(void)
{
	struct egw_pool *p = mk(64);
	struct egw_run r[4];
	struct egw_pool_stats st;

	CU_ASSERT_EQUAL(egw_pool_alloc_tokens(p, 1, 976, r, 4), 1);
	/* ceil(976 / 128): the reference design's bug #2 */
	CU_ASSERT_EQUAL(r[0].count, 8);
	CU_ASSERT_EQUAL(egw_pool_alloc_tokens(p, 2, 129, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].start, 8);
	CU_ASSERT_EQUAL(r[0].count, 2);
	CU_ASSERT_EQUAL(egw_pool_alloc_tokens(p, 3, 0, r, 4), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 3, 0, r, 4), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_alloc(p, EGW_OWNER_NONE, 1, r, 4), -EINVAL);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 10);
	CU_ASSERT_EQUAL(st.free_runs, 1);
	CU_ASSERT_EQUAL(st.largest_free_run, 54);
	egw_pool_destroy(p);
}

static void
test_fragmented_alloc_uses_run_list(void)
{
	struct egw_pool *p = mk(16);
	struct egw_run r[16], one[16];
	struct egw_pool_stats before, after;

	/* 16 single blocks, free every other one: 8 holes of 1 block */
	for (int i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(egw_pool_alloc(p, 100 + i, 1, &one[i], 1), 1);
	for (int i = 0; i < 16; i += 2)
		CU_ASSERT_EQUAL(egw_pool_free(p, 100 + i, one[i]), 0);
	egw_pool_get_stats(p, &before);
	CU_ASSERT_EQUAL(before.free_runs, 8);
	CU_ASSERT_EQUAL(before.largest_free_run, 1);
	/* contiguous only: refused, nothing changes */
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 7, 3, r, 1), -ENOSPC);
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 7, 3, r, 2), -ENOSPC);
	egw_pool_get_stats(p, &after);
	CU_ASSERT_EQUAL(after.blocks_in_use, before.blocks_in_use);
	CU_ASSERT_EQUAL(after.free_runs, before.free_runs);
	/* as a run list: three runs of one block */
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 7, 3, r, 8), 3);
	CU_ASSERT_EQUAL(r[0].start, 0);
	CU_ASSERT_EQUAL(r[1].start, 2);
	CU_ASSERT_EQUAL(r[2].start, 4);
	/* more than is free: refused */
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 8, 6, r + 3, 8), -ENOSPC);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(egw_pool_free(p, 7, r[i]), 0);
	for (int i = 1; i < 16; i += 2)
		CU_ASSERT_EQUAL(egw_pool_free(p, 100 + i, one[i]), 0);
	egw_pool_get_stats(p, &after);
	CU_ASSERT_EQUAL(after.blocks_in_use, 0);
	CU_ASSERT_EQUAL(after.free_runs, 1);
	CU_ASSERT_EQUAL(after.largest_free_run, 16);
	egw_pool_destroy(p);
}

static void
test_bad_frees_are_refused(void)
{
	struct egw_pool *p = mk(32);
	struct egw_run a, b;
	struct egw_pool_stats st;

	CU_ASSERT_EQUAL(egw_pool_alloc(p, 1, 4, &a, 1), 1);
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 2, 4, &b, 1), 1);
	/* foreign free */
	CU_ASSERT_EQUAL(egw_pool_free(p, 2, a), -EPERM);
	/* out of range */
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 30, 4 }), -ERANGE);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 40, 1 }), -ERANGE);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 0, 0 }), -ERANGE);
	/* inside a run, or a different length */
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 1, 3 }), -ENOENT);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 0, 3 }), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 0, 8 }), -EINVAL);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 8);
	CU_ASSERT_EQUAL(st.refused, 7);
	CU_ASSERT_EQUAL(egw_pool_owner(p, 0), 1);
	CU_ASSERT_EQUAL(egw_pool_owner(p, 4), 2);
	CU_ASSERT_EQUAL(egw_pool_owner(p, 1), EGW_OWNER_NONE);
	/* proper free, then double free */
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, a), 0);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, a), -ENOENT);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 4);
	CU_ASSERT_EQUAL(st.free_runs, 2);
	CU_ASSERT_EQUAL(egw_pool_free(p, 2, b), 0);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 0);
	CU_ASSERT_EQUAL(st.free_runs, 1);
	egw_pool_destroy(p);
}

static void
test_shrink_keeps_head(void)
{
	struct egw_pool *p = mk(32);
	struct egw_run a;
	struct egw_pool_stats st;

	CU_ASSERT_EQUAL(egw_pool_alloc(p, 9, 10, &a, 1), 1);
	CU_ASSERT_EQUAL(egw_pool_shrink(p, 9, a, 0), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_shrink(p, 9, a, 10), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_shrink(p, 8, a, 3), -EPERM);
	CU_ASSERT_EQUAL(egw_pool_shrink(p, 9, a, 3), 0);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 3);
	CU_ASSERT_EQUAL(egw_pool_free(p, 9, a), -EINVAL); /* old length */
	a.count = 3;
	CU_ASSERT_EQUAL(egw_pool_free(p, 9, a), 0);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 0);
	CU_ASSERT_EQUAL(st.largest_free_run, 32);
	egw_pool_destroy(p);
}

/* Random alloc/free/shrink against a plain bitmap model: every statistic
 * must match the brute-force answer after every operation. With the
 * single-block cache on, blocks in use must match after every operation
 * and the run statistics after the flushes that come at random times. */
static void
random_against_model(bool cache)
{
	enum { NB = 300, OPS = 20000, MAXH = 64 };
	struct egw_pool *p = mk(NB);
	struct { struct egw_run r; uint64_t owner; } held[MAXH];
	uint8_t used[NB] = { 0 };
	int nheld = 0;
	uint64_t seed = 12345, next_owner = 1;
	int mismatches = 0, compared = 0;

	if (cache)
		CU_ASSERT_EQUAL_FATAL(egw_pool_cache_enable(p, 16), 0);
	for (int op = 0; op < OPS; op++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t rnd = (uint32_t)(seed >> 33);
		struct egw_pool_stats st;
		uint32_t inuse = 0, runs = 0, best = 0, cur = 0;

		if (nheld + 8 <= MAXH && (rnd % 3 != 0 || nheld == 0)) {
			struct egw_run r[8];
			/* one-block runs often: the cache's case */
			uint32_t want = (rnd >> 20) % 3 == 0 ? 1 : 1 + rnd % 24;
			int n = egw_pool_alloc(p, next_owner, want, r, 8);

			for (int i = 0; i < n; i++) {
				for (uint32_t b = r[i].start; b < r[i].start + r[i].count; b++) {
					if (used[b])
						mismatches++;
					used[b] = 1;
				}
				held[nheld].r = r[i];
				held[nheld++].owner = next_owner;
			}
			next_owner++;
		} else {
			int i = (int)(rnd % (uint32_t)nheld);
			struct egw_run r = held[i].r;

			if ((rnd >> 8) % 4 == 0 && r.count > 1) {
				uint32_t keep = 1 + (rnd >> 12) % (r.count - 1);

				CU_ASSERT_EQUAL(egw_pool_shrink(p, held[i].owner, r, keep), 0);
				for (uint32_t b = r.start + keep; b < r.start + r.count; b++)
					used[b] = 0;
				held[i].r.count = keep;
			} else {
				CU_ASSERT_EQUAL(egw_pool_free(p, held[i].owner, r), 0);
				for (uint32_t b = r.start; b < r.start + r.count; b++)
					used[b] = 0;
				held[i] = held[--nheld];
			}
		}
		for (uint32_t b = 0; b < NB; b++) {
			inuse += used[b];
			if (!used[b]) {
				if (cur == 0)
					runs++;
				cur++;
				if (cur > best)
					best = cur;
			} else {
				cur = 0;
			}
		}
		if (cache && (rnd >> 24) % 8 == 0)
			egw_pool_cache_flush(p);
		egw_pool_get_stats(p, &st);
		if (st.blocks_in_use != inuse)
			mismatches++;
		if (st.cached_blocks == 0) {
			compared++;
			if (st.free_runs != runs || st.largest_free_run != best)
				mismatches++;
		}
		/* a free block's owner is NONE, cached or not */
		for (uint32_t b = 0; b < NB; b += 7)
			if (!used[b] && egw_pool_owner(p, b) != EGW_OWNER_NONE)
				mismatches++;
	}
	CU_ASSERT_EQUAL(mismatches, 0);
	CU_ASSERT(compared > OPS / 10);
	{
		struct egw_pool_stats st;

		egw_pool_get_stats(p, &st); /* the walk really worked the pool */
		CU_ASSERT(st.allocs > OPS / 5);
		CU_ASSERT(st.alloc_fail > 0);
		CU_ASSERT(st.frees > OPS / 8);
	}
	egw_pool_destroy(p);
}

static void
test_random_against_model(void)
{
	random_against_model(false);
}

static void
test_random_against_model_with_cache(void)
{
	random_against_model(true);
}

/* The single-block cache: last freed is first out, a cached block is free
 * to every caller, and a request the tree cannot meet flushes it. */
static void
test_single_block_cache(void)
{
	struct egw_pool *p = mk(8);
	struct egw_pool_stats st;
	struct egw_run r[8], one;

	CU_ASSERT_EQUAL(egw_pool_cache_enable(p, 0), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_cache_enable(p, 4), 0);
	CU_ASSERT_EQUAL(egw_pool_cache_enable(p, 4), -EINVAL);
	for (uint32_t b = 0; b < 8; b++)
		CU_ASSERT_EQUAL(egw_pool_alloc(p, 10 + b, 1, &r[b], 1), 1);
	/* blocks 1, 3, 5 to the cache; block 7 too: cache full after 4 */
	CU_ASSERT_EQUAL(egw_pool_free(p, 11, r[1]), 0);
	CU_ASSERT_EQUAL(egw_pool_free(p, 13, r[3]), 0);
	CU_ASSERT_EQUAL(egw_pool_free(p, 15, r[5]), 0);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.blocks_in_use, 5);
	CU_ASSERT_EQUAL(st.cached_blocks, 3);
	/* cached = free: a second free is a double free, nobody owns it */
	CU_ASSERT_EQUAL(egw_pool_free(p, 13, r[3]), -ENOENT);
	CU_ASSERT_EQUAL(egw_pool_shrink(p, 13, r[3], 1), -ENOENT);
	CU_ASSERT_EQUAL(egw_pool_owner(p, 3), EGW_OWNER_NONE);
	/* last freed, first out, to its new owner */
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 99, 1, &one, 1), 1);
	CU_ASSERT_EQUAL(one.start, 5);
	CU_ASSERT_EQUAL(egw_pool_owner(p, 5), 99);
	CU_ASSERT_EQUAL(egw_pool_free(p, 15, one), -EPERM);
	CU_ASSERT_EQUAL(egw_pool_free(p, 99, one), 0);
	/* 3 free blocks, all cached, none adjacent: a 3-block request is met
	 * as 3 runs after a flush, never refused because of the cache */
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 50, 3, r, 8), 3);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.cached_blocks, 0);
	CU_ASSERT_EQUAL(st.blocks_in_use, 8);
	CU_ASSERT_EQUAL(egw_pool_alloc(p, 51, 1, &one, 1), -ENOSPC);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(egw_pool_free(p, 50, r[i]), 0);
	/* flushed blocks merge with their free neighbours again */
	CU_ASSERT_EQUAL(egw_pool_free(p, 12, (struct egw_run){ 2, 1 }), 0);
	egw_pool_cache_flush(p);
	egw_pool_get_stats(p, &st);
	CU_ASSERT_EQUAL(st.largest_free_run, 3); /* blocks 1..3 */
	CU_ASSERT_EQUAL(st.free_runs, 2);        /* 1..3 and 5 */
	egw_pool_destroy(p);
}

static void
test_external_memory(void)
{
	struct egw_pool_geom g = geom(8);
	size_t need = egw_pool_geom_mem_bytes(&g);
	void *mem = aligned_alloc(EGW_POOL_ALIGN, need);
	struct egw_pool *p = NULL;

	CU_ASSERT_EQUAL(egw_pool_create(&g, mem, need - 1, &p), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_create(&g, (uint8_t *)mem + 8, need, &p), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_create(&g, mem, need, &p), 0);
	CU_ASSERT_PTR_EQUAL(egw_pool_mem(p), mem);
	egw_pool_destroy(p); /* must not free caller memory */
	free(mem);
}

/* A segment's allocations stay inside it: a random walk of allocations
 * in four segments of 75 blocks (odd sizes: segments cross the tree's
 * nodes), frees and shrinks, each run checked against its segment and
 * against a model of the blocks; a segment that is full answers -ENOSPC
 * while the others still have room. */
static void
range_walk(bool cache)
{
	enum { NB = 300, SEGS = 4, SEG = NB / SEGS, OPS = 20000, MAXH = 64 };
	struct egw_pool *p = mk(NB);
	struct {
		struct egw_run r;
		uint64_t owner;
	} held[MAXH];
	uint8_t used[NB] = { 0 };
	int nheld = 0, outside = 0, twice = 0, wrong_full = 0, full = 0;
	uint64_t seed = 99, next_owner = 1;

	if (cache)
		CU_ASSERT_EQUAL_FATAL(egw_pool_cache_enable(p, 16), 0);
	for (int op = 0; op < OPS; op++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t rnd = (uint32_t)(seed >> 33);

		if (nheld + 8 <= MAXH && (rnd % 3 != 0 || nheld == 0)) {
			struct egw_run r[8];
			uint32_t sg = (rnd >> 4) % SEGS, lo = sg * SEG;
			uint32_t want = (rnd >> 20) % 3 == 0 ? 1 : 1 + rnd % 30;
			uint32_t freeb = 0;
			int n = egw_pool_alloc_range(p, next_owner, want, lo,
						     lo + SEG, r, 8);

			for (uint32_t b = lo; b < lo + SEG; b++)
				freeb += !used[b];
			if (n == -ENOSPC) {
				full++;
				/* refused only when the segment itself lacks
				 * the blocks or they are in more than 8 runs */
				if (freeb >= want) {
					uint32_t runs = 0;

					for (uint32_t b = lo; b < lo + SEG; b++)
						runs += !used[b] &&
							(b == lo ||
							 used[b - 1]);
					if (runs <= 8)
						wrong_full++;
				}
			}
			for (int i = 0; i < n; i++) {
				if (r[i].start < lo ||
				    r[i].start + r[i].count > lo + SEG)
					outside++;
				for (uint32_t b = r[i].start;
				     b < r[i].start + r[i].count && b < NB;
				     b++) {
					twice += used[b];
					used[b] = 1;
				}
				held[nheld].r = r[i];
				held[nheld++].owner = next_owner;
			}
			next_owner++;
		} else {
			int i = (int)(rnd % (uint32_t)nheld);
			struct egw_run r = held[i].r;

			if ((rnd >> 8) % 4 == 0 && r.count > 1) {
				uint32_t keep = 1 + (rnd >> 12) % (r.count - 1);

				CU_ASSERT_EQUAL(egw_pool_shrink(p,
								held[i].owner,
								r, keep),
						0);
				for (uint32_t b = r.start + keep;
				     b < r.start + r.count; b++)
					used[b] = 0;
				held[i].r.count = keep;
			} else {
				CU_ASSERT_EQUAL(egw_pool_free(p, held[i].owner,
							      r),
						0);
				for (uint32_t b = r.start;
				     b < r.start + r.count; b++)
					used[b] = 0;
				held[i] = held[--nheld];
			}
		}
		/* idle exactly when the model says every block is free */
		if (op % 97 == 0)
			for (uint32_t sg = 0; sg < SEGS; sg++) {
				bool idle = true;

				for (uint32_t b = sg * SEG; b < (sg + 1) * SEG;
				     b++)
					idle = idle && !used[b];
				CU_ASSERT_EQUAL(egw_pool_range_idle(p, sg * SEG,
								    (sg +
								     1) * SEG),
						idle);
			}
	}
	CU_ASSERT_EQUAL(outside, 0);
	CU_ASSERT_EQUAL(twice, 0);
	CU_ASSERT_EQUAL(wrong_full, 0);
	CU_ASSERT(full > 0); /* the walk did fill segments */
	egw_pool_destroy(p);
}

static void
test_alloc_range_stays_in_segment(void)
{
	range_walk(false);
	range_walk(true);
}

/* A full segment refuses while the pool has room elsewhere; a run that
 * would fit only across the segment's edge is not given; bad ranges. */
static void
test_alloc_range_full_segment(void)
{
	struct egw_pool *p = mk(16);
	struct egw_run r[4], big;

	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 1, 4, 0, 4, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].start, 0);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 2, 1, 0, 4, r, 4), -ENOSPC);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 2, 5, 4, 8, r, 4), -ENOSPC);
	/* blocks 6..7 free, 8..9 free: 4 blocks across the edge of 4..8 */
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 3, 2, 4, 8, r, 4), 1);
	CU_ASSERT_EQUAL(r[0].start, 4);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 4, 4, 4, 8, r, 4), -ENOSPC);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 4, 2, 4, 8, &big, 1), 1);
	CU_ASSERT_EQUAL(big.start, 6);
	CU_ASSERT_FALSE(egw_pool_range_idle(p, 4, 8));
	CU_ASSERT_TRUE(egw_pool_range_idle(p, 8, 16));
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 5, 1, 4, 4, r, 4), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 5, 1, 8, 17, r, 4), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_free(p, 1, (struct egw_run){ 0, 4 }), 0);
	CU_ASSERT_TRUE(egw_pool_range_idle(p, 0, 4));
	egw_pool_destroy(p);
}

/* Segments handed to clients: each once, the kept-back one never, none
 * when all are held (-EBUSY); a returned segment is given again only
 * once its blocks are all free (a room of the client gone still in
 * flight keeps it back). */
static void
test_segments_taken_and_returned(void)
{
	struct egw_pool *p = mk(16);
	struct egw_pool_segs t;
	struct egw_run r;

	CU_ASSERT_EQUAL(egw_pool_segs_init(&t, p, 3, 0), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_segs_init(&t, p, 65, 0), -EINVAL);
	CU_ASSERT_EQUAL(egw_pool_segs_init(&t, p, 4, 5), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(egw_pool_segs_init(&t, p, 4, 1), 0);
	CU_ASSERT_EQUAL(t.blocks, 4);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), 1);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), 2);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), 3);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), -EBUSY);
	/* segment 2's client has a room in flight when it goes */
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 7, 2, 8, 12, &r, 1), 1);
	egw_pool_segs_put(&t, 2);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), -EBUSY);
	CU_ASSERT_EQUAL(egw_pool_free(p, 7, r), 0);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), 2);
	/* a one-block room freed into the cache still returns it */
	CU_ASSERT_EQUAL_FATAL(egw_pool_cache_enable(p, 4), 0);
	CU_ASSERT_EQUAL(egw_pool_alloc_range(p, 8, 1, 12, 16, &r, 1), 1);
	CU_ASSERT_EQUAL(egw_pool_free(p, 8, r), 0);
	egw_pool_segs_put(&t, 3);
	CU_ASSERT_EQUAL(egw_pool_segs_take(&t, p), 3);
	egw_pool_destroy(p);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "geometry_and_addresses", test_geometry_and_addresses },
		{ "alloc_tokens_is_whole_blocks",
		  test_alloc_tokens_is_whole_blocks },
		{ "fragmented_alloc_uses_run_list",
		  test_fragmented_alloc_uses_run_list },
		{ "bad_frees_are_refused", test_bad_frees_are_refused },
		{ "shrink_keeps_head", test_shrink_keeps_head },
		{ "random_against_model", test_random_against_model },
		{ "random_against_model_with_cache",
		  test_random_against_model_with_cache },
		{ "single_block_cache", test_single_block_cache },
		{ "external_memory", test_external_memory },
		{ "alloc_range_stays_in_segment",
		  test_alloc_range_stays_in_segment },
		{ "alloc_range_full_segment", test_alloc_range_full_segment },
		{ "segments_taken_and_returned",
		  test_segments_taken_and_returned },
		{ NULL, NULL },
	};
	return cu_run("pool", tests);
}
