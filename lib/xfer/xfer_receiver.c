/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receiver (language side): one room per (room id, rank).
 *
 * The room holds an ordered list of windows; window i starts at token
 * `off` = tokens allocated before it. Decisions derive only from two
 * numbers that can only grow - the announced total and the local
 * allocation end - so a repeated "Transferring" can never trigger a second
 * resume (the reference design's bug #5, doc/design.md) and whatever block
 * indices the allocator returns do not matter (its bug #6). Blocks are kept
 * (zero copy) and delivered as one run list; the aux record stays in the
 * first window's first block (its bug #3). All ranks resume from the same
 * total, announced by the sender, never read back from their own memory
 * (its bug #4).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_core.h"

struct receiver_window {
	uint32_t off, alloc;      /* tokens */
	uint32_t first_run, nruns;
	uint32_t rkeys[EGW_KIND_MAX]; /* for its INIT/RESUME (0: region's) */
};

#define QNIL UINT32_MAX       /* end of the admission queue */

struct receiver_room {
	uint64_t room;
	uint16_t rank, nranks;
	uint16_t ranks; /* the group this room receives for (its
			 * lowest rank is `rank`); 0: rank alone */
	uint32_t peer;
	bool dummy;
	uint8_t state;
	uint32_t total;           /* 0 until announced */
	uint32_t alloc_end;       /* tokens allocated so far */
	uint32_t landed;          /* tokens the sender reports complete */
	uint32_t accepted;        /* end of the windows the sender accepted */
	bool alloc_pending;
	bool alloc_failing;       /* the pool said no to a resume; retrying */
	uint64_t alloc_fail_since;
	uint64_t next_alloc;
	uint64_t deadline;        /* of the current state */
	uint64_t progress_at;
	uint64_t next_tx, rto;
	/* the message being timed for the peer's round trip (one at a time,
	 * as TCP times one segment): sent at rtt_at (0: none), answered by
	 * an ACK (rtt_abort) or by `accepted` reaching rtt_end; any
	 * retransmission of the room stops the timing (Karn's rule) */
	uint64_t rtt_at;
	uint32_t rtt_end;
	bool rtt_abort;
	bool refused; /* the sender refused a window for now: the
		       * next resend is a retry, not a loss */
	/* admission */
	bool queued;              /* in the admission queue: holds no block */
	uint32_t qprev, qnext;    /* queue links (room indices) */
	uint64_t open_seq;        /* order of opening: the youngest yields */
	uint64_t mem_deadline;    /* open + admit_ns: waiting for memory ends */
	uint64_t queued_at;
	uint64_t waited;          /* time spent in the queue so far */
	uint64_t opened_at;       /* egw_xfer_receiver_open's now */
	/* quarantine: ABORT sent, blocks held until its ACK */
	bool wait_ack;
	bool restart;             /* a yield: back to the queue after the ACK */
	uint16_t abort_err;       /* enum egw_err the ABORT carries */
	uint16_t abort_id;        /* names the ABORT's quarantine (ACK echo) */
	uint64_t ack_seq;         /* messages sent before the ACK are stale */
	uint64_t hold_until;      /* past it without the ACK: fence the peer */
	bool expired;             /* ... which was asked for */
	struct egw_run *runs;     /* all runs, token order */
	uint32_t nruns;
	struct receiver_window *win;
	uint32_t nwin;
	/* what the room adds to the admission sums, as last accounted */
	uint32_t adm_held, adm_need;
	bool adm_failing;
};

struct egw_xfer_receiver {
	struct xfer_core core;
	struct egw_policy policy;
	struct receiver_room *rooms;
	struct egw_run *run_store;
	struct receiver_window *win_store;
	/* the admission queue: FIFO of rooms without a window (restarted
	 * rooms go to its front), one first-window allocation at a time */
	uint32_t qhead, qtail;
	bool admit_pending;
	uint64_t admit_retry_at;
	uint64_t admit_blocked_since; /* the head has waited since (0: not) */
	/* over the open rooms (admit_account): blocks held, blocks their
	 * known totals still need, rooms whose allocation is failing */
	uint64_t adm_held, adm_need;
	uint32_t adm_failing;
	uint16_t abort_ids;       /* the last abort_id handed out */
	uint64_t open_seq;
	bool closing;             /* abort_all: free at once */
};

static void receiver_fail(struct egw_xfer_receiver *r, struct receiver_room *x,
			  enum egw_err e, bool tell_peer, uint64_t now);
static void receiver_admit(struct egw_xfer_receiver *r, uint64_t now);

int
egw_xfer_receiver_create(const struct egw_xfer_conf *c,
			 const struct egw_policy *policy,
			 struct egw_xfer_receiver **out)
{
	struct egw_xfer_receiver *r;
	size_t n;
	int rc;

	if (out == NULL || policy == NULL || c == NULL ||
	    policy->block_tokens != c->geom.block_tokens)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	rc = xfer_core_init(&r->core, c);
	if (rc != 0) {
		free(r);
		return rc;
	}
	r->policy = *policy;
	n = (size_t)c->max_rooms * c->max_runs_per_room;
	r->rooms = calloc(c->max_rooms, sizeof(*r->rooms));
	r->run_store = calloc(n, sizeof(*r->run_store));
	r->win_store = calloc(n, sizeof(*r->win_store));
	if (r->rooms == NULL || r->run_store == NULL || r->win_store == NULL) {
		egw_xfer_receiver_destroy(r);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->max_rooms; i++) {
		r->rooms[i].runs = r->run_store + (size_t)i * c->max_runs_per_room;
		r->rooms[i].win = r->win_store + (size_t)i * c->max_runs_per_room;
	}
	r->qhead = r->qtail = QNIL;
	*out = r;
	return 0;
}

void
egw_xfer_receiver_destroy(struct egw_xfer_receiver *r)
{
	if (r == NULL)
		return;
	xfer_core_fini(&r->core);
	free(r->rooms);
	free(r->run_store);
	free(r->win_store);
	free(r);
}

int
egw_xfer_receiver_peer_add(struct egw_xfer_receiver *r, uint32_t peer,
			   uint64_t now)
{
	return xfer_core_peer_add(&r->core, peer, 0, now);
}

/* The same policy settings: its history (adaptive) is kept. */
static bool
policy_same(const struct egw_policy *a, const struct egw_policy *b)
{
	return a->kind == b->kind && a->block_tokens == b->block_tokens &&
	       a->fixed_tokens == b->fixed_tokens &&
	       a->min_tokens == b->min_tokens &&
	       a->max_tokens == b->max_tokens &&
	       a->percentile == b->percentile && a->warmup == b->warmup;
}

int
egw_xfer_receiver_set_conf(struct egw_xfer_receiver *r,
			   const struct egw_xfer_conf *c,
			   const struct egw_policy *policy, uint64_t now)
{
	int rc;

	if (r == NULL)
		return -EINVAL;
	rc = xfer_core_conf_check(&r->core, c);
	if (rc != 0)
		return rc;
	if (policy != NULL &&
	    (policy->block_tokens != r->core.conf.geom.block_tokens ||
	     egw_policy_tokens(policy) == 0))
		return -EINVAL;
	xfer_core_conf_apply(&r->core, c, now);
	if (policy != NULL && !policy_same(policy, &r->policy))
		r->policy = *policy;
	return 0;
}

const struct egw_policy *
egw_xfer_receiver_policy(const struct egw_xfer_receiver *r)
{
	return &r->policy;
}

void
egw_xfer_receiver_get_stats(const struct egw_xfer_receiver *r,
			    struct egw_xfer_stats *st)
{
	*st = r->core.stats;
}

static struct receiver_room *
receiver_find(struct egw_xfer_receiver *r, uint64_t room, uint16_t rank)
{
	int32_t i = xfer_core_find(&r->core, room, rank);

	return i < 0 ? NULL : &r->rooms[i];
}

int
egw_xfer_receiver_peer_rtt(const struct egw_xfer_receiver *r, uint32_t peer,
			   struct egw_xfer_rtt *out)
{
	const struct xfer_peer *pe;

	if (r == NULL || out == NULL || peer >= r->core.conf.max_peers ||
	    !r->core.peers[peer].used)
		return -EINVAL;
	pe = &r->core.peers[peer];
	out->srtt_ns = pe->srtt;
	out->rttvar_ns = pe->rttvar;
	out->rto_ns = xfer_core_rto(&r->core, peer);
	out->samples = pe->rtt_samples;
	return 0;
}

/* Time a message sent for the first time, unless one is being timed:
 * a window (answered when `accepted` reaches `end`) or an ABORT. */
static void
rtt_start(struct receiver_room *x, bool abort, uint32_t end, uint64_t now)
{
	if (x->rtt_at != 0 && !abort)
		return;
	x->rtt_at = now != 0 ? now : 1;
	x->rtt_abort = abort;
	x->rtt_end = end;
}

/* The timed message was answered: one round-trip sample of the peer. */
static void
rtt_answered(struct egw_xfer_receiver *r, struct receiver_room *x, uint64_t now)
{
	if (now >= x->rtt_at)
		xfer_core_rtt_sample(&r->core, x->peer, now - x->rtt_at);
	x->rtt_at = 0;
}

int
egw_xfer_receiver_state(const struct egw_xfer_receiver *r, uint64_t room,
			uint16_t rank)
{
	int32_t i = xfer_core_find(&r->core, room, rank);

	/* a failed room waiting for its ABORT ACK has ended for the app */
	if (i < 0 || r->rooms[i].state == EGW_ST_FAILED)
		return -EGW_E_UNKNOWN_ROOM;
	return r->rooms[i].state;
}

/* ---- the admission queue ------------------------------------------------ */

static uint32_t
idx_of(const struct egw_xfer_receiver *r, const struct receiver_room *x)
{
	return (uint32_t)(x - r->rooms);
}

static bool older(const struct receiver_room *a, const struct receiver_room *b);

/* Into the queue: a new room at the tail (FIFO); a restarted one before
 * the first younger room waiting (it keeps its age, and the rule that
 * breaks deadlocks needs the oldest to go first). */
static void
queue_push(struct egw_xfer_receiver *r, struct receiver_room *x, bool restarted,
	   uint64_t now)
{
	uint32_t i = idx_of(r, x), next = QNIL;

	if (restarted)
		for (next = r->qhead; next != QNIL && !older(x, &r->rooms[next]);
		     next = r->rooms[next].qnext)
			;
	x->queued = true;
	x->queued_at = now;
	x->qnext = next;
	x->qprev = next == QNIL ? r->qtail : r->rooms[next].qprev;
	if (x->qprev != QNIL)
		r->rooms[x->qprev].qnext = i;
	else
		r->qhead = i;
	if (x->qnext != QNIL)
		r->rooms[x->qnext].qprev = i;
	else
		r->qtail = i;
	if (++r->core.stats.admit_queued > r->core.stats.admit_queue_max)
		r->core.stats.admit_queue_max = r->core.stats.admit_queued;
}

static void
queue_remove(struct egw_xfer_receiver *r, struct receiver_room *x, uint64_t now)
{
	if (!x->queued)
		return;
	if (x->qprev != QNIL)
		r->rooms[x->qprev].qnext = x->qnext;
	else
		r->qhead = x->qnext;
	if (x->qnext != QNIL)
		r->rooms[x->qnext].qprev = x->qprev;
	else
		r->qtail = x->qprev;
	x->queued = false;
	x->waited += now - x->queued_at;
	r->core.stats.admit_queued--;
	if (x->alloc_pending) /* its first window is being allocated */
		r->admit_pending = false;
}

/* A room ends: its admission wait goes into the statistics. */
static void
record_wait(struct egw_xfer_receiver *r, const struct receiver_room *x)
{
	struct egw_xfer_stats *st = &r->core.stats;
	uint64_t us = x->waited / 1000;
	int b = 0;

	while (us > 1 && b < EGW_XFER_WAIT_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	st->admit_wait_hist[b]++;
	if (x->waited > st->admit_wait_max_ns)
		st->admit_wait_max_ns = x->waited;
}

static uint32_t
held_blocks(const struct receiver_room *x)
{
	return egw_pool_runs_blocks(x->runs, x->nruns);
}

/* Admitted and still able to use memory: has windows, not ended, not
 * waiting for an ACK. */
static bool
admitted_live(const struct receiver_room *x)
{
	return x->nwin > 0 && !x->wait_ack && x->state < EGW_ST_SUCCESS;
}

/*
 * Admission (receiver_may_admit) weighs every open room: the blocks it
 * holds, the blocks its known total still needs while it is admitted and
 * live, and whether its allocation is failing. Those are kept as sums,
 * each room's part updated where its runs, windows, total, state,
 * quarantine or allocation failure change, so that admitting a room costs
 * O(1) instead of a walk over every open room. The tick counts them again
 * from the rooms (admit_recount); a difference is a missed update, counted
 * in stats.admit_recounts and corrected.
 */
static void
admit_part(const struct egw_xfer_receiver *r, const struct receiver_room *x,
	   uint32_t *held, uint32_t *need, bool *failing)
{
	const struct egw_pool_geom *g = &r->core.conf.geom;
	uint32_t want;

	*held = held_blocks(x);
	*need = 0;
	*failing = false;
	if (!admitted_live(x))
		return;
	*failing = x->alloc_failing;
	want = x->total != 0 && !x->dummy ?
		       egw_pool_geom_blocks_for(g, x->total) :
		       0;
	*need = want > *held ? want - *held : 0;
}

static void
admit_set(struct egw_xfer_receiver *r, struct receiver_room *x, uint32_t held,
	  uint32_t need, bool failing)
{
	r->adm_held = r->adm_held - x->adm_held + held;
	r->adm_need = r->adm_need - x->adm_need + need;
	r->adm_failing = r->adm_failing - x->adm_failing + failing;
	x->adm_held = held;
	x->adm_need = need;
	x->adm_failing = failing;
}

static void
admit_account(struct egw_xfer_receiver *r, struct receiver_room *x)
{
	uint32_t held, need;
	bool failing;

	admit_part(r, x, &held, &need, &failing);
	admit_set(r, x, held, need, failing);
}

static void
admit_recount(struct egw_xfer_receiver *r)
{
	uint64_t held_sum = 0, need_sum = 0;
	uint32_t failing_sum = 0;

	for (uint32_t i = 0; i < r->core.nactive; i++) {
		struct receiver_room *x = &r->rooms[r->core.active[i]];
		uint32_t held, need;
		bool failing;

		admit_part(r, x, &held, &need, &failing);
		if (held != x->adm_held || need != x->adm_need ||
		    failing != x->adm_failing) {
			r->core.stats.admit_recounts++;
			admit_set(r, x, held, need, failing);
		}
		held_sum += held;
		need_sum += need;
		failing_sum += failing;
	}
	/* a part left in the sums by a room no longer open */
	if (held_sum != r->adm_held || need_sum != r->adm_need ||
	    failing_sum != r->adm_failing) {
		r->core.stats.admit_recounts++;
		r->adm_held = held_sum;
		r->adm_need = need_sum;
		r->adm_failing = failing_sum;
	}
}

static void
receiver_set_state(struct egw_xfer_receiver *r, struct receiver_room *x,
		   enum egw_state s, uint64_t now)
{
	const struct egw_xfer_timers *t = &r->core.conf.timers;

	if (s <= x->state)
		return; /* states only move forward */
	x->state = (uint8_t)s;
	admit_account(r, x);
	x->progress_at = now;
	if (s == EGW_ST_WAITING_FOR_INPUT)
		x->deadline = now + t->input_ns;
	else if (s == EGW_ST_TRANSFERRING)
		x->deadline = now + t->round_ns;
}

/* Ask the app for the next window's blocks. */
static void
receiver_request_window(struct egw_xfer_receiver *r, struct receiver_room *x,
			uint64_t now)
{
	const struct egw_xfer_conf *c = &r->core.conf;
	uint32_t bt = c->geom.block_tokens, want, room_left;
	struct egw_act a = { .type = EGW_ACT_ALLOC, .room = x->room,
			     .rank = x->rank, .peer = x->peer };

	if (x->nwin == 0 && x->dummy) {
		want = bt;
	} else if (x->nwin == 0 && x->total == 0) {
		/* never more than the whole pool could give */
		want = egw_policy_tokens(&r->policy);
		if (want > c->geom.capacity_tokens)
			want = c->geom.capacity_tokens;
	} else {
		/* a resume, or the first window of a restarted room (its
		 * total known): sized from the total */
		want = x->total - x->alloc_end;
		if (c->max_blocks_per_round != 0 &&
		    want > c->max_blocks_per_round * bt)
			want = c->max_blocks_per_round * bt;
	}
	room_left = c->max_runs_per_room - x->nruns;
	if (room_left == 0 || x->nwin == c->max_runs_per_room) {
		receiver_fail(r, x, EGW_E_TOO_LARGE, true, now);
		return;
	}
	a.tokens = want;
	a.max_runs = room_left < EGW_XFER_MAX_RUNS ? room_left
						   : EGW_XFER_MAX_RUNS;
	if (c->window_keys)
		a.max_runs = 1; /* the rest goes in further windows */
	x->alloc_pending = true;
	xfer_core_emit(&r->core, &a);
}

static void
receiver_send_window(struct egw_xfer_receiver *r, struct receiver_room *x,
		     const struct receiver_window *w)
{
	struct egw_msg m = {
		.type = w->off == 0 ? EGW_MSG_INIT : EGW_MSG_RESUME,
		.flags = x->dummy ? EGW_MSGF_DUMMY : 0,
		.rank = x->rank,
		.nranks = x->nranks,
		.ranks = x->ranks,
		.nruns = (uint16_t)w->nruns,
		.room = x->room,
		.block_tokens = r->core.conf.geom.block_tokens,
		.offset = w->off,
		.alloc_tokens = w->alloc,
	};

	memcpy(m.rkeys, w->rkeys, sizeof(m.rkeys));
	memcpy(m.runs, x->runs + w->first_run, w->nruns * sizeof(m.runs[0]));
	xfer_core_send(&r->core, x->peer, &m);
}

static void
receiver_send_simple(struct egw_xfer_receiver *r, struct receiver_room *x,
		     uint8_t type, enum egw_err e)
{
	struct egw_msg m = {
		.type = type,
		.error = (uint16_t)e,
		.rank = x->rank,
		.nranks = x->nranks,
		.ranks = x->ranks,
		.room = x->room,
		.flags = type == EGW_MSG_STATUS ? EGW_MSGF_POLL : 0,
		.abort_id = type == EGW_MSG_ABORT ? x->abort_id : 0
	};

	xfer_core_send(&r->core, x->peer, &m);
}

static void
receiver_release(struct egw_xfer_receiver *r, struct receiver_room *x,
		 uint64_t now)
{
	queue_remove(r, x, now);
	admit_set(r, x, 0, 0, false); /* no longer open */
	xfer_core_release(&r->core, x->room, x->rank, idx_of(r, x));
}

/* Every block the room holds back to the pool; windows forgotten. */
static void
receiver_free_all(struct egw_xfer_receiver *r, struct receiver_room *x)
{
	xfer_core_free_runs(&r->core, x->room, x->rank, x->runs, x->nruns);
	x->nruns = 0;
	x->nwin = 0;
	x->alloc_end = 0;
	x->accepted = 0;
	x->landed = 0;
	admit_account(r, x);
}

static void
receiver_done(struct egw_xfer_receiver *r, struct receiver_room *x,
	      enum egw_err e)
{
	struct egw_act a = { .type = EGW_ACT_DONE, .room = x->room,
			     .rank = x->rank, .error = e,
			     .waited_ns = x->waited };

	record_wait(r, x);
	if (e == EGW_E_OK) {
		r->core.stats.rooms_ok++;
	} else {
		r->core.stats.rooms_failed++;
		r->core.stats.failed[egw_err_to_wire(e)]++;
	}
	xfer_core_emit(&r->core, &a);
}

/* A new ABORT's name (never 0): only an ACK echoing it ends the
 * quarantine, not one answering an earlier ABORT of the same rank. */
static uint16_t
next_abort_id(struct egw_xfer_receiver *r)
{
	if (++r->abort_ids == 0)
		r->abort_ids = 1;
	return r->abort_ids;
}

/* Send the room's ABORT now and again on the timer, until the ACK. */
static void
receiver_hold_for_ack(struct egw_xfer_receiver *r, struct receiver_room *x,
		      enum egw_err e, uint64_t now)
{
	x->wait_ack = true;
	x->expired = false;
	x->hold_until = now + r->core.conf.timers.quarantine_ns;
	x->abort_id = next_abort_id(r);
	x->abort_err = (uint16_t)e;
	x->alloc_failing = false;
	admit_account(r, x);
	r->core.stats.quarantined++;
	r->core.stats.quarantine_rooms++;
	r->core.stats.quarantine_blocks += held_blocks(x);
	receiver_send_simple(r, x, EGW_MSG_ABORT, e);
	rtt_start(x, true, 0, now);
	x->rto = xfer_core_rto(&r->core, x->peer);
	x->next_tx = now + x->rto;
}

/* The quarantine ends (ACK, or the peer is gone): blocks back to the pool. */
static void
receiver_unhold(struct egw_xfer_receiver *r, struct receiver_room *x)
{
	r->core.stats.quarantine_rooms--;
	r->core.stats.quarantine_blocks -= held_blocks(x);
	x->wait_ack = false;
	receiver_free_all(r, x);
}

/*
 * The room fails. The app hears it now (DONE); the blocks go back to the
 * pool at once only when no write can still land in them - no window was
 * ever announced, the peer is dead (its QP reset or its mapping gone), or
 * the engine shuts down. Otherwise they are quarantined until the sender's
 * ABORT ACK says none of the room's writes to this rank is in flight.
 */
static void
receiver_fail_(struct egw_xfer_receiver *r, struct receiver_room *x,
	       enum egw_err e, bool tell_peer, bool peer_gone, uint64_t now)
{
	if (x->wait_ack) {
		/* a yielding room fails before its ACK: the ACK now only
		 * ends the quarantine, and the ABORT it repeats fails the
		 * sender's room instead of restarting the rank */
		if (x->restart) {
			x->restart = false;
			x->state = EGW_ST_FAILED;
			admit_account(r, x);
			x->abort_err = (uint16_t)e;
			receiver_done(r, x, e);
			receiver_send_simple(r, x, EGW_MSG_ABORT, e);
		}
		return;
	}
	queue_remove(r, x, now);
	x->state = EGW_ST_FAILED;
	admit_account(r, x);
	receiver_done(r, x, e);
	/* peer_gone: our own peer-dead path (its QP reset, its mapping
	 * gone); a PEER_DEAD the sender reports about another rank's peer
	 * says nothing of writes still in flight to this one */
	if (x->nwin == 0 || peer_gone || r->closing) {
		receiver_free_all(r, x);
		x->abort_id = next_abort_id(r);
		if (tell_peer)
			receiver_send_simple(r, x, EGW_MSG_ABORT, e);
		receiver_release(r, x, now);
		receiver_admit(r, now);
		return;
	}
	/* An allocation still in flight finds the room failed and is freed
	 * then. */
	receiver_hold_for_ack(r, x, e, now);
}

static void
receiver_fail(struct egw_xfer_receiver *r, struct receiver_room *x,
	      enum egw_err e, bool tell_peer, uint64_t now)
{
	receiver_fail_(r, x, e, tell_peer, false, now);
}

/* Give the room's blocks back and start it again from token 0 once
 * admitted anew (doc/xfer.md, "Admission"): the sender resets the rank
 * when none of its writes is in flight and answers with ABORT ACK. */
static void
receiver_yield(struct egw_xfer_receiver *r, struct receiver_room *x,
	       uint64_t now)
{
	x->restart = true;
	receiver_hold_for_ack(r, x, EGW_E_BUSY, now);
}

/* Windows allocated and not yet fully landed. */
static uint32_t
receiver_outstanding(const struct receiver_room *x)
{
	uint32_t n = 0;

	for (uint32_t i = x->nwin; i > 0; i--) {
		if (x->win[i - 1].off + x->win[i - 1].alloc <= x->landed)
			break;
		n++;
	}
	return n;
}

static void
receiver_maybe_resume(struct egw_xfer_receiver *r, struct receiver_room *x,
		      uint64_t now)
{
	/* a restarted room knows its total before the sender has its INIT:
	 * a RESUME waits for that, as it would on a first run */
	if (x->dummy || x->total == 0 || x->accepted == 0 || x->alloc_pending ||
	    x->queued || x->wait_ack || x->alloc_failing ||
	    x->alloc_end >= x->total || x->state >= EGW_ST_SUCCESS)
		return;
	if (receiver_outstanding(x) < r->core.conf.pipeline_depth)
		receiver_request_window(r, x, now);
}

/* Blocks a room's first window asks for. */
static uint32_t
first_window_blocks(const struct egw_xfer_receiver *r,
		    const struct receiver_room *x)
{
	const struct egw_xfer_conf *c = &r->core.conf;
	uint32_t b;

	if (x->dummy)
		return 1;
	if (x->total == 0) {
		b = egw_pool_geom_blocks_for(&c->geom,
					     egw_policy_tokens(&r->policy));
		return b < c->geom.capacity_tokens / c->geom.block_tokens
			       ? b : c->geom.capacity_tokens / c->geom.block_tokens;
	}
	b = egw_pool_geom_blocks_for(&c->geom, x->total);
	return c->max_blocks_per_round != 0 && b > c->max_blocks_per_round
		       ? c->max_blocks_per_round : b;
}

/*
 * Whether the head of the queue may have its first window now: no
 * admitted room waits for memory (resumes of admitted rooms come before
 * new rooms' first windows), and the pool - as far as this engine knows
 * it: blocks its rooms hold, quarantined ones included - keeps room for
 * what the admitted rooms whose totals are known still need, besides the
 * new window. Rooms whose totals are not known yet reserve nothing; if
 * they turn out to need more than there is, the deadlock rule below sorts
 * it out.
 */
static bool
receiver_may_admit(const struct egw_xfer_receiver *r,
		   const struct receiver_room *h)
{
	const struct egw_pool_geom *g = &r->core.conf.geom;
	uint64_t pool = g->capacity_tokens / g->block_tokens;

	if (r->adm_failing != 0)
		return false;
	return r->adm_held + r->adm_need + first_window_blocks(r, h) <= pool;
}

/* Allocate the first window of the room at the head of the queue, one at
 * a time, when receiver_may_admit() says so. */
static void
receiver_admit(struct egw_xfer_receiver *r, uint64_t now)
{
	if (r->qhead == QNIL) {
		r->admit_blocked_since = 0;
		return;
	}
	if (r->admit_pending || now < r->admit_retry_at || r->closing)
		return;
	if (!receiver_may_admit(r, &r->rooms[r->qhead])) {
		if (r->admit_blocked_since == 0)
			r->admit_blocked_since = now;
		return;
	}
	r->admit_pending = true;
	receiver_request_window(r, &r->rooms[r->qhead], now);
}

/*
 * The total is known: give back whole blocks past it. Only the first
 * (default-sized) window can hold such blocks: later windows are sized from
 * the total. The sender never writes past the total, so this is safe while
 * its writes are in flight.
 */
static void
receiver_trim(struct egw_xfer_receiver *r, struct receiver_room *x)
{
	uint32_t need = x->dummy ? 1 :
				   egw_pool_geom_blocks_for(&r->core.conf.geom,
							    x->total);
	uint32_t cum = 0, i;

	for (i = 0; i < x->nruns && cum + x->runs[i].count <= need; i++)
		cum += x->runs[i].count;
	if (i == x->nruns)
		return;
	if (cum < need) {
		struct egw_act a = { .type = EGW_ACT_SHRINK, .room = x->room,
				     .rank = x->rank, .runs = &x->runs[i],
				     .nruns = 1, .keep = need - cum };

		xfer_core_emit(&r->core, &a);
		x->runs[i].count = need - cum;
		i++;
	}
	xfer_core_free_runs(&r->core, x->room, x->rank, x->runs + i,
			    x->nruns - i);
	x->nruns = i;
	for (uint32_t w = 0; w < x->nwin; w++)
		if (x->win[w].first_run + x->win[w].nruns > i)
			x->win[w].nruns = i > x->win[w].first_run
						  ? i - x->win[w].first_run
						  : 0;
	admit_account(r, x);
}

/* A group's room landed once for all its ranks: the copies not sent. */
static void
receiver_count_group(struct egw_xfer_receiver *r, const struct receiver_room *x)
{
	xfer_core_count_group(&r->core, x->total,
			      x->ranks != 0 ?
				      (uint32_t)__builtin_popcount(x->ranks) -
					      1 :
				      0);
}

static void
receiver_deliver(struct egw_xfer_receiver *r, struct receiver_room *x,
		 uint64_t now)
{
	struct egw_act a = { .type = EGW_ACT_DELIVER,
			     .room = x->room,
			     .rank = x->rank,
			     .ranks = x->ranks,
			     .peer = x->peer,
			     .runs = x->runs,
			     .nruns = x->nruns,
			     .tokens = x->total,
			     .aux_block = x->runs[0].start,
			     .dummy = x->dummy,
			     .waited_ns = x->waited,
			     .open_ns = now - x->opened_at };

	x->state = EGW_ST_SUCCESS;
	receiver_count_group(r, x);
	/* ownership of the runs passes to the app with this action */
	xfer_core_emit(&r->core, &a);
	x->nruns = 0;
	admit_account(r, x);
	receiver_done(r, x, EGW_E_OK);
	receiver_release(r, x, now);
	receiver_admit(r, now);
}

int
egw_xfer_receiver_open(struct egw_xfer_receiver *r, uint64_t room,
		       uint16_t rank, uint16_t nranks, uint32_t peer,
		       bool dummy, uint64_t now)
{
	return egw_xfer_receiver_open_group(r, room, rank, nranks, 0, peer,
					    dummy, now);
}

int
egw_xfer_receiver_open_group(struct egw_xfer_receiver *r, uint64_t room,
			     uint16_t rank, uint16_t nranks, uint16_t ranks,
			     uint32_t peer, bool dummy, uint64_t now)
{
	struct receiver_room *x;
	int32_t idx;

	if (r == NULL)
		return -EINVAL;
	if (nranks == 0 || nranks > EGW_XFER_MAX_RANKS || rank >= nranks)
		return xfer_core_reject(&r->core, EGW_E_BAD_RANK);
	if (ranks == (1u << rank))
		ranks = 0; /* the rank alone: the plain meaning */
	/* a group starts at its rank, lies inside the room, and receives
	 * tokens (an aux-only rank is never a group) */
	if (ranks != 0 &&
	    ((ranks >> nranks) != 0 ||
	     (ranks & ((1u << (rank + 1)) - 1)) != (1u << rank) || dummy))
		return xfer_core_reject(&r->core, EGW_E_BAD_RANK);
	if (peer >= r->core.conf.max_peers || !r->core.peers[peer].used)
		return xfer_core_reject(&r->core, EGW_E_UNKNOWN_PEER);
	/* a dead peer gets no new rooms until it is heard from again */
	if (r->core.peers[peer].dead)
		return xfer_core_reject(&r->core, EGW_E_PEER_DEAD);
	idx = xfer_core_take(&r->core, room, rank);
	if (idx < 0)
		return xfer_core_reject(&r->core, (enum egw_err)-idx);
	x = &r->rooms[idx];
	{
		struct egw_run *runs = x->runs;
		struct receiver_window *win = x->win;

		memset(x, 0, sizeof(*x));
		x->runs = runs;
		x->win = win;
	}
	x->room = room;
	x->rank = rank;
	x->nranks = nranks;
	x->ranks = ranks;
	x->peer = peer;
	x->dummy = dummy;
	x->state = EGW_ST_BOOTSTRAPPING;
	x->open_seq = ++r->open_seq;
	x->opened_at = now;
	x->mem_deadline = now + r->core.conf.timers.admit_ns;
	/* the bootstrap clock starts when the room is admitted */
	x->deadline = x->mem_deadline;
	x->progress_at = now;
	x->rto = xfer_core_rto(&r->core, x->peer);
	x->next_tx = UINT64_MAX;
	x->rtt_at = 0;
	queue_push(r, x, false, now);
	receiver_admit(r, now);
	return 0;
}

/* The pool said no (or answered nonsense). */
static int
receiver_alloc_refused(struct egw_xfer_receiver *r, struct receiver_room *x,
		       int n, uint64_t now)
{
	r->core.stats.alloc_retries++;
	if (x->queued) {
		/* the head stays the head: no room overtakes it */
		r->admit_retry_at = now + r->core.conf.timers.alloc_retry_ns;
		if (r->admit_blocked_since == 0)
			r->admit_blocked_since = now;
	} else {
		if (!x->alloc_failing)
			x->alloc_fail_since = now;
		x->alloc_failing = true;
		admit_account(r, x);
		x->next_alloc = now + r->core.conf.timers.alloc_retry_ns;
	}
	return n < 0 ? n : -ENOSPC;
}

int
egw_xfer_receiver_alloc_done(struct egw_xfer_receiver *r, uint64_t room,
			     uint16_t rank, const struct egw_run *runs, int n,
			     uint64_t now)
{
	return egw_xfer_receiver_alloc_done_keys(r, room, rank, runs, n, NULL,
						 now);
}

int
egw_xfer_receiver_alloc_done_keys(struct egw_xfer_receiver *r, uint64_t room,
			     uint16_t rank, const struct egw_run *runs, int n,
			     const uint32_t rkeys[EGW_KIND_MAX], uint64_t now)
{
	struct receiver_room *x = receiver_find(r, room, rank);
	uint32_t bt = r->core.conf.geom.block_tokens;
	uint64_t blocks = 0;
	struct receiver_window *w;

	if (x == NULL || !x->alloc_pending || x->wait_ack ||
	    x->state >= EGW_ST_SUCCESS) {
		/* the room ended meanwhile: hand the blocks straight back */
		if (x != NULL)
			x->alloc_pending = false;
		if (n > 0)
			xfer_core_free_runs(&r->core, room, rank, runs,
					    (uint32_t)n);
		return -EGW_E_UNKNOWN_ROOM;
	}
	x->alloc_pending = false;
	if (x->queued)
		r->admit_pending = false;
	for (int i = 0; i < n; i++)
		blocks += runs[i].count;
	if (n <= 0 || blocks == 0 ||
	    (uint32_t)n > r->core.conf.max_runs_per_room - x->nruns ||
	    n > EGW_XFER_MAX_RUNS || blocks * bt > EGW_XFER_MAX_TOKENS ||
	    (r->core.conf.window_keys && n > 1)) {
		if (n > 0) {
			/* an allocator that answers nonsense is refused */
			xfer_core_free_runs(&r->core, room, rank, runs,
					    (uint32_t)n);
			xfer_core_reject(&r->core, EGW_E_ZERO_BLOCKS);
		}
		return receiver_alloc_refused(r, x, n, now);
	}
	if (x->queued) {
		queue_remove(r, x, now);
		r->admit_blocked_since = 0;
		r->core.stats.admitted++;
		if (x->state == EGW_ST_BOOTSTRAPPING)
			x->deadline = now + r->core.conf.timers.bootstrap_ns;
		x->progress_at = now;
	}
	x->alloc_failing = false;
	w = &x->win[x->nwin++];
	w->off = x->alloc_end;
	/* always whole blocks (the reference design's bug #2) */
	w->alloc = (uint32_t)(blocks * bt);
	w->first_run = x->nruns;
	w->nruns = (uint32_t)n;
	if (rkeys != NULL)
		memcpy(w->rkeys, rkeys, sizeof(w->rkeys));
	else
		memset(w->rkeys, 0, sizeof(w->rkeys));
	memcpy(x->runs + x->nruns, runs, (size_t)n * sizeof(*runs));
	x->nruns += (uint32_t)n;
	admit_account(r, x);
	x->alloc_end += w->alloc;
	r->core.stats.windows++;
	if (w->off != 0)
		r->core.stats.resumes++;
	receiver_send_window(r, x, w);
	rtt_start(x, false, w->off + w->alloc, now);
	x->rto = xfer_core_rto(&r->core, x->peer);
	x->next_tx = now + x->rto;
	receiver_maybe_resume(r, x, now);
	receiver_admit(r, now);
	return 0;
}

static bool
receiver_window_acked(const struct receiver_room *x,
		      const struct receiver_window *w)
{
	return w->off + w->alloc <= x->accepted;
}

/* Sent before the ACK that restarted the room: from its old life. */
static bool
receiver_stale(const struct receiver_room *x, const struct egw_msg *m)
{
	return x->ack_seq != 0 && m->seq <= x->ack_seq;
}

static int
receiver_on_status(struct egw_xfer_receiver *r, struct receiver_room *x,
		   const struct egw_msg *m, uint64_t now)
{
	bool progress = false;

	if (m->state == EGW_ST_FAILED) {
		enum egw_err e = egw_rc_is_err(-(int)m->error)
					 ? (enum egw_err)m->error
					 : EGW_E_ABORTED;

		receiver_fail(r, x, e, false, now);
		return 0;
	}
	if (m->state > EGW_ST_FAILED)
		return xfer_core_reject(&r->core, EGW_E_BAD_STATUS);
	if (m->total_tokens != 0 && x->total != 0 &&
	    m->total_tokens != x->total)
		return xfer_core_reject(&r->core, EGW_E_TOTAL_CHANGED);
	if (m->total_tokens > EGW_XFER_MAX_TOKENS)
		return xfer_core_reject(&r->core, EGW_E_TOO_LARGE);
	if (m->accepted_tokens > x->alloc_end ||
	    (m->total_tokens == 0 && m->landed_tokens != 0) ||
	    m->landed_tokens > m->total_tokens ||
	    (!x->dummy && m->landed_tokens > m->accepted_tokens) ||
	    (x->dummy && m->landed_tokens != 0 &&
	     m->landed_tokens != m->total_tokens) ||
	    (m->state == EGW_ST_SUCCESS &&
	     (m->total_tokens == 0 || m->landed_tokens != m->total_tokens)))
		return xfer_core_reject(&r->core, EGW_E_BAD_STATUS);

	if (m->accepted_tokens > x->accepted) {
		x->accepted = m->accepted_tokens;
		progress = true;
		if (x->rtt_at != 0 && !x->rtt_abort &&
		    x->accepted >= x->rtt_end)
			rtt_answered(r, x, now);
	}
	if (x->accepted > 0)
		receiver_set_state(r, x, EGW_ST_WAITING_FOR_INPUT, now);
	if (m->total_tokens != 0 && x->total == 0) {
		x->total = m->total_tokens;
		egw_policy_observe(&r->policy, x->total);
		admit_account(r, x);
		if (!x->dummy &&
		    egw_pool_geom_blocks_for(&r->core.conf.geom, x->total) >
			    r->core.conf.geom.capacity_tokens /
				    r->core.conf.geom.block_tokens) {
			/* more than the whole pool: it could never complete */
			receiver_fail(r, x, EGW_E_TOO_LARGE, true, now);
			return 0;
		}
		receiver_trim(r, x);
		receiver_set_state(r, x, EGW_ST_TRANSFERRING, now);
		progress = true;
	}
	if (m->landed_tokens > x->landed) {
		x->landed = m->landed_tokens;
		progress = true;
	}
	if (m->state == EGW_ST_SUCCESS && x->total != 0 &&
	    x->landed == x->total) {
		receiver_deliver(r, x, now);
		return 0;
	}
	if (progress) {
		x->progress_at = now;
		x->rto = xfer_core_rto(&r->core, x->peer);
		x->next_tx = now + x->rto;
	} else {
		r->core.stats.duplicates++;
	}
	receiver_maybe_resume(r, x, now);
	return 0;
}

static int
receiver_on_error(struct egw_xfer_receiver *r, struct receiver_room *x,
		  const struct egw_msg *m, uint64_t now)
{
	enum egw_err e = egw_err_to_wire((enum egw_err)m->error) != UINT16_MAX
				 ? (enum egw_err)m->error
				 : EGW_E_BAD_STATUS;
	const struct receiver_window *w = NULL;

	/* `state` echoes the refused request's type, `offset` its window */
	if (m->state == EGW_MSG_INIT || m->state == EGW_MSG_RESUME) {
		for (uint32_t i = 0; i < x->nwin; i++)
			if (x->win[i].off == m->offset)
				w = &x->win[i];
		if (w == NULL || receiver_window_acked(x, w)) /* stale */
			return xfer_core_reject(&r->core, EGW_E_STATE);
	}
	if (e == EGW_E_BUSY ||
	    ((e == EGW_E_UNKNOWN_ROOM || e == EGW_E_NO_SLOT) &&
	     m->state == EGW_MSG_INIT)) {
		/* retriable until the room's own deadline: the sender has not
		 * opened the room yet, its room table is full, or it cannot
		 * take the window now; the retransmission timer tries again.
		 * TOO_LARGE and every other refusal of a live window are
		 * final. An answer all the same: a round trip if timed. */
		if (w != NULL && x->rtt_at != 0 && !x->rtt_abort &&
		    w->off + w->alloc == x->rtt_end)
			rtt_answered(r, x, now);
		x->refused = true;
		r->core.stats.rejected[egw_err_to_wire(e)]++;
		return 0;
	}
	if (m->state == EGW_MSG_STATUS && e != EGW_E_UNKNOWN_ROOM)
		return xfer_core_reject(&r->core, EGW_E_STATE);
	if (e == EGW_E_OK)
		e = EGW_E_BAD_STATUS;
	receiver_fail(r, x, e, false, now);
	return 0;
}

/* ABORT ACK: none of the room's writes to this rank is in flight. */
static int
receiver_on_ack(struct egw_xfer_receiver *r, struct receiver_room *x,
		const struct egw_msg *m, uint64_t now)
{
	/* a late duplicate, or the answer to an earlier ABORT of this rank
	 * (a quarantine it did not end) */
	if (!x->wait_ack || m->abort_id != x->abort_id)
		return xfer_core_reject(&r->core, EGW_E_STATE);
	r->core.stats.quarantine_acked++;
	if (x->rtt_at != 0 && x->rtt_abort)
		rtt_answered(r, x, now);
	receiver_unhold(r, x);
	if (!x->restart) {
		receiver_release(r, x, now);
		receiver_admit(r, now);
		return 0;
	}
	/* restart: the rank starts again from token 0, in line by age */
	x->restart = false;
	x->ack_seq = m->seq != 0 ? m->seq : 1;
	x->alloc_failing = false;
	admit_account(r, x);
	x->next_tx = UINT64_MAX;
	r->core.stats.restarts++;
	queue_push(r, x, true, now);
	receiver_admit(r, now);
	return 0;
}

int
egw_xfer_receiver_on_msg(struct egw_xfer_receiver *r, uint32_t peer,
		    const struct egw_msg *m, uint64_t now)
{
	struct receiver_room *x;
	int rc;

	if (r == NULL || m == NULL)
		return -EINVAL;
	rc = xfer_core_peer_heard(&r->core, peer, now);
	if (rc != 0)
		return rc;
	if (m->type == EGW_MSG_HEARTBEAT)
		return 0;
	if (m->type != EGW_MSG_STATUS && m->type != EGW_MSG_ERROR &&
	    m->type != EGW_MSG_ABORT)
		return xfer_core_reject(&r->core, EGW_E_STATE);
	x = receiver_find(r, m->room, m->rank);
	if (x == NULL)
		return xfer_core_reject(&r->core, EGW_E_UNKNOWN_ROOM);
	if (x->peer != peer)
		return xfer_core_reject(&r->core, EGW_E_BAD_RANK);
	if (m->type == EGW_MSG_ABORT && (m->flags & EGW_MSGF_ACK))
		return receiver_on_ack(r, x, m, now);
	if (receiver_stale(x, m)) {
		r->core.stats.duplicates++;
		return 0;
	}
	if (x->wait_ack && x->restart && m->type == EGW_MSG_STATUS &&
	    m->state == EGW_ST_SUCCESS && m->total_tokens != 0 &&
	    (x->total == 0 || m->total_tokens == x->total) &&
	    m->landed_tokens == m->total_tokens &&
	    m->accepted_tokens <= x->alloc_end &&
	    (x->dummy || m->total_tokens <= x->alloc_end)) {
		/* the room succeeded before the sender saw the ABORT (maybe
		 * before this side heard its total): every byte is in the
		 * blocks still held - deliver, no restart */
		r->core.stats.quarantine_rooms--;
		r->core.stats.quarantine_blocks -= held_blocks(x);
		x->wait_ack = false;
		x->restart = false;
		if (x->total == 0) {
			x->total = m->total_tokens;
			egw_policy_observe(&r->policy, x->total);
			receiver_trim(r, x);
		}
		x->landed = x->total;
		receiver_deliver(r, x, now);
		return 0;
	}
	if (x->wait_ack) {
		/* only the ACK matters now; the sender's failure seen
		 * meanwhile ends a yielding room for good (an ERROR answers
		 * a request made before the ABORT: nothing to act on) */
		if (m->type == EGW_MSG_STATUS && m->state == EGW_ST_FAILED)
			receiver_fail(r, x, egw_rc_is_err(-(int)m->error)
					    ? (enum egw_err)m->error
					    : EGW_E_ABORTED, false, now);
		r->core.stats.duplicates++;
		return 0;
	}
	switch (m->type) {
	case EGW_MSG_STATUS:
		return receiver_on_status(r, x, m, now);
	case EGW_MSG_ERROR:
		return receiver_on_error(r, x, m, now);
	default: /* ABORT */
		receiver_fail(r, x, EGW_E_ABORTED, false, now);
		return 0;
	}
}

int
egw_xfer_receiver_abort(struct egw_xfer_receiver *r, uint64_t room,
			uint16_t rank, uint64_t now)
{
	struct receiver_room *x = receiver_find(r, room, rank);

	if (x == NULL || x->state == EGW_ST_FAILED)
		return -EGW_E_UNKNOWN_ROOM;
	receiver_fail(r, x, EGW_E_ABORTED, true, now);
	return 0;
}

static void
receiver_retransmit(struct egw_xfer_receiver *r, struct receiver_room *x,
		    uint64_t now)
{
	bool sent = false, retry = false;

	if (x->wait_ack) {
		receiver_send_simple(r, x, EGW_MSG_ABORT,
				     (enum egw_err)x->abort_err);
		sent = true;
	}
	for (uint32_t i = 0; !sent && i < x->nwin; i++) {
		if (!receiver_window_acked(x, &x->win[i])) {
			receiver_send_window(r, x, &x->win[i]);
			sent = true;
			retry = x->refused;
			if (retry)
				r->core.stats.retries++;
		}
	}
	x->refused = false;
	if (!sent) {
		receiver_send_simple(r, x, EGW_MSG_STATUS, EGW_E_OK); /* poll */
		r->core.stats.polls++;
	} else if (!retry) {
		/* a request timed out unanswered: the peer's RTO backs off */
		xfer_core_rto_backoff(&r->core, x->peer, now);
	}
	r->core.stats.retransmits++;
	x->rtt_at = 0; /* Karn: an answer now may be to either copy */
	x->rto = xfer_core_backoff(&r->core, x->rto);
	x->next_tx = now + x->rto;
}

static void
receiver_tick_room(struct egw_xfer_receiver *r, struct receiver_room *x,
		   uint64_t now)
{
	const struct egw_xfer_timers *t = &r->core.conf.timers;

	if (x->wait_ack) {
		/* quarantined: the peer's death or, past quarantine_ns
		 * without the ACK, its fence ends it; a yielding room still
		 * has its memory deadline */
		if (!x->expired && now >= x->hold_until) {
			struct egw_act a = { .type = EGW_ACT_PEER_FENCE,
					     .peer = x->peer, .room = x->room,
					     .rank = x->rank };

			/* asked once a room; the blocks come back when the
			 * application has fenced the peer (peer_dead) */
			x->expired = true;
			r->core.stats.quarantine_expired++;
			xfer_core_emit(&r->core, &a);
			return;
		}
		if (x->restart && now >= x->mem_deadline)
			receiver_fail(r, x, EGW_E_POOL_EXHAUSTED, true, now);
	} else if (x->queued) {
		if (now >= x->mem_deadline)
			receiver_fail(r, x, EGW_E_POOL_EXHAUSTED, true, now);
		return; /* nothing announced, nothing to resend */
	} else if (x->alloc_failing) {
		/* waiting for memory: the state deadlines wait. Past
		 * alloc_ns the room stops holding memory others may need
		 * (before the sender's round timer could fire); past its
		 * memory deadline it fails. */
		if (now >= x->mem_deadline) {
			receiver_fail(r, x, EGW_E_POOL_EXHAUSTED, true, now);
			return;
		}
		if (now - x->alloc_fail_since >= t->alloc_ns) {
			receiver_yield(r, x, now);
			return;
		}
		if (!x->alloc_pending && now >= x->next_alloc) {
			receiver_request_window(r, x, now);
			if (x->state == EGW_ST_FAILED)
				return;
		}
	} else if (x->state == EGW_ST_BOOTSTRAPPING && now >= x->deadline) {
		receiver_fail(r, x, EGW_E_TIMEOUT_BOOTSTRAP, true, now);
		return;
	} else if (x->state == EGW_ST_WAITING_FOR_INPUT && now >= x->deadline) {
		receiver_fail(r, x, EGW_E_TIMEOUT_INPUT, true, now);
		return;
	} else if (x->state == EGW_ST_TRANSFERRING &&
		   now - x->progress_at >= t->round_ns) {
		receiver_fail(r, x, EGW_E_TIMEOUT_ROUND, true, now);
		return;
	}
	if ((x->nwin > 0 || x->wait_ack) && now >= x->next_tx)
		receiver_retransmit(r, x, now);
}

/* The order rooms yield in: by (room id, rank), which every engine of
 * every rank sees the same - an older room is never made to yield for a
 * younger one, on any pool. */
static bool
older(const struct receiver_room *a, const struct receiver_room *b)
{
	return a->room < b->room || (a->room == b->room && a->rank < b->rank);
}

/*
 * No deadlock (wound-wait): a room that has waited for memory a few retry
 * intervals - an admitted room for a resume, or the head of the admission
 * queue for its first window - makes the youngest admitted room younger
 * than itself give its blocks back and restart. Rooms only ever wait for
 * older rooms, which are never made to wait for younger ones, so there is
 * no cycle, within one pool or across the pools of a room's ranks; a
 * restarted room keeps its age and so ends up the oldest. Waiting a few
 * retry intervals first keeps a release that is about to come (a
 * delivered room the app frees) from costing a restart.
 */
static void
receiver_wound(struct egw_xfer_receiver *r, uint64_t now)
{
	uint64_t grace = 8 * r->core.conf.timers.alloc_retry_ns;
	struct receiver_room *waiter = NULL, *victim = NULL;

	if (r->qhead != QNIL && r->admit_blocked_since != 0 &&
	    now - r->admit_blocked_since >= grace)
		waiter = &r->rooms[r->qhead];
	for (uint32_t i = 0; i < r->core.nactive; i++) {
		struct receiver_room *x = &r->rooms[r->core.active[i]];

		if (admitted_live(x) && x->alloc_failing &&
		    now - x->alloc_fail_since >= grace &&
		    (waiter == NULL || older(x, waiter)))
			waiter = x;
	}
	if (waiter == NULL)
		return;
	for (uint32_t i = 0; i < r->core.nactive; i++) {
		struct receiver_room *x = &r->rooms[r->core.active[i]];

		if (admitted_live(x) && !x->alloc_pending && older(waiter, x) &&
		    (victim == NULL || older(victim, x)))
			victim = x;
	}
	if (victim == NULL)
		return;
	receiver_yield(r, victim, now);
	/* one victim per grace period: its blocks come back with its ACK */
	if (waiter->queued)
		r->admit_blocked_since = now;
	else
		waiter->alloc_fail_since = now;
}

/* A room waiting for its ACK ends without it (peer dead, shutdown): the
 * blocks go back at once; a yielding room fails with `e`. */
static void
receiver_drop_held(struct egw_xfer_receiver *r, struct receiver_room *x,
		   enum egw_err e, uint64_t now)
{
	receiver_unhold(r, x);
	if (x->restart) {
		x->restart = false;
		x->state = EGW_ST_FAILED;
		receiver_done(r, x, e);
	}
	receiver_release(r, x, now);
}

static void
receiver_on_dead(void *eng, uint32_t peer, uint64_t now)
{
	struct egw_xfer_receiver *r = eng;

	/* walk backwards: failing a room swaps the last one into its place */
	for (uint32_t i = r->core.nactive; i > 0; i--) {
		struct receiver_room *x = &r->rooms[r->core.active[i - 1]];

		if (x->peer != peer)
			continue;
		if (x->wait_ack) {
			/* its writes can no longer land: the node resets
			 * the QP or unmaps the peer's file */
			r->core.stats.quarantine_dead++;
			receiver_drop_held(r, x, EGW_E_PEER_DEAD, now);
			continue;
		}
		receiver_fail_(r, x, EGW_E_PEER_DEAD, false, true, now);
	}
	receiver_admit(r, now);
}

void
egw_xfer_receiver_peer_dead(struct egw_xfer_receiver *r, uint32_t peer,
			    uint64_t now)
{
	xfer_core_peer_dead(&r->core, peer, now, false, receiver_on_dead, r);
}

void
egw_xfer_receiver_peer_remove(struct egw_xfer_receiver *r, uint32_t peer,
			      enum egw_err e, uint64_t now)
{
	for (uint32_t i = r->core.nactive; i > 0; i--) {
		struct receiver_room *x = &r->rooms[r->core.active[i - 1]];

		/* a quarantined room already said ABORT: its ACK ends it */
		if (x->peer == peer && x->state != EGW_ST_FAILED)
			receiver_fail(r, x, e, true, now);
	}
	receiver_admit(r, now);
}

uint32_t
egw_xfer_receiver_peer_rooms(const struct egw_xfer_receiver *r, uint32_t peer)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->core.nactive; i++)
		n += r->rooms[r->core.active[i]].peer == peer;
	return n;
}

void
egw_xfer_receiver_peer_del(struct egw_xfer_receiver *r, uint32_t peer)
{
	xfer_core_peer_del(&r->core, peer);
}

void
egw_xfer_receiver_tick(struct egw_xfer_receiver *r, uint64_t now)
{
	for (uint32_t i = r->core.nactive; i > 0; i--)
		receiver_tick_room(r, &r->rooms[r->core.active[i - 1]], now);
	xfer_core_peer_tick(&r->core, now, receiver_on_dead, r);
	receiver_wound(r, now);
	admit_recount(r);
	receiver_admit(r, now);
}

uint64_t
egw_xfer_receiver_next_deadline(const struct egw_xfer_receiver *r, uint64_t now)
{
	/* rooms open or queued for admission have timers of their own */
	if (r->core.nactive > 0 || r->qhead != QNIL)
		return now;
	return r->core.peers_due;
}

void
egw_xfer_receiver_abort_all(struct egw_xfer_receiver *r, uint64_t now)
{
	/* shutdown: the payload path goes with the engine, so nothing is
	 * held for an ACK */
	r->closing = true;
	for (uint32_t i = r->core.nactive; i > 0; i--) {
		struct receiver_room *x = &r->rooms[r->core.active[i - 1]];

		if (x->wait_ack) {
			receiver_drop_held(r, x, EGW_E_ABORTED, now);
		} else {
			receiver_fail(r, x, EGW_E_ABORTED, true, now);
		}
	}
}
