/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Until inference engines attach through a client API, the gateway carries
 * its own workload:
 *  - encode side: a producer that answers any INIT for an unknown room by
 *    synthesising that room's output - the length is the room id's low 32
 *    bits, the bytes lib/pattern's function of (room id, token);
 *  - language side: a driver that opens rooms at a given concurrency and
 *    verifies every byte delivered against the same pattern.
 * Both sides derive everything from the room id, so they share no state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include "egw_pattern.h"
#include "gw.h"

#define MAX_SRC_RUNS 512

struct room_rec {
	uint64_t room;
	uint64_t opened_at;
	uint16_t done, failed;
	bool active;
};

struct gw_work {
	struct gw_work_opts o;
	uint64_t run_id;
	uint64_t start_at;
	uint32_t peer;            /* the one peer rooms go to ... */
	bool all_peers;           /* ... or all of them in turn */
	uint32_t opened, active, finished;
	struct room_rec *recs;
	uint64_t *lat;
	uint32_t nlat;
	uint64_t bytes_verified, bad_bytes, verified_rooms;
	uint32_t ok, failed;
	uint32_t last_failed;     /* 1 + index of the last room opened that
				   * failed (0: none) */
	uint64_t fail_reason[EGW_E_COUNT]; /* by egw_err_to_wire() */
	uint64_t first_open, last_done;
	/* encode side */
	uint64_t produced, produce_refused, tx_ok, tx_failed;
};

/* ---- encode side: producer -------------------------------------------- */

static void
produce(struct gw_port *p, uint64_t room, uint16_t nranks, uint64_t now)
{
	struct egw_run runs[MAX_SRC_RUNS];
	uint32_t total = (uint32_t)room;
	int n;

	if (total == 0 || total > EGW_XFER_MAX_TOKENS) {
		p->work->produce_refused++;
		return;
	}
	n = egw_node_alloc_src(p->node, room, total, runs, MAX_SRC_RUNS);
	if (n < 0) {
		/* no memory now: INIT is refused as unknown and retried */
		p->work->produce_refused++;
		return;
	}
	if (egw_pattern_fill(p->pool, room, total, runs, (uint32_t)n) != 0 ||
	    egw_node_sender_open(p->node, room, nranks, now) != 0 ||
	    egw_node_input(p->node, room, total, runs, (uint32_t)n, now) != 0) {
		egw_node_release(p->node, room, runs, (uint32_t)n);
		p->work->produce_refused++;
		return;
	}
	p->work->produced++;
}

/* ---- language side: driver and verifier ------------------------------- */

static struct room_rec *
rec_of(struct gw_work *w, uint64_t room)
{
	uint32_t i = (uint32_t)((room >> 32) & GW_ROOM_INDEX_MASK);

	if ((room >> 56) != (w->run_id & 0xff) || i >= w->o.drive ||
	    w->recs[i].room != room)
		return NULL;
	return &w->recs[i];
}

/* Mismatches against the pattern; the built-in producer's length is the
 * room id's low 32 bits. */
static uint64_t
verify(struct gw_port *p, const struct egw_act *a)
{
	return (a->tokens != (uint32_t)a->room) +
	       egw_pattern_check(p->pool, a->room, a->tokens, a->runs,
				 a->nruns, a->aux_block, a->dummy);
}

static void
room_finished(struct gw_work *w, struct room_rec *r, uint64_t now)
{
	r->active = false;
	w->active--;
	w->finished++;
	w->last_done = now;
	if (r->failed == 0) {
		w->ok++;
		w->lat[w->nlat++] = now - r->opened_at;
	} else {
		uint32_t i = (uint32_t)(r - w->recs);

		w->failed++;
		if (i + 1 > w->last_failed)
			w->last_failed = i + 1;
	}
}

static void
on_deliver(void *ctx, const struct egw_act *a)
{
	struct gw_port *p = ctx;
	struct gw_work *w = p->work;
	struct room_rec *r = rec_of(w, a->room);
	uint64_t bad = verify(p, a);
	uint64_t now = gw_now_ns();

	w->bad_bytes += bad;
	if (!bad) {
		const struct egw_pool_geom *g = egw_pool_geom(p->pool);
		uint64_t per = egw_geom_unit_bytes(g, EGW_KIND_EMB) + 4 +
			       egw_geom_unit_bytes(g, EGW_KIND_MROPE);

		w->bytes_verified += (a->dummy ? 0 : per * a->tokens) + g->aux_bytes;
	}
	egw_node_release(p->node, a->room, a->runs, a->nruns);
	if (r == NULL || !r->active)
		return;
	if (bad)
		r->failed++;
	else
		r->done++;
	if (r->done + r->failed == w->o.ranks)
		room_finished(w, r, now);
}

static void
on_done(void *ctx, uint64_t room, uint16_t rank, enum egw_err e, bool is_sender)
{
	struct gw_port *p = ctx;
	struct gw_work *w = p->work;
	struct room_rec *r;

	(void)rank;
	if (is_sender) {
		if (e == EGW_E_OK)
			w->tx_ok++;
		else
			w->tx_failed++;
		if (e != EGW_E_OK)
			GW_LOG(INFO, "room %#lx failed on the encode side: %s\n",
				(unsigned long)room, egw_strerror(e));
		return;
	}
	if (e == EGW_E_OK)
		return; /* counted at delivery */
	w->fail_reason[egw_err_to_wire(e)]++;
	GW_LOG(INFO, "room %#lx rank %u failed: %s\n",
		(unsigned long)room, rank, egw_strerror(e));
	r = rec_of(w, room);
	if (r == NULL || !r->active)
		return;
	r->failed++;
	if (r->done + r->failed == w->o.ranks)
		room_finished(w, r, gw_now_ns());
}

static void
on_unknown_room(void *ctx, uint64_t room, uint16_t nranks, uint64_t now)
{
	struct gw_port *p = ctx;

	if (p->work->o.produce)
		produce(p, room, nranks, now);
}

static void
on_tx(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len)
{
	gw_net_send_udp(ctx, ip, port, buf, len);
}

static int
on_peer_up(void *ctx, uint32_t peer, const struct egw_register *r)
{
	struct gw_port *p = ctx;
	int rc = p->dops->connect(p->drv, peer, r);

	if (rc != 0)
		GW_LOG(ERR, "port %s: cannot reach the memory of peer %s "
			"(%s driver): %s\n", p->cfg->name, r->name, p->dops->name,
			strerror(-rc));
	else
		GW_LOG(INFO, "port %s: peer %s registered (%u blocks)\n",
			p->cfg->name, r->name, r->pool_blocks);
	return rc;
}

static int
on_post(void *ctx, uint32_t peer, const struct egw_write *wr, uint32_t n,
	uint64_t cookie)
{
	struct gw_port *p = ctx;
	int rc = p->dops->post(p->drv, peer, wr, n, cookie);

	/* a refused batch: the node fails its room at once */
	if (rc != 0)
		GW_LOG(ERR, "port %s: payload driver refused a batch: %s\n",
		       p->cfg->name, egw_strerror(rc));
	/* test knob: a QP error after the Nth batch (what a link failure
	 * does), so the driver's recovery runs for real */
	if (++p->st.posts == p->faults.qp_error_at &&
	    p->dops->inject_qp_error != NULL) {
		GW_LOG(WARNING, "port %s: test fault: QP towards peer %u put "
		       "in error after batch %lu\n", p->cfg->name, peer,
		       (unsigned long)p->st.posts);
		p->dops->inject_qp_error(p->drv, peer);
	}
	return rc;
}

static void
on_endpoint(void *ctx, uint32_t peer, uint32_t *qpn, uint32_t *psn,
	    uint16_t *mtu)
{
	struct gw_port *p = ctx;

	if (p->dops->endpoint != NULL)
		p->dops->endpoint(p->drv, peer, qpn, psn, mtu);
}

const struct egw_node_ops gw_node_ops = {
	.tx = on_tx,
	.endpoint = on_endpoint,
	.peer_up = on_peer_up,
	.post = on_post,
	.deliver = on_deliver,
	.done = on_done,
	.unknown_room = on_unknown_room,
};

int
gw_work_create(struct gw_port *p, const struct gw_work_opts *o)
{
	struct gw_work *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return -ENOMEM;
	w->o = *o;
	/* --peer NAME, --peer all, or this port's first peer */
	if (strcmp(o->peer, "all") == 0) {
		w->all_peers = true;
	} else if (o->peer[0] != '\0') {
		int i = egw_node_peer_index(p->node, o->peer);

		if (i < 0) {
			GW_LOG(ERR, "port %s: --peer %s: no such peer in the "
				"configuration\n", p->cfg->name, o->peer);
			free(w);
			return -ENOENT;
		}
		w->peer = (uint32_t)i;
	}
	if (o->drive > 0 && p->cfg->npeers == 0) {
		GW_LOG(ERR, "port %s: --drive needs a peer to fetch from\n",
			p->cfg->name);
		free(w);
		return -ENOENT;
	}
	if (w->o.ranks == 0)
		w->o.ranks = 1;
	if (w->o.concurrency == 0)
		w->o.concurrency = 1;
	if (w->o.drive > 0) {
		w->recs = calloc(w->o.drive, sizeof(*w->recs));
		w->lat = calloc(w->o.drive, sizeof(*w->lat));
		if (w->recs == NULL || w->lat == NULL) {
			free(w->recs);
			free(w->lat);
			free(w);
			return -ENOMEM;
		}
	}
	/* identities of one generator must not share room ids */
	w->run_id = (o->seed ? o->seed : (gw_now_ns() >> 10)) + o->identity;
	w->start_at = gw_now_ns() + (uint64_t)o->start_delay_ms * 1000000ull;
	p->work = w;
	return 0;
}

static void open_room(struct gw_port *p, struct gw_work *w, uint64_t now);

/* Before the first room: the peer's (or with --peer all, every peer's)
 * first REGISTER. After that rooms open even while a peer is away, and
 * fail at once if it was declared dead. */
static bool
peers_ready(const struct gw_port *p, const struct gw_work *w)
{
	if (!w->all_peers)
		return egw_node_peer_ready(p->node, w->peer);
	for (uint32_t i = 0; i < p->cfg->npeers; i++)
		if (!egw_node_peer_ready(p->node, i))
			return false;
	return true;
}

void
gw_work_tick(struct gw_port *p, uint64_t now)
{
	struct gw_work *w = p->work;

	/* called every poll-loop iteration: leave early when nothing is due
	 * (a closed loop refills as soon as a room finishes, not a tick
	 * later, or the tick would cap the generator's rate) */
	if (w->o.drive == 0 || w->opened == w->o.drive || now < w->start_at ||
	    (w->o.rate == 0 && w->active >= w->o.concurrency))
		return;
	if (w->opened == 0 && !peers_ready(p, w))
		return;
	/* open loop: the schedule decides, not completions (bounded by
	 * --concurrency as a safety cap on rooms in flight) */
	if (w->o.rate > 0) {
		uint64_t due = (now - w->start_at) / 1000 * w->o.rate / 1000000 + 1;

		if (due > w->o.drive)
			due = w->o.drive;
		while (w->opened < due && w->active < w->o.concurrency)
			open_room(p, w, now);
		return;
	}
	while (w->active < w->o.concurrency && w->opened < w->o.drive)
		open_room(p, w, now);
}

static void
open_room(struct gw_port *p, struct gw_work *w, uint64_t now)
{
	uint32_t i = w->opened++;
	/* --peer all: every peer in turn (a room's ranks stay together) */
	uint32_t peer = w->all_peers ? i % p->cfg->npeers : w->peer;
	uint32_t len = w->o.lengths[i % w->o.nlengths];
	struct room_rec *r = &w->recs[i];

	r->room = ((w->run_id & 0xff) << 56) | ((uint64_t)i << 32) | len;
	/* open loop: latency counts from the room's scheduled start, so a
	 * generator that falls behind does not hide the queueing delay */
	r->opened_at = w->o.rate > 0 ?
		       w->start_at + (uint64_t)i * 1000000000ull / w->o.rate : now;
	r->active = true;
	w->active++;
	if (w->first_open == 0)
		w->first_open = now;
	for (uint16_t k = 0; k < w->o.ranks; k++) {
		bool dummy = w->o.dummy_rank && w->o.ranks > 1 &&
			     k == w->o.ranks - 1;
		int rc = egw_node_receiver_open(p->node, r->room, k, w->o.ranks, peer,
					  dummy, now);

		if (rc != 0) {
			r->failed++;
			if (egw_rc_is_err(rc))
				w->fail_reason[egw_err_to_wire((enum egw_err)-rc)]++;
			else
				GW_LOG(ERR, "room %#lx rank %u not opened: %s\n",
				       (unsigned long)r->room, k, egw_strerror(rc));
		}
	}
	if (r->failed == w->o.ranks)
		room_finished(w, r, now);
}

bool
gw_work_finished(const struct gw_port *p)
{
	return p->work->o.drive > 0 && p->work->finished == p->work->o.drive;
}

bool
gw_work_drives(const struct gw_port *p)
{
	return p->work->o.drive > 0;
}

bool
gw_work_wants_exit(const struct gw_port *p)
{
	return p->work->o.exit_when_done && gw_work_finished(p);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Latency at per-mille q of n sorted samples. */
static double
pct_of(const uint64_t *lat, uint64_t n, uint32_t q)
{
	uint64_t i = n * q / 1000;

	return (double)lat[i < n ? i : n - 1];
}

static void
print_latency(FILE *f, const uint64_t *lat, uint64_t n, uint64_t ok,
	      uint64_t bytes, double secs)
{
	fprintf(f, "latency INIT->Success: p50 %.3f ms, p90 %.3f ms, p99 "
		"%.3f ms, p99.9 %.3f ms; throughput %.1f MB/s, %.0f rooms/s "
		"over %.3f s\n", pct_of(lat, n, 500) / 1e6,
		pct_of(lat, n, 900) / 1e6, pct_of(lat, n, 990) / 1e6,
		pct_of(lat, n, 999) / 1e6, secs > 0 ? bytes / secs / 1e6 : 0.0,
		secs > 0 ? ok / secs : 0.0, secs);
}

/* --identities: the generator's figures over all its identities (one
 * latency distribution, one time span from the first open to the last
 * finish), after each identity's own report. */
void
gw_work_report_total(const struct gw_port *ports, uint16_t n, FILE *f)
{
	uint64_t rooms = 0, ok = 0, failed = 0, unfinished = 0, bytes = 0;
	uint64_t bad = 0, nlat = 0, first = UINT64_MAX, last = 0, leaked = 0;
	uint64_t *lat;
	uint16_t driving = 0;

	for (uint16_t i = 0; i < n; i++) {
		if (ports[i].work == NULL)
			return; /* set-up failed half-way: nothing to sum */
		nlat += ports[i].work->nlat;
	}
	lat = malloc((nlat ? nlat : 1) * sizeof(*lat));
	if (lat == NULL)
		return;
	nlat = 0;
	for (uint16_t i = 0; i < n; i++) {
		const struct gw_work *w = ports[i].work;
		struct egw_pool_stats ps;

		egw_pool_get_stats(ports[i].pool, &ps);
		leaked += ps.blocks_in_use;
		if (w->o.drive == 0)
			continue;
		driving++;
		rooms += w->o.drive;
		ok += w->ok;
		failed += w->failed;
		unfinished += w->o.drive - w->finished;
		bytes += w->bytes_verified;
		bad += w->bad_bytes;
		if (w->first_open && w->first_open < first)
			first = w->first_open;
		if (w->last_done > last)
			last = w->last_done;
		memcpy(lat + nlat, w->lat, w->nlat * sizeof(*lat));
		nlat += w->nlat;
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	fprintf(f, "generator: %u identities (%u driving), %lu rooms (%lu ok, "
		"%lu failed, %lu not finished), %lu bytes verified, %lu bad\n",
		n, driving, (unsigned long)rooms, (unsigned long)ok,
		(unsigned long)failed, (unsigned long)unfinished,
		(unsigned long)bytes, (unsigned long)bad);
	if (nlat > 0)
		print_latency(f, lat, nlat, ok, bytes,
			      last > first ? (double)(last - first) / 1e9 : 0);
	fprintf(f, "result-total: identities=%u rooms=%lu bytes=%lu errors=%lu "
		"leaked=%lu\n", n, (unsigned long)rooms, (unsigned long)bytes,
		(unsigned long)(failed + bad + unfinished), (unsigned long)leaked);
	free(lat);
}

void
gw_work_report(const struct gw_port *p, FILE *f)
{
	struct gw_work *w = p->work;
	struct egw_pool_stats ps;
	struct egw_node_stats ns;
	struct egw_xfer_stats xs;
	uint64_t drops = 0;
	double secs;

	egw_pool_get_stats(p->pool, &ps);
	egw_node_get_stats(p->node, &ns);
	for (int i = 0; i < EGW_ND_MAX; i++)
		drops += ns.drops[i];
	fprintf(f, "port %s: %lu datagrams in, %lu out; dropped before the "
		"state machines: %lu (unknown peer %lu, malformed/unauthenticated "
		"%lu, replay %lu); ARP misses %lu\n", p->cfg->name,
		(unsigned long)ns.rx_datagrams, (unsigned long)ns.tx_datagrams,
		(unsigned long)drops,
		(unsigned long)ns.drops[EGW_ND_UNKNOWN_PEER],
		(unsigned long)ns.drops[EGW_ND_PROTO],
		(unsigned long)ns.drops[EGW_ND_REPLAY],
		(unsigned long)p->st.arp_miss);
	if (p->owner == p) {
		struct rte_eth_stats es;

		/* frames lost below the protocol (it retransmits them) */
		if (rte_eth_stats_get(p->port_id, &es) == 0 &&
		    (p->st.tx_full || es.imissed || es.ierrors || es.rx_nombuf))
			fprintf(f, "device %s: %lu frames not sent (tx ring full or "
				"no mbuf), %lu missed on rx (ring full), %lu rx "
				"errors, %lu rx without mbuf\n", p->cfg->name,
				(unsigned long)p->st.tx_full,
				(unsigned long)es.imissed,
				(unsigned long)es.ierrors,
				(unsigned long)es.rx_nombuf);
	}
	if (p->st.run_cycles > 0) {
		double hz = (double)rte_get_tsc_hz();
		uint64_t dg = 0;

		/* the worker serves all the device's identities */
		for (uint16_t i = 0; i < p->nids; i++) {
			struct egw_node_stats is;

			egw_node_get_stats(p->owner[i].node, &is);
			dg += is.rx_datagrams + is.tx_datagrams;
		}

		/* busy-poll spin excluded: what one datagram costs the core */
		fprintf(f, "worker %s: busy %.1f%% of %.3f s; %.0f ns of busy "
			"CPU per datagram in+out\n", p->cfg->name,
			100.0 * (double)p->st.busy_cycles / (double)p->st.run_cycles,
			(double)p->st.run_cycles / hz,
			dg ? (double)p->st.busy_cycles / hz * 1e9 / (double)dg : 0.0);
	}
	{
		struct egw_payload_stats ds;

		p->dops->stats(p->drv, &ds);
		if (ds.batches > 0)
			fprintf(f, "payload driver: %s, %lu batches, %lu writes, "
				"%lu bytes, %lu failed batches, %lu QP resets; "
				"payload driver: %.0f cycles per block\n",
				p->dops->name, (unsigned long)ds.batches,
				(unsigned long)ds.writes, (unsigned long)ds.bytes,
				(unsigned long)ds.failed_batches,
				(unsigned long)ds.qp_resets,
				ds.blocks ? (double)ds.cycles / ds.blocks : 0.0);
	}
	if (p->st.flood > 0)
		fprintf(f, "flood: %lu junk datagrams sent (%lu/s requested)\n",
			(unsigned long)p->st.flood,
			(unsigned long)p->faults.flood_pps);
	if (egw_node_sender(p->node) != NULL)
		fprintf(f, "encode: %lu rooms produced (%lu refused: no memory "
			"or bad length), %lu ok, %lu failed; %u blocks in use\n",
			(unsigned long)w->produced,
			(unsigned long)w->produce_refused,
			(unsigned long)w->tx_ok, (unsigned long)w->tx_failed,
			ps.blocks_in_use);
	if (w->o.drive == 0) {
		fprintf(f, "result-encode: port=%s rooms=%lu ok=%lu failed=%lu "
			"leaked=%u\n", p->cfg->name, (unsigned long)w->produced, (unsigned long)w->tx_ok,
			(unsigned long)w->tx_failed, ps.blocks_in_use);
		return;
	}
	egw_receiver_get_stats(egw_node_receiver(p->node), &xs);
	qsort(w->lat, w->nlat, sizeof(w->lat[0]), cmp_u64);
	secs = w->last_done > w->first_open ?
	       (double)(w->last_done - w->first_open) / 1e9 : 0;
	fprintf(f, "language: %u rooms (%u ok, %u failed, %u not finished), "
		"%lu bytes verified, %lu bad, %lu resume rounds, %lu "
		"retransmissions\n", w->o.drive, w->ok, w->failed,
		w->o.drive - w->finished, (unsigned long)w->bytes_verified,
		(unsigned long)w->bad_bytes, (unsigned long)xs.resumes,
		(unsigned long)xs.retransmits);
	if (w->nlat > 0)
		print_latency(f, w->lat, w->nlat, w->ok, w->bytes_verified, secs);
	for (uint16_t e = 1; e < EGW_E_COUNT; e++)
		if (w->fail_reason[e])
			fprintf(f, "  failed: %lu x %s\n",
				(unsigned long)w->fail_reason[e],
				egw_strerror(egw_err_from_wire(e)));
	if (w->last_failed > 0) {
		/* after a fault: did rooms opened later succeed? */
		uint32_t after = 0;

		for (uint32_t i = w->last_failed; i < w->o.drive; i++)
			after += !w->recs[i].active && w->recs[i].failed == 0 &&
				 w->recs[i].room != 0;
		fprintf(f, "recovery: %u rooms opened after the last failed one "
			"(#%u) succeeded, of %u\n", after, w->last_failed - 1,
			w->o.drive - w->last_failed);
	}
	fprintf(f, "result: port=%s rooms=%u bytes=%lu rounds=%lu errors=%lu "
		"leaked=%u\n", p->cfg->name, w->o.drive, (unsigned long)w->bytes_verified,
		(unsigned long)xs.resumes,
		(unsigned long)(w->failed + w->bad_bytes + (w->o.drive - w->finished)),
		ps.blocks_in_use);
}
