/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/node without DPDK: an encode node and a language node joined by an
 * in-memory datagram queue, payload as memcpy between their pools. Proves
 * the REGISTER exchange, a full resume transfer through the wire format,
 * that unknown, malformed, replayed, unregistered, mismatched and
 * misdirected datagrams are dropped and counted before the engines, and
 * that the node owns its deferred work: refused posts fail their rooms at
 * once, refused connects are retried.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "egw_node.h"
#include "egw_pattern.h"

#define ENC_IP 0x0a000001u
#define LANG_IP 0x0a000002u
#define PORT 9471

struct dgram {
	int to;              /* 0 encode, 1 language */
	uint32_t src;
	size_t len;
	uint8_t b[EGW_PROTO_MAX_LEN];
};

static struct {
	struct egw_conf conf[2];
	struct egw_pool *pool[2];
	struct egw_node *node[2];
	struct dgram q[4096];
	unsigned nq;
	uint64_t cpl[256];
	unsigned ncpl;
	uint64_t now;
	unsigned delivered, bad, done_err;
	unsigned sender_failed[EGW_E_COUNT];   /* DONE by wire reason */
	unsigned receiver_failed[EGW_E_COUNT];
	bool refuse_posts;    /* the driver refuses every batch */
	unsigned posts_refused;
	unsigned lang_connect_refusals; /* refuse this many connects */
	unsigned lang_connect_tries;
	struct dgram last[2]; /* the last datagram each side sent */
	uint32_t enc_psn;     /* the encode side's endpoint PSN */
	unsigned lang_peer_ups; /* the language side's driver connects */
	unsigned enc_peer_ups;  /* the encode side's */
	uint32_t lang_seen_psn;
	bool hold_writes;     /* the driver completes nothing for now */
	bool no_producer;     /* INITs for unknown rooms stay unknown */
	int producer_says;    /* non-zero: the producer refuses with it */
	unsigned unknown_calls; /* INITs handed to the producer */
} t;

/* The encode side's payload endpoint: a PSN the test can change, as the
 * verbs driver does when it rebuilds a QP after an error. */
static void
endpoint(void *ctx, uint32_t peer, uint32_t *qpn, uint32_t *psn, uint16_t *mtu)
{
	(void)peer;
	*qpn = (intptr_t)ctx == 0 ? 77 : 88;
	*psn = (intptr_t)ctx == 0 ? t.enc_psn : 5;
	*mtu = 1024;
}

/* The driver hears of a peer (new, or its endpoint changed). */
static int
peer_up(void *ctx, uint32_t peer, const struct egw_register *r)
{
	(void)peer;
	if ((intptr_t)ctx == 1) {
		t.lang_connect_tries++;
		if (t.lang_connect_refusals > 0) {
			t.lang_connect_refusals--;
			return -EAGAIN;
		}
		t.lang_peer_ups++;
		t.lang_seen_psn = r->psn;
	} else {
		t.enc_peer_ups++;
	}
	return 0;
}

static void
tx(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len)
{
	int from = (int)(intptr_t)ctx;
	struct dgram *d = &t.q[t.nq++ % 4096];

	(void)port;
	d->to = ip == ENC_IP ? 0 : 1;
	d->src = from == 0 ? ENC_IP : LANG_IP;
	d->len = len;
	memcpy(d->b, buf, len);
	t.last[from] = *d;
}

static int
post(void *ctx, uint32_t peer, const struct egw_write *w, uint32_t n,
     uint64_t cookie)
{
	(void)ctx;
	(void)peer;
	if (t.refuse_posts) {
		t.posts_refused++;
		return -EIO;
	}
	for (uint32_t i = 0; i < n; i++)
		memcpy(egw_pool_addr(t.pool[1], w[i].kind, w[i].dst_block, w[i].dst_token),
		       egw_pool_addr(t.pool[0], w[i].kind, w[i].src_block, w[i].src_token),
		       w[i].bytes);
	t.cpl[t.ncpl++] = cookie;
	return 0;
}

static void
deliver(void *ctx, const struct egw_act *a)
{
	(void)ctx;
	t.bad += (unsigned)egw_pattern_check(t.pool[1], a->room, a->tokens,
					     a->runs, a->nruns, a->aux_block,
					     a->dummy);
	t.delivered++;
	egw_node_release(t.node[1], a->room, a->runs, a->nruns);
}

static void
done(void *ctx, uint64_t room, uint16_t rank, enum egw_err e, bool is_sender)
{
	(void)ctx;
	(void)room;
	(void)rank;
	if (e == EGW_E_OK)
		return;
	t.done_err++;
	if (is_sender)
		t.sender_failed[egw_err_to_wire(e)]++;
	else
		t.receiver_failed[egw_err_to_wire(e)]++;
}

/* The encode side's producer: length = low 32 bits of the room id. */
static int
unknown_room(void *ctx, uint64_t room, uint16_t nranks, uint64_t now)
{
	struct egw_run runs[64];
	uint32_t total = (uint32_t)room;
	int n;

	(void)ctx;
	t.unknown_calls++;
	if (t.no_producer)
		return -EGW_E_UNKNOWN_ROOM;
	if (t.producer_says != 0)
		return t.producer_says;
	n = egw_node_alloc_src(t.node[0], room, total, runs, 64);
	CU_ASSERT_FATAL(n > 0);
	CU_ASSERT_EQUAL(egw_pattern_fill(t.pool[0], room, total, runs, (uint32_t)n), 0);
	CU_ASSERT_EQUAL(egw_node_sender_open(t.node[0], room, nranks, now), 0);
	CU_ASSERT_EQUAL(egw_node_input(t.node[0], room, total, runs, (uint32_t)n, now), 0);
	return 0;
}

static void
mkconf(struct egw_conf *c, const char *name, uint16_t role, uint32_t self,
       uint32_t peer, const char *peer_name, uint32_t hidden)
{
	egw_conf_defaults(c);
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->roles = role;
	c->geom.capacity_tokens = 1024 * 128;
	c->geom.hidden_size = hidden;
	memset(c->key.k, 0x5a, sizeof(c->key.k));
	c->nports = 1;
	snprintf(c->ports[0].name, sizeof(c->ports[0].name), "p0");
	c->ports[0].addr = self;
	c->ports[0].prefix = 24;
	c->ports[0].udp_port = PORT;
	c->ports[0].npeers = 1;
	snprintf(c->ports[0].peers[0].name, sizeof(c->ports[0].peers[0].name), "%s", peer_name);
	c->ports[0].peers[0].addr = peer;
	c->ports[0].peers[0].udp_port = PORT;
}

/* lang_policy_tokens: the language side's first window (0: default) */
static void
setup_with(uint32_t lang_hidden, uint32_t lang_policy_tokens)
{
	struct egw_node_ops ops = { .tx = tx, .post = post, .deliver = deliver,
				    .done = done, .unknown_room = unknown_room,
				    .endpoint = endpoint, .peer_up = peer_up };
	struct egw_region reg[EGW_KIND_MAX];

	memset(&t, 0, sizeof(t));
	t.enc_psn = 111;
	egw_proto_init();
	mkconf(&t.conf[0], "enc", EGW_ROLE_ENCODE, ENC_IP, LANG_IP, "lang", 16);
	mkconf(&t.conf[1], "lang", EGW_ROLE_LANGUAGE, LANG_IP, ENC_IP, "enc", lang_hidden);
	if (lang_policy_tokens > 0)
		t.conf[1].policy.tokens = lang_policy_tokens;
	for (int i = 0; i < 2; i++) {
		CU_ASSERT_FATAL(egw_pool_create(&t.conf[i].geom, NULL, 0, &t.pool[i]) == 0);
		for (int k = 0; k < EGW_KIND_MAX; k++)
			reg[k] = (struct egw_region){ 0, 0,
				(uint32_t)egw_geom_unit_bytes(&t.conf[i].geom, (enum egw_kind)k) };
		ops.ctx = (void *)(intptr_t)i;
		CU_ASSERT_FATAL(egw_node_create(&t.conf[i], 0, t.pool[i], reg, NULL, 0,
						&ops, 1000 + (uint64_t)i, 0, &t.node[i]) == 0);
	}
}

static void
setup(uint32_t lang_hidden)
{
	setup_with(lang_hidden, 0);
}

static void
teardown(void)
{
	for (int i = 0; i < 2; i++) {
		egw_node_destroy(t.node[i]);
		egw_pool_destroy(t.pool[i]);
	}
}

/* Deliver queued datagrams and completions; tick every 100 us. */
static void
run(uint64_t ns)
{
	uint64_t end = t.now + ns;
	unsigned head = 0;

	while (t.now < end) {
		while (head < t.nq) {
			struct dgram d = t.q[head++ % 4096];

			egw_node_rx(t.node[d.to], d.src, PORT, d.b, d.len, t.now);
		}
		while (t.ncpl > 0 && !t.hold_writes)
			egw_node_writes_done(t.node[0], t.cpl[--t.ncpl], true, t.now);
		t.now += 100000;
		egw_node_tick(t.node[0], t.now);
		egw_node_tick(t.node[1], t.now);
	}
	/* what the last ticks sent arrives too (a retransmission timed to
	 * the end of this run must not vanish with the queue) */
	while (head < t.nq) {
		struct dgram d = t.q[head++ % 4096];

		egw_node_rx(t.node[d.to], d.src, PORT, d.b, d.len, t.now);
	}
	t.nq = 0;
}

/* One more room of `room & 0xffffffff` tokens goes through intact. */
static void
assert_room_transfers(uint64_t room)
{
	unsigned delivered = t.delivered, failed = t.done_err;

	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], room, 0, 1, 0, false, t.now), 0);
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, delivered + 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, failed);
}

static void
test_register_then_resume_transfer(void)
{
	struct egw_node_stats st;
	struct egw_pool_stats ps;

	setup(16);
	run(5000000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	/* 10000 tokens from a default of 8192: one resume, over the wire */
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 10000, 0, 1, 0, false, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], (1ull << 32) | 300, 0, 1, 0, false, t.now), 0);
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 2);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, 0);
	run(3000000000ull); /* past the sender's linger */
	for (int i = 0; i < 2; i++) {
		egw_pool_get_stats(t.pool[i], &ps);
		CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
		egw_node_get_stats(t.node[i], &st);
		for (int d = 0; d < EGW_ND_MAX; d++)
			CU_ASSERT_EQUAL(st.drops[d], 0);
		CU_ASSERT(st.proto.ok > 0);
	}
	teardown();
}

/* A driver that rebuilt its side of the link (verbs: QP reset after an
 * error, new PSN) re-registers: the peer's driver hears the new endpoint
 * once, both sides are ready again, and transfers go on. */
static void
test_reregister_after_endpoint_change(void)
{
	struct egw_node_stats st;

	setup(16);
	run(5000000);
	CU_ASSERT_EQUAL(t.lang_peer_ups, 1);
	CU_ASSERT_EQUAL(t.lang_seen_psn, 111);
	run(5000000); /* retransmitted or repeated REGISTERs: no reconnect */
	CU_ASSERT_EQUAL(t.lang_peer_ups, 1);
	CU_ASSERT_EQUAL(t.enc_peer_ups, 1);
	t.enc_psn = 222;
	CU_ASSERT_EQUAL(egw_node_reregister(t.node[0], 0, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_reregister(t.node[0], 5, t.now), -EINVAL);
	run(5000000);
	CU_ASSERT_EQUAL(t.lang_peer_ups, 2);
	CU_ASSERT_EQUAL(t.lang_seen_psn, 222);
	/* its acknowledgement reaches our driver once: the peer's side is
	 * rebuilt, writes may go again (the verbs driver refuses them until
	 * then: the peer's responder may still expect the old PSN) */
	CU_ASSERT_EQUAL(t.enc_peer_ups, 2);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT_EQUAL(st.reregisters, 1);
	{
		/* acknowledged: no more REGISTERs go out */
		uint64_t sent = st.registers_tx;

		run(5000000);
		egw_node_get_stats(t.node[0], &st);
		CU_ASSERT_EQUAL(st.registers_tx, sent);
		CU_ASSERT_EQUAL(t.enc_peer_ups, 2);
	}
	assert_room_transfers(3000);
	teardown();
}

static void
test_bad_datagrams_dropped_and_counted(void)
{
	struct egw_node_stats st;
	struct dgram d;
	uint8_t junk[100];

	setup(16);
	run(5000000);
	d = t.last[0]; /* a real datagram from the encode side */
	memset(junk, 0xab, sizeof(junk));
	egw_node_rx(t.node[1], 0x0a000063, PORT, d.b, d.len, t.now); /* stranger */
	egw_node_rx(t.node[1], ENC_IP, PORT + 1, d.b, d.len, t.now); /* other port */
	egw_node_rx(t.node[1], ENC_IP, PORT, junk, sizeof(junk), t.now);
	d.b[d.len - 1] ^= 1; /* forged: the MAC no longer matches */
	egw_node_rx(t.node[1], ENC_IP, PORT, d.b, d.len, t.now);
	d.b[d.len - 1] ^= 1;
	egw_node_rx(t.node[1], ENC_IP, PORT, d.b, d.len, t.now); /* replay */
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_ND_UNKNOWN_PEER], 2);
	CU_ASSERT_EQUAL(st.drops[EGW_ND_PROTO], 2);
	CU_ASSERT_EQUAL(st.drops[EGW_ND_REPLAY], 1);
	CU_ASSERT_EQUAL(st.proto.refused[EGW_PE_MAC], 1);
	CU_ASSERT_EQUAL(st.proto.refused[EGW_PE_REPLAY], 1);
	/* and a transfer afterwards is unaffected */
	assert_room_transfers(2000);
	teardown();
}

static void
test_mismatched_geometry_is_not_registered(void)
{
	struct egw_node_stats st;

	setup(32); /* the language side has another hidden size */
	run(500000000);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT(st.drops[EGW_ND_GEOMETRY] > 0);
	/* a room towards it cannot make progress and fails at its deadline,
	 * freeing what it held */
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(6000000000ull);
	CU_ASSERT_EQUAL(t.delivered, 0);
	CU_ASSERT(t.done_err >= 1);
	{
		struct egw_pool_stats ps;

		egw_pool_get_stats(t.pool[1], &ps);
		CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	}
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT(st.drops[EGW_ND_NOT_REGISTERED] > 0);
	teardown();
}

static void
test_message_for_missing_role_dropped(void)
{
	struct egw_node_stats st;
	struct egw_msg m = { .type = EGW_MSG_INIT, .rank = 0, .nranks = 1,
			     .room = 5, .block_tokens = 128, .alloc_tokens = 128,
			     .nruns = 1, .runs = { { 0, 1 } } };
	uint8_t b[EGW_PROTO_MAX_LEN];
	int len;

	setup(16);
	run(5000000);
	/* an INIT sent to the language-only node, as if from its peer */
	len = egw_proto_encode(&t.conf[0].key, 1000, 1u << 30, &m, b, sizeof(b));
	egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_ND_ROLE], 1);
	teardown();
}

static void
assert_no_blocks_in_use(void)
{
	for (int i = 0; i < 2; i++) {
		struct egw_pool_stats ps;

		egw_pool_get_stats(t.pool[i], &ps);
		CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	}
}

/* The driver refuses a batch: the node completes it as failed by itself,
 * so the room fails on both sides within a few round trips - not at the
 * 5 s round deadline - and every block comes back. */
static void
test_refused_post_fails_room_at_once(void)
{
	struct egw_node_stats st;
	uint64_t opened;

	setup(16);
	run(5000000);
	t.refuse_posts = true;
	opened = t.now;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3000, 0, 1, 0, false, t.now), 0);
	while (t.receiver_failed[egw_err_to_wire(EGW_E_TRANSPORT)] == 0 &&
	       t.now - opened < t.conf[0].timers.round_ns)
		run(1000000);
	CU_ASSERT_EQUAL(t.posts_refused, 1);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_TRANSPORT)], 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_TRANSPORT)], 1);
	CU_ASSERT_EQUAL(t.done_err, 2);
	/* well before any deadline could have failed it */
	CU_ASSERT(t.now - opened < t.conf[1].timers.alloc_ns &&
		  t.now - opened < t.conf[0].timers.round_ns);
	CU_ASSERT_EQUAL(t.delivered, 0);
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT_EQUAL(st.posts_refused, 1);
	CU_ASSERT_EQUAL(st.refused_overflow, 0);
	run(3000000000ull); /* past the sender's linger */
	assert_no_blocks_in_use();
	teardown();
}

/* Many more refused batches than any fixed array of the past held (64):
 * every one fails its room, none waits for a deadline, nothing leaks; and
 * once the driver takes batches again, rooms succeed. */
static void
test_many_refused_posts_all_fail_their_rooms(void)
{
	enum { NROOMS = 200 };
	struct egw_node_stats st;
	uint64_t opened;

	setup_with(16, 128); /* small first windows: all rooms fit the pool */
	run(5000000);
	t.refuse_posts = true;
	opened = t.now;
	for (uint64_t i = 0; i < NROOMS; i++)
		CU_ASSERT_EQUAL_FATAL(egw_node_receiver_open(t.node[1], (i << 32) | 100, 0, 1,
							     0, false, t.now), 0);
	run(50000000);
	CU_ASSERT_EQUAL(t.posts_refused, NROOMS);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_TRANSPORT)], NROOMS);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_TRANSPORT)], NROOMS);
	CU_ASSERT_EQUAL(t.done_err, 2 * NROOMS);
	CU_ASSERT(t.now - opened < t.conf[0].timers.round_ns);
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT_EQUAL(st.posts_refused, NROOMS);
	CU_ASSERT_EQUAL(st.refused_overflow, 0);
	t.refuse_posts = false;
	assert_room_transfers((1000ull << 32) | 700);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* The driver cannot connect a peer at first: the node keeps the REGISTER
 * and tries again by itself, without the peer sending another one. */
static void
test_refused_connect_is_retried_by_the_node(void)
{
	struct egw_node_stats st;
	unsigned head = 0;

	setup(16);
	t.lang_connect_refusals = 3;
	/* deliver only the encode side's first REGISTER to the language
	 * node: whatever follows must come from the node's own retries */
	egw_node_tick(t.node[0], t.now);
	CU_ASSERT_FATAL(t.nq > 0);
	while (head < t.nq && t.q[head].to != 1)
		head++;
	CU_ASSERT_FATAL(head < t.nq);
	egw_node_rx(t.node[1], t.q[head].src, PORT, t.q[head].b, t.q[head].len, t.now);
	t.nq = 0;
	CU_ASSERT_EQUAL(t.lang_connect_tries, 1);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	/* (within the heartbeat deadline: the peer is silent meanwhile) */
	for (int i = 0; i < 5; i++) {
		t.now += 100000000;
		egw_node_tick(t.node[1], t.now);
	}
	t.nq = 0;
	CU_ASSERT_EQUAL(t.lang_connect_tries, 4);
	CU_ASSERT_EQUAL(t.lang_peer_ups, 1);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.connect_retries, 3);
	CU_ASSERT_EQUAL(st.drops[EGW_ND_PAYLOAD], 1);
	/* and the pair works from there */
	run(5000000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	assert_room_transfers(2000);
	teardown();
}

/* Open a room and run until the encode side serves it, its writes held
 * so that it cannot finish. */
static void
open_held(uint64_t room)
{
	t.hold_writes = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], room, 0, 1, 0, false,
					       t.now), 0);
	for (int i = 0; i < 100 && !egw_node_sender_has_room(t.node[0], room); i++)
		run(100000);
	CU_ASSERT_TRUE(egw_node_sender_has_room(t.node[0], room));
}

/* One room ended by the local side on either node: the other side hears
 * ABORT and fails the room as aborted, both report it once, every block
 * comes back once the writes in flight completed; a room that is not
 * open is refused as unknown. */
static void
test_abort_one_room_either_side(void)
{
	setup(16);
	run(5000000);
	open_held(50000);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 50000, 0, false, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(t.delivered, 0);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 50000, 0, false, t.now),
			-EGW_E_UNKNOWN_ROOM);

	open_held(40000);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[0], 40000, 0, true, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_ABORTED)], 2);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 2);
	CU_ASSERT_EQUAL(t.done_err, 4);
	CU_ASSERT_EQUAL(t.delivered, 0);
	/* a role the node lacks */
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[0], 1, 0, false, t.now),
			-ENOTSUP);
	run(3000000000ull); /* past the sender's linger */
	assert_no_blocks_in_use();
	assert_room_transfers(700); /* and the link still works */
	teardown();
}

/* The encode side knows a room but has no data yet; one rank's engine
 * gives up: the other rank hears at once that the room failed, not at its
 * bootstrap deadline. */
static void
test_abort_before_input_reaches_every_rank(void)
{
	uint64_t t0;

	setup(16);
	run(5000000);
	/* the ranks ask before the encode side knows the room (refused as
	 * unknown, asked again), then it opens the room */
	t.no_producer = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 900, 0, 2, 0, false, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 900, 1, 2, 0, false, t.now), 0);
	run(2000000);
	CU_ASSERT_EQUAL(egw_node_sender_open(t.node[0], 900, 2, t.now), 0);
	run(2000000);
	t0 = t.now;
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 900, 1, false, t.now), 0);
	while (t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)] < 2 &&
	       t.now - t0 < t.conf[1].timers.bootstrap_ns)
		run(1000000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 2);
	CU_ASSERT(t.now - t0 < t.conf[1].timers.bootstrap_ns / 10);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* A producer's refusals reach the receiver with their codes: NO_SLOT and
 * BUSY are retried (the room completes once the producer takes it),
 * TOO_LARGE and BEYOND_TOTAL end the room at once; no refused room leaves
 * anything on the encode side. */
static void
test_producer_refusals_have_their_codes(void)
{
	const struct egw_sender *snd;
	struct egw_xfer_stats st;
	unsigned calls;

	setup(16);
	run(5000000);
	snd = egw_node_sender(t.node[0]);
	t.producer_says = -EGW_E_NO_SLOT;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3000, 0, 1, 0, false, t.now), 0);
	run(20000000);
	calls = t.unknown_calls;
	CU_ASSERT(calls > 1); /* retried */
	CU_ASSERT_EQUAL(egw_receiver_state(egw_node_receiver(t.node[1]), 3000, 0),
			EGW_ST_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(egw_sender_state(snd, 3000), -EGW_E_UNKNOWN_ROOM);
	t.producer_says = -EGW_E_BUSY;
	run(20000000);
	CU_ASSERT(t.unknown_calls > calls);
	t.producer_says = 0;
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.done_err, 0);

	t.producer_says = -EGW_E_TOO_LARGE;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3001, 0, 1, 0, false, t.now), 0);
	run(1000000);
	t.producer_says = -EGW_E_BEYOND_TOTAL;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3002, 0, 1, 0, false, t.now), 0);
	run(20000000);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_TOO_LARGE)], 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_BEYOND_TOTAL)], 1);
	CU_ASSERT_EQUAL(egw_sender_state(snd, 3001), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(egw_sender_state(snd, 3002), -EGW_E_UNKNOWN_ROOM);
	egw_sender_get_stats(snd, &st);
	CU_ASSERT(st.rejected[egw_err_to_wire(EGW_E_NO_SLOT)] > 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_TOO_LARGE)], 1);
	CU_ASSERT_EQUAL(st.rooms_failed, 0);
	t.producer_says = 0;
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* An INIT the sender would refuse (here: another block size) for a room it
 * does not know is refused before the producer is asked: nothing is
 * created, no source block taken. */
static void
test_refused_init_creates_nothing(void)
{
	struct egw_msg m = { .type = EGW_MSG_INIT, .room = 4000, .nranks = 1,
			     .block_tokens = 64, .alloc_tokens = 512, .nruns = 1,
			     .runs = { { 0, 8 } } };
	struct egw_xfer_stats st;
	struct egw_pool_stats ps;
	uint8_t buf[EGW_PROTO_MAX_LEN];
	int len;

	setup(16);
	run(5000000);
	len = egw_proto_encode(&t.conf[1].key, 1001, 1000000, &m, buf, sizeof(buf));
	CU_ASSERT_FATAL(len > 0);
	egw_node_rx(t.node[0], LANG_IP, PORT, buf, (size_t)len, t.now);
	CU_ASSERT_EQUAL(t.unknown_calls, 0);
	CU_ASSERT_EQUAL(egw_sender_state(egw_node_sender(t.node[0]), 4000),
			-EGW_E_UNKNOWN_ROOM);
	egw_sender_get_stats(egw_node_sender(t.node[0]), &st);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BLOCK_TOKENS)], 1);
	egw_pool_get_stats(t.pool[0], &ps);
	CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	teardown();
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "register_then_resume_transfer", test_register_then_resume_transfer },
		{ "reregister_after_endpoint_change", test_reregister_after_endpoint_change },
		{ "bad_datagrams_dropped_and_counted", test_bad_datagrams_dropped_and_counted },
		{ "mismatched_geometry_is_not_registered", test_mismatched_geometry_is_not_registered },
		{ "message_for_missing_role_dropped", test_message_for_missing_role_dropped },
		{ "refused_post_fails_room_at_once", test_refused_post_fails_room_at_once },
		{ "many_refused_posts_all_fail_their_rooms",
		  test_many_refused_posts_all_fail_their_rooms },
		{ "refused_connect_is_retried_by_the_node",
		  test_refused_connect_is_retried_by_the_node },
		{ "abort_one_room_either_side", test_abort_one_room_either_side },
		{ "abort_before_input_reaches_every_rank", test_abort_before_input_reaches_every_rank },
		{ "producer_refusals_have_their_codes", test_producer_refusals_have_their_codes },
		{ "refused_init_creates_nothing", test_refused_init_creates_nothing },
		{ NULL, NULL },
	};
	return cu_run("node", tests);
}
