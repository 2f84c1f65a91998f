/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's per-window keys (ops.window_bind): binds and invalidations
 * are posted work, each window parked by its first block in a state -
 * binding, bound, unbinding - and advanced by the driver's completions
 * (egw_node_window_done), never waited for. A window's allocation reaches
 * the receiver only once its bind completed; its blocks go back to the
 * pool, or to the application with its room's delivery, only once its
 * invalidation completed. Parked windows form one list in posting order,
 * so with one deadline for all the head is the next to expire
 * (node_windows_expire, from egw_node_tick).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_priv.h"

static uint64_t
window_cookie(const struct node_window *w, uint32_t start)
{
	return (uint64_t)w->gen << 32 | start;
}

static void
window_park(struct egw_node *n, uint32_t b)
{
	struct node_window *w = &n->win[b];

	w->since = n->now;
	w->next = WNIL;
	w->prev = n->parked_tail;
	if (n->parked_tail != WNIL)
		n->win[n->parked_tail].next = b;
	else
		n->parked_head = b;
	n->parked_tail = b;
}

static void
window_unpark(struct egw_node *n, uint32_t b)
{
	struct node_window *w = &n->win[b];

	if (w->prev != WNIL)
		n->win[w->prev].next = w->next;
	else
		n->parked_head = w->next;
	if (w->next != WNIL)
		n->win[w->next].prev = w->prev;
	else
		n->parked_tail = w->prev;
	w->prev = w->next = WNIL;
}

/* Queue an allocation's answer for the receiver (drain_deferred): `nruns`
 * runs, or -errno. */
static void
alloc_answer(struct egw_node *n, uint64_t room, uint16_t rank, int nruns,
	     const struct egw_run *runs, const uint32_t rkeys[EGW_KIND_MAX])
{
	struct alloc_res *r;

	if (n->nalloc == n->allocq_len) {
		/* cannot happen (sized below); if it did, the room's
		 * allocation deadline fails it, and this counts it */
		n->st.alloc_overflow++;
		for (int i = 0; i < nruns; i++)
			egw_pool_free(n->pool, room, runs[i]);
		return;
	}
	r = &n->allocq[n->nalloc++];
	r->room = room;
	r->rank = rank;
	r->nruns = nruns;
	if (nruns > 0)
		memcpy(r->runs, runs, (size_t)nruns * sizeof(*runs));
	if (rkeys != NULL)
		memcpy(r->rkeys, rkeys, sizeof(r->rkeys));
	else
		memset(r->rkeys, 0, sizeof(r->rkeys));
}

static void
window_note(struct egw_node *n, const struct node_window *w, uint32_t b,
	    const char *what)
{
	node_note(n, w->peer, EGW_NODE_NOTE_WINDOW, EGW_E_TRANSPORT, true,
	     "window over blocks %u..%u of room %#lx rank %u to peer %s: %s",
	     b, b + w->count - 1, (unsigned long)w->room, w->rank,
	     n->peers[w->peer].cfg.name, what);
}

/* Post the invalidation of window `b`; its blocks wait for it, for the
 * pool (dl WNIL) or for delivery `dl`. */
static void
window_unbind(struct egw_node *n, uint32_t b, uint32_t dl)
{
	struct node_window *w = &n->win[b];

	w->state = WIN_UNBINDING;
	w->dl = dl;
	w->gen++;
	window_park(n, b);
	n->ops.window_unbind(n->ops.ctx, &(struct egw_run){ b, w->count },
			     window_cookie(w, b), n->now);
}

/* The allocation of one window: answered now (no keys, no memory, or a
 * bind the driver refused), or its bind posted and the answer parked
 * until it completes. */
void
node_window_open(struct egw_node *n, const struct egw_act *a)
{
	struct egw_run runs[EGW_XFER_MAX_RUNS];
	struct node_window *w;
	int nruns, rc;

	nruns = egw_pool_alloc_tokens(n->pool, a->room, a->tokens, runs,
				      a->max_runs);
	/* one run: when the free blocks are scattered, a smaller window now
	 * (the rest goes in further windows) rather than none */
	for (uint64_t t = a->tokens / 2;
	     n->window_keys && nruns == -ENOSPC && t > 0; t /= 2)
		nruns = egw_pool_alloc_tokens(n->pool, a->room, t, runs, 1);
	if (!n->window_keys || nruns != 1) {
		alloc_answer(n, a->room, a->rank, nruns, runs, NULL);
		return;
	}
	w = &n->win[runs[0].start];
	w->room = a->room;
	w->rank = a->rank;
	w->peer = a->peer;
	w->count = runs[0].count;
	w->keep = runs[0].count;
	w->gen++;
	rc = n->ops.window_bind(n->ops.ctx, a->peer, &runs[0], w->rkeys,
				window_cookie(w, runs[0].start), n->now);
	if (rc != 0) {
		/* nothing posted: never offered, the blocks go straight back */
		n->st.window_bind_failed++;
		egw_pool_free(n->pool, a->room, runs[0]);
		alloc_answer(n, a->room, a->rank, rc < 0 ? rc : -EIO, NULL,
			     NULL);
		return;
	}
	w->state = WIN_BINDING;
	window_park(n, runs[0].start);
}

/* The bind of window `b` completed: offered, or its blocks back. */
static void
window_bound(struct egw_node *n, uint32_t b, bool ok)
{
	struct node_window *w = &n->win[b];
	struct egw_run run = { b, w->count };

	window_unpark(n, b);
	if (ok) {
		w->state = WIN_BOUND;
		alloc_answer(n, w->room, w->rank, 1, &run, w->rkeys);
		return;
	}
	/* a failed bind admits nothing: the receiver asks again */
	n->st.window_bind_failed++;
	window_note(n, w, b, "its bind failed; not offered, asked again");
	w->state = WIN_NONE;
	egw_pool_free(n->pool, w->room, run);
	alloc_answer(n, w->room, w->rank, -EIO, NULL, NULL);
}

static void deliver_now(struct egw_node *n, uint32_t d);

/* The invalidation of window `b` completed: no write through its keys
 * can land, its blocks go on. */
static void
window_unbound(struct egw_node *n, uint32_t b, bool ok)
{
	struct node_window *w = &n->win[b];
	struct egw_run run = { b, w->count };

	if (w->state == WIN_UNBINDING)
		window_unpark(n, b);
	if (!ok) {
		/* the driver cannot say its keys are dead: never reused */
		n->st.window_overdue++;
		window_note(n, w, b, "its invalidation failed; its blocks stay "
			    "out of the pool");
		w->state = WIN_STUCK;
		return;
	}
	w->state = WIN_NONE;
	if (w->dl == WNIL) {
		egw_pool_free(n->pool, w->room, run);
		return;
	}
	/* a trimmed tail, kept out of the pool while the window admitted
	 * writes to it, goes back now; the rest is the application's */
	if (w->keep < w->count)
		egw_pool_shrink(n->pool, w->room, run, w->keep);
	if (--n->dl[w->dl].waiting == 0)
		deliver_now(n, w->dl);
}

/* A room's run is done with (freed, or delivered as delivery `dl`): its
 * window's keys are invalidated before its blocks can be anyone else's.
 * True when that was posted; false without a window there (the caller
 * lets go of the run now). */
bool
node_window_close(struct egw_node *n, const struct egw_run *run, uint32_t dl)
{
	struct node_window *w;

	if (!n->window_keys || run->start >= egw_pool_nblocks(n->pool))
		return false;
	w = &n->win[run->start];
	if (w->state != WIN_BOUND)
		return false;
	w->keep = run->count < w->count ? run->count : w->count;
	window_unbind(n, run->start, dl);
	return true;
}

/* A parked window past its deadline: a log line and a failure. An
 * overdue bind is answered as failed and invalidated; an overdue
 * invalidation keeps its blocks out of the pool until it completes. */
static void
window_expire(struct egw_node *n, uint32_t b)
{
	unsigned long long ms = WINDOW_DEADLINE_NS / 1000000ull;
	struct node_window *w = &n->win[b];
	char what[160];

	window_unpark(n, b);
	n->st.window_overdue++;
	if (w->state == WIN_BINDING) {
		n->st.window_bind_failed++;
		snprintf(what, sizeof(what), "its bind did not complete within "
			 "%llu ms; invalidated, not offered", ms);
		window_note(n, w, b, what);
		alloc_answer(n, w->room, w->rank, -ETIMEDOUT, NULL, NULL);
		window_unbind(n, b, WNIL);
		return;
	}
	snprintf(what, sizeof(what), "its invalidation did not complete "
		 "within %llu ms; its blocks stay out of the pool until it does",
		 ms);
	window_note(n, w, b, what);
	w->state = WIN_STUCK;
}

void
node_windows_expire(struct egw_node *n)
{
	while (n->parked_head != WNIL &&
	       n->now - n->win[n->parked_head].since >= WINDOW_DEADLINE_NS)
		window_expire(n, n->parked_head);
}

/* node_priv.h */
uint64_t
node_windows_next_deadline(const struct egw_node *n)
{
	return n->parked_head != WNIL ?
		       n->win[n->parked_head].since + WINDOW_DEADLINE_NS :
		       UINT64_MAX;
}

/* ---- deliveries that wait for their windows' invalidations ------------- */

static void
deliver_now(struct egw_node *n, uint32_t d)
{
	struct node_delivery *x = &n->dl[d];
	struct egw_act a = {
		.type = EGW_ACT_DELIVER, .peer = x->peer, .room = x->room,
		.rank = x->rank, .tokens = x->tokens, .runs = n->dl_runs,
		.aux_block = x->aux_block, .dummy = x->dummy,
		.waited_ns = x->waited_ns, .open_ns = x->open_ns,
	};

	for (uint32_t b = d; b != WNIL; b = n->win[b].dl_next)
		n->dl_runs[a.nruns++] = (struct egw_run){ b, n->win[b].keep };
	x->pending = false;
	n->ops.deliver(n->ops.ctx, &a, n->now);
	if (x->done)
		n->ops.done(n->ops.ctx, a.room, a.rank, x->error, false,
			    n->now);
}

/* DELIVER: the room ended, and no write may land in what the app reads -
 * the delivery waits for its windows' invalidations. */
void
node_deliver(struct egw_node *n, const struct egw_act *a)
{
	struct node_delivery *x;
	uint32_t d, prev = WNIL;

	if (!n->window_keys || a->nruns == 0) {
		n->ops.deliver(n->ops.ctx, a, n->now);
		return;
	}
	d = a->runs[0].start;
	x = &n->dl[d];
	*x = (struct node_delivery){
		.room = a->room, .waited_ns = a->waited_ns,
		.open_ns = a->open_ns, .peer = a->peer, .tokens = a->tokens,
		.aux_block = a->aux_block, .rank = a->rank, .dummy = a->dummy,
		.pending = true,
	};
	n->last_dl = d;
	for (uint32_t i = 0; i < a->nruns; i++) {
		struct node_window *w = &n->win[a->runs[i].start];

		if (prev != WNIL)
			n->win[prev].dl_next = a->runs[i].start;
		prev = a->runs[i].start;
		x->waiting++; /* no completion before the last is posted */
		if (!node_window_close(n, &a->runs[i], d)) {
			w->keep = a->runs[i].count; /* no window there */
			x->waiting--;
		}
		w->dl_next = WNIL;
	}
	if (x->waiting == 0)
		deliver_now(n, d);
}

/* DONE: after its room's DELIVER, if that waits. */
void
node_done(struct egw_node *n, const struct egw_act *a, bool is_sender)
{
	struct node_delivery *x = n->window_keys && n->last_dl != WNIL
				  ? &n->dl[n->last_dl] : NULL;

	if (!is_sender && x != NULL && x->pending && x->room == a->room &&
	    x->rank == a->rank && !x->done) {
		x->done = true;
		x->error = a->error;
		return;
	}
	n->ops.done(n->ops.ctx, a->room, a->rank, a->error, is_sender, n->now);
}

/* The window and delivery tables, sized at create: nothing is allocated
 * while windows come and go. */
int
node_windows_create(struct egw_node *n, uint32_t max_runs)
{
	uint32_t nb = egw_pool_nblocks(n->pool);

	n->win = calloc(nb, sizeof(*n->win));
	n->dl = calloc(nb, sizeof(*n->dl));
	n->dl_runs = calloc(max_runs, sizeof(*n->dl_runs));
	if (n->win == NULL || n->dl == NULL || n->dl_runs == NULL)
		return -ENOMEM;
	for (uint32_t b = 0; b < nb; b++)
		n->win[b].prev = n->win[b].next = n->win[b].dl_next = WNIL;
	n->parked_head = n->parked_tail = n->last_dl = WNIL;
	return 0;
}

void
egw_node_window_done(struct egw_node *n, uint64_t cookie, bool ok,
		     uint64_t now)
{
	uint32_t b = (uint32_t)cookie;
	struct node_window *w;

	n->now = now;
	w = n->window_keys && b < egw_pool_nblocks(n->pool) ? &n->win[b] : NULL;
	if (w == NULL || window_cookie(w, b) != cookie) {
		n->st.window_stale++; /* a post given up on, or none of ours */
		return;
	}
	if (w->state == WIN_BINDING)
		window_bound(n, b, ok);
	else if (w->state == WIN_UNBINDING || w->state == WIN_STUCK)
		window_unbound(n, b, ok);
	else
		n->st.window_stale++;
	node_drain_deferred(n);
}

uint32_t
egw_node_windows_parked(const struct egw_node *n)
{
	uint32_t c = 0;

	for (uint32_t b = n->parked_head; n->window_keys && b != WNIL;
	     b = n->win[b].next)
		c++;
	return c;
}

/* node_priv.h */
uint32_t
node_windows_parked_for(const struct egw_node *n, uint32_t peer)
{
	uint32_t c = 0;

	for (uint32_t b = n->parked_head; n->window_keys && b != WNIL;
	     b = n->win[b].next)
		c += n->win[b].peer == peer;
	return c;
}
