/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --capture: every control frame an identity receives and sends, in a
 * classic pcap file (Ethernet link type) that tshark, tcpreplay, TRex and
 * DPDK's net_pcap read. A test and debug aid: it writes from the worker.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "gw.h"

int
gw_capture_open(struct gw_id *id, const char *path)
{
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t zone;
		uint32_t sigfigs, snaplen, linktype;
	} h = { 0xa1b2c3d4u, 2, 4, 0, 0, 65535, 1 };

	id->cap = fopen(path, "wb");
	if (id->cap == NULL || fwrite(&h, sizeof(h), 1, id->cap) != 1)
		return errno ? -errno : -EIO; /* a short write need not set it */
	return 0;
}

void
gw_capture_frame(struct gw_id *id, const struct rte_mbuf *m)
{
	struct timespec ts;
	uint32_t rec[4];

	if (id->cap == NULL)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	rec[0] = (uint32_t)ts.tv_sec;
	rec[1] = (uint32_t)(ts.tv_nsec / 1000);
	rec[2] = rec[3] = m->data_len;
	fwrite(rec, sizeof(rec), 1, id->cap);
	fwrite(rte_pktmbuf_mtod(m, const void *), m->data_len, 1, id->cap);
}

void
gw_capture_close(struct gw_id *id)
{
	if (id->cap != NULL)
		fclose(id->cap);
	id->cap = NULL;
}
