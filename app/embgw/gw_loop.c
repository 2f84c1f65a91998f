/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker of one device, polling (as DPDK's l2fwd does): rx burst ->
 * node -> payload completions -> room sources -> timers -> tx flush, for
 * every identity the device carries. When a run of turns finds nothing,
 * the port's idle policy (gw_idle.h) pauses and then sleeps, never past
 * the next deadline of its timers (id_deadline), so that an idle gateway
 * gives its core back and wakes only when something is due, or after
 * max_sleep_us, the bound on how late it sees what arrives meanwhile.
 * It stops on a signal, after --duration-ms, or - with --exit-when-done -
 * once every identity with a bounded number of rooms has run them all.
 */
#include <sys/prctl.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "gw_idle.h"
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

/* An identity's timers, at most every GW_TICK_NS: on the first turn past
 * the last run's GW_TICK_NS, which for a sleeping worker is its next
 * wake-up (a deadline's or max_sleep_us's). A reload's new parameters,
 * the node's (retransmissions, deadlines, heartbeats, REGISTER), ARP,
 * the driver's rebuilt links, the flood (embgw-gen) and, in a test build,
 * the test knobs; then whether its rooms are all done. */
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

/* The earliest time an identity's timers have something to do if no
 * frame, completion or engine command comes first: the node's next
 * deadline (egw_node_next_deadline: REGISTER back-off, heartbeats, peer
 * deaths, parked windows; the regular tick while rooms are in flight),
 * its ARP requests, the flood's pacing and a test build's held datagram.
 * Never before its next regular tick: a busy identity keeps the 100 us
 * pace, a quiet one sleeps to its deadline. */
static uint64_t
id_deadline(const struct gw_id *id, uint64_t now)
{
	uint64_t t = egw_node_next_deadline(id->node, now), arp;

	if (id->dev->link_up) {
		arp = id->arp_due > id->dev->link_settled_at ?
			      id->arp_due :
			      id->dev->link_settled_at;
		t = arp < t ? arp : t;
	}
	if (opts.flood_tick != NULL && id->flood.pps > 0)
		t = now;
#ifdef GW_TEST_HOOKS
	if (id->knobs.on &&
	    (id->knobs.held != NULL || id->knobs.junk_per_tick > 0))
		t = now;
#endif
	return t > id->next_tick ? t : id->next_tick;
}

/* The earliest time the loop has something to run without traffic: an
 * identity's deadline, the link check, the end of --duration-ms. What
 * another thread hands the worker (a reload, peers, the driver's rebuilt
 * links) is no deadline: it is taken at the next wake-up, within
 * max_sleep_us. */
static uint64_t
next_timer(const struct gw_dev *d, uint64_t stop_at, uint64_t now)
{
	uint64_t t = stop_at < d->next_link_check ? stop_at :
						    d->next_link_check;

	for (uint16_t i = 0; i < d->nids; i++) {
		uint64_t e = id_deadline(d->ids[i], now);

		t = e < t ? e : t;
	}
	return t;
}

/* One sleep of an idle worker, counted: the cycles it took and how far
 * past the asked time the kernel woke it. */
static void
idle_sleep(struct gw_dev *d, uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	uint64_t t0 = rte_get_tsc_cycles();
	uint64_t took, asked;

	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	took = rte_get_tsc_cycles() - t0;
	asked = ns * rte_get_tsc_hz() / 1000000000ull;
	d->st.idle_sleeps++;
	d->st.idle_cycles += took;
	if (took > asked && took - asked > d->st.idle_late_max_cycles)
		d->st.idle_late_max_cycles = took - asked;
}

int
gw_loop_worker(void *arg)
{
	struct gw_dev *d = arg;
	uint64_t stop_at = opts.duration_ns ? gw_now_ns() + opts.duration_ns :
			   UINT64_MAX;
	uint64_t began = rte_get_tsc_cycles(), busy_since = 0, end;
	bool backoff = d->cfg->idle.mode == EGW_IDLE_BACKOFF;
	struct gw_idle idle;

	gw_idle_init(&idle, backoff, d->cfg->idle.max_sleep_us * 1000ull);
	/* a sleeping worker wakes when it asked to, not up to the default
	 * 50 us of timer slack later: the slack is the bound's to spend */
	if (backoff && prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0) != 0)
		GW_LOG(WARNING,
		       "port %s: timer slack not set, sleeps may "
		       "overrun by up to 50 us\n",
		       d->cfg->name);
	if (backoff)
		GW_LOG(INFO,
		       "port %s: worker on lcore %u (%u identit%s), "
		       "sleeps of at most %u us when idle\n",
		       d->cfg->name, rte_lcore_id(), d->nids,
		       d->nids > 1 ? "ies" : "y", d->cfg->idle.max_sleep_us);
	else
		GW_LOG(INFO,
		       "port %s: worker on lcore %u (%u identit%s), "
		       "busy polling\n",
		       d->cfg->name, rte_lcore_id(), d->nids,
		       d->nids > 1 ? "ies" : "y");
	while (!gw_force_quit) {
		uint64_t t0 = rte_get_tsc_cycles();
		uint64_t now = gw_tsc_ns(t0);
		uint32_t work, ticks = 0;
		uint64_t sleep_ns = 0, next;

		/* the last turn did work and waited for nothing: it ended
		 * where this one starts, one clock read for both */
		if (busy_since != 0) {
			d->st.busy_cycles += t0 - busy_since;
			busy_since = 0;
		}
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
				ticks++;
			}
		gw_dev_flush(d);
		if (now >= stop_at)
			gw_force_quit = true;
		/* CPU per datagram without the busy-poll spin: only
		 * iterations that did something count as busy. A turn with
		 * work never waits after it (gw_idle_next spins), so the next
		 * turn's clock read ends it; a turn of timers alone may be
		 * followed by a sleep, so it reads the clock now. */
		if (work != 0)
			busy_since = t0;
		else if (ticks != 0)
			d->st.busy_cycles += rte_get_tsc_cycles() - t0;
		/* published as it goes: the metrics endpoint's busy share */
		d->st.run_cycles = t0 - began;
		/* alive, for the watchdog (gw_notify.c): a plain store
		 * of our own counter, no system call on the worker */
		__atomic_store_n(&d->loops, d->loops + 1, __ATOMIC_RELAXED);
		/* the deadlines matter only to a worker about to sleep */
		next = work == 0 && gw_idle_may_sleep(&idle) ?
			       next_timer(d, stop_at, now) :
			       UINT64_MAX;
		switch (gw_idle_next(&idle, work, now, next, &sleep_ns)) {
		case GW_IDLE_PAUSE:
			rte_pause();
			break;
		case GW_IDLE_SLEEP:
			idle_sleep(d, sleep_ns);
			break;
		case GW_IDLE_SPIN:
			break;
		}
	}
	end = rte_get_tsc_cycles();
	if (busy_since != 0)
		d->st.busy_cycles += end - busy_since;
	d->st.run_cycles = end - began;
	d->now = 0; /* frames sent from here on (the drain) read the clock */
	return 0;
}
