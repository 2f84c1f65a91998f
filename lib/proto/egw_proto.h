/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef EGW_PROTO_H
#define EGW_PROTO_H

/**
 * @file
 * The control protocol on the wire (doc/protocol.md is the specification):
 * encode and decode of every message, strictly validated, authenticated
 * with SipHash-2-4 (128-bit output, libsodium) under a key derived from a
 * pre-shared key, with a per-peer replay window. No I/O, no allocation: the
 * caller hands in the UDP payload and gets a decoded struct (or a typed reason
 * it was refused).
 */

#include <stddef.h>
#include <stdint.h>

#include "egw_xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EGW_PROTO_PORT 9471u        /**< default UDP port */
#define EGW_PROTO_MAGIC 0x45475731u /**< "EGW1" */
#define EGW_PROTO_VERSION 3u
#define EGW_PROTO_HDR_LEN 48u
#define EGW_PROTO_TAG_LEN 16u
#define EGW_PROTO_KEY_LEN 32u
/** The tag's key: SipHash-2-4 takes 128 bits. */
#define EGW_PROTO_MAC_KEY_LEN 16u
#define EGW_PROTO_NAME_LEN 32u
/** Longest datagram accepted (longer ones are refused as LONG). */
#define EGW_PROTO_MAX_LEN 512u
/** Longest datagram we build: an INIT or RESUME with EGW_XFER_MAX_RUNS
 *  runs, under the IPv4 minimum reassembly size (576) with its headers. */
#define EGW_PROTO_MAX_DGRAM 348u
#define EGW_PROTO_REPLAY_WINDOW 64u

/** Message types: the xfer ones (1..6) plus REGISTER. */
#define EGW_MSG_REGISTER 7

/* Header flags: EGW_MSGF_* (egw_xfer.h), one set for every message, and
 * REGISTER's own below. */
/** REGISTER: the sender has adopted the session named in peer_session as
 *  the addressee's current incarnation. */
#define EGW_MSGF_ADOPTED 0x8u

/**
 * Why a datagram was refused, X(NAME, text): enum egw_proto_err is
 * EGW_PROTO_ERR_NAME in this order, and each has a counter in egw_proto_stats.
 */
#define EGW_PROTO_ERR_LIST(X) \
	X(OK, "ok") \
	X(SHORT, "datagram shorter than header and tag") \
	X(LONG, "datagram longer than the protocol allows") \
	X(MAGIC, "bad magic") \
	X(VERSION, "unsupported version") \
	X(TYPE, "unknown message type") \
	X(FLAGS, "flag not defined for this type") \
	X(LENGTH, "body length disagrees with the datagram") \
	X(RESERVED, "reserved field not zero") \
	X(MAC, "authentication failed") \
	X(BODY, "body size wrong for the type") \
	X(FIELD, "field out of range") \
	X(REPLAY, "replayed or too old") \
	X(SESSION, "not the peer's adopted session")

enum egw_proto_err {
#define EGW_PROTO_ERR_ENUM_(n, text) EGW_PROTO_ERR_##n,
	EGW_PROTO_ERR_LIST(EGW_PROTO_ERR_ENUM_)
#undef EGW_PROTO_ERR_ENUM_
	EGW_PROTO_ERR_MAX
};

const char *egw_proto_strerror(enum egw_proto_err e);

/** One buffer kind of a peer's pool, as its payload driver exposes it. */
struct egw_region {
	uint64_t addr;       /**< remote address of block 0, token 0 */
	uint32_t rkey;       /**< RDMA rkey (verbs) or 0 (shm) */
	uint32_t unit_bytes; /**< per token, per block for aux; 0: absent */
};

/** REGISTER: who a peer is, how to reach its memory, its pool geometry. */
struct egw_register {
	char name[EGW_PROTO_NAME_LEN]; /**< NUL-padded, printable ASCII */
	uint8_t gid[16];     /**< RoCEv2 GID (IPv4-mapped for RoCEv2) */
	uint32_t qpn;        /**< 24 bits */
	uint32_t psn;        /**< 24 bits */
	uint16_t mtu;        /**< RDMA path MTU in bytes: 256..4096, power of 2 */
	uint16_t roles;      /**< EGW_ROLE_* bits */
	uint32_t block_tokens;
	uint32_t pool_blocks;
	uint32_t hidden_size;
	uint32_t dtype_bytes;
	uint32_t aux_bytes;
	struct egw_region region[EGW_KIND_MAX];
	/** The addressee's session as the sender last heard it (0: none). */
	uint64_t peer_session;
	/** In an ACK: the qpn and psn of the REGISTER it answers, else 0. */
	uint32_t ack_qpn;
	uint32_t ack_psn;
	/** The header seq of the last REGISTER (ACK or not) the sender heard
	 *  from the addressee, 0 if none: the proof that this REGISTER was
	 *  made after the addressee's recent one (adoption needs it). 0
	 *  exactly when peer_session is 0. */
	uint64_t peer_seq;
	/** Not in the body: the header's session of the REGISTER that
	 *  carried this (the registering incarnation), set by decode. */
	uint64_t session;
};

#define EGW_ROLE_ENCODE 0x1u
#define EGW_ROLE_LANGUAGE 0x2u

/** A decoded datagram. */
struct egw_pkt {
	uint8_t type;
	uint16_t flags;
	uint64_t session;    /**< sender's session id (its incarnation) */
	uint64_t seq;        /**< per-session sequence number, from 1 */
	struct egw_msg msg;  /**< types 1..6 (room, rank... copied here too) */
	struct egw_register reg; /**< REGISTER */
};

/** Replay state the receiver keeps for one session of a peer. */
struct egw_proto_replay {
	uint64_t session;    /**< the session this window is for (0: none) */
	uint64_t top;        /**< highest sequence accepted */
	uint64_t bitmap;     /**< bit i: top - i accepted */
};

struct egw_proto_stats {
	uint64_t ok;
	uint64_t refused[EGW_PROTO_ERR_MAX];
};

/**
 * A key schedule: K, the 32-byte hash of the pre-shared key file (what
 * other keys, such as the cluster's key id, are derived from), and the
 * tag's key derived from it once (egw_proto_key_set), never per datagram.
 * Two schedules are the same key exactly when their bytes are equal.
 */
struct egw_proto_key {
	uint8_t k[EGW_PROTO_KEY_LEN];
	/** K_mac = BLAKE2b(out 16, key K, "embgw-mac-v3") (doc/protocol.md) */
	uint8_t mac[EGW_PROTO_MAC_KEY_LEN];
};

/** Call once (libsodium init); 0 or -EIO. */
int egw_proto_init(void);

/** A new session id: random, non-zero (call egw_proto_init first). */
uint64_t egw_proto_session_new(void);

#define EGW_PROTO_KEY_MIN_BYTES 32u

/**
 * The key schedule of a key file's contents: K is BLAKE2b-256 of the bytes,
 * so a key file may be raw random bytes or text (hex, base64) alike; then
 * egw_proto_key_set.
 * @return 0, or -EINVAL when fewer than EGW_PROTO_KEY_MIN_BYTES bytes.
 */
int egw_proto_key_derive(struct egw_proto_key *key, const uint8_t *material,
			 size_t len);

/**
 * The key schedule of K itself: copies it and derives the tag's key.
 * @return 0, or -EINVAL (a NULL argument).
 */
int egw_proto_key_set(struct egw_proto_key *key,
		      const uint8_t k[EGW_PROTO_KEY_LEN]);

/**
 * Encode `m` (types 1..6) into buf; MAC appended; m->error (an enum
 * egw_err) goes out as its wire value. Returns the datagram length, or
 * -EINVAL (bad type, flag, run count or error code), -EMSGSIZE (cap too
 * small); errno values only.
 */
int egw_proto_encode(const struct egw_proto_key *key, uint64_t session,
		     uint64_t seq, const struct egw_msg *m, uint8_t *buf,
		     size_t cap);
/** Encode a REGISTER; `flags`: EGW_MSGF_ACK (the answer to one) and
 *  EGW_MSGF_ADOPTED (r->peer_session is adopted; it must not be 0).
 *  Returns the datagram length, or -EINVAL, -EMSGSIZE as
 *  egw_proto_encode. */
int egw_proto_encode_register(const struct egw_proto_key *key,
			      uint64_t session, uint64_t seq, uint16_t flags,
			      const struct egw_register *r, uint8_t *buf,
			      size_t cap);

/**
 * Decode and authenticate a datagram; the error field of STATUS, ABORT and
 * ERROR comes back as an enum egw_err (egw_err_from_wire). Never reads
 * past `len`, never
 * allocates. Structure is checked before the MAC, the body after it: no
 * field of an unauthenticated datagram is ever interpreted. Replay is the
 * caller's next step (egw_proto_replay_check), once it knows the peer.
 * @return EGW_PROTO_ERR_OK or the reason; `stats`, if given, is counted.
 */
enum egw_proto_err egw_proto_decode(const struct egw_proto_key *key,
				    const uint8_t *buf, size_t len,
				    struct egw_pkt *out,
				    struct egw_proto_stats *stats);

/**
 * Accept (session, seq) at most once: a session other than the window's
 * is refused (EGW_PROTO_ERR_SESSION: which sessions a peer may use is the
 * caller's decision, see egw_proto_replay_start), within it a sequence number
 * is accepted once and only if it is within the window below the highest.
 * Updates `r` only on success.
 */
enum egw_proto_err egw_proto_replay_check(struct egw_proto_replay *r,
					  uint64_t session, uint64_t seq);
/** Start the window for `session` at `seq` (accepted): top = seq, bitmap
 *  = 1. */
void egw_proto_replay_start(struct egw_proto_replay *r, uint64_t session,
			    uint64_t seq);

#ifdef __cplusplus
}
#endif

#endif /* EGW_PROTO_H */
