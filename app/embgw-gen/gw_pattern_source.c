/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The built-in room source, for the demo, the tests and load generation:
 *  - encode side: a producer that answers any INIT for an unknown room by
 *    synthesising that room's output - the length is the room id's low 32
 *    bits, the bytes lib/pattern's function of (room id, token);
 *  - language side: a driver that opens rooms at a given concurrency (or
 *    rate) and verifies every byte delivered against the same pattern.
 * Both sides derive everything from the room id, so they share no state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egw_pattern.h"
#include "gw_attach.h"
#include "gw_pattern_source.h"

#define MAX_SRC_RUNS 512
#define PRODUCE_QUEUE 256 /* rooms waiting for source memory */

struct room_rec {
	uint64_t room;
	uint64_t opened_at;
	uint64_t waited;          /* admission wait, longest of its ranks */
	uint16_t done, failed;
	bool active;
};

struct pattern_source {
	struct gw_room_source base;  /* first: the seam's view */
	struct gw_pattern_opts o;
	uint64_t run_id;
	uint64_t start_at;
	uint64_t ready_wait_until; /* the first room waits for REGISTER until
				    * then at most */
	uint32_t peer;            /* the one peer rooms go to ... */
	bool all_peers;           /* ... or all of them in turn */
	uint32_t opened, active, finished;
	struct room_rec *recs;
	uint64_t *lat;
	uint64_t *admit_wait;     /* admission waits, beside lat */
	uint32_t nlat;
	uint64_t bytes_verified, bad_bytes;
	uint32_t ok, failed;
	uint32_t last_failed;     /* 1 + index of the last room opened that
				   * failed (0: none) */
	uint64_t fail_reason[EGW_E_COUNT]; /* by egw_err_to_wire() */
	uint64_t first_open, last_done;
	uint64_t slot_wait_since; /* the next room waits for a slot (0: not) */
	uint64_t slot_waits;      /* rooms that waited for one */
	bool slot_said;           /* the wait was logged */
	/* encode side */
	uint64_t produced, produce_refused, tx_ok, tx_failed;
	uint64_t produce_busy, produce_queued;
	uint32_t produce_queue_max;
	/* a pool cut per attached client: the producer's segment 0,
	 * [seg_lo, seg_hi) (seg_hi 0: the whole pool) */
	uint32_t seg_lo, seg_hi;
	uint64_t wait[PRODUCE_QUEUE];   /* rooms waiting for source blocks */
	uint32_t wait_head, nwait;
};

static struct pattern_source *
pattern_of(struct gw_room_source *s)
{
	return (struct pattern_source *)s;
}

/* ---- encode side: producer -------------------------------------------- */

/*
 * Backpressure: a room whose source blocks the pool cannot hold now is
 * opened all the same (its ranks' INITs are accepted, the room waits for
 * input under its WaitingForInput deadline) and queued here; poll() feeds
 * the queue in order as blocks come free. A full queue answers BUSY,
 * which the receiver retries: nothing is dropped silently.
 */
static int
produce_feed(struct pattern_source *ps, uint64_t room, uint64_t now)
{
	struct gw_room_source *s = &ps->base;
	struct egw_node *node = s->id->node;
	struct egw_run runs[MAX_SRC_RUNS];
	uint32_t total = (uint32_t)room;
	int n = ps->seg_hi != 0 ?
			egw_pool_alloc_range_tokens(s->id->pool, room, total,
						    ps->seg_lo, ps->seg_hi,
						    runs, MAX_SRC_RUNS) :
			egw_node_alloc_src(node, room, total, runs,
					   MAX_SRC_RUNS);

	if (n < 0)
		return n;
	if (egw_pattern_fill(s->id->pool, room, total, runs, (uint32_t)n) != 0 ||
	    egw_node_input(node, room, total, runs, (uint32_t)n, now) != 0) {
		egw_node_release(node, room, runs, (uint32_t)n);
		ps->produce_refused++;
		return 0; /* the room fails by its own deadline */
	}
	ps->produced++;
	return 0;
}

static int
produce(struct gw_room_source *s, uint64_t room, uint16_t nranks, uint64_t now)
{
	struct pattern_source *ps = pattern_of(s);
	struct egw_node *node = s->id->node;
	const struct egw_pool_geom *g = egw_pool_geom(s->id->pool);
	uint32_t total = (uint32_t)room;
	int rc;

	if (!ps->o.produce)
		return -EGW_E_UNKNOWN_ROOM;
	/* a room of no tokens: every window lies at or past its total */
	if (total == 0) {
		ps->produce_refused++;
		return -EGW_E_BEYOND_TOTAL;
	}
	if (total > EGW_XFER_MAX_TOKENS ||
	    egw_pool_geom_blocks_for(g, total) >
		    (ps->seg_hi != 0 ? ps->seg_hi - ps->seg_lo :
				       egw_pool_nblocks(s->id->pool))) {
		ps->produce_refused++;
		return -EGW_E_TOO_LARGE;
	}
	if (ps->nwait == PRODUCE_QUEUE) {
		/* the rooms before it wait for memory: it would wait too */
		ps->produce_busy++;
		return -EGW_E_BUSY;
	}
	rc = egw_node_sender_open(node, room, nranks, now);
	if (rc != 0) {
		ps->produce_refused++;
		return rc == -EGW_E_NO_SLOT ? rc : -EGW_E_BUSY;
	}
	/* fed in order: a room does not overtake those waiting before it */
	if (ps->nwait == 0 && produce_feed(ps, room, now) == 0)
		return 0;
	ps->wait[(ps->wait_head + ps->nwait++) % PRODUCE_QUEUE] = room;
	ps->produce_queued++;
	if (ps->nwait > ps->produce_queue_max)
		ps->produce_queue_max = ps->nwait;
	return 0;
}

/* Feed the rooms waiting for source memory, oldest first. */
static uint32_t
produce_poll(struct pattern_source *ps, uint64_t now)
{
	struct egw_node *node = ps->base.id->node;
	uint32_t fed = 0;

	while (ps->nwait > 0) {
		uint64_t room = ps->wait[ps->wait_head];
		int st = egw_xfer_sender_state(egw_node_sender(node), room);

		/* a room that ended meanwhile (its deadline, an abort) needs
		 * nothing any more */
		if (st >= EGW_ST_BOOTSTRAPPING && st < EGW_ST_TRANSFERRING &&
		    produce_feed(ps, room, now) != 0)
			break;
		ps->wait_head = (ps->wait_head + 1) % PRODUCE_QUEUE;
		ps->nwait--;
		fed++;
	}
	return fed;
}

/* ---- language side: driver and verifier ------------------------------- */

static struct room_rec *
rec_of(struct pattern_source *ps, uint64_t room)
{
	uint32_t i = (uint32_t)((room >> 32) & GW_ROOM_INDEX_MASK);

	if ((room >> 56) != (ps->run_id & 0xff) || i >= ps->o.drive ||
	    ps->recs[i].room != room)
		return NULL;
	return &ps->recs[i];
}

/* Mismatches against the pattern; the built-in producer's length is the
 * room id's low 32 bits. */
static uint64_t
verify(const struct egw_pool *pool, const struct egw_act *a)
{
	return (a->tokens != (uint32_t)a->room) +
	       egw_pattern_check(pool, a->room, a->tokens, a->runs, a->nruns,
				 a->aux_block, a->dummy);
}

static void
room_finished(struct pattern_source *ps, struct room_rec *r, uint64_t now)
{
	r->active = false;
	ps->active--;
	ps->finished++;
	ps->last_done = now;
	if (r->failed == 0) {
		ps->ok++;
		ps->admit_wait[ps->nlat] = r->waited;
		ps->lat[ps->nlat++] = now - r->opened_at;
	} else {
		uint32_t i = (uint32_t)(r - ps->recs);

		ps->failed++;
		if (i + 1 > ps->last_failed)
			ps->last_failed = i + 1;
	}
}

static bool
deliver(struct gw_room_source *s, const struct egw_act *a, uint64_t now)
{
	struct pattern_source *ps = pattern_of(s);
	struct egw_pool *pool = s->id->pool;
	struct room_rec *r = rec_of(ps, a->room);
	uint64_t bad;

	if (r == NULL)
		return false;
	bad = verify(pool, a);
	ps->bad_bytes += bad;
	if (!bad)
		ps->bytes_verified += gw_delivered_bytes(pool, a);
	egw_node_release(s->id->node, a->room, a->runs, a->nruns);
	if (!r->active)
		return true;
	if (a->waited_ns > r->waited)
		r->waited = a->waited_ns;
	if (bad)
		r->failed++;
	else
		r->done++;
	if (r->done + r->failed == ps->o.ranks)
		room_finished(ps, r, now);
	return true;
}

static bool
done(struct gw_room_source *s, uint64_t room, uint16_t rank, enum egw_err e,
     bool is_sender, uint64_t now)
{
	struct pattern_source *ps = pattern_of(s);
	struct room_rec *r;

	if (is_sender) {
		if (!ps->o.produce)
			return false;
		if (e == EGW_E_OK) {
			ps->tx_ok++;
		} else {
			ps->tx_failed++;
			GW_LOG(INFO, "room %#lx failed on the encode side: %s\n",
			       (unsigned long)room, egw_strerror(e));
		}
		return true;
	}
	r = rec_of(ps, room);
	if (r == NULL)
		return false;
	if (e == EGW_E_OK)
		return true; /* counted at delivery */
	ps->fail_reason[egw_err_to_wire(e)]++;
	GW_LOG(INFO, "room %#lx rank %u failed: %s\n",
		(unsigned long)room, rank, egw_strerror(e));
	if (!r->active)
		return true;
	r->failed++;
	if (r->done + r->failed == ps->o.ranks)
		room_finished(ps, r, now);
	return true;
}

/* Before the first room: the peer's (or with --peer all, every peer's)
 * registration, for a bootstrap deadline at most: a peer that never
 * registers (its REGISTERs refused, another key) must not hang the run -
 * its rooms then open and fail by their own deadlines. After that rooms
 * open even while a peer is away, and fail at once if it was declared
 * dead. */
static bool
peers_ready(const struct pattern_source *ps)
{
	const struct gw_id *id = ps->base.id;

	if (!ps->all_peers)
		return egw_node_peer_ready(id->node, ps->peer);
	for (uint32_t i = 0; i < id->cfg->npeers; i++)
		if (!egw_node_peer_ready(id->node, i))
			return false;
	return true;
}

static void
open_room(struct pattern_source *ps, uint64_t now)
{
	const struct gw_id *id = ps->base.id;
	uint32_t i = ps->opened++;
	/* --peer all: every peer in turn (a room's ranks stay together) */
	uint32_t peer = ps->all_peers ? i % id->cfg->npeers : ps->peer;
	uint32_t len = ps->o.lengths[i % ps->o.nlengths];
	struct room_rec *r = &ps->recs[i];

	r->room = ((ps->run_id & 0xff) << 56) | ((uint64_t)i << 32) | len;
	/* open loop: latency counts from the room's scheduled start, so a
	 * generator that falls behind does not hide the queueing delay */
	r->opened_at = ps->o.rate > 0 ?
		       ps->start_at + (uint64_t)i * 1000000000ull / ps->o.rate : now;
	r->active = true;
	ps->active++;
	if (ps->first_open == 0)
		ps->first_open = now;
	for (uint16_t k = 0; k < ps->o.ranks; k++) {
		bool dummy = ps->o.dummy_rank && ps->o.ranks > 1 &&
			     k == ps->o.ranks - 1;
		int rc = egw_node_receiver_open(id->node, r->room, k,
						ps->o.ranks, peer, dummy, now);

		if (rc != 0) {
			r->failed++;
			if (egw_rc_is_err(rc))
				ps->fail_reason[egw_err_to_wire((enum egw_err)-rc)]++;
			else
				GW_LOG(ERR, "room %#lx rank %u not opened: %s\n",
				       (unsigned long)r->room, k, egw_strerror(rc));
		}
	}
	if (r->failed == ps->o.ranks)
		room_finished(ps, r, now);
}

/*
 * The receiver's room table (max_rooms) is full for the next room's ranks:
 * it waits for slots like a room short of memory waits in the admission
 * queue, until its admission deadline (admit_ns from when it was due),
 * then it is opened all the same and fails at once (NO_SLOT). The table
 * cannot hold the wait itself: a queued room is a slot (doc/xfer.md,
 * "Admission"). true: open it now.
 */
static bool
slots_free(struct pattern_source *ps, uint64_t now)
{
	const struct gw_id *id = ps->base.id;
	const struct egw_xfer_receiver *rx = egw_node_receiver(id->node);
	struct egw_xfer_stats st;

	if (rx == NULL)
		return true;
	egw_xfer_receiver_get_stats(rx, &st);
	if (st.rooms_active + ps->o.ranks <= id->conf->max_rooms) {
		ps->slot_wait_since = 0;
		return true;
	}
	if (ps->slot_wait_since == 0) {
		ps->slot_wait_since = now;
		ps->slot_waits++;
		if (!ps->slot_said)
			GW_LOG(NOTICE, "port %s: the room table is full "
			       "(max_rooms %u): rooms wait for a slot, up to "
			       "admit_ms (%lu ms) each\n", id->cfg->name,
			       id->conf->max_rooms,
			       (unsigned long)(id->conf->timers.admit_ns / 1000000));
		ps->slot_said = true;
	}
	if (now - ps->slot_wait_since < id->conf->timers.admit_ns)
		return false;
	ps->slot_wait_since = 0; /* past its deadline: NO_SLOT */
	return true;
}

static uint32_t
poll_rooms(struct gw_room_source *s, uint64_t now)
{
	struct pattern_source *ps = pattern_of(s);
	uint32_t before = ps->opened, fed = 0;

	if (ps->nwait > 0)
		fed = produce_poll(ps, now);

	/* called every poll-loop iteration: leave early when nothing is due
	 * (a closed loop refills as soon as a room finishes, not a tick
	 * after, or the tick would cap the generator's rate) */
	if (ps->o.drive == 0 || ps->opened == ps->o.drive || now < ps->start_at ||
	    (ps->o.rate == 0 && ps->active >= ps->o.concurrency))
		return fed;
	if (ps->opened == 0 && !peers_ready(ps)) {
		if (now < ps->ready_wait_until)
			return fed;
		GW_LOG(WARNING, "port %s: no registration of the peer%s after %lu ms: "
		       "opening the rooms anyway (they fail by their deadlines)\n",
		       s->id->cfg->name, ps->all_peers ? "s" : "",
		       (unsigned long)(s->id->conf->timers.bootstrap_ns / 1000000));
	}
	/* open loop: the schedule decides, not completions (bounded by
	 * --concurrency as a safety cap on rooms in flight) */
	if (ps->o.rate > 0) {
		uint64_t due = (now - ps->start_at) / 1000 * ps->o.rate / 1000000 + 1;

		if (due > ps->o.drive)
			due = ps->o.drive;
		while (ps->opened < due && ps->active < ps->o.concurrency &&
		       slots_free(ps, now))
			open_room(ps, now);
	} else {
		while (ps->active < ps->o.concurrency && ps->opened < ps->o.drive &&
		       slots_free(ps, now))
			open_room(ps, now);
	}
	return fed + ps->opened - before;
}

static uint64_t
remaining(const struct gw_room_source *s)
{
	const struct pattern_source *ps = (const struct pattern_source *)s;

	return ps->o.drive > 0 ? ps->o.drive - ps->finished : GW_ROOMS_ENDLESS;
}

static void
report(struct gw_room_source *s, struct gw_room_stats *st)
{
	struct pattern_source *ps = pattern_of(s);

	memset(st, 0, sizeof(*st));
	st->encode = egw_node_sender(s->id->node) != NULL;
	st->produced = ps->produced;
	st->refused = ps->produce_refused;
	st->queued = ps->produce_queued;
	st->busy = ps->produce_busy;
	st->queue_max = ps->produce_queue_max;
	st->sent_ok = ps->tx_ok;
	st->sent_failed = ps->tx_failed;
	st->language = ps->o.drive > 0;
	st->rooms = ps->o.drive;
	st->ok = ps->ok;
	st->failed = ps->failed;
	st->unfinished = ps->o.drive - ps->finished;
	st->slot_waits = ps->slot_waits;
	st->bytes = ps->bytes_verified;
	st->bad = ps->bad_bytes;
	st->latency_ns = ps->lat;
	st->admit_wait_ns = ps->admit_wait;
	st->nlatency = ps->nlat;
	st->first_open_ns = ps->first_open;
	st->last_done_ns = ps->last_done;
	memcpy(st->fail_reason, ps->fail_reason, sizeof(st->fail_reason));
	st->last_failed = ps->last_failed;
	for (uint32_t i = ps->last_failed; ps->last_failed > 0 && i < ps->o.drive; i++) {
		const struct room_rec *r = &ps->recs[i];

		st->after_last_failed++;
		st->after_last_failed_ok += !r->active && r->failed == 0 &&
					    r->room != 0;
	}
}

static void
close_source(struct gw_room_source *s)
{
	struct pattern_source *ps = pattern_of(s);

	free(ps->recs);
	free(ps->lat);
	free(ps->admit_wait);
	free(ps);
}

static const struct gw_room_source_ops pattern_ops = {
	.name = "pattern",
	.poll = poll_rooms,
	.unknown_room = produce,
	.deliver = deliver,
	.done = done,
	.remaining = remaining,
	.report = report,
	.close = close_source,
};

int
gw_pattern_source_attach(struct gw_id *id, const struct gw_pattern_opts *o)
{
	struct pattern_source *ps = calloc(1, sizeof(*ps));
	int rc;

	if (ps == NULL)
		return -ENOMEM;
	ps->base.ops = &pattern_ops;
	ps->o = *o;
	/* --peer NAME, --peer all, or this identity's first peer */
	if (strcmp(o->peer, "all") == 0) {
		ps->all_peers = true;
	} else if (o->peer[0] != '\0') {
		int i = egw_node_peer_index(id->node, o->peer);

		if (i < 0) {
			GW_LOG(ERR, "port %s: --peer %s: no such peer in the "
				"configuration\n", id->cfg->name, o->peer);
			free(ps);
			return -ENOENT;
		}
		ps->peer = (uint32_t)i;
	}
	if (o->drive > 0 && id->cfg->npeers == 0) {
		GW_LOG(ERR, "port %s: --drive needs a peer to fetch from\n",
			id->cfg->name);
		free(ps);
		return -ENOENT;
	}
	/* engines attach to a pool cut per client: segment 0 is ours */
	if (o->produce && id->attach != NULL &&
	    gw_attach_producer_segment(id, &ps->seg_lo, &ps->seg_hi) != 0)
		ps->seg_hi = 0;
	if (ps->o.ranks == 0)
		ps->o.ranks = 1;
	if (ps->o.concurrency == 0)
		ps->o.concurrency = 1;
	if (ps->o.drive > 0) {
		ps->recs = calloc(ps->o.drive, sizeof(*ps->recs));
		ps->lat = calloc(ps->o.drive, sizeof(*ps->lat));
		ps->admit_wait = calloc(ps->o.drive, sizeof(*ps->admit_wait));
		if (ps->recs == NULL || ps->lat == NULL ||
		    ps->admit_wait == NULL) {
			close_source(&ps->base);
			return -ENOMEM;
		}
	}
	/* identities of one generator must not share room ids */
	ps->run_id = (o->seed ? o->seed : (gw_now_ns() >> 10)) + o->identity;
	ps->start_at = gw_now_ns() + (uint64_t)o->start_delay_ms * 1000000ull;
	ps->ready_wait_until = ps->start_at + id->conf->timers.bootstrap_ns;
	rc = gw_room_source_attach(id, &ps->base);
	if (rc != 0)
		close_source(&ps->base);
	return rc;
}
