/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_core.h"

#define MS 1000000ull

static const char *const err_names[EGW_E_MAX] = {
	[EGW_E_OK] = "ok",
	[EGW_E_UNKNOWN_ROOM] = "unknown room",
	[EGW_E_BAD_RANK] = "bad rank or foreign peer",
	[EGW_E_BLOCK_TOKENS] = "block_tokens differs between the sides",
	[EGW_E_ALLOC_MISMATCH] = "allocated tokens != blocks x block_tokens",
	[EGW_E_ZERO_BLOCKS] = "window without blocks",
	[EGW_E_BAD_BLOCKS] = "blocks outside the pool or overlapping",
	[EGW_E_BEYOND_TOTAL] = "window starts at or beyond the total",
	[EGW_E_STATE] = "message not valid in this state",
	[EGW_E_TOTAL_CHANGED] = "total differs from the one announced",
	[EGW_E_BAD_STATUS] = "inconsistent status",
	[EGW_E_BUSY] = "too many windows outstanding",
	[EGW_E_TOO_LARGE] = "total or run list too large",
	[EGW_E_NO_SLOT] = "room table full",
	[EGW_E_DUPLICATE_ROOM] = "room already open",
	[EGW_E_TIMEOUT_BOOTSTRAP] = "bootstrap deadline passed",
	[EGW_E_TIMEOUT_INPUT] = "waiting-for-input deadline passed",
	[EGW_E_TIMEOUT_ROUND] = "no transfer progress before the round deadline",
	[EGW_E_POOL_EXHAUSTED] = "pool exhausted until the allocation deadline",
	[EGW_E_PEER_DEAD] = "peer dead (heartbeat deadline)",
	[EGW_E_ABORTED] = "aborted",
	[EGW_E_TRANSPORT] = "payload writes failed",
	[EGW_E_UNKNOWN_PEER] = "unknown peer",
};

const char *
egw_strerror(enum egw_err e)
{
	if ((unsigned)e >= EGW_E_MAX || err_names[e] == NULL)
		return "unknown error";
	return err_names[e];
}

const char *
egw_state_name(enum egw_state s)
{
	switch (s) {
	case EGW_ST_BOOTSTRAPPING: return "Bootstrapping";
	case EGW_ST_WAITING_FOR_INPUT: return "WaitingForInput";
	case EGW_ST_TRANSFERRING: return "Transferring";
	case EGW_ST_SUCCESS: return "Success";
	case EGW_ST_FAILED: return "Failed";
	}
	return "?";
}

void
egw_xfer_timers_default(struct egw_xfer_timers *t)
{
	/* Sized for a LAN: RTTs of tens of microseconds, payload rounds of
	 * milliseconds. alloc_ns < round_ns so that a receiver waiting for
	 * memory fails with "pool exhausted" before anyone's round timer. */
	t->rto_ns = 2 * MS;
	t->rto_max_ns = 200 * MS;
	t->bootstrap_ns = 5000 * MS;
	t->input_ns = 30000 * MS;
	t->round_ns = 5000 * MS;
	t->alloc_retry_ns = 1 * MS;
	t->alloc_ns = 2000 * MS;
	t->heartbeat_ns = 100 * MS;
	t->peer_dead_ns = 1000 * MS;
	t->linger_ns = 2000 * MS;
}

void
egw_xfer_conf_default(struct egw_xfer_conf *c, const struct egw_pool_geom *g)
{
	memset(c, 0, sizeof(*c));
	if (g != NULL)
		c->geom = *g;
	c->max_rooms = 1024;
	c->max_peers = 64;
	c->max_runs_per_room = 512;
	c->max_blocks_per_round = 0;
	c->pipeline_depth = 2;
	c->announce_early = true;
	egw_xfer_timers_default(&c->t);
}

/* ---- core -------------------------------------------------------------- */

int
core_init(struct xfer_core *k, const struct egw_xfer_conf *c)
{
	uint32_t buckets = 4;

	memset(k, 0, sizeof(*k));
	if (c == NULL || c->emit == NULL || c->max_rooms == 0 ||
	    c->max_rooms > (1u << 24) || c->max_peers == 0 ||
	    c->max_runs_per_room == 0 || c->pipeline_depth == 0 ||
	    c->pipeline_depth >= EGW_XFER_PIPE || c->t.rto_ns == 0 ||
	    c->t.rto_max_ns < c->t.rto_ns || egw_geom_check(&c->geom) != 0)
		return -EINVAL;
	k->c = *c;
	while (buckets < 2 * c->max_rooms)
		buckets *= 2;
	k->tab_mask = buckets - 1;
	k->tab = calloc(buckets, sizeof(*k->tab));
	k->peers = calloc(c->max_peers, sizeof(*k->peers));
	k->free_idx = calloc(c->max_rooms, sizeof(*k->free_idx));
	k->active = calloc(c->max_rooms, sizeof(*k->active));
	k->active_pos = calloc(c->max_rooms, sizeof(*k->active_pos));
	k->gen = calloc(c->max_rooms, sizeof(*k->gen));
	if (k->tab == NULL || k->peers == NULL || k->free_idx == NULL ||
	    k->active == NULL || k->active_pos == NULL || k->gen == NULL) {
		core_fini(k);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->max_rooms; i++)
		k->free_idx[i] = c->max_rooms - 1 - i;
	k->nfree = c->max_rooms;
	return 0;
}

void
core_fini(struct xfer_core *k)
{
	free(k->tab);
	free(k->peers);
	free(k->free_idx);
	free(k->active);
	free(k->active_pos);
	free(k->gen);
	memset(k, 0, sizeof(*k));
}

static uint32_t
hash_key(uint64_t room, uint32_t rank)
{
	uint64_t h = (room ^ ((uint64_t)rank << 56)) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32);
}

int32_t
core_find(const struct xfer_core *k, uint64_t room, uint32_t rank)
{
	uint32_t i = hash_key(room, rank) & k->tab_mask;

	while (k->tab[i].idx1 != 0) {
		if (k->tab[i].room == room && k->tab[i].rank == rank)
			return (int32_t)(k->tab[i].idx1 - 1);
		i = (i + 1) & k->tab_mask;
	}
	return -1;
}

int32_t
core_take(struct xfer_core *k, uint64_t room, uint32_t rank)
{
	uint32_t i, idx;

	if (core_find(k, room, rank) >= 0)
		return -EGW_E_DUPLICATE_ROOM;
	if (k->nfree == 0)
		return -EGW_E_NO_SLOT;
	idx = k->free_idx[--k->nfree];
	i = hash_key(room, rank) & k->tab_mask;
	while (k->tab[i].idx1 != 0)
		i = (i + 1) & k->tab_mask;
	k->tab[i].room = room;
	k->tab[i].rank = rank;
	k->tab[i].idx1 = idx + 1;
	k->active_pos[idx] = k->nactive;
	k->active[k->nactive++] = idx;
	k->st.rooms_active = k->nactive;
	k->st.rooms_opened++;
	return (int32_t)idx;
}

void
core_release(struct xfer_core *k, uint64_t room, uint32_t rank, uint32_t idx)
{
	uint32_t i = hash_key(room, rank) & k->tab_mask, j, pos, last;

	while (k->tab[i].idx1 != idx + 1) {
		if (k->tab[i].idx1 == 0)
			return; /* not there: nothing to undo */
		i = (i + 1) & k->tab_mask;
	}
	/* backward-shift deletion keeps probe chains intact, no tombstones */
	k->tab[i].idx1 = 0;
	j = i;
	for (;;) {
		uint32_t home;

		j = (j + 1) & k->tab_mask;
		if (k->tab[j].idx1 == 0)
			break;
		home = hash_key(k->tab[j].room, k->tab[j].rank) & k->tab_mask;
		/* move j into the hole i unless home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && (home <= i && home > j))) {
			k->tab[i] = k->tab[j];
			k->tab[j].idx1 = 0;
			i = j;
		}
	}
	pos = k->active_pos[idx];
	last = k->active[--k->nactive];
	k->active[pos] = last;
	k->active_pos[last] = pos;
	k->gen[idx]++;
	k->free_idx[k->nfree++] = idx;
	k->st.rooms_active = k->nactive;
}

int
core_peer_add(struct xfer_core *k, uint32_t peer, uint32_t pool_blocks,
	      uint64_t now)
{
	if (peer >= k->c.max_peers)
		return -EINVAL;
	k->peers[peer].used = true;
	k->peers[peer].dead = false;
	k->peers[peer].pool_blocks = pool_blocks;
	k->peers[peer].last_rx = now;
	k->peers[peer].next_hb = now;
	return 0;
}

int
core_peer_heard(struct xfer_core *k, uint32_t peer, uint64_t now)
{
	if (peer >= k->c.max_peers || !k->peers[peer].used)
		return core_reject(k, EGW_E_UNKNOWN_PEER);
	k->peers[peer].last_rx = now;
	k->peers[peer].dead = false;
	k->st.rx_msgs++;
	return 0;
}

void
core_peer_tick(struct xfer_core *k, uint64_t now,
	       void (*on_dead)(void *eng, uint32_t peer, uint64_t now),
	       void *eng)
{
	for (uint32_t p = 0; p < k->c.max_peers; p++) {
		struct xfer_peer *pe = &k->peers[p];

		if (!pe->used)
			continue;
		if (now >= pe->next_hb) {
			struct egw_msg m = { .type = EGW_MSG_HEARTBEAT };

			core_send(k, p, &m);
			pe->next_hb = now + k->c.t.heartbeat_ns;
		}
		if (!pe->dead && now - pe->last_rx >= k->c.t.peer_dead_ns) {
			struct egw_act a = { .type = EGW_ACT_PEER_DEAD,
					     .peer = p };

			pe->dead = true;
			k->st.peers_dead++;
			core_emit(k, &a);
			on_dead(eng, p, now);
		}
	}
}

void
core_send(struct xfer_core *k, uint32_t peer, const struct egw_msg *m)
{
	struct egw_act a = { .type = EGW_ACT_SEND, .peer = peer,
			     .room = m->room, .rank = m->rank, .msg = m };

	core_emit(k, &a);
}

void
core_free_runs(struct xfer_core *k, uint64_t room, uint16_t rank,
	       const struct egw_run *runs, uint32_t n)
{
	struct egw_act a = { .type = EGW_ACT_FREE, .room = room, .rank = rank,
			     .runs = runs, .nruns = n };

	if (n > 0)
		core_emit(k, &a);
}

void
core_done(struct xfer_core *k, uint64_t room, uint16_t rank, enum egw_err e)
{
	struct egw_act a = { .type = EGW_ACT_DONE, .room = room, .rank = rank,
			     .error = e };

	if (e == EGW_E_OK) {
		k->st.rooms_ok++;
	} else {
		k->st.rooms_failed++;
		k->st.failed[e]++;
	}
	core_emit(k, &a);
}

int
core_reject(struct xfer_core *k, enum egw_err e)
{
	k->st.rejected[e]++;
	return -(int)e;
}

int64_t
core_check_runs(const struct egw_run *runs, uint32_t n, uint32_t pool_blocks)
{
	int64_t blocks = 0;

	if (n == 0)
		return -EGW_E_ZERO_BLOCKS;
	if (n > EGW_XFER_MAX_RUNS)
		return -EGW_E_TOO_LARGE;
	for (uint32_t i = 0; i < n; i++) {
		if (runs[i].count == 0)
			return -EGW_E_ZERO_BLOCKS;
		if (runs[i].start >= pool_blocks ||
		    runs[i].count > pool_blocks - runs[i].start)
			return -EGW_E_BAD_BLOCKS;
		for (uint32_t j = 0; j < i; j++)
			if (runs[i].start < runs[j].start + runs[j].count &&
			    runs[j].start < runs[i].start + runs[i].count)
				return -EGW_E_BAD_BLOCKS;
		blocks += runs[i].count;
	}
	return blocks;
}
