/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What an engine's command costs the worker lcore: egw_engines_poll()
 * taking commands off a client's submission ring, checking them, acting
 * (through room operations that do nothing, so that only lib/engines is
 * measured) and posting completions - against the floor, one bare ring
 * put and get of a 64-byte entry. CPU time of the polling alone, best of
 * `rounds`.
 *
 *   bench_clients ROUNDS COMMANDS
 *   -> "clients_ns nop=N open_abort=N ring=N" (ns per command)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egw_engines.h"

#define BATCH 32u

static int
op_send_open(void *c, uint32_t cl, uint64_t r, uint16_t n, uint32_t t,
	     int32_t m, uint64_t k, struct egw_attach_run *runs, uint32_t max)
{
	(void)c;
	(void)cl;
	(void)r;
	(void)n;
	(void)t;
	(void)m;
	(void)k;
	(void)max;
	runs[0] = (struct egw_attach_run){ 0, 1 };
	return 1;
}
static int op_send_commit(void *c, uint64_t r, uint32_t t,
			  const struct egw_attach_run *runs, uint32_t n)
{
	(void)c; (void)r; (void)t; (void)runs; (void)n;
	return 0;
}
static void op_send_abort(void *c, uint64_t r, bool d,
			  const struct egw_attach_run *runs, uint32_t n)
{
	(void)c; (void)r; (void)d; (void)runs; (void)n;
}
static int
op_recv_open(void *c, uint64_t r, uint16_t k, uint16_t n, uint32_t p, bool a)
{
	(void)c; (void)r; (void)k; (void)n; (void)p; (void)a;
	return 0;
}
static void op_recv_abort(void *c, uint64_t r, uint16_t k)
{
	(void)c; (void)r; (void)k;
}
static void op_recv_release(void *c, uint64_t r, uint16_t k,
			    const struct egw_attach_run *runs, uint32_t n)
{
	(void)c; (void)r; (void)k; (void)runs; (void)n;
}
static void op_wake(void *c, uint32_t id)
{
	(void)c; (void)id;
}
static void op_lost(void *c, uint32_t id, const char *why)
{
	(void)c; (void)id;
	fprintf(stderr, "bench_clients: client lost: %s\n", why);
	exit(1);
}

static const struct egw_engines_ops ops = {
	op_send_open, op_send_commit, op_send_abort, op_recv_open,
	op_recv_abort, op_recv_release, op_wake, op_lost,
};

static uint64_t
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns per command of `kind`: 0 NOP, 1 RECV_OPEN then ABORT of the room */
static double
run(struct egw_engines *srv, struct egw_attach_map *m, int kind, uint64_t n)
{
	struct egw_attach_cmd c;
	struct egw_attach_cqe e;
	uint64_t spent = 0, done = 0, room = 1;

	while (done < n) {
		uint64_t t0;

		for (uint32_t i = 0; i < BATCH; i++) {
			memset(&c, 0, sizeof(c));
			c.tag = done + i;
			if (kind == 1) {
				c.room = room + i / 2;
				c.slot = (i / 2) % BATCH;
				if (i % 2 == 0) {
					c.op = EGW_OP_RECV_OPEN;
					c.nranks = 1;
					c.peer_id = 1;
				} else {
					c.op = EGW_OP_ABORT;
				}
			}
			if (egw_attach_ring_put(&m->sq, &c) != 0)
				abort();
		}
		room += BATCH / 2;
		t0 = cpu_ns();
		egw_engines_poll(srv, t0);
		spent += cpu_ns() - t0;
		while (egw_attach_ring_get(&m->cq, &e) == 1)
			if (e.result != 0)
				abort();
		done += BATCH;
	}
	return (double)spent / (double)done;
}

static double
ring_floor(struct egw_attach_map *m, uint64_t n)
{
	struct egw_attach_cmd c;
	uint64_t t0 = cpu_ns();

	memset(&c, 0, sizeof(c));
	for (uint64_t i = 0; i < n; i++) {
		c.tag = i;
		egw_attach_ring_put(&m->sq, &c);
		egw_attach_ring_get(&m->sq, &c);
	}
	return (double)(cpu_ns() - t0) / (double)n;
}

int
main(int argc, char **argv)
{
	uint32_t rounds = argc > 1 ? (uint32_t)atoi(argv[1]) : 5;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	struct egw_engines_conf cc = {
		.max_clients = 1,
		.max_rooms = 64,
		.max_total_tokens = 1u << 20,
		.max_peers = 1,
		.encode = true,
		.language = true,
		.alloc_ns = 1000000000ull,
		.lease_ns = 0,
		.budget = BATCH,
		.ops = &ops,
	};
	double best[3] = { 1e18, 1e18, 1e18 };
	size_t bytes = egw_attach_area_bytes(64, 64, BATCH, 4, 1);
	const struct egw_engines_peer peer = { .id = 1, .name = "enc0" };
	void *area = calloc(1, bytes);
	struct egw_attach_map m;
	struct egw_engines *srv;

	if (area == NULL ||
	    egw_attach_area_init(area, 64, 64, BATCH, 4, 1) != 0 ||
	    egw_attach_map_init(&m, area, bytes) != 0 ||
	    egw_engines_create(&cc, &srv) != 0 ||
	    egw_engines_add(srv, area, bytes, 0) != 0 ||
	    egw_engines_peers_set(srv, &peer, 1, 0) != 0) {
		fprintf(stderr, "bench_clients: set-up failed\n");
		return 1;
	}
	for (uint32_t r = 0; r < rounds; r++) {
		double v[3] = { run(srv, &m, 0, n), run(srv, &m, 1, n),
				ring_floor(&m, n) };

		for (int i = 0; i < 3; i++)
			if (v[i] < best[i])
				best[i] = v[i];
	}
	printf("clients_ns nop=%.1f open_abort=%.1f ring=%.1f\n", best[0],
	       best[1], best[2]);
	egw_engines_destroy(srv, 0);
	free(area);
	return 0;
}
