/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what the sender and the receiver engines share - configuration,
 * counters, the peer table with heartbeats, the fixed-size room table
 * (open addressing, no allocation after create) and the list of active
 * rooms that tick() walks. Not installed; egw_xfer.h is the public face.
 */
#ifndef EGW_XFER_CORE_H
#define EGW_XFER_CORE_H

#include "egw_xfer.h"

struct xfer_peer {
	bool used, dead;
	uint32_t pool_blocks;
	uint64_t last_rx;
	uint64_t next_hb;
	/* round-trip estimate (RFC 6298; xfer_core_rtt_sample): 0 until the
	 * first sample, when the first RTO is the configured one */
	uint64_t srtt, rttvar, rto, rtt_samples;
	uint64_t backoff_until; /* the RTO was doubled; not again before */
};

struct xfer_slot {        /* one bucket of the room table */
	uint64_t room;
	uint32_t rank;
	uint32_t idx1;        /* room index + 1; 0 = empty */
};

struct xfer_core {
	struct egw_xfer_conf conf;
	struct egw_xfer_stats stats;
	struct xfer_peer *peers;
	uint32_t peers_hw;  /* one past the highest slot ever added: the
			     * per-tick loop stops there */
	uint64_t peers_due; /* nothing of any peer (a heartbeat, its death)
			     * is due before this: the loop waits for it */
	struct xfer_slot *tab;
	uint32_t tab_mask;
	uint32_t *free_idx;   /* stack of free room indices */
	uint32_t nfree;
	uint32_t *active;     /* dense list of room indices in use */
	uint32_t *active_pos; /* index -> position in `active` */
	uint32_t nactive;
	uint16_t *gen;        /* per index, bumped on release (stale cookies) */
};

/* An open-addressing table with linear probing, as the deletion below
 * sees it: `nslots` (a power of two, mask = nslots - 1) slots of `size`
 * bytes; home() gives a used slot's home bucket and UINT32_MAX for an
 * empty one, clear() empties a slot. */
struct xfer_core_probe_table {
	void *slots;
	size_t size;
	uint32_t mask;
	uint32_t (*home)(const void *slot, uint32_t mask);
	void (*clear)(void *slot);
};

/* Empty slot `hole` and close the gap by backward-shift deletion: the
 * probe chains stay intact without tombstone markers. Used by the room
 * table and the sender's tombstones. */
void xfer_core_probe_delete(const struct xfer_core_probe_table *t,
			    uint32_t hole);

int xfer_core_init(struct xfer_core *core, const struct egw_xfer_conf *c);
void xfer_core_fini(struct xfer_core *core);

/* xfer_live.c: a reload's new settings. check: 0 or -EINVAL (a bad value,
 * or a table size that differs); apply: after a check, never fails. */
int xfer_core_conf_check(const struct xfer_core *core,
			 const struct egw_xfer_conf *c);
void xfer_core_conf_apply(struct xfer_core *core, const struct egw_xfer_conf *c,
			  uint64_t now);

/* Room table: key (room, rank). Returns the index or -1. */
int32_t xfer_core_find(const struct xfer_core *core, uint64_t room,
		       uint32_t rank);
/* New room index for the key: >= 0, -EGW_E_DUPLICATE_ROOM, -EGW_E_NO_SLOT. */
int32_t xfer_core_take(struct xfer_core *core, uint64_t room, uint32_t rank);
void xfer_core_release(struct xfer_core *core, uint64_t room, uint32_t rank,
		  uint32_t idx);

int xfer_core_peer_add(struct xfer_core *core, uint32_t peer,
		       uint32_t pool_blocks, uint64_t now);
/* A message arrived from `peer`: 0, or -EGW_E_UNKNOWN_PEER (counted). */
/* The slot is free again: nothing of it is kept. */
void xfer_core_peer_del(struct xfer_core *core, uint32_t peer);
int xfer_core_peer_heard(struct xfer_core *core, uint32_t peer, uint64_t now);
/* What an engine does when one of its peers dies: fail its rooms. */
typedef void (*xfer_core_on_dead_fn)(void *eng, uint32_t peer, uint64_t now);

/* A peer is dead: marked and counted once, announced (EGW_ACT_PEER_DEAD)
 * when `announce` (the heartbeat deadline found it; a caller that declares
 * it dead knows already), and its rooms failed through on_dead. */
void xfer_core_peer_dead(struct xfer_core *core, uint32_t peer, uint64_t now,
		    bool announce, xfer_core_on_dead_fn on_dead, void *eng);
/* Heartbeats, and xfer_core_peer_dead for each peer silent past its
 * deadline. */
void xfer_core_peer_tick(struct xfer_core *core, uint64_t now,
		    xfer_core_on_dead_fn on_dead, void *eng);

static inline void
xfer_core_emit(struct xfer_core *core, const struct egw_act *a)
{
	if (a->type == EGW_ACT_SEND)
		core->stats.tx_msgs++;
	core->conf.emit(core->conf.emit_ctx, a);
}

void xfer_core_send(struct xfer_core *core, uint32_t peer,
		    const struct egw_msg *m);
void xfer_core_count_group(struct xfer_core *core, uint32_t total,
			   uint32_t others);
void xfer_core_free_runs(struct xfer_core *core, uint64_t room, uint16_t rank,
		    const struct egw_run *runs, uint32_t n);
void xfer_core_done(struct xfer_core *core, uint64_t room, uint16_t rank,
	       enum egw_err e);
/* Count a refused message; returns -e for the caller to hand back. */
int xfer_core_reject(struct xfer_core *core, enum egw_err e);

/* A round-trip sample `rtt` of `peer` (a message sent once, never
 * retransmitted - Karn's rule is the caller's - and its answer): the
 * smoothed RTT and its variation as RFC 6298 computes them (alpha 1/8,
 * beta 1/4, K 4), and the peer's RTO from them within rto_min..rto_max. */
void xfer_core_rtt_sample(struct xfer_core *core, uint32_t peer, uint64_t rtt);

/* A message to `peer` timed out: its RTO doubles (up to rto_max) and
 * stays so for the peer's next messages until a sample sets it again
 * (RFC 6298 5.5 and 5.7, Karn's algorithm) - else timeouts that fire
 * before every answer leave no sample and the RTO never grows. Once per
 * RTO at most, however many rooms time out together. */
void xfer_core_rto_backoff(struct xfer_core *core, uint32_t peer, uint64_t now);

/* The first retransmission timeout of a message to `peer`: its RTO from
 * the samples so far, the configured rto_ns before the first. */
static inline uint64_t
xfer_core_rto(const struct xfer_core *core, uint32_t peer)
{
	if (peer < core->conf.max_peers && core->peers[peer].rto != 0)
		return core->peers[peer].rto;
	return core->conf.timers.rto_ns;
}

/* Next retransmission timeout: double, up to the ceiling. */
static inline uint64_t
xfer_core_backoff(const struct xfer_core *core, uint64_t rto)
{
	uint64_t n = rto * 2;

	return n > core->conf.timers.rto_max_ns ? core->conf.timers.rto_max_ns : n;
}

/* Check a window's run list against a pool of `pool_blocks`: counts,
 * bounds and no overlap. Returns the block count or -egw_err. */
int64_t xfer_core_check_runs(const struct egw_run *runs, uint32_t n,
			uint32_t pool_blocks);

#endif /* EGW_XFER_CORE_H */
