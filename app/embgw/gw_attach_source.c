/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attached engines as a room source: lib/engines decides what the
 * clients' commands mean; this file carries its room operations out on
 * the identity's node and pool, and hands the node's events about those
 * rooms back to it. Runs on the identity's worker lcore: no system call,
 * no lock; everything the control thread must do goes through to_ctl.
 */
#define GW_LOG_COMP EGW_LOG_ATTACH /* its lines: log type user.embgw.attach */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_lcore.h>

#include "gw_attach.h"

#define ATTACH_BUDGET 32  /* commands per client per poll */
/* SEND_OPENs one engine may have waiting for encode memory at once; one
 * more is answered busy (-EGW_E_BUSY), the analogue of an HTTP 503: the
 * engine sheds the request or sends it elsewhere, nothing is dropped
 * silently. */
#define ATTACH_MAX_WAITING 8
/* Rooms of a port that may wait at once for a slot of the node's full
 * room table (per side); one more fails NO_SLOT at once, as it would
 * without the wait. As deep as the producer's wait for source memory. */
#define ATTACH_SLOT_QUEUE 256
/* How often the source looks at its peers' readiness on its own. */
#define PEERS_REFRESH_NS (10u * 1000000u)

/* the clients' runs are handed to the node as they are */
_Static_assert(sizeof(struct egw_attach_run) == sizeof(struct egw_run) &&
	       offsetof(struct egw_attach_run, start) ==
	       offsetof(struct egw_run, start) &&
	       offsetof(struct egw_attach_run, count) ==
	       offsetof(struct egw_run, count), "one run layout");

static struct gw_attach_port *
port_of(struct gw_room_source *s)
{
	return (struct gw_attach_port *)s;
}

static void
tell_ctl(struct gw_attach_port *ap, uint16_t type, int32_t client,
	 uint64_t arg)
{
	struct gw_attach_msg m = {
		.type = type,
		.conn = client >= 0 ? ap->conn_of[client] : 0,
		.client = client,
		.arg = arg,
	};

	/* the ring holds more than max_clients messages of each kind that
	 * can be outstanding; a full one is counted, never waited on */
	if (rte_ring_sp_enqueue_elem(ap->to_ctl, &m, sizeof(m)) != 0)
		ap->to_ctl_full++;
}

/* ---- the room operations (egw_engines_ops) --------------------------- */

static int
op_send_open(void *ctx, uint32_t client, uint64_t room, uint16_t nranks,
	     uint32_t total, int32_t mrope_delta, uint64_t cookie,
	     struct egw_attach_run *runs, uint32_t max_runs)
{
	struct gw_attach_port *ap = ctx;
	struct gw_id *id = ap->base.id;
	struct egw_run *r = (struct egw_run *)runs; /* same shape */
	int n, rc;

	if (ap->nseg != 0) {
		/* a cut pool: the client's rooms come from its segment only */
		uint32_t lo = ap->seg_of[client] * ap->seg_blocks;

		n = egw_pool_alloc_range_tokens(id->pool, room, total, lo,
						lo + ap->seg_blocks, r,
						max_runs);
	} else {
		n = egw_node_alloc_src(id->node, room, total, r, max_runs);
	}
	if (n < 0)
		return n; /* -ENOSPC: asked again until the deadline */
	if (egw_pool_aux_init(id->pool, r[0].start, total, mrope_delta,
			      cookie) == NULL)
		rc = -EINVAL;
	else
		rc = egw_node_sender_open(id->node, room, nranks, ap->now);
	if (rc != 0) {
		egw_node_release(id->node, room, r, (uint32_t)n);
		return rc;
	}
	return n;
}

static int
op_send_commit(void *ctx, uint64_t room, uint32_t total,
	       const struct egw_attach_run *runs, uint32_t nruns)
{
	struct gw_attach_port *ap = ctx;

	return egw_node_input(ap->base.id->node, room, total,
			      (const struct egw_run *)runs, nruns, ap->now);
}

static void
op_send_abort(void *ctx, uint64_t room, bool committed,
	      const struct egw_attach_run *runs, uint32_t nruns)
{
	struct gw_attach_port *ap = ctx;
	struct gw_id *id = ap->base.id;

	(void)committed;
	/* the engine frees what it was given (after its writes drained) */
	egw_node_abort_room(id->node, room, 0, true, ap->now);
	if (nruns > 0)
		egw_node_release(id->node, room, (const struct egw_run *)runs,
				 nruns);
}

static int
op_recv_open(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
	     uint32_t peer, bool aux_only)
{
	struct gw_attach_port *ap = ctx;

	/* `peer` is the node's slot of a live peer (gw_attach_peers_changed) */
	return egw_node_receiver_open(ap->base.id->node, room, rank, nranks,
				      peer, aux_only, ap->now);
}

static int
op_recv_open_group(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
		   uint16_t ranks, uint32_t peer)
{
	struct gw_attach_port *ap = ctx;

	return egw_node_receiver_open_group(ap->base.id->node, room, rank,
					    nranks, ranks, peer, ap->now);
}

static void
op_recv_abort(void *ctx, uint64_t room, uint16_t rank)
{
	struct gw_attach_port *ap = ctx;

	egw_node_abort_room(ap->base.id->node, room, rank, false, ap->now);
}

static void
op_recv_release(void *ctx, uint64_t room, uint16_t rank,
		const struct egw_attach_run *runs, uint32_t nruns)
{
	struct gw_attach_port *ap = ctx;

	(void)rank;
	egw_node_release(ap->base.id->node, room,
			 (const struct egw_run *)runs, nruns);
}

static void
op_wake(void *ctx, uint32_t client)
{
	tell_ctl(ctx, GW_AM_WAKE, (int32_t)client, 0);
}

static void
op_pool_state(void *ctx, struct egw_attach_stats *st)
{
	struct gw_attach_port *ap = ctx;
	struct gw_id *id = ap->base.id;
	const struct egw_xfer_receiver *r = egw_node_receiver(id->node);
	struct egw_pool_stats ps;

	egw_pool_get_stats(id->pool, &ps);
	st->pool_blocks = egw_pool_nblocks(id->pool);
	st->free_blocks = st->pool_blocks - ps.blocks_in_use;
	st->quarantined_blocks = 0;
	st->admission_queue = 0;
	if (r != NULL) {
		struct egw_xfer_stats xs;

		egw_xfer_receiver_get_stats(r, &xs);
		st->quarantined_blocks = (uint32_t)xs.quarantine_blocks;
		st->admission_queue = (uint32_t)xs.admit_queued;
	}
}

static void
op_held_long(void *ctx, uint32_t client, uint64_t room, uint64_t held_ns)
{
	struct gw_attach_port *ap = ctx;

	GW_LOG(WARNING, "port %s: client %u has held room %" PRIu64 " for "
	       "%" PRIu64 " ms since Success without RELEASE (held_warn_ms "
	       "%u): its blocks are out of the pool until it does\n",
	       ap->base.id->cfg->name, client, room, held_ns / 1000000,
	       ap->base.id->conf->attach.held_warn_ms);
}

static void
op_client_lost(void *ctx, uint32_t client, const char *why)
{
	struct gw_attach_port *ap = ctx;

	GW_LOG(WARNING, "port %s: client %u given up: %s\n",
	       ap->base.id->cfg->name, client, why);
	tell_ctl(ap, GW_AM_LOST, (int32_t)client,
		 egw_engines_client_held(ap->clients, client));
}

/* Free slots of the node's room table: the stats, never an open that
 * would be refused (a refused open is counted as a rejection). */
static uint32_t
op_slots_free(void *ctx, enum egw_attach_side side)
{
	struct gw_attach_port *ap = ctx;
	struct gw_id *id = ap->base.id;
	struct egw_xfer_stats xs;

	if (side == EGW_SIDE_SEND && egw_node_sender(id->node) != NULL)
		egw_xfer_sender_get_stats(egw_node_sender(id->node), &xs);
	else if (side == EGW_SIDE_RECV && egw_node_receiver(id->node) != NULL)
		egw_xfer_receiver_get_stats(egw_node_receiver(id->node), &xs);
	else
		return 0;
	return xs.rooms_active < id->conf->max_rooms ?
		       id->conf->max_rooms - (uint32_t)xs.rooms_active :
		       0;
}

static void
op_slot_note(void *ctx, uint32_t client, const char *text)
{
	struct gw_attach_port *ap = ctx;

	GW_LOG(NOTICE, "port %s: client %u: %s\n", ap->base.id->cfg->name,
	       client, text);
}

static const struct egw_engines_ops clients_ops = {
	.send_open = op_send_open,
	.send_commit = op_send_commit,
	.send_abort = op_send_abort,
	.recv_open = op_recv_open,
	.recv_open_group = op_recv_open_group,
	.recv_abort = op_recv_abort,
	.recv_release = op_recv_release,
	.wake = op_wake,
	.client_lost = op_client_lost,
	.pool_state = op_pool_state,
	.held_long = op_held_long,
	.slots_free = op_slots_free,
	.slot_note = op_slot_note,
};

/* ---- the room source ---------------------------------------------------- */

static int
client_add(struct gw_attach_port *ap, void *area, uint64_t now, uint64_t *seg)
{
	/* a segment with no client and every block free (the rooms of the
	 * client that had it have ended) */
	int sg = ap->nseg != 0 ?
			 egw_pool_segs_take(&ap->segs, ap->base.id->pool) :
			 0;
	int rc;

	if (sg < 0)
		return sg;
	rc = egw_engines_add(ap->clients, area,
			     ((struct egw_attach_area *)area)->area_bytes, now);
	if (rc >= 0 && ap->nseg != 0)
		ap->seg_of[rc] = (uint8_t)sg;
	else if (ap->nseg != 0)
		egw_pool_segs_put(&ap->segs, (uint32_t)sg);
	*seg = (uint64_t)sg;
	return rc;
}

static void
client_remove(struct gw_attach_port *ap, uint32_t client, uint64_t now)
{
	egw_engines_remove(ap->clients, client, now);
	/* its rooms may still be in flight: egw_pool_segs_take waits for
	 * its blocks to be free */
	if (ap->nseg != 0 && client < 4096)
		egw_pool_segs_put(&ap->segs, ap->seg_of[client]);
}

/* Clients coming and going, as the control thread says. */
static uint32_t
mailbox(struct gw_attach_port *ap, uint64_t now)
{
	struct gw_attach_msg m;
	uint32_t n = 0;

	while (rte_ring_sc_dequeue_elem(ap->to_worker, &m, sizeof(m)) == 0) {
		void *area = (void *)(uintptr_t)m.arg;
		int rc;

		n++;
		if (m.type == GW_AM_ADD) {
			rc = client_add(ap, area, now, &m.arg);
			if (rc >= 0)
				ap->conn_of[rc] = m.conn;
			m.type = GW_AM_ADDED;
			m.client = rc;
		} else { /* GW_AM_REMOVE */
			client_remove(ap, (uint32_t)m.client, now);
			m.type = GW_AM_REMOVED;
		}
		if (rte_ring_sp_enqueue_elem(ap->to_ctl, &m, sizeof(m)) != 0)
			ap->to_ctl_full++;
	}
	return n;
}

static uint32_t
src_poll(struct gw_room_source *s, uint64_t now)
{
	struct gw_attach_port *ap = port_of(s);

	ap->now = now;
	/* readiness moves without a change of the list: looked at often
	 * enough for an engine waiting on it, rarely enough to cost nothing */
	if (now - ap->peers_at >= PEERS_REFRESH_NS) {
		ap->peers_at = now;
		gw_attach_peers_changed(ap->base.id, now);
	}
	return mailbox(ap, now) + egw_engines_poll(ap->clients, now);
}

static bool
src_deliver(struct gw_room_source *s, const struct egw_act *a, uint64_t now)
{
	struct gw_attach_port *ap = port_of(s);
	int rc;

	ap->now = now;
	rc = egw_engines_room_delivered(ap->clients, a->room, a->rank,
					a->tokens,
					(const struct egw_attach_run *)a->runs,
					a->nruns);
	if (rc == -ENOENT)
		return false; /* another source's room */
	if (rc != 0)
		egw_node_release(s->id->node, a->room, a->runs, a->nruns);
	return true;
}

static bool
src_done(struct gw_room_source *s, uint64_t room, uint16_t rank,
	 enum egw_err e, bool is_sender, uint64_t now)
{
	struct gw_attach_port *ap = port_of(s);

	ap->now = now;
	return egw_engines_room_done(ap->clients,
				     is_sender ? EGW_SIDE_SEND : EGW_SIDE_RECV,
				     room, rank, e == EGW_E_OK ? 0 : -(int)e) == 0;
}

static uint64_t
src_remaining(const struct gw_room_source *s)
{
	(void)s;
	return GW_ROOMS_ENDLESS; /* serves until the gateway stops */
}

static void
src_report(struct gw_room_source *s, struct gw_room_stats *out)
{
	struct gw_attach_port *ap = port_of(s);
	struct egw_engines_stats st;
	struct egw_engines_cache_stats cs;

	/* the exit report, the workers stopped: the content cache gives
	 * back what no room holds, so that blocks_in_use counts only what
	 * rooms still hold */
	egw_engines_cache_flush(ap->clients);
	memset(out, 0, sizeof(*out));
	egw_engines_stats(ap->clients, &st);
	egw_engines_cache(ap->clients, &cs);
	out->client.cache_hits = st.cache_hits;
	out->client.cache_misses = st.cache_misses;
	out->client.cache_shared = st.cache_shared;
	out->client.cache_evictions = cs.evictions;
	out->client.held_long = st.held_long;
	out->clients = true;
	out->client.attached = egw_engines_attached(ap->clients);
	out->client.rooms = st.rooms_opened;
	out->client.ok = st.rooms_ok;
	out->client.failed = st.rooms_failed;
	out->client.commands = st.commands;
	out->client.refused = st.refused;
	out->client.cq_overflow = st.cq_overflow;
	out->client.alloc_waits = st.alloc_waits;
	out->client.busy = st.busy;
	out->client.slot_waits = st.slot_waits;
	out->client.lost = st.lost;
	out->client.held_blocks = egw_engines_held_blocks(ap->clients);
}

/* At exit, the worker and the control thread stopped: every client's
 * rooms end (the node frees their blocks; the areas, which the control
 * thread has unmapped, are not touched). */
static void
src_close(struct gw_room_source *s)
{
	struct gw_attach_port *ap = port_of(s);

	egw_engines_destroy(ap->clients, ap->now);
	rte_ring_free(ap->to_worker);
	rte_ring_free(ap->to_ctl);
	free(ap->peers);
	free(ap);
}

static const struct gw_room_source_ops attach_source_ops = {
	.name = "attach",
	.poll = src_poll,
	.deliver = src_deliver,
	.done = src_done,
	.remaining = src_remaining,
	.report = src_report,
	.close = src_close,
};

uint32_t
gw_attach_max_peers(const struct gw_id *id)
{
	/* the port's peer slots: the configuration's, never the node's (a
	 * control thread asks) */
	return id->cfg->max_peers;
}

/* The node's live peers (active and leaving slots) into ap->peers. */
static void
peers_build(struct gw_attach_port *ap, struct gw_id *id)
{
	uint32_t slots = egw_node_peer_slots(id->node);
	struct egw_node_peer_info info;

	ap->npeers = 0;
	for (uint32_t s = 0; s < slots && ap->npeers < ap->max_peers; s++) {
		struct egw_engines_peer *p = &ap->peers[ap->npeers];

		if (egw_node_peer_get(id->node, s, &info) != 0 ||
		    info.state == EGW_NODE_PEER_FREE)
			continue;
		memset(p, 0, sizeof(*p));
		p->id = info.id;
		p->slot = s;
		snprintf(p->name, sizeof(p->name), "%.*s",
			 (int)sizeof(info.cfg.name), info.cfg.name);
		p->ready = info.ready;
		p->leaving = info.state == EGW_NODE_PEER_LEAVING;
		ap->npeers++;
	}
}

/* Rebuilt when the node's table moved; between two moves only readiness
 * changes, read per listed peer; lib/engines hears only of a change. */
int
gw_attach_peers_changed(struct gw_id *id, uint64_t now)
{
	struct gw_attach_port *ap = id->attach;
	bool moved = false;

	if (ap == NULL || ap->clients == NULL || ap->peers == NULL)
		return 0;
	if (!ap->peers_built || egw_node_peers_gen(id->node) != ap->node_gen) {
		ap->peers_built = true;
		ap->node_gen = egw_node_peers_gen(id->node);
		peers_build(ap, id);
		moved = true;
	}
	for (uint32_t i = 0; i < ap->npeers; i++) {
		bool ready = egw_node_peer_ready(id->node, ap->peers[i].slot);

		if (ready != ap->peers[i].ready) {
			ap->peers[i].ready = ready;
			moved = true;
		}
	}
	return moved ? egw_engines_peers_set(ap->clients, ap->peers, ap->npeers,
					     now) :
		       0;
}

int
gw_attach_source_attach(struct gw_id *id, struct gw_attach_port **out)
{
	static unsigned nports;
	const struct egw_conf *c = id->conf;
	const struct egw_conf_attach *at = &c->attach;
	struct gw_attach_port *ap = calloc(1, sizeof(*ap));
	struct egw_engines_conf cc = {
		.max_clients = at->max_clients,
		.max_rooms = at->max_clients * at->slots,
		.max_total_tokens = c->geom.capacity_tokens,
		.max_peers = gw_attach_max_peers(id),
		.peer_wait_ns = c->timers.bootstrap_ns,
		.encode = (c->roles & EGW_ROLE_ENCODE) != 0,
		.language = (c->roles & EGW_ROLE_LANGUAGE) != 0,
		.alloc_ns = c->timers.alloc_ns,
		.max_waiting = ATTACH_MAX_WAITING,
		.admit_ns = c->timers.admit_ns,
		.slot_queue = ATTACH_SLOT_QUEUE,
		.lease_ns = (uint64_t)at->lease_ms * 1000000u,
		.budget = ATTACH_BUDGET,
		.cache_entries = (c->roles & EGW_ROLE_LANGUAGE) != 0 ?
					 at->cache_entries :
					 0,
		.cache_blocks = (at->cache_tokens == EGW_CONF_CACHE_HALF ?
					 c->geom.capacity_tokens / 2 :
					 at->cache_tokens) /
				c->geom.block_tokens,
		.cache_max_runs = c->max_runs_per_room,
		.held_warn_ns = (uint64_t)at->held_warn_ms * 1000000u,
		.fanout_ranks = (c->roles & EGW_ROLE_LANGUAGE) != 0 ?
					id->cfg->fanout_ranks :
					1,
		.fanout_max_runs = c->max_runs_per_room,
		.ops = &clients_ops,
	};
	char name[RTE_RING_NAMESIZE];
	unsigned ring = rte_align32pow2(4 * at->max_clients + 64);
	const struct egw_pool_mem *pm;
	int rc;

	if (ap == NULL)
		return -ENOMEM;
	pm = id->dops->pool_mem != NULL ? id->dops->pool_mem(id->drv) : NULL;
	if (pm != NULL && pm->seg.nseg != 0) {
		/* a client's rooms lie in its segment: none larger */
		ap->nseg = pm->seg.nseg;
		ap->seg_blocks = pm->seg.blocks;
		if (egw_pool_segs_init(&ap->segs, id->pool, ap->nseg, 0) != 0) {
			free(ap);
			return -EINVAL;
		}
		cc.max_total_tokens = pm->seg.blocks * c->geom.block_tokens;
	}
	if (cc.max_rooms > (1u << 24))
		cc.max_rooms = 1u << 24;
	cc.ctx = ap;
	ap->base.ops = &attach_source_ops;
	rc = egw_engines_create(&cc, &ap->clients);
	ap->max_peers = cc.max_peers;
	ap->peers = calloc(cc.max_peers, sizeof(*ap->peers));
	if (rc == 0 && ap->peers == NULL)
		rc = -ENOMEM;
	/* ring names are global to the process: numbered, not named */
	snprintf(name, sizeof(name), "egw_attach_w%u", nports);
	if (rc == 0)
		ap->to_worker = rte_ring_create_elem(name, sizeof(struct gw_attach_msg),
						     ring, SOCKET_ID_ANY,
						     RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "egw_attach_c%u", nports++);
	if (rc == 0 && ap->to_worker != NULL)
		ap->to_ctl = rte_ring_create_elem(name, sizeof(struct gw_attach_msg),
						  ring, SOCKET_ID_ANY,
						  RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (rc == 0 && (ap->to_worker == NULL || ap->to_ctl == NULL))
		rc = -rte_errno;
	if (rc == 0)
		rc = gw_room_source_attach(id, &ap->base);
	if (rc != 0) {
		GW_LOG(ERR, "port %s: attach point: %s\n", id->cfg->name,
		       egw_strerror(rc));
		egw_engines_destroy(ap->clients, 0);
		rte_ring_free(ap->to_worker);
		rte_ring_free(ap->to_ctl);
		free(ap->peers);
		free(ap);
		return rc;
	}
	*out = ap;
	return 0;
}

int
gw_attach_producer_segment(struct gw_id *id, uint32_t *lo, uint32_t *hi)
{
	struct gw_attach_port *ap = id->attach;

	if (ap == NULL || ap->nseg == 0)
		return -ENOENT;
	ap->segs.first = 1;
	*lo = 0;
	*hi = ap->seg_blocks;
	return 0;
}
