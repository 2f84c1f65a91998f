/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_LOG_H
#define EGW_LOG_H

/**
 * @file
 * Where the libraries and the payload drivers send a log line. They know
 * nothing of DPDK: a line goes to one sink, a printf-style function with
 * the line's component and level. The default sink writes
 * "embgw: <line>\n" on stderr (tools, tests, --check-config); the gateway
 * installs one that hands each component's lines to a DPDK log type of its
 * own, so that --log-level reaches them.
 *
 * The sink is set once, before any other thread logs (the gateway does it
 * right after rte_eal_init); egw_log() only reads it.
 */

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Longest line a sink needs to hold (longer ones are cut). */
#define EGW_LOG_LINE_MAX 1024

/** Who logs: each has a DPDK log type of its own in the gateway. */
enum egw_log_comp {
	EGW_LOG_GATEWAY = 0,   /**< the application */
	EGW_LOG_NODE = 1,      /**< a port's protocol node and its peers */
	EGW_LOG_DRIVERS = 2,   /**< the payload drivers */
	EGW_LOG_ATTACH = 3,    /**< the attach socket and its clients */
	EGW_LOG_COMP_MAX
};

/** Levels, numbered as syslog's and DPDK's RTE_LOG_* (a sink may cast). */
enum egw_log_level {
	EGW_LOG_ERR = 4,
	EGW_LOG_WARNING = 5,
	EGW_LOG_NOTICE = 6,
	EGW_LOG_INFO = 7,
	EGW_LOG_DEBUG = 8,
};

/** A sink: one line (no trailing newline) as format and arguments. */
typedef void egw_log_sink_fn(void *ctx, enum egw_log_comp comp,
			     enum egw_log_level level, const char *fmt,
			     va_list ap);

/** Install a sink (NULL: back to the default, stderr). */
void egw_log_set_sink(egw_log_sink_fn *fn, void *ctx);

/** A component's short name ("gateway", "node", "drivers", "attach"). */
const char *egw_log_comp_name(enum egw_log_comp comp);

/** Log one line through the sink. */
void egw_log(enum egw_log_comp comp, enum egw_log_level level,
	     const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void egw_vlog(enum egw_log_comp comp, enum egw_log_level level,
	      const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#ifdef __cplusplus
}
#endif

#endif /* EGW_LOG_H */
