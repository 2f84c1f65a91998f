/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a worker does when its loop finds nothing to do (DPDK's
 * l3fwd-power approach: count the empty polls, then pause, then sleep).
 * A run of empty turns first keeps spinning (traffic often comes in
 * bursts a few microseconds apart), then adds a pause instruction per turn
 * (the sibling hyperthread gets the core's pipeline), then sleeps, each
 * sleep twice the last up to the port's bound. Any work ends the run:
 * the next idle stretch starts from the short sleeps again.
 *
 * The policy reads no clock and makes no system call (sans-I/O): the
 * loop passes each turn's work and its time, the policy answers how to
 * wait. A sleep never passes the next timer the loop names - the
 * earliest deadline of its timers, which may be seconds away - so
 * deadlines and ARP fire when they would have while polling; the bound
 * is how late an idle worker sees what has no deadline (a frame).
 */
#ifndef EMBGW_GW_IDLE_H
#define EMBGW_GW_IDLE_H

#include <stdbool.h>
#include <stdint.h>

/* Empty turns in a row before the worker pauses, then sleeps. At a few
 * hundred nanoseconds a turn, sleeping starts after some 50-100 us of
 * nothing: a gap shorter than that costs no wake-up. */
#define GW_IDLE_PAUSE_TURNS 16u
#define GW_IDLE_SLEEP_TURNS 256u
/* The first sleep of an idle stretch, and the shortest worth making: a
 * shorter one costs the system call and the context switch it saves. */
#define GW_IDLE_FIRST_SLEEP_NS 5000ull
#define GW_IDLE_MIN_SLEEP_NS 2000ull

enum gw_idle_act {
	GW_IDLE_SPIN,  /* poll again at once */
	GW_IDLE_PAUSE, /* one pause instruction, then poll */
	GW_IDLE_SLEEP, /* sleep the given time, then poll */
};

struct gw_idle {
	bool backoff;	       /* false: busy polling, never waits */
	uint64_t max_sleep_ns; /* the bound on one sleep (wake-up latency) */
	uint32_t empty;	       /* turns in a row that found nothing */
	uint64_t step_ns;      /* the next sleep, before the bounds */
};

void gw_idle_init(struct gw_idle *s, bool backoff, uint64_t max_sleep_ns);

/* Whether one more empty turn may end in a sleep: only then does the
 * next timer matter to gw_idle_next, and the loop need not work it out
 * on other turns. */
static inline bool
gw_idle_may_sleep(const struct gw_idle *s)
{
	return s->backoff && s->empty + 1 >= GW_IDLE_SLEEP_TURNS;
}

/* After one turn of the loop at `now` that did `work` (timer ticks not
 * counted: a tick on an idle worker is not traffic): how to wait before
 * the next. `next_timer` is the earliest time something must run; a
 * sleep ends by then. On GW_IDLE_SLEEP, *sleep_ns is its length. */
enum gw_idle_act gw_idle_next(struct gw_idle *s, uint32_t work, uint64_t now,
			      uint64_t next_timer, uint64_t *sleep_ns);

#endif
