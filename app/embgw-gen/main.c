/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw-gen - load generator for embgw gateways. It speaks the control
 * protocol as a language-side peer (closed loop: --concurrency rooms in
 * flight; open loop: --rate rooms/s, latency counted from each room's
 * scheduled start), verifies what it receives, floods junk at a set rate
 * (--flood-pps: random bytes, bad MACs, wrong keys, truncations, other
 * ports) and reports achieved rate, latency percentiles, retransmissions
 * and errors. Over a net_pcap port it writes what it sends to a pcap file
 * that TRex, pktgen-dpdk, tcpreplay or net_pcap can replay.
 *
 *   embgw-gen [EAL args] -- -f FILE [--drive N] [--rate R | --concurrency C]
 *             [--lengths ...] [--flood-pps P] [--duration-ms D]
 *
 * It is embgw's own main loop with generator defaults (app/embgw/main.c).
 */
#include "gw.h"

int
main(int argc, char **argv)
{
	return gw_main(argc, argv, true);
}
