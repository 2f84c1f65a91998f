/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --capture: every control frame an identity receives and sends, in a
 * classic pcap file (Ethernet link type) that tshark, tcpreplay, TRex and
 * DPDK's net_pcap read. A test and debug aid: it writes from the worker,
 * one write per frame (record header and bytes together), so that when a
 * write fails - a full disk, a file size limit - the file is cut back to
 * the last whole frame and stays a valid capture. The run goes on (the
 * traffic does not depend on its capture); the failure is logged once,
 * reported at exit and makes the exit status non-zero (doc/gateway.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rte_ip.h>
#include <rte_udp.h>

#include "gw.h"

/* Stop at the last whole frame: cut off whatever part of this one got
 * written. */
static void
stop(struct gw_id *id, int err)
{
	struct gw_capture *c = &id->cap;

	c->err = err;
	if (ftruncate(c->fd, (off_t)c->bytes) != 0)
		GW_LOG(ERR, "capture %s: cannot cut back to the last whole "
		       "frame: %s\n", c->path, strerror(errno));
	close(c->fd);
	c->fd = -1;
	GW_LOG(ERR, "capture %s: write failed after %lu frames (%lu bytes): "
	       "%s; the capture stops there, the run goes on\n", c->path,
	       (unsigned long)c->frames, (unsigned long)c->bytes, strerror(err));
}

/* One record, whole or not at all (as far as the file is concerned). */
static int
write_all(struct gw_capture *c, struct iovec *iov, int n, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = writev(c->fd, iov, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		if (w == 0)
			return EIO;
		done += (size_t)w;
		/* a short write: go on from where it stopped */
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int
gw_capture_open(struct gw_id *id, const char *path)
{
	struct gw_capture *c = &id->cap;
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t zone;
		uint32_t sigfigs, snaplen, linktype;
	} h = { 0xa1b2c3d4u, 2, 4, 0, 0, 65535, 1 };
	struct iovec iov = { &h, sizeof(h) };
	int err;

	snprintf(c->path, sizeof(c->path), "%s", path);
	c->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (c->fd < 0)
		return -errno;
	err = write_all(c, &iov, 1, sizeof(h));
	if (err != 0) {
		close(c->fd);
		c->fd = -1;
		return -err;
	}
	c->bytes = sizeof(h);
	return 0;
}

void
gw_capture_frame(struct gw_id *id, const struct rte_mbuf *m)
{
	struct gw_capture *c = &id->cap;
	uint64_t wall;
	uint32_t rec[4];
	struct iovec iov[3];
	const uint8_t *data;
	enum {
		L3 = sizeof(struct rte_ether_hdr),
		L4 = L3 + sizeof(struct rte_ipv4_hdr),
		HDRS = L4 + sizeof(struct rte_udp_hdr)
	};
	union {
		uint8_t b[HDRS];
		uint16_t align; /* the headers' fields are 16-bit aligned */
	} h;
	int niov = 2, err;

	if (c->fd < 0)
		return;
	/* the worker's time of this iteration; a frame sent before the
	 * loop runs (or after it) reads the clock */
	wall = gw_wall_ns(id->dev->now ? id->dev->now : gw_now_ns());
	rec[0] = (uint32_t)(wall / 1000000000ull);
	rec[1] = (uint32_t)(wall % 1000000000ull / 1000);
	rec[2] = rec[3] = m->data_len;
	iov[0] = (struct iovec){ rec, sizeof(rec) };
	data = rte_pktmbuf_mtod(m, const uint8_t *);
	iov[1] = (struct iovec){ (void *)(uintptr_t)data, m->data_len };
	if ((m->ol_flags &
	     (RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM)) &&
	    m->data_len >= HDRS) {
		/* the device fills the checksums in on the way out: the
		 * capture shows the frame as the wire will carry it. The UDP
		 * field holds the pseudo-header's sum, which the sum over
		 * the datagram then includes, as the device's does. */
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(h.b + L3);
		struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(h.b + L4);
		uint16_t ulen, ck;

		memcpy(h.b, data, HDRS);
		if (m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM)
			ip->hdr_checksum = rte_ipv4_cksum(ip);
		ulen = rte_be_to_cpu_16(udp->dgram_len);
		if ((m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) &&
		    ulen <= m->data_len - L4) {
			ck = (uint16_t)~rte_raw_cksum(data + L4, ulen);
			udp->dgram_cksum = ck == 0 ? 0xffff : ck;
		}
		iov[1] = (struct iovec){ h.b, HDRS };
		iov[2] = (struct iovec){ (void *)(uintptr_t)(data + HDRS),
					 m->data_len - HDRS };
		niov = 3;
	}
	err = write_all(c, iov, niov, sizeof(rec) + m->data_len);
	if (err != 0) {
		stop(id, err);
		return;
	}
	c->bytes += sizeof(rec) + m->data_len;
	c->frames++;
}

int
gw_capture_close(struct gw_id *id)
{
	struct gw_capture *c = &id->cap;

	if (c->fd >= 0 && close(c->fd) != 0 && c->err == 0) {
		c->err = errno;
		GW_LOG(ERR, "capture %s: closing it failed: %s\n", c->path,
		       strerror(errno));
	}
	c->fd = -1;
	return -c->err;
}
