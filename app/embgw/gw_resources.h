/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a configuration asks of this machine, checked before anything is
 * allocated (--check-config and start-up alike): each pool against the
 * memory available, each shm pool file against its filesystem's space.
 * No DPDK here: the build without it checks the same.
 */
#ifndef GW_RESOURCES_H
#define GW_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "egw_conf.h"

/** Print each shortfall to `err` ("file: port P: why"); their number.
 *  Also what is at each shm pool file's path and at the attach path, as
 *  the start would refuse it (the same words). */
unsigned gw_check_resources(const struct egw_conf *c, FILE *err);

#define GW_ATTACH_WHY_LEN 512

/** What the start refuses at the attach path, before anything is made
 *  there: its directory missing, an unknown attach.group, something
 *  other than a socket at the path. 0, or -errno and `why` says it. */
int gw_attach_path_check(const struct egw_conf_attach *a, char *why,
			 size_t n);

/** True, and `why` says it, when attach.mode lets every local user
 *  connect (the other-write bit): a warning, not a refusal. */
bool gw_attach_mode_warning(const struct egw_conf_attach *a, char *why,
			    size_t n);

#endif /* GW_RESOURCES_H */
