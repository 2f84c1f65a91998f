/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `embgw --version`, `embgw-gen --version`: what an operator or a bug
 * report needs to know about a binary - its release, the commit it was
 * built from, the DPDK it runs on, the rdma-core it was built against and
 * the two versions peers and engines must match (the wire protocol's and
 * the attach ABI's).
 */
#ifndef EMBGW_GW_VERSION_H
#define EMBGW_GW_VERSION_H

#include <stdio.h>

/* One `key: value` line per field (doc/gateway.md, "Version"); `dpdk` is
 * rte_version() where DPDK is linked, else a line saying it is not. */
void gw_version_print(FILE *f, const char *prog, const char *dpdk);

#endif
