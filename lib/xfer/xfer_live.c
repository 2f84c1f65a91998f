/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Live changes of an engine's configuration (a reload): timers and the
 * limits that size nothing. What sizes the tables allocated at create -
 * max_rooms, max_runs_per_room - and what the creator owns - the pool
 * geometry, max_peers, window_keys, the emit callback - stay as they
 * are; a change of the first two is refused, the others are not read.
 *
 * Rooms in flight keep the deadlines they were given (egw_xfer.h says
 * which): a reload never makes a room fail earlier, or later, than it
 * was promised when the deadline was set. What is measured afresh on
 * every tick - peer death from the last word heard, progress in a
 * round, the wait for resume memory, the retransmission ceiling - uses
 * the new values from the next call.
 */
#include <errno.h>

#include "xfer_core.h"

int
xfer_core_conf_check(const struct xfer_core *core,
		     const struct egw_xfer_conf *c)
{
	if (c == NULL || c->max_rooms != core->conf.max_rooms ||
	    c->max_runs_per_room != core->conf.max_runs_per_room ||
	    c->pipeline_depth == 0 || c->pipeline_depth >= EGW_XFER_PIPE ||
	    c->timers.rto_ns == 0 || c->timers.rto_max_ns < c->timers.rto_ns)
		return -EINVAL;
	return 0;
}

void
xfer_core_conf_apply(struct xfer_core *core, const struct egw_xfer_conf *c,
		     uint64_t now)
{
	uint64_t hb = c->timers.heartbeat_ns;

	core->conf.timers = c->timers;
	core->conf.max_blocks_per_round = c->max_blocks_per_round;
	core->conf.pipeline_depth = c->pipeline_depth;
	core->conf.announce_early = c->announce_early;
	/* a shorter heartbeat interval starts now: a peer whose death
	 * deadline shrank with it hears from us before it could give up */
	for (uint32_t p = 0; p < core->conf.max_peers; p++)
		if (core->peers[p].used && core->peers[p].next_hb > now + hb)
			core->peers[p].next_hb = now + hb;
	core->peers_due = 0; /* deadlines moved: the next tick looks */
}
