/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line after `--`: options, their ranges, the usage text. */
#include <ctype.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw_app.h"

/* What an operator runs the gateway with. */
static const char usage_operator[] =
	"options:\n"
	"  -f, --config FILE      gateway configuration (libconfig)\n"
	"  --capture FILE         write every control frame in and out to a pcap file\n"
	"                         (FILE.<port> when there are several ports)\n"
	"  -h, --help             this text\n";

/* The built-in room source and bounded runs: demos, benchmarks, tests. */
static const char usage_load[] =
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
	"  --exit-when-done       language: stop after the N rooms%s\n"
	"  --duration-ms D        stop after D ms (bounded runs)\n"
	"  --seed S               room-id seed (also of the flood and test faults)\n"
	"  --identities K         play K peers from the one configured port:\n"
	"                         addresses ADDRESS+0..K-1, names NAME.0..K-1,\n"
	"                         shm pool files PATH.0..K-1, one pool each;\n"
	"                         --drive, --concurrency and --rate are shared out\n";

static const char usage_flood[] =
	"  --flood-pps P          junk datagrams per second at the port's first peer\n"
	"                         (with a net_pcap device: a replayable pcap)\n";

#ifdef GW_TEST_HOOKS
/* Only in a test build (-Dtest_hooks=true). */
static const char usage_test[] =
	"test-build options (this binary is a test build, not for production):\n"
	"  --ctl-drop PCT, --ctl-dup PCT, --ctl-reorder PCT\n"
	"                         lose/duplicate/reorder our control datagrams (0..50)\n"
	"  --inject-junk N        N malformed/forged/replayed datagrams per tick (0..64)\n"
	"  --fault-qp-error N     the payload link fails after batch N\n"
	"  --fault-stale-write N  once the room after the Nth has been sent, write\n"
	"                         the Nth's last write once more, under its key\n"
	"  --test-session N       session id N (N+i for the process's identity i,\n"
	"                         counted across ports), not random\n";
#endif

void
gw_options_usage(FILE *f, const char *prog, const struct gw_app *app)
{
	fprintf(f,
		"usage: %s --check-config FILE\n"
		"       %s --version\n"
		"       %s [EAL args] -- -f FILE [options]\n",
		prog, prog, prog);
	fputs(usage_operator, f);
	fprintf(f, usage_load, app->exit_when_driven ? " (the default)" : "");
	if (app->flood_tick != NULL)
		fputs(usage_flood, f);
#ifdef GW_TEST_HOOKS
	fputs(usage_test, f);
#endif
}

/* A decimal number in min..max, all of `s` (no sign, no suffix, no
 * wrapping): what the option means, or a clear refusal. */
static bool
number(const struct gw_app *app, const char *opt, const char *s,
       uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			v = UINT64_MAX;
			break;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s || *p != '\0' || v < min || v > max) {
		fprintf(stderr, "%s: --%s: '%s' is not a number in %llu..%llu\n",
			app->name, opt, s, (unsigned long long)min,
			(unsigned long long)max);
		return false;
	}
	*out = v;
	return true;
}

static int
parse_lengths(const char *s, struct gw_pattern_opts *o)
{
	char *dup = strdup(s), *save = NULL;

	if (dup == NULL)
		return -1;
	o->nlengths = 0;
	for (char *t = strtok_r(dup, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(t, &end, 10);

		if (*end != '\0' || v <= 0 || v > (long)EGW_XFER_MAX_TOKENS || o->nlengths == 64) {
			free(dup);
			return -1;
		}
		o->lengths[o->nlengths++] = (uint32_t)v;
	}
	free(dup);
	return o->nlengths > 0 ? 0 : -1;
}

#ifdef GW_TEST_HOOKS
/* --test-session N: digits only (strtoull would take "-1" for 2^64 - 1),
 * any base strtoull reads, not 0 (0 means random). */
static bool
test_session(const struct gw_app *app, const char *s, uint64_t *out)
{
	char *end = NULL;

	errno = 0;
	*out = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' ||
	    !isdigit((unsigned char)s[0]) || *out == 0) {
		fprintf(stderr, "%s: --test-session: '%s' is not a non-zero "
			"64-bit session id\n", app->name, s);
		return false;
	}
	return true;
}

/* A test-build option (`c` from the table in gw_options_parse). */
static bool
test_option(const struct gw_app *app, int c, const char *name,
	    const char *arg, struct gw_options *opt)
{
	struct gw_test_knobs *k = &opt->knobs;
	uint64_t v = 0;
	bool ok;

	switch (c) {
	case 'd': case 'u': case 'r':
		ok = number(app, name, arg, 0, 50, &v);
		*(c == 'd' ? &k->drop_pct : c == 'u' ? &k->dup_pct :
		  &k->reorder_pct) = (uint32_t)v;
		return ok;
	case 'J':
		ok = number(app, name, arg, 0, 64, &v);
		k->junk_per_tick = (uint32_t)v;
		return ok;
	case 'E':
		return number(app, name, arg, 0, UINT64_MAX, &k->qp_error_at);
	case 'Z':
		return number(app, name, arg, 0, UINT64_MAX,
			      &k->stale_write_at);
	default:
		return test_session(app, arg, &k->session);
	}
}
#else
/* A production build has no test options: say which build has them. */
static bool
test_option(const struct gw_app *app, int c, const char *name,
	    const char *arg, struct gw_options *opt)
{
	(void)c; (void)arg; (void)opt;
	fprintf(stderr, "%s: --%s is a test option: only a test build "
		"(meson -Dtest_hooks=true) takes it\n", app->name, name);
	return false;
}
#endif

int
gw_options_parse(int argc, char **argv, const struct gw_app *app,
		 struct gw_options *opt)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'f' },
		{ "produce", no_argument, NULL, 'P' },
		{ "drive", required_argument, NULL, 'D' },
		{ "concurrency", required_argument, NULL, 'C' },
		{ "lengths", required_argument, NULL, 'L' },
		{ "ranks", required_argument, NULL, 'R' },
		{ "dummy-rank", no_argument, NULL, 'Y' },
		{ "peer", required_argument, NULL, 'p' },
		{ "exit-when-done", no_argument, NULL, 'X' },
		{ "duration-ms", required_argument, NULL, 'T' },
		{ "start-delay-ms", required_argument, NULL, 'W' },
		{ "ctl-drop", required_argument, NULL, 'd' },
		{ "ctl-dup", required_argument, NULL, 'u' },
		{ "ctl-reorder", required_argument, NULL, 'r' },
		{ "inject-junk", required_argument, NULL, 'J' },
		{ "capture", required_argument, NULL, 'K' },
		{ "rate", required_argument, NULL, 'Q' },
		{ "flood-pps", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 's' },
		{ "identities", required_argument, NULL, 'I' },
		{ "fault-qp-error", required_argument, NULL, 'E' },
		{ "fault-stale-write", required_argument, NULL, 'Z' },
		{ "test-session", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct gw_pattern_opts *o = &opt->rooms;
	const uint64_t u32 = UINT32_MAX;
	uint64_t v;
	bool ok = true;
	int c, li;

	memset(opt, 0, sizeof(*opt));
	opt->identities = 1;
	o->concurrency = 1;
	o->ranks = 1;
	o->lengths[0] = 2000;
	o->nlengths = 1;
	optind = 1;
	while (ok && (li = -1,
		      c = getopt_long(argc, argv, "f:h", lo, &li)) != -1) {
		switch (c) {
		case 'f':
			/* one configuration: a second would silently win */
			if (opt->config != NULL) {
				fprintf(stderr, "%s: -f given twice (%s and %s): "
					"one configuration per gateway\n",
					app->name, opt->config, optarg);
				ok = false;
				break;
			}
			opt->config = optarg;
			break;
		case 'P': o->produce = true; break;
		case 'D':
			ok = number(app, "drive", optarg, 0, GW_MAX_DRIVE, &v);
			o->drive = (uint32_t)v;
			break;
		case 'C':
			ok = number(app, "concurrency", optarg, 1, u32, &v);
			o->concurrency = (uint32_t)v;
			break;
		case 'L':
			if (parse_lengths(optarg, o) != 0) {
				fprintf(stderr, "%s: --lengths: 1..64 lengths of "
					"1..%u tokens\n", app->name,
					EGW_XFER_MAX_TOKENS);
				return -1;
			}
			break;
		case 'R':
			ok = number(app, "ranks", optarg, 1, EGW_XFER_MAX_RANKS,
				    &v);
			o->ranks = (uint16_t)v;
			break;
		case 'Y': o->dummy_rank = true; break;
		case 'p': snprintf(o->peer, sizeof(o->peer), "%s", optarg); break;
		case 'X': opt->exit_when_done = true; break;
		case 'T':
			/* 0 would mean no limit: a bounded run is >= 1 ms */
			ok = number(app, "duration-ms", optarg, 1,
				    UINT64_MAX / 1000000, &v);
			opt->duration_ns = v * 1000000ull;
			break;
		case 'W':
			ok = number(app, "start-delay-ms", optarg, 0, u32, &v);
			o->start_delay_ms = (uint32_t)v;
			break;
		case 'K': opt->capture = optarg; break;
		case 'Q':
			ok = number(app, "rate", optarg, 0, u32, &v);
			o->rate = (uint32_t)v;
			break;
		case 'F':
			if (app->flood_tick == NULL) {
				fprintf(stderr, "%s: --flood-pps is embgw-gen's\n",
					app->name);
				return -1;
			}
			ok = number(app, "flood-pps", optarg, 0, UINT64_MAX,
				    &opt->flood_pps);
			break;
		case 's': ok = number(app, "seed", optarg, 0, UINT64_MAX, &o->seed); break;
		case 'I':
			ok = number(app, "identities", optarg, 1, GW_MAX_IDS, &v);
			opt->identities = (uint16_t)v;
			break;
		case 'd': case 'u': case 'r': case 'J': case 'E': case 'S':
		case 'Z':
			ok = test_option(app, c, lo[li].name, optarg, opt);
			break;
		default:
			return -1;
		}
	}
	if (!ok)
		return -1;
	if (opt->config == NULL) {
		fprintf(stderr, "%s: -f FILE is required\n", app->name);
		return -1;
	}
	if (app->exit_when_driven && o->drive > 0)
		opt->exit_when_done = true;
	opt->rng = o->seed ? o->seed : 1;
#ifdef GW_TEST_HOOKS
	opt->knobs.on = opt->knobs.drop_pct || opt->knobs.dup_pct ||
			opt->knobs.reorder_pct || opt->knobs.junk_per_tick;
	opt->knobs.rng = opt->rng;
#endif
	return 0;
}
