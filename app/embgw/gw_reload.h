/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reloading the configuration file while the gateway runs (SIGHUP, or
 * the telemetry command /embgw/reload): doc/gateway.md, "Reloading the
 * configuration". A control thread of its own reads and checks the file
 * and hands what changed to the workers; the signal handler only wakes
 * it, and no thread but an identity's worker touches its node.
 */
#ifndef EMBGW_GW_RELOAD_H
#define EMBGW_GW_RELOAD_H

#include <stdint.h>

#include "gw.h"

/* Start the reload thread for the running configuration `c` (the file
 * it was loaded from is read again) and its identities; `reloadable`
 * false (--identities: derived configurations) answers every request
 * with a refusal. Before the workers start. 0 or -errno (logged). */
int gw_reload_start(const struct egw_conf *c, struct gw_id *const *ids,
		    uint16_t nids, bool reloadable);
/* After the workers returned, before the teardown frees the identities:
 * the thread ends (a reload in progress finishes first). */
void gw_reload_stop(void);

/* From the SIGHUP handler: async-signal-safe, only wakes the thread. */
void gw_reload_hangup(void);

/* Worker side, on every timer tick of the identity: new parameters for
 * its node, when a reload sent some. Returns the work done (0: none). */
uint32_t gw_reload_worker_poll(struct gw_id *id, uint64_t now);

/* Reloads applied and refused so far (metrics, the exit report). */
void gw_reload_counts(uint64_t *ok, uint64_t *refused);

#endif
