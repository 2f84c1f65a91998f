/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics page: every counter and gauge of the telemetry commands and
 * the exit report, in the OpenMetrics text format (doc/gateway.md,
 * "Metrics"). Runs on the metrics thread, never on a worker: it first
 * copies each identity's counters the way the telemetry commands read
 * them (plain aligned 64-bit words, at most one update behind, never
 * torn; the room histograms with relaxed atomics), then writes the page
 * from those copies, one family after the other as the format wants.
 *
 * Labels are bounded by the configuration: `port` (an identity's port
 * name: at most EGW_CONF_MAX_PORTS ports, or GW_MAX_IDS identities),
 * `peer` (a configured peer: at most EGW_CONF_MAX_PEERS a port), `role`
 * (encode, language) and fixed enumerations (`reason`, `direction`,
 * `cause`). Configured names are [A-Za-z0-9_.-]: nothing to escape.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "gw.h"
#include "gw_attach.h"
#include "gw_cluster.h"
#include "gw_peers.h"
#include "gw_reload.h"

enum { R_ENCODE, R_LANGUAGE, R_COUNT };
static const char *const role_names[R_COUNT] = { "encode", "language" };

/* One identity's counters, copied at the start of a scrape. */
struct snap {
	const struct gw_id *id;
	const char *name;
	bool owns_dev;           /* the device's first identity: its lines */
	struct gw_dev_stats ds;
	struct rte_eth_stats es;
	bool have_es;
	struct egw_node_stats ns;
	bool has_role[R_COUNT];
	struct egw_xfer_stats xs[R_COUNT];
	struct egw_pool_stats ps;
	struct egw_payload_stats pl;
	bool has_clients;
	struct egw_engines_stats cs;
	struct egw_engines_cache_stats cc;
	uint32_t attached, rooms_held, held_blocks;
	struct gw_id_stats is;
};

/* The identity's peers as its worker last published them (malloc'd, or
 * NULL and 0 without memory); the caller frees *out. */
static uint32_t
peers_of(const struct gw_id *id, struct gw_peer_view **out)
{
	uint32_t cap = 2u * id->cfg->max_peers, n;

	*out = calloc(cap ? cap : 1, sizeof(**out));
	if (*out == NULL)
		return 0;
	n = gw_peers_list(id, *out, cap, NULL);
	return n < cap ? n : cap;
}

static void
take(struct snap *s, const struct gw_id *id)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->name = id->cfg->name;
	s->owns_dev = id->dev->ids[0] == id;
	s->ds = id->dev->st;
	/* the ethdev's own counters: a read of the PMD's software counters
	 * (the exit report makes the same call) */
	s->have_es = s->owns_dev && id->dev->started &&
		     rte_eth_stats_get(id->dev->port_id, &s->es) == 0;
	egw_node_get_stats(id->node, &s->ns);
	if (egw_node_sender(id->node) != NULL) {
		s->has_role[R_ENCODE] = true;
		egw_xfer_sender_get_stats(egw_node_sender(id->node),
				     &s->xs[R_ENCODE]);
	}
	if (egw_node_receiver(id->node) != NULL) {
		s->has_role[R_LANGUAGE] = true;
		egw_xfer_receiver_get_stats(egw_node_receiver(id->node),
				       &s->xs[R_LANGUAGE]);
	}
	egw_pool_get_stats(id->pool, &s->ps);
	id->dops->stats(id->drv, &s->pl);
	if (id->attach != NULL) {
		s->has_clients = true;
		egw_engines_stats(id->attach->clients, &s->cs);
		s->attached = egw_engines_attached(id->attach->clients);
		s->rooms_held = egw_engines_rooms(id->attach->clients);
		s->held_blocks = egw_engines_held_blocks(id->attach->clients);
		egw_engines_cache(id->attach->clients, &s->cc);
	}
	s->is = id->st;
}

/* ---- writing ----------------------------------------------------------- */

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
}

/* A sample: counters get their _total suffix; `labels` without braces. */
static void
sample(FILE *f, const char *name, bool counter, const char *labels,
       uint64_t v)
{
	fprintf(f, "%s%s{%s} %lu\n", name, counter ? "_total" : "", labels,
		(unsigned long)v);
}

static void
sample_f(FILE *f, const char *name, const char *labels, double v)
{
	fprintf(f, "%s{%s} %.9g\n", name, labels, v);
}

#define LBL(buf, ...) snprintf(buf, sizeof(buf), __VA_ARGS__)

/* One sample per identity (or per device: `dev_only`). */
#define PER_ID(NAME, COUNTER, HELP, DEV_ONLY, EXPR) do {			\
	head(f, NAME, (COUNTER) ? "counter" : "gauge", HELP);		\
	for (uint16_t i_ = 0; i_ < n; i_++) {				\
		const struct snap *s = &sn[i_];				\
		char l_[96];						\
									\
		if ((DEV_ONLY) && !s->owns_dev)				\
			continue;					\
		LBL(l_, "port=\"%s\"", s->name);				\
		sample(f, NAME, COUNTER, l_, (uint64_t)(EXPR));		\
	}								\
} while (0)

/* One sample per identity and value of one more label. */
#define PER_ID_BY(NAME, COUNTER, HELP, DEV_ONLY, KEY, NV, VALNAME, EXPR) do {	\
	head(f, NAME, (COUNTER) ? "counter" : "gauge", HELP);		\
	for (uint16_t i_ = 0; i_ < n; i_++) {				\
		const struct snap *s = &sn[i_];				\
									\
		if ((DEV_ONLY) && !s->owns_dev)				\
			continue;					\
		for (unsigned k = 0; k < (NV); k++) {			\
			char l_[160];					\
									\
			LBL(l_, "port=\"%s\",%s=\"%s\"", s->name, KEY,	\
			    (VALNAME));					\
			sample(f, NAME, COUNTER, l_, (uint64_t)(EXPR));	\
		}							\
	}								\
} while (0)

/* One sample per identity and role it plays; `x` is that role's stats. */
#define PER_ROLE(NAME, COUNTER, HELP, EXPR) do {				\
	head(f, NAME, (COUNTER) ? "counter" : "gauge", HELP);		\
	for (uint16_t i_ = 0; i_ < n; i_++)				\
		for (unsigned r_ = 0; r_ < R_COUNT; r_++) {		\
			const struct egw_xfer_stats *x = &sn[i_].xs[r_];	\
			char l_[128];					\
									\
			if (!sn[i_].has_role[r_])			\
				continue;				\
			LBL(l_, "port=\"%s\",role=\"%s\"", sn[i_].name,	\
			    role_names[r_]);				\
			sample(f, NAME, COUNTER, l_, (uint64_t)(EXPR));	\
		}							\
} while (0)

/* Counted per failure code (index egw_err_to_wire): every code but OK. */
static void
per_reason(FILE *f, const struct snap *sn, uint16_t n, const char *name,
	   const char *help, size_t field)
{
	head(f, name, "counter", help);
	for (uint16_t i = 0; i < n; i++)
		for (unsigned r = 0; r < R_COUNT; r++) {
			const uint64_t *v;

			if (!sn[i].has_role[r])
				continue;
			v = (const uint64_t *)((const char *)&sn[i].xs[r] + field);
			for (uint16_t w = 1; w < EGW_E_COUNT; w++) {
				char l[192];

				LBL(l, "port=\"%s\",role=\"%s\",reason=\"%s\"",
				    sn[i].name, role_names[r],
				    egw_err_key(egw_err_from_wire(w)));
				sample(f, name, true, l, v[w]);
			}
		}
}

/* The idle policy (gw_idle.h): sleeps, time slept, the bound, the worst
 * overrun of a sleep. */
static void
idle_families(FILE *f, const struct snap *sn, uint16_t n, double hz)
{
	head(f, "embgw_worker_idle_sleeps", "counter",
	     "Sleeps of the "
	     "port's idle worker (each ends in a wake-up).");
	for (uint16_t i = 0; i < n; i++) {
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample(f, "embgw_worker_idle_sleeps", true, l,
		       sn[i].ds.idle_sleeps);
	}
	head(f, "embgw_worker_idle_seconds", "counter",
	     "Time the port's "
	     "worker slept for want of work.");
	for (uint16_t i = 0; i < n; i++) {
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_idle_seconds_total", l,
			 (double)sn[i].ds.idle_cycles / hz);
	}
	head(f, "embgw_worker_idle_max_sleep_seconds", "gauge",
	     "The "
	     "configured bound on one sleep (idle.max_sleep_us; 0: busy "
	     "polling).");
	for (uint16_t i = 0; i < n; i++) {
		const struct egw_conf_idle *c = &sn[i].id->dev->cfg->idle;
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_idle_max_sleep_seconds", l,
			 c->mode == EGW_IDLE_POLL ?
				 0.0 :
				 (double)c->max_sleep_us / 1e6);
	}
	head(f, "embgw_worker_idle_late_max_seconds", "gauge",
	     "The most "
	     "one sleep overran the time it asked for.");
	for (uint16_t i = 0; i < n; i++) {
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_idle_late_max_seconds", l,
			 (double)sn[i].ds.idle_late_max_cycles / hz);
	}
}

static void
device_families(FILE *f, const struct snap *sn, uint16_t n)
{
	static const char *const txr[] = { "tx_full", "link_down" };
	static const char *const rxr[] = { "not_ipv4_udp", "bad_ip",
					   "bad_udp", "not_ours" };
	static const char *const dir[] = { "rx", "tx" };
	double hz = (double)rte_get_tsc_hz();

	PER_ID("embgw_device_rx_packets", true, "Frames the port received.",
	       true, s->ds.rx_pkts);
	PER_ID("embgw_device_tx_packets", true, "Frames the port sent.",
	       true, s->ds.tx_pkts);
	PER_ID_BY("embgw_device_tx_dropped_frames", true, "Frames not sent: "
		  "the transmit ring was full, or the link was down.", true,
		  "reason", 2, txr[k],
		  k == 0 ? s->ds.tx_full : s->ds.tx_link_down);
	PER_ID_BY("embgw_device_rx_dropped_frames", true, "Received frames "
		  "dropped before any identity, by reason.", true, "reason", 4,
		  rxr[k], k == 0 ? s->ds.drop_not_ipv4_udp : k == 1 ?
		  s->ds.drop_bad_ip : k == 2 ? s->ds.drop_bad_udp :
		  s->ds.drop_not_ours);
	PER_ID_BY("embgw_device_arp_packets", true, "ARP frames received "
		  "and sent.", true, "direction", 2, dir[k],
		  k == 0 ? s->ds.arp_rx : s->ds.arp_tx);
	PER_ID("embgw_device_rx_missed_packets", true, "Frames the device "
	       "dropped for want of room in its receive ring (ethdev "
	       "imissed).", true, s->es.imissed);
	PER_ID("embgw_device_rx_errors", true, "Erroneous frames the device "
	       "received (ethdev ierrors).", true, s->es.ierrors);
	PER_ID("embgw_device_rx_nombuf", true, "Receive mbuf allocation "
	       "failures (ethdev rx_nombuf).", true, s->es.rx_nombuf);
	head(f, "embgw_worker_busy_seconds", "counter", "CPU time of the "
	     "port's worker spent in loop iterations that did work.");
	for (uint16_t i = 0; i < n; i++) {
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_busy_seconds_total", l,
			 (double)sn[i].ds.busy_cycles / hz);
	}
	head(f, "embgw_worker_run_seconds", "counter", "Time the port's "
	     "worker has been polling (busy or not).");
	for (uint16_t i = 0; i < n; i++) {
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_run_seconds_total", l,
			 (double)sn[i].ds.run_cycles / hz);
	}
	head(f, "embgw_worker_busy_ratio", "gauge", "Busy share of the "
	     "worker since it started (busy seconds over run seconds).");
	for (uint16_t i = 0; i < n; i++) {
		const struct gw_dev_stats *d = &sn[i].ds;
		char l[96];

		if (!sn[i].owns_dev)
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		sample_f(f, "embgw_worker_busy_ratio", l, d->run_cycles ?
			 (double)d->busy_cycles / (double)d->run_cycles : 0.0);
	}
	idle_families(f, sn, n, hz);
}

static void
node_families(FILE *f, const struct snap *sn, uint16_t n)
{
	static const char *const dir[] = { "rx", "tx" };
	static const char *const refd[] = { "sent", "received" };
	static const char *const pe[] = { "bad_mac", "bad_length",
					  "bad_header", "bad_field", "replay" };
	static const char *const inj[] = { "dropped", "duplicated",
					   "reordered", "junk" };
	const char *dn[EGW_NODE_DROP_MAX];

	for (int d = 0; d < EGW_NODE_DROP_MAX; d++)
		dn[d] = egw_node_drop_name((enum egw_node_drop)d);
	PER_ID_BY("embgw_datagrams", true, "Control datagrams received and "
		  "sent.", false, "direction", 2, dir[k],
		  k == 0 ? s->ns.rx_datagrams : s->ns.tx_datagrams);
	PER_ID_BY("embgw_datagram_drops", true, "Control datagrams dropped, "
		  "by reason.", false, "reason", EGW_NODE_DROP_MAX, dn[k],
		  s->ns.drops[k]);
	PER_ID("embgw_arp_misses", true, "Datagrams not sent: no MAC address "
	       "for the peer yet.", false, s->is.arp_miss);
	PER_ID("embgw_protocol_ok", true, "Datagrams the decoder accepted.",
	       false, s->ns.proto.ok);
	PER_ID_BY("embgw_protocol_refused", true, "Datagrams the decoder "
		  "refused, by reason.", false, "reason", 5, pe[k],
		  k == 0 ? s->ns.proto.refused[EGW_PROTO_ERR_MAC] :
		  k == 1 ? s->ns.proto.refused[EGW_PROTO_ERR_SHORT] +
			   s->ns.proto.refused[EGW_PROTO_ERR_LONG] +
			   s->ns.proto.refused[EGW_PROTO_ERR_LENGTH] +
			   s->ns.proto.refused[EGW_PROTO_ERR_BODY] :
		  k == 2 ? s->ns.proto.refused[EGW_PROTO_ERR_MAGIC] +
			   s->ns.proto.refused[EGW_PROTO_ERR_VERSION] +
			   s->ns.proto.refused[EGW_PROTO_ERR_TYPE] +
			   s->ns.proto.refused[EGW_PROTO_ERR_FLAGS] +
			   s->ns.proto.refused[EGW_PROTO_ERR_RESERVED] :
		  k == 3 ? s->ns.proto.refused[EGW_PROTO_ERR_FIELD] :
			   s->ns.proto.refused[EGW_PROTO_ERR_REPLAY] +
			   s->ns.proto.refused[EGW_PROTO_ERR_SESSION]);
	PER_ID_BY("embgw_registers", true, "REGISTER messages received and "
		  "sent.", false, "direction", 2, dir[k],
		  k == 0 ? s->ns.registers_rx : s->ns.registers_tx);
	PER_ID("embgw_reregisters", true, "Endpoint changes announced to a "
	       "peer.", false, s->ns.reregisters);
	PER_ID("embgw_peer_adoptions", true, "Peer incarnations adopted.",
	       false, s->ns.adoptions);
	PER_ID("embgw_peer_restarts", true, "Adopted peer incarnations "
	       "replaced by a new one (their rooms failed).", false,
	       s->ns.peer_restarts);
	PER_ID("embgw_peers_fenced", true, "Peer incarnations fenced: a "
	       "quarantine of theirs passed quarantine_ms without its ABORT "
	       "ACK.", false, s->ns.peers_fenced);
	PER_ID_BY("embgw_register_refusals", true, "REGISTERs refused: by us "
		  "(sent) or by a peer (received).", false, "direction", 2,
		  refd[k], k == 0 ? s->ns.register_refusals :
		  s->ns.register_refused);
	PER_ID_BY("embgw_test_injections", true, "Test knobs' faults on sent "
		  "control datagrams (0 unless a test flag is set).", false,
		  "kind", 4, inj[k], k == 0 ? s->is.inj_dropped :
		  k == 1 ? s->is.inj_duped : k == 2 ? s->is.inj_reordered :
		  s->is.inj_junk);
	head(f, "embgw_peer_registered", "gauge", "1 while the peer is "
	     "registered (incarnations adopted both ways, memory reached).");
	for (uint16_t i = 0; i < n; i++) {
		struct gw_peer_view *v;
		uint32_t np = peers_of(sn[i].id, &v);

		for (uint32_t p = 0; p < np; p++) {
			char l[128];

			if (v[p].id == 0)
				continue;
			LBL(l, "port=\"%s\",peer=\"%s\"", sn[i].name,
			    v[p].name);
			sample(f, "embgw_peer_registered", false, l,
			       v[p].ready);
		}
		free(v);
	}
}

/* The language side's round-trip estimate of each peer (RFC 6298): what
 * its retransmission timeout comes from. */
static void
rtt_family(FILE *f, const struct snap *sn, uint16_t n, const char *name,
	   const char *help, int which)
{
	head(f, name, "gauge", help);
	for (uint16_t i = 0; i < n; i++) {
		const struct gw_id *id = sn[i].id;
		const struct egw_xfer_receiver *rx;

		if (!sn[i].has_role[R_LANGUAGE])
			continue;
		rx = egw_node_receiver(id->node);
		for (uint16_t p = 0; p < id->cfg->npeers; p++) {
			struct egw_xfer_rtt rtt;
			char l[128];

			if (egw_xfer_receiver_peer_rtt(rx, p, &rtt) != 0)
				continue;
			LBL(l, "port=\"%s\",peer=\"%s\"", sn[i].name,
			    id->cfg->peers[p].name);
			sample_f(f, name, l,
				 (double)(which == 0 ? rtt.srtt_ns :
					  which == 1 ? rtt.rttvar_ns :
						       rtt.rto_ns) /
					 1e9);
		}
	}
}

static void
rtt_families(FILE *f, const struct snap *sn, uint16_t n)
{
	rtt_family(f, sn, n, "embgw_peer_srtt_seconds",
		   "Smoothed round-trip "
		   "time to the peer (0 until the first sample).",
		   0);
	rtt_family(f, sn, n, "embgw_peer_rttvar_seconds",
		   "Variation of the "
		   "round-trip time to the peer.",
		   1);
	rtt_family(f, sn, n, "embgw_peer_rto_seconds",
		   "The peer's first "
		   "retransmission timeout now (rto_ms until the first "
		   "sample, then SRTT + 4 RTTVAR within rto_min_ms.."
		   "rto_max_ms).",
		   2);
}

static void
xfer_families(FILE *f, const struct snap *sn, uint16_t n)
{
	static const char *const cause[] = { "ack", "peer_dead",
					     "deadline" };

	PER_ROLE("embgw_rooms_active", false, "Rooms open now.",
		 x->rooms_active);
	PER_ROLE("embgw_rooms_opened", true, "Rooms opened (one rank of a "
		 "room on the language side).", x->rooms_opened);
	PER_ROLE("embgw_rooms_ok", true, "Rooms that succeeded.", x->rooms_ok);
	per_reason(f, sn, n, "embgw_rooms_failed", "Rooms that failed, by "
		   "reason.", offsetof(struct egw_xfer_stats, failed));
	per_reason(f, sn, n, "embgw_messages_rejected", "Room messages "
		   "refused, by reason.",
		   offsetof(struct egw_xfer_stats, rejected));
	PER_ROLE("embgw_windows", true, "Windows allocated (language) or "
		 "accepted (encode).", x->windows);
	PER_ROLE("embgw_resume_rounds", true, "Windows after a room's first: "
		 "resume rounds.", x->resumes);
	PER_ROLE("embgw_retransmissions", true, "Control messages sent "
		 "again after their timeout.", x->retransmits);
	PER_ROLE("embgw_status_polls", true,
		 "Language side: retransmissions "
		 "that were STATUS polls (every window accepted, nothing to "
		 "resend).",
		 x->polls);
	PER_ROLE("embgw_request_retries", true,
		 "Language side: "
		 "retransmissions that were windows sent again after the "
		 "sender refused them for now (answered, not lost).",
		 x->retries);
	PER_ROLE("embgw_duplicate_requests", true, "Requests answered without "
		 "new work.", x->duplicates);
	PER_ROLE("embgw_fanout_rooms", true,
		 "Rooms that succeeded through "
		 "a group of ranks sharing one receive.",
		 x->group_rooms);
	PER_ROLE("embgw_fanout_bytes_saved", true,
		 "Payload bytes a group's "
		 "ranks did not move: one copy per rank served through "
		 "another.",
		 x->group_bytes_saved);
	PER_ROLE("embgw_idle_waits", true, "Encode side: a rank drained, "
		 "waiting for the next window.", x->idle_waits);
	PER_ROLE("embgw_alloc_retries", true, "Allocations retried after "
		 "the pool said no.", x->alloc_retries);
	PER_ROLE("embgw_written_bytes", true, "Payload bytes the encode side "
		 "wrote into peers' memory.", x->bytes);
	PER_ROLE("embgw_peers_dead", true, "Peers declared dead.",
		 x->peers_dead);
	PER_ROLE("embgw_admission_queue_rooms", false, "Rooms waiting for "
		 "their first window now.", x->admit_queued);
	PER_ROLE("embgw_admission_queue_max_rooms", false, "Most rooms ever "
		 "waiting for admission at once.", x->admit_queue_max);
	PER_ROLE("embgw_admitted", true, "First windows granted (restarts "
		 "included).", x->admitted);
	PER_ROLE("embgw_admission_restarts", true, "Rooms that gave their "
		 "blocks back and queued again.", x->restarts);
	PER_ROLE("embgw_quarantines", true, "Rooms whose blocks were "
		 "held until the peer's ABORT ACK.", x->quarantined);
	PER_ROLE("embgw_quarantine_rooms", false, "Rooms held in quarantine "
		 "now.", x->quarantine_rooms);
	PER_ROLE("embgw_quarantine_blocks", false, "Pool blocks held in "
		 "quarantine now.", x->quarantine_blocks);
	head(f, "embgw_quarantine_released", "counter", "Quarantines ended: "
	     "by the ABORT ACK, by the peer's death, or by quarantine_ms "
	     "passing (the peer is fenced).");
	for (uint16_t i = 0; i < n; i++)
		for (unsigned k = 0; k < 3; k++) {
			const struct egw_xfer_stats *x = &sn[i].xs[R_LANGUAGE];
			char l[128];

			if (!sn[i].has_role[R_LANGUAGE])
				continue;
			LBL(l, "port=\"%s\",role=\"language\",cause=\"%s\"",
			    sn[i].name, cause[k]);
			sample(f, "embgw_quarantine_released", true, l,
			       k == 0 ? x->quarantine_acked : k == 1 ?
			       x->quarantine_dead : x->quarantine_expired);
		}
	PER_ROLE("embgw_abort_acks", true, "ABORT ACKs sent.", x->abort_acks);
	PER_ROLE("embgw_yields", true, "Ranks restarted on the receiver's "
		 "word.", x->yields);
	head(f, "embgw_admission_wait_max_seconds", "gauge", "Longest "
	     "admission wait of a room, restarts included.");
	for (uint16_t i = 0; i < n; i++) {
		char l[128];

		if (!sn[i].has_role[R_LANGUAGE])
			continue;
		LBL(l, "port=\"%s\",role=\"language\"", sn[i].name);
		sample_f(f, "embgw_admission_wait_max_seconds", l,
			 sn[i].xs[R_LANGUAGE].admit_wait_max_ns / 1e9);
	}
	/* lib/xfer's power-of-two buckets: [2^b, 2^(b+1)) us, the last
	 * open-ended; no sum is kept, so no _count either (OpenMetrics has
	 * both or neither): the +Inf bucket is the count */
	head(f, "embgw_admission_wait_seconds", "histogram", "Admission wait "
	     "of the rooms that ended.");
	for (uint16_t i = 0; i < n; i++) {
		const struct egw_xfer_stats *x = &sn[i].xs[R_LANGUAGE];
		uint64_t cum = 0;

		if (!sn[i].has_role[R_LANGUAGE])
			continue;
		for (int b = 0; b < EGW_XFER_WAIT_BUCKETS; b++) {
			cum += x->admit_wait_hist[b];
			if (b + 1 < EGW_XFER_WAIT_BUCKETS)
				fprintf(f, "embgw_admission_wait_seconds_bucket"
					"{port=\"%s\",role=\"language\",le=\"%.6g\"} "
					"%lu\n", sn[i].name,
					(double)(2ull << b) / 1e6,
					(unsigned long)cum);
		}
		fprintf(f, "embgw_admission_wait_seconds_bucket{port=\"%s\","
			"role=\"language\",le=\"+Inf\"} %lu\n", sn[i].name,
			(unsigned long)cum);
	}
}

static void
pool_payload_families(FILE *f, const struct snap *sn, uint16_t n)
{
	PER_ID("embgw_pool_block_tokens", false, "Tokens per pool block.",
	       false, egw_pool_geom(s->id->pool)->block_tokens);
	PER_ID("embgw_pool_capacity_blocks", false, "Blocks in the pool.",
	       false, s->ps.blocks_total);
	PER_ID("embgw_pool_in_use_blocks", false, "Blocks in use now.",
	       false, s->ps.blocks_in_use);
	PER_ID("embgw_pool_cached_blocks", false, "Free blocks held by the "
	       "allocation cache.", false, s->ps.cached_blocks);
	PER_ID("embgw_pool_free_runs", false, "Runs of free blocks "
	       "(fragmentation).", false, s->ps.free_runs);
	PER_ID("embgw_pool_largest_free_run_blocks", false, "The longest run "
	       "of free blocks.", false, s->ps.largest_free_run);
	PER_ID("embgw_pool_allocations", true, "Successful allocations.",
	       false, s->ps.allocs);
	PER_ID("embgw_pool_allocation_failures", true, "Allocations the pool "
	       "could not satisfy.", false, s->ps.alloc_fail);
	PER_ID("embgw_pool_frees", true, "Successful frees.", false,
	       s->ps.frees);
	PER_ID("embgw_pool_refused_frees", true, "Frees refused (double, "
	       "foreign, out of range).", false, s->ps.refused);
	PER_ID("embgw_payload_batches", true, "Write batches handed to the "
	       "payload driver.", false, s->pl.batches);
	PER_ID("embgw_payload_writes", true, "Payload writes.", false,
	       s->pl.writes);
	PER_ID("embgw_payload_bytes", true, "Payload bytes the driver moved.",
	       false, s->pl.bytes);
	PER_ID("embgw_payload_failed_batches", true, "Write batches that "
	       "failed.", false, s->pl.failed_batches);
	PER_ID("embgw_payload_refused_writes", true, "Writes the driver "
	       "refused.", false, s->pl.refused_writes);
	PER_ID("embgw_qp_resets", true, "verbs: QPs brought back after an "
	       "error.", false, s->pl.qp_resets);
	PER_ID("embgw_payload_windows_bound", true, "verbs with window keys: "
	       "memory windows bound.", false, s->pl.window_binds);
	PER_ID("embgw_payload_window_bind_failures", true, "verbs with "
	       "window keys: windows that could not be bound.", false,
	       s->pl.window_bind_failed);
	PER_ID("embgw_payload_windows_closed", true, "verbs with window "
	       "keys: memory windows closed.", false, s->pl.window_unbinds);
	PER_ID("embgw_payload_windows_overdue", true, "verbs with window "
	       "keys: binds or invalidations past their deadline.", false,
	       s->ns.window_overdue);
	PER_ID("embgw_payload_window_stale_completions", true, "verbs with "
	       "window keys: window completions of no pending post.", false,
	       s->ns.window_stale);
}

/* Only identities with an attach point. */
#define PER_CLIENTS(NAME, COUNTER, HELP, EXPR) do {				\
	head(f, NAME, (COUNTER) ? "counter" : "gauge", HELP);		\
	for (uint16_t i_ = 0; i_ < n; i_++) {				\
		const struct snap *s = &sn[i_];				\
		char l_[96];						\
									\
		if (!s->has_clients)					\
			continue;					\
		LBL(l_, "port=\"%s\"", s->name);				\
		sample(f, NAME, COUNTER, l_, (uint64_t)(EXPR));		\
	}								\
} while (0)

static void
client_families(FILE *f, const struct snap *sn, uint16_t n)
{
	static const char *const why[] = { "invalid", "state", "other" };

	PER_CLIENTS("embgw_clients_attached", false, "Engine processes "
		    "attached now.", s->attached);
	PER_CLIENTS("embgw_client_rooms_held", false, "Rooms the attached "
		    "engines hold now.", s->rooms_held);
	PER_CLIENTS("embgw_client_rooms_opened", true, "Rooms engines "
		    "opened.", s->cs.rooms_opened);
	PER_CLIENTS("embgw_client_rooms_ok", true, "Engines' rooms that "
		    "succeeded.", s->cs.rooms_ok);
	PER_CLIENTS("embgw_client_rooms_failed", true, "Engines' rooms that "
		    "failed.", s->cs.rooms_failed);
	PER_CLIENTS("embgw_client_commands", true, "Commands taken off the "
		    "engines' rings.", s->cs.commands);
	head(f, "embgw_client_refused_commands", "counter", "Commands "
	     "answered with an error, by reason.");
	for (uint16_t i = 0; i < n; i++) {
		const struct egw_engines_stats *c = &sn[i].cs;
		uint64_t known = c->refused_invalid + c->refused_state;

		if (!sn[i].has_clients)
			continue;
		for (unsigned k = 0; k < 3; k++) {
			char l[128];

			LBL(l, "port=\"%s\",reason=\"%s\"", sn[i].name, why[k]);
			sample(f, "embgw_client_refused_commands", true, l,
			       k == 0 ? c->refused_invalid : k == 1 ?
			       c->refused_state : c->refused > known ?
			       c->refused - known : 0);
		}
	}
	PER_CLIENTS("embgw_client_completions", true, "Completions posted to "
		    "engines.", s->cs.completions);
	PER_CLIENTS("embgw_client_cq_overflows", true, "Completions lost to a "
		    "full completion ring.", s->cs.cq_overflow);
	PER_CLIENTS("embgw_client_alloc_waits", true, "Engines' rooms that "
		    "waited for source memory.", s->cs.alloc_waits);
	PER_CLIENTS("embgw_client_busy", true, "Engines' rooms refused as "
		    "busy (too many waiting).", s->cs.busy);
	PER_CLIENTS("embgw_client_slot_waits", true,
		    "Engines' rooms that "
		    "waited for a slot of the full room table.",
		    s->cs.slot_waits);
	PER_CLIENTS("embgw_client_held_long", true, "Success rooms held past "
		    "held_warn_ms without RELEASE.", s->cs.held_long);
	PER_CLIENTS("embgw_clients_lost", true, "Clients given up (lease "
		    "expired, broken ring).", s->cs.lost);
	PER_CLIENTS("embgw_client_lost_held_blocks", false, "Blocks held out "
		    "of the pool for given-up clients now.", s->held_blocks);
	PER_CLIENTS("embgw_content_cache_entries", false, "Content keys kept "
		    "now, landed or in flight.", s->cc.entries);
	PER_CLIENTS("embgw_content_cache_blocks", false, "Pool blocks the "
		    "landed content entries hold.", s->cc.blocks);
	PER_CLIENTS("embgw_content_cache_pinned_entries", false, "Landed "
		    "content entries some room holds now.", s->cc.pinned);
	PER_CLIENTS("embgw_content_cache_hits", true, "Keyed rooms served "
		    "from landed data, without a transfer.", s->cs.cache_hits);
	PER_CLIENTS("embgw_content_cache_misses", true, "Keyed rooms that "
		    "transferred.", s->cs.cache_misses);
	PER_CLIENTS("embgw_content_cache_shared", true, "Keyed rooms that "
		    "joined a transfer under way.", s->cs.cache_shared);
	PER_CLIENTS("embgw_content_cache_evictions", true, "Landed content "
		    "entries given back to the pool.", s->cc.evictions);
}

/* The attach socket's counters: one control thread serves every port's
 * attach point, so these have no port label. */
static void
attach_socket_families(FILE *f, const struct snap *sn, uint16_t n)
{
	static const char *const why[] = { "not_allowed", "closed_at_once",
					   "uid_capped", "hello_timeout" };
	struct gw_attach_counters c;
	bool any = false;

	for (uint16_t i = 0; i < n; i++)
		any = any || sn[i].has_clients;
	if (!any)
		return;
	gw_attach_counters(&c);
	head(f, "embgw_attach_refusals", "counter", "Attach connections "
	     "refused or closed before a hello, by reason (not_allowed: the "
	     "peer's credentials; closed_at_once: of those, closed without "
	     "waiting; uid_capped: too many without a hello from one uid; "
	     "hello_timeout: no hello within a second).");
	for (unsigned k = 0; k < 4; k++) {
		char l[64];

		LBL(l, "reason=\"%s\"", why[k]);
		sample(f, "embgw_attach_refusals", true, l,
		       k == 0 ? c.refused : k == 1 ? c.refused_closed :
		       k == 2 ? c.uid_capped : c.hello_timeouts);
	}
	head(f, "embgw_attach_lost_clients", "counter", "Given-up clients "
	     "whose blocks were held until they closed their socket "
	     "(held), and of those the ones still open past the hold, whose "
	     "blocks went back to the pool (expired).");
	sample(f, "embgw_attach_lost_clients", true, "outcome=\"held\"",
	       c.lost);
	sample(f, "embgw_attach_lost_clients", true, "outcome=\"expired\"",
	       c.lost_expired);
}

/* A histogram of delivered rooms per identity and peer. */
static void
room_histogram(FILE *f, const struct snap *sn, uint16_t n, bool time)
{
	const char *name = time ? "embgw_room_duration_seconds" :
			   "embgw_room_size_bytes";
	unsigned nb = time ? GW_HIST_TIME_BUCKETS : GW_HIST_SIZE_BUCKETS;

	head(f, name, "histogram", time ?
	     "Delivered rooms (a rank each) by time from open to delivery." :
	     "Delivered rooms (a rank each) by bytes landed: embeddings, "
	     "fill ids, mrope positions and the aux record.");
	for (uint16_t i = 0; i < n; i++) {
		const struct gw_id *id = sn[i].id;

		struct gw_peer_view *v;
		uint32_t np;

		if (!sn[i].has_role[R_LANGUAGE])
			continue;
		np = peers_of(id, &v);
		for (uint32_t p = 0; p < np; p++) {
			struct gw_room_hist h;
			const uint64_t *c;
			uint64_t cum = 0;
			char l[128];

			if (v[p].id == 0)
				continue;
			gw_room_hist_read(id, v[p].slot, &h);
			c = time ? h.time : h.size;
			LBL(l, "port=\"%s\",peer=\"%s\"", sn[i].name,
			    v[p].name);
			for (unsigned b = 0; b < nb; b++) {
				cum += c[b];
				if (time)
					fprintf(f, "%s_bucket{%s,le=\"%.6g\"} %lu\n",
						name, l, gw_hist_time_ns[b] / 1e9,
						(unsigned long)cum);
				else
					fprintf(f, "%s_bucket{%s,le=\"%lu\"} %lu\n",
						name, l,
						(unsigned long)gw_hist_size_bytes[b],
						(unsigned long)cum);
			}
			cum += c[nb];
			/* count is the +Inf bucket of the same copy */
			fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %lu\n", name, l,
				(unsigned long)cum);
			fprintf(f, "%s_count{%s} %lu\n", name, l,
				(unsigned long)cum);
			if (time)
				fprintf(f, "%s_sum{%s} %.9g\n", name, l,
					h.time_sum_ns / 1e9);
			else
				fprintf(f, "%s_sum{%s} %lu\n", name, l,
					(unsigned long)h.size_sum);
		}
		free(v);
	}
}

static void
delivered_bytes(FILE *f, const struct snap *sn, uint16_t n)
{
	head(f, "embgw_delivered_bytes", "counter",
	     "Bytes of the delivered "
	     "rooms (the sum of embgw_room_size_bytes over peers, those "
	     "removed since included).");
	for (uint16_t i = 0; i < n; i++) {
		const struct gw_id *id = sn[i].id;
		char l[96];

		if (!sn[i].has_role[R_LANGUAGE])
			continue;
		LBL(l, "port=\"%s\"", sn[i].name);
		/* peers gone included: a counter never goes back */
		sample(f, "embgw_delivered_bytes", true, l,
		       __atomic_load_n(&id->delivered_bytes, __ATOMIC_RELAXED));
	}
}

/* A gateway-wide sample, without labels. */
static void
sample_one(FILE *f, const char *name, const char *type, const char *help,
	   uint64_t v)
{
	bool counter = strcmp(type, "counter") == 0;

	head(f, name, type, help);
	fprintf(f, "%s%s %lu\n", name, counter ? "_total" : "",
		(unsigned long)v);
}

/* Membership in etcd (gw_cluster.c): one gateway-wide sample each. */
static void
cluster_families(FILE *f)
{
	struct egw_cluster_status s;

	if (!gw_cluster_status(&s, NULL, 0))
		return;
	sample_one(f, "embgw_cluster_connected", "gauge",
		   "1 while etcd answers (cluster.md)", s.connected);
	sample_one(f, "embgw_cluster_in_step", "gauge",
		   "1 while listed and watching",
		   s.state == EGW_CLUSTER_ST_WATCH);
	sample_one(f, "embgw_cluster_revision", "gauge",
		   "the last etcd revision seen", (uint64_t)s.revision);
	sample_one(f, "embgw_cluster_records", "gauge",
		   "valid records of other gateways", s.peers);
	sample_one(f, "embgw_cluster_peers", "gauge",
		   "records held as peers (compatible)", s.compatible);
	sample_one(f, "embgw_cluster_failures", "counter",
		   "requests to etcd that failed", s.failures);
}

/* Configuration reloads (SIGHUP, /embgw/reload) by outcome. */
static void
reload_family(FILE *f)
{
	uint64_t ok, refused;

	gw_reload_counts(&ok, &refused);
	head(f, "embgw_reloads", "counter",
	     "Configuration reloads by "
	     "outcome (ok: applied or unchanged; refused: the file had "
	     "errors or changed what cannot change live, nothing applied).");
	sample(f, "embgw_reloads", true, "outcome=\"ok\"", ok);
	sample(f, "embgw_reloads", true, "outcome=\"refused\"", refused);
}

char *
gw_metrics_render(struct gw_id *const *ids, uint16_t nids, size_t *len)
{
	struct snap *sn = calloc(nids ? nids : 1, sizeof(*sn));
	char *buf = NULL;
	FILE *f;

	if (sn == NULL)
		return NULL;
	f = open_memstream(&buf, len);
	if (f == NULL) {
		free(sn);
		return NULL;
	}
	for (uint16_t i = 0; i < nids; i++)
		take(&sn[i], ids[i]);
	device_families(f, sn, nids);
	node_families(f, sn, nids);
	xfer_families(f, sn, nids);
	rtt_families(f, sn, nids);
	room_histogram(f, sn, nids, true);
	room_histogram(f, sn, nids, false);
	delivered_bytes(f, sn, nids);
	pool_payload_families(f, sn, nids);
	client_families(f, sn, nids);
	attach_socket_families(f, sn, nids);
	cluster_families(f);
	reload_family(f);
	fputs("# EOF\n", f);
	free(sn);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
