/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "cu_main.h"
#include "egw_proto.h"

static struct egw_proto_key key;

static void
keys(void)
{
	for (int i = 0; i < 32; i++)
		key.k[i] = (uint8_t)(i * 7 + 1);
}

/* One valid message of every type, with boundary values. */
static int
samples(struct egw_msg *m, struct egw_register *reg)
{
	int n = 0;

	memset(m, 0, 8 * sizeof(*m));
	m[n] = (struct egw_msg){ .type = EGW_MSG_INIT, .flags = EGW_MSGF_DUMMY,
		.rank = 7, .nranks = 8, .room = UINT64_MAX, .block_tokens = 128,
		.alloc_tokens = 32 * 128, .nruns = EGW_XFER_MAX_RUNS };
	for (int i = 0; i < EGW_XFER_MAX_RUNS; i++)
		m[n].runs[i] = (struct egw_run){ UINT32_MAX - 1 - i, 1 };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_RESUME, .rank = 0, .nranks = 1,
		.room = 1, .offset = UINT32_MAX, .block_tokens = UINT32_MAX,
		.alloc_tokens = 0, .nruns = 1, .runs = { { 0, UINT32_MAX } } };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_RESUME, .rank = 0, .nranks = 1,
		.room = 2, .offset = 128, .block_tokens = 128, .nruns = 0 };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_STATUS, .state = EGW_ST_FAILED,
		.error = EGW_E_END - 1, .rank = 1, .nranks = 2, .room = 3,
		.total_tokens = EGW_XFER_MAX_TOKENS, .landed_tokens = UINT32_MAX,
		.accepted_tokens = UINT32_MAX };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_HEARTBEAT };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_ABORT, .error = EGW_E_ABORTED,
		.rank = 0, .nranks = 1, .room = 4 };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_RESUME,
		.error = EGW_E_BAD_BLOCKS, .rank = 0, .nranks = 1, .room = 5,
		.offset = 1024 };
	n++;
	memset(reg, 0, sizeof(*reg));
	strcpy(reg->name, "lang-gw-0123456789abcdefghijklm"); /* 31 chars */
	for (int i = 0; i < 16; i++)
		reg->gid[i] = (uint8_t)(0xf0 + i);
	reg->qpn = 0xffffff;
	reg->psn = 0;
	reg->mtu = 4096;
	reg->roles = EGW_ROLE_ENCODE | EGW_ROLE_LANGUAGE;
	reg->block_tokens = 128;
	reg->pool_blocks = UINT32_MAX;
	reg->hidden_size = 8192;
	reg->dtype_bytes = 2;
	reg->aux_bytes = 64;
	for (int k = 0; k < EGW_KIND_MAX; k++)
		reg->region[k] = (struct egw_region){ UINT64_MAX - (uint64_t)k,
						      0x80000000u + (uint32_t)k,
						      (uint32_t)(k + 1) * 4 };
	return n;
}

static void
test_round_trip_every_type(void)
{
	struct egw_msg m[8];
	struct egw_register reg;
	struct egw_pkt pkt;
	uint8_t buf[EGW_PROTO_MAX_LEN];
	int n = samples(m, &reg);

	for (int i = 0; i < n; i++) {
		int len = egw_proto_encode(&key, 0x1122334455667788ull,
					   (uint64_t)i + 1, &m[i], buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
				EGW_PE_OK);
		CU_ASSERT_EQUAL(pkt.type, m[i].type);
		CU_ASSERT_EQUAL(pkt.session, 0x1122334455667788ull);
		CU_ASSERT_EQUAL(pkt.seq, (uint64_t)i + 1);
		/* the decoded message is the encoded one, field for field */
		CU_ASSERT_EQUAL(memcmp(&pkt.msg, &m[i], sizeof(m[i])), 0);
	}
	{
		int len = egw_proto_encode_register(&key, 9, UINT64_MAX, true,
						    &reg, buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT(len <= (int)EGW_PROTO_MAX_LEN);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
				EGW_PE_OK);
		CU_ASSERT_EQUAL(pkt.type, EGW_MSG_REGISTER);
		CU_ASSERT_EQUAL(pkt.flags, EGW_MSGF_ACK);
		CU_ASSERT_EQUAL(memcmp(&pkt.reg, &reg, sizeof(reg)), 0);
	}
	/* sizes: the largest window message fits a minimal IPv4 datagram */
	CU_ASSERT(egw_proto_encode(&key, 1, 1, &m[0], buf, sizeof(buf)) + 28 <= 576);
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m[0], buf, 100), -EMSGSIZE);
}

static void
test_encode_refuses_bad_messages(void)
{
	struct egw_msg m = { .type = 99, .rank = 0, .nranks = 1 };
	uint8_t buf[EGW_PROTO_MAX_LEN];

	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, buf, sizeof(buf)), -EINVAL);
	m.type = EGW_MSG_RESUME;
	m.flags = EGW_MSGF_DUMMY; /* only INIT may carry it */
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, buf, sizeof(buf)), -EINVAL);
	m.flags = 0;
	m.nruns = EGW_XFER_MAX_RUNS + 1;
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, buf, sizeof(buf)), -EINVAL);
}

/* Every prefix and every single-bit flip of every valid message is
 * refused, by a length check or by the MAC - never decoded. */
static void
test_truncation_and_bit_flips_rejected(void)
{
	struct egw_msg m[8];
	struct egw_register reg;
	struct egw_pkt pkt;
	uint8_t buf[EGW_PROTO_MAX_LEN], copy[EGW_PROTO_MAX_LEN];
	int n = samples(m, &reg);
	uint32_t accepted = 0, tried = 0;
	struct egw_proto_stats st;

	memset(&st, 0, sizeof(st));
	for (int i = 0; i <= n; i++) {
		int len = i < n ? egw_proto_encode(&key, 5, 5, &m[i], buf, sizeof(buf))
				: egw_proto_encode_register(&key, 5, 5, false, &reg,
							    buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		for (int cut = 0; cut < len; cut++, tried++)
			if (egw_proto_decode(&key, buf, (size_t)cut, &pkt, &st) == EGW_PE_OK)
				accepted++;
		for (int bit = 0; bit < 8 * len; bit++, tried++) {
			memcpy(copy, buf, (size_t)len);
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (egw_proto_decode(&key, copy, (size_t)len, &pkt, &st) == EGW_PE_OK)
				accepted++;
		}
		/* one byte too many */
		memcpy(copy, buf, (size_t)len);
		copy[len] = 0;
		if (egw_proto_decode(&key, copy, (size_t)len + 1, &pkt, &st) == EGW_PE_OK)
			accepted++;
	}
	CU_ASSERT(tried > 5000);
	CU_ASSERT_EQUAL(accepted, 0);
	CU_ASSERT_EQUAL(st.ok, 0);
	CU_ASSERT(st.refused[EGW_PE_MAC] > 0);
	CU_ASSERT(st.refused[EGW_PE_SHORT] > 0);
	CU_ASSERT(st.refused[EGW_PE_LENGTH] > 0);
	CU_ASSERT(st.refused[EGW_PE_MAGIC] > 0);
}

static void
test_wrong_key_and_unknown_fields_rejected(void)
{
	struct egw_msg m[8];
	struct egw_register reg;
	struct egw_pkt pkt;
	struct egw_proto_key other = key;
	uint8_t buf[EGW_PROTO_MAX_LEN];
	int len;

	samples(m, &reg);
	other.k[31] ^= 1;
	len = egw_proto_encode(&other, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_MAC);
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	buf[4] = 2; /* a version we do not speak: refused before the MAC */
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_VERSION);
	buf[4] = 1;
	buf[5] = 42;
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_TYPE);
	buf[5] = EGW_MSG_STATUS;
	buf[7] = 0x80; /* undefined flag */
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FLAGS);
	/* a field out of range behind a valid MAC (a buggy peer, not an
	 * attacker): refused and typed */
	m[3].nranks = 9;
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
	m[3].nranks = 2;
	m[3].state = 9;
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
	len = egw_proto_encode(&key, 0, 1, &m[4], buf, sizeof(buf)); /* session 0 */
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
	/* a REGISTER name must leave room for its NUL (found by the fuzzer:
	 * 32 characters decoded, then re-encoded as 31) */
	memset(reg.name, 'x', sizeof(reg.name));
	len = egw_proto_encode_register(&key, 1, 1, false, &reg, buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
	reg.name[0] = '\0';
	len = egw_proto_encode_register(&key, 1, 1, false, &reg, buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
	m[1].offset = 0; /* a RESUME at offset 0 is an INIT in disguise */
	len = egw_proto_encode(&key, 1, 1, &m[1], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL), EGW_PE_FIELD);
}

static void
test_replay_window(void)
{
	struct egw_replay r = { 0 };

	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 1), EGW_PE_OK);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 1), EGW_PE_REPLAY);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 3), EGW_PE_OK);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 2), EGW_PE_OK); /* late, in window */
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 2), EGW_PE_REPLAY);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 3 + EGW_PROTO_REPLAY_WINDOW), EGW_PE_OK);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 3), EGW_PE_REPLAY); /* too old */
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 4), EGW_PE_OK); /* oldest in window */
	/* a restart (newer session) opens a fresh window; the old session's
	 * traffic can no longer be replayed */
	CU_ASSERT_EQUAL(egw_replay_check(&r, 101, 1), EGW_PE_OK);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 100, 500), EGW_PE_SESSION);
	CU_ASSERT_EQUAL(egw_replay_check(&r, 101, 0), EGW_PE_REPLAY);
	/* a whole captured exchange replayed: all refused */
	{
		struct egw_replay s = { 0 };
		int refused = 0;

		for (uint64_t q = 1; q <= 200; q++)
			CU_ASSERT_EQUAL(egw_replay_check(&s, 7, q), EGW_PE_OK);
		for (uint64_t q = 1; q <= 200; q++)
			refused += egw_replay_check(&s, 7, q) != EGW_PE_OK;
		CU_ASSERT_EQUAL(refused, 200);
	}
}

/* The error field keeps its wire values (doc/protocol.md) although the C
 * codes live above EGW_ERR_BASE, where no errno value reaches. */
static void
test_error_codes_on_the_wire_and_in_text(void)
{
	uint8_t b[EGW_PROTO_MAX_LEN];
	struct egw_pkt pkt;

	for (uint16_t w = 1; w < EGW_E_COUNT; w++) {
		struct egw_msg m = { .type = EGW_MSG_ABORT, .nranks = 1,
				     .room = 9, .error = egw_err_from_wire(w) };
		int len = egw_proto_encode(&key, 1, w, &m, b, sizeof(b));

		CU_ASSERT_FATAL(len > 0);
		/* ABORT's body starts with the 16-bit big-endian code */
		CU_ASSERT_EQUAL(b[EGW_PROTO_HDR_LEN], w >> 8);
		CU_ASSERT_EQUAL(b[EGW_PROTO_HDR_LEN + 1], w & 0xff);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL), EGW_PE_OK);
		CU_ASSERT_EQUAL(pkt.msg.error, m.error);
		CU_ASSERT_EQUAL(egw_err_to_wire((enum egw_err)m.error), w);
	}
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_UNKNOWN_PEER), 22);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_OK), 0);
	CU_ASSERT_EQUAL(egw_err_from_wire(EGW_E_COUNT), EGW_E_END);
	{
		/* a raw wire number is no code: refused, not sent */
		struct egw_msg m = { .type = EGW_MSG_ABORT, .nranks = 1,
				     .room = 9, .error = 20 };

		CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)), -EINVAL);
	}
	/* the values that used to collide are told apart, and named */
	CU_ASSERT_FALSE(egw_rc_is_err(-EINVAL));
	CU_ASSERT_FALSE(egw_rc_is_err(-ENOMEM));
	CU_ASSERT_FALSE(egw_rc_is_err(-EPERM));
	CU_ASSERT_FALSE(egw_rc_is_err(0));
	CU_ASSERT_TRUE(egw_rc_is_err(-EGW_E_UNKNOWN_PEER));
	CU_ASSERT_TRUE(egw_rc_is_err(-EGW_E_UNKNOWN_ROOM));
	for (int e = 1; e < 4096 && e < EGW_ERR_BASE; e++)
		CU_ASSERT_FALSE(egw_rc_is_err(-e));
	CU_ASSERT_STRING_EQUAL(egw_strerror(-EGW_E_UNKNOWN_PEER), "unknown peer");
	CU_ASSERT_STRING_EQUAL(egw_strerror(EGW_E_UNKNOWN_PEER), "unknown peer");
	CU_ASSERT_STRING_EQUAL(egw_strerror(-EINVAL), strerror(EINVAL));
	CU_ASSERT_STRING_EQUAL(egw_strerror(-ENOMEM), strerror(ENOMEM));
	CU_ASSERT_STRING_EQUAL(egw_strerror(-EGW_E_TOO_LARGE), "total or run list too large");
	/* the report keys scripts read */
	CU_ASSERT_STRING_EQUAL(egw_err_key(EGW_E_POOL_EXHAUSTED), "pool_exhausted");
	CU_ASSERT_STRING_EQUAL(egw_err_key(-EGW_E_PEER_DEAD), "peer_dead");
	CU_ASSERT_STRING_EQUAL(egw_err_key(0), "ok");
	CU_ASSERT_STRING_EQUAL(egw_err_key(-EINVAL), "unknown_error");
	for (uint16_t w = 1; w < EGW_E_COUNT; w++)
		CU_ASSERT_STRING_NOT_EQUAL(egw_err_key(egw_err_from_wire(w)),
					   "unknown_error");
	CU_ASSERT_STRING_EQUAL(egw_strerror(0), "ok");
	CU_ASSERT_STRING_EQUAL(egw_strerror(-(int)EGW_E_END), "unknown error");
	CU_ASSERT_PTR_NOT_NULL(egw_strerror(INT32_MIN));
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "round_trip_every_type", test_round_trip_every_type },
		{ "encode_refuses_bad_messages", test_encode_refuses_bad_messages },
		{ "truncation_and_bit_flips_rejected", test_truncation_and_bit_flips_rejected },
		{ "wrong_key_and_unknown_fields_rejected", test_wrong_key_and_unknown_fields_rejected },
		{ "replay_window", test_replay_window },
		{ "error_codes_on_the_wire_and_in_text",
		  test_error_codes_on_the_wire_and_in_text },
		{ NULL, NULL },
	};
	if (egw_proto_init() != 0)
		return 2;
	keys();
	return cu_run("proto", tests);
}
