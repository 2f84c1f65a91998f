/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a configuration asks of this machine, checked before anything is
 * allocated (--check-config and start-up alike): each pool against the
 * memory available, each shm pool file against its filesystem's space.
 * No DPDK here: the build without it checks the same.
 */
#ifndef GW_RESOURCES_H
#define GW_RESOURCES_H

#include <stdio.h>

#include "egw_conf.h"

/** Print each shortfall to `err` ("file: port P: why"); their number. */
unsigned gw_check_resources(const struct egw_conf *c, FILE *err);

#endif /* GW_RESOURCES_H */
