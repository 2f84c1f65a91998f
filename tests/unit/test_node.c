/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/node without DPDK: an encode node and a language node joined by an
 * in-memory datagram queue, payload as memcpy between their pools. Proves
 * the REGISTER handshake in both start orders, incarnations (a restart is
 * told by its session alone, whatever its value; the old one's rooms fail
 * and its memory is let go before anything is written for the new one;
 * retired and pre-start REGISTERs adopt nothing), REGISTER refusals
 * (geometry, name, unreachable memory) answered and noted once, a full
 * resume transfer through the wire format, that unknown, malformed,
 * replayed, unregistered and misdirected datagrams are dropped and counted
 * before the engines, and that refused posts fail their rooms at once.
 * Per-window keys: every window is one run, opened on the driver before
 * its INIT/RESUME names its keys, written under them, and closed on every
 * way a room ends before any of its blocks goes back.
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
	struct egw_node_params par[2];
	struct egw_pool_geom geom[2];
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
	struct dgram last_reg[2]; /* ... and the last REGISTER */
	uint32_t enc_psn;     /* the encode side's endpoint PSN */
	unsigned lang_peer_ups; /* the language side's driver connects */
	unsigned enc_peer_ups;  /* the encode side's */
	uint32_t lang_seen_psn;
	bool hold_writes;     /* the driver completes nothing for now */
	bool no_producer;     /* INITs for unknown rooms stay unknown */
	bool down[2];         /* not started yet: no ticks, datagrams lost */
	/* what the encode side's driver was asked, in order: 'U' connect
	 * (with the session), 'D' let go, 'P' a post */
	struct { char what; uint64_t session; } ev[8192];
	unsigned nev;
	unsigned notes[2][EGW_NODE_NOTE_WINDOW + 1];
	enum egw_err note_code[2][EGW_NODE_NOTE_WINDOW +
				  1]; /* the last of each kind */
	char note_text[2][EGW_NODE_NOTE_WINDOW + 1][384];
	unsigned peer_downs[2];
	unsigned fail_ev;     /* t.nev when a sender room first failed */
	/* per-window keys on the language side: its driver's windows, by
	 * first block, and what the test saw */
	bool keys_on;
	unsigned bind_fail;   /* refuse this many binds at the post */
	unsigned bind_fail_cpl; /* ... complete this many as failed */
	bool hold_binds;      /* bind completions wait */
	bool hold_unbinds;    /* invalidation completions wait */
	struct twin {
		bool open;         /* its bind completed: its keys admit writes */
		bool binding, closing;
		uint64_t bind_cookie; /* of the pending bind */
		uint32_t peer, count;
		uint32_t keys[EGW_KIND_MAX];
	} win[2048];
	/* the driver's window completions, in posting order */
	struct wcpl { uint64_t cookie; uint32_t start; bool bind; } wq[4096];
	unsigned nwq;
	uint32_t next_key;
	unsigned binds, unbinds, unbind_unknown, unbind_after_free;
	unsigned binds_failed; /* binds posted whose completion failed */
	unsigned inits_while_binding; /* INIT/RESUME offering a window whose
				       * bind has not completed */
	unsigned lang_done_ok, done_before_deliver;
	unsigned key_violations, multi_run_windows, keyless_windows;
	int producer_says;    /* non-zero: the producer refuses with it */
	unsigned now_mismatch; /* callbacks dated other than their call */
	unsigned unknown_calls; /* INITs handed to the producer */
} t;

/* Every callback is dated by the node call it comes from: the test's
 * clock, as given to that call - never a clock of its own. */
static void
check_now(uint64_t now)
{
	t.now_mismatch += now != t.now;
}

static void
event(char what, uint64_t session)
{
	if (t.nev < sizeof(t.ev) / sizeof(t.ev[0])) {
		t.ev[t.nev].what = what;
		t.ev[t.nev++].session = session;
	}
}

static void
peer_down(void *ctx, uint32_t peer, bool silent, uint64_t now)
{
	check_now(now);
	(void)peer;
	(void)silent;
	t.peer_downs[(intptr_t)ctx]++;
	if ((intptr_t)ctx == 0)
		event('D', 0);
}

static void
note(void *ctx, uint32_t peer, const struct egw_node_note *nt, uint64_t now)
{
	int side = (int)(intptr_t)ctx;

	check_now(now);
	(void)peer;
	t.notes[side][nt->kind]++;
	t.note_code[side][nt->kind] = nt->code;
	snprintf(t.note_text[side][nt->kind], sizeof(t.note_text[side][nt->kind]),
		 "%s", nt->text);
}

/* The encode side's payload endpoint: a PSN the test can change, as the
 * verbs driver does when it rebuilds a QP after an error. */
static void
endpoint(void *ctx, uint32_t peer, uint32_t *qpn, uint32_t *psn, uint16_t *mtu,
	 uint64_t now)
{
	check_now(now);
	(void)peer;
	*qpn = (intptr_t)ctx == 0 ? 77 : 88;
	*psn = (intptr_t)ctx == 0 ? t.enc_psn : 5;
	*mtu = 1024;
}

/* The driver hears of a peer (new, or its endpoint changed). */
static int
peer_up(void *ctx, uint32_t peer, const struct egw_register *r, char *why,
	size_t why_len, uint64_t now)
{
	check_now(now);
	(void)peer;
	if ((intptr_t)ctx == 1) {
		t.lang_connect_tries++;
		if (t.lang_connect_refusals > 0) {
			t.lang_connect_refusals--;
			snprintf(why, why_len, "the driver's reason");
			return -EAGAIN;
		}
		t.lang_peer_ups++;
		t.lang_seen_psn = r->psn;
	} else {
		t.enc_peer_ups++;
		event('U', r->session);
	}
	return 0;
}

/* The language side's driver posts a window's opening: a key per kind
 * present, admitting writes once its completion is handed back. */
static int
window_bind(void *ctx, uint32_t peer, const struct egw_run *run,
	    uint32_t rkeys[EGW_KIND_MAX], uint64_t cookie, uint64_t now)
{
	struct twin *w = &t.win[run->start];

	(void)ctx;
	check_now(now);
	CU_ASSERT_FATAL(run->start + run->count <= egw_pool_nblocks(t.pool[1]));
	CU_ASSERT(!w->open && !w->binding && !w->closing);
	if (t.bind_fail > 0) {
		t.bind_fail--;
		return -EIO;
	}
	/* the run is allocated already (the pool knows owners by run) */
	CU_ASSERT(egw_pool_owner(t.pool[1], run->start) != EGW_OWNER_NONE);
	w->binding = true;
	w->bind_cookie = cookie;
	w->peer = peer;
	w->count = run->count;
	for (int k = 0; k < EGW_KIND_MAX; k++)
		w->keys[k] = rkeys[k] = egw_pool_geom_unit_bytes(&t.geom[1],
							    (enum egw_kind)k)
					? ++t.next_key << 8 | (uint32_t)k : 0;
	t.binds++;
	t.wq[t.nwq++ % 4096] = (struct wcpl){ cookie, run->start, true };
	return 0;
}

/* ... and its closing: its blocks must not be back in the pool yet, nor
 * when the invalidation completes. */
static void
window_unbind(void *ctx, const struct egw_run *run, uint64_t cookie,
	      uint64_t now)
{
	struct twin *w = &t.win[run->start];

	(void)ctx;
	check_now(now);
	if (!w->open && !w->binding)
		t.unbind_unknown++;
	if (egw_pool_owner(t.pool[1], run->start) == EGW_OWNER_NONE)
		t.unbind_after_free++;
	w->closing = true;
	t.wq[t.nwq++ % 4096] = (struct wcpl){ cookie, run->start, false };
}

/* Hand the driver's window completions to the node, those not held;
 * what the node posts meanwhile waits for the next round. */
static void
window_completions(void)
{
	static struct wcpl now[4096];
	unsigned n = t.nwq;

	memcpy(now, t.wq, n * sizeof(now[0]));
	t.nwq = 0;
	for (unsigned i = 0; i < n; i++) {
		struct wcpl c = now[i];
		struct twin *w = &t.win[c.start];
		bool ok = true;

		if (c.bind ? t.hold_binds : t.hold_unbinds) {
			t.wq[t.nwq++] = c;
			continue;
		}
		if (c.bind && w->binding && w->bind_cookie == c.cookie) {
			w->binding = false;
			ok = t.bind_fail_cpl == 0;
			if (!ok) {
				t.bind_fail_cpl--;
				t.binds_failed++;
			}
			w->open = ok;
		} else if (!c.bind) {
			if (egw_pool_owner(t.pool[1], c.start) == EGW_OWNER_NONE)
				t.unbind_after_free++;
			if (w->open)
				t.unbinds++;
			w->open = w->binding = w->closing = false;
		}
		egw_node_window_done(t.node[1], c.cookie, ok, t.now);
	}
}

/* A write must go under the key of an open window that holds it. */
static void
check_write_key(const struct egw_write *w)
{
	uint32_t blocks = w->kind == EGW_KIND_AUX ? 1
			  : (w->dst_token + w->tokens + t.geom[1].block_tokens - 1) /
			    t.geom[1].block_tokens;

	for (uint32_t s = 0; s <= w->dst_block && s < 2048; s++) {
		const struct twin *x = &t.win[s];

		if (x->open && s + x->count > w->dst_block) {
			if (x->keys[w->kind] != w->rkey ||
			    w->dst_block + blocks > s + x->count)
				t.key_violations++;
			return;
		}
	}
	t.key_violations++;
}

static void
tx(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
   uint64_t now)
{
	int from = (int)(intptr_t)ctx;

	check_now(now);
	struct dgram *d = &t.q[t.nq++ % 4096];

	if (t.keys_on && (buf[5] == EGW_MSG_INIT || buf[5] == EGW_MSG_RESUME)) {
		/* the window body: nruns at 8, the rkeys at 12 */
		const uint8_t *b = buf + EGW_PROTO_HDR_LEN;

		t.multi_run_windows += (b[8] << 8 | b[9]) != 1;
		t.keyless_windows += (b[12] | b[13] | b[14] | b[15]) == 0;
		uint32_t key = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
			       (uint32_t)b[14] << 8 | b[15];

		/* the window it offers: its bind completed */
		for (uint32_t i = 0; i < 2048; i++)
			if (t.win[i].keys[EGW_KIND_EMB] == key)
				t.inits_while_binding += !t.win[i].open;
	}
	(void)port;
	d->to = ip == ENC_IP ? 0 : 1;
	d->src = from == 0 ? ENC_IP : LANG_IP;
	d->len = len;
	memcpy(d->b, buf, len);
	t.last[from] = *d;
	if (buf[5] == EGW_MSG_REGISTER)
		t.last_reg[from] = *d;
}

static int
post(void *ctx, uint32_t peer, const struct egw_write *w, uint32_t n,
     uint64_t cookie, uint64_t now)
{
	check_now(now);
	(void)ctx;
	(void)peer;
	event('P', 0);
	if (t.keys_on)
		for (uint32_t i = 0; i < n; i++)
			check_write_key(&w[i]);
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
deliver(void *ctx, const struct egw_act *a, uint64_t now)
{
	check_now(now);
	(void)ctx;
	t.bad += (unsigned)egw_pattern_check(t.pool[1], a->room, a->tokens,
					     a->runs, a->nruns, a->aux_block,
					     a->dummy);
	t.delivered++;
	for (uint32_t i = 0; t.keys_on && i < a->nruns; i++)
		CU_ASSERT(!t.win[a->runs[i].start].open); /* closed first */
	egw_node_release(t.node[1], a->room, a->runs, a->nruns);
}

static void
done(void *ctx, uint64_t room, uint16_t rank, enum egw_err e, bool is_sender,
     uint64_t now)
{
	check_now(now);
	(void)ctx;
	(void)room;
	(void)rank;
	if (e == EGW_E_OK && !is_sender) {
		t.lang_done_ok++;
		t.done_before_deliver += t.lang_done_ok > t.delivered;
	}
	if (e == EGW_E_OK)
		return;
	t.done_err++;
	if (is_sender && t.fail_ev == 0)
		t.fail_ev = t.nev; /* events before the first failed room */
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
	check_now(now);
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

/* Side i's parameters, built directly (the engines' defaults, a pool
 * of 128 Ki tokens of `hidden` values, one peer). */
static void
mkconf(int i, const char *name, uint16_t role, uint32_t peer,
       const char *peer_name, uint32_t hidden)
{
	struct egw_node_params *p = &t.par[i];
	struct egw_pool_geom *g = &t.geom[i];

	memset(p, 0, sizeof(*p));
	*g = (struct egw_pool_geom){
		.capacity_tokens = 1024 * 128,
		.block_tokens = EGW_POOL_DEFAULT_BLOCK_TOKENS,
		.hidden_size = hidden, .dtype_bytes = 2, .mrope = true,
		.aux_bytes = 64,
	};
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->roles = role;
	{
		uint8_t k[EGW_PROTO_KEY_LEN];

		memset(k, 0x5a, sizeof(k));
		CU_ASSERT_FATAL(egw_proto_key_set(&p->key, k) == 0);
	}
	egw_xfer_conf_default(&p->xfer, g);
	egw_policy_init_fixed(&p->policy, g->block_tokens, 8192);
	p->npeers = 1;
	snprintf(p->peers[0].name, sizeof(p->peers[0].name), "%s", peer_name);
	p->peers[0].addr = peer;
	p->peers[0].udp_port = PORT;
}

/* Start side i (0 encode, 1 language) as incarnation `session`, with a
 * fresh pool: a process that starts. */
static void
start(int i, uint64_t session)
{
	struct egw_node_ops ops = { .tx = tx, .post = post, .deliver = deliver,
				    .done = done, .unknown_room = unknown_room,
				    .endpoint = endpoint, .peer_up = peer_up,
				    .peer_down = peer_down, .note = note };
	struct egw_region reg[EGW_KIND_MAX];

	CU_ASSERT_FATAL(egw_pool_create(&t.geom[i], NULL, 0, &t.pool[i]) == 0);
	for (int k = 0; k < EGW_KIND_MAX; k++)
		reg[k] = (struct egw_region){
			0, 0,
			(uint32_t)egw_pool_geom_unit_bytes(&t.geom[i],
							   (enum egw_kind)k)
		};
	ops.ctx = (void *)(intptr_t)i;
	/* both sides, as the gateway gives them to every verbs port: only
	 * the receiving one opens windows */
	if (t.keys_on) {
		ops.window_bind = window_bind;
		ops.window_unbind = window_unbind;
	}
	CU_ASSERT_FATAL(egw_node_create(&t.par[i], t.pool[i], reg, NULL, 0,
					&ops, session, t.now, &t.node[i]) == 0);
}

/* Side i exits (what it had in flight is gone) and starts again as
 * `session`. */
static void
restart(int i, uint64_t session)
{
	egw_node_destroy(t.node[i]);
	egw_pool_destroy(t.pool[i]);
	if (i == 0)
		t.ncpl = 0; /* its driver's completions die with it */
	start(i, session);
}

/* lang_policy_tokens: the language side's first window (0: default) */
static void
setup_with(uint32_t lang_hidden, uint32_t lang_policy_tokens)
{
	memset(&t, 0, sizeof(t));
	t.enc_psn = 111;
	egw_proto_init();
	mkconf(0, "enc", EGW_ROLE_ENCODE, LANG_IP, "lang", 16);
	mkconf(1, "lang", EGW_ROLE_LANGUAGE, ENC_IP, "enc", lang_hidden);
	if (lang_policy_tokens > 0)
		egw_policy_init_fixed(&t.par[1].policy, t.geom[1].block_tokens,
				      lang_policy_tokens);
	for (int i = 0; i < 2; i++)
		start(i, 1000 + (uint64_t)i);
}

static void
setup(uint32_t lang_hidden)
{
	setup_with(lang_hidden, 0);
}

static void
teardown(void)
{
	CU_ASSERT_EQUAL(t.now_mismatch, 0);
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

			if (!t.down[d.to])
				egw_node_rx(t.node[d.to], d.src, PORT, d.b, d.len, t.now);
		}
		while (t.ncpl > 0 && !t.hold_writes && !t.down[0])
			egw_node_writes_done(t.node[0], t.cpl[--t.ncpl], true, t.now);
		if (t.nwq > 0 && !t.down[1])
			window_completions();
		t.now += 100000;
		for (int i = 0; i < 2; i++)
			if (!t.down[i])
				egw_node_tick(t.node[i], t.now);
	}
	/* what the last ticks sent arrives too (a retransmission timed to
	 * the end of this run must not vanish with the queue) */
	while (head < t.nq) {
		struct dgram d = t.q[head++ % 4096];

		if (!t.down[d.to])
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
		for (int d = 0; d < EGW_NODE_DROP_MAX; d++)
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
assert_no_blocks_in_use(void)
{
	for (int i = 0; i < 2; i++) {
		struct egw_pool_stats ps;

		egw_pool_get_stats(t.pool[i], &ps);
		CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	}
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
	egw_node_rx(t.node[1], ENC_IP, PORT, d.b, d.len, t.now);
	d.b[d.len - 1] ^= 1;
	egw_node_rx(t.node[1], ENC_IP, PORT, d.b, d.len, t.now); /* replay */
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_UNKNOWN_PEER], 2);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_PROTO], 3);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_REPLAY], 1);
	CU_ASSERT_EQUAL(st.proto.refused[EGW_PROTO_ERR_MAC], 2);
	/* a configured peer's datagrams that fail authentication: noted
	 * once (a different key?), counted every time */
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_AUTH], 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(t.note_text[1][EGW_NODE_NOTE_AUTH],
				      "peer enc fail authentication: different key?"));
	CU_ASSERT_EQUAL(st.proto.refused[EGW_PROTO_ERR_REPLAY], 1);
	/* and a transfer afterwards is unaffected */
	assert_room_transfers(2000);
	teardown();
}

/* Another hidden size: every REGISTER is refused as GEOMETRY on both
 * sides and answered with ERROR at most every 200 ms; each side notes the
 * refusal once, with what differs, and the peer's ERROR once; nothing is
 * adopted; a room towards the peer ends by its deadline, freeing what it
 * held. */
static void
test_mismatched_geometry_is_not_registered(void)
{
	struct egw_node_stats st[2];

	setup(32); /* the language side has another hidden size */
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(2000000000ull);
	for (int i = 0; i < 2; i++) {
		CU_ASSERT_FALSE(egw_node_peer_ready(t.node[i], 0));
		CU_ASSERT_EQUAL(egw_node_peer_session(t.node[i], 0), 0);
		egw_node_get_stats(t.node[i], &st[i]);
		CU_ASSERT(st[i].drops[EGW_NODE_DROP_GEOMETRY] >= 5);
		CU_ASSERT(st[i].register_refusals >= 5);
		CU_ASSERT(st[i].register_refusals <= 2000 / 200 + 1);
		CU_ASSERT(st[i].register_refused >= 5);
		CU_ASSERT_EQUAL(st[i].adoptions, 0);
		/* once per peer, not per datagram */
		CU_ASSERT_EQUAL(t.notes[i][EGW_NODE_NOTE_REFUSED], 1);
		CU_ASSERT_EQUAL(t.notes[i][EGW_NODE_NOTE_PEER_REFUSED], 1);
		CU_ASSERT_EQUAL(t.notes[i][EGW_NODE_NOTE_REGISTERED], 0);
	}
	CU_ASSERT_EQUAL(t.note_code[1][EGW_NODE_NOTE_REFUSED], EGW_E_GEOMETRY);
	CU_ASSERT_EQUAL(t.note_code[0][EGW_NODE_NOTE_PEER_REFUSED],
			EGW_E_GEOMETRY);
	CU_ASSERT_PTR_NOT_NULL(strstr(t.note_text[1][EGW_NODE_NOTE_REFUSED],
				      "hidden_size 16 (ours 32)"));
	run(4000000000ull); /* past the bootstrap deadline */
	CU_ASSERT_EQUAL(t.delivered, 0);
	CU_ASSERT_EQUAL(t.done_err, 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_PEER_DEAD)] +
			t.receiver_failed[egw_err_to_wire(EGW_E_TIMEOUT_BOOTSTRAP)], 1);
	assert_no_blocks_in_use();
	teardown();
}

/* The language side configures another name for its peer: it refuses
 * the encode side's REGISTERs as NAME, the encode side hears ERROR(NAME)
 * and notes it once; no room message flows. */
static void
test_wrong_name_is_refused_once(void)
{
	struct egw_node_stats st;

	setup(16);
	egw_node_destroy(t.node[1]);
	egw_pool_destroy(t.pool[1]);
	snprintf(t.par[1].peers[0].name, sizeof(t.par[1].peers[0].name),
		 "enc-b");
	start(1, 1001);
	run(2000000000ull);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT(st.drops[EGW_NODE_DROP_NAME] >= 5);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_GEOMETRY], 0);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_REFUSED], 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(t.note_text[1][EGW_NODE_NOTE_REFUSED],
				      "name 'enc' (configured 'enc-b')"));
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT(st.register_refused >= 5);
	CU_ASSERT_EQUAL(t.notes[0][EGW_NODE_NOTE_PEER_REFUSED], 1);
	CU_ASSERT_EQUAL(t.note_code[0][EGW_NODE_NOTE_PEER_REFUSED], EGW_E_NAME);
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
	len = egw_proto_encode(&t.par[0].key, 1000, 1u << 30, &m, b, sizeof(b));
	egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_ROLE], 1);
	/* an ABORT is the encode side's to hear; its ACK the receiver's,
	 * flag and all */
	m = (struct egw_msg){ .type = EGW_MSG_ABORT, .rank = 0, .nranks = 1,
			      .room = 5, .error = EGW_E_ABORTED };
	len = egw_proto_encode(&t.par[0].key, 1000, (1u << 30) + 1, &m, b, sizeof(b));
	egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_ROLE], 2);
	{
		struct egw_xfer_stats xs0, xs1;

		egw_xfer_receiver_get_stats(egw_node_receiver(t.node[1]), &xs0);
		m.flags = EGW_MSGF_ACK;
		len = egw_proto_encode(&t.par[0].key, 1000, (1u << 30) + 2, &m, b,
				       sizeof(b));
		egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
		egw_node_get_stats(t.node[1], &st);
		CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_ROLE], 2);
		egw_xfer_receiver_get_stats(egw_node_receiver(t.node[1]), &xs1);
		CU_ASSERT_EQUAL(xs1.rx_msgs, xs0.rx_msgs + 1);
	}
	teardown();
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
	       t.now - opened < t.par[0].xfer.timers.round_ns)
		run(1000000);
	CU_ASSERT_EQUAL(t.posts_refused, 1);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_TRANSPORT)], 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_TRANSPORT)], 1);
	CU_ASSERT_EQUAL(t.done_err, 2);
	/* well before any deadline could have failed it */
	CU_ASSERT(t.now - opened < t.par[1].xfer.timers.alloc_ns &&
		  t.now - opened < t.par[0].xfer.timers.round_ns);
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
	CU_ASSERT(t.now - opened < t.par[0].xfer.timers.round_ns);
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT_EQUAL(st.posts_refused, NROOMS);
	CU_ASSERT_EQUAL(st.refused_overflow, 0);
	t.refuse_posts = false;
	assert_room_transfers((1000ull << 32) | 700);
	run(3000000000ull);
	assert_no_blocks_in_use();
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

/* A peer removed while a room is open (a reload, a cluster's member that
 * left): the room ends PEER_REMOVED here and ABORTED there (the wire has
 * no other code for it), the slot stays until no write of it can land,
 * then it is free, its driver let go of it; datagrams from it are a
 * stranger's; added back it takes the slot with a new id, registers anew
 * and serves rooms. Either side may remove. */
static void
test_peer_removed_then_added_back(void)
{
	struct egw_node_peer enc = t.par[1].peers[0];
	struct egw_node_peer_info info;
	struct egw_node_stats st;
	unsigned downs;

	setup(16);
	enc = t.par[1].peers[0];
	run(5000000);
	CU_ASSERT_EQUAL(egw_node_peer_slots(t.node[1]), 1);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 0, &info), 0);
	CU_ASSERT_EQUAL(info.id, 1);
	CU_ASSERT_EQUAL(info.state, EGW_NODE_PEER_ACTIVE);
	CU_ASSERT_TRUE(info.ready);
	/* one slot: taken, and the name or address twice is refused */
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &enc, t.now), -EEXIST);
	open_held(50000);
	downs = t.peer_downs[1];
	CU_ASSERT_EQUAL(egw_node_peer_remove(t.node[1], 0, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_peer_remove(t.node[1], 0, t.now), -ENOENT);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_PEER_REMOVED)],
			1);
	/* its writes are in flight: the slot waits for the ABORT's ACK */
	run(1000000);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 0, &info), 0);
	CU_ASSERT_EQUAL(info.state, EGW_NODE_PEER_LEAVING);
	CU_ASSERT_EQUAL(egw_node_peer_index(t.node[1], "enc"), -1);
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 9, 0, 1, 0, false,
					       t.now),
			-EGW_E_UNKNOWN_PEER);
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &enc, t.now), -EEXIST);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 0, &info), -ENOENT);
	CU_ASSERT_EQUAL(t.peer_downs[1], downs + 1);
	assert_no_blocks_in_use();
	egw_node_get_stats(t.node[1], &st);
	run(1000000000); /* its heartbeats: a stranger's now */
	{
		struct egw_node_stats st2;

		egw_node_get_stats(t.node[1], &st2);
		CU_ASSERT(st2.drops[EGW_NODE_DROP_UNKNOWN_PEER] >
			  st.drops[EGW_NODE_DROP_UNKNOWN_PEER]);
	}
	/* back: the same slot, a new id, registered anew */
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &enc, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 0, &info), 0);
	CU_ASSERT_EQUAL(info.id, 2);
	CU_ASSERT_EQUAL(egw_node_peer_slot(t.node[1], 1), -1);
	CU_ASSERT_EQUAL(egw_node_peer_slot(t.node[1], 2), 0);
	run(5000000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	assert_room_transfers(700);
	/* the encode side removes: its room ends PEER_REMOVED, ours
	 * ABORTED */
	open_held(40000);
	CU_ASSERT_EQUAL(egw_node_peer_remove(t.node[0], 0, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_PEER_REMOVED)],
			1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[0], 0, &info), -ENOENT);
	run(3000000000ull); /* past the sender's linger */
	assert_no_blocks_in_use();
	teardown();
}

/* Slots beyond the listed peers: a node of 4 slots with one listed takes
 * three more, refuses a fifth (ENOSPC) and bad ones (EINVAL); ids count
 * on, and a free slot is the lowest. A peer that never answers is asked
 * less and less often. */
static void
test_peer_slots_fill_and_back_off(void)
{
	struct egw_node_peer p = { .udp_port = PORT };
	struct egw_node_peer_info info;
	struct egw_node_stats st0, st1;

	memset(&t, 0, sizeof(t));
	egw_proto_init();
	mkconf(1, "lang", EGW_ROLE_LANGUAGE, ENC_IP, "enc", 16);
	t.par[1].max_peers = 4;
	start(1, 1001);
	for (uint32_t i = 0; i < 3; i++) {
		snprintf(p.name, sizeof(p.name), "e%u", i);
		p.addr = 0x0a000100 + i;
		CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &p, t.now),
				(int)i + 1);
	}
	snprintf(p.name, sizeof(p.name), "e9");
	p.addr = 0x0a000109;
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &p, t.now), -ENOSPC);
	p.addr = 0;
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &p, t.now), -EINVAL);
	CU_ASSERT_EQUAL(egw_node_peer_remove(t.node[1], 2, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 2, &info), -ENOENT);
	p.addr = 0x0a000109;
	CU_ASSERT_EQUAL(egw_node_peer_add(t.node[1], &p, t.now), 2);
	CU_ASSERT_EQUAL(egw_node_peer_get(t.node[1], 2, &info), 0);
	CU_ASSERT_EQUAL(info.id, 5);
	/* nobody answers: 4 peers asked at 0.2, 0.4, 0.8, 1.6, 3.2, 3.2 s
	 * ... not every 200 ms */
	t.down[0] = true;
	egw_node_get_stats(t.node[1], &st0);
	run(10000000000ull);
	egw_node_get_stats(t.node[1], &st1);
	CU_ASSERT(st1.registers_tx - st0.registers_tx <= 4 * 8);
	CU_ASSERT(st1.registers_tx - st0.registers_tx >= 4 * 4);
	egw_node_destroy(t.node[1]);
	egw_pool_destroy(t.pool[1]);
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
	       t.now - t0 < t.par[1].xfer.timers.bootstrap_ns)
		run(1000000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_ABORTED)], 1);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 2);
	CU_ASSERT(t.now - t0 < t.par[1].xfer.timers.bootstrap_ns / 10);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* Decode what a side sent (both sides share the key). */
static void
decode(const struct dgram *d, struct egw_pkt *p)
{
	CU_ASSERT_EQUAL_FATAL(egw_proto_decode(&t.par[0].key, d->b, d->len, p,
					       NULL), EGW_PROTO_ERR_OK);
}

/* A REGISTER of the language side's own, sent back to it from its
 * peer's address, is refused as NAME and not heard: once the peer falls
 * silent, the REGISTERs it sends again still name the peer's session,
 * not its own. */
static void
test_reflected_register_not_heard(void)
{
	struct egw_node_stats st;
	struct dgram mine;
	struct egw_pkt p;

	setup(16);
	run(5000000);
	CU_ASSERT_FATAL(egw_node_peer_ready(t.node[1], 0));
	mine = t.last_reg[1];
	egw_node_rx(t.node[1], ENC_IP, PORT, mine.b, mine.len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_NAME], 1);
	t.down[0] = true;
	run(t.par[1].xfer.timers.peer_dead_ns + 500000000ull);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	decode(&t.last_reg[1], &p);
	CU_ASSERT_EQUAL(p.session, 1001);
	CU_ASSERT_EQUAL(p.reg.peer_session, 1000);
	teardown();
}

/* Deliver queued datagrams one at a time, no ticks, until both sides are
 * registered or `max` went; returns how many went, each decoded in
 * seen[]. */
static unsigned
deliver_steps(struct egw_pkt *seen, int *from, unsigned max)
{
	unsigned head = 0;

	while (head < t.nq && head < max &&
	       !(egw_node_peer_ready(t.node[0], 0) &&
		 egw_node_peer_ready(t.node[1], 0))) {
		struct dgram d = t.q[head];

		decode(&d, &seen[head]);
		from[head++] = d.to == 0 ? 1 : 0;
		egw_node_rx(t.node[d.to], d.src, PORT, d.b, d.len, t.now);
	}
	t.nq = 0;
	return head;
}

/* The encode side runs alone (its REGISTERs are lost), then the language
 * side starts: REGISTER, ACK naming it, REGISTER ADOPTED, ACK ADOPTED -
 * four datagrams register both. */
static void
test_handshake_typical_order(void)
{
	struct egw_pkt seen[16];
	int from[16];
	unsigned n;

	setup(16);
	t.down[1] = true;
	run(1000000000ull);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[0], 0));
	restart(1, 0x1111);
	t.down[1] = false;
	egw_node_tick(t.node[1], t.now);
	n = deliver_steps(seen, from, 16);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT(from[0] == 1 && from[1] == 0 && from[2] == 1 && from[3] == 0);
	CU_ASSERT_EQUAL(seen[0].flags, 0);
	CU_ASSERT_EQUAL(seen[0].reg.peer_session, 0);
	CU_ASSERT_EQUAL(seen[1].flags, EGW_MSGF_ACK);
	CU_ASSERT_EQUAL(seen[1].reg.peer_session, 0x1111);
	CU_ASSERT_EQUAL(seen[2].flags, EGW_MSGF_ADOPTED);
	CU_ASSERT_EQUAL(seen[2].reg.peer_session, 1000);
	CU_ASSERT_EQUAL(seen[3].flags, EGW_MSGF_ACK | EGW_MSGF_ADOPTED);
	CU_ASSERT_EQUAL(seen[3].reg.peer_session, 0x1111);
	CU_ASSERT_EQUAL(seen[3].reg.ack_qpn, 88); /* the language endpoint */
	CU_ASSERT_EQUAL(seen[3].reg.ack_psn, 5);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[0], 0), 0x1111);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 1000);
	CU_ASSERT_EQUAL(t.notes[0][EGW_NODE_NOTE_REGISTERED], 1);
	assert_room_transfers(2000);
	teardown();
}

/* Both start at once: each side's first REGISTER names no one, each
 * answer names the other; both adopt once, nothing is taken for a
 * restart. */
static void
test_handshake_simultaneous_start(void)
{
	struct egw_pkt seen[16];
	int from[16];
	struct egw_node_stats st;
	unsigned n;

	setup(16);
	egw_node_tick(t.node[0], t.now);
	egw_node_tick(t.node[1], t.now);
	n = deliver_steps(seen, from, 16);
	CU_ASSERT(n <= 8);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(seen[0].reg.peer_session, 0);
	CU_ASSERT_EQUAL(seen[1].reg.peer_session, 0);
	CU_ASSERT_EQUAL(seen[2].flags, EGW_MSGF_ACK);
	CU_ASSERT_EQUAL(seen[2].reg.peer_session, from[2] == 0 ? 1001 : 1000);
	for (int i = 0; i < 2; i++) {
		egw_node_get_stats(t.node[i], &st);
		CU_ASSERT_EQUAL(st.adoptions, 1);
		CU_ASSERT_EQUAL(st.peer_restarts, 0);
		CU_ASSERT_EQUAL(t.peer_downs[i], 0);
	}
	assert_room_transfers(2000);
	teardown();
}

/* The encode side restarts as `session` with a room in flight: the same
 * REGISTER content, only the session tells. The language side fails the
 * old incarnation's room (PEER_DEAD), lets go of its memory, serves the
 * new one, and refuses the old one's REGISTER replayed. */
static void
restart_encode_as(uint64_t session)
{
	struct egw_node_stats st;
	struct dgram old_reg;
	struct egw_pkt a, b;

	setup(16);
	run(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	open_held(50000);
	old_reg = t.last_reg[0];
	restart(0, session);
	t.hold_writes = false;
	run(20000000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), session);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_PEER_DEAD)], 1);
	CU_ASSERT_EQUAL(t.peer_downs[1], 1);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_RESTARTED], 1);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_REGISTERED], 2);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.peer_restarts, 1);
	CU_ASSERT_EQUAL(st.adoptions, 2);
	/* byte for byte the same content: the restart is told by the
	 * session alone */
	decode(&old_reg, &a);
	decode(&t.last_reg[0], &b);
	CU_ASSERT_EQUAL(memcmp(old_reg.b + 48, t.last_reg[0].b + 48, 144), 0);
	CU_ASSERT_NOT_EQUAL(a.session, b.session);
	/* the old incarnation's REGISTER replayed: refused, nothing changes */
	egw_node_rx(t.node[1], ENC_IP, PORT, old_reg.b, old_reg.len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_SESSION], 1);
	CU_ASSERT_EQUAL(st.proto.refused[EGW_PROTO_ERR_SESSION], 1);
	CU_ASSERT_EQUAL(st.peer_restarts, 1);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), session);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	t.nq = 0;
	assert_room_transfers(3000);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

static void
test_restart_with_the_same_register_bytes(void)
{
	restart_encode_as(0x7fffffffffffull);
}

/* A clock set back, a counter: a smaller session is just as new. */
static void
test_restart_with_a_smaller_session(void)
{
	restart_encode_as(5);
}

/* A REGISTER of the encode side recorded before the language side's
 * start names the language side's previous incarnation: it adopts
 * nothing. The live encode side then registers as usual. */
static void
test_pre_start_register_replayed_does_not_adopt(void)
{
	struct dgram pre;
	struct egw_node_stats st;

	setup(16);
	run(5000000);
	pre = t.last_reg[0];
	restart(1, 0x2222);
	egw_node_rx(t.node[1], ENC_IP, PORT, pre.b, pre.len, t.now);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.adoptions, 0);
	CU_ASSERT_EQUAL(st.registers_rx, 1);
	run(20000000);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 1000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT_EQUAL(st.peer_restarts, 1); /* the language side's */
	assert_room_transfers(2000);
	teardown();
}

/* The encode side restarts five times (more than the sessions retired are
 * remembered); then the first incarnation's REGISTER, which named the
 * language side, is replayed: it proves nothing fresh (the REGISTER of ours
 * it names is seconds old), so nothing is adopted and the live encode side
 * stays registered. */
static void
test_old_incarnation_replayed_after_many_restarts(void)
{
	struct egw_node_stats st;
	struct dgram first;
	struct egw_pkt p;

	setup(16);
	run(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	first = t.last_reg[0];
	decode(&first, &p);
	CU_ASSERT_EQUAL_FATAL(p.reg.peer_session, 1001);
	for (uint64_t i = 0; i < 5; i++) {
		restart(0, 0x5000 + i);
		run(600000000ull);
		CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0x5000 + i);
	}
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	egw_node_rx(t.node[1], ENC_IP, PORT, first.b, first.len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.peer_restarts, 5);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0x5004);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	run(20000000);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0x5004);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	assert_room_transfers(2000);
	teardown();
}

/* A REGISTER from `session` (the encode side's content) naming the language
 * side, with `peer_seq`, handed to the language side. */
static struct dgram
register_from(uint64_t session, uint64_t peer_seq)
{
	static uint64_t seq;
	struct egw_pkt p;
	struct dgram d = { .to = 1, .src = ENC_IP };
	uint8_t *b = d.b;
	int len;

	decode(&t.last_reg[0], &p);
	p.reg.peer_session = 1001;
	p.reg.peer_seq = peer_seq;
	p.reg.ack_qpn = p.reg.ack_psn = 0;
	len = egw_proto_encode_register(&t.par[0].key, session, ++seq, 0,
					&p.reg, b, sizeof(d.b));
	CU_ASSERT_FATAL(len > 0);
	d.len = (size_t)len;
	egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
	return d;
}

/* A REGISTER whose peer_seq names a REGISTER of ours older than 2 s adopts
 * nothing; one naming the answer we just sent adopts. */
static void
test_register_with_stale_peer_seq_adopts_nothing(void)
{
	struct egw_pkt ours;
	struct egw_node_stats st;

	setup(16);
	run(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	decode(&t.last_reg[1], &ours);
	run(2500000000ull);
	t.nq = 0;
	t.down[0] = true; /* the new session is played by hand */
	register_from(0x6666, ours.seq);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 1000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.adoptions, 1);
	CU_ASSERT_EQUAL(st.peer_restarts, 0);
	/* our session named but no proof: answered (an ACK naming it) */
	CU_ASSERT_FATAL(t.nq == 1);
	decode(&t.q[0], &ours);
	CU_ASSERT_EQUAL(ours.flags, EGW_MSGF_ACK);
	CU_ASSERT_EQUAL(ours.reg.peer_session, 0x6666);
	/* a seq we never sent proves nothing either */
	register_from(0x6666, ours.seq + 1000);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 1000);
	/* naming that fresh answer proves the session live: adopted */
	register_from(0x6666, ours.seq);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 0x6666);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.peer_restarts, 1);
	t.down[0] = false;
	teardown();
}

/* The datagrams a session sent before the one that adopted it, accepted
 * in the window of sessions not adopted, stay refused as replays once it
 * is adopted: the window goes over with the session. */
static void
test_adoption_keeps_the_sessions_window(void)
{
	struct dgram first;
	struct egw_pkt ours;
	struct egw_node_stats st0, st;

	setup(16);
	run(5000000);
	t.nq = 0;
	t.down[0] = true; /* the new session is played by hand */
	first = register_from(0x7777, 999999); /* no proof: answered */
	CU_ASSERT_FATAL(t.nq == 1);
	decode(&t.q[0], &ours);
	register_from(0x7777, ours.seq);  /* adopts */
	CU_ASSERT_EQUAL_FATAL(egw_node_peer_session(t.node[1], 0), 0x7777);
	egw_node_get_stats(t.node[1], &st0);
	egw_node_rx(t.node[1], ENC_IP, PORT, first.b, first.len, t.now);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_REPLAY],
			st0.drops[EGW_NODE_DROP_REPLAY] + 1);
	CU_ASSERT_EQUAL(st.registers_rx, st0.registers_rx);
	t.down[0] = false;
	teardown();
}

/* The language side falls silent past peer_dead_ms (the same incarnation,
 * only unreachable): the encode side fails its room, then has its driver
 * let go of the peer's memory (shm: the mapping that keeps a killed
 * peer's pool file's space in use), and when the same incarnation is
 * heard again its REGISTER is applied anew: registered, transfers go on. */
static void
test_silent_peer_let_go_and_reapplied(void)
{
	unsigned ups, downs, fail_at = 0, down_at = 0;

	setup(16);
	run(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[0], 0));
	open_held(50000);
	ups = t.enc_peer_ups;
	downs = t.peer_downs[0];
	t.down[1] = true;
	run(t.par[0].xfer.timers.peer_dead_ns + 500000000ull);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_PEER_DEAD)], 1);
	CU_ASSERT_EQUAL(t.peer_downs[0], downs + 1);
	/* the room failed before the memory was let go */
	for (unsigned i = 0; i < t.nev; i++)
		if (t.ev[i].what == 'D')
			down_at = i;
	fail_at = t.fail_ev;
	CU_ASSERT(fail_at > 0 && down_at >= fail_at);
	t.hold_writes = false;
	t.down[1] = false;
	run(1000000000ull);
	CU_ASSERT_EQUAL(t.enc_peer_ups, ups + 1);
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[0], 0), 1001);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	assert_room_transfers(3000);
	teardown();
}

/* The encode side is alive (heartbeats, REGISTERs) but never answers the
 * language side's ABORT (its writes never complete): past quarantine_ns
 * the language side fences it - noted, its driver told to let go as for
 * a restart (verbs: the QP reset), the quarantined blocks back in the
 * pool, counted, its session retired (what it sends is refused) - and
 * serves it again once it restarts. */
static void
test_quarantine_deadline_fences_a_live_peer(void)
{
	const struct egw_xfer_receiver *rx;
	struct egw_node_stats ns;
	struct egw_xfer_stats xs;
	struct egw_pool_stats ps;
	unsigned downs;

	setup(16);
	run(5000000);
	open_held(50000);
	downs = t.peer_downs[1];
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 50000, 0, false, t.now), 0);
	run(t.par[1].xfer.timers.quarantine_ns - 100000000ull);
	egw_pool_get_stats(t.pool[1], &ps);
	CU_ASSERT(ps.blocks_in_use > 0); /* quarantined, no ACK */
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_FENCED], 0);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0)); /* alive */
	run(200000000ull);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_FENCED], 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(t.note_text[1][EGW_NODE_NOTE_FENCED],
				      "did not answer the ABORT of room 0xc350"));
	CU_ASSERT_EQUAL(t.peer_downs[1], downs + 1);
	egw_pool_get_stats(t.pool[1], &ps);
	CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	egw_node_get_stats(t.node[1], &ns);
	CU_ASSERT_EQUAL(ns.peers_fenced, 1);
	rx = egw_node_receiver(t.node[1]);
	egw_xfer_receiver_get_stats(rx, &xs);
	CU_ASSERT_EQUAL(xs.quarantine_expired, 1);
	CU_ASSERT_EQUAL(xs.quarantine_rooms, 0);
	/* its session is retired: it is not served again as it is */
	run(1000000000ull);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[1], &ns);
	CU_ASSERT(ns.drops[EGW_NODE_DROP_SESSION] > 0);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_FENCED], 1);
	/* a new incarnation is */
	restart(0, 0x4444);
	t.hold_writes = false;
	run(100000000ull);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	assert_room_transfers(3000);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* The language side restarts while the encode side has a room in flight
 * to it: the encode side fails that room, has its driver let go of the
 * old memory, and only then connects to and writes for the new one. */
static void
test_new_incarnation_lets_go_before_writing(void)
{
	unsigned down = 0, up = 0, first_post = 0, downs = 0;

	setup(16);
	run(5000000);
	open_held(50000);
	CU_ASSERT_FATAL(t.nev > 0 && t.ev[t.nev - 1].what == 'P');
	/* its writes still in flight when the new incarnation registers */
	restart(1, 0x3333);
	run(20000000);
	t.hold_writes = false;
	assert_room_transfers(3000);
	CU_ASSERT_EQUAL(t.sender_failed[egw_err_to_wire(EGW_E_PEER_DEAD)], 1);
	for (unsigned i = 0; i < t.nev; i++) {
		if (t.ev[i].what == 'D') {
			downs++;
			down = i;
		}
		if (t.ev[i].what == 'U' && t.ev[i].session == 0x3333 && up == 0)
			up = i;
		if (t.ev[i].what == 'P' && down != 0 && first_post == 0)
			first_post = i;
	}
	CU_ASSERT_EQUAL(downs, 1);
	CU_ASSERT(down > 0 && up > down);
	CU_ASSERT(first_post > up);
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* The language side cannot reach the encode side's endpoint at first: it
 * answers ERROR(UNREACHABLE), noted once on each side, adopts nothing;
 * the encode side's next REGISTER tries again and repairs it. */
static void
test_unreachable_then_repaired_by_the_next_register(void)
{
	struct egw_node_stats st;

	setup(16);
	t.lang_connect_refusals = 3;
	run(1500000000ull);
	CU_ASSERT_EQUAL(t.lang_connect_tries, 4);
	CU_ASSERT_EQUAL(t.lang_peer_ups, 1);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_PAYLOAD], 3);
	CU_ASSERT(st.register_refusals >= 1 && st.register_refusals <= 3);
	CU_ASSERT_EQUAL(st.adoptions, 1);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_REFUSED], 1);
	/* the driver's own reason, noted once (the driver logs nothing) */
	CU_ASSERT_PTR_NOT_NULL(strstr(t.note_text[1][EGW_NODE_NOTE_REFUSED],
				      "cannot reach its endpoint: the driver's reason"));
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT(st.register_refused >= 1);
	CU_ASSERT_EQUAL(t.notes[0][EGW_NODE_NOTE_PEER_REFUSED], 1);
	CU_ASSERT_EQUAL(t.note_code[0][EGW_NODE_NOTE_PEER_REFUSED],
			EGW_E_UNREACHABLE);
	assert_room_transfers(2000);
	teardown();
}

/* After a re-registration, an ACK that echoes the old endpoint (delayed
 * in the network) confirms nothing: only the ACK echoing the new one
 * reaches the driver. */
static void
test_stale_ack_does_not_confirm_a_new_endpoint(void)
{
	struct dgram stale;
	unsigned ups;

	setup(16);
	run(5000000);
	/* an ACK for our current endpoint (psn 111), held back */
	t.nq = 0;
	CU_ASSERT_EQUAL(egw_node_reregister(t.node[0], 0, t.now), 0);
	CU_ASSERT_FATAL(t.nq == 1);
	egw_node_rx(t.node[1], ENC_IP, PORT, t.q[0].b, t.q[0].len, t.now);
	CU_ASSERT_FATAL(t.nq == 2);
	stale = t.q[1];
	t.nq = 0;
	/* the endpoint changes; the held ACK arrives first */
	t.enc_psn = 222;
	ups = t.enc_peer_ups;
	CU_ASSERT_EQUAL(egw_node_reregister(t.node[0], 0, t.now), 0);
	t.nq = 0;
	egw_node_rx(t.node[0], LANG_IP, PORT, stale.b, stale.len, t.now);
	CU_ASSERT_EQUAL(t.enc_peer_ups, ups);
	/* the next REGISTER (200 ms) is answered with the right echo */
	run(300000000);
	CU_ASSERT_EQUAL(t.enc_peer_ups, ups + 1);
	CU_ASSERT_EQUAL(t.lang_seen_psn, 222);
	assert_room_transfers(2000);
	teardown();
}

/* ---- per-window keys ---------------------------------------------------- */

static void
setup_keys(void)
{
	memset(&t, 0, sizeof(t));
	t.keys_on = true;
	t.enc_psn = 111;
	egw_proto_init();
	mkconf(0, "enc", EGW_ROLE_ENCODE, LANG_IP, "lang", 16);
	mkconf(1, "lang", EGW_ROLE_LANGUAGE, ENC_IP, "enc", 16);
	t.par[1].xfer.max_blocks_per_round = 8; /* many windows per room */
	for (int i = 0; i < 2; i++)
		start(i, 1000 + (uint64_t)i);
	run(5000000);
	CU_ASSERT_FATAL(egw_node_peer_ready(t.node[1], 0));
}

/* Every window the driver opened is closed, after nothing else and
 * before any block went back; every write went under its window's key. */
static void
assert_windows_closed(void)
{
	CU_ASSERT(t.binds > 0);
	CU_ASSERT_EQUAL(t.unbinds, t.binds - t.binds_failed);
	CU_ASSERT_EQUAL(t.unbind_after_free, 0);
	CU_ASSERT_EQUAL(t.key_violations, 0);
	CU_ASSERT_EQUAL(t.multi_run_windows, 0);
	CU_ASSERT_EQUAL(t.keyless_windows, 0);
	CU_ASSERT_EQUAL(t.inits_while_binding, 0);
	CU_ASSERT_EQUAL(t.done_before_deliver, 0);
	CU_ASSERT_EQUAL(t.unbind_unknown, 0);
	CU_ASSERT_EQUAL(t.nwq, 0);
	CU_ASSERT_EQUAL(egw_node_windows_parked(t.node[1]), 0);
	for (uint32_t b = 0; b < 2048; b++)
		CU_ASSERT(!t.win[b].open && !t.win[b].binding &&
			  !t.win[b].closing);
}

static uint64_t
lang_blocks_in_use(void)
{
	struct egw_pool_stats ps;

	egw_pool_get_stats(t.pool[1], &ps);
	return ps.blocks_in_use;
}

static void
test_window_keys_delivered(void)
{
	struct egw_xfer_stats xs;

	setup_keys();
	/* resumes (8-block windows), and a room whose first window is
	 * trimmed: its tail waits for the window to close */
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 10000, 0, 1, 0, false, t.now), 0);
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], (1ull << 32) | 300, 0, 1, 0, false, t.now), 0);
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 2);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, 0);
	egw_xfer_receiver_get_stats(egw_node_receiver(t.node[1]), &xs);
	CU_ASSERT_EQUAL(t.binds, xs.windows);
	CU_ASSERT(xs.resumes >= 2); /* 8192 tokens, then 8-block windows */
	run(3000000000ull);
	assert_windows_closed();
	assert_no_blocks_in_use();
	teardown();
}

static void
test_window_keys_closed_on_failure_and_abort(void)
{
	setup_keys();
	/* failed: the driver refuses the batch, the room fails at once */
	t.refuse_posts = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3000, 0, 1, 0, false, t.now), 0);
	run(20000000);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_TRANSPORT)], 1);
	t.refuse_posts = false;
	/* aborted by either side while writes are held */
	open_held(50000);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 50000, 0, false, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	open_held(40000);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[0], 40000, 0, true, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.receiver_failed[egw_err_to_wire(EGW_E_ABORTED)], 2);
	CU_ASSERT_EQUAL(t.delivered, 0);
	run(3000000000ull);
	assert_windows_closed();
	assert_no_blocks_in_use();
	teardown();
}

static void
test_window_keys_bind_failure_retried(void)
{
	struct egw_node_stats st;

	setup_keys();
	/* windows that cannot be opened - refused at the post, or failed
	 * at the completion - are not offered, their blocks go back; the
	 * room asks again and completes */
	t.bind_fail = 2;
	t.bind_fail_cpl = 2;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(200000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, 0);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.window_bind_failed, 4);
	/* the failed completion is noted, with the window and the peer */
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_WINDOW], 1);
	CU_ASSERT(strstr(t.note_text[1][EGW_NODE_NOTE_WINDOW], "bind failed") !=
		  NULL);
	CU_ASSERT(strstr(t.note_text[1][EGW_NODE_NOTE_WINDOW], "peer enc") !=
		  NULL);
	run(3000000000ull);
	assert_windows_closed();
	assert_no_blocks_in_use();
	teardown();
}

/* A bind that completes late holds the window's INIT back - nothing
 * blocks meanwhile: the node goes on with its peer and its other work -
 * and the room goes through once it completes. */
static void
test_window_keys_late_bind_delays_the_offer(void)
{
	setup_keys();
	t.hold_binds = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(1000000);
	CU_ASSERT_EQUAL(t.binds, 1);
	CU_ASSERT_EQUAL(egw_node_windows_parked(t.node[1]), 1);
	CU_ASSERT(lang_blocks_in_use() > 0);
	/* the sender heard of no room: no INIT went out */
	CU_ASSERT(!egw_node_sender_has_room(t.node[0], 2000));
	CU_ASSERT(egw_node_peer_ready(t.node[1], 0));
	run(500000000); /* late, within the deadline */
	CU_ASSERT(!egw_node_sender_has_room(t.node[0], 2000));
	CU_ASSERT_EQUAL(t.delivered, 0);
	t.hold_binds = false;
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, 0);
	run(3000000000ull);
	assert_windows_closed();
	assert_no_blocks_in_use();
	teardown();
}

/* A room's blocks - freed or delivered - wait for their windows'
 * invalidations: never back in the pool, never the application's, while
 * a key may still admit the peer's writes. */
static void
test_window_keys_pending_invalidation_holds_blocks(void)
{
	uint64_t held;

	setup_keys();
	t.hold_unbinds = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(50000000);
	/* the room is complete, its DELIVER waits for the invalidation */
	CU_ASSERT_EQUAL(t.delivered, 0);
	CU_ASSERT_EQUAL(t.lang_done_ok, 0);
	CU_ASSERT(egw_node_windows_parked(t.node[1]) > 0);
	held = lang_blocks_in_use();
	CU_ASSERT(held > 0);
	t.hold_unbinds = false;
	run(1000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.lang_done_ok, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	/* an aborted room: its blocks stay out of the pool until then */
	t.hold_unbinds = true;
	open_held(50000);
	CU_ASSERT_EQUAL(egw_node_abort_room(t.node[1], 50000, 0, false, t.now), 0);
	t.hold_writes = false;
	run(10000000);
	CU_ASSERT(lang_blocks_in_use() > 0);
	CU_ASSERT(egw_node_windows_parked(t.node[1]) > 0);
	t.hold_unbinds = false;
	run(3000000000ull);
	assert_windows_closed();
	assert_no_blocks_in_use();
	teardown();
}

/* Past its deadline a bind is failed and noted, and invalidated before
 * its blocks go back; an overdue invalidation is noted, its blocks stay
 * out of the pool until it does complete. */
static void
test_window_keys_deadlines(void)
{
	struct egw_node_stats st;

	setup_keys();
	t.hold_binds = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 2000, 0, 1, 0, false, t.now), 0);
	run(2100000000ull);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT(st.window_overdue >= 1);
	CU_ASSERT(st.window_bind_failed >= 1);
	CU_ASSERT_EQUAL(t.notes[1][EGW_NODE_NOTE_WINDOW], 1);
	CU_ASSERT(strstr(t.note_text[1][EGW_NODE_NOTE_WINDOW],
			 "did not complete") != NULL);
	CU_ASSERT(!egw_node_sender_has_room(t.node[0], 2000));
	/* the bind's late completion is stale; the room goes through */
	t.hold_binds = false;
	run(100000000);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT(st.window_stale >= 1);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	run(3000000000ull);
	assert_no_blocks_in_use();

	/* an invalidation that does not complete in time */
	t.hold_unbinds = true;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3000, 0, 1, 0, false, t.now), 0);
	run(2500000000ull);
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT(lang_blocks_in_use() > 0);
	CU_ASSERT_EQUAL(egw_node_windows_parked(t.node[1]), 0); /* stuck */
	t.hold_unbinds = false;
	run(10000000);
	CU_ASSERT_EQUAL(t.delivered, 2);
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
	const struct egw_xfer_sender *snd;
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
	CU_ASSERT_EQUAL(egw_xfer_receiver_state(egw_node_receiver(t.node[1]),
						3000, 0),
			EGW_ST_BOOTSTRAPPING);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(snd, 3000), -EGW_E_UNKNOWN_ROOM);
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
	CU_ASSERT_EQUAL(egw_xfer_sender_state(snd, 3001), -EGW_E_UNKNOWN_ROOM);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(snd, 3002), -EGW_E_UNKNOWN_ROOM);
	egw_xfer_sender_get_stats(snd, &st);
	CU_ASSERT(st.rejected[egw_err_to_wire(EGW_E_NO_SLOT)] > 1);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_TOO_LARGE)], 1);
	CU_ASSERT_EQUAL(st.rooms_failed, 0);
	t.producer_says = 0;
	run(3000000000ull);
	assert_no_blocks_in_use();
	teardown();
}

/* Traffic from a session that is not the adopted one (a peer's next
 * incarnation before its REGISTER got through) is dropped as SESSION and
 * answered with our REGISTER - at most every 200 ms, not per datagram. */
static void
test_foreign_session_nudged_at_most_every_200ms(void)
{
	struct egw_msg hb = { .type = EGW_MSG_HEARTBEAT };
	struct egw_node_stats st0, st;
	uint8_t b[EGW_PROTO_MAX_LEN];

	setup(16);
	run(5000000);
	t.nq = 0;
	egw_node_get_stats(t.node[1], &st0);
	for (uint64_t q = 1; q <= 50; q++) {
		int len = egw_proto_encode(&t.par[0].key, 0x4444, q, &hb, b, sizeof(b));

		egw_node_rx(t.node[1], ENC_IP, PORT, b, (size_t)len, t.now);
		t.now += 1000000; /* 50 ms in all */
	}
	egw_node_get_stats(t.node[1], &st);
	CU_ASSERT_EQUAL(st.drops[EGW_NODE_DROP_SESSION] -
				st0.drops[EGW_NODE_DROP_SESSION],
			50);
	CU_ASSERT_EQUAL(st.registers_tx - st0.registers_tx, 1);
	CU_ASSERT_EQUAL(t.nq, 1);
	CU_ASSERT_EQUAL(t.q[0].b[5], EGW_MSG_REGISTER);
	/* the adopted incarnation is unaffected */
	CU_ASSERT_EQUAL(egw_node_peer_session(t.node[1], 0), 1000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	t.nq = 0;
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
	len = egw_proto_encode(&t.par[1].key, 1001, 1000000, &m, buf, sizeof(buf));
	CU_ASSERT_FATAL(len > 0);
	egw_node_rx(t.node[0], LANG_IP, PORT, buf, (size_t)len, t.now);
	CU_ASSERT_EQUAL(t.unknown_calls, 0);
	CU_ASSERT_EQUAL(egw_xfer_sender_state(egw_node_sender(t.node[0]), 4000),
			-EGW_E_UNKNOWN_ROOM);
	egw_xfer_sender_get_stats(egw_node_sender(t.node[0]), &st);
	CU_ASSERT_EQUAL(st.rejected[egw_err_to_wire(EGW_E_BLOCK_TOKENS)], 1);
	egw_pool_get_stats(t.pool[0], &ps);
	CU_ASSERT_EQUAL(ps.blocks_in_use, 0);
	teardown();
}

/* A reload while a room is in flight on both nodes: new timers, limits
 * and policy are taken, the room completes byte-exact, and an update
 * that changes what the peer registered with, or a table size, is
 * refused with nothing applied. */
static void
test_update_keeps_rooms_in_flight(void)
{
	struct egw_node_params p[2];
	const struct egw_xfer_receiver *rx;

	setup(16);
	run(5000000);
	open_held(30000);
	for (int i = 0; i < 2; i++) {
		p[i] = t.par[i];
		p[i].xfer.timers.rto_ns = 3000000;
		p[i].xfer.timers.round_ns = 9000000000ull;
		p[i].xfer.pipeline_depth = 1;
	}
	egw_policy_init_fixed(&p[1].policy, t.geom[1].block_tokens, 4096);
	CU_ASSERT_EQUAL(egw_node_update(t.node[0], &p[0], t.now), 0);
	CU_ASSERT_EQUAL(egw_node_update(t.node[1], &p[1], t.now), 0);
	rx = egw_node_receiver(t.node[1]);
	CU_ASSERT_EQUAL(egw_policy_tokens(egw_xfer_receiver_policy(rx)), 4096);
	t.hold_writes = false;
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.done_err, 0);

	/* refused whole: the policy stays 4096 */
	egw_policy_init_fixed(&p[1].policy, t.geom[1].block_tokens, 2048);
	p[1].xfer.max_rooms++;
	CU_ASSERT_EQUAL(egw_node_update(t.node[1], &p[1], t.now), -EINVAL);
	p[1].xfer.max_rooms--;
	p[1].key.k[0] ^= 1;
	CU_ASSERT_EQUAL(egw_node_update(t.node[1], &p[1], t.now), -EPERM);
	p[1].key.k[0] ^= 1;
	p[1].roles |= EGW_ROLE_ENCODE;
	CU_ASSERT_EQUAL(egw_node_update(t.node[1], &p[1], t.now), -EPERM);
	p[1].roles = t.par[1].roles;
	snprintf(p[1].name, sizeof(p[1].name), "other");
	CU_ASSERT_EQUAL(egw_node_update(t.node[1], &p[1], t.now), -EPERM);
	CU_ASSERT_EQUAL(egw_node_update(NULL, &p[1], t.now), -EINVAL);
	CU_ASSERT_EQUAL(egw_policy_tokens(egw_xfer_receiver_policy(rx)), 4096);
	assert_room_transfers(700);
	run(3000000000ull); /* past the sender's linger */
	assert_no_blocks_in_use();
	teardown();
}

/* ---- ticks only when something is due (egw_node_next_deadline) ----------- */

/* As run(), but ticking each side as a sleeping worker does: only once
 * its egw_node_next_deadline is due, asked again after every event, and
 * at most every 100 us; datagrams and completions arrive as soon as they
 * are sent, whatever the time. Returns the ticks made. */
static unsigned
run_sparse(uint64_t ns)
{
	uint64_t end = t.now + ns, last[2] = { 0, 0 }, due[2];
	unsigned head = 0, ticks = 0;

	while (t.now < end) {
		uint64_t next = end;

		while (head < t.nq) {
			struct dgram d = t.q[head++ % 4096];

			if (!t.down[d.to])
				egw_node_rx(t.node[d.to], d.src, PORT, d.b,
					    d.len, t.now);
		}
		t.nq = head = 0;
		while (t.ncpl > 0 && !t.hold_writes && !t.down[0])
			egw_node_writes_done(t.node[0], t.cpl[--t.ncpl], true,
					     t.now);
		if (t.nwq > 0 && !t.down[1])
			window_completions();
		for (int i = 0; i < 2; i++) {
			due[i] = egw_node_next_deadline(t.node[i], t.now);
			if (last[i] != 0 && due[i] < last[i] + 100000)
				due[i] = last[i] + 100000;
			if (!t.down[i] && due[i] < next)
				next = due[i];
		}
		if (next > t.now)
			t.now = next; /* asleep until then */
		for (int i = 0; i < 2; i++) {
			if (t.down[i] || due[i] > t.now)
				continue;
			egw_node_tick(t.node[i], t.now);
			last[i] = t.now;
			ticks++;
		}
	}
	t.nq = 0;
	return ticks;
}

static uint64_t
peers_dead(int i)
{
	struct egw_xfer_stats st;

	if (i == 0)
		egw_xfer_sender_get_stats(egw_node_sender(t.node[0]), &st);
	else
		egw_xfer_receiver_get_stats(egw_node_receiver(t.node[1]), &st);
	return st.peers_dead;
}

/* What is due: right away after the start (our first REGISTER), at the
 * caller's pace while a room is in flight, and once the pair is quiet
 * nothing before a heartbeat - a future time, not the next tick. */
static void
test_next_deadline_quiet_and_busy(void)
{
	const uint64_t hb = 100000000ull; /* the engines' default */

	setup(16);
	for (int i = 0; i < 2; i++)
		CU_ASSERT(egw_node_next_deadline(t.node[i], t.now) <= t.now);
	run(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL_FATAL(t.par[0].xfer.timers.heartbeat_ns, hb);
	for (int i = 0; i < 2; i++) {
		uint64_t d = egw_node_next_deadline(t.node[i], t.now);

		CU_ASSERT(d > t.now + 100000);
		CU_ASSERT(d <= t.now + hb);
	}
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 700, 0, 1, 0, false,
					       t.now),
			0);
	CU_ASSERT(egw_node_next_deadline(t.node[1], t.now) <= t.now);
	run(50000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	run(3000000000ull); /* past the sender's linger */
	for (int i = 0; i < 2; i++)
		CU_ASSERT(egw_node_next_deadline(t.node[i], t.now) > t.now);
	teardown();
}

/* A worker that ticks only when something is due does what a regular
 * tick does: the pair registers, a room goes through, ten quiet seconds
 * keep both alive with a few hundred ticks instead of 200,000, a peer
 * that falls silent is declared dead on its deadline, not before, and
 * the pair comes back. */
static void
test_deadline_driven_ticks(void)
{
	uint64_t dead_ns;
	unsigned ticks;

	setup(16);
	dead_ns = t.par[0].xfer.timers.peer_dead_ns;
	run_sparse(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 10000, 0, 1, 0, false,
					       t.now),
			0);
	run_sparse(50000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	ticks = run_sparse(10000000000ull);
	CU_ASSERT(ticks > 0 && ticks < 1000);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(peers_dead(0) + peers_dead(1), 0);
	/* the language side falls silent */
	t.down[1] = true;
	run_sparse(dead_ns - 150000000ull);
	CU_ASSERT_EQUAL(peers_dead(0), 0);
	run_sparse(300000000ull);
	CU_ASSERT_EQUAL(peers_dead(0), 1);
	CU_ASSERT_FALSE(egw_node_peer_ready(t.node[0], 0));
	t.down[1] = false;
	run_sparse(1000000000ull);
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[0], 0));
	CU_ASSERT_TRUE(egw_node_peer_ready(t.node[1], 0));
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 3000, 0, 1, 0, false,
					       t.now),
			0);
	run_sparse(50000000);
	CU_ASSERT_EQUAL(t.delivered, 2);
	CU_ASSERT_EQUAL(t.bad, 0);
	teardown();
}

/* REGISTERs to a peer that does not answer back off on their deadlines:
 * as many go out ticking only when due as ticking every 100 us. */
static void
test_deadline_driven_register_backoff(void)
{
	struct egw_node_stats st;
	uint64_t regular;

	setup(16);
	t.down[1] = true;
	run(20000000000ull);
	egw_node_get_stats(t.node[0], &st);
	regular = st.registers_tx;
	teardown();
	setup(16);
	t.down[1] = true;
	CU_ASSERT(run_sparse(20000000000ull) < 100);
	egw_node_get_stats(t.node[0], &st);
	CU_ASSERT(regular >= 5);
	CU_ASSERT_EQUAL(st.registers_tx, regular);
	teardown();
}

/* A parked window's deadline is a deadline of its own: with heartbeats
 * seconds apart, an invalidation that never completes is failed 2 s
 * after it was posted, not at the next heartbeat. */
static void
test_deadline_of_a_parked_window(void)
{
	uint64_t opened, d;

	memset(&t, 0, sizeof(t));
	t.keys_on = true;
	t.enc_psn = 111;
	egw_proto_init();
	mkconf(0, "enc", EGW_ROLE_ENCODE, LANG_IP, "lang", 16);
	mkconf(1, "lang", EGW_ROLE_LANGUAGE, ENC_IP, "enc", 16);
	for (int i = 0; i < 2; i++) {
		t.par[i].xfer.timers.heartbeat_ns = 5000000000ull;
		t.par[i].xfer.timers.peer_dead_ns = 20000000000ull;
		start(i, 1000 + (uint64_t)i);
	}
	run_sparse(5000000);
	CU_ASSERT_TRUE_FATAL(egw_node_peer_ready(t.node[1], 0));
	t.hold_unbinds = true;
	opened = t.now;
	CU_ASSERT_EQUAL(egw_node_receiver_open(t.node[1], 700, 0, 1, 0, false,
					       t.now),
			0);
	run_sparse(100000000);
	CU_ASSERT_EQUAL(t.delivered, 0); /* waits for its invalidation */
	CU_ASSERT_EQUAL(egw_node_windows_parked(t.node[1]), 1);
	d = egw_node_next_deadline(t.node[1], t.now);
	CU_ASSERT(d >= opened + 2000000000ull);
	CU_ASSERT(d <= opened + 2100000000ull);
	run_sparse(2100000000ull);
	CU_ASSERT_EQUAL(egw_node_windows_parked(t.node[1]), 0); /* stuck */
	t.hold_unbinds = false;
	run_sparse(10000000);
	CU_ASSERT_EQUAL(t.delivered, 1);
	CU_ASSERT_EQUAL(t.bad, 0);
	teardown();
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "register_then_resume_transfer",
		  test_register_then_resume_transfer },
		{ "update_keeps_rooms_in_flight",
		  test_update_keeps_rooms_in_flight },
		{ "window keys: single runs, keys in INIT/RESUME, writes under "
		  "them, closed at delivery (a trimmed tail after)",
		  test_window_keys_delivered },
		{ "window keys: closed when a room fails or is aborted, before "
		  "its blocks go back",
		  test_window_keys_closed_on_failure_and_abort },
		{ "window keys: a window that cannot be opened is asked again",
		  test_window_keys_bind_failure_retried },
		{ "window keys: a late bind holds the window's offer back, "
		  "nothing blocks",
		  test_window_keys_late_bind_delays_the_offer },
		{ "window keys: blocks wait for their window's invalidation",
		  test_window_keys_pending_invalidation_holds_blocks },
		{ "window keys: overdue binds and invalidations fail, are "
		  "noted, and keep their blocks safe",
		  test_window_keys_deadlines },
		{ "reregister_after_endpoint_change",
		  test_reregister_after_endpoint_change },
		{ "bad_datagrams_dropped_and_counted",
		  test_bad_datagrams_dropped_and_counted },
		{ "mismatched_geometry_is_not_registered",
		  test_mismatched_geometry_is_not_registered },
		{ "message_for_missing_role_dropped",
		  test_message_for_missing_role_dropped },
		{ "refused_post_fails_room_at_once",
		  test_refused_post_fails_room_at_once },
		{ "many_refused_posts_all_fail_their_rooms",
		  test_many_refused_posts_all_fail_their_rooms },
		{ "wrong_name_is_refused_once",
		  test_wrong_name_is_refused_once },
		{ "reflected_register_not_heard",
		  test_reflected_register_not_heard },
		{ "handshake_typical_order", test_handshake_typical_order },
		{ "handshake_simultaneous_start",
		  test_handshake_simultaneous_start },
		{ "restart_with_the_same_register_bytes",
		  test_restart_with_the_same_register_bytes },
		{ "restart_with_a_smaller_session",
		  test_restart_with_a_smaller_session },
		{ "pre_start_register_replayed_does_not_adopt",
		  test_pre_start_register_replayed_does_not_adopt },
		{ "old_incarnation_replayed_after_many_restarts",
		  test_old_incarnation_replayed_after_many_restarts },
		{ "register_with_stale_peer_seq_adopts_nothing",
		  test_register_with_stale_peer_seq_adopts_nothing },
		{ "adoption_keeps_the_sessions_window",
		  test_adoption_keeps_the_sessions_window },
		{ "silent_peer_let_go_and_reapplied",
		  test_silent_peer_let_go_and_reapplied },
		{ "quarantine_deadline_fences_a_live_peer",
		  test_quarantine_deadline_fences_a_live_peer },
		{ "new_incarnation_lets_go_before_writing",
		  test_new_incarnation_lets_go_before_writing },
		{ "unreachable_then_repaired_by_the_next_register",
		  test_unreachable_then_repaired_by_the_next_register },
		{ "stale_ack_does_not_confirm_a_new_endpoint",
		  test_stale_ack_does_not_confirm_a_new_endpoint },
		{ "foreign_session_nudged_at_most_every_200ms",
		  test_foreign_session_nudged_at_most_every_200ms },
		{ "abort_one_room_either_side",
		  test_abort_one_room_either_side },
		{ "peer_removed_then_added_back",
		  test_peer_removed_then_added_back },
		{ "peer_slots_fill_and_back_off",
		  test_peer_slots_fill_and_back_off },
		{ "abort_before_input_reaches_every_rank",
		  test_abort_before_input_reaches_every_rank },
		{ "producer_refusals_have_their_codes",
		  test_producer_refusals_have_their_codes },
		{ "next_deadline_quiet_and_busy",
		  test_next_deadline_quiet_and_busy },
		{ "deadline_driven_ticks", test_deadline_driven_ticks },
		{ "deadline_driven_register_backoff",
		  test_deadline_driven_register_backoff },
		{ "deadline_of_a_parked_window",
		  test_deadline_of_a_parked_window },
		{ "refused_init_creates_nothing",
		  test_refused_init_creates_nothing },
		{ NULL, NULL },
	};
	return cu_run("node", tests);
}
