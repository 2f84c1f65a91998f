/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway's room-source seam (app/embgw/gw_room_source.c): every event
 * is offered to an identity's sources in the order they were attached
 * until one takes it; a room nobody takes is reported so; an identity's
 * remaining rooms are the sum over its bounded sources; the sources close
 * last-attached first. Two recording sources stand in for real ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "gw_room_source.h"

/* A source that records the calls it gets and takes what `mine` says. */
struct recording_source {
	struct gw_room_source base;
	uint64_t mine;           /* rooms it owns: room ids below this */
	uint64_t left;           /* remaining() */
	uint32_t polls, unknown, delivered, done, closed;
	int *close_order, *nclosed;
	int tag;
};

static struct recording_source *
rec(struct gw_room_source *s)
{
	return (struct recording_source *)s;
}

static uint32_t
rs_poll(struct gw_room_source *s, uint64_t now)
{
	(void)now;
	rec(s)->polls++;
	return 1;
}

/* a source takes its rooms; room 0 it refuses as a room of no tokens */
static int
rs_unknown(struct gw_room_source *s, uint64_t room, uint16_t nranks,
	   uint64_t now)
{
	(void)nranks;
	(void)now;
	rec(s)->unknown++;
	if (room == 0)
		return -EGW_E_BEYOND_TOTAL;
	return room < rec(s)->mine ? 0 : -EGW_E_UNKNOWN_ROOM;
}

static bool
rs_deliver(struct gw_room_source *s, const struct egw_act *a, uint64_t now)
{
	(void)now;
	if (a->room >= rec(s)->mine)
		return false;
	rec(s)->delivered++;
	return true;
}

static bool
rs_done(struct gw_room_source *s, uint64_t room, uint16_t rank,
	enum egw_err e, bool is_sender, uint64_t now)
{
	(void)rank;
	(void)e;
	(void)is_sender;
	(void)now;
	if (room >= rec(s)->mine)
		return false;
	rec(s)->done++;
	return true;
}

static uint64_t
rs_remaining(const struct gw_room_source *s)
{
	return ((const struct recording_source *)s)->left;
}

static void
rs_report(struct gw_room_source *s, struct gw_room_stats *out)
{
	(void)s;
	memset(out, 0, sizeof(*out));
}

static void
rs_close(struct gw_room_source *s)
{
	struct recording_source *r = rec(s);

	r->closed++;
	r->close_order[(*r->nclosed)++] = r->tag;
}

static const struct gw_room_source_ops full_ops = {
	.name = "recording",
	.poll = rs_poll,
	.unknown_room = rs_unknown,
	.deliver = rs_deliver,
	.done = rs_done,
	.remaining = rs_remaining,
	.report = rs_report,
	.close = rs_close,
};

/* the same without unknown_room: a source that never feeds on demand */
static const struct gw_room_source_ops no_unknown_ops = {
	.name = "recording-no-unknown",
	.poll = rs_poll,
	.deliver = rs_deliver,
	.done = rs_done,
	.remaining = rs_remaining,
	.report = rs_report,
	.close = rs_close,
};

static int order[GW_MAX_SOURCES + 1];
static int norder;

/* An identity of a test's own; the close order starts afresh with it. */
static struct gw_id *
new_id(void)
{
	norder = 0;
	return calloc(1, sizeof(struct gw_id));
}

static void
init_source(struct recording_source *r, const struct gw_room_source_ops *ops,
	    uint64_t mine, uint64_t left, int tag)
{
	memset(r, 0, sizeof(*r));
	r->base.ops = ops;
	r->mine = mine;
	r->left = left;
	r->tag = tag;
	r->close_order = order;
	r->nclosed = &norder;
}

static void
test_events_go_to_the_first_source_that_takes_them(void)
{
	struct gw_id *id = new_id();
	struct recording_source a, b;
	struct egw_act act = { .room = 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	init_source(&a, &full_ops, 10, GW_ROOMS_ENDLESS, 1);  /* rooms 0..9 */
	init_source(&b, &full_ops, 100, GW_ROOMS_ENDLESS, 2); /* 0..99 */
	CU_ASSERT_EQUAL(gw_room_source_attach(id, &a.base), 0);
	CU_ASSERT_EQUAL(gw_room_source_attach(id, &b.base), 0);
	CU_ASSERT_PTR_EQUAL(a.base.id, id);

	/* every source is polled; the work adds up */
	CU_ASSERT_EQUAL(gw_room_sources_poll(id, 1), 2);
	CU_ASSERT_EQUAL(a.polls, 1);
	CU_ASSERT_EQUAL(b.polls, 1);

	/* room 5 is a's (attached first): b never sees it */
	act.room = 5;
	CU_ASSERT_TRUE(gw_room_sources_deliver(id, &act, 1));
	gw_room_sources_done(id, 5, 0, EGW_E_OK, false, 1);
	CU_ASSERT_EQUAL(gw_room_sources_unknown_room(id, 5, 1, 1), 0);
	CU_ASSERT_EQUAL(a.delivered, 1);
	CU_ASSERT_EQUAL(a.done, 1);
	CU_ASSERT_EQUAL(a.unknown, 1);
	CU_ASSERT_EQUAL(b.delivered + b.done + b.unknown, 0);

	/* room 50: a declines, b takes it */
	act.room = 50;
	CU_ASSERT_TRUE(gw_room_sources_deliver(id, &act, 1));
	gw_room_sources_done(id, 50, 0, EGW_E_PEER_DEAD, false, 1);
	CU_ASSERT_EQUAL(gw_room_sources_unknown_room(id, 50, 1, 1), 0);
	CU_ASSERT_EQUAL(a.delivered, 1);
	CU_ASSERT_EQUAL(b.delivered, 1);
	CU_ASSERT_EQUAL(b.done, 1);
	CU_ASSERT_EQUAL(a.unknown, 2);
	CU_ASSERT_EQUAL(b.unknown, 1);

	/* a source's refusal is the answer: the next one is not asked */
	CU_ASSERT_EQUAL(gw_room_sources_unknown_room(id, 0, 1, 1),
			-EGW_E_BEYOND_TOTAL);
	CU_ASSERT_EQUAL(a.unknown, 3);
	CU_ASSERT_EQUAL(b.unknown, 1);

	/* room 500: nobody's - the caller is told, so it can free the runs */
	CU_ASSERT_EQUAL(gw_room_sources_unknown_room(id, 500, 1, 1),
			-EGW_E_UNKNOWN_ROOM);
	act.room = 500;
	CU_ASSERT_FALSE(gw_room_sources_deliver(id, &act, 1));
	CU_ASSERT_EQUAL(a.delivered + b.delivered, 2);
	gw_room_sources_close(id);
	free(id);
}

static void
test_a_source_without_unknown_room_is_skipped(void)
{
	struct gw_id *id = new_id();
	struct recording_source a, b;

	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	init_source(&a, &no_unknown_ops, 100, GW_ROOMS_ENDLESS, 1);
	init_source(&b, &full_ops, 100, GW_ROOMS_ENDLESS, 2);
	gw_room_source_attach(id, &a.base);
	gw_room_source_attach(id, &b.base);
	gw_room_sources_unknown_room(id, 7, 2, 1);
	CU_ASSERT_EQUAL(a.unknown, 0);
	CU_ASSERT_EQUAL(b.unknown, 1);
	gw_room_sources_close(id);
	free(id);
}

static void
test_remaining_counts_bounded_sources_only(void)
{
	struct gw_id *id = new_id();
	struct recording_source a, b, c;

	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	/* no sources, or only endless ones: no end of its own */
	CU_ASSERT_EQUAL(gw_room_sources_remaining(id), GW_ROOMS_ENDLESS);
	init_source(&a, &full_ops, 0, GW_ROOMS_ENDLESS, 1);
	gw_room_source_attach(id, &a.base);
	CU_ASSERT_EQUAL(gw_room_sources_remaining(id), GW_ROOMS_ENDLESS);
	/* bounded ones add up; the endless one does not count */
	init_source(&b, &full_ops, 0, 3, 2);
	init_source(&c, &full_ops, 0, 4, 3);
	gw_room_source_attach(id, &b.base);
	gw_room_source_attach(id, &c.base);
	CU_ASSERT_EQUAL(gw_room_sources_remaining(id), 7);
	b.left = c.left = 0;
	CU_ASSERT_EQUAL(gw_room_sources_remaining(id), 0);
	gw_room_sources_close(id);
	free(id);
}

static void
test_attach_is_bounded_and_close_goes_last_first(void)
{
	struct gw_id *id = new_id();
	struct recording_source s[GW_MAX_SOURCES + 1];

	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	norder = 0;
	for (int i = 0; i < GW_MAX_SOURCES; i++) {
		init_source(&s[i], &full_ops, 0, GW_ROOMS_ENDLESS, i);
		CU_ASSERT_EQUAL(gw_room_source_attach(id, &s[i].base), 0);
	}
	init_source(&s[GW_MAX_SOURCES], &full_ops, 0, GW_ROOMS_ENDLESS, 99);
	CU_ASSERT_EQUAL(gw_room_source_attach(id, &s[GW_MAX_SOURCES].base),
			-ENOSPC);
	CU_ASSERT_EQUAL(id->nsources, GW_MAX_SOURCES);
	gw_room_sources_close(id);
	CU_ASSERT_EQUAL(id->nsources, 0);
	CU_ASSERT_EQUAL(norder, GW_MAX_SOURCES);
	for (int i = 0; i < GW_MAX_SOURCES; i++)
		CU_ASSERT_EQUAL(order[i], GW_MAX_SOURCES - 1 - i);
	CU_ASSERT_EQUAL(s[GW_MAX_SOURCES].closed, 0);
	free(id);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "events_go_to_the_first_source_that_takes_them",
		  test_events_go_to_the_first_source_that_takes_them },
		{ "a_source_without_unknown_room_is_skipped",
		  test_a_source_without_unknown_room_is_skipped },
		{ "remaining_counts_bounded_sources_only",
		  test_remaining_counts_bounded_sources_only },
		{ "attach_is_bounded_and_close_goes_last_first",
		  test_attach_is_bounded_and_close_goes_last_first },
		{ NULL, NULL },
	};
	return cu_run("room_source", tests);
}
