/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_XFER_H
#define EGW_XFER_H

/**
 * @file
 * Resume-transfer state machines, sans-I/O.
 *
 * Two engines: the sender (encode side; one room serves `nranks` language
 * ranks) and the receiver (language side; one room per (room id, rank)).
 * The caller feeds events - a decoded message, payload writes completed, an
 * allocation result, the clock - and the engine answers with actions through
 * the `emit` callback: send this message, post these writes, allocate, free,
 * shrink, deliver, room done, peer dead. No sockets, mbufs, verbs or threads
 * here; time is a nanosecond value passed in with every event.
 *
 * Contract of `emit`: pointers inside an action (msg, writes, runs) are valid
 * only during the callback; the callback must not call back into the engine
 * (queue follow-up events, such as an allocation result, and feed them after
 * the current call returns).
 *
 * Protocol summary (doc/xfer.md has the whole story):
 *  - The receiver allocates a first window (the policy's default tokens) and
 *    sends INIT. The sender answers with STATUS, which carries the announced
 *    total as soon as the encoder's data is there, before any payload lands,
 *    so the receiver allocates the next windows and sends RESUME while round
 *    one is still in flight (pipelined resume).
 *  - A window is identified by (room, rank, offset): offset is the token at
 *    which its blocks start, i.e. the tokens allocated before it. The sender
 *    moves min(total - offset, window tokens) tokens into it, the aux record
 *    only into the first window's first block.
 *  - STATUS fields are cumulative and only grow (landed tokens, accepted
 *    tokens, state), so duplicates and reordering are harmless. Requests
 *    (INIT, RESUME, STATUS poll) are retransmitted with backoff by the
 *    receiver until answered; the sender answers duplicates with a fresh
 *    STATUS and never redoes work.
 *  - The receiver keeps its blocks (zero copy) and delivers the ordered run
 *    list covering exactly `total` tokens.
 */

#include <stdbool.h>
#include <stdint.h>

#include "egw_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_XFER_MAX_RUNS 32   /**< runs in one INIT/RESUME window */
#define EGW_XFER_MAX_RANKS 8   /**< tensor-parallel ranks per room */
#define EGW_XFER_PIPE 4        /**< windows accepted but not landed, per rank */
#define EGW_XFER_MAX_TOKENS (1u << 30) /**< largest total a room may announce */

/** Room states; they only move forward, Failed is final. */
enum egw_state {
	EGW_ST_BOOTSTRAPPING = 0,
	EGW_ST_WAITING_FOR_INPUT = 1,
	EGW_ST_TRANSFERRING = 2,
	EGW_ST_SUCCESS = 3,
	EGW_ST_FAILED = 4,
};

/** Protocol and failure codes: carried in ERROR/ABORT/STATUS and in stats. */
enum egw_err {
	EGW_E_OK = 0,
	EGW_E_UNKNOWN_ROOM,     /**< no such room (yet, or any more) */
	EGW_E_BAD_RANK,         /**< rank >= nranks, nranks differs, foreign peer */
	EGW_E_BLOCK_TOKENS,     /**< block_tokens differs between the sides */
	EGW_E_ALLOC_MISMATCH,   /**< allocated tokens != blocks x block_tokens */
	EGW_E_ZERO_BLOCKS,      /**< a window without blocks */
	EGW_E_BAD_BLOCKS,       /**< blocks out of the peer's pool, or overlapping */
	EGW_E_BEYOND_TOTAL,     /**< window offset at or past the total */
	EGW_E_STATE,            /**< message not valid in the room's state */
	EGW_E_TOTAL_CHANGED,    /**< a second, different total announced */
	EGW_E_BAD_STATUS,       /**< landed > allocated, landed > total, ... */
	EGW_E_BUSY,             /**< too many windows outstanding; retry later */
	EGW_E_TOO_LARGE,        /**< total beyond EGW_XFER_MAX_TOKENS or run slots */
	EGW_E_NO_SLOT,          /**< room table full */
	EGW_E_DUPLICATE_ROOM,   /**< open of a room that exists */
	EGW_E_TIMEOUT_BOOTSTRAP,
	EGW_E_TIMEOUT_INPUT,
	EGW_E_TIMEOUT_ROUND,
	EGW_E_POOL_EXHAUSTED,   /**< allocation kept failing until its deadline */
	EGW_E_PEER_DEAD,
	EGW_E_ABORTED,          /**< the peer or the local app aborted the room */
	EGW_E_TRANSPORT,        /**< payload writes failed */
	EGW_E_UNKNOWN_PEER,
	EGW_E_MAX
};

const char *egw_strerror(enum egw_err e);
const char *egw_state_name(enum egw_state s);

/* ---- messages (decoded form; lib/proto puts them on the wire) --------- */

enum egw_msg_type {
	EGW_MSG_INIT = 1,     /**< L->E: first window (offset 0) */
	EGW_MSG_RESUME = 2,   /**< L->E: a further window at `offset` */
	EGW_MSG_STATUS = 3,   /**< E->L: report; L->E: poll (fields ignored) */
	EGW_MSG_HEARTBEAT = 4,
	EGW_MSG_ABORT = 5,    /**< either way; `error` says why */
	EGW_MSG_ERROR = 6,    /**< E->L: a request was refused, `error` says why */
};

#define EGW_MSGF_DUMMY 0x1u   /**< INIT: this rank wants the aux record only */
#define EGW_MSGF_POLL 0x4u    /**< STATUS L->E: a poll, not a report */

struct egw_msg {
	uint8_t type;          /**< enum egw_msg_type */
	uint8_t state;         /**< STATUS E->L: enum egw_state of this rank */
	uint16_t error;        /**< enum egw_err (ERROR, ABORT, failed STATUS) */
	uint16_t flags;        /**< EGW_MSGF_* */
	uint16_t rank;
	uint16_t nranks;
	uint16_t nruns;
	uint64_t room;
	uint32_t block_tokens; /**< INIT/RESUME: sender checks it equals its own */
	uint32_t offset;       /**< INIT/RESUME: first token of the window; ERROR: echo */
	uint32_t alloc_tokens; /**< INIT/RESUME: blocks x block_tokens */
	uint32_t total_tokens; /**< STATUS: announced total, 0 = not yet known */
	uint32_t landed_tokens;   /**< STATUS: tokens written and completed */
	uint32_t accepted_tokens; /**< STATUS: end of the last accepted window */
	struct egw_run runs[EGW_XFER_MAX_RUNS]; /**< INIT/RESUME: window blocks */
};

/* ---- actions ----------------------------------------------------------- */

/** One payload write: `bytes` from (kind, src block, token) to the peer's
 *  (kind, dst block, token). Coalesced: one write per contiguous run per
 *  kind. The aux write has tokens == 0 and bytes == aux_bytes. */
struct egw_write {
	uint32_t kind;       /**< enum egw_kind */
	uint32_t src_block;
	uint32_t dst_block;
	uint32_t src_token;  /**< token inside src_block (0: windows are aligned) */
	uint32_t dst_token;
	uint32_t tokens;
	uint64_t bytes;
};

enum egw_act_type {
	EGW_ACT_SEND = 1,     /**< msg to peer */
	EGW_ACT_POST_WRITES,  /**< writes to peer; report with *_writes_done(cookie) */
	EGW_ACT_ALLOC,        /**< receiver: allocate `tokens` (<= max_runs runs) */
	EGW_ACT_FREE,         /**< return runs[] to the pool */
	EGW_ACT_SHRINK,       /**< keep runs[0].start..+keep, free the rest */
	EGW_ACT_DELIVER,      /**< receiver: room complete, runs[] cover total */
	EGW_ACT_DONE,         /**< room final: error == EGW_E_OK is success */
	EGW_ACT_PEER_DEAD,    /**< no word from peer within the heartbeat deadline */
};

struct egw_act {
	enum egw_act_type type;
	uint32_t peer;
	uint64_t room;
	uint16_t rank;
	enum egw_err error;           /**< DONE */
	const struct egw_msg *msg;    /**< SEND */
	const struct egw_write *writes; /**< POST_WRITES */
	uint32_t nwrites;
	uint64_t cookie;              /**< POST_WRITES: hand back when done */
	uint32_t tokens;              /**< ALLOC: tokens; DELIVER: total */
	uint32_t max_runs;            /**< ALLOC: at most this many runs */
	const struct egw_run *runs;   /**< FREE, SHRINK, DELIVER */
	uint32_t nruns;
	uint32_t keep;                /**< SHRINK: blocks kept of runs[0] */
	uint32_t aux_block;           /**< DELIVER: block holding the aux record */
	bool dummy;                   /**< DELIVER: aux-only rank */
};

typedef void (*egw_emit_fn)(void *ctx, const struct egw_act *a);

/* ---- default allocation policy ----------------------------------------- */

enum egw_policy_kind { EGW_POLICY_FIXED = 0, EGW_POLICY_ADAPTIVE = 1 };

#define EGW_POLICY_WINDOW 256  /**< totals remembered by the adaptive policy */

/**
 * How many tokens the receiver asks for before it knows the total.
 * fixed: always `fixed_tokens` (the seeds: 8192).
 * adaptive: the `percentile` of the last EGW_POLICY_WINDOW totals, clamped
 * to [min_tokens, max_tokens]; `fixed_tokens` until `warmup` totals are seen.
 * Both round up to whole blocks.
 */
struct egw_policy {
	enum egw_policy_kind kind;
	uint32_t block_tokens;
	uint32_t fixed_tokens;
	uint32_t min_tokens, max_tokens;
	uint32_t percentile;    /**< 1..100 */
	uint32_t warmup;
	/* state */
	uint32_t seen[EGW_POLICY_WINDOW];
	uint32_t nseen, head, current;
};

int egw_policy_init_fixed(struct egw_policy *p, uint32_t block_tokens,
			  uint32_t tokens);
int egw_policy_init_adaptive(struct egw_policy *p, uint32_t block_tokens,
			     uint32_t start_tokens, uint32_t percentile,
			     uint32_t min_tokens, uint32_t max_tokens);
uint32_t egw_policy_tokens(const struct egw_policy *p);
void egw_policy_observe(struct egw_policy *p, uint32_t total);

/* ---- engine configuration ---------------------------------------------- */

struct egw_xfer_timers {
	uint64_t rto_ns;          /**< first retransmission timeout */
	uint64_t rto_max_ns;      /**< backoff ceiling */
	uint64_t bootstrap_ns;    /**< until INIT is accepted (all ranks: sender) */
	uint64_t input_ns;        /**< until the total is known */
	uint64_t round_ns;        /**< no progress while transferring */
	uint64_t alloc_retry_ns;  /**< retry interval when the pool is exhausted */
	uint64_t alloc_ns;        /**< give up allocating after this long */
	uint64_t heartbeat_ns;    /**< send a heartbeat this often */
	uint64_t peer_dead_ns;    /**< no word from a peer this long: dead */
	uint64_t linger_ns;       /**< final rooms answer duplicates this long */
};

void egw_xfer_timers_default(struct egw_xfer_timers *t);

struct egw_xfer_conf {
	struct egw_pool_geom geom;  /**< local pool; the peer's must agree */
	uint32_t max_rooms;
	uint32_t max_peers;
	uint32_t max_runs_per_room; /**< receiver: runs a room may hold */
	uint32_t max_blocks_per_round; /**< receiver: cap per window (0: none) */
	uint32_t pipeline_depth;    /**< receiver: windows ahead (1..PIPE-1) */
	bool announce_early;        /**< sender: total in the INIT answer */
	struct egw_xfer_timers t;
	egw_emit_fn emit;
	void *emit_ctx;
};

void egw_xfer_conf_default(struct egw_xfer_conf *c,
			   const struct egw_pool_geom *g);

struct egw_xfer_stats {
	uint64_t rx_msgs, tx_msgs;
	uint64_t rejected[EGW_E_MAX]; /**< messages refused, by reason */
	uint64_t failed[EGW_E_MAX];   /**< rooms failed, by reason */
	uint64_t duplicates;          /**< requests answered without new work */
	uint64_t reordered;           /**< RESUME ahead of a missing one */
	uint64_t retransmits;
	uint64_t rooms_opened, rooms_ok, rooms_failed;
	uint64_t windows;             /**< windows allocated (rx) / accepted (tx) */
	uint64_t resumes;             /**< windows after the first */
	uint64_t idle_waits;          /**< tx: a rank drained, waiting for RESUME */
	uint64_t alloc_retries;
	uint64_t write_batches, writes, bytes;
	uint64_t rooms_active;
	uint64_t peers_dead;
};

/* Peers are small integers the application maps to addresses (below
 * max_peers); the sender also knows each peer's pool size, which window
 * blocks must lie inside. */

/* ---- receiver (language side) ------------------------------------------ */

struct egw_receiver;

int egw_receiver_create(const struct egw_xfer_conf *c,
			const struct egw_policy *policy,
			struct egw_receiver **out);
void egw_receiver_destroy(struct egw_receiver *r);
int egw_receiver_peer_add(struct egw_receiver *r, uint32_t peer, uint64_t now);

/** Open a room for one rank: allocates the first window and sends INIT. */
int egw_receiver_open(struct egw_receiver *r, uint64_t room, uint16_t rank,
		      uint16_t nranks, uint32_t peer, bool dummy, uint64_t now);
/** Result of an EGW_ACT_ALLOC: n > 0 runs, or n = -errno. */
int egw_receiver_alloc_done(struct egw_receiver *r, uint64_t room,
			    uint16_t rank, const struct egw_run *runs, int n,
			    uint64_t now);
/** A decoded, authenticated message from `peer`. Returns 0 or -egw_err. */
int egw_receiver_on_msg(struct egw_receiver *r, uint32_t peer,
			const struct egw_msg *m, uint64_t now);
/** The local app gives up on a room (frees, tells the sender). */
int egw_receiver_abort(struct egw_receiver *r, uint64_t room, uint16_t rank,
		       uint64_t now);
void egw_receiver_tick(struct egw_receiver *r, uint64_t now);
/** Shutdown: abort every open room (frees, tells the peers). */
void egw_receiver_abort_all(struct egw_receiver *r, uint64_t now);
/** Declare a peer dead now (e.g. the transport lost it). */
void egw_receiver_peer_dead(struct egw_receiver *r, uint32_t peer,
			    uint64_t now);
/** State of a room, or -EGW_E_UNKNOWN_ROOM. */
int egw_receiver_state(const struct egw_receiver *r, uint64_t room,
		       uint16_t rank);
void egw_receiver_get_stats(const struct egw_receiver *r,
			    struct egw_xfer_stats *st);
/** The policy, e.g. to read its current default. */
const struct egw_policy *egw_receiver_policy(const struct egw_receiver *r);

/* ---- sender (encode side) ---------------------------------------------- */

struct egw_sender;

int egw_sender_create(const struct egw_xfer_conf *c, struct egw_sender **out);
void egw_sender_destroy(struct egw_sender *s);
int egw_sender_peer_add(struct egw_sender *s, uint32_t peer,
			uint32_t pool_blocks, uint64_t now);

/** The encode side learns of a request that `nranks` ranks will fetch. */
int egw_sender_open(struct egw_sender *s, uint64_t room, uint16_t nranks,
		    uint64_t now);
/**
 * The encoder's output is in the local pool: `total` tokens in the blocks
 * of `runs` (in token order), aux record in the first block. The room owns
 * these runs from now on and frees them (EGW_ACT_FREE) when it ends.
 */
int egw_sender_input(struct egw_sender *s, uint64_t room, uint32_t total,
		     const struct egw_run *runs, uint32_t nruns, uint64_t now);
int egw_sender_on_msg(struct egw_sender *s, uint32_t peer,
		      const struct egw_msg *m, uint64_t now);
/** Writes of an EGW_ACT_POST_WRITES completed; ok == false fails the room. */
int egw_sender_writes_done(struct egw_sender *s, uint64_t cookie, bool ok,
			   uint64_t now);
int egw_sender_abort(struct egw_sender *s, uint64_t room, uint64_t now);
void egw_sender_tick(struct egw_sender *s, uint64_t now);
/** Shutdown: fail every open room as aborted and tell its ranks. */
void egw_sender_abort_all(struct egw_sender *s, uint64_t now);
void egw_sender_peer_dead(struct egw_sender *s, uint32_t peer, uint64_t now);
int egw_sender_state(const struct egw_sender *s, uint64_t room);
void egw_sender_get_stats(const struct egw_sender *s,
			  struct egw_xfer_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* EGW_XFER_H */
