/* SPDX-License-Identifier: BSD-3-Clause */
/* Running the attach shim (shim.h) from a test: start it on a fresh
 * socket path, script it through its stdin, wait for the lines it prints
 * (every wait with a deadline), stop it. */
#ifndef EGW_CLIENT_HARNESS_H
#define EGW_CLIENT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "egw_client.h"

struct shim_proc {
	pid_t pid;
	int in;               /* its stdin: the script */
	int out;              /* its stdout */
	char path[108];       /* its socket */
	char buf[1 << 16];    /* what it printed, not yet matched */
	size_t len;
};

/* The shim's program, from the test's command line. */
extern const char *shim_program;

/* Start it with `args` (NULL-terminated, after --socket). @return 0. */
int shim_start(struct shim_proc *f, const char *const *args);

/* Wait up to `ms` for a printed line containing `needle` (consumed with
 * everything before it). Prints what came when it does not come. */
bool shim_expect(struct shim_proc *f, const char *needle, unsigned int ms);

/* Send it one script line (shim.h), printf-style; "\n" is added. */
void shim_say(struct shim_proc *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* SIGTERM, then wait for it (SIGKILL after 5 s). */
void shim_stop(struct shim_proc *f);

/* Attach with default options to the shim's port "lang0"/"enc0". */
int shim_attach(struct shim_proc *f, const char *port, uint32_t flags,
		struct egw_client **c);

/* Poll until an event for `slot` in `state` (any, with state < 0) comes;
 * the event is copied to *ev, events before it are dropped, events after
 * it stay queued. Waits with egw_client_wait. */
bool wait_event(struct egw_client *c, uint32_t slot, int state,
		unsigned int ms, struct egw_client_event *ev);

#endif
