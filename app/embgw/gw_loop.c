/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker of one device, polling (as DPDK's l2fwd does): rx burst ->
 * node -> payload completions -> room sources -> timers -> tx flush, for
 * every identity the device carries. It stops on a signal, after
 * --duration-ms, or - with --exit-when-done - once every identity with a
 * bounded number of rooms has run them all.
 */
#include <rte_cycles.h>
#include <rte_lcore.h>

#include "gw_peers.h"
#include "gw_reload.h"
#include "gw_room_source.h"

static struct gw_loop_opts opts;
static uint32_t ids_bounded; /* identities whose sources have an end */
static uint32_t ids_finished;

void
gw_loop_init(const struct gw_loop_opts *o, uint32_t bounded_ids)
{
	opts = *o;
	ids_bounded = bounded_ids;
	ids_finished = 0;
}

/* An identity's timers, every GW_TICK_NS: a reload's new parameters, the
 * node's (retransmissions, deadlines, heartbeats, REGISTER), ARP, the driver's
 * rebuilt links, the flood (embgw-gen) and, in a test build, the test knobs;
 * then whether its rooms are all done. */
static void
timers(struct gw_id *id, uint64_t now)
{
	gw_reload_worker_poll(id, now); /* before the tick: new timers */
	egw_node_tick(id->node, now);
	gw_peers_poll(id, now);
	gw_id_arp_tick(id, now);
	gw_id_payload_changes(id, now);
#ifdef GW_TEST_HOOKS
	if (id->knobs.on)
		gw_test_knobs_tick(id);
#endif
	if (opts.flood_tick != NULL)
		opts.flood_tick(id, now);
	if (opts.exit_when_done && !id->finished &&
	    gw_room_sources_remaining(id) == 0) {
		id->finished = true; /* keeps serving until all are */
		if (__atomic_add_fetch(&ids_finished, 1, __ATOMIC_SEQ_CST) ==
		    ids_bounded)
			gw_force_quit = true;
	}
	id->next_tick = now + GW_TICK_NS;
}

int
gw_loop_worker(void *arg)
{
	struct gw_dev *d = arg;
	uint64_t stop_at = opts.duration_ns ? gw_now_ns() + opts.duration_ns :
			   UINT64_MAX;
	uint64_t began = rte_get_tsc_cycles();

	GW_LOG(INFO, "port %s: worker on lcore %u (%u identit%s)\n",
		d->cfg->name, rte_lcore_id(), d->nids, d->nids > 1 ? "ies" : "y");
	while (!gw_force_quit) {
		uint64_t t0 = rte_get_tsc_cycles();
		uint64_t now = gw_tsc_ns(t0);
		uint32_t work;

		d->now = now;
		work = gw_dev_rx_burst(d, now);

		gw_dev_link_check(d, now);

		for (uint16_t i = 0; i < d->nids; i++)
			work += gw_id_payload_poll(d->ids[i], now);
		/* new rooms as soon as they are due, not on a timer tick */
		for (uint16_t i = 0; i < d->nids; i++)
			work += gw_room_sources_poll(d->ids[i], now);
		for (uint16_t i = 0; i < d->nids; i++)
			if (now >= d->ids[i]->next_tick) {
				timers(d->ids[i], now);
				work++;
			}
		gw_dev_flush(d);
		if (now >= stop_at)
			gw_force_quit = true;
		/* CPU per datagram without the busy-poll spin: only
		 * iterations that did something count as busy */
		if (work)
			d->st.busy_cycles += rte_get_tsc_cycles() - t0;
		/* published as it goes: the metrics endpoint's busy share */
		d->st.run_cycles = t0 - began;
		/* alive, for the watchdog (gw_notify.c): a plain store
		 * of our own counter, no system call on the worker */
		__atomic_store_n(&d->loops, d->loops + 1, __ATOMIC_RELAXED);
	}
	d->st.run_cycles = rte_get_tsc_cycles() - began;
	d->now = 0; /* frames sent from here on (the drain) read the clock */
	return 0;
}
