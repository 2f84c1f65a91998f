/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The programs built on the gateway: embgw (the gateway) and embgw-gen
 * (the load generator) run the same devices, identities and loop; what
 * differs is described here and passed to gw_app_main().
 */
#ifndef EMBGW_GW_APP_H
#define EMBGW_GW_APP_H

#include "gw_pattern_source.h"

struct gw_app {
	const char *name;
	/* stop once the rooms of --drive are done, without --exit-when-done */
	bool exit_when_driven;
	/* --flood-pps (NULL: the option is refused) */
	void (*flood_tick)(struct gw_id *id, uint64_t now);
};

/* The command line after `--` (gw_options.c). */
struct gw_options {
	const char *config;
	struct gw_pattern_opts rooms;
#ifdef GW_TEST_HOOKS
	struct gw_test_knobs knobs; /* test-build options */
#endif
	uint64_t rng;            /* --seed as given, else 1: the flood's
				  * and the test knobs' generators */
	uint64_t flood_pps;
	uint64_t duration_ns;
	const char *capture;
	uint16_t identities;     /* 1: the configured ports as they are */
	bool exit_when_done;
};

void gw_options_usage(FILE *f, const char *prog, const struct gw_app *app);
/* 0, or -1 after a message on stderr */
int gw_options_parse(int argc, char **argv, const struct gw_app *app,
		     struct gw_options *o);

/* gw_app.c: set-up, launch, teardown; the exit status */
int gw_app_main(int argc, char **argv, const struct gw_app *app);

#endif
