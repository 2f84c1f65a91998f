/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_core.h"

#define MS 1000000ull

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
	t->rto_min_ns = 1 * MS;
	t->rto_max_ns = 200 * MS;
	t->bootstrap_ns = 5000 * MS;
	t->input_ns = 30000 * MS;
	t->round_ns = 5000 * MS;
	t->alloc_retry_ns = 1 * MS;
	t->alloc_ns = 2000 * MS;
	t->admit_ns = 30000 * MS;
	t->heartbeat_ns = 100 * MS;
	t->peer_dead_ns = 1000 * MS;
	t->linger_ns = 2000 * MS;
	/* an ACK comes within a round trip of a live, correct sender (its
	 * writes done); a few seconds cover many ABORT resends */
	t->quarantine_ns = 5000 * MS;
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
	egw_xfer_timers_default(&c->timers);
}

/* ---- core -------------------------------------------------------------- */

int
xfer_core_init(struct xfer_core *core, const struct egw_xfer_conf *c)
{
	uint32_t buckets = 4;

	memset(core, 0, sizeof(*core));
	if (c == NULL || c->emit == NULL || c->max_rooms == 0 ||
	    c->max_rooms > (1u << 24) || c->max_peers == 0 ||
	    c->max_runs_per_room == 0 || c->pipeline_depth == 0 ||
	    c->pipeline_depth >= EGW_XFER_PIPE || c->timers.rto_ns == 0 ||
	    c->timers.rto_min_ns == 0 ||
	    c->timers.rto_min_ns > c->timers.rto_ns ||
	    c->timers.rto_max_ns < c->timers.rto_ns ||
	    egw_pool_geom_check(&c->geom) != 0)
		return -EINVAL;
	core->conf = *c;
	while (buckets < 2 * c->max_rooms)
		buckets *= 2;
	core->tab_mask = buckets - 1;
	core->tab = calloc(buckets, sizeof(*core->tab));
	core->peers = calloc(c->max_peers, sizeof(*core->peers));
	core->free_idx = calloc(c->max_rooms, sizeof(*core->free_idx));
	core->active = calloc(c->max_rooms, sizeof(*core->active));
	core->active_pos = calloc(c->max_rooms, sizeof(*core->active_pos));
	core->gen = calloc(c->max_rooms, sizeof(*core->gen));
	if (core->tab == NULL || core->peers == NULL || core->free_idx == NULL ||
	    core->active == NULL || core->active_pos == NULL || core->gen == NULL) {
		xfer_core_fini(core);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->max_rooms; i++)
		core->free_idx[i] = c->max_rooms - 1 - i;
	core->nfree = c->max_rooms;
	return 0;
}

void
xfer_core_fini(struct xfer_core *core)
{
	free(core->tab);
	free(core->peers);
	free(core->free_idx);
	free(core->active);
	free(core->active_pos);
	free(core->gen);
	memset(core, 0, sizeof(*core));
}

static uint32_t
hash_key(uint64_t room, uint32_t rank)
{
	uint64_t h = (room ^ ((uint64_t)rank << 56)) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32);
}

int32_t
xfer_core_find(const struct xfer_core *core, uint64_t room, uint32_t rank)
{
	uint32_t i = hash_key(room, rank) & core->tab_mask;

	while (core->tab[i].idx1 != 0) {
		if (core->tab[i].room == room && core->tab[i].rank == rank)
			return (int32_t)(core->tab[i].idx1 - 1);
		i = (i + 1) & core->tab_mask;
	}
	return -1;
}

int32_t
xfer_core_take(struct xfer_core *core, uint64_t room, uint32_t rank)
{
	uint32_t i, idx;

	if (xfer_core_find(core, room, rank) >= 0)
		return -EGW_E_DUPLICATE_ROOM;
	if (core->nfree == 0)
		return -EGW_E_NO_SLOT;
	idx = core->free_idx[--core->nfree];
	i = hash_key(room, rank) & core->tab_mask;
	while (core->tab[i].idx1 != 0)
		i = (i + 1) & core->tab_mask;
	core->tab[i].room = room;
	core->tab[i].rank = rank;
	core->tab[i].idx1 = idx + 1;
	core->active_pos[idx] = core->nactive;
	core->active[core->nactive++] = idx;
	core->stats.rooms_active = core->nactive;
	core->stats.rooms_opened++;
	return (int32_t)idx;
}

void
xfer_core_probe_delete(const struct xfer_core_probe_table *t, uint32_t hole)
{
	uint8_t *slots = t->slots;
	uint32_t i = hole, j = hole;

	t->clear(slots + (size_t)i * t->size);
	for (;;) {
		uint32_t home;

		j = (j + 1) & t->mask;
		home = t->home(slots + (size_t)j * t->size, t->mask);
		if (home == UINT32_MAX)
			break;
		/* move j into the hole i unless home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && (home <= i && home > j))) {
			memcpy(slots + (size_t)i * t->size,
			       slots + (size_t)j * t->size, t->size);
			t->clear(slots + (size_t)j * t->size);
			i = j;
		}
	}
}

static uint32_t
slot_home(const void *slot, uint32_t mask)
{
	const struct xfer_slot *s = slot;

	return s->idx1 == 0 ? UINT32_MAX : hash_key(s->room, s->rank) & mask;
}

static void
slot_clear(void *slot)
{
	((struct xfer_slot *)slot)->idx1 = 0;
}

void
xfer_core_release(struct xfer_core *core, uint64_t room, uint32_t rank,
		  uint32_t idx)
{
	const struct xfer_core_probe_table tab = {
		.slots = core->tab, .size = sizeof(*core->tab),
		.mask = core->tab_mask, .home = slot_home, .clear = slot_clear,
	};
	uint32_t i = hash_key(room, rank) & core->tab_mask, pos, last;

	while (core->tab[i].idx1 != idx + 1) {
		if (core->tab[i].idx1 == 0)
			return; /* not there: nothing to undo */
		i = (i + 1) & core->tab_mask;
	}
	xfer_core_probe_delete(&tab, i);
	pos = core->active_pos[idx];
	last = core->active[--core->nactive];
	core->active[pos] = last;
	core->active_pos[last] = pos;
	core->gen[idx]++;
	core->free_idx[core->nfree++] = idx;
	core->stats.rooms_active = core->nactive;
}

int
xfer_core_peer_add(struct xfer_core *core, uint32_t peer, uint32_t pool_blocks,
	      uint64_t now)
{
	if (peer >= core->conf.max_peers)
		return -EINVAL;
	core->peers[peer].used = true;
	core->peers[peer].dead = false;
	if (peer >= core->peers_hw)
		core->peers_hw = peer + 1;
	core->peers[peer].pool_blocks = pool_blocks;
	core->peers[peer].last_rx = now;
	core->peers[peer].next_hb = now;
	core->peers_due = 0;
	return 0;
}

void
xfer_core_peer_del(struct xfer_core *core, uint32_t peer)
{
	if (peer < core->conf.max_peers)
		memset(&core->peers[peer], 0, sizeof(core->peers[peer]));
}

void
xfer_core_rtt_sample(struct xfer_core *core, uint32_t peer, uint64_t rtt)
{
	const struct egw_xfer_timers *t = &core->conf.timers;
	struct xfer_peer *pe;
	uint64_t rto, dev;

	if (peer >= core->conf.max_peers || !core->peers[peer].used)
		return;
	pe = &core->peers[peer];
	if (pe->rtt_samples == 0) {
		pe->srtt = rtt;
		pe->rttvar = rtt / 2;
	} else {
		/* RTTVAR first: it uses the SRTT before this sample */
		dev = pe->srtt > rtt ? pe->srtt - rtt : rtt - pe->srtt;
		pe->rttvar = (3 * pe->rttvar + dev) / 4;
		pe->srtt = (7 * pe->srtt + rtt) / 8;
	}
	pe->rtt_samples++;
	pe->backoff_until = 0;
	rto = pe->srtt + 4 * pe->rttvar;
	if (rto < t->rto_min_ns)
		rto = t->rto_min_ns;
	if (rto > t->rto_max_ns)
		rto = t->rto_max_ns;
	pe->rto = rto;
	core->stats.rtt_samples++;
}

void
xfer_core_rto_backoff(struct xfer_core *core, uint32_t peer, uint64_t now)
{
	struct xfer_peer *pe;
	uint64_t rto;

	if (peer >= core->conf.max_peers || !core->peers[peer].used)
		return;
	pe = &core->peers[peer];
	if (now < pe->backoff_until)
		return;
	rto = xfer_core_backoff(core, xfer_core_rto(core, peer));
	pe->rto = rto;
	pe->backoff_until = now + rto;
}

int
xfer_core_peer_heard(struct xfer_core *core, uint32_t peer, uint64_t now)
{
	if (peer >= core->conf.max_peers || !core->peers[peer].used)
		return xfer_core_reject(core, EGW_E_UNKNOWN_PEER);
	core->peers[peer].last_rx = now;
	core->peers[peer].dead = false;
	core->stats.rx_msgs++;
	return 0;
}

void
xfer_core_peer_dead(struct xfer_core *core, uint32_t peer, uint64_t now,
	       bool announce, xfer_core_on_dead_fn on_dead, void *eng)
{
	if (peer < core->conf.max_peers && core->peers[peer].used &&
	    !core->peers[peer].dead) {
		struct egw_act a = { .type = EGW_ACT_PEER_DEAD, .peer = peer };

		core->peers[peer].dead = true;
		core->stats.peers_dead++;
		if (announce)
			xfer_core_emit(core, &a);
	}
	on_dead(eng, peer, now);
}

void
xfer_core_peer_tick(struct xfer_core *core, uint64_t now,
		    xfer_core_on_dead_fn on_dead, void *eng)
{
	const struct egw_xfer_timers *t = &core->conf.timers;
	uint64_t due = UINT64_MAX;

	/* every peer's next heartbeat is in `due`, so the loop runs at least
	 * once a heartbeat interval; a peer heard since only dies later */
	if (now < core->peers_due)
		return;
	for (uint32_t p = 0; p < core->peers_hw; p++) {
		struct xfer_peer *pe = &core->peers[p];

		if (!pe->used)
			continue;
		if (now >= pe->next_hb) {
			struct egw_msg m = { .type = EGW_MSG_HEARTBEAT };

			xfer_core_send(core, p, &m);
			pe->next_hb = now + t->heartbeat_ns;
		}
		if (!pe->dead && now - pe->last_rx >= t->peer_dead_ns)
			xfer_core_peer_dead(core, p, now, true, on_dead, eng);
		if (pe->next_hb < due)
			due = pe->next_hb;
		if (!pe->dead && pe->last_rx + t->peer_dead_ns < due)
			due = pe->last_rx + t->peer_dead_ns;
	}
	core->peers_due = due;
}

/* A room a group of ranks received once: `others` ranks besides the one
 * whose windows served them, and the bytes they did not cross the wire. */
void
xfer_core_count_group(struct xfer_core *core, uint32_t total, uint32_t others)
{
	const struct egw_pool_geom *g = &core->conf.geom;
	uint64_t room_bytes = g->aux_bytes;

	if (others == 0)
		return;
	for (int k = EGW_KIND_EMB; k < EGW_KIND_AUX; k++)
		room_bytes += (uint64_t)total *
			      egw_pool_geom_unit_bytes(g, (enum egw_kind)k);
	core->stats.group_rooms++;
	core->stats.group_ranks += others;
	core->stats.group_bytes_saved += others * room_bytes;
}

void
xfer_core_send(struct xfer_core *core, uint32_t peer, const struct egw_msg *m)
{
	struct egw_act a = { .type = EGW_ACT_SEND, .peer = peer,
			     .room = m->room, .rank = m->rank, .msg = m };

	xfer_core_emit(core, &a);
}

void
xfer_core_free_runs(struct xfer_core *core, uint64_t room, uint16_t rank,
	       const struct egw_run *runs, uint32_t n)
{
	struct egw_act a = { .type = EGW_ACT_FREE, .room = room, .rank = rank,
			     .runs = runs, .nruns = n };

	if (n > 0)
		xfer_core_emit(core, &a);
}

void
xfer_core_done(struct xfer_core *core, uint64_t room, uint16_t rank,
	       enum egw_err e)
{
	struct egw_act a = { .type = EGW_ACT_DONE, .room = room, .rank = rank,
			     .error = e };

	if (e == EGW_E_OK) {
		core->stats.rooms_ok++;
	} else {
		core->stats.rooms_failed++;
		core->stats.failed[egw_err_to_wire(e)]++;
	}
	xfer_core_emit(core, &a);
}

int
xfer_core_reject(struct xfer_core *core, enum egw_err e)
{
	core->stats.rejected[egw_err_to_wire(e)]++;
	return -(int)e;
}

int64_t
xfer_core_check_runs(const struct egw_run *runs, uint32_t n,
		     uint32_t pool_blocks)
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

uint64_t
egw_xfer_wait_quantile(const struct egw_xfer_stats *st, double q)
{
	uint64_t n = 0, seen = 0, want;

	for (int i = 0; i < EGW_XFER_WAIT_BUCKETS; i++)
		n += st->admit_wait_hist[i];
	if (n == 0)
		return 0;
	want = (uint64_t)(q * (double)n + 0.999999);
	if (want == 0)
		want = 1;
	for (int i = 0; i < EGW_XFER_WAIT_BUCKETS; i++) {
		seen += st->admit_wait_hist[i];
		if (seen >= want)
			return (2ull << i) * 1000ull;
	}
	return st->admit_wait_max_ns;
}
