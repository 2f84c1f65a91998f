/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pool memory that local engine processes can map (doc/client.md): a
 * memfd sealed against shrinking and growing, so that no process holding
 * its fd can cut it short under the gateway (a write there would fault).
 * Registered with the payload driver once, like any other pool memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "egw_payload.h"

int
egw_payload_pool_mem(const char *name, size_t bytes, struct egw_pool_mem *m)
{
	int rc;

	m->mem = NULL;
	m->bytes = bytes;
	m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m->fd < 0)
		return -errno;
	if (ftruncate(m->fd, (off_t)bytes) != 0 ||
	    fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_SEAL) != 0) {
		rc = -errno;
		egw_payload_pool_mem_free(m);
		return rc;
	}
	/* page aligned, zero-filled: what egw_pool_create asks of memory */
	m->mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (m->mem == MAP_FAILED) {
		rc = -errno;
		m->mem = NULL;
		egw_payload_pool_mem_free(m);
		return rc;
	}
	return 0;
}

void
egw_payload_pool_mem_free(struct egw_pool_mem *m)
{
	if (m->mem != NULL)
		munmap(m->mem, m->bytes);
	if (m->fd >= 0)
		close(m->fd);
	m->mem = NULL;
	m->fd = -1;
}
