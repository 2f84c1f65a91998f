/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw application internals. A device (struct gw_dev: a DPDK port, its
 * queue, mbuf pool, rx/tx and ARP) is polled by exactly one worker lcore
 * and owns one or more identities (struct gw_id: an address on the device
 * with its own node, pool, payload driver and room sources). Without
 * --identities a device has one identity. Everything a worker touches
 * belongs to that worker: no locks on the fast path.
 */
#ifndef EMBGW_GW_H
#define EMBGW_GW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ether.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "egw_conf.h"
#include "egw_log.h"
#include "egw_node.h"
#include "egw_payload.h"

#define GW_BURST 32
/* identities one device can play: as many as a gateway's port can have
 * peers, so that one generator port can play all of a gateway's peers */
#define GW_MAX_IDS EGW_CONF_MAX_PEERS
#define GW_MAX_SOURCES 4              /* room sources per identity */
#define GW_TICK_NS 100000ull          /* timers every 100 us */
#define GW_ARP_RETRY_NS 100000000ull  /* re-ask an unresolved neighbour */
#define GW_ARP_MAX_NS 3200000000ull   /* ... one that never answered */
#define GW_CLOSE_GRACE_NS 100000000ull /* before a device closes */
#define GW_LINK_SETTLE_NS 10000000ull /* a link just up, before requests */

extern volatile bool gw_force_quit;

/* Log types (rte_log), one per component (egw_log.h): "user.embgw" (the
 * gateway), "user.embgw.node", "user.embgw.drivers", "user.embgw.attach";
 * --log-level=user.embgw:debug sets one, --log-level='user.embgw*:debug'
 * all. A file logs as another component than the gateway by defining
 * GW_LOG_COMP before it includes anything. */
extern int gw_logtypes[EGW_LOG_COMP_MAX];
#ifndef GW_LOG_COMP
#define GW_LOG_COMP EGW_LOG_GATEWAY
#endif
#define GW_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, gw_logtypes[GW_LOG_COMP], "EMBGW: " fmt, \
		##__VA_ARGS__)

/* Register the log types (after rte_eal_init, so --log-level applies)
 * and route the libraries' and drivers' lines to them. */
void gw_log_init(void);

struct gw_room_source;
struct gw_attach_port;
struct gw_reload_box;

struct gw_neigh {
	uint32_t ip;
	struct rte_ether_addr mac;
	bool valid, is_static;
	uint32_t refs; /* peers at this address (and static) */
	uint64_t next_arp;
	uint64_t arp_ns; /* the request interval: doubles while nobody
			  * answers, up to GW_ARP_MAX_NS */
	/* the last datagram sent while the address was unknown, sent once
	 * it is learned (a queue of one, as a kernel keeps for an unresolved
	 * neighbour): a gateway's first REGISTER to a peer that started
	 * earlier then leaves with the ARP reply, not 200 ms later */
	struct rte_mbuf *pending;
};

#ifdef GW_TEST_HOOKS
/* A test build's knobs (-Dtest_hooks=true; gw_test_knobs.c): faults on
 * the control datagrams an identity sends, junk at its peer, a fixed
 * session id, and the fault-injecting payload driver over the configured
 * one. A production build has none of this, not even the struct. */
struct gw_test_knobs {
	bool on;                 /* a datagram knob is set */
	uint32_t drop_pct, dup_pct, reorder_pct; /* 0..50 */
	uint32_t junk_per_tick;  /* malformed/forged/replayed datagrams */
	uint64_t qp_error_at;    /* the driver's link fails after batch N */
	uint64_t stale_write_at; /* a write into the window of room N once
				  * room N + 1 has been sent */
	bool fault;              /* the payload driver is wrapped */
	uint64_t session;        /* --test-session: this session id, not a
				  * random one (0: random) */
	uint64_t rng;
	struct rte_mbuf *held;   /* reorder: goes out after the next one */
	uint8_t last_dgram[EGW_PROTO_MAX_LEN]; /* for replayed junk */
	size_t last_len;
	uint32_t last_ip;
	uint16_t last_port;
};
#endif

/* Junk at a set rate towards the first peer (embgw-gen's flood,
 * app/embgw-gen/gw_flood.c; the gateway does not link it). */
struct gw_flood {
	uint64_t pps;            /* 0: off */
	uint64_t sent, start, rng;
};

/* What arrives at and leaves the device, before any identity. */
struct gw_dev_stats {
	uint64_t rx_pkts, tx_pkts, tx_full;
	uint64_t tx_link_down;   /* frames not sent: the link was down */
	uint64_t arp_rx, arp_tx;
	uint64_t drop_not_ipv4_udp, drop_bad_ip, drop_bad_udp, drop_not_ours;
	/* worker CPU: cycles of loop iterations that did work (a burst in,
	 * completions, timers) out of all cycles the worker ran */
	uint64_t busy_cycles, run_cycles;
	/* an idle worker's sleeps (gw_idle.h): how many (each one ends in
	 * a wake-up), the cycles they took, and the most one overran the
	 * time it asked for (what the kernel adds to the wake-up) */
	uint64_t idle_sleeps, idle_cycles, idle_late_max_cycles;
};

struct gw_id_stats {
	uint64_t arp_miss;       /* datagrams not sent: no MAC for the peer */
	uint64_t posts;          /* payload batches handed to the driver */
	uint64_t inj_dropped, inj_duped, inj_reordered, inj_junk, flood;
};

/* Delivered rooms of one peer by duration and size (gw_room_hist.c):
 * bucket b counts rooms up to bound b and above bound b - 1; the last
 * slot counts those above every bound. */
#define GW_HIST_TIME_BUCKETS 14
#define GW_HIST_SIZE_BUCKETS 9
struct gw_room_hist {
	uint64_t time[GW_HIST_TIME_BUCKETS + 1];
	uint64_t size[GW_HIST_SIZE_BUCKETS + 1];
	uint64_t time_sum_ns, size_sum;
};

struct gw_id;
struct gw_peers;

struct gw_dev {
	const struct egw_conf_port *cfg; /* the configured port */
	uint16_t port_id;        /* DPDK port */
	unsigned lcore;
	struct rte_mempool *mp;
	struct rte_ether_addr mac;
	struct rte_mbuf *tx[GW_BURST];
	uint16_t ntx;
	uint16_t ip_id;
	struct gw_id *ids[GW_MAX_IDS];
	uint16_t nids;
	bool started;            /* the DPDK port is up (stop only then) */
	/* UDP/IPv4 checksums (ports[].udp_checksum): computed by the
	 * device, in software, or (tx, neither) sent as 0 */
	bool tx_cksum_hw, tx_cksum_sw, rx_cksum_hw;
	bool link_up;            /* as last read (gw_dev_link_check) */
	uint64_t now;            /* the worker's time of this iteration (0
				  * before the loop): what dates a captured
				  * frame, so capture reads no clock */
	uint64_t next_link_check;
	uint64_t link_settled_at; /* ARP requests wait until then */
	uint64_t loops;          /* turns of the worker's loop (the watchdog
				  * reads it from its own thread) */
	struct gw_dev_stats st;
};

/* --capture's file: written a whole frame at a time, so that a failed
 * write can be cut back to the last whole frame. */
struct gw_capture {
	int fd;                  /* -1: none, or stopped */
	uint64_t bytes;          /* written, whole frames only */
	uint64_t frames;
	int err;                 /* errno that stopped it, 0 */
	char path[512];
};

struct gw_id {
	struct gw_dev *dev;
	const struct egw_conf *conf;
	const struct egw_conf_port *cfg; /* address, UDP port, peers */
	uint16_t cfg_port;       /* cfg's index in conf */
	struct gw_neigh *neigh;	 /* static entries and the peers' addresses */
	uint32_t nneigh, neigh_cap;
	uint64_t arp_due; /* no ARP request is due before this */
	const struct egw_payload_ops *dops;
	struct egw_payload *drv;
	struct egw_pool *pool;
	struct egw_node *node;
	uint64_t session;        /* this identity's incarnation (REGISTER) */
	int lock_fd;             /* its interface and address (gw_port_lock) */
	char lock_path[EGW_CONF_PATH_LEN + 128];
	struct gw_room_source *sources[GW_MAX_SOURCES];
	uint16_t nsources;
	struct gw_attach_port *attach; /* engines attach here (or NULL) */
	struct gw_reload_box *reload;  /* a reload's parameters (gw_reload.c) */
	uint64_t next_tick;
	bool finished;           /* its room sources have run all they had */
	struct gw_capture cap;   /* --capture: control frames in and out */
#ifdef GW_TEST_HOOKS
	struct gw_test_knobs knobs;
#endif
	struct gw_flood flood;
	struct gw_id_stats st;
	struct gw_room_hist *hist; /* by the node's peer slot (max_peers) */
	uint64_t delivered_bytes;  /* all peers', those gone included */
	struct gw_peers *peers;	   /* peers that come and go (gw_peers.h) */
};

/* gw_clock.c: monotonic nanoseconds from the TSC (one multiply, no system
 * call: the poll loop reads the clock every iteration). gw_clock_init()
 * after EAL init; before it, and where the TSC frequency is unknown,
 * clock_gettime. gw_tsc_ns converts a TSC value already read (the poll
 * loop reads it once per iteration, for its time and its busy cycles). */
void gw_clock_init(void);
uint64_t gw_now_ns(void);
uint64_t gw_tsc_ns(uint64_t cycles);
/* The wall-clock time (ns since the epoch) of a gw_now_ns() value, from
 * one reading of both clocks at gw_clock_init: pcap timestamps. */
uint64_t gw_wall_ns(uint64_t now);

/* gw_dev.c: the device - bring-up, close, ARP, IPv4/UDP in and out */
int gw_dev_start(struct gw_dev *d);
void gw_dev_stop(struct gw_dev *d);
/* an identity's neighbours: its peers (or their next hops) and static
 * entries (0, -ENOMEM) */
int gw_id_neigh_init(struct gw_id *id);
void gw_id_neigh_fini(struct gw_id *id);
/* a peer at `ip` came (its entry, or its next hop's, made or shared: 0,
 * -ENOMEM, -EHOSTUNREACH without a route) or went (the entry goes with
 * its last peer, unless static) */
int gw_id_neigh_hold(struct gw_id *id, uint32_t ip);
void gw_id_neigh_put(struct gw_id *id, uint32_t ip);
struct gw_neigh *gw_id_neigh_find(struct gw_id *id, uint32_t ip);
/* The neighbour a datagram for peer `ip` goes to: the peer itself on the
 * port's subnet, else its route's next hop; NULL when it has no entry. */
struct gw_neigh *gw_id_neigh_for_peer(struct gw_id *id, uint32_t ip);
/* one rx burst, each frame handed to the identity it is addressed to */
uint16_t gw_dev_rx_burst(struct gw_dev *d, uint64_t now);
void gw_dev_flush(struct gw_dev *d);
/* Read the link state now and then (every 10 ms while it is down, every
 * 100 ms while up); nothing is sent while it is down. */
void gw_dev_link_check(struct gw_dev *d, uint64_t now);
/* a datagram from the identity's address to ip:port (the node's tx) */
void gw_id_send_udp(struct gw_id *id, uint32_t ip, uint16_t port,
		    const uint8_t *buf, size_t len);
/* a frame from src_ip (the identity's address, or a forged one for test
 * junk) to dst_ip:dport through a resolved neighbour (dst_ip itself, or
 * the next hop of a routed peer); NULL without an mbuf or over the MTU */
struct rte_mbuf *gw_id_build_udp(struct gw_id *id, uint32_t src_ip,
				 const struct gw_neigh *n, uint32_t dst_ip,
				 uint16_t dport, const uint8_t *buf,
				 size_t len);
void gw_id_queue_tx(struct gw_id *id, struct rte_mbuf *m);
/* timers: ask again for unresolved neighbours */
void gw_id_arp_tick(struct gw_id *id, uint64_t now);

/* gw_capture.c: --capture, a pcap file of every control frame in and out.
 * A write that fails (a full disk) stops the capture at the last whole
 * frame, logged; close reports it (-errno) and the exit status shows it. */
int gw_capture_open(struct gw_id *id, const char *path);
void gw_capture_frame(struct gw_id *id, const struct rte_mbuf *m);
int gw_capture_close(struct gw_id *id);

/* gw_node_ops.c: lib/node's actions carried out with the device and the
 * payload driver, its events handed to the room sources */
extern const struct egw_node_ops gw_node_ops;
/* payload completions back to the node */
uint32_t gw_id_payload_poll(struct gw_id *id, uint64_t now);
/* the driver rebuilt a link: the peer hears the new endpoint */
void gw_id_payload_changes(struct gw_id *id, uint64_t now);
/* teardown: abort the open rooms, drain the driver, free the blocks */
void gw_id_drain(struct gw_id *id, uint64_t linger_ns);

/* 0..99 from a generator of the flood or a test knob (an LCG whose start
 * value embgw-gen's --seed sets, 1 in the gateway, so a run can be
 * repeated; not for anything secret) */
static inline uint32_t
gw_rand_pct(uint64_t *rng)
{
	*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*rng >> 33) % 100;
}

#ifdef GW_TEST_HOOKS
/* gw_test_knobs.c, test builds only: faults on sent control datagrams
 * (send: instead of queueing the frame; tick: a held one and the junk),
 * the session id, the fault-injecting payload driver (wrap: after the
 * driver opened; room_sent: what it counts rooms by) */
void gw_test_knobs_send(struct gw_id *id, struct gw_neigh *n, uint32_t ip,
			uint16_t port, const uint8_t *buf, size_t len);
void gw_test_knobs_tick(struct gw_id *id);
int gw_test_knobs_session(struct gw_id *id, uint16_t index);
int gw_test_knobs_wrap(struct gw_id *id);
void gw_test_knobs_room_sent(struct gw_id *id);
void gw_test_knobs_close(struct gw_id *id);
#endif

/* gw_loop.c: the worker of one device */
struct gw_loop_opts {
	uint64_t duration_ns;    /* stop after (0: until a signal) */
	bool exit_when_done;     /* stop once every bounded identity finished */
	/* embgw-gen's flood, called on every timer tick (NULL: none) */
	void (*flood_tick)(struct gw_id *id, uint64_t now);
};
void gw_loop_init(const struct gw_loop_opts *o, uint32_t bounded_ids);
int gw_loop_worker(void *dev);

/* gw_report.c: the exit report (doc/gateway.md, "The exit report") */
void gw_report_id(struct gw_id *id, FILE *f);
void gw_report_total(struct gw_id *const *ids, uint16_t n, FILE *f);

/* What a run came to, for its exit status (doc/gateway.md). */
enum {
	GW_EXIT_OK = 0,
	GW_EXIT_START = 1,          /* could not start: the log says why */
	GW_EXIT_USAGE = 2,          /* bad arguments */
	GW_EXIT_ROOMS_UNFINISHED = 3,
	GW_EXIT_ROOMS_FAILED = 4,   /* driven rooms failed or were corrupt */
	GW_EXIT_CAPTURE = 5,        /* a --capture stopped short */
};

struct gw_outcome {
	uint64_t rooms;                   /* driven rooms with a source */
	uint64_t failed, bad, unfinished; /* of those; unfinished also
					   * the rooms of identities never
					   * made (a signal in the start) */
	unsigned captures_failed;
};

/* Add an identity's driven rooms (its language sources) to `o`. */
void gw_report_driven(struct gw_id *id, struct gw_outcome *o);

/* gw_port_lock.c: hold the lock on the identity's interface and address
 * for the process's life (-EBUSY, logged: another gateway holds it). */
int gw_port_lock(struct gw_id *id);
/* At exit: the lock file removed (still holding it), then let go. */
void gw_port_unlock(struct gw_id *id);

/* gw_room_hist.c: the worker adds each delivered room (no lock, no
 * system call); the metrics thread reads with relaxed atomics */
extern const uint64_t gw_hist_time_ns[GW_HIST_TIME_BUCKETS];
extern const uint64_t gw_hist_size_bytes[GW_HIST_SIZE_BUCKETS];
uint64_t gw_delivered_bytes(const struct egw_pool *pool,
			    const struct egw_act *a);
void gw_room_hist_add(struct gw_id *id, const struct egw_act *a);
void gw_room_hist_read(const struct gw_id *id, uint32_t peer,
		       struct gw_room_hist *out);
/* a slot's peer is gone: the next one starts from zero */
void gw_room_hist_clear(struct gw_id *id, uint32_t peer);

/* gw_metrics.c: the metrics endpoint (gateway.metrics; doc/gateway.md,
 * "Metrics"), served from a control thread of its own. Start after the
 * identities are made, stop after the workers returned and before the
 * teardown frees anything. 0 or -errno (logged). */
int gw_metrics_start(const struct egw_conf *c, struct gw_id *const *ids,
		     uint16_t nids);
void gw_metrics_stop(void);
/* the page: OpenMetrics text of every identity (gw_metrics_text.c);
 * a malloc'd string, or NULL without memory */
char *gw_metrics_render(struct gw_id *const *ids, uint16_t nids,
			size_t *len);

/* gw_pdump.c: dpdk-dumpcap's capture service, where the EAL allows a
 * secondary process (not with --no-huge or --in-memory: logged) */
void gw_pdump_init(void);
void gw_pdump_uninit(void);

/* gw_telemetry.c */
void gw_telemetry_init(struct gw_id *const *ids, uint16_t nids);
/* Before the teardown frees what the commands read: they answer no
 * ports from then on (a read in progress finishes first). */
void gw_telemetry_stop(void);

#endif
