/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The payload drivers built into this binary, by the name the
 * configuration gives them. verbs is there only when rdma-core was found
 * at configure time (-Dverbs=).
 */
#include "egw_payload.h"

const struct egw_payload_ops *
egw_payload_find(enum egw_payload_driver d)
{
	switch (d) {
	case EGW_PAYLOAD_SHM:
		return &egw_payload_shm_ops;
#ifdef EGW_HAVE_VERBS
	case EGW_PAYLOAD_VERBS:
		return &egw_payload_verbs_ops;
#endif
	default:
		return NULL; /* built without rdma-core */
	}
}
