/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_PATTERN_H
#define EGW_PATTERN_H

/**
 * @file
 * The built-in workload's data: the bytes the gateway's producer writes
 * for a room, and what its verifier (and the unit tests) expect. Every
 * value is a pure function of the room id and the token index, so the two
 * sides share no state - and anyone can reproduce them from this
 * definition alone. (The built-in producer also takes a room's length
 * from the id: total = the id's low 32 bits; that is its convention, not
 * part of the pattern.)
 *
 * All arithmetic is on unsigned 64-bit integers modulo 2^64; "mix" is the
 * splitmix64 finaliser:
 *
 *     mix(x):  x ^= x >> 30;  x *= 0xbf58476d1ce4e5b9;
 *              x ^= x >> 27;  x *= 0x94d049bb133111eb;
 *              x ^= x >> 31;  return x
 *
 * For room id R and token t (0 <= t < total):
 *  - embedding (EGW_KIND_EMB, E = hidden_size x dtype_bytes bytes): with
 *    s = mix(R ^ (t << 20)), byte i (0 <= i < E) is byte (i mod 8), in
 *    little-endian order, of mix(s + i - (i mod 8)). That is: 8-byte
 *    words w_k = mix(s + 8k) laid out little-endian, the last one cut
 *    short when E is not a multiple of 8.
 *  - fill id (EGW_KIND_FILL_IDS): the int32 t ^ (R mod 2^32), i.e. the
 *    low 32 bits of t XOR R.
 *  - mrope positions (EGW_KIND_MROPE, when the pool has them): the three
 *    int32 t, (3 t) mod 2^32 and (R >> 32) mod 2^32.
 *  - aux record (struct egw_aux_rec in the room's first block, written by
 *    egw_pool_aux_init): total_tokens = total, the pool's geometry,
 *    mrope_delta = EGW_PATTERN_MROPE_DELTA, cookie = R, the rest zero.
 * The int32 values sit in the pool in host byte order, like every token
 * id an encoder writes (little-endian on the platforms the gateway runs
 * on). The tokens of a room fill its runs in order: run 0's blocks first,
 * block_tokens tokens per block, the last block possibly part-filled.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egw_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The mrope delta the aux record of a pattern room carries. */
#define EGW_PATTERN_MROPE_DELTA (-7)

/** The `len` embedding bytes of token `token` of room `room`. */
void egw_pattern_emb(uint64_t room, uint32_t token, uint8_t *out, size_t len);
/** The fill id of a token. */
int32_t egw_pattern_fill_id(uint64_t room, uint32_t token);
/** The three mrope positions of a token. */
void egw_pattern_mrope(uint64_t room, uint32_t token, int32_t out[3]);

/**
 * Write room `room`'s `total` tokens into the blocks of `runs` (every kind
 * the pool has) and its aux record into runs[0].start.
 * @return 0; -EINVAL when the runs do not hold `total` tokens or lie
 *   outside the pool (nothing meaningful is written then).
 */
int egw_pattern_fill(struct egw_pool *p, uint64_t room, uint32_t total,
		     const struct egw_run *runs, uint32_t nruns);

/**
 * Check a delivered room against the pattern: the aux record in
 * `aux_block` (total, cookie, delta) and, unless `aux_only` (a rank that
 * fetched the aux record alone), every token's embedding, fill id and
 * mrope positions through `runs`.
 * @return the number of mismatches: one per wrong aux record, per wrong
 *   unit (a token's embedding, fill id or mrope triple), and one when the
 *   runs hold fewer than `total` tokens; 0 when all is as defined.
 */
uint64_t egw_pattern_check(const struct egw_pool *p, uint64_t room,
			   uint32_t total, const struct egw_run *runs,
			   uint32_t nruns, uint32_t aux_block, bool aux_only);

#ifdef __cplusplus
}
#endif

#endif /* EGW_PATTERN_H */
