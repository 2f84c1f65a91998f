/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EMBGW_GW_FLOOD_H
#define EMBGW_GW_FLOOD_H

#include "gw.h"

/* Timer tick: junk at id->flood.pps towards the identity's first peer. */
void gw_flood_tick(struct gw_id *id, uint64_t now);

#endif
