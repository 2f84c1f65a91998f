/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_POOL_H
#define EGW_POOL_H

/**
 * @file
 * Block pool: a region of `capacity_tokens` token slots cut into blocks of
 * `block_tokens`, with one buffer per kind (embedding, fill_ids, mrope
 * positions, aux). Blocks are handed out as contiguous runs with an owner
 * (a room id); a request no single run can satisfy may be served by several
 * runs. Pure C, no DPDK: the gateway registers the memory with its payload
 * driver, the tests use plain memory.
 *
 * Allocation and free cost O(log n) in the number of blocks (a segment tree
 * over the free map plus O(1) run bookkeeping at the run's first block);
 * nothing scans the pool. Errors are negative errno values.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Buffer kinds. Token kinds hold one slot per token; aux one per block. */
enum egw_kind {
	EGW_KIND_EMB = 0,   /**< hidden_size x dtype_bytes per token */
	EGW_KIND_FILL_IDS,  /**< int32 per token */
	EGW_KIND_MROPE,     /**< 3 x int32 per token (optional) */
	EGW_KIND_AUX,       /**< fixed per-request record, one per block */
	EGW_KIND_MAX
};

#define EGW_POOL_DEFAULT_BLOCK_TOKENS 128u
#define EGW_POOL_ALIGN 4096u  /**< each kind's region starts page aligned */

/** Owner value that never names a room (free blocks report it). */
#define EGW_OWNER_NONE UINT64_MAX

/**
 * The aux record as it sits in memory (little-endian, 32 bytes); aux_bytes
 * may be larger, the rest is reserved and zero. total_tokens is word 0,
 * as in the reference design (aux[0] = total).
 */
struct egw_aux_rec {
	uint32_t total_tokens;
	uint32_t hidden_size;
	uint32_t dtype_bytes;
	int32_t mrope_delta;
	uint32_t block_tokens;
	uint32_t flags;
	uint64_t cookie;        /**< producer's tag, e.g. a request hash */
};

struct egw_pool_geom {
	uint32_t capacity_tokens; /**< multiple of block_tokens */
	uint32_t block_tokens;    /**< tokens per block (default 128) */
	uint32_t hidden_size;     /**< embedding width */
	uint32_t dtype_bytes;     /**< 1, 2 or 4 */
	bool mrope;               /**< mrope positions present */
	uint32_t aux_bytes;       /**< >= sizeof(struct egw_aux_rec), multiple of 8 */
};

/** A contiguous run of blocks [start, start + count). */
struct egw_run {
	uint32_t start;
	uint32_t count;
};

/** The blocks of `n` runs, summed. */
static inline uint32_t
egw_pool_runs_blocks(const struct egw_run *runs, uint32_t n)
{
	uint32_t b = 0;

	for (uint32_t i = 0; i < n; i++)
		b += runs[i].count;
	return b;
}

struct egw_pool_stats {
	uint32_t blocks_total;
	uint32_t blocks_in_use;
	uint32_t free_runs;        /**< maximal runs of free blocks in the
				     * tree (the cached blocks not counted) */
	uint32_t largest_free_run; /**< in blocks, likewise */
	uint32_t cached_blocks;    /**< free blocks held by the cache */
	uint64_t allocs, frees;    /**< successful calls */
	uint64_t alloc_fail;       /**< -ENOSPC answers */
	uint64_t refused;          /**< bad frees (double, foreign, range) */
};

struct egw_pool;

/** Check a geometry; 0 or -EINVAL. */
int egw_pool_geom_check(const struct egw_pool_geom *g);

/** Bytes per token of a token kind, per block for EGW_KIND_AUX; 0 if absent. */
size_t egw_pool_geom_unit_bytes(const struct egw_pool_geom *g, enum egw_kind k);

/** Byte offset of (kind, block, token) inside that kind's region. */
size_t egw_pool_geom_offset(const struct egw_pool_geom *g, enum egw_kind k,
		       uint32_t block, uint32_t token);

/** Bytes of one kind's region, and of the whole pool memory (all regions). */
size_t egw_pool_geom_region_bytes(const struct egw_pool_geom *g,
				  enum egw_kind k);
size_t egw_pool_geom_mem_bytes(const struct egw_pool_geom *g);

/** Number of blocks needed for `tokens` (ceil). */
static inline uint32_t
egw_pool_geom_blocks_for(const struct egw_pool_geom *g, uint64_t tokens)
{
	return (uint32_t)((tokens + g->block_tokens - 1) / g->block_tokens);
}

/**
 * Create a pool. With mem == NULL the pool allocates (and later frees) its
 * own zeroed, page-aligned memory; otherwise `mem` must hold
 * egw_pool_geom_mem_bytes() bytes, be EGW_POOL_ALIGN aligned, and outlive the
 * pool (e.g. a shared-memory mapping). Returns 0, -EINVAL or -ENOMEM.
 */
int egw_pool_create(const struct egw_pool_geom *g, void *mem, size_t mem_len,
		    struct egw_pool **out);
void egw_pool_destroy(struct egw_pool *p);

const struct egw_pool_geom *egw_pool_geom(const struct egw_pool *p);
uint32_t egw_pool_nblocks(const struct egw_pool *p);

/** Start of the whole pool memory and of one kind's region. */
void *egw_pool_mem(const struct egw_pool *p);
void *egw_pool_region(const struct egw_pool *p, enum egw_kind k);

/** Address of (kind, block, token); NULL when out of range or absent. */
void *egw_pool_addr(const struct egw_pool *p, enum egw_kind k, uint32_t block,
		    uint32_t token);

/**
 * Write a room's aux record in `block` (its first block): the record's
 * whole aux_bytes cleared, then the total, the pool's geometry, the mrope
 * delta and the producer's cookie. NULL when the block is out of range.
 */
struct egw_aux_rec *egw_pool_aux_init(struct egw_pool *p, uint32_t block,
				      uint32_t total_tokens,
				      int32_t mrope_delta, uint64_t cookie);

/**
 * Allocate `nblocks` blocks for `owner`, as at most `max_runs` runs written
 * to `runs` (lowest address first fit; when no single run fits, the largest
 * free runs first, so the list is as short as possible).
 * @return number of runs (>= 1), -EINVAL (nblocks == 0, max_runs == 0,
 *   owner == EGW_OWNER_NONE), -ENOSPC (not enough free blocks, or not in
 *   max_runs runs); on error nothing is allocated.
 */
int egw_pool_alloc(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
		   struct egw_run *runs, uint32_t max_runs);

/** Same, sized in tokens: ceil(tokens / block_tokens) blocks. */
int egw_pool_alloc_tokens(struct egw_pool *p, uint64_t owner, uint64_t tokens,
			  struct egw_run *runs, uint32_t max_runs);

/**
 * egw_pool_alloc confined to the blocks [lo, hi) (a client's segment): the
 * runs lie wholly inside it, chosen as egw_pool_alloc chooses them there.
 * O(log n) per run, like egw_pool_alloc; the cache of single blocks is
 * not used (it is flushed once when the range alone cannot answer).
 * Frees go through egw_pool_free as for any run.
 * @return runs (>= 1), -EINVAL (as egw_pool_alloc, or lo >= hi, or hi
 *   beyond the pool), -ENOSPC (the range has not enough free blocks in
 *   max_runs runs); on error nothing is allocated.
 */
int egw_pool_alloc_range(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
			 uint32_t lo, uint32_t hi, struct egw_run *runs,
			 uint32_t max_runs);

/** Same, sized in tokens. */
int egw_pool_alloc_range_tokens(struct egw_pool *p, uint64_t owner,
				uint64_t tokens, uint32_t lo, uint32_t hi,
				struct egw_run *runs, uint32_t max_runs);

/** Every block of [lo, hi) is free (cached blocks count as free: the
 *  cache is flushed when they are what stands in the way). false for a
 *  bad range. */
bool egw_pool_range_idle(struct egw_pool *p, uint32_t lo, uint32_t hi);

/**
 * A pool cut into `nseg` equal segments of blocks, handed out one per
 * client (an encode port's payload.segments): which are taken. Segments
 * below `first` are never handed out (kept for the built-in producer).
 */
struct egw_pool_segs {
	uint32_t nseg;	 /**< 1..64 */
	uint32_t blocks; /**< per segment: segment s is [s * blocks, +blocks) */
	uint32_t first;	 /**< the first segment a client may take */
	uint64_t taken;	 /**< bit s: segment s is held */
};

/** Cut `p` into `nseg` segments, the first `first` kept back.
 *  0, or -EINVAL (nseg 0 or above 64, blocks not divisible, first > nseg). */
int egw_pool_segs_init(struct egw_pool_segs *t, const struct egw_pool *p,
		       uint32_t nseg, uint32_t first);

/** Take a segment for a client: the lowest one not held whose blocks are
 *  all free (the rooms of the client that held it before have ended).
 *  @return the segment, or -EBUSY when there is none. */
int egw_pool_segs_take(struct egw_pool_segs *t, struct egw_pool *p);

/** Its client is gone: the segment is given again once its blocks are
 *  all free (egw_pool_segs_take looks). */
void egw_pool_segs_put(struct egw_pool_segs *t, uint32_t seg);

/**
 * Free a run exactly as it was allocated (or as last shrunk).
 * @return 0; -ERANGE (beyond the pool), -ENOENT (no run starts there: a
 *   double free or a run inside another), -EINVAL (count differs),
 *   -EPERM (another owner). State is untouched on error.
 */
int egw_pool_free(struct egw_pool *p, uint64_t owner, struct egw_run run);

/**
 * Keep the first `keep` blocks of an allocated run and free the rest
 * (0 < keep < count). Same errors as egw_pool_free, -EINVAL for a bad keep.
 */
int egw_pool_shrink(struct egw_pool *p, uint64_t owner, struct egw_run run,
		    uint32_t keep);

/**
 * Turn on a cache of up to `cap` free single blocks (call once, at set-up;
 * the pool must be used from one thread, as always). A freed one-block run
 * goes to the cache and the next one-block allocation takes it back (last
 * freed, first out) without touching the free-run tree: a few nanoseconds
 * instead of a tree update. Cached blocks are free to every caller (frees
 * of them are refused as double frees, blocks_in_use does not count them);
 * only free_runs and largest_free_run leave them out. A request the tree
 * cannot meet as one run flushes the cache first, so the cache never
 * causes an -ENOSPC or a longer run list.
 * @return 0, -EINVAL (cap 0 or already on), -ENOMEM.
 */
int egw_pool_cache_enable(struct egw_pool *p, uint32_t cap);

/** The cache size the gateway uses: small next to any pool, enough to
 * absorb a burst of one-block rooms finishing. */
#define EGW_POOL_CACHE_DEFAULT 64

/** Give every cached block back to the tree (exact run statistics). */
void egw_pool_cache_flush(struct egw_pool *p);

/** Owner of the run starting at `block`, or EGW_OWNER_NONE. */
uint64_t egw_pool_owner(const struct egw_pool *p, uint32_t block);

void egw_pool_get_stats(const struct egw_pool *p, struct egw_pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* EGW_POOL_H */
