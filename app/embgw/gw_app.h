/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The programs built on the gateway: embgw (the gateway) and embgw-gen
 * (the load generator) run the same devices, identities and loop; what
 * differs is described here and passed to gw_app_main().
 */
#ifndef EMBGW_GW_APP_H
#define EMBGW_GW_APP_H

#include "gw_room_source.h"

struct gw_app;
struct gw_options;

/* getopt_long's value for every load option (gw_options.c's table) */
#define GW_OPT_LOAD 0x100

/*
 * The load: the built-in room source, bounded runs and the flood's rate,
 * embgw-gen's alone (app/embgw-gen/gw_load.c). The gateway has none: it
 * refuses the load options and carries no room source of its own.
 */
struct gw_load_ops {
	const char *usage;       /* its options, for --help */
	/* One load option, `name` as in the table, `arg` its value (NULL
	 * for a flag): false after a message on stderr naming it. */
	bool (*option)(const struct gw_app *app, const char *name,
		       const char *arg, struct gw_options *opt);
	/* After the last option: the run's shape into `opt` (identities,
	 * duration_ns, exit_when_done, flood_pps, rng). 0, or -1 after a
	 * message on stderr. */
	int (*check)(const struct gw_app *app, struct gw_options *opt);
	/* Identity `index` (counted across devices) of the `k` each device
	 * carries is made: attach its room source. 0 or -errno (logged). */
	int (*attach)(struct gw_id *id, uint16_t index, uint16_t k);
	/* The rooms asked of the run, over its `nports` ports. */
	uint64_t (*rooms_asked)(uint16_t nports);
};

struct gw_app {
	const char *name;
	/* the load options and the room source (NULL: refused) */
	const struct gw_load_ops *load;
	/* embgw-gen's flood, every timer tick (NULL: none) */
	void (*flood_tick)(struct gw_id *id, uint64_t now);
};

/* The command line after `--` (gw_options.c). */
struct gw_options {
	const char *config;
#ifdef GW_TEST_HOOKS
	struct gw_test_knobs knobs; /* test-build options */
#endif
	/* embgw-gen's --seed as given, else 1: the flood's and the test
	 * knobs' generators */
	uint64_t rng;
	uint64_t flood_pps;
	uint64_t duration_ns;
	const char *capture;
	uint16_t identities;     /* 1: the configured ports as they are */
	bool exit_when_done;
};

/* A decimal number in min..max, all of `s` (no sign, no suffix, no
 * wrapping), into *out; false after a message naming --opt, `s` and the
 * range. */
bool gw_options_number(const struct gw_app *app, const char *opt,
		       const char *s, uint64_t min, uint64_t max,
		       uint64_t *out);
void gw_options_usage(FILE *f, const char *prog, const struct gw_app *app);
/* 0, or -1 after a message on stderr */
int gw_options_parse(int argc, char **argv, const struct gw_app *app,
		     struct gw_options *o);

/* gw_app.c: set-up, launch, teardown; the exit status */
int gw_app_main(int argc, char **argv, const struct gw_app *app);

#endif
