/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An identity's room sources (gw_room_source.h): the node's events go to
 * the sources in the order they were attached, each until one takes it.
 * Dispatch only: no DPDK, no node calls (tests/unit/test_room_source.c).
 */
#include <errno.h>

#include "gw_room_source.h"

int
gw_room_source_attach(struct gw_id *id, struct gw_room_source *s)
{
	if (id->nsources == GW_MAX_SOURCES)
		return -ENOSPC;
	s->id = id;
	id->sources[id->nsources++] = s;
	return 0;
}

uint32_t
gw_room_sources_poll(struct gw_id *id, uint64_t now)
{
	uint32_t work = 0;

	for (uint16_t i = 0; i < id->nsources; i++)
		work += id->sources[i]->ops->poll(id->sources[i], now);
	return work;
}

int
gw_room_sources_unknown_room(struct gw_id *id, uint64_t room, uint16_t nranks,
			     uint64_t now)
{
	for (uint16_t i = 0; i < id->nsources; i++) {
		struct gw_room_source *s = id->sources[i];
		int rc;

		if (s->ops->unknown_room == NULL)
			continue;
		rc = s->ops->unknown_room(s, room, nranks, now);
		if (rc != -EGW_E_UNKNOWN_ROOM)
			return rc;
	}
	/* nobody supplies it: the node answers the INIT as unknown */
	return -EGW_E_UNKNOWN_ROOM;
}

bool
gw_room_sources_deliver(struct gw_id *id, const struct egw_act *a, uint64_t now)
{
	for (uint16_t i = 0; i < id->nsources; i++)
		if (id->sources[i]->ops->deliver(id->sources[i], a, now))
			return true;
	return false;
}

void
gw_room_sources_done(struct gw_id *id, uint64_t room, uint16_t rank,
		     enum egw_err e, bool is_sender, uint64_t now)
{
	for (uint16_t i = 0; i < id->nsources; i++)
		if (id->sources[i]->ops->done(id->sources[i], room, rank, e,
					      is_sender, now))
			return;
}

uint64_t
gw_room_sources_remaining(const struct gw_id *id)
{
	uint64_t left = 0;
	bool bounded = false;

	for (uint16_t i = 0; i < id->nsources; i++) {
		uint64_t r = id->sources[i]->ops->remaining(id->sources[i]);

		if (r != GW_ROOMS_ENDLESS) {
			bounded = true;
			left += r;
		}
	}
	return bounded ? left : GW_ROOMS_ENDLESS;
}

void
gw_room_sources_close(struct gw_id *id)
{
	while (id->nsources > 0) {
		struct gw_room_source *s = id->sources[--id->nsources];

		s->ops->close(s);
	}
}
