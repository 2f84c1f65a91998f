/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The drivers' log lines: on stderr, named by their driver, so that a
 * start-up refusal says which part refused and why.
 */
#include <stdarg.h>
#include <stdio.h>

#include "egw_payload.h"

void
egw_payload_log(const char *driver, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "embgw: %s: ", driver);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
