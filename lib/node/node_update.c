/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reload's parameters for a running node: the engines' timers and
 * limits and the receiver's allocation policy, handed to both engines
 * between two calls of the worker that owns the node. What peers
 * registered with - our name, roles, key - cannot change under them;
 * peers themselves come and go through egw_node_peer_add/remove.
 */
#include <errno.h>
#include <string.h>

#include "node_priv.h"

int
egw_node_update(struct egw_node *n, const struct egw_node_params *params,
		uint64_t now)
{
	int rc = 0;

	if (n == NULL || params == NULL)
		return -EINVAL;
	if (strncmp(params->name, n->self.name, sizeof(params->name)) != 0 ||
	    params->roles != n->self.roles ||
	    memcmp(&params->key, &n->key, sizeof(n->key)) != 0)
		return -EPERM;
	/* The receiver checks first: it checks the policy as well, and
	 * both engines were created from one conf, so what it accepts the
	 * sender accepts - nothing is applied to one engine only. */
	if (n->receiver != NULL)
		rc = egw_xfer_receiver_set_conf(n->receiver, &params->xfer,
						&params->policy, now);
	if (rc == 0 && n->sender != NULL)
		rc = egw_xfer_sender_set_conf(n->sender, &params->xfer, now);
	if (rc == 0)
		n->quarantine_ns = params->xfer.timers.quarantine_ns;
	return rc;
}
