/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The payload drivers built into this binary, by name. verbs is there
 * only when rdma-core was found at configure time (-Dverbs=).
 */
#include <string.h>

#include "egw_payload.h"

const struct egw_payload_ops *
egw_payload_find(const char *name)
{
	if (strcmp(name, egw_payload_shm_ops.name) == 0)
		return &egw_payload_shm_ops;
#ifdef EGW_HAVE_VERBS
	if (strcmp(name, egw_payload_verbs_ops.name) == 0)
		return &egw_payload_verbs_ops;
#endif
	return NULL; /* unknown, or built without rdma-core */
}
