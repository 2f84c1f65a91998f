/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exit report: one `section: port=NAME key=value ...` line each, no
 * prose, integers or plain decimals without units (doc/gateway.md, "The
 * exit report"; scripts and tests read the keys).
 */
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "gw_room_source.h"

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

/* The language side's admission queue and quarantine: the queue's depth,
 * each room's wait in it (exact percentiles over the rooms that
 * succeeded), restarts, and what the quarantine held and holds. */
static void
print_admission(FILE *f, const char *port, const struct egw_xfer_stats *xs,
		uint64_t *wait, uint32_t n)
{
	bool have = wait != NULL && n > 0;

	if (have)
		qsort(wait, n, sizeof(wait[0]), cmp_u64);
	fprintf(f, "admission: port=%s queue_max=%lu admitted=%lu "
		"restarts=%lu wait_p50_ms=%.3f wait_p99_ms=%.3f "
		"wait_max_ms=%.3f quarantined=%lu quarantine_blocks=%lu "
		"quarantine_expired=%lu\n",
		port, (unsigned long)xs->admit_queue_max,
		(unsigned long)xs->admitted, (unsigned long)xs->restarts,
		have ? pct_ms(wait, n, 500) : 0.0,
		have ? pct_ms(wait, n, 990) : 0.0,
		have ? (double)wait[n - 1] / 1e6 : 0.0,
		(unsigned long)xs->quarantined,
		(unsigned long)xs->quarantine_blocks,
		(unsigned long)xs->quarantine_expired);
}

/* Node drop counters under their report keys (enum egw_node_drop). */

static void
report_node(const struct gw_id *id, FILE *f)
{
	struct egw_node_stats ns;
	uint64_t drops = 0;

	egw_node_get_stats(id->node, &ns);
	for (int i = 0; i < EGW_NODE_DROP_MAX; i++)
		drops += ns.drops[i];
	fprintf(f, "node: port=%s rx_datagrams=%lu tx_datagrams=%lu dropped=%lu",
		id->cfg->name, (unsigned long)ns.rx_datagrams,
		(unsigned long)ns.tx_datagrams, (unsigned long)drops);
	for (int i = 0; i < EGW_NODE_DROP_MAX; i++)
		fprintf(f, " drop_%s=%lu",
			egw_node_drop_name((enum egw_node_drop)i),
			(unsigned long)ns.drops[i]);
	fprintf(f, " arp_miss=%lu", (unsigned long)id->st.arp_miss);
	/* peers' incarnations and refused REGISTERs, both ways */
	fprintf(f, " adoptions=%lu peer_restarts=%lu register_refusals=%lu "
		"register_refused=%lu auth_failed=%lu peers_fenced=%lu\n",
		(unsigned long)ns.adoptions, (unsigned long)ns.peer_restarts,
		(unsigned long)ns.register_refusals,
		(unsigned long)ns.register_refused,
		(unsigned long)ns.proto.refused[EGW_PROTO_ERR_MAC],
		(unsigned long)ns.peers_fenced);
}

/* The device's lines, under the name of the identity that owns it (the
 * first). */
/* What the idle policy gave back (gw_idle.h): the sleeps, their share of
 * the run, and the worst overrun of one sleep past its asked time - with
 * max_sleep_us, the wake-up latency an idle worker adds. */
static void
report_idle(const struct gw_dev *d, const char *name, double hz, FILE *f)
{
	bool poll = d->cfg->idle.mode == EGW_IDLE_POLL;

	fprintf(f,
		"idle: port=%s mode=%s max_sleep_us=%u sleeps=%lu "
		"slept_s=%.3f slept_pct=%.1f late_max_us=%.1f\n",
		name, poll ? "poll" : "backoff",
		poll ? 0 : d->cfg->idle.max_sleep_us,
		(unsigned long)d->st.idle_sleeps,
		(double)d->st.idle_cycles / hz,
		100.0 * (double)d->st.idle_cycles / (double)d->st.run_cycles,
		(double)d->st.idle_late_max_cycles / hz * 1e6);
}

static void
report_device(const struct gw_dev *d, const char *name, FILE *f)
{
	struct rte_eth_stats es;

	/* frames lost below the protocol (it retransmits them) */
	if (rte_eth_stats_get(d->port_id, &es) != 0)
		memset(&es, 0, sizeof(es));
	fprintf(f, "device: port=%s tx_not_sent=%lu rx_missed=%lu "
		"rx_errors=%lu rx_nombuf=%lu tx_link_down=%lu\n", name,
		(unsigned long)d->st.tx_full, (unsigned long)es.imissed,
		(unsigned long)es.ierrors, (unsigned long)es.rx_nombuf,
		(unsigned long)d->st.tx_link_down);
	if (d->st.run_cycles > 0) {
		double hz = (double)rte_get_tsc_hz();
		uint64_t dg = 0;

		/* the worker serves all the device's identities */
		for (uint16_t i = 0; i < d->nids; i++) {
			struct egw_node_stats is;

			egw_node_get_stats(d->ids[i]->node, &is);
			dg += is.rx_datagrams + is.tx_datagrams;
		}
		/* busy-poll spin excluded: what one datagram costs the core */
		fprintf(f, "worker: port=%s busy_pct=%.1f run_s=%.3f "
			"busy_ns_per_datagram=%.0f\n", name,
			100.0 * (double)d->st.busy_cycles / (double)d->st.run_cycles,
			(double)d->st.run_cycles / hz,
			dg ? (double)d->st.busy_cycles / hz * 1e9 / (double)dg : 0.0);
		report_idle(d, name, hz, f);
	}
}

static void
report_payload(const struct gw_id *id, FILE *f)
{
	struct egw_payload_stats ds;

	id->dops->stats(id->drv, &ds);
	if (ds.batches > 0)
		fprintf(f, "payload: port=%s driver=%s batches=%lu writes=%lu "
			"bytes=%lu failed_batches=%lu qp_resets=%lu "
			"cycles_per_block=%.0f\n", id->cfg->name, id->dops->name,
			(unsigned long)ds.batches, (unsigned long)ds.writes,
			(unsigned long)ds.bytes, (unsigned long)ds.failed_batches,
			(unsigned long)ds.qp_resets,
			ds.blocks ? (double)ds.cycles / ds.blocks : 0.0);
	if (ds.window_binds > 0 || ds.window_bind_failed > 0) {
		struct egw_node_stats ns;

		/* the node's side of the posted windows: past their
		 * deadline, or completions of nothing pending */
		egw_node_get_stats(id->node, &ns);
		fprintf(f, "windows: port=%s bound=%lu bind_failed=%lu "
			"closed=%lu closed_by_free=%lu bind_us=%.1f "
			"close_us=%.1f overdue=%lu stale=%lu\n",
			id->cfg->name, (unsigned long)ds.window_binds,
			(unsigned long)ds.window_bind_failed,
			(unsigned long)ds.window_unbinds,
			(unsigned long)ds.window_unbind_deallocs,
			ds.window_binds ? ds.window_bind_ns / 1e3 / ds.window_binds : 0.0,
			ds.window_unbinds ? ds.window_unbind_ns / 1e3 / ds.window_unbinds : 0.0,
			(unsigned long)ns.window_overdue,
			(unsigned long)ns.window_stale);
	}
}

/* One room source's rooms: encode and language sides, the result line. */
static void
report_rooms(const struct gw_id *id, struct gw_room_source *s, FILE *f)
{
	const char *name = id->cfg->name;
	struct gw_room_stats st;
	struct egw_pool_stats ps;
	struct egw_xfer_stats xs;
	double secs;

	s->ops->report(s, &st);
	egw_pool_get_stats(id->pool, &ps);
	if (st.clients) {
		/* the language side's resume rounds (none on the encode side) */
		memset(&xs, 0, sizeof(xs));
		if (egw_node_receiver(id->node) != NULL)
			egw_xfer_receiver_get_stats(egw_node_receiver(id->node),
						    &xs);
		fprintf(f,
			"clients: port=%s attached=%u rooms=%lu ok=%lu "
			"failed=%lu commands=%lu refused=%lu cq_overflow=%lu "
			"alloc_waits=%lu busy=%lu slot_waits=%lu "
			"blocks_in_use=%u rounds=%lu cache_hits=%lu cache_misses=%lu cache_shared=%lu "
			"cache_evictions=%lu held_long=%lu "
			"lost=%lu held_blocks=%u\n",
			name, st.client.attached,
			(unsigned long)st.client.rooms,
			(unsigned long)st.client.ok,
			(unsigned long)st.client.failed,
			(unsigned long)st.client.commands,
			(unsigned long)st.client.refused,
			(unsigned long)st.client.cq_overflow,
			(unsigned long)st.client.alloc_waits,
			(unsigned long)st.client.busy,
			(unsigned long)st.client.slot_waits, ps.blocks_in_use,
			(unsigned long)xs.resumes,
			(unsigned long)st.client.cache_hits,
			(unsigned long)st.client.cache_misses,
			(unsigned long)st.client.cache_shared,
			(unsigned long)st.client.cache_evictions,
			(unsigned long)st.client.held_long,
			(unsigned long)st.client.lost, st.client.held_blocks);
		return;
	}
	if (st.encode)
		fprintf(f, "encode: port=%s produced=%lu refused=%lu ok=%lu "
			"failed=%lu blocks_in_use=%u queued=%lu busy=%lu "
			"queue_max=%u\n", name,
			(unsigned long)st.produced, (unsigned long)st.refused,
			(unsigned long)st.sent_ok, (unsigned long)st.sent_failed,
			ps.blocks_in_use, (unsigned long)st.queued,
			(unsigned long)st.busy, st.queue_max);
	if (!st.language) {
		fprintf(f, "result-encode: port=%s rooms=%lu ok=%lu failed=%lu "
			"leaked=%u\n", name, (unsigned long)st.produced,
			(unsigned long)st.sent_ok, (unsigned long)st.sent_failed,
			ps.blocks_in_use);
		return;
	}
	egw_xfer_receiver_get_stats(egw_node_receiver(id->node), &xs);
	qsort(st.latency_ns, st.nlatency, sizeof(st.latency_ns[0]), cmp_u64);
	secs = st.last_done_ns > st.first_open_ns ?
	       (double)(st.last_done_ns - st.first_open_ns) / 1e9 : 0;
	fprintf(f,
		"language: port=%s rooms=%u ok=%u failed=%u unfinished=%u "
		"bytes=%lu bad=%lu rounds=%lu retransmits=%lu slot_waits=%lu "
		"polls=%lu retries=%lu\n",
		name, st.rooms, st.ok, st.failed, st.unfinished,
		(unsigned long)st.bytes, (unsigned long)st.bad,
		(unsigned long)xs.resumes, (unsigned long)xs.retransmits,
		(unsigned long)st.slot_waits, (unsigned long)xs.polls,
		(unsigned long)xs.retries);
	if (st.nlatency > 0)
		print_latency(f, "latency", name, st.latency_ns, st.nlatency,
			      st.ok, st.bytes, secs);
	print_admission(f, name, &xs, st.admit_wait_ns, st.nlatency);
	for (uint16_t e = 1; e < EGW_E_COUNT; e++)
		if (st.fail_reason[e])
			fprintf(f, "failed: port=%s reason=%s count=%lu\n", name,
				egw_err_key(egw_err_from_wire(e)),
				(unsigned long)st.fail_reason[e]);
	if (st.last_failed > 0)
		/* after a fault: did the rooms opened after it succeed? */
		fprintf(f, "recovery: port=%s after_last_failed_ok=%u "
			"after_last_failed=%u last_failed=%u\n", name,
			st.after_last_failed_ok, st.after_last_failed,
			st.last_failed - 1);
	fprintf(f, "result: port=%s rooms=%u bytes=%lu rounds=%lu errors=%lu "
		"leaked=%u\n", name, st.rooms, (unsigned long)st.bytes,
		(unsigned long)xs.resumes,
		(unsigned long)(st.failed + st.bad + st.unfinished),
		ps.blocks_in_use);
}

/* Fan-out (xfer.md): rooms that went through a group of ranks against
 * lone ranks' rooms, and the payload that did not cross the wire. */
static void
report_fanout(const char *name, const char *side,
	      const struct egw_xfer_stats *x, FILE *f)
{
	fprintf(f,
		"fanout: port=%s side=%s group_rooms=%lu lone_rooms=%lu "
		"group_ranks=%lu bytes_saved=%lu writes=%lu bytes=%lu\n",
		name, side, (unsigned long)x->group_rooms,
		(unsigned long)(x->rooms_ok - x->group_rooms),
		(unsigned long)x->group_ranks,
		(unsigned long)x->group_bytes_saved, (unsigned long)x->writes,
		(unsigned long)x->bytes);
}

void
gw_report_id(struct gw_id *id, FILE *f)
{
	struct egw_xfer_stats xs;

	report_node(id, f);
	if (egw_node_sender(id->node) != NULL) {
		egw_xfer_sender_get_stats(egw_node_sender(id->node), &xs);
		report_fanout(id->cfg->name, "encode", &xs, f);
	}
	if (egw_node_receiver(id->node) != NULL) {
		egw_xfer_receiver_get_stats(egw_node_receiver(id->node), &xs);
		report_fanout(id->cfg->name, "language", &xs, f);
	}
	if (id->dev->ids[0] == id)
		report_device(id->dev, id->cfg->name, f);
	report_payload(id, f);
	if (id->flood.sent > 0)
		fprintf(f, "flood: port=%s sent=%lu requested_pps=%lu\n",
			id->cfg->name, (unsigned long)id->flood.sent,
			(unsigned long)id->flood.pps);
	for (uint16_t i = 0; i < id->nsources; i++)
		report_rooms(id, id->sources[i], f);
}

/* --identities: the generator's figures over all its identities (one
 * latency distribution, one time span from the first open to the last
 * finish), after each identity's own report. */
void
gw_report_total(struct gw_id *const *ids, uint16_t n, FILE *f)
{
	uint64_t rooms = 0, ok = 0, failed = 0, unfinished = 0, bytes = 0;
	uint64_t bad = 0, nlat = 0, first = UINT64_MAX, last = 0, leaked = 0;
	uint64_t *lat;
	uint16_t driving = 0;

	for (uint16_t i = 0; i < n; i++)
		for (uint16_t k = 0; k < ids[i]->nsources; k++) {
			struct gw_room_stats st;

			ids[i]->sources[k]->ops->report(ids[i]->sources[k], &st);
			nlat += st.nlatency;
		}
	lat = malloc((nlat ? nlat : 1) * sizeof(*lat));
	if (lat == NULL)
		return;
	nlat = 0;
	for (uint16_t i = 0; i < n; i++) {
		struct egw_pool_stats ps;
		bool drives = false;

		egw_pool_get_stats(ids[i]->pool, &ps);
		leaked += ps.blocks_in_use;
		for (uint16_t k = 0; k < ids[i]->nsources; k++) {
			struct gw_room_stats st;

			ids[i]->sources[k]->ops->report(ids[i]->sources[k], &st);
			if (!st.language)
				continue;
			drives = true;
			rooms += st.rooms;
			ok += st.ok;
			failed += st.failed;
			unfinished += st.unfinished;
			bytes += st.bytes;
			bad += st.bad;
			if (st.first_open_ns && st.first_open_ns < first)
				first = st.first_open_ns;
			if (st.last_done_ns > last)
				last = st.last_done_ns;
			memcpy(lat + nlat, st.latency_ns, st.nlatency * sizeof(*lat));
			nlat += st.nlatency;
		}
		driving += drives;
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

void
gw_report_driven(struct gw_id *id, struct gw_outcome *o)
{
	for (uint16_t i = 0; i < id->nsources; i++) {
		struct gw_room_stats st;

		id->sources[i]->ops->report(id->sources[i], &st);
		if (!st.language || st.clients)
			continue;
		o->rooms += st.rooms;
		o->failed += st.failed;
		o->bad += st.bad;
		o->unfinished += st.unfinished;
	}
}
