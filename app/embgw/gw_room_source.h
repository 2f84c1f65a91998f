/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Room sources: where an identity's rooms come from and where their data
 * goes. A source works through its identity's node (lib/node):
 *  - language side: it opens rooms (egw_node_receiver_open), receives each
 *    rank's delivered runs (deliver) and gives them back to the pool
 *    (egw_node_release) once consumed;
 *  - encode side: it opens rooms (egw_node_sender_open), feeds them data in
 *    pool blocks (egw_node_alloc_src, fill, egw_node_input) - on its own
 *    schedule from poll(), or when a peer asks for a room the node does not
 *    know yet (unknown_room).
 * The worker lcore calls every source of an identity each poll-loop
 * iteration, after the payload completions, and hands it the node's
 * events; nothing here blocks or allocates on the fast path. An identity
 * has up to GW_MAX_SOURCES sources: the one through which local
 * inference-engine processes attach and open rooms (gw_attach_source.c),
 * embgw-gen's built-in pattern source (app/embgw-gen/gw_pattern_source.c),
 * and any other that fills these ops.
 */
#ifndef EMBGW_GW_ROOM_SOURCE_H
#define EMBGW_GW_ROOM_SOURCE_H

#include "gw.h"

/* Attached engine clients (gw_attach_source.c), summed over clients. */
struct gw_client_stats {
	uint32_t attached;       /* at exit */
	uint64_t rooms, ok, failed;
	uint64_t commands, refused, cq_overflow, alloc_waits, busy;
	uint64_t slot_waits; /* rooms that waited for a room table slot */
	uint64_t cache_hits, cache_misses, cache_shared, cache_evictions;
	uint64_t held_long;
	uint64_t lost;           /* clients given up (lease, broken ring) */
	uint32_t held_blocks;    /* held for given-up clients, at exit */
};

/* What a source reports at exit (gw_report.c prints it). */
struct gw_room_stats {
	bool encode, language;   /* which sides the source served */
	bool clients;            /* the source is the engines' attach point:
				  * only `client` below is filled */
	struct gw_client_stats client;
	/* encode side */
	uint64_t produced;       /* rooms fed */
	uint64_t refused;        /* refused (length, room table) or not fed */
	uint64_t queued;         /* opened, then waited for source memory */
	uint64_t busy;           /* refused as BUSY: the wait queue was full */
	uint32_t queue_max;      /* most rooms waiting for source memory */
	uint64_t sent_ok, sent_failed;
	/* language side: rooms the source opened */
	uint32_t rooms, ok, failed, unfinished;
	uint64_t slot_waits;     /* rooms that waited for a room table slot */
	uint64_t bytes;          /* delivered and consumed (verified) */
	uint64_t bad;            /* units that differed from what was sent */
	uint64_t *latency_ns;    /* open -> delivered, per room that succeeded */
	uint32_t nlatency;
	uint64_t *admit_wait_ns; /* time in the admission queue, per room that
				  * succeeded (its longest-waiting rank) */
	uint64_t first_open_ns, last_done_ns;
	uint64_t fail_reason[EGW_E_COUNT]; /* failed ranks, by egw_err_to_wire() */
	/* after a failure: of the rooms opened after the last failed one,
	 * how many succeeded (0 rooms failed: last_failed is 0) */
	uint32_t last_failed;    /* 1 + index of the last failed room */
	uint32_t after_last_failed, after_last_failed_ok;
};

/* How far a source is: rooms still to run, or GW_ROOMS_ENDLESS for one
 * that serves until the gateway stops. */
#define GW_ROOMS_ENDLESS UINT64_MAX

struct gw_room_source;

struct gw_room_source_ops {
	const char *name;
	/* Every poll-loop iteration: open the rooms that are due, feed data
	 * that is ready. Returns the work done (0: nothing was due). */
	uint32_t (*poll)(struct gw_room_source *s, uint64_t now);
	/* Encode side: a peer asked for `room`, unknown to the node, with an
	 * INIT the node found valid. Open (and feed, or queue) it if this
	 * source can: 0. -EGW_E_UNKNOWN_ROOM: not this source's room; any
	 * other -enum egw_err: the refusal the INIT is answered with
	 * (egw_node_ops.unknown_room). Optional. */
	int (*unknown_room)(struct gw_room_source *s, uint64_t room,
			    uint16_t nranks, uint64_t now);
	/* Language side: one rank's data landed. False when the room is not
	 * this source's; otherwise the runs are the source's to release. */
	bool (*deliver)(struct gw_room_source *s, const struct egw_act *a,
			uint64_t now);
	/* A room ended on the node (e == EGW_E_OK: success; is_sender: the
	 * encode side's). False when the room is not this source's. */
	bool (*done)(struct gw_room_source *s, uint64_t room, uint16_t rank,
		     enum egw_err e, bool is_sender, uint64_t now);
	/* Rooms still to run (GW_ROOMS_ENDLESS: no end of its own). */
	uint64_t (*remaining)(const struct gw_room_source *s);
	void (*report)(struct gw_room_source *s, struct gw_room_stats *out);
	void (*close)(struct gw_room_source *s);
};

/* A source's common part: implementations embed it first. */
struct gw_room_source {
	const struct gw_room_source_ops *ops;
	struct gw_id *id;
};

/* gw_room_source.c: the identity's sources, each event offered to them
 * in turn until one takes it */
int gw_room_source_attach(struct gw_id *id, struct gw_room_source *s);
uint32_t gw_room_sources_poll(struct gw_id *id, uint64_t now);
/* the first answer other than -EGW_E_UNKNOWN_ROOM, or that */
int gw_room_sources_unknown_room(struct gw_id *id, uint64_t room,
				 uint16_t nranks, uint64_t now);
/* false: no source took the room (the caller releases its runs) */
bool gw_room_sources_deliver(struct gw_id *id, const struct egw_act *a,
			     uint64_t now);
void gw_room_sources_done(struct gw_id *id, uint64_t room, uint16_t rank,
			  enum egw_err e, bool is_sender, uint64_t now);
/* rooms its sources still have to run (GW_ROOMS_ENDLESS: none bounded) */
uint64_t gw_room_sources_remaining(const struct gw_id *id);
void gw_room_sources_close(struct gw_id *id);

#endif
