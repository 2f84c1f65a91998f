/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sender (encode side): one room serves `nranks` language ranks. Each rank
 * has a small ring of accepted windows; windows are posted in order as soon
 * as the room is transferring, and `landed` advances over the completed
 * prefix. The sender answers every request (INIT, RESUME, STATUS poll) with
 * a STATUS built from cumulative counters, so a duplicate gets the same
 * answer and no new work (at most once). A finished room gives its slot
 * back as soon as no write is in flight and leaves a tombstone - room id,
 * final state, per-rank counters - that answers late duplicates the same
 * way for `linger_ns`; so the room rate is not bounded by
 * max_rooms / linger.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_core.h"

struct sender_window {
	uint32_t off, alloc;
	uint32_t rkeys[EGW_KIND_MAX]; /* the window's, per kind (0: region's) */
	uint32_t seq;             /* per-rank window number, in the cookie */
	uint16_t nruns;
	bool posted, done;
	struct egw_run runs[EGW_XFER_MAX_RUNS];
};

struct sender_rank {
	bool inited, dummy, complete;
	/* fan-out (doc/xfer.md): a leader's INIT speaks for `group` (its
	 * own bit included); the other ranks of the group are followers,
	 * served by the leader's windows, never inited themselves */
	bool follower;
	uint8_t leader;	     /* a follower's leader */
	uint16_t group;	     /* an inited rank's set (1 << rank alone) */
	uint16_t wire_ranks; /* the INIT's ranks, echoed in reports */
	uint16_t ack_ranks;  /* the ABORT's ranks, echoed in its ACK */
	uint32_t peer;
	uint32_t accepted;        /* end of accepted windows */
	uint32_t landed;          /* completed prefix */
	uint32_t nseq;
	uint16_t inflight;        /* posted batches of this rank not completed */
	bool ack_due;             /* ABORT ACK once inflight is 0 */
	bool yield_pending;       /* the receiver gives its blocks back: reset
				   * the rank once inflight is 0 */
	bool yielded;             /* reset; waits for the rank's new INIT */
	uint16_t ack_err;         /* enum egw_err the ACK echoes */
	uint16_t ack_abort_id;    /* the ABORT it answers (abort_id) */
	uint32_t ack_peer;
	uint64_t yield_seq;       /* requests up to this seq are stale */
	uint64_t init_seq;        /* seq of the INIT that bound the rank */
	uint8_t head, count;      /* ring of windows not yet landed */
	struct sender_window win[EGW_XFER_PIPE];
};

struct sender_room {
	uint64_t room;
	uint16_t nranks, ninit, ncomplete;
	uint8_t state;
	uint16_t err;             /* enum egw_err */
	bool have_input, src_freed;
	bool started;             /* has been Transferring: total announced */
	uint32_t total;
	uint32_t inflight;        /* posted batches not completed */
	uint16_t nyielded;        /* ranks reset, waiting for their INIT */
	uint64_t yield_deadline;  /* ... which must come before this */
	uint64_t deadline, progress_at;
	struct egw_run *src;
	uint32_t nsrc;
	struct sender_rank rank[EGW_XFER_MAX_RANKS];
};

/* What a finished room leaves behind to answer late duplicates. */
struct sender_tomb {
	uint64_t room;
	uint64_t expires;
	uint32_t total;           /* 0 when the room never announced it */
	uint8_t state;
	uint16_t err;             /* enum egw_err */
	uint16_t nranks;
	uint32_t accepted[EGW_XFER_MAX_RANKS], landed[EGW_XFER_MAX_RANKS];
	uint32_t peer[EGW_XFER_MAX_RANKS];
	bool live; /* false once replaced (the ring keeps order) */
};

/* The tombstones' index: room id -> record, open addressing kept half
 * empty. 16 bytes a slot, apart from the records, so a lookup - every
 * INIT of a new room misses here - touches one cache line, not a
 * record's two. */
struct tomb_slot {
	uint64_t room;
	uint32_t rec; /* index in tomb_ring; TOMB_NONE: empty */
};

#define TOMB_NONE UINT32_MAX

struct egw_xfer_sender {
	struct xfer_core core;
	struct tomb_slot *tomb_index;  /* open addressing on room id */
	struct sender_tomb *tomb_ring; /* records in insertion order: expiry
					* and eviction take the head */
	uint32_t tomb_mask, tomb_head, tomb_count;
	struct sender_room *rooms;
	struct egw_run *src_store;
	struct egw_write *scratch; /* writes of one window, emitted at once */
	uint32_t scratch_len;
};

static uint16_t
popcount16(uint16_t v)
{
	return (uint16_t)__builtin_popcount(v);
}

/* cookie = gen:16 | idx:24 | rank:4 | seq:20 */
static uint64_t
cookie_make(const struct egw_xfer_sender *s, uint32_t idx, uint32_t rank,
	    uint32_t seq)
{
	return ((uint64_t)s->core.gen[idx] << 48) | ((uint64_t)idx << 24) |
	       ((uint64_t)rank << 20) | (seq & 0xfffffu);
}

int
egw_xfer_sender_create(const struct egw_xfer_conf *c,
		       struct egw_xfer_sender **out)
{
	struct egw_xfer_sender *s;
	int rc;

	if (out == NULL || c == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	rc = xfer_core_init(&s->core, c);
	if (rc != 0) {
		free(s);
		return rc;
	}
	/* a window of tokens crosses at most its src runs + its dst runs
	 * segments; three token kinds each, plus the aux record */
	s->scratch_len = (c->max_runs_per_room + EGW_XFER_MAX_RUNS) * 3 + 1;
	s->rooms = calloc(c->max_rooms, sizeof(*s->rooms));
	s->src_store = calloc((size_t)c->max_rooms * c->max_runs_per_room,
			      sizeof(*s->src_store));
	s->scratch = calloc(s->scratch_len, sizeof(*s->scratch));
	/* room for 4 x max_rooms tombstones, the index kept half empty */
	s->tomb_mask = 1;
	while (s->tomb_mask + 1 < 8 * c->max_rooms)
		s->tomb_mask = 2 * s->tomb_mask + 1;
	s->tomb_index = malloc(((size_t)s->tomb_mask + 1) *
			       sizeof(*s->tomb_index));
	s->tomb_ring = calloc((size_t)4 * c->max_rooms, sizeof(*s->tomb_ring));
	if (s->rooms == NULL || s->src_store == NULL || s->scratch == NULL ||
	    s->tomb_index == NULL || s->tomb_ring == NULL) {
		egw_xfer_sender_destroy(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i <= s->tomb_mask; i++)
		s->tomb_index[i].rec = TOMB_NONE;
	for (uint32_t i = 0; i < c->max_rooms; i++)
		s->rooms[i].src = s->src_store +
				  (size_t)i * c->max_runs_per_room;
	*out = s;
	return 0;
}

void
egw_xfer_sender_destroy(struct egw_xfer_sender *s)
{
	if (s == NULL)
		return;
	xfer_core_fini(&s->core);
	free(s->rooms);
	free(s->src_store);
	free(s->scratch);
	free(s->tomb_index);
	free(s->tomb_ring);
	free(s);
}

int
egw_xfer_sender_set_conf(struct egw_xfer_sender *s,
			 const struct egw_xfer_conf *c, uint64_t now)
{
	int rc;

	if (s == NULL)
		return -EINVAL;
	rc = xfer_core_conf_check(&s->core, c);
	if (rc == 0)
		xfer_core_conf_apply(&s->core, c, now);
	return rc;
}

int
egw_xfer_sender_peer_add(struct egw_xfer_sender *s, uint32_t peer,
			 uint32_t pool_blocks, uint64_t now)
{
	if (pool_blocks == 0)
		return -EINVAL;
	return xfer_core_peer_add(&s->core, peer, pool_blocks, now);
}

void
egw_xfer_sender_get_stats(const struct egw_xfer_sender *s,
			  struct egw_xfer_stats *st)
{
	*st = s->core.stats;
}

static struct sender_room *
sender_find(struct egw_xfer_sender *s, uint64_t room)
{
	int32_t i = xfer_core_find(&s->core, room, 0);

	return i < 0 ? NULL : &s->rooms[i];
}

static struct sender_tomb *tomb_find(const struct egw_xfer_sender *s,
				     uint64_t room, uint64_t now);

int
egw_xfer_sender_state(const struct egw_xfer_sender *s, uint64_t room)
{
	int32_t i = xfer_core_find(&s->core, room, 0);
	const struct sender_tomb *t;

	if (i >= 0)
		return s->rooms[i].state;
	/* a finished room: its tombstone, until it expires (0: no clock
	 * here, the tick expires them) */
	t = tomb_find(s, room, 0);
	return t != NULL ? t->state : -EGW_E_UNKNOWN_ROOM;
}

static bool
sender_final(const struct sender_room *x)
{
	return x->state >= EGW_ST_SUCCESS;
}

/* ---- tombstones --------------------------------------------------------- */

static uint32_t
tomb_hash(uint64_t room)
{
	return (uint32_t)((room * 0x9e3779b97f4a7c15ull) >> 32);
}

/* The index slot of `room`'s tombstone, or TOMB_NONE. */
static uint32_t
tomb_slot_of(const struct egw_xfer_sender *s, uint64_t room)
{
	uint32_t i = tomb_hash(room) & s->tomb_mask;

	while (s->tomb_index[i].rec != TOMB_NONE) {
		if (s->tomb_index[i].room == room)
			return i;
		i = (i + 1) & s->tomb_mask;
	}
	return TOMB_NONE;
}

static struct sender_tomb *
tomb_find(const struct egw_xfer_sender *s, uint64_t room, uint64_t now)
{
	uint32_t i = tomb_slot_of(s, room);
	struct sender_tomb *t;

	if (i == TOMB_NONE)
		return NULL;
	t = &s->tomb_ring[s->tomb_index[i].rec];
	return now < t->expires ? t : NULL;
}

static uint32_t
tomb_home(const void *slot, uint32_t mask)
{
	const struct tomb_slot *e = slot;

	return e->rec != TOMB_NONE ? tomb_hash(e->room) & mask : UINT32_MAX;
}

static void
tomb_clear(void *slot)
{
	((struct tomb_slot *)slot)->rec = TOMB_NONE;
}

/* Forget `room`'s tombstone: its index slot, and its record's place in
 * the ring (kept, not live, until expiry reaches it). */
static void
tomb_delete(struct egw_xfer_sender *s, uint64_t room)
{
	const struct xfer_core_probe_table tab = {
		.slots = s->tomb_index,
		.size = sizeof(*s->tomb_index),
		.mask = s->tomb_mask,
		.home = tomb_home,
		.clear = tomb_clear,
	};
	uint32_t i = tomb_slot_of(s, room);

	if (i == TOMB_NONE)
		return;
	s->tomb_ring[s->tomb_index[i].rec].live = false;
	xfer_core_probe_delete(&tab, i);
}

/* Drop tombstones past their time (oldest first), or the oldest to make
 * room: a late duplicate after that gets UNKNOWN_ROOM, as after linger. */
static void
tomb_expire(struct egw_xfer_sender *s, uint64_t now, bool make_room)
{
	uint32_t cap = 4 * s->core.conf.max_rooms;

	while (s->tomb_count > 0) {
		const struct sender_tomb *t = &s->tomb_ring[s->tomb_head];

		if (t->live && now < t->expires &&
		    !(make_room && s->tomb_count == cap))
			break;
		if (t->live)
			tomb_delete(s, t->room);
		s->tomb_head = (s->tomb_head + 1) % cap;
		s->tomb_count--;
	}
}

static void
tomb_add(struct egw_xfer_sender *s, const struct sender_room *x, uint64_t now)
{
	uint32_t cap = 4 * s->core.conf.max_rooms, i, rec;
	struct sender_tomb *t;

	tomb_expire(s, now, true);
	tomb_delete(s, x->room); /* a reused room id replaces its old tomb */
	rec = (s->tomb_head + s->tomb_count) % cap;
	s->tomb_count++;
	i = tomb_hash(x->room) & s->tomb_mask;
	while (s->tomb_index[i].rec != TOMB_NONE)
		i = (i + 1) & s->tomb_mask;
	s->tomb_index[i].room = x->room;
	s->tomb_index[i].rec = rec;
	t = &s->tomb_ring[rec];
	memset(t, 0, sizeof(*t));
	t->live = true;
	t->room = x->room;
	t->expires = now + s->core.conf.timers.linger_ns;
	t->total = x->started ? x->total : 0;
	t->state = x->state;
	t->err = x->err;
	t->nranks = x->nranks;
	for (uint16_t r = 0; r < x->nranks; r++) {
		/* a follower answers as its leader */
		const struct sender_rank *rk =
			x->rank[r].follower ? &x->rank[x->rank[r].leader] :
					      &x->rank[r];

		t->accepted[r] = rk->accepted;
		t->landed[r] = rk->landed;
		t->peer[r] = rk->inited ? rk->peer : UINT32_MAX;
	}
}

/*
 * The counters of one rank as STATUS carries them. They only grow, in
 * every state Failed included: the total once the room has started (and,
 * unless it is announced early, once data has landed), landed only with a
 * total, accepted always. A dummy rank's landed is 0 or the total.
 */
static void
status_counters(struct egw_msg *m, bool early, uint32_t total, uint32_t landed,
		uint32_t accepted)
{
	m->total_tokens = total != 0 && (early || landed > 0) ? total : 0;
	m->landed_tokens = m->total_tokens != 0 ? landed : 0;
	m->accepted_tokens = accepted;
}

/* A late request for a finished room: the same final answer. */
static int
tomb_answer(struct egw_xfer_sender *s, const struct sender_tomb *t,
	    uint32_t peer, const struct egw_msg *m)
{
	struct egw_msg a = {
		.type = EGW_MSG_STATUS,
		.room = t->room,
		.rank = m->rank,
		.nranks = t->nranks,
		.ranks = m->ranks,
		.state = t->state,
		.error = t->err,
	};

	/* a rank that never got in before the room failed (its INIT was
	 * refused as unknown until the room opened, say) hears the failure
	 * now instead of waiting out its bootstrap deadline; a Success is
	 * told only to the peer that took part */
	if (m->rank >= t->nranks || m->nranks != t->nranks ||
	    (t->peer[m->rank] != peer &&
	     !(t->peer[m->rank] == UINT32_MAX && t->state == EGW_ST_FAILED)))
		return xfer_core_reject(&s->core, EGW_E_BAD_RANK);
	status_counters(&a, s->core.conf.announce_early, t->total,
			t->landed[m->rank], t->accepted[m->rank]);
	s->core.stats.duplicates++;
	xfer_core_send(&s->core, peer, &a);
	return 0;
}

/* ---- STATUS ------------------------------------------------------------ */

static void
sender_status(struct egw_xfer_sender *s, const struct sender_room *x,
	      uint16_t r)
{
	const struct sender_rank *rk = &x->rank[r];
	struct egw_msg m = {
		.type = EGW_MSG_STATUS,
		.room = x->room,
		.rank = r,
		.nranks = x->nranks,
		.ranks = rk->wire_ranks,
		.error = x->err,
	};

	/* A rank whose data is complete still reads Transferring until every
	 * rank is: Success is a room-wide fact. */
	m.state = x->state;
	if (!sender_final(x) && rk->complete)
		m.state = EGW_ST_TRANSFERRING;
	status_counters(&m, s->core.conf.announce_early,
			x->started ? x->total : 0, rk->landed, rk->accepted);
	xfer_core_send(&s->core, rk->peer, &m);
}

static void
sender_status_all(struct egw_xfer_sender *s, const struct sender_room *x)
{
	for (uint16_t r = 0; r < x->nranks; r++)
		if (x->rank[r].inited)
			sender_status(s, x, r);
}

static int
sender_error(struct egw_xfer_sender *s, uint32_t peer,
	     const struct egw_msg *req, enum egw_err e)
{
	struct egw_msg m = {
		.type = EGW_MSG_ERROR,
		.state = req->type,
		.error = (uint16_t)e,
		.room = req->room,
		.rank = req->rank,
		.nranks = req->nranks,
		.ranks = req->ranks,
		.offset = req->offset,
	};

	xfer_core_send(&s->core, peer, &m);
	return xfer_core_reject(&s->core, e);
}

/* ---- ending a room ----------------------------------------------------- */

static void
sender_free_src(struct egw_xfer_sender *s, struct sender_room *x)
{
	/* never while writes may still read the source blocks */
	if (!x->have_input || x->src_freed || x->inflight > 0)
		return;
	xfer_core_free_runs(&s->core, x->room, 0, x->src, x->nsrc);
	x->src_freed = true;
}

static void sender_release(struct egw_xfer_sender *s, struct sender_room *x);

/* A room succeeded: the ranks its groups served through another rank's
 * windows, and the bytes those ranks did not cross the wire. */
static void
sender_count_groups(struct egw_xfer_sender *s, const struct sender_room *x)
{
	uint32_t followers = 0;

	for (uint16_t r = 0; r < x->nranks; r++)
		followers += x->rank[r].follower;
	xfer_core_count_group(&s->core, x->total, followers);
}

static void
sender_finish(struct egw_xfer_sender *s, struct sender_room *x, enum egw_err e,
	  uint64_t now)
{
	x->state = e == EGW_E_OK ? EGW_ST_SUCCESS : EGW_ST_FAILED;
	x->err = (uint16_t)e;
	if (e == EGW_E_OK)
		sender_count_groups(s, x);
	sender_free_src(s, x);
	sender_status_all(s, x);
	xfer_core_done(&s->core, x->room, 0, e);
	tomb_add(s, x, now);
	/* the slot goes back now, or when its last write completes */
	if (x->inflight == 0)
		sender_release(s, x);
}

static void
sender_release(struct egw_xfer_sender *s, struct sender_room *x)
{
	xfer_core_release(&s->core, x->room, 0, (uint32_t)(x - s->rooms));
}

/* ---- payload ----------------------------------------------------------- */

/* Source block holding token `t` (block aligned), and how many blocks
 * follow it contiguously in the same source run. */
static uint32_t
sender_src_block(const struct sender_room *x, uint32_t bt, uint32_t t, uint32_t *len)
{
	uint32_t b = t / bt;

	for (uint32_t i = 0; i < x->nsrc; i++) {
		if (b < x->src[i].count) {
			*len = x->src[i].count - b;
			return x->src[i].start + b;
		}
		b -= x->src[i].count;
	}
	*len = 0;
	return 0; /* unreachable: input covers the total */
}

static void
sender_post(struct egw_xfer_sender *s, struct sender_room *x, uint16_t r,
	struct sender_window *w)
{
	const struct egw_pool_geom *g = &s->core.conf.geom;
	struct sender_rank *rk = &x->rank[r];
	uint32_t bt = g->block_tokens, n = 0, moved = 0, todo;
	struct egw_act a = { .type = EGW_ACT_POST_WRITES, .peer = rk->peer,
			     .room = x->room, .rank = r };
	uint32_t di = 0, dused = 0;

	todo = rk->dummy ? 0 : x->total - w->off;
	if (todo > w->alloc)
		todo = w->alloc;
	/* walk source and destination runs together, cutting a segment
	 * wherever either side stops being contiguous */
	while (moved < todo) {
		uint32_t slen, sblk = sender_src_block(x, bt, w->off + moved, &slen);
		uint32_t dlen = w->runs[di].count - dused;
		uint32_t dblk = w->runs[di].start + dused;
		uint32_t blocks = slen < dlen ? slen : dlen;
		uint32_t tokens = todo - moved;

		if (tokens > blocks * bt)
			tokens = blocks * bt;
		blocks = (tokens + bt - 1) / bt;
		for (int k = EGW_KIND_EMB; k < EGW_KIND_AUX; k++) {
			size_t unit =
				egw_pool_geom_unit_bytes(g, (enum egw_kind)k);

			if (unit == 0)
				continue;
			s->scratch[n++] = (struct egw_write){
				.kind = (uint32_t)k, .src_block = sblk,
				.dst_block = dblk, .tokens = tokens,
				.rkey = w->rkeys[k],
				.bytes = (uint64_t)tokens * unit };
		}
		moved += tokens;
		dused += blocks;
		if (dused == w->runs[di].count) {
			di++;
			dused = 0;
		}
	}
	if (w->off == 0) {
		/* the aux record rides with the first window only */
		s->scratch[n++] = (struct egw_write){
			.kind = EGW_KIND_AUX, .src_block = x->src[0].start,
			.dst_block = w->runs[0].start, .tokens = 0,
			.rkey = w->rkeys[EGW_KIND_AUX], .bytes = g->aux_bytes };
	}
	for (uint32_t i = 0; i < n; i++)
		s->core.stats.bytes += s->scratch[i].bytes;
	s->core.stats.writes += n;
	s->core.stats.write_batches++;
	w->posted = true;
	x->inflight++;
	rk->inflight++;
	a.writes = s->scratch;
	a.nwrites = n;
	a.cookie = cookie_make(s, (uint32_t)(x - s->rooms), r, w->seq);
	xfer_core_emit(&s->core, &a);
}

static void
sender_pump(struct egw_xfer_sender *s, struct sender_room *x, uint16_t r)
{
	struct sender_rank *rk = &x->rank[r];

	if (x->state != EGW_ST_TRANSFERRING || rk->yield_pending)
		return;
	for (uint8_t i = 0; i < rk->count; i++) {
		struct sender_window *w = &rk->win[(rk->head + i) % EGW_XFER_PIPE];

		if (!w->posted)
			sender_post(s, x, r, w);
	}
}

static void
sender_start(struct egw_xfer_sender *s, struct sender_room *x, uint64_t now)
{
	x->state = EGW_ST_TRANSFERRING;
	x->started = true;
	x->progress_at = now;
	/* announce the total to every rank now: they allocate and resume
	 * while the first windows are in flight */
	sender_status_all(s, x);
	for (uint16_t r = 0; r < x->nranks; r++)
		sender_pump(s, x, r);
}

/* ---- ABORT ACK and restarts ---------------------------------------------- */

static void
sender_send_ack(struct egw_xfer_sender *s, uint32_t peer, uint64_t room,
		uint16_t rank, uint16_t nranks, uint16_t ranks, uint16_t err,
		uint16_t abort_id)
{
	struct egw_msg m = { .type = EGW_MSG_ABORT,
			     .flags = EGW_MSGF_ACK,
			     .room = room,
			     .rank = rank,
			     .nranks = nranks,
			     .ranks = ranks,
			     .error = err,
			     .abort_id = abort_id };

	s->core.stats.abort_acks++;
	xfer_core_send(&s->core, peer, &m);
}

/* A rank's last write completed: answer an ABORT waiting for that, and
 * reset a rank whose receiver gave its blocks back. */
static void
sender_rank_drained(struct egw_xfer_sender *s, struct sender_room *x,
		    uint16_t r, uint64_t now)
{
	struct sender_rank *rk = &x->rank[r];

	if (rk->inflight > 0)
		return;
	if (rk->yield_pending)
		rk->ack_due = true;
	if (rk->yield_pending && !sender_final(x)) {
		/* the rank starts again from token 0 with a new INIT; the
		 * source data stays until the room succeeds */
		if (rk->complete) {
			rk->complete = false;
			x->ncomplete -= popcount16(rk->group);
		}
		/* its followers wait for the new INIT with it */
		for (uint16_t f = 0; f < x->nranks; f++)
			if (x->rank[f].follower && x->rank[f].leader == r)
				x->rank[f].follower = false;
		x->ninit -= popcount16(rk->group);
		rk->group = 0;
		rk->wire_ranks = 0;
		rk->inited = false;
		rk->dummy = false;
		rk->accepted = 0;
		rk->landed = 0;
		rk->head = 0;
		rk->count = 0;
		rk->yield_pending = false;
		rk->yielded = true;
		x->nyielded++;
		x->yield_deadline = now + s->core.conf.timers.admit_ns;
	}
	rk->yield_pending = false;
	if (rk->ack_due) {
		rk->ack_due = false;
		sender_send_ack(s, rk->ack_peer, x->room, r, x->nranks,
				rk->ack_ranks, rk->ack_err, rk->ack_abort_id);
	}
}

/* A request of a rank sent before the ABORT that restarted it. */
static bool
sender_stale(const struct sender_rank *rk, const struct egw_msg *m)
{
	return rk->yield_seq != 0 && m->seq <= rk->yield_seq;
}

/*
 * ABORT from a rank's receiver. error BUSY on a live room: the receiver
 * gives its blocks back to restart the rank later (doc/xfer.md,
 * "Admission"); any other: the room fails. Either way the answer is an
 * ABORT ACK, sent once none of the room's writes to that rank is in
 * flight.
 */
static int
sender_on_abort(struct egw_xfer_sender *s, struct sender_room *x, uint32_t peer,
		const struct egw_msg *m, uint64_t now)
{
	struct sender_rank *rk;

	/* a rank that gave up before its INIT got through (e.g. no memory
	 * for its first window) may abort too; once a rank is bound to a
	 * peer, only that peer speaks for it */
	if (m->rank >= x->nranks ||
	    (x->rank[m->rank].inited && x->rank[m->rank].peer != peer) ||
	    (x->rank[m->rank].follower && x->rank[m->rank].peer != peer))
		return xfer_core_reject(&s->core, EGW_E_BAD_RANK);
	rk = &x->rank[m->rank];
	if (m->error == EGW_E_BUSY && m->seq != 0 &&
	    (m->seq <= rk->yield_seq || m->seq < rk->init_seq)) {
		/* a copy of a restart already done, or one from before the
		 * INIT of the rank's current run: not this run's */
		s->core.stats.duplicates++;
		return 0;
	}
	if (m->error == EGW_E_BUSY && x->state == EGW_ST_SUCCESS) {
		/* its data is all there: no restart, the Success instead */
		sender_status(s, x, m->rank);
		return 0;
	}
	if (rk->yield_seq < m->seq)
		rk->yield_seq = m->seq;
	rk->ack_peer = peer;
	rk->ack_ranks = m->ranks;
	rk->ack_err = m->error;
	rk->ack_abort_id = m->abort_id;
	if (m->error == EGW_E_BUSY && !sender_final(x)) {
		if (!rk->inited) {
			/* nothing of it to reset, nothing in flight */
			sender_send_ack(s, peer, x->room, m->rank, x->nranks,
					m->ranks, m->error, m->abort_id);
			return 0;
		}
		if (!rk->yield_pending)
			s->core.stats.yields++;
		rk->yield_pending = true;
		sender_rank_drained(s, x, m->rank, now);
		return 0;
	}
	/* the room fails for all ranks */
	if (!sender_final(x)) {
		bool drained = rk->inflight == 0;

		rk->ack_due = !drained;
		sender_finish(s, x, EGW_E_ABORTED, now);
		if (drained) /* x may be released: answer from the message */
			sender_send_ack(s, peer, m->room, m->rank, m->nranks,
					m->ranks, m->error, m->abort_id);
		return 0;
	}
	rk->ack_due = true;
	sender_rank_drained(s, x, m->rank, now);
	return 0;
}

/* ---- API --------------------------------------------------------------- */

int
egw_xfer_sender_open(struct egw_xfer_sender *s, uint64_t room, uint16_t nranks,
		uint64_t now)
{
	struct sender_room *x;
	struct egw_run *src;
	int32_t idx;

	if (s == NULL)
		return -EINVAL;
	if (nranks == 0 || nranks > EGW_XFER_MAX_RANKS)
		return xfer_core_reject(&s->core, EGW_E_BAD_RANK);
	idx = xfer_core_take(&s->core, room, 0);
	if (idx < 0)
		return xfer_core_reject(&s->core, (enum egw_err)-idx);
	x = &s->rooms[idx];
	src = x->src;
	/* only what this room can reach: ranks past nranks are refused, and
	 * a window is cleared when it is accepted (the full room is ~9 KiB) */
	memset(x, 0, offsetof(struct sender_room, rank));
	for (uint16_t r = 0; r < nranks; r++)
		memset(&x->rank[r], 0, offsetof(struct sender_rank, win));
	x->src = src;
	x->room = room;
	x->nranks = nranks;
	x->state = EGW_ST_BOOTSTRAPPING;
	/* a rank's INIT may wait for admission on its receiver up to the
	 * receiver's memory deadline */
	x->deadline = now + (s->core.conf.timers.admit_ns >
				     s->core.conf.timers.bootstrap_ns
			     ? s->core.conf.timers.admit_ns
			     : s->core.conf.timers.bootstrap_ns);
	x->progress_at = now;
	return 0;
}

int
egw_xfer_sender_input(struct egw_xfer_sender *s, uint64_t room, uint32_t total,
		 const struct egw_run *runs, uint32_t nruns, uint64_t now)
{
	struct sender_room *x = sender_find(s, room);
	uint64_t blocks = 0;
	uint32_t nb;

	if (x == NULL)
		return xfer_core_reject(&s->core, EGW_E_UNKNOWN_ROOM);
	if (x->have_input || sender_final(x))
		return xfer_core_reject(&s->core, EGW_E_STATE);
	if (total == 0 || total > EGW_XFER_MAX_TOKENS || nruns == 0 ||
	    nruns > s->core.conf.max_runs_per_room)
		return xfer_core_reject(&s->core, EGW_E_TOO_LARGE);
	nb = s->core.conf.geom.capacity_tokens / s->core.conf.geom.block_tokens;
	for (uint32_t i = 0; i < nruns; i++) {
		if (runs[i].count == 0 || runs[i].start >= nb ||
		    runs[i].count > nb - runs[i].start)
			return xfer_core_reject(&s->core, EGW_E_BAD_BLOCKS);
		blocks += runs[i].count;
	}
	if (blocks < egw_pool_geom_blocks_for(&s->core.conf.geom, total))
		return xfer_core_reject(&s->core, EGW_E_BAD_BLOCKS);
	memcpy(x->src, runs, nruns * sizeof(*runs));
	x->nsrc = nruns;
	x->total = total;
	x->have_input = true;
	if (x->state == EGW_ST_WAITING_FOR_INPUT)
		sender_start(s, x, now);
	return 0;
}

static void
sender_rank_complete(struct egw_xfer_sender *s, struct sender_room *x,
		     uint16_t r, uint64_t now)
{
	x->rank[r].complete = true;
	x->ncomplete += popcount16(x->rank[r].group);
	if (x->ncomplete == x->nranks)
		sender_finish(s, x, EGW_E_OK, now);
	else
		sender_status(s, x, r);
}

/* Validate an INIT/RESUME window; returns its block count or -egw_err. */
static int64_t
sender_check_window(struct egw_xfer_sender *s, uint32_t peer,
		    const struct egw_msg *m)
{
	uint32_t bt = s->core.conf.geom.block_tokens;
	int64_t blocks;

	if (m->block_tokens != bt)
		return -EGW_E_BLOCK_TOKENS;
	if (m->nruns > EGW_XFER_MAX_RUNS)
		return -EGW_E_TOO_LARGE;
	blocks = xfer_core_check_runs(m->runs, m->nruns,
				 s->core.peers[peer].pool_blocks);
	if (blocks < 0)
		return blocks;
	if ((uint64_t)blocks * bt != m->alloc_tokens)
		return -EGW_E_ALLOC_MISMATCH;
	return blocks;
}

static bool
sender_overlaps_ring(const struct sender_rank *rk, const struct egw_msg *m)
{
	for (uint8_t i = 0; i < rk->count; i++) {
		const struct sender_window *w =
			&rk->win[(rk->head + i) % EGW_XFER_PIPE];

		for (uint16_t a = 0; a < w->nruns; a++)
			for (uint16_t b = 0; b < m->nruns; b++)
				if (w->runs[a].start <
					    m->runs[b].start + m->runs[b].count &&
				    m->runs[b].start <
					    w->runs[a].start + w->runs[a].count)
					return true;
	}
	return false;
}

static void
sender_accept(struct sender_rank *rk, const struct egw_msg *m)
{
	struct sender_window *w =
		&rk->win[(rk->head + rk->count) % EGW_XFER_PIPE];

	memset(w, 0, sizeof(*w));
	w->off = m->offset;
	w->alloc = m->alloc_tokens;
	memcpy(w->rkeys, m->rkeys, sizeof(w->rkeys));
	w->seq = rk->nseq++;
	w->nruns = m->nruns;
	memcpy(w->runs, m->runs, m->nruns * sizeof(m->runs[0]));
	rk->count++;
	rk->accepted = m->offset + m->alloc_tokens;
}

/* The set of ranks an INIT speaks for: its ranks, or its rank alone. */
static uint16_t
group_of(const struct egw_msg *m)
{
	return m->ranks != 0 ? m->ranks : (uint16_t)(1u << m->rank);
}

/* The set is the room's, starts at the rank, and an aux-only INIT speaks
 * for its rank alone (lib/proto refuses the others already; a caller
 * that builds messages itself meets the same rule). */
static bool
group_ok(const struct egw_msg *m)
{
	uint16_t g = group_of(m);

	return m->rank < m->nranks && m->nranks <= EGW_XFER_MAX_RANKS &&
	       (g >> m->nranks) == 0 &&
	       (g & ((1u << (m->rank + 1)) - 1)) == (1u << m->rank) &&
	       (!(m->flags & EGW_MSGF_DUMMY) || g == (1u << m->rank));
}

static int
sender_on_init(struct egw_xfer_sender *s, struct sender_room *x, uint32_t peer,
	   const struct egw_msg *m, uint64_t now)
{
	struct sender_rank *rk;
	uint16_t group;
	int64_t blocks;

	if (m->nranks != x->nranks || m->rank >= x->nranks || !group_ok(m))
		return sender_error(s, peer, m, EGW_E_BAD_RANK);
	rk = &x->rank[m->rank];
	group = group_of(m);
	if (sender_stale(rk, m) || rk->yield_pending) {
		s->core.stats.duplicates++; /* from before a restart */
		return 0;
	}
	if (rk->inited) {
		if (rk->peer != peer)
			return sender_error(s, peer, m, EGW_E_BAD_RANK);
		if (rk->group != group) /* another set for the same rank */
			return sender_error(s, peer, m, EGW_E_STATE);
		s->core.stats.duplicates++;
		sender_status(s, x, m->rank);
		return 0;
	}
	if (sender_final(x))
		return sender_error(s, peer, m, EGW_E_STATE);
	if (m->offset != 0)
		return sender_error(s, peer, m, EGW_E_STATE);
	/* every rank of the set is served once: one already bound (by its
	 * own INIT or another leader's) makes this INIT a conflict */
	for (uint16_t f = 0; f < x->nranks; f++)
		if ((group >> f & 1) &&
		    (x->rank[f].inited || x->rank[f].follower))
			return sender_error(s, peer, m, EGW_E_STATE);
	blocks = sender_check_window(s, peer, m);
	if (blocks < 0)
		return sender_error(s, peer, m, (enum egw_err)-blocks);
	rk->inited = true;
	rk->peer = peer;
	rk->group = group;
	rk->wire_ranks = m->ranks;
	for (uint16_t f = 0; f < x->nranks; f++) {
		if (f == m->rank || !(group >> f & 1))
			continue;
		x->rank[f].follower = true;
		x->rank[f].leader = (uint8_t)m->rank;
		x->rank[f].peer = peer;
	}
	rk->init_seq = m->seq;
	rk->dummy = (m->flags & EGW_MSGF_DUMMY) != 0;
	sender_accept(rk, m);
	s->core.stats.windows++;
	x->progress_at = now;
	if (rk->yielded) {
		/* a restarted rank is back */
		rk->yielded = false;
		x->nyielded--;
	}
	x->ninit += popcount16(group);
	if (x->ninit == x->nranks && x->state < EGW_ST_TRANSFERRING) {
		if (x->have_input) {
			sender_start(s, x, now); /* answers every rank */
			return 0;
		}
		x->state = EGW_ST_WAITING_FOR_INPUT;
		x->deadline = now + s->core.conf.timers.input_ns;
	} else if (x->state == EGW_ST_TRANSFERRING) {
		sender_pump(s, x, m->rank); /* a restarted rank's data flows */
	}
	sender_status(s, x, m->rank);
	return 0;
}

static int
sender_on_resume(struct egw_xfer_sender *s, struct sender_room *x,
		 uint32_t peer, const struct egw_msg *m, uint64_t now)
{
	struct sender_rank *rk;
	int64_t blocks;

	if (m->rank < x->nranks && sender_stale(&x->rank[m->rank], m)) {
		s->core.stats.duplicates++; /* from before a restart */
		return 0;
	}
	if (m->rank >= x->nranks || !x->rank[m->rank].inited ||
	    x->rank[m->rank].peer != peer || m->nranks != x->nranks)
		return sender_error(s, peer, m, EGW_E_BAD_RANK);
	rk = &x->rank[m->rank];
	if (rk->yield_pending) {
		s->core.stats.duplicates++; /* its receiver lets go */
		return 0;
	}
	if (m->offset < rk->accepted || sender_final(x)) {
		/* a duplicate (or late) request: same answer, no work */
		s->core.stats.duplicates++;
		sender_status(s, x, m->rank);
		return 0;
	}
	if (x->state != EGW_ST_TRANSFERRING || rk->dummy)
		return sender_error(s, peer, m, EGW_E_STATE);
	if (m->offset >= x->total)
		return sender_error(s, peer, m, EGW_E_BEYOND_TOTAL);
	if (m->offset > rk->accepted) {
		/* an earlier RESUME is missing; the receiver resends both */
		s->core.stats.reordered++;
		sender_status(s, x, m->rank);
		return 0;
	}
	blocks = sender_check_window(s, peer, m);
	if (blocks < 0)
		return sender_error(s, peer, m, (enum egw_err)-blocks);
	if (sender_overlaps_ring(rk, m))
		return sender_error(s, peer, m, EGW_E_BAD_BLOCKS);
	if (rk->count == EGW_XFER_PIPE)
		return sender_error(s, peer, m, EGW_E_BUSY);
	sender_accept(rk, m);
	s->core.stats.windows++;
	s->core.stats.resumes++;
	x->progress_at = now;
	sender_pump(s, x, m->rank);
	sender_status(s, x, m->rank);
	return 0;
}

int
egw_xfer_sender_check_init(struct egw_xfer_sender *s, uint32_t peer,
		      const struct egw_msg *m)
{
	int64_t blocks;

	if (s == NULL || m == NULL)
		return -EINVAL;
	if (peer >= s->core.conf.max_peers || !s->core.peers[peer].used)
		return -EGW_E_UNKNOWN_PEER;
	if (m->type != EGW_MSG_INIT || m->offset != 0)
		return -EGW_E_STATE;
	if (m->nranks == 0 || m->nranks > EGW_XFER_MAX_RANKS ||
	    m->rank >= m->nranks || !group_ok(m))
		return -EGW_E_BAD_RANK;
	blocks = sender_check_window(s, peer, m);
	return blocks < 0 ? (int)blocks : 0;
}

int
egw_xfer_sender_refuse(struct egw_xfer_sender *s, uint32_t peer,
		       const struct egw_msg *m, enum egw_err e, uint64_t now)
{
	if (s == NULL || m == NULL || egw_err_to_wire(e) == UINT16_MAX ||
	    e == EGW_E_OK)
		return -EINVAL;
	if (xfer_core_peer_heard(&s->core, peer, now) != 0)
		return -EGW_E_UNKNOWN_PEER;
	return sender_error(s, peer, m, e);
}

int
egw_xfer_sender_on_msg(struct egw_xfer_sender *s, uint32_t peer,
		       const struct egw_msg *m, uint64_t now)
{
	struct sender_room *x;
	int rc;

	if (s == NULL || m == NULL)
		return -EINVAL;
	rc = xfer_core_peer_heard(&s->core, peer, now);
	if (rc != 0)
		return rc;
	if (m->type == EGW_MSG_HEARTBEAT)
		return 0;
	if (m->type != EGW_MSG_INIT && m->type != EGW_MSG_RESUME &&
	    m->type != EGW_MSG_STATUS && m->type != EGW_MSG_ABORT)
		return xfer_core_reject(&s->core, EGW_E_STATE);
	if (m->type == EGW_MSG_ABORT && (m->flags & EGW_MSGF_ACK))
		return xfer_core_reject(&s->core, EGW_E_STATE); /* not ours */
	x = sender_find(s, m->room);
	if (x == NULL) {
		const struct sender_tomb *t = tomb_find(s, m->room, now);

		if (m->type == EGW_MSG_ABORT) {
			/* a rank that wants to restart a room that succeeded
			 * has its data: it hears the Success instead */
			if (t != NULL && t->state == EGW_ST_SUCCESS &&
			    m->error == EGW_E_BUSY)
				return tomb_answer(s, t, peer, m);
			/* a room that is gone has no write in flight */
			sender_send_ack(s, peer, m->room, m->rank, m->nranks,
					m->ranks, m->error, m->abort_id);
			return t != NULL ? 0 : xfer_core_reject(&s->core,
							   EGW_E_UNKNOWN_ROOM);
		}
		if (t != NULL)
			return tomb_answer(s, t, peer, m);
		return sender_error(s, peer, m, EGW_E_UNKNOWN_ROOM);
	}
	switch (m->type) {
	case EGW_MSG_INIT:
		return sender_on_init(s, x, peer, m, now);
	case EGW_MSG_RESUME:
		return sender_on_resume(s, x, peer, m, now);
	case EGW_MSG_STATUS:
		if (m->rank < x->nranks && sender_stale(&x->rank[m->rank], m)) {
			s->core.stats.duplicates++; /* from before a restart */
			return 0;
		}
		if (m->rank >= x->nranks || !x->rank[m->rank].inited ||
		    x->rank[m->rank].peer != peer)
			return sender_error(s, peer, m, EGW_E_BAD_RANK);
		sender_status(s, x, m->rank);
		return 0;
	default:
		return sender_on_abort(s, x, peer, m, now);
	}
}

int
egw_xfer_sender_writes_done(struct egw_xfer_sender *s, uint64_t cookie, bool ok,
		       uint64_t now)
{
	uint32_t idx = (uint32_t)(cookie >> 24) & 0xffffffu;
	uint32_t r = (uint32_t)(cookie >> 20) & 0xfu;
	uint32_t seq = (uint32_t)cookie & 0xfffffu;
	struct sender_room *x;
	struct sender_rank *rk;
	struct sender_window *w = NULL;

	if (s == NULL || idx >= s->core.conf.max_rooms ||
	    (uint16_t)(cookie >> 48) != s->core.gen[idx])
		return -EGW_E_UNKNOWN_ROOM; /* stale completion */
	x = &s->rooms[idx];
	if (r >= x->nranks)
		return -EGW_E_BAD_RANK;
	rk = &x->rank[r];
	for (uint8_t i = 0; i < rk->count; i++) {
		struct sender_window *c = &rk->win[(rk->head + i) % EGW_XFER_PIPE];

		if ((c->seq & 0xfffffu) == seq && c->posted && !c->done)
			w = c;
	}
	if (w == NULL)
		return -EGW_E_STATE; /* duplicate completion */
	w->done = true;
	x->inflight--;
	rk->inflight--;
	if (sender_final(x)) {
		sender_rank_drained(s, x, (uint16_t)r, now);
		sender_free_src(s, x); /* the last in-flight write releases src */
		if (x->inflight == 0)
			sender_release(s, x);
		return 0;
	}
	if (!ok) {
		sender_finish(s, x, EGW_E_TRANSPORT, now);
		return 0;
	}
	if (rk->yield_pending) {
		/* its receiver gave the blocks back: nothing lands any more */
		sender_rank_drained(s, x, (uint16_t)r, now);
		return 0;
	}
	x->progress_at = now;
	while (rk->count > 0 && rk->win[rk->head].done) {
		struct sender_window *h = &rk->win[rk->head];
		uint32_t end = h->off + h->alloc;

		rk->landed = rk->dummy ? x->total
				       : (end < x->total ? end : x->total);
		rk->head = (uint8_t)((rk->head + 1) % EGW_XFER_PIPE);
		rk->count--;
	}
	if (rk->landed == x->total) {
		sender_rank_complete(s, x, (uint16_t)r, now);
		return 0;
	}
	if (rk->count == 0)
		s->core.stats.idle_waits++; /* drained: a round trip with no data */
	sender_status(s, x, (uint16_t)r);
	return 0;
}

int
egw_xfer_sender_abort(struct egw_xfer_sender *s, uint64_t room, uint64_t now)
{
	struct sender_room *x = sender_find(s, room);

	if (x == NULL)
		return -EGW_E_UNKNOWN_ROOM;
	if (!sender_final(x))
		sender_finish(s, x, EGW_E_ABORTED, now);
	return 0;
}

static void
sender_tick_room(struct egw_xfer_sender *s, struct sender_room *x, uint64_t now)
{
	if (sender_final(x))
		return; /* waits for its in-flight writes (round deadline
			 * already passed or the room succeeded) */
	if (x->state == EGW_ST_BOOTSTRAPPING && now >= x->deadline)
		sender_finish(s, x, EGW_E_TIMEOUT_BOOTSTRAP, now);
	else if (x->state == EGW_ST_WAITING_FOR_INPUT && now >= x->deadline)
		sender_finish(s, x, EGW_E_TIMEOUT_INPUT, now);
	else if (x->state == EGW_ST_TRANSFERRING && x->nyielded > 0) {
		/* a restarted rank waits for memory on its receiver: the
		 * round timer waits with it, up to the restart's deadline */
		if (now >= x->yield_deadline)
			sender_finish(s, x, EGW_E_TIMEOUT_BOOTSTRAP, now);
	} else if (x->state == EGW_ST_TRANSFERRING &&
		   now - x->progress_at >= s->core.conf.timers.round_ns)
		sender_finish(s, x, EGW_E_TIMEOUT_ROUND, now);
}

static void
sender_on_dead(void *eng, uint32_t peer, uint64_t now)
{
	struct egw_xfer_sender *s = eng;

	for (uint32_t i = s->core.nactive; i > 0; i--) {
		struct sender_room *x = &s->rooms[s->core.active[i - 1]];

		if (sender_final(x))
			continue;
		for (uint16_t r = 0; r < x->nranks; r++) {
			if (x->rank[r].inited && x->rank[r].peer == peer) {
				sender_finish(s, x, EGW_E_PEER_DEAD, now);
				break;
			}
		}
	}
}

void
egw_xfer_sender_peer_dead(struct egw_xfer_sender *s, uint32_t peer,
			  uint64_t now)
{
	xfer_core_peer_dead(&s->core, peer, now, false, sender_on_dead, s);
}

static bool
sender_room_of(const struct sender_room *x, uint32_t peer)
{
	for (uint16_t r = 0; r < x->nranks; r++)
		if (x->rank[r].inited && x->rank[r].peer == peer)
			return true;
	return false;
}

void
egw_xfer_sender_peer_remove(struct egw_xfer_sender *s, uint32_t peer,
			    enum egw_err e, uint64_t now)
{
	for (uint32_t i = s->core.nactive; i > 0; i--) {
		struct sender_room *x = &s->rooms[s->core.active[i - 1]];

		if (!sender_final(x) && sender_room_of(x, peer))
			sender_finish(s, x, e, now);
	}
}

uint32_t
egw_xfer_sender_peer_rooms(const struct egw_xfer_sender *s, uint32_t peer)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->core.nactive; i++)
		n += sender_room_of(&s->rooms[s->core.active[i]], peer);
	return n;
}

void
egw_xfer_sender_peer_del(struct egw_xfer_sender *s, uint32_t peer)
{
	xfer_core_peer_del(&s->core, peer);
}

void
egw_xfer_sender_tick(struct egw_xfer_sender *s, uint64_t now)
{
	tomb_expire(s, now, false);
	for (uint32_t i = s->core.nactive; i > 0; i--)
		sender_tick_room(s, &s->rooms[s->core.active[i - 1]], now);
	xfer_core_peer_tick(&s->core, now, sender_on_dead, s);
}

uint64_t
egw_xfer_sender_next_deadline(const struct egw_xfer_sender *s, uint64_t now)
{
	uint64_t due = s->core.peers_due, e;
	const struct sender_tomb *t;

	/* a room in flight has timers of its own: the caller's pace */
	if (s->core.nactive > 0)
		return now;
	/* tombstones expire oldest first (tomb_expire stops at the head);
	 * one replaced since leaves the order at the next tick */
	if (s->tomb_count > 0) {
		t = &s->tomb_ring[s->tomb_head];
		e = t->live ? t->expires : now;
		if (e < due)
			due = e;
	}
	return due;
}

void
egw_xfer_sender_abort_all(struct egw_xfer_sender *s, uint64_t now)
{
	for (uint32_t i = s->core.nactive; i > 0; i--) {
		struct sender_room *x = &s->rooms[s->core.active[i - 1]];

		if (!sender_final(x))
			sender_finish(s, x, EGW_E_ABORTED, now);
	}
}
