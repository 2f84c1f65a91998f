/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw-gen's load options and what they make: the built-in room source
 * on every identity (gw_pattern_source.c), the run's bounds, --identities
 * and the flood's rate. The gateway's core calls in through gw_load_ops;
 * the gateway itself links none of this.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_load.h"
#include "gw_pattern_source.h"

/* The room source's options, as given: each identity gets its share. */
static struct gw_pattern_opts rooms = {
	.concurrency = 1,
	.ranks = 1,
	.lengths = { 2000 },
	.nlengths = 1,
};
static uint16_t identities = 1;

static const char usage[] =
	"load options (the built-in room source, for demos, benchmarks and tests):\n"
	"  --produce              encode: synthesise data for every room asked for\n"
	"  --drive N              language: run N rooms, verify every byte\n"
	"  --concurrency C        language: rooms in flight (1)\n"
	"  --lengths L1,L2,...    language: room lengths in tokens, cycled\n"
	"  --ranks R              language: TP ranks per room (1)\n"
	"  --dummy-rank           language: the last rank wants the aux record only\n"
	"  --peer NAME|all        language: the encode peer to fetch from, or\n"
	"                         every peer of the port in turn (default: the first)\n"
	"  --rate R               language: open loop, R rooms/s (--concurrency caps)\n"
	"  --start-delay-ms D     language: wait D ms before the first room\n"
	"  --exit-when-done       language: stop after the N rooms (the default\n"
	"                         with --drive and no --duration-ms)\n"
	"  --duration-ms D        stop after D ms (bounded runs)\n"
	"  --seed S               room-id seed (also of the flood and test faults)\n"
	"  --identities K         play K peers from the one configured port:\n"
	"                         addresses ADDRESS+0..K-1, names NAME.0..K-1,\n"
	"                         shm pool files PATH.0..K-1, one pool each;\n"
	"                         --drive, --concurrency and --rate are shared out\n"
	"  --flood-pps P          junk datagrams per second at the port's first peer\n"
	"                         (with a net_pcap device: a replayable pcap)\n";

/* --lengths L1,L2,...: 1..64 lengths of 1..EGW_XFER_MAX_TOKENS tokens */
static bool
lengths(const struct gw_app *app, const char *s)
{
	char *dup = strdup(s), *save = NULL;
	bool said = false;

	rooms.nlengths = 0;
	for (char *t = dup == NULL ? NULL : strtok_r(dup, ",", &save);
	     t != NULL; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		said = rooms.nlengths < 64 &&
		       !gw_options_number(app, "lengths", t, 1,
					  EGW_XFER_MAX_TOKENS, &v);
		if (said || rooms.nlengths == 64) {
			rooms.nlengths = 0;
			break;
		}
		rooms.lengths[rooms.nlengths++] = (uint32_t)v;
	}
	free(dup);
	if (rooms.nlengths == 0 && !said)
		fprintf(stderr, "%s: --lengths: '%s': 1..64 lengths of 1..%u "
			"tokens\n", app->name, s, EGW_XFER_MAX_TOKENS);
	return rooms.nlengths > 0;
}

/* A numeric option of the room source's: 1, 0 after a message, -1 for
 * an option not of these. */
static int
room_number(const struct gw_app *app, const char *name, const char *arg)
{
	static const struct {
		const char *name;
		uint64_t min, max;
	} range[] = {
		{ "drive", 0, GW_MAX_DRIVE },
		{ "concurrency", 1, UINT32_MAX },
		{ "ranks", 1, EGW_XFER_MAX_RANKS },
		{ "rate", 0, UINT32_MAX },
		{ "start-delay-ms", 0, UINT32_MAX },
		{ "seed", 0, UINT64_MAX },
	};
	uint64_t v = 0;
	size_t i;

	for (i = 0; strcmp(range[i].name, name) != 0; i++)
		if (i + 1 == sizeof(range) / sizeof(range[0]))
			return -1;
	if (!gw_options_number(app, name, arg, range[i].min, range[i].max, &v))
		return 0;
	switch (i) {
	case 0: rooms.drive = (uint32_t)v; break;
	case 1: rooms.concurrency = (uint32_t)v; break;
	case 2: rooms.ranks = (uint16_t)v; break;
	case 3: rooms.rate = (uint32_t)v; break;
	case 4: rooms.start_delay_ms = (uint32_t)v; break;
	default: rooms.seed = v; break;
	}
	return 1;
}

/* The run's options: its bounds, identities, the flood. */
static bool
run_option(const struct gw_app *app, const char *name, const char *arg,
	   struct gw_options *opt)
{
	uint64_t v;

	if (strcmp(name, "exit-when-done") == 0) {
		opt->exit_when_done = true;
		return true;
	}
	if (strcmp(name, "duration-ms") == 0) {
		/* 0 would mean no limit: a bounded run is >= 1 ms */
		if (!gw_options_number(app, name, arg, 1, UINT64_MAX / 1000000,
				       &v))
			return false;
		opt->duration_ns = v * 1000000ull;
		return true;
	}
	if (strcmp(name, "identities") == 0) {
		if (!gw_options_number(app, name, arg, 1, GW_MAX_IDS, &v))
			return false;
		identities = (uint16_t)v;
		return true;
	}
	return gw_options_number(app, "flood-pps", arg, 0, UINT64_MAX,
				 &opt->flood_pps);
}

static bool
load_option(const struct gw_app *app, const char *name, const char *arg,
	    struct gw_options *opt)
{
	if (strcmp(name, "produce") == 0)
		rooms.produce = true;
	else if (strcmp(name, "dummy-rank") == 0)
		rooms.dummy_rank = true;
	else if (strcmp(name, "peer") == 0)
		snprintf(rooms.peer, sizeof(rooms.peer), "%s", arg);
	else if (strcmp(name, "lengths") == 0)
		return lengths(app, arg);
	else
		switch (room_number(app, name, arg)) {
		case -1: return run_option(app, name, arg, opt);
		case 0: return false;
		default: break;
		}
	return true;
}

/* With --drive the generator stops once its rooms are done, unless
 * --duration-ms bounds the run (it then serves past them, e.g. to be
 * scraped); its seed is also the flood's and the test faults'. */
static int
load_check(const struct gw_app *app, struct gw_options *opt)
{
	(void)app;
	if (rooms.drive > 0 && opt->duration_ns == 0)
		opt->exit_when_done = true;
	opt->identities = identities;
	opt->rng = rooms.seed ? rooms.seed : 1;
	return 0;
}

/* An identity's share of the generator's load: --drive, --concurrency and
 * --rate split evenly (the first ones take the remainder), distinct room
 * ids (the run number differs per identity). */
static struct gw_pattern_opts
share_of(const struct gw_pattern_opts *o, uint16_t i, uint16_t k)
{
	struct gw_pattern_opts s = *o;

	s.identity = i; /* also a port's index: distinct room ids */
	if (k == 1)
		return s;
	s.drive = o->drive / k + (i < o->drive % k);
	s.concurrency = o->concurrency / k + (i < o->concurrency % k);
	if (s.concurrency == 0)
		s.concurrency = 1;
	s.rate = o->rate / k + (i < o->rate % k);
	if (o->rate > 0 && s.rate == 0)
		s.rate = 1;
	return s;
}

static int
load_attach(struct gw_id *id, uint16_t index, uint16_t k)
{
	struct gw_pattern_opts share;

	/* ports and identities derive their room ids from one base plus
	 * their index: bases drawn apart could meet, and two of ours would
	 * send one room id to the same gateway */
	if (rooms.seed == 0)
		rooms.seed = gw_now_ns() >> 10;
	share = share_of(&rooms, index, k);
	return gw_pattern_source_attach(id, &share);
}

/* --drive N is each port's with one identity per port, shared out among
 * --identities K. */
static uint64_t
load_rooms_asked(uint16_t nports)
{
	return (uint64_t)rooms.drive * (identities == 1 ? nports : 1);
}

const struct gw_load_ops gw_load_ops = {
	.usage = usage,
	.option = load_option,
	.check = load_check,
	.attach = load_attach,
	.rooms_asked = load_rooms_asked,
};
