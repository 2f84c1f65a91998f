/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lease (doc/client.md section 6): client_beat must move at least once
 * per lease_ms / 2. Every call of the library moves it; an engine that may
 * stay away from the library longer asks for the lease thread, which moves
 * it every lease_ms / 4 and does nothing else.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "client_priv.h"

void
egw_client_beat(struct egw_client *c)
{
	__atomic_fetch_add(&c->map.area->client_beat, 1, __ATOMIC_RELEASE);
}

static void *
lease_main(void *arg)
{
	struct egw_client *c = arg;
	uint32_t period_ms = c->g.lease_ms / 4 ? c->g.lease_ms / 4 : 1;
	struct timespec until;

	pthread_mutex_lock(&c->lease_lock);
	while (!c->lease_stop) {
		egw_client_beat(c);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)(period_ms % 1000) * 1000000L;
		until.tv_sec += period_ms / 1000 + until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		while (!c->lease_stop &&
		       pthread_cond_timedwait(&c->lease_cond, &c->lease_lock,
					      &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&c->lease_lock);
	return NULL;
}

int
client_lease_start(struct egw_client *c)
{
	pthread_condattr_t ca;
	int rc;

	/* a gateway without a lease needs no beat */
	if (c->g.lease_ms == 0)
		return 0;
	pthread_mutex_init(&c->lease_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->lease_cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&c->lease_thread, NULL, lease_main, c);
	if (rc != 0) {
		pthread_cond_destroy(&c->lease_cond);
		pthread_mutex_destroy(&c->lease_lock);
		client_error("starting the lease thread: %s", strerror(rc));
		return -rc;
	}
	c->lease_running = true;
	return 0;
}

void
client_lease_stop(struct egw_client *c)
{
	if (!c->lease_running)
		return;
	pthread_mutex_lock(&c->lease_lock);
	c->lease_stop = true;
	pthread_cond_signal(&c->lease_cond);
	pthread_mutex_unlock(&c->lease_lock);
	pthread_join(c->lease_thread, NULL);
	pthread_cond_destroy(&c->lease_cond);
	pthread_mutex_destroy(&c->lease_lock);
	c->lease_running = false;
}
