/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Default allocation policies. Besides the behaviour, this suite prints the
 * trade-off on a stated length distribution (doc/xfer.md quotes it):
 *   70% single images, uniform 256..1500 tokens
 *   25% several images, uniform 1500..6000 tokens
 *    5% video, uniform 6000..50000 tokens
 * For each policy: share of requests that need a resume round (cap of 64
 * blocks = 8192 tokens per round), resume rounds per request, and tokens
 * reserved beyond the request while the total is unknown.
 */
#include <stdio.h>

#include "cu_main.h"
#include "egw_xfer.h"

static uint64_t rng = 42;

static uint32_t
rnd(uint32_t lo, uint32_t hi)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (uint32_t)((rng >> 33) % (hi - lo + 1));
}

static uint32_t
sample_length(void)
{
	uint32_t k = rnd(0, 99);

	if (k < 70)
		return rnd(256, 1500);
	if (k < 95)
		return rnd(1500, 6000);
	return rnd(6000, 50000);
}

static void
test_fixed_rounds_to_blocks(void)
{
	struct egw_policy p;

	CU_ASSERT_EQUAL(egw_policy_init_fixed(&p, 128, 8192), 0);
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 8192);
	CU_ASSERT_EQUAL(egw_policy_init_fixed(&p, 128, 1000), 0);
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 1024);
	egw_policy_observe(&p, 50000); /* fixed never moves */
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 1024);
	CU_ASSERT_EQUAL(egw_policy_init_fixed(&p, 128, 0), -22);
	CU_ASSERT_EQUAL(egw_policy_init_adaptive(&p, 128, 1024, 0, 128, 4096), -22);
	CU_ASSERT_EQUAL(egw_policy_init_adaptive(&p, 128, 1024, 90, 4096, 128), -22);
}

static void
test_adaptive_tracks_percentile_with_cap(void)
{
	struct egw_policy p;

	CU_ASSERT_EQUAL(egw_policy_init_adaptive(&p, 128, 1024, 90, 256, 16384), 0);
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 1024); /* before warm-up */
	for (uint32_t i = 0; i < 256; i++)
		egw_policy_observe(&p, 100 + (i % 100) * 20); /* 100..2080 */
	/* p90 of 100..2080 step 20 is 1880 -> 1920 in whole blocks */
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 1920);
	for (uint32_t i = 0; i < 256; i++)
		egw_policy_observe(&p, 100000);
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 16384); /* the cap */
	for (uint32_t i = 0; i < 256; i++)
		egw_policy_observe(&p, 10);
	CU_ASSERT_EQUAL(egw_policy_tokens(&p), 256); /* the floor */
}

struct figures {
	double resume_share, rounds, reserved;
};

static struct figures
evaluate(struct egw_policy *p, uint32_t n)
{
	struct figures f = { 0, 0, 0 };
	const uint32_t cap = 8192;

	rng = 42;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t total = sample_length(), def = egw_policy_tokens(p);

		if (total > def) {
			f.resume_share += 1;
			f.rounds += (total - def + cap - 1) / cap;
		} else {
			f.reserved += def - total;
		}
		egw_policy_observe(p, total);
	}
	f.resume_share /= n;
	f.rounds /= n;
	f.reserved /= n;
	return f;
}

static void
test_adaptive_tradeoff_on_stated_distribution(void)
{
	struct egw_policy f8192, f1024, ad;
	struct figures a, b, c;

	egw_policy_init_fixed(&f8192, 128, 8192);
	egw_policy_init_fixed(&f1024, 128, 1024);
	egw_policy_init_adaptive(&ad, 128, 8192, 90, 512, 16384);
	a = evaluate(&f8192, 20000);
	b = evaluate(&f1024, 20000);
	c = evaluate(&ad, 20000);
	printf("\n  policy fixed-8192: %.1f%% resume, %.3f rounds/req, %.0f tokens reserved/req"
	       "\n  policy fixed-1024: %.1f%% resume, %.3f rounds/req, %.0f tokens reserved/req"
	       "\n  policy adaptive-p90: %.1f%% resume, %.3f rounds/req, %.0f tokens reserved/req (default now %u)\n",
	       100 * a.resume_share, a.rounds, a.reserved,
	       100 * b.resume_share, b.rounds, b.reserved,
	       100 * c.resume_share, c.rounds, c.reserved,
	       egw_policy_tokens(&ad));
	/* p90 aims at about one request in ten resuming */
	CU_ASSERT(c.resume_share > 0.05 && c.resume_share < 0.15);
	/* fewer rounds than the small fixed default, far less memory held
	 * than the reference design's 8192 */
	CU_ASSERT(c.rounds < b.rounds / 3);
	CU_ASSERT(c.reserved < a.reserved * 0.6);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "fixed_rounds_to_blocks", test_fixed_rounds_to_blocks },
		{ "adaptive_tracks_percentile_with_cap", test_adaptive_tracks_percentile_with_cap },
		{ "adaptive_tradeoff_on_stated_distribution", test_adaptive_tradeoff_on_stated_distribution },
		{ NULL, NULL },
	};
	return cu_run("policy", tests);
}
