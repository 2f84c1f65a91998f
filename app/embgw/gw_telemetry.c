/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rte_telemetry commands (usable with dpdk-telemetry.py):
 *   /embgw/stats  per-port (per-identity) packet counters and drops by
 *                 reason; the device's counters under each of its
 *                 identities
 *   /embgw/rooms  rooms and transfer counters of each engine
 *   /embgw/pool   pool geometry and occupancy
 *   /embgw/clients the attached engines of each identity with an attach
 *                 point: clients, their rooms, commands, refusals by
 *                 reason, lost completions, waits for memory
 * The counters are plain per-lcore integers read from the telemetry
 * thread: a read may be one update behind, never torn (aligned 64-bit).
 */
#include <pthread.h>

#include <rte_telemetry.h>

#include "gw.h"
#include "gw_attach.h"

/* DPDK 22.11 cannot unregister a command: the telemetry thread may call
 * one until the process exits, while the teardown frees the identities,
 * their pools and their client tables. Every command runs under `lock`
 * and gw_telemetry_stop() empties the table under it, so a read either
 * finishes before the teardown frees anything or answers no ports. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_id *const *tids;
static uint16_t ntids;

static void
add(struct rte_tel_data *d, const char *k, uint64_t v)
{
	rte_tel_data_add_dict_u64(d, k, v);
}

/* Every command answers one dictionary per port, keyed by its name. */
static int
per_port(struct rte_tel_data *d,
	 void (*fill)(const struct gw_id *id, struct rte_tel_data *c))
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	rte_tel_data_start_dict(d);
	for (uint16_t i = 0; i < ntids; i++) {
		struct rte_tel_data *c = rte_tel_data_alloc();

		if (c == NULL) {
			rc = -1;
			break;
		}
		rte_tel_data_start_dict(c);
		fill(tids[i], c);
		rte_tel_data_add_dict_container(d, tids[i]->cfg->name, c, 0);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static void
fill_stats(const struct gw_id *id, struct rte_tel_data *c)
{
	const struct gw_dev_stats *ds = &id->dev->st;
	struct egw_node_stats ns;

	egw_node_get_stats(id->node, &ns);
	add(c, "rx_pkts", ds->rx_pkts);
	add(c, "tx_pkts", ds->tx_pkts);
	add(c, "tx_full", ds->tx_full);
	add(c, "tx_link_down", ds->tx_link_down);
	add(c, "arp_rx", ds->arp_rx);
	add(c, "arp_tx", ds->arp_tx);
	add(c, "arp_miss", id->st.arp_miss);
	add(c, "drop_not_ipv4_udp", ds->drop_not_ipv4_udp);
	add(c, "drop_bad_ip", ds->drop_bad_ip);
	add(c, "drop_bad_udp", ds->drop_bad_udp);
	add(c, "drop_not_ours", ds->drop_not_ours);
	add(c, "rx_datagrams", ns.rx_datagrams);
	add(c, "tx_datagrams", ns.tx_datagrams);
	for (int k = 0; k < EGW_NODE_DROP_MAX; k++) {
		char name[64];

		snprintf(name, sizeof(name), "drop_%s",
			 egw_node_drop_name((enum egw_node_drop)k));
		add(c, name, ns.drops[k]);
	}
	add(c, "proto_ok", ns.proto.ok);
	add(c, "proto_bad_mac", ns.proto.refused[EGW_PROTO_ERR_MAC]);
	add(c, "proto_bad_length",
	    ns.proto.refused[EGW_PROTO_ERR_SHORT] +
		    ns.proto.refused[EGW_PROTO_ERR_LONG] +
		    ns.proto.refused[EGW_PROTO_ERR_LENGTH] +
		    ns.proto.refused[EGW_PROTO_ERR_BODY]);
	add(c, "proto_bad_header",
	    ns.proto.refused[EGW_PROTO_ERR_MAGIC] +
		    ns.proto.refused[EGW_PROTO_ERR_VERSION] +
		    ns.proto.refused[EGW_PROTO_ERR_TYPE] +
		    ns.proto.refused[EGW_PROTO_ERR_FLAGS] +
		    ns.proto.refused[EGW_PROTO_ERR_RESERVED]);
	add(c, "proto_bad_field", ns.proto.refused[EGW_PROTO_ERR_FIELD]);
	add(c, "proto_replay", ns.proto.refused[EGW_PROTO_ERR_REPLAY] +
		ns.proto.refused[EGW_PROTO_ERR_SESSION]);
	add(c, "registers_rx", ns.registers_rx);
	add(c, "registers_tx", ns.registers_tx);
	add(c, "reregisters", ns.reregisters);
	add(c, "adoptions", ns.adoptions);
	add(c, "peer_restarts", ns.peer_restarts);
	add(c, "peers_fenced", ns.peers_fenced);
	add(c, "register_refusals", ns.register_refusals);
	add(c, "register_refused", ns.register_refused);
	add(c, "inj_dropped", id->st.inj_dropped);
	add(c, "inj_duped", id->st.inj_duped);
	add(c, "inj_reordered", id->st.inj_reordered);
	add(c, "inj_junk", id->st.inj_junk);
}

static int
cmd_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return per_port(d, fill_stats);
}

static void
add_xfer(struct rte_tel_data *c, const char *pre, const struct egw_xfer_stats *x)
{
	char k[64];
	uint64_t rej = 0;

	for (int e = 0; e < EGW_E_COUNT; e++)
		rej += x->rejected[e];
#define X(f) do { snprintf(k, sizeof(k), "%s_%s", pre, #f); add(c, k, x->f); } while (0)
	X(rooms_active);
	X(rooms_opened);
	X(rooms_ok);
	X(rooms_failed);
	X(windows);
	X(resumes);
	X(retransmits);
	X(duplicates);
	X(idle_waits);
	X(alloc_retries);
	X(bytes);
	X(peers_dead);
	X(admit_queued);
	X(admit_queue_max);
	X(admitted);
	X(restarts);
	X(admit_wait_max_ns);
	X(admit_recounts);
	X(quarantined);
	X(quarantine_rooms);
	X(quarantine_blocks);
	X(quarantine_acked);
	X(quarantine_dead);
	X(quarantine_expired);
	X(abort_acks);
	X(yields);
	X(group_rooms);
	X(group_ranks);
	X(group_bytes_saved);
#undef X
	snprintf(k, sizeof(k), "%s_rejected", pre);
	add(c, k, rej);
	snprintf(k, sizeof(k), "%s_admit_wait_p50_ns", pre);
	add(c, k, egw_xfer_wait_quantile(x, 0.50));
	snprintf(k, sizeof(k), "%s_admit_wait_p99_ns", pre);
	add(c, k, egw_xfer_wait_quantile(x, 0.99));
}

static void
fill_rooms(const struct gw_id *id, struct rte_tel_data *c)
{
	struct egw_xfer_stats x;

	if (egw_node_sender(id->node) != NULL) {
		egw_xfer_sender_get_stats(egw_node_sender(id->node), &x);
		add_xfer(c, "encode", &x);
	}
	if (egw_node_receiver(id->node) != NULL) {
		egw_xfer_receiver_get_stats(egw_node_receiver(id->node), &x);
		add_xfer(c, "language", &x);
	}
}

static int
cmd_rooms(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return per_port(d, fill_rooms);
}

static void
fill_pool(const struct gw_id *id, struct rte_tel_data *c)
{
	const struct egw_pool_geom *g = egw_pool_geom(id->pool);
	struct egw_pool_stats s;

	egw_pool_get_stats(id->pool, &s);
	add(c, "block_tokens", g->block_tokens);
	add(c, "blocks_total", s.blocks_total);
	add(c, "blocks_in_use", s.blocks_in_use);
	add(c, "cached_blocks", s.cached_blocks);
	add(c, "free_runs", s.free_runs);
	add(c, "largest_free_run", s.largest_free_run);
	add(c, "allocs", s.allocs);
	add(c, "alloc_fail", s.alloc_fail);
	add(c, "frees", s.frees);
	add(c, "refused_frees", s.refused);
}

static int
cmd_pool(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return per_port(d, fill_pool);
}

/* Only identities with an attach point answer. The sum runs over the
 * client table while the worker updates it: a client detached during the
 * read may be counted twice or not at all for that one answer, as any
 * counter here may be one update behind. */
static int
cmd_clients(const char *cmd, const char *params, struct rte_tel_data *d)
{
	int rc = 0;

	(void)cmd;
	(void)params;
	pthread_mutex_lock(&lock);
	rte_tel_data_start_dict(d);
	for (uint16_t i = 0; i < ntids; i++) {
		const struct gw_attach_port *ap = tids[i]->attach;
		struct egw_engines_stats st;
		struct egw_engines_cache_stats cs;
		struct rte_tel_data *c;

		if (ap == NULL)
			continue;
		c = rte_tel_data_alloc();
		if (c == NULL) {
			rc = -1;
			break;
		}
		egw_engines_stats(ap->clients, &st);
		rte_tel_data_start_dict(c);
		add(c, "attached", egw_engines_attached(ap->clients));
		add(c, "rooms_held", egw_engines_rooms(ap->clients));
		add(c, "rooms_opened", st.rooms_opened);
		add(c, "rooms_ok", st.rooms_ok);
		add(c, "rooms_failed", st.rooms_failed);
		add(c, "commands", st.commands);
		add(c, "refused", st.refused);
		add(c, "refused_invalid", st.refused_invalid);
		add(c, "refused_state", st.refused_state);
		add(c, "completions", st.completions);
		add(c, "cq_overflow", st.cq_overflow);
		add(c, "alloc_waits", st.alloc_waits);
		add(c, "busy", st.busy);
		add(c, "slot_waits", st.slot_waits);
		egw_engines_cache(ap->clients, &cs);
		add(c, "cache_entries", cs.entries);
		add(c, "cache_blocks", cs.blocks);
		add(c, "cache_pinned", cs.pinned);
		add(c, "cache_hits", st.cache_hits);
		add(c, "cache_misses", st.cache_misses);
		add(c, "cache_shared", st.cache_shared);
		add(c, "cache_evictions", cs.evictions);
		add(c, "held_long", st.held_long);
		add(c, "lost", st.lost);
		add(c, "held_rooms", st.held_rooms);
		add(c, "held_blocks", egw_engines_held_blocks(ap->clients));
		rte_tel_data_add_dict_container(d, tids[i]->cfg->name, c, 0);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void
gw_telemetry_init(struct gw_id *const *ids, uint16_t nids)
{
	pthread_mutex_lock(&lock);
	tids = ids;
	ntids = nids;
	pthread_mutex_unlock(&lock);
	rte_telemetry_register_cmd("/embgw/stats", cmd_stats,
				   "Per-port packet counters and drops by reason");
	rte_telemetry_register_cmd("/embgw/rooms", cmd_rooms,
				   "Room and transfer counters per engine");
	rte_telemetry_register_cmd("/embgw/pool", cmd_pool,
				   "Block pool geometry and occupancy");
	rte_telemetry_register_cmd("/embgw/clients", cmd_clients,
				   "Attached engines: rooms, commands, refusals by reason");
}

void
gw_telemetry_stop(void)
{
	/* waits for a read in progress; later reads answer no ports */
	pthread_mutex_lock(&lock);
	tids = NULL;
	ntids = 0;
	pthread_mutex_unlock(&lock);
}
