/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The semantics the resume protocol must hold, one named test each. Every
 * test runs both state machines through the simulated pair on a virtual
 * clock (microseconds of real time), so deadlines of seconds cost nothing.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "xfer_harness.h"
#include "xfer_core.h" /* xfer_core_probe_delete */

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull
#define TX (-1)

static struct w_conf
conf(uint16_t nranks, uint32_t def)
{
	struct w_conf c;

	w_conf_default(&c);
	c.nranks = nranks;
	c.default_tokens = def;
	return c;
}

/* Let every held or cut payload write go and run until both sides are
 * idle (the deadlines of seconds cost nothing on the virtual clock). */
static void
release_and_run(struct world *w)
{
	w->net.hold_writes = false;
	w->net.hold_mask = 0;
	w->net.cut_mask = 0;
	w_release_writes(w, true);
	w_run(w, 10 * SEC);
}

/* How every test ends: both sides idle, nothing leaked, every byte
 * checked; then the world goes. */
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

/* Distinct window offsets a receiver asked for, in order. */
static uint32_t
window_offsets(const struct world *w, int who, uint32_t *off, uint32_t max)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < w->nlog; i++) {
		const struct w_log *l = &w->log[i];
		bool seen = false;

		if (l->who != who || l->act.type != EGW_ACT_SEND ||
		    (l->msg.type != EGW_MSG_INIT && l->msg.type != EGW_MSG_RESUME))
			continue;
		for (uint32_t j = 0; j < n; j++)
			seen |= off[j] == l->msg.offset;
		if (!seen && n < max)
			off[n++] = l->msg.offset;
	}
	return n;
}

/* ---- states ------------------------------------------------------------ */

static void
test_states_move_forward_to_success(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 7, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 7, 0, 1, 0, false, 0),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 7, 0),
			EGW_ST_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 7), EGW_ST_BOOTSTRAPPING);
	w_run_for(w, 1 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 7, 0),
			EGW_ST_WAITING_FOR_INPUT);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 7),
			EGW_ST_WAITING_FOR_INPUT);
	w->expected_bytes += w_pattern_bytes(w, 2000, false);
	CU_ASSERT_EQUAL(w_input(w, 7, 2000), 0);
	w_run_for(w, 1 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 7, 0),
			EGW_ST_TRANSFERRING);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 7), EGW_ST_TRANSFERRING);
	w->net.hold_writes = false;
	w_release_writes(w, true);
	w_run_for(w, 5 * MS);
	CU_ASSERT_EQUAL(err_of(w, 7, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 7, TX), EGW_E_OK);
	/* the sender's slot is free already; its tombstone answers late
	 * duplicates with the final state until linger_ns passes */
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 7), EGW_ST_SUCCESS);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	/* DELIVER carries the time since the open (at 0): the room
	 * duration the metrics endpoint's histogram counts */
	CU_ASSERT(w->last_deliver_at > 2 * MS);
	CU_ASSERT_EQUAL(w->last_open_ns, w->last_deliver_at);
	{
		struct egw_xfer_stats st;
		struct egw_msg poll = { .type = EGW_MSG_STATUS, .room = 7,
					.rank = 0, .nranks = 1,
					.flags = EGW_MSGF_POLL };
		uint32_t before = w_count_sends(w, TX, EGW_MSG_STATUS);

		egw_xfer_sender_get_stats(w->tx, &st);
		CU_ASSERT_EQUAL(st.rooms_active, 0);
		CU_ASSERT_EQUAL(w_to_sender(w, 0, &poll), 0);
		CU_ASSERT_EQUAL(w_count_sends(w, TX, EGW_MSG_STATUS), before + 1);
		CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.state, EGW_ST_SUCCESS);
		CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.landed_tokens, 2000);
	}
	w_run_for(w, 3 * SEC);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 7), -EGW_E_UNKNOWN_ROOM);
	finish(w);
}

static void
test_failed_is_final_and_frees_both_sides(void)
{
	struct w_conf c = conf(2, 1024);
	struct world *w;
	struct egw_msg late = { .type = EGW_MSG_STATUS, .room = 9, .rank = 0,
				.nranks = 2, .state = EGW_ST_SUCCESS,
				.total_tokens = 5000, .landed_tokens = 5000,
				.accepted_tokens = 5120 };

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 9, 5000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 9, 0, w->now), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(err_of(w, 9, 0), EGW_E_ABORTED);
	CU_ASSERT_EQUAL(err_of(w, 9, TX), EGW_E_ABORTED);
	CU_ASSERT_EQUAL(err_of(w, 9, 1), EGW_E_ABORTED); /* the other rank too */
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 9), EGW_ST_FAILED);
	/* source blocks stay until the in-flight writes are done */
	CU_ASSERT(w_blocks_in_use(w, TX) > 0);
	release_and_run(w);
	/* final: a late Success for the failed room changes nothing */
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &late), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(w->deliveries, 0);
	CU_ASSERT_EQUAL(egw_xfer_sender_abort(w->tx, 9, w->now),
			-EGW_E_UNKNOWN_ROOM);
	finish(w);
}

/* Rooms first..first+n-1 of 300 tokens, each opened 2 ms after the
 * last. */
static void
open_one_by_one(struct world *w, uint64_t first, uint64_t n)
{
	for (uint64_t r = 0; r < n; r++) {
		CU_ASSERT_EQUAL(w_open(w, first + r, 300, false), 0);
		w_run_for(w, 2 * MS);
	}
}

static void
test_finished_rooms_free_their_slot_at_once(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	/* 8 room slots, 40 rooms in well under the 2 s linger: lingering in
	 * full slots would refuse room 9 on; tombstones do not */
	c.xc.max_rooms = 8;
	w = w_create(&c);
	open_one_by_one(w, 100, 40);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(w->deliveries, 40);
	egw_xfer_sender_get_stats(w->tx, &st);
	CU_ASSERT_EQUAL(st.rooms_ok, 40);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_NO_SLOT)], 0);
	CU_ASSERT(w->now < 2 * SEC);
	finish(w);
}

/* The sender keeps 4 x max_rooms tombstones: past that the oldest goes
 * first, and a room id used again replaces its own. */
static void
test_tombstones_evict_oldest_and_replace(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;

	c.xc.max_rooms = 8; /* 32 tombstones */
	w = w_create(&c);
	open_one_by_one(w, 100, 40);
	w_run_for(w, 20 * MS);
	CU_ASSERT_EQUAL(w->deliveries, 40);
	/* within linger: the 8 oldest were evicted, the 32 newest answer */
	for (uint64_t r = 0; r < 40; r++)
		CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 100 + r),
				r < 8 ? -EGW_E_UNKNOWN_ROOM : EGW_ST_SUCCESS);
	/* the newest room's id again: one tombstone for it, the others
	 * keep theirs */
	CU_ASSERT_EQUAL(w_open(w, 139, 300, false), 0);
	w_run_for(w, 20 * MS);
	CU_ASSERT_EQUAL(w->deliveries, 41);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 139), EGW_ST_SUCCESS);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 108), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 109), EGW_ST_SUCCESS);
	/* 31 more push out 109..138 and the replaced record, not the
	 * newer tombstone of the same id */
	open_one_by_one(w, 300, 31);
	w_run_for(w, 20 * MS);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 138), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 139), EGW_ST_SUCCESS);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 330), EGW_ST_SUCCESS);
	/* past linger every one is gone */
	w_run_for(w, 3 * SEC);
	for (uint64_t r = 0; r < 40; r++)
		CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 100 + r),
				-EGW_E_UNKNOWN_ROOM);
	finish(w);
}

/* ---- rounds ------------------------------------------------------------ */

static void
test_round_moves_min_of_remaining_and_allocated(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	uint32_t emb[8], aux[8], n = 0;

	c.xc.pipeline_depth = 1; /* one window at a time: rounds are visible */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 1, 2000, false), 0);
	w_run(w, 10 * SEC);
	for (uint32_t i = 0; i < w->nlog && n < 8; i++)
		if (w->log[i].act.type == EGW_ACT_POST_WRITES) {
			emb[n] = w->log[i].emb_tokens;
			aux[n++] = w->log[i].aux_writes;
		}
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(emb[0], 1024); /* min(2000 - 0, 1024) */
	CU_ASSERT_EQUAL(aux[0], 1);    /* aux rides with round one only */
	CU_ASSERT_EQUAL(emb[1], 976);  /* min(2000 - 1024, 1024) */
	CU_ASSERT_EQUAL(aux[1], 0);
	CU_ASSERT_EQUAL(err_of(w, 1, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 1); /* aux total checked at delivery */
	finish(w);
}

static void
test_zero_copy_resume_keeps_blocks(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 3, 10000, false), 0);
	w_run_for(w, 5 * MS);
	/* every window allocated, nothing freed or copied out: the room holds
	 * exactly the blocks that cover the total */
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), (10000 + 127) / 128);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_FREE), 0);
	release_and_run(w);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	CU_ASSERT_EQUAL(w->verified_tokens, 10000);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_FREE), 0);
	finish(w);
}

static void
test_surplus_of_default_is_trimmed_at_announce(void)
{
	struct w_conf c = conf(1, 8192);
	struct world *w;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 4, 500, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 4); /* ceil(500/128), not 64 */
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_SHRINK), 1);
	release_and_run(w);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	finish(w);
}

static void
resume_depth(uint32_t cap, uint32_t expect_windows)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	uint32_t off[512], n;

	c.xc.max_blocks_per_round = cap;
	c.dst_capacity = 512 * 128;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 5, 50000, false), 0);
	w_run(w, 60 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 5, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->verified_tokens, 50000);
	n = window_offsets(w, 0, off, 512);
	CU_ASSERT_EQUAL(n, expect_windows);
	for (uint32_t i = 1; i < n; i++) /* windows tile the tokens */
		CU_ASSERT(off[i] > off[i - 1] && off[i] % 128 == 0);
	finish(w);
}

static void
test_resume_to_any_depth(void)
{
	/* no cap: the whole remainder in one resume */
	resume_depth(0, 2);
	/* 8 blocks per round: 1024 + 48 x 1024 >= 50000 */
	resume_depth(8, 49);
	/* 1 block per round: 8 blocks then 383 more */
	resume_depth(1, 1 + (50000 - 1024 + 127) / 128);
}

static uint64_t
idle_waits(bool pipelined)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.xc.max_blocks_per_round = 8;
	c.xc.announce_early = pipelined;
	c.xc.pipeline_depth = pipelined ? 2 : 1;
	c.net.latency_ns = 20 * US;       /* RTT 40 us */
	c.net.write_ns = 200 * US;        /* a round's payload takes longer */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 6, 10000, false), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 6, 0), EGW_E_OK);
	egw_xfer_sender_get_stats(w->tx, &st);
	finish(w);
	return st.idle_waits;
}

static void
test_pipelined_resume_has_zero_idle_round_trips(void)
{
	/* 10000 tokens in 1024-token windows: 10 windows, 9 resumes */
	CU_ASSERT_EQUAL(idle_waits(true), 0);
	/* the reference design's way (total learnt after round one, resume after each
	 * landing) idles one round trip per resume */
	CU_ASSERT_EQUAL(idle_waits(false), 9);
}

/* ---- lossy control path ------------------------------------------------ */

static void
test_requests_retransmitted_with_backoff(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	uint64_t at[16];
	uint32_t n = 0;

	w = w_create(&c);
	w->net.cut_mask = 1; /* the link is down */
	CU_ASSERT_EQUAL(w_open(w, 8, 3000, false), 0);
	w_run_for(w, 100 * MS);
	for (uint32_t i = 0; i < w->nlog && n < 16; i++)
		if (w->log[i].who == 0 && w->log[i].act.type == EGW_ACT_SEND &&
		    w->log[i].msg.type == EGW_MSG_INIT)
			at[n++] = w->log[i].at;
	CU_ASSERT(n >= 5);
	for (uint32_t i = 2; i < n; i++) /* each gap doubles (tick rounding) */
		CU_ASSERT(at[i] - at[i - 1] >= 2 * (at[i - 1] - at[i - 2]) - 200 * US);
	w->net.cut_mask = 0; /* link back before any deadline */
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 8, 0), EGW_E_OK);
	finish(w);
}

/* ---- adaptive retransmission timeout (RFC 6298) ------------------------ */

static void
noop_emit(void *ctx, const struct egw_act *a)
{
	(void)ctx;
	(void)a;
}

/* A core alone, for its round-trip estimator. */
static void
rtt_core(struct xfer_core *core, uint64_t min, uint64_t first, uint64_t max)
{
	struct w_conf c = conf(1, 1024);

	c.xc.emit = noop_emit;
	c.xc.timers.rto_min_ns = min;
	c.xc.timers.rto_ns = first;
	c.xc.timers.rto_max_ns = max;
	CU_ASSERT_EQUAL_FATAL(xfer_core_init(core, &c.xc), 0);
	CU_ASSERT_EQUAL_FATAL(xfer_core_peer_add(core, 0, 1024, 0), 0);
}

/* The RFC's arithmetic: the first sample R sets SRTT = R, RTTVAR = R/2;
 * later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R'| (with the old SRTT),
 * SRTT = 7/8 SRTT + 1/8 R'; RTO = SRTT + 4 RTTVAR. */
static void
test_rtt_sample_sequence_gives_rfc6298_numbers(void)
{
	struct xfer_core core;
	const struct xfer_peer *p;

	rtt_core(&core, 1, 2 * MS, 10 * SEC);
	p = &core.peers[0];
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 2 * MS); /* no sample yet */
	xfer_core_rtt_sample(&core, 0, 100 * MS);
	CU_ASSERT_EQUAL(p->srtt, 100 * MS);
	CU_ASSERT_EQUAL(p->rttvar, 50 * MS);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 300 * MS);
	xfer_core_rtt_sample(&core, 0, 200 * MS);
	CU_ASSERT_EQUAL(p->rttvar, 62500 * US);
	CU_ASSERT_EQUAL(p->srtt, 112500 * US);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 362500 * US);
	xfer_core_rtt_sample(&core, 0, 100 * MS);
	CU_ASSERT_EQUAL(p->rttvar, 50 * MS);
	CU_ASSERT_EQUAL(p->srtt, 110937500ull);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 310937500ull);
	CU_ASSERT_EQUAL(p->rtt_samples, 3);
	CU_ASSERT_EQUAL(core.stats.rtt_samples, 3);
	xfer_core_fini(&core);
}

/* The timeout stays within the configured floor and ceiling. */
static void
test_rtt_timeout_within_bounds(void)
{
	struct xfer_core core;

	rtt_core(&core, 1 * MS, 2 * MS, 200 * MS);
	xfer_core_rtt_sample(&core, 0, 10 * US); /* 30 us computed */
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 1 * MS);
	for (int i = 0; i < 4; i++)
		xfer_core_rtt_sample(&core, 0, 1 * SEC);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 200 * MS);
	xfer_core_fini(&core);
}

/* A timeout doubles the peer's RTO for its next messages, once per RTO
 * however many rooms time out together, until a sample sets it again. */
static void
test_rtt_timeout_backs_off_until_a_sample(void)
{
	struct xfer_core core;

	rtt_core(&core, 1 * MS, 2 * MS, 200 * MS);
	xfer_core_rto_backoff(&core, 0, 0);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 4 * MS);
	xfer_core_rto_backoff(&core, 0, 1 * MS); /* the same timeout */
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 4 * MS);
	xfer_core_rto_backoff(&core, 0, 4 * MS);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 8 * MS);
	for (uint64_t t = 8 * MS; t < 10 * SEC; t += 200 * MS)
		xfer_core_rto_backoff(&core, 0, t);
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 200 * MS);
	xfer_core_rtt_sample(&core, 0, 3 * MS); /* 3 + 4 * 1.5 */
	CU_ASSERT_EQUAL(xfer_core_rto(&core, 0), 9 * MS);
	xfer_core_fini(&core);
}

/* A room over a link of 1 ms each way: the receiver times its windows
 * (INIT, RESUMEs) to the sender's acceptance, 2 ms each. */
static void
test_rtt_measured_from_windows(void)
{
	struct w_conf c = conf(1, 1024);
	struct egw_xfer_rtt rtt;
	struct world *w;

	c.net.latency_ns = 1 * MS;
	c.xc.timers.rto_ns = 20 * MS;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 8, 3000, false), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 8, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(egw_xfer_receiver_peer_rtt(w->rx[0], W_RECEIVER_PEER,
						   &rtt),
			0);
	CU_ASSERT(rtt.samples >= 1);
	/* the simulated network orders events by a nanosecond or so */
	CU_ASSERT(rtt.srtt_ns > 2 * MS - 10 * US &&
		  rtt.srtt_ns < 2 * MS + 10 * US);
	CU_ASSERT(rtt.rto_ns >= 2 * MS && rtt.rto_ns < 20 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_peer_rtt(w->rx[0], 99, &rtt),
			-EINVAL);
	finish(w);
}

/* Karn's rule: a window sent more than once gives no sample, whichever
 * copy the answer was to; the same room on a link never cut gives one. */
static void
test_rtt_no_sample_from_retransmitted(void)
{
	struct w_conf c = conf(1, 1024);
	struct egw_xfer_rtt rtt;
	struct egw_xfer_stats st;
	struct world *w;

	for (int cut = 0; cut < 2; cut++) {
		w = w_create(&c);
		w->net.cut_mask = cut ? 1 : 0;
		CU_ASSERT_EQUAL(w_open(w, 8, 1000, false), 0); /* one window */
		w_run_for(w, 10 * MS);
		w->net.cut_mask = 0;
		w_run(w, 10 * SEC);
		CU_ASSERT_EQUAL(err_of(w, 8, 0), EGW_E_OK);
		egw_xfer_receiver_get_stats(w->rx[0], &st);
		CU_ASSERT_EQUAL(egw_xfer_receiver_peer_rtt(w->rx[0],
							   W_RECEIVER_PEER,
							   &rtt),
				0);
		if (cut) {
			CU_ASSERT(st.retransmits > 0);
			CU_ASSERT_EQUAL(rtt.samples, 0);
			CU_ASSERT_EQUAL(rtt.srtt_ns, 0);
			/* backed off, and no sample has set it since */
			CU_ASSERT(rtt.rto_ns > c.xc.timers.rto_ns);
		} else {
			CU_ASSERT_EQUAL(rtt.samples, 1);
			CU_ASSERT(rtt.srtt_ns >
					  2 * c.net.latency_ns - 10 * US &&
				  rtt.srtt_ns < 2 * c.net.latency_ns + 10 * US);
		}
		finish(w);
	}
}

/* With every window accepted and the data not landed yet the timer polls
 * with STATUS: counted as a retransmission and as a poll; a window resent
 * over a cut link is a retransmission only. */
static void
test_polls_counted_apart(void)
{
	struct w_conf c = conf(1, 1024);
	struct egw_xfer_stats st;
	struct world *w;

	w = w_create(&c);
	w->net.hold_writes = true;
	CU_ASSERT_EQUAL(w_open(w, 8, 1000, false), 0);
	w_run_for(w, 50 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.polls > 0);
	CU_ASSERT_EQUAL(st.retransmits, st.polls);
	release_and_run(w);
	CU_ASSERT_EQUAL(err_of(w, 8, 0), EGW_E_OK);
	finish(w);

	w = w_create(&c);
	w->net.cut_mask = 1;
	CU_ASSERT_EQUAL(w_open(w, 8, 1000, false), 0);
	w_run_for(w, 50 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.retransmits > 0);
	CU_ASSERT_EQUAL(st.polls, 0);
	release_and_run(w);
	CU_ASSERT_EQUAL(err_of(w, 8, 0), EGW_E_OK);
	finish(w);
}

static void
test_duplicate_request_answered_without_work(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats before, after;
	struct egw_msg init = { 0 };
	uint32_t posts, status;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 10, 3000, false), 0);
	w_run_for(w, 2 * MS);
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == 0 && w->log[i].msg.type == EGW_MSG_INIT)
			init = w->log[i].msg;
	CU_ASSERT_EQUAL(init.type, EGW_MSG_INIT);
	egw_xfer_sender_get_stats(w->tx, &before);
	posts = w_count_acts(w, TX, EGW_ACT_POST_WRITES);
	status = w_count_sends(w, TX, EGW_MSG_STATUS);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(w_to_sender(w, 0, &init), 0);
	egw_xfer_sender_get_stats(w->tx, &after);
	CU_ASSERT_EQUAL(after.duplicates - before.duplicates, 10);
	CU_ASSERT_EQUAL(w_count_acts(w, TX, EGW_ACT_POST_WRITES), posts);
	CU_ASSERT_EQUAL(w_count_sends(w, TX, EGW_MSG_STATUS), status + 10);
	CU_ASSERT_EQUAL(after.windows, before.windows);
	release_and_run(w);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	finish(w);
}

static void
test_repeated_transferring_never_resumes_twice(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_msg st = { 0 };
	uint32_t allocs, resumes, off[64];

	c.net.hold_writes = true;
	w = w_create(&c);
	w->alloc_delay_ns = 1 * MS; /* the resume's allocation is slow */
	CU_ASSERT_EQUAL(w_open(w, 11, 5000, false), 0);
	w_run_for(w, 1500 * US);    /* announced; resume allocation pending */
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == TX && w->log[i].msg.type == EGW_MSG_STATUS &&
		    w->log[i].msg.total_tokens != 0)
			st = w->log[i].msg;
	CU_ASSERT_EQUAL(st.state, EGW_ST_TRANSFERRING);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_ALLOC), 2);
	allocs = w_count_acts(w, 0, EGW_ACT_ALLOC);
	/* the reference design's poll loop (its bug #5) */
	for (int i = 0; i < 100; i++)
		w_to_receiver(w, 0, &st);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_ALLOC), allocs);
	w_run_for(w, 5 * MS);        /* and again once the resume went out */
	resumes = window_offsets(w, 0, off, 64);
	allocs = w_count_acts(w, 0, EGW_ACT_ALLOC);
	for (int i = 0; i < 100; i++)
		w_to_receiver(w, 0, &st);
	w_run_for(w, 5 * MS);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_ALLOC), allocs);
	CU_ASSERT_EQUAL(window_offsets(w, 0, off, 64), resumes);
	CU_ASSERT_EQUAL(w_count_sends(w, 0, EGW_MSG_RESUME), 1);
	release_and_run(w);
	CU_ASSERT_EQUAL(w->deliveries, 1);
	CU_ASSERT_EQUAL(w->verified_tokens, 5000);
	finish(w);
}

static void
test_same_block_indices_change_nothing(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w = w_create(&c);
	uint32_t first_start = UINT32_MAX, second_start = UINT32_MAX;
	struct egw_msg old = { 0 };

	CU_ASSERT_EQUAL(w_open(w, 20, 2000, false), 0);
	w_run(w, 10 * SEC);
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == TX && w->log[i].msg.type == EGW_MSG_STATUS &&
		    w->log[i].msg.room == 20 && w->log[i].msg.landed_tokens == 1024)
			old = w->log[i].msg;
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == 0 && w->log[i].msg.type == EGW_MSG_INIT &&
		    w->log[i].msg.room == 20)
			first_start = w->log[i].msg.runs[0].start;
	/* the next room gets the very same blocks back from the allocator */
	w->net.hold_writes = true;
	CU_ASSERT_EQUAL(w_open(w, 21, 2000, false), 0);
	w_run_for(w, 2 * MS);
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].who == 0 && w->log[i].msg.type == EGW_MSG_INIT &&
		    w->log[i].msg.room == 21)
			second_start = w->log[i].msg.runs[0].start;
	CU_ASSERT_EQUAL(first_start, second_start);
	/* late Transferring of the old room, same indices: nothing happens */
	CU_ASSERT_EQUAL(old.type, EGW_MSG_STATUS);
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &old), -EGW_E_UNKNOWN_ROOM);
	release_and_run(w);
	CU_ASSERT_EQUAL(err_of(w, 21, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 2);
	finish(w);
}

/* ---- tensor parallel --------------------------------------------------- */

static void
test_multi_tp_success_only_when_all_ranks_hold_all(void)
{
	struct w_conf c = conf(4, 1024);
	struct world *w;

	c.net.hold_mask = 1u << 3; /* rank 3's payload is slow */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 30, 3000, false), 0);
	w_run_for(w, 50 * MS);
	CU_ASSERT_EQUAL(w->deliveries, 0);
	for (uint16_t r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[r], 30, r),
				EGW_ST_TRANSFERRING);
	release_and_run(w);
	CU_ASSERT_EQUAL(w->deliveries, 4);
	CU_ASSERT_EQUAL(w->verified_tokens, 4 * 3000);
	for (int r = -1; r < 4; r++)
		CU_ASSERT_EQUAL(err_of(w, 30, r), EGW_E_OK);
	finish(w);
}

static void
test_dummy_rank_gets_aux_only(void)
{
	struct w_conf c = conf(3, 1024);
	struct world *w = w_create(&c);

	CU_ASSERT_EQUAL(w_open(w, 31, 2000, true), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(w->deliveries, 3);
	CU_ASSERT_EQUAL(w->verified_tokens, 2 * 2000); /* dummy: aux only */
	CU_ASSERT_EQUAL(w->delivered_bytes, w->expected_bytes);
	CU_ASSERT_EQUAL(w_count_sends(w, 2, EGW_MSG_RESUME), 0);
	for (uint32_t i = 0; i < w->nlog; i++)
		if (w->log[i].act.type == EGW_ACT_POST_WRITES &&
		    w->log[i].dst_engine == 2) {
			CU_ASSERT_EQUAL(w->log[i].emb_tokens, 0);
			CU_ASSERT_EQUAL(w->log[i].aux_writes, 1);
		}
	finish(w);
}

static void
test_all_ranks_same_resume_decision(void)
{
	struct w_conf c = conf(4, 1024);
	struct world *w;
	uint32_t off[4][64], n[4];

	c.xc.max_blocks_per_round = 16;
	c.net.jitter_ns = 30 * US; /* ranks hear things in different orders */
	c.net.dup_pct = 10;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 32, 20000, false), 0);
	w_run(w, 10 * SEC);
	for (int r = 0; r < 4; r++)
		n[r] = window_offsets(w, r, off[r], 64);
	for (int r = 1; r < 4; r++) {
		CU_ASSERT_EQUAL(n[r], n[0]);
		CU_ASSERT_EQUAL(memcmp(off[r], off[0], n[0] * sizeof(off[0][0])), 0);
	}
	CU_ASSERT_EQUAL(w->deliveries, 4);
	finish(w);
}

/* ---- memory pressure --------------------------------------------------- */

static void
test_pool_exhausted_waits_and_completes(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.dst_capacity = 64 * 128; /* 8192 tokens for two 6000-token rooms */
	c.net.write_ns = 2 * MS;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 40, 6000, false), 0);
	CU_ASSERT_EQUAL(w_open(w, 41, 6000, false), 0);
	w_run(w, 10 * SEC);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.alloc_retries > 0);
	CU_ASSERT_EQUAL(err_of(w, 40, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 41, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->deliveries, 2);
	finish(w);
}

static void
test_room_larger_than_pool_fails_at_once(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;

	c.dst_capacity = 32 * 128; /* 4096 tokens can never hold 6000 */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 42, 6000, false), 0);
	w_run(w, 30 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 42, 0), EGW_E_TOO_LARGE);
	CU_ASSERT_EQUAL(err_of(w, 42, TX), EGW_E_ABORTED);
	/* at the announce, not at some timer */
	CU_ASSERT(w_result(w, 42, 0)->at <= 10 * MS);
	CU_ASSERT_EQUAL(w->deliveries, 0);
	finish(w);
}

/* A room that fits the pool, but whose memory another room holds (that
 * one's writes never complete), waits in the admission queue and fails
 * for memory exactly at its own deadline; the other room's blocks stay
 * quarantined until its writes drained. */
static void
test_pool_exhausted_fails_at_its_own_deadline(void)
{
	struct w_conf c = conf(1, 8192);
	struct world *w;
	struct egw_xfer_stats st;

	c.dst_capacity = 64 * 128;
	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 44, 8000, false), 0);
	w_run_for(w, 1 * SEC);
	CU_ASSERT_EQUAL(w_open(w, 45, 3000, false), 0);
	w_run_for(w, 40 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 44, 0), EGW_E_TIMEOUT_ROUND);
	CU_ASSERT_EQUAL(err_of(w, 45, 0), EGW_E_POOL_EXHAUSTED);
	CU_ASSERT(w_result(w, 45, 0)->at >= 1 * SEC + c.xc.timers.admit_ns &&
		  w_result(w, 45, 0)->at <= 1 * SEC + c.xc.timers.admit_ns + 10 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.admitted, 1);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT(st.quarantine_blocks >= 63);
	CU_ASSERT(w_blocks_in_use(w, 0) >= 63);
	release_and_run(w);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(st.quarantine_blocks, 0);
	CU_ASSERT_EQUAL(st.quarantine_acked, 1);
	CU_ASSERT_EQUAL(w->deliveries, 0);
	finish(w);
}

static void
test_alloc_result_after_failure_is_returned(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w = w_create(&c);

	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 43, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 43, 0, 1, 0, false, 0),
			0);
	/* the ALLOC is queued; the room dies before its result arrives */
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 43, 0, 0), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_FREE), 1);
	finish(w);
}

/* ---- deadlines and dead peers ------------------------------------------ */

static void
test_deadlines_on_every_state(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w = w_create(&c);

	/* bootstrap: the sender never hears of room 50, the receiver of 51 */
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 50, 0, 1, 0, false, 0),
			0);
	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 51, 1, 0), 0);
	/* waiting for input: both sides know room 52, no data ever comes */
	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 52, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 52, 0, 1, 0, false, 0),
			0);
	/* round in flight: room 53's payload never completes */
	w->net.hold_writes = true;
	CU_ASSERT_EQUAL(w_open(w, 53, 3000, false), 0);
	w_run(w, 60 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 50, 0), EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT_EQUAL(err_of(w, 51, TX), EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT_EQUAL(err_of(w, 52, 0), EGW_E_TIMEOUT_INPUT);
	CU_ASSERT(err_of(w, 52, TX) == EGW_E_TIMEOUT_INPUT ||
		  err_of(w, 52, TX) == EGW_E_ABORTED);
	CU_ASSERT(err_of(w, 53, TX) == EGW_E_TIMEOUT_ROUND ||
		  err_of(w, 53, TX) == EGW_E_ABORTED);
	CU_ASSERT(err_of(w, 53, 0) == EGW_E_TIMEOUT_ROUND ||
		  err_of(w, 53, 0) == EGW_E_ABORTED);
	/* the source blocks of 53 wait for the writes; then they go too */
	CU_ASSERT(w_blocks_in_use(w, TX) > 0);
	w->net.hold_writes = false;
	w_release_writes(w, false);
	w_run(w, 10 * SEC);
	finish(w);
}

/* The transport lost a peer: declared dead, its rooms fail at once on
 * the side that declares it, the others go on, it is counted once. */
static void
test_declared_dead_peer_fails_its_rooms_at_once(void)
{
	struct w_conf c = conf(2, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open_on(w, 70, 3000, 0), 0);
	CU_ASSERT_EQUAL(w_open_on(w, 71, 3000, 1), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_PTR_NULL(w_result(w, 71, TX));
	egw_xfer_sender_peer_dead(w->tx, W_SENDER_PEER_BASE + 1, w->now);
	egw_xfer_sender_peer_dead(w->tx, W_SENDER_PEER_BASE + 1, w->now);
	CU_ASSERT_EQUAL(err_of(w, 71, TX), EGW_E_PEER_DEAD);
	CU_ASSERT_PTR_NULL(w_result(w, 70, TX));
	egw_xfer_sender_get_stats(w->tx, &st);
	CU_ASSERT_EQUAL(st.peers_dead, 1);
	egw_xfer_receiver_peer_dead(w->rx[0], W_RECEIVER_PEER, w->now);
	CU_ASSERT_EQUAL(err_of(w, 70, 0), EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 72, 0, 1,
					       W_RECEIVER_PEER, false, w->now),
			-EGW_E_PEER_DEAD);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.peers_dead, 1);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_PEER_DEAD), 0);
	release_and_run(w);
	finish(w);
}

static void
test_dead_peer_fails_its_rooms_only(void)
{
	struct w_conf c = conf(2, 1024);
	struct world *w;

	c.net.write_ns = 10 * MS;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open_on(w, 60, 50000, 0), 0);
	CU_ASSERT_EQUAL(w_open_on(w, 61, 50000, 1), 0);
	CU_ASSERT_EQUAL(w_open_on(w, 62, 3000, 1), 0);
	w_run_for(w, 1 * MS);
	w->net.cut_mask = 1u << 1; /* language gateway 1 vanishes */
	w_run(w, 30 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 60, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 61, TX), EGW_E_PEER_DEAD);
	CU_ASSERT_EQUAL(err_of(w, 62, TX), EGW_E_PEER_DEAD);
	/* the survivor on the other side fails them at the same deadline */
	CU_ASSERT_EQUAL(err_of(w, 61, 1), EGW_E_PEER_DEAD);
	CU_ASSERT(w_result(w, 61, TX)->at <= 1 * MS + c.xc.timers.peer_dead_ns +
					      c.xc.timers.heartbeat_ns + MS);
	/* no new room towards a dead peer: refused at once, nothing held */
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[1], 63, 0, 1, 0, false,
					       w->now),
			-EGW_E_PEER_DEAD);
	release_and_run(w);
	finish(w);
}

/* ---- bad input --------------------------------------------------------- */

static void
test_bad_input_rejected_and_counted(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;
	struct egw_msg init = { 0 }, m, status = { 0 };

	c.net.hold_writes = true;
	c.xc.pipeline_depth = 1; /* only the first window while it is held */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 70, 5000, false), 0);
	w_run_for(w, 2 * MS);
	for (uint32_t i = 0; i < w->nlog; i++) {
		if (w->log[i].who == 0 && w->log[i].msg.type == EGW_MSG_INIT)
			init = w->log[i].msg;
		if (w->log[i].who == TX && w->log[i].msg.type == EGW_MSG_STATUS)
			status = w->log[i].msg;
	}
	/* a next window, made wrong in every way the sender must catch */
	m = init;
	m.type = EGW_MSG_RESUME;
	m.offset = 1u << 20;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BEYOND_TOTAL);
	m.offset = 2048;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), 0); /* ahead: just re-answered */
	CU_ASSERT_EQUAL(status.accepted_tokens, 1024);
	m.offset = status.accepted_tokens;
	m.runs[0] = (struct egw_run){ 1020, 8 }; /* beyond the 1024-block pool */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BAD_BLOCKS);
	m.runs[0] = (struct egw_run){ 900, 4 };
	m.runs[1] = (struct egw_run){ 902, 4 };   /* overlapping */
	m.nruns = 2;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BAD_BLOCKS);
	m.nruns = 1;
	m.runs[0] = init.runs[0];                 /* blocks of another window */
	m.alloc_tokens = init.runs[0].count * 128;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BAD_BLOCKS);
	m.runs[0] = (struct egw_run){ 900, 8 };
	m.alloc_tokens = 1000;                    /* not blocks x block_tokens */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_ALLOC_MISMATCH);
	m.alloc_tokens = 1024;
	m.block_tokens = 64;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BLOCK_TOKENS);
	m.block_tokens = 128;
	m.nruns = 0;
	m.alloc_tokens = 0;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_ZERO_BLOCKS);
	m.nruns = 1;
	m.alloc_tokens = 1024;
	m.offset = 5120;                          /* total is 5000 */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BEYOND_TOTAL);
	m.room = 999;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_UNKNOWN_ROOM);
	m.room = 70;
	m.rank = 3;
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BAD_RANK);
	CU_ASSERT_EQUAL(egw_xfer_sender_on_msg(w->tx, 77, &init, w->now),
			-EGW_E_UNKNOWN_PEER);
	egw_xfer_sender_get_stats(w->tx, &st);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BAD_BLOCKS)], 3);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_ALLOC_MISMATCH)], 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BLOCK_TOKENS)], 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_ZERO_BLOCKS)], 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_UNKNOWN_ROOM)], 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_UNKNOWN_PEER)], 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BEYOND_TOTAL)], 2);
	CU_ASSERT_EQUAL(st.reordered, 1);

	/* the receiver: impossible or contradictory reports */
	m = status;
	m.landed_tokens = m.accepted_tokens + 128;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &m), -EGW_E_BAD_STATUS);
	m = status;
	m.total_tokens = 4000;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &m), -EGW_E_TOTAL_CHANGED);
	m = status;
	m.state = EGW_ST_SUCCESS;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &m), -EGW_E_BAD_STATUS);
	m = status;
	m.room = 12345;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &m), -EGW_E_UNKNOWN_ROOM);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BAD_STATUS)], 2);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_TOTAL_CHANGED)], 1);

	/* the room was not corrupted by any of it */
	release_and_run(w);
	CU_ASSERT_EQUAL(err_of(w, 70, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(w->verified_tokens, 5000);
	finish(w);
}

static void
test_refused_init_fails_receiver_room(void)
{
	struct w_conf c = conf(2, 1024);
	struct world *w = w_create(&c);

	/* sender expects 2 ranks, receiver says 1: refused, room fails
	 * cleanly on the receiver; the ABORT it sends to get its blocks
	 * back fails the sender's room too, without waiting for the
	 * bootstrap deadline */
	CU_ASSERT_EQUAL(egw_xfer_sender_open(w->tx, 80, 2, 0), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 80, 0, 1, 0, false, 0),
			0);
	w_run(w, 30 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 80, 0), EGW_E_BAD_RANK);
	CU_ASSERT_EQUAL(err_of(w, 80, TX), EGW_E_ABORTED);
	CU_ASSERT(w_result(w, 80, TX)->at < 10 * MS);
	finish(w);
}


/* ---- STATUS counters, the dummy rank, refusals before a room ----------- */

/* Every STATUS the sender sent to rank `r`: total, landed, accepted and
 * state never went down, Failed ones included. Returns how many. */
static uint32_t
assert_status_monotonic(const struct world *w, uint16_t r,
			struct egw_msg *last)
{
	uint32_t n = 0;

	memset(last, 0, sizeof(*last));
	for (uint32_t i = 0; i < w->nlog; i++) {
		const struct w_log *l = &w->log[i];

		if (l->who != TX || l->act.type != EGW_ACT_SEND ||
		    l->msg.type != EGW_MSG_STATUS || l->msg.rank != r)
			continue;
		CU_ASSERT(l->msg.total_tokens >= last->total_tokens);
		CU_ASSERT(l->msg.landed_tokens >= last->landed_tokens);
		CU_ASSERT(l->msg.accepted_tokens >= last->accepted_tokens);
		CU_ASSERT(l->msg.state >= last->state);
		*last = l->msg;
		n++;
	}
	return n;
}

/* A room fails mid-transfer: its Failed STATUS and the answer while it
 * lingers carry the real counters, not zeros. */
static void
test_failed_status_keeps_its_counters(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_msg last, poll = { .type = EGW_MSG_STATUS,
				      .flags = EGW_MSGF_POLL, .room = 12,
				      .nranks = 1 };
	uint32_t n;

	c.net.hold_writes = true;
	c.xc.max_blocks_per_round = 8; /* small windows, two ahead */
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 12, 50000, false), 0);
	w_run_for(w, 2 * MS);
	w_release_writes(w, true); /* the windows accepted so far land */
	w_run_for(w, 1 * MS);
	CU_ASSERT_EQUAL(egw_xfer_sender_abort(w->tx, 12, w->now), 0);
	w_run_for(w, 2 * MS);
	n = assert_status_monotonic(w, 0, &last);
	CU_ASSERT(n >= 3);
	CU_ASSERT_EQUAL(last.state, EGW_ST_FAILED);
	CU_ASSERT_EQUAL(last.total_tokens, 50000);
	CU_ASSERT(last.landed_tokens >= 1024 && last.landed_tokens < 50000);
	CU_ASSERT(last.accepted_tokens >= 1024);
	/* the linger answer: the same numbers */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &poll), 0);
	n = assert_status_monotonic(w, 0, &last);
	CU_ASSERT_EQUAL(last.state, EGW_ST_FAILED);
	CU_ASSERT_EQUAL(last.total_tokens, 50000);
	CU_ASSERT(last.accepted_tokens >= 1024);
	release_and_run(w);
	finish(w);
}

/* A dummy rank's STATUS: accepted = its one window, landed 0 until its
 * aux write completed, then = total (beyond accepted, as the receiver's
 * checks allow for a dummy rank only); its Success is taken. The same
 * STATUS is refused by a rank that is not dummy. */
static void
test_dummy_rank_status_is_consistent(void)
{
	struct w_conf c = conf(2, 1024);
	struct world *w = w_create(&c);
	struct egw_msg last, fake;

	CU_ASSERT_EQUAL(w_open(w, 33, 3000, true), 0);
	w_run(w, 10 * SEC);
	CU_ASSERT_EQUAL(w->deliveries, 2);
	assert_status_monotonic(w, 1, &last);
	CU_ASSERT_EQUAL(last.state, EGW_ST_SUCCESS);
	CU_ASSERT_EQUAL(last.total_tokens, 3000);
	CU_ASSERT_EQUAL(last.landed_tokens, 3000);
	CU_ASSERT_EQUAL(last.accepted_tokens, c.xc.geom.block_tokens);
	/* a rank that is not dummy refuses landed beyond accepted */
	CU_ASSERT_EQUAL(w_open(w, 34, 3000, false), 0);
	w_run_for(w, 100 * US);
	fake = last;
	fake.room = 34;
	fake.rank = 0;
	fake.state = EGW_ST_TRANSFERRING;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &fake), -EGW_E_BAD_STATUS);
	w_run(w, 10 * SEC);
	finish(w);
}

/* An INIT for a room the sender does not know is checked as the room
 * would check it, without creating anything; a refusal echoes it. */
static void
test_init_checked_before_the_room_exists(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w = w_create(&c);
	struct egw_msg m = { .type = EGW_MSG_INIT, .room = 77, .rank = 0,
			     .nranks = 1, .nruns = 1, .alloc_tokens = 1024,
			     .runs = { { 0, 8 } } };
	struct egw_xfer_stats st;

	m.block_tokens = c.xc.geom.block_tokens;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			0);
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, 99, &m),
			-EGW_E_UNKNOWN_PEER);
	m.alloc_tokens = 1000;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			-EGW_E_ALLOC_MISMATCH);
	m.alloc_tokens = 1024;
	m.block_tokens = 64;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			-EGW_E_BLOCK_TOKENS);
	m.block_tokens = c.xc.geom.block_tokens;
	m.rank = 1;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			-EGW_E_BAD_RANK);
	m.rank = 0;
	m.nruns = 0;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			-EGW_E_ZERO_BLOCKS);
	m.nruns = 1;
	m.offset = 128;
	CU_ASSERT_EQUAL(egw_xfer_sender_check_init(w->tx, W_SENDER_PEER_BASE,
						   &m),
			-EGW_E_STATE);
	m.offset = 0;
	CU_ASSERT_EQUAL(egw_xfer_sender_state(w->tx, 77), -EGW_E_UNKNOWN_ROOM);
	/* a refusal is an ERROR echoing the request */
	CU_ASSERT_EQUAL(egw_xfer_sender_refuse(w->tx, W_SENDER_PEER_BASE, &m,
					  EGW_E_NO_SLOT, w->now), -EGW_E_NO_SLOT);
	CU_ASSERT_EQUAL(egw_xfer_sender_refuse(w->tx, W_SENDER_PEER_BASE, &m,
					  EGW_E_OK, w->now), -EINVAL);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.type, EGW_MSG_ERROR);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.error, EGW_E_NO_SLOT);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.state, EGW_MSG_INIT);
	egw_xfer_sender_get_stats(w->tx, &st);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_NO_SLOT)], 1);
	CU_ASSERT_EQUAL(st.rooms_opened, 0);
	finish(w);
}

/* The receiver retries NO_SLOT for its INIT until the room's deadline;
 * TOO_LARGE ends it at once. */
static void
test_no_slot_retried_too_large_final(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w = w_create(&c);
	struct egw_xfer_stats st;
	struct egw_msg e = { .type = EGW_MSG_ERROR, .state = EGW_MSG_INIT,
			     .room = 40, .nranks = 1, .error = EGW_E_NO_SLOT };

	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 40, 0, 1, 0, false, 0),
			0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_open(w->rx[0], 41, 0, 1, 0, false, 0),
			0);
	w_run_for(w, 1 * MS);
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &e), 0);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 40, 0),
			EGW_ST_BOOTSTRAPPING);
	/* the INIT sent again after the refusal is a retry, not a loss */
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.retries, 0);
	w_run_for(w, 50 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.retries > 0 && st.retries <= st.retransmits);
	e.room = 41;
	e.error = EGW_E_TOO_LARGE;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &e), 0);
	CU_ASSERT_EQUAL(err_of(w, 41, 0), EGW_E_TOO_LARGE);
	/* room 40 keeps asking, then fails by its own deadline */
	w_run(w, 30 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 40, 0), EGW_E_TIMEOUT_BOOTSTRAP);
	CU_ASSERT(w_count_sends(w, 0, EGW_MSG_INIT) > 10);
	finish(w);
}

/* BEYOND_TOTAL is checked before "RESUME ahead of accepted": a RESUME
 * both ahead and past the total is refused, not answered with STATUS. */
static void
test_beyond_total_before_ahead_of_accepted(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_msg m = { .type = EGW_MSG_RESUME, .room = 50, .nranks = 1,
			     .nruns = 1, .alloc_tokens = 1024,
			     .runs = { { 200, 8 } } };

	c.net.hold_writes = true;
	w = w_create(&c);
	m.block_tokens = c.xc.geom.block_tokens;
	CU_ASSERT_EQUAL(w_open(w, 50, 3000, false), 0);
	w_run_for(w, 1 * MS);
	m.offset = 4096; /* ahead of accepted and past the total */
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &m), -EGW_E_BEYOND_TOTAL);
	release_and_run(w);
	finish(w);
}


/* ---- quarantine --------------------------------------------------------- */

/*
 * Late writers: three rooms whose writes land only after the receiver's
 * round deadline fail there while their writes are still in flight. Their
 * blocks stay out of the pool until the sender's ABORT ACK, which comes
 * once those writes landed; the 300 rooms after them reuse the blocks and
 * arrive byte-exact, and the canary (every write checked against the
 * owner of its destination block when it lands) sees no write into a
 * block its room no longer owned.
 */
static void
test_late_writer_never_writes_into_reused_blocks(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st, tst;
	uint64_t late_until;
	uint32_t ok = 0, opened = 0;

	c.dst_capacity = 48 * 128;
	c.xc.max_blocks_per_round = 8;
	c.net.late_writes = true;
	c.net.write_ns = c.xc.timers.round_ns + 1 * SEC;
	w = w_create(&c);
	for (uint64_t i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(w_open(w, 60 + i, 2000, false), 0);
	late_until = c.net.write_ns; /* posted at 0 or after */
	w_run_for(w, 10 * MS);
	w->net.write_ns = 50 * US;
	for (uint64_t i = 0; i < 50; i++)
		opened += w_open(w, 1000 + i, 100 + (uint32_t)(i * 37 % 2900),
				 false) == 0;
	w_run_for(w, c.xc.timers.round_ns + 100 * MS);
	/* failed on the receiver, writes still in flight, blocks held */
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 3);
	CU_ASSERT_EQUAL(st.quarantine_blocks, 48);
	CU_ASSERT(w->now < late_until);
	for (uint64_t i = 0; i < 3; i++)
		CU_ASSERT(err_of(w, 60 + i, 0) == EGW_E_TIMEOUT_ROUND ||
			  err_of(w, 60 + i, 0) == EGW_E_ABORTED);
	CU_ASSERT_EQUAL(w->deliveries, 0); /* nothing reused the blocks */
	w_run(w, 120 * SEC);
	/* and more after those, through the same blocks */
	for (uint64_t i = 50; i < 300; i++) {
		opened += w_open(w, 1000 + i, 100 + (uint32_t)(i * 37 % 2900),
				 false) == 0;
		if (i % 50 == 49)
			w_run(w, 120 * SEC);
	}
	CU_ASSERT_EQUAL(opened, 300);
	for (uint64_t i = 0; i < 300; i++) {
		const struct w_room_result *r = w_result(w, 1000 + i, 0);

		ok += r != NULL && r->error == 0;
		if (i == 0)
			CU_ASSERT(r != NULL && r->at > late_until);
	}
	CU_ASSERT_EQUAL(ok, 300);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	egw_xfer_sender_get_stats(w->tx, &tst);
	/* the three, and the restarts of the rooms after them: each
	 * quarantine ended by its ACK */
	CU_ASSERT(st.quarantine_acked >= 3);
	CU_ASSERT_EQUAL(st.quarantine_acked, st.quarantined);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(st.quarantine_blocks, 0);
	CU_ASSERT(tst.abort_acks >= 3);
	finish(w); /* no foreign write, every byte right, pools empty */
}

/* The ABORT ACK rules on the sender: an ABORT for a room it does not know
 * is acknowledged at once; for a live room only once the rank's writes
 * drained; an ACK is never answered. */
static void
test_abort_ack_after_writes_drained(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_msg ab = { .type = EGW_MSG_ABORT, .room = 90, .nranks = 1,
			      .error = EGW_E_ABORTED };
	uint32_t acks;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &ab), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.type, EGW_MSG_ABORT);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.flags, EGW_MSGF_ACK);
	CU_ASSERT_EQUAL(w->log[w->nlog - 1].msg.error, EGW_E_ABORTED);
	ab.flags = EGW_MSGF_ACK;
	acks = w_count_sends(w, TX, EGW_MSG_ABORT);
	CU_ASSERT_EQUAL(w_to_sender(w, 0, &ab), -EGW_E_STATE);
	CU_ASSERT_EQUAL(w_count_sends(w, TX, EGW_MSG_ABORT), acks);
	CU_ASSERT_EQUAL(w_open(w, 91, 3000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 91, 0, w->now), 0);
	w_run_for(w, 50 * MS);
	/* writes held: no ACK yet, the blocks stay quarantined */
	CU_ASSERT_EQUAL(w_count_sends(w, TX, EGW_MSG_ABORT), acks);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	CU_ASSERT(w_count_sends(w, 0, EGW_MSG_ABORT) > 1); /* retransmitted */
	release_and_run(w);
	CU_ASSERT(w_count_sends(w, TX, EGW_MSG_ABORT) > acks);
	CU_ASSERT_EQUAL(err_of(w, 91, 0), EGW_E_ABORTED);
	finish(w);
}

/* A room that waited long for memory gives its blocks back and restarts
 * from token 0: its data still arrives byte-exact, and requests from its
 * first run that arrive late change nothing. */
static void
test_restart_from_token_zero(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.dst_capacity = 40 * 128;
	c.xc.max_blocks_per_round = 4;
	c.net.dup_pct = 20;
	c.net.jitter_ns = 30 * US;
	w = w_create(&c);
	/* two rooms that each need 3/4 of the pool: one must restart */
	CU_ASSERT_EQUAL(w_open(w, 70, 30 * 128, false), 0);
	CU_ASSERT_EQUAL(w_open(w, 71, 30 * 128, false), 0);
	w_run(w, 60 * SEC);
	CU_ASSERT_EQUAL(err_of(w, 70, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 71, 0), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 70, TX), EGW_E_OK);
	CU_ASSERT_EQUAL(err_of(w, 71, TX), EGW_E_OK);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.restarts >= 1);
	CU_ASSERT_EQUAL(w->verified_tokens, 2 * 30 * 128);
	finish(w);
}

/* Rooms that the pool cannot hold now wait in the queue as Bootstrapping,
 * never as an error, and are admitted in order of opening. */
static void
test_admission_queue_is_fifo(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;
	uint64_t prev = 0;

	c.dst_capacity = 16 * 128; /* two default windows */
	c.net.write_ns = 5 * MS;
	w = w_create(&c);
	for (uint64_t i = 0; i < 20; i++)
		CU_ASSERT_EQUAL(w_open(w, 200 + i, 900, false), 0);
	w_run_for(w, 1 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT(st.admit_queued >= 17);
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(w->rx[0], 219, 0),
			EGW_ST_BOOTSTRAPPING);
	w_run(w, 60 * SEC);
	for (uint64_t i = 0; i < 20; i++) {
		const struct w_room_result *r = w_result(w, 200 + i, 0);

		CU_ASSERT_FATAL(r != NULL);
		CU_ASSERT_EQUAL(r->error, EGW_E_OK);
		CU_ASSERT(r->at >= prev);
		prev = r->at;
	}
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.admit_queued, 0);
	CU_ASSERT(st.admit_queue_max >= 17);
	CU_ASSERT(st.admit_wait_max_ns > 0);
	CU_ASSERT(egw_xfer_wait_quantile(&st, 0.99) >= egw_xfer_wait_quantile(&st, 0.5));
	finish(w);
}

/* A quarantine also ends when the peer is declared dead (its writes can no
 * longer land): the blocks come back without an ACK, counted. */
static void
test_quarantine_ends_when_the_peer_dies(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 95, 3000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 95, 0, w->now), 0);
	w_run_for(w, 10 * MS);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	egw_xfer_receiver_peer_dead(w->rx[0], W_RECEIVER_PEER, w->now);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(st.quarantine_blocks, 0);
	CU_ASSERT_EQUAL(st.quarantine_dead, 1);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	CU_ASSERT_EQUAL(err_of(w, 95, 0), EGW_E_ABORTED); /* reported once */
	release_and_run(w);
	finish(w);
}

/* A peer alive (its heartbeats come) that never ACKs an ABORT: past
 * quarantine_ns the receiver asks once that the peer be fenced
 * (EGW_ACT_PEER_FENCE), counted; the blocks stay out until the
 * application has fenced it (peer_dead), then come back. */
static void
test_quarantine_deadline_fences_the_peer(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;

	c.net.hold_writes = true;
	c.xc.timers.quarantine_ns = 300 * MS;
	w = w_create(&c);
	w->keep_log = true;
	CU_ASSERT_EQUAL(w_open(w, 96, 3000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 96, 0, w->now), 0);
	/* ABORTs resent, no ACK (the writes are held): before the deadline
	 * nothing is asked */
	w_run_for(w, 250 * MS);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_PEER_FENCE), 0);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT_EQUAL(st.quarantine_expired, 0);
	CU_ASSERT_EQUAL(st.peers_dead, 0); /* alive: heartbeats flow */
	w_run_for(w, 100 * MS);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_PEER_FENCE), 1);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_expired, 1);
	/* not yet fenced: still held */
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	/* asked once, however long the fence takes */
	w_run_for(w, 500 * MS);
	CU_ASSERT_EQUAL(w_count_acts(w, 0, EGW_ACT_PEER_FENCE), 1);
	egw_xfer_receiver_peer_dead(w->rx[0], W_RECEIVER_PEER, w->now);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(st.quarantine_blocks, 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	CU_ASSERT_EQUAL(err_of(w, 96, 0), EGW_E_ABORTED); /* reported once */
	release_and_run(w);
	finish(w);
}

/* The abort_id of the receiver's last ABORT for `room` (0: none). */
static uint16_t
last_abort_id(const struct world *w, uint64_t room)
{
	for (uint32_t i = w->nlog; i > 0; i--)
		if (w->log[i - 1].who == 0 && w->log[i - 1].msg.type == EGW_MSG_ABORT &&
		    w->log[i - 1].msg.room == room)
			return w->log[i - 1].msg.abort_id;
	return 0;
}

/* An ACK ends only the quarantine whose ABORT it answers: one echoing
 * another abort_id (an earlier ABORT of the same rank, late) ends nothing;
 * the one echoing this quarantine's ends it. */
static void
test_ack_of_another_abort_ends_nothing(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;
	struct egw_msg ack = { .type = EGW_MSG_ABORT, .flags = EGW_MSGF_ACK,
			       .room = 96, .nranks = 1, .error = EGW_E_ABORTED };
	uint16_t id;

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 96, 3000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT_EQUAL(egw_xfer_receiver_abort(w->rx[0], 96, 0, w->now), 0);
	w_run_for(w, 10 * MS);
	id = last_abort_id(w, 96);
	CU_ASSERT_NOT_EQUAL_FATAL(id, 0);
	ack.abort_id = (uint16_t)(id - 1 == 0 ? 0xffff : id - 1);
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &ack), -EGW_E_STATE);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	ack.abort_id = id;
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &ack), 0);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(st.quarantine_acked, 1);
	release_and_run(w);
	finish(w);
}

/* A room failed by the sender's report of PEER_DEAD (another rank's peer
 * died; ours is alive and its writes may be in flight) is quarantined like
 * any failure: only our own peer-dead path frees at once. */
static void
test_reported_peer_dead_is_quarantined(void)
{
	struct w_conf c = conf(1, 1024);
	struct world *w;
	struct egw_xfer_stats st;
	struct egw_msg failed = { .type = EGW_MSG_STATUS, .room = 97, .nranks = 1,
				  .state = EGW_ST_FAILED, .error = EGW_E_PEER_DEAD };

	c.net.hold_writes = true;
	w = w_create(&c);
	CU_ASSERT_EQUAL(w_open(w, 97, 3000, false), 0);
	w_run_for(w, 2 * MS);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	CU_ASSERT_EQUAL(w_to_receiver(w, 0, &failed), 0);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 1);
	CU_ASSERT(w_blocks_in_use(w, 0) > 0);
	CU_ASSERT_EQUAL(err_of(w, 97, 0), EGW_E_PEER_DEAD);
	release_and_run(w);
	egw_xfer_receiver_get_stats(w->rx[0], &st);
	CU_ASSERT_EQUAL(st.quarantine_rooms, 0);
	CU_ASSERT_EQUAL(w_blocks_in_use(w, 0), 0);
	finish(w);
}

/* ---- the open-addressing deletion both tables use ---------------------- */

struct probe_slot {
	bool used;
	uint32_t home;  /* the slot's home bucket, chosen by the test */
	uint32_t key;
};

static uint32_t
probe_home(const void *slot, uint32_t mask)
{
	const struct probe_slot *p = slot;

	return p->used ? p->home & mask : UINT32_MAX;
}

static void
probe_clear(void *slot)
{
	((struct probe_slot *)slot)->used = false;
}

/* Found by linear probing from its home before an empty slot? */
static bool
probe_finds(const struct probe_slot *tab, uint32_t home, uint32_t key)
{
	for (uint32_t i = home & 7; tab[i].used; i = (i + 1) & 7)
		if (tab[i].key == key)
			return true;
	return false;
}

static void
test_backward_shift_delete_keeps_every_chain(void)
{
	uint64_t rnd = 88172645463325252ull;

	/* random fillings of an 8-slot table (wrap-around included): after
	 * deleting any one key, every other key is still found from its home,
	 * and the deleted one is not */
	for (int round = 0; round < 2000; round++) {
		struct probe_slot tab[8] = { 0 };
		const struct xfer_core_probe_table t = {
			.slots = tab, .size = sizeof(tab[0]), .mask = 7,
			.home = probe_home, .clear = probe_clear,
		};
		uint32_t homes[7], n = 1 + round % 7, victim, at;

		for (uint32_t k = 0; k < n; k++) {
			rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
			homes[k] = (uint32_t)rnd & 7;
			for (at = homes[k]; tab[at].used; at = (at + 1) & 7)
				;
			tab[at] = (struct probe_slot){ true, homes[k], k };
		}
		victim = (uint32_t)(rnd >> 32) % n;
		for (at = homes[victim]; tab[at].key != victim || !tab[at].used;
		     at = (at + 1) & 7)
			;
		xfer_core_probe_delete(&t, at);
		for (uint32_t k = 0; k < n; k++)
			CU_ASSERT_EQUAL(probe_finds(tab, homes[k], k), k != victim);
	}
}

/* ---- per-window keys: the receiver alone, its actions captured -------- */

static struct {
	struct egw_act act[16];
	struct egw_msg msg[16];
	unsigned n;
} cap;

static void
capture(void *ctx, const struct egw_act *a)
{
	(void)ctx;
	if (cap.n < 16) {
		cap.act[cap.n] = *a;
		if (a->msg != NULL)
			cap.msg[cap.n] = *a->msg;
		cap.n++;
	}
}

static const struct egw_act *
last_act(uint8_t type)
{
	for (unsigned i = cap.n; i-- > 0;)
		if (cap.act[i].type == type)
			return &cap.act[i];
	return NULL;
}

/* With window_keys a window is asked for as one run, an answer of two is
 * refused like any answer that does not fit, and the keys given with the
 * one run go out in its INIT; without keys, all 0. */
static void
test_window_keys_single_run_and_keys_in_init(void)
{
	struct egw_pool_geom g = { .capacity_tokens = 1024 * 128,
				   .block_tokens = 128, .hidden_size = 16,
				   .dtype_bytes = 2, .aux_bytes = 64 };
	const uint32_t keys[EGW_KIND_MAX] = { 0x1101, 0x2202, 0, 0x4404 };
	const struct egw_run two[2] = { { 0, 2 }, { 4, 2 } }, one = { 8, 4 };
	struct egw_xfer_conf c;
	struct egw_policy pol;
	struct egw_xfer_receiver *r;
	struct egw_xfer_stats st;
	const struct egw_act *a;

	for (int keyed = 1; keyed >= 0; keyed--) {
		memset(&cap, 0, sizeof(cap));
		egw_xfer_conf_default(&c, &g);
		c.emit = capture;
		c.window_keys = keyed;
		CU_ASSERT_FATAL(egw_policy_init_fixed(&pol, 128, 512) == 0);
		CU_ASSERT_FATAL(egw_xfer_receiver_create(&c, &pol, &r) == 0);
		CU_ASSERT_FATAL(egw_xfer_receiver_peer_add(r, 0, 0) == 0);
		CU_ASSERT_FATAL(
			egw_xfer_receiver_open(r, 7, 0, 1, 0, false, 0) == 0);
		a = last_act(EGW_ACT_ALLOC);
		CU_ASSERT_FATAL(a != NULL);
		CU_ASSERT_EQUAL(a->max_runs, keyed ? 1 : EGW_XFER_MAX_RUNS);
		if (keyed) {
			CU_ASSERT(egw_xfer_receiver_alloc_done_keys(r, 7, 0,
								    two, 2,
								    keys,
								    0) < 0);
			egw_xfer_receiver_get_stats(r, &st);
			CU_ASSERT_EQUAL(st.alloc_retries, 1);
			CU_ASSERT(last_act(EGW_ACT_FREE) != NULL); /* given back */
			CU_ASSERT(last_act(EGW_ACT_SEND) == NULL);
			egw_xfer_receiver_tick(r, 2 * MS); /* asks again */
			CU_ASSERT_EQUAL(egw_xfer_receiver_alloc_done_keys(
						r, 7, 0, &one, 1, keys, 2 * MS),
					0);
		} else {
			CU_ASSERT_EQUAL(egw_xfer_receiver_alloc_done(r, 7, 0,
								     &one, 1,
								     0),
					0);
		}
		a = last_act(EGW_ACT_SEND);
		CU_ASSERT_FATAL(a != NULL);
		CU_ASSERT_EQUAL(cap.msg[a - cap.act].type, EGW_MSG_INIT);
		CU_ASSERT_EQUAL(cap.msg[a - cap.act].nruns, 1);
		for (int k = 0; k < EGW_KIND_MAX; k++)
			CU_ASSERT_EQUAL(cap.msg[a - cap.act].rkeys[k],
					keyed ? keys[k] : 0);
		egw_xfer_receiver_destroy(r);
	}
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "late_writer_never_writes_into_reused_blocks",
		  test_late_writer_never_writes_into_reused_blocks },
		{ "abort_ack_after_writes_drained",
		  test_abort_ack_after_writes_drained },
		{ "ack_of_another_abort_ends_nothing",
		  test_ack_of_another_abort_ends_nothing },
		{ "reported_peer_dead_is_quarantined",
		  test_reported_peer_dead_is_quarantined },
		{ "quarantine_ends_when_the_peer_dies",
		  test_quarantine_ends_when_the_peer_dies },
		{ "quarantine_deadline_fences_the_peer",
		  test_quarantine_deadline_fences_the_peer },
		{ "restart_from_token_zero", test_restart_from_token_zero },
		{ "admission_queue_is_fifo", test_admission_queue_is_fifo },
		{ "tombstones_evict_oldest_and_replace",
		  test_tombstones_evict_oldest_and_replace },
		{ "failed_status_keeps_its_counters",
		  test_failed_status_keeps_its_counters },
		{ "dummy_rank_status_is_consistent",
		  test_dummy_rank_status_is_consistent },
		{ "init_checked_before_the_room_exists",
		  test_init_checked_before_the_room_exists },
		{ "no_slot_retried_too_large_final",
		  test_no_slot_retried_too_large_final },
		{ "beyond_total_before_ahead_of_accepted",
		  test_beyond_total_before_ahead_of_accepted },
		{ "states_move_forward_to_success",
		  test_states_move_forward_to_success },
		{ "backward_shift_delete_keeps_every_chain",
		  test_backward_shift_delete_keeps_every_chain },
		{ "failed_is_final_and_frees_both_sides",
		  test_failed_is_final_and_frees_both_sides },
		{ "finished_rooms_free_their_slot_at_once",
		  test_finished_rooms_free_their_slot_at_once },
		{ "round_moves_min_of_remaining_and_allocated",
		  test_round_moves_min_of_remaining_and_allocated },
		{ "zero_copy_resume_keeps_blocks",
		  test_zero_copy_resume_keeps_blocks },
		{ "surplus_of_default_is_trimmed_at_announce",
		  test_surplus_of_default_is_trimmed_at_announce },
		{ "resume_to_any_depth", test_resume_to_any_depth },
		{ "pipelined_resume_has_zero_idle_round_trips",
		  test_pipelined_resume_has_zero_idle_round_trips },
		{ "requests_retransmitted_with_backoff",
		  test_requests_retransmitted_with_backoff },
		{ "rtt_sample_sequence_gives_rfc6298_numbers",
		  test_rtt_sample_sequence_gives_rfc6298_numbers },
		{ "rtt_timeout_within_bounds", test_rtt_timeout_within_bounds },
		{ "rtt_measured_from_windows", test_rtt_measured_from_windows },
		{ "rtt_timeout_backs_off_until_a_sample",
		  test_rtt_timeout_backs_off_until_a_sample },
		{ "rtt_no_sample_from_retransmitted",
		  test_rtt_no_sample_from_retransmitted },
		{ "polls_counted_apart", test_polls_counted_apart },
		{ "duplicate_request_answered_without_work",
		  test_duplicate_request_answered_without_work },
		{ "repeated_transferring_never_resumes_twice",
		  test_repeated_transferring_never_resumes_twice },
		{ "same_block_indices_change_nothing",
		  test_same_block_indices_change_nothing },
		{ "multi_tp_success_only_when_all_ranks_hold_all",
		  test_multi_tp_success_only_when_all_ranks_hold_all },
		{ "dummy_rank_gets_aux_only", test_dummy_rank_gets_aux_only },
		{ "all_ranks_same_resume_decision",
		  test_all_ranks_same_resume_decision },
		{ "pool_exhausted_waits_and_completes",
		  test_pool_exhausted_waits_and_completes },
		{ "room_larger_than_pool_fails_at_once",
		  test_room_larger_than_pool_fails_at_once },
		{ "pool_exhausted_fails_at_its_own_deadline",
		  test_pool_exhausted_fails_at_its_own_deadline },
		{ "alloc_result_after_failure_is_returned",
		  test_alloc_result_after_failure_is_returned },
		{ "deadlines_on_every_state", test_deadlines_on_every_state },
		{ "declared_dead_peer_fails_its_rooms_at_once",
		  test_declared_dead_peer_fails_its_rooms_at_once },
		{ "dead_peer_fails_its_rooms_only",
		  test_dead_peer_fails_its_rooms_only },
		{ "bad_input_rejected_and_counted",
		  test_bad_input_rejected_and_counted },
		{ "refused_init_fails_receiver_room",
		  test_refused_init_fails_receiver_room },
		{ "window_keys_single_run_and_keys_in_init",
		  test_window_keys_single_run_and_keys_in_init },
		{ NULL, NULL },
	};
	return cu_run("xfer", tests);
}
