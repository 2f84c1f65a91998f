/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two gateways' payload drivers in one process, for the driver suites: an
 * encode side that writes and a language side that is written to, each
 * with its configuration, driver and pool, and the REGISTER each would
 * send the other. Blocks are filled with and checked against one pattern.
 */
#ifndef EGW_PAYLOAD_PAIR_H
#define EGW_PAYLOAD_PAIR_H

#include "egw_payload.h"

#define PP_ENC_IP 0x0a000001u
#define PP_LANG_IP 0x0a000002u
#define PP_BLOCKS 8u
#define PP_BLOCK_TOKENS 16u
#define PP_SESSION 0x5e55100000000001ull /* both sides' open() */
/* a small completion ring: one room's batches in flight */
#define PP_MAX_BATCHES (EGW_XFER_MAX_RANKS * EGW_XFER_PIPE)

enum { PP_ENC, PP_LANG };

struct pp_side {
	struct egw_payload_params par;
	uint16_t roles;          /* EGW_ROLE_* */
	const char *name;        /* in its REGISTER */
	struct egw_payload *drv;
	struct egw_pool *pool;
};

struct pp_pair {
	const struct egw_payload_ops *ops;
	struct pp_side side[2];
	uint64_t now;            /* the test's clock, given to the drivers */
};

/* A small pool (PP_BLOCKS blocks) and one peer, the other side; `path`
 * names shm pool files (the language side's is path, "" for verbs). */
void pp_params(struct egw_payload_params *par, uint16_t roles,
	       const char *path);

/* Open both sides; 0 or the first open's error. */
int pp_open(struct pp_pair *pp, const struct egw_payload_ops *ops,
	    const char *path);
/* The same for verbs with payload.window_keys on both sides. */
int pp_open_window_keys(struct pp_pair *pp, const struct egw_payload_ops *ops);
void pp_close(struct pp_pair *pp);
/* Close side `s` and open it again with its parameters as they are now. */
int pp_reopen(struct pp_pair *pp, int s);

/* The REGISTER side `from` sends (as lib/node fills it). */
void pp_register(struct pp_pair *pp, int from, struct egw_register *r);

/* Each side connects to the other; 0 or the first error. */
int pp_connect(struct pp_pair *pp);

/* One EMB write of `tokens` tokens from block `src` to block `dst`. */
struct egw_write pp_emb(const struct pp_pair *pp, uint32_t src, uint32_t dst,
			uint32_t tokens);

/* Fill a block of the encode side's EMB region with the pattern of
 * `seed`; check one on the language side. */
void pp_fill(struct pp_pair *pp, uint32_t block, uint8_t seed);
bool pp_landed(const struct pp_pair *pp, uint32_t block, uint8_t seed,
	       uint32_t tokens);

/* Poll side `s` until nothing more comes (at most `max` completions). */
uint32_t pp_poll(struct pp_pair *pp, int s, struct egw_payload_cpl *c,
		 uint32_t max);

#endif /* EGW_PAYLOAD_PAIR_H */
