/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "egw_log.h"

static void
stderr_sink(void *ctx, enum egw_log_comp comp, enum egw_log_level level,
	    const char *fmt, va_list ap)
{
	char line[EGW_LOG_LINE_MAX];

	(void)ctx;
	(void)comp;
	(void)level;
	/* one write per line: lines of two threads do not interleave */
	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "embgw: %s\n", line);
}

static egw_log_sink_fn *sink = stderr_sink;
static void *sink_ctx;

void
egw_log_set_sink(egw_log_sink_fn *fn, void *ctx)
{
	sink = fn != NULL ? fn : stderr_sink;
	sink_ctx = fn != NULL ? ctx : NULL;
}

const char *
egw_log_comp_name(enum egw_log_comp comp)
{
	static const char *const names[EGW_LOG_COMP_MAX] = {
		[EGW_LOG_GATEWAY] = "gateway",
		[EGW_LOG_NODE] = "node",
		[EGW_LOG_DRIVERS] = "drivers",
		[EGW_LOG_ATTACH] = "attach",
	};

	return (unsigned)comp < EGW_LOG_COMP_MAX ? names[comp] : "?";
}

void
egw_vlog(enum egw_log_comp comp, enum egw_log_level level, const char *fmt,
	 va_list ap)
{
	sink(sink_ctx, comp, level, fmt, ap);
}

void
egw_log(enum egw_log_comp comp, enum egw_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	egw_vlog(comp, level, fmt, ap);
	va_end(ap);
}
