/* SPDX-License-Identifier: BSD-3-Clause */
/* embgw built without DPDK: configuration checking only. */
#include <stdio.h>
#include <string.h>

#include "egw_conf.h"
#include "gw_resources.h"
#include "gw_version.h"

int
main(int argc, char **argv)
{
	static struct egw_conf c;

	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		gw_version_print(stdout, "embgw", "none (built without DPDK)");
		return 0;
	}
	if (argc != 3 || (strcmp(argv[1], "--check-config") && strcmp(argv[1], "-t"))) {
		fprintf(stderr, "usage: %s --check-config FILE | --version\n"
			"(built without DPDK: the gateway mode is not available)\n",
			argv[0]);
		return 2;
	}
	if (egw_conf_load_report(argv[2], &c, stderr) != 0)
		return 1;
	if (gw_check_resources(&c, stderr) != 0)
		return 1;
	egw_conf_print_summary(&c, stdout);
	return 0;
}
