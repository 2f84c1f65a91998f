/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the benchmarks time with: the calling thread's CPU time (a shared
 * machine's other work is not counted) and the comparison qsort needs
 * for the median of the rounds.
 */
#ifndef EMBGW_BENCH_TIME_H
#define EMBGW_BENCH_TIME_H

#include <time.h>

static inline double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#endif
