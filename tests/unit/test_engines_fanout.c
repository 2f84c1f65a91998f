/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fan-out on the gateway's side of the client interface (doc/client.md,
 * "Fan-out"): RECV_OPENs of the ranks of one group share one receive at
 * the node; every member reads the same blocks, which go back once the
 * last member let go and the members that never opened are given up.
 * Driven as test_engines.c drives the server: commands in, completions
 * and slots out, a fake gateway behind the operations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "egw_engines.h"

#define MS 1000000ull

struct fake {
	uint32_t recv_opens, group_opens, recv_aborts, releases;
	uint64_t released_blocks;
	uint64_t room;
	uint16_t rank, nranks, ranks;
	uint16_t abort_rank, release_rank;
	struct egw_engines *srv;
	bool done_inside_abort;
};

static int
f_send_open(void *ctx, uint32_t client, uint64_t room, uint16_t nranks,
	    uint32_t total, int32_t mrope_delta, uint64_t cookie,
	    struct egw_attach_run *runs, uint32_t max_runs)
{
	(void)ctx;
	(void)client;
	(void)room;
	(void)nranks;
	(void)total;
	(void)mrope_delta;
	(void)cookie;
	(void)runs;
	(void)max_runs;
	return -EINVAL;
}

static int
f_send_commit(void *ctx, uint64_t room, uint32_t total,
	      const struct egw_attach_run *runs, uint32_t nruns)
{
	(void)ctx;
	(void)room;
	(void)total;
	(void)runs;
	(void)nruns;
	return -EINVAL;
}

static void
f_send_abort(void *ctx, uint64_t room, bool committed,
	     const struct egw_attach_run *runs, uint32_t nruns)
{
	(void)ctx;
	(void)room;
	(void)committed;
	(void)runs;
	(void)nruns;
}

static int
f_recv_open(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
	    uint32_t peer, bool aux_only)
{
	struct fake *f = ctx;

	(void)peer;
	(void)aux_only;
	f->recv_opens++;
	f->room = room;
	f->rank = rank;
	f->nranks = nranks;
	f->ranks = 0;
	return 0;
}

static int
f_recv_open_group(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
		  uint16_t ranks, uint32_t peer)
{
	struct fake *f = ctx;

	(void)peer;
	f->group_opens++;
	f->room = room;
	f->rank = rank;
	f->nranks = nranks;
	f->ranks = ranks;
	return 0;
}

static void
f_recv_abort(void *ctx, uint64_t room, uint16_t rank)
{
	struct fake *f = ctx;

	f->recv_aborts++;
	f->abort_rank = rank;
	if (f->done_inside_abort)
		CU_ASSERT_EQUAL(egw_engines_room_done(f->srv, EGW_SIDE_RECV,
						      room, rank,
						      EGW_E_ABORTED),
				-ENOENT);
}

static void
f_recv_release(void *ctx, uint64_t room, uint16_t rank,
	       const struct egw_attach_run *runs, uint32_t nruns)
{
	struct fake *f = ctx;

	(void)room;
	f->releases++;
	f->release_rank = rank;
	for (uint32_t i = 0; i < nruns; i++)
		f->released_blocks += runs[i].count;
}

static void
f_wake(void *ctx, uint32_t client)
{
	(void)ctx;
	(void)client;
}

static void
f_lost(void *ctx, uint32_t client, const char *why)
{
	(void)ctx;
	(void)client;
	(void)why;
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
	.recv_open_group = f_recv_open_group,
};

struct world {
	struct fake f;
	struct egw_engines *srv;
	void *area;
	size_t bytes;
	struct egw_attach_map m;
	uint64_t now;
};

static const struct egw_engines_peer w_peer[] = {
	{ .id = 1, .slot = 0, .name = "enc-0", .ready = true },
};

static void
w_init(struct world *w, uint32_t fanout)
{
	struct egw_engines_conf c = {
		.max_clients = 2,
		.max_rooms = 16,
		.max_total_tokens = 1u << 20,
		.max_peers = 4,
		.peer_wait_ns = 50 * MS,
		.language = true,
		.alloc_ns = 100 * MS,
		.budget = 64,
		.ops = &fake_ops,
		.fanout_ranks = fanout,
		.fanout_max_runs = 4,
	};

	memset(w, 0, sizeof(*w));
	c.ctx = &w->f;
	CU_ASSERT_EQUAL_FATAL(egw_engines_create(&c, &w->srv), 0);
	w->f.srv = w->srv;
	w->bytes = egw_attach_area_bytes(16, 64, 8, 4, 4);
	w->area = calloc(1, w->bytes);
	CU_ASSERT_FATAL(w->area != NULL);
	CU_ASSERT_EQUAL_FATAL(egw_attach_area_init(w->area, 16, 64, 8, 4, 4),
			      0);
	CU_ASSERT_EQUAL_FATAL(egw_attach_map_init(&w->m, w->area, w->bytes), 0);
	CU_ASSERT_EQUAL_FATAL(egw_engines_add(w->srv, w->area, w->bytes, 0), 0);
	CU_ASSERT_EQUAL_FATAL(egw_engines_peers_set(w->srv, w_peer, 1, 0), 0);
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

/* Completions up to the last; returns it (state FAILED + 1 if none). */
static struct egw_attach_cqe
w_last(struct world *w, uint32_t slot)
{
	struct egw_attach_cqe e, last;

	memset(&last, 0, sizeof(last));
	last.state = 0xff;
	while (egw_attach_ring_get(&w->m.cq, &e) == 1)
		if (e.slot == slot)
			last = e;
	return last;
}

static struct egw_attach_cmd
recv_open(uint64_t room, uint32_t slot, uint16_t rank, uint16_t nranks)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = EGW_OP_RECV_OPEN;
	c.tag = room * 10 + rank;
	c.room = room;
	c.rank = rank;
	c.nranks = nranks;
	c.peer_id = 1;
	c.slot = slot;
	return c;
}

static struct egw_attach_cmd
on_slot(uint8_t op, uint64_t room, uint32_t slot)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = op;
	c.tag = room * 100 + op;
	c.room = room;
	c.slot = slot;
	return c;
}

static const struct egw_attach_run runs[2] = { { 10, 3 }, { 20, 2 } };

/* Rank 1 opens first: it opens the group's room at the node for ranks
 * 0 and 1 (leader 0); rank 0 joins without a receive of its own. One
 * delivery, both slots list the same blocks; one release, after both. */
static void
test_group_shares_one_receive(void)
{
	struct world w;
	const struct egw_attach_slot *a, *b;
	struct egw_engines_stats st;

	w_init(&w, 2);
	w_cmd(&w, recv_open(5, 0, 1, 2));
	CU_ASSERT_EQUAL(w.f.group_opens, 1);
	CU_ASSERT_EQUAL(w.f.rank, 0);
	CU_ASSERT_EQUAL(w.f.nranks, 2);
	CU_ASSERT_EQUAL(w.f.ranks, 0x3);
	w_cmd(&w, recv_open(5, 1, 0, 2));
	CU_ASSERT_EQUAL(w.f.group_opens, 1);
	CU_ASSERT_EQUAL(w.f.recv_opens, 0);
	CU_ASSERT_EQUAL(w_last(&w, 1).state, EGW_ATTACH_STATE_BOOTSTRAPPING);
	/* the node reports for the leader; both members hear it */
	egw_engines_room_state(w.srv, EGW_SIDE_RECV, w.f.room, 0,
			       EGW_ATTACH_STATE_TRANSFERRING, 600, 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->state,
			EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->state,
			EGW_ATTACH_STATE_TRANSFERRING);
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, w.f.room, 0, 600,
						   runs, 2),
			0);
	a = egw_attach_slot_at(&w.m, 0);
	b = egw_attach_slot_at(&w.m, 1);
	CU_ASSERT_EQUAL(a->state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(b->state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(a->nruns, 2);
	CU_ASSERT_EQUAL(b->nruns, 2);
	CU_ASSERT_EQUAL(a->runs[1].start, 20);
	CU_ASSERT_EQUAL(b->runs[1].start, 20);
	CU_ASSERT_EQUAL(a->total_tokens, 600);
	/* the node's room ends with the delivery: the members keep it */
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, w.f.room, 0,
					      0),
			0);
	CU_ASSERT_EQUAL(a->state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(b->state, EGW_ATTACH_STATE_SUCCESS);
	(void)w_last(&w, 0);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 5, 1));
	CU_ASSERT_EQUAL(w_last(&w, 1).state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(w.f.releases, 0); /* rank 1 still reads them */
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 5, 0));
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.release_rank, 0);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, w.f.room, 0,
					      0),
			-ENOENT);
	egw_engines_stats(w.srv, &st);
	CU_ASSERT_EQUAL(st.group_opens, 1);
	CU_ASSERT_EQUAL(st.group_joins, 1);
	CU_ASSERT_EQUAL(st.rooms_ok, 2);
	w_fini(&w);
}

/* A member that opens after the delivery gets it at once. */
static void
test_late_member_delivered_at_once(void)
{
	struct world w;

	w_init(&w, 2);
	w_cmd(&w, recv_open(6, 0, 0, 2));
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, w.f.room, 0, 600,
						   runs, 2),
			0);
	CU_ASSERT_EQUAL(w_last(&w, 0).state, EGW_ATTACH_STATE_SUCCESS);
	w_cmd(&w, recv_open(6, 1, 1, 2));
	CU_ASSERT_EQUAL(w_last(&w, 1).state, EGW_ATTACH_STATE_SUCCESS);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->nruns, 2);
	CU_ASSERT_EQUAL(w.f.group_opens, 1);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 6, 0));
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 6, 1));
	CU_ASSERT_EQUAL(w.f.releases, 1);
	w_fini(&w);
}

/* A member that never opens is given up at the bootstrap deadline: the
 * blocks go back then, not before. */
static void
test_member_that_never_opens_given_up(void)
{
	struct world w;

	w_init(&w, 2);
	w_cmd(&w, recv_open(7, 0, 0, 2));
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, w.f.room, 0, 600,
						   runs, 2),
			0);
	w_cmd(&w, on_slot(EGW_OP_RELEASE, 7, 0));
	CU_ASSERT_EQUAL(w.f.releases, 0);
	w.now = 49 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 0);
	w.now = 50 * MS;
	egw_engines_poll(w.srv, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
	w_fini(&w);
}

/* A member's abort while the receive is in flight fails the group: the
 * other member fails aborted and the node's room is aborted once. */
static void
test_member_abort_in_flight_fails_group(void)
{
	struct world w;
	struct egw_attach_cqe e;

	w_init(&w, 2);
	w.f.done_inside_abort = true;
	w_cmd(&w, recv_open(8, 0, 0, 2));
	w_cmd(&w, recv_open(8, 1, 1, 2));
	(void)w_last(&w, 0);
	w_cmd(&w, on_slot(EGW_OP_ABORT, 8, 1));
	CU_ASSERT_EQUAL(w.f.recv_aborts, 1);
	CU_ASSERT_EQUAL(w.f.abort_rank, 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->room, 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->room, 0);
	egw_engines_poll(w.srv, w.now);
	e = w_last(&w, 0);
	(void)e;
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	/* the room id is free again for a new attempt */
	w_cmd(&w, recv_open(8, 0, 0, 2));
	CU_ASSERT_EQUAL(w.f.group_opens, 2);
	w_fini(&w);
}

/* The node's failure of the group's room fails every member. */
static void
test_node_failure_fails_every_member(void)
{
	struct world w;

	w_init(&w, 2);
	w_cmd(&w, recv_open(9, 0, 0, 2));
	w_cmd(&w, recv_open(9, 1, 1, 2));
	CU_ASSERT_EQUAL(egw_engines_room_done(w.srv, EGW_SIDE_RECV, w.f.room, 0,
					      EGW_E_TIMEOUT_ROUND),
			0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 0)->room, 0);
	CU_ASSERT_EQUAL(egw_attach_slot_at(&w.m, 1)->room, 0);
	CU_ASSERT_EQUAL(w.f.recv_aborts, 0);
	CU_ASSERT_EQUAL(egw_engines_rooms(w.srv), 0);
	w_fini(&w);
}

/* Groups of fanout_ranks consecutive ranks; a group of one rank (the
 * last of 3 with groups of 2) receives alone, as without fan-out. */
static void
test_group_sets_and_lone_rank(void)
{
	struct world w;

	w_init(&w, 2);
	w_cmd(&w, recv_open(10, 0, 2, 3));
	CU_ASSERT_EQUAL(w.f.recv_opens, 1);
	CU_ASSERT_EQUAL(w.f.group_opens, 0);
	CU_ASSERT_EQUAL(w.f.rank, 2);
	w_cmd(&w, recv_open(11, 1, 3, 4));
	CU_ASSERT_EQUAL(w.f.group_opens, 1);
	CU_ASSERT_EQUAL(w.f.rank, 2);
	CU_ASSERT_EQUAL(w.f.ranks, 0xc);
	w_fini(&w);

	/* fanout 1: every rank alone */
	w_init(&w, 1);
	w_cmd(&w, recv_open(12, 0, 0, 2));
	w_cmd(&w, recv_open(12, 1, 1, 2));
	CU_ASSERT_EQUAL(w.f.recv_opens, 2);
	CU_ASSERT_EQUAL(w.f.group_opens, 0);
	w_fini(&w);
}

/* A client that detaches drops its members' holds: the blocks go back
 * with the last of them. */
static void
test_detach_drops_holds(void)
{
	struct world w;

	w_init(&w, 2);
	w_cmd(&w, recv_open(13, 0, 0, 2));
	w_cmd(&w, recv_open(13, 1, 1, 2));
	CU_ASSERT_EQUAL(egw_engines_room_delivered(w.srv, w.f.room, 0, 600,
						   runs, 2),
			0);
	egw_engines_remove(w.srv, 0, w.now);
	CU_ASSERT_EQUAL(w.f.releases, 1);
	CU_ASSERT_EQUAL(w.f.released_blocks, 5);
	w_fini(&w);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "group_shares_one_receive", test_group_shares_one_receive },
		{ "late_member_delivered_at_once",
		  test_late_member_delivered_at_once },
		{ "member_that_never_opens_given_up",
		  test_member_that_never_opens_given_up },
		{ "member_abort_in_flight_fails_group",
		  test_member_abort_in_flight_fails_group },
		{ "node_failure_fails_every_member",
		  test_node_failure_fails_every_member },
		{ "group_sets_and_lone_rank", test_group_sets_and_lone_rank },
		{ "detach_drops_holds", test_detach_drops_holds },
		{ NULL, NULL },
	};
	return cu_run("engines_fanout", tests);
}
