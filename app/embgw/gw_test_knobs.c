/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test knobs, compiled into test builds only (-Dtest_hooks=true): control
 * datagrams we send are lost, duplicated or reordered (--ctl-drop,
 * --ctl-dup, --ctl-reorder), junk is sent at the peer every tick
 * (--inject-junk), the session id is fixed (--test-session), and the
 * payload driver is wrapped by the fault-injecting one
 * (drivers/payload/fault) for --fault-qp-error and --fault-stale-write,
 * so that the driver's recovery runs for real.
 */
#include <errno.h>
#include <string.h>

#include "egw_payload_fault.h"
#include "gw.h"

void
gw_test_knobs_send(struct gw_id *id, struct gw_neigh *n, uint32_t ip,
		   uint16_t port, const uint8_t *buf, size_t len)
{
	struct gw_test_knobs *k = &id->knobs;
	struct rte_mbuf *m;
	int copies = 1;

	if (k->junk_per_tick && len <= sizeof(k->last_dgram)) {
		/* kept for replayed junk */
		memcpy(k->last_dgram, buf, len);
		k->last_len = len;
		k->last_ip = ip;
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
		m = gw_id_build_udp(id, id->cfg->addr, n, ip, port, buf, len);
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

	if (k->last_len == 0 ||
	    (n = gw_id_neigh_for_peer(id, k->last_ip)) == NULL || !n->valid)
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
		m = gw_id_build_udp(id, src, n, k->last_ip, k->last_port, b,
				    len);
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

/* --test-session N: identity `index` of the process takes N + index
 * (counted across ports, so no two identities share one). */
int
gw_test_knobs_session(struct gw_id *id, uint16_t index)
{
	uint64_t s = id->knobs.session;

	if (s == 0)
		return 0;
	if (s > UINT64_MAX - index) {
		GW_LOG(ERR, "port %s: --test-session %#lx + identity %u "
		       "passes 2^64 - 1: the session would wrap to 0 or "
		       "repeat\n", id->cfg->name, (unsigned long)s, index);
		return -EINVAL;
	}
	id->session = s + index;
	return 0;
}

/* The fault-injecting driver over the configured one, when a fault is
 * asked for: the rest of the gateway sees the same driver. */
int
gw_test_knobs_wrap(struct gw_id *id)
{
	struct egw_payload_fault_params fp = {
		.link_error_at = id->knobs.qp_error_at,
		.stale_write_at = id->knobs.stale_write_at,
	};
	int rc;

	if (fp.link_error_at == 0 && fp.stale_write_at == 0)
		return 0;
	rc = egw_payload_fault_wrap(&id->dops, &id->drv, &fp);
	if (rc != 0) {
		GW_LOG(ERR, "port %s: cannot wrap payload driver %s for test "
		       "faults: %s\n", id->cfg->name, id->dops->name,
		       strerror(-rc));
		return rc;
	}
	id->knobs.fault = true;
	GW_LOG(WARNING, "port %s: test build: payload driver %s wrapped by "
	       "the fault-injecting driver\n", id->cfg->name, id->dops->name);
	return 0;
}

/* A room this side sent has succeeded: the fault driver counts rooms by
 * it for --fault-stale-write. */
void
gw_test_knobs_room_sent(struct gw_id *id)
{
	if (id->knobs.fault)
		egw_payload_fault_room_sent(id->drv);
}

void
gw_test_knobs_close(struct gw_id *id)
{
	/* the device is closing: a held datagram is as good as lost */
	if (id->knobs.held != NULL)
		rte_pktmbuf_free(id->knobs.held);
	id->knobs.held = NULL;
}
