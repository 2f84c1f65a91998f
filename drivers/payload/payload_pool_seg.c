/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An encode pool cut into per-client segments (doc/client.md, "Trust"):
 * each segment is a memfd of its own, sealed like the one-piece pool's,
 * holding that segment's share of every kind (its blocks' embedding,
 * fill_ids, mrope and aux bytes, in that order, each whole pages). The
 * gateway reserves the pool's address range once (PROT_NONE) and maps
 * every share at its place in its kind's region, so the pool is one
 * range of addresses as before: the transport registers it once, block
 * numbers keep their meaning, egw_pool works on it unchanged. A client
 * is handed its segment's fd alone and maps it in one piece: another
 * segment's bytes are not in its file.
 *
 * Ordinary pages only: a kind's share of a segment is whole 4096-byte
 * pages (the configuration's rule), seldom whole 2 MiB ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "egw_payload.h"

#define SEG_PAGE 4096u

int
egw_payload_seg_layout(const struct egw_pool_geom *g, uint32_t nseg,
		       struct egw_pool_seg *l)
{
	uint32_t nb;
	uint64_t off = 0;

	memset(l, 0, sizeof(*l));
	if (egw_pool_geom_check(g) != 0 || nseg == 0)
		return -EINVAL;
	nb = g->capacity_tokens / g->block_tokens;
	if (nb % nseg != 0)
		return -EINVAL;
	l->nseg = nseg;
	l->blocks = nb / nseg;
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		uint64_t r = egw_pool_geom_region_bytes(g, (enum egw_kind)k);

		/* the share must be whole pages, and so must the region
		 * (egw_pool lays regions out at EGW_POOL_ALIGN) */
		if (r % nseg != 0 || (r / nseg) % SEG_PAGE != 0)
			return -EINVAL;
		l->off[k] = r == 0 ? 0 : off;
		l->len[k] = r / nseg;
		off += l->len[k];
	}
	l->bytes = off;
	return 0;
}

static int
seg_memfd(const char *name, uint64_t bytes)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) != 0)
		rc = -errno;
	/* reserved now: lack of memory is a start-up error, not a fault */
	if (rc == 0)
		rc = -posix_fallocate(fd, 0, (off_t)bytes);
	if (rc == 0 && fcntl(fd, F_ADD_SEALS,
			     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		rc = -errno;
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* Map segment s's shares at their places in the reserved range. */
static int
seg_place(struct egw_pool_mem *m, const struct egw_pool_geom *g, uint32_t s)
{
	uint64_t region = 0;

	for (int k = 0; k < EGW_KIND_MAX; k++) {
		uint64_t len = m->seg.len[k];
		uint64_t r = egw_pool_geom_region_bytes(g, (enum egw_kind)k);
		uint8_t *at = (uint8_t *)m->mem + region + s * len;

		if (len != 0 && mmap(at, len, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_FIXED, m->seg_fd[s],
				     (off_t)m->seg.off[k]) == MAP_FAILED)
			return -errno;
		region += (r + EGW_POOL_ALIGN - 1) / EGW_POOL_ALIGN *
			  EGW_POOL_ALIGN;
	}
	return 0;
}

static int
pool_mem_seg(const char *name, const struct egw_pool_geom *g, uint32_t nseg,
	     struct egw_pool_mem *m)
{
	size_t bytes = egw_pool_geom_mem_bytes(g);
	uint64_t avail;
	int rc;

	rc = egw_payload_seg_layout(g, nseg, &m->seg);
	if (rc != 0) {
		egw_payload_log("pool",
				"cannot cut the pool into %u segments "
				"of whole pages",
				nseg);
		return rc;
	}
	if (egw_payload_mem_available(&avail) == 0 && bytes > avail) {
		egw_payload_log("pool",
				"cannot reserve %zu bytes of pool "
				"memory: only %llu bytes of memory are "
				"available",
				bytes, (unsigned long long)avail);
		return -ENOMEM;
	}
	m->seg_fd = malloc(nseg * sizeof(*m->seg_fd));
	if (m->seg_fd == NULL)
		return -ENOMEM;
	for (uint32_t s = 0; s < nseg; s++)
		m->seg_fd[s] = -1;
	/* one range for the whole pool, nothing in it yet */
	m->mem = mmap(NULL, bytes, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->mem == MAP_FAILED) {
		m->mem = NULL;
		return -errno;
	}
	m->bytes = bytes;
	for (uint32_t s = 0; s < nseg; s++) {
		rc = seg_memfd(name, m->seg.bytes);
		if (rc < 0) {
			egw_payload_log("pool",
					"cannot reserve segment %u "
					"(%llu bytes): %s",
					s, (unsigned long long)m->seg.bytes,
					strerror(-rc));
			return rc;
		}
		m->seg_fd[s] = rc;
		rc = seg_place(m, g, s);
		if (rc != 0) {
			egw_payload_log("pool", "cannot map segment %u: %s", s,
					strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int
egw_payload_pool_mem_geom(const char *name, const struct egw_pool_geom *g,
			  uint32_t segments, struct egw_pool_mem *m)
{
	int rc;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (segments == 0)
		return egw_payload_pool_mem(name, egw_pool_geom_mem_bytes(g),
					    m);
	rc = pool_mem_seg(name, g, segments, m);
	if (rc != 0)
		egw_payload_pool_mem_free(m);
	return rc;
}

int
egw_payload_pool_seg_fd(const struct egw_pool_mem *m, uint32_t seg)
{
	if (m == NULL || m->seg.nseg == 0)
		return -ENOENT;
	if (seg >= m->seg.nseg)
		return -ERANGE;
	return m->seg_fd[seg];
}
