/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_PAYLOAD_FAULT_H
#define EGW_PAYLOAD_FAULT_H

/**
 * @file
 * A payload driver for tests that wraps another, open driver (as SPDK's
 * error bdev wraps a bdev): every op goes to the driver underneath, and
 * faults are added where the parameters ask for them. The faults travel
 * the same road a real one would - a write the peer's device refuses - so
 * the wrapped driver's own recovery runs for real. Only test builds of
 * the gateway link it (-Dtest_hooks=true).
 */

#include <stdint.h>

#include "egw_payload.h"

struct egw_payload_fault_params {
	/** At the Nth post() (counted over all peers, from 1), the link to
	 *  that batch's peer fails under it: the batch's first write goes
	 *  just ahead of the batch under a key the peer never gave (verbs:
	 *  the peer's responder refuses it, our QP goes to error, the batch
	 *  and whatever else is in flight flush). 0: never. */
	uint64_t link_error_at;
	/** When the Nth room sent has succeeded (reported by
	 *  egw_payload_fault_room_sent()), the last write posted to each
	 *  peer is remembered; when the next one has succeeded it is posted
	 *  once more, under the key it had: a writer that writes into a
	 *  window after its room ended. 0: never. */
	uint64_t stale_write_at;
};

/** The cookie of the fault's own writes: their completions never leave
 *  the wrapper. The sender's cookies never carry it (their room index
 *  bits are never all set). */
#define EGW_PAYLOAD_FAULT_COOKIE UINT64_MAX

/** Wrap an open driver: `*ops` and `*p` (its ops and instance) are
 *  replaced by the wrapper's. Its ops table is the instance's own, with
 *  the same optional ops present, the same name and disconnect_silent
 *  as the driver's, so the caller sees the driver it configured; its
 *  close() closes the driver too. 0; -EINVAL (ops without post, poll or
 *  close), -ENOMEM: nothing changed. */
int egw_payload_fault_wrap(const struct egw_payload_ops **ops,
			   struct egw_payload **p,
			   const struct egw_payload_fault_params *fp);

/** A room this side sent has succeeded (drives stale_write_at). */
void egw_payload_fault_room_sent(struct egw_payload *p);

/** Faults injected so far. */
uint64_t egw_payload_fault_count(const struct egw_payload *p);

#endif /* EGW_PAYLOAD_FAULT_H */
