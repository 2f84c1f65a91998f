/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_ERR_H
#define EGW_ERR_H

/**
 * @file
 * The one list of embgw's protocol and failure codes, at the bottom of the
 * house: lib/xfer, lib/proto, lib/engines and the client library all read
 * it, so a code, its wire value, its key and its texts are written once.
 *
 * Every function of the egw_ libraries returns 0 (or a count) on success
 * and a negative value on failure, which is one of two kinds that never
 * overlap:
 *  - a negated errno value (-EINVAL, -ENOMEM, ...): bad arguments, no
 *    memory, a role the object lacks; errno values are far below
 *    EGW_ERR_BASE;
 *  - a negated enum egw_err (-EGW_E_BUSY, ...): the protocol refused or a
 *    room failed; these are all above EGW_ERR_BASE.
 * Each function says which kinds it returns. egw_strerror() turns any of
 * them (and a positive enum egw_err) into text; egw_rc_is_err() tells the
 * two kinds apart.
 *
 * On the wire (ERROR, ABORT and STATUS `error`, doc/protocol.md) a code
 * travels as its wire value, 0 for EGW_E_OK and 1..EGW_E_COUNT-1 for the
 * others; lib/proto converts with egw_err_to_wire() and egw_err_from_wire().
 * The wire value is also the index of the per-reason counters in struct
 * egw_xfer_stats, and a client sees -(EGW_ERR_BASE + wire) (doc/client.md).
 * Wire values are a contract: a new code takes the next value, none is
 * ever renumbered or reused. egw_err.c checks at build time that the list
 * is dense, in order, and that every row has its key and texts.
 */

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_ERR_BASE 1000

/**
 * X(NAME, wire, key, text, brief): one row per code, in wire order.
 *  - EGW_E_NAME is the enum value (EGW_ERR_BASE + wire; OK is 0);
 *  - key: a stable lower_snake name for reports and scripts;
 *  - text: what the gateway's logs say (egw_strerror);
 *  - brief: the short reason a client reads (egw_client_strerror).
 */
#define EGW_ERR_LIST(X)                                                        \
	X(OK, 0, "ok", "ok", "ok")                                             \
	/* no such room (yet, or any more) */                                  \
	X(UNKNOWN_ROOM, 1, "unknown_room", "unknown room", "unknown room")     \
	/* rank >= nranks, nranks differs, foreign peer */                     \
	X(BAD_RANK, 2, "bad_rank", "bad rank or foreign peer", "bad rank")     \
	X(BLOCK_TOKENS, 3, "block_tokens",                                     \
	  "block_tokens differs between the sides", "block_tokens mismatch")   \
	X(ALLOC_MISMATCH, 4, "alloc_mismatch",                                 \
	  "allocated tokens != blocks x block_tokens", "allocation mismatch")  \
	X(ZERO_BLOCKS, 5, "zero_blocks", "window without blocks",              \
	  "zero blocks")                                                       \
	/* blocks out of the peer's pool, or overlapping */                    \
	X(BAD_BLOCKS, 6, "bad_blocks",                                         \
	  "blocks outside the pool or overlapping", "bad blocks")              \
	X(BEYOND_TOTAL, 7, "beyond_total",                                     \
	  "window starts at or beyond the total", "beyond the total")          \
	X(STATE, 8, "state", "message not valid in this state", "wrong state") \
	/* a second, different total announced */                              \
	X(TOTAL_CHANGED, 9, "total_changed",                                   \
	  "total differs from the one announced", "total changed")             \
	/* landed > allocated, landed > total, ... */                          \
	X(BAD_STATUS, 10, "bad_status", "inconsistent status", "bad status")   \
	/* too many windows outstanding; retry later */                        \
	X(BUSY, 11, "busy", "too many windows outstanding", "busy")            \
	/* total beyond EGW_XFER_MAX_TOKENS or run slots */                    \
	X(TOO_LARGE, 12, "too_large", "total or run list too large",           \
	  "too large")                                                         \
	X(NO_SLOT, 13, "no_slot", "room table full", "no slot")                \
	/* open of a room that exists */                                       \
	X(DUPLICATE_ROOM, 14, "duplicate_room", "room already open",           \
	  "duplicate room")                                                    \
	X(TIMEOUT_BOOTSTRAP, 15, "timeout_bootstrap",                          \
	  "bootstrap deadline passed", "timeout: bootstrap")                   \
	X(TIMEOUT_INPUT, 16, "timeout_input",                                  \
	  "waiting-for-input deadline passed", "timeout: input")               \
	X(TIMEOUT_ROUND, 17, "timeout_round",                                  \
	  "no transfer progress before the round deadline", "timeout: round")  \
	X(POOL_EXHAUSTED, 18, "pool_exhausted",                                \
	  "pool exhausted until the allocation deadline", "pool exhausted")    \
	X(PEER_DEAD, 19, "peer_dead",                                          \
	  "peer dead (silent past its deadline) or restarted", "peer dead")    \
	/* the peer or the local app aborted the room */                       \
	X(ABORTED, 20, "aborted", "aborted", "aborted")                        \
	X(TRANSPORT, 21, "transport", "payload writes failed",                 \
	  "transport: payload writes failed")                                  \
	X(UNKNOWN_PEER, 22, "unknown_peer", "unknown peer", "unknown peer")    \
	/* REGISTER: the pool geometries differ */                             \
	X(GEOMETRY, 23, "geometry", "pool geometries differ",                  \
	  "pool geometries differ")                                            \
	/* REGISTER: its memory cannot be reached */                           \
	X(UNREACHABLE, 24, "unreachable", "peer memory unreachable",           \
	  "peer memory unreachable")                                           \
	/* REGISTER: not the name configured for the sender */                 \
	X(NAME, 25, "name", "name not the one configured for the peer",        \
	  "name not configured")                                               \
	/* local only, never on the wire (EGW_E_WIRE_COUNT): the peer was      \
	 * removed from the configuration or the cluster while the room        \
	 * was open */                                                         \
	X(PEER_REMOVED, 26, "peer_removed",                                    \
	  "peer removed from the configuration or the cluster",                \
	  "peer removed")

/** Protocol and failure codes: carried in ERROR/ABORT/STATUS and in stats. */
enum egw_err {
#define EGW_ERR_ENUM_(n, w, key, text, brief) \
	EGW_E_##n = (w) == 0 ? 0 : EGW_ERR_BASE + (w),
	EGW_ERR_LIST(EGW_ERR_ENUM_)
#undef EGW_ERR_ENUM_
	EGW_E_END /**< one past the last code; not a code */
};

/** Number of codes, EGW_E_OK included (indexes of per-code counters). */
#define EGW_E_COUNT (EGW_E_END - EGW_ERR_BASE)
/** Codes a datagram may carry: 0..EGW_E_WIRE_COUNT-1. The codes past
 *  them are local reasons only (a room's end as its own gateway saw it);
 *  the wire carries ABORTED for them. */
#define EGW_E_WIRE_COUNT 26

/** Wire value of a code (0..EGW_E_COUNT-1); UINT16_MAX for a non-code. */
static inline uint16_t
egw_err_to_wire(enum egw_err e)
{
	if (e == EGW_E_OK)
		return 0;
	if ((int)e > EGW_ERR_BASE && (int)e < (int)EGW_E_END)
		return (uint16_t)((int)e - EGW_ERR_BASE);
	return UINT16_MAX;
}

/** Code of a wire value; EGW_E_END for a value that is no code. */
static inline enum egw_err
egw_err_from_wire(uint16_t wire)
{
	if (wire == 0)
		return EGW_E_OK;
	if (wire < EGW_E_COUNT)
		return (enum egw_err)(EGW_ERR_BASE + wire);
	return EGW_E_END;
}

/** Whether a return value is a negated enum egw_err (not 0, not -errno). */
static inline bool
egw_rc_is_err(int rc)
{
	return rc < -EGW_ERR_BASE && rc > -(int)EGW_E_END;
}

/**
 * Text for any return value of the egw_ libraries: 0, -errno, -enum
 * egw_err, or a positive enum egw_err (as in EGW_ACT_DONE). Never NULL.
 */
const char *egw_strerror(int rc);
/**
 * A code's stable lower_snake key ("pool_exhausted", ...), for reports
 * and scripts (egw_strerror is text for people): 0 or a code, negated or
 * not; "unknown_error" for anything else.
 */
const char *egw_err_key(int rc);

#ifdef __cplusplus
}
#endif

#endif /* EGW_ERR_H */
