/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw application internals: one struct gw_port per configured port,
 * owned by exactly one worker lcore (no locks on the fast path).
 */
#ifndef EMBGW_GW_H
#define EMBGW_GW_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "egw_conf.h"
#include "egw_node.h"
#include "egw_payload.h"

#define GW_BURST 32
#define GW_MAX_NEIGH (EGW_CONF_MAX_NEIGH + EGW_CONF_MAX_PEERS)
/* ports, or the identities a generator plays from one port: at most as
 * many as a gateway's port can have peers */
#define GW_MAX_PORTS EGW_CONF_MAX_PEERS
#define GW_TICK_NS 100000ull          /* timers every 100 us */
#define GW_ARP_RETRY_NS 100000000ull  /* re-ask an unresolved neighbour */
#define GW_CLOSE_GRACE_NS 100000000ull /* before a port closes (gw_port_stop) */

extern volatile bool gw_force_quit;

/* Log type "user.embgw" (rte_log): --log-level=user.embgw:debug */
extern int gw_logtype;
#define GW_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, gw_logtype, "EMBGW: " fmt, ##__VA_ARGS__)

struct gw_neigh {
	uint32_t ip;
	struct rte_ether_addr mac;
	bool valid, is_static;
	uint64_t next_arp;
};

/* Fault injection on control datagrams we send (tests; bounded by the
 * caller's run time). Percentages 0..100. */
struct gw_faults {
	uint32_t drop_pct, dup_pct, reorder_pct;
	uint32_t junk_per_tick;  /* malformed/forged/replayed datagrams sent */
	uint64_t flood_pps;      /* embgw-gen: junk datagrams per second */
	uint64_t qp_error_at;    /* verbs: a QP error after this batch */
	uint64_t flood_sent, flood_start;
	uint64_t rng;
};

struct gw_port_stats {
	uint64_t rx_pkts, tx_pkts, tx_full;
	uint64_t arp_rx, arp_tx, arp_miss;
	uint64_t drop_not_ipv4_udp, drop_bad_ip, drop_bad_udp, drop_not_ours;
	uint64_t inj_dropped, inj_duped, inj_reordered, inj_junk, flood;
	uint64_t posts;          /* payload batches handed to the driver */
	/* worker CPU: cycles of loop iterations that did work (a burst in,
	 * completions, timers) out of all cycles the worker ran */
	uint64_t busy_cycles, run_cycles;
};

struct gw_work;

struct gw_port {
	const struct egw_conf *conf;
	const struct egw_conf_port *cfg;
	uint16_t idx;            /* in the configuration */
	uint16_t port_id;        /* DPDK port */
	unsigned lcore;
	struct rte_mempool *mp;
	struct rte_ether_addr mac;
	struct gw_neigh neigh[GW_MAX_NEIGH];
	uint32_t nneigh;
	const struct egw_payload_ops *dops;
	struct egw_payload *drv;
	struct egw_pool *pool;
	struct egw_node *node;
	struct rte_mbuf *tx[GW_BURST];
	uint16_t ntx;
	struct rte_mbuf *held;   /* reorder injection */
	uint8_t last_dgram[EGW_PROTO_MAX_LEN]; /* for replay injection */
	size_t last_len;
	uint32_t last_ip;
	uint16_t last_port;
	uint16_t ip_id;
	struct gw_faults faults;
	struct gw_port_stats st;
	struct gw_work *work;
	/* --identities: several gw_ports on one device, owner[0..nids) in
	 * one array. The owner (the first) configures, polls and closes the
	 * device and hands each frame to the identity whose address it is
	 * for; without identities owner == self, nids == 1. */
	struct gw_port *owner;
	uint16_t nids;
	uint64_t next_tick;
	bool started;            /* the DPDK port is up (stop only then) */
	bool stopped;
	FILE *cap;               /* --capture: control frames in and out */
};

/* Monotonic nanoseconds from the TSC (one multiply, no system call: the
 * poll loop reads the clock every iteration). gw_clock_init() after EAL
 * init; before it, and where the TSC frequency is unknown, clock_gettime. */
void gw_clock_init(void);
uint64_t gw_now_ns(void);
/* The same clock from a TSC value already read (the poll loop reads it
 * once per iteration, for its time and its busy-cycle count). */
uint64_t gw_tsc_ns(uint64_t cycles);

/* gw_net.c */
int gw_port_start(struct gw_port *p);
void gw_port_stop(struct gw_port *p);
uint16_t gw_net_rx_burst(struct gw_port *p, uint64_t now);
void gw_net_tick(struct gw_port *p, uint64_t now);
void gw_net_flush(struct gw_port *p);
void gw_net_send_udp(struct gw_port *p, uint32_t ip, uint16_t port,
		     const uint8_t *buf, size_t len);
/* --capture: a pcap file of every control frame received and sent. */
int gw_capture_open(struct gw_port *p, const char *path);
void gw_capture_close(struct gw_port *p);
/* Test knob: junk datagrams towards the first peer (see --inject-junk). */
void gw_net_inject_junk(struct gw_port *p);
/* embgw-gen: junk at flood_pps towards the first peer, paced by time. */
void gw_net_flood(struct gw_port *p, uint64_t now);

/* gw_work.c: the built-in producer (encode) and driver (language) */
/* A driven room's id: run (8 bits, tells this run's rooms from a previous
 * one's) | index (24 bits) | length in tokens (32 bits: the producer reads
 * the length from the id, so any encode gateway can serve any driver). */
#define GW_ROOM_INDEX_MASK 0xffffffu
#define GW_MAX_DRIVE GW_ROOM_INDEX_MASK

struct gw_work_opts {
	bool produce;            /* encode: synthesise data for any INIT */
	uint32_t drive;          /* language: rooms to run (0: none) */
	uint32_t concurrency;
	uint32_t lengths[64];
	uint32_t nlengths;
	uint16_t ranks;
	bool dummy_rank;         /* last rank aux-only */
	char peer[EGW_CONF_NAME_LEN];
	bool exit_when_done;
	uint64_t seed;
	uint32_t start_delay_ms;
	uint32_t rate;           /* open loop: rooms per second (0: closed) */
	uint16_t identity;       /* port index, or with --identities which
				  * one (0..K-1): added to the room-id run */
};
int gw_work_create(struct gw_port *p, const struct gw_work_opts *o);
void gw_work_tick(struct gw_port *p, uint64_t now);
bool gw_work_finished(const struct gw_port *p);
bool gw_work_drives(const struct gw_port *p);
bool gw_work_wants_exit(const struct gw_port *p);
void gw_work_report(const struct gw_port *p, FILE *f);
void gw_work_report_total(const struct gw_port *ports, uint16_t n, FILE *f);
extern const struct egw_node_ops gw_node_ops;

/* main.c: the gateway and the generator share one main */
int gw_main(int argc, char **argv, bool generator);

/* gw_telemetry.c */
void gw_telemetry_init(struct gw_port *ports, uint16_t nports);

#endif
