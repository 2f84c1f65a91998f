/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's peers as the gateway lists them in the client area (a
 * sequence lock the gateway alone writes): copied out and checked, never
 * used in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_priv.h"

/* Tries of a read that meets the gateway writing: each write is a copy of
 * a few KiB, so a handful of tries outlasts it. */
#define PEERS_TRIES 64

/* The whole table, checked: `recs` holds the area's max_peers records. */
static int
read_table(struct egw_client *c, struct egw_attach_peer_rec *recs,
	   uint64_t *gen)
{
	int n = -EAGAIN;

	for (int t = 0; t < PEERS_TRIES && n == -EAGAIN; t++)
		n = egw_attach_peers_read(&c->map, recs, c->map.max_peers, gen);
	if (n == -EAGAIN) {
		client_error("the gateway was rewriting the peer list on "
			     "every read");
		return n;
	}
	if (n < 0) {
		client_error("the gateway's peer list is impossible (count "
			     "over %u)",
			     c->map.max_peers);
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (recs[i].id == 0 ||
		    strnlen(recs[i].name, sizeof(recs[i].name)) ==
			    sizeof(recs[i].name)) {
			client_error("the gateway's peer record %d is "
				     "impossible (id 0 or a name without its "
				     "NUL)",
				     i);
			return -EBADMSG;
		}
	}
	return n;
}

/* The records, in a buffer of the area's size (freed by the caller). */
static int
snapshot(struct egw_client *c, struct egw_attach_peer_rec **out, uint64_t *gen)
{
	struct egw_attach_peer_rec *recs = NULL;
	int rc;

	egw_client_beat(c);
	rc = client_gone_check(c, false);
	if (rc != 0)
		return rc;
	recs = calloc(c->map.max_peers + 1, sizeof(*recs));
	if (recs == NULL)
		return -ENOMEM;
	rc = read_table(c, recs, gen);
	if (rc < 0) {
		free(recs);
		return rc;
	}
	*out = recs;
	return rc;
}

int
egw_client_peers(struct egw_client *c, struct egw_client_peer *out,
		 uint32_t max, uint64_t *gen)
{
	struct egw_attach_peer_rec *recs = NULL;
	uint64_t g = 0;
	int n = snapshot(c, &recs, &g);

	if (n < 0)
		return n;
	for (uint32_t i = 0; out != NULL && i < (uint32_t)n && i < max; i++) {
		out[i].id = recs[i].id;
		out[i].flags = recs[i].flags & (EGW_CLIENT_PEER_READY |
						EGW_CLIENT_PEER_LEAVING);
		memcpy(out[i].name, recs[i].name, sizeof(out[i].name));
	}
	free(recs);
	if (gen != NULL)
		*gen = g;
	return n;
}

int
egw_client_peer_id(struct egw_client *c, const char *name)
{
	struct egw_attach_peer_rec *recs = NULL;
	int n = snapshot(c, &recs, NULL), id = -ENOENT;

	if (n < 0)
		return n;
	for (int i = 0; i < n && id < 0; i++)
		if (!(recs[i].flags & EGW_PEER_F_LEAVING) &&
		    strcmp(recs[i].name, name) == 0)
			id = (int)recs[i].id;
	free(recs);
	if (id < 0)
		client_error("the port lists no peer called '%s'", name);
	return id;
}
