/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw - the gateway.
 *
 *   embgw --check-config FILE
 *       validate FILE without starting EAL or touching any device
 *   embgw [EAL args] -- -f FILE [app options]
 *       run the gateway: one worker lcore per configured port
 *
 * The program is gw_app_main() (gw_app.c), shared with embgw-gen; the
 * gateway runs it without the load (no load options, no room source of
 * its own: its rooms are the attached engines') and without the flood.
 */
#include "gw_app.h"

static const struct gw_app gateway = {
	.name = "embgw",
	.load = NULL,
	.flood_tick = NULL,
};

int
main(int argc, char **argv)
{
	return gw_app_main(argc, argv, &gateway);
}
