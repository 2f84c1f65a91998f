/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test knobs, off unless a command-line flag turns them on (the fast path
 * only tests `knobs.on`): control datagrams we send are lost, duplicated
 * or reordered (--ctl-drop/--ctl-dup/--ctl-reorder), junk is sent at the
 * peer every tick (--inject-junk), and a verbs QP is put in error after a
 * given payload batch (--fault-qp-error) so that the driver's recovery
 * runs for real.
 */
#include <string.h>

#include "gw.h"

void
gw_test_knobs_send(struct gw_id *id, struct gw_neigh *n, uint16_t port,
		   const uint8_t *buf, size_t len)
{
	struct gw_test_knobs *k = &id->knobs;
	struct rte_mbuf *m;
	int copies = 1;

	if (k->junk_per_tick && len <= sizeof(k->last_dgram)) {
		/* kept for replayed junk */
		memcpy(k->last_dgram, buf, len);
		k->last_len = len;
		k->last_ip = n->ip;
		k->last_port = port;
	}
	if (k->drop_pct && gw_rand_pct(&k->rng) < k->drop_pct) {
		id->st.inj_dropped++;
		return;
	}
	if (k->dup_pct && gw_rand_pct(&k->rng) < k->dup_pct) {
		id->st.inj_duped++;
		copies = 2;
	}
	while (copies-- > 0) {
		m = gw_id_build_udp(id, id->cfg->addr, n, port, buf, len);
		if (m == NULL) {
			id->dev->st.tx_full++;
			return;
		}
		if (k->held == NULL && k->reorder_pct &&
		    gw_rand_pct(&k->rng) < k->reorder_pct) {
			k->held = m; /* goes out after the next one */
			id->st.inj_reordered++;
			continue;
		}
		gw_id_queue_tx(id, m);
		if (k->held != NULL) {
			gw_id_queue_tx(id, k->held);
			k->held = NULL;
		}
	}
}

/*
 * Junk for the malformed-input tests, in turn: random bytes, a real
 * datagram with one bit flipped, a real datagram replayed, a real datagram
 * truncated, and a real datagram from an address that is no peer. The
 * receiving gateway must drop and count every one.
 */
static void
inject_junk(struct gw_id *id)
{
	struct gw_test_knobs *k = &id->knobs;
	struct gw_neigh *n;
	uint8_t b[EGW_PROTO_MAX_LEN];
	size_t len = k->last_len;
	uint32_t kind, src = id->cfg->addr;
	struct rte_mbuf *m;

	if (k->last_len == 0 || (n = gw_id_neigh_find(id, k->last_ip)) == NULL ||
	    !n->valid)
		return;
	for (uint32_t i = 0; i < k->junk_per_tick; i++) {
		kind = gw_rand_pct(&k->rng) % 5;
		memcpy(b, k->last_dgram, len);
		switch (kind) {
		case 0:
			for (size_t j = 0; j < len; j++)
				b[j] = (uint8_t)gw_rand_pct(&k->rng);
			break;
		case 1:
			b[gw_rand_pct(&k->rng) % len] ^= 0x10;
			break;
		case 2: /* replay as is */
			break;
		case 3:
			len = 1 + gw_rand_pct(&k->rng) % (len - 1);
			break;
		default:
			src = (id->cfg->addr & ~0xffu) | 0xfe; /* a stranger */
			break;
		}
		m = gw_id_build_udp(id, src, n, k->last_port, b, len);
		if (m != NULL) {
			id->st.inj_junk++;
			gw_id_queue_tx(id, m);
		}
		len = k->last_len;
		src = id->cfg->addr;
	}
}

void
gw_test_knobs_tick(struct gw_id *id)
{
	struct gw_test_knobs *k = &id->knobs;

	if (k->held != NULL) { /* a held datagram never waits past a tick */
		gw_id_queue_tx(id, k->held);
		k->held = NULL;
	}
	if (k->junk_per_tick)
		inject_junk(id);
}

/* A QP error after the Nth batch, what a link failure does. */
void
gw_test_knobs_after_post(struct gw_id *id, uint32_t peer)
{
	if (id->st.posts != id->knobs.qp_error_at ||
	    id->dops->inject_qp_error == NULL)
		return;
	GW_LOG(WARNING, "port %s: test fault: QP towards peer %u put in error "
	       "after batch %lu\n", id->cfg->name, peer,
	       (unsigned long)id->st.posts);
	id->dops->inject_qp_error(id->drv, peer);
}

/* A writer that writes into a window after its room ended: when the Nth
 * room sent has succeeded here, its last write is remembered (with one
 * room at a time, the last write posted is that room's); when the next
 * one has succeeded - the receiver delivered the Nth, closing its windows,
 * before it opened that one - the remembered write goes out once more,
 * under the key it had. */
void
gw_test_knobs_room_sent(struct gw_id *id)
{
	uint64_t n = ++id->knobs.rooms_sent, at = id->knobs.stale_write_at;

	if (at == 0 || (n != at && n != at + 1) ||
	    id->dops->inject_stale_write == NULL)
		return;
	if (n == at + 1)
		GW_LOG(WARNING, "port %s: test fault: room %lu has ended; writing "
		       "into its window once more\n", id->cfg->name,
		       (unsigned long)at);
	for (uint32_t i = 0; i < id->cfg->npeers; i++)
		id->dops->inject_stale_write(id->drv, i, n == at);
}

void
gw_test_knobs_close(struct gw_id *id)
{
	/* the device is closing: a held datagram is as good as lost */
	if (id->knobs.held != NULL)
		rte_pktmbuf_free(id->knobs.held);
	id->knobs.held = NULL;
}
