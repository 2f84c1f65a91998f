/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fan-out (doc/xfer.md, "Fan-out"): one receiver room speaks for a group
 * of a room's ranks (the header's ranks), and the sender serves the whole
 * group with the leader's windows - one set of writes, every rank of the
 * group served. Both engines through the simulated pair, as test_xfer.c.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "xfer_harness.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define TX (-1)

static struct world *
world(uint16_t nranks, bool hold_writes)
{
	struct w_conf c;

	w_conf_default(&c);
	c.nranks = nranks;
	c.default_tokens = 1024;
	c.net.hold_writes = hold_writes;
	return w_create(&c);
}

static void
finish(struct world *w)
{
	CU_ASSERT_EQUAL(w_blocks_in_use(w, TX), 0);
	for (uint16_t r = 0; r < w->nranks; r++)
		CU_ASSERT_EQUAL(w_blocks_in_use(w, r), 0);
	CU_ASSERT_EQUAL(w->pool_errors, 0);
	CU_ASSERT_EQUAL(w->oob_writes, 0);
	CU_ASSERT_EQUAL(w->foreign_writes, 0);
	CU_ASSERT_EQUAL(w->bad_bytes, 0);
	w_destroy(w);
}

static int
err_of(struct world *w, uint64_t room, int who)
{
	const struct w_room_result *r = w_result(w, room, who);

	return r == NULL ? -1 : r->error;
}

/* Rank 0's engine opens the room for ranks 0 and 1 of 2. */
static void
open_group(struct world *w, uint64_t room, uint32_t total)
{
	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, room, 2, w->now), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open_group(w->rx[0], room, 0, 2, 0x3,
						     W_RECEIVER_PEER, false,
						     w->now),
			0);
	if (total != 0) {
		w->expected_bytes += w_pattern_bytes(w, total, false);
		CU_ASSERT_EQUAL(w_input(w, room, total), 0);
	}
}

/* An INIT for `rank` of a 2-rank room from that rank's engine. */
static struct egw_msg
init_of(struct world *w, uint64_t room, uint16_t rank, uint16_t ranks)
{
	struct egw_msg m = { .type = EGW_MSG_INIT,
			     .room = room,
			     .rank = rank,
			     .nranks = 2,
			     .ranks = ranks,
			     .block_tokens = w->geom.block_tokens,
			     .alloc_tokens = w->geom.block_tokens,
			     .nruns = 1,
			     .runs = { { 0, 1 } } };

	return m;
}

/* A room of two ranks, one INIT for both (ranks 0b11): one set of writes,
 * Success for the room, one delivery, every byte right. */
static void
test_group_one_set_of_writes(void)
{
	struct world *w = world(2, false);
	struct egw_xfer_stats tx, rx;
	uint32_t inits = 0;

	open_group(w, 90, 3000);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 90, TX), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 90, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	CU_ASSERT_EQUAL(w->delivered_bytes, w_pattern_bytes(w, 3000, false));
	/* rank 1's engine never spoke and got nothing */
	CU_ASSERT_EQUAL(w_count_sends(w, 1, EGW_MSG_INIT), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 1), 0);
	for (uint32_t i = 0; i < w->nlog; i++) {
		const struct w_log *l = &w->log[i];

		if (l->act.type == EGW_ACT_SEND && l->who == 0 &&
		    l->msg.type == EGW_MSG_INIT) {
			CU_ASSERT_EQUAL(l->msg.ranks, 0x3);
			inits++;
		}
		/* the sender's reports echo the set */
		if (l->act.type == EGW_ACT_SEND && l->who == TX &&
		    l->msg.type == EGW_MSG_STATUS)
			CU_ASSERT_EQUAL(l->msg.ranks, 0x3);
		if (l->act.type == EGW_ACT_DELIVER)
			CU_ASSERT_EQUAL(l->act.ranks, 0x3);
	}
	CU_ASSERT(inits >= 1);
	egw_xfer_sender_get_stats(w->tx, &tx);
	egw_xfer_receiver_get_stats(w->rx[0], &rx);
	/* one copy written: what the group saved is exactly one more */
	CU_ASSERT_EQUAL(tx.bytes, w_pattern_bytes(w, 3000, false));
	CU_ASSERT_EQUAL(tx.group_rooms, 1);
	CU_ASSERT_EQUAL(tx.group_ranks, 1);
	CU_ASSERT_EQUAL(tx.group_bytes_saved, tx.bytes);
	CU_ASSERT_EQUAL(rx.group_rooms, 1);
	CU_ASSERT_EQUAL(rx.group_ranks, 1);
	CU_ASSERT_EQUAL(rx.group_bytes_saved, tx.bytes);
	finish(w);
}

/* The same room with a rank each: twice the bytes, no group counted. */
static void
test_lone_ranks_write_twice(void)
{
	struct world *w = world(2, false);
	struct egw_xfer_stats tx;

	CU_ASSERT_EQUAL(w_open(w, 91, 3000, false), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 91, TX), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 2);
	egw_xfer_sender_get_stats(w->tx, &tx);
	CU_ASSERT_EQUAL(tx.bytes, 2 * w_pattern_bytes(w, 3000, false));
	CU_ASSERT_EQUAL(tx.group_rooms, 0);
	CU_ASSERT_EQUAL(tx.group_bytes_saved, 0);
	finish(w);
}

/* A rank of a group that sends its own INIT, or another set that holds
 * it, is refused with ERROR STATE; the group goes on. */
static void
test_conflicting_init_refused(void)
{
	struct world *w = world(2, false);
	struct egw_msg m;
	const struct w_log *l;

	open_group(w, 92, 0);
	w_run_for(w, 1 * MS);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 92),
			EGW_ST_WAITING_FOR_INPUT);
	m = init_of(w, 92, 1, 0);
	CU_ASSERT_EQUAL(w_to_sender(w, 1, &m), -EGW_E_STATE);
	l = &w->log[w->nlog - 1];
	CU_ASSERT_EQUAL(l->msg.type, EGW_MSG_ERROR);
	CU_ASSERT_EQUAL(l->msg.error, EGW_E_STATE);
	CU_ASSERT_EQUAL(l->msg.rank, 1);
	m = init_of(w, 92, 1, 0x2);
	CU_ASSERT_EQUAL(w_to_sender(w, 1, &m), -EGW_E_STATE);
	/* the leader itself with another set: refused too */
	m = init_of(w, 92, 0, 0x1);
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_STATE);
	/* an aux-only INIT never speaks for a group */
	m = init_of(w, 92, 0, 0x3);
	m.flags = EGW_MSGF_DUMMY;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, 1, &m),
			-EGW_E_BAD_RANK);
	w->expected_bytes += w_pattern_bytes(w, 2000, false);
	CU_ASSERT_EQUAL(w_input(w, 92, 2000), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 92, TX), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 92, 0), EGW_E_OK);
	finish(w);
}

/* A rank that bound itself first keeps the room from taking a set that
 * holds it: the leader's INIT is refused, the lone rank goes on. */
static void
test_set_over_bound_rank_refused(void)
{
	struct world *w = world(2, false);
	struct egw_msg m;

	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 93, 2, 0), 0);
	m = init_of(w, 93, 1, 0);
	CU_ASSERT_EQUAL(w_to_sender(w, 1, &m), 0);
	m = init_of(w, 93, 0, 0x3);
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_STATE);
	CU_ASSERT_EQUAL(egw_xfer_sender_abort(w->tx, 93, w->now), 0);
	w_run(w, 10 * SEC);
	finish(w);
}

/* The leader's failure is the group's: writes that fail end the room
 * Failed for every rank, and no group is counted. */
static void
test_leader_failure_fails_followers(void)
{
	struct world *w = world(2, true);
	struct egw_xfer_stats tx;
	struct egw_msg poll = { .type = EGW_MSG_STATUS,
				.flags = EGW_MSGF_POLL,
				.room = 94,
				.rank = 0,
				.nranks = 2,
				.ranks = 0x3 };
	const struct w_log *l;

	open_group(w, 94, 3000);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 94), EGW_ST_TRANSFERRING);
	w->expected_bytes = 0; /* nothing is delivered */
	w->net.hold_writes = false;
	w_release_writes(w, false);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 94, TX), EGW_E_TRANSPORT);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 94), EGW_ST_FAILED);
	CU_ASSERT_NOT_EQUAL(err_of(w, 94, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 0);
	/* a late poll for the group hears the failure, its set echoed */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &poll), 0);
	l = &w->log[w->nlog - 1];
	CU_ASSERT_EQUAL(l->msg.state, EGW_ST_FAILED);
	CU_ASSERT_EQUAL(l->msg.ranks, 0x3);
	egw_xfer_sender_get_stats(w->tx, &tx);
	CU_ASSERT_EQUAL(tx.group_rooms, 0);
	finish(w);
}

/* The leader's receiver gives up: ABORT with the set fails the room for
 * every rank, and the ACK echoes the set. */
static void
test_leader_abort_fails_room(void)
{
	struct world *w = world(2, true);
	bool acked = false;

	open_group(w, 95, 3000);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 95, 0, w->now), 0);
	w_run_for(w, 1 * MS); /* the ABORT reaches the sender first */
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 95), EGW_ST_FAILED);
	w->expected_bytes = 0;
	w->net.hold_writes = false;
	w_release_writes(w, true);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 95, TX), EGW_E_ABORTED);
	for (uint32_t i = 0; i < w->nlog; i++) {
		const struct w_log *l = &w->log[i];

		if (l->act.type == EGW_ACT_SEND && l->who == TX &&
		    l->msg.type == EGW_MSG_ABORT &&
		    (l->msg.flags & EGW_MSGF_ACK)) {
			CU_ASSERT_EQUAL(l->msg.ranks, 0x3);
			acked = true;
		}
	}
	CU_ASSERT(acked);
	finish(w);
}

/* A leader that restarts (ABORT BUSY) takes its set with it: the ACK
 * echoes the set, the followers are free again until the leader's new
 * INIT binds them. */
static void
test_leader_restart_unbinds_followers(void)
{
	struct world *w = world(2, false);
	struct egw_msg m = init_of(w, 97, 0, 0x3);
	struct egw_msg busy = { .type = EGW_MSG_ABORT,
				.room = 97,
				.rank = 0,
				.nranks = 2,
				.ranks = 0x3,
				.error = EGW_E_BUSY,
				.abort_id = 5 };
	const struct w_log *l;

	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 97, 2, 0), 0);
	m.seq = 10;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), 0);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 97),
			EGW_ST_WAITING_FOR_INPUT);
	busy.seq = 11;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &busy), 0);
	l = &w->log[w->nlog - 1];
	CU_ASSERT_EQUAL(l->msg.type, EGW_MSG_ABORT);
	CU_ASSERT(l->msg.flags & EGW_MSGF_ACK);
	CU_ASSERT_EQUAL(l->msg.ranks, 0x3);
	CU_ASSERT_EQUAL(l->msg.abort_id, 5);
	/* rank 1 is no follower now: its own INIT binds it */
	m = init_of(w, 97, 1, 0);
	m.seq = 1;
	CU_ASSERT_EQUAL(w_to_sender(w, 1, &m), 0);
	/* and the leader's new INIT for the set meets it */
	m = init_of(w, 97, 0, 0x3);
	m.seq = 12;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_STATE);
	m.ranks = 0;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), 0);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 97),
			EGW_ST_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(egw_xfer_sender_abort(w->tx, 97, w->now), 0);
	w_run(w, 10 * SEC);
	finish(w);
}

/* A group's receiver refused: a set that does not start at the rank, one
 * past nranks, an aux-only group. The rank's own bit is a plain open. */
static void
test_receiver_group_rules(void)
{
	struct world *w = world(2, false);

	CU_ASSERT_EQUAL(egw_xfer_receiver_open_group(w->rx[0], 96, 1, 2, 0x3,
						     W_RECEIVER_PEER, false, 0),
			-EGW_E_BAD_RANK);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open_group(w->rx[0], 96, 0, 2, 0x5,
						     W_RECEIVER_PEER, false, 0),
			-EGW_E_BAD_RANK);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open_group(w->rx[0], 96, 0, 2, 0x3,
						     W_RECEIVER_PEER, true, 0),
			-EGW_E_BAD_RANK);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open_group(w->rx[0], 96, 1, 2, 0x2,
						     W_RECEIVER_PEER, true, 0),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 96, 1, 0), 0);
	w_run(w, 10 * SEC);
	finish(w);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "group_one_set_of_writes", test_group_one_set_of_writes },
		{ "lone_ranks_write_twice", test_lone_ranks_write_twice },
		{ "conflicting_init_refused", test_conflicting_init_refused },
		{ "set_over_bound_rank_refused",
		  test_set_over_bound_rank_refused },
		{ "leader_failure_fails_followers",
		  test_leader_failure_fails_followers },
		{ "leader_abort_fails_room", test_leader_abort_fails_room },
		{ "leader_restart_unbinds_followers",
		  test_leader_restart_unbinds_followers },
		{ "receiver_group_rules", test_receiver_group_rules },
		{ NULL, NULL },
	};
	return cu_run("fanout", tests);
}
