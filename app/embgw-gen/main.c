/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw-gen - load generator for embgw gateways. It speaks the control
 * protocol as a language-side peer (closed loop: --concurrency rooms in
 * flight; open loop: --rate rooms/s, latency counted from each room's
 * scheduled start), verifies what it receives, floods junk at a set rate
 * (--flood-pps: random bytes, bad MACs, wrong keys, truncations, other
 * ports) and reports achieved rate, latency percentiles, retransmissions
 * and errors. Over a net_pcap port it writes what it sends to a pcap file
 * that TRex, pktgen-dpdk, tcpreplay or net_pcap can replay. With an encode
 * configuration and --produce it plays the encode side.
 *
 *   embgw-gen [EAL args] -- -f FILE [--drive N] [--rate R | --concurrency C]
 *             [--lengths ...] [--flood-pps P] [--duration-ms D]
 *
 * It runs the gateway's devices, identities and loop (the embgw_core
 * library) with the load options, the built-in room source (gw_load.c,
 * gw_pattern_source.c) and the flood; it stops once its rooms are done.
 */
#include "gw_app.h"
#include "gw_flood.h"
#include "gw_load.h"

static const struct gw_app generator = {
	.name = "embgw-gen",
	.load = &gw_load_ops,
	.flood_tick = gw_flood_tick,
};

int
main(int argc, char **argv)
{
	return gw_app_main(argc, argv, &generator);
}
