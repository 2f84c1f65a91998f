/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_PAYLOAD_H
#define EGW_PAYLOAD_H

/**
 * @file
 * Payload transports behind one ops table: register the local pool once,
 * connect a peer from its REGISTER, post a batch of writes, poll
 * completions. Drivers: shm (same host, bounds-checked memcpy into the
 * peer's shared-memory pool) and verbs (RDMA WRITE over RoCEv2, built
 * when rdma-core is there: -Dverbs=).
 *
 * Every op that can fail returns 0 or a negative errno value, the same in
 * every driver:
 *  - -ENOBUFS: post() found no room in the completion ring for this
 *    batch's completion (verbs keeps room for every batch in flight as
 *    well: a reset completes them all at once); nothing was taken, the
 *    batch may be posted again once poll() has drained completions.
 *  - -EINVAL: a peer index the driver does not know.
 *  - open()/connect(): -errno of the call that failed (-ENOMEM, -ENODEV,
 *    -ENOENT, -ERANGE, ...); open() logs its cause, connect() keeps it
 *    for why() and logs nothing.
 * A batch the driver takes but cannot move (peer not connected, a write
 * outside the peer's regions, the link in error) is not an error return:
 * post() returns 0 and the batch completes with ok = false through poll().
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "egw_pool.h"
#include "egw_proto.h"
#include "egw_xfer.h"

/** What a completion finishes: a batch of writes (post()), or a window's
 *  bind or invalidation (window_bind(), window_unbind()). */
enum egw_payload_cpl_kind {
	EGW_PAYLOAD_CPL_WRITES = 0,
	EGW_PAYLOAD_CPL_WINDOW,
};

/** One completion: the cookie its post was given, and whether it
 *  succeeded (a window's invalidation always does: see window_unbind). */
struct egw_payload_cpl {
	uint64_t cookie;
	enum egw_payload_cpl_kind kind;
	bool ok;
};

/** An encode pool cut into `nseg` segments of `blocks` blocks each: a
 *  segment's memfd holds `bytes`, its share of kind k (its blocks' bytes
 *  of that kind) `len[k]` bytes at `off[k]` (0 for an absent kind). */
struct egw_pool_seg {
	uint32_t nseg;	 /**< 0: the pool is one memfd */
	uint32_t blocks; /**< per segment; segment s: s * blocks.. */
	uint64_t bytes;
	uint64_t off[EGW_KIND_MAX], len[EGW_KIND_MAX];
};

/** Pool memory local engine processes map: a sealed memfd (it cannot
 *  shrink or grow under the gateway), mapped shared; on 2 MiB huge pages
 *  when enough are free, else on ordinary pages. Or, cut into segments
 *  (egw_payload_pool_mem_geom), a sealed memfd per segment, all mapped
 *  side by side into one range. */
struct egw_pool_mem {
	void *mem;
	size_t bytes;           /**< mapped (rounded up to 2 MiB when huge) */
	int fd;			/**< -1 when none (also when cut) */
	bool huge;
	struct egw_pool_seg seg; /**< seg.nseg 0: not cut */
	int *seg_fd;		 /**< seg.nseg memfds */
};

/** Create it (`name` shows in /proc/PID/fd), its whole size reserved.
 *  0 or -errno (-ENOMEM: more than the machine's available memory). */
int egw_payload_pool_mem(const char *name, size_t bytes,
			 struct egw_pool_mem *m);
void egw_payload_pool_mem_free(struct egw_pool_mem *m);

/** The pool memory for geometry `g`: egw_payload_pool_mem() with
 *  `segments` 0, else cut into that many segments (payload_pool_seg.c;
 *  ordinary pages, each segment reserved at once). 0 or -errno (-EINVAL:
 *  the geometry does not cut into segments of whole pages, logged). */
int egw_payload_pool_mem_geom(const char *name, const struct egw_pool_geom *g,
			      uint32_t segments, struct egw_pool_mem *m);

/** How `g` cuts into `nseg` segments; 0, or -EINVAL when it does not
 *  (blocks not divisible, a kind's share not whole 4096-byte pages). */
int egw_payload_seg_layout(const struct egw_pool_geom *g, uint32_t nseg,
			   struct egw_pool_seg *l);

/** Segment `seg`'s memfd (owned by `m`); -ENOENT when `m` is not cut,
 *  -ERANGE beyond its segments. */
int egw_payload_pool_seg_fd(const struct egw_pool_mem *m, uint32_t seg);

/** The memory the kernel says is available (MemAvailable). 0 or -errno. */
int egw_payload_mem_available(uint64_t *bytes);

struct egw_payload_stats {
	uint64_t batches, writes, bytes, failed_batches, refused_writes;
	uint64_t blocks;    /**< token blocks written (embedding kind) */
	uint64_t cycles;    /**< CPU cycles spent in post() and poll() */
	uint64_t qp_resets; /**< verbs: QPs brought back after an error */
	/* verbs, per-window keys: windows opened and closed, and the time
	 * from posting each bind or invalidation to its completion (from the
	 * `now` given to the post and to the poll() that reaped it) */
	uint64_t window_binds, window_bind_ns;
	uint64_t window_unbinds, window_unbind_ns;
	uint64_t window_unbind_deallocs; /**< closed by freeing the windows
					  *   (the QP could not invalidate) */
	uint64_t window_bind_failed;
};

/** Count one write moved to a peer that registered `r`. */
static inline void
egw_payload_count_write(struct egw_payload_stats *st, const struct egw_register *r,
			const struct egw_write *w)
{
	st->writes++;
	st->bytes += w->bytes;
	if (w->kind == EGW_KIND_EMB && r->block_tokens != 0)
		st->blocks += (w->tokens + r->block_tokens - 1) / r->block_tokens;
}

/** A cycle counter for the drivers' own cost accounting. */
static inline uint64_t
egw_payload_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return 0;
#endif
}

struct egw_payload;

/**
 * Completions waiting for poll(): drivers report batches through this
 * ring, never by calling back, so the state machines are not re-entered.
 * Sized at open for everything the state machines can have in flight.
 */
struct egw_payload_ring {
	struct egw_payload_cpl *c;
	uint32_t size, head, count;
};

static inline int
egw_payload_ring_init(struct egw_payload_ring *r, uint32_t size)
{
	r->c = calloc(size, sizeof(*r->c));
	r->size = size;
	r->head = r->count = 0;
	return r->c == NULL ? -ENOMEM : 0;
}

static inline bool
egw_payload_ring_full(const struct egw_payload_ring *r)
{
	return r->count == r->size;
}

static inline void
egw_payload_ring_push_kind(struct egw_payload_ring *r, uint64_t cookie,
			   enum egw_payload_cpl_kind kind, bool ok)
{
	struct egw_payload_cpl *c = &r->c[(r->head + r->count++) % r->size];

	c->cookie = cookie;
	c->kind = kind;
	c->ok = ok;
}

/** A batch of writes completed. */
static inline void
egw_payload_ring_push(struct egw_payload_ring *r, uint64_t cookie, bool ok)
{
	egw_payload_ring_push_kind(r, cookie, EGW_PAYLOAD_CPL_WRITES, ok);
}

static inline uint32_t
egw_payload_ring_drain(struct egw_payload_ring *r, struct egw_payload_cpl *out,
		       uint32_t max)
{
	uint32_t n = 0;

	while (n < max && r->count > 0) {
		out[n++] = r->c[r->head];
		r->head = (r->head + 1) % r->size;
		r->count--;
	}
	return n;
}

/** Bytes of one kind's region as a peer registered it. */
static inline uint64_t
egw_payload_region_len(const struct egw_register *r, unsigned k)
{
	uint64_t per_block = k == EGW_KIND_AUX ? r->aux_bytes
			     : (uint64_t)r->block_tokens * r->region[k].unit_bytes;

	return per_block * r->pool_blocks;
}

/**
 * The checks every driver makes before moving a write: the source lies in
 * our pool, the destination inside the region the peer registered (the
 * bounds an rkey enforces). Returns the destination's offset in that
 * region and the source address, or -1.
 */
static inline int64_t
egw_payload_check_write(const struct egw_pool *pool, const struct egw_register *r,
			const struct egw_write *w, uint8_t **src)
{
	enum egw_kind k = (enum egw_kind)w->kind;
	uint8_t *s, *end;
	uint64_t off;

	if (w->kind >= EGW_KIND_MAX || r->region[k].unit_bytes == 0 ||
	    w->dst_block >= r->pool_blocks)
		return -1;
	s = (uint8_t *)egw_pool_addr(pool, k, w->src_block, w->src_token);
	if (s == NULL)
		return -1;
	end = (uint8_t *)egw_pool_region(pool, k) +
	      egw_pool_geom_region_bytes(egw_pool_geom(pool), k);
	if (w->bytes > (uint64_t)(end - s))
		return -1;
	off = k == EGW_KIND_AUX ? (uint64_t)w->dst_block * r->aux_bytes
	      : ((uint64_t)w->dst_block * r->block_tokens + w->dst_token) *
		r->region[k].unit_bytes;
	if (off + w->bytes > egw_payload_region_len(r, k))
		return -1;
	*src = s;
	return (int64_t)off;
}

/* What REGISTER tells a peer about the pool's regions: each kind's address
 * relative to `origin` (shm: offsets into the shared file; verbs: virtual
 * addresses, origin 0), `rkey` on the kinds present, the unit size. */
static inline void
egw_payload_regions(const struct egw_pool *pool, uint64_t origin, uint32_t rkey,
		    struct egw_region r[EGW_KIND_MAX])
{
	const struct egw_pool_geom *g = egw_pool_geom(pool);

	for (int k = 0; k < EGW_KIND_MAX; k++) {
		uint8_t *base = egw_pool_region(pool, (enum egw_kind)k);

		r[k].addr = base == NULL ? 0 : (uint64_t)(uintptr_t)base - origin;
		r[k].rkey = base == NULL ? 0 : rkey;
		r[k].unit_bytes = (uint32_t)
			egw_pool_geom_unit_bytes(g, (enum egw_kind)k);
	}
}

/** peers given at open (a configuration file's list) */
#define EGW_PAYLOAD_MAX_PEERS 32
/** peer slots a driver can have (egw_payload_params.max_peers) */
#define EGW_PAYLOAD_MAX_SLOTS 4096
#define EGW_PAYLOAD_NAME_LEN 32
#define EGW_PAYLOAD_PATH_LEN 256

/** One peer of the port, as the drivers need it. */
struct egw_payload_peer {
	char name[EGW_PAYLOAD_NAME_LEN]; /**< for log lines */
	/** shm: its pool file, when several receiving peers share one port
	 *  ("" = the port's path) */
	char shm_path[EGW_PAYLOAD_PATH_LEN];
};

/** What a driver is opened with for one port (the application fills it
 *  from its configuration; open() copies what it keeps). */
struct egw_payload_params {
	struct egw_pool_geom geom;  /**< the local pool's */
	bool receives;              /**< peers write into our pool (the
				     *   language role) */
	uint32_t max_batches;       /**< write batches in flight at most:
				     *   sizes the completion ring */
	uint64_t peer_dead_ns;      /**< shm: how long a peer may keep a
				     *   dead predecessor's file mapped */
	uint32_t addr;              /**< the port's IPv4, host order */
	char path[EGW_PAYLOAD_PATH_LEN]; /**< shm: our pool file */
	char device[64];            /**< verbs: e.g. mlx5_0, rxe0 */
	uint8_t port;               /**< verbs: 1-based port number */
	int gid_index;              /**< verbs: -1 = the RoCEv2 GID of addr */
	/** verbs: the GRH hop limit, above 1 for a routed path (0: 64) */
	uint8_t hop_limit;
	bool window_keys;           /**< verbs: a memory window per window */
	/** a sending pool cut into this many segments, a memfd each
	 *  (egw_payload_pool_mem_geom); 0: one memfd */
	uint32_t segments;
	struct egw_payload_peer peers[EGW_PAYLOAD_MAX_PEERS];
	uint32_t npeers;    /**< slots 0..npeers-1, taken at open */
	uint32_t max_peers; /**< peer slots (0: npeers); the node's
			     *   slots, up to EGW_PAYLOAD_MAX_SLOTS */
};

struct egw_payload_ops {
	const char *name;
	/** Create the driver for one port: it decides where the local pool
	 *  lives (shm: a shared file when this node receives) and returns
	 *  the pool built on it. `session` is the node's session id (its
	 *  incarnation, the one its REGISTERs carry): the shm driver writes
	 *  it into the pool file it creates. -EINVAL for more peers than
	 *  EGW_PAYLOAD_MAX_PEERS. */
	int (*open)(const struct egw_payload_params *pp, uint64_t session,
		    struct egw_payload **out, struct egw_pool **pool);
	/** What REGISTER tells peers about our memory. */
	void (*describe)(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
			 uint8_t gid[16], uint32_t *qpn);
	/** Our endpoint towards one peer (its own QP for verbs): QPN, PSN,
	 *  path MTU in bytes. Optional: NULL means describe()'s qpn for all. */
	void (*endpoint)(struct egw_payload *p, uint32_t peer, uint32_t *qpn,
			 uint32_t *psn, uint16_t *mtu);
	/** A peer registered: reach its memory (r->session: the
	 *  incarnation that registered it). Called again when its content
	 *  changed, and with an ACK whose ack_qpn/ack_psn echo our current
	 *  endpoint (the peer has rebuilt its side). */
	int (*connect)(struct egw_payload *p, uint32_t peer,
		       const struct egw_register *r);
	/** Why the last connect() to `peer` failed, a sentence (it is the
	 *  caller's to log: connect() logs nothing, as it is retried with
	 *  every REGISTER of a peer it cannot reach). Optional. */
	const char *(*why)(const struct egw_payload *p, uint32_t peer);
	/** The peer's incarnation is gone (it restarted): let go of its
	 *  memory now - nothing is written to it after this returns, nothing
	 *  for the new incarnation before its connect() (shm: unmap; verbs:
	 *  reset the QP, which fails the batches in flight). Optional. */
	void (*disconnect)(struct egw_payload *p, uint32_t peer);
	/** disconnect() also when the peer was declared dead (silent past
	 *  peer_dead_ms; its rooms failed), to be connected again by the
	 *  same incarnation's next REGISTER. shm: yes, its mapping keeps a
	 *  killed peer's pool file's space in use, and remapping the same
	 *  file is safe. verbs: no, the QP holds nothing of the peer's, and
	 *  bringing it back towards the same peer would need both sides to
	 *  take new PSNs, which one side declaring the other dead does not
	 *  give (the other may not have). */
	bool disconnect_silent;
	/** A peer takes a free slot while running (the node's
	 *  egw_node_peer_add): 0, -EINVAL (no such slot, or taken),
	 *  -ENOMEM (verbs: no QP or completion space for it; the peer is
	 *  not added). */
	int (*peer_add)(struct egw_payload *p, uint32_t slot,
			const struct egw_payload_peer *pe);
	/** The slot's peer is gone for good (its rooms all ended, the node
	 *  called peer_down first): nothing of it is kept, the slot may be
	 *  given to another peer. */
	void (*peer_remove)(struct egw_payload *p, uint32_t slot);
	/** Post writes from the local pool to a peer; completion later. */
	int (*post)(struct egw_payload *p, uint32_t peer,
		    const struct egw_write *w, uint32_t n, uint64_t cookie);
	/** Peers whose endpoint (from endpoint()) changed since the last
	 *  call, up to `max`: our side of the link was rebuilt (verbs: a QP
	 *  reset after an error takes a new PSN) and the peer must hear a
	 *  new REGISTER to rebuild its side. Optional. */
	uint32_t (*changed)(struct egw_payload *p, uint32_t *peers,
			    uint32_t max);
	/** Per-window keys (receiving side; optional, NULL: every window is
	 *  written under the regions' keys). Open a window over the blocks of
	 *  `run` to `peer` alone: for every kind present, a key admitting
	 *  writes from that peer's link to exactly that run's bytes of that
	 *  kind, in rkeys (0 for an absent kind). Posted work, never waited
	 *  for: 0 when the bind is posted - the keys admit writes once its
	 *  completion (EGW_PAYLOAD_CPL_WINDOW, `cookie`) comes out of poll()
	 *  with ok, and admit nothing if it comes with !ok - or -errno, nothing
	 *  posted and no completion to come (-ENOTCONN: the peer's link is
	 *  down; -EBUSY: a window is open or pending there). `now` dates the
	 *  post (window_bind_ns). NULL as well when the port is configured
	 *  without window keys. */
	int (*window_bind)(struct egw_payload *p, uint32_t peer,
			   const struct egw_run *run,
			   uint32_t rkeys[EGW_KIND_MAX], uint64_t cookie,
			   uint64_t now);
	/** Close the window over `run` (named by run->start), open or with
	 *  its bind still pending: posted work too. Exactly one completion
	 *  (EGW_PAYLOAD_CPL_WINDOW, `cookie`, ok) follows, once no write
	 *  through its keys can land any more - at once, through the next
	 *  poll(), when none is open there or the link cannot invalidate
	 *  (verbs then frees the window instead). */
	void (*window_unbind)(struct egw_payload *p, const struct egw_run *run,
			      uint64_t cookie, uint64_t now);
	/** Up to `max` completions of writes and windows; `now` is the
	 *  caller's clock (the driver reads none). */
	uint32_t (*poll)(struct egw_payload *p, struct egw_payload_cpl *c,
			 uint32_t max, uint64_t now);
	void (*stats)(const struct egw_payload *p, struct egw_payload_stats *st);
	/** The fd of the pool's memory, which local engine processes map
	 *  (doc/client.md): its first `*bytes` bytes, egw_pool_mem() at
	 *  `*offset` (shm: the pool file, after its header). Owned by the
	 *  driver (valid until close); -errno when the pool cannot be
	 *  shared. */
	int (*pool_fd)(const struct egw_payload *p, uint64_t *offset,
		       uint64_t *bytes);
	/** The pool's memory when the driver made it local engines'
	 *  memory (a sending pool): its segments and their fds when it is
	 *  cut (egw_payload_params.segments). NULL when the pool is not such
	 *  memory (shm: a receiving side's pool file). Optional. */
	const struct egw_pool_mem *(*pool_mem)(const struct egw_payload *p);
	void (*close)(struct egw_payload *p);
};

extern const struct egw_payload_ops egw_payload_shm_ops;
#ifdef EGW_HAVE_VERBS
extern const struct egw_payload_ops egw_payload_verbs_ops;
#endif

/** Bytes a start would free on the filesystem of `path` by taking over
 *  the shm pool file of a stopped gateway there (our header, its lock
 *  free); 0 when there is none to take over (nothing, a live gateway's,
 *  anything else). For --check-config: the start's own take-over. */
uint64_t egw_payload_shm_reclaimable(const char *path);

/** What the shm driver's start refuses at `path` whatever else runs,
 *  logged in the start's words: something that is not a regular file, a
 *  file that is not an embgw pool file, one that cannot be opened.
 *  0 for nothing there or a pool file (a live owner's lock is not
 *  checked: it may be gone by the start). For --check-config. */
int egw_payload_shm_path_check(const char *path);

/** A driver's log line, "DRIVER: message", through the log hook
 *  (egw_log.h, component drivers, level ERR). */
void egw_payload_log(const char *driver, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** The driver of that name ("shm", "verbs") built into this binary, or
 *  NULL (verbs without rdma-core at build time). */
const struct egw_payload_ops *egw_payload_find(const char *name);

#endif /* EGW_PAYLOAD_H */
