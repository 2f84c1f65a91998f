/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client's lease thread (lib/client/client_lease.c) on its own: it
 * moves client_beat with no library call, its beats and the engine's own
 * add up from two threads, and after client_lease_stop nothing moves it.
 * The suite "threads" runs this under ThreadSanitizer (scripts/test.sh),
 * where any race between the thread, its stop and the engine's calls is a
 * failure.
 */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "client_priv.h"
#include "cu_main.h"

/* client_lease.c reports a failed pthread_create through this */
void
client_error(const char *fmt, ...)
{
	(void)fmt;
}

struct lease_rig {
	struct egw_attach_area area;
	struct egw_client c;
};

static void
rig_init(struct lease_rig *r, uint32_t lease_ms)
{
	memset(r, 0, sizeof(*r));
	r->c.map.area = &r->area;
	r->c.g.lease_ms = lease_ms;
}

static uint64_t
beats(const struct lease_rig *r)
{
	return __atomic_load_n(&r->area.client_beat, __ATOMIC_ACQUIRE);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Until client_beat reaches `n`; false if it never does (a bound of 10 s
 * that only a lease thread that does not beat can reach). */
static bool
wait_beats(const struct lease_rig *r, uint64_t n)
{
	for (int i = 0; i < 10000 && beats(r) < n; i++)
		sleep_ms(1);
	return beats(r) >= n;
}

static void
test_lease_thread_beats_without_calls(void)
{
	struct lease_rig r;

	rig_init(&r, 4);
	CU_ASSERT_EQUAL_FATAL(client_lease_start(&r.c), 0);
	CU_ASSERT(r.c.lease_running);
	CU_ASSERT(wait_beats(&r, 3));
	client_lease_stop(&r.c);
	CU_ASSERT(!r.c.lease_running);
}

static void
test_beats_from_two_threads_all_count(void)
{
	enum { ENGINE_BEATS = 200000 };
	struct lease_rig r;
	uint64_t before;

	rig_init(&r, 4);
	CU_ASSERT_EQUAL_FATAL(client_lease_start(&r.c), 0);
	CU_ASSERT_FATAL(wait_beats(&r, 1));
	before = beats(&r);
	for (int i = 0; i < ENGINE_BEATS; i++)
		egw_client_beat(&r.c);
	client_lease_stop(&r.c);
	/* no beat lost: the engine's all arrived, on top of the thread's */
	CU_ASSERT(beats(&r) >= before + ENGINE_BEATS);
}

static void
test_nothing_beats_after_stop(void)
{
	struct lease_rig r;
	uint64_t stopped;

	rig_init(&r, 4);
	CU_ASSERT_EQUAL_FATAL(client_lease_start(&r.c), 0);
	CU_ASSERT_FATAL(wait_beats(&r, 2));
	client_lease_stop(&r.c);
	stopped = beats(&r);
	/* 20 lease periods: a thread still running would have beaten */
	sleep_ms(20);
	CU_ASSERT_EQUAL(beats(&r), stopped);
	/* a second stop (detach after a failed attach) is harmless */
	client_lease_stop(&r.c);
}

static void
test_no_lease_no_thread(void)
{
	struct lease_rig r;

	rig_init(&r, 0);
	CU_ASSERT_EQUAL(client_lease_start(&r.c), 0);
	CU_ASSERT(!r.c.lease_running);
	client_lease_stop(&r.c);
	CU_ASSERT_EQUAL(beats(&r), 0);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "lease_thread_beats_without_calls",
		  test_lease_thread_beats_without_calls },
		{ "beats_from_two_threads_all_count",
		  test_beats_from_two_threads_all_count },
		{ "nothing_beats_after_stop", test_nothing_beats_after_stop },
		{ "no_lease_no_thread", test_no_lease_no_thread },
		{ NULL, NULL },
	};

	return cu_run("client_lease", tests);
}
