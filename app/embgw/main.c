/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw - the gateway.
 *
 *   embgw --check-config FILE     validate FILE without starting EAL or
 *                                 touching any device (like nginx -t)
 *
 * The DPDK gateway itself ([EAL args] -- -f FILE) arrives with the gateway
 * issue; until then this binary only validates configurations.
 */
#include <stdio.h>
#include <string.h>

#include "egw_conf.h"

static int
check_config(const char *path)
{
	static struct egw_conf c;
	static struct egw_conf_errors e;

	if (egw_conf_load(path, &c, &e) != 0) {
		for (unsigned i = 0; i < e.n; i++)
			fprintf(stderr, "%s\n", e.msg[i]);
		if (e.total > e.n)
			fprintf(stderr, "... and %u more\n", e.total - e.n);
		fprintf(stderr, "%s: %u error(s)\n", path, e.total);
		return 1;
	}
	egw_conf_print_summary(&c, stdout);
	return 0;
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f, "usage: %s --check-config FILE\n"
		"  validate a gateway configuration (no EAL, no devices)\n",
		prog);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && (strcmp(argv[1], "--check-config") == 0 ||
			  strcmp(argv[1], "-t") == 0))
		return check_config(argv[2]);
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		usage(stdout, argv[0]);
		return 0;
	}
	usage(stderr, argv[0]);
	fprintf(stderr, "%s: the DPDK gateway mode is not built yet\n", argv[0]);
	return 2;
}
