/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A port's pool is either a file (shm, receiving side: under
 * payload.path, header included, reserved whole on its filesystem) or
 * memory of the gateway's own (the sending side's memfd, verbs' pool),
 * reserved whole at start. Both are known from the configuration alone,
 * so --check-config can refuse what the start would.
 */
#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
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
	uint64_t pool = egw_pool_geom_mem_bytes(&c->geom), mem = 0, avail,
		 room = 0;
	unsigned bad = 0;
	int rc;

	for (uint16_t i = 0; i < c->nports; i++) {
		const struct egw_conf_port *p = &c->ports[i];

		if (p->payload.driver != EGW_PAYLOAD_SHM ||
		    !(c->roles & EGW_ROLE_LANGUAGE)) {
			mem += pool;
			continue;
		}
		/* what is at the path: the start's refusal, in its words */
		if (egw_payload_shm_path_check(p->payload.path) != 0) {
			bad++;
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
	if (c->attach.enabled) {
		char why[GW_ATTACH_WHY_LEN];

		if (gw_attach_path_check(&c->attach, why, sizeof(why)) != 0) {
			fprintf(err, "%s: %s\n", c->file, why);
			bad++;
		} else if (gw_attach_mode_warning(&c->attach, why, sizeof(why))) {
			fprintf(err, "%s: warning: %s\n", c->file, why);
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

int
gw_attach_path_check(const struct egw_conf_attach *a, char *why, size_t n)
{
	char dir[EGW_CONF_SOCK_PATH_LEN];
	const char *slash = strrchr(a->path, '/');
	struct stat st;

	/* attach.path is absolute (the configuration says so) */
	snprintf(dir, sizeof(dir), "%.*s", slash == a->path ? 1 :
		 (int)(slash - a->path), a->path);
	if (stat(dir, &st) != 0) {
		int e = errno;

		snprintf(why, n, "attach: cannot serve %s: its directory %s: %s "
			 "(attach.path: create the directory or choose another "
			 "path)", a->path, dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, n, "attach: cannot serve %s: %s is not a "
			 "directory (attach.path)", a->path, dir);
		return -ENOTDIR;
	}
	if (a->group[0] != '\0' && getgrnam(a->group) == NULL) {
		snprintf(why, n, "attach: cannot give %s to group %s: no such "
			 "group (attach.group)", a->path, a->group);
		return -ENOENT;
	}
	if (lstat(a->path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(why, n, "attach: %s exists and is not a socket; not "
			 "replacing it (attach.path)", a->path);
		return -EEXIST;
	}
	return 0;
}

bool
gw_attach_mode_warning(const struct egw_conf_attach *a, char *why, size_t n)
{
	/* any local user may then attach: SO_PEERCRED still applies the
	 * allow lists, but nothing else keeps strangers off the socket */
	if ((a->mode & 0002) == 0)
		return false;
	snprintf(why, n, "attach: %s gets mode %04o: every local user can "
		 "connect to it (attach.mode; 0660 with attach.group keeps "
		 "the socket to that group)", a->path, a->mode);
	return true;
}
