/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw-sim: the resume protocol end to end in one process - the encode
 * side's sender and the language side's receivers, each with its own block
 * pool, joined by a simulated network that loses, duplicates and reorders
 * control messages, with payload writes as bounds-checked memcpy. On a
 * virtual clock it runs the reference design's scenarios (500, 2000, 10000
 * and 50000 tokens against defaults of 1024 and 8192), then a mixed load of
 * --rooms concurrent rooms of 300..10000 tokens, verifies every delivered
 * byte and ends with the demo's line ("demo: N rooms, B bytes verified, R
 * resume rounds, E errors, L leaked blocks"); exit status 1 on any error
 * or leaked block, 2 on bad arguments.
 *
 * It runs the same state machines as the DPDK gateway (app/embgw), on the
 * simulated pair the unit tests use (tests/harness).
 *
 *   embgw-sim [--drop PCT] [--dup PCT] [--ranks N] [--rooms N] [--seed S]
 *   defaults: 5% drop, 5% duplication (reordering always on), 2 ranks,
 *   200 rooms, seed 1
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_harness.h"

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

struct totals {
	uint32_t rooms, ok, failed, deliveries, bad, leaked, oob, pool_errors;
	uint64_t bytes, resumes, retransmits, dropped, duped, virt_ns;
};

static void
account(struct world *w, uint32_t rooms, struct totals *t)
{
	struct egw_xfer_stats st;

	t->rooms += rooms;
	egw_xfer_sender_get_stats(w->tx, &st);
	t->ok += (uint32_t)st.rooms_ok;
	t->failed += (uint32_t)st.rooms_failed;
	t->leaked += w_blocks_in_use(w, -1);
	for (uint16_t r = 0; r < w->nranks; r++) {
		egw_xfer_receiver_get_stats(w->rx[r], &st);
		t->resumes += st.resumes;
		t->retransmits += st.retransmits;
		t->leaked += w_blocks_in_use(w, r);
	}
	t->deliveries += w->deliveries;
	t->bytes += w->delivered_bytes;
	t->bad += w->bad_bytes;
	t->oob += w->oob_writes;
	t->pool_errors += w->pool_errors;
	t->dropped += w->msgs_dropped;
	t->duped += w->msgs_duped;
	t->virt_ns += w->now;
}

/* When the last receiver finished: the transfer time, without the
 * sender's linger that keeps answering late duplicates. */
static uint64_t
last_done(const struct world *w)
{
	uint64_t at = 0;

	for (uint32_t i = 0; i < w->nres; i++)
		if (w->res[i].who >= 0 && w->res[i].at > at)
			at = w->res[i].at;
	return at;
}

static struct world *
make(uint16_t ranks, uint32_t def, uint32_t drop, uint32_t dup, uint64_t seed,
     uint32_t dst_blocks)
{
	struct w_conf c;

	w_conf_default(&c);
	c.nranks = ranks;
	c.default_tokens = def;
	c.src_capacity = 8192 * 128;
	c.dst_capacity = dst_blocks * 128;
	c.net.drop_pct = drop;
	c.net.dup_pct = dup;
	c.net.jitter_ns = 40 * US;
	c.net.write_ns_per_kb = 100; /* ~10 GB/s payload link */
	c.seed = seed;
	return w_create(&c);
}

int
main(int argc, char **argv)
{
	static const uint32_t lens[] = { 500, 2000, 10000, 50000 };
	static const uint32_t defs[] = { 1024, 8192 };
	uint32_t drop = 5, dup = 5, rooms = 200;
	uint16_t ranks = 2;
	uint64_t seed = 1;
	struct totals t;
	int opt;

	static const struct option lo[] = {
		{ "drop", required_argument, NULL, 'd' },
		{ "dup", required_argument, NULL, 'u' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "rooms", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'd': drop = (uint32_t)atoi(optarg); break;
		case 'u': dup = (uint32_t)atoi(optarg); break;
		case 'r': ranks = (uint16_t)atoi(optarg); break;
		case 'n': rooms = (uint32_t)atoi(optarg); break;
		case 's': seed = (uint64_t)atoll(optarg); break;
		default:
			fprintf(stderr, "usage: %s [--drop PCT] [--dup PCT] "
				"[--ranks 1..%d] [--rooms N] [--seed S]\n",
				argv[0], EGW_XFER_MAX_RANKS);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (ranks == 0 || ranks > EGW_XFER_MAX_RANKS || drop > 50 ||
	    dup > 50 || rooms == 0 || rooms > 1000) {
		fprintf(stderr, "embgw-sim: ranks 1..%d, drop/dup 0..50, "
			"rooms 1..1000\n", EGW_XFER_MAX_RANKS);
		return 2;
	}
	memset(&t, 0, sizeof(t));
	printf("embgw-sim: %u rank(s), %u%% drop, %u%% dup, reordering on\n",
	       ranks, drop, dup);
	for (size_t d = 0; d < 2; d++) {
		for (size_t l = 0; l < 4; l++) {
			struct world *w = make(ranks, defs[d], drop, dup, seed++, 1024);
			struct egw_xfer_stats st;

			w->keep_log = false;
			w_open(w, 1, lens[l], false);
			w_run(w, 120 * SEC);
			egw_xfer_receiver_get_stats(w->rx[0], &st);
			printf("  scenario %5u tokens, default %4u: %s, %lu resume "
			       "round(s), %lu bytes verified, %.2f ms (virtual)\n",
			       lens[l], defs[d], w->deliveries == ranks &&
			       !w->bad_bytes ? "ok" : "FAILED",
			       (unsigned long)st.resumes,
			       (unsigned long)w->delivered_bytes,
			       last_done(w) / 1e6);
			account(w, 1, &t);
			w_destroy(w);
		}
	}
	{
		/* mixed load: every room at once, 300..10000 tokens, pools
		 * large enough for all of them */
		struct world *w = make(ranks, 1024, drop, dup, seed, 8192);
		static const uint32_t mix[] = { 300, 700, 1200, 2000, 4000, 10000 };

		w->keep_log = false;
		for (uint32_t i = 0; i < rooms; i++)
			w_open(w, 100 + i, mix[i % 6], false);
		w_run(w, 600 * SEC);
		printf("  mixed load: %u concurrent rooms, %u deliveries, all "
		       "done after %.2f ms (virtual)\n", rooms, w->deliveries,
		       last_done(w) / 1e6);
		account(w, rooms, &t);
		w_destroy(w);
	}
	printf("  control: %lu dropped, %lu duplicated, %lu retransmissions\n",
	       (unsigned long)t.dropped, (unsigned long)t.duped,
	       (unsigned long)t.retransmits);
	{
		uint32_t errors = t.failed + t.bad + t.oob + t.pool_errors +
				  (t.deliveries != t.rooms * ranks);

		printf("demo: %u rooms, %lu bytes verified, %lu resume rounds, "
		       "%u errors, %u leaked blocks\n", t.rooms,
		       (unsigned long)t.bytes, (unsigned long)t.resumes, errors,
		       t.leaked);
		return errors == 0 && t.leaked == 0 ? 0 : 1;
	}
}
