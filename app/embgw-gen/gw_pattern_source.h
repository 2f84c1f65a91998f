/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The built-in room source: rooms whose bytes are a pattern derived from
 * the room id (gw_pattern_source.c). The encode side produces any room a
 * peer asks for; the language side drives rooms and verifies every byte.
 */
#ifndef EMBGW_GW_PATTERN_SOURCE_H
#define EMBGW_GW_PATTERN_SOURCE_H

#include "gw_room_source.h"

/* A driven room's id: run (8 bits, tells this run's rooms from a previous
 * one's) | index (24 bits) | length in tokens (32 bits: the producer reads
 * the length from the id, so any encode gateway can serve any driver). */
#define GW_ROOM_INDEX_MASK 0xffffffu
#define GW_MAX_DRIVE GW_ROOM_INDEX_MASK

struct gw_pattern_opts {
	bool produce;            /* encode: synthesise data for any INIT */
	uint32_t drive;          /* language: rooms to run (0: none) */
	uint32_t concurrency;
	uint32_t lengths[64];
	uint32_t nlengths;
	uint16_t ranks;
	bool dummy_rank;         /* last rank aux-only */
	char peer[EGW_CONF_NAME_LEN]; /* a peer's name, "all", or "": first */
	uint64_t seed;
	uint32_t start_delay_ms;
	uint32_t rate;           /* open loop: rooms per second (0: closed) */
	uint16_t identity;       /* which identity (or port): added to the
				  * room-id run so that no two share ids */
};

/* A pattern source for `id`, attached to it. 0 or -errno (logged). */
int gw_pattern_source_attach(struct gw_id *id, const struct gw_pattern_opts *o);

#endif
