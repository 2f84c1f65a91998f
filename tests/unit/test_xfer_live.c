/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reload's settings applied to running engines: refused whole when
 * anything is wrong, rooms in flight keep the deadlines they were given
 * and complete byte-exact, new rooms and per-tick checks take the new
 * values, the policy keeps what it learnt unless its settings change.
 * All on the harness's virtual clock.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "xfer_harness.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define TX (-1)

static struct w_conf
conf(void)
{
	struct w_conf c;

	w_conf_default(&c);
	c.nranks = 1;
	c.default_tokens = 1024;
	return c;
}

static const struct w_room_result *
result(struct world *w, uint64_t room, int who)
{
	return w_result(w, room, who);
}

static void
finish(struct world *w)
{
	CU_ASSERT_EQUAL(w_blocks_in_use(w, TX), 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	CU_ASSERT_EQUAL(w->pool_errors, 0);
	CU_ASSERT_EQUAL(w->oob_writes, 0);
	CU_ASSERT_EQUAL(w->foreign_writes, 0);
	CU_ASSERT_EQUAL(w->bad_bytes, 0);
	w_destroy(w);
}

static void
test_bad_settings_refused_whole(void)
{
	struct w_conf c = conf();
	struct world *w = w_create(&c);
	struct egw_xfer_conf x = c.xc;
	struct egw_policy p;

	x.timers.rto_ns = 7 * MS;
	x.max_rooms = c.xc.max_rooms * 2; /* sizes the room table */
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, NULL, 0),
			-EINVAL);
	CU_ASSERT_EQUAL(egw_xfer_sender_set_conf(w->tx, &x, 0), -EINVAL);
	x = c.xc;
	x.max_runs_per_room++;
	CU_ASSERT_EQUAL(egw_xfer_sender_set_conf(w->tx, &x, 0), -EINVAL);
	x = c.xc;
	x.pipeline_depth = 0;
	CU_ASSERT_EQUAL(egw_xfer_sender_set_conf(w->tx, &x, 0), -EINVAL);
	x = c.xc;
	x.timers.rto_max_ns = x.timers.rto_ns - 1;
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, NULL, 0),
			-EINVAL);
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], NULL, NULL, 0),
			-EINVAL);
	CU_ASSERT_EQUAL(egw_xfer_sender_set_conf(NULL, &c.xc, 0), -EINVAL);
	/* good settings with a policy of other blocks: nothing applied */
	x = c.xc;
	x.timers.bootstrap_ns = 50 * MS;
	CU_ASSERT_EQUAL(egw_policy_init_fixed(&p, 64, 4096), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, &p, 0),
			-EINVAL);
	/* the bootstrap deadline is still the old one: the room opened now
	 * (the sender never hears of it) fails past 50 ms */
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 9, 0, 1, 0, false,
					       w->now),
			0);
	w_run(w, 60 * SEC);
	CU_ASSERT_FATAL(result(w, 9, 0) != NULL);
	CU_ASSERT_EQUAL(result(w, 9, 0)->error, EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT(result(w, 9, 0)->at >= c.xc.timers.bootstrap_ns);
	CU_ASSERT_EQUAL(egw_policy_tokens(egw_xfer_receiver_policy(w->rx[0])),
			1024);
	finish(w);
}

/* Room 50 opened under a bootstrap deadline of 1 s keeps it after a
 * reload to 4 s; room 51, opened after, gets 4 s. */
static void
test_rooms_in_flight_keep_their_deadlines(void)
{
	struct w_conf c = conf();
	struct world *w;
	struct egw_xfer_conf x;

	c.xc.timers.bootstrap_ns = 1 * SEC;
	w = w_create(&c);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 50, 0, 1, 0, false, 0),
			0);
	w_run_for(w, 100 * MS);
	x = c.xc;
	x.timers.bootstrap_ns = 4 * SEC;
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, NULL, w->now),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 51, 0, 1, 0, false,
					       w->now),
			0);
	w_run(w, 60 * SEC);
	CU_ASSERT_FATAL(result(w, 50, 0) != NULL && result(w, 51, 0) != NULL);
	CU_ASSERT_EQUAL(result(w, 50, 0)->error, EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT_EQUAL(result(w, 51, 0)->error, EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT(result(w, 50, 0)->at < 2 * SEC);
	CU_ASSERT(result(w, 51, 0)->at >= 4 * SEC);
	finish(w);
}

/* A room whose payload is held while both engines take new timers and
 * limits: it completes, every byte as sent. */
static void
test_room_in_flight_completes_byte_exact(void)
{
	struct w_conf c = conf();
	struct world *w;
	struct egw_xfer_conf x;
	struct egw_policy p;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 7, 20000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 7, 0),
			EGW_ST_TRANSFERRING);
	x = c.xc;
	x.timers.rto_ns = 5 * MS;
	x.timers.round_ns = 9 * SEC;
	x.pipeline_depth = 1;
	x.max_blocks_per_round = 4;
	CU_ASSERT_EQUAL(egw_policy_init_fixed(&p, c.xc.geom.block_tokens, 2048),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, &p, w->now),
			0);
	CU_ASSERT_EQUAL(egw_xfer_sender_set_conf(w->tx, &x, w->now), 0);
	w->net.hold_writes = false;
	w_release_writes(w, true);
	w_run(w, 10 * SEC);
	CU_ASSERT_FATAL(result(w, 7, 0) != NULL);
	CU_ASSERT_EQUAL(result(w, 7, 0)->error, EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	CU_ASSERT_EQUAL(w->delivered_bytes, w->expected_bytes);
	CU_ASSERT_EQUAL(egw_policy_tokens(egw_xfer_receiver_policy(w->rx[0])),
			2048);
	finish(w);
}

/* Peer death is measured from the last word heard at every tick: a
 * shorter peer_dead_ms fails the rooms of a silent peer sooner. */
static void
test_peer_death_measured_with_new_values(void)
{
	struct w_conf c = conf();
	struct world *w;
	struct egw_xfer_conf x;

	c.xc.timers.peer_dead_ns = 20 * SEC;
	c.xc.timers.heartbeat_ns = 1 * SEC;
	c.xc.timers.bootstrap_ns = 30 * SEC;
	w = w_create(&c);
	w_run_for(w, 10 * MS);
	w->net.cut_mask = 1;
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 60, 0, 1, 0, false,
					       w->now),
			0);
	w_run_for(w, 100 * MS);
	x = c.xc;
	x.timers.peer_dead_ns = 500 * MS;
	x.timers.heartbeat_ns = 100 * MS;
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &x, NULL, w->now),
			0);
	w_run_for(w, 1 * SEC);
	CU_ASSERT_FATAL(result(w, 60, 0) != NULL);
	CU_ASSERT_EQUAL(result(w, 60, 0)->error, EGW_E_PEER_DEAD);
	CU_ASSERT(w_count_acts(w, 0, EGW_ACT_PEER_DEAD) == 1);
	w->net.cut_mask = 0;
	w_run(w, 60 * SEC);
	finish(w);
}

/* The same policy settings keep an adaptive policy's history; other
 * settings start it again. */
static void
test_policy_kept_unless_changed(void)
{
	struct w_conf c = conf();
	struct egw_policy p, q;
	struct world *w;

	CU_ASSERT_EQUAL(egw_policy_init_adaptive(&p, 128, 1024, 90, 128, 8192),
			0);
	c.policy = &p;
	w = w_create(&c);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(w_open(w, 70 + (uint64_t)i, 3000, false), 0);
		w_run(w, 10 * SEC);
	}
	CU_ASSERT_EQUAL(egw_xfer_receiver_policy(w->rx[0])->nseen, 3);
	q = p;
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &c.xc, &q, w->now),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_policy(w->rx[0])->nseen, 3);
	CU_ASSERT_EQUAL(egw_policy_init_adaptive(&q, 128, 1024, 50, 128, 8192),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_set_conf(w->rx[0], &c.xc, &q, w->now),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_policy(w->rx[0])->nseen, 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_policy(w->rx[0])->percentile, 50);
	finish(w);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "bad_settings_refused_whole",
		  test_bad_settings_refused_whole },
		{ "rooms_in_flight_keep_their_deadlines",
		  test_rooms_in_flight_keep_their_deadlines },
		{ "room_in_flight_completes_byte_exact",
		  test_room_in_flight_completes_byte_exact },
		{ "peer_death_measured_with_new_values",
		  test_peer_death_measured_with_new_values },
		{ "policy_kept_unless_changed",
		  test_policy_kept_unless_changed },
		{ NULL, NULL },
	};

	return cu_run("xfer_live", tests);
}
