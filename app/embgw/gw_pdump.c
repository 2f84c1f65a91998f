/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK's own capture: with rte_pdump_init() the gateway answers a
 * secondary process's capture requests, so `dpdk-dumpcap` (and
 * `dpdk-pdump`) capture its ports while it runs (doc/gateway.md,
 * "Capturing and inspecting with DPDK's tools"). Nothing is copied until
 * a capture starts: pdump then adds rx/tx callbacks on the port's queue
 * that copy each frame into the capturing process's ring.
 *
 * A secondary process can only attach to a primary whose memory lives in
 * shared hugepage files: a gateway started with --no-huge or --in-memory
 * has no multi-process channel. That is no error - the gateway runs
 * without the capture service and says so once.
 */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_pdump.h>

#include "gw.h"

static bool pdump_on;

void
gw_pdump_init(void)
{
	if (rte_pdump_init() != 0) {
		GW_LOG(NOTICE, "no capture service for dpdk-dumpcap (%s): "
		       "secondary processes attach only to a gateway with "
		       "hugepages and without --in-memory\n",
		       rte_strerror(rte_errno));
		return;
	}
	pdump_on = true;
}

void
gw_pdump_uninit(void)
{
	if (pdump_on)
		rte_pdump_uninit();
	pdump_on = false;
}
