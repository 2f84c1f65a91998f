/* SPDX-License-Identifier: BSD-3-Clause */
/* The worker's idle policy (app/embgw/gw_idle.h): spin, pause, then
 * sleeps that double up to the bound and never pass the next timer. */
#include "gw_idle.h"

#include "cu_main.h"

#define NEVER UINT64_MAX

/* Empty turns until the first non-SPIN, non-PAUSE answer. */
static uint32_t
turns_to_sleep(struct gw_idle *s, uint64_t *ns)
{
	uint32_t t = 0;

	while (gw_idle_next(s, 0, 0, NEVER, ns) != GW_IDLE_SLEEP && t < 100000)
		t++;
	return t + 1;
}

static void
test_poll_never_waits(void)
{
	struct gw_idle s;
	uint64_t ns = 0;

	gw_idle_init(&s, false, 100000);
	for (int i = 0; i < 100000; i++)
		CU_ASSERT_EQUAL_FATAL(gw_idle_next(&s, 0, 0, NEVER, &ns),
				      GW_IDLE_SPIN);
	CU_ASSERT_FALSE(gw_idle_may_sleep(&s));
}

static void
test_spin_pause_sleep(void)
{
	struct gw_idle s;
	uint64_t ns = 0;
	uint32_t i;

	gw_idle_init(&s, true, 100000);
	for (i = 1; i < GW_IDLE_PAUSE_TURNS; i++)
		CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 0, NEVER, &ns),
				GW_IDLE_SPIN);
	for (; i < GW_IDLE_SLEEP_TURNS; i++) {
		/* the loop works out its next timer only when it may sleep */
		CU_ASSERT_FALSE(gw_idle_may_sleep(&s));
		CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 0, NEVER, &ns),
				GW_IDLE_PAUSE);
	}
	CU_ASSERT_TRUE(gw_idle_may_sleep(&s));
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 0, NEVER, &ns), GW_IDLE_SLEEP);
	CU_ASSERT_TRUE(gw_idle_may_sleep(&s));
	CU_ASSERT_EQUAL(ns, GW_IDLE_FIRST_SLEEP_NS);
}

/* Each sleep doubles the last, up to the bound and no further. */
static void
test_doubles_to_bound(void)
{
	struct gw_idle s;
	uint64_t ns = 0, want = GW_IDLE_FIRST_SLEEP_NS;

	gw_idle_init(&s, true, 100000);
	CU_ASSERT_EQUAL(turns_to_sleep(&s, &ns), GW_IDLE_SLEEP_TURNS);
	CU_ASSERT_EQUAL(ns, want);
	for (int i = 0; i < 20; i++) {
		want = want * 2 > 100000 ? 100000 : want * 2;
		CU_ASSERT_EQUAL_FATAL(gw_idle_next(&s, 0, 0, NEVER, &ns),
				      GW_IDLE_SLEEP);
		CU_ASSERT_EQUAL_FATAL(ns, want);
	}
	CU_ASSERT_EQUAL(ns, 100000);
}

/* A bound below the first step: the first sleep is the bound. */
static void
test_small_bound(void)
{
	struct gw_idle s;
	uint64_t ns = 0;

	gw_idle_init(&s, true, 3000);
	turns_to_sleep(&s, &ns);
	CU_ASSERT_EQUAL(ns, 3000);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 0, NEVER, &ns), GW_IDLE_SLEEP);
	CU_ASSERT_EQUAL(ns, 3000);
}

/* The sleep ends at the next timer; one due too soon to sleep for is
 * polled up to, and one already due is never slept past. */
static void
test_never_past_timer(void)
{
	struct gw_idle s;
	uint64_t ns = 0;

	gw_idle_init(&s, true, 100000);
	turns_to_sleep(&s, &ns);
	for (int i = 0; i < 10; i++)
		gw_idle_next(&s, 0, 0, NEVER, &ns); /* step at the bound */
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 1000000, 1000000 + 42000, &ns),
			GW_IDLE_SLEEP);
	CU_ASSERT_EQUAL(ns, 42000);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 1000000,
				     1000000 + GW_IDLE_MIN_SLEEP_NS - 1, &ns),
			GW_IDLE_PAUSE);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 1000000, 1000000, &ns),
			GW_IDLE_PAUSE);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 1000000, 5, &ns), GW_IDLE_PAUSE);
}

/* A far timer does not shorten the sleeps (the loop names the real
 * deadline, not a tick): they grow to the bound and stay there; a near
 * one ends the sleep at it. */
static void
test_far_timer_sleeps_the_bound(void)
{
	struct gw_idle s;
	uint64_t ns = 0, now = 1000000, want = GW_IDLE_FIRST_SLEEP_NS;
	const uint64_t bound = 1000000, timer = now + 900000000ull;

	gw_idle_init(&s, true, bound);
	while (gw_idle_next(&s, 0, now, timer, &ns) != GW_IDLE_SLEEP)
		;
	CU_ASSERT_EQUAL(ns, want);
	for (int i = 0; i < 12; i++) {
		want = want * 2 > bound ? bound : want * 2;
		CU_ASSERT_EQUAL_FATAL(gw_idle_next(&s, 0, now, timer, &ns),
				      GW_IDLE_SLEEP);
		CU_ASSERT_EQUAL_FATAL(ns, want);
		now += ns;
	}
	CU_ASSERT_EQUAL(ns, bound);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, now, now + 300000, &ns),
			GW_IDLE_SLEEP);
	CU_ASSERT_EQUAL(ns, 300000);
}

/* Work ends the idle stretch: the next one starts from spinning and the
 * first short sleep again. */
static void
test_work_resets(void)
{
	struct gw_idle s;
	uint64_t ns = 0;

	gw_idle_init(&s, true, 100000);
	turns_to_sleep(&s, &ns);
	for (int i = 0; i < 10; i++)
		gw_idle_next(&s, 0, 0, NEVER, &ns);
	CU_ASSERT_EQUAL(ns, 100000);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 3, 0, NEVER, &ns), GW_IDLE_SPIN);
	CU_ASSERT_EQUAL(gw_idle_next(&s, 0, 0, NEVER, &ns), GW_IDLE_SPIN);
	CU_ASSERT_EQUAL(turns_to_sleep(&s, &ns), GW_IDLE_SLEEP_TURNS - 1);
	CU_ASSERT_EQUAL(ns, GW_IDLE_FIRST_SLEEP_NS);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "poll_never_waits", test_poll_never_waits },
		{ "spin_pause_sleep", test_spin_pause_sleep },
		{ "doubles_to_bound", test_doubles_to_bound },
		{ "small_bound", test_small_bound },
		{ "never_past_timer", test_never_past_timer },
		{ "far_timer_sleeps_the_bound",
		  test_far_timer_sleeps_the_bound },
		{ "work_resets", test_work_resets },
		{ NULL, NULL },
	};

	return cu_run("gw_idle", tests);
}
