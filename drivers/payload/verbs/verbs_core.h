/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the verbs driver decides without a device: which GID table entry
 * carries the port's address, how deep a QP's send queue is, how a batch
 * of writes becomes a chain of RDMA WRITE work requests and which of them
 * are signalled, and what one completion means. Only rdma-core's types
 * are used here, no ibv_* call, so the unit tests run all of it on plain
 * tables; payload_verbs.c does the device calls around it.
 */
#ifndef EGW_VERBS_CORE_H
#define EGW_VERBS_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "egw_payload.h"

#define VERBS_SIGNAL_EVERY 64u  /* at most this many WRs per signalled one */
#define VERBS_MAX_CHAIN 4096u   /* WRs chained per peer between two polls */
#define VERBS_MAX_SQ 4096u      /* the deepest send queue asked for */
#define VERBS_NO_BATCH 0xffffffffu /* wr_id slot of a WR that ends no batch */
/* the GRH hop limit when none is given: a hop limit of 1 does not cross
 * a router, 64 crosses any fabric's */
#define VERBS_HOP_LIMIT 64u
/* wr_id slot of a window's bind or invalidation: this bit, the post's
 * sequence number (7 bits) and the window's first block (24 bits) */
#define VERBS_WINDOW_BIT 0x80000000u
#define VERBS_WINDOW_MAX_BLOCKS (1u << 24)

/** Index of the RoCEv2 entry whose GID is ::ffff:`addr` (IPv4, host
 *  order) in a GID table as read from the port, or -1. */
int verbs_gid_pick(const struct ibv_gid_entry *t, uint32_t n, uint32_t addr);

/** "[i] gid type, ..." for an error message; `out` always terminated. */
void verbs_gid_list(const struct ibv_gid_entry *t, uint32_t n, char *out,
		    size_t size);

/** The send queue depth to create QPs with, given the device's
 *  max_qp_wr; 0 when the device allows none. */
uint32_t verbs_sq_depth(int max_qp_wr);

/** The bytes of kind `k` that a window over blocks [start, start + count)
 *  of `pool` covers: its address and length; false for a kind the pool
 *  does not have or a run outside it. */
bool verbs_window_range(const struct egw_pool *pool, enum egw_kind k,
			uint32_t start, uint32_t count, uint64_t *addr,
			uint64_t *len);

/** A work request's wr_id: which peer, QP generation and batch slot it
 *  completes, and how many WRs (itself and the unsignalled ones before
 *  it) its completion frees in the send queue. */
struct verbs_wr_id {
	uint32_t peer;
	uint8_t gen;
	uint32_t covered;
	uint32_t slot;           /* VERBS_NO_BATCH: ends no batch */
};

uint64_t verbs_wr_id_make(const struct verbs_wr_id *id);
struct verbs_wr_id verbs_wr_id_parse(uint64_t wr_id);

/** One peer's send side. `wr` and `sge` hold VERBS_MAX_CHAIN entries. */
struct verbs_sq {
	struct ibv_send_wr *wr;  /* chained since the last poll */
	struct ibv_sge *sge;
	uint32_t nchain;
	uint32_t depth;          /* the QP's max_send_wr */
	uint32_t used;           /* WRs posted, not yet known complete */
	uint8_t gen;             /* bumped on every reset of the QP */
};

/** Batches between post() and their completion, and the completions
 *  waiting for poll(); sized at open for what the engines keep in
 *  flight. */
struct verbs_flight {
	struct verbs_batch {
		uint64_t cookie;
		uint32_t peer;
		uint8_t gen;
		bool in_use;
	} *b;
	uint32_t size, next, in_use;
	struct egw_payload_ring ring;
	struct egw_payload_stats st;
};

int verbs_flight_init(struct verbs_flight *f, uint32_t size);
void verbs_flight_free(struct verbs_flight *f);

/** What post() has to know about the peer besides its send queue. */
struct verbs_dest {
	uint32_t peer;
	const struct egw_register *reg; /* its regions, rkeys, block size */
	bool usable;             /* connected, and the peer knows our PSN */
	uint32_t lkey;           /* our pool's */
};

/**
 * Chain one batch of writes from `pool` onto `q`.
 *
 * -ENOBUFS, nothing taken, when the completion ring could not hold the
 * completions of every batch in flight and this one: a reset turns all
 * batches in flight into completions at once, and they must fit.
 * Otherwise 0: the batch is taken whole, or fails whole now (a completion
 * with ok = false) when the peer is not usable, a write lies outside its
 * regions, or the batch would overflow the chain or the send queue. Every
 * VERBS_SIGNAL_EVERY-th WR and the last of the batch are signalled: the
 * send queue is freed in steps and the batch completes with its last WR
 * (an RC QP completes in order).
 */
int verbs_chain_batch(struct verbs_flight *f, struct verbs_sq *q,
		      const struct verbs_dest *d, const struct egw_pool *pool,
		      const struct egw_write *w, uint32_t n, uint64_t cookie);

/** Link the chain for one ibv_post_send; NULL when nothing is chained. */
struct ibv_send_wr *verbs_chain_link(struct verbs_sq *q);

/** The linked chain went to the device (posted) or did not. */
void verbs_chain_done(struct verbs_sq *q, bool posted);

/**
 * The QP of `peer` is being reset: every batch in flight on it fails
 * (its rooms fail now, not at their deadline), the chain is dropped and
 * the generation moves on, so completions still on the way from before
 * the reset are recognised and ignored.
 */
void verbs_sq_restart(struct verbs_flight *f, struct verbs_sq *q,
		      uint32_t peer);

enum verbs_cpl {
	VERBS_CPL_STALE,         /* from before a reset: ignored */
	VERBS_CPL_PROGRESS,      /* send queue room back, no batch ends */
	VERBS_CPL_DONE,          /* a batch completed */
	VERBS_CPL_FAILED,        /* the QP is in error: restart it */
};

/** Apply one completion of the peer's QP (`id` parsed from its wr_id). */
enum verbs_cpl verbs_cpl_apply(struct verbs_flight *f, struct verbs_sq *q,
			       const struct verbs_wr_id *id,
			       enum ibv_wc_status status);

#endif /* EGW_VERBS_CORE_H */
