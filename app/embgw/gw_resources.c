/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A port's pool is either a file (shm, receiving side: under
 * payload.path, header included, reserved whole on its filesystem) or
 * memory of the gateway's own (the sending side's memfd, verbs' pool),
 * reserved whole at start. Both are known from the configuration alone,
 * so --check-config can refuse what the start would.
 */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "egw_payload.h"
#include "gw_resources.h"

/* Bytes free in the filesystem holding `path` (its directory's). */
static int
space_for(const char *path, uint64_t *free_bytes)
{
	char dir[EGW_CONF_PATH_LEN];
	const char *slash = strrchr(path, '/');
	struct statvfs vs;

	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
		 (int)(slash - path), path);
	if (statvfs(dir, &vs) != 0)
		return -errno;
	*free_bytes = (uint64_t)vs.f_bavail * vs.f_frsize;
	return 0;
}

unsigned
gw_check_resources(const struct egw_conf *c, FILE *err)
{
	uint64_t pool = egw_geom_mem_bytes(&c->geom), mem = 0, avail, room;
	unsigned bad = 0;
	int rc;

	for (uint16_t i = 0; i < c->nports; i++) {
		const struct egw_conf_port *p = &c->ports[i];

		if (p->payload.driver != EGW_PAYLOAD_SHM ||
		    !(c->roles & EGW_ROLE_LANGUAGE)) {
			mem += pool;
			continue;
		}
		rc = space_for(p->payload.path, &room);
		/* a stopped gateway's pool file there is taken over at start:
		 * its space is ours (once its peers let go of it) */
		if (rc == 0)
			room += egw_payload_shm_reclaimable(p->payload.path);
		if (rc != 0) {
			fprintf(err, "%s: port %s: payload.path %s: its directory: "
				"%s\n", c->file, p->name, p->payload.path,
				strerror(-rc));
			bad++;
		} else if (pool + 4096 > room) {
			fprintf(err, "%s: port %s: payload.path %s: the pool file "
				"takes %llu bytes, its filesystem has %llu free\n",
				c->file, p->name, p->payload.path,
				(unsigned long long)pool + 4096,
				(unsigned long long)room);
			bad++;
		}
	}
	if (mem > 0 && egw_payload_mem_available(&avail) == 0 && mem > avail) {
		fprintf(err, "%s: the pools in the gateway's memory take %llu "
			"bytes, the machine has %llu available\n", c->file,
			(unsigned long long)mem, (unsigned long long)avail);
		bad++;
	}
	return bad;
}
