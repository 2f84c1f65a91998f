/* SPDX-License-Identifier: BSD-3-Clause */
/* The gateway's clock: monotonic nanoseconds from the TSC. */
#include <time.h>

#include <rte_cycles.h>

#include "gw.h"

static uint64_t tsc_mult; /* ns per cycle, 32.32 fixed point */
static int64_t wall_minus_now; /* CLOCK_REALTIME - gw_now_ns(), at init */

void
gw_clock_init(void)
{
	uint64_t hz = rte_get_tsc_hz();
	struct timespec ts;

	if (hz >= 1000000)
		tsc_mult = (uint64_t)((1000000000ull << 32) / hz);
	clock_gettime(CLOCK_REALTIME, &ts);
	wall_minus_now = (int64_t)((uint64_t)ts.tv_sec * 1000000000ull +
				   (uint64_t)ts.tv_nsec - gw_now_ns());
}

uint64_t
gw_wall_ns(uint64_t now)
{
	return (uint64_t)((int64_t)now + wall_minus_now);
}

uint64_t
gw_tsc_ns(uint64_t cycles)
{
	struct timespec ts;

	if (tsc_mult != 0)
		return (uint64_t)(((unsigned __int128)cycles * tsc_mult) >> 32);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
gw_now_ns(void)
{
	return gw_tsc_ns(rte_get_tsc_cycles());
}
