/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deterministic room contents the fake gateway writes into language
 * rooms and expects in encode rooms; the tests write and check the same
 * (tests/python/conftest.py has the same formulas). Token t of room r:
 * embedding byte k, fill id and the three mrope positions; the aux record
 * of a language room.
 *
 * Room ids the fake gateway understands: the low 24 bits are a language
 * room's total; bit 62 makes the room fail (peer dead) after
 * WaitingForInput; bit 61 stalls it (a language room at WaitingForInput,
 * an encode room after its commit) until it is aborted or its client goes.
 */
#ifndef EGW_TEST_PATTERN_H
#define EGW_TEST_PATTERN_H

#include <stdint.h>

#define PAT_TOTAL(room) ((uint32_t)((room) & 0xffffffu))
#define PAT_FAIL (1ull << 62)
#define PAT_STALL (1ull << 61)

static inline uint8_t
pat_emb(uint64_t room, uint32_t t, uint32_t k)
{
	return (uint8_t)(t * 131u + k * 7u + (uint32_t)room * 13u + (t >> 8));
}

static inline uint32_t
pat_fill(uint64_t room, uint32_t t)
{
	return t * 40503u + (uint32_t)room;
}

static inline uint32_t
pat_mrope(uint64_t room, uint32_t t, uint32_t i)
{
	return t * 3u + i + (uint32_t)(room >> 8);
}

static inline int32_t
pat_delta(uint64_t room)
{
	return (int32_t)(room % 1000u) - 500;
}

static inline uint64_t
pat_cookie(uint64_t room)
{
	return room * 0x9E3779B97F4A7C15ull;
}

#endif
