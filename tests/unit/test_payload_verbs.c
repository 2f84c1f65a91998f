/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs payload driver without a device: the driver's own sources
 * against a stub rdma-core (stub/ibv_stub.c) that plays an RC QP's rules,
 * and its decisions (verbs_core.c) on plain tables. Proves the GID choice,
 * the send queue depth and that it is never overrun, how a batch becomes
 * a chain of WRs and which are signalled, that a batch completes once, a
 * QP error fails what was in flight exactly once while completions from
 * before the reset are ignored, and the errors of post() itself.
 */
#include <string.h>
#include <sys/mman.h>

#include "cu_main.h"
#include "ibv_stub.h"
#include "payload_pair.h"
#include "verbs_core.h"

static struct pp_pair pp;

#define ENC (pp.side[PP_ENC].drv)
#define LANG (pp.side[PP_LANG].drv)

static void
stub_device(void)
{
	ibv_stub_reset();
	ibv_stub_gid(0, PP_ENC_IP, IBV_GID_TYPE_ROCE_V2);
	ibv_stub_gid(1, PP_LANG_IP, IBV_GID_TYPE_ROCE_V2);
}

static void
open_connected(void)
{
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
}

/* One write of token `i` of the pool (block i / tokens, token i % tokens). */
static struct egw_write
token_write(uint32_t i)
{
	struct egw_write w = pp_emb(&pp, 0, 0, 1);

	w.src_block = w.dst_block = (i / PP_BLOCK_TOKENS) % PP_BLOCKS;
	w.src_token = w.dst_token = i % PP_BLOCK_TOKENS;
	return w;
}

static int
post_tokens(uint32_t n, uint64_t cookie)
{
	static struct egw_write w[VERBS_MAX_CHAIN];

	for (uint32_t i = 0; i < n; i++)
		w[i] = token_write(i);
	return pp.ops->post(ENC, 0, w, n, cookie);
}

static struct egw_payload_stats
enc_stats(void)
{
	struct egw_payload_stats st;

	pp.ops->stats(ENC, &st);
	return st;
}

/* ---- GID, depth ------------------------------------------------------ */

static void
test_gid_pick_table(void)
{
	struct ibv_gid_entry t[4];

	stub_device();
	ibv_stub_gid(0, PP_ENC_IP, IBV_GID_TYPE_IB);      /* wrong type */
	ibv_stub_gid(1, PP_ENC_IP, IBV_GID_TYPE_ROCE_V1); /* wrong type */
	ibv_stub_gid(2, PP_LANG_IP, IBV_GID_TYPE_ROCE_V2); /* wrong address */
	ibv_stub_gid(3, PP_ENC_IP, IBV_GID_TYPE_ROCE_V2);
	memcpy(t, ibv_stub.gid, sizeof(t));
	CU_ASSERT_EQUAL(verbs_gid_pick(t, 4, PP_ENC_IP), 3);
	CU_ASSERT_EQUAL(verbs_gid_pick(t, 4, PP_LANG_IP), 2);
	CU_ASSERT_EQUAL(verbs_gid_pick(t, 3, PP_ENC_IP), -1);
	CU_ASSERT_EQUAL(verbs_gid_pick(t, 0, PP_ENC_IP), -1);
	/* the index is the entry's own, not its place in what was read */
	CU_ASSERT_EQUAL(verbs_gid_pick(&t[2], 2, PP_ENC_IP), 3);
}

static void
test_gid_auto_on_open(void)
{
	struct egw_register r;

	stub_device();
	ibv_stub_gid(0, PP_ENC_IP, IBV_GID_TYPE_ROCE_V1);
	ibv_stub_gid(1, PP_LANG_IP, IBV_GID_TYPE_ROCE_V2); /* the other side */
	ibv_stub_gid(2, PP_ENC_IP, IBV_GID_TYPE_ROCE_V2);
	ibv_stub_gid(3, PP_ENC_IP, IBV_GID_TYPE_ROCE_V2);
	ibv_stub.gid_unreadable = 1u << 2; /* skipped, the next one taken */
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	pp_register(&pp, PP_ENC, &r);
	CU_ASSERT(memcmp(r.gid, ibv_stub.gid[3].gid.raw, 16) == 0);
	pp_close(&pp);

	/* no RoCEv2 entry for the port's address: open says so */
	stub_device();
	ibv_stub_gid(0, PP_ENC_IP, IBV_GID_TYPE_ROCE_V1);
	CU_ASSERT_EQUAL(pp_open(&pp, &egw_payload_verbs_ops, ""), -ENOENT);
}

/* The address vector names the peer by the GID of its REGISTER (for
 * RoCEv2, ::ffff: and its IPv4) with a hop limit that crosses routers:
 * 64 by default, the configured one otherwise. */
static void
test_av_gid_and_hop_limit(void)
{
	struct egw_register r;
	const struct ibv_ah_attr *av;

	stub_device();
	open_connected();
	pp_register(&pp, PP_LANG, &r);
	av = ibv_stub_qp_av(ibv_stub.qp[0]);
	CU_ASSERT_EQUAL(av->is_global, 1);
	CU_ASSERT(memcmp(av->grh.dgid.raw, r.gid, 16) == 0);
	CU_ASSERT(memcmp(av->grh.dgid.raw, ibv_stub.gid[1].gid.raw, 16) == 0);
	CU_ASSERT_EQUAL(av->grh.sgid_index, 0);
	CU_ASSERT_EQUAL(av->grh.hop_limit, 64);
	pp_close(&pp);

	stub_device();
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	pp.side[PP_ENC].par.hop_limit = 3;
	CU_ASSERT_FATAL(pp_reopen(&pp, PP_ENC) == 0);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	av = ibv_stub_qp_av(ibv_stub.qp[ibv_stub.nqp - 1]);
	CU_ASSERT_EQUAL(av->grh.hop_limit, 3);
	pp_close(&pp);
}

static void
test_sq_depth(void)
{
	CU_ASSERT_EQUAL(verbs_sq_depth(100), 100);
	CU_ASSERT_EQUAL(verbs_sq_depth(1 << 20), VERBS_MAX_SQ);
	CU_ASSERT_EQUAL(verbs_sq_depth(0), 0);
	CU_ASSERT_EQUAL(verbs_sq_depth(-1), 0);

	stub_device();
	ibv_stub.max_qp_wr = 100;
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	CU_ASSERT_EQUAL(ibv_stub.max_send_wr, 100);
	pp_close(&pp);
	stub_device();
	ibv_stub.max_qp_wr = 1 << 20;
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	CU_ASSERT_EQUAL(ibv_stub.max_send_wr, VERBS_MAX_SQ);
	pp_close(&pp);
	stub_device();
	ibv_stub.max_qp_wr = 0;
	CU_ASSERT_EQUAL(pp_open(&pp, &egw_payload_verbs_ops, ""), -ENODEV);
}

/* ---- chaining and signalling ----------------------------------------- */

static void
test_wr_id_round_trip(void)
{
	struct verbs_wr_id a = { .peer = 31, .gen = 200, .covered = 64,
				 .slot = 12345 }, b;

	b = verbs_wr_id_parse(verbs_wr_id_make(&a));
	CU_ASSERT_EQUAL(b.peer, 31);
	CU_ASSERT_EQUAL(b.gen, 200);
	CU_ASSERT_EQUAL(b.covered, 64);
	CU_ASSERT_EQUAL(b.slot, 12345);
	a.slot = VERBS_NO_BATCH;
	CU_ASSERT_EQUAL(verbs_wr_id_parse(verbs_wr_id_make(&a)).slot,
			VERBS_NO_BATCH);
}

static void
test_chain_signals_every_nth_and_last(void)
{
	const uint32_t n = 2 * VERBS_SIGNAL_EVERY + 2;
	struct egw_payload_cpl c[4];
	uint32_t signalled = 0, covered = 0;
	uint8_t gen;

	stub_device();
	open_connected();
	CU_ASSERT(post_tokens(n, 77) == 0);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 0); /* chained, posted by poll() */
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 77);
	CU_ASSERT(c[0].ok);
	CU_ASSERT_EQUAL(ibv_stub.post_calls, 1); /* one call for the chain */
	CU_ASSERT_EQUAL_FATAL(ibv_stub.nwr, n);
	gen = verbs_wr_id_parse(ibv_stub.wr[0].wr_id).gen;
	for (uint32_t i = 0; i < n; i++) {
		struct verbs_wr_id id = verbs_wr_id_parse(ibv_stub.wr[i].wr_id);
		bool want = (i + 1) % VERBS_SIGNAL_EVERY == 0 || i == n - 1;

		CU_ASSERT_EQUAL(ibv_stub.wr[i].signaled, want);
		CU_ASSERT_EQUAL(id.peer, 0);
		CU_ASSERT_EQUAL(id.gen, gen);
		CU_ASSERT_EQUAL(id.slot == VERBS_NO_BATCH, i != n - 1);
		signalled += ibv_stub.wr[i].signaled;
		covered += id.covered;
	}
	CU_ASSERT_EQUAL(signalled, 3);
	CU_ASSERT_EQUAL(covered, n); /* every WR freed exactly once */
	CU_ASSERT_EQUAL(enc_stats().writes, n);
	pp_close(&pp);
}

static void
test_batches_chain_into_one_post(void)
{
	struct egw_payload_cpl c[4];

	stub_device();
	open_connected();
	CU_ASSERT(post_tokens(3, 1) == 0);
	CU_ASSERT(post_tokens(2, 2) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 2);
	CU_ASSERT_EQUAL(ibv_stub.post_calls, 1);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 5);
	CU_ASSERT(c[0].cookie == 1 && c[0].ok);
	CU_ASSERT(c[1].cookie == 2 && c[1].ok);
	/* each batch's last WR is signalled */
	CU_ASSERT(ibv_stub.wr[2].signaled && ibv_stub.wr[4].signaled);
	CU_ASSERT(!ibv_stub.wr[0].signaled && !ibv_stub.wr[3].signaled);
	pp_close(&pp);
}

static void
test_write_outside_regions_fails_batch(void)
{
	struct egw_payload_cpl c[4];
	struct egw_write w[3];

	stub_device();
	open_connected();
	w[0] = token_write(0);
	w[1] = token_write(1);
	w[2] = pp_emb(&pp, 0, PP_BLOCKS, 1); /* past the peer's last block */
	CU_ASSERT(pp.ops->post(ENC, 0, w, 3, 1) == 0);
	CU_ASSERT(pp.ops->post(ENC, 0, w, 2, 2) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 2);
	CU_ASSERT(c[0].cookie == 1 && !c[0].ok);
	CU_ASSERT(c[1].cookie == 2 && c[1].ok);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 2); /* none of the failed batch's WRs */
	CU_ASSERT_EQUAL(enc_stats().refused_writes, 1);
	CU_ASSERT_EQUAL(enc_stats().writes, 2);
	pp_close(&pp);
}

static void
test_write_lands_and_rkey_checked(void)
{
	struct egw_payload_cpl c[2];
	struct egw_write w;
	struct egw_register r;

	stub_device();
	ibv_stub.execute = true;
	open_connected();
	pp_fill(&pp, 4, 11);
	w = pp_emb(&pp, 4, 6, PP_BLOCK_TOKENS);
	CU_ASSERT(pp.ops->post(ENC, 0, &w, 1, 5) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].ok);
	CU_ASSERT(pp_landed(&pp, 6, 11, PP_BLOCK_TOKENS));

	/* the peer's memory under a key it did not register: refused by the
	 * responder, the batch fails */
	pp_register(&pp, PP_LANG, &r);
	r.region[EGW_KIND_EMB].rkey ^= 0x5a5a;
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
	CU_ASSERT(pp.ops->post(ENC, 0, &w, 1, 6) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 6 && !c[0].ok);
	CU_ASSERT_EQUAL(enc_stats().qp_resets, 1);
	pp_close(&pp);
}

/* Peer slots beyond those given at open: a free slot has no QP (posts
 * refused), peer_add makes one (the CQ grown first) that connects and
 * carries writes, a taken slot is refused, and peer_remove destroys the
 * QP without touching the other peers'. */
static void
test_peer_slots_added_and_removed(void)
{
	struct egw_payload_peer pe = { .name = "lang-b" };
	struct egw_payload_cpl c[2];
	struct egw_register r;
	struct egw_write w;

	stub_device();
	ibv_stub.execute = true;
	open_connected();
	pp.side[PP_ENC].par.max_peers = 3;
	CU_ASSERT_FATAL(pp_reopen(&pp, PP_ENC) == 0);
	pp_fill(&pp, 4, 21);
	w = pp_emb(&pp, 4, 5, PP_BLOCK_TOKENS);
	CU_ASSERT_EQUAL(pp.ops->post(ENC, 1, &w, 1, 1), -EINVAL);
	CU_ASSERT_EQUAL(pp.ops->peer_add(ENC, 1, &pe), 0);
	CU_ASSERT_EQUAL(pp.ops->peer_add(ENC, 1, &pe), -EINVAL);
	CU_ASSERT_EQUAL(pp.ops->peer_add(ENC, 3, &pe), -EINVAL);
	pp_register(&pp, PP_LANG, &r);
	CU_ASSERT_FATAL(pp.ops->connect(ENC, 1, &r) == 0);
	CU_ASSERT(pp.ops->post(ENC, 1, &w, 1, 2) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 2 && c[0].ok);
	CU_ASSERT(pp_landed(&pp, 5, 21, PP_BLOCK_TOKENS));
	/* slot 0 (never connected since the reopen) goes; slot 1 stays */
	pp.ops->peer_remove(ENC, 0);
	CU_ASSERT_EQUAL(pp.ops->post(ENC, 0, &w, 1, 3), -EINVAL);
	CU_ASSERT_STRING_EQUAL(pp.ops->why(ENC, 0), "no such peer");
	pp_fill(&pp, 4, 22);
	CU_ASSERT(pp.ops->post(ENC, 1, &w, 1, 4) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 4 && c[0].ok);
	CU_ASSERT(pp_landed(&pp, 5, 22, PP_BLOCK_TOKENS));
	/* and back into slot 0 */
	CU_ASSERT_EQUAL(pp.ops->peer_add(ENC, 0, &pe), 0);
	pp_close(&pp);
}

/* ---- send queue depth ------------------------------------------------- */

static void
test_sq_never_overrun(void)
{
	struct egw_payload_cpl c[8];

	stub_device();
	ibv_stub.max_qp_wr = 100;
	open_connected();
	ibv_stub.hold = true;
	CU_ASSERT(post_tokens(60, 1) == 0);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 8), 0); /* on the wire */
	/* 60 + 60 > 100: refused whole, now, never handed to the device */
	CU_ASSERT(post_tokens(60, 2) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 8), 1);
	CU_ASSERT(c[0].cookie == 2 && !c[0].ok);
	/* what fits does go */
	CU_ASSERT(post_tokens(40, 3) == 0);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 8), 0);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 100);
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 8), 2);
	CU_ASSERT(c[0].cookie == 1 && c[0].ok);
	CU_ASSERT(c[1].cookie == 3 && c[1].ok);
	/* completions gave the room back */
	CU_ASSERT(post_tokens(100, 4) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 8), 1);
	CU_ASSERT(c[0].cookie == 4 && c[0].ok);
	CU_ASSERT_EQUAL(enc_stats().qp_resets, 0); /* the device never refused */
	pp_close(&pp);
}

/* The link of side `s` fails: its QP to ERR, in-flight WRs flush. */
static void
qp_error(int s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	CU_ASSERT_EQUAL(ibv_modify_qp(ibv_stub.qp[s], &a, IBV_QP_STATE), 0);
}

/* ---- completions, errors, generations ---------------------------------- */

static void
test_qp_error_fails_in_flight_once(void)
{
	struct egw_payload_cpl c[8];
	uint32_t peers[4];
	struct egw_payload_stats st;

	stub_device();
	open_connected();
	ibv_stub.hold = true;
	CU_ASSERT(post_tokens(3, 1) == 0);
	CU_ASSERT(post_tokens(2, 2) == 0);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 8), 0);
	qp_error(PP_ENC); /* as a failure on the wire would */
	ibv_stub.hold = false;
	/* five flushed WRs, five error completions in one poll: the first
	 * resets the QP, the other four are from before the reset */
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 8), 2);
	CU_ASSERT(c[0].cookie == 1 && !c[0].ok);
	CU_ASSERT(c[1].cookie == 2 && !c[1].ok);
	st = enc_stats();
	CU_ASSERT_EQUAL(st.qp_resets, 1);
	CU_ASSERT_EQUAL(st.failed_batches, 2);
	CU_ASSERT_EQUAL(ibv_stub_qp_state(ibv_stub.qp[PP_ENC]), IBV_QPS_RTS);
	/* a new PSN the peer must hear, once */
	CU_ASSERT_EQUAL(pp.ops->changed(ENC, peers, 4), 1);
	CU_ASSERT_EQUAL(peers[0], 0);
	CU_ASSERT_EQUAL(pp.ops->changed(ENC, peers, 4), 0);
	pp_close(&pp);
}

/* The peer's REGISTER as an ACK of the encode side's current endpoint. */
static void
echo_endpoint(struct egw_register *r)
{
	uint16_t mtu;

	pp.ops->endpoint(ENC, 0, &r->ack_qpn, &r->ack_psn, &mtu);
}

static void
test_posts_wait_for_peer_after_reset(void)
{
	struct egw_payload_cpl c[4];
	struct egw_register r;

	stub_device();
	open_connected();
	qp_error(PP_ENC); /* as a failure on the wire would */
	CU_ASSERT(post_tokens(1, 1) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1); /* flushed */
	CU_ASSERT(!c[0].ok);
	/* the peer has not seen our new PSN: fail now, not half-written */
	CU_ASSERT(post_tokens(1, 2) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 2 && !c[0].ok);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 1); /* nothing reached the device */
	/* its REGISTER (same endpoint) that does not echo our new one (an
	 * ACK delayed from before the reset echoes the old PSN): not yet */
	pp_register(&pp, PP_LANG, &r);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
	CU_ASSERT(post_tokens(1, 3) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 3 && !c[0].ok);
	/* its ACK echoing our current endpoint confirms it */
	echo_endpoint(&r);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
	CU_ASSERT(post_tokens(1, 4) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 4 && c[0].ok);
	pp_close(&pp);
}

static void
test_new_endpoint_fails_in_flight(void)
{
	struct egw_payload_cpl c[4];
	struct egw_register r;

	stub_device();
	open_connected();
	ibv_stub.hold = true;
	CU_ASSERT(post_tokens(2, 1) == 0);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 4), 0);
	CU_ASSERT(post_tokens(2, 2) == 0); /* chained, not yet posted */
	/* the peer comes back with a new QP: ours is reset towards it */
	pp_register(&pp, PP_LANG, &r);
	r.qpn += 100;
	r.psn ^= 0x1234;
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
	CU_ASSERT_EQUAL(ibv_stub_qp_dest(ibv_stub.qp[PP_ENC]), r.qpn);
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 2);
	CU_ASSERT(c[0].cookie == 1 && !c[0].ok);
	CU_ASSERT(c[1].cookie == 2 && !c[1].ok);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 2); /* the chained batch never went */
	/* and the link works on the new QP */
	CU_ASSERT(post_tokens(2, 3) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 3 && c[0].ok);
	pp_close(&pp);
}

/* The peer restarted: disconnect fails what was in flight or chained at
 * once and leaves the QP in RESET - nothing more reaches the old
 * incarnation; connect brings it up towards the new one. */
static void
test_disconnect_lets_go_of_the_old_incarnation(void)
{
	struct egw_payload_cpl c[4];
	struct egw_register r;

	stub_device();
	open_connected();
	ibv_stub.hold = true;
	CU_ASSERT(post_tokens(2, 1) == 0);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 4), 0);
	CU_ASSERT(post_tokens(2, 2) == 0); /* chained, not yet posted */
	pp.ops->disconnect(ENC, 0);
	CU_ASSERT_EQUAL(ibv_stub_qp_state(ibv_stub.qp[PP_ENC]), IBV_QPS_RESET);
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 2);
	CU_ASSERT(!c[0].ok && !c[1].ok);
	CU_ASSERT(post_tokens(2, 3) == 0); /* not connected: fails */
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 3 && !c[0].ok);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 2);
	pp_register(&pp, PP_LANG, &r);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
	CU_ASSERT_EQUAL(ibv_stub_qp_state(ibv_stub.qp[PP_ENC]), IBV_QPS_RTS);
	CU_ASSERT(post_tokens(2, 4) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT(c[0].cookie == 4 && c[0].ok);
	pp_close(&pp);
}

static void
test_connect_failure_is_negative_errno(void)
{
	struct egw_payload_cpl c[2];
	struct egw_register r;

	stub_device();
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_verbs_ops, "") == 0);
	pp_register(&pp, PP_LANG, &r);
	ibv_stub.modify_qp_rc = EINVAL; /* the device refuses RESET/INIT/RTR */
	CU_ASSERT_EQUAL(pp.ops->connect(ENC, 0, &r), -EINVAL);
	ibv_stub.modify_qp_rc = 0;
	CU_ASSERT(post_tokens(1, 4) == 0); /* not connected: fails whole */
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 4 && !c[0].ok);
	CU_ASSERT_EQUAL(ibv_stub.nwr, 0);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0); /* and can be retried */
	pp_close(&pp);
}

static void
test_cpl_apply(void)
{
	struct verbs_flight f;
	struct ibv_send_wr wr[8];
	struct ibv_sge sge[8];
	struct verbs_sq q = { .wr = wr, .sge = sge, .depth = 8, .gen = 4 };
	struct egw_register reg;
	struct egw_write w[2];
	struct egw_payload_cpl c[4];
	struct verbs_wr_id first, last;

	stub_device();
	open_connected();
	pp_register(&pp, PP_LANG, &reg);
	CU_ASSERT_FATAL(verbs_flight_init(&f, 4) == 0);
	w[0] = token_write(0);
	w[1] = token_write(1);
	verbs_chain_batch(&f, &q, &(struct verbs_dest){ .peer = 2, .reg = &reg,
			  .usable = true, .lkey = 9 }, pp.side[PP_ENC].pool,
			  w, 2, 55);
	CU_ASSERT_EQUAL_FATAL(q.nchain, 2);
	CU_ASSERT_EQUAL(f.in_use, 1);
	CU_ASSERT(verbs_chain_link(&q) == wr && wr[0].next == &wr[1] &&
		  wr[1].next == NULL);
	verbs_chain_done(&q, true);
	CU_ASSERT_EQUAL(q.used, 2);
	first = verbs_wr_id_parse(wr[0].wr_id);
	last = verbs_wr_id_parse(wr[1].wr_id);
	CU_ASSERT(first.peer == 2 && first.gen == 4 && first.covered == 0);
	CU_ASSERT(last.covered == 2 && last.slot != VERBS_NO_BATCH);

	/* an older generation's completion changes nothing */
	last.gen = 3;
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &last, IBV_WC_SUCCESS),
			VERBS_CPL_STALE);
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &last, IBV_WC_WR_FLUSH_ERR),
			VERBS_CPL_STALE);
	CU_ASSERT(q.used == 2 && f.in_use == 1 && f.ring.count == 0);
	/* the current one ends the batch, once */
	last.gen = 4;
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &last, IBV_WC_SUCCESS),
			VERBS_CPL_DONE);
	CU_ASSERT(q.used == 0 && f.in_use == 0);
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &last, IBV_WC_SUCCESS),
			VERBS_CPL_PROGRESS);
	CU_ASSERT_EQUAL_FATAL(egw_payload_ring_drain(&f.ring, c, 4), 1);
	CU_ASSERT(c[0].cookie == 55 && c[0].ok);
	/* an error of the current generation asks for a reset; the reset
	 * fails what is in flight and moves the generation on */
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &first, IBV_WC_REM_ACCESS_ERR),
			VERBS_CPL_FAILED);
	verbs_chain_batch(&f, &q, &(struct verbs_dest){ .peer = 2, .reg = &reg,
			  .usable = true, .lkey = 9 }, pp.side[PP_ENC].pool,
			  w, 1, 56);
	verbs_sq_restart(&f, &q, 2);
	CU_ASSERT(q.gen == 5 && q.nchain == 0 && q.used == 0 && f.in_use == 0);
	CU_ASSERT_EQUAL_FATAL(egw_payload_ring_drain(&f.ring, c, 4), 1);
	CU_ASSERT(c[0].cookie == 56 && !c[0].ok);
	CU_ASSERT_EQUAL(verbs_cpl_apply(&f, &q, &first, IBV_WC_WR_FLUSH_ERR),
			VERBS_CPL_STALE);
	verbs_flight_free(&f);
	pp_close(&pp);
}

/* ---- post() errors ----------------------------------------------------- */

static void
test_post_errors(void)
{
	struct egw_payload_cpl c[64];
	struct egw_register r;
	uint32_t size;

	stub_device();
	open_connected();
	size = pp.side[PP_ENC].par.max_batches;
	CU_ASSERT_EQUAL(pp.ops->post(ENC, 1, NULL, 0, 1), -EINVAL);
	/* completions nobody polled fill the ring: -ENOBUFS, nothing taken */
	for (uint32_t i = 0; i < size; i++)
		CU_ASSERT(post_tokens(1, i) == 0);
	CU_ASSERT_EQUAL(pp.ops->poll(ENC, c, 0, 0), 0);
	CU_ASSERT_EQUAL(post_tokens(1, 99), -ENOBUFS);
	CU_ASSERT_EQUAL(enc_stats().batches, size);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_ENC, c, 64), size);
	/* batches on the wire count too: a reset would complete them all at
	 * once. Half completed and not polled, half on the wire: full. */
	for (uint32_t i = 0; i < size / 2; i++)
		CU_ASSERT(post_tokens(1, i) == 0);
	CU_ASSERT_EQUAL(pp.ops->poll(ENC, c, 0, 0), 0);
	ibv_stub.hold = true;
	for (uint32_t i = size / 2; i < size; i++)
		CU_ASSERT(post_tokens(1, i) == 0);
	CU_ASSERT_EQUAL(pp.ops->poll(ENC, c, 0, 0), 0);
	CU_ASSERT_EQUAL(post_tokens(1, 98), -ENOBUFS);
	/* the reset that room is kept for: every completion fits */
	qp_error(PP_ENC); /* as a failure on the wire would */
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 64), size);
	for (uint32_t i = 0; i < size; i++)
		CU_ASSERT(c[i].cookie == i && c[i].ok == (i < size / 2));
	pp_register(&pp, PP_LANG, &r);
	echo_endpoint(&r);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0); /* the peer confirms */
	CU_ASSERT(post_tokens(1, 99) == 0);
	/* an empty batch fails as a batch, not as a call: at once, before
	 * the one on the wire */
	CU_ASSERT(pp.ops->post(ENC, 0, NULL, 0, 100) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 64), 2);
	CU_ASSERT(c[0].cookie == 100 && !c[0].ok);
	CU_ASSERT(c[1].cookie == 99 && c[1].ok);
	pp_close(&pp);
}

/* ---- per-window keys ---------------------------------------------------- */

static void
open_with_window_keys(void)
{
	stub_device();
	ibv_stub.execute = true;
	CU_ASSERT_FATAL(pp_open_window_keys(&pp, &egw_payload_verbs_ops) == 0);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
}

static struct egw_payload_stats
lang_stats(void)
{
	struct egw_payload_stats st;

	pp.ops->stats(LANG, &st);
	return st;
}

/* The language side's QP towards the encode side (the one the encode
 * side's writes arrive at). */
static const struct ibv_qp *
lang_qp(void)
{
	for (uint32_t i = 0; i < ibv_stub.nqp; i++)
		if (ibv_stub.qp[i]->qp_num == ibv_stub_qp_dest(ibv_stub.qp[0]))
			return ibv_stub.qp[i];
	return NULL;
}

/* One EMB write of a whole block into `dst` under `rkey`; its batch's
 * result. */
static bool
write_block(uint32_t dst, uint32_t rkey, uint64_t cookie)
{
	struct egw_payload_cpl c[4];
	struct egw_write w = pp_emb(&pp, 0, dst, PP_BLOCK_TOKENS);

	w.rkey = rkey;
	CU_ASSERT_FATAL(pp.ops->post(ENC, 0, &w, 1, cookie) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, cookie);
	return c[0].ok;
}

/* Both sides' QPs back after a refused write: the writer took a new PSN,
 * the responder's QP is in error until the writer's new endpoint resets
 * it; each side then hears the other. */
static void
reconnect(void)
{
	struct egw_register r;

	pp_register(&pp, PP_ENC, &r);
	CU_ASSERT(pp.ops->connect(LANG, 0, &r) == 0);
	pp_register(&pp, PP_LANG, &r);
	echo_endpoint(&r);
	CU_ASSERT(pp.ops->connect(ENC, 0, &r) == 0);
}

/* Post a window's bind on the peer's QP and reap its completion: 0 when
 * it bound, the post's -errno, or -EIO when its completion failed. */
static int
bind_window(const struct egw_run *run, uint32_t keys[EGW_KIND_MAX],
	    uint64_t cookie)
{
	struct egw_payload_cpl c[4];
	int rc = pp.ops->window_bind(LANG, 0, run, keys, cookie, pp.now);

	if (rc != 0)
		return rc;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].kind, EGW_PAYLOAD_CPL_WINDOW);
	CU_ASSERT_EQUAL(c[0].cookie, cookie);
	return c[0].ok ? 0 : -EIO;
}

/* Post a window's invalidation and reap its completion (always ok). */
static void
unbind_window(const struct egw_run *run, uint64_t cookie)
{
	struct egw_payload_cpl c[4];

	pp.ops->window_unbind(LANG, run, cookie, pp.now);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].kind, EGW_PAYLOAD_CPL_WINDOW);
	CU_ASSERT_EQUAL(c[0].cookie, cookie);
	CU_ASSERT(c[0].ok);
}

static void
test_window_per_kind_on_peer_qp(void)
{
	const struct egw_pool_geom *g = &pp.side[PP_LANG].par.geom;
	struct egw_run run = { 2, 3 };
	uint32_t keys[EGW_KIND_MAX];
	struct egw_register r;
	uint32_t kinds = 0;

	open_with_window_keys();
	/* the pool admits no remote access of its own, and REGISTER
	 * carries no key to it */
	CU_ASSERT(!(ibv_stub.last_mr_access & IBV_ACCESS_REMOTE_WRITE));
	CU_ASSERT(ibv_stub.last_mr_access & IBV_ACCESS_MW_BIND);
	pp_register(&pp, PP_LANG, &r);
	for (int k = 0; k < EGW_KIND_MAX; k++)
		CU_ASSERT_EQUAL(r.region[k].rkey, 0);

	CU_ASSERT_FATAL(bind_window(&run, keys, 7) == 0);
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		size_t unit = egw_pool_geom_unit_bytes(g, (enum egw_kind)k);
		uint64_t per_block = k == EGW_KIND_AUX ? unit : unit * g->block_tokens;
		uint8_t *base = egw_pool_region(pp.side[PP_LANG].pool,
						(enum egw_kind)k);
		struct ibv_stub_mw *w;

		if (unit == 0) {
			CU_ASSERT_EQUAL(keys[k], 0); /* an absent kind: none */
			continue;
		}
		kinds++;
		w = ibv_stub_mw_by_key(keys[k]);
		CU_ASSERT_FATAL(w != NULL);
		CU_ASSERT(w->bound);
		CU_ASSERT_EQUAL(w->mw.type, IBV_MW_TYPE_2);
		/* on the QP the peer's writes arrive at */
		CU_ASSERT(w->qp == lang_qp());
		/* exactly the window's blocks of that kind */
		CU_ASSERT_EQUAL(w->addr, (uint64_t)(uintptr_t)base + 2 * per_block);
		CU_ASSERT_EQUAL(w->len, 3 * per_block);
		for (int j = 0; j < k; j++)
			CU_ASSERT_NOT_EQUAL(keys[j], keys[k]);
	}
	CU_ASSERT(kinds >= 3); /* embedding, fill_ids, aux at least */
	CU_ASSERT_EQUAL(ibv_stub.binds, kinds);
	CU_ASSERT_EQUAL(lang_stats().window_binds, 1);
	pp_close(&pp);
}

static void
test_window_admits_writes_only_while_open(void)
{
	struct egw_run run = { 2, 3 };
	uint32_t keys[EGW_KIND_MAX], again[EGW_KIND_MAX];

	open_with_window_keys();
	pp_fill(&pp, 0, 21);
	CU_ASSERT_FATAL(bind_window(&run, keys, 1) == 0);
	CU_ASSERT(write_block(4, keys[EGW_KIND_EMB], 1)); /* its last block */
	CU_ASSERT(pp_landed(&pp, 4, 21, PP_BLOCK_TOKENS));

	/* the room ends: invalidated on the QP, then its completion */
	unbind_window(&run, 2);
	CU_ASSERT_EQUAL(ibv_stub.invalidations, ibv_stub.binds);
	CU_ASSERT(!ibv_stub_mw_by_key(keys[EGW_KIND_EMB])->bound);
	CU_ASSERT_EQUAL(lang_stats().window_unbinds, 1);
	CU_ASSERT_EQUAL(lang_stats().window_unbind_deallocs, 0);
	/* a late write under its key is refused by the responder */
	pp_fill(&pp, 0, 22);
	CU_ASSERT(!write_block(4, keys[EGW_KIND_EMB], 2));
	CU_ASSERT(pp_landed(&pp, 4, 21, PP_BLOCK_TOKENS)); /* untouched */
	CU_ASSERT_EQUAL(enc_stats().qp_resets, 1);
	reconnect();

	/* a new window at the same first block: new keys (the key byte moved
	 * on), and the old key still admits nothing */
	CU_ASSERT_FATAL(bind_window(&run, again, 3) == 0);
	for (int k = 0; k < EGW_KIND_MAX; k++)
		if (keys[k] != 0)
			CU_ASSERT_NOT_EQUAL(again[k], keys[k]);
	CU_ASSERT(!write_block(4, keys[EGW_KIND_EMB], 3));
	CU_ASSERT(pp_landed(&pp, 4, 21, PP_BLOCK_TOKENS));
	pp_close(&pp);
}

static void
test_window_bounds_and_region_key(void)
{
	struct egw_run run = { 2, 3 };
	uint32_t keys[EGW_KIND_MAX];
	uint8_t *before;

	open_with_window_keys();
	before = egw_pool_addr(pp.side[PP_LANG].pool, EGW_KIND_EMB, 1, 0);
	pp_fill(&pp, 0, 31);
	CU_ASSERT_FATAL(bind_window(&run, keys, 1) == 0);
	/* the block before and the block after the window: refused */
	CU_ASSERT(!write_block(1, keys[EGW_KIND_EMB], 1));
	CU_ASSERT(before[0] == 0);
	reconnect();
	/* the QP was rebuilt under the window: closing it frees the MWs */
	unbind_window(&run, 2);
	CU_ASSERT_EQUAL(lang_stats().window_unbind_deallocs, 1);
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB]) == NULL);
	CU_ASSERT_FATAL(bind_window(&run, keys, 3) == 0);
	CU_ASSERT(!write_block(5, keys[EGW_KIND_EMB], 2));
	CU_ASSERT(!pp_landed(&pp, 5, 31, PP_BLOCK_TOKENS));
	reconnect();
	/* the region's own key (0 in REGISTER; the MR's real one here)
	 * admits nothing either */
	CU_ASSERT(!write_block(3, 0, 3));
	CU_ASSERT(!pp_landed(&pp, 3, 31, PP_BLOCK_TOKENS));
	pp_close(&pp);
}

static void
test_window_bind_on_a_qp_in_error(void)
{
	struct egw_run run = { 0, 2 };
	uint32_t keys[EGW_KIND_MAX];
	struct egw_payload_cpl c[4];
	uint32_t peers[4];

	open_with_window_keys();
	/* the responder's QP went to error (a refused write): the bind is
	 * flushed, nothing stays bound, the QP is rebuilt with a new PSN
	 * for the peer to hear */
	qp_error(PP_LANG);
	CU_ASSERT_EQUAL(bind_window(&run, keys, 5), -EIO);
	for (int i = 0; i < IBV_STUB_MAX_MW; i++)
		CU_ASSERT(!ibv_stub.mw[i].used || !ibv_stub.mw[i].bound);
	CU_ASSERT_EQUAL(lang_stats().window_bind_failed, 1);
	CU_ASSERT_EQUAL(lang_stats().qp_resets, 1);
	CU_ASSERT_EQUAL(pp.ops->changed(LANG, peers, 4), 1);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_LANG, c, 4), 0); /* nothing more */
	/* the next window on the rebuilt QP is bound */
	CU_ASSERT(bind_window(&run, keys, 6) == 0);
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB])->bound);
	pp_close(&pp);
}

static void
test_window_errors(void)
{
	uint32_t keys[EGW_KIND_MAX];
	struct egw_run run = { 6, 2 }, past = { 7, 2 }, none = { 3, 1 };
	struct egw_payload_cpl c[4];

	stub_device();
	CU_ASSERT_FATAL(pp_open_window_keys(&pp, &egw_payload_verbs_ops) == 0);
	/* not connected yet: no window */
	CU_ASSERT_EQUAL(bind_window(&run, keys, 1), -ENOTCONN);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	CU_ASSERT_EQUAL(pp.ops->window_bind(LANG, 1, &run, keys, 1, 0), -EINVAL);
	CU_ASSERT_EQUAL(pp.ops->window_bind(LANG, 0, &past, keys, 1, 0), -EINVAL);
	/* pending or open: never given twice */
	CU_ASSERT(pp.ops->window_bind(LANG, 0, &run, keys, 1, 0) == 0);
	CU_ASSERT_EQUAL(pp.ops->window_bind(LANG, 0, &run, keys, 2, 0), -EBUSY);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(pp.ops->window_bind(LANG, 0, &run, keys, 2, 0), -EBUSY);
	/* none open there: completes at once, nothing was closed */
	unbind_window(&none, 3);
	CU_ASSERT_EQUAL(lang_stats().window_unbinds, 0);
	pp_close(&pp);
	/* without window keys the driver binds nothing */
	stub_device();
	open_connected();
	CU_ASSERT_EQUAL(pp.ops->window_bind(LANG, 0, &run, keys, 1, 0), -EINVAL);
	CU_ASSERT(ibv_stub.last_mr_access & IBV_ACCESS_REMOTE_WRITE);
	pp_close(&pp);
}

/* A bind is posted and returned from at once: its keys admit nothing
 * until its completion is reaped, however late; window_bind_ns runs from
 * the post's `now` to the poll's. */
static void
test_window_bind_is_posted_and_completes_late(void)
{
	struct egw_run run = { 2, 3 };
	uint32_t keys[EGW_KIND_MAX];
	struct egw_payload_cpl c[4];

	open_with_window_keys();
	pp_fill(&pp, 0, 41);
	ibv_stub.hold = true;
	pp.now = 1000;
	CU_ASSERT_FATAL(pp.ops->window_bind(LANG, 0, &run, keys, 9, pp.now) == 0);
	CU_ASSERT(keys[EGW_KIND_EMB] != 0);
	pp.now = 51000;
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_LANG, c, 4), 0);
	/* no memory window has that key yet */
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB]) == NULL);
	CU_ASSERT_EQUAL(lang_stats().window_binds, 0);
	ibv_stub.hold = false;
	pp.now = 81000;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].kind, EGW_PAYLOAD_CPL_WINDOW);
	CU_ASSERT_EQUAL(c[0].cookie, 9);
	CU_ASSERT(c[0].ok);
	CU_ASSERT_FATAL(ibv_stub_mw_by_key(keys[EGW_KIND_EMB]) != NULL);
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB])->bound);
	CU_ASSERT_EQUAL(lang_stats().window_binds, 1);
	CU_ASSERT_EQUAL(lang_stats().window_bind_ns, 80000);
	CU_ASSERT(write_block(3, keys[EGW_KIND_EMB], 1));
	CU_ASSERT(pp_landed(&pp, 3, 41, PP_BLOCK_TOKENS));
	pp_close(&pp);
}

/* An invalidation pending: the keys still admit writes and no completion
 * says otherwise until it completed. */
static void
test_window_unbind_is_posted(void)
{
	struct egw_run run = { 2, 3 };
	uint32_t keys[EGW_KIND_MAX];
	struct egw_payload_cpl c[4];

	open_with_window_keys();
	CU_ASSERT_FATAL(bind_window(&run, keys, 1) == 0);
	ibv_stub.hold = true;
	pp.now = 5000;
	pp.ops->window_unbind(LANG, &run, 2, pp.now);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_LANG, c, 4), 0);
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB])->bound);
	ibv_stub.hold = false;
	pp.now = 7000;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 2);
	CU_ASSERT(c[0].ok);
	CU_ASSERT(!ibv_stub_mw_by_key(keys[EGW_KIND_EMB])->bound);
	CU_ASSERT_EQUAL(lang_stats().window_unbinds, 1);
	CU_ASSERT_EQUAL(lang_stats().window_unbind_ns, 2000);
	CU_ASSERT_EQUAL(lang_stats().window_unbind_deallocs, 0);
	pp_close(&pp);
}

/* Given up on while its bind is pending, a window is freed at once (its
 * close completes through the next poll) and the bind's own completion,
 * when it comes, is never reported. A reset of the QP completes every
 * pending bind as failed. */
static void
test_window_pending_given_up_and_reset(void)
{
	struct egw_run run = { 2, 3 }, other = { 6, 1 };
	uint32_t keys[EGW_KIND_MAX], more[EGW_KIND_MAX];
	struct egw_payload_cpl c[4];

	open_with_window_keys();
	ibv_stub.hold = true;
	CU_ASSERT_FATAL(pp.ops->window_bind(LANG, 0, &run, keys, 1, 0) == 0);
	pp.ops->window_unbind(LANG, &run, 2, 0);
	CU_ASSERT(ibv_stub_mw_by_key(keys[EGW_KIND_EMB]) == NULL);
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 2);
	CU_ASSERT(c[0].ok);
	CU_ASSERT_EQUAL(pp_poll(&pp, PP_LANG, c, 4), 0);
	/* a bind pending when the peer's QP is reset fails */
	ibv_stub.hold = true;
	CU_ASSERT_FATAL(pp.ops->window_bind(LANG, 0, &other, more, 3, 0) == 0);
	pp.ops->disconnect(LANG, 0);
	ibv_stub.hold = false;
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_LANG, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 3);
	CU_ASSERT(!c[0].ok);
	for (int i = 0; i < IBV_STUB_MAX_MW; i++)
		CU_ASSERT(!ibv_stub.mw[i].used || !ibv_stub.mw[i].bound);
	CU_ASSERT_EQUAL(lang_stats().window_bind_failed, 2);
	pp_close(&pp);
}

/* An encode pool cut into segments under verbs: the driver registers the
 * one range that holds them all, and a segment's memfd is that range's
 * blocks of the segment. */
static void
test_segments_cut_the_pool(void)
{
	struct egw_payload_params par;
	struct egw_payload *drv = NULL;
	struct egw_pool *pool = NULL;
	const struct egw_pool_mem *m;
	uint8_t *v, *at;
	int fd;

	stub_device();
	pp_params(&par, EGW_ROLE_ENCODE, "");
	par.geom.block_tokens = 16;
	par.geom.capacity_tokens = 256 * 16;
	par.segments = 4;
	CU_ASSERT_FATAL(egw_payload_verbs_ops.open(&par, 1, &drv, &pool) == 0);
	m = egw_payload_verbs_ops.pool_mem(drv);
	CU_ASSERT_FATAL(m != NULL && m->seg.nseg == 4);
	CU_ASSERT_PTR_EQUAL(m->mem, egw_pool_mem(pool));
	fd = egw_payload_pool_seg_fd(m, 3);
	CU_ASSERT_FATAL(fd >= 0);
	v = mmap(NULL, m->seg.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(v != MAP_FAILED);
	v[m->seg.off[EGW_KIND_FILL_IDS] + 4 * 16 * 2] = 0x77;
	at = egw_pool_addr(pool, EGW_KIND_FILL_IDS, 3 * 64 + 2, 0);
	CU_ASSERT(at != NULL && *at == 0x77);
	munmap(v, m->seg.bytes);
	egw_payload_verbs_ops.close(drv);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "segments cut the encode pool", test_segments_cut_the_pool },
		{ "GID: the RoCEv2 entry of the address, by its index",
		  test_gid_pick_table },
		{ "GID auto on open, and open fails without one",
		  test_gid_auto_on_open },
		{ "the address vector: the peer's GID, a hop limit for routers",
		  test_av_gid_and_hop_limit },
		{ "send queue depth from the device", test_sq_depth },
		{ "wr_id round trip", test_wr_id_round_trip },
		{ "every Nth WR and each batch's last are signalled",
		  test_chain_signals_every_nth_and_last },
		{ "batches chained between polls go in one post",
		  test_batches_chain_into_one_post },
		{ "a write outside the peer's regions fails its batch",
		  test_write_outside_regions_fails_batch },
		{ "writes land; a wrong rkey fails the batch",
		  test_write_lands_and_rkey_checked },
		{ "peer_slots_added_and_removed",
		  test_peer_slots_added_and_removed },
		{ "the send queue is never overrun", test_sq_never_overrun },
		{ "a QP error fails what is in flight once",
		  test_qp_error_fails_in_flight_once },
		{ "after a reset, posts wait for the peer's REGISTER",
		  test_posts_wait_for_peer_after_reset },
		{ "a peer's new endpoint fails what was in flight",
		  test_new_endpoint_fails_in_flight },
		{ "disconnect lets go of the old incarnation",
		  test_disconnect_lets_go_of_the_old_incarnation },
		{ "a connect the device refuses is a negative errno",
		  test_connect_failure_is_negative_errno },
		{ "completion handling and the generation check",
		  test_cpl_apply },
		{ "unknown peer -EINVAL; full ring (batches on the wire "
		  "included) -ENOBUFS",
		  test_post_errors },
		{ "window keys: a type-2 MW per kind on the peer's QP over "
		  "exactly the window; the region admits nothing itself",
		  test_window_per_kind_on_peer_qp },
		{ "window keys: writes land while the window is open, are "
		  "refused once it is invalidated; a new window, a new key",
		  test_window_admits_writes_only_while_open },
		{ "window keys: outside the window and under the region's "
		  "key refused; closed after a QP reset by freeing the MWs",
		  test_window_bounds_and_region_key },
		{ "window keys: a bind on a QP in error fails cleanly and the "
		  "QP is rebuilt",
		  test_window_bind_on_a_qp_in_error },
		{ "window keys: not connected, bad runs, twice",
		  test_window_errors },
		{ "window keys: a bind is posted; its keys admit writes once "
		  "its completion, however late, is reaped",
		  test_window_bind_is_posted_and_completes_late },
		{ "window keys: an invalidation is posted; the keys admit "
		  "writes until it completed",
		  test_window_unbind_is_posted },
		{ "window keys: a pending bind given up on is freed and never "
		  "reported; a reset fails pending binds",
		  test_window_pending_given_up_and_reset },
		{ NULL, NULL },
	};

	return cu_run("payload_verbs", tests);
}
