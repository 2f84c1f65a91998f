/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers that come and go while the gateway runs: the configuration file's
 * static peers (again after a reload) and the cluster's discovered ones
 * (etcd). Control threads ask; the identity's worker carries the change
 * out on its node, its payload driver and its neighbour table, between
 * two polls, through a mailbox (an rte_ring): no thread but the worker
 * touches the node, and the worker never waits for anyone.
 *
 * A peer is known by name. Each source that names it holds it (an origin
 * bit): the peer stays while any source holds it, so the cluster never
 * removes a peer the file names. When two sources disagree on a name's
 * address, the file wins and the other is refused (logged once).
 */
#ifndef EMBGW_GW_PEERS_H
#define EMBGW_GW_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include "gw.h"

/* Who holds a peer. */
enum gw_peer_origin {
	GW_PEER_FILE = 0, /* the configuration file's `peers` */
	GW_PEER_CLUSTER,  /* a record under the cluster's prefix */
	GW_PEER_ORIGIN_MAX
};

const char *gw_peer_origin_name(enum gw_peer_origin o);

/* A peer as a source describes it. */
struct gw_peer_spec {
	char name[EGW_NODE_NAME_LEN];
	uint32_t addr; /* IPv4, host byte order */
	uint16_t udp_port;
	char shm_path[EGW_CONF_PATH_LEN]; /* shm: its pool file ("": ours) */
};

/* Start an identity's mailbox and its table (the file's peers already in
 * its node, held by GW_PEER_FILE). 0 or -errno. */
int gw_peers_init(struct gw_id *id);
void gw_peers_fini(struct gw_id *id);

/* From any control thread: `origin` holds `p` (added if new). Queued for
 * the worker: 0, -ENOBUFS when the mailbox is full (try again later),
 * -EINVAL for a bad spec. What the worker made of it is logged and shows
 * in gw_peers_list. */
int gw_peers_hold(struct gw_id *id, enum gw_peer_origin origin,
		  const struct gw_peer_spec *p);
/* From any control thread: `origin` lets go of `name`; once no origin
 * holds it the peer is removed: its rooms end Failed (EGW_E_PEER_GONE,
 * the peer told with ABORT), its slot is freed when they are all done.
 * `why` goes into the log line. 0, -ENOBUFS, -EINVAL. */
int gw_peers_release(struct gw_id *id, enum gw_peer_origin origin,
		     const char *name, const char *why);

/* What a control thread may read (a copy the worker publishes after every
 * change; never the node itself). */
struct gw_peer_view {
	char name[EGW_NODE_NAME_LEN];
	uint32_t id;   /* the gateway's id for it: never reused
			* (0: not in the node - its slot is
			* taken or the table is full) */
	uint32_t slot; /* the node's slot (with an id) */
	uint32_t addr;
	uint16_t udp_port;
	uint8_t origins; /* 1 << enum gw_peer_origin */
	bool leaving;	 /* removed: its rooms are ending */
	bool ready;	 /* registered both ways */
};
/* Copies at most `max` peers into `out` (names not in the node too: id
 * 0); returns how many there are (may be more than `max`). `gen` (optional)
 * gets the table's generation: it moves with every change. */
uint32_t gw_peers_list(const struct gw_id *id, struct gw_peer_view *out,
		       uint32_t max, uint64_t *gen);

/* Worker side, on every timer tick: carry out what the mailbox holds and
 * free the slots of removed peers whose rooms are all done. Returns the
 * work done (0: nothing). */
uint32_t gw_peers_poll(struct gw_id *id, uint64_t now);

#endif
