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

#ifdef GW_TEST_HOOKS
/* Only in a test build (-Dtest_hooks=true). */
static const char usage_test[] =
	"test-build options (this binary is a test build, not for production):\n"
	"  --ctl-drop PCT, --ctl-dup PCT, --ctl-reorder PCT\n"
	"                         lose/duplicate/reorder our control datagrams (0..50)\n"
	"  --inject-junk N        N malformed/forged/replayed datagrams per tick (0..64)\n"
	"  --fault-qp-error N     the payload link fails under batch N\n"
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
	if (app->load != NULL)
		fputs(app->load->usage, f);
#ifdef GW_TEST_HOOKS
	fputs(usage_test, f);
#endif
}

/* A decimal number in min..max, all of `s` (no sign, no suffix, no
 * wrapping): what the option means, or a clear refusal. */
bool
gw_options_number(const struct gw_app *app, const char *opt, const char *s,
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
		ok = gw_options_number(app, name, arg, 0, 50, &v);
		*(c == 'd' ? &k->drop_pct : c == 'u' ? &k->dup_pct :
		  &k->reorder_pct) = (uint32_t)v;
		return ok;
	case 'J':
		ok = gw_options_number(app, name, arg, 0, 64, &v);
		k->junk_per_tick = (uint32_t)v;
		return ok;
	case 'E':
		return gw_options_number(app, name, arg, 0, UINT64_MAX, &k->qp_error_at);
	case 'Z':
		return gw_options_number(app, name, arg, 0, UINT64_MAX,
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

/* What the gateway runs with, and a test build's options. */
static const struct option operator_lo[] = {
	{ "config", required_argument, NULL, 'f' },
	{ "capture", required_argument, NULL, 'K' },
	{ "ctl-drop", required_argument, NULL, 'd' },
	{ "ctl-dup", required_argument, NULL, 'u' },
	{ "ctl-reorder", required_argument, NULL, 'r' },
	{ "inject-junk", required_argument, NULL, 'J' },
	{ "fault-qp-error", required_argument, NULL, 'E' },
	{ "fault-stale-write", required_argument, NULL, 'Z' },
	{ "test-session", required_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
};

/*
 * The load options: the built-in room source, bounded runs and the flood.
 * embgw-gen parses them (gw_app.load, app/embgw-gen/gw_load.c); the
 * gateway knows only their names, to refuse each with a pointer there
 * rather than as an unknown option.
 */
static const struct option load_lo[] = {
	{ "produce", no_argument, NULL, GW_OPT_LOAD },
	{ "drive", required_argument, NULL, GW_OPT_LOAD },
	{ "concurrency", required_argument, NULL, GW_OPT_LOAD },
	{ "lengths", required_argument, NULL, GW_OPT_LOAD },
	{ "ranks", required_argument, NULL, GW_OPT_LOAD },
	{ "dummy-rank", no_argument, NULL, GW_OPT_LOAD },
	{ "peer", required_argument, NULL, GW_OPT_LOAD },
	{ "rate", required_argument, NULL, GW_OPT_LOAD },
	{ "start-delay-ms", required_argument, NULL, GW_OPT_LOAD },
	{ "exit-when-done", no_argument, NULL, GW_OPT_LOAD },
	{ "duration-ms", required_argument, NULL, GW_OPT_LOAD },
	{ "seed", required_argument, NULL, GW_OPT_LOAD },
	{ "identities", required_argument, NULL, GW_OPT_LOAD },
	{ "flood-pps", required_argument, NULL, GW_OPT_LOAD },
};

#define N_OPERATOR (sizeof(operator_lo) / sizeof(operator_lo[0]))
#define N_LOAD (sizeof(load_lo) / sizeof(load_lo[0]))

/* A load option: embgw-gen's to parse; the gateway refuses it. */
static bool
load_option(const struct gw_app *app, const char *name, const char *arg,
	    struct gw_options *opt)
{
	if (app->load == NULL) {
		fprintf(stderr, "%s: --%s is a load option: embgw-gen takes it "
			"(the gateway takes operator options only)\n",
			app->name, name);
		return false;
	}
	return app->load->option(app, name, arg, opt);
}

/* One option (`c`, `lo` its table entry); false after a message. */
static bool
one_option(const struct gw_app *app, int c, const struct option *lo,
	   const char *arg, struct gw_options *opt)
{
	switch (c) {
	case 'f':
		/* one configuration: a second would silently win */
		if (opt->config != NULL) {
			fprintf(stderr, "%s: -f given twice (%s and %s): "
				"one configuration per gateway\n",
				app->name, opt->config, arg);
			return false;
		}
		opt->config = arg;
		return true;
	case 'K':
		opt->capture = arg;
		return true;
	case GW_OPT_LOAD:
		return load_option(app, lo->name, arg, opt);
	case 'd': case 'u': case 'r': case 'J': case 'E': case 'S':
	case 'Z':
		return test_option(app, c, lo->name, arg, opt);
	default:
		return false; /* getopt_long said why, or -h */
	}
}

int
gw_options_parse(int argc, char **argv, const struct gw_app *app,
		 struct gw_options *opt)
{
	/* getopt_long takes one table */
	static struct option lo[N_OPERATOR + N_LOAD + 1];
	bool ok = true;
	int c, li;

	memcpy(lo, operator_lo, sizeof(operator_lo));
	memcpy(lo + N_OPERATOR, load_lo, sizeof(load_lo));
	memset(opt, 0, sizeof(*opt));
	opt->identities = 1;
	optind = 1;
	while (ok && (li = -1,
		      c = getopt_long(argc, argv, "f:h", lo, &li)) != -1)
		ok = one_option(app, c, li >= 0 ? &lo[li] : NULL, optarg, opt);
	if (ok && app->load != NULL)
		ok = app->load->check(app, opt) == 0;
	if (!ok)
		return -1;
	if (opt->config == NULL) {
		fprintf(stderr, "%s: -f FILE is required\n", app->name);
		return -1;
	}
	if (opt->rng == 0)
		opt->rng = 1;
#ifdef GW_TEST_HOOKS
	opt->knobs.on = opt->knobs.drop_pct || opt->knobs.dup_pct ||
			opt->knobs.reorder_pct || opt->knobs.junk_per_tick;
	opt->knobs.rng = opt->rng;
#endif
	return 0;
}
