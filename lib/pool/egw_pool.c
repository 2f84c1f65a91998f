/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block pool. The free map is a segment tree over the blocks; each node
 * keeps the longest free prefix, suffix and inner run of its range, with
 * lazy "set free"/"set used" marks, so first fit, marking a run and the
 * largest free run are all O(log n). Run ownership is kept only at a run's
 * first block (length and owner), which makes every free check O(1) and
 * lets a bad free be refused before anything changes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egw_pool.h"

enum { MARK_NONE = 0, MARK_FREE = 1, MARK_USED = 2 };
enum { RUN_LAST = 1, RUN_CACHED = 2 };

struct seg {
	uint32_t pre, suf, best;
	uint8_t mark;
};

struct egw_pool {
	struct egw_pool_geom geom;
	uint32_t nblocks;
	uint32_t leaves;      /* power of two >= nblocks; padding is "used" */
	struct seg *tree;     /* 2 * leaves nodes, 1-based */
	uint32_t *run_len;    /* at a run's first block: its length, else 0 */
	uint64_t *run_owner;  /* at a run's first block: its owner */
	uint8_t *run_flags;   /* RUN_LAST at an allocated run's last block,
			       * RUN_CACHED on a block in the cache */
	/* Single-block cache (off unless enabled): freed one-block runs are
	 * kept, still marked used in the tree, and handed out again without
	 * touching it - what rte_mempool's per-lcore cache does for objects.
	 * RUN_CACHED tells a cached block from an allocated one. */
	uint32_t *cache;
	uint32_t ncache, cache_cap;
	uint8_t *mem;
	/* per kind, worked out once: egw_pool_addr is called for every
	 * write and token, and must not redo the geometry each time */
	uint8_t *base[EGW_KIND_MAX]; /* NULL: a kind without bytes */
	size_t unit[EGW_KIND_MAX];   /* bytes of a token (aux: a block) */
	size_t block_bytes[EGW_KIND_MAX];
	bool own_mem;
	uint32_t free_blocks;
	uint32_t free_runs;
	struct egw_pool_stats st;
};

/* ---- geometry ---------------------------------------------------------- */

int
egw_pool_geom_check(const struct egw_pool_geom *g)
{
	if (g == NULL || g->block_tokens == 0 || g->capacity_tokens == 0 ||
	    g->capacity_tokens % g->block_tokens != 0 || g->hidden_size == 0 ||
	    (g->dtype_bytes != 1 && g->dtype_bytes != 2 && g->dtype_bytes != 4) ||
	    g->aux_bytes < sizeof(struct egw_aux_rec) || g->aux_bytes % 8 != 0)
		return -EINVAL;
	/* every offset must fit in size_t with room to spare */
	if ((uint64_t)g->hidden_size * g->dtype_bytes * g->capacity_tokens >
	    ((uint64_t)1 << 46))
		return -EINVAL;
	return 0;
}

size_t
egw_pool_geom_unit_bytes(const struct egw_pool_geom *g, enum egw_kind k)
{
	switch (k) {
	case EGW_KIND_EMB:
		return (size_t)g->hidden_size * g->dtype_bytes;
	case EGW_KIND_FILL_IDS:
		return sizeof(int32_t);
	case EGW_KIND_MROPE:
		return g->mrope ? 3 * sizeof(int32_t) : 0;
	case EGW_KIND_AUX:
		return g->aux_bytes;
	default:
		return 0;
	}
}

size_t
egw_pool_geom_offset(const struct egw_pool_geom *g, enum egw_kind k,
		     uint32_t block, uint32_t token)
{
	if (k == EGW_KIND_AUX)
		return (size_t)block * g->aux_bytes;
	return ((size_t)block * g->block_tokens + token) *
	       egw_pool_geom_unit_bytes(g, k);
}

size_t
egw_pool_geom_region_bytes(const struct egw_pool_geom *g, enum egw_kind k)
{
	uint32_t nb = g->capacity_tokens / g->block_tokens;

	return egw_pool_geom_offset(g, k, nb, 0);
}

static size_t
align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

size_t
egw_pool_geom_mem_bytes(const struct egw_pool_geom *g)
{
	size_t total = 0;

	for (int k = 0; k < EGW_KIND_MAX; k++)
		total += align_up(
			egw_pool_geom_region_bytes(g, (enum egw_kind)k),
			EGW_POOL_ALIGN);
	return total;
}

/* ---- segment tree ------------------------------------------------------ */

static void
seg_set(struct seg *s, uint32_t len, uint8_t mark)
{
	uint32_t v = mark == MARK_FREE ? len : 0;

	s->pre = s->suf = s->best = v;
	s->mark = mark;
}

static void
seg_push(struct egw_pool *p, uint32_t node, uint32_t len)
{
	struct seg *s = &p->tree[node];

	if (s->mark == MARK_NONE || len == 1)
		return;
	seg_set(&p->tree[2 * node], len / 2, s->mark);
	seg_set(&p->tree[2 * node + 1], len / 2, s->mark);
	s->mark = MARK_NONE;
}

static void
seg_pull(struct egw_pool *p, uint32_t node, uint32_t len)
{
	const struct seg *l = &p->tree[2 * node], *r = &p->tree[2 * node + 1];
	struct seg *s = &p->tree[node];
	uint32_t half = len / 2, mid = l->suf + r->pre;

	s->pre = l->pre == half ? half + r->pre : l->pre;
	s->suf = r->suf == half ? half + l->suf : r->suf;
	s->best = l->best > r->best ? l->best : r->best;
	if (mid > s->best)
		s->best = mid;
}

/* Mark [a, b) free or used; node covers [lo, lo + len). */
static void
seg_update(struct egw_pool *p, uint32_t node, uint32_t lo, uint32_t len,
	   uint32_t a, uint32_t b, uint8_t mark)
{
	if (b <= lo || lo + len <= a)
		return;
	if (a <= lo && lo + len <= b) {
		seg_set(&p->tree[node], len, mark);
		return;
	}
	seg_push(p, node, len);
	seg_update(p, 2 * node, lo, len / 2, a, b, mark);
	seg_update(p, 2 * node + 1, lo + len / 2, len / 2, a, b, mark);
	seg_pull(p, node, len);
}

/* One block: an iterative descent and climb, no recursion (the common
 * case of single-block runs, e.g. small requests and fragmented pools). */
static void
seg_point(struct egw_pool *p, uint32_t b, uint8_t mark)
{
	uint32_t path[32], node = 1, lo = 0, len = p->leaves;
	int d = 0;

	while (len > 1) {
		seg_push(p, node, len);
		path[d++] = node;
		len /= 2;
		if (b < lo + len) {
			node = 2 * node;
		} else {
			node = 2 * node + 1;
			lo += len;
		}
	}
	seg_set(&p->tree[node], 1, mark);
	/* climb only while something changes: a node's summary is a function
	 * of its children's, so an unchanged one leaves every ancestor valid
	 * (in a fragmented pool most flips settle a few levels up) */
	for (len = 2; d > 0; len *= 2) {
		struct seg *s = &p->tree[path[--d]];
		uint32_t pre = s->pre, suf = s->suf, best = s->best;

		seg_pull(p, path[d], len);
		if (s->pre == pre && s->suf == suf && s->best == best)
			break;
	}
}

static void
seg_mark(struct egw_pool *p, uint32_t s, uint32_t c, uint8_t mark)
{
	if (c == 1)
		seg_point(p, s, mark);
	else
		seg_update(p, 1, 0, p->leaves, s, s + c, mark);
}

/* ---- queries confined to a range of blocks ------------------------------ */

/* A range's summary: its longest free prefix, suffix and run, its length. */
struct span {
	uint32_t pre, suf, best, len;
};

static struct span
span_join(struct span l, struct span r)
{
	struct span s = {
		.pre = l.pre == l.len ? l.len + r.pre : l.pre,
		.suf = r.suf == r.len ? r.len + l.suf : r.suf,
		.best = l.best > r.best ? l.best : r.best,
		.len = l.len + r.len,
	};

	if (l.suf + r.pre > s.best)
		s.best = l.suf + r.pre;
	return s;
}

/* Summary of [a, b) inside the node covering [lo, lo + len): O(log n). */
static struct span
seg_span(struct egw_pool *p, uint32_t node, uint32_t lo, uint32_t len,
	 uint32_t a, uint32_t b)
{
	const struct seg *s = &p->tree[node];

	if (b <= lo || lo + len <= a)
		return (struct span){ 0, 0, 0, 0 };
	if (a <= lo && lo + len <= b)
		return (struct span){ s->pre, s->suf, s->best, len };
	seg_push(p, node, len);
	return span_join(seg_span(p, 2 * node, lo, len / 2, a, b),
			 seg_span(p, 2 * node + 1, lo + len / 2, len / 2, a,
				  b));
}

/* Lowest start of a free run of k blocks inside the node covering
 * [lo, lo + len), whose best is at least k (seg_find from any node). */
static uint32_t
seg_find_in(struct egw_pool *p, uint32_t node, uint32_t lo, uint32_t len,
	    uint32_t k)
{
	while (len > 1) {
		const struct seg *l, *r;

		seg_push(p, node, len);
		l = &p->tree[2 * node];
		r = &p->tree[2 * node + 1];
		if (l->best >= k) {
			node = 2 * node;
		} else if (l->suf + r->pre >= k) {
			return lo + len / 2 - l->suf;
		} else {
			node = 2 * node + 1;
			lo += len / 2;
		}
		len /= 2;
	}
	return lo;
}

/* Lowest start of a free run of at least k blocks (caller checked root). */
static uint32_t
seg_find(struct egw_pool *p, uint32_t k)
{
	return seg_find_in(p, 1, 0, p->leaves, k);
}

/*
 * Lowest start of a free run of k blocks lying wholly inside [a, b): the
 * range's covering nodes are visited left to right with the free run that
 * ends at the current node's start (*cur); a run that crosses into a node
 * shows as *cur plus its prefix, one inside it as its best. -1 if none.
 */
static int64_t
seg_find_range(struct egw_pool *p, uint32_t node, uint32_t lo, uint32_t len,
	       uint32_t a, uint32_t b, uint32_t k, uint32_t *cur)
{
	const struct seg *s = &p->tree[node];
	int64_t at;

	if (b <= lo || lo + len <= a)
		return -1;
	if (a <= lo && lo + len <= b) {
		if (*cur + s->pre >= k)
			return (int64_t)lo - *cur;
		if (s->best >= k)
			return seg_find_in(p, node, lo, len, k);
		*cur = s->suf == len ? *cur + len : s->suf;
		return -1;
	}
	seg_push(p, node, len);
	at = seg_find_range(p, 2 * node, lo, len / 2, a, b, k, cur);
	if (at >= 0)
		return at;
	return seg_find_range(p, 2 * node + 1, lo + len / 2, len / 2, a, b, k,
			      cur);
}

/* ---- create / destroy -------------------------------------------------- */

int
egw_pool_create(const struct egw_pool_geom *g, void *mem, size_t mem_len,
		struct egw_pool **out)
{
	struct egw_pool *p;
	size_t need, off = 0;

	if (out == NULL || egw_pool_geom_check(g) != 0)
		return -EINVAL;
	need = egw_pool_geom_mem_bytes(g);
	if (mem != NULL &&
	    (mem_len < need || (uintptr_t)mem % EGW_POOL_ALIGN != 0))
		return -EINVAL;

	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->geom = *g;
	p->nblocks = g->capacity_tokens / g->block_tokens;
	p->leaves = 1;
	while (p->leaves < p->nblocks)
		p->leaves *= 2;
	p->tree = calloc(2 * (size_t)p->leaves, sizeof(*p->tree));
	p->run_len = calloc(p->nblocks, sizeof(*p->run_len));
	p->run_owner = calloc(p->nblocks, sizeof(*p->run_owner));
	p->run_flags = calloc(p->nblocks, sizeof(*p->run_flags));
	if (mem == NULL) {
		mem = aligned_alloc(EGW_POOL_ALIGN, need);
		if (mem != NULL)
			memset(mem, 0, need);
		p->own_mem = true;
	}
	p->mem = mem;
	if (p->tree == NULL || p->run_len == NULL || p->run_owner == NULL ||
	    p->run_flags == NULL || p->mem == NULL) {
		egw_pool_destroy(p);
		return -ENOMEM;
	}
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		size_t u = egw_pool_geom_unit_bytes(g, (enum egw_kind)k);

		p->base[k] = u != 0 ? p->mem + off : NULL;
		p->unit[k] = u;
		p->block_bytes[k] = k == EGW_KIND_AUX ? u : u * g->block_tokens;
		off += align_up(egw_pool_geom_region_bytes(g, (enum egw_kind)k),
				EGW_POOL_ALIGN);
	}
	/* everything used, then the real blocks free: padding never allocates */
	seg_set(&p->tree[1], p->leaves, MARK_USED);
	seg_update(p, 1, 0, p->leaves, 0, p->nblocks, MARK_FREE);
	p->free_blocks = p->nblocks;
	p->free_runs = 1;
	*out = p;
	return 0;
}

void
egw_pool_destroy(struct egw_pool *p)
{
	if (p == NULL)
		return;
	if (p->own_mem)
		free(p->mem);
	free(p->tree);
	free(p->run_len);
	free(p->run_owner);
	free(p->run_flags);
	free(p->cache);
	free(p);
}

const struct egw_pool_geom *
egw_pool_geom(const struct egw_pool *p)
{
	return &p->geom;
}

uint32_t
egw_pool_nblocks(const struct egw_pool *p)
{
	return p->nblocks;
}

void *
egw_pool_mem(const struct egw_pool *p)
{
	return p->mem;
}

void *
egw_pool_region(const struct egw_pool *p, enum egw_kind k)
{
	return (unsigned)k < EGW_KIND_MAX ? p->base[k] : NULL;
}

void *
egw_pool_addr(const struct egw_pool *p, enum egw_kind k, uint32_t block,
	      uint32_t token)
{
	if ((unsigned)k >= EGW_KIND_MAX || p->base[k] == NULL ||
	    block >= p->nblocks)
		return NULL;
	/* the aux record is one per block: token 0 only */
	if (token >= (k == EGW_KIND_AUX ? 1 : p->geom.block_tokens))
		return NULL;
	return p->base[k] + (size_t)block * p->block_bytes[k] +
	       (size_t)token * p->unit[k];
}

/* ---- alloc / free ------------------------------------------------------ */

/*
 * Free neighbours of [s, s + c), for the free-run count, in O(1): the block
 * before such a range is either free or the last block of an allocated run,
 * the block after it free or the first block of one (allocated runs tile
 * the used blocks exactly), so the run bookkeeping answers without a tree
 * descent.
 */
static uint32_t
free_neighbours(const struct egw_pool *p, uint32_t s, uint32_t c)
{
	uint32_t n = 0;

	if (s > 0 && !(p->run_flags[s - 1] & RUN_LAST))
		n++;
	if (s + c < p->nblocks && p->run_len[s + c] == 0)
		n++;
	return n;
}

static void
mark_used(struct egw_pool *p, uint64_t owner, uint32_t s, uint32_t c)
{
	seg_mark(p, s, c, MARK_USED);
	/* the run was carved out of one maximal free run: it leaves 0..2 */
	p->free_runs = p->free_runs - 1 + free_neighbours(p, s, c);
	p->free_blocks -= c;
	p->run_len[s] = c;
	p->run_owner[s] = owner;
	p->run_flags[s + c - 1] = RUN_LAST;
}

static void
mark_free(struct egw_pool *p, uint32_t s, uint32_t c)
{
	p->run_flags[s + c - 1] = 0;
	p->free_runs = p->free_runs + 1 - free_neighbours(p, s, c);
	seg_mark(p, s, c, MARK_FREE);
	p->free_blocks += c;
}

/* Validate a caller's run against the bookkeeping; nothing changes. */
static int
check_run(const struct egw_pool *p, uint64_t owner, struct egw_run run)
{
	if (run.count == 0 || run.start >= p->nblocks ||
	    run.count > p->nblocks - run.start)
		return -ERANGE;
	if (p->run_len[run.start] == 0 ||
	    (p->run_flags[run.start] & RUN_CACHED))
		return -ENOENT; /* a cached block is free to its callers */
	if (p->run_owner[run.start] != owner)
		return -EPERM;
	if (p->run_len[run.start] != run.count)
		return -EINVAL;
	return 0;
}

int
egw_pool_cache_enable(struct egw_pool *p, uint32_t cap)
{
	if (p == NULL || cap == 0 || p->cache != NULL)
		return -EINVAL;
	p->cache = calloc(cap, sizeof(*p->cache));
	if (p->cache == NULL)
		return -ENOMEM;
	p->cache_cap = cap;
	return 0;
}

void
egw_pool_cache_flush(struct egw_pool *p)
{
	while (p != NULL && p->ncache > 0) {
		uint32_t b = p->cache[--p->ncache];

		p->run_flags[b] = RUN_LAST;
		p->run_len[b] = 0;
		p->run_owner[b] = 0;
		mark_free(p, b, 1);
	}
}

/* A run written with one 8-byte store: callers pass runs on by value and
 * read them back whole, which two 4-byte stores would stall (no store
 * forwarding from two narrower stores into one wider load). */
static inline void
run_store(struct egw_run *dst, uint32_t start, uint32_t count)
{
	uint64_t v;
	struct egw_run r = { start, count };

	_Static_assert(sizeof(r) == sizeof(v), "egw_run is 8 bytes");
	memcpy(&v, &r, sizeof(v));
	memcpy(dst, &v, sizeof(v));
}

static int alloc_from_tree(struct egw_pool *p, uint64_t owner,
			   uint32_t nblocks, struct egw_run *runs,
			   uint32_t max_runs);

int
egw_pool_alloc(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
	       struct egw_run *runs, uint32_t max_runs)
{
	if (__builtin_expect(nblocks == 1 && p != NULL && p->ncache > 0 &&
			     runs != NULL && max_runs > 0 &&
			     owner != EGW_OWNER_NONE, 1)) {
		/* the block is a one-block run already: only its owner changes */
		uint32_t b = p->cache[--p->ncache];

		p->run_flags[b] = RUN_LAST;
		p->run_owner[b] = owner;
		run_store(&runs[0], b, 1);
		p->st.allocs++;
		return 1;
	}
	return alloc_from_tree(p, owner, nblocks, runs, max_runs);
}

/* Out of line: keeps the cached path above a leaf without a frame. */
static __attribute__((noinline)) int
alloc_from_tree(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
		struct egw_run *runs, uint32_t max_runs)
{
	uint32_t left = nblocks, n = 0;

	if (p == NULL || runs == NULL || nblocks == 0 || max_runs == 0 ||
	    owner == EGW_OWNER_NONE)
		return -EINVAL;
	if (nblocks > p->free_blocks + p->ncache) {
		p->st.alloc_fail++;
		return -ENOSPC;
	}
	/* the tree alone cannot give one run: give it the cached blocks */
	if (p->ncache > 0 && p->tree[1].best < nblocks)
		egw_pool_cache_flush(p);
	while (left > 0) {
		uint32_t best = p->tree[1].best;
		uint32_t take = best >= left ? left : best;
		uint32_t s;

		if (n == max_runs) {
			/* roll back: the request cannot be met in max_runs */
			while (n > 0) {
				n--;
				p->run_len[runs[n].start] = 0;
				mark_free(p, runs[n].start, runs[n].count);
			}
			p->st.alloc_fail++;
			return -ENOSPC;
		}
		s = seg_find(p, take);
		mark_used(p, owner, s, take);
		run_store(&runs[n], s, take);
		n++;
		left -= take;
	}
	p->st.allocs++;
	return (int)n;
}

/* The tree's allocation confined to [lo, hi): the same choice of runs
 * (first fit, else the largest free runs first), rolled back whole when
 * it cannot be met. */
static int
alloc_in_range(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
	       uint32_t lo, uint32_t hi, struct egw_run *runs,
	       uint32_t max_runs)
{
	uint32_t left = nblocks, n = 0;

	while (left > 0) {
		uint32_t best = seg_span(p, 1, 0, p->leaves, lo, hi).best;
		uint32_t take = best >= left ? left : best, cur = 0;
		int64_t s;

		if (take == 0 || n == max_runs) {
			while (n > 0) {
				n--;
				p->run_len[runs[n].start] = 0;
				mark_free(p, runs[n].start, runs[n].count);
			}
			return -ENOSPC;
		}
		s = seg_find_range(p, 1, 0, p->leaves, lo, hi, take, &cur);
		mark_used(p, owner, (uint32_t)s, take);
		run_store(&runs[n], (uint32_t)s, take);
		n++;
		left -= take;
	}
	return (int)n;
}

int
egw_pool_alloc_range(struct egw_pool *p, uint64_t owner, uint32_t nblocks,
		     uint32_t lo, uint32_t hi, struct egw_run *runs,
		     uint32_t max_runs)
{
	int n;

	if (p == NULL || runs == NULL || nblocks == 0 || max_runs == 0 ||
	    owner == EGW_OWNER_NONE || lo >= hi || hi > p->nblocks)
		return -EINVAL;
	if (nblocks > hi - lo) {
		p->st.alloc_fail++;
		return -ENOSPC;
	}
	n = alloc_in_range(p, owner, nblocks, lo, hi, runs, max_runs);
	/* cached blocks look used to the tree: give them back, try again */
	if (n == -ENOSPC && p->ncache > 0) {
		egw_pool_cache_flush(p);
		n = alloc_in_range(p, owner, nblocks, lo, hi, runs, max_runs);
	}
	if (n < 0)
		p->st.alloc_fail++;
	else
		p->st.allocs++;
	return n;
}

int
egw_pool_alloc_range_tokens(struct egw_pool *p, uint64_t owner, uint64_t tokens,
			    uint32_t lo, uint32_t hi, struct egw_run *runs,
			    uint32_t max_runs)
{
	uint64_t nb;

	if (p == NULL || tokens == 0)
		return -EINVAL;
	nb = (tokens + p->geom.block_tokens - 1) / p->geom.block_tokens;
	if (nb > UINT32_MAX)
		return -ENOSPC;
	return egw_pool_alloc_range(p, owner, (uint32_t)nb, lo, hi, runs,
				    max_runs);
}

bool
egw_pool_range_idle(struct egw_pool *p, uint32_t lo, uint32_t hi)
{
	if (p == NULL || lo >= hi || hi > p->nblocks)
		return false;
	if (seg_span(p, 1, 0, p->leaves, lo, hi).best == hi - lo)
		return true;
	if (p->ncache == 0)
		return false;
	egw_pool_cache_flush(p);
	return seg_span(p, 1, 0, p->leaves, lo, hi).best == hi - lo;
}

int
egw_pool_segs_init(struct egw_pool_segs *t, const struct egw_pool *p,
		   uint32_t nseg, uint32_t first)
{
	if (t == NULL || p == NULL || nseg == 0 || nseg > 64 ||
	    p->nblocks % nseg != 0 || first > nseg)
		return -EINVAL;
	*t = (struct egw_pool_segs){ .nseg = nseg,
				     .blocks = p->nblocks / nseg,
				     .first = first };
	return 0;
}

int
egw_pool_segs_take(struct egw_pool_segs *t, struct egw_pool *p)
{
	for (uint32_t s = t->first; s < t->nseg; s++)
		if (!(t->taken & (1ull << s)) &&
		    egw_pool_range_idle(p, s * t->blocks,
					(s + 1) * t->blocks)) {
			t->taken |= 1ull << s;
			return (int)s;
		}
	return -EBUSY;
}

void
egw_pool_segs_put(struct egw_pool_segs *t, uint32_t seg)
{
	if (seg < t->nseg)
		t->taken &= ~(1ull << seg);
}

int
egw_pool_alloc_tokens(struct egw_pool *p, uint64_t owner, uint64_t tokens,
		      struct egw_run *runs, uint32_t max_runs)
{
	uint64_t nb;

	if (p == NULL || tokens == 0)
		return -EINVAL;
	nb = (tokens + p->geom.block_tokens - 1) / p->geom.block_tokens;
	if (nb > UINT32_MAX)
		return -ENOSPC;
	return egw_pool_alloc(p, owner, (uint32_t)nb, runs, max_runs);
}

int
egw_pool_free(struct egw_pool *p, uint64_t owner, struct egw_run run)
{
	int rc;

	if (p == NULL)
		return -EINVAL;
	rc = check_run(p, owner, run);
	if (rc != 0) {
		p->st.refused++;
		return rc;
	}
	p->st.frees++;
	if (run.count == 1 && p->ncache < p->cache_cap) {
		/* a one-block run to the cache: the tree is not touched */
		p->run_flags[run.start] = RUN_LAST | RUN_CACHED;
		p->run_owner[run.start] = 0;
		p->cache[p->ncache++] = run.start;
		return 0;
	}
	p->run_len[run.start] = 0;
	p->run_owner[run.start] = 0;
	mark_free(p, run.start, run.count);
	return 0;
}

int
egw_pool_shrink(struct egw_pool *p, uint64_t owner, struct egw_run run,
		uint32_t keep)
{
	int rc;

	if (p == NULL)
		return -EINVAL;
	rc = check_run(p, owner, run);
	if (rc == 0 && (keep == 0 || keep >= run.count))
		rc = -EINVAL;
	if (rc != 0) {
		p->st.refused++;
		return rc;
	}
	p->run_len[run.start] = keep;
	p->run_flags[run.start + keep - 1] = RUN_LAST; /* before: the tail's neighbour */
	mark_free(p, run.start + keep, run.count - keep);
	return 0;
}

struct egw_aux_rec *
egw_pool_aux_init(struct egw_pool *p, uint32_t block, uint32_t total_tokens,
		  int32_t mrope_delta, uint64_t cookie)
{
	struct egw_aux_rec *a = egw_pool_addr(p, EGW_KIND_AUX, block, 0);

	if (a == NULL)
		return NULL;
	memset(a, 0, p->geom.aux_bytes);
	a->total_tokens = total_tokens;
	a->hidden_size = p->geom.hidden_size;
	a->dtype_bytes = p->geom.dtype_bytes;
	a->block_tokens = p->geom.block_tokens;
	a->mrope_delta = mrope_delta;
	a->cookie = cookie;
	return a;
}

uint64_t
egw_pool_owner(const struct egw_pool *p, uint32_t block)
{
	if (p == NULL || block >= p->nblocks || p->run_len[block] == 0 ||
	    (p->run_flags[block] & RUN_CACHED))
		return EGW_OWNER_NONE;
	return p->run_owner[block];
}

void
egw_pool_get_stats(const struct egw_pool *p, struct egw_pool_stats *st)
{
	*st = p->st;
	st->blocks_total = p->nblocks;
	st->blocks_in_use = p->nblocks - p->free_blocks - p->ncache;
	st->cached_blocks = p->ncache;
	st->free_runs = p->free_runs;
	st->largest_free_run = p->tree[1].best;
}
