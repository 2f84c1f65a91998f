/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Engines attach (doc/client.md): a Unix socket served by a control thread
 * of its own (gw_attach_ctl.c) and, on each identity's worker, the room
 * source that runs the attached clients' rooms through the node
 * (gw_attach_source.c). The two talk through two DPDK rings per identity,
 * so the worker never blocks or makes a system call for a client: the
 * control thread does the accepting, the mapping, the eventfd writes and
 * the unmapping.
 */
#ifndef EMBGW_GW_ATTACH_H
#define EMBGW_GW_ATTACH_H

#include <rte_ring.h>

#include "egw_engines.h"
#include "gw_room_source.h"

/* Messages between the control thread and a worker (16 bytes each). */
enum gw_attach_msg_type {
	GW_AM_ADD = 1, /* ctl -> worker: a client's area, mapped */
	GW_AM_REMOVE,  /* ctl -> worker: the client is gone */
	GW_AM_ADDED,   /* worker -> ctl: its id (or -errno in `client`;
			* -EBUSY: no segment free), `arg` its segment */
	GW_AM_REMOVED, /* worker -> ctl: nothing of it is used any more */
	GW_AM_WAKE,    /* worker -> ctl: write the client's eventfd */
	GW_AM_LOST,    /* worker -> ctl: given up, close its socket */
};

struct gw_attach_msg {
	uint16_t type;
	uint16_t conn;      /* the control thread's connection index */
	int32_t client;     /* the worker's client id (or -errno) */
	uint64_t arg;       /* ADD: the area (its size is the area's own) */
};

/* One identity's attach point: the room source plus its mailboxes. */
struct gw_attach_port {
	struct gw_room_source base;
	struct egw_engines *clients;
	struct rte_ring *to_worker, *to_ctl;
	/* client id -> the control thread's connection index */
	uint16_t conn_of[4096];
	/* the loop's time of the call in progress: what the room operations
	 * hand the node (a fresh clock read there could lie ahead of the
	 * `now` the loop's timers use next, and a room's progress stamp in
	 * the future reads as an expired deadline) */
	uint64_t now;
	uint64_t peers_at; /* the peer list last looked at */
	/* the node's live peers as the clients were last given them */
	struct egw_engines_peer *peers;
	uint32_t npeers, max_peers;
	uint64_t node_gen; /* the node's peer table then */
	bool peers_built;
	/* a pool cut into segments (payload.segments): one per client,
	 * given as it is added, free again once it is gone and every block
	 * of its segment is free (rooms in flight ended). The worker's. */
	uint32_t nseg, seg_blocks;
	struct egw_pool_segs segs; /* which are held (first: 1 when segment
				    * 0 is the producer's) */
	uint8_t seg_of[4096];	   /* client id -> its segment */
	uint64_t to_ctl_full;    /* messages the ring could not take */
	uint64_t delivered_orphans; /* delivered rooms no client held */
};

/* gw_attach_source.c: on each identity, before the other sources (it
 * takes only the rooms its clients hold). 0 or -errno (logged). */
int gw_attach_source_attach(struct gw_id *id, struct gw_attach_port **out);

/* The blocks [lo, hi) of segment 0, kept for the built-in producer
 * (embgw-gen --produce) when the identity's pool is cut into segments and
 * engines attach: no client is given it. -ENOENT when the pool is not
 * cut (the producer allocates from the whole pool). Call at set-up,
 * before the workers run. */
int gw_attach_producer_segment(struct gw_id *id, uint32_t *lo, uint32_t *hi);

/* The peer table an identity's client areas hold: the port's peer slots
 * (each live peer listed once, leaving ones included). */
uint32_t gw_attach_max_peers(const struct gw_id *id);

/* Worker side: give the clients of `id` the node's peers as they are now
 * (egw_engines_peers_set: nothing happens when nothing changed). Call it
 * after every change of the node's peers; the attach source also calls it
 * on its own every few milliseconds, for readiness. 0 or -errno. */
int gw_attach_peers_changed(struct gw_id *id, uint64_t now);

/* gw_attach_ctl.c: create the socket and start the control thread for
 * the identities that have an attach point (gw_id.attach); stop it (the
 * clients' sockets closed, their areas unmapped, the socket file removed
 * if it is still ours; nothing to do when it never started). */
int gw_attach_start(const struct egw_conf *c, struct gw_id *const *ids,
		    uint16_t nids);
void gw_attach_stop(void);

/* The attach socket's own counters (the exit line's `attach:`), kept by
 * the control thread and read from any thread. */
struct gw_attach_counters {
	uint64_t refused;        /* connections whose peer may not attach */
	uint64_t refused_closed; /* of those, closed at once (too many wait) */
	uint64_t uid_capped;     /* closed at once: the uid's hello cap */
	uint64_t hello_timeouts; /* no hello within a second */
	uint64_t lost;           /* clients given up, their blocks held */
	uint64_t lost_expired;   /* of those, still open past the hold */
};
void gw_attach_counters(struct gw_attach_counters *out);

#endif
