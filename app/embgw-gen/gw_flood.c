/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The flood, for load tests (embgw-gen --flood-pps; the gateway does not
 * link it): junk paced at flood.pps towards the identity's first peer, in
 * turn random bytes, a well-formed header with a random body (bad MAC), a
 * real message MACed with a wrong key (unauthenticated), a truncated
 * header, and a datagram to another UDP port. Needs no traffic of its own:
 * it can run alone, or into a net_pcap port to write a replayable pcap.
 */
#include <string.h>

#include "gw_flood.h"

void
gw_flood_tick(struct gw_id *id, uint64_t now)
{
	struct gw_flood *f = &id->flood;
	const struct egw_conf_peer *pe;
	struct gw_neigh *n;
	uint64_t due;
	uint8_t b[EGW_PROTO_MAX_LEN];

	if (f->pps == 0 || id->cfg->npeers == 0)
		return;
	pe = &id->cfg->peers[0];
	n = gw_id_neigh_for_peer(id, pe->addr);
	if (n == NULL || !n->valid)
		return;
	if (f->start == 0)
		f->start = now;
	due = (now - f->start) / 1000 * f->pps / 1000000;
	for (uint32_t k = 0; f->sent < due && k < 256; k++) {
		uint32_t kind = (uint32_t)(f->sent % 5);
		uint16_t port = pe->udp_port;
		size_t len = 20 + gw_rand_pct(&f->rng) * 3;
		struct rte_mbuf *m;

		for (size_t i = 0; i < len; i++)
			b[i] = (uint8_t)gw_rand_pct(&f->rng);
		if (kind == 1 || kind == 3) {
			b[0] = 0x45; b[1] = 0x47; b[2] = 0x57; b[3] = 0x31;
			b[4] = 1;
			b[5] = (uint8_t)(1 + gw_rand_pct(&f->rng) % 7);
			if (kind == 3)
				len = 30; /* shorter than a header */
		} else if (kind == 2) {
			struct egw_proto_key wrong;
			struct egw_msg msg = { .type = EGW_MSG_STATUS, .rank = 0,
					       .nranks = 1, .flags = EGW_MSGF_POLL,
					       .room = f->sent };
			int l;

			memset(&wrong, 0xee, sizeof(wrong));
			l = egw_proto_encode(&wrong, 1, f->sent + 1, &msg, b,
					     sizeof(b));
			len = l > 0 ? (size_t)l : len;
		} else if (kind == 4) {
			port = (uint16_t)(port + 1);
		}
		m = gw_id_build_udp(id, id->cfg->addr, n, pe->addr, port, b,
				    len);
		if (m == NULL)
			break;
		gw_id_queue_tx(id, m);
		f->sent++;
		id->st.flood++;
	}
}
