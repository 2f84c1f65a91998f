/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who may attach: the credentials of a connected attach socket's peer
 * against the gateway's policy (doc/client.md, "Trust"). The only file of
 * lib/attach that makes system calls: SO_PEERCRED for the pid, uid and
 * primary gid, SO_PEERGROUPS (Linux 4.13) for the supplementary groups, so
 * that a member of an allowed group by a supplementary group is let in as
 * `id -G` would say.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egw_attach.h"

#define GROUPS_ON_STACK 64u

static bool
in(uint32_t v, const uint32_t *set, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

static int
groups_match(int fd, const struct egw_attach_policy *pol)
{
	gid_t stack[GROUPS_ON_STACK], *g = stack;
	socklen_t len = sizeof(stack);
	int rc = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
		if (errno != ERANGE)
			return -errno;
		/* len now says what the list needs */
		g = malloc(len);
		if (g == NULL)
			return -ENOMEM;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
			rc = -errno;
			free(g);
			return rc;
		}
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && rc == 0; i++)
		if (in((uint32_t)g[i], pol->gids, pol->ngids))
			rc = 1;
	if (g != stack)
		free(g);
	return rc;
}

int
egw_attach_peer_check(int fd, const struct egw_attach_policy *pol,
		      struct egw_attach_peer *who)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	memset(who, 0, sizeof(*who));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return -errno;
	who->pid = (int32_t)cr.pid;
	who->uid = (uint32_t)cr.uid;
	who->gid = (uint32_t)cr.gid;
	if (who->uid == pol->self_uid || in(who->uid, pol->uids, pol->nuids) ||
	    in(who->gid, pol->gids, pol->ngids))
		return 1;
	if (pol->ngids == 0)
		return 0;
	return groups_match(fd, pol);
}
