/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device: a DPDK port with one rx and one tx queue, ARP, and IPv4/UDP
 * in and out. Only what the control protocol needs: frames for one of the
 * device's identities (its address and UDP port) go to that identity's
 * node, ARP is answered for every identity and used to resolve its peers
 * (static neighbours from the configuration win) or, for a peer beyond
 * the port's subnet, its route's next hop, everything else is counted and
 * dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "gw.h"

/* ---- neighbours (per identity: each has its own address) --------------- */

struct gw_neigh *
gw_id_neigh_find(struct gw_id *id, uint32_t ip)
{
	for (uint32_t i = 0; i < id->nneigh; i++)
		if (id->neigh[i].ip == ip)
			return &id->neigh[i];
	return NULL;
}

static struct gw_neigh *
neigh_add(struct gw_id *id, uint32_t ip)
{
	struct gw_neigh *n = gw_id_neigh_find(id, ip);

	if (n == NULL && id->nneigh < id->neigh_cap) {
		n = &id->neigh[id->nneigh++];
		memset(n, 0, sizeof(*n));
		n->ip = ip;
		n->arp_ns = GW_ARP_RETRY_NS;
		id->arp_due = 0; /* asked for at the next tick */
	}
	return n;
}

int
gw_id_neigh_hold(struct gw_id *id, uint32_t ip)
{
	uint32_t hop = egw_conf_next_hop(id->cfg, ip);
	struct gw_neigh *n;

	if (hop == 0)
		return -EHOSTUNREACH; /* beyond the subnet, no route */
	n = neigh_add(id, hop);
	if (n == NULL)
		return -ENOMEM;
	n->refs++;
	return 0;
}

void
gw_id_neigh_put(struct gw_id *id, uint32_t ip)
{
	struct gw_neigh *n = gw_id_neigh_find(id,
					      egw_conf_next_hop(id->cfg, ip));

	if (n == NULL || n->refs == 0 || --n->refs > 0 || n->is_static)
		return;
	if (n->pending != NULL) {
		rte_pktmbuf_free(n->pending);
		id->st.arp_miss++;
	}
	/* the last entry takes its place: entries are found by address */
	*n = id->neigh[--id->nneigh];
}

static void
neigh_learn(struct gw_id *id, uint32_t ip, const struct rte_ether_addr *mac)
{
	struct gw_neigh *n = gw_id_neigh_find(id, ip);

	/* only for addresses we talk to; static entries are not overridden */
	if (n == NULL || n->is_static)
		return;
	n->mac = *mac;
	n->valid = true;
	if (n->pending != NULL) {
		struct rte_ether_hdr *eth =
			rte_pktmbuf_mtod(n->pending, struct rte_ether_hdr *);

		eth->dst_addr = *mac;
		gw_id_queue_tx(id, n->pending);
		n->pending = NULL;
	}
}

/* A routed peer has no entry of its own: ARP asks for its next hop, whose
 * entry every peer behind it shares. */
struct gw_neigh *
gw_id_neigh_for_peer(struct gw_id *id, uint32_t ip)
{
	uint32_t hop = egw_conf_next_hop(id->cfg, ip);

	return hop != 0 ? gw_id_neigh_find(id, hop) : NULL;
}

int
gw_id_neigh_init(struct gw_id *id)
{
	/* every slot may bring an address of its own */
	id->neigh_cap = id->cfg->nneigh + id->cfg->max_peers;
	id->neigh = calloc(id->neigh_cap, sizeof(*id->neigh));
	if (id->neigh == NULL)
		return -ENOMEM;
	for (uint16_t i = 0; i < id->cfg->nneigh; i++) {
		struct gw_neigh *n = neigh_add(id, id->cfg->neigh[i].addr);

		if (n != NULL) {
			memcpy(n->mac.addr_bytes, id->cfg->neigh[i].mac, 6);
			n->valid = n->is_static = true;
		}
	}
	for (uint16_t i = 0; i < id->cfg->npeers; i++)
		gw_id_neigh_hold(id, id->cfg->peers[i].addr);
	return 0;
}

void
gw_id_neigh_fini(struct gw_id *id)
{
	for (uint32_t i = 0; i < id->nneigh; i++)
		rte_pktmbuf_free(id->neigh[i].pending);
	free(id->neigh);
	id->neigh = NULL;
	id->nneigh = id->neigh_cap = 0;
}

/* ---- tx ---------------------------------------------------------------- */

void
gw_dev_flush(struct gw_dev *d)
{
	uint16_t sent;

	if (d->ntx == 0)
		return;
	if (!d->link_up) {
		/* not a full ring: a link still coming up (a memif peer not
		 * connected yet) takes nothing */
		d->st.tx_link_down += d->ntx;
		rte_pktmbuf_free_bulk(d->tx, d->ntx);
		d->ntx = 0;
		return;
	}
	sent = rte_eth_tx_burst(d->port_id, 0, d->tx, d->ntx);
	d->st.tx_pkts += sent;
	if (sent < d->ntx) {
		/* a full ring, or a link that went down since it was read */
		d->next_link_check = 0;
		gw_dev_link_check(d, 0);
		if (d->link_up)
			d->st.tx_full += d->ntx - sent;
		else
			d->st.tx_link_down += d->ntx - sent;
		rte_pktmbuf_free_bulk(d->tx + sent, d->ntx - sent);
	}
	d->ntx = 0;
}

void
gw_dev_link_check(struct gw_dev *d, uint64_t now)
{
	struct rte_eth_link link;
	bool up;

	if (now < d->next_link_check)
		return;
	memset(&link, 0, sizeof(link));
	up = rte_eth_link_get_nowait(d->port_id, &link) == 0 &&
	     link.link_status == RTE_ETH_LINK_UP;
	if (up != d->link_up) {
		GW_LOG(INFO, "port %s: link %s\n", d->cfg->name,
		       up ? "up" : "down");
		/* a memif peer that has just connected may not take frames
		 * for a moment (seen: the first ARP request, 60 us after the
		 * link read up): requests wait GW_LINK_SETTLE_NS, or until a
		 * frame from it shows it ready */
		if (up)
			d->link_settled_at = now + GW_LINK_SETTLE_NS;
	}
	d->link_up = up;
	d->next_link_check = now + (up ? 100000000ull : 10000000ull);
}

void
gw_id_queue_tx(struct gw_id *id, struct rte_mbuf *m)
{
	struct gw_dev *d = id->dev;

	gw_capture_frame(id, m);
	if (d->ntx == GW_BURST)
		gw_dev_flush(d);
	d->tx[d->ntx++] = m;
}

static void
send_arp(struct gw_id *id, uint16_t op, uint32_t tip,
	 const struct rte_ether_addr *tha)
{
	struct gw_dev *d = id->dev;
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->mp);
	struct rte_ether_hdr *eth;
	struct rte_arp_hdr *arp;

	if (m == NULL)
		return;
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	arp = (struct rte_arp_hdr *)(eth + 1);
	if (op == RTE_ARP_OP_REQUEST)
		memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
	else
		eth->dst_addr = *tha;
	eth->src_addr = d->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = d->mac;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(id->cfg->addr);
	if (op == RTE_ARP_OP_REQUEST)
		memset(&arp->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
	else
		arp->arp_data.arp_tha = *tha;
	arp->arp_data.arp_tip = rte_cpu_to_be_32(tip);
	m->data_len = m->pkt_len = sizeof(*eth) + sizeof(*arp);
	d->st.arp_tx++;
	gw_id_queue_tx(id, m);
}

struct rte_mbuf *
gw_id_build_udp(struct gw_id *id, uint32_t src_ip, const struct gw_neigh *n,
		uint32_t dst_ip, uint16_t dport, const uint8_t *buf, size_t len)
{
	struct gw_dev *d = id->dev;
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->mp);
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	size_t total = sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + len;

	if (m == NULL || total > rte_pktmbuf_tailroom(m) ||
	    total - sizeof(*eth) > id->cfg->mtu) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	udp = (struct rte_udp_hdr *)(ip + 1);
	eth->dst_addr = n->mac;
	eth->src_addr = d->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + sizeof(*udp) + len));
	ip->packet_id = rte_cpu_to_be_16(d->ip_id++);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(src_ip);
	ip->dst_addr = rte_cpu_to_be_32(dst_ip);
	udp->src_port = rte_cpu_to_be_16(id->cfg->udp_port);
	udp->dst_port = rte_cpu_to_be_16(dport);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + len));
	udp->dgram_cksum = 0;
	memcpy(udp + 1, buf, len);
	m->data_len = m->pkt_len = (uint32_t)total;
	if (d->tx_cksum_hw) {
		m->l2_len = sizeof(*eth);
		m->l3_len = sizeof(*ip);
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM |
			       RTE_MBUF_F_TX_UDP_CKSUM;
		udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, m->ol_flags);
	} else {
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		/* 0: no UDP checksum (RFC 768); the tag covers every byte
		 * of the datagram, as RoCEv2's ICRC does for its packets */
		if (d->tx_cksum_sw)
			udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	}
	return m;
}

void
gw_id_send_udp(struct gw_id *id, uint32_t ip, uint16_t port,
	       const uint8_t *buf, size_t len)
{
	struct gw_neigh *n = gw_id_neigh_for_peer(id, ip);
	struct rte_mbuf *m;

	if (n == NULL) {
		id->st.arp_miss++; /* no route: the peer cannot be reached */
		return;
	}
#ifdef GW_TEST_HOOKS
	if (id->knobs.on) { /* a test build's datagram faults */
		if (n->valid)
			gw_test_knobs_send(id, n, ip, port, buf, len);
		else
			id->st.arp_miss++;
		return;
	}
#endif
	m = gw_id_build_udp(id, id->cfg->addr, n, ip, port, buf, len);
	if (m != NULL && !n->valid) {
		/* held until the timers' ARP request is answered; the
		 * protocol retransmits what an older one carried */
		if (n->pending != NULL) {
			rte_pktmbuf_free(n->pending);
			id->st.arp_miss++;
		}
		n->pending = m;
		return;
	}
	if (m == NULL) {
		id->dev->st.tx_full++;
		return;
	}
	gw_id_queue_tx(id, m);
}

void
gw_id_arp_tick(struct gw_id *id, uint64_t now)
{
	/* nobody hears a request while the link is down or settling */
	uint64_t due = UINT64_MAX;

	if (!id->dev->link_up || now < id->dev->link_settled_at ||
	    now < id->arp_due)
		return;
	for (uint32_t i = 0; i < id->nneigh; i++) {
		struct gw_neigh *n = &id->neigh[i];

		if (n->valid)
			continue;
		if (now >= n->next_arp) {
			send_arp(id, RTE_ARP_OP_REQUEST, n->ip, NULL);
			/* a cluster may list hosts that are not up yet:
			 * ask them less and less often */
			n->next_arp = now + n->arp_ns;
			n->arp_ns = n->arp_ns * 2 > GW_ARP_MAX_NS ?
					    GW_ARP_MAX_NS :
					    n->arp_ns * 2;
		}
		if (n->next_arp < due)
			due = n->next_arp;
	}
	id->arp_due = due;
}

/* ---- rx ---------------------------------------------------------------- */

/* The identity whose address `ip` is, or NULL. */
static struct gw_id *
identity_of(struct gw_dev *d, uint32_t ip)
{
	for (uint16_t i = 0; i < d->nids; i++)
		if (d->ids[i]->cfg->addr == ip)
			return d->ids[i];
	return NULL;
}

static void
rx_arp(struct gw_dev *d, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	struct gw_id *id;
	uint32_t sip, tip;

	if (m->data_len < sizeof(*eth) + sizeof(*arp) ||
	    arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return;
	d->st.arp_rx++;
	sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
	tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
	id = identity_of(d, tip);
	if (id == NULL)
		return;
	neigh_learn(id, sip, &arp->arp_data.arp_sha);
	if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REQUEST))
		send_arp(id, RTE_ARP_OP_REPLY, sip, &arp->arp_data.arp_sha);
}

/* 0 means "no checksum" in UDP over IPv4; otherwise the device's verdict
 * where it checks (rx_hw) and gave one, else recompute it. */
static bool
udp_cksum_ok(const struct rte_mbuf *m, bool rx_hw, struct rte_ipv4_hdr *ip,
	     struct rte_udp_hdr *udp)
{
	uint64_t l4 = rx_hw ? m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK :
			      RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN;
	uint16_t ck = udp->dgram_cksum;
	bool ok;

	/* NONE: the field is wrong, the data was verified (a device that
	 * checks and clears it) */
	if (ck == 0 || l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD ||
	    l4 == RTE_MBUF_F_RX_L4_CKSUM_NONE)
		return true;
	if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return false;
	udp->dgram_cksum = 0;
	ok = rte_ipv4_udptcp_cksum(ip, udp) == ck;
	udp->dgram_cksum = ck;
	return ok;
}

static void
rx_one(struct gw_dev *d, struct rte_mbuf *m, uint64_t now)
{
	struct gw_id *id;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	uint16_t ihl, tot, ulen, ck;

	if (m->data_len < sizeof(*eth)) {
		d->st.drop_not_ipv4_udp++;
		return;
	}
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
		rx_arp(d, m, eth);
		return;
	}
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    m->data_len < sizeof(*eth) + sizeof(*ip) ||
	    ip->next_proto_id != IPPROTO_UDP) {
		d->st.drop_not_ipv4_udp++;
		return;
	}
	ihl = (uint16_t)((ip->version_ihl & 0xf) * 4);
	tot = rte_be_to_cpu_16(ip->total_length);
	if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) ||
	    tot < ihl + sizeof(*udp) || sizeof(*eth) + tot > m->data_len ||
	    (rte_be_to_cpu_16(ip->fragment_offset) &
	     (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0) {
		d->st.drop_bad_ip++;
		return;
	}
	switch (d->rx_cksum_hw ? m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK :
				 RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN) {
	case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
	case RTE_MBUF_F_RX_IP_CKSUM_NONE:
		break;
	case RTE_MBUF_F_RX_IP_CKSUM_BAD:
		d->st.drop_bad_ip++;
		return;
	default: /* the device did not look: do it here */
		ck = ip->hdr_checksum;
		ip->hdr_checksum = 0;
		if (ihl == sizeof(*ip) && rte_ipv4_cksum(ip) != ck) {
			d->st.drop_bad_ip++;
			return;
		}
		ip->hdr_checksum = ck;
	}
	id = identity_of(d, rte_be_to_cpu_32(ip->dst_addr));
	if (id == NULL) {
		d->st.drop_not_ours++;
		return;
	}
	udp = (struct rte_udp_hdr *)((uint8_t *)ip + ihl);
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	if (ulen < sizeof(*udp) || ulen > tot - ihl ||
	    !udp_cksum_ok(m, d->rx_cksum_hw, ip, udp)) {
		d->st.drop_bad_udp++;
		return;
	}
	if (rte_be_to_cpu_16(udp->dst_port) != id->cfg->udp_port) {
		d->st.drop_not_ours++;
		return;
	}
	gw_capture_frame(id, m);
	/* a datagram from a neighbour tells us its MAC too */
	neigh_learn(id, rte_be_to_cpu_32(ip->src_addr), &eth->src_addr);
	egw_node_rx(id->node, rte_be_to_cpu_32(ip->src_addr),
		    rte_be_to_cpu_16(udp->src_port), (const uint8_t *)(udp + 1),
		    ulen - sizeof(*udp), now);
}

uint16_t
gw_dev_rx_burst(struct gw_dev *d, uint64_t now)
{
	struct rte_mbuf *pkts[GW_BURST];
	uint16_t n = rte_eth_rx_burst(d->port_id, 0, pkts, GW_BURST);

	if (n == 0)
		return 0;
	/* a frame came in: the link is up and the peer takes frames */
	d->link_up = true;
	d->link_settled_at = 0;
	d->st.rx_pkts += n;
	for (uint16_t i = 0; i < n; i++)
		rx_one(d, pkts[i], now);
	rte_pktmbuf_free_bulk(pkts, n);
	return n;
}

/* ---- bring-up and close ------------------------------------------------ */

/* IPv4 and UDP checksums by the device where it offers both ways of them;
 * without transmit offload a datagram leaves with UDP checksum 0 unless
 * the port asks for one always (then it is computed in software). */
static void
cksum_offloads(struct gw_dev *d, const struct rte_eth_dev_info *info,
	       struct rte_eth_conf *conf)
{
	const uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
			    RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	const uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
			    RTE_ETH_RX_OFFLOAD_UDP_CKSUM;

	d->tx_cksum_hw = (info->tx_offload_capa & tx) == tx;
	d->rx_cksum_hw = (info->rx_offload_capa & rx) == rx;
	d->tx_cksum_sw = !d->tx_cksum_hw &&
			 d->cfg->udp_checksum == EGW_UDP_CKSUM_ALWAYS;
	if (d->tx_cksum_hw)
		conf->txmode.offloads |= tx;
	if (d->rx_cksum_hw)
		conf->rxmode.offloads |= rx;
	GW_LOG(INFO, "port %s: UDP checksums sent %s, received checked %s\n",
	       d->cfg->name,
	       d->tx_cksum_hw ? "by the device" :
	       d->tx_cksum_sw ? "in software" :
				"as 0 (none: the tag covers every byte)",
	       d->rx_cksum_hw ? "by the device" : "in software");
}

int
gw_dev_start(struct gw_dev *d)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	int rc;

	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_info_get(d->port_id, &info);
	if (rc != 0)
		return rc;
	if ((uint32_t)d->cfg->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN >
	    info.max_rx_pktlen) {
		GW_LOG(ERR, "port %s: mtu %u exceeds the device's %u\n",
			d->cfg->name, d->cfg->mtu, info.max_rx_pktlen);
		return -EINVAL;
	}
	cksum_offloads(d, &info, &conf);
	rc = rte_eth_dev_configure(d->port_id, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(d->port_id, 0, 1024,
					    rte_eth_dev_socket_id(d->port_id),
					    NULL, d->mp);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(d->port_id, 0, 1024,
					    rte_eth_dev_socket_id(d->port_id),
					    NULL);
	/* a memif client cannot start before its server listens: the other
	 * gateway may still be coming up, so give it a few seconds */
	for (int tries = 0; rc == 0 || tries > 0; tries++) {
		rc = rte_eth_dev_start(d->port_id);
		if (rc == 0 || tries == 50 || gw_force_quit)
			break;
		rte_delay_ms(100);
	}
	if (rc != 0) {
		GW_LOG(ERR, "port %s (%s): cannot start: %s\n",
			d->cfg->name, d->cfg->device, rte_strerror(-rc));
		return rc;
	}
	d->started = true;
	rte_eth_macaddr_get(d->port_id, &d->mac);
	return 0;
}

void
gw_dev_stop(struct gw_dev *d)
{
	if (!d->started)
		return;
	d->started = false;
	gw_dev_flush(d);
	/* Let the peer drain what we sent before we disconnect: DPDK's memif
	 * (22.11) unmaps the shared rings on a disconnect without waiting
	 * for the other side's lcore, which crashes if it is still inside a
	 * burst over our last frames (seen: a generator that exited with a
	 * full ring). Our own rx is drained meanwhile; harmless on a NIC. */
	for (uint64_t until = gw_now_ns() + GW_CLOSE_GRACE_NS;
	     gw_now_ns() < until;) {
		struct rte_mbuf *pkts[GW_BURST];
		uint16_t n = rte_eth_rx_burst(d->port_id, 0, pkts, GW_BURST);

		if (n > 0)
			rte_pktmbuf_free_bulk(pkts, n);
		else
			rte_delay_us_sleep(1000);
	}
	rte_eth_dev_stop(d->port_id);
	rte_eth_dev_close(d->port_id);
}
