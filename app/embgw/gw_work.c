/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Until inference engines attach through a client API, the gateway carries
 * its own workload:
 *  - encode side: a producer that answers any INIT for an unknown room by
 *    synthesising that room's output - the length is the room id's low 32
 *    bits, the bytes a pattern seeded by the room id;
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
	uint64_t fail_reason[EGW_E_MAX];
	uint64_t first_open, last_done;
	/* encode side */
	uint64_t produced, produce_refused, tx_ok, tx_failed;
};

/* ---- the pattern, a pure function of (room, token) -------------------- */

static uint64_t
mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void
pattern_emb(uint64_t room, uint32_t token, uint8_t *out, size_t len)
{
	uint64_t s = mix(room ^ ((uint64_t)token << 20));

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(s + i);
		size_t n = len - i < 8 ? len - i : 8;

		memcpy(out + i, &v, n);
	}
}

static void
pattern_token(uint64_t room, uint32_t t, int32_t *fill, int32_t *mrope)
{
	*fill = (int32_t)(t ^ (uint32_t)room);
	if (mrope != NULL) {
		mrope[0] = (int32_t)t;
		mrope[1] = (int32_t)(t * 3u);
		mrope[2] = (int32_t)(room >> 32);
	}
}

/* ---- encode side: producer -------------------------------------------- */

static void
produce(struct gw_port *p, uint64_t room, uint16_t nranks, uint64_t now)
{
	const struct egw_pool_geom *g = egw_pool_geom(p->pool);
	size_t eb = egw_geom_unit_bytes(g, EGW_KIND_EMB);
	struct egw_run runs[MAX_SRC_RUNS];
	uint32_t total = (uint32_t)room, t = 0;
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
	for (int i = 0; i < n; i++)
		for (uint32_t b = runs[i].start; b < runs[i].start + runs[i].count; b++)
			for (uint32_t k = 0; k < g->block_tokens && t < total; k++, t++) {
				pattern_emb(room, t, egw_pool_addr(p->pool, EGW_KIND_EMB, b, k), eb);
				pattern_token(room, t,
					      egw_pool_addr(p->pool, EGW_KIND_FILL_IDS, b, k),
					      egw_pool_addr(p->pool, EGW_KIND_MROPE, b, k));
			}
	egw_pool_aux_init(p->pool, runs[0].start, total, -7, room);
	if (egw_node_open_tx(p->node, room, nranks, now) != 0 ||
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

static uint64_t
verify(struct gw_port *p, const struct egw_act *a)
{
	const struct egw_pool_geom *g = egw_pool_geom(p->pool);
	size_t eb = egw_geom_unit_bytes(g, EGW_KIND_EMB);
	const struct egw_aux_rec *aux =
		egw_pool_addr(p->pool, EGW_KIND_AUX, a->aux_block, 0);
	uint8_t want[65536];
	uint64_t bad = 0;
	uint32_t t = 0;

	if (aux == NULL || aux->total_tokens != a->tokens ||
	    aux->cookie != a->room || aux->mrope_delta != -7 ||
	    a->tokens != (uint32_t)a->room || eb > sizeof(want))
		bad++;
	if (a->dummy || bad)
		return bad;
	for (uint32_t i = 0; i < a->nruns; i++)
		for (uint32_t b = a->runs[i].start; b < a->runs[i].start + a->runs[i].count; b++)
			for (uint32_t k = 0; k < g->block_tokens && t < a->tokens; k++, t++) {
				int32_t f, m[3];
				const int32_t *gm = egw_pool_addr(p->pool, EGW_KIND_MROPE, b, k);

				pattern_emb(a->room, t, want, eb);
				if (memcmp(want, egw_pool_addr(p->pool, EGW_KIND_EMB, b, k), eb))
					bad++;
				pattern_token(a->room, t, &f, gm ? m : NULL);
				if (f != *(const int32_t *)egw_pool_addr(p->pool, EGW_KIND_FILL_IDS, b, k))
					bad++;
				if (gm != NULL && memcmp(m, gm, sizeof(m)))
					bad++;
			}
	return bad + (t != a->tokens);
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
	w->fail_reason[e]++;
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

static void
on_post(void *ctx, uint32_t peer, const struct egw_write *wr, uint32_t n,
	uint64_t cookie)
{
	struct gw_port *p = ctx;

	if (p->dops->post(p->drv, peer, wr, n, cookie) != 0) {
		/* reported as a failed completion by the worker loop (not from
		 * here: the engine must not be re-entered), so the room fails
		 * and frees its blocks instead of waiting for its deadline */
		GW_LOG(ERR, "port %s: payload driver refused a batch\n",
		       p->cfg->name);
		if (p->nrefused < RTE_DIM(p->refused))
			p->refused[p->nrefused++] = cookie;
	}
	/* test knob: a QP error after the Nth batch (what a link failure
	 * does), so the driver's recovery runs for real */
	if (++p->st.posts == p->faults.qp_error_at &&
	    p->dops->inject_qp_error != NULL) {
		GW_LOG(WARNING, "port %s: test fault: QP towards peer %u put "
		       "in error after batch %lu\n", p->cfg->name, peer,
		       (unsigned long)p->st.posts);
		p->dops->inject_qp_error(p->drv, peer);
	}
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
		int rc = egw_node_open_rx(p->node, r->room, k, w->o.ranks, peer,
					  dummy, now);

		if (rc != 0) {
			r->failed++;
			if (rc < 0 && -rc < EGW_E_MAX)
				w->fail_reason[-rc]++;
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

/* Latency at per-mille q of n sorted samples, in ms. */
static double
pct_ms(const uint64_t *lat, uint64_t n, uint32_t q)
{
	uint64_t i = n * q / 1000;

	return (double)lat[i < n ? i : n - 1] / 1e6;
}

/* The report: one `section: port=NAME key=value ...` line each, integers
 * or plain decimals, no units (doc/gateway.md, "The exit report"). */
static void
print_latency(FILE *f, const char *section, const char *port,
	      const uint64_t *lat, uint64_t n, uint64_t ok, uint64_t bytes,
	      double secs)
{
	fprintf(f, "%s:", section);
	if (port != NULL)
		fprintf(f, " port=%s", port);
	fprintf(f, " p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f "
		"mb_per_s=%.1f rooms_per_s=%.0f secs=%.3f\n",
		pct_ms(lat, n, 500), pct_ms(lat, n, 900), pct_ms(lat, n, 990),
		pct_ms(lat, n, 999), secs > 0 ? bytes / secs / 1e6 : 0.0,
		secs > 0 ? ok / secs : 0.0, secs);
}

/* A failure reason's stable short name, for `failed: reason=` (egw_strerror
 * is prose for people; this is a key for scripts). */
static const char *
err_name(enum egw_err e)
{
	switch (e) {
	case EGW_E_OK: return "ok";
	case EGW_E_UNKNOWN_ROOM: return "unknown_room";
	case EGW_E_BAD_RANK: return "bad_rank";
	case EGW_E_BLOCK_TOKENS: return "block_tokens";
	case EGW_E_ALLOC_MISMATCH: return "alloc_mismatch";
	case EGW_E_ZERO_BLOCKS: return "zero_blocks";
	case EGW_E_BAD_BLOCKS: return "bad_blocks";
	case EGW_E_BEYOND_TOTAL: return "beyond_total";
	case EGW_E_STATE: return "state";
	case EGW_E_TOTAL_CHANGED: return "total_changed";
	case EGW_E_BAD_STATUS: return "bad_status";
	case EGW_E_BUSY: return "busy";
	case EGW_E_TOO_LARGE: return "too_large";
	case EGW_E_NO_SLOT: return "no_slot";
	case EGW_E_DUPLICATE_ROOM: return "duplicate_room";
	case EGW_E_TIMEOUT_BOOTSTRAP: return "timeout_bootstrap";
	case EGW_E_TIMEOUT_INPUT: return "timeout_input";
	case EGW_E_TIMEOUT_ROUND: return "timeout_round";
	case EGW_E_POOL_EXHAUSTED: return "pool_exhausted";
	case EGW_E_PEER_DEAD: return "peer_dead";
	case EGW_E_ABORTED: return "aborted";
	case EGW_E_TRANSPORT: return "transport";
	case EGW_E_UNKNOWN_PEER: return "unknown_peer";
	default: return "unknown_error";
	}
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
	fprintf(f, "generator: identities=%u driving=%u rooms=%lu ok=%lu "
		"failed=%lu unfinished=%lu bytes=%lu bad=%lu\n",
		n, driving, (unsigned long)rooms, (unsigned long)ok,
		(unsigned long)failed, (unsigned long)unfinished,
		(unsigned long)bytes, (unsigned long)bad);
	if (nlat > 0)
		print_latency(f, "latency-total", NULL, lat, nlat, ok, bytes,
			      last > first ? (double)(last - first) / 1e9 : 0);
	fprintf(f, "result-total: identities=%u rooms=%lu bytes=%lu errors=%lu "
		"leaked=%lu\n", n, (unsigned long)rooms, (unsigned long)bytes,
		(unsigned long)(failed + bad + unfinished), (unsigned long)leaked);
	free(lat);
}

/* Node drop counters under their report keys (enum egw_node_drop). */
static const char *const drop_keys[EGW_ND_MAX] = {
	[EGW_ND_UNKNOWN_PEER] = "drop_unknown_peer",
	[EGW_ND_PROTO] = "drop_proto",
	[EGW_ND_REPLAY] = "drop_replay",
	[EGW_ND_NOT_REGISTERED] = "drop_not_registered",
	[EGW_ND_GEOMETRY] = "drop_geometry",
	[EGW_ND_ROLE] = "drop_role",
	[EGW_ND_PAYLOAD] = "drop_payload",
};

void
gw_work_report(const struct gw_port *p, FILE *f)
{
	struct gw_work *w = p->work;
	const char *name = p->cfg->name;
	struct egw_pool_stats ps;
	struct egw_node_stats ns;
	struct egw_xfer_stats xs;
	uint64_t drops = 0;
	double secs;

	egw_pool_get_stats(p->pool, &ps);
	egw_node_get_stats(p->node, &ns);
	for (int i = 0; i < EGW_ND_MAX; i++)
		drops += ns.drops[i];
	fprintf(f, "node: port=%s rx_datagrams=%lu tx_datagrams=%lu dropped=%lu",
		name, (unsigned long)ns.rx_datagrams,
		(unsigned long)ns.tx_datagrams, (unsigned long)drops);
	for (int i = 0; i < EGW_ND_MAX; i++)
		fprintf(f, " %s=%lu", drop_keys[i], (unsigned long)ns.drops[i]);
	fprintf(f, " arp_miss=%lu\n", (unsigned long)p->st.arp_miss);
	if (p->owner == p) {
		struct rte_eth_stats es;

		/* frames lost below the protocol (it retransmits them) */
		if (rte_eth_stats_get(p->port_id, &es) != 0)
			memset(&es, 0, sizeof(es));
		fprintf(f, "device: port=%s tx_not_sent=%lu rx_missed=%lu "
			"rx_errors=%lu rx_nombuf=%lu\n", name,
			(unsigned long)p->st.tx_full, (unsigned long)es.imissed,
			(unsigned long)es.ierrors, (unsigned long)es.rx_nombuf);
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
		fprintf(f, "worker: port=%s busy_pct=%.1f run_s=%.3f "
			"busy_ns_per_datagram=%.0f\n", name,
			100.0 * (double)p->st.busy_cycles / (double)p->st.run_cycles,
			(double)p->st.run_cycles / hz,
			dg ? (double)p->st.busy_cycles / hz * 1e9 / (double)dg : 0.0);
	}
	{
		struct egw_payload_stats ds;

		p->dops->stats(p->drv, &ds);
		if (ds.batches > 0)
			fprintf(f, "payload: port=%s driver=%s batches=%lu "
				"writes=%lu bytes=%lu failed_batches=%lu "
				"qp_resets=%lu cycles_per_block=%.0f\n", name,
				p->dops->name, (unsigned long)ds.batches,
				(unsigned long)ds.writes, (unsigned long)ds.bytes,
				(unsigned long)ds.failed_batches,
				(unsigned long)ds.qp_resets,
				ds.blocks ? (double)ds.cycles / ds.blocks : 0.0);
	}
	if (p->st.flood > 0)
		fprintf(f, "flood: port=%s sent=%lu requested_pps=%lu\n", name,
			(unsigned long)p->st.flood,
			(unsigned long)p->faults.flood_pps);
	if (egw_node_sender(p->node) != NULL)
		fprintf(f, "encode: port=%s produced=%lu refused=%lu ok=%lu "
			"failed=%lu blocks_in_use=%u\n", name,
			(unsigned long)w->produced,
			(unsigned long)w->produce_refused,
			(unsigned long)w->tx_ok, (unsigned long)w->tx_failed,
			ps.blocks_in_use);
	if (w->o.drive == 0) {
		fprintf(f, "result-encode: port=%s rooms=%lu ok=%lu failed=%lu "
			"leaked=%u\n", name, (unsigned long)w->produced, (unsigned long)w->tx_ok,
			(unsigned long)w->tx_failed, ps.blocks_in_use);
		return;
	}
	egw_receiver_get_stats(egw_node_receiver(p->node), &xs);
	qsort(w->lat, w->nlat, sizeof(w->lat[0]), cmp_u64);
	secs = w->last_done > w->first_open ?
	       (double)(w->last_done - w->first_open) / 1e9 : 0;
	fprintf(f, "language: port=%s rooms=%u ok=%u failed=%u unfinished=%u "
		"bytes=%lu bad=%lu rounds=%lu retransmits=%lu\n", name,
		w->o.drive, w->ok, w->failed, w->o.drive - w->finished,
		(unsigned long)w->bytes_verified, (unsigned long)w->bad_bytes,
		(unsigned long)xs.resumes, (unsigned long)xs.retransmits);
	if (w->nlat > 0)
		print_latency(f, "latency", name, w->lat, w->nlat, w->ok,
			      w->bytes_verified, secs);
	for (int e = 1; e < EGW_E_MAX; e++)
		if (w->fail_reason[e])
			fprintf(f, "failed: port=%s reason=%s count=%lu\n", name,
				err_name((enum egw_err)e),
				(unsigned long)w->fail_reason[e]);
	if (w->last_failed > 0) {
		/* after a fault: did rooms opened later succeed? */
		uint32_t after = 0;

		for (uint32_t i = w->last_failed; i < w->o.drive; i++)
			after += !w->recs[i].active && w->recs[i].failed == 0 &&
				 w->recs[i].room != 0;
		fprintf(f, "recovery: port=%s after_last_failed_ok=%u "
			"after_last_failed=%u last_failed=%u\n", name, after,
			w->o.drive - w->last_failed, w->last_failed - 1);
	}
	fprintf(f, "result: port=%s rooms=%u bytes=%lu rounds=%lu errors=%lu "
		"leaked=%u\n", name, w->o.drive, (unsigned long)w->bytes_verified,
		(unsigned long)xs.resumes,
		(unsigned long)(w->failed + w->bad_bytes + (w->o.drive - w->finished)),
		ps.blocks_in_use);
}
