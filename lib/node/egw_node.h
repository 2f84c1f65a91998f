/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_NODE_H
#define EGW_NODE_H

/**
 * @file
 * A gateway node on one port, sans-I/O: datagrams in (source address and
 * bytes), datagrams and payload writes out (through callbacks). It joins
 * what the other libraries do - authenticate and decode (proto), map the
 * source to a configured peer, refuse replays, adopt each peer's
 * incarnation through the REGISTER handshake (doc/protocol.md, "Sessions
 * and incarnations"), feed the
 * sender/receiver engines (xfer), execute their pool actions on the local
 * pool - so the DPDK application only moves packets and the payload
 * driver only moves bytes. One node per worker; nothing here locks.
 *
 * The node owns its deferred work: allocation results, posts the driver
 * refused (the room fails at once), and our own REGISTER until the peer
 * is registered and has acknowledged our current endpoint. The
 * application keeps no queue of its own.
 *
 * Return values follow egw_xfer.h: 0 on success, -errno for bad
 * arguments or a missing role, -enum egw_err where the engines refuse;
 * each function says which. egw_strerror() names any of them.
 */

#include <stdint.h>

#include "egw_pool.h"
#include "egw_proto.h"
#include "egw_xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Why the node dropped a datagram before the state machines. */
enum egw_node_drop {
	/** source address is no configured peer */
	EGW_NODE_DROP_UNKNOWN_PEER = 0,
	/** refused by the decoder (see proto stats) */
	EGW_NODE_DROP_PROTO,
	/** a sequence number seen before or too old */
	EGW_NODE_DROP_REPLAY,
	/** a message while the peer is not registered */
	EGW_NODE_DROP_NOT_REGISTERED,
	/** REGISTER with a pool we cannot serve */
	EGW_NODE_DROP_GEOMETRY,
	/** a message for a role we do not have */
	EGW_NODE_DROP_ROLE,
	/** REGISTER whose memory the driver cannot reach */
	EGW_NODE_DROP_PAYLOAD,
	/** not the peer's adopted session (or a retired one) */
	EGW_NODE_DROP_SESSION,
	/** REGISTER with a name not configured for its address */
	EGW_NODE_DROP_NAME,
	EGW_NODE_DROP_MAX
};

const char *egw_node_drop_name(enum egw_node_drop d);

struct egw_node_stats {
	uint64_t rx_datagrams, tx_datagrams;
	uint64_t drops[EGW_NODE_DROP_MAX];
	uint64_t registers_rx, registers_tx;
	uint64_t reregisters;   /**< endpoint changes announced to a peer */
	uint64_t adoptions;     /**< peer incarnations adopted */
	uint64_t peer_restarts; /**< ... of which replaced an adopted one */
	uint64_t peers_fenced;  /**< incarnations fenced: a quarantine of
				 *   theirs passed quarantine_ns unanswered */
	uint64_t register_refusals; /**< ERRORs we sent refusing a REGISTER */
	uint64_t register_refused;  /**< ERRORs a peer sent refusing ours */
	uint64_t alloc_overflow;  /**< allocation requests not queued (0) */
	uint64_t posts_refused;   /**< batches the driver refused: failed */
	uint64_t refused_overflow; /**< refused batches not queued (0) */
	uint64_t window_bind_failed; /**< windows whose keys could not be made
				      *   (refused, failed or overdue binds) */
	uint64_t window_overdue; /**< binds or invalidations past their
				  *   deadline (2 s) */
	uint64_t window_stale;   /**< window completions of no pending post */
	struct egw_proto_stats proto;
};

/** What a note is about (egw_node_ops.note). */
enum egw_node_note_kind {
	/** a peer is registered (info) */
	EGW_NODE_NOTE_REGISTERED,
	/** a peer's new incarnation replaced the adopted one: its rooms
	 *  failed (warning) */
	EGW_NODE_NOTE_RESTARTED,
	/** we refused a peer's REGISTER (error) */
	EGW_NODE_NOTE_REFUSED,
	/** a peer refused our REGISTER (error) */
	EGW_NODE_NOTE_PEER_REFUSED,
	/** a peer's datagrams fail authentication */
	EGW_NODE_NOTE_AUTH,
	/** a peer left a quarantine unanswered past quarantine_ns: fenced,
	 *  its session retired (warning) */
	EGW_NODE_NOTE_FENCED,
	/** a window's bind or invalidation failed or passed its deadline
	 *  (error) */
	EGW_NODE_NOTE_WINDOW,
};

/** One line worth logging about a peer. Refusals and authentication
 *  failures are noted once per peer and reason until the peer registers,
 *  not once per datagram; the counters count every one. */
struct egw_node_note {
	enum egw_node_note_kind kind;
	enum egw_err code;       /**< refusals: the code on the wire */
	char text[384];          /**< the sentence: who, what, what differs */
};

/** What the node asks of the application and the payload driver. Every
 *  callback gets the `now` of the node call it comes from - the caller's
 *  clock, as the engines use it - so the application needs no clock of
 *  its own to date what it is told. */
struct egw_node_ops {
	/** Send a datagram to ip:port (host byte order). */
	void (*tx)(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf,
		   size_t len, uint64_t now);
	/** Apply a peer's REGISTER content: reach its memory (connect the
	 *  payload path). Called for an incarnation being adopted, when the
	 *  adopted one's content changed or its last apply failed, and when
	 *  an ACK echoes our endpoint after egw_node_reregister (r->ack_qpn
	 *  and r->ack_psn then name it: the peer's side is rebuilt). Return
	 *  0, or -errno when the memory cannot be reached: the peer hears
	 *  ERROR(UNREACHABLE) and stays unregistered; its next REGISTER tries
	 *  again. r->session is the registering incarnation. On failure
	 *  the reason goes into `why` (a sentence, `why_len` bytes at
	 *  most): the node notes it once, so a peer that stays unreachable
	 *  is not logged with every REGISTER. */
	int (*peer_up)(void *ctx, uint32_t peer, const struct egw_register *r,
		       char *why, size_t why_len, uint64_t now);
	/** Let go of the peer's memory. `silent` false: its adopted
	 *  incarnation is gone (it restarted): called before anything is
	 *  written for the new incarnation (shm: unmap; verbs: reset the
	 *  queue pair). `silent` true: it was declared dead (no word past
	 *  peer_dead_ms) and its rooms have failed; it may be the same
	 *  incarnation, unreachable for a while, whose next REGISTER is then
	 *  applied anew (peer_up) - a driver lets go only of what must not
	 *  be held for a peer that may be gone (shm: the mapping, which
	 *  keeps a killed peer's pool file's space in use). Optional. */
	void (*peer_down)(void *ctx, uint32_t peer, bool silent, uint64_t now);
	/** A line worth logging (struct egw_node_note); optional. */
	void (*note)(void *ctx, uint32_t peer, const struct egw_node_note *nt,
		     uint64_t now);
	/** Post payload writes to a peer; report an accepted batch with
	 *  egw_node_writes_done. Return 0 when the driver took the batch, or
	 *  non-zero (-errno) when it refused it: the node then completes the
	 *  batch as failed itself, right after the engine call that posted
	 *  it returns, so its room fails at once (EGW_E_TRANSPORT). Do not
	 *  call egw_node_writes_done for a refused batch. */
	int (*post)(void *ctx, uint32_t peer, const struct egw_write *w,
		    uint32_t n, uint64_t cookie, uint64_t now);
	/** Language side: a room's data is complete in the local pool; the
	 *  runs are the app's now (free them with egw_node_release). With
	 *  per-window keys it comes once its windows' invalidations
	 *  completed (from egw_node_window_done), its DONE right after. */
	void (*deliver)(void *ctx, const struct egw_act *a, uint64_t now);
	/** A room ended on this node (error EGW_E_OK: success). is_sender
	 *  tells which engine. */
	void (*done)(void *ctx, uint64_t room, uint16_t rank, enum egw_err e,
		     bool is_sender, uint64_t now);
	/** Our payload endpoint towards one peer, for its REGISTER (per-peer
	 *  QPs); optional - without it the create-time gid/qpn serve all. */
	void (*endpoint)(void *ctx, uint32_t peer, uint32_t *qpn, uint32_t *psn,
			 uint16_t *mtu, uint64_t now);
	/** Encode side: an INIT names a room the sender does not know, and
	 *  the sender would accept it (egw_xfer_sender_check_init; a refused
	 *  INIT never gets here, so it leaves no state). The application may
	 *  open the room now (egw_node_sender_open, _input) and returns 0 then;
	 *  -EGW_E_UNKNOWN_ROOM when the room is none of its own (the INIT is
	 *  answered as unknown and retried); or the refusal the INIT is
	 *  answered with: -EGW_E_NO_SLOT (room table full), -EGW_E_TOO_LARGE
	 *  (the room can never fit), -EGW_E_BEYOND_TOTAL (a room of 0
	 *  tokens), -EGW_E_BUSY (cannot take it now). Optional. */
	int (*unknown_room)(void *ctx, uint64_t room, uint16_t nranks,
			    uint64_t now);
	/** Language side, per-window keys (optional; without it a window
	 *  admits writes under the regions' keys from REGISTER): post the
	 *  opening of a window over `run` - one run - to `peer` alone, each
	 *  kind's key in rkeys (0: a kind the window needs no key for). Posted
	 *  work: return at once, 0 when posted - its completion comes back
	 *  through egw_node_window_done(`cookie`), and only then is the
	 *  window offered to the peer - or -errno when nothing was posted (the
	 *  window is not offered, its blocks go back and the receiver asks
	 *  again). With it, every window is a single run. */
	int (*window_bind)(void *ctx, uint32_t peer, const struct egw_run *run,
			   uint32_t rkeys[EGW_KIND_MAX], uint64_t cookie,
			   uint64_t now);
	/** Post the closing of the window over `run` (run->start names it;
	 *  opened, or its bind overdue): its completion comes back through
	 *  egw_node_window_done(`cookie`) once no write through its keys can
	 *  land; until then its blocks are nobody else's and its room's
	 *  delivery waits. Called when its room ends - delivered, failed,
	 *  aborted. Required with window_bind. */
	void (*window_unbind)(void *ctx, const struct egw_run *run,
			      uint64_t cookie, uint64_t now);
	void *ctx;
};

/** Peers given at create (a configuration file's list) */
#define EGW_NODE_MAX_STATIC 32
/** Peer slots a node can have at most (egw_node_params.max_peers) */
#define EGW_NODE_MAX_PEERS 4096
#define EGW_NODE_NAME_LEN 32

/** A peer of the node's port. */
struct egw_node_peer {
	char name[EGW_NODE_NAME_LEN]; /**< the name its REGISTER must carry */
	uint32_t addr;          /**< IPv4, host byte order */
	uint16_t udp_port;
};

/** What a node is created with (the application fills it from its
 *  configuration; egw_node_create copies it). */
struct egw_node_params {
	char name[EGW_NODE_NAME_LEN]; /**< ours, in REGISTER */
	uint16_t roles;         /**< EGW_ROLE_* */
	struct egw_proto_key key; /**< authenticates every datagram */
	/** the engines' limits and timers (egw_xfer_conf_default, then
	 *  the application's); geom, max_peers, window_keys and emit are
	 *  the node's to fill */
	struct egw_xfer_conf xfer;
	struct egw_policy policy; /**< the receiver's allocation policy */
	struct egw_node_peer peers[EGW_NODE_MAX_STATIC];
	uint32_t npeers;
	/** peer slots: the static peers and those added live
	 *  (egw_node_peer_add); 0: npeers. At most EGW_NODE_MAX_PEERS. */
	uint32_t max_peers;
};

struct egw_node;

/**
 * Create a node with `params`, serving rooms from `pool`
 * (local memory: the language side's destination blocks and the encode
 * side's source blocks) whose regions the payload driver exposes as
 * `regions` (sent in REGISTER). `session` is this incarnation's id, non-zero
 * and drawn anew at every start (egw_proto_session_new). Returns 0 or
 * -errno (-EINVAL: more than EGW_NODE_MAX_PEERS peers, no role).
 */
int egw_node_create(const struct egw_node_params *params,
		    struct egw_pool *pool,
		    const struct egw_region regions[EGW_KIND_MAX],
		    const uint8_t gid[16], uint32_t qpn,
		    const struct egw_node_ops *ops, uint64_t session,
		    uint64_t now, struct egw_node **out);
void egw_node_destroy(struct egw_node *n);

/** A UDP payload arrived from ip:port. Whatever is wrong with it is
 *  counted in the stats (drops, proto), never returned. */
void egw_node_rx(struct egw_node *n, uint32_t ip, uint16_t port,
		 const uint8_t *buf, size_t len, uint64_t now);
/** Timers: retransmissions, deadlines, heartbeats, REGISTER every 200 ms
 *  to peers that are not registered or have not acknowledged our current
 *  endpoint. */
void egw_node_tick(struct egw_node *n, uint64_t now);
/** The earliest time egw_node_tick has something to do if nothing else
 *  happens first (no datagram, no completion, no call): our next REGISTER
 *  to a peer not registered, a heartbeat, a peer's death deadline, a
 *  parked window's deadline, a finished room's record expiring. `now`
 *  (or earlier) when the tick is wanted at the caller's regular pace:
 *  rooms in flight (their retransmission and round timers), or work the
 *  last call left for the tick. UINT64_MAX when nothing is due. Only
 *  valid until the next call into the node: a caller that sleeps until
 *  then asks again after anything it feeds the node. */
uint64_t egw_node_next_deadline(const struct egw_node *n, uint64_t now);
/** The payload driver finished a batch it accepted (ok: all its writes
 *  completed). Stale or duplicate cookies are counted by the sender. */
void egw_node_writes_done(struct egw_node *n, uint64_t cookie, bool ok,
			  uint64_t now);

/** The payload driver finished a window's bind or invalidation posted
 *  through ops.window_bind/window_unbind (`cookie` as given there; ok:
 *  it took effect). A completion of no pending post is counted
 *  (window_stale) and ignored. */
void egw_node_window_done(struct egw_node *n, uint64_t cookie, bool ok,
			  uint64_t now);
/** Windows whose bind or invalidation is posted and not complete (a
 *  shutdown polls the driver until none is left). */
uint32_t egw_node_windows_parked(const struct egw_node *n);

/** Peer index (slot) of a live peer's name, or -1. */
int egw_node_peer_index(const struct egw_node *n, const char *name);

/** A slot's state. */
enum egw_node_peer_state {
	EGW_NODE_PEER_FREE = 0, /**< no peer */
	EGW_NODE_PEER_ACTIVE,	/**< a peer: rooms may name it */
	EGW_NODE_PEER_LEAVING,	/**< removed: its rooms are ending; the
				 *   slot is freed once they are done */
};

/** What the node tells of one slot. */
struct egw_node_peer_info {
	struct egw_node_peer cfg;
	uint32_t id; /**< assigned at add, never reused by this
		      *   node (static peers: 1..npeers) */
	enum egw_node_peer_state state;
	bool ready;	  /**< egw_node_peer_ready */
	uint64_t session; /**< its adopted incarnation (0: none) */
};

/** Number of peer slots (max_peers). */
uint32_t egw_node_peer_slots(const struct egw_node *n);
/** 0 and *out filled, or -ENOENT for a free slot, -EINVAL past the
 *  slots. */
int egw_node_peer_get(const struct egw_node *n, uint32_t slot,
		      struct egw_node_peer_info *out);
/** The slot of the live peer with id `id`, or -1. */
int egw_node_peer_slot(const struct egw_node *n, uint32_t id);
/** Moves with every add, remove and freed slot: a caller that keeps a
 *  copy of the table knows when to read it again. */
uint64_t egw_node_peers_gen(const struct egw_node *n);

/**
 * Add a peer while running. It is registered as a configured one is
 * (REGISTER until it answers). Returns its slot (>= 0), -EEXIST when a
 * live peer has its name or address and port, -ENOSPC when every slot
 * is taken (a leaving peer's slot is free only once its rooms ended),
 * -EINVAL for an empty name, address 0 or port 0.
 */
int egw_node_peer_add(struct egw_node *n, const struct egw_node_peer *p,
		      uint64_t now);
/**
 * Remove a live peer: its rooms end now as the local application's abort
 * with EGW_E_PEER_REMOVED (the peer hears ABORT, blocks are freed once no
 * write is in flight), its datagrams are dropped as from an unknown peer,
 * and once none of its rooms is left the driver lets go of it
 * (ops.peer_down, silent false) and the slot is free. 0, or -ENOENT when
 * the slot holds no active peer.
 */
int egw_node_peer_remove(struct egw_node *n, uint32_t slot, uint64_t now);
/** Whether a peer is registered: its incarnation adopted, ours confirmed
 *  by it, its memory reached. Room messages flow only then. */
bool egw_node_peer_ready(const struct egw_node *n, uint32_t peer);
/** The peer's adopted session (0: none yet). */
uint64_t egw_node_peer_session(const struct egw_node *n, uint32_t peer);

/**
 * Our payload endpoint towards `peer` changed (the driver rebuilt its side
 * of the link): send a REGISTER with the new one now, and again every
 * 200 ms until an ACK from the peer echoes it (ack_qpn/ack_psn); that ACK
 * then reaches the driver through peer_up. 0, or -EINVAL for an unknown
 * peer.
 */
int egw_node_reregister(struct egw_node *n, uint32_t peer, uint64_t now);

/* Language side */
/** Open a room for one rank towards `peer` (egw_xfer_receiver_open: it waits
 *  in the admission queue, as Bootstrapping, until the pool can hold its
 *  first window): 0,
 *  -ENOTSUP without the language role, -EINVAL for bad arguments, or
 *  -enum egw_err (EGW_E_UNKNOWN_PEER, EGW_E_PEER_DEAD, EGW_E_BAD_RANK,
 *  EGW_E_DUPLICATE_ROOM, EGW_E_NO_SLOT). */
int egw_node_receiver_open(struct egw_node *n, uint64_t room, uint16_t rank,
			   uint16_t nranks, uint32_t peer, bool dummy,
			   uint64_t now);
/** The same for a group of ranks sharing one receive
 *  (egw_xfer_receiver_open_group): `ranks` the set, `rank` its lowest. */
int egw_node_receiver_open_group(struct egw_node *n, uint64_t room,
				 uint16_t rank, uint16_t nranks, uint16_t ranks,
				 uint32_t peer, uint64_t now);
/** Give delivered runs back to the pool: 0, or -EINVAL if a run was not
 *  the room's (the others are freed). */
int egw_node_release(struct egw_node *n, uint64_t room,
		     const struct egw_run *runs, uint32_t nruns);

/* Encode side */
/** The encode side learns of a request (egw_xfer_sender_open): 0, -ENOTSUP
 *  without the encode role, -EINVAL for bad arguments, or -enum egw_err
 *  (EGW_E_BAD_RANK, EGW_E_DUPLICATE_ROOM, EGW_E_NO_SLOT). */
int egw_node_sender_open(struct egw_node *n, uint64_t room, uint16_t nranks,
			 uint64_t now);
/** Source blocks for `tokens` of encoder output (filled by the caller,
 *  then handed over with egw_node_input). Returns the number of runs, or
 *  -errno as egw_pool_alloc_tokens. */
int egw_node_alloc_src(struct egw_node *n, uint64_t room, uint32_t tokens,
		       struct egw_run *runs, uint32_t max_runs);
/** The encoder's output for `room` (egw_xfer_sender_input): 0, -ENOTSUP
 *  without the encode role, or -enum egw_err as egw_xfer_sender_input. */
int egw_node_input(struct egw_node *n, uint64_t room, uint32_t total,
		   const struct egw_run *runs, uint32_t nruns, uint64_t now);
/** Whether the encode side knows `room`. */
bool egw_node_sender_has_room(const struct egw_node *n, uint64_t room);

/**
 * End one room now, as the local application's abort: the peer hears
 * ABORT, the room's blocks are freed once no write is in flight, and the
 * room's end is reported through ops.done. `rank` names the receiver's
 * rank (the sender's room is all its ranks). 0, -ENOTSUP without that
 * role, or -EGW_E_UNKNOWN_ROOM when the room is not (or no longer) open.
 */
int egw_node_abort_room(struct egw_node *n, uint64_t room, uint16_t rank,
			bool sender, uint64_t now);
/** Abort every open room (shutdown) and free their blocks. */
void egw_node_abort_all(struct egw_node *n, uint64_t now);

/**
 * A reload's parameters while rooms run (node_update.c): the engines'
 * timers and limits from params->xfer and the receiver's policy, as
 * egw_xfer_receiver_set_conf says (rooms in flight keep the deadlines
 * already set; no room is lost). Peers are not read: they come and go
 * through egw_node_peer_add/remove. Everything is checked before
 * anything changes. 0, -EINVAL (NULL argument, a value the engines
 * refuse, max_rooms or max_runs_per_room other than at create), or
 * -EPERM: name, roles or key differ from create (peers registered
 * with them).
 */
int egw_node_update(struct egw_node *n, const struct egw_node_params *params,
		    uint64_t now);

struct egw_pool *egw_node_pool(struct egw_node *n);
void egw_node_get_stats(const struct egw_node *n, struct egw_node_stats *st);
/** Engine counters (NULL when the node lacks the role). */
const struct egw_xfer_sender *egw_node_sender(const struct egw_node *n);
const struct egw_xfer_receiver *egw_node_receiver(const struct egw_node *n);

#ifdef __cplusplus
}
#endif

#endif /* EGW_NODE_H */
