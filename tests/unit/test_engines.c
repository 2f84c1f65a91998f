/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway's side of the client interface, driven as a client would:
 * commands into the submission ring, completions and slots read back,
 * with a fake gateway behind the room operations that records every call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "egw_engines.h"

/* ---- the fake gateway ------------------------------------------------------ */

struct fake {
	int enospc_left;           /* send_open: -ENOSPC this many times */
	int commit_rc, recv_open_rc;
	uint32_t last_peer_slot;   /* recv_open: the node slot it was given */
	uint32_t send_client;	   /* send_open: the client it was asked for */
	uint32_t runs_per_open;    /* send_open answers this many runs */
	uint32_t next_block;
	uint64_t blocks_out;       /* given by send_open, not yet freed */
	uint32_t send_opens, commits, send_aborts, send_aborts_committed;
	uint32_t recv_opens, recv_aborts, releases, wakes, lost;
	uint64_t released_blocks;
	uint32_t last_lost;
	const char *lost_why;
	struct egw_engines *srv;   /* for calls back from inside an op */
	bool done_inside_abort;
	uint64_t last_room;        /* the room id the last OPEN named */
	uint32_t admission_queue;  /* what pool_state says */
	uint32_t held_long;        /* held_long calls */
	uint64_t held_room;
	/* the node's room table: opens past table_slots rooms are refused
	 * NO_SLOT (0: no limit); the test frees a slot as a room ends */
	uint32_t table_slots, table_used;
	uint64_t opened[32]; /* rooms the table took, in order */
	uint32_t nopened;
	uint32_t slot_notes;
	char slot_note[200]; /* the last slot_note text */
};

/* The table takes the room (true) or is full. */
static bool
f_table_take(struct fake *f, uint64_t room)
{
	if (f->table_slots != 0 && f->table_used == f->table_slots)
		return false;
	f->table_used++;
	if (f->nopened < 32)
		f->opened[f->nopened++] = room;
	return true;
}

static uint64_t
blocks_of(const struct egw_attach_run *r, uint32_t n)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < n; i++)
		b += r[i].count;
	return b;
}

static int
f_send_open(void *ctx, uint32_t client, uint64_t room, uint16_t nranks,
	    uint32_t total, int32_t mrope_delta, uint64_t cookie,
	    struct egw_attach_run *runs, uint32_t max_runs)
{
	struct fake *f = ctx;
	uint32_t blocks = (total + 127) / 128, n = f->runs_per_open;

	(void)nranks; (void)mrope_delta; (void)cookie;
	f->send_client = client;
	f->send_opens++;
	f->last_room = room;
	if (f->table_slots != 0 && f->table_used == f->table_slots)
		return -EGW_E_NO_SLOT;
	if (f->enospc_left > 0) {
		f->enospc_left--;
		return -ENOSPC;
	}
	if (n > blocks)
		n = blocks;
	if (n > max_runs)
		return -E2BIG;
	(void)f_table_take(f, room);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = blocks / n + (i < blocks % n);

		/* runs apart from each other, as a fragmented pool gives */
		runs[i].start = f->next_block;
		runs[i].count = c;
		f->next_block += c + 1;
	}
	f->blocks_out += blocks;
	return (int)n;
}

static int
f_send_commit(void *ctx, uint64_t room, uint32_t total,
	      const struct egw_attach_run *runs, uint32_t nruns)
{
	struct fake *f = ctx;

	(void)room; (void)total;
	f->commits++;
	if (f->commit_rc == 0)
		f->blocks_out -= blocks_of(runs, nruns); /* the engine's now */
	return f->commit_rc;
}

static void
f_send_abort(void *ctx, uint64_t room, bool committed,
	     const struct egw_attach_run *runs, uint32_t nruns)
{
	struct fake *f = ctx;

	f->send_aborts++;
	f->send_aborts_committed += committed;
	f->blocks_out -= blocks_of(runs, nruns);
	if (f->done_inside_abort) /* the engine reports the end at once */
		egw_engines_room_done(f->srv, EGW_SIDE_SEND, room, 0,
				      EGW_E_ABORTED);
}

static int
f_recv_open(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
	    uint32_t peer, bool aux_only)
{
	struct fake *f = ctx;

	(void)rank;
	(void)nranks;
	(void)aux_only;
	f->recv_opens++;
	f->last_peer_slot = peer;
	f->last_room = room;
	if (f->recv_open_rc == 0 && !f_table_take(f, room))
		return -EGW_E_NO_SLOT;
	return f->recv_open_rc;
}

static void
f_recv_abort(void *ctx, uint64_t room, uint16_t rank)
{
	struct fake *f = ctx;

	f->recv_aborts++;
	if (f->table_used > 0)
		f->table_used--;
	if (f->done_inside_abort)
		egw_engines_room_done(f->srv, EGW_SIDE_RECV, room, rank,
				      EGW_E_ABORTED);
}

static void
f_recv_release(void *ctx, uint64_t room, uint16_t rank,
	       const struct egw_attach_run *runs, uint32_t nruns)
{
	struct fake *f = ctx;

	(void)room; (void)rank;
	f->releases++;
	f->released_blocks += blocks_of(runs, nruns);
}

static void
f_wake(void *ctx, uint32_t client)
{
	(void)client;
	((struct fake *)ctx)->wakes++;
}

static void
f_lost(void *ctx, uint32_t client, const char *why)
{
	struct fake *f = ctx;

	f->lost++;
	f->last_lost = client;
	f->lost_why = why;
}

static void
f_pool_state(void *ctx, struct egw_attach_stats *st)
{
	struct fake *f = ctx;

	st->pool_blocks = 1000;
	st->free_blocks = 1000 - (uint32_t)f->blocks_out;
	st->quarantined_blocks = 3;
	st->admission_queue = f->admission_queue;
}

static void
f_held_long(void *ctx, uint32_t client, uint64_t room, uint64_t held_ns)
{
	struct fake *f = ctx;

	(void)client; (void)held_ns;
	f->held_long++;
	f->held_room = room;
}

static uint32_t
f_slots_free(void *ctx, enum egw_attach_side side)
{
	struct fake *f = ctx;

	(void)side;
	return f->table_slots == 0 ? UINT32_MAX :
				     f->table_slots - f->table_used;
}

static void
f_slot_note(void *ctx, uint32_t client, const char *text)
{
	struct fake *f = ctx;

	(void)client;
	f->slot_notes++;
	snprintf(f->slot_note, sizeof(f->slot_note), "%s", text);
}

static const struct egw_engines_ops fake_ops = {
	.send_open = f_send_open,
	.send_commit = f_send_commit,
	.send_abort = f_send_abort,
	.recv_open = f_recv_open,
	.recv_abort = f_recv_abort,
	.recv_release = f_recv_release,
	.wake = f_wake,
	.client_lost = f_lost,
	.pool_state = f_pool_state,
	.held_long = f_held_long,
	.slots_free = f_slots_free,
	.slot_note = f_slot_note,
};

/* ---- a client of it ---------------------------------------------------------- */

#define MS 1000000ull

struct world {
	struct fake f;
	struct egw_engines *srv;
	void *area;
	size_t bytes;
	struct egw_attach_map m;   /* the client's view */
	int cid;
	uint64_t now;
};

static const struct egw_engines_peer w_two_peers[] = {
	{ .id = 1, .slot = 0, .name = "enc-0", .ready = true },
	{ .id = 2, .slot = 1, .name = "enc-1", .ready = true },
};

static uint32_t w_max_waiting; /* the next w_init's max_waiting */
/* the next w_init's content cache: entries, blocks kept unheld */
static uint32_t w_cache_entries, w_cache_blocks;
static uint64_t w_held_warn_ns;
static uint64_t w_lease_ns;    /* the next w_init's lease */
/* the next w_init's wait for a room-table slot */
static uint32_t w_slot_queue;
static uint64_t w_admit_ns;

static void
w_init(struct world *w, uint32_t cq_entries, uint32_t max_rooms)
{
	struct egw_engines_conf c = {
		.max_clients = 4,
		.max_rooms = max_rooms,
		.max_total_tokens = 1u << 20,
		.max_peers = 8,
		.peer_wait_ns = 50 * MS,
		.encode = true,
		.language = true,
		.alloc_ns = 100 * MS,
		.lease_ns = w_lease_ns,
		.budget = 64,
		.max_waiting = w_max_waiting,
		.ops = &fake_ops,
		.cache_entries = w_cache_entries,
		.cache_blocks = w_cache_blocks,
		.cache_max_runs = 4,
		.held_warn_ns = w_held_warn_ns,
		.slot_queue = w_slot_queue,
		.admit_ns = w_admit_ns,
	};

	memset(w, 0, sizeof(*w));
	w->f.runs_per_open = 2;
	c.ctx = &w->f;
	CU_ASSERT_EQUAL_FATAL(egw_engines_create(&c, &w->srv), 0);
	w->f.srv = w->srv;
	w->bytes = egw_attach_area_bytes(16, cq_entries, 8, 4, 8);
	w->area = calloc(1, w->bytes);
	CU_ASSERT_FATAL(w->area != NULL);
	CU_ASSERT_EQUAL_FATAL(egw_attach_area_init(w->area, 16, cq_entries, 8,
						   4, 8),
			      0);
	CU_ASSERT_EQUAL_FATAL(egw_attach_map_init(&w->m, w->area, w->bytes), 0);
	w->cid = egw_engines_add(w->srv, w->area, w->bytes, 0);
	CU_ASSERT_EQUAL_FATAL(w->cid, 0);
	/* two static peers, as a configuration names them: ids 1 and 2 in
	 * the node's slots 0 and 1 */
	CU_ASSERT_EQUAL_FATAL(egw_engines_peers_set(w->srv, w_two_peers, 2, 0),
			      0);
}

static void
w_fini(struct world *w)
{
	egw_engines_destroy(w->srv, w->now);
	free(w->area);
}

static void
w_cmd(struct world *w, struct egw_attach_cmd c)
{
	CU_ASSERT_EQUAL(egw_attach_ring_put(&w->m.sq, &c), 0);
	egw_engines_poll(w->srv, w->now);
}

/* The next completion (it must be there). */
static struct egw_attach_cqe
w_cqe(struct world *w)
{
	struct egw_attach_cqe e;

	memset(&e, 0xee, sizeof(e));
	CU_ASSERT_EQUAL(egw_attach_ring_get(&w->m.cq, &e), 1);
	return e;
}

static bool
w_cq_empty(struct world *w)
{
	struct egw_attach_cqe e;

	return egw_attach_ring_get(&w->m.cq, &e) == 0;
}

static struct egw_attach_cmd
send_open(uint64_t room, uint32_t slot, uint32_t total)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = EGW_OP_SEND_OPEN;
	c.tag = room * 10 + 1;
	c.room = room;
	c.nranks = 2;
	c.total_tokens = total;
	c.slot = slot;
	return c;
}

static struct egw_attach_cmd
recv_open(uint64_t room, uint32_t slot, uint16_t rank)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = EGW_OP_RECV_OPEN;
	c.tag = room * 10 + 2;
	c.room = room;
	c.rank = rank;
	c.nranks = 2;
	c.peer_id = 2;
	c.slot = slot;
	return c;
}

static struct egw_attach_cmd
on_slot(uint8_t op, uint64_t room, uint32_t slot)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = op;
	c.tag = room * 10 + op;
	c.room = room;
	c.slot = slot;
	return c;
}

/* ---- tests --------------------------------------------------------------------- */

static void
test_encode_room_open_commit_success(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_slot *sl;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(7, 3, 1000));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.tag, 71);
	CU_ASSERT_EQUAL(e.room, 7);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(e.op, EGW_OP_SEND_OPEN);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(e.slot, 3);
	CU_ASSERT_EQUAL(e.nruns, 2);
	sl = egw_attach_slot_at(&w.m, 3);
	CU_ASSERT_EQUAL(sl->room, 7);
	CU_ASSERT_EQUAL(sl->nruns, 2);
	CU_ASSERT_EQUAL(sl->total_tokens, 1000);
	CU_ASSERT_EQUAL(sl->runs[0].count + sl->runs[1].count, 8);
	CU_ASSERT_EQUAL(sl->first_block, sl->runs[0].start);
	CU_ASSERT_EQUAL(w.f.blocks_out, 8);

	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 7, 3));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.tag, 72);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(w.f.blocks_out, 0); /* handed to the engine */
	/* a second commit is out of place */
	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 7, 3));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, -EBADFD);
	CU_ASSERT_EQUAL(e.flags, 0);

	egw_engines_room_done(w.srv, EGW_SIDE_SEND, 7, 0, 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.tag, 72); /* the commit's */
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(e.flags, 0);
	CU_ASSERT_EQUAL(sl->room, 0);
	CU_ASSERT_EQUAL(sl->state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	CU_ASSERT(w_cq_empty(&w));
	/* the slot is free again */
	w_cmd(&w, send_open(8, 3, 10));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	w_fini(&w);
}

static void
test_language_room_states_delivery_release(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_slot *sl;
	struct egw_attach_run runs[3] = { { 10, 4 }, { 20, 2 }, { 30, 1 } };

	w_init(&w, 64, 16);
	w_cmd(&w, recv_open(9, 0, 1));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(e.op, EGW_OP_RECV_OPEN);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	/* the same room and rank again, elsewhere: refused */
	w_cmd(&w, recv_open(9, 1, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EEXIST);
	/* another rank of it is fine */
	w_cmd(&w, recv_open(9, 1, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);

	egw_engines_room_state(w.srv, EGW_SIDE_RECV, 9, 1,
			       EGW_ATTACH_STATE_WAITING_FOR_INPUT, 0, 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(e.tag, 92);
	egw_engines_room_state(w.srv, EGW_SIDE_RECV, 9, 1,
			       EGW_ATTACH_STATE_TRANSFERRING, 800, 128);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(e.total_tokens, 800);
	CU_ASSERT_EQUAL(e.landed_tokens, 128);
	/* never backwards, never twice */
	egw_engines_room_state(w.srv, EGW_SIDE_RECV, 9, 1,
			       EGW_ATTACH_STATE_WAITING_FOR_INPUT, 0, 0);
	egw_engines_room_state(w.srv, EGW_SIDE_RECV, 9, 1,
			       EGW_ATTACH_STATE_TRANSFERRING, 800, 256);
	CU_ASSERT(w_cq_empty(&w));

	/* RELEASE before the data is there */
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 9, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EBADFD);

	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 9, 1, 800, runs, 3),
			0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(e.nruns, 3);
	CU_ASSERT_EQUAL(e.total_tokens, 800);
	sl = egw_attach_slot_at(&w.m, 0);
	CU_ASSERT_EQUAL(sl->first_block, 10);
	CU_ASSERT_EQUAL(sl->runs[2].start, 30);
	CU_ASSERT_EQUAL(sl->state, EGW_ATTACH_STATE_SUCCESS);
	/* a late failure report of a delivered room changes nothing */
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, 9, 1,
					      EGW_E_PEER_DEAD), 0);
	CU_ASSERT(w_cq_empty(&w));

	/* the client scribbles over its slot: the gateway frees what it
	 * delivered, not what the slot says now */
	sl->runs[0].count = 1000;
	sl->nruns = 1;
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 9, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(e.op, EGW_OP_RELEASE);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, 0);
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 7);
	CU_ASSERT_EQUAL(sl->room, 0);
	/* the other rank fails: Failed with the reason, negated */
	egw_engines_room_done(w.srv, EGW_SIDE_RECV, 9, 0, EGW_E_PEER_DEAD);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->error, -EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w_fini(&w);
}

static void
test_refusals_change_nothing(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_cmd c;
	struct egw_engines_stats st;

	w_init(&w, 64, 2);
	w_cmd(&w, send_open(5, 0, 100));
	(void)w_cqe(&w);
	/* slot busy, room exists, bad fields, wrong slot for the room */
	w_cmd(&w, send_open(6, 0, 100));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EBUSY);
	w_cmd(&w, send_open(5, 1, 100));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EEXIST);
	c = send_open(6, 1, 100);
	c.nranks = 9;
	w_cmd(&w, c);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, -EINVAL);
	CU_ASSERT_EQUAL(e.tag, c.tag);
	CU_ASSERT_EQUAL(e.flags, 0);
	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 5, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -ENOENT);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 99, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -ENOENT);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 5, 0)); /* an encode room */
	CU_ASSERT_EQUAL(w_cqe(&w).result, -ENOENT);
	c = on_slot(0x77, 5, 0);
	w_cmd(&w, c);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EOPNOTSUPP);
	/* the gateway's room limit (2) */
	w_cmd(&w, send_open(6, 1, 100));
	CU_ASSERT_EQUAL(w_cqe(&w).result, 0);
	w_cmd(&w, send_open(7, 2, 100));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EMFILE);
	/* a recv_open the gateway refuses */
	w.f.recv_open_rc = -EGW_E_UNKNOWN_PEER;
	w_cmd(&w, on_slot(EGW_OP_ABORT, 6, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	w_cmd(&w, recv_open(8, 1, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, -EGW_E_UNKNOWN_PEER);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->room, 0);
	/* the first room is untouched by all of it */
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->room, 5);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 1);
	CU_ASSERT_EQUAL(egw_engines_client_stats(w.srv, 0, &st), 0);
	CU_ASSERT_EQUAL(st.refused, 8);
	CU_ASSERT_EQUAL(st.refused_invalid, 2);
	CU_ASSERT_EQUAL(st.refused_state, 6);
	CU_ASSERT_EQUAL(egw_engines_client_stats(w.srv, 3, &st), -ENOENT);
	w_fini(&w);
}

static void
test_open_waits_for_memory_then_deadline(void)
{
	struct world w;
	struct egw_attach_cqe e;

	w_init(&w, 64, 16);
	w.f.enospc_left = 3;
	w_cmd(&w, send_open(4, 2, 300));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING); /* queued */
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	w.now += MS;
	egw_engines_poll(w.srv, w.now);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT(w_cq_empty(&w));
	egw_engines_poll(w.srv, w.now); /* the fourth try gets blocks */
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(e.nruns, 2);
	CU_ASSERT_EQUAL(w.f.send_opens, 4);

	/* no memory at all: Failed at the allocation deadline, not before */
	w.f.enospc_left = 1000;
	w_cmd(&w, send_open(5, 3, 300));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w.now += 99 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT(w_cq_empty(&w));
	w.now += 2 * MS;
	egw_engines_poll(w.srv, w.now);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_POOL_EXHAUSTED);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 3)->room, 0);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 1);
	/* a waiting room aborted: nothing to free, no more tries */
	w_cmd(&w, send_open(6, 4, 300));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 6, 4));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	w.f.send_opens = 0;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.send_opens, 0);
	CU_ASSERT_EQUAL(w.f.send_aborts, 0);
	w_fini(&w);
}

/* Backpressure: a client may have max_waiting SEND_OPENs waiting for
 * memory; one more is answered busy at once (never dropped), and once a
 * waiting room gets its blocks the next SEND_OPEN may wait again. */
static void
test_open_busy_past_the_waiting_bound(void)
{
	struct world w;
	struct egw_engines_stats st;
	struct egw_attach_cqe e;

	w_max_waiting = 2;
	w_init(&w, 64, 16);
	w_max_waiting = 0;
	w.f.enospc_left = 1000;
	w_cmd(&w, send_open(10, 0, 300));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w_cmd(&w, send_open(11, 1, 300));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w_cmd(&w, send_open(12, 2, 300));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_BUSY);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 2)->room, 0); /* slot free */
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.busy, 1);
	CU_ASSERT_EQUAL(st.alloc_waits, 2);
	/* memory comes: the waiting rooms open, and a new one may wait */
	w.f.enospc_left = 0;
	w.now += MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	w.f.enospc_left = 1000;
	w_cmd(&w, send_open(13, 2, 300));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w_fini(&w);
}

static void
test_abort_in_every_phase_frees_once(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_run run = { 50, 2 };

	w_init(&w, 64, 16);
	w.f.done_inside_abort = true; /* and the engine reports at once */
	/* open, not committed: the runs come back to be freed */
	w_cmd(&w, send_open(1, 0, 1000));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 1, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(e.tag, 15);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->error, -EGW_E_ABORTED);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->room, 0);
	CU_ASSERT_EQUAL(w.f.blocks_out, 0);
	/* committed: the engine frees */
	w_cmd(&w, send_open(2, 0, 1000));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 2, 0));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 2, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(w.f.send_aborts, 2);
	CU_ASSERT_EQUAL(w.f.send_aborts_committed, 1);
	/* language, before and after delivery */
	w_cmd(&w, recv_open(3, 0, 0));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 3, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);
	w_cmd(&w, recv_open(4, 0, 0));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 4, 0, 200, &run, 1),
			0);
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 4, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 2);
	/* the reports from inside the aborts posted nothing more */
	CU_ASSERT(w_cq_empty(&w));
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	/* the engine ends an uncommitted encode room (peer dead): its runs
	 * are freed by the server's send_abort */
	w.f.done_inside_abort = false;
	w_cmd(&w, send_open(5, 0, 1000));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.blocks_out, 8);
	egw_engines_room_done(w.srv, EGW_SIDE_SEND, 5, 0, EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(w.f.blocks_out, 0);
	w_fini(&w);
}

static void
test_detach_ends_every_room_silently(void)
{
	struct world w;
	struct egw_attach_run run = { 70, 3 };
	struct egw_engines_stats st;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(1, 0, 1000));
	w_cmd(&w, send_open(2, 1, 1000));
	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 2, 1));
	w_cmd(&w, recv_open(3, 2, 0));
	w_cmd(&w, recv_open(4, 3, 1));
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 4, 1, 300, &run, 1),
			0);
	w.f.enospc_left = 100;
	w_cmd(&w, send_open(5, 4, 1000));
	while (!w_cq_empty(&w))
		;
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 5);
	egw_engines_remove(w.srv, 0, w.now);
	CU_ASSERT(w_cq_empty(&w));
	CU_ASSERT_EQUAL(w.f.blocks_out, 0);      /* room 1's runs */
	CU_ASSERT_EQUAL(w.f.send_aborts_committed, 1);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 3);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	CU_ASSERT_EQUAL(egw_engines_attached(w.srv), 0);
	/* reports about its rooms find nothing now */
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_SEND, 2, 0, 0),
			-ENOENT);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 3, 0, 1, &run, 1),
			-ENOENT);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.rooms_opened, 5);
	CU_ASSERT_EQUAL(st.rooms_ok, 1);
	CU_ASSERT_EQUAL(st.rooms_failed, 4);
	/* the id is free for the next client */
	CU_ASSERT_EQUAL(egw_engines_add(w.srv, w.area, w.bytes, w.now), 0);
	w_fini(&w);
}

static void
test_full_completion_ring_never_blocks(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_cmd c;

	w_init(&w, 2, 16);
	for (uint32_t i = 0; i < 6; i++) {
		c = send_open(100 + i, i, 200);
		CU_ASSERT_EQUAL(egw_attach_ring_put(&w.m.sq, &c), 0);
	}
	egw_engines_poll(w.srv, w.now); /* six answers, room for two */
	CU_ASSERT_EQUAL(w.m.cq.ctl->overflow, 4);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 6);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 100);
	(void)w_cqe(&w);
	CU_ASSERT(w_cq_empty(&w));
	/* the slots still tell each room's state */
	for (uint32_t i = 0; i < 6; i++) {
		struct egw_attach_slot *sl = egw_attach_slot_at(&w.m, i);

		CU_ASSERT_EQUAL(sl->room, 100 + i);
		CU_ASSERT_EQUAL(sl->state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
		CU_ASSERT_EQUAL(sl->nruns, 2);
	}
	w_fini(&w);
}

static void
test_broken_ring_or_silent_client_is_lost(void)
{
	struct world w;
	struct egw_engines_conf c = {
		.max_clients = 2,
		.max_rooms = 8,
		.max_total_tokens = 1000,
		.encode = true,
		.language = true,
		.alloc_ns = MS,
		.lease_ns = 50 * MS,
		.budget = 8,
		.ops = &fake_ops,
	};
	struct egw_attach_area *a;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(1, 0, 500));
	(void)w_cqe(&w);
	a = w.area;
	a->sq.tail = a->sq.head + 1000; /* beyond any ring */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_STRING_EQUAL(w.f.lost_why, "submission ring tail out of range");
	CU_ASSERT_EQUAL(egw_attach_trust_of(a)->lost, EGW_LOST_RING);
	/* the uncommitted room's blocks stay out of the pool while the
	 * client may still write them: until it is removed */
	CU_ASSERT_EQUAL(w.f.blocks_out, 4);
	CU_ASSERT_EQUAL(egw_engines_held_blocks(w.srv), 4);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	egw_engines_poll(w.srv, w.now); /* given up: not polled again */
	CU_ASSERT_EQUAL(w.f.lost, 1);
	egw_engines_remove(w.srv, 0, w.now);
	CU_ASSERT_EQUAL(w.f.blocks_out, 0);
	CU_ASSERT_EQUAL(egw_engines_held_blocks(w.srv), 0);
	w_fini(&w);

	/* the lease: a moving beat keeps the client, a still one loses it */
	memset(&w, 0, sizeof(w));
	c.ctx = &w.f;
	w.f.runs_per_open = 1;
	CU_ASSERT_EQUAL_FATAL(egw_engines_create(&c, &w.srv), 0);
	w.bytes = egw_attach_area_bytes(8, 8, 2, 2, 0);
	w.area = calloc(1, w.bytes);
	CU_ASSERT_EQUAL(egw_attach_area_init(w.area, 8, 8, 2, 2, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_map_init(&w.m, w.area, w.bytes), 0);
	CU_ASSERT_EQUAL(egw_engines_add(w.srv, w.area, w.bytes, 0), 0);
	a = w.area;
	for (int i = 0; i < 10; i++) {
		w.now += 40 * MS;
		a->client_beat++;
		egw_engines_poll(w.srv, w.now);
	}
	CU_ASSERT_EQUAL(w.f.lost, 0);
	w.now += 40 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 0);
	w.now += 20 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_STRING_EQUAL(w.f.lost_why,
			       "lease expired (client_beat did not move)");
	w_fini(&w);
}

/* A client whose lease ran out while it held a delivered room (a stopped
 * process with views of it): the room's blocks are not freed, so they
 * cannot go to another room, until the client is removed (its socket
 * closed); the trust word says why it was given up, the counters say
 * what was held. */
static void
test_lease_lost_holds_delivered_blocks(void)
{
	struct world w;
	struct egw_attach_run runs[2] = { { 10, 3 }, { 20, 2 } };
	struct egw_engines_stats st;

	w_lease_ns = 3000 * MS;
	w_init(&w, 64, 16);
	w_lease_ns = 0;
	w_cmd(&w, recv_open(4, 0, 0));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 4, 0, 600, runs, 2),
			0);
	(void)w_cqe(&w);
	w_cmd(&w, recv_open(5, 1, 0)); /* not delivered: ended at once */
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_attach_trust_of(w.area)->lost, EGW_LOST_NONE);
	w.now += 10 * 1000 * MS; /* no beat for longer than the lease */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_EQUAL(egw_attach_trust_of(w.area)->lost, EGW_LOST_LEASE);
	CU_ASSERT_EQUAL(egw_attach_trust_of(w.area)->held_blocks, 5);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);   /* room 5 */
	CU_ASSERT_EQUAL(w.f.releases, 0);      /* room 4's blocks held */
	CU_ASSERT_EQUAL(egw_engines_held_blocks(w.srv), 5);
	CU_ASSERT_EQUAL(egw_engines_client_held(w.srv, 0), 5);
	/* the gateway reporting about the room finds nothing to do */
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, 4, 0,
					      EGW_E_ABORTED), -ENOENT);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.lost, 1);
	CU_ASSERT_EQUAL(st.held_rooms, 1);
	CU_ASSERT_EQUAL(st.held_blocks, 5);
	egw_engines_remove(w.srv, 0, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
	CU_ASSERT_EQUAL(egw_engines_held_blocks(w.srv), 0);
	w_fini(&w);
}

/* A completion ring whose head the client broke: the client is given up
 * at the end of that poll, and a room that was ending as it happened is
 * ended once, not twice. */
static void
test_broken_completion_ring_ends_rooms_once(void)
{
	struct world w;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(1, 0, 1000));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.blocks_out, 8);
	w.m.cq.ctl->head = w.m.cq.ctl->tail + 1000;
	w_cmd(&w, on_slot(EGW_OP_ABORT, 1, 0)); /* its answer cannot be posted */
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_STRING_EQUAL(w.f.lost_why, "completion ring head out of range");
	CU_ASSERT_EQUAL(w.f.send_aborts, 1);
	CU_ASSERT_EQUAL(w.f.blocks_out, 0);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	egw_engines_remove(w.srv, 0, w.now);
	w_fini(&w);
}

static void
test_sleeping_client_is_woken_once_per_sleep(void)
{
	struct world w;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(1, 0, 100));
	CU_ASSERT_EQUAL(w.f.wakes, 0); /* awake: no eventfd write */
	__atomic_or_fetch(&w.m.cq.ctl->flags, EGW_RING_F_NEED_WAKEUP,
			  __ATOMIC_RELEASE);
	w_cmd(&w, send_open(2, 1, 100));
	CU_ASSERT_EQUAL(w.f.wakes, 1);
	/* the wake-up took the bit: one eventfd write per sleep */
	CU_ASSERT_EQUAL(w.m.cq.ctl->flags & EGW_RING_F_NEED_WAKEUP, 0);
	egw_engines_poll(w.srv, w.now); /* nothing new: no wake-up */
	CU_ASSERT_EQUAL(w.f.wakes, 1);
	w_cmd(&w, send_open(3, 2, 100)); /* awake again: no write */
	CU_ASSERT_EQUAL(w.f.wakes, 1);
	/* asleep again: completions from room events wake at the next
	 * poll, once for both */
	__atomic_or_fetch(&w.m.cq.ctl->flags, EGW_RING_F_NEED_WAKEUP,
			  __ATOMIC_RELEASE);
	egw_engines_room_done(w.srv, EGW_SIDE_SEND, 1, 0, EGW_E_ABORTED);
	egw_engines_room_done(w.srv, EGW_SIDE_SEND, 2, 0, EGW_E_ABORTED);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.wakes, 2);
	w_fini(&w);
}

static void
test_delivery_too_long_for_the_slot_fails(void)
{
	struct world w;
	struct egw_attach_run runs[5] = { { 1, 1 }, { 3, 1 }, { 5, 1 },
					  { 7, 1 }, { 9, 1 } };
	struct egw_attach_cqe e;

	w_init(&w, 64, 16); /* slots list 4 runs */
	w_cmd(&w, recv_open(3, 0, 0));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 3, 0, 600, runs, 5),
			-E2BIG);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -E2BIG);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w_fini(&w);
}

/* ---- content keys ------------------------------------------------------------ */

static struct egw_attach_cmd
keyed(uint64_t room, uint32_t slot, uint16_t rank, uint8_t key)
{
	struct egw_attach_cmd c = recv_open(room, slot, rank);

	c.content[0] = key;
	c.content[15] = 0x5a;
	return c;
}

static struct egw_attach_cmd
lookup_cmd(uint8_t key)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = EGW_OP_LOOKUP;
	c.tag = 77;
	c.content[0] = key;
	c.content[15] = 0x5a;
	return c;
}

static void
w_cache_init(struct world *w, uint32_t entries, uint32_t blocks)
{
	w_cache_entries = entries;
	w_cache_blocks = blocks;
	w_init(w, 64, 16);
	w_cache_entries = 0;
	w_cache_blocks = 0;
}

static void
test_content_key_served_again_without_transfer(void)
{
	struct world w;
	struct egw_attach_run runs[2] = { { 10, 4 }, { 20, 3 } };
	struct egw_attach_cqe e;
	struct egw_attach_slot *sl;
	struct egw_engines_stats st;

	w_cache_init(&w, 8, 100);
	w_cmd(&w, lookup_cmd(1));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.op, EGW_OP_LOOKUP);
	CU_ASSERT_EQUAL(e.tag, 77);
	CU_ASSERT_EQUAL(e.result, EGW_LOOKUP_NONE);
	w_cmd(&w, keyed(1, 0, 0, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 1, 0, 800, runs, 2),
			0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE); /* it did transfer */
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 1, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).result, 0);
	/* kept for the key, not freed */
	CU_ASSERT_EQUAL(w.f.releases, 0);
	w_cmd(&w, lookup_cmd(1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_LANDED);

	/* another room of the same content: Success at once, same blocks */
	w_cmd(&w, keyed(2, 3, 1, 1));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE | EGW_CQEF_CACHED);
	CU_ASSERT_EQUAL(e.room, 2);
	CU_ASSERT_EQUAL(e.total_tokens, 800);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	sl = egw_attach_slot_at(&w.m, 3);
	CU_ASSERT_EQUAL(sl->nruns, 2);
	CU_ASSERT_EQUAL(sl->first_block, 10);
	CU_ASSERT_EQUAL(sl->runs[1].start, 20);
	/* a different key transfers */
	w_cmd(&w, keyed(3, 4, 0, 2));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	/* held entries stay through a flush; released ones go, once */
	CU_ASSERT_EQUAL(egw_engines_cache_flush(w.srv), 0);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 2, 3));
	CU_ASSERT_EQUAL(w_cqe(&w).result, 0);
	CU_ASSERT_EQUAL(w.f.releases, 0);
	CU_ASSERT_EQUAL(egw_engines_cache_flush(w.srv), 1);
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 7);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.cache_hits, 1);
	CU_ASSERT_EQUAL(st.cache_misses, 2);
	CU_ASSERT_EQUAL(st.rooms_ok, 2);
	w_fini(&w);
	/* room 3's key went in flight, never landed: nothing more freed */
	CU_ASSERT_EQUAL(w.f.released_blocks, 7);
}

static void
test_content_in_flight_is_shared_and_fails_together(void)
{
	struct world w;
	struct egw_attach_run runs[1] = { { 40, 2 } };
	struct egw_attach_cqe e;

	w_cache_init(&w, 8, 100);
	w_cmd(&w, keyed(1, 0, 0, 1));
	(void)w_cqe(&w);
	/* the same content for another request, and the same request id
	 * and rank again in another slot: both wait for the one transfer */
	w_cmd(&w, keyed(2, 1, 0, 1));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	w_cmd(&w, lookup_cmd(1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_IN_FLIGHT);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 1, 0, 200, runs, 1),
			0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 1);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 2);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE | EGW_CQEF_CACHED);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->first_block, 40);

	/* a transfer that fails takes its followers with it: they have no
	 * transfer of their own that could land */
	w_cmd(&w, keyed(3, 2, 0, 2));
	(void)w_cqe(&w);
	w_cmd(&w, keyed(4, 3, 1, 2));
	(void)w_cqe(&w);
	egw_engines_room_done(w.srv, EGW_SIDE_RECV, 3, 0, EGW_E_PEER_DEAD);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 4);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_PEER_DEAD);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 3);
	CU_ASSERT_EQUAL(e.result, -EGW_E_PEER_DEAD);
	w_cmd(&w, lookup_cmd(2));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_NONE);
	/* a follower that aborts leaves the transfer alone */
	w_cmd(&w, keyed(5, 2, 0, 3));
	(void)w_cqe(&w);
	w_cmd(&w, keyed(6, 3, 0, 3));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 6, 3));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 0);
	w_cmd(&w, lookup_cmd(3));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_IN_FLIGHT);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 3);
	w_fini(&w);
	CU_ASSERT_EQUAL(w.f.released_blocks, 2);
}

/* Engines retry a room with attempt + 1 because they give the earlier
 * attempt up: a rank's retry opened while that attempt still receives
 * the key must not follow it, or it fails when the attempt is aborted. */
static void
test_retry_of_the_same_room_transfers_itself(void)
{
	struct world w;
	struct egw_attach_cmd retry = keyed(1, 1, 1, 1);
	struct egw_attach_run r1[1] = { { 20, 2 } };
	struct egw_attach_cqe e;

	w_cache_init(&w, 8, 100);
	w_cmd(&w, keyed(1, 0, 0, 1));
	(void)w_cqe(&w);
	retry.attempt = 1;
	w_cmd(&w, retry);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	/* attempt 0 is given up: the retry goes on and lands */
	w_cmd(&w, on_slot(EGW_OP_ABORT, 1, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(
				w.srv, egw_attach_room_id(1, 1), 1, 200, r1, 1), 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 1);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->first_block, 20);
	w_fini(&w);
}

static void
test_other_rank_of_the_same_room_transfers_itself(void)
{
	struct world w;
	struct egw_attach_run r0[1] = { { 10, 2 } }, r1[1] = { { 20, 2 } };

	w_cache_init(&w, 8, 100);
	w_cmd(&w, keyed(1, 0, 0, 1));
	(void)w_cqe(&w);
	/* its sender serves rank 1 too: rank 1 must ask for it */
	w_cmd(&w, keyed(1, 1, 1, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 1, 0, 200, r0, 1), 0);
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 1, 1, 200, r1, 1), 0);
	CU_ASSERT_EQUAL(w_cqe(&w).flags, EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->first_block, 20);
	/* rank 1's copy is its own: freed at its release; rank 0's stays */
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 1, 1));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.released_blocks, 2);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 1, 0));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.released_blocks, 2);
	/* and the same room id landing again (a later attempt) is served */
	w_cmd(&w, keyed(9, 2, 0, 1));
	CU_ASSERT_EQUAL(w_cqe(&w).flags, EGW_CQEF_MORE | EGW_CQEF_CACHED);
	w_fini(&w);
	CU_ASSERT_EQUAL(w.f.released_blocks, 4);
}

static void
land(struct world *w, uint64_t room, uint32_t slot, uint8_t key,
     uint32_t first)
{
	struct egw_attach_run r[1] = { { first, 5 } };

	w_cmd(w, keyed(room, slot, 0, key));
	(void)w_cqe(w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w->srv, room, 0, 640, r, 1),
			0);
	(void)w_cqe(w);
}

static void
test_cache_gives_back_least_recent_first(void)
{
	struct world w;
	struct egw_engines_cache_stats cs;

	w_cache_init(&w, 8, 10); /* two entries of 5 blocks unheld */
	land(&w, 1, 0, 1, 100);
	land(&w, 2, 1, 2, 200);
	land(&w, 3, 2, 3, 300);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 1, 0));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 3, 2));
	(void)w_cqe(&w);
	/* 2 is held: 15 blocks, but a held entry never goes */
	CU_ASSERT_EQUAL(w.f.releases, 0);
	w_cmd(&w, keyed(4, 0, 0, 1)); /* 1 used again: 3 is older now */
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 4, 0));
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 2, 1));
	(void)w_cqe(&w);
	/* over 10 unheld blocks: the least recently used (3) went */
	CU_ASSERT_EQUAL(w.f.releases, 1);
	w_cmd(&w, lookup_cmd(3));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_NONE);
	w_cmd(&w, lookup_cmd(1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_LANDED);
	/* rooms waiting for memory: one entry a housekeeping round */
	w.f.admission_queue = 1;
	w.now += 2 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 2);
	w.now += 2 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 3);
	egw_engines_cache(w.srv, &cs);
	CU_ASSERT_EQUAL(cs.entries, 0);
	CU_ASSERT_EQUAL(cs.blocks, 0);
	CU_ASSERT_EQUAL(cs.evictions, 3);
	CU_ASSERT_EQUAL(w.f.released_blocks, 15);
	w_fini(&w);
}

static void
test_without_a_cache_keys_change_nothing(void)
{
	struct world w;

	w_init(&w, 64, 16);
	w_cmd(&w, keyed(1, 0, 0, 1));
	(void)w_cqe(&w);
	w_cmd(&w, keyed(2, 1, 0, 1));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	w_cmd(&w, lookup_cmd(1));
	CU_ASSERT_EQUAL(w_cqe(&w).result, EGW_LOOKUP_NONE);
	w_fini(&w);
}

static void
test_attempt_is_a_new_room_inside_the_gateway(void)
{
	struct egw_attach_run runs[1] = { { 3, 1 } };
	struct world w;
	struct egw_attach_cmd c;
	struct egw_attach_cqe e;

	w_init(&w, 64, 16);
	w_cmd(&w, send_open(5, 0, 100));
	CU_ASSERT_EQUAL(w.f.last_room, 5);
	(void)w_cqe(&w);
	c = send_open(5, 1, 100);
	c.attempt = 1;
	w_cmd(&w, c);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.result, 0);   /* not -EEXIST: another room */
	CU_ASSERT_EQUAL(e.room, 5);     /* the engine's id in completions */
	CU_ASSERT_EQUAL(w.f.last_room, egw_attach_room_id(5, 1));
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->room, 5);
	/* the gateway's reports name the attempt's id */
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_SEND,
					      egw_attach_room_id(5, 1), 0,
					      EGW_E_PEER_DEAD), 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.slot, 1);
	CU_ASSERT_EQUAL(e.result, -EGW_E_PEER_DEAD);
	c = recv_open(5, 2, 0);
	c.attempt = 3;
	w_cmd(&w, c);
	CU_ASSERT_EQUAL(w.f.last_room, egw_attach_room_id(5, 3));
	CU_ASSERT_EQUAL(w_cqe(&w).room, 5);
	/* what the gateway says of the attempt's id reaches the engine
	 * under its own id */
	egw_engines_room_state(w.srv, EGW_SIDE_RECV, egw_attach_room_id(5, 3),
			       0, EGW_ATTACH_STATE_TRANSFERRING, 100, 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 5);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv,
						   egw_attach_room_id(5, 3), 0,
						   100, runs, 1), 0);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 5);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	w_fini(&w);
}

static void
test_held_rooms_reported_once_and_stats_published(void)
{
	struct world w;
	struct egw_attach_run runs[1] = { { 10, 2 } };
	struct egw_attach_stats *st;

	w_held_warn_ns = 1000 * MS;
	w_cache_init(&w, 8, 100);
	w_held_warn_ns = 0;
	land(&w, 7, 0, 1, 10);
	w_cmd(&w, recv_open(8, 1, 0));
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, 8, 0, 200, runs, 1),
			0);
	w.now += 1500 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.held_long, 2);
	w.now += 5000 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.held_long, 2);
	st = &((struct egw_attach_area *)w.area)->stats;
	CU_ASSERT_EQUAL(st->seq % 2, 0);
	CU_ASSERT(st->seq > 0);
	CU_ASSERT_EQUAL(st->updated_ns, w.now);
	CU_ASSERT_EQUAL(st->pool_blocks, 1000);
	CU_ASSERT_EQUAL(st->quarantined_blocks, 3);
	CU_ASSERT_EQUAL(st->held_long, 2);
	CU_ASSERT_EQUAL(st->cache_entries, 1);
	CU_ASSERT_EQUAL(st->cache_blocks, 5);
	CU_ASSERT_EQUAL(st->cache_pinned, 1);
	CU_ASSERT_EQUAL(st->cache_misses, 1);
	w_fini(&w);
}

/* A given-up client's hold on a landed entry lasts until it is removed:
 * its process may still read those blocks. */
static void
test_lost_client_keeps_its_cached_room_until_removed(void)
{
	struct world w;
	struct egw_engines_cache_stats cs;

	w_lease_ns = 3000 * MS;
	w_cache_init(&w, 8, 0); /* nothing kept unheld */
	w_lease_ns = 0;
	land(&w, 1, 0, 1, 100);
	w.now += 4000 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_EQUAL(egw_engines_cache_flush(w.srv), 0);
	CU_ASSERT_EQUAL(w.f.releases, 0);
	egw_engines_remove(w.srv, (uint32_t)w.cid, w.now);
	/* the hold is dropped, and with no bound the entry goes at once */
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
	egw_engines_cache(w.srv, &cs);
	CU_ASSERT_EQUAL(cs.entries, 0);
	w_fini(&w);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
}

/* ---- rooms waiting for a slot of the node's room table ------------------- */

static void
w_init_slots(struct world *w, uint32_t table, uint32_t queue, uint64_t admit)
{
	w_slot_queue = queue;
	w_admit_ns = admit;
	w_init(w, 64, 16);
	w_slot_queue = 0;
	w_admit_ns = 0;
	w->f.table_slots = table;
}

/* A language room the node delivered (its table slot frees with it),
 * released by the engine. */
static void
w_deliver_release(struct world *w, uint64_t room, uint32_t slot)
{
	struct egw_attach_run run = { 10, 1 };
	struct egw_attach_cqe e;

	CU_ASSERT_EQUAL(egw_engines_room_delivered(w->srv, room, 0, 100, &run,
						   1),
			0);
	w->f.table_used--;
	e = w_cqe(w);
	CU_ASSERT_EQUAL(e.room, room);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_SUCCESS);
	w_cmd(w, on_slot(EGW_OP_RELEASE, room, slot));
	e = w_cqe(w);
	CU_ASSERT_EQUAL(e.op, EGW_OP_RELEASE);
	CU_ASSERT_EQUAL(e.result, 0);
}

static void
test_rooms_beyond_the_table_wait_and_open_in_order(void)
{
	enum { N = 4 };
	struct world w;
	struct egw_attach_cqe e;
	struct egw_engines_stats st;

	w_init_slots(&w, N, 8, 1000 * MS);
	for (uint32_t i = 0; i < N + 3; i++) {
		w_cmd(&w, recv_open(100 + i, i, 0));
		e = w_cqe(&w);
		CU_ASSERT_EQUAL(e.result, 0);
		CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
		CU_ASSERT_EQUAL(e.flags, EGW_CQEF_MORE);
		CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, i)->state,
				EGW_ATTACH_STATE_BOOTSTRAPPING);
	}
	CU_ASSERT(w_cq_empty(&w));
	CU_ASSERT_EQUAL(w.f.nopened, N);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.slot_waits, 3);
	CU_ASSERT_EQUAL(w.f.slot_notes, 1); /* the episode, said once */
	/* no room ends: the waiting ones stay as they are */
	w.now += 10 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.nopened, N);
	CU_ASSERT(w_cq_empty(&w));
	/* each room that ends lets the oldest waiting one in */
	for (uint32_t k = 0; k < N + 3; k++) {
		w_deliver_release(&w, 100 + k, k);
		w.now += MS;
		egw_engines_poll(w.srv, w.now);
		if (k < 3) {
			CU_ASSERT_EQUAL(w.f.nopened, N + k + 1);
			CU_ASSERT_EQUAL(w.f.opened[N + k], 100 + N + k);
		}
		CU_ASSERT(w_cq_empty(&w)); /* still Bootstrapping: no news */
	}
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.rooms_ok, N + 3);
	CU_ASSERT_EQUAL(st.rooms_failed, 0);
	CU_ASSERT_EQUAL(w.f.nopened, N + 3);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w_fini(&w);
}

static void
test_encode_room_waits_for_a_slot_then_gets_blocks(void)
{
	struct world w;
	struct egw_attach_cqe e;

	w_init_slots(&w, 1, 8, 1000 * MS);
	w_cmd(&w, send_open(1, 0, 1000));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	w_cmd(&w, send_open(2, 1, 1000));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(e.nruns, 0);
	CU_ASSERT_EQUAL(w.f.blocks_out, 8); /* room 1's only */
	w_cmd(&w, on_slot(EGW_OP_SEND_COMMIT, 1, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_SEND, 1, 0, 0),
			0);
	w.f.table_used--;
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_SUCCESS);
	w.now += MS;
	egw_engines_poll(w.srv, w.now);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 2);
	CU_ASSERT_EQUAL(e.tag, 21);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(e.nruns, 2);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->nruns, 2);
	w_fini(&w);
}

static void
test_waiting_room_aborted_or_detached_leaves_nothing(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_engines_stats st;

	w_init_slots(&w, 1, 8, 1000 * MS);
	w_cmd(&w, recv_open(1, 0, 0));
	w_cmd(&w, recv_open(2, 1, 0));
	w_cmd(&w, recv_open(3, 2, 0));
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(w_cqe(&w).state,
				EGW_ATTACH_STATE_BOOTSTRAPPING);
	/* the middle one is aborted while it waits */
	w_cmd(&w, on_slot(EGW_OP_ABORT, 2, 1));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->error, -EGW_E_ABORTED);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->room, 0);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 0); /* never opened at the node */
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 2);
	/* the slot it left is free for another room, which waits behind */
	w_cmd(&w, recv_open(4, 1, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	/* room 1 ends: room 3 gets the slot, not the aborted room 2 */
	w_deliver_release(&w, 1, 0);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.nopened, 2);
	CU_ASSERT_EQUAL(w.f.opened[1], 3);
	/* detached with room 3 open and room 4 waiting: both end, and the
	 * freed slot opens nothing */
	egw_engines_remove(w.srv, 0, w.now);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w.now += 2000 * MS; /* past any deadline too */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.nopened, 2);
	CU_ASSERT_EQUAL(w.f.recv_opens, 3); /* 1, 2 (refused), 3 */
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.slot_waits, 3);
	CU_ASSERT_EQUAL(st.rooms_ok, 1);
	CU_ASSERT_EQUAL(st.rooms_failed, 3);
	w_fini(&w);
}

static void
test_lost_client_leaves_the_wait(void)
{
	struct world w;
	struct egw_engines_stats st;

	w_lease_ns = 3000 * MS;
	w_init_slots(&w, 1, 8, 60000 * MS);
	w_lease_ns = 0;
	w_cmd(&w, recv_open(1, 0, 0));
	w_cmd(&w, recv_open(2, 1, 0));
	w_cmd(&w, recv_open(3, 2, 0));
	CU_ASSERT_EQUAL(w.f.nopened, 1);
	w.now += 10 * 1000 * MS; /* no beat for longer than the lease */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.lost, 1);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1); /* room 1, the only one opened */
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	/* the slot room 1 left opens none of the given-up client's rooms */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.nopened, 1);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.slot_waits, 2);
	CU_ASSERT_EQUAL(st.rooms_failed, 3);
	egw_engines_remove(w.srv, 0, w.now);
	w_fini(&w);
}

static void
test_wait_past_admit_ms_fails_no_slot_saying_how_long(void)
{
	struct world w;
	struct egw_attach_cqe e;

	w_init_slots(&w, 1, 2, 50 * MS);
	w_cmd(&w, recv_open(1, 0, 0));
	w_cmd(&w, recv_open(2, 1, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w.now = 49 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT(w_cq_empty(&w));
	w.now = 50 * MS;
	egw_engines_poll(w.srv, w.now);
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 2);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_NO_SLOT);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->error, -EGW_E_NO_SLOT);
	CU_ASSERT_STRING_EQUAL(w.f.slot_note,
			       "room 2 rank 0: no slot after "
			       "waiting 50 ms (admit_ms 50): the room table "
			       "stayed full");
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 1);
	/* a full wait list: the next room fails at once, as without one */
	w_cmd(&w, recv_open(3, 1, 0));
	w_cmd(&w, recv_open(4, 2, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	w_cmd(&w, recv_open(5, 3, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.room, 5);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_FAILED);
	CU_ASSERT_EQUAL(e.result, -EGW_E_NO_SLOT);
	CU_ASSERT(w_cq_empty(&w));
	/* a second episode, said again; of its rooms that give up, the
	 * first is said, the other only fails */
	CU_ASSERT_EQUAL(w.f.slot_notes, 3);
	w.now += 50 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EGW_E_NO_SLOT);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EGW_E_NO_SLOT);
	CU_ASSERT_EQUAL(w.f.slot_notes, 4);
	CU_ASSERT(strstr(w.f.slot_note, "room 3 rank 0") != NULL);
	w_fini(&w);
}

/* ---- the port's peers
 * ---------------------------------------------------------- */

/* A RECV_OPEN that names its peer by name: the command and its name entry,
 * published together as a client does. */
static void
w_cmd_named(struct world *w, uint64_t room, uint32_t slot, const char *name)
{
	struct egw_attach_cmd two[2];

	two[0] = recv_open(room, slot, 0);
	two[0].peer_id = 0;
	two[0].flags = EGW_CMDF_PEER_NAME;
	memset(&two[1], 0, sizeof(two[1]));
	snprintf((char *)&two[1], EGW_ATTACH_NAME_LEN, "%s", name);
	CU_ASSERT_EQUAL(egw_attach_ring_putn(&w->m.sq, two, 2), 0);
	egw_engines_poll(w->srv, w->now);
}

static int
w_peers(struct world *w, struct egw_attach_peer_rec *out, uint64_t *gen)
{
	return egw_attach_peers_read(&w->m, out, 8, gen);
}

static void
test_peer_list_published_with_a_generation(void)
{
	struct world w;
	struct egw_attach_peer_rec r[8];
	struct egw_engines_peer p[3];
	uint64_t gen = 0;

	w_init(&w, 64, 16);
	CU_ASSERT_EQUAL(w_peers(&w, r, &gen), 2);
	CU_ASSERT_EQUAL(gen, 1);
	CU_ASSERT_EQUAL(egw_engines_peers_gen(w.srv), 1);
	CU_ASSERT(r[0].id == 1 && r[1].id == 2);
	CU_ASSERT_STRING_EQUAL(r[1].name, "enc-1");
	CU_ASSERT_EQUAL(r[0].flags, EGW_PEER_F_READY);
	/* the same list again changes nothing */
	memcpy(p, w_two_peers, sizeof(w_two_peers));
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 2, w.now), 0);
	CU_ASSERT_EQUAL(egw_engines_peers_gen(w.srv), 1);
	/* in any order; a readiness change is a change; ids come sorted */
	p[2] = p[0];
	p[0] = (struct egw_engines_peer){ .id = 9, .slot = 2, .name = "enc-9" };
	p[2].ready = false;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 3, w.now), 0);
	CU_ASSERT_EQUAL(w_peers(&w, r, &gen), 3);
	CU_ASSERT_EQUAL(gen, 2);
	CU_ASSERT(r[0].id == 1 && r[1].id == 2 && r[2].id == 9);
	CU_ASSERT_EQUAL(r[0].flags, 0);
	/* bad lists change nothing */
	p[1].id = 9;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 3, w.now), -EINVAL);
	p[1].id = 0;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 3, w.now), -EINVAL);
	p[1].id = 2;
	p[1].name[0] = '\0';
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 3, w.now), -EINVAL);
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 9, w.now), -E2BIG);
	CU_ASSERT_EQUAL(egw_engines_peers_gen(w.srv), 2);
	/* a reader that meets the gateway writing is told to read again */
	egw_attach_peers_of(w.area)->seq++;
	CU_ASSERT_EQUAL(w_peers(&w, r, &gen), -EAGAIN);
	egw_attach_peers_of(w.area)->seq++;
	CU_ASSERT_EQUAL(w_peers(&w, r, &gen), 3);
	/* no completion for a client that did not ask */
	CU_ASSERT(w_cq_empty(&w));
	w_fini(&w);
}

static void
test_peer_change_posted_to_clients_that_asked(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_map m2;
	size_t bytes = egw_attach_area_bytes(16, 64, 8, 4, 8);
	void *area2 = calloc(1, bytes);
	struct egw_engines_peer p = { .id = 3, .slot = 2, .name = "enc-3" };
	struct egw_attach_peer_rec r[8];
	uint64_t gen;

	w_init(&w, 64, 16);
	CU_ASSERT_FATAL(area2 != NULL);
	CU_ASSERT_EQUAL(egw_attach_area_init(area2, 16, 64, 8, 4, 8), 0);
	((struct egw_attach_area *)area2)->events = EGW_AREA_EV_PEERS;
	CU_ASSERT_EQUAL(egw_attach_map_init(&m2, area2, bytes), 0);
	CU_ASSERT_EQUAL(egw_engines_add(w.srv, area2, bytes, w.now), 1);
	/* a client added later finds the list at once, and hears of it */
	CU_ASSERT_EQUAL(egw_attach_peers_read(&m2, r, 8, &gen), 2);
	CU_ASSERT_EQUAL(gen, 1);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&m2.cq, &e), 1);
	CU_ASSERT(e.op == EGW_OP_PEERS && e.room == 1 && e.tag == 0 &&
		  e.result == 0 && e.total_tokens == 2);
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, &p, 1, w.now), 0);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&m2.cq, &e), 1);
	CU_ASSERT(e.op == EGW_OP_PEERS && e.room == 2 && e.total_tokens == 1);
	CU_ASSERT_EQUAL(egw_attach_peers_read(&m2, r, 8, &gen), 1);
	CU_ASSERT(gen == 2 && r[0].id == 3);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&m2.cq, &e), 0);
	CU_ASSERT(w_cq_empty(&w));
	egw_engines_remove(w.srv, 1, w.now);
	w_fini(&w);
	free(area2);
}

/* SEND_OPEN's allocation names the client it is for (whose segment of a
 * cut pool the blocks come from), for each of two clients. */
static void
test_send_open_names_its_client(void)
{
	struct world w;
	struct egw_attach_map m2;
	size_t bytes = egw_attach_area_bytes(16, 64, 8, 4, 8);
	void *area2 = calloc(1, bytes);
	struct egw_attach_cmd c = send_open(9, 1, 300);

	w_init(&w, 64, 16);
	CU_ASSERT_FATAL(area2 != NULL);
	CU_ASSERT_EQUAL(egw_attach_area_init(area2, 16, 64, 8, 4, 8), 0);
	CU_ASSERT_EQUAL(egw_attach_map_init(&m2, area2, bytes), 0);
	CU_ASSERT_EQUAL(egw_engines_add(w.srv, area2, bytes, w.now), 1);
	w.f.send_client = 99;
	w_cmd(&w, send_open(4, 2, 300));
	CU_ASSERT_EQUAL(w.f.send_client, (uint32_t)w.cid);
	CU_ASSERT_EQUAL(egw_attach_ring_put(&m2.sq, &c), 0);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.send_client, 1);
	CU_ASSERT_EQUAL(w.f.send_opens, 2);
	egw_engines_remove(w.srv, 1, w.now);
	w_fini(&w);
	free(area2);
}

static void
test_room_names_its_peer_by_id(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_cmd c;
	struct egw_engines_peer p[2];

	w_init(&w, 64, 16);
	/* id 2 is the peer in the node's slot 1 */
	w_cmd(&w, recv_open(10, 0, 0));
	e = w_cqe(&w);
	CU_ASSERT_EQUAL(e.state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w.f.last_peer_slot, 1);
	/* an id never listed: unknown peer, at once */
	c = recv_open(11, 1, 0);
	c.peer_id = 77;
	w_cmd(&w, c);
	e = w_cqe(&w);
	CU_ASSERT(e.state == EGW_ATTACH_STATE_FAILED &&
		  e.result == -EGW_E_UNKNOWN_PEER && e.flags == 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->error,
			-EGW_E_UNKNOWN_PEER);
	/* peer 2 leaves, then is gone; peer 1 moves to another slot: an id
	 * once listed fails as removed, never reaches another peer */
	memcpy(p, w_two_peers, sizeof(p));
	p[1].leaving = true;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 2, w.now), 0);
	w_cmd(&w, recv_open(12, 2, 0));
	e = w_cqe(&w);
	CU_ASSERT(e.state == EGW_ATTACH_STATE_FAILED &&
		  e.result == -EGW_E_PEER_REMOVED);
	p[0].slot = 1;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 1, w.now), 0);
	w_cmd(&w, recv_open(13, 2, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EGW_E_PEER_REMOVED);
	c = recv_open(14, 3, 0);
	c.peer_id = 1;
	w_cmd(&w, c);
	CU_ASSERT_EQUAL(w_cqe(&w).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(w.f.last_peer_slot, 1);
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	w_fini(&w);
}

static void
test_room_names_its_peer_by_name(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_attach_cmd two[2];
	struct egw_engines_stats st;

	w_init(&w, 64, 16);
	w_cmd_named(&w, 20, 0, "enc-0");
	e = w_cqe(&w);
	CU_ASSERT(e.state == EGW_ATTACH_STATE_BOOTSTRAPPING && e.result == 0);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	CU_ASSERT_EQUAL(w.f.last_peer_slot, 0);
	/* a name that is not one: the command is refused */
	two[0] = recv_open(21, 1, 0);
	two[0].peer_id = 0;
	two[0].flags = EGW_CMDF_PEER_NAME;
	memset(&two[1], 'x', sizeof(two[1])); /* no NUL */
	CU_ASSERT_EQUAL(egw_attach_ring_putn(&w.m.sq, two, 2), 0);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EINVAL);
	/* the command alone, its name entry missing: refused, the ring in
	 * step (the next command is read as one) */
	CU_ASSERT_EQUAL(egw_attach_ring_put(&w.m.sq, &two[0]), 0);
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w_cqe(&w).result, -EINVAL);
	w_cmd(&w, on_slot(EGW_OP_NOP, 0, 0));
	CU_ASSERT_EQUAL(w_cqe(&w).op, EGW_OP_NOP);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.refused_invalid, 2);
	CU_ASSERT_EQUAL(st.peer_waits, 0);
	w_fini(&w);
}

static void
test_room_waits_for_a_peer_not_known_yet(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_engines_peer p[3];
	struct egw_engines_stats st;

	w_init(&w, 64, 16);
	w_cmd_named(&w, 30, 0, "enc-3");
	e = w_cqe(&w);
	CU_ASSERT(e.state == EGW_ATTACH_STATE_BOOTSTRAPPING && e.result == 0 &&
		  e.flags == EGW_CQEF_MORE);
	CU_ASSERT_EQUAL(w.f.recv_opens, 0);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.peer_waits, 1);
	w.now += 40 * MS; /* within peer_wait_ns (50 ms) */
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT(w_cq_empty(&w));
	/* the peer joins: the room goes to the node, to its slot */
	memcpy(p, w_two_peers, sizeof(w_two_peers));
	p[2] = (struct egw_engines_peer){ .id = 3, .slot = 5, .name = "enc-3" };
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 3, w.now), 0);
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	CU_ASSERT_EQUAL(w.f.last_room, 30);
	CU_ASSERT_EQUAL(w.f.last_peer_slot, 5);
	CU_ASSERT(w_cq_empty(&w)); /* Bootstrapping was said already */
	w_fini(&w);
}

static void
test_room_fails_at_its_deadline_naming_the_peer(void)
{
	struct world w;
	struct egw_attach_cqe e;
	struct egw_engines_peer p[2];

	w_init(&w, 64, 16);
	w_cmd_named(&w, 40, 0, "enc-7");
	(void)w_cqe(&w);
	/* a leaving peer of that name does not count */
	memcpy(p, w_two_peers, sizeof(p));
	snprintf(p[1].name, sizeof(p[1].name), "enc-7");
	p[1].leaving = true;
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, p, 2, w.now), 0);
	CU_ASSERT_EQUAL(w.f.recv_opens, 0);
	w.now += 50 * MS;
	egw_engines_poll(w.srv, w.now);
	e = w_cqe(&w);
	CU_ASSERT(e.room == 40 && e.state == EGW_ATTACH_STATE_FAILED &&
		  e.result == -EGW_E_UNKNOWN_PEER && e.flags == 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->error,
			-EGW_E_UNKNOWN_PEER);
	CU_ASSERT_PTR_NOT_NULL(strstr(w.f.slot_note, "'enc-7'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(w.f.slot_note, "room 40"));
	CU_ASSERT_EQUAL(w.f.recv_opens, 0);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	/* a waiting room aborted, or its client gone, leaves nothing */
	w_cmd_named(&w, 41, 1, "enc-8");
	(void)w_cqe(&w);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 41, 1));
	e = w_cqe(&w);
	CU_ASSERT(e.op == EGW_OP_ABORT && e.state == EGW_ATTACH_STATE_FAILED);
	w_cmd_named(&w, 42, 2, "enc-8");
	(void)w_cqe(&w);
	egw_engines_remove(w.srv, 0, w.now);
	w.now += 100 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	CU_ASSERT_EQUAL(w.f.recv_opens, 0);
	w_fini(&w);
}

static void
test_queued_room_of_a_removed_peer_fails(void)
{
	struct world w;
	struct egw_attach_cqe e;

	w_init_slots(&w, 1, 8, 1000 * MS);
	w_cmd(&w, recv_open(50, 0, 0));
	(void)w_cqe(&w);
	w_cmd(&w, recv_open(51, 1, 0)); /* waits for a table slot */
	(void)w_cqe(&w);
	CU_ASSERT_EQUAL(w.f.nopened, 1);
	/* peer 2 removed: the queued room fails now; the opened one is the
	 * node's to end (room_done) */
	CU_ASSERT_EQUAL(egw_engines_peers_set(w.srv, w_two_peers, 1, w.now), 0);
	e = w_cqe(&w);
	CU_ASSERT(e.room == 51 && e.state == EGW_ATTACH_STATE_FAILED &&
		  e.result == -EGW_E_PEER_REMOVED);
	CU_ASSERT(w_cq_empty(&w));
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, 50, 0,
					      EGW_E_PEER_REMOVED),
			0);
	e = w_cqe(&w);
	CU_ASSERT(e.room == 50 && e.result == -EGW_E_PEER_REMOVED);
	CU_ASSERT_EQUAL(w.f.nopened, 1);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w_fini(&w);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "encode_room_open_commit_success",
		  test_encode_room_open_commit_success },
		{ "language_room_states_delivery_release",
		  test_language_room_states_delivery_release },
		{ "refusals_change_nothing", test_refusals_change_nothing },
		{ "open_busy_past_the_waiting_bound",
		  test_open_busy_past_the_waiting_bound },
		{ "open_waits_for_memory_then_deadline",
		  test_open_waits_for_memory_then_deadline },
		{ "abort_in_every_phase_frees_once",
		  test_abort_in_every_phase_frees_once },
		{ "detach_ends_every_room_silently",
		  test_detach_ends_every_room_silently },
		{ "full_completion_ring_never_blocks",
		  test_full_completion_ring_never_blocks },
		{ "broken_ring_or_silent_client_is_lost",
		  test_broken_ring_or_silent_client_is_lost },
		{ "lease_lost_holds_delivered_blocks",
		  test_lease_lost_holds_delivered_blocks },
		{ "broken_completion_ring_ends_rooms_once",
		  test_broken_completion_ring_ends_rooms_once },
		{ "sleeping_client_is_woken_once_per_sleep",
		  test_sleeping_client_is_woken_once_per_sleep },
		{ "delivery_too_long_for_the_slot_fails",
		  test_delivery_too_long_for_the_slot_fails },
		{ "content_key_served_again_without_transfer",
		  test_content_key_served_again_without_transfer },
		{ "content_in_flight_is_shared_and_fails_together",
		  test_content_in_flight_is_shared_and_fails_together },
		{ "other_rank_of_the_same_room_transfers_itself",
		  test_other_rank_of_the_same_room_transfers_itself },
		{ "retry_of_the_same_room_transfers_itself",
		  test_retry_of_the_same_room_transfers_itself },
		{ "cache_gives_back_least_recent_first",
		  test_cache_gives_back_least_recent_first },
		{ "without_a_cache_keys_change_nothing",
		  test_without_a_cache_keys_change_nothing },
		{ "attempt_is_a_new_room_inside_the_gateway",
		  test_attempt_is_a_new_room_inside_the_gateway },
		{ "held_rooms_reported_once_and_stats_published",
		  test_held_rooms_reported_once_and_stats_published },
		{ "lost_client_keeps_its_cached_room_until_removed",
		  test_lost_client_keeps_its_cached_room_until_removed },
		{ "rooms_beyond_the_table_wait_and_open_in_order",
		  test_rooms_beyond_the_table_wait_and_open_in_order },
		{ "encode_room_waits_for_a_slot_then_gets_blocks",
		  test_encode_room_waits_for_a_slot_then_gets_blocks },
		{ "waiting_room_aborted_or_detached_leaves_nothing",
		  test_waiting_room_aborted_or_detached_leaves_nothing },
		{ "wait_past_admit_ms_fails_no_slot_saying_how_long",
		  test_wait_past_admit_ms_fails_no_slot_saying_how_long },
		{ "lost_client_leaves_the_wait",
		  test_lost_client_leaves_the_wait },
		{ "peer_list_published_with_a_generation",
		  test_peer_list_published_with_a_generation },
		{ "peer_change_posted_to_clients_that_asked",
		  test_peer_change_posted_to_clients_that_asked },
		{ "send_open_names_its_client",
		  test_send_open_names_its_client },
		{ "room_names_its_peer_by_id", test_room_names_its_peer_by_id },
		{ "room_names_its_peer_by_name",
		  test_room_names_its_peer_by_name },
		{ "room_waits_for_a_peer_not_known_yet",
		  test_room_waits_for_a_peer_not_known_yet },
		{ "room_fails_at_its_deadline_naming_the_peer",
		  test_room_fails_at_its_deadline_naming_the_peer },
		{ "queued_room_of_a_removed_peer_fails",
		  test_queued_room_of_a_removed_peer_fails },
		{ NULL, NULL },
	};

	return cu_run("clients", tests);
}
