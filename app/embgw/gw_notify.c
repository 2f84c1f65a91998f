/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sd_notify(3) through libsystemd: the protocol (a datagram on
 * NOTIFY_SOCKET, abstract or not, with credentials) is libsystemd's to
 * get right, and it does nothing without NOTIFY_SOCKET.
 *
 * The watchdog: a thread of its own (a control thread, never a worker
 * lcore, so that no worker ever makes a system call) wakes every half
 * WATCHDOG_USEC and sends WATCHDOG=1 only when every started device's
 * worker has turned its loop since the last wake-up (gw_dev.loops). A
 * worker stuck in a driver call or spinning outside its loop stops the
 * pings, and the manager restarts the gateway; a thread that merely
 * pinged on a timer would prove nothing but that the process exists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "gw_notify.h"

static struct {
	struct gw_dev *devs;
	uint16_t ndevs;
	uint64_t interval_us;   /* half of WATCHDOG_USEC */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool running;
	bool stop;
} wd = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

void
gw_notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STATUS=%s", buf);
}

static void *
watchdog_main(void *arg)
{
	uint64_t seen[EGW_CONF_MAX_PORTS] = { 0 };
	uint32_t stalled_logged = 0;

	(void)arg;
	pthread_mutex_lock(&wd.lock);
	while (!wd.stop) {
		struct timespec ts;
		uint32_t stalled = 0;
		uint16_t first = 0;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(wd.interval_us / 1000000);
		ts.tv_nsec += (long)(wd.interval_us % 1000000) * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&wd.cond, &wd.lock, &ts) != ETIMEDOUT)
			continue; /* woken to stop (or spuriously) */
		for (uint16_t i = 0; i < wd.ndevs; i++) {
			uint64_t n = __atomic_load_n(&wd.devs[i].loops,
						     __ATOMIC_RELAXED);

			if (n == seen[i]) {
				if (stalled++ == 0)
					first = i;
			}
			seen[i] = n;
		}
		if (stalled == 0) {
			sd_notify(0, "WATCHDOG=1");
			stalled_logged = 0;
		} else if (stalled_logged++ == 0) {
			/* once per stall: the manager acts on the silence */
			GW_LOG(ERR, "watchdog: the worker of port %s (lcore %u) "
			       "has not turned its loop in %lu ms: not "
			       "pinging the service manager\n",
			       wd.devs[first].cfg->name, wd.devs[first].lcore,
			       (unsigned long)(wd.interval_us / 1000));
			gw_notify_status("worker of port %s stalled",
					 wd.devs[first].cfg->name);
		}
	}
	pthread_mutex_unlock(&wd.lock);
	return NULL;
}

int
gw_notify_ready(struct gw_dev *devs, uint16_t ndevs, const char *fmt, ...)
{
	pthread_condattr_t ca;
	uint64_t usec = 0;
	char status[256];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(status, sizeof(status), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	wd.devs = devs;
	wd.ndevs = ndevs;
	wd.interval_us = usec / 2;
	wd.stop = false;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wd.cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&wd.thread, NULL, watchdog_main, NULL);
	if (rc != 0) {
		GW_LOG(ERR, "watchdog: cannot start its thread: %s; the "
		       "service manager will stop hearing from us\n",
		       strerror(-rc));
		return rc;
	}
	pthread_setname_np(wd.thread, "embgw-watchdog");
	wd.running = true;
	GW_LOG(INFO, "watchdog: WATCHDOG=1 every %lu ms while the workers "
	       "run\n", (unsigned long)(wd.interval_us / 1000));
	return 0;
}

void
gw_notify_stopping(const char *fmt, ...)
{
	char status[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(status, sizeof(status), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status);
	if (!wd.running)
		return;
	pthread_mutex_lock(&wd.lock);
	wd.stop = true;
	pthread_cond_signal(&wd.cond);
	pthread_mutex_unlock(&wd.lock);
	pthread_join(wd.thread, NULL);
	wd.running = false;
}
