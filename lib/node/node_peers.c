/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's peer table: slots that peers take and give back while the
 * node runs (a cluster's members, a reloaded configuration). A slot is the
 * index every engine and driver call names; an id is what the node tells
 * the application, assigned at add and never reused, so that a room
 * opened for a peer that left cannot land on its successor in the slot.
 * Datagrams find their slot by source address through a small open-
 * addressing table: one probe or two, however many peers there are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node_priv.h"

enum { ADDR_EMPTY = 0, ADDR_USED, ADDR_DELETED };

static uint32_t
addr_hash(uint32_t addr, uint16_t port)
{
	uint64_t h = ((uint64_t)addr << 16 | port) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32);
}

int
node_peers_create(struct egw_node *n, uint32_t nslots)
{
	uint32_t cap = 4;

	while (cap < 2 * nslots)
		cap <<= 1;
	n->peers = calloc(nslots, sizeof(*n->peers));
	n->addr_tab = calloc(cap, sizeof(*n->addr_tab));
	if (n->peers == NULL || n->addr_tab == NULL)
		return -ENOMEM;
	n->nslots = nslots;
	n->addr_mask = cap - 1;
	return 0;
}

void
node_peers_destroy(struct egw_node *n)
{
	free(n->peers);
	free(n->addr_tab);
}

int
node_peer_find(const struct egw_node *n, uint32_t addr, uint16_t port)
{
	uint32_t i = addr_hash(addr, port) & n->addr_mask;

	for (uint32_t k = 0; k <= n->addr_mask; k++) {
		const struct node_addr_slot *a = &n->addr_tab[i];

		if (a->used == ADDR_EMPTY)
			return -1;
		if (a->used == ADDR_USED && a->addr == addr && a->port == port)
			return (int)a->slot;
		i = (i + 1) & n->addr_mask;
	}
	return -1;
}

static void
addr_insert(struct egw_node *n, uint32_t addr, uint16_t port, uint32_t slot)
{
	uint32_t i = addr_hash(addr, port) & n->addr_mask;

	/* never full: twice the slots, and a slot has one address */
	while (n->addr_tab[i].used == ADDR_USED)
		i = (i + 1) & n->addr_mask;
	n->addr_tab[i] = (struct node_addr_slot){
		.addr = addr, .port = port, .used = ADDR_USED, .slot = slot
	};
}

static void
addr_delete(struct egw_node *n, uint32_t addr, uint16_t port)
{
	uint32_t i = addr_hash(addr, port) & n->addr_mask;

	for (uint32_t k = 0; k <= n->addr_mask; k++) {
		struct node_addr_slot *a = &n->addr_tab[i];

		if (a->used == ADDR_EMPTY)
			return;
		if (a->used == ADDR_USED && a->addr == addr &&
		    a->port == port) {
			a->used = ADDR_DELETED;
			return;
		}
		i = (i + 1) & n->addr_mask;
	}
}

static bool
peer_valid(const struct egw_node_peer *p)
{
	return p->name[0] != '\0' &&
	       memchr(p->name, '\0', sizeof(p->name)) != NULL && p->addr != 0 &&
	       p->udp_port != 0;
}

int
node_peer_insert(struct egw_node *n, const struct egw_node_peer *p,
		 uint64_t now)
{
	uint32_t slot = n->nslots;

	if (!peer_valid(p))
		return -EINVAL;
	if (node_peer_find(n, p->addr, p->udp_port) >= 0 ||
	    egw_node_peer_index(n, p->name) >= 0)
		return -EEXIST;
	for (uint32_t i = 0; i < n->nslots; i++)
		if (n->peers[i].state == EGW_NODE_PEER_FREE) {
			slot = i;
			break;
		}
	if (slot == n->nslots)
		return -ENOSPC;
	memset(&n->peers[slot], 0, sizeof(n->peers[slot]));
	n->peers[slot].cfg = *p;
	n->peers[slot].state = EGW_NODE_PEER_ACTIVE;
	n->peers[slot].id = ++n->next_id;
	n->peers[slot].next_register = now;
	n->peers[slot].register_ns = REGISTER_RETRY_NS;
	n->register_due = 0;
	addr_insert(n, p->addr, p->udp_port, slot);
	if (slot >= n->npeers)
		n->npeers = slot + 1;
	n->peers_gen++;
	return (int)slot;
}

int
egw_node_peer_add(struct egw_node *n, const struct egw_node_peer *p,
		  uint64_t now)
{
	int slot;

	if (n == NULL || p == NULL)
		return -EINVAL;
	n->now = now;
	slot = node_peer_insert(n, p, now);
	if (slot >= 0 && n->receiver != NULL)
		egw_xfer_receiver_peer_add(n->receiver, (uint32_t)slot, now);
	return slot;
}

static uint32_t
rooms_of(const struct egw_node *n, uint32_t slot)
{
	uint32_t k = 0;

	if (n->sender != NULL)
		k += egw_xfer_sender_peer_rooms(n->sender, slot);
	if (n->receiver != NULL)
		k += egw_xfer_receiver_peer_rooms(n->receiver, slot);
	return k;
}

int
egw_node_peer_remove(struct egw_node *n, uint32_t slot, uint64_t now)
{
	struct node_peer *pe;

	if (n == NULL || slot >= n->nslots ||
	    n->peers[slot].state != EGW_NODE_PEER_ACTIVE)
		return -ENOENT;
	pe = &n->peers[slot];
	n->now = now;
	pe->state = EGW_NODE_PEER_LEAVING;
	n->nleaving++;
	n->peers_gen++;
	if (n->sender != NULL)
		egw_xfer_sender_peer_remove(n->sender, slot, EGW_E_PEER_REMOVED,
					    now);
	if (n->receiver != NULL)
		egw_xfer_receiver_peer_remove(n->receiver, slot,
					      EGW_E_PEER_REMOVED, now);
	node_drain_deferred(n);
	node_peers_reap(n);
	return 0;
}

/* node_priv.h: leaving peers whose rooms all ended give their slot back:
 * the driver lets go of them first, then nothing of them is kept. */
void
node_peers_reap(struct egw_node *n)
{
	for (uint32_t i = 0; i < n->npeers; i++) {
		struct node_peer *pe = &n->peers[i];

		if (pe->state != EGW_NODE_PEER_LEAVING || rooms_of(n, i) > 0 ||
		    node_windows_parked_for(n, i) > 0)
			continue;
		if (n->ops.peer_down != NULL)
			n->ops.peer_down(n->ops.ctx, i, false, n->now);
		if (n->sender != NULL)
			egw_xfer_sender_peer_del(n->sender, i);
		if (n->receiver != NULL)
			egw_xfer_receiver_peer_del(n->receiver, i);
		addr_delete(n, pe->cfg.addr, pe->cfg.udp_port);
		if (pe->fence || pe->silent)
			n->nflagged--;
		memset(pe, 0, sizeof(*pe));
		n->nleaving--;
		n->peers_gen++;
	}
	while (n->npeers > 0 &&
	       n->peers[n->npeers - 1].state == EGW_NODE_PEER_FREE)
		n->npeers--;
}

uint32_t
egw_node_peer_slots(const struct egw_node *n)
{
	return n->nslots;
}

int
egw_node_peer_get(const struct egw_node *n, uint32_t slot,
		  struct egw_node_peer_info *out)
{
	const struct node_peer *pe;

	if (slot >= n->nslots)
		return -EINVAL;
	pe = &n->peers[slot];
	if (pe->state == EGW_NODE_PEER_FREE)
		return -ENOENT;
	out->cfg = pe->cfg;
	out->id = pe->id;
	out->state = (enum egw_node_peer_state)pe->state;
	out->ready = egw_node_peer_ready(n, slot);
	out->session = pe->adopted;
	return 0;
}

int
egw_node_peer_slot(const struct egw_node *n, uint32_t id)
{
	for (uint32_t i = 0; i < n->npeers; i++)
		if (n->peers[i].state != EGW_NODE_PEER_FREE &&
		    n->peers[i].id == id)
			return (int)i;
	return -1;
}

uint64_t
egw_node_peers_gen(const struct egw_node *n)
{
	return n->peers_gen;
}

int
egw_node_peer_index(const struct egw_node *n, const char *name)
{
	for (uint32_t i = 0; i < n->npeers; i++)
		if (n->peers[i].state == EGW_NODE_PEER_ACTIVE &&
		    strncmp(n->peers[i].cfg.name, name,
			    sizeof(n->peers[i].cfg.name)) == 0)
			return (int)i;
	return -1;
}
