/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The service manager's notification protocol (sd_notify(3)): READY=1 once
 * the ports are started and the attach socket listens, STATUS= lines at
 * each stage, STOPPING=1 when the teardown begins, and WATCHDOG=1 from a
 * control thread while every worker still turns its loop. Without
 * NOTIFY_SOCKET in the environment every call does nothing.
 */
#ifndef EMBGW_GW_NOTIFY_H
#define EMBGW_GW_NOTIFY_H

#include "gw.h"

/* STATUS=<text> */
void gw_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* READY=1 with a STATUS= line; starts the watchdog thread when the
 * manager asked for one (WATCHDOG_USEC). 0, or a negative errno when the
 * watchdog thread could not start (logged; the gateway runs on). */
int gw_notify_ready(struct gw_dev *devs, uint16_t ndevs, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* STOPPING=1 with a STATUS= line; stops the watchdog thread. */
void gw_notify_stopping(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
