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
#include "egw_err.h"

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
		.room = sl->room,
		.state = sl->state,
		.error = sl->error,
		.total_tokens = sl->total_tokens,
		.nruns = sl->nruns,
		.first_block = sl->first_block - c->g.first_block,
		.slot = slot,
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
		/* the mapping's blocks: a segment's, or the whole pool */
		uint32_t at = r.start - c->g.first_block;

		if (r.count == 0 || r.start < c->g.first_block ||
		    at >= c->g.nblocks || r.count > c->g.nblocks - at) {
			client_error("slot %u run %u (%u, %u) is outside the "
				     "mapped blocks %u..%u",
				     slot, i, r.start, r.count,
				     c->g.first_block,
				     c->g.first_block + c->g.nblocks - 1);
			return -EBADMSG;
		}
		/* numbered in the mapping, as a program of this ABI counts */
		r.start = at;
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
	b = sl->first_block - c->g.first_block;
	if (sl->first_block < c->g.first_block || b >= c->g.nblocks) {
		client_error("slot %u: first block %u outside the mapped "
			     "blocks",
			     slot, sl->first_block);
		return -EBADMSG;
	}
	memcpy(aux, region + (size_t)b * c->g.aux_bytes, sizeof(*aux));
	return 0;
}

/* the short reasons of the protocol's codes, by wire value (egw_err.h) */
#define BRIEF(n, w, key, text, brief) brief,
static const char *const err_brief[EGW_E_COUNT] = { EGW_ERR_LIST(BRIEF) };
#undef BRIEF

const char *
egw_client_strerror(int code)
{
	/* the gateway reports a protocol code as -(EGW_ERR_BASE + wire) */
	if (code == 0)
		return err_brief[0];
	if (egw_rc_is_err(code))
		return err_brief[egw_err_to_wire((enum egw_err)-code)];
	if (code <= -EGW_ERR_BASE)
		return "unknown embgw error";
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
