/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's published state (doc/client.md, "Published stats"): the
 * gateway writes it as a sequence lock, so a reader copies it between two
 * equal even reads of the sequence and tries again otherwise.
 */
#include <errno.h>
#include <string.h>

#include "client_priv.h"

#define STATS_TRIES 64

int
egw_client_stats(struct egw_client *c, struct egw_client_stats *out)
{
	const struct egw_attach_stats *sh = &c->map.area->stats;
	struct egw_attach_stats st;

	egw_client_beat(c);
	for (int i = 0; i < STATS_TRIES; i++) {
		uint32_t seq = __atomic_load_n(&sh->seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		memcpy(&st, (const void *)sh, sizeof(st));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sh->seq, __ATOMIC_RELAXED) != seq)
			continue;
		if (seq == 0) {
			client_error("the gateway has not published its "
				     "stats yet");
			return -ENODATA;
		}
		*out = (struct egw_client_stats){
			.updated_ns = st.updated_ns,
			.pool_blocks = st.pool_blocks,
			.free_blocks = st.free_blocks,
			.quarantined_blocks = st.quarantined_blocks,
			.admission_queue = st.admission_queue,
			.cache_entries = st.cache_entries,
			.cache_blocks = st.cache_blocks,
			.cache_pinned = st.cache_pinned,
			.cache_hits = st.cache_hits,
			.cache_misses = st.cache_misses,
			.cache_shared = st.cache_shared,
			.cache_evictions = st.cache_evictions,
		};
		return 0;
	}
	client_error("the gateway was writing its stats on every try");
	return -EAGAIN;
}
