/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire format. Everything is big-endian and read through the get/put
 * helpers below with the offset checked against the datagram length first,
 * so no read can pass the end. The order of checks is fixed: size, magic,
 * version, type, flags, lengths, reserved header fields - then the MAC over
 * header and body - and only then the body's fields.
 */
#include <errno.h>
#include <string.h>

#include <sodium.h>

#include "egw_proto.h"

/* The numbers below are on the wire (doc/protocol.md): never renumber. */
_Static_assert(EGW_MSG_INIT == 1 && EGW_MSG_ERROR == 6 && EGW_MSG_REGISTER == 7,
	       "message types are wire values");
/* Error codes travel as their wire values (egw_err_to_wire): the enum
 * lives above EGW_ERR_BASE so that it never reads as an errno value, and
 * its order is the wire order. */
_Static_assert(EGW_E_UNKNOWN_ROOM - EGW_ERR_BASE == 1 &&
		       EGW_E_BUSY - EGW_ERR_BASE == 11 &&
		       EGW_E_POOL_EXHAUSTED - EGW_ERR_BASE == 18 &&
		       EGW_E_UNKNOWN_PEER - EGW_ERR_BASE == 22 &&
		       EGW_E_GEOMETRY - EGW_ERR_BASE == 23 &&
		       EGW_E_UNREACHABLE - EGW_ERR_BASE == 24 &&
		       EGW_E_NAME - EGW_ERR_BASE == 25 &&
		       EGW_E_WIRE_COUNT == 26,
	       "error codes keep their wire values");
_Static_assert(EGW_ST_BOOTSTRAPPING == 0 && EGW_ST_FAILED == 4,
	       "states are wire values");
_Static_assert(EGW_MSGF_DUMMY == 1 && EGW_MSGF_ACK == 2 && EGW_MSGF_POLL == 4 &&
	       EGW_MSGF_ADOPTED == 8, "flags are wire values");

/* A code as the wire carries it: a local-only reason (past
 * EGW_E_WIRE_COUNT) goes out as ABORTED, which every peer reads. */
static uint16_t
wire_code(uint16_t error)
{
	uint16_t w = egw_err_to_wire((enum egw_err)error);

	if (w != UINT16_MAX && w >= EGW_E_WIRE_COUNT)
		return egw_err_to_wire(EGW_E_ABORTED);
	return w;
}

#define PE_TEXT(n, text) text,
static const char *const pe_names[EGW_PROTO_ERR_MAX] = {
	EGW_PROTO_ERR_LIST(PE_TEXT)
};
#undef PE_TEXT

const char *
egw_proto_strerror(enum egw_proto_err e)
{
	if ((unsigned)e >= EGW_PROTO_ERR_MAX)
		return "unknown error";
	return pe_names[e];
}

int
egw_proto_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

uint64_t
egw_proto_session_new(void)
{
	uint64_t s = 0;

	/* random: a restart is a new incarnation whatever the clock says */
	while (s == 0)
		randombytes_buf(&s, sizeof(s));
	return s;
}

/* The label of the tag's key: a version's own, so that no tag of one
 * version is ever valid in another, and apart from every other key taken
 * from K (the cluster's key id hashes its own label). */
#define MAC_KEY_LABEL "embgw-mac-v3"

int
egw_proto_key_set(struct egw_proto_key *key, const uint8_t k[EGW_PROTO_KEY_LEN])
{
	uint8_t copy[EGW_PROTO_KEY_LEN];

	if (key == NULL || k == NULL)
		return -EINVAL;
	memcpy(copy, k, sizeof(copy)); /* k may be key->k itself */
	memset(key, 0, sizeof(*key));
	memcpy(key->k, copy, sizeof(copy));
	crypto_generichash(key->mac, EGW_PROTO_MAC_KEY_LEN,
			   (const uint8_t *)MAC_KEY_LABEL,
			   sizeof(MAC_KEY_LABEL) - 1, copy, sizeof(copy));
	sodium_memzero(copy, sizeof(copy));
	return 0;
}

int
egw_proto_key_derive(struct egw_proto_key *key, const uint8_t *material,
		     size_t len)
{
	uint8_t k[EGW_PROTO_KEY_LEN];
	int rc;

	if (key == NULL || material == NULL || len < EGW_PROTO_KEY_MIN_BYTES)
		return -EINVAL;
	/* a distinct personalisation keeps this hash apart from the others */
	crypto_generichash(k, sizeof(k), material, len,
			   (const uint8_t *)"embgw-psk-key-v1", 16);
	rc = egw_proto_key_set(key, k);
	sodium_memzero(k, sizeof(k));
	return rc;
}

/* ---- byte helpers ------------------------------------------------------ */

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

static uint64_t
get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

/* ---- layout ------------------------------------------------------------ */

enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_TYPE = 5,
	H_FLAGS = 6,
	H_BODY_LEN = 8,
	H_RANK = 10,
	H_NRANKS = 12,
	H_RANKS = 14,
	H_SESSION = 16,
	H_ROOM = 24,
	H_OFFSET = 32,
	H_RSV2 = 36,
	H_SEQ = 40,
};

#define WIN_FIXED 28u     /* INIT/RESUME body before the runs */
#define STATUS_BODY 16u
#define ABORT_BODY 4u
#define ERROR_BODY 4u
#define REGISTER_BODY 168u

/* REGISTER body offsets (doc/protocol.md) */
enum {
	R_NAME = 0, R_GID = 32, R_QPN = 48, R_PSN = 52, R_MTU = 56, R_ROLES = 58,
	R_BLOCK_TOKENS = 60, R_POOL_BLOCKS = 64, R_HIDDEN = 68, R_DTYPE = 72,
	R_AUX = 76, R_REGIONS = 80, R_PEER_SESSION = 144, R_ACK_QPN = 152,
	R_ACK_PSN = 156, R_PEER_SEQ = 160,
};

_Static_assert(EGW_PROTO_HDR_LEN + WIN_FIXED + 8u * EGW_XFER_MAX_RUNS +
	       EGW_PROTO_TAG_LEN == EGW_PROTO_MAX_DGRAM &&
	       EGW_PROTO_MAX_DGRAM <= EGW_PROTO_MAX_LEN &&
	       EGW_PROTO_HDR_LEN + REGISTER_BODY + EGW_PROTO_TAG_LEN <
	       EGW_PROTO_MAX_DGRAM, "the largest datagram is a full window");

/* A room message's `ranks`: 0 (just `rank`), or a set of the room's ranks
 * whose lowest member is `rank`. An aux-only INIT speaks for one rank:
 * a group always receives tokens. */
static bool
ranks_ok(uint8_t type, uint16_t flags, uint16_t rank, uint16_t nranks,
	 uint16_t ranks)
{
	if (ranks == 0)
		return true;
	if (nranks == 0 || nranks > EGW_XFER_MAX_RANKS ||
	    (ranks >> nranks) != 0 || rank >= nranks ||
	    (ranks & ((1u << (rank + 1)) - 1)) != (1u << rank))
		return false;
	return !(type == EGW_MSG_INIT && (flags & EGW_MSGF_DUMMY) &&
		 ranks != (1u << rank));
}

static uint16_t
allowed_flags(uint8_t type)
{
	switch (type) {
	case EGW_MSG_INIT:
		return EGW_MSGF_DUMMY;
	case EGW_MSG_REGISTER:
		return EGW_MSGF_ACK | EGW_MSGF_ADOPTED;
	case EGW_MSG_ABORT:
		return EGW_MSGF_ACK;
	case EGW_MSG_STATUS:
		return EGW_MSGF_POLL;
	default:
		return 0;
	}
}

static void
put_header(uint8_t *b, uint8_t type, uint16_t flags, uint16_t body_len,
	   uint64_t session, uint64_t seq, const struct egw_msg *m)
{
	memset(b, 0, EGW_PROTO_HDR_LEN);
	put32(b + H_MAGIC, EGW_PROTO_MAGIC);
	b[H_VERSION] = EGW_PROTO_VERSION;
	b[H_TYPE] = type;
	put16(b + H_FLAGS, flags);
	put16(b + H_BODY_LEN, body_len);
	put64(b + H_SESSION, session);
	put64(b + H_SEQ, seq);
	if (m != NULL) {
		put16(b + H_RANK, m->rank);
		put16(b + H_NRANKS, m->nranks);
		put16(b + H_RANKS, m->ranks);
		put64(b + H_ROOM, m->room);
		put32(b + H_OFFSET, m->offset);
	}
}

_Static_assert(crypto_shorthash_siphashx24_BYTES == EGW_PROTO_TAG_LEN &&
		       crypto_shorthash_siphashx24_KEYBYTES ==
			       EGW_PROTO_MAC_KEY_LEN &&
		       crypto_verify_16_BYTES == EGW_PROTO_TAG_LEN,
	       "the tag is SipHash-2-4's 128-bit output under a 128-bit key");

/* SipHash-2-4 is made for short inputs: a whole datagram (64..348 bytes)
 * costs tens of nanoseconds, where a keyed BLAKE2b costs its 128-byte
 * compressions (doc/benchmarks.md, "mac"). */
static void
mac(const struct egw_proto_key *key, const uint8_t *b, size_t n,
    uint8_t tag[EGW_PROTO_TAG_LEN])
{
	crypto_shorthash_siphashx24(tag, b, n, key->mac);
}

static int
finish(const struct egw_proto_key *key, uint8_t *buf, size_t body_len)
{
	size_t n = EGW_PROTO_HDR_LEN + body_len;

	mac(key, buf, n, buf + n);
	return (int)(n + EGW_PROTO_TAG_LEN);
}

/* ---- encode ------------------------------------------------------------ */

int
egw_proto_encode(const struct egw_proto_key *key, uint64_t session,
		 uint64_t seq, const struct egw_msg *m, uint8_t *buf,
		 size_t cap)
{
	size_t body = 0;
	uint8_t *p;

	if (key == NULL || m == NULL || buf == NULL)
		return -EINVAL;
	p = buf + EGW_PROTO_HDR_LEN;
	switch (m->type) {
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		if (m->nruns > EGW_XFER_MAX_RUNS)
			return -EINVAL;
		body = WIN_FIXED + 8u * m->nruns;
		break;
	case EGW_MSG_STATUS:
		body = STATUS_BODY;
		break;
	case EGW_MSG_HEARTBEAT:
		break;
	case EGW_MSG_ABORT:
		body = ABORT_BODY;
		break;
	case EGW_MSG_ERROR:
		body = ERROR_BODY;
		break;
	default:
		return -EINVAL;
	}
	if ((m->flags & ~allowed_flags(m->type)) != 0)
		return -EINVAL;
	if (m->type != EGW_MSG_HEARTBEAT &&
	    !ranks_ok(m->type, m->flags, m->rank, m->nranks, m->ranks))
		return -EINVAL;
	if ((m->type == EGW_MSG_STATUS || m->type == EGW_MSG_ABORT ||
	     m->type == EGW_MSG_ERROR) &&
	    wire_code(m->error) == UINT16_MAX)
		return -EINVAL;
	if ((m->type == EGW_MSG_ABORT || m->type == EGW_MSG_ERROR) &&
	    m->error == EGW_E_OK)
		return -EINVAL; /* no code: nothing the peer could read */
	if (cap < EGW_PROTO_HDR_LEN + body + EGW_PROTO_TAG_LEN)
		return -EMSGSIZE;
	put_header(buf, m->type, m->flags, (uint16_t)body, session, seq,
		   m->type == EGW_MSG_HEARTBEAT ? NULL : m);
	memset(p, 0, body);
	switch (m->type) {
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		put32(p, m->block_tokens);
		put32(p + 4, m->alloc_tokens);
		put16(p + 8, m->nruns);
		for (int k = 0; k < EGW_KIND_MAX; k++)
			put32(p + 12 + 4 * k, m->rkeys[k]);
		for (uint16_t i = 0; i < m->nruns; i++) {
			put32(p + WIN_FIXED + 8u * i, m->runs[i].start);
			put32(p + WIN_FIXED + 8u * i + 4, m->runs[i].count);
		}
		break;
	case EGW_MSG_STATUS:
		p[0] = m->state;
		put16(p + 2, wire_code(m->error));
		put32(p + 4, m->total_tokens);
		put32(p + 8, m->landed_tokens);
		put32(p + 12, m->accepted_tokens);
		break;
	case EGW_MSG_ABORT:
		put16(p, wire_code(m->error));
		put16(p + 2, m->abort_id);
		break;
	case EGW_MSG_ERROR:
		p[0] = m->state; /* the refused request's type */
		put16(p + 2, wire_code(m->error));
		break;
	default:
		break;
	}
	return finish(key, buf, body);
}

int
egw_proto_encode_register(const struct egw_proto_key *key, uint64_t session,
			  uint64_t seq, uint16_t flags,
			  const struct egw_register *r, uint8_t *buf, size_t cap)
{
	uint8_t *p;

	if (key == NULL || r == NULL || buf == NULL ||
	    (flags & ~allowed_flags(EGW_MSG_REGISTER)) != 0 ||
	    ((flags & EGW_MSGF_ADOPTED) && r->peer_session == 0) ||
	    (r->peer_session == 0) != (r->peer_seq == 0))
		return -EINVAL;
	p = buf + EGW_PROTO_HDR_LEN;
	if (cap < EGW_PROTO_HDR_LEN + REGISTER_BODY + EGW_PROTO_TAG_LEN)
		return -EMSGSIZE;
	put_header(buf, EGW_MSG_REGISTER, flags, REGISTER_BODY, session, seq,
		   NULL);
	memset(p, 0, REGISTER_BODY);
	memcpy(p + R_NAME, r->name, EGW_PROTO_NAME_LEN);
	memcpy(p + R_GID, r->gid, 16);
	put32(p + R_QPN, r->qpn);
	put32(p + R_PSN, r->psn);
	put16(p + R_MTU, r->mtu);
	put16(p + R_ROLES, r->roles);
	put32(p + R_BLOCK_TOKENS, r->block_tokens);
	put32(p + R_POOL_BLOCKS, r->pool_blocks);
	put32(p + R_HIDDEN, r->hidden_size);
	put32(p + R_DTYPE, r->dtype_bytes);
	put32(p + R_AUX, r->aux_bytes);
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		put64(p + R_REGIONS + 16 * k, r->region[k].addr);
		put32(p + R_REGIONS + 8 + 16 * k, r->region[k].rkey);
		put32(p + R_REGIONS + 12 + 16 * k, r->region[k].unit_bytes);
	}
	put64(p + R_PEER_SESSION, r->peer_session);
	put32(p + R_ACK_QPN, r->ack_qpn);
	put32(p + R_ACK_PSN, r->ack_psn);
	put64(p + R_PEER_SEQ, r->peer_seq);
	return finish(key, buf, REGISTER_BODY);
}

/* ---- decode ------------------------------------------------------------ */

static enum egw_proto_err
check_body_size(uint8_t type, size_t body, const uint8_t *p)
{
	switch (type) {
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		/* nruns is read only once the fixed part is known present */
		if (body < WIN_FIXED)
			return EGW_PROTO_ERR_BODY;
		if (get16(p + 8) > EGW_XFER_MAX_RUNS)
			return EGW_PROTO_ERR_FIELD;
		return body == WIN_FIXED + 8u * get16(p + 8) ?
			       EGW_PROTO_ERR_OK :
			       EGW_PROTO_ERR_BODY;
	case EGW_MSG_STATUS:
		return body == STATUS_BODY ? EGW_PROTO_ERR_OK :
					     EGW_PROTO_ERR_BODY;
	case EGW_MSG_HEARTBEAT:
		return body == 0 ? EGW_PROTO_ERR_OK : EGW_PROTO_ERR_BODY;
	case EGW_MSG_ABORT:
		return body == ABORT_BODY ? EGW_PROTO_ERR_OK :
					    EGW_PROTO_ERR_BODY;
	case EGW_MSG_ERROR:
		return body == ERROR_BODY ? EGW_PROTO_ERR_OK :
					    EGW_PROTO_ERR_BODY;
	case EGW_MSG_REGISTER:
		return body == REGISTER_BODY ? EGW_PROTO_ERR_OK :
					       EGW_PROTO_ERR_BODY;
	default:
		return EGW_PROTO_ERR_TYPE;
	}
}

static bool
printable_name(const uint8_t *n)
{
	size_t i = 0;

	while (i < EGW_PROTO_NAME_LEN && n[i] != 0) {
		if (n[i] < 0x21 || n[i] > 0x7e)
			return false;
		i++;
	}
	if (i == 0 || i == EGW_PROTO_NAME_LEN)
		return false; /* 1..31 characters and at least one NUL */
	for (; i < EGW_PROTO_NAME_LEN; i++)
		if (n[i] != 0)
			return false; /* NUL padding only */
	return true;
}

static enum egw_proto_err
parse_register(const uint8_t *p, uint16_t flags, struct egw_register *r)
{
	memset(r, 0, sizeof(*r));
	if (!printable_name(p + R_NAME))
		return EGW_PROTO_ERR_FIELD;
	memcpy(r->name, p + R_NAME, EGW_PROTO_NAME_LEN);
	r->name[EGW_PROTO_NAME_LEN - 1] = '\0';
	memcpy(r->gid, p + R_GID, 16);
	r->qpn = get32(p + R_QPN);
	r->psn = get32(p + R_PSN);
	r->mtu = get16(p + R_MTU);
	r->roles = get16(p + R_ROLES);
	r->block_tokens = get32(p + R_BLOCK_TOKENS);
	r->pool_blocks = get32(p + R_POOL_BLOCKS);
	r->hidden_size = get32(p + R_HIDDEN);
	r->dtype_bytes = get32(p + R_DTYPE);
	r->aux_bytes = get32(p + R_AUX);
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		r->region[k].addr = get64(p + R_REGIONS + 16 * k);
		r->region[k].rkey = get32(p + R_REGIONS + 8 + 16 * k);
		r->region[k].unit_bytes = get32(p + R_REGIONS + 12 + 16 * k);
	}
	r->peer_session = get64(p + R_PEER_SESSION);
	r->ack_qpn = get32(p + R_ACK_QPN);
	r->ack_psn = get32(p + R_ACK_PSN);
	r->peer_seq = get64(p + R_PEER_SEQ);
	/* only an ACK echoes an endpoint; ADOPTED must name a session;
	 * peer_session and peer_seq come from the same REGISTER heard */
	if (((flags & EGW_MSGF_ACK) == 0 && (r->ack_qpn || r->ack_psn)) ||
	    r->ack_qpn > 0xffffffu || r->ack_psn > 0xffffffu ||
	    ((flags & EGW_MSGF_ADOPTED) && r->peer_session == 0) ||
	    (r->peer_session == 0) != (r->peer_seq == 0))
		return EGW_PROTO_ERR_FIELD;
	if (r->qpn > 0xffffffu || r->psn > 0xffffffu ||
	    r->mtu < 256 || r->mtu > 4096 || (r->mtu & (r->mtu - 1)) != 0 ||
	    r->roles == 0 || (r->roles & ~(EGW_ROLE_ENCODE | EGW_ROLE_LANGUAGE)) ||
	    r->block_tokens == 0 || r->pool_blocks == 0 ||
	    r->hidden_size == 0 ||
	    (r->dtype_bytes != 1 && r->dtype_bytes != 2 && r->dtype_bytes != 4) ||
	    r->aux_bytes < sizeof(struct egw_aux_rec))
		return EGW_PROTO_ERR_FIELD;
	return EGW_PROTO_ERR_OK;
}

static enum egw_proto_err
parse_body(const uint8_t *b, size_t body, struct egw_pkt *out)
{
	const uint8_t *p = b + EGW_PROTO_HDR_LEN;
	struct egw_msg *m = &out->msg;
	uint8_t type = out->type;
	uint16_t wire_err = 0;

	if (type == EGW_MSG_REGISTER) {
		if (get16(b + H_RANK) || get16(b + H_NRANKS) ||
		    get16(b + H_RANKS) || get64(b + H_ROOM) ||
		    get32(b + H_OFFSET))
			return EGW_PROTO_ERR_FIELD;
		return parse_register(p, out->flags, &out->reg);
	}
	m->type = type;
	m->flags = out->flags;
	m->rank = get16(b + H_RANK);
	m->nranks = get16(b + H_NRANKS);
	m->ranks = get16(b + H_RANKS);
	m->room = get64(b + H_ROOM);
	m->offset = get32(b + H_OFFSET);
	/* not about a room: HEARTBEAT, and an ERROR answering a REGISTER */
	if (type == EGW_MSG_HEARTBEAT ||
	    (type == EGW_MSG_ERROR && p[0] == EGW_MSG_REGISTER)) {
		if (m->rank || m->nranks || m->ranks || m->room || m->offset)
			return EGW_PROTO_ERR_FIELD;
		if (type == EGW_MSG_HEARTBEAT)
			return EGW_PROTO_ERR_OK;
	} else if (m->nranks == 0 || m->nranks > EGW_XFER_MAX_RANKS ||
		   m->rank >= m->nranks) {
		return EGW_PROTO_ERR_FIELD; /* a room message names a valid rank
					     */
	} else if (!ranks_ok(type, m->flags, m->rank, m->nranks, m->ranks)) {
		return EGW_PROTO_ERR_FIELD; /* ... and ranks of its room */
	}
	switch (type) {
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		m->block_tokens = get32(p);
		m->alloc_tokens = get32(p + 4);
		m->nruns = get16(p + 8);
		for (int k = 0; k < EGW_KIND_MAX; k++)
			m->rkeys[k] = get32(p + 12 + 4 * k);
		if (get16(p + 10) != 0)
			return EGW_PROTO_ERR_RESERVED;
		if ((type == EGW_MSG_INIT) != (m->offset == 0))
			return EGW_PROTO_ERR_FIELD;
		for (uint16_t i = 0; i < m->nruns; i++) {
			m->runs[i].start = get32(p + WIN_FIXED + 8u * i);
			m->runs[i].count = get32(p + WIN_FIXED + 8u * i + 4);
		}
		break;
	case EGW_MSG_STATUS:
		m->state = p[0];
		wire_err = get16(p + 2);
		m->total_tokens = get32(p + 4);
		m->landed_tokens = get32(p + 8);
		m->accepted_tokens = get32(p + 12);
		if (p[1] != 0)
			return EGW_PROTO_ERR_RESERVED;
		if (m->state > EGW_ST_FAILED || wire_err >= EGW_E_WIRE_COUNT ||
		    m->total_tokens > EGW_XFER_MAX_TOKENS)
			return EGW_PROTO_ERR_FIELD;
		break;
	case EGW_MSG_ABORT:
		wire_err = get16(p);
		m->abort_id = get16(p + 2);
		/* an ABORT says why: like ERROR's, its code is never 0 */
		if (wire_err == 0 || wire_err >= EGW_E_WIRE_COUNT)
			return EGW_PROTO_ERR_FIELD;
		break;
	case EGW_MSG_ERROR:
		m->state = p[0];
		wire_err = get16(p + 2);
		if (p[1] != 0)
			return EGW_PROTO_ERR_RESERVED;
		if (m->state < EGW_MSG_INIT || m->state > EGW_MSG_REGISTER ||
		    wire_err == 0 || wire_err >= EGW_E_WIRE_COUNT)
			return EGW_PROTO_ERR_FIELD;
		break;
	default:
		return EGW_PROTO_ERR_TYPE;
	}
	m->error = (uint16_t)egw_err_from_wire(wire_err);
	(void)body;
	return EGW_PROTO_ERR_OK;
}

enum egw_proto_err
egw_proto_decode(const struct egw_proto_key *key, const uint8_t *buf,
		 size_t len, struct egw_pkt *out,
		 struct egw_proto_stats *stats)
{
	enum egw_proto_err e = EGW_PROTO_ERR_OK;
	uint8_t tag[EGW_PROTO_TAG_LEN];
	size_t body = 0;

	memset(out, 0, sizeof(*out));
	if (len < EGW_PROTO_HDR_LEN + EGW_PROTO_TAG_LEN)
		e = EGW_PROTO_ERR_SHORT;
	else if (len > EGW_PROTO_MAX_LEN)
		e = EGW_PROTO_ERR_LONG;
	else if (get32(buf + H_MAGIC) != EGW_PROTO_MAGIC)
		e = EGW_PROTO_ERR_MAGIC;
	else if (buf[H_VERSION] != EGW_PROTO_VERSION)
		e = EGW_PROTO_ERR_VERSION;
	else if (buf[H_TYPE] < EGW_MSG_INIT || buf[H_TYPE] > EGW_MSG_REGISTER)
		e = EGW_PROTO_ERR_TYPE;
	else if ((get16(buf + H_FLAGS) & ~allowed_flags(buf[H_TYPE])) != 0)
		e = EGW_PROTO_ERR_FLAGS;
	else if ((body = get16(buf + H_BODY_LEN)) !=
		 len - EGW_PROTO_HDR_LEN - EGW_PROTO_TAG_LEN)
		e = EGW_PROTO_ERR_LENGTH;
	else if (get32(buf + H_RSV2) != 0 ||
		 ((buf[H_TYPE] == EGW_MSG_HEARTBEAT ||
		   buf[H_TYPE] == EGW_MSG_REGISTER) &&
		  get16(buf + H_RANKS) != 0))
		e = EGW_PROTO_ERR_RESERVED; /* ranks: only room messages */
	else if ((e = check_body_size(buf[H_TYPE], body,
				      buf + EGW_PROTO_HDR_LEN)) !=
		 EGW_PROTO_ERR_OK)
		; /* size known bad */
	else {
		mac(key, buf, EGW_PROTO_HDR_LEN + body, tag);
		/* constant time: a forger learns nothing from when it fails
		 * (crypto_verify_16: a fixed 16-byte compare, a tenth of
		 * sodium_memcmp's cost for any length) */
		if (crypto_verify_16(tag, buf + EGW_PROTO_HDR_LEN + body) != 0)
			e = EGW_PROTO_ERR_MAC;
	}
	if (e == EGW_PROTO_ERR_OK) {
		out->type = buf[H_TYPE];
		out->flags = get16(buf + H_FLAGS);
		out->session = get64(buf + H_SESSION);
		out->seq = get64(buf + H_SEQ);
		if (out->seq == 0 || out->session == 0)
			e = EGW_PROTO_ERR_FIELD;
		else
			e = parse_body(buf, body, out);
		out->reg.session = out->session;
	}
	if (stats != NULL) {
		if (e == EGW_PROTO_ERR_OK)
			stats->ok++;
		else
			stats->refused[e]++;
	}
	if (e != EGW_PROTO_ERR_OK)
		memset(out, 0, sizeof(*out));
	return e;
}

enum egw_proto_err
egw_proto_replay_check(struct egw_proto_replay *r, uint64_t session,
		       uint64_t seq)
{
	uint64_t d;

	if (seq == 0)
		return EGW_PROTO_ERR_REPLAY;
	if (session != r->session || session == 0)
		return EGW_PROTO_ERR_SESSION;
	if (seq > r->top) {
		d = seq - r->top;
		r->bitmap = d >= EGW_PROTO_REPLAY_WINDOW ? 1 : (r->bitmap << d) | 1;
		r->top = seq;
		return EGW_PROTO_ERR_OK;
	}
	d = r->top - seq;
	if (d >= EGW_PROTO_REPLAY_WINDOW || (r->bitmap >> d) & 1)
		return EGW_PROTO_ERR_REPLAY;
	r->bitmap |= 1ull << d;
	return EGW_PROTO_ERR_OK;
}

void
egw_proto_replay_start(struct egw_proto_replay *r, uint64_t session,
		       uint64_t seq)
{
	r->session = session;
	r->top = seq;
	r->bitmap = 1;
}
