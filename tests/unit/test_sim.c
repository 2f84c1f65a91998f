/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The proof table: both state machines back to back through a network that
 * drops, duplicates and reorders control messages, memcpy payload, over
 * total x default x ranks. Every delivered byte is checked against the
 * pattern, the delivered byte count must equal what was sent, and both
 * sides' pools must end with zero blocks in use.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cu_main.h"
#include "xfer_harness.h"

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

static const uint32_t totals[] = { 1, 127, 128, 129, 500, 2000, 8192,
				   10000, 50000 };
static const uint32_t defaults[] = { 1024, 8192 };
static const uint16_t ranks[] = { 1, 2, 4 };

struct net_case {
	const char *name;
	uint32_t drop, dup;
	uint64_t jitter;
};

static const struct net_case nets[] = {
	{ "clean", 0, 0, 0 },
	{ "lossy", 10, 10, 40 * US }, /* 10% drop, 10% dup, reordering */
};

static void
run_table(const struct net_case *nc)
{
	uint32_t cases = 0, bad_cases = 0;

	for (size_t d = 0; d < sizeof(defaults) / sizeof(defaults[0]); d++)
	for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++)
	for (size_t t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
		struct w_conf c;
		struct world *w;
		bool ok = true;
		uint64_t room = 1000 + t;

		w_conf_default(&c);
		c.nranks = ranks[r];
		c.default_tokens = defaults[d];
		c.src_capacity = 512 * 128;
		c.dst_capacity = 512 * 128;
		c.net.drop_pct = nc->drop;
		c.net.dup_pct = nc->dup;
		c.net.jitter_ns = nc->jitter;
		c.seed = 1 + cases;
		w = w_create(&c);
		w->keep_log = false;
		ok &= w_open(w, room, totals[t], false) == 0;
		w_run(w, 120 * SEC);
		ok &= w->deliveries == ranks[r];
		ok &= w->delivered_bytes == w->expected_bytes;
		ok &= w->verified_tokens == (uint64_t)ranks[r] * totals[t];
		ok &= w->bad_bytes == 0 && w->oob_writes == 0 &&
		      w->pool_errors == 0;
		ok &= w_blocks_in_use(w, -1) == 0;
		for (uint16_t k = 0; k < ranks[r]; k++)
			ok &= w_blocks_in_use(w, k) == 0;
		ok &= w_result(w, room, -1) != NULL &&
		      w_result(w, room, -1)->error == 0;
		if (!ok) {
			bad_cases++;
			printf("\n  FAIL %s total=%u default=%u ranks=%u: "
			       "deliveries=%u bytes=%lu/%lu bad=%u leaked=%u/%u\n",
			       nc->name, totals[t], defaults[d], ranks[r],
			       w->deliveries, (unsigned long)w->delivered_bytes,
			       (unsigned long)w->expected_bytes, w->bad_bytes,
			       w_blocks_in_use(w, -1), w_blocks_in_use(w, 0));
		}
		w_destroy(w);
		cases++;
	}
	CU_ASSERT_EQUAL(cases, 9 * 2 * 3);
	CU_ASSERT_EQUAL(bad_cases, 0);
}

static void
test_table_clean_network(void)
{
	run_table(&nets[0]);
}

static void
test_table_lossy_network(void)
{
	run_table(&nets[1]);
}

/* Many rooms at once over the lossy network, sharing pools that cannot
 * hold them all: rooms wait for memory; a room that cannot get it before
 * its deadline fails cleanly; every room ends one way or the other, every
 * delivered byte is right, and nothing leaks. */
static void
test_concurrent_rooms_lossy_tight_pools(void)
{
	struct w_conf c;
	struct world *w;
	uint32_t opened = 0, ok_rooms = 0, failed_rooms = 0, odd = 0;
	uint64_t ok_bytes = 0;
	struct egw_xfer_stats st;

	w_conf_default(&c);
	c.nranks = 2;
	c.default_tokens = 1024;
	c.src_capacity = 2048 * 128;
	c.dst_capacity = 256 * 128; /* 64 default windows alone need 512 */
	c.net.drop_pct = 5;
	c.net.dup_pct = 5;
	c.net.jitter_ns = 50 * US;
	c.seed = 77;
	w = w_create(&c);
	w->keep_log = false;
	for (uint32_t i = 0; i < 64; i++)
		if (w_open(w, 5000 + i, totals[i % 8], false) == 0)
			opened++;
	w_run(w, 120 * SEC);
	CU_ASSERT_EQUAL(opened, 64);
	for (uint32_t i = 0; i < 64; i++) {
		const struct w_room_result *r = w_result(w, 5000 + i, -1);

		if (r == NULL) {
			odd++;
			printf(" room %u: no result ", 5000 + i);
		}
		else if (r->error == 0) {
			ok_rooms++;
			ok_bytes += 2 * w_pattern_bytes(w, totals[i % 8], false);
		} else if (r->error == EGW_E_ABORTED ||
			   r->error == EGW_E_POOL_EXHAUSTED)
			failed_rooms++;
		else {
			odd++;
			printf(" room %u: %s ", 5000 + i, egw_strerror(r->error));
		}
	}
	CU_ASSERT_EQUAL(odd, 0);
	CU_ASSERT_EQUAL(ok_rooms + failed_rooms, 64);
	CU_ASSERT(ok_rooms >= 32);
	CU_ASSERT_EQUAL(w->deliveries, 2 * ok_rooms);
	CU_ASSERT_EQUAL(w->delivered_bytes, ok_bytes);
	CU_ASSERT_EQUAL(w->bad_bytes, 0);
	CU_ASSERT_EQUAL(w->oob_writes, 0);
	CU_ASSERT_EQUAL(w->pool_errors, 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, -1), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 1), 0);
	CU_ASSERT(w->msgs_dropped > 0 && w->msgs_duped > 0);
	egw_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.alloc_retries > 0); /* the pools really were tight */
	CU_ASSERT(st.retransmits > 0);
	printf(" [%u ok, %u failed cleanly] ", ok_rooms, failed_rooms);
	w_destroy(w);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "table_clean_network", test_table_clean_network },
		{ "table_lossy_network", test_table_lossy_network },
		{ "concurrent_rooms_lossy_tight_pools", test_concurrent_rooms_lossy_tight_pools },
		{ NULL, NULL },
	};
	return cu_run("sim", tests);
}
