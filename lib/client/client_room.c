/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A room's slot read out for the engine: its state, its run list and its
 * aux record. The gateway is trusted with the data but not with the
 * addresses: a run list is checked against the pool before anyone
 * computes an address from it.
 */
#include <errno.h>
#include <string.h>

#include "client_priv.h"

/* The slot of an open room of ours; NULL with *rc set: -ECONNRESET the
 * client lost the gateway, -ERANGE, -ENOENT. */
static const struct egw_attach_slot *
our_slot_rc(const struct egw_client *c, uint32_t slot, int *rc)
{
	const struct egw_attach_slot *sl;

	if (slot >= c->map.nslots) {
		client_error("slot %u out of range (%u slots)", slot,
			     c->map.nslots);
		*rc = -ERANGE;
		return NULL;
	}
	sl = egw_attach_slot_at(&c->map, slot);
	if (c->slots[slot].room == 0 ||
	    __atomic_load_n(&sl->room, __ATOMIC_ACQUIRE) !=
		    c->slots[slot].room) {
		client_error("slot %u holds no open room of this client", slot);
		*rc = -ENOENT;
		return NULL;
	}
	return sl;
}

int
egw_client_room_info(const struct egw_client *c, uint32_t slot,
		     struct egw_client_room *r)
{
	int rc = client_alive(c, false);
	const struct egw_attach_slot *sl = rc != 0 ? NULL :
					   our_slot_rc(c, slot, &rc);

	if (sl == NULL)
		return rc;
	*r = (struct egw_client_room){
		.room = sl->room, .state = sl->state, .error = sl->error,
		.total_tokens = sl->total_tokens, .nruns = sl->nruns,
		.first_block = sl->first_block, .slot = slot,
	};
	return 0;
}

int
egw_client_room_runs(const struct egw_client *c, uint32_t slot,
		     struct egw_client_run *runs, uint32_t max)
{
	int rc = client_alive(c, false);
	const struct egw_attach_slot *sl = rc != 0 ? NULL :
					   our_slot_rc(c, slot, &rc);
	uint64_t blocks = 0;
	uint32_t nruns, total;

	if (sl == NULL)
		return rc;
	nruns = sl->nruns;
	total = sl->total_tokens;
	if (nruns > c->map.max_runs) {
		client_error("slot %u lists %u runs, at most %u", slot, nruns,
			     c->map.max_runs);
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < nruns; i++) {
		struct egw_client_run r = { sl->runs[i].start,
					    sl->runs[i].count };

		if (r.count == 0 || r.start >= c->g.nblocks ||
		    r.count > c->g.nblocks - r.start) {
			client_error("slot %u run %u (%u, %u) is outside the "
				     "pool's %u blocks", slot, i, r.start,
				     r.count, c->g.nblocks);
			return -EBADMSG;
		}
		blocks += r.count;
		if (i < max)
			runs[i] = r;
	}
	/* the runs cover the total, the last one possibly in part; an
	 * aux-only room lists one block whatever its total */
	if (nruns > 0 && total > 0 && !(nruns == 1 && blocks == 1) &&
	    (blocks * c->g.block_tokens < total ||
	     (blocks - 1) * c->g.block_tokens >= total)) {
		client_error("slot %u: %llu blocks of %u tokens do not hold "
			     "%u tokens", slot, (unsigned long long)blocks,
			     c->g.block_tokens, total);
		return -EBADMSG;
	}
	return (int)nruns;
}

int
egw_client_room_aux(const struct egw_client *c, uint32_t slot,
		    struct egw_client_aux *aux)
{
	int rc = client_alive(c, false);
	const struct egw_attach_slot *sl = rc != 0 ? NULL :
					   our_slot_rc(c, slot, &rc);
	uint64_t bytes;
	const uint8_t *region = egw_client_region(c, EGW_CLIENT_AUX, &bytes);
	uint32_t b;

	if (sl == NULL)
		return rc;
	if (region == NULL) {
		client_error("the pool has no aux kind");
		return -ENODATA;
	}
	b = sl->first_block;
	if (b >= c->g.nblocks) {
		client_error("slot %u: first block %u outside the pool", slot,
			     b);
		return -EBADMSG;
	}
	memcpy(aux, region + (size_t)b * c->g.aux_bytes, sizeof(*aux));
	return 0;
}

const char *
egw_client_strerror(int code)
{
	/* the protocol's error codes (doc/protocol.md), as -(1000 + w) */
	static const char *const embgw[] = {
		[1] = "unknown room", [2] = "bad rank",
		[3] = "block_tokens mismatch", [4] = "allocation mismatch",
		[5] = "zero blocks", [6] = "bad blocks",
		[7] = "beyond the total", [8] = "wrong state",
		[9] = "total changed", [10] = "bad status", [11] = "busy",
		[12] = "too large", [13] = "no slot", [14] = "duplicate room",
		[15] = "timeout: bootstrap", [16] = "timeout: input",
		[17] = "timeout: round", [18] = "pool exhausted",
		[19] = "peer dead", [20] = "aborted",
		[21] = "transport: payload writes failed",
		[22] = "unknown peer",
	};
	int w = -code - 1000;

	if (code == 0)
		return "ok";
	if (code <= -1000) {
		if (w < (int)(sizeof(embgw) / sizeof(embgw[0])) &&
		    embgw[w] != NULL)
			return embgw[w];
		return "unknown embgw error";
	}
	return code < 0 ? strerror(-code) : "not an error code";
}

const char *
egw_client_state_name(uint32_t state)
{
	static const char *const names[] = {
		"Failed", "Bootstrapping", "WaitingForInput", "Transferring",
		"Success",
	};

	return state < sizeof(names) / sizeof(names[0]) ? names[state]
							 : "unknown";
}
