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
#include <string.h>

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
		for (uint16_t k = 0; k < ranks[r]; k++) {
			struct egw_xfer_stats st;

			ok &= w_blocks_in_use(w, k) == 0;
			/* the admission sums kept up without the tick */
			egw_xfer_receiver_get_stats(w->rx[k], &st);
			ok &= st.admit_recounts == 0;
		}
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
 * hold them all: rooms wait in the admission queue instead of failing;
 * every room completes, every delivered byte is right, nothing leaks. */
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
	/* admission: rooms wait for memory instead of failing */
	CU_ASSERT_EQUAL(ok_rooms, 64);
	CU_ASSERT_EQUAL(failed_rooms, 0);
	CU_ASSERT_EQUAL(w->deliveries, 2 * ok_rooms);
	CU_ASSERT_EQUAL(w->delivered_bytes, ok_bytes);
	CU_ASSERT_EQUAL(w->bad_bytes, 0);
	CU_ASSERT_EQUAL(w->oob_writes, 0);
	CU_ASSERT_EQUAL(w->pool_errors, 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, -1), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 1), 0);
	CU_ASSERT(w->msgs_dropped > 0 && w->msgs_duped > 0);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.alloc_retries > 0); /* the pools really were tight */
	CU_ASSERT_EQUAL(st.admit_recounts, 0);
	CU_ASSERT(st.retransmits > 0);
	printf(" [%u ok, %u failed cleanly] ", ok_rooms, failed_rooms);
	w_destroy(w);
}

/* ---- random schedules on a tiny pool ------------------------------------ */

static uint64_t
mix_rand(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#define SCHED_ROOMS 10

struct sched_outcome {
	uint32_t rooms, ok, failed_by_deadline, other, restarts, quarantined;
	bool leaked, corrupt, stuck;
	bool miscounted; /* the admission sums needed the tick's recount */
};

/*
 * One schedule: 3..10 rooms of random lengths (each fits the pool alone,
 * together they do not), opened at random times over a lossy, duplicating,
 * reordering network, with random first-window sizes, window caps and
 * write times (half of them landing only when they complete, as a late
 * writer's), and in a third of the schedules an encoder whose outputs
 * come milliseconds after the opens, onto receiver pools of 8..24 blocks. The engines must end
 * idle (no deadlock), every room must end on every side, a room may fail
 * only for memory at its own deadline (and the others of its ranks and
 * the sender then with it), and every pool must end empty.
 */
static void
run_schedule(uint64_t seed, struct sched_outcome *o)
{
	struct w_conf c;
	struct world *w;
	uint64_t rs = seed, opened_at[SCHED_ROOMS];
	uint32_t nrooms, pool_blocks, totals_of[SCHED_ROOMS];
	bool late_input;
	struct egw_xfer_stats st;

	memset(o, 0, sizeof(*o));
	w_conf_default(&c);
	c.nranks = mix_rand(&rs) % 3 == 0 ? 2 : 1;
	pool_blocks = 8 + (uint32_t)(mix_rand(&rs) % 17);
	c.dst_capacity = pool_blocks * 128;
	c.src_capacity = 512 * 128;
	c.default_tokens = 128 * (1 + (uint32_t)(mix_rand(&rs) % 16));
	c.xc.max_blocks_per_round = (uint32_t)(mix_rand(&rs) % 9);
	c.xc.max_rooms = 16;
	c.net.drop_pct = (uint32_t)(mix_rand(&rs) % 11);
	c.net.dup_pct = (uint32_t)(mix_rand(&rs) % 11);
	c.net.jitter_ns = (mix_rand(&rs) % 60) * US;
	c.net.write_ns = (10 + mix_rand(&rs) % 300) * US;
	c.net.late_writes = mix_rand(&rs) % 2 == 0;
	c.seed = seed;
	w = w_create(&c);
	w->keep_log = false;
	late_input = mix_rand(&rs) % 3 == 0;
	nrooms = 3 + (uint32_t)(mix_rand(&rs) % (SCHED_ROOMS - 2));
	for (uint32_t i = 0; i < nrooms; i++) {
		totals_of[i] = 1 + (uint32_t)(mix_rand(&rs) % c.dst_capacity);
		w_run_for(w, (mix_rand(&rs) % 2000) * US);
		opened_at[i] = w->now;
		if (w_open(w, 100 + i, late_input ? 0 : totals_of[i], false) == 0)
			o->rooms++;
	}
	/* an encoder that takes its time: the receivers hold first windows
	 * of rooms whose totals they do not know yet */
	for (uint32_t i = 0; late_input && i < nrooms; i++) {
		w_run_for(w, (mix_rand(&rs) % 3000) * US);
		w_input(w, 100 + i, totals_of[i]);
	}
	w_run(w, 600 * SEC);
	o->stuck = w->nev > 0;
	for (uint32_t i = 0; i < nrooms; i++) {
		const struct w_room_result *tx = w_result(w, 100 + i, -1);
		bool room_ok = tx != NULL && tx->error == 0, mem = false;

		for (uint16_t k = 0; k < c.nranks; k++) {
			const struct w_room_result *rx = w_result(w, 100 + i, k);

			if (rx == NULL) {
				o->stuck = true;
				continue;
			}
			room_ok &= rx->error == 0;
			mem |= rx->error == EGW_E_POOL_EXHAUSTED &&
			       rx->at >= opened_at[i] + c.xc.timers.admit_ns;
		}
		if (tx == NULL)
			o->stuck = true;
		if (room_ok)
			o->ok++;
		else if (mem)
			o->failed_by_deadline++;
		else
			o->other++;
	}
	o->corrupt = w->bad_bytes != 0 || w->oob_writes != 0 ||
		     w->pool_errors != 0 || w->foreign_writes != 0;
	o->leaked = w_blocks_in_use(w, -1) != 0;
	for (uint16_t k = 0; k < c.nranks; k++) {
		o->leaked |= w_blocks_in_use(w, k) != 0;
		egw_xfer_receiver_get_stats(w->rx[k], &st);
		o->leaked |= st.quarantine_rooms != 0 || st.admit_queued != 0;
		o->miscounted |= st.admit_recounts != 0;
		o->restarts += (uint32_t)st.restarts;
		o->quarantined += (uint32_t)st.quarantined;
	}
	w_destroy(w);
}

static void
test_random_schedules_tiny_pool(void)
{
	uint32_t n = 10000, bad = 0, rooms = 0, ok = 0, by_deadline = 0;
	uint32_t restarts = 0, quarantined = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct sched_outcome o;

		run_schedule(0x5eed0000ull + i, &o);
		rooms += o.rooms;
		ok += o.ok;
		by_deadline += o.failed_by_deadline;
		restarts += o.restarts;
		quarantined += o.quarantined;
		if (o.other || o.leaked || o.corrupt || o.stuck ||
		    o.miscounted) {
			if (bad++ < 5)
				printf("\n  schedule %u: %u rooms, %u ok, %u by "
				       "deadline, %u otherwise%s%s%s%s",
				       i, o.rooms, o.ok, o.failed_by_deadline,
				       o.other, o.leaked ? ", leaked" : "",
				       o.corrupt ? ", corrupt" : "",
				       o.stuck ? ", stuck" : "",
				       o.miscounted ? ", admission miscounted" :
						      "");
		}
	}
	printf(" [%u schedules, %u rooms: %u ok, %u failed at their memory "
	       "deadline; %u restarts, %u quarantines] ", n, rooms, ok,
	       by_deadline, restarts, quarantined);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(ok + by_deadline, rooms);
	CU_ASSERT(restarts > 0); /* the pools really were too small */
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "table_clean_network", test_table_clean_network },
		{ "table_lossy_network", test_table_lossy_network },
		{ "concurrent_rooms_lossy_tight_pools", test_concurrent_rooms_lossy_tight_pools },
		{ "random_schedules_tiny_pool", test_random_schedules_tiny_pool },
		{ NULL, NULL },
	};
	return cu_run("sim", tests);
}
