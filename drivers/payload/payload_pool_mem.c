/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pool memory that local engine processes can map (doc/client.md): a
 * memfd sealed against shrinking and growing, so that no process holding
 * its fd can cut it short under the gateway (a write there would fault).
 * Backed by 2 MiB huge pages when the machine has enough free ones (fewer
 * TLB misses for the engines and the NIC), by ordinary pages otherwise.
 * Registered with the payload driver once, like any other pool memory.
 * Its whole size is reserved at creation (populated huge pages, or
 * fallocate), so lack of memory is a start-up error and never a SIGBUS.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "egw_payload.h"

#define HUGE_2M (2u << 20)

static int
pool_mem_make(const char *name, size_t bytes, bool huge,
	      struct egw_pool_mem *m)
{
	int rc;

	m->mem = NULL;
	m->seg_fd = NULL;
	memset(&m->seg, 0, sizeof(m->seg));
	m->bytes = huge ? (bytes + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1) : bytes;
	m->huge = huge;
	m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING |
			     (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0));
	if (m->fd < 0)
		return -errno;
	bytes = m->bytes;
	rc = ftruncate(m->fd, (off_t)bytes) != 0 ? -errno : 0;
	/* ordinary pages reserved now (huge ones are at mmap): lack of
	 * memory is a start-up error, never a fault in the poll loop */
	if (rc == 0 && !huge)
		rc = -posix_fallocate(m->fd, 0, (off_t)bytes);
	if (rc == 0 && fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
			     F_SEAL_SEAL) != 0)
		rc = -errno;
	if (rc != 0) {
		egw_payload_pool_mem_free(m);
		return rc;
	}
	/* page aligned, zero-filled: what egw_pool_create asks of memory;
	 * populated now, so that missing huge pages show here, not as a
	 * fault in the poll loop */
	m->mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		      MAP_SHARED | (huge ? MAP_POPULATE : 0), m->fd, 0);
	if (m->mem == MAP_FAILED) {
		rc = -errno;
		m->mem = NULL;
		egw_payload_pool_mem_free(m);
		return rc;
	}
	return 0;
}

int
egw_payload_mem_available(uint64_t *bytes)
{
	char line[128];
	unsigned long long kib;
	FILE *f = fopen("/proc/meminfo", "re");
	int rc = -ENOENT;

	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
			*bytes = (uint64_t)kib * 1024;
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}

int
egw_payload_pool_mem(const char *name, size_t bytes, struct egw_pool_mem *m)
{
	uint64_t avail;
	int rc;

	if (pool_mem_make(name, bytes, true, m) == 0)
		return 0;
	/* ordinary pages: filling memory past what is free would wake the
	 * OOM killer rather than fail */
	if (egw_payload_mem_available(&avail) == 0 && bytes > avail) {
		egw_payload_log("pool", "cannot reserve %zu bytes of pool "
				"memory: only %llu bytes of memory are "
				"available", bytes, (unsigned long long)avail);
		m->fd = -1;
		m->mem = NULL;
		return -ENOMEM;
	}
	rc = pool_mem_make(name, bytes, false, m);
	if (rc != 0)
		egw_payload_log("pool", "cannot reserve %zu bytes of pool "
				"memory: %s", bytes, strerror(-rc));
	return rc;
}

void
egw_payload_pool_mem_free(struct egw_pool_mem *m)
{
	if (m->mem != NULL)
		munmap(m->mem, m->bytes); /* a cut pool's segments as well */
	if (m->fd >= 0)
		close(m->fd);
	for (uint32_t s = 0; m->seg_fd != NULL && s < m->seg.nseg; s++)
		if (m->seg_fd[s] >= 0)
			close(m->seg_fd[s]);
	free(m->seg_fd);
	m->seg_fd = NULL;
	m->seg.nseg = 0;
	m->mem = NULL;
	m->fd = -1;
}
