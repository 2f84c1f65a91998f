/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pool benchmark: alloc+free of a one-block run per operation on an
 * egw_pool that is 50% used and fragmented (every other block held), as
 * the gateway runs it (single-block cache on) and with the free-run tree
 * alone (cache off), against rte_mempool get+put of one object (per-lcore
 * cache on), in the same process, interleaved, medians of the rounds.
 * Prints nanoseconds of CPU time per operation for the three.
 *   bench_pool [EAL args] -- [rounds] [ops per round]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_mempool.h>

#include "egw_pool.h"
#include "bench_time.h"

int
main(int argc, char **argv)
{
	int n = rte_eal_init(argc, argv);
	struct egw_pool_geom g = { .capacity_tokens = 8192 * 128, .block_tokens = 128,
				   .hidden_size = 8, .dtype_bytes = 2, .mrope = false,
				   .aux_bytes = 64 };
	struct egw_pool *p, *t;
	struct rte_mempool *mp;
	struct egw_run r, held;
	int rounds = 5;
	long ops = 2000000;
	double pool_ns[32], tree_ns[32], mp_ns[32], sink = 0;

	if (n < 0)
		return 1;
	argc -= n;
	argv += n;
	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		ops = atol(argv[2]);
	if (rounds < 1 || rounds > 32 || ops < 1)
		return 2;
	if (egw_pool_create(&g, NULL, 0, &p) != 0 ||
	    egw_pool_cache_enable(p, EGW_POOL_CACHE_DEFAULT) != 0 ||
	    egw_pool_create(&g, NULL, 0, &t) != 0)
		return 1;
	mp = rte_mempool_create("bench", 8191, 64, 256, 0, NULL, NULL, NULL,
				NULL, SOCKET_ID_ANY, 0);
	if (mp == NULL)
		return 1;
	/* 50% fragmentation: every block taken, then every other one freed */
	for (uint32_t b = 0; b < 8192; b++) {
		egw_pool_alloc(p, 1 + b, 1, &held, 1);
		egw_pool_alloc(t, 1 + b, 1, &held, 1);
	}
	for (uint32_t b = 0; b < 8192; b += 2) {
		egw_pool_free(p, 1 + b, (struct egw_run){ b, 1 });
		egw_pool_free(t, 1 + b, (struct egw_run){ b, 1 });
	}
	for (int k = 0; k < rounds; k++) {
		double t0 = cpu_ns();

		for (long i = 0; i < ops; i++) {
			egw_pool_alloc(p, 99999, 1, &r, 1);
			egw_pool_free(p, 99999, r);
		}
		pool_ns[k] = (cpu_ns() - t0) / ops;
		t0 = cpu_ns();
		for (long i = 0; i < ops; i++) {
			egw_pool_alloc(t, 99999, 1, &r, 1);
			egw_pool_free(t, 99999, r);
		}
		tree_ns[k] = (cpu_ns() - t0) / ops;
		t0 = cpu_ns();
		for (long i = 0; i < ops; i++) {
			void *o;

			if (rte_mempool_get(mp, &o) == 0) {
				sink += (double)(uintptr_t)o;
				rte_mempool_put(mp, o);
			}
		}
		mp_ns[k] = (cpu_ns() - t0) / ops;
	}
	qsort(pool_ns, (size_t)rounds, sizeof(double), cmp_d);
	qsort(mp_ns, (size_t)rounds, sizeof(double), cmp_d);
	qsort(tree_ns, (size_t)rounds, sizeof(double), cmp_d);
	printf("pool_ns %.2f mempool_ns %.2f tree_ns %.2f rounds %d ops %ld %s\n",
	       pool_ns[rounds / 2], mp_ns[rounds / 2], tree_ns[rounds / 2],
	       rounds, ops, sink > 0 ? "" : " ");
	egw_pool_destroy(p);
	egw_pool_destroy(t);
	rte_mempool_free(mp);
	rte_eal_cleanup();
	return 0;
}
