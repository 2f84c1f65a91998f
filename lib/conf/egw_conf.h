/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_CONF_H
#define EGW_CONF_H

/**
 * @file
 * Gateway configuration: a libconfig file turned into a typed, validated
 * struct. Every error names file:line, the setting's path and why; loading
 * goes on after an error so that one run reports all of them. Defaults and
 * the schema are in doc/configuration.md. No DPDK, no devices touched.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "egw_pool.h"
#include "egw_proto.h"
#include "egw_xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_CONF_MAX_PORTS 8
#define EGW_CONF_MAX_PEERS 32	/**< peers a port's list may name */
#define EGW_CONF_MAX_SLOTS 4096 /**< max_peers at most */
#define EGW_CONF_DEFAULT_MAX_PEERS 64
#define EGW_CONF_MAX_NEIGH 32
#define EGW_CONF_MAX_ROUTES 16
/** payload.hop_limit's default: enough routers for any fabric */
#define EGW_CONF_HOP_LIMIT 64
#define EGW_CONF_MAX_QUEUES 16
#define EGW_CONF_MAX_ERRORS 64
/** max_rooms x max_runs_per_room: the receiver's run tables */
#define EGW_CONF_MAX_RUNS (1u << 26)
#define EGW_CONF_NAME_LEN 32
#define EGW_CONF_PATH_LEN 256

enum egw_payload_driver { EGW_PAYLOAD_SHM = 0, EGW_PAYLOAD_VERBS = 1 };

struct egw_conf_peer {
	char name[EGW_CONF_NAME_LEN];
	uint32_t addr;          /**< IPv4, host byte order */
	uint16_t udp_port;
	/** shm payload: this peer's pool file, when several receiving peers
	 * share one port ("" = the port's payload.path) */
	char shm_path[EGW_CONF_PATH_LEN];
};

struct egw_conf_neigh {
	uint32_t addr;
	uint8_t mac[6];
};

/** A route: peers in net/prefix are reached through `via`, a next hop on
 * the port's own subnet (its MAC is the one ARP asks for). */
struct egw_conf_route {
	/** host byte order, host bits zero */
	uint32_t net;
	/** 0..32; 0 is the default route */
	uint8_t prefix;
	/** host byte order, on the port's subnet */
	uint32_t via;
};

struct egw_conf_payload {
	enum egw_payload_driver driver;
	char device[64];        /**< verbs: e.g. mlx5_0, rxe0 */
	uint8_t port;           /**< verbs: 1-based port number */
	int gid_index;          /**< verbs: -1 = auto (RoCEv2 GID of address) */
	/** verbs: the GRH hop limit (routers on the path each take one) */
	uint8_t hop_limit;
	bool window_keys;       /**< verbs: a memory window per window and kind */
	char path[EGW_CONF_PATH_LEN]; /**< shm: the pool's shared-memory file */
	/** an encode port's pool cut into this many equal segments, one per
	 *  attached client (0: one pool every client maps) */
	uint32_t segments;
};

/** payload.segments at most */
#define EGW_CONF_MAX_SEGMENTS 64u

/** The page each kind's share of a segment fills whole (the gateway maps
 *  the segments' memory side by side at that granularity). */
#define EGW_CONF_SEGMENT_PAGE 4096u

/** Blocks per segment must be a multiple of this for `g` (each kind's
 *  share of a segment whole pages). */
uint32_t egw_conf_segment_align(const struct egw_pool_geom *g);

/** What a port's worker does when it finds nothing to do
 * (doc/configuration.md, "idle"). */
enum egw_idle_mode {
	EGW_IDLE_BACKOFF = 0, /**< pause, then sleep up to max_sleep_us */
	EGW_IDLE_POLL = 1,    /**< busy polling: the core is never given back */
};

/** An idle worker's longest sleep, by default and at most: a sleep ends
 * at the worker's next deadline anyway; the bound is how late an idle
 * worker sees what has no deadline - a datagram, an engine's command, a
 * reload (doc/configuration.md, "idle"). */
#define EGW_CONF_IDLE_MAX_SLEEP_US 1000u
#define EGW_CONF_IDLE_MAX_SLEEP_US_LIMIT 10000u

struct egw_conf_idle {
	enum egw_idle_mode mode;
	uint32_t max_sleep_us; /**< the bound on one sleep: wake-up latency */
};

/** What a port puts in its datagrams' UDP checksum field. */
enum egw_udp_cksum {
	/** the device computes it where it can (transmit offload); else 0,
	 *  "no checksum" (RFC 768): the tag covers every byte */
	EGW_UDP_CKSUM_AUTO = 0,
	/** always a checksum: computed in software where the device cannot */
	EGW_UDP_CKSUM_ALWAYS = 1,
};

struct egw_conf_port {
	char name[EGW_CONF_NAME_LEN];
	char device[EGW_CONF_PATH_LEN]; /**< vdev string or PCI address */
	bool is_pci;
	uint32_t addr;          /**< host byte order */
	uint8_t prefix;
	uint16_t udp_port;
	uint16_t mtu;
	enum egw_udp_cksum udp_checksum;
	uint16_t queues;
	uint16_t lcores[EGW_CONF_MAX_QUEUES]; /**< one worker lcore per queue */
	uint16_t nlcores;       /**< == queues once valid */
	struct egw_conf_payload payload;
	struct egw_conf_idle idle;
	struct egw_conf_neigh neigh[EGW_CONF_MAX_NEIGH];
	uint16_t nneigh;
	struct egw_conf_route routes[EGW_CONF_MAX_ROUTES];
	uint16_t nroutes;
	struct egw_conf_peer peers[EGW_CONF_MAX_PEERS];
	uint16_t npeers;
	/** peer slots: the listed peers and those that come while running
	 *  (a cluster's members, a reload's) */
	uint16_t max_peers;
	/** language side: ranks g*F..(g+1)*F-1 of a room share one receive
	 *  (doc/client.md, "Fan-out"); 1: every rank alone */
	uint16_t fanout_ranks;
};

struct egw_conf_policy {
	enum egw_policy_kind kind;
	uint32_t tokens;        /**< fixed; adaptive: the start value */
	uint32_t percentile, min_tokens, max_tokens; /**< adaptive */
};

#define EGW_CONF_MAX_IDS 16
#define EGW_CONF_SOCK_PATH_LEN 108 /**< sun_path */

#define EGW_CONF_MAX_TENANTS 8

/** gateway.attach.tenants[]: an attach socket of its own, with its own
 * credentials, serving only the ports it names (their pools). */
struct egw_conf_tenant {
	char path[EGW_CONF_SOCK_PATH_LEN]; /**< the Unix socket, absolute */
	uint32_t mode;          /**< the socket's permission bits */
	char group[EGW_CONF_NAME_LEN]; /**< the socket's group ("": ours) */
	uint32_t allow_uids[EGW_CONF_MAX_IDS];
	uint16_t nuids;
	uint32_t allow_gids[EGW_CONF_MAX_IDS];
	uint16_t ngids;
	char ports[EGW_CONF_MAX_IDS][EGW_CONF_NAME_LEN]; /**< port names */
	uint16_t nports;
};

/** gateway.attach: where local engine processes attach (doc/client.md). */
struct egw_conf_attach {
	bool enabled;           /**< the group is present */
	char path[EGW_CONF_SOCK_PATH_LEN]; /**< the Unix socket, absolute */
	uint32_t mode;          /**< the socket's permission bits */
	char group[EGW_CONF_NAME_LEN]; /**< the socket's group ("": ours) */
	uint32_t allow_uids[EGW_CONF_MAX_IDS]; /**< SO_PEERCRED uids allowed */
	uint16_t nuids;
	uint32_t allow_gids[EGW_CONF_MAX_IDS]; /**< ... or gids */
	uint16_t ngids;
	uint32_t max_clients;
	uint32_t sq_entries, cq_entries, slots; /**< defaults per client */
	uint32_t lease_ms;      /**< 0: no lease */
	uint32_t cache_entries; /**< content entries (0: keys ignored) */
	uint32_t cache_tokens;  /**< landed tokens kept unheld;
				 *   EGW_CONF_CACHE_HALF: half the pool */
	uint32_t held_warn_ms;  /**< report rooms held longer (0: never) */
	/** sockets of their own for some ports; the others on `path` */
	struct egw_conf_tenant tenants[EGW_CONF_MAX_TENANTS];
	uint16_t ntenants;
};

#define EGW_CONF_CACHE_HALF UINT32_MAX

/** Default TCP port of gateway.metrics (doc/configuration.md). */
#define EGW_CONF_METRICS_PORT 9470

/** gateway.metrics: the Prometheus endpoint (doc/gateway.md, "Metrics"). */
struct egw_conf_metrics {
	bool enabled;           /**< the group is present */
	uint32_t addr;          /**< IPv4 to listen on, host order (loopback) */
	uint16_t port;          /**< TCP port */
};

#define EGW_CONF_MAX_ENDPOINTS 8
#define EGW_CONF_URL_LEN 128
#define EGW_CONF_SECRET_LEN 256

/** gateway.cluster: membership in etcd v3 (doc/cluster.md). */
struct egw_conf_cluster {
	bool enabled;		      /**< the group is present */
	char name[EGW_CONF_NAME_LEN]; /**< keys under /embgw/<name>/ */
	/** "http[s]://host:port", no path, tried in turn */
	char endpoints[EGW_CONF_MAX_ENDPOINTS][EGW_CONF_URL_LEN];
	uint16_t nendpoints;
	uint32_t lease_ttl_s;	     /**< the records' lease */
	uint32_t dial_timeout_ms;    /**< connecting to an endpoint */
	uint32_t request_timeout_ms; /**< one unary request, connect included */
	/* tls { }: resolved against the file's directory; "" = not given */
	char tls_ca[EGW_CONF_PATH_LEN];
	char tls_cert[EGW_CONF_PATH_LEN];
	char tls_key[EGW_CONF_PATH_LEN];
	char user[EGW_CONF_NAME_LEN]; /**< "": no authentication */
	char password_file[EGW_CONF_PATH_LEN];
	char password[EGW_CONF_SECRET_LEN]; /**< read from password_file */
};

struct egw_conf {
	char file[EGW_CONF_PATH_LEN];
	char name[EGW_CONF_NAME_LEN];
	uint16_t roles;         /**< EGW_ROLE_* */
	struct egw_pool_geom geom;
	char dtype[8];          /**< the embedding type's name (pool.dtype) */
	struct egw_conf_policy policy;
	uint32_t max_rooms, max_runs_per_room, max_blocks_per_round;
	uint32_t pipeline_depth;
	struct egw_xfer_timers timers;
	char key_file[EGW_CONF_PATH_LEN]; /**< resolved against the file's dir */
	struct egw_proto_key key;
	bool key_loose_perms;   /**< readable by group/others: a warning */
	struct egw_conf_attach attach;
	struct egw_conf_metrics metrics;
	struct egw_conf_cluster cluster;
	struct egw_conf_port ports[EGW_CONF_MAX_PORTS];
	uint16_t nports;
};

struct egw_conf_errors {
	char msg[EGW_CONF_MAX_ERRORS][320];
	unsigned stored;        /**< messages in msg[] */
	unsigned total;         /**< found (may exceed what is stored) */
};

/** Defaults for everything that has one (doc/configuration.md). */
void egw_conf_defaults(struct egw_conf *c);

/**
 * Load and validate `path`. Returns 0, or -EINVAL with every problem found
 * in `errs` (each "file:line: setting: why"). The key file is read and the
 * MAC key derived; nothing else outside the file is touched.
 */
int egw_conf_load(const char *path, struct egw_conf *c,
		  struct egw_conf_errors *errs);

/**
 * egw_conf_load, then every error to `err` (one per line, then a count).
 * Returns 0 or -EINVAL. What `embgw --check-config` and startup print.
 */
int egw_conf_load_report(const char *path, struct egw_conf *c, FILE *err);

/** A one-screen summary: roles, pool geometry, ports (nginx -t style). */
void egw_conf_print_summary(const struct egw_conf *c, FILE *f);

/** Fill the xfer engine configuration and policy from the file's values. */
void egw_conf_to_xfer(const struct egw_conf *c, struct egw_xfer_conf *xc,
		      struct egw_policy *policy);

/* ---- comparing a running configuration with a new one ------------------ */

#define EGW_CONF_MAX_CHANGES 64
#define EGW_CONF_DIFF_PEERS (EGW_CONF_MAX_PORTS * EGW_CONF_MAX_PEERS)

/** One setting whose value differs, by its path in the file. */
struct egw_conf_change {
	char path[80]; /**< e.g. "ports.[0].mtu", "gateway.timers.rto_ms" */
	char old_val[272], new_val[272];
};

/** A peer of one port that a reload removes or adds: the port's index and
 *  the peer's index in that port's list (of the old configuration for a
 *  removal, of the new one for an addition). */
struct egw_conf_peer_ref {
	uint16_t port;
	uint16_t peer;
};

/**
 * What differs between a running configuration and a new one. `fixed`:
 * settings that cannot change while the gateway runs (they size or name
 * what was set up at start: ports, pool geometry, table sizes, payload
 * drivers, attach sockets, the metrics endpoint, the name, roles and
 * key); any of them refuses a reload. `live`: the settings that can
 * (timers, admission and policy settings, the round and pipeline
 * limits), for the log. Peers are compared by name within each port: a
 * peer whose address, UDP port or pool file changed is removed and added.
 * Counts past what the arrays hold are still counted in the totals.
 */
struct egw_conf_diff {
	struct egw_conf_change fixed[EGW_CONF_MAX_CHANGES];
	unsigned nfixed, fixed_total;
	struct egw_conf_change live[EGW_CONF_MAX_CHANGES];
	unsigned nlive, live_total;
	struct egw_conf_peer_ref removed[EGW_CONF_DIFF_PEERS];
	unsigned nremoved;
	struct egw_conf_peer_ref added[EGW_CONF_DIFF_PEERS];
	unsigned nadded;
};

/**
 * Compare `cur` (running) with `next` (newly loaded and valid) into `d`.
 * Pure: reads the two structs only. Returns 0 when `next` can be applied
 * live (d->fixed_total == 0), -EPERM when a setting in d->fixed forbids
 * it, -EINVAL for a NULL argument.
 */
int egw_conf_diff(const struct egw_conf *cur, const struct egw_conf *next,
		  struct egw_conf_diff *d);

/** Whether the diff changes anything at all (live settings or peers). */
bool egw_conf_diff_empty(const struct egw_conf_diff *d);
/**
 * Where a datagram for `ip` goes on port `p`: `ip` itself when it is on the
 * port's subnet, else the next hop of the longest route prefix that covers
 * it, else 0 (unreachable). Host byte order.
 */
uint32_t egw_conf_next_hop(const struct egw_conf_port *p, uint32_t ip);

/** "a.b.c.d" of a host-order IPv4 address into buf (>= 16 bytes). */
const char *egw_conf_ip_str(uint32_t addr, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* EGW_CONF_H */
