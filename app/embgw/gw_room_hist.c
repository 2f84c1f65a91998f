/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Delivered rooms by duration and size, per identity and peer, for the
 * metrics endpoint's histograms (gw_metrics.c). The worker that delivers a
 * room adds it: a short walk over fixed bounds, one increment per
 * histogram and two sums, single writer, no lock and no system call. The
 * metrics thread reads the same words with relaxed atomic loads: a scrape
 * may miss the room being added, never read a torn value.
 */
#include "gw.h"

/* Seconds: a room of a few MB over RDMA takes milliseconds, one that
 * waited for admission or a resume round can take seconds. */
const uint64_t gw_hist_time_ns[GW_HIST_TIME_BUCKETS] = {
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000, 100000000,
	250000000, 500000000, 1000000000, 2500000000, 5000000000,
	10000000000, 30000000000,
};

/* Bytes: one image's embedding is about 1-20 MB, a request's many images
 * up to a few hundred MB; 0.5 to 250 MB as the engines' own connectors
 * bucket them. */
const uint64_t gw_hist_size_bytes[GW_HIST_SIZE_BUCKETS] = {
	500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
	100000000, 250000000,
};

/* What a delivered rank holds: its tokens' embeddings, fill ids and mrope
 * positions (none for an aux-only rank) and the aux record. */
uint64_t
gw_delivered_bytes(const struct egw_pool *pool, const struct egw_act *a)
{
	const struct egw_pool_geom *g = egw_pool_geom(pool);
	uint64_t per = egw_pool_geom_unit_bytes(g, EGW_KIND_EMB) + 4 +
		       egw_pool_geom_unit_bytes(g, EGW_KIND_MROPE);

	return (a->dummy ? 0 : per * a->tokens) + g->aux_bytes;
}

static unsigned
bucket(const uint64_t *bounds, unsigned n, uint64_t v)
{
	unsigned b = 0;

	while (b < n && v > bounds[b])
		b++;
	return b; /* n: above the last bound (+Inf) */
}

/* Single writer: a relaxed load and store, no locked instruction. */
static inline void
bump(uint64_t *p, uint64_t by)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + by,
			 __ATOMIC_RELAXED);
}

void
gw_room_hist_add(struct gw_id *id, const struct egw_act *a)
{
	struct gw_room_hist *h;
	uint64_t bytes;

	bytes = gw_delivered_bytes(id->pool, a);
	bump(&id->delivered_bytes, bytes);
	if (id->hist == NULL || a->peer >= id->cfg->max_peers)
		return;
	h = &id->hist[a->peer];
	bump(&h->time[bucket(gw_hist_time_ns, GW_HIST_TIME_BUCKETS,
			     a->open_ns)], 1);
	bump(&h->size[bucket(gw_hist_size_bytes, GW_HIST_SIZE_BUCKETS,
			     bytes)], 1);
	bump(&h->time_sum_ns, a->open_ns);
	bump(&h->size_sum, bytes);
}

void
gw_room_hist_clear(struct gw_id *id, uint32_t peer)
{
	struct gw_room_hist *h;

	if (id->hist == NULL || peer >= id->cfg->max_peers)
		return;
	h = &id->hist[peer];
	for (unsigned b = 0; b <= GW_HIST_TIME_BUCKETS; b++)
		__atomic_store_n(&h->time[b], 0, __ATOMIC_RELAXED);
	for (unsigned b = 0; b <= GW_HIST_SIZE_BUCKETS; b++)
		__atomic_store_n(&h->size[b], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->time_sum_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->size_sum, 0, __ATOMIC_RELAXED);
}

void
gw_room_hist_read(const struct gw_id *id, uint32_t peer,
		  struct gw_room_hist *out)
{
	const struct gw_room_hist *h = &id->hist[peer];

	for (unsigned b = 0; b <= GW_HIST_TIME_BUCKETS; b++)
		out->time[b] = __atomic_load_n(&h->time[b], __ATOMIC_RELAXED);
	for (unsigned b = 0; b <= GW_HIST_SIZE_BUCKETS; b++)
		out->size[b] = __atomic_load_n(&h->size[b], __ATOMIC_RELAXED);
	out->time_sum_ns = __atomic_load_n(&h->time_sum_ns, __ATOMIC_RELAXED);
	out->size_sum = __atomic_load_n(&h->size_sum, __ATOMIC_RELAXED);
}
