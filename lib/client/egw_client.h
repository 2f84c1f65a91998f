/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_CLIENT_H
#define EGW_CLIENT_H

/**
 * @file
 * The client library of an inference engine process attached to a local
 * embgw gateway (doc/client.md): attach over the gateway's Unix socket,
 * map the port's block pool and the client area, submit commands, read
 * completions, sleep on the wake-up eventfd, keep the lease.
 *
 * The engine writes an encode room's tokens straight into pool blocks and
 * reads a language room's tokens straight out of them; the run lists come
 * from the room's slot (egw_client_room_runs). A room is named by the slot
 * the library picked for it at OPEN time.
 *
 * Every call returns 0 (or a count, or a slot) on success and a negative
 * errno on failure. A client is used by one thread at a time; only the
 * optional lease thread runs beside it, and it touches nothing but the
 * lease counter. Nothing here allocates after egw_client_attach().
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct egw_client;

/** egw_client_opts.flags */
#define EGW_CLIENT_F_WAKEUP 0x1u       /**< ask for the wake-up eventfd */
#define EGW_CLIENT_F_LEASE_THREAD 0x2u /**< bump the lease from a thread */
/** an event EGW_CLIENT_PEERS each time the peer list changes */
#define EGW_CLIENT_F_PEER_EVENTS 0x4u

/**
 * The library's ABI version (doc/client.md, "ABI"): the soname is
 * libegw_client.so.EGW_CLIENT_ABI_VERSION and every symbol carries the
 * version node EGW_CLIENT_<n> of egw_client.map. It changes only when a
 * public struct changes layout or a call its meaning; growing
 * egw_client_opts at its end does not change it.
 */
#define EGW_CLIENT_ABI_VERSION 2

/** The ABI version of the library actually loaded (EGW_CLIENT_ABI_VERSION
 *  of the header it was built from), for bindings that check it. */
unsigned int egw_client_abi_version(void);

/**
 * Attach options; a NULL pointer means all defaults. `size` comes first
 * in every version of this struct and says how much of it the caller
 * knows: set it to sizeof(struct egw_client_opts) (EGW_CLIENT_OPTS_INIT
 * does). Fields are only ever added at the end, so the library accepts a
 * smaller struct from a caller built against an older header (the fields
 * it lacks take their defaults) and refuses a bigger one it does not know
 * with -EINVAL.
 */
struct egw_client_opts {
	uint32_t size;        /**< sizeof(struct egw_client_opts) */
	uint32_t flags;       /**< EGW_CLIENT_F_* */
	const char *name;     /**< for the gateway's logs; NULL: "embgw" */
	uint32_t sq_entries;  /**< power of two, 0: the gateway's default */
	uint32_t cq_entries;  /**< power of two, 0: the gateway's default */
	uint32_t nslots;      /**< rooms held at once, 0: the default */
	uint32_t timeout_ms;  /**< deadline of the attach, 0: 5000 */
};

/** An egw_client_opts with its size set and every option at its default. */
#define EGW_CLIENT_OPTS_INIT { sizeof(struct egw_client_opts), 0, NULL, \
			       0, 0, 0, 0 }

/** Embedding element types (the welcome's dtype). */
enum egw_client_dtype {
	EGW_CLIENT_FP8 = 1,
	EGW_CLIENT_INT8 = 2,
	EGW_CLIENT_BF16 = 3,
	EGW_CLIENT_FP16 = 4,
	EGW_CLIENT_FP32 = 5,
};

/** Kinds of the pool, in the welcome's region order. */
enum egw_client_kind {
	EGW_CLIENT_EMBEDDING = 0,
	EGW_CLIENT_FILL_IDS = 1,
	EGW_CLIENT_MROPE = 2,
	EGW_CLIENT_AUX = 3,
};

/** egw_client_geometry.flags: what the welcome granted. */
#define EGW_CLIENT_G_ENCODE 0x1u
#define EGW_CLIENT_G_LANGUAGE 0x2u
#define EGW_CLIENT_G_WAKEUP 0x4u
#define EGW_CLIENT_G_POOL_RDONLY 0x8u /**< the pool is mapped read-only (a
				       * language port): a write faults */
#define EGW_CLIENT_G_POOL_SEGMENT                 \
	0x10u /**< the pool is this client's own  \
	       * segment of a pool cut per client \
	       * (an encode port): no other       \
	       * client's blocks are mapped */

/** The port's pool and the client's limits, as the welcome stated them. */
struct egw_client_geometry {
	uint32_t flags;            /**< EGW_CLIENT_G_* */
	uint32_t client_id;        /**< the gateway's number for this client */
	uint32_t capacity_tokens;
	uint32_t block_tokens;
	uint32_t nblocks;          /**< capacity_tokens / block_tokens */
	uint32_t hidden_size;
	uint32_t dtype;            /**< enum egw_client_dtype */
	uint32_t dtype_bytes;
	uint32_t aux_bytes;
	uint32_t mrope;            /**< 1: the mrope kind exists */
	uint32_t max_runs;
	uint32_t max_total_tokens;
	uint32_t lease_ms;         /**< 0: no lease */
	uint32_t max_peers;	   /**< peers the port lists at most */
	uint32_t nslots;
	uint32_t sq_entries;
	uint32_t cq_entries;
	/** the port's number of the mapping's first block: non-zero when
	 *  the pool is the client's own segment (EGW_CLIENT_G_POOL_SEGMENT).
	 *  For information: the library's runs and first blocks are
	 *  numbered in the mapping (0..nblocks-1) in any case */
	uint32_t first_block;
	uint64_t pool_bytes;
	uint64_t region_offset[4]; /**< enum egw_client_kind order */
	uint64_t region_bytes[4];  /**< 0: the kind is absent */
};

/** Room states: the reference design's KVPoll order. */
enum egw_client_state {
	EGW_CLIENT_FAILED = 0,
	EGW_CLIENT_BOOTSTRAPPING = 1,
	EGW_CLIENT_WAITING_FOR_INPUT = 2,
	EGW_CLIENT_TRANSFERRING = 3,
	EGW_CLIENT_SUCCESS = 4,
};

/** Commands, as echoed in egw_client_event.op. */
enum egw_client_op {
	EGW_CLIENT_NOP = 0,
	EGW_CLIENT_SEND_OPEN = 1,
	EGW_CLIENT_SEND_COMMIT = 2,
	EGW_CLIENT_RECV_OPEN = 3,
	EGW_CLIENT_RELEASE = 4,
	EGW_CLIENT_ABORT = 5,
	EGW_CLIENT_LOOKUP = 6,	    /**< result: enum egw_client_lookup */
	EGW_CLIENT_PEERS = 7,	    /**< the peer list changed: room is its
				     *   new generation, total_tokens the
				     *   number of peers (no command) */
	EGW_CLIENT_RECOVERED = 255, /**< made from the slot after an overflow */
};

/** egw_client_event.flags */
#define EGW_CLIENT_EV_MORE 0x1u      /**< the room goes on */
#define EGW_CLIENT_EV_CACHED 0x2u    /**< Success from the port's content
				       * cache or another room's transfer:
				       * nothing crossed the wire for it */
#define EGW_CLIENT_EV_END 0x100u     /**< the room ended, its slot is free */
#define EGW_CLIENT_EV_REFUSED 0x200u /**< the command was refused (result is
				       * a negated errno), nothing changed */

/** One completion, or one event recovered from a slot. */
struct egw_client_event {
	uint64_t tag;              /**< the command's */
	uint64_t room;
	int32_t result;            /**< 0 or a negative code (section 4) */
	uint32_t slot;
	uint32_t op;               /**< enum egw_client_op */
	uint32_t state;            /**< enum egw_client_state */
	uint32_t flags;            /**< EGW_CLIENT_EV_* */
	uint32_t total_tokens;
	uint32_t nruns;
	uint32_t landed_tokens;
};

/** A room's slot as the gateway last wrote it. */
struct egw_client_room {
	uint64_t room;             /**< 0: the gateway freed the slot */
	uint32_t state;
	int32_t error;
	uint32_t total_tokens;
	uint32_t nruns;
	uint32_t first_block;      /**< its aux slot holds the aux record */
	uint32_t slot;
};

/** A run of blocks: `count` blocks from block `start`. */
struct egw_client_run {
	uint32_t start;
	uint32_t count;
};

/** The aux record of a room (doc/client.md section 1). */
struct egw_client_aux {
	uint32_t total_tokens;
	uint32_t hidden_size;
	uint32_t dtype_bytes;
	int32_t mrope_delta;
	uint32_t block_tokens;
	uint32_t flags;
	uint64_t cookie;
};

/**
 * Attach to the gateway listening on `socket_path` as a client of `port`.
 * On refusal the gateway's status is returned (-ENOENT no such port,
 * -EPROTONOSUPPORT version, -EACCES, -EUSERS, -EINVAL, -EPROTO, -ENOMEM)
 * and egw_client_last_error() holds its message.
 * @return 0 and *out, or a negative errno.
 */
int egw_client_attach(const char *socket_path, const char *port,
		      const struct egw_client_opts *o, struct egw_client **out);

/** Why this thread's last failed call failed, as text ("" if unknown). */
const char *egw_client_last_error(void);

/** Close the socket (the gateway aborts every room still held), unmap,
 * stop the lease thread, free. NULL is allowed. */
void egw_client_detach(struct egw_client *c);

const struct egw_client_geometry *
egw_client_geometry(const struct egw_client *c);

/** egw_client_peer.flags */
#define EGW_CLIENT_PEER_READY 0x1u   /**< registered: rooms move now */
#define EGW_CLIENT_PEER_LEAVING 0x2u /**< removed, its rooms ending */

/** A live peer of the port (doc/client.md, "Peers"). */
struct egw_client_peer {
	uint32_t id;	/**< the gateway's: never reused, != 0 */
	uint32_t flags; /**< EGW_CLIENT_PEER_* */
	char name[32];
};

/**
 * Copy the port's live peers (at most `max`, ascending ids) and the list's
 * generation (it moves with every change; `gen` may be NULL).
 * @return the number of peers (may exceed `max`); -EAGAIN when the
 *   gateway was rewriting the list on every try; -EBADMSG the list is
 *   impossible; -ECONNRESET.
 */
int egw_client_peers(struct egw_client *c, struct egw_client_peer *out,
		     uint32_t max, uint64_t *gen);

/** @return the id of the live, not leaving, peer called `name`, or
 *  -ENOENT (the name is not listed now), -EAGAIN, -ECONNRESET. */
int egw_client_peer_id(struct egw_client *c, const char *name);

/** The mapped pool: `kind`'s region and its size; NULL when absent. */
void *egw_client_region(const struct egw_client *c, enum egw_client_kind kind,
			uint64_t *bytes);

/** The attach socket (readable/hung up when the gateway goes away) and
 * the wake-up eventfd (-1 without one), for an engine's own poll loop. */
int egw_client_socket_fd(const struct egw_client *c);
int egw_client_event_fd(const struct egw_client *c);

/* ---- commands: the OPENs return the slot picked for the room ----------- */

/**
 * Encode side: ask for blocks for `total_tokens` tokens sent to `nranks`
 * ranks. The run list is in the slot once the WaitingForInput event came.
 * @return the room's slot (>= 0); -EAGAIN the submission ring is full;
 *   -ENOSPC no slot is free; -EINVAL, -EFBIG, -EOPNOTSUPP as the gateway
 *   would answer (checked before anything is sent).
 */
int egw_client_send_open(struct egw_client *c, uint64_t room,
			 uint32_t total_tokens, uint16_t nranks,
			 int32_t mrope_delta, uint64_t cookie, uint64_t tag);

/** Encode side: the room's tokens are written, serve it. */
int egw_client_send_commit(struct egw_client *c, uint32_t slot, uint64_t tag);

/** egw_client_recv_open() flags */
#define EGW_CLIENT_AUX_ONLY 0x1u

/**
 * Language side: receive `room` from the peer whose id is `peer`
 * (egw_client_peers) as `rank` of `nranks`. A peer no longer listed fails
 * the room (PEER_REMOVED). @return the room's slot, or as
 * egw_client_send_open().
 */
int egw_client_recv_open(struct egw_client *c, uint64_t room, uint32_t peer,
			 uint16_t rank, uint16_t nranks, uint32_t flags,
			 uint64_t tag);

/** Bytes of a content key (egw_client_recv_open_ex). */
#define EGW_CLIENT_CONTENT_BYTES 16u

/**
 * egw_client_send_open() for attempt `attempt` of the room (0: the first;
 * a retry of a failed room uses the next number, and the language side
 * opens the same attempt: doc/client.md, "Attempts"). `content` must be
 * NULL: content keys are the language side's.
 */
int egw_client_send_open_ex(struct egw_client *c, uint64_t room,
			    uint32_t total_tokens, uint16_t nranks,
			    int32_t mrope_delta, uint64_t cookie,
			    uint32_t attempt, const uint8_t *content,
			    uint64_t tag);

/**
 * egw_client_recv_open() for attempt `attempt`, naming its content by a
 * 16-byte key (NULL or all zero: none). A keyed room is served from data
 * the port already holds for the key, or shares a transfer of it already
 * under way, without a transfer of its own (its Success event carries
 * EGW_CLIENT_EV_CACHED); else it transfers as usual and its data is kept
 * for the key (doc/client.md, "Content keys").
 */
int egw_client_recv_open_ex(struct egw_client *c, uint64_t room, uint32_t peer,
			    uint16_t rank, uint16_t nranks, uint32_t flags,
			    uint32_t attempt, const uint8_t *content,
			    uint64_t tag);

/**
 * egw_client_recv_open_ex() naming the peer by name (1 to 31 characters):
 * a peer not listed yet is waited for until the port's bootstrap deadline
 * (the room shows Bootstrapping), then the room fails UNKNOWN_PEER.
 */
int egw_client_recv_open_named(struct egw_client *c, uint64_t room,
			       const char *peer, uint16_t rank, uint16_t nranks,
			       uint32_t flags, uint32_t attempt,
			       const uint8_t *content, uint64_t tag);

/** What a LOOKUP's event says in `result`. */
enum egw_client_lookup {
	EGW_CLIENT_LOOKUP_NONE = 0,      /**< nothing held: a room transfers */
	EGW_CLIENT_LOOKUP_LANDED = 1,    /**< landed data: served at once */
	EGW_CLIENT_LOOKUP_IN_FLIGHT = 2, /**< a transfer of it is under way */
};

/**
 * Language side: ask what the port holds for a content key. The answer
 * is an event with op EGW_CLIENT_LOOKUP, room 0, this tag and the
 * enum egw_client_lookup in `result`.
 * @return 0, -EAGAIN (ring full), -EINVAL (an all-zero key),
 *   -EOPNOTSUPP (an encode-only port).
 */
int egw_client_lookup(struct egw_client *c, const uint8_t content[16],
		      uint64_t tag);

/** The port's state as the gateway last published it (about once a
 * millisecond): backpressure and the content cache. */
struct egw_client_stats {
	uint64_t updated_ns;        /**< the gateway's clock at the snapshot */
	uint32_t pool_blocks, free_blocks, quarantined_blocks;
	uint32_t admission_queue;   /**< rooms waiting for memory */
	uint32_t cache_entries, cache_blocks, cache_pinned;
	uint32_t reserved;
	uint64_t cache_hits, cache_misses, cache_shared, cache_evictions;
};

/**
 * Read the published stats (a consistent snapshot).
 * @return 0; -EAGAIN when the gateway was writing them on every try
 *   (try again); -ENODATA before the gateway published anything.
 */
int egw_client_stats(struct egw_client *c, struct egw_client_stats *out);

/** Language side: done with a Success room's blocks. */
int egw_client_release(struct egw_client *c, uint32_t slot, uint64_t tag);

/** End a room in any state; its last event says Failed. */
int egw_client_abort(struct egw_client *c, uint32_t slot, uint64_t tag);

/** A ring and liveness check: completes at once with `tag`. Tags whose
 * top byte is 0xeb are refused (-EINVAL): the library's own NOPs use them
 * to learn that the gateway acted on every command before them. */
int egw_client_nop(struct egw_client *c, uint64_t tag);

/* ---- completions ------------------------------------------------------- */

/**
 * Take up to `max` events. When the gateway dropped completions (the
 * completion ring's overflow grew) the slots of the open rooms are read
 * instead and an event with op EGW_CLIENT_RECOVERED is made for each room
 * whose state changed; a room's last state is reported once the gateway
 * has cleared its slot, with EGW_CLIENT_EV_END. An OPEN whose every
 * completion was lost and whose slot is free ends Failed, with the slot's
 * code when the slot says Failed, else -ENODATA (a refusal leaves no trace
 * in the slot); the library learns that the gateway acted on it from a NOP
 * of its own. Events come once per state. Bumps the lease.
 * @return events written (0: none); -EBADMSG the gateway broke the ring;
 *   -ECONNRESET the gateway closed the socket.
 */
int egw_client_poll(struct egw_client *c, struct egw_client_event *ev,
		    unsigned int max);

/**
 * Wait until an event is ready or `timeout_ms` passed: on the eventfd
 * when the gateway granted one (doc/client.md section 5), else by
 * sleeping in short steps. Bumps the lease while it waits.
 * @return 1 ready; 0 the deadline passed; -ECONNRESET the gateway closed
 *   the socket; another negative errno from poll(2).
 */
int egw_client_wait(struct egw_client *c, unsigned int timeout_ms);

/**
 * One descriptor for an engine's own poll/epoll/asyncio loop: readable
 * when the gateway wrote the wake-up eventfd or closed the attach socket
 * (an epoll descriptor watching both, made on the first call, closed at
 * detach). Sleep on it only after egw_client_prepare() returned 0.
 * @return the descriptor; -EOPNOTSUPP the gateway granted no eventfd
 *   (attach with EGW_CLIENT_F_WAKEUP); another negative errno of epoll.
 */
int egw_client_poll_fd(struct egw_client *c);

/**
 * Arm the wake-up before sleeping on egw_client_poll_fd() (doc/client.md
 * section 5): empties the eventfd, sets NEED_WAKEUP and looks at the
 * completion ring once more. Bumps the lease.
 * @return 1 events are waiting: egw_client_poll() now, do not sleep;
 *   0 armed: sleep on the descriptor for at most *max_sleep_ms (a quarter
 *   lease, so that the beat goes on; 1 while a dropped completion is being
 *   recovered from the slots, which no eventfd write announces;
 *   UINT32_MAX: no limit); -ECONNRESET the gateway closed the socket or
 *   gave this client up (egw_client_check()); -EOPNOTSUPP no eventfd.
 */
int egw_client_prepare(struct egw_client *c, uint32_t *max_sleep_ms);

/**
 * Whether the gateway still holds this client (doc/client.md, "Trust"):
 * every call of the library checks it before it touches a room. Once the
 * client is lost (the gateway gave it up: lease, broken ring; or the
 * gateway closed the socket) the pool's mapping is revoked - the same
 * addresses hold private zero pages, never another room's bytes - and
 * every call fails with -ECONNRESET, egw_client_last_error() saying why.
 * @return 0, or -ECONNRESET.
 */
int egw_client_check(struct egw_client *c);

/** egw_client_lost(): why the gateway gave the client up (the area's
 * trust word, doc/client.md section 2) */
#define EGW_CLIENT_LOST_LEASE 1u  /**< the lease expired */
#define EGW_CLIENT_LOST_RING 2u   /**< a ring index was impossible */
#define EGW_CLIENT_LOST_STOP 3u   /**< the gateway is stopping */

/** Why the gateway gave this client up: 0 (it did not), or one of
 * EGW_CLIENT_LOST_*. */
uint32_t egw_client_lost(const struct egw_client *c);

/**
 * egw_client_detach(), except that the pool's address range stays
 * reserved, revoked (private zero pages), and is returned: for a language
 * binding whose views of the pool may outlive the client. Unmap it with
 * egw_client_unmap_kept() once nothing points into it.
 */
void egw_client_detach_keep(struct egw_client *c, void **pool,
			    size_t *bytes);
void egw_client_unmap_kept(void *pool, size_t bytes);

/** Add 1 to the lease counter (every call above does it too). */
void egw_client_beat(struct egw_client *c);

/** Events dropped since attach: completions lost to a full ring, as the
 * gateway counts them. */
uint32_t egw_client_overflow(const struct egw_client *c);

/* ---- rooms ------------------------------------------------------------- */

/** Read the room's slot. @return 0; -ERANGE slot out of range; -ENOENT
 * the slot holds no room this client opened. */
int egw_client_room_info(const struct egw_client *c, uint32_t slot,
			 struct egw_client_room *r);

/**
 * Copy the slot's run list, checked against the pool (every block inside
 * it, the runs covering the room's total).
 * @return the number of runs (may exceed `max`: only `max` are copied);
 *   -ENOENT no room of ours; -EBADMSG the slot's list is impossible.
 */
int egw_client_room_runs(const struct egw_client *c, uint32_t slot,
			 struct egw_client_run *runs, uint32_t max);

/** Copy the room's aux record out of its first block. @return 0, -ENOENT,
 * -EBADMSG (first block outside the pool), -ENODATA (no aux kind). */
int egw_client_room_aux(const struct egw_client *c, uint32_t slot,
			struct egw_client_aux *aux);

/** Text for a result or a slot's error: a Linux errno or an embgw code. */
const char *egw_client_strerror(int code);

/** The state's name ("Failed", "Bootstrapping", ...). */
const char *egw_client_state_name(uint32_t state);

#ifdef __cplusplus
}
#endif

#endif
