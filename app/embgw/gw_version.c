/* SPDX-License-Identifier: BSD-3-Clause */
/* The --version lines: build facts from meson, the rest from the headers
 * that define them, so they cannot disagree with what the binary speaks. */
#include "egw_attach.h"
#include "egw_proto.h"
#include "gw_version.h"
#include "gw_version_git.h"  /* EGW_GIT_DESCRIBE, meson's vcs_tag */

void
gw_version_print(FILE *f, const char *prog, const char *dpdk)
{
	fprintf(f, "%s %s\n", prog, EGW_VERSION);
	fprintf(f, "git: %s\n", EGW_GIT_DESCRIBE);
	fprintf(f, "dpdk: %s\n", dpdk);
	fprintf(f, "rdma-core: %s\n", EGW_RDMA_CORE);
	fprintf(f, "protocol: %u\n", (unsigned)EGW_PROTO_VERSION);
	fprintf(f, "attach-abi: %u\n", (unsigned)EGW_ATTACH_VERSION);
}
