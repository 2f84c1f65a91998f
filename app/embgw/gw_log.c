/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway's log types, one per component (egw_log.h), and the sink
 * that hands the libraries' and drivers' lines to them, so that
 * --log-level reaches every part of the gateway. DPDK keeps the same
 * habit: one log type per library and driver.
 */
#include <stdio.h>

#include <rte_log.h>

#include "gw.h"

_Static_assert(EGW_LOG_ERR == RTE_LOG_ERR &&
	       EGW_LOG_WARNING == RTE_LOG_WARNING &&
	       EGW_LOG_NOTICE == RTE_LOG_NOTICE &&
	       EGW_LOG_INFO == RTE_LOG_INFO && EGW_LOG_DEBUG == RTE_LOG_DEBUG,
	       "egw_log levels are rte_log's");

/* USER1 until gw_log_init: what the lines before EAL's start use */
int gw_logtypes[EGW_LOG_COMP_MAX] = {
	RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1,
	RTE_LOGTYPE_USER1,
};

static void
dpdk_sink(void *ctx, enum egw_log_comp comp, enum egw_log_level level,
	  const char *fmt, va_list ap)
{
	char line[EGW_LOG_LINE_MAX];
	int type = gw_logtypes[(unsigned)comp < EGW_LOG_COMP_MAX ? comp :
			       EGW_LOG_GATEWAY];

	(void)ctx;
	/* a line below its type's level costs no formatting */
	if (!rte_log_can_log((uint32_t)type, (uint32_t)level))
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	rte_log((uint32_t)level, (uint32_t)type, "EMBGW: %s\n", line);
}

void
gw_log_init(void)
{
	char name[32];
	int rc;

	for (int c = 0; c < EGW_LOG_COMP_MAX; c++) {
		/* the gateway keeps the name it always had */
		if (c == EGW_LOG_GATEWAY)
			snprintf(name, sizeof(name), "user.embgw");
		else
			snprintf(name, sizeof(name), "user.embgw.%s",
				 egw_log_comp_name((enum egw_log_comp)c));
		rc = rte_log_register_type_and_pick_level(name, RTE_LOG_INFO);
		if (rc >= 0)
			gw_logtypes[c] = rc;
	}
	egw_log_set_sink(dpdk_sink, NULL);
}
