/* SPDX-License-Identifier: BSD-3-Clause */
/* The gateway's sink (gw_log.c): a driver's line lands on the drivers'
 * DPDK log type, and that type's level (--log-level) filters it. Uses
 * rte_log alone, without starting EAL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "cu_main.h"
#include "gw.h"

static char *buf;
static size_t buf_len;

static FILE *
capture(void)
{
	FILE *f = open_memstream(&buf, &buf_len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(rte_openlog_stream(f), 0);
	return f;
}

static void
release(FILE *f)
{
	rte_openlog_stream(NULL);
	fclose(f);
}

static void
test_components_get_their_own_types(void)
{
	gw_log_init();
	for (int a = 0; a < EGW_LOG_COMP_MAX; a++)
		for (int b = 0; b < a; b++)
			CU_ASSERT_NOT_EQUAL(gw_logtypes[a], gw_logtypes[b]);
	CU_ASSERT_EQUAL(rte_log_register_type_and_pick_level(
		"user.embgw.drivers", RTE_LOG_INFO),
		gw_logtypes[EGW_LOG_DRIVERS]);
}

static void
test_driver_line_reaches_its_type(void)
{
	FILE *f;

	gw_log_init();
	f = capture();
	egw_payload_log("verbs", "device '%s' not found", "mlx5_9");
	fflush(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "EMBGW: verbs: device 'mlx5_9' "
					   "not found\n"));
	release(f);
	free(buf);
	buf = NULL;
}

static void
test_the_types_level_filters_driver_lines(void)
{
	FILE *f;

	gw_log_init();
	CU_ASSERT_EQUAL(rte_log_set_level(gw_logtypes[EGW_LOG_DRIVERS],
					  RTE_LOG_CRIT), 0);
	f = capture();
	egw_payload_log("shm", "filtered");
	egw_log(EGW_LOG_NODE, EGW_LOG_ERR, "kept");
	fflush(f);
	CU_ASSERT_PTR_NULL(strstr(buf, "filtered"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "EMBGW: kept\n"));
	release(f);
	free(buf);
	buf = NULL;
	rte_log_set_level(gw_logtypes[EGW_LOG_DRIVERS], RTE_LOG_INFO);
	egw_log_set_sink(NULL, NULL);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "components_get_their_own_types",
		  test_components_get_their_own_types },
		{ "driver_line_reaches_its_type",
		  test_driver_line_reaches_its_type },
		{ "the_types_level_filters_driver_lines",
		  test_the_types_level_filters_driver_lines },
		{ NULL, NULL },
	};
	return cu_run("gw_log", tests);
}
