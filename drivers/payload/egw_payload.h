/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_PAYLOAD_H
#define EGW_PAYLOAD_H

/**
 * @file
 * Payload transports behind one ops table: register the local pool once,
 * connect a peer from its REGISTER, post a batch of writes, poll
 * completions. Drivers: shm (same host, bounds-checked memcpy into the
 * peer's shared-memory pool) and, with the RoCEv2 issue, verbs.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egw_conf.h"
#include "egw_pool.h"
#include "egw_proto.h"
#include "egw_xfer.h"

struct egw_payload_cpl {
	uint64_t cookie;
	bool ok;
};

struct egw_payload_stats {
	uint64_t batches, writes, bytes, failed_batches, refused_writes;
	uint64_t blocks;    /**< token blocks written (embedding kind) */
	uint64_t cycles;    /**< CPU cycles spent in post() and poll() */
	uint64_t qp_resets; /**< verbs: QPs brought back after an error */
};

/** A cycle counter for the drivers' own cost accounting. */
static inline uint64_t
egw_payload_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return 0;
#endif
}

struct egw_payload;

struct egw_payload_ops {
	const char *name;
	/** Create the driver for one port: it decides where the local pool
	 *  lives (shm: a shared file when this node receives) and returns
	 *  the pool built on it. */
	int (*open)(const struct egw_conf *c, const struct egw_conf_port *port,
		    struct egw_payload **out, struct egw_pool **pool);
	/** What REGISTER tells peers about our memory. */
	void (*describe)(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
			 uint8_t gid[16], uint32_t *qpn);
	/** Our endpoint towards one peer (its own QP for verbs): QPN, PSN,
	 *  path MTU in bytes. Optional: NULL means describe()'s qpn for all. */
	void (*endpoint)(struct egw_payload *p, uint32_t peer, uint32_t *qpn,
			 uint32_t *psn, uint16_t *mtu);
	/** A peer registered: reach its memory. */
	int (*connect)(struct egw_payload *p, uint32_t peer,
		       const struct egw_register *r);
	/** Post writes from the local pool to a peer; completion later. */
	int (*post)(struct egw_payload *p, uint32_t peer,
		    const struct egw_write *w, uint32_t n, uint64_t cookie);
	/** Up to `max` completions. */
	uint32_t (*poll)(struct egw_payload *p, struct egw_payload_cpl *c,
			 uint32_t max);
	void (*stats)(const struct egw_payload *p, struct egw_payload_stats *st);
	void (*close)(struct egw_payload *p);
};

extern const struct egw_payload_ops egw_payload_shm_ops;
#ifdef EGW_HAVE_VERBS
extern const struct egw_payload_ops egw_payload_verbs_ops;
#endif

/** The driver named by the port's configuration, or NULL. */
const struct egw_payload_ops *egw_payload_find(enum egw_payload_driver d);

#endif /* EGW_PAYLOAD_H */
