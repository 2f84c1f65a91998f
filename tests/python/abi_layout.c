/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prints the C layouts of egw_client.h's public structs, one line per
 * struct ("struct NAME SIZE") and per field ("field NAME OFFSET SIZE"),
 * plus "abi N": test_abi.py compares the Python package's ctypes copies
 * with this output.
 */
#include <stddef.h>
#include <stdio.h>

#include "egw_client.h"

#define S(t) printf("struct %s %zu\n", #t, sizeof(struct t))
#define F(t, f) printf("field %s %zu %zu\n", #f, offsetof(struct t, f), \
		       sizeof(((struct t *)0)->f))

static void
opts(void)
{
	S(egw_client_opts);
	F(egw_client_opts, size); F(egw_client_opts, flags);
	F(egw_client_opts, name); F(egw_client_opts, sq_entries);
	F(egw_client_opts, cq_entries); F(egw_client_opts, nslots);
	F(egw_client_opts, timeout_ms);
}

static void
geometry(void)
{
	S(egw_client_geometry);
	F(egw_client_geometry, flags); F(egw_client_geometry, client_id);
	F(egw_client_geometry, capacity_tokens);
	F(egw_client_geometry, block_tokens); F(egw_client_geometry, nblocks);
	F(egw_client_geometry, hidden_size); F(egw_client_geometry, dtype);
	F(egw_client_geometry, dtype_bytes); F(egw_client_geometry, aux_bytes);
	F(egw_client_geometry, mrope); F(egw_client_geometry, max_runs);
	F(egw_client_geometry, max_total_tokens);
	F(egw_client_geometry, lease_ms);
	F(egw_client_geometry, max_peers);
	F(egw_client_geometry, nslots); F(egw_client_geometry, sq_entries);
	F(egw_client_geometry, cq_entries);
	F(egw_client_geometry, first_block);
	F(egw_client_geometry, pool_bytes);
	F(egw_client_geometry, region_offset);
	F(egw_client_geometry, region_bytes);
}

static void
event_room_run(void)
{
	S(egw_client_event);
	F(egw_client_event, tag); F(egw_client_event, room);
	F(egw_client_event, result); F(egw_client_event, slot);
	F(egw_client_event, op); F(egw_client_event, state);
	F(egw_client_event, flags); F(egw_client_event, total_tokens);
	F(egw_client_event, nruns); F(egw_client_event, landed_tokens);
	S(egw_client_room);
	F(egw_client_room, room); F(egw_client_room, state);
	F(egw_client_room, error); F(egw_client_room, total_tokens);
	F(egw_client_room, nruns); F(egw_client_room, first_block);
	F(egw_client_room, slot);
	S(egw_client_run);
	F(egw_client_run, start); F(egw_client_run, count);
}

static void
aux_stats(void)
{
	S(egw_client_aux);
	F(egw_client_aux, total_tokens); F(egw_client_aux, hidden_size);
	F(egw_client_aux, dtype_bytes); F(egw_client_aux, mrope_delta);
	F(egw_client_aux, block_tokens); F(egw_client_aux, flags);
	F(egw_client_aux, cookie);
	S(egw_client_stats);
	F(egw_client_stats, updated_ns); F(egw_client_stats, pool_blocks);
	F(egw_client_stats, free_blocks);
	F(egw_client_stats, quarantined_blocks);
	F(egw_client_stats, admission_queue);
	F(egw_client_stats, cache_entries); F(egw_client_stats, cache_blocks);
	F(egw_client_stats, cache_pinned); F(egw_client_stats, reserved);
	F(egw_client_stats, cache_hits); F(egw_client_stats, cache_misses);
	F(egw_client_stats, cache_shared);
	F(egw_client_stats, cache_evictions);
	S(egw_client_peer);
	F(egw_client_peer, id);
	F(egw_client_peer, flags);
	F(egw_client_peer, name);
}

int
main(void)
{
	printf("abi %d\n", EGW_CLIENT_ABI_VERSION);
	opts();
	geometry();
	event_room_run();
	aux_stats();
	return 0;
}
