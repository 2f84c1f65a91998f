/* SPDX-License-Identifier: BSD-3-Clause */
/* The pattern of egw_pattern.h; the header is its definition. */
#include <errno.h>
#include <string.h>

#include "egw_pattern.h"

/* Largest embedding checked against a stack copy (hidden 16384 x 4). */
#define MAX_EMB_BYTES 65536u

static uint64_t
mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Whole words of the pattern from s: the hot loop of the built-in
 * workload (the producer fills whole rooms on the poll loop, the verifier
 * recomputes them). The words are independent, so the loop vectorises;
 * on x86-64 an AVX2 clone (4 words at a time, the 64-bit multiplies
 * built from 32-bit ones) is chosen at load time where the CPU has it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	defined(__GLIBC__) /* the clones are chosen through an ifunc */
__attribute__((target_clones("avx2", "default")))
#endif
static void
pattern_words(uint64_t s, uint8_t *out, size_t nw)
{
	for (size_t i = 0; i < nw; i++) {
		uint64_t v = mix(s + 8 * i);

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		v = __builtin_bswap64(v); /* little-endian on any host */
#endif
		memcpy(out + 8 * i, &v, sizeof(v));
	}
}

void
egw_pattern_emb(uint64_t room, uint32_t token, uint8_t *out, size_t len)
{
	uint64_t s = mix(room ^ ((uint64_t)token << 20));
	size_t whole = len / 8;

	pattern_words(s, out, whole);
	if (len % 8 != 0) {
		uint64_t v = mix(s + 8 * whole);

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		v = __builtin_bswap64(v);
#endif
		memcpy(out + 8 * whole, &v, len % 8);
	}
}

int32_t
egw_pattern_fill_id(uint64_t room, uint32_t token)
{
	return (int32_t)(token ^ (uint32_t)room);
}

void
egw_pattern_mrope(uint64_t room, uint32_t token, int32_t out[3])
{
	out[0] = (int32_t)token;
	out[1] = (int32_t)(token * 3u);
	out[2] = (int32_t)(uint32_t)(room >> 32);
}

/* Visit the tokens of a room through its runs, in order: block b, token k
 * of the block, t counting up to `total` (t < total afterwards: the runs
 * hold fewer tokens). */
#define FOR_EACH_TOKEN(p, runs, nruns, total, t, b, k)                        \
	for (uint32_t ri_ = 0; ri_ < (nruns) && (t) < (total); ri_++)         \
		for (uint32_t b = (runs)[ri_].start;                          \
		     b < (runs)[ri_].start + (runs)[ri_].count &&             \
		     (t) < (total); b++)                                      \
			for (uint32_t k = 0;                                  \
			     k < egw_pool_geom(p)->block_tokens &&            \
			     (t) < (total); k++, (t)++)

int
egw_pattern_fill(struct egw_pool *p, uint64_t room, uint32_t total,
		 const struct egw_run *runs, uint32_t nruns)
{
	size_t eb;
	uint32_t t = 0;

	if (p == NULL || runs == NULL || nruns == 0)
		return -EINVAL;
	eb = egw_pool_geom_unit_bytes(egw_pool_geom(p), EGW_KIND_EMB);
	FOR_EACH_TOKEN(p, runs, nruns, total, t, b, k) {
		uint8_t *e = egw_pool_addr(p, EGW_KIND_EMB, b, k);
		int32_t *f = egw_pool_addr(p, EGW_KIND_FILL_IDS, b, k);
		int32_t *m = egw_pool_addr(p, EGW_KIND_MROPE, b, k);

		if (e == NULL || f == NULL)
			return -EINVAL;
		egw_pattern_emb(room, t, e, eb);
		*f = egw_pattern_fill_id(room, t);
		if (m != NULL)
			egw_pattern_mrope(room, t, m);
	}
	if (t != total ||
	    egw_pool_aux_init(p, runs[0].start, total, EGW_PATTERN_MROPE_DELTA,
			      room) == NULL)
		return -EINVAL;
	return 0;
}

uint64_t
egw_pattern_check(const struct egw_pool *p, uint64_t room, uint32_t total,
		  const struct egw_run *runs, uint32_t nruns,
		  uint32_t aux_block, bool aux_only)
{
	const struct egw_aux_rec *aux =
		egw_pool_addr(p, EGW_KIND_AUX, aux_block, 0);
	size_t eb = egw_pool_geom_unit_bytes(egw_pool_geom(p), EGW_KIND_EMB);
	uint8_t want[MAX_EMB_BYTES];
	uint64_t bad = 0;
	uint32_t t = 0;

	if (aux == NULL || aux->total_tokens != total || aux->cookie != room ||
	    aux->mrope_delta != EGW_PATTERN_MROPE_DELTA)
		bad++;
	if (aux_only)
		return bad;
	if (eb > sizeof(want))
		return bad + 1; /* cannot be checked: counted, not passed */
	FOR_EACH_TOKEN(p, runs, nruns, total, t, b, k) {
		const uint8_t *e = egw_pool_addr(p, EGW_KIND_EMB, b, k);
		const int32_t *f = egw_pool_addr(p, EGW_KIND_FILL_IDS, b, k);
		const int32_t *m = egw_pool_addr(p, EGW_KIND_MROPE, b, k);

		if (e == NULL || f == NULL)
			return bad + 1;
		egw_pattern_emb(room, t, want, eb);
		bad += memcmp(want, e, eb) != 0;
		bad += *f != egw_pattern_fill_id(room, t);
		if (m != NULL) {
			int32_t mw[3];

			egw_pattern_mrope(room, t, mw);
			bad += memcmp(mw, m, sizeof(mw)) != 0;
		}
	}
	return bad + (t != total);
}
