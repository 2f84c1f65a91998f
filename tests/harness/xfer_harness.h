/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A simulated pair for the xfer tests: one sender engine with its source
 * pool and `nranks` receiver engines (one per TP rank, each with its own
 * pool), joined by an in-memory network on a virtual clock that can drop,
 * duplicate and reorder control messages. Payload writes are memcpy'd
 * between the pools with bounds checks; deliveries are verified byte by
 * byte against a deterministic pattern; every action is also logged so a
 * test can look at exactly what an engine asked for.
 */
#ifndef EGW_XFER_HARNESS_H
#define EGW_XFER_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "egw_xfer.h"

#define W_MAX_RANKS EGW_XFER_MAX_RANKS
#define W_SENDER_PEER_BASE 1 /* sender's peer id for rank r is r + 1 */
#define W_RECEIVER_PEER 0    /* every receiver's peer id for the sender */

struct w_net {
	uint32_t drop_pct, dup_pct;  /* per message, 0..100 */
	uint64_t latency_ns, jitter_ns; /* jitter > 0 reorders */
	uint64_t write_ns;           /* posted writes complete after this */
	uint64_t write_ns_per_kb;    /* plus this per KiB moved */
	bool hold_writes;            /* completions wait for w_release_writes */
	uint32_t hold_mask;          /* same, only for writes to these engines */
	uint32_t cut_mask;           /* engines whose link is cut both ways */
	bool late_writes;            /* writes land when they complete */
};

struct w_log {                   /* a copy of one action */
	int who;                     /* -1 sender, r >= 0 receiver rank r */
	struct egw_act act;
	struct egw_msg msg;
	uint64_t at;
	uint32_t emb_tokens;         /* POST_WRITES: tokens in EMB writes */
	uint32_t aux_writes;         /* POST_WRITES: aux record writes */
	uint32_t dst_engine;
};

struct w_room_result {
	uint64_t room;
	int who;
	int error;                   /* enum egw_err of DONE */
	uint64_t at;
};

struct world {
	uint64_t now;
	uint64_t tick_ns;
	uint16_t nranks;
	struct w_net net;
	uint64_t rng;
	struct egw_pool_geom geom;
	struct egw_xfer_sender *tx;
	struct egw_xfer_receiver *rx[W_MAX_RANKS];
	struct egw_pool *src_pool;
	struct egw_pool *dst_pool[W_MAX_RANKS];
	/* event queue (binary heap on time, then sequence) */
	struct w_ev *ev;
	uint32_t nev, cap_ev;
	uint64_t ev_seq;
	/* observations */
	struct w_log *log;
	uint32_t nlog, cap_log;
	bool keep_log;
	struct w_room_result *res;
	uint32_t nres, cap_res;
	uint64_t delivered_bytes, verified_tokens, expected_bytes;
	uint32_t deliveries, bad_bytes, pool_errors, oob_writes;
	uint64_t last_open_ns;   /* the last DELIVER's open_ns ... */
	uint64_t last_deliver_at; /* ... and the world's time then */
	uint32_t foreign_writes;     /* into blocks the room did not own */
	uint64_t *blk_owner[W_MAX_RANKS]; /* room owning each block (0: none) */
	uint32_t msgs_dropped, msgs_duped;
	uint64_t seq_out;            /* last datagram sequence number */
	bool fail_next_alloc[W_MAX_RANKS]; /* inject one -ENOSPC */
	uint64_t alloc_delay_ns;     /* allocation results arrive this late */
	uint64_t link_busy[W_MAX_RANKS]; /* payload link busy until */
};

struct w_conf {
	uint16_t nranks;
	uint32_t src_capacity, dst_capacity;   /* tokens */
	uint32_t default_tokens;               /* fixed policy */
	const struct egw_policy *policy;       /* or this */
	bool dummy_last_rank;
	struct egw_xfer_conf xc;               /* emit fields are set by us */
	struct w_net net;
	uint64_t seed;
};

void w_conf_default(struct w_conf *c);
struct world *w_create(const struct w_conf *c);
void w_destroy(struct world *w);

/* Open room on the sender and every rank, and give the sender its input
 * (filled with the pattern) when input_total > 0. Returns 0 or -errno. */
int w_open(struct world *w, uint64_t room, uint32_t input_total, bool dummy_last);
int w_input(struct world *w, uint64_t room, uint32_t total);
/* A single-rank room served by receiver engine `engine` (rank 0 of 1). */
int w_open_on(struct world *w, uint64_t room, uint32_t total, uint16_t engine);

/* Run the event loop until nothing is pending and every engine is idle,
 * or until `limit_ns` of virtual time passed. */
void w_run(struct world *w, uint64_t limit_ns);
void w_run_for(struct world *w, uint64_t ns);
/* Complete every held write now (hold_writes). */
void w_release_writes(struct world *w, bool ok);

/* Feed a message directly as if it came from the network. */
int w_to_receiver(struct world *w, uint16_t rank, const struct egw_msg *m);
int w_to_sender(struct world *w, uint16_t rank, const struct egw_msg *m);

/* Observations */
const struct w_room_result *w_result(const struct world *w, uint64_t room, int who);
uint32_t w_count_sends(const struct world *w, int who, uint8_t type);
uint32_t w_count_acts(const struct world *w, int who, enum egw_act_type t);
uint32_t w_blocks_in_use(const struct world *w, int who);
uint64_t w_pattern_bytes(const struct world *w, uint32_t total, bool dummy);

#endif
