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

#include "egw_err.h"
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

/* Return values and failure codes: enum egw_err and egw_strerror()
 * (egw_err.h, the one list every library shares). */

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

/** Header flags, on the wire as they are (doc/protocol.md); each belongs
 *  to one message type and lib/proto refuses it on any other. */
#define EGW_MSGF_DUMMY 0x1u   /**< INIT: this rank wants the aux record only */
#define EGW_MSGF_ACK 0x2u     /**< REGISTER: the answer to one; ABORT E->L:
				* none of the rank's writes is in flight */
#define EGW_MSGF_POLL 0x4u    /**< STATUS L->E: a poll, not a report */

struct egw_msg {
	uint8_t type;          /**< enum egw_msg_type */
	uint8_t state;         /**< STATUS E->L: enum egw_state of this rank */
	uint16_t error;        /**< enum egw_err (ERROR, ABORT, failed STATUS);
				 *   lib/proto maps it to its wire value */
	uint16_t flags;        /**< EGW_MSGF_* */
	uint16_t rank;
	uint16_t nranks;
	/** Room messages: the ranks this message speaks for, a bitmask of
	 *  0..nranks-1 whose lowest bit is `rank` (a group, doc/xfer.md
	 *  "Fan-out"); 0: just `rank` */
	uint16_t ranks;
	uint16_t nruns;
	uint64_t room;
	uint32_t block_tokens; /**< INIT/RESUME: sender checks it equals its own */
	uint32_t offset;       /**< INIT/RESUME: first token of the window; ERROR: echo */
	uint32_t alloc_tokens; /**< INIT/RESUME: blocks x block_tokens */
	/** INIT/RESUME: per kind, the key admitting writes to the window's
	 *  blocks of that kind (0: the region's, from REGISTER) */
	uint32_t rkeys[EGW_KIND_MAX];
	uint32_t total_tokens; /**< STATUS: announced total, 0 = not yet known */
	uint32_t landed_tokens;   /**< STATUS: tokens written and completed */
	uint32_t accepted_tokens; /**< STATUS: end of the last accepted window */
	/** ABORT from a receiver: names its quarantine of the rank (the same
	 *  in every retransmission, 0 never); its ACK echoes it, so an ACK
	 *  answering an earlier ABORT ends nothing later (doc/protocol.md) */
	uint16_t abort_id;
	struct egw_run runs[EGW_XFER_MAX_RUNS]; /**< INIT/RESUME: window blocks */
	/** Not on the wire as such: the datagram's sequence number, set by
	 *  whoever decoded it (lib/node), 0 when unknown. It only grows per
	 *  peer, so it orders a request against a restart of its rank
	 *  (doc/xfer.md, "Admission"). */
	uint64_t seq;
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
	uint32_t rkey;       /**< the window's rkey (INIT/RESUME); 0: the
			      *   region's, from the peer's REGISTER */
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
	EGW_ACT_PEER_FENCE,   /**< receiver: a quarantine of `peer` passed
			       *   quarantine_ns without its ABORT ACK: the
			       *   peer is broken for that memory. The
			       *   application makes sure no write of the
			       *   peer can land any more (verbs: reset its
			       *   QP), then calls egw_xfer_receiver_peer_dead,
			       *   which returns the blocks (doc/xfer.md,
			       *   "Quarantine") */
};

struct egw_act {
	enum egw_act_type type;
	uint32_t peer;
	uint64_t room;
	uint16_t rank;
	uint16_t ranks;		      /**< DELIVER: the group the room was
				       *   received for (0: rank alone) */
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
	uint64_t waited_ns;           /**< DELIVER, DONE (receiver): time the
				       *   room waited for admission, all
				       *   its restarts included */
	uint64_t open_ns;             /**< DELIVER: time from the open to
				       *   the delivery, restarts included */
};

typedef void (*egw_emit_fn)(void *ctx, const struct egw_act *a);

/* ---- default allocation policy ----------------------------------------- */

enum egw_policy_kind { EGW_POLICY_FIXED = 0, EGW_POLICY_ADAPTIVE = 1 };

#define EGW_POLICY_WINDOW 256  /**< totals remembered by the adaptive policy */

/**
 * How many tokens the receiver asks for before it knows the total.
 * fixed: always `fixed_tokens` (the reference design: 8192).
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

/** Both return 0, or -EINVAL (zero block_tokens or tokens, min > max,
 *  percentile outside 1..100). */
int egw_policy_init_fixed(struct egw_policy *p, uint32_t block_tokens,
			  uint32_t tokens);
int egw_policy_init_adaptive(struct egw_policy *p, uint32_t block_tokens,
			     uint32_t start_tokens, uint32_t percentile,
			     uint32_t min_tokens, uint32_t max_tokens);
uint32_t egw_policy_tokens(const struct egw_policy *p);
void egw_policy_observe(struct egw_policy *p, uint32_t total);

/* ---- engine configuration ---------------------------------------------- */

struct egw_xfer_timers {
	uint64_t rto_ns;     /**< first retransmission timeout of a peer,
			      *   until its first round-trip sample */
	uint64_t rto_min_ns; /**< floor of the adaptive timeout (<= rto_ns) */
	uint64_t rto_max_ns; /**< its ceiling, and the backoff's */
	uint64_t bootstrap_ns;    /**< until INIT is accepted (all ranks: sender) */
	uint64_t input_ns;        /**< until the total is known */
	uint64_t round_ns;        /**< no progress while transferring */
	uint64_t alloc_retry_ns;  /**< retry interval when the pool is exhausted */
	uint64_t alloc_ns;        /**< receiver: an admitted room waiting this
				   *   long for memory gives its blocks back
				   *   and restarts (< round_ns) */
	uint64_t admit_ns;        /**< receiver: a room waiting for memory
				   *   (admission queue, resumes, restarts)
				   *   fails this long after its open; sender:
				   *   a restarted rank must INIT again within */
	uint64_t heartbeat_ns;    /**< send a heartbeat this often */
	uint64_t peer_dead_ns;    /**< no word from a peer this long: dead */
	uint64_t linger_ns;       /**< final rooms answer duplicates this long */
	uint64_t quarantine_ns;   /**< receiver: a quarantine not ended by its
				   *   ABORT ACK this long fences the peer
				   *   (EGW_ACT_PEER_FENCE) */
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
	/** receiver: every window is one run (one contiguous range per kind,
	 *  which one memory window per kind can cover) and carries the keys
	 *  given with its allocation (egw_xfer_receiver_alloc_done_keys) */
	bool window_keys;
	struct egw_xfer_timers timers;
	egw_emit_fn emit;
	void *emit_ctx;
};

void egw_xfer_conf_default(struct egw_xfer_conf *c,
			   const struct egw_pool_geom *g);

/** Buckets of egw_xfer_stats.admit_wait_hist. */
#define EGW_XFER_WAIT_BUCKETS 40

struct egw_xfer_stats {
	uint64_t rx_msgs, tx_msgs;
	/** messages refused, by reason: index egw_err_to_wire(reason) */
	uint64_t rejected[EGW_E_COUNT];
	/** rooms failed, by reason: index egw_err_to_wire(reason) */
	uint64_t failed[EGW_E_COUNT];
	uint64_t duplicates;          /**< requests answered without new work */
	uint64_t reordered;           /**< RESUME ahead of a missing one */
	uint64_t retransmits;
	uint64_t polls;	      /**< receiver: of the retransmits, STATUS
			       *   polls (every window accepted, no
			       *   ABORT pending: nothing to resend) */
	uint64_t retries;     /**< receiver: of the retransmits, windows sent
			       *   again after the sender refused them for now
			       *   (UNKNOWN_ROOM or NO_SLOT to an INIT, BUSY):
			       *   answered, not lost */
	uint64_t rtt_samples; /**< receiver: round trips timed (a
			       *   message sent once and its answer) */
	uint64_t rooms_opened, rooms_ok, rooms_failed;
	uint64_t windows;             /**< windows allocated (receiver) / accepted (sender) */
	uint64_t resumes;             /**< windows after the first */
	uint64_t idle_waits;          /**< sender: a rank drained, waiting for RESUME */
	uint64_t alloc_retries;
	uint64_t write_batches, writes, bytes;
	uint64_t rooms_active;
	uint64_t peers_dead;
	/* receiver: admission (doc/xfer.md, "Admission") */
	uint64_t admit_queued;        /**< rooms waiting for a first window now */
	uint64_t admit_queue_max;     /**< most rooms ever waiting at once */
	uint64_t admitted;            /**< first windows granted (restarts too) */
	uint64_t restarts;            /**< rooms that gave their blocks back */
	uint64_t admit_wait_max_ns;   /**< longest wait of a room, restarts included */
	/** admission waits of rooms that ended: bucket i counts waits in
	 *  [2^i, 2^(i+1)) microseconds (bucket 0: below 2 us) */
	uint64_t admit_wait_hist[EGW_XFER_WAIT_BUCKETS];
	/** rooms whose part in the admission sums the tick found stale and
	 *  corrected: 0 unless an update was missed (a bug) */
	uint64_t admit_recounts;
	/* receiver: quarantine (doc/xfer.md, "Quarantine") */
	uint64_t quarantined;         /**< rooms whose blocks were held for an ACK */
	uint64_t quarantine_rooms;    /**< rooms held now */
	uint64_t quarantine_blocks;   /**< blocks held now */
	uint64_t quarantine_acked;    /**< released by ABORT ACK */
	uint64_t quarantine_dead;     /**< released because the peer died (or
				       *   was fenced) */
	uint64_t quarantine_expired;  /**< rooms whose quarantine passed
				       *   quarantine_ns: their peer fenced */
	/* fan-out (doc/xfer.md, "Fan-out"): rooms that succeeded with ranks
	 * served through a group (sender) or delivered to a group (receiver);
	 * rooms_ok - group_rooms are lone ranks' rooms */
	uint64_t group_rooms;
	uint64_t group_ranks;	    /**< ranks served through another's
				     *   windows: copies not sent */
	uint64_t group_bytes_saved; /**< payload bytes of those copies */
	/* sender */
	uint64_t abort_acks;          /**< ABORT ACKs sent */
	uint64_t yields;              /**< ranks restarted on the receiver's word */
};

/** The wait (ns) below which a fraction `q` (0..1] of the counted waits
 *  lie, by the histogram: the upper edge of the bucket reached. */
uint64_t egw_xfer_wait_quantile(const struct egw_xfer_stats *st, double q);

/* Peers are small integers the application maps to addresses (below
 * max_peers); the sender also knows each peer's pool size, which window
 * blocks must lie inside. */

/* ---- receiver (language side) ------------------------------------------ */

struct egw_xfer_receiver;

/** 0, -EINVAL (bad configuration or policy), -ENOMEM. */
int egw_xfer_receiver_create(const struct egw_xfer_conf *c,
			const struct egw_policy *policy,
			struct egw_xfer_receiver **out);
void egw_xfer_receiver_destroy(struct egw_xfer_receiver *r);
/** 0, or -EINVAL for peer >= max_peers. */
int egw_xfer_receiver_peer_add(struct egw_xfer_receiver *r, uint32_t peer,
			       uint64_t now);

/** Open a room for one rank: it joins the admission queue (FIFO), which
 *  allocates its first window and sends INIT as soon as the pool can hold
 *  it and no admitted room waits for memory; until then it reads
 *  Bootstrapping. 0, -EINVAL (NULL engine), or -enum egw_err:
 *  EGW_E_UNKNOWN_PEER, EGW_E_PEER_DEAD, EGW_E_BAD_RANK,
 *  EGW_E_DUPLICATE_ROOM, EGW_E_NO_SLOT (room table full). */
int egw_xfer_receiver_open(struct egw_xfer_receiver *r, uint64_t room,
			   uint16_t rank, uint16_t nranks, uint32_t peer,
			   bool dummy, uint64_t now);
/** The same for a group of ranks (doc/xfer.md, "Fan-out"): one room,
 *  keyed by (room, rank), receives once for every rank of `ranks` (a
 *  bitmask whose lowest bit is `rank`; 0 or the rank's bit alone: a plain
 *  open); its messages carry the set, so the sender serves the group
 *  with one set of writes. EGW_E_BAD_RANK also for a set that is not
 *  one of the room's ranks starting at `rank`, or an aux-only group. */
int egw_xfer_receiver_open_group(struct egw_xfer_receiver *r, uint64_t room,
				 uint16_t rank, uint16_t nranks, uint16_t ranks,
				 uint32_t peer, bool dummy, uint64_t now);
/** Result of an EGW_ACT_ALLOC: n > 0 runs, or n = -errno (the pool's
 *  answer). Returns 0 or -enum egw_err (a stale or unknown request). */
int egw_xfer_receiver_alloc_done(struct egw_xfer_receiver *r, uint64_t room,
			    uint16_t rank, const struct egw_run *runs, int n,
			    uint64_t now);
/** The same with the window's keys, one per kind (0: the region's), for
 *  its INIT/RESUME; rkeys NULL: all 0. With window_keys, n > 1 is refused
 *  like any other answer that does not fit the request. */
int egw_xfer_receiver_alloc_done_keys(struct egw_xfer_receiver *r,
				      uint64_t room, uint16_t rank,
				      const struct egw_run *runs, int n,
				      const uint32_t rkeys[EGW_KIND_MAX],
				      uint64_t now);
/** A decoded, authenticated message from `peer`. Returns 0, -EINVAL (NULL
 *  argument), or -enum egw_err: why the message was refused (counted in
 *  stats.rejected). */
int egw_xfer_receiver_on_msg(struct egw_xfer_receiver *r, uint32_t peer,
			const struct egw_msg *m, uint64_t now);
/** The local app gives up on a room: DONE(ABORTED) now; the sender hears
 *  ABORT and the blocks go back once it answers with ABORT ACK (doc/xfer.md,
 *  "Quarantine"). 0 or -EGW_E_UNKNOWN_ROOM (not open, or ended). */
int egw_xfer_receiver_abort(struct egw_xfer_receiver *r, uint64_t room,
			    uint16_t rank, uint64_t now);
void egw_xfer_receiver_tick(struct egw_xfer_receiver *r, uint64_t now);
/** The earliest time egw_xfer_receiver_tick has something to do without
 *  a message or a call in between: a peer's heartbeat or death deadline;
 *  `now` while rooms are open (their timers want the caller's regular
 *  tick); UINT64_MAX when nothing is due. A caller that sleeps until then
 *  misses no timer, as long as any call into the engine since ends the
 *  sleep or asks again. */
uint64_t egw_xfer_receiver_next_deadline(const struct egw_xfer_receiver *r,
					 uint64_t now);
/** Shutdown: abort every open room, tell the peers, and free every block
 *  at once (quarantined ones too: the payload path goes with it). */
void egw_xfer_receiver_abort_all(struct egw_xfer_receiver *r, uint64_t now);
/** The peer is removed (configuration, cluster): every open room of it
 *  fails with `e` and the peer hears ABORT (the wire carries ABORTED for
 *  a local-only code); rooms waiting for their ABORT ACK stay until it
 *  comes, the peer's death or its fence. */
void egw_xfer_receiver_peer_remove(struct egw_xfer_receiver *r, uint32_t peer,
				   enum egw_err e, uint64_t now);
/** Rooms of `peer` still held (open, or waiting for an ACK). */
uint32_t egw_xfer_receiver_peer_rooms(const struct egw_xfer_receiver *r,
				      uint32_t peer);
/** Forget the peer's slot (no room of it is left). */
void egw_xfer_receiver_peer_del(struct egw_xfer_receiver *r, uint32_t peer);
/** Declare a peer dead now (e.g. the transport lost it). */
void egw_xfer_receiver_peer_dead(struct egw_xfer_receiver *r, uint32_t peer,
			    uint64_t now);
/** enum egw_state of a room (a queued one reads Bootstrapping), or
 *  -EGW_E_UNKNOWN_ROOM (not open, or ended: a failed room waiting for its
 *  ABORT ACK has ended for the app). */
int egw_xfer_receiver_state(const struct egw_xfer_receiver *r, uint64_t room,
		       uint16_t rank);
void egw_xfer_receiver_get_stats(const struct egw_xfer_receiver *r,
			    struct egw_xfer_stats *st);

/** A peer's round-trip estimate (RFC 6298): what the receiver's
 *  retransmission timeout for it comes from. */
struct egw_xfer_rtt {
	uint64_t srtt_ns;   /**< smoothed round-trip time (0: no sample yet) */
	uint64_t rttvar_ns; /**< its variation */
	uint64_t rto_ns;    /**< the peer's first retransmission timeout now */
	uint64_t samples;   /**< round trips timed */
};
/** 0, or -EINVAL: no such peer. */
int egw_xfer_receiver_peer_rtt(const struct egw_xfer_receiver *r, uint32_t peer,
			       struct egw_xfer_rtt *out);

/**
 * A reload's settings, while rooms run: from `c`, the timers,
 * max_blocks_per_round, pipeline_depth and announce_early; `policy`
 * (NULL: kept) replaces the allocation policy unless its settings are
 * the same (an adaptive policy then keeps what it learnt). Everything is
 * checked before anything changes. Rooms in flight keep the deadlines
 * already set (bootstrap, input, admission, linger, a quarantine's end,
 * a retransmission due): no room fails earlier or later than it was
 * promised; what is measured on every tick from an event - peer death
 * from the last word heard, a round without progress, the wait for
 * resume memory, the backoff ceiling - uses the new values from the next
 * tick; a shorter
 * heartbeat interval brings the next heartbeat forward. The geometry,
 * max_peers, window_keys and the emit callback in `c` are not read.
 * 0, or -EINVAL: NULL engine or conf, max_rooms or max_runs_per_room not
 * those of create (they size its tables), a timer or limit create would
 * refuse, a policy of other block_tokens.
 */
int egw_xfer_receiver_set_conf(struct egw_xfer_receiver *r,
			       const struct egw_xfer_conf *c,
			       const struct egw_policy *policy, uint64_t now);
/** The policy, e.g. to read its current default. */
const struct egw_policy *
egw_xfer_receiver_policy(const struct egw_xfer_receiver *r);

/* ---- sender (encode side) ---------------------------------------------- */

struct egw_xfer_sender;

/** 0, -EINVAL (bad configuration), -ENOMEM. */
int egw_xfer_sender_create(const struct egw_xfer_conf *c,
			   struct egw_xfer_sender **out);
void egw_xfer_sender_destroy(struct egw_xfer_sender *s);
/** A reload's settings, as egw_xfer_receiver_set_conf without the
 *  policy: 0 or -EINVAL. */
int egw_xfer_sender_set_conf(struct egw_xfer_sender *s,
			     const struct egw_xfer_conf *c, uint64_t now);
/** 0, or -EINVAL for peer >= max_peers. */
int egw_xfer_sender_peer_add(struct egw_xfer_sender *s, uint32_t peer,
			uint32_t pool_blocks, uint64_t now);

/** The encode side learns of a request that `nranks` ranks will fetch.
 *  0, -EINVAL (NULL engine), or -enum egw_err: EGW_E_BAD_RANK (nranks),
 *  EGW_E_DUPLICATE_ROOM, EGW_E_NO_SLOT. */
int egw_xfer_sender_open(struct egw_xfer_sender *s, uint64_t room,
			 uint16_t nranks, uint64_t now);
/**
 * The encoder's output is in the local pool: `total` tokens in the blocks
 * of `runs` (in token order), aux record in the first block. The room owns
 * these runs from now on and frees them (EGW_ACT_FREE) when it ends.
 * 0 or -enum egw_err: EGW_E_UNKNOWN_ROOM, EGW_E_STATE (input twice),
 * EGW_E_TOO_LARGE, EGW_E_BAD_BLOCKS, EGW_E_BLOCK_TOKENS,
 * EGW_E_ALLOC_MISMATCH (runs do not cover the total).
 */
int egw_xfer_sender_input(struct egw_xfer_sender *s, uint64_t room,
			  uint32_t total, const struct egw_run *runs,
			  uint32_t nruns, uint64_t now);
/** A decoded, authenticated message from `peer`. Returns 0, -EINVAL (NULL
 *  argument), or -enum egw_err: why the message was refused (counted in
 *  stats.rejected; the peer hears an ERROR where one is due). */
int egw_xfer_sender_on_msg(struct egw_xfer_sender *s, uint32_t peer,
		      const struct egw_msg *m, uint64_t now);
/**
 * Check an INIT for a room the sender does not know as the room would
 * check it (peer, offset, rank/nranks, block_tokens, runs, alloc_tokens),
 * without creating anything: a producer that opens rooms on demand calls
 * this first, so a refused INIT leaves no state. 0 when the INIT would be
 * accepted, -EINVAL (NULL argument), or the -enum egw_err it would get.
 */
int egw_xfer_sender_check_init(struct egw_xfer_sender *s, uint32_t peer,
			  const struct egw_msg *m);
/**
 * Refuse a request with ERROR(e) echoing it (type, offset, room, rank),
 * counted in stats.rejected: the answer for an INIT that a producer
 * refused (EGW_E_NO_SLOT, EGW_E_TOO_LARGE, EGW_E_BEYOND_TOTAL, EGW_E_BUSY)
 * or that egw_xfer_sender_check_init() refused. Returns -e, or -EINVAL (NULL
 * argument, e not a code), -EGW_E_UNKNOWN_PEER.
 */
int egw_xfer_sender_refuse(struct egw_xfer_sender *s, uint32_t peer,
		      const struct egw_msg *m, enum egw_err e, uint64_t now);
/** Writes of an EGW_ACT_POST_WRITES completed; ok == false fails the room.
 *  0, or -enum egw_err for a cookie that is stale (EGW_E_UNKNOWN_ROOM),
 *  malformed (EGW_E_BAD_RANK) or already completed (EGW_E_STATE). */
int egw_xfer_sender_writes_done(struct egw_xfer_sender *s, uint64_t cookie,
				bool ok, uint64_t now);
/** 0 or -EGW_E_UNKNOWN_ROOM. */
int egw_xfer_sender_abort(struct egw_xfer_sender *s, uint64_t room,
			  uint64_t now);
void egw_xfer_sender_tick(struct egw_xfer_sender *s, uint64_t now);
/** As egw_xfer_receiver_next_deadline, for the sender: heartbeats, peer
 *  deaths and the expiry of finished rooms' records (linger). */
uint64_t egw_xfer_sender_next_deadline(const struct egw_xfer_sender *s,
				       uint64_t now);
/** Shutdown: fail every open room as aborted and tell its ranks. */
void egw_xfer_sender_abort_all(struct egw_xfer_sender *s, uint64_t now);
/** The peer is removed: every open room with a rank of it fails with `e`
 *  and its ranks are told. */
void egw_xfer_sender_peer_remove(struct egw_xfer_sender *s, uint32_t peer,
				 enum egw_err e, uint64_t now);
/** Rooms with a rank of `peer` still held (open, or writes in flight). */
uint32_t egw_xfer_sender_peer_rooms(const struct egw_xfer_sender *s,
				    uint32_t peer);
/** Forget the peer's slot (no room of it is left). */
void egw_xfer_sender_peer_del(struct egw_xfer_sender *s, uint32_t peer);
void egw_xfer_sender_peer_dead(struct egw_xfer_sender *s, uint32_t peer,
			       uint64_t now);
/** enum egw_state of a room (a finished one while it lingers), or
 *  -EGW_E_UNKNOWN_ROOM. */
int egw_xfer_sender_state(const struct egw_xfer_sender *s, uint64_t room);
void egw_xfer_sender_get_stats(const struct egw_xfer_sender *s,
			  struct egw_xfer_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* EGW_XFER_H */
