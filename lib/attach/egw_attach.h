/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_ATTACH_H
#define EGW_ATTACH_H

/**
 * @file
 * The attach ABI: what a local engine process (a client) and the gateway
 * share in memory once the client has attached. One *client area* per
 * (client, port) holds a header page, a submission ring (client -> gateway
 * commands), a completion ring (gateway -> client completions) and a table
 * of room slots where the gateway writes each room's run list. The pool's
 * memory is a separate mapping (its regions are named in the hello answer).
 *
 * Both rings are single-producer/single-consumer with free-running 32-bit
 * indices, as io_uring's: the producer fills entry [tail & mask], then
 * publishes tail + 1 with release ordering; the consumer reads tail with
 * acquire ordering, copies entries [head & mask] out, then publishes
 * head + 1 with release ordering. An entry becomes visible only when its
 * tail is published, so a producer that dies mid-write leaves nothing
 * half-written behind, and nobody ever waits for a lock.
 *
 * The gateway never trusts the client's half of the area: an index that
 * claims more entries than the ring holds is reported as -EBADMSG (the
 * client is detached), and entries are copied out before they are looked
 * at, so a client that rewrites an entry after publishing it changes
 * nothing the gateway has already checked.
 *
 * Everything is in the host's byte order (client and gateway share the
 * host); sizes and offsets are pinned by static assertions, so the layout
 * is what doc/client.md says, byte by byte. Pure C, no system calls, but
 * for egw_attach_peer_check() (egw_attach_cred.c).
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_ATTACH_MAGIC 0x43574745u   /**< "EGWC" in memory */
#define EGW_ATTACH_VERSION 3u
#define EGW_ATTACH_CACHE_LINE 64u
#define EGW_ATTACH_ENTRY_BYTES 64u      /**< every command and completion */
#define EGW_ATTACH_HEADER_BYTES 4096u   /**< the area's first page */
#define EGW_ATTACH_MAX_ENTRIES 65536u   /**< per ring */
#define EGW_ATTACH_NAME_LEN_ 32u	/**< names, NUL included */

/**
 * One ring's control words. head and tail sit on cache lines of their own
 * so the two sides never write the same line.
 */
struct egw_attach_ring {
	uint32_t head;             /**< consumer: entries taken (free-running) */
	uint8_t pad0[EGW_ATTACH_CACHE_LINE - 4];
	uint32_t tail;             /**< producer: entries published */
	uint8_t pad1[EGW_ATTACH_CACHE_LINE - 4];
	uint32_t entries;          /**< power of two, 1..EGW_ATTACH_MAX_ENTRIES */
	uint32_t offset;           /**< of entry 0, bytes from the area start */
	uint32_t flags;            /**< EGW_RING_F_*: set by the consumer, cleared
				     * (atomically) by either side */
	uint32_t overflow;         /**< completions lost to a full ring (cq),
				     * written by the producer */
	uint8_t pad2[EGW_ATTACH_CACHE_LINE - 16];
};

/** cq: the client sleeps on its eventfd and wants a write to it. */
#define EGW_RING_F_NEED_WAKEUP 0x1u

/**
 * What the gateway publishes for its clients to read (backpressure and the
 * content cache), at offset 512 of the area's header. Written by the
 * gateway about once a millisecond as a sequence lock: `seq` is odd while
 * it writes; a reader copies the record between two equal, even reads of
 * `seq`.
 */
struct egw_attach_stats {
	uint32_t seq;              /**< odd while being written */
	uint32_t reserved0;
	uint64_t updated_ns;       /**< the gateway's clock at the snapshot */
	uint32_t pool_blocks;      /**< the port's pool */
	uint32_t free_blocks;
	uint32_t quarantined_blocks; /**< held until a peer's ABORT ACK */
	uint32_t admission_queue;  /**< rooms waiting for memory now */
	uint32_t cache_entries;    /**< content entries (landed or in flight) */
	uint32_t cache_blocks;     /**< blocks the landed entries hold */
	uint32_t cache_pinned;     /**< landed entries some room holds now */
	uint32_t held_long;        /**< rooms held past the port's held_warn_ms */
	uint64_t cache_hits;       /**< RECV_OPENs served from a landed entry */
	uint64_t cache_misses;     /**< RECV_OPENs with a content key that
				     *   started a transfer */
	uint64_t cache_shared;     /**< RECV_OPENs that joined a transfer
				     *   already under way */
	uint64_t cache_evictions;  /**< landed entries given back to the pool */
};

#define EGW_ATTACH_STATS_OFFSET 512u

/** The client area's header (its first EGW_ATTACH_HEADER_BYTES). */
struct egw_attach_area {
	uint32_t magic;            /**< EGW_ATTACH_MAGIC */
	uint32_t version;          /**< EGW_ATTACH_VERSION */
	uint64_t area_bytes;       /**< size of the whole mapping */
	uint32_t slots_offset;     /**< of slot 0, bytes from the area start */
	uint32_t nslots;           /**< rooms the client may hold at once */
	uint32_t slot_bytes;       /**< size of one slot (multiple of 64) */
	uint32_t max_runs;         /**< runs a slot can list */
	uint64_t client_beat;      /**< the client's lease: it adds 1 at least
				     * once per lease period while alive */
	uint32_t peers_offset;	   /**< of the peer table's record 0 */
	uint32_t max_peers;	   /**< records the peer table holds */
	uint32_t events;	   /**< EGW_AREA_EV_*: what the gateway posts
				    * besides the answers to commands */
	uint8_t pad0[EGW_ATTACH_CACHE_LINE - 52];
	struct egw_attach_ring sq; /**< commands, client -> gateway */
	struct egw_attach_ring cq; /**< completions, gateway -> client */
	uint8_t pad1[EGW_ATTACH_STATS_OFFSET - 448];
	struct egw_attach_stats stats; /**< written by the gateway only */
};

/**
 * The gateway's word to the client about its standing (bytes 1024.. of the
 * area's header, written by the gateway only). A client checks `lost` on
 * every call before it acts on pool memory: once it is non-zero the
 * gateway has given the client up (its rooms are ended) and the client's
 * views of the pool must not be used as room data any more.
 */
#define EGW_ATTACH_TRUST_OFFSET 1024u

struct egw_attach_trust {
	uint32_t lost;             /**< 0, or enum egw_attach_lost: why the
				     * gateway gave the client up */
	uint32_t held_blocks;      /**< blocks the gateway keeps out of the
				     * pool while the lost client may still
				     * map them (until its socket closes) */
	uint64_t lost_ns;          /**< the gateway's clock when it gave up */
};

/** egw_attach_trust.lost */
enum egw_attach_lost {
	EGW_LOST_NONE = 0,
	EGW_LOST_LEASE = 1,        /**< client_beat did not move for lease_ms */
	EGW_LOST_RING = 2,         /**< a ring index was impossible */
	EGW_LOST_STOP = 3,         /**< the gateway is stopping */
};

/** area.events: a completion EGW_OP_PEERS each time the peer table's
 *  generation moves (the client asked with EGW_HELLO_F_PEERS). */
#define EGW_AREA_EV_PEERS 0x1u

/**
 * The port's live peers (bytes 2048.. of the header; the records at
 * area.peers_offset), written by the gateway only, as a sequence lock: a
 * reader copies `count` records between two equal, even reads of `seq`.
 * `gen` moves with every change of the list (a peer added, removed,
 * become ready or leaving); records are in ascending id order.
 */
#define EGW_ATTACH_PEERS_OFFSET 2048u
#define EGW_ATTACH_MAX_PEER_RECS 4096u

struct egw_attach_peers {
	uint32_t seq;	/**< odd while being written */
	uint32_t count; /**< valid records, 0..area.max_peers */
	uint64_t gen;	/**< 0 until the gateway wrote a list */
};

/** egw_attach_peer_rec.flags */
/** registered both ways: rooms move now */
#define EGW_PEER_F_READY 0x1u
/** removed: its rooms are ending; a room cannot name it any more */
#define EGW_PEER_F_LEAVING 0x2u

/** One live peer in the table: 48 bytes. */
struct egw_attach_peer_rec {
	uint32_t id;	/**< the gateway's id: never reused, != 0 */
	uint32_t flags; /**< EGW_PEER_F_* */
	char name[EGW_ATTACH_NAME_LEN_]; /**< NUL-terminated */
	uint64_t reserved;		 /**< zero */
};

/** The peer table's control words of a mapped area. */
static inline struct egw_attach_peers *
egw_attach_peers_of(struct egw_attach_area *a)
{
	return (struct egw_attach_peers *)(void *)((uint8_t *)a +
						   EGW_ATTACH_PEERS_OFFSET);
}

/** The trust word of a mapped area. */
static inline struct egw_attach_trust *
egw_attach_trust_of(struct egw_attach_area *a)
{
	return (struct egw_attach_trust *)(void *)((uint8_t *)a +
						   EGW_ATTACH_TRUST_OFFSET);
}

/** Commands (egw_attach_cmd.op). */
enum egw_attach_op {
	EGW_OP_NOP = 0,	    /**< completes at once (ring and liveness check) */
	EGW_OP_SEND_OPEN,   /**< encode: source blocks for `total_tokens` */
	EGW_OP_SEND_COMMIT, /**< encode: data written, serve the room */
	EGW_OP_RECV_OPEN,   /**< language: receive a room as one rank */
	EGW_OP_RELEASE,	    /**< language: done reading, free the blocks */
	EGW_OP_ABORT,	    /**< either side: end the room, the peer hears */
	EGW_OP_LOOKUP,	    /**< language: does the port hold a content key? */
	EGW_OP_PEERS,	    /**< completions only: the peer table changed */
	EGW_OP_MAX
};

/** Bytes of a content key: the engine's hash of what a room holds. */
#define EGW_ATTACH_CONTENT_BYTES 16u

/** RECV_OPEN: this rank wants the aux record only (a dummy rank). */
#define EGW_CMDF_AUX_ONLY 0x1u
/** RECV_OPEN: the peer is named by name, in a struct egw_attach_cmd_name
 *  that is the next entry of the ring, published with the command (one
 *  store of tail + 2); peer_id is 0. */
#define EGW_CMDF_PEER_NAME 0x2u

/** A command: 64 bytes in the submission ring. */
struct egw_attach_cmd {
	uint8_t op;                /**< enum egw_attach_op */
	uint8_t flags;             /**< EGW_CMDF_* */
	uint16_t rank;             /**< RECV_OPEN: this rank, < nranks */
	uint16_t nranks;           /**< SEND_OPEN, RECV_OPEN: 1..8 */
	uint16_t reserved0;	   /**< zero */
	uint64_t tag;              /**< the client's; echoed in completions */
	uint64_t room;             /**< the engine's request id, non-zero */
	union {
		uint32_t total_tokens; /**< SEND_OPEN: 1..the welcome's
					*   max_total_tokens */
		uint32_t peer_id;      /**< RECV_OPEN: the encode peer's id (the
					*   peer table's), or 0 with
					*   EGW_CMDF_PEER_NAME */
	};
	uint32_t slot;             /**< the room's slot: for an OPEN, a free
				     * one the client picks */
	int32_t mrope_delta;       /**< SEND_OPEN: written to the aux record */
	uint32_t attempt;          /**< SEND_OPEN, RECV_OPEN: 0 for the first
				     *   try of a room, n for its n-th retry
				     *   (both sides agree; egw_attach_room_id) */
	uint64_t cookie;           /**< SEND_OPEN: written to the aux record */
	uint8_t content[EGW_ATTACH_CONTENT_BYTES]; /**< RECV_OPEN, LOOKUP: the
				     * content key (all zero: none) */
};

/** The entry that follows a RECV_OPEN with EGW_CMDF_PEER_NAME. */
struct egw_attach_cmd_name {
	char name[EGW_ATTACH_NAME_LEN_]; /**< NUL-terminated, not empty */
	uint8_t reserved[EGW_ATTACH_ENTRY_BYTES - EGW_ATTACH_NAME_LEN_];
};

/** Room states in completions: the KVPoll order of the reference design. */
enum egw_attach_state {
	EGW_ATTACH_STATE_FAILED = 0,
	EGW_ATTACH_STATE_BOOTSTRAPPING = 1,
	EGW_ATTACH_STATE_WAITING_FOR_INPUT = 2,
	EGW_ATTACH_STATE_TRANSFERRING = 3,
	EGW_ATTACH_STATE_SUCCESS = 4,
};

/** cqe.flags: more completions will follow for this command's room. */
#define EGW_CQEF_MORE 0x1u
/** cqe.flags: the room's data came from the port's content cache or from
 *  another room's transfer of the same content: nothing crossed the wire
 *  for this room. */
#define EGW_CQEF_CACHED 0x2u

/** LOOKUP's result: what the port holds for a content key. */
enum egw_attach_lookup {
	EGW_LOOKUP_NONE = 0,      /**< nothing: a RECV_OPEN transfers */
	EGW_LOOKUP_LANDED = 1,    /**< landed data: a RECV_OPEN is served now */
	EGW_LOOKUP_IN_FLIGHT = 2, /**< a transfer is under way: a RECV_OPEN
				   *   shares it */
};

/**
 * The room id a room uses inside the gateway and on the wire, from the
 * engine's request id and attempt (doc/client.md, "Attempts"): the id
 * itself for attempt 0, else the SplitMix64 finalizer of
 * room ^ (attempt * 0x9e3779b97f4a7c15), with 0 mapped to 1. A retry thus
 * never meets what is left of an earlier attempt (a lingering sender, a
 * quarantine) in either gateway.
 */
static inline uint64_t
egw_attach_room_id(uint64_t room, uint32_t attempt)
{
	uint64_t z;

	if (attempt == 0)
		return room;
	z = room ^ ((uint64_t)attempt * 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z != 0 ? z : 1;
}

/** A completion: 64 bytes in the completion ring. */
struct egw_attach_cqe {
	uint64_t tag;              /**< the command's */
	uint64_t room;
	int32_t result;            /**< 0, or a negative code (doc/client.md) */
	uint8_t op;                /**< the command's op */
	uint8_t state;             /**< enum egw_attach_state after the event */
	uint16_t flags;            /**< EGW_CQEF_* */
	uint32_t slot;             /**< the room's slot */
	uint32_t total_tokens;     /**< known total, 0 while unknown */
	uint32_t nruns;            /**< runs listed in the slot */
	uint32_t landed_tokens;    /**< language: tokens landed so far */
	uint8_t reserved[24];      /**< zero */
};

/** A run of blocks as listed in a slot (same shape as the pool's). */
struct egw_attach_run {
	uint32_t start;
	uint32_t count;
};

/** A room slot's header; max_runs egw_attach_run follow it. */
struct egw_attach_slot {
	uint64_t room;             /**< 0: the slot is free */
	uint32_t state;            /**< enum egw_attach_state */
	int32_t error;             /**< the failure's code, 0 otherwise */
	uint32_t total_tokens;
	uint32_t nruns;            /**< valid entries of runs[] */
	uint32_t first_block;      /**< holds the aux record */
	uint32_t reserved;
	struct egw_attach_run runs[];
};

/** Bytes of a slot that lists up to max_runs runs (a multiple of 64). */
static inline uint32_t
egw_attach_slot_bytes(uint32_t max_runs)
{
	uint32_t b = (uint32_t)sizeof(struct egw_attach_slot) +
		     max_runs * (uint32_t)sizeof(struct egw_attach_run);

	return (b + EGW_ATTACH_CACHE_LINE - 1) & ~(EGW_ATTACH_CACHE_LINE - 1);
}

/**
 * Size of a client area and the offsets of its parts.
 * @return the area's size in bytes, or 0 when a count is out of range
 *   (entries not a power of two in 1..EGW_ATTACH_MAX_ENTRIES, nslots 0 or
 *   over 1M, max_runs 0 or over 4096, max_peers over
 *   EGW_ATTACH_MAX_PEER_RECS). The peer table follows the slots.
 */
size_t egw_attach_area_bytes(uint32_t sq_entries, uint32_t cq_entries,
			     uint32_t nslots, uint32_t max_runs,
			     uint32_t max_peers);

/**
 * Lay out a zeroed client area of egw_attach_area_bytes() bytes.
 * @return 0, or -EINVAL for the same cases as egw_attach_area_bytes().
 */
int egw_attach_area_init(void *mem, uint32_t sq_entries, uint32_t cq_entries,
			 uint32_t nslots, uint32_t max_runs,
			 uint32_t max_peers);

/**
 * Check a mapped area's header before using it (a client does this after
 * mapping what the gateway sent): magic, version, sizes and offsets inside
 * `mapped_bytes`, no part overlapping another.
 * @return 0, -EPROTO (magic or version), -EINVAL (layout).
 */
int egw_attach_area_check(const struct egw_attach_area *a, size_t mapped_bytes);

/** One ring as a side uses it: the shared control words, plus a private
 * copy of the geometry that the other side cannot change afterwards. */
struct egw_attach_rview {
	struct egw_attach_ring *ctl; /**< head and tail are used from here */
	uint8_t *entries;            /**< entry 0 */
	uint32_t nentries;           /**< power of two */
};

/**
 * A mapped client area as one side uses it. Built once from a checked
 * header (egw_attach_map_init): afterwards nothing of the layout is read
 * from shared memory again, so a client that rewrites its header cannot
 * move the gateway's reads or writes outside the area.
 */
struct egw_attach_map {
	struct egw_attach_area *area;
	size_t bytes;
	struct egw_attach_rview sq, cq;
	uint8_t *slots;
	uint32_t nslots, slot_bytes, max_runs;
	struct egw_attach_peer_rec *peers; /**< the peer table's records */
	uint32_t max_peers;
};

/**
 * Check `mem` (egw_attach_area_check) and fill `m` from it.
 * @return 0, or egw_attach_area_check()'s error.
 */
int egw_attach_map_init(struct egw_attach_map *m, void *mem,
			size_t mapped_bytes);

/** A slot by index, NULL out of range. */
struct egw_attach_slot *egw_attach_slot_at(const struct egw_attach_map *m,
					   uint32_t slot);

/**
 * Producer side: copy `entry` (EGW_ATTACH_ENTRY_BYTES) into the ring and
 * publish it.
 * @return 0; -ENOBUFS when the ring is full; -EBADMSG when the consumer's
 *   head is impossible (ahead of tail, or more than the ring behind).
 */
int egw_attach_ring_put(const struct egw_attach_rview *r, const void *entry);

/**
 * Producer side: copy `n` consecutive entries into the ring and publish
 * them with one store of tail (a command and its name entry).
 * @return 0; -ENOBUFS when fewer than `n` entries are free (nothing
 *   written); -EBADMSG as egw_attach_ring_put().
 */
int egw_attach_ring_putn(const struct egw_attach_rview *r, const void *entries,
			 uint32_t n);

/**
 * Consumer side: copy the oldest entry out into `entry` and release it.
 * @return 1 (an entry was taken), 0 (empty), -EBADMSG when the producer's
 *   tail is impossible (behind head, or more than the ring ahead).
 */
int egw_attach_ring_get(const struct egw_attach_rview *r, void *entry);

/**
 * Check the name entry of a RECV_OPEN with EGW_CMDF_PEER_NAME, as copied
 * out of the ring. @return 0, or -EINVAL (empty, not NUL-terminated with
 * zeros after the NUL, or reserved bytes not zero).
 */
int egw_attach_name_check(const struct egw_attach_cmd_name *n);

/**
 * Gateway side: write the peer table (`n` records, ascending ids) and its
 * generation, as a sequence lock. @return 0, -E2BIG when n is over the
 * area's max_peers (nothing written).
 */
int egw_attach_peers_write(const struct egw_attach_map *m,
			   const struct egw_attach_peer_rec *recs, uint32_t n,
			   uint64_t gen);

/**
 * Client side: copy the peer table out (at most `max` records) with its
 * generation, without waiting for the gateway: -EAGAIN when the gateway
 * was writing it (read again). @return the records in the table (may be
 * more than `max`), -EAGAIN, or -EBADMSG when the count is impossible.
 */
int egw_attach_peers_read(const struct egw_attach_map *m,
			  struct egw_attach_peer_rec *out, uint32_t max,
			  uint64_t *gen);

/** Entries waiting in the ring (0 if the indices are impossible). */
uint32_t egw_attach_ring_count(const struct egw_attach_rview *r);

/* ---- the attach socket's two messages ----------------------------------- */

#define EGW_HELLO_MAGIC 0x48574745u    /**< "EGWH" in memory */
#define EGW_WELCOME_MAGIC 0x57574745u  /**< "EGWW" in memory */
#define EGW_ATTACH_NAME_LEN EGW_ATTACH_NAME_LEN_
#define EGW_ATTACH_MSG_LEN 128u

/** hello.flags: the client wants an eventfd that the gateway writes to
 * when it posts a completion while EGW_RING_F_NEED_WAKEUP is set. */
#define EGW_HELLO_F_WAKEUP 0x1u
/** hello.flags: the client wants a completion EGW_OP_PEERS whenever the
 * peer table changes (area.events gets EGW_AREA_EV_PEERS). */
#define EGW_HELLO_F_PEERS 0x2u

/** The client's hello: the first message on the socket, 128 bytes. */
struct egw_attach_hello {
	uint32_t magic;            /**< EGW_HELLO_MAGIC */
	uint16_t version;          /**< EGW_ATTACH_VERSION */
	uint16_t flags;            /**< EGW_HELLO_F_* */
	char port[EGW_ATTACH_NAME_LEN];   /**< the gateway port, NUL-terminated */
	char client[EGW_ATTACH_NAME_LEN]; /**< for logs, NUL-terminated */
	uint32_t sq_entries;       /**< 0: the gateway's default */
	uint32_t cq_entries;       /**< 0: the gateway's default */
	uint32_t nslots;           /**< 0: the gateway's default */
	uint32_t reserved0;        /**< zero */
	uint8_t reserved[40];      /**< zero */
};

/** Element types of the embedding kind (welcome.dtype). */
enum egw_attach_dtype {
	EGW_DTYPE_FP8 = 1,   /**< one byte, float8 e4m3 */
	EGW_DTYPE_INT8 = 2,
	EGW_DTYPE_BF16 = 3,
	EGW_DTYPE_FP16 = 4,
	EGW_DTYPE_FP32 = 5,
};

/** welcome.flags */
#define EGW_WELCOME_F_ENCODE 0x1u   /**< SEND_* commands allowed */
#define EGW_WELCOME_F_LANGUAGE 0x2u /**< RECV_OPEN and RELEASE allowed */
#define EGW_WELCOME_F_WAKEUP 0x4u   /**< an eventfd came with it */

/** welcome.trust_flags: the pool's fd is open read-only (a language
 * port): map it PROT_READ; a writable mapping fails with EACCES. */
#define EGW_WELCOME_T_POOL_RDONLY 0x1u
/** welcome.trust_flags: the pool's fd is the client's own segment of a
 * pool cut per client (an encode port with payload.segments): it holds
 * the blocks first_block .. first_block + capacity_tokens / block_tokens
 * - 1 of the port's pool and nothing else; the blocks that slots list are
 * the port's numbers, at (block - first_block) in the mapping. */
#define EGW_WELCOME_T_POOL_SEGMENT 0x2u

/**
 * The gateway's answer, 1536 bytes. With status 0 it carries, as
 * SCM_RIGHTS, the pool's fd, the client area's fd and (with
 * EGW_WELCOME_F_WAKEUP) an eventfd, in that order; with status < 0 no fd
 * and `message` says why, and the gateway closes the socket.
 */
struct egw_attach_welcome {
	uint32_t magic;            /**< EGW_WELCOME_MAGIC */
	uint16_t version;          /**< the version the gateway speaks */
	uint16_t flags;            /**< EGW_WELCOME_F_* */
	int32_t status;            /**< 0, or a negative errno */
	uint32_t nfds;             /**< fds that came with it: 0, 2 or 3 */
	char message[EGW_ATTACH_MSG_LEN]; /**< why, when status < 0 */
	uint32_t capacity_tokens;
	uint32_t block_tokens;
	uint32_t hidden_size;
	uint32_t dtype;            /**< enum egw_attach_dtype */
	uint32_t dtype_bytes;
	uint32_t aux_bytes;
	uint32_t mrope;            /**< 1: the mrope kind exists */
	uint32_t max_runs;         /**< runs a slot can list */
	uint64_t pool_bytes;       /**< map this much of the pool's fd */
	uint64_t region_offset[4]; /**< per kind (emb, fill_ids, mrope, aux),
				     * bytes from the start of the pool fd */
	uint64_t region_bytes[4];  /**< 0 for an absent kind */
	uint64_t area_bytes;       /**< map this much of the area's fd */
	uint32_t max_total_tokens; /**< largest SEND_OPEN */
	uint32_t lease_ms;         /**< client_beat must move this often */
	uint32_t max_peers;	   /**< records the area's peer table holds */
	uint32_t client_id;        /**< the gateway's number for this client */
	uint8_t reserved1[1024];   /**< zero (272..1295) */
	uint32_t cache_entries;    /**< content entries the port keeps (0:
				     *   content keys are ignored) */
	uint32_t cache_tokens;     /**< landed tokens the cache may keep */
	uint32_t held_warn_ms;     /**< a Success room held longer is reported */
	uint8_t reserved[52];      /**< zero (1308..1359) */
	uint32_t trust_flags;      /**< EGW_WELCOME_T_* (1360) */
	uint32_t first_block;	   /**< with EGW_WELCOME_T_POOL_SEGMENT: the
				    *   port's number of the mapping's first
				    *   block, else 0 (1364) */
	uint8_t reserved2[168];	   /**< zero (1368..1535) */
};

/**
 * Check a hello as received (`len` bytes) and say what is wrong in `why`.
 * @return 0; -EPROTO (length or magic), -EPROTONOSUPPORT (version: `why`
 *   names both versions), -EINVAL (names not terminated, reserved bytes,
 *   flags, or ring sizes that are not powers of two in range).
 */
int egw_attach_hello_check(const void *msg, size_t len, char *why,
			   size_t why_len);

/** Limits a gateway applies to one client's commands. */
struct egw_attach_limits {
	uint32_t nslots;           /**< the area's slots */
	uint32_t max_total_tokens; /**< largest SEND_OPEN */
	bool encode;               /**< SEND_* allowed on this port */
	bool language;             /**< RECV_OPEN, RELEASE allowed */
};

/**
 * Check a command's fields, as copied out of the ring, before anything
 * acts on it. Room state (whether a slot holds the room, whether the room
 * may be committed now) is the caller's to check.
 * @return 0, or a negative errno: -EOPNOTSUPP (op unknown or not allowed
 *   on this port), -EINVAL (a field out of range: the rule broken is
 *   written in doc/client.md, one per field), -ERANGE (slot out of range),
 *   -EFBIG (total_tokens above the limit).
 */
int egw_attach_cmd_check(const struct egw_attach_cmd *c,
			 const struct egw_attach_limits *l);

/** The op's name ("send_open", ...), "unknown" out of range. */
const char *egw_attach_op_name(uint8_t op);

/* ---- who may attach (egw_attach_cred.c: the one file with system calls) */

/** An attach socket's credentials policy. */
struct egw_attach_policy {
	uint32_t self_uid;         /**< always allowed (the gateway's euid) */
	const uint32_t *uids;      /**< allowed uids */
	uint16_t nuids;
	const uint32_t *gids;      /**< allowed groups: primary or supplementary */
	uint16_t ngids;
};

/** What SO_PEERCRED said of a connected peer. */
struct egw_attach_peer {
	int32_t pid;
	uint32_t uid, gid;
};

/**
 * Check the peer of a connected Unix socket against `pol`: its uid, its
 * primary gid (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS,
 * as the peer held them when it connected). `who` is filled in any case.
 * @return 1 allowed, 0 refused, or a negative errno of getsockopt(2).
 */
int egw_attach_peer_check(int fd, const struct egw_attach_policy *pol,
			  struct egw_attach_peer *who);

/* ---- the layout, pinned ------------------------------------------------
 * What doc/client.md gives byte by byte, checked wherever this header is
 * included (the gateway, lib/client, an engine's own code), so a
 * compiler, an option or an edit that moves a field fails the build
 * instead of a client's rings. */
#ifdef __cplusplus
#define EGW_ATTACH_ASSERT(c, m) static_assert(c, m)
#else
#define EGW_ATTACH_ASSERT(c, m) _Static_assert(c, m)
#endif
#define EGW_ATTACH_AT(t, f, off) (offsetof(struct t, f) == (off))

EGW_ATTACH_ASSERT(sizeof(struct egw_attach_ring) ==
		  3 * EGW_ATTACH_CACHE_LINE &&
		  EGW_ATTACH_AT(egw_attach_ring, head, 0) &&
		  EGW_ATTACH_AT(egw_attach_ring, tail, EGW_ATTACH_CACHE_LINE) &&
		  EGW_ATTACH_AT(egw_attach_ring, entries, 128) &&
		  EGW_ATTACH_AT(egw_attach_ring, offset, 132) &&
		  EGW_ATTACH_AT(egw_attach_ring, flags, 136) &&
		  EGW_ATTACH_AT(egw_attach_ring, overflow, 140),
		  "ring control: head and tail on cache lines of their own");
EGW_ATTACH_ASSERT(
	EGW_ATTACH_AT(egw_attach_area, version, 4) &&
		EGW_ATTACH_AT(egw_attach_area, area_bytes, 8) &&
		EGW_ATTACH_AT(egw_attach_area, slots_offset, 16) &&
		EGW_ATTACH_AT(egw_attach_area, max_runs, 28) &&
		EGW_ATTACH_AT(egw_attach_area, client_beat, 32) &&
		EGW_ATTACH_AT(egw_attach_area, peers_offset, 40) &&
		EGW_ATTACH_AT(egw_attach_area, max_peers, 44) &&
		EGW_ATTACH_AT(egw_attach_area, events, 48) &&
		EGW_ATTACH_AT(egw_attach_area, sq, EGW_ATTACH_CACHE_LINE) &&
		EGW_ATTACH_AT(egw_attach_area, cq, 4 * EGW_ATTACH_CACHE_LINE) &&
		EGW_ATTACH_AT(egw_attach_area, stats,
			      EGW_ATTACH_STATS_OFFSET) &&
		sizeof(struct egw_attach_area) <= EGW_ATTACH_HEADER_BYTES,
	"area header as in doc/client.md, within its page");
EGW_ATTACH_ASSERT(EGW_ATTACH_AT(egw_attach_stats, updated_ns, 8) &&
		  EGW_ATTACH_AT(egw_attach_stats, cache_entries, 32) &&
		  EGW_ATTACH_AT(egw_attach_stats, cache_hits, 48) &&
		  sizeof(struct egw_attach_stats) == 80,
		  "published stats as in doc/client.md");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_trust) == 16 &&
		  EGW_ATTACH_AT(egw_attach_trust, lost_ns, 8) &&
		  EGW_ATTACH_TRUST_OFFSET >= sizeof(struct egw_attach_area) &&
		  EGW_ATTACH_TRUST_OFFSET + sizeof(struct egw_attach_trust) <=
		  2048, "the trust word lies in the header's bytes 1024..2047");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_peers) == 16 &&
			  EGW_ATTACH_AT(egw_attach_peers, gen, 8) &&
			  EGW_ATTACH_PEERS_OFFSET >=
				  EGW_ATTACH_TRUST_OFFSET + 1024 &&
			  sizeof(struct egw_attach_peer_rec) == 48 &&
			  EGW_ATTACH_AT(egw_attach_peer_rec, flags, 4) &&
			  EGW_ATTACH_AT(egw_attach_peer_rec, name, 8) &&
			  EGW_ATTACH_AT(egw_attach_peer_rec, reserved, 40),
		  "peer table as in doc/client.md, at the header's byte 2048");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_cmd_name) == EGW_ATTACH_ENTRY_BYTES,
		  "a name entry is one ring entry");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_cmd) == EGW_ATTACH_ENTRY_BYTES &&
			  EGW_ATTACH_AT(egw_attach_cmd, flags, 1) &&
			  EGW_ATTACH_AT(egw_attach_cmd, rank, 2) &&
			  EGW_ATTACH_AT(egw_attach_cmd, nranks, 4) &&
			  EGW_ATTACH_AT(egw_attach_cmd, reserved0, 6) &&
			  EGW_ATTACH_AT(egw_attach_cmd, peer_id, 24) &&
			  EGW_ATTACH_AT(egw_attach_cmd, tag, 8) &&
			  EGW_ATTACH_AT(egw_attach_cmd, room, 16) &&
			  EGW_ATTACH_AT(egw_attach_cmd, total_tokens, 24) &&
			  EGW_ATTACH_AT(egw_attach_cmd, slot, 28) &&
			  EGW_ATTACH_AT(egw_attach_cmd, mrope_delta, 32) &&
			  EGW_ATTACH_AT(egw_attach_cmd, attempt, 36) &&
			  EGW_ATTACH_AT(egw_attach_cmd, cookie, 40) &&
			  EGW_ATTACH_AT(egw_attach_cmd, content, 48),
		  "command: 64 bytes as in doc/client.md");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_cqe) == EGW_ATTACH_ENTRY_BYTES &&
		  EGW_ATTACH_AT(egw_attach_cqe, room, 8) &&
		  EGW_ATTACH_AT(egw_attach_cqe, result, 16) &&
		  EGW_ATTACH_AT(egw_attach_cqe, op, 20) &&
		  EGW_ATTACH_AT(egw_attach_cqe, state, 21) &&
		  EGW_ATTACH_AT(egw_attach_cqe, flags, 22) &&
		  EGW_ATTACH_AT(egw_attach_cqe, slot, 24) &&
		  EGW_ATTACH_AT(egw_attach_cqe, total_tokens, 28) &&
		  EGW_ATTACH_AT(egw_attach_cqe, nruns, 32) &&
		  EGW_ATTACH_AT(egw_attach_cqe, landed_tokens, 36) &&
		  EGW_ATTACH_AT(egw_attach_cqe, reserved, 40),
		  "completion: 64 bytes as in doc/client.md");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_slot) == 32 &&
		  EGW_ATTACH_AT(egw_attach_slot, state, 8) &&
		  EGW_ATTACH_AT(egw_attach_slot, error, 12) &&
		  EGW_ATTACH_AT(egw_attach_slot, first_block, 24) &&
		  EGW_ATTACH_AT(egw_attach_slot, runs, 32) &&
		  sizeof(struct egw_attach_run) == 8,
		  "slot header: 32 bytes, then 8-byte runs");
EGW_ATTACH_ASSERT(sizeof(struct egw_attach_hello) == 128 &&
		  EGW_ATTACH_AT(egw_attach_hello, version, 4) &&
		  EGW_ATTACH_AT(egw_attach_hello, flags, 6) &&
		  EGW_ATTACH_AT(egw_attach_hello, port, 8) &&
		  EGW_ATTACH_AT(egw_attach_hello, client, 40) &&
		  EGW_ATTACH_AT(egw_attach_hello, sq_entries, 72) &&
		  EGW_ATTACH_AT(egw_attach_hello, reserved0, 84),
		  "hello: 128 bytes as in doc/client.md");
EGW_ATTACH_ASSERT(
	sizeof(struct egw_attach_welcome) == 1536 &&
		EGW_ATTACH_AT(egw_attach_welcome, status, 8) &&
		EGW_ATTACH_AT(egw_attach_welcome, message, 16) &&
		EGW_ATTACH_AT(egw_attach_welcome, capacity_tokens, 144) &&
		EGW_ATTACH_AT(egw_attach_welcome, pool_bytes, 176) &&
		EGW_ATTACH_AT(egw_attach_welcome, area_bytes, 248) &&
		EGW_ATTACH_AT(egw_attach_welcome, max_peers, 264) &&
		EGW_ATTACH_AT(egw_attach_welcome, reserved1, 272) &&
		EGW_ATTACH_AT(egw_attach_welcome, cache_entries, 1296) &&
		EGW_ATTACH_AT(egw_attach_welcome, held_warn_ms, 1304) &&
		EGW_ATTACH_AT(egw_attach_welcome, reserved, 1308) &&
		EGW_ATTACH_AT(egw_attach_welcome, trust_flags, 1360) &&
		EGW_ATTACH_AT(egw_attach_welcome, first_block, 1364),
	"welcome: 1536 bytes as in doc/client.md");

#ifdef __cplusplus
}
#endif

#endif
