/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egw_pattern.h"
#include "xfer_harness.h"

enum w_ev_type { EV_MSG_TO_RX, EV_MSG_TO_TX, EV_WDONE, EV_ALLOC };

struct w_ev {
	uint64_t at, seq;
	enum w_ev_type type;
	uint16_t rank;             /* engine index */
	uint16_t room_rank;        /* EV_ALLOC: the room's rank */
	bool ok, held;
	uint64_t cookie;
	uint64_t room;
	int nruns;                 /* EV_ALLOC: runs, or -errno */
	struct egw_run runs[EGW_XFER_MAX_RUNS];
	struct egw_msg msg;
	struct egw_write *late;    /* EV_WDONE with late_writes: the writes,
				    * which land when they complete */
	uint32_t nlate;
};

struct w_ep {
	struct world *w;
	int who;
};

static struct w_ep eps[W_MAX_RANKS + 1]; /* emit contexts; tests are serial */

static uint32_t
w_rand(struct world *w)
{
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(w->rng >> 33);
}

/* ---- event heap -------------------------------------------------------- */

static bool
ev_before(const struct w_ev *a, const struct w_ev *b)
{
	return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void
ev_push(struct world *w, struct w_ev *e)
{
	uint32_t i;

	if (w->nev == w->cap_ev) {
		w->cap_ev = w->cap_ev ? 2 * w->cap_ev : 1024;
		w->ev = realloc(w->ev, w->cap_ev * sizeof(*w->ev));
	}
	e->seq = w->ev_seq++;
	i = w->nev++;
	while (i > 0 && ev_before(e, &w->ev[(i - 1) / 2])) {
		w->ev[i] = w->ev[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->ev[i] = *e;
}

static void
ev_pop(struct world *w, struct w_ev *out)
{
	struct w_ev last;
	uint32_t i = 0;

	*out = w->ev[0];
	last = w->ev[--w->nev];
	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= w->nev)
			break;
		if (c + 1 < w->nev && ev_before(&w->ev[c + 1], &w->ev[c]))
			c++;
		if (!ev_before(&w->ev[c], &last))
			break;
		w->ev[i] = w->ev[c];
		i = c;
	}
	if (w->nev > 0)
		w->ev[i] = last;
}

/* ---- pattern (lib/pattern) -------------------------------------------- */

static void
fill_src(struct world *w, uint64_t room, uint32_t total,
	 const struct egw_run *runs, int n)
{
	if (egw_pattern_fill(w->src_pool, room, total, runs, (uint32_t)n) != 0)
		w->pool_errors++;
}

uint64_t
w_pattern_bytes(const struct world *w, uint32_t total, bool dummy)
{
	uint64_t per = 0;

	for (int k = EGW_KIND_EMB; k < EGW_KIND_AUX; k++)
		per += egw_pool_geom_unit_bytes(&w->geom, (enum egw_kind)k);
	return (dummy ? 0 : per * total) + w->geom.aux_bytes;
}

/* Check every byte the receiver got, in token order through its runs. */
/* The canary's ledger: who owns each destination block, as the receiver's
 * allocations, frees, shrinks and deliveries say (0: nobody). */
static void
shadow_set(struct world *w, int rank, struct egw_run run, uint64_t owner)
{
	for (uint32_t b = 0; b < run.count; b++)
		w->blk_owner[rank][run.start + b] = owner;
}

static void
verify_delivery(struct world *w, int rank, const struct egw_act *a)
{
	const struct egw_pool_geom *g = &w->geom;
	struct egw_pool *p = w->dst_pool[rank];
	uint32_t bad = 0, blocks = 0;

	for (uint32_t i = 0; i < a->nruns; i++)
		blocks += a->runs[i].count;
	/* exactly the blocks that cover total (aux-only: one): nothing more
	 * is held */
	if (blocks != (a->dummy ? 1 : egw_pool_geom_blocks_for(g, a->tokens)))
		bad++;
	bad += (uint32_t)egw_pattern_check(p, a->room, a->tokens, a->runs,
					   a->nruns, a->aux_block, a->dummy);
	if (!a->dummy)
		w->verified_tokens += a->tokens;
	if (bad && getenv("W_DEBUG"))
		fprintf(stderr, "bad delivery room=%lu total=%u nruns=%u blocks=%u bad=%u\n",
			(unsigned long)a->room, a->tokens, a->nruns, blocks, bad);
	w->bad_bytes += bad;
	w->deliveries++;
	w->last_open_ns = a->open_ns;
	w->last_deliver_at = w->now;
	w->delivered_bytes += w_pattern_bytes(w, a->tokens, a->dummy);
	/* the consumer is done with the data: blocks go back to the pool */
	for (uint32_t i = 0; i < a->nruns; i++) {
		shadow_set(w, rank, a->runs[i], 0);
		if (egw_pool_free(p, a->room, a->runs[i]) != 0)
			w->pool_errors++;
	}
}

/* memcpy one batch of writes with the checks an rkey would impose */
static void
do_writes(struct world *w, int rank, uint64_t room,
	  const struct egw_write *writes, uint32_t nwrites)
{
	struct egw_pool *dp = w->dst_pool[rank];

	for (uint32_t i = 0; i < nwrites; i++) {
		const struct egw_write *x = &writes[i];
		enum egw_kind k = (enum egw_kind)x->kind;
		uint8_t *s = egw_pool_addr(w->src_pool, k, x->src_block, x->src_token);
		uint8_t *d = egw_pool_addr(dp, k, x->dst_block, x->dst_token);
		uint8_t *send = (uint8_t *)egw_pool_region(w->src_pool, k) +
				egw_pool_geom_region_bytes(egw_pool_geom(
								   w->src_pool),
							   k);
		uint8_t *dend = (uint8_t *)egw_pool_region(dp, k) +
				egw_pool_geom_region_bytes(egw_pool_geom(dp),
							   k);

		if (s == NULL || d == NULL || s + x->bytes > send ||
		    d + x->bytes > dend) {
			w->oob_writes++; /* what an rkey check would refuse */
			continue;
		}
		/* the canary: a write into blocks the room no longer owns
		 * (freed, or another room's) */
		{
			uint32_t bt = egw_pool_geom(dp)->block_tokens;
			uint32_t nb = x->tokens == 0 ? 1 : (x->tokens + bt - 1) / bt;

			for (uint32_t b = 0; b < nb; b++)
				if (w->blk_owner[rank][x->dst_block + b] != room) {
					w->foreign_writes++;
					break;
				}
		}
		memcpy(d, s, x->bytes);
	}
}

/* ---- emit -------------------------------------------------------------- */

static void
log_act(struct world *w, int who, const struct egw_act *a)
{
	struct w_log *l;

	if (!w->keep_log)
		return;
	if (w->nlog == w->cap_log) {
		w->cap_log = w->cap_log ? 2 * w->cap_log : 1024;
		w->log = realloc(w->log, w->cap_log * sizeof(*w->log));
	}
	l = &w->log[w->nlog++];
	memset(l, 0, sizeof(*l));
	l->who = who;
	l->act = *a;
	l->at = w->now;
	if (a->msg != NULL)
		l->msg = *a->msg;
	for (uint32_t i = 0; a->type == EGW_ACT_POST_WRITES && i < a->nwrites; i++) {
		if (a->writes[i].kind == EGW_KIND_EMB)
			l->emb_tokens += a->writes[i].tokens;
		if (a->writes[i].kind == EGW_KIND_AUX)
			l->aux_writes++;
	}
	l->dst_engine = a->peer - W_SENDER_PEER_BASE;
	l->act.msg = NULL;
	l->act.writes = NULL;
	l->act.runs = NULL;
}

static void
net_send(struct world *w, enum w_ev_type t, uint16_t rank,
	 const struct egw_msg *m)
{
	struct w_ev e = { .type = t, .rank = rank, .msg = *m };
	int copies = 1;

	/* what lib/node does: the datagram's sequence number, which only
	 * grows per sender (one counter for all is that too) */
	e.msg.seq = ++w->seq_out;

	if (w->net.cut_mask & (1u << rank))
		return;
	if (w->net.drop_pct && w_rand(w) % 100 < w->net.drop_pct) {
		w->msgs_dropped++;
		return;
	}
	if (w->net.dup_pct && w_rand(w) % 100 < w->net.dup_pct) {
		w->msgs_duped++;
		copies = 2;
	}
	for (int i = 0; i < copies; i++) {
		e.at = w->now + w->net.latency_ns +
		       (w->net.jitter_ns ? w_rand(w) % w->net.jitter_ns : 0);
		ev_push(w, &e);
	}
}

static void
add_result(struct world *w, int who, const struct egw_act *a)
{
	if (w->nres == w->cap_res) {
		w->cap_res = w->cap_res ? 2 * w->cap_res : 256;
		w->res = realloc(w->res, w->cap_res * sizeof(*w->res));
	}
	w->res[w->nres++] = (struct w_room_result){ a->room, who, a->error,
						    w->now };
}

static void
emit(void *ctx, const struct egw_act *a)
{
	struct w_ep *ep = ctx;
	struct world *w = ep->w;
	struct egw_pool *pool = ep->who < 0 ? w->src_pool : w->dst_pool[ep->who];

	log_act(w, ep->who, a);
	switch (a->type) {
	case EGW_ACT_SEND:
		if (ep->who < 0) /* sender -> rank (peer id - 1) */
			net_send(w, EV_MSG_TO_RX,
				 (uint16_t)(a->peer - W_SENDER_PEER_BASE), a->msg);
		else
			net_send(w, EV_MSG_TO_TX, (uint16_t)ep->who, a->msg);
		break;
	case EGW_ACT_POST_WRITES: {
		uint16_t rank = (uint16_t)(a->peer - W_SENDER_PEER_BASE);
		uint64_t bytes = 0;
		struct w_ev e = { .type = EV_WDONE, .cookie = a->cookie,
				  .ok = true, .rank = rank };

		for (uint32_t i = 0; i < a->nwrites; i++)
			bytes += a->writes[i].bytes;
		if (w->net.late_writes) {
			/* a late writer: the bytes land at completion, each
			 * batch on its own time (completions may reorder) */
			e.late = malloc(a->nwrites * sizeof(*e.late));
			memcpy(e.late, a->writes, a->nwrites * sizeof(*e.late));
			e.nlate = a->nwrites;
			e.room = a->room;
			e.at = w->now + w->net.write_ns +
			       w->net.write_ns_per_kb * (bytes / 1024);
		} else {
			do_writes(w, rank, a->room, a->writes, a->nwrites);
			/* one link per destination: batches complete in
			 * order, each after the one before it, as on an RC
			 * queue pair */
			e.at = (w->link_busy[rank] > w->now ? w->link_busy[rank]
							    : w->now) +
			       w->net.write_ns +
			       w->net.write_ns_per_kb * (bytes / 1024);
			w->link_busy[rank] = e.at;
		}
		e.held = w->net.hold_writes || (w->net.hold_mask & (1u << rank)) ||
			 (w->net.cut_mask & (1u << rank));
		if (e.held)
			e.at = UINT64_MAX;
		ev_push(w, &e);
		break;
	}
	case EGW_ACT_ALLOC: {
		struct w_ev e = { .type = EV_ALLOC, .rank = (uint16_t)ep->who,
				  .room_rank = a->rank, .room = a->room,
				  .at = w->now + w->alloc_delay_ns };
		uint32_t maxr = a->max_runs;
		if (w->fail_next_alloc[ep->who]) {
			w->fail_next_alloc[ep->who] = false;
			e.nruns = -ENOSPC;
		} else {
			e.nruns = egw_pool_alloc_tokens(pool, a->room, a->tokens,
						    e.runs, maxr);
			for (int i = 0; i < e.nruns; i++)
				shadow_set(w, ep->who, e.runs[i], a->room);
		}
		ev_push(w, &e);
		break;
	}
	case EGW_ACT_FREE:
		for (uint32_t i = 0; i < a->nruns; i++) {
			if (egw_pool_free(pool, a->room, a->runs[i]) != 0)
				w->pool_errors++;
			else if (ep->who >= 0)
				shadow_set(w, ep->who, a->runs[i], 0);
		}
		break;
	case EGW_ACT_SHRINK:
		if (egw_pool_shrink(pool, a->room, a->runs[0], a->keep) != 0)
			w->pool_errors++;
		else if (ep->who >= 0)
			shadow_set(w, ep->who, (struct egw_run){
				a->runs[0].start + a->keep,
				a->runs[0].count - a->keep }, 0);
		break;
	case EGW_ACT_DELIVER:
		verify_delivery(w, ep->who, a);
		break;
	case EGW_ACT_DONE:
		add_result(w, ep->who, a);
		break;
	case EGW_ACT_PEER_DEAD:
	case EGW_ACT_PEER_FENCE: /* the tests fence by hand (peer_dead) */
		break;
	}
}

/* ---- lifecycle --------------------------------------------------------- */

void
w_conf_default(struct w_conf *c)
{
	struct egw_pool_geom g = {
		.capacity_tokens = 1024 * 128, .block_tokens = 128,
		.hidden_size = 8, .dtype_bytes = 2, .mrope = true,
		.aux_bytes = 64,
	};

	memset(c, 0, sizeof(*c));
	c->nranks = 1;
	c->src_capacity = 1024 * 128;
	c->dst_capacity = 1024 * 128;
	c->default_tokens = 1024;
	egw_xfer_conf_default(&c->xc, &g);
	c->xc.max_rooms = 256;
	c->net.latency_ns = 10000;
	c->net.write_ns = 50000;
	c->seed = 1;
}

struct world *
w_create(const struct w_conf *c)
{
	struct world *w = calloc(1, sizeof(*w));
	struct egw_xfer_conf xc = c->xc;
	struct egw_policy pol;
	struct egw_pool_geom g = c->xc.geom;

	w->nranks = c->nranks;
	w->net = c->net;
	w->rng = c->seed * 2654435761u + 1;
	w->tick_ns = 100000;
	w->keep_log = true;
	w->geom = g;
	g.capacity_tokens = c->src_capacity;
	/* pools as the gateway runs them: with the single-block cache */
	if (egw_pool_create(&g, NULL, 0, &w->src_pool) != 0 ||
	    egw_pool_cache_enable(w->src_pool, EGW_POOL_CACHE_DEFAULT) != 0)
		abort();
	eps[0] = (struct w_ep){ w, -1 };
	xc.emit = emit;
	xc.emit_ctx = &eps[0];
	xc.geom = g;
	if (egw_xfer_sender_create(&xc, &w->tx) != 0)
		abort();
	if (c->policy != NULL)
		pol = *c->policy;
	else
		egw_policy_init_fixed(&pol, g.block_tokens, c->default_tokens);
	g.capacity_tokens = c->dst_capacity;
	for (uint16_t r = 0; r < c->nranks; r++) {
		w->blk_owner[r] = calloc(g.capacity_tokens / g.block_tokens,
					 sizeof(*w->blk_owner[r]));
		if (w->blk_owner[r] == NULL ||
		    egw_pool_create(&g, NULL, 0, &w->dst_pool[r]) != 0 ||
		    egw_pool_cache_enable(w->dst_pool[r], EGW_POOL_CACHE_DEFAULT) != 0)
			abort();
		eps[r + 1] = (struct w_ep){ w, r };
		xc.emit_ctx = &eps[r + 1];
		xc.geom = g;
		if (egw_xfer_receiver_create(&xc, &pol, &w->rx[r]) != 0)
			abort();
		egw_xfer_receiver_peer_add(w->rx[r], W_RECEIVER_PEER, 0);
		egw_xfer_sender_peer_add(w->tx, W_SENDER_PEER_BASE + r,
				    g.capacity_tokens / g.block_tokens, 0);
	}
	return w;
}

void
w_destroy(struct world *w)
{
	for (uint32_t i = 0; i < w->nev; i++)
		free(w->ev[i].late);
	egw_xfer_sender_destroy(w->tx);
	egw_pool_destroy(w->src_pool);
	for (uint16_t r = 0; r < w->nranks; r++) {
		egw_xfer_receiver_destroy(w->rx[r]);
		egw_pool_destroy(w->dst_pool[r]);
		free(w->blk_owner[r]);
	}
	free(w->ev);
	free(w->log);
	free(w->res);
	free(w);
}

int
w_input(struct world *w, uint64_t room, uint32_t total)
{
	struct egw_run runs[64];
	int n = egw_pool_alloc_tokens(w->src_pool, room, total, runs, 64);
	int rc;

	if (n < 0)
		return n;
	fill_src(w, room, total, runs, n);
	rc = egw_xfer_sender_input(w->tx, room, total, runs, (uint32_t)n,
				   w->now);
	if (rc != 0)
		for (int i = 0; i < n; i++)
			egw_pool_free(w->src_pool, room, runs[i]);
	return rc;
}

int
w_open(struct world *w, uint64_t room, uint32_t input_total, bool dummy_last)
{
	int rc = egw_xfer_sender_open(w->tx, room, w->nranks, w->now);

	if (rc != 0)
		return rc;
	for (uint16_t r = 0; r < w->nranks; r++) {
		bool dummy = dummy_last && r == w->nranks - 1 && w->nranks > 1;

		rc = egw_xfer_receiver_open(w->rx[r], room, r, w->nranks,
				       W_RECEIVER_PEER, dummy, w->now);
		if (rc != 0)
			return rc;
		w->expected_bytes += input_total ?
			w_pattern_bytes(w, input_total, dummy) : 0;
	}
	return input_total ? w_input(w, room, input_total) : 0;
}

int
w_open_on(struct world *w, uint64_t room, uint32_t total, uint16_t engine)
{
	int rc = egw_xfer_sender_open(w->tx, room, 1, w->now);

	if (rc != 0)
		return rc;
	rc = egw_xfer_receiver_open(w->rx[engine], room, 0, 1, W_RECEIVER_PEER,
			       false, w->now);
	if (rc != 0)
		return rc;
	w->expected_bytes += w_pattern_bytes(w, total, false);
	return w_input(w, room, total);
}

int
w_to_receiver(struct world *w, uint16_t rank, const struct egw_msg *m)
{
	return egw_xfer_receiver_on_msg(w->rx[rank], W_RECEIVER_PEER, m,
					w->now);
}

int
w_to_sender(struct world *w, uint16_t rank, const struct egw_msg *m)
{
	return egw_xfer_sender_on_msg(w->tx, W_SENDER_PEER_BASE + rank, m,
				      w->now);
}

static void
dispatch(struct world *w, struct w_ev *e)
{
	switch (e->type) {
	case EV_MSG_TO_RX:
		w_to_receiver(w, e->rank, &e->msg);
		break;
	case EV_MSG_TO_TX:
		w_to_sender(w, e->rank, &e->msg);
		break;
	case EV_WDONE:
		if (w->net.cut_mask & (1u << e->rank)) {
			/* a cut link completes nothing until it is back */
			e->held = true;
			e->at = UINT64_MAX;
			ev_push(w, e);
			break;
		}
		if (e->late != NULL) {
			if (e->ok)
				do_writes(w, e->rank, e->room, e->late, e->nlate);
			free(e->late);
		}
		egw_xfer_sender_writes_done(w->tx, e->cookie, e->ok, w->now);
		break;
	case EV_ALLOC:
		egw_xfer_receiver_alloc_done(w->rx[e->rank], e->room,
					     e->room_rank, e->runs, e->nruns,
					     w->now);
		break;
	}
}

static bool
engines_idle(const struct world *w)
{
	struct egw_xfer_stats st;

	egw_xfer_sender_get_stats(w->tx, &st);
	if (st.rooms_active)
		return false;
	for (uint16_t r = 0; r < w->nranks; r++) {
		egw_xfer_receiver_get_stats(w->rx[r], &st);
		if (st.rooms_active)
			return false;
	}
	return true;
}

static void
tick_all(struct world *w)
{
	egw_xfer_sender_tick(w->tx, w->now);
	for (uint16_t r = 0; r < w->nranks; r++)
		egw_xfer_receiver_tick(w->rx[r], w->now);
}

static void
run(struct world *w, uint64_t end, bool stop_when_idle)
{
	uint64_t next_tick = w->now + w->tick_ns;

	for (;;) {
		bool have = w->nev > 0 && w->ev[0].at != UINT64_MAX;
		uint64_t t = have && w->ev[0].at < next_tick ? w->ev[0].at
							      : next_tick;

		if (stop_when_idle && !have && engines_idle(w))
			return;
		if (t > end) {
			w->now = end;
			return;
		}
		w->now = t;
		if (have && w->ev[0].at == t) {
			struct w_ev e;

			ev_pop(w, &e);
			dispatch(w, &e);
		} else {
			tick_all(w);
			next_tick = w->now + w->tick_ns;
		}
	}
}

void
w_run(struct world *w, uint64_t limit_ns)
{
	run(w, w->now + limit_ns, true);
}

void
w_run_for(struct world *w, uint64_t ns)
{
	run(w, w->now + ns, false);
}

void
w_release_writes(struct world *w, bool ok)
{
	for (uint32_t i = 0; i < w->nev; i++)
		if (w->ev[i].held) {
			w->ev[i].held = false;
			w->ev[i].ok = ok;
			w->ev[i].at = w->now;
		}
	/* restore heap order after changing keys */
	{
		uint32_t n = w->nev;
		struct w_ev *all = malloc(n * sizeof(*all));

		memcpy(all, w->ev, n * sizeof(*all));
		w->nev = 0;
		for (uint32_t i = 0; i < n; i++)
			ev_push(w, &all[i]);
		free(all);
	}
}

const struct w_room_result *
w_result(const struct world *w, uint64_t room, int who)
{
	for (uint32_t i = 0; i < w->nres; i++)
		if (w->res[i].room == room && w->res[i].who == who)
			return &w->res[i];
	return NULL;
}

uint32_t
w_count_sends(const struct world *w, int who, uint8_t type)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == who && w->log[i].act.type == EGW_ACT_SEND &&
		    w->log[i].msg.type == type)
			n++;
	return n;
}

uint32_t
w_count_acts(const struct world *w, int who, enum egw_act_type t)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == who && w->log[i].act.type == t)
			n++;
	return n;
}

uint32_t
w_blocks_in_use(const struct world *w, int who)
{
	struct egw_pool_stats st;

	egw_pool_get_stats(who < 0 ? w->src_pool : w->dst_pool[who], &st);
	return st.blocks_in_use;
}
