/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gw_cluster.c: membership in etcd (gateway.cluster; doc/cluster.md) on a
 * control thread of its own. Start after the identities are made (their
 * records and their peer mailboxes), before the workers run; stop after
 * the workers returned (the clean stop - our records deleted, the lease
 * revoked - begins by itself at the quit signal).
 */
#ifndef EMBGW_GW_CLUSTER_H
#define EMBGW_GW_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egw_cluster.h"
#include "gw.h"

/* 0 (also when etcd is out of reach: the thread keeps trying), -EEXIST
 * when another gateway holds our name (logged, naming it), -errno. */
int gw_cluster_start(const struct egw_conf *c, struct gw_id *const *ids,
		     uint16_t nids);
void gw_cluster_stop(void);

/* What telemetry shows; false without a cluster. */
bool gw_cluster_status(struct egw_cluster_status *s, char *endpoint,
		       size_t len);

#endif
