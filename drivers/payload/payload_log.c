/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The drivers' log lines, named by their driver ("shm: ..."), so that a
 * start-up refusal says which part refused and why. They go through the
 * log hook (egw_log.h): stderr by default, the gateway's "drivers" log
 * type once it has installed its sink.
 */
#include <stdarg.h>
#include <stdio.h>

#include "egw_log.h"
#include "egw_payload.h"

void
egw_payload_log(const char *driver, const char *fmt, ...)
{
	char line[EGW_LOG_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* every line a driver logs today is a refusal or a fault, or a
	 * take-over an operator must see: none is filtered below ERR */
	egw_log(EGW_LOG_DRIVERS, EGW_LOG_ERR, "%s: %s", driver, line);
}
