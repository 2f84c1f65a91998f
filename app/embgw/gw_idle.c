/* SPDX-License-Identifier: BSD-3-Clause */
/* The worker's idle policy (gw_idle.h): empty polls, pause, then sleeps
 * that double up to the port's bound and never pass the next timer. */
#include "gw_idle.h"

void
gw_idle_init(struct gw_idle *s, bool backoff, uint64_t max_sleep_ns)
{
	s->backoff = backoff && max_sleep_ns > 0;
	s->max_sleep_ns = max_sleep_ns;
	s->empty = 0;
	s->step_ns = GW_IDLE_FIRST_SLEEP_NS;
}

enum gw_idle_act
gw_idle_next(struct gw_idle *s, uint32_t work, uint64_t now,
	     uint64_t next_timer, uint64_t *sleep_ns)
{
	uint64_t d;

	if (work != 0) {
		s->empty = 0;
		s->step_ns = GW_IDLE_FIRST_SLEEP_NS;
		return GW_IDLE_SPIN;
	}
	if (!s->backoff)
		return GW_IDLE_SPIN;
	if (s->empty < GW_IDLE_SLEEP_TURNS)
		s->empty++;
	if (s->empty < GW_IDLE_PAUSE_TURNS)
		return GW_IDLE_SPIN;
	if (s->empty < GW_IDLE_SLEEP_TURNS)
		return GW_IDLE_PAUSE;
	d = s->step_ns < s->max_sleep_ns ? s->step_ns : s->max_sleep_ns;
	if (next_timer <= now)
		d = 0;
	else if (next_timer - now < d)
		d = next_timer - now;
	/* a timer due this close: poll up to it rather than sleep */
	if (d < GW_IDLE_MIN_SLEEP_NS)
		return GW_IDLE_PAUSE;
	if (s->step_ns < s->max_sleep_ns)
		s->step_ns *= 2;
	*sleep_ns = d;
	return GW_IDLE_SLEEP;
}
