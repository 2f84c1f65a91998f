/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/node is sans-I/O: it asks for actions and is told of events. Here
 * an identity carries them out - datagrams through the device, payload
 * writes through the payload driver - and hands the room events to its
 * room sources; completions go back to the node.
 */
#define GW_LOG_COMP EGW_LOG_NODE /* its lines: log type user.embgw.node */
#include <string.h>

#include "gw_room_source.h"

/* past the node's deadline for a window's invalidation (2 s) */
#define GW_DRAIN_WINDOWS_NS 3000000000ull

static void
on_tx(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
      uint64_t now)
{
	(void)now;
	gw_id_send_udp(ctx, ip, port, buf, len);
}

/* The node notes failures once per peer (on_note), not per REGISTER. */
static int
on_peer_up(void *ctx, uint32_t peer, const struct egw_register *r,
	   char *why, size_t why_len, uint64_t now)
{
	struct gw_id *id = ctx;
	int rc = id->dops->connect(id->drv, peer, r);

	(void)now;
	if (rc != 0 && id->dops->why != NULL)
		snprintf(why, why_len, "%s", id->dops->why(id->drv, peer));
	return rc;
}

static void
on_peer_down(void *ctx, uint32_t peer, bool silent, uint64_t now)
{
	struct gw_id *id = ctx;

	(void)now;
	/* a silent peer may be the same incarnation coming back: only a
	 * driver that must give back what it holds of it lets go */
	if (silent && !id->dops->disconnect_silent)
		return;
	if (id->dops->disconnect != NULL)
		id->dops->disconnect(id->drv, peer);
}

static void
on_note(void *ctx, uint32_t peer, const struct egw_node_note *nt,
	uint64_t now)
{
	struct gw_id *id = ctx;

	(void)peer;
	(void)now;
	switch (nt->kind) {
	case EGW_NODE_NOTE_REGISTERED:
		GW_LOG(INFO, "port %s: %s\n", id->cfg->name, nt->text);
		break;
	case EGW_NODE_NOTE_RESTARTED:
	case EGW_NODE_NOTE_FENCED:
		GW_LOG(WARNING, "port %s: %s\n", id->cfg->name, nt->text);
		break;
	default:
		GW_LOG(ERR, "port %s: %s\n", id->cfg->name, nt->text);
		break;
	}
}

static int
on_post(void *ctx, uint32_t peer, const struct egw_write *wr, uint32_t n,
	uint64_t cookie, uint64_t now)
{
	struct gw_id *id = ctx;
	int rc = id->dops->post(id->drv, peer, wr, n, cookie);

	(void)now;
	/* a refused batch: the node fails its room at once */
	if (rc != 0)
		GW_LOG(ERR, "port %s: payload driver refused a batch: %s\n",
		       id->cfg->name, egw_strerror(rc));
	id->st.posts++;
	return rc;
}

static void
on_endpoint(void *ctx, uint32_t peer, uint32_t *qpn, uint32_t *psn,
	    uint16_t *mtu, uint64_t now)
{
	struct gw_id *id = ctx;

	(void)now;
	if (id->dops->endpoint != NULL)
		id->dops->endpoint(id->drv, peer, qpn, psn, mtu);
}

static void
on_deliver(void *ctx, const struct egw_act *a, uint64_t now)
{
	struct gw_id *id = ctx;

	gw_room_hist_add(id, a);
	/* the loop's `now`, as the node had it: never ahead of the next
	 * call's, so nothing dated here is seen as in the future */
	if (gw_room_sources_deliver(id, a, now))
		return;
	/* no source opened it: its blocks go back to the pool */
	GW_LOG(WARNING, "port %s: room %#lx delivered to no room source\n",
	       id->cfg->name, (unsigned long)a->room);
	egw_node_release(id->node, a->room, a->runs, a->nruns);
}

static void
on_done(void *ctx, uint64_t room, uint16_t rank, enum egw_err e, bool is_sender,
	uint64_t now)
{
	gw_room_sources_done(ctx, room, rank, e, is_sender, now);
#ifdef GW_TEST_HOOKS
	if (is_sender && e == EGW_E_OK)
		gw_test_knobs_room_sent(ctx);
#endif
}

static int
on_window_bind(void *ctx, uint32_t peer, const struct egw_run *run,
	       uint32_t rkeys[EGW_KIND_MAX], uint64_t cookie, uint64_t now)
{
	struct gw_id *id = ctx;

	return id->dops->window_bind(id->drv, peer, run, rkeys, cookie, now);
}

static void
on_window_unbind(void *ctx, const struct egw_run *run, uint64_t cookie,
		 uint64_t now)
{
	struct gw_id *id = ctx;

	id->dops->window_unbind(id->drv, run, cookie, now);
}

static int
on_unknown_room(void *ctx, uint64_t room, uint16_t nranks, uint64_t now)
{
	return gw_room_sources_unknown_room(ctx, room, nranks, now);
}

const struct egw_node_ops gw_node_ops = {
	.tx = on_tx,
	.endpoint = on_endpoint,
	.peer_up = on_peer_up,
	.peer_down = on_peer_down,
	.note = on_note,
	.post = on_post,
	.deliver = on_deliver,
	.done = on_done,
	.unknown_room = on_unknown_room,
	.window_bind = on_window_bind,
	.window_unbind = on_window_unbind,
};

/* Every completion the driver has, to the node. Returns how many. */
static uint32_t
completions(struct gw_id *id, uint64_t now)
{
	struct egw_payload_cpl cpl[64];
	uint32_t nc, n = 0;

	while ((nc = id->dops->poll(id->drv, cpl, 64, now)) > 0) {
		n += nc;
		for (uint32_t i = 0; i < nc; i++) {
			if (cpl[i].kind == EGW_PAYLOAD_CPL_WINDOW)
				egw_node_window_done(id->node, cpl[i].cookie,
						     cpl[i].ok, now);
			else
				egw_node_writes_done(id->node, cpl[i].cookie,
						     cpl[i].ok, now);
		}
	}
	return n;
}

uint32_t
gw_id_payload_poll(struct gw_id *id, uint64_t now)
{
	/* completions first: they may free blocks and finish rooms */
	return completions(id, now);
}

void
gw_id_payload_changes(struct gw_id *id, uint64_t now)
{
	uint32_t peers[EGW_CONF_MAX_PEERS];
	uint32_t n;

	if (id->dops->changed == NULL)
		return;
	n = id->dops->changed(id->drv, peers, EGW_CONF_MAX_PEERS);
	/* a link rebuilt after an error: tell the peer */
	for (uint32_t i = 0; i < n; i++)
		egw_node_reregister(id->node, peers[i], now);
}

/* Shutdown, after the workers stopped (the clock is read here, not on a
 * worker's path): abort every room, then poll the driver until the
 * windows' invalidations completed - or the node's own deadline for them
 * passed - so every block is back or accounted for. */
void
gw_id_drain(struct gw_id *id, uint64_t linger_ns)
{
	uint64_t now = gw_now_ns(), end = now + GW_DRAIN_WINDOWS_NS;

	egw_node_abort_all(id->node, now);
	completions(id, now);
	while (egw_node_windows_parked(id->node) > 0 && now < end) {
		now = gw_now_ns();
		completions(id, now);
		egw_node_tick(id->node, now);
	}
	/* lingering sender rooms hold no blocks once aborted and drained */
	egw_node_tick(id->node, now + linger_ns + 1);
}
