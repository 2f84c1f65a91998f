/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EMBGW_GW_LOAD_H
#define EMBGW_GW_LOAD_H

#include "gw_app.h"

/* embgw-gen's load: its options, and the built-in room source each
 * identity gets (gw_load.c). */
extern const struct gw_load_ops gw_load_ops;

#endif
