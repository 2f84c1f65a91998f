/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_ENGINES_H
#define EGW_ENGINES_H

/**
 * @file
 * The gateway's side of doc/client.md for one port, sans-I/O: it polls the
 * attached clients' submission rings, checks every command, keeps each
 * client's room slots, asks the gateway to act on rooms through a table of
 * operations, and turns what the gateway reports about those rooms back
 * into completions and slot contents. It never blocks and makes no system
 * call; the sockets, the fds and the wake-up writes are the caller's.
 *
 * The server never trusts client memory: commands are copied out of the
 * ring and checked before use; the runs it hands back to the gateway
 * (release, abort) come from its own copy, never from the shared slot.
 *
 * lib/engines: the gateway links it; a client links lib/attach only.
 */

#include "egw_attach.h"
#include "egw_xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Sides of a room, as the server keys them. */
enum egw_attach_side {
	EGW_SIDE_SEND = 0,   /**< encode: the gateway serves the room */
	EGW_SIDE_RECV = 1,   /**< language: the gateway receives one rank */
};

/**
 * What the server asks of the gateway. Each returns 0 (or a run count) or
 * a negative errno / negated embgw code, which the server passes to the
 * client as the completion's result. They may call back into the server
 * (egw_engines_room_*): the room is out of the client's table
 * before an abort is asked for, so such calls find nothing and are ignored.
 */
struct egw_engines_ops {
	/** SEND_OPEN: `total` tokens of source blocks for `room` as at most
	 * `max_runs` runs (in token order) with the aux record written in
	 * the first block, and the sender told that `nranks` ranks will
	 * fetch it. `client` (egw_engines_add's id) says whose memory the
	 * blocks come from (its own segment of a cut pool). @return runs
	 * (> 0); -ENOSPC while memory is short (asked again every poll
	 * until the allocation deadline); -EGW_E_NO_SLOT while the room
	 * table is full, nothing kept (the room waits for a slot, conf
	 * slot_queue); other: refused. */
	int (*send_open)(void *ctx, uint32_t client, uint64_t room,
			 uint16_t nranks, uint32_t total, int32_t mrope_delta,
			 uint64_t cookie, struct egw_attach_run *runs,
			 uint32_t max_runs);
	/** SEND_COMMIT: the data is in place; the room's engine owns the
	 * runs from now on and reports the end (egw_engines_room_done). */
	int (*send_commit)(void *ctx, uint64_t room, uint32_t total,
			   const struct egw_attach_run *runs, uint32_t nruns);
	/** End an encode room early (abort, detach), or free the runs of one
	 * whose engine ended it before the commit. Before the commit the
	 * runs are still the server's and come along to be freed; after it
	 * nruns is 0. Ending a room the engine no longer has is not an
	 * error. */
	void (*send_abort)(void *ctx, uint64_t room, bool committed,
			   const struct egw_attach_run *runs, uint32_t nruns);
	/** RECV_OPEN: receive `room` as `rank` of `nranks` from the peer
	 * in the node's slot `peer` (egw_engines_peer.slot of the peer the
	 * command named, live and not leaving when asked).
	 * -EGW_E_NO_SLOT: the room table is full, nothing was opened (the
	 * room waits for a slot, conf slot_queue). */
	int (*recv_open)(void *ctx, uint64_t room, uint16_t rank,
			 uint16_t nranks, uint32_t peer, bool aux_only);
	/** End a language room that has not been delivered. */
	void (*recv_abort)(void *ctx, uint64_t room, uint16_t rank);
	/** Free a delivered room's blocks (RELEASE, or abort after Success). */
	void (*recv_release)(void *ctx, uint64_t room, uint16_t rank,
			     const struct egw_attach_run *runs, uint32_t nruns);
	/** A sleeping client has completions: write its eventfd (from a
	 * thread that may block; the server asks once per poll at most). */
	void (*wake)(void *ctx, uint32_t client);
	/** The server gave a client up (ring indices broken, lease expired):
	 * its rooms are already ended at the node and the area's trust word
	 * says so, but the blocks of rooms the client may still map
	 * (delivered, or opened and not committed) are held out of the pool
	 * until egw_engines_remove(): call it once the client's process can
	 * no longer map them (its socket closed) or a bound passed. `why`
	 * is for the log. */
	void (*client_lost)(void *ctx, uint32_t client, const char *why);
	/** Optional: the port's memory as the clients' published stats say
	 * it (pool, quarantine, admission queue). Asked about once a
	 * millisecond; a non-empty admission queue makes the content cache
	 * give landed entries nobody holds back to the pool. */
	void (*pool_state)(void *ctx, struct egw_attach_stats *st);
	/** Optional: a delivered room has been held longer than
	 * held_warn_ns (once per room; for the log). */
	void (*held_long)(void *ctx, uint32_t client, uint64_t room,
			  uint64_t held_ns);
	/** Optional: free slots of the node's room table on `side` (asked
	 * once per poll while rooms wait for one). A waiting room is tried
	 * only while it says more than 0; without it, on every poll. */
	uint32_t (*slots_free)(void *ctx, enum egw_attach_side side);
	/** Optional, for the log: rooms began to wait for a slot of the
	 * room table, or the first of them gave up waiting (fails
	 * -EGW_E_NO_SLOT): each once per wait episode (until no room of
	 * that side waits). `text` says which; a give-up names the room
	 * and how long it waited. Also: a room that named a peer by name
	 * gave up waiting for it (fails -EGW_E_UNKNOWN_PEER; the text
	 * names room and peer). */
	void (*slot_note)(void *ctx, uint32_t client, const char *text);
	/** Optional (required with fanout_ranks > 1): RECV_OPEN of a group
	 * (doc/client.md, "Fan-out"): receive `room` once for the ranks of
	 * the bitmask `ranks` of `nranks`, the lowest being `rank`, from the
	 * peer in slot `peer`. The room's reports come for `rank`. Return
	 * values as recv_open. */
	int (*recv_open_group)(void *ctx, uint64_t room, uint16_t rank,
			       uint16_t nranks, uint16_t ranks, uint32_t peer);
};

struct egw_engines_conf {
	uint32_t max_clients;      /**< attached at once */
	uint32_t max_rooms;        /**< rooms of all clients together */
	uint32_t max_total_tokens; /**< largest SEND_OPEN */
	uint32_t max_peers;	   /**< peers listed at once (the node's
				    *   peer slots), up to
				    *   EGW_ATTACH_MAX_PEER_RECS; clients'
				    *   areas hold this many records */
	uint64_t peer_wait_ns;	   /**< a RECV_OPEN that names a peer not
				    *   known yet waits this long for it
				    *   (the port's bootstrap deadline), then
				    *   fails -EGW_E_UNKNOWN_PEER */
	bool encode, language;     /**< the port's roles */
	uint64_t alloc_ns;         /**< SEND_OPEN waits this long for memory */
	uint32_t max_waiting;      /**< SEND_OPENs of one client waiting for
				    *   memory at once; one more is refused
				    *   with -EGW_E_BUSY (0: no bound but the
				    *   client's slots) */
	uint64_t admit_ns;	   /**< an OPEN that finds the node's room
				    *   table full waits this long for a slot
				    *   (in order, per side), then fails
				    *   -EGW_E_NO_SLOT */
	uint32_t slot_queue;	   /**< OPENs waiting for a slot at once, per
				    *   side; one more fails -EGW_E_NO_SLOT at
				    *   once (0: none wait) */
	uint64_t lease_ns;         /**< 0: no lease */
	uint32_t budget;           /**< commands taken per client per poll */
	uint32_t cache_entries;    /**< content entries kept (0: content keys
				    *   are ignored, every RECV_OPEN transfers) */
	uint32_t cache_blocks;     /**< landed blocks the cache keeps when no
				    *   room holds them */
	uint32_t cache_max_runs;   /**< runs an entry can list */
	uint64_t held_warn_ns;     /**< report a delivered room held longer
				    *   (0: never) */
	uint32_t fanout_ranks;	   /**< RECV_OPENs of ranks g*F..(g+1)*F-1
				    *   of a room share one receive (0 or 1:
				    *   every rank receives alone) */
	uint32_t fanout_max_runs;  /**< runs a group's delivery can list
				    *   (with fanout_ranks > 1) */
	const struct egw_engines_ops *ops;
	void *ctx;
};

/** Per-client counters (also summed over clients by the server). */
struct egw_engines_stats {
	uint64_t commands;         /**< taken off the ring */
	uint64_t refused;          /**< answered with an error, any reason */
	uint64_t refused_invalid;  /**< -EINVAL, -ERANGE, -EFBIG, -EOPNOTSUPP */
	uint64_t refused_state;    /**< -EBUSY, -EEXIST, -ENOENT, -EBADFD */
	uint64_t rooms_opened, rooms_ok, rooms_failed;
	uint64_t completions;      /**< posted */
	uint64_t cq_overflow;      /**< lost to a full completion ring */
	uint64_t alloc_waits;      /**< SEND_OPENs that waited for memory */
	uint64_t busy;             /**< SEND_OPENs refused: max_waiting reached */
	uint64_t slot_waits; /**< OPENs that waited for a room-table slot */
	uint64_t peer_waits; /**< RECV_OPENs that waited for a named peer */
	uint64_t cache_hits;       /**< keyed RECV_OPENs served from the cache */
	uint64_t cache_misses;     /**< keyed RECV_OPENs that transferred */
	uint64_t cache_shared;     /**< keyed RECV_OPENs that joined a transfer */
	uint64_t group_opens;	   /**< RECV_OPENs that opened a group's room */
	uint64_t group_joins;	   /**< RECV_OPENs that joined one: no
				    *   transfer of their own */
	uint64_t held_long;        /**< delivered rooms held past held_warn_ns */
	uint64_t lost;             /**< clients given up (lease, broken ring) */
	uint64_t held_rooms;       /**< rooms whose blocks were held for a
				    *   given-up client until its removal */
	uint64_t held_blocks;      /**< ... and their blocks */
};

/** The content cache of a port (doc/client.md, "Content keys"). */
struct egw_engines_cache_stats {
	uint32_t entries;          /**< in flight or landed */
	uint32_t blocks;           /**< held by landed entries */
	uint32_t pinned;           /**< landed entries some room holds */
	uint64_t evictions;        /**< landed entries given back */
};

struct egw_engines;

/**
 * @return 0, -EINVAL (a count 0 or too large, ops missing), -ENOMEM.
 */
int egw_engines_create(const struct egw_engines_conf *c,
			     struct egw_engines **out);
/** Frees the server; clients still attached are removed first. */
void egw_engines_destroy(struct egw_engines *s, uint64_t now);

/**
 * Add a client whose area the caller has laid out (egw_attach_area_init)
 * and mapped; the mapping must outlive the client.
 * @return the client's id (>= 0, below max_clients), -EUSERS (full),
 *   -ENOMEM, or egw_attach_map_init()'s error.
 */
int egw_engines_add(struct egw_engines *s, void *area,
			  size_t area_bytes, uint64_t now);

/**
 * Detach a client: every room it holds is ended (encode rooms aborted,
 * language rooms aborted or, once delivered, released), no completion is
 * posted and the client's area is not touched (it may be unmapped
 * already). Its id may be reused afterwards. Unknown ids are ignored.
 */
void egw_engines_remove(struct egw_engines *s, uint32_t client,
			      uint64_t now);

/**
 * Take commands (up to `budget` per client), retry SEND_OPENs waiting for
 * memory and OPENs waiting for a room-table slot (in order, once a slot
 * is free), end what passed its deadline, check leases, ask for wake-ups.
 * @return the number of things done (0: idle).
 */
uint32_t egw_engines_poll(struct egw_engines *s, uint64_t now);

/* ---- what the gateway reports about a room (the server ignores rooms it
 * does not hold) ----------------------------------------------------------- */

/** A state change (WaitingForInput, Transferring) with what is known. */
void egw_engines_room_state(struct egw_engines *s,
				  enum egw_attach_side side, uint64_t room,
				  uint16_t rank, enum egw_attach_state st,
				  uint32_t total, uint32_t landed);

/**
 * A language room landed: `runs` cover exactly `total` tokens in order
 * (one run of one block for an aux-only rank), the aux record in
 * runs[0].start. The blocks are the client's until RELEASE.
 * @return 0: the client has the blocks; otherwise the caller keeps them
 *   and frees them: -ENOENT (no client holds the room), -E2BIG (the slot
 *   cannot list nruns runs: the room is reported Failed with it).
 */
int egw_engines_room_delivered(struct egw_engines *s,
				     uint64_t room, uint16_t rank,
				     uint32_t total,
				     const struct egw_attach_run *runs,
				     uint32_t nruns);

/**
 * A room ended: encode rooms with err 0 (every rank holds every token) or
 * a failure; language rooms only with a failure (their success is
 * delivered()). `err` is a positive enum egw_err or a negative code; the
 * completion carries it negated. The gateway has freed (or will free)
 * the room's blocks itself.
 * @return 0 when a client held the room, -ENOENT otherwise.
 */
int egw_engines_room_done(struct egw_engines *s, enum egw_attach_side side,
			  uint64_t room, uint16_t rank, int err);

/* ---- the port's peers ------------------------------------------------------
 */

/** A live peer as the gateway's worker knows it. */
struct egw_engines_peer {
	uint32_t id;   /**< never reused, != 0 */
	uint32_t slot; /**< the node's slot (ops.recv_open) */
	char name[EGW_ATTACH_NAME_LEN];
	bool ready;   /**< registered both ways */
	bool leaving; /**< removed, its rooms ending */
};

/**
 * The port's peers now, the whole list, in any order: called by the
 * worker after every change of its node's peers (added, removed, ready,
 * leaving, slot freed). When the list differs from the last one, every
 * client's peer table is rewritten under a new generation, clients that
 * asked hear EGW_OP_PEERS, rooms waiting for a name now listed are
 * opened, and rooms waiting for a room-table slot whose peer is gone or
 * leaving fail -EGW_E_PEER_REMOVED (rooms opened at the node are the
 * node's to end: it reports them through egw_engines_room_done).
 * @return 0; -E2BIG (more than max_peers), -EINVAL (an id 0, twice, or
 *   a name not terminated or empty): nothing changed.
 */
int egw_engines_peers_set(struct egw_engines *s,
			  const struct egw_engines_peer *peers, uint32_t n,
			  uint64_t now);
/** The peer list's generation (0: never set); it moves with each change. */
uint64_t egw_engines_peers_gen(const struct egw_engines *s);

/** A client's counters; -ENOENT for an unknown id. */
int egw_engines_client_stats(const struct egw_engines *s, uint32_t client,
			     struct egw_engines_stats *st);
/** All clients', removed ones included. */
void egw_engines_stats(const struct egw_engines *s,
			     struct egw_engines_stats *st);
/** The content cache's state and counters. */
void egw_engines_cache(const struct egw_engines *s,
		       struct egw_engines_cache_stats *st);
/** Give back every landed entry that no room holds (at exit, before the
 *  report: what stays in use then is what rooms hold). @return entries
 *  given back. */
uint32_t egw_engines_cache_flush(struct egw_engines *s);
/** Clients attached, rooms held. */
uint32_t egw_engines_attached(const struct egw_engines *s);
uint32_t egw_engines_rooms(const struct egw_engines *s);
/** Blocks kept out of the pool now for given-up clients not yet removed
 * (all clients; or one client, 0 for an unknown id). */
uint32_t egw_engines_held_blocks(const struct egw_engines *s);
uint32_t egw_engines_client_held(const struct egw_engines *s,
				 uint32_t client);

#ifdef __cplusplus
}
#endif

#endif
