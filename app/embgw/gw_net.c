/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ports, ARP, and IPv4/UDP in and out. Only what the control protocol
 * needs: frames for our address and UDP port go to the node, ARP is
 * answered and used to resolve peers (static neighbours from the
 * configuration win), everything else is counted and dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_udp.h>

#include "gw.h"


static uint64_t tsc_mult; /* ns per cycle, 32.32 fixed point */

void
gw_clock_init(void)
{
	uint64_t hz = rte_get_tsc_hz();

	if (hz >= 1000000)
		tsc_mult = (uint64_t)((1000000000ull << 32) / hz);
}

uint64_t
gw_tsc_ns(uint64_t cycles)
{
	struct timespec ts;

	if (tsc_mult != 0)
		return (uint64_t)(((unsigned __int128)cycles * tsc_mult) >> 32);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
gw_now_ns(void)
{
	return gw_tsc_ns(rte_get_tsc_cycles());
}

/* ---- neighbours -------------------------------------------------------- */

static struct gw_neigh *
neigh_find(struct gw_port *p, uint32_t ip)
{
	for (uint32_t i = 0; i < p->nneigh; i++)
		if (p->neigh[i].ip == ip)
			return &p->neigh[i];
	return NULL;
}

static struct gw_neigh *
neigh_add(struct gw_port *p, uint32_t ip)
{
	struct gw_neigh *n = neigh_find(p, ip);

	if (n == NULL && p->nneigh < GW_MAX_NEIGH) {
		n = &p->neigh[p->nneigh++];
		memset(n, 0, sizeof(*n));
		n->ip = ip;
	}
	return n;
}

static void
neigh_learn(struct gw_port *p, uint32_t ip, const struct rte_ether_addr *mac)
{
	struct gw_neigh *n = neigh_find(p, ip);

	/* only for addresses we talk to; static entries are not overridden */
	if (n == NULL || n->is_static)
		return;
	n->mac = *mac;
	n->valid = true;
}

/* ---- capture ----------------------------------------------------------- */

/* Classic pcap, Ethernet link type: readable by tshark, tcpreplay, TRex,
 * DPDK's net_pcap. A test and debug aid: it writes from the worker. */
int
gw_capture_open(struct gw_port *p, const char *path)
{
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t zone;
		uint32_t sigfigs, snaplen, linktype;
	} h = { 0xa1b2c3d4u, 2, 4, 0, 0, 65535, 1 };

	p->cap = fopen(path, "wb");
	if (p->cap == NULL || fwrite(&h, sizeof(h), 1, p->cap) != 1)
		return errno ? -errno : -EIO; /* a short write need not set it */
	return 0;
}

void
gw_capture_close(struct gw_port *p)
{
	if (p->cap != NULL)
		fclose(p->cap);
	p->cap = NULL;
}

static void
capture(struct gw_port *p, const struct rte_mbuf *m)
{
	struct timespec ts;
	uint32_t rec[4];

	if (p->cap == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	rec[0] = (uint32_t)ts.tv_sec;
	rec[1] = (uint32_t)(ts.tv_nsec / 1000);
	rec[2] = rec[3] = m->data_len;
	fwrite(rec, sizeof(rec), 1, p->cap);
	fwrite(rte_pktmbuf_mtod(m, const void *), m->data_len, 1, p->cap);
}

/* ---- tx ---------------------------------------------------------------- */

void
gw_net_flush(struct gw_port *p)
{
	uint16_t sent;

	if (p->ntx == 0)
		return;
	sent = rte_eth_tx_burst(p->port_id, 0, p->tx, p->ntx);
	p->st.tx_pkts += sent;
	if (sent < p->ntx) {
		p->st.tx_full += p->ntx - sent;
		rte_pktmbuf_free_bulk(p->tx + sent, p->ntx - sent);
	}
	p->ntx = 0;
}

static void
queue_tx(struct gw_port *p, struct rte_mbuf *m)
{
	capture(p, m);
	if (p->ntx == GW_BURST)
		gw_net_flush(p);
	p->tx[p->ntx++] = m;
}

static void
send_arp(struct gw_port *p, uint16_t op, uint32_t tip,
	 const struct rte_ether_addr *tha)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->mp);
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
	eth->src_addr = p->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = p->mac;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(p->cfg->addr);
	if (op == RTE_ARP_OP_REQUEST)
		memset(&arp->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
	else
		arp->arp_data.arp_tha = *tha;
	arp->arp_data.arp_tip = rte_cpu_to_be_32(tip);
	m->data_len = m->pkt_len = sizeof(*eth) + sizeof(*arp);
	p->st.arp_tx++;
	queue_tx(p, m);
}

static struct rte_mbuf *
build_udp_from(struct gw_port *p, uint32_t src_ip, const struct gw_neigh *n,
	       uint16_t dport, const uint8_t *buf, size_t len);

static struct rte_mbuf *
build_udp(struct gw_port *p, const struct gw_neigh *n, uint16_t dport,
	  const uint8_t *buf, size_t len)
{
	return build_udp_from(p, p->cfg->addr, n, dport, buf, len);
}

static struct rte_mbuf *
build_udp_from(struct gw_port *p, uint32_t src_ip, const struct gw_neigh *n,
	       uint16_t dport, const uint8_t *buf, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->mp);
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	size_t total = sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + len;

	if (m == NULL || total > rte_pktmbuf_tailroom(m) ||
	    total - sizeof(*eth) > p->cfg->mtu) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	udp = (struct rte_udp_hdr *)(ip + 1);
	eth->dst_addr = n->mac;
	eth->src_addr = p->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + sizeof(*udp) + len));
	ip->packet_id = rte_cpu_to_be_16(p->ip_id++);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(src_ip);
	ip->dst_addr = rte_cpu_to_be_32(n->ip);
	udp->src_port = rte_cpu_to_be_16(p->cfg->udp_port);
	udp->dst_port = rte_cpu_to_be_16(dport);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + len));
	udp->dgram_cksum = 0;
	memcpy(udp + 1, buf, len);
	m->data_len = m->pkt_len = (uint32_t)total;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	return m;
}

static uint32_t
rnd_pct(struct gw_faults *f)
{
	f->rng = f->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(f->rng >> 33) % 100;
}

void
gw_net_send_udp(struct gw_port *p, uint32_t ip, uint16_t port,
		const uint8_t *buf, size_t len)
{
	struct gw_neigh *n = neigh_find(p, ip);
	struct rte_mbuf *m;
	int copies = 1;

	if (n == NULL || !n->valid) {
		/* the protocol retransmits; meanwhile ask who has it */
		p->st.arp_miss++;
		return;
	}
	if (p->faults.junk_per_tick && len <= sizeof(p->last_dgram)) {
		/* kept for replay injection: off the path unless asked for */
		memcpy(p->last_dgram, buf, len);
		p->last_len = len;
		p->last_ip = ip;
		p->last_port = port;
	}
	if (p->faults.drop_pct && rnd_pct(&p->faults) < p->faults.drop_pct) {
		p->st.inj_dropped++;
		return;
	}
	if (p->faults.dup_pct && rnd_pct(&p->faults) < p->faults.dup_pct) {
		p->st.inj_duped++;
		copies = 2;
	}
	while (copies-- > 0) {
		m = build_udp(p, n, port, buf, len);
		if (m == NULL) {
			p->st.tx_full++;
			return;
		}
		if (p->held == NULL && p->faults.reorder_pct &&
		    rnd_pct(&p->faults) < p->faults.reorder_pct) {
			p->held = m; /* goes out after the next one */
			p->st.inj_reordered++;
			continue;
		}
		queue_tx(p, m);
		if (p->held != NULL) {
			queue_tx(p, p->held);
			p->held = NULL;
		}
	}
}

/*
 * Junk for the malformed-input tests, in turn: random bytes, a real
 * datagram with one bit flipped, a real datagram replayed, a real datagram
 * truncated, and a real datagram from an address that is no peer. The
 * receiving gateway must drop and count every one.
 */
void
gw_net_inject_junk(struct gw_port *p)
{
	struct gw_neigh *n;
	uint8_t b[EGW_PROTO_MAX_LEN];
	size_t len = p->last_len;
	uint32_t kind, src = p->cfg->addr;
	struct rte_mbuf *m;

	if (p->last_len == 0 || (n = neigh_find(p, p->last_ip)) == NULL ||
	    !n->valid)
		return;
	for (uint32_t i = 0; i < p->faults.junk_per_tick; i++) {
		kind = rnd_pct(&p->faults) % 5;
		memcpy(b, p->last_dgram, len);
		switch (kind) {
		case 0:
			for (size_t k = 0; k < len; k++)
				b[k] = (uint8_t)rnd_pct(&p->faults);
			break;
		case 1:
			b[rnd_pct(&p->faults) % len] ^= 0x10;
			break;
		case 2: /* replay as is */
			break;
		case 3:
			len = 1 + rnd_pct(&p->faults) % (len - 1);
			break;
		default:
			src = (p->cfg->addr & ~0xffu) | 0xfe; /* a stranger */
			break;
		}
		m = build_udp_from(p, src, n, p->last_port, b, len);
		if (m != NULL) {
			p->st.inj_junk++;
			queue_tx(p, m);
		}
		len = p->last_len;
		src = p->cfg->addr;
	}
}

/*
 * Flood for load tests: junk paced at flood_pps, in turn random bytes, a
 * well-formed header with a random body (bad MAC), a real message MACed
 * with a wrong key (unauthenticated), a truncated header, and a datagram
 * to another UDP port. Needs no traffic of its own: it can run alone, or
 * into a net_pcap port to write a replayable pcap.
 */
void
gw_net_flood(struct gw_port *p, uint64_t now)
{
	const struct egw_conf_peer *pe;
	struct gw_neigh *n;
	uint64_t due;
	uint8_t b[EGW_PROTO_MAX_LEN];

	if (p->faults.flood_pps == 0 || p->cfg->npeers == 0)
		return;
	pe = &p->cfg->peers[0];
	n = neigh_find(p, pe->addr);
	if (n == NULL || !n->valid)
		return;
	if (p->faults.flood_start == 0)
		p->faults.flood_start = now;
	due = (now - p->faults.flood_start) / 1000 * p->faults.flood_pps / 1000000;
	for (uint32_t k = 0; p->faults.flood_sent < due && k < 256; k++) {
		uint32_t kind = (uint32_t)(p->faults.flood_sent % 5);
		uint16_t port = pe->udp_port;
		size_t len = 20 + rnd_pct(&p->faults) * 3;
		struct rte_mbuf *m;

		for (size_t i = 0; i < len; i++)
			b[i] = (uint8_t)rnd_pct(&p->faults);
		if (kind == 1 || kind == 3) {
			b[0] = 0x45; b[1] = 0x47; b[2] = 0x57; b[3] = 0x31;
			b[4] = 1;
			b[5] = (uint8_t)(1 + rnd_pct(&p->faults) % 7);
			if (kind == 3)
				len = 30; /* shorter than a header */
		} else if (kind == 2) {
			struct egw_proto_key wrong;
			struct egw_msg msg = { .type = EGW_MSG_STATUS, .rank = 0,
					       .nranks = 1, .flags = EGW_MSGF_POLL,
					       .room = p->faults.flood_sent };
			int l;

			memset(&wrong, 0xee, sizeof(wrong));
			l = egw_proto_encode(&wrong, 1, p->faults.flood_sent + 1,
					     &msg, b, sizeof(b));
			len = l > 0 ? (size_t)l : len;
		} else if (kind == 4) {
			port = (uint16_t)(port + 1);
		}
		m = build_udp_from(p, p->cfg->addr, n, port, b, len);
		if (m == NULL)
			break;
		queue_tx(p, m);
		p->faults.flood_sent++;
		p->st.flood++;
	}
}

/* ---- rx ---------------------------------------------------------------- */

/* The gw_port a frame to `ip` is for: the port itself, or with
 * --identities the one of the device's identities that has the address. */
static struct gw_port *
identity_of(struct gw_port *owner, uint32_t ip)
{
	for (uint16_t i = 0; i < owner->nids; i++)
		if (owner[i].cfg->addr == ip)
			return &owner[i];
	return NULL;
}

static void
rx_arp(struct gw_port *p, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	uint32_t sip, tip;

	if (m->data_len < sizeof(*eth) + sizeof(*arp) ||
	    arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return;
	p->st.arp_rx++;
	sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
	tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
	p = identity_of(p, tip);
	if (p == NULL)
		return;
	neigh_learn(p, sip, &arp->arp_data.arp_sha);
	if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REQUEST))
		send_arp(p, RTE_ARP_OP_REPLY, sip, &arp->arp_data.arp_sha);
}

/* 0 means "no checksum" in UDP over IPv4; otherwise recompute it. */
static bool
udp_cksum_ok(struct rte_ipv4_hdr *ip, struct rte_udp_hdr *udp)
{
	uint16_t ck = udp->dgram_cksum;
	bool ok;

	if (ck == 0)
		return true;
	udp->dgram_cksum = 0;
	ok = rte_ipv4_udptcp_cksum(ip, udp) == ck;
	udp->dgram_cksum = ck;
	return ok;
}

static void
rx_one(struct gw_port *p, struct rte_mbuf *m, uint64_t now)
{
	struct gw_port *id;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	uint16_t ihl, tot, ulen, ck;

	if (m->data_len < sizeof(*eth)) {
		p->st.drop_not_ipv4_udp++;
		return;
	}
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
		rx_arp(p, m, eth);
		return;
	}
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    m->data_len < sizeof(*eth) + sizeof(*ip) ||
	    ip->next_proto_id != IPPROTO_UDP) {
		p->st.drop_not_ipv4_udp++;
		return;
	}
	ihl = (uint16_t)((ip->version_ihl & 0xf) * 4);
	tot = rte_be_to_cpu_16(ip->total_length);
	if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) ||
	    tot < ihl + sizeof(*udp) || sizeof(*eth) + tot > m->data_len ||
	    (rte_be_to_cpu_16(ip->fragment_offset) &
	     (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0) {
		p->st.drop_bad_ip++;
		return;
	}
	ck = ip->hdr_checksum;
	ip->hdr_checksum = 0;
	if (ihl == sizeof(*ip) && rte_ipv4_cksum(ip) != ck) {
		p->st.drop_bad_ip++;
		return;
	}
	ip->hdr_checksum = ck;
	id = identity_of(p, rte_be_to_cpu_32(ip->dst_addr));
	if (id == NULL) {
		p->st.drop_not_ours++;
		return;
	}
	p = id;
	udp = (struct rte_udp_hdr *)((uint8_t *)ip + ihl);
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	if (ulen < sizeof(*udp) || ulen > tot - ihl || !udp_cksum_ok(ip, udp)) {
		p->st.drop_bad_udp++;
		return;
	}
	if (rte_be_to_cpu_16(udp->dst_port) != p->cfg->udp_port) {
		p->st.drop_not_ours++;
		return;
	}
	capture(p, m);
	/* a datagram from a neighbour tells us its MAC too */
	neigh_learn(p, rte_be_to_cpu_32(ip->src_addr), &eth->src_addr);
	egw_node_rx(p->node, rte_be_to_cpu_32(ip->src_addr),
		    rte_be_to_cpu_16(udp->src_port), (const uint8_t *)(udp + 1),
		    ulen - sizeof(*udp), now);
}

uint16_t
gw_net_rx_burst(struct gw_port *p, uint64_t now)
{
	struct rte_mbuf *pkts[GW_BURST];
	uint16_t n = rte_eth_rx_burst(p->port_id, 0, pkts, GW_BURST);

	if (n == 0)
		return 0;
	p->st.rx_pkts += n;
	for (uint16_t i = 0; i < n; i++)
		rx_one(p, pkts[i], now);
	rte_pktmbuf_free_bulk(pkts, n);
	return n;
}

void
gw_net_tick(struct gw_port *p, uint64_t now)
{
	for (uint32_t i = 0; i < p->nneigh; i++) {
		struct gw_neigh *n = &p->neigh[i];

		if (!n->valid && now >= n->next_arp) {
			send_arp(p, RTE_ARP_OP_REQUEST, n->ip, NULL);
			n->next_arp = now + GW_ARP_RETRY_NS;
		}
	}
	if (p->held != NULL) { /* a held packet never waits past a tick */
		queue_tx(p, p->held);
		p->held = NULL;
	}
}

/* ---- port bring-up ----------------------------------------------------- */

int
gw_port_start(struct gw_port *p)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	int rc;

	if (p->owner != p) {
		/* an identity on its owner's device: addresses only */
		p->started = true;
		rte_eth_macaddr_get(p->port_id, &p->mac);
		goto neighbours;
	}
	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_info_get(p->port_id, &info);
	if (rc != 0)
		return rc;
	if ((uint32_t)p->cfg->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN >
	    info.max_rx_pktlen) {
		GW_LOG(ERR, "port %s: mtu %u exceeds the device's %u\n",
			p->cfg->name, p->cfg->mtu, info.max_rx_pktlen);
		return -EINVAL;
	}
	rc = rte_eth_dev_configure(p->port_id, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(p->port_id, 0, 1024,
					    rte_eth_dev_socket_id(p->port_id),
					    NULL, p->mp);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(p->port_id, 0, 1024,
					    rte_eth_dev_socket_id(p->port_id),
					    NULL);
	/* a memif client cannot start before its server listens: the other
	 * gateway may still be coming up, so give it a few seconds */
	for (int tries = 0; rc == 0 || tries > 0; tries++) {
		rc = rte_eth_dev_start(p->port_id);
		if (rc == 0 || tries == 50 || gw_force_quit)
			break;
		rte_delay_ms(100);
	}
	if (rc != 0) {
		GW_LOG(ERR, "port %s (%s): cannot start: %s\n",
			p->cfg->name, p->cfg->device, rte_strerror(-rc));
		return rc;
	}
	p->started = true;
	rte_eth_macaddr_get(p->port_id, &p->mac);
neighbours:
	for (uint16_t i = 0; i < p->cfg->nneigh; i++) {
		struct gw_neigh *n = neigh_add(p, p->cfg->neigh[i].addr);

		if (n != NULL) {
			memcpy(n->mac.addr_bytes, p->cfg->neigh[i].mac, 6);
			n->valid = n->is_static = true;
		}
	}
	for (uint16_t i = 0; i < p->cfg->npeers; i++)
		neigh_add(p, p->cfg->peers[i].addr);
	return 0;
}

void
gw_port_stop(struct gw_port *p)
{
	if (!p->started)
		return;
	p->started = false;
	gw_net_flush(p);
	if (p->held != NULL)
		rte_pktmbuf_free(p->held);
	p->held = NULL;
	if (p->owner != p)
		return; /* the owner stops and closes the device */
	/* Let the peer drain what we sent before we disconnect: DPDK's memif
	 * (22.11) unmaps the shared rings on a disconnect without waiting
	 * for the other side's lcore, which crashes if it is still inside a
	 * burst over our last frames (seen: a generator that exited with a
	 * full ring). Our own rx is drained meanwhile; harmless on a NIC. */
	for (uint64_t until = gw_now_ns() + GW_CLOSE_GRACE_NS;
	     gw_now_ns() < until;) {
		struct rte_mbuf *pkts[GW_BURST];
		uint16_t n = rte_eth_rx_burst(p->port_id, 0, pkts, GW_BURST);

		if (n > 0)
			rte_pktmbuf_free_bulk(pkts, n);
		else
			rte_delay_us_sleep(1000);
	}
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
}
