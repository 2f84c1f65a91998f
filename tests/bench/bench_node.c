/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control plane's CPU per datagram without any I/O: an encode and a
 * language node (lib/node, the gateway's own) back to back in one thread,
 * datagrams handed from one to the other in memory, payload writes done
 * as memcpy between the two pools (what the shm driver does), on a
 * simulated clock. The workload is the control benchmark's (`embgw-gen
 * --produce` against `--drive --concurrency 64 --lengths 1`): 1-token
 * rooms, 64 in flight, the encode side filling each with the built-in
 * pattern, the language side checking every byte and releasing it.
 * What is left out against `control-cpu`: frames, the device, the
 * worker's loop. Being deterministic (no clock read decides anything,
 * no other process shares the path), it is the figure to compare two
 * builds of the protocol code by; run under `valgrind --tool=callgrind`
 * it counts the same instructions every time.
 *
 *   bench_node ROUNDS ROOMS [IN_FLIGHT]
 *   -> "node_ns per_datagram=N protocol=N datagrams_per_room=N
 *       retransmits=N" (CPU time, best of the rounds; protocol: the
 *       same without the pattern's fill and check)
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egw_node.h"
#include "egw_pattern.h"
#include "bench_time.h"

#define ENC_IP 0x0a000001u
#define LANG_IP 0x0a000002u
#define PORT 9471
#define QLEN 4096u    /* a power of two */
#define IN_FLIGHT 64u /* by default; at most the room table (1,024) */
#define TICK_NS 100000ull
#define STEP_NS 50ull /* simulated time per node call */

struct dgram {
	int to;
	uint32_t len;
	uint8_t b[EGW_PROTO_MAX_LEN];
};

static struct {
	struct egw_pool_geom geom;
	struct egw_pool *pool[2];
	struct egw_node *node[2];
	struct dgram q[QLEN];
	uint32_t qh, qt;
	uint64_t cpl[1024];
	uint32_t ncpl;
	uint64_t now, next_tick;
	uint64_t next_room, opened, delivered, failed, bad, datagrams;
	bool pattern; /* fill and check the rooms' bytes */
} b;

static uint32_t in_flight = IN_FLIGHT;

static void
tx(void *ctx, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
   uint64_t now)
{
	struct dgram *d = &b.q[b.qt++ & (QLEN - 1)];

	(void)ip, (void)port, (void)now;
	if (b.qt - b.qh > QLEN) {
		fprintf(stderr, "bench_node: datagram queue overflow\n");
		exit(1);
	}
	d->to = (int)(intptr_t)ctx == 0 ? 1 : 0;
	d->len = (uint32_t)len;
	memcpy(d->b, buf, len);
}

/* the shm driver's work: every write copied into the peer's pool */
static int
post(void *ctx, uint32_t peer, const struct egw_write *w, uint32_t n,
     uint64_t cookie, uint64_t now)
{
	(void)ctx, (void)peer, (void)now;
	for (uint32_t i = 0; i < n; i++) {
		enum egw_kind k = (enum egw_kind)w[i].kind;
		const void *src = egw_pool_addr(b.pool[0], k, w[i].src_block,
						w[i].src_token);
		void *dst = egw_pool_addr(b.pool[1], k, w[i].dst_block,
					  w[i].dst_token);

		if (src == NULL || dst == NULL)
			return -EINVAL;
		memcpy(dst, src, w[i].bytes);
	}
	if (b.ncpl == sizeof(b.cpl) / sizeof(b.cpl[0]))
		return -ENOBUFS;
	b.cpl[b.ncpl++] = cookie;
	return 0;
}

static void
open_next(uint64_t now)
{
	/* the room id's low 32 bits are its length, as --produce reads it */
	uint64_t room = (++b.next_room << 32) | 1u;

	if (egw_node_receiver_open(b.node[1], room, 0, 1, 0, false, now) != 0) {
		fprintf(stderr, "bench_node: open of room %llx refused\n",
			(unsigned long long)room);
		exit(1);
	}
	b.opened++;
}

static void
deliver(void *ctx, const struct egw_act *a, uint64_t now)
{
	(void)ctx, (void)now;
	if (b.pattern)
		b.bad += egw_pattern_check(b.pool[1], a->room, a->tokens,
					   a->runs, a->nruns, a->aux_block,
					   a->dummy);
	egw_node_release(b.node[1], a->room, a->runs, a->nruns);
	b.delivered++;
}

static void
done(void *ctx, uint64_t room, uint16_t rank, enum egw_err e, bool is_sender,
     uint64_t now)
{
	(void)ctx, (void)room, (void)rank, (void)is_sender, (void)now;
	b.failed += e != EGW_E_OK;
}

/* the built-in producer: a room's data on the INIT that names it */
static int
produce(void *ctx, uint64_t room, uint16_t nranks, uint64_t now)
{
	uint32_t total = (uint32_t)room;
	struct egw_run runs[4];
	int n;

	(void)ctx;
	if (egw_node_sender_open(b.node[0], room, nranks, now) != 0)
		return -EGW_E_BUSY;
	n = egw_node_alloc_src(b.node[0], room, total, runs, 4);
	if (n <= 0) {
		egw_node_abort_room(b.node[0], room, 0, true, now);
		return -EGW_E_BUSY;
	}
	if (b.pattern)
		egw_pattern_fill(b.pool[0], room, total, runs, (uint32_t)n);
	else if (egw_pool_aux_init(b.pool[0], runs[0].start, total, 0, room) ==
		 NULL)
		return -EGW_E_BUSY;
	return egw_node_input(b.node[0], room, total, runs, (uint32_t)n, now);
}

static int
setup(int i, const char *name, uint16_t role, uint32_t peer_ip,
      const char *peer_name)
{
	struct egw_node_ops ops = { .tx = tx,
				    .post = post,
				    .deliver = deliver,
				    .done = done,
				    .unknown_room = produce };
	struct egw_region reg[EGW_KIND_MAX];
	struct egw_node_params p;
	uint8_t k[EGW_PROTO_KEY_LEN];

	memset(&p, 0, sizeof(p));
	snprintf(p.name, sizeof(p.name), "%s", name);
	p.roles = role;
	memset(k, 0x5a, sizeof(k));
	if (egw_proto_key_set(&p.key, k) != 0)
		return -1;
	egw_xfer_conf_default(&p.xfer, &b.geom);
	egw_policy_init_fixed(&p.policy, b.geom.block_tokens,
			      b.geom.block_tokens);
	p.npeers = 1;
	snprintf(p.peers[0].name, sizeof(p.peers[0].name), "%s", peer_name);
	p.peers[0].addr = peer_ip;
	p.peers[0].udp_port = PORT;
	/* the pool as the gateway sets it up: single-block cache on */
	if (egw_pool_create(&b.geom, NULL, 0, &b.pool[i]) != 0 ||
	    egw_pool_cache_enable(b.pool[i], EGW_POOL_CACHE_DEFAULT) != 0)
		return -1;
	for (int kd = 0; kd < EGW_KIND_MAX; kd++)
		reg[kd] = (struct egw_region){
			0, 0,
			(uint32_t)egw_pool_geom_unit_bytes(&b.geom,
							   (enum egw_kind)kd)
		};
	ops.ctx = (void *)(intptr_t)i;
	return egw_node_create(&p, b.pool[i], reg, NULL, 0, &ops,
			       1000 + (uint64_t)i, b.now, &b.node[i]);
}

/* One step: every queued datagram, every completion, the tick when due. */
static void
step(void)
{
	while (b.qh != b.qt) {
		const struct dgram *d = &b.q[b.qh++ & (QLEN - 1)];

		b.now += STEP_NS;
		egw_node_rx(b.node[d->to], d->to == 0 ? LANG_IP : ENC_IP, PORT,
			    d->b, d->len, b.now);
		b.datagrams++;
	}
	while (b.ncpl > 0) {
		b.now += STEP_NS;
		egw_node_writes_done(b.node[0], b.cpl[--b.ncpl], true, b.now);
	}
	b.now += STEP_NS;
	if (b.now >= b.next_tick) {
		for (int i = 0; i < 2; i++)
			egw_node_tick(b.node[i], b.now);
		b.next_tick = b.now + TICK_NS;
	}
}

/* ROOMS rooms through a fresh pair: CPU ns per datagram, or < 0. */
static double
round_ns(uint64_t rooms, bool pattern, uint64_t *retransmits)
{
	struct egw_xfer_stats st;
	double t0, t1;
	int guard = 0;

	memset(&b, 0, sizeof(b));
	b.pattern = pattern;
	b.geom = (struct egw_pool_geom){
		.capacity_tokens = 262144,
		.block_tokens = 128,
		.hidden_size = 256,
		.dtype_bytes = 2,
		.mrope = true,
		.aux_bytes = 64,
	};
	b.now = 1000000000ull;
	if (setup(0, "enc-0", EGW_ROLE_ENCODE, LANG_IP, "lang-0") != 0 ||
	    setup(1, "lang-0", EGW_ROLE_LANGUAGE, ENC_IP, "enc-0") != 0)
		return -1;
	while (!(egw_node_peer_ready(b.node[0], 0) &&
		 egw_node_peer_ready(b.node[1], 0))) {
		b.now += TICK_NS;
		step();
		if (++guard > 100000)
			return -1;
	}
	b.datagrams = 0;
	t0 = cpu_ns();
	for (uint32_t i = 0; i < in_flight && i < rooms; i++)
		open_next(b.now);
	while (b.delivered + b.failed < rooms) {
		uint64_t before = b.delivered + b.failed;

		step();
		for (uint64_t i = before; i < b.delivered + b.failed; i++)
			if (b.opened < rooms)
				open_next(b.now);
	}
	t1 = cpu_ns();
	egw_xfer_receiver_get_stats(egw_node_receiver(b.node[1]), &st);
	*retransmits = st.retransmits;
	for (int i = 0; i < 2; i++) {
		egw_node_destroy(b.node[i]);
		egw_pool_destroy(b.pool[i]);
	}
	if (b.failed != 0 || b.bad != 0) {
		fprintf(stderr, "bench_node: %llu rooms failed, %llu bad\n",
			(unsigned long long)b.failed,
			(unsigned long long)b.bad);
		return -1;
	}
	/* in+out: every datagram is sent by one node and taken by the other */
	return (t1 - t0) / (2.0 * (double)b.datagrams);
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	uint64_t rooms = argc > 2 ? strtoull(argv[2], NULL, 10) : 200000;
	double best = 0, best_p = 0;
	uint64_t rt = 0, dg = 0;

	if (argc > 3)
		in_flight = (uint32_t)atoi(argv[3]);
	if (rounds < 1 || rooms == 0 || in_flight == 0 || in_flight > 1024 ||
	    egw_proto_init() != 0) {
		fprintf(stderr, "usage: bench_node ROUNDS ROOMS [IN_FLIGHT "
				"1..1024]\n");
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		uint64_t rtx, rtx_p;
		double ns = round_ns(rooms, true, &rtx);
		double np;

		dg = b.datagrams;
		np = round_ns(rooms, false, &rtx_p);
		if (ns < 0 || np < 0)
			return 1;
		best = r == 0 || ns < best ? ns : best;
		best_p = r == 0 || np < best_p ? np : best_p;
		rt += rtx + rtx_p;
	}
	printf("node_ns per_datagram=%.1f protocol=%.1f datagrams_per_room=%.2f "
	       "retransmits=%llu\n",
	       best, best_p, (double)dg / (double)rooms,
	       (unsigned long long)rt);
	return 0;
}
