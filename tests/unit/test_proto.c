/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "cu_main.h"
#include "egw_proto.h"

static struct egw_proto_key key;

#define NSAMPLES 10

static int
keys(void)
{
	uint8_t k[EGW_PROTO_KEY_LEN];

	for (int i = 0; i < 32; i++)
		k[i] = (uint8_t)(i * 7 + 1);
	return egw_proto_key_set(&key, k);
}

/* One valid message of every type, with boundary values. */
static int
samples(struct egw_msg *m, struct egw_register *reg)
{
	int n = 0;

	memset(m, 0, NSAMPLES * sizeof(*m));
	m[n] = (struct egw_msg){ .type = EGW_MSG_INIT, .flags = EGW_MSGF_DUMMY,
		.rank = 7, .nranks = 8, .room = UINT64_MAX, .block_tokens = 128,
		.alloc_tokens = 32 * 128, .nruns = EGW_XFER_MAX_RUNS,
		.rkeys = { UINT32_MAX, 1, 0, UINT32_MAX - 1 } };
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
	m[n] = (struct egw_msg){ .type = EGW_MSG_STATUS,
				 .state = EGW_ST_FAILED,
				 .error = EGW_E_NAME,
				 .rank = 1,
				 .nranks = 2,
				 .room = 3,
				 .total_tokens = EGW_XFER_MAX_TOKENS,
				 .landed_tokens = UINT32_MAX,
				 .accepted_tokens = UINT32_MAX };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_HEARTBEAT };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_ABORT, .error = EGW_E_ABORTED,
		.rank = 0, .nranks = 1, .room = 4 };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_ABORT,
				 .flags = EGW_MSGF_ACK,
				 .error = EGW_E_TIMEOUT_ROUND,
				 .rank = 7,
				 .nranks = 8,
				 .ranks = 0x80,
				 .room = 4 };
	n++;
	m[n] = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
		.error = EGW_E_NAME };
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
	reg->peer_session = UINT64_MAX;
	reg->peer_seq = UINT64_MAX - 1;
	reg->ack_qpn = 0xffffff;
	reg->ack_psn = 1;
	CU_ASSERT_FATAL(n <= NSAMPLES);
	return n;
}

static void
test_round_trip_every_type(void)
{
	struct egw_msg m[NSAMPLES];
	struct egw_register reg;
	struct egw_pkt pkt;
	uint8_t buf[EGW_PROTO_MAX_LEN];
	int n = samples(m, &reg);

	for (int i = 0; i < n; i++) {
		int len = egw_proto_encode(&key, 0x1122334455667788ull,
					   (uint64_t)i + 1, &m[i], buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
				EGW_PROTO_ERR_OK);
		CU_ASSERT_EQUAL(pkt.type, m[i].type);
		CU_ASSERT_EQUAL(pkt.session, 0x1122334455667788ull);
		CU_ASSERT_EQUAL(pkt.seq, (uint64_t)i + 1);
		/* the decoded message is the encoded one, field for field */
		CU_ASSERT_EQUAL(memcmp(&pkt.msg, &m[i], sizeof(m[i])), 0);
	}
	{
		int len = egw_proto_encode_register(&key, 9, UINT64_MAX,
						    EGW_MSGF_ACK | EGW_MSGF_ADOPTED,
						    &reg, buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL(len, 48 + 168 + 16);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
				EGW_PROTO_ERR_OK);
		CU_ASSERT_EQUAL(pkt.type, EGW_MSG_REGISTER);
		CU_ASSERT_EQUAL(pkt.flags, EGW_MSGF_ACK | EGW_MSGF_ADOPTED);
		/* the header's session comes with the body: the incarnation
		 * that registers */
		CU_ASSERT_EQUAL(pkt.reg.session, 9);
		reg.session = 9;
		CU_ASSERT_EQUAL(memcmp(&pkt.reg, &reg, sizeof(reg)), 0);
	}
	/* sizes: the largest window message is the largest datagram and
	 * fits a minimal IPv4 datagram */
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m[0], buf, sizeof(buf)),
			(int)EGW_PROTO_MAX_DGRAM);
	CU_ASSERT_EQUAL(EGW_PROTO_MAX_DGRAM, 348);
	CU_ASSERT(egw_proto_encode(&key, 1, 1, &m[0], buf, sizeof(buf)) + 28 <= 576);
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m[0], buf, 100), -EMSGSIZE);
}

static uint64_t
be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* A datagram changed behind the MAC (as a buggy peer would send it): the
 * tag recomputed over the new bytes. */
static void
remac(uint8_t *b, int len)
{
	crypto_shorthash_siphashx24(b + len - 16, b, (size_t)len - 16, key.mac);
}

static void
hex_to(uint8_t *out, const char *hex, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		CU_ASSERT_FATAL(sscanf(hex + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t)v;
	}
}

/*
 * Known answers: the keys and tags of doc/protocol.md computed by an
 * implementation other than ours, Python's hashlib (BLAKE2b) and PyNaCl
 * (nacl.bindings.crypto_shorthash_siphashx24), with
 *   K = bytes(i * 7 + 1 for i in range(32))
 *   K_mac = hashlib.blake2b(b"embgw-mac-v3", key=K, digest_size=16)
 *   tag = crypto_shorthash_siphashx24(header | body, K_mac)
 * and K of a key file from hashlib.blake2b(file, key=b"embgw-psk-key-v1",
 * digest_size=32). The SipHash line is the first 128-bit vector of the
 * SipHash authors' reference (key 00..0f, empty message): the tag is
 * standard SipHash-2-4, not only libsodium's.
 */
static void
test_known_answers(void)
{
	static const char psk[] = "0123456789abcdef0123456789abcdef\n";
	struct egw_msg st = { .type = EGW_MSG_STATUS,
			      .rank = 1,
			      .nranks = 2,
			      .room = 3,
			      .state = EGW_ST_SUCCESS,
			      .total_tokens = 100,
			      .landed_tokens = 100,
			      .accepted_tokens = 100 };
	struct egw_msg hb = { .type = EGW_MSG_HEARTBEAT };
	uint8_t want[EGW_PROTO_KEY_LEN], ref_key[16], out[16];
	uint8_t b[EGW_PROTO_MAX_LEN];
	struct egw_proto_key fk;
	struct egw_pkt pkt;
	int len;

	for (int i = 0; i < 16; i++)
		ref_key[i] = (uint8_t)i;
	crypto_shorthash_siphashx24(out, NULL, 0, ref_key);
	hex_to(want, "a3817f04ba25a8e66df67214c7550293", 16);
	CU_ASSERT_EQUAL(memcmp(out, want, 16), 0);

	hex_to(want, "aa2dd73f104af887a00a6ad0cec67f95", 16);
	CU_ASSERT_EQUAL(memcmp(key.mac, want, 16), 0);

	len = egw_proto_encode(&key, 0x0102030405060708ull,
			       0x1112131415161718ull, &hb, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(len, 64);
	hex_to(want, "1f88e4cf4f2728a603a3cc0ec848b6ea", 16);
	CU_ASSERT_EQUAL(memcmp(b + 48, want, 16), 0);

	len = egw_proto_encode(&key, 0x0102030405060708ull, 9, &st, b,
			       sizeof(b));
	CU_ASSERT_EQUAL_FATAL(len, 80);
	hex_to(want, "a74261c1b3a639df24c291a094f84a45", 16);
	CU_ASSERT_EQUAL(memcmp(b + 64, want, 16), 0);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);

	CU_ASSERT_EQUAL(egw_proto_key_derive(&fk, (const uint8_t *)psk,
					     sizeof(psk) - 1),
			0);
	hex_to(want,
	       "d4093629df4c9876511b025c59a6ba4e"
	       "ad2dfb93a955b63579d14abfc9f32d39",
	       32);
	CU_ASSERT_EQUAL(memcmp(fk.k, want, 32), 0);
	hex_to(want, "b25d68a0caba54d211388f8ebb798d88", 16);
	CU_ASSERT_EQUAL(memcmp(fk.mac, want, 16), 0);
	CU_ASSERT_EQUAL(egw_proto_key_derive(&fk, (const uint8_t *)psk, 31),
			-EINVAL);
	CU_ASSERT_EQUAL(egw_proto_key_set(NULL, want), -EINVAL);
}

/* The tag is checked whole: any wrong byte of it, a tag of the previous
 * version's MAC (keyed BLAKE2b under K) and a tag under K itself are all
 * refused as MAC - the version's key is its own. */
static void
test_tag_mismatch(void)
{
	struct egw_msg st = { .type = EGW_MSG_STATUS,
			      .rank = 0,
			      .nranks = 1,
			      .room = 3,
			      .state = EGW_ST_WAITING_FOR_INPUT };
	uint8_t b[EGW_PROTO_MAX_LEN], k16[16];
	struct egw_proto_stats stats;
	struct egw_pkt pkt;
	int len;

	memset(&stats, 0, sizeof(stats));
	len = egw_proto_encode(&key, 7, 7, &st, b, sizeof(b));
	CU_ASSERT_FATAL(len == 80);
	for (int i = 0; i < 16; i++) {
		b[64 + i] ^= 0x80;
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 &stats),
				EGW_PROTO_ERR_MAC);
		b[64 + i] ^= 0x80;
	}
	CU_ASSERT_EQUAL(stats.refused[EGW_PROTO_ERR_MAC], 16);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, &stats),
			EGW_PROTO_ERR_OK);

	crypto_generichash(b + 64, 16, b, 64, key.k, 32);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_MAC);
	memcpy(k16, key.k, 16);
	crypto_shorthash_siphashx24(b + 64, b, 64, k16);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_MAC);
	/* and the decoded struct of a refused datagram says nothing */
	CU_ASSERT_EQUAL(pkt.type, 0);
	CU_ASSERT_EQUAL(pkt.session, 0);
}

/* Every field of the version 3 layout at its offset (doc/protocol.md). */
static void
test_v3_layout_every_field(void)
{
	struct egw_msg m = { .type = EGW_MSG_RESUME, .rank = 0x0102,
		.nranks = 0x0203, .room = 0x1112131415161718ull,
		.offset = 0x21222324, .block_tokens = 0x31323334,
		.alloc_tokens = 0x41424344, .nruns = 2,
		.rkeys = { 0x51525354, 0x55565758, 0x595a5b5c, 0x5d5e5f60 },
		.runs = { { 0x61626364, 0x71727374 }, { 0x81828384, 0x91929394 } } };
	struct egw_register r;
	struct egw_msg ms[NSAMPLES];
	uint8_t b[EGW_PROTO_MAX_LEN];
	int len;

	len = egw_proto_encode(&key, 0xa1a2a3a4a5a6a7a8ull,
			       0xb1b2b3b4b5b6b7b8ull, &m, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(len, 48 + 28 + 2 * 8 + 16);
	CU_ASSERT_EQUAL(be(b + 0, 4), 0x45475731);
	CU_ASSERT_EQUAL(b[4], 3);
	CU_ASSERT_EQUAL(b[5], EGW_MSG_RESUME);
	CU_ASSERT_EQUAL(be(b + 6, 2), 0);
	CU_ASSERT_EQUAL(be(b + 8, 2), 28 + 2 * 8);
	CU_ASSERT_EQUAL(be(b + 10, 2), 0x0102);
	CU_ASSERT_EQUAL(be(b + 12, 2), 0x0203);
	CU_ASSERT_EQUAL(be(b + 14, 2), 0);
	CU_ASSERT_EQUAL(be(b + 16, 8), 0xa1a2a3a4a5a6a7a8ull);
	CU_ASSERT_EQUAL(be(b + 24, 8), 0x1112131415161718ull);
	CU_ASSERT_EQUAL(be(b + 32, 4), 0x21222324);
	CU_ASSERT_EQUAL(be(b + 36, 4), 0);
	CU_ASSERT_EQUAL(be(b + 40, 8), 0xb1b2b3b4b5b6b7b8ull);
	/* the window body: block_tokens, alloc_tokens, nruns, 0, the rkeys
	 * of embedding, fill_ids, mrope and aux, runs */
	CU_ASSERT_EQUAL(be(b + 48, 4), 0x31323334);
	CU_ASSERT_EQUAL(be(b + 52, 4), 0x41424344);
	CU_ASSERT_EQUAL(be(b + 56, 2), 2);
	CU_ASSERT_EQUAL(be(b + 58, 2), 0);
	CU_ASSERT_EQUAL(be(b + 60, 4), 0x51525354);
	CU_ASSERT_EQUAL(be(b + 64, 4), 0x55565758);
	CU_ASSERT_EQUAL(be(b + 68, 4), 0x595a5b5c);
	CU_ASSERT_EQUAL(be(b + 72, 4), 0x5d5e5f60);
	CU_ASSERT_EQUAL(be(b + 76, 4), 0x61626364);
	CU_ASSERT_EQUAL(be(b + 80, 4), 0x71727374);
	CU_ASSERT_EQUAL(be(b + 84, 4), 0x81828384);
	CU_ASSERT_EQUAL(be(b + 88, 4), 0x91929394);

	samples(ms, &r);
	r.peer_session = 0xc1c2c3c4c5c6c7c8ull;
	r.ack_qpn = 0xd1d2d3;
	r.ack_psn = 0xe1e2e3;
	r.peer_seq = 0xf1f2f3f4f5f6f7f8ull;
	len = egw_proto_encode_register(&key, 5, 6, EGW_MSGF_ACK | EGW_MSGF_ADOPTED,
					&r, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(len, 48 + 168 + 16);
	CU_ASSERT_EQUAL(len, 232);
	CU_ASSERT_EQUAL(be(b + 6, 2), 0x000a);
	CU_ASSERT_EQUAL(be(b + 8, 2), 168);
	/* room, rank, nranks and offset are 0 for REGISTER */
	CU_ASSERT_EQUAL(be(b + 10, 4) | be(b + 24, 8) | be(b + 32, 4), 0);
	CU_ASSERT_EQUAL(memcmp(b + 48, r.name, 32), 0);
	CU_ASSERT_EQUAL(memcmp(b + 48 + 32, r.gid, 16), 0);
	CU_ASSERT_EQUAL(be(b + 48 + 48, 4), r.qpn);
	CU_ASSERT_EQUAL(be(b + 48 + 52, 4), r.psn);
	CU_ASSERT_EQUAL(be(b + 48 + 56, 2), r.mtu);
	CU_ASSERT_EQUAL(be(b + 48 + 58, 2), r.roles);
	CU_ASSERT_EQUAL(be(b + 48 + 60, 4), r.block_tokens);
	CU_ASSERT_EQUAL(be(b + 48 + 64, 4), r.pool_blocks);
	CU_ASSERT_EQUAL(be(b + 48 + 68, 4), r.hidden_size);
	CU_ASSERT_EQUAL(be(b + 48 + 72, 4), r.dtype_bytes);
	CU_ASSERT_EQUAL(be(b + 48 + 76, 4), r.aux_bytes);
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		CU_ASSERT_EQUAL(be(b + 48 + 80 + 16 * k, 8), r.region[k].addr);
		CU_ASSERT_EQUAL(be(b + 48 + 88 + 16 * k, 4), r.region[k].rkey);
		CU_ASSERT_EQUAL(be(b + 48 + 92 + 16 * k, 4), r.region[k].unit_bytes);
	}
	CU_ASSERT_EQUAL(be(b + 48 + 144, 8), 0xc1c2c3c4c5c6c7c8ull);
	CU_ASSERT_EQUAL(be(b + 48 + 152, 4), 0xd1d2d3);
	CU_ASSERT_EQUAL(be(b + 48 + 156, 4), 0xe1e2e3);
	CU_ASSERT_EQUAL(be(b + 48 + 160, 8), 0xf1f2f3f4f5f6f7f8ull);

	/* an ERROR answering a REGISTER: type 7, code, room fields 0 */
	m = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
			      .error = EGW_E_UNREACHABLE };
	len = egw_proto_encode(&key, 5, 7, &m, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(len, 48 + 4 + 16);
	CU_ASSERT_EQUAL(b[48], 7);
	CU_ASSERT_EQUAL(b[49], 0);
	CU_ASSERT_EQUAL(be(b + 50, 2), 24);
	CU_ASSERT_EQUAL(be(b + 10, 4) | be(b + 24, 8) | be(b + 32, 4), 0);
}

/* Each type takes its own flags and no other (FLAGS, before the MAC). */
static void
test_flags_per_type(void)
{
	static const uint16_t allowed[8] = {
		[EGW_MSG_INIT] = EGW_MSGF_DUMMY, [EGW_MSG_STATUS] = EGW_MSGF_POLL,
		[EGW_MSG_ABORT] = EGW_MSGF_ACK,
		[EGW_MSG_REGISTER] = EGW_MSGF_ACK | EGW_MSGF_ADOPTED,
	};
	struct egw_msg ms[NSAMPLES];
	struct egw_register r;
	struct egw_pkt pkt;
	uint8_t b[EGW_PROTO_MAX_LEN];
	int n = samples(ms, &r);

	for (int i = 0; i <= n; i++) {
		int len = i < n ? egw_proto_encode(&key, 3, 3, &ms[i], b, sizeof(b)) :
			  egw_proto_encode_register(&key, 3, 3, 0, &r, b, sizeof(b));
		uint8_t type;

		CU_ASSERT_FATAL(len > 0);
		type = b[5];
		for (int bit = 0; bit < 16; bit++) {
			uint16_t f = (uint16_t)(1u << bit);
			enum egw_proto_err e;

			b[6] = (uint8_t)(f >> 8);
			b[7] = (uint8_t)f;
			remac(b, len);
			e = egw_proto_decode(&key, b, (size_t)len, &pkt, NULL);
			if (allowed[type] & f) {
				CU_ASSERT_NOT_EQUAL(e, EGW_PROTO_ERR_FLAGS);
			} else {
				CU_ASSERT_EQUAL(e, EGW_PROTO_ERR_FLAGS);
			}
		}
	}
	/* and the encoder will not build what the decoder refuses */
	r.peer_session = 0;
	CU_ASSERT_EQUAL(egw_proto_encode_register(&key, 1, 1, EGW_MSGF_ADOPTED, &r,
						  b, sizeof(b)), -EINVAL);
	CU_ASSERT_EQUAL(egw_proto_encode_register(&key, 1, 1, EGW_MSGF_POLL, &r,
						  b, sizeof(b)), -EINVAL);
	ms[3].flags = EGW_MSGF_ACK; /* STATUS takes POLL only */
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &ms[3], b, sizeof(b)), -EINVAL);
}

/* REGISTER's v2 fields and the ERROR answering a REGISTER, behind a
 * valid MAC: what they must hold, else FIELD. nranks 1..8 is a room
 * message's rule only. */
static void
test_register_and_error_rules(void)
{
	struct egw_msg ms[NSAMPLES];
	struct egw_register r;
	struct egw_pkt pkt;
	uint8_t b[EGW_PROTO_MAX_LEN];
	int len;

	samples(ms, &r);
	/* ADOPTED with peer_session 0 (forged past the encoder) */
	r.peer_session = 7;
	len = egw_proto_encode_register(&key, 1, 1, EGW_MSGF_ADOPTED | EGW_MSGF_ACK,
					&r, b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);
	memset(b + 48 + 144, 0, 8);
	remac(b, len);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	/* peer_session and peer_seq name the same REGISTER heard: both 0
	 * (none heard) or neither (forged past the encoder) */
	r.ack_qpn = r.ack_psn = 0;
	r.peer_session = 7;
	r.peer_seq = 9;
	CU_ASSERT_EQUAL(egw_proto_encode_register(&key, 1, 1, 0, &r, b,
						  sizeof(b)), 48 + 168 + 16);
	memset(b + 48 + 160, 0, 8);
	remac(b, 48 + 168 + 16);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, 48 + 168 + 16, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	r.peer_seq = 0;
	CU_ASSERT_EQUAL(egw_proto_encode_register(&key, 1, 1, 0, &r, b,
						  sizeof(b)), -EINVAL);
	r.peer_session = 0;
	r.peer_seq = 9;
	CU_ASSERT_EQUAL(egw_proto_encode_register(&key, 1, 1, 0, &r, b,
						  sizeof(b)), -EINVAL);
	/* peer_session 0 without ADOPTED: a first REGISTER */
	r.peer_session = 0;
	r.peer_seq = 0;
	len = egw_proto_encode_register(&key, 1, 1, 0, &r, b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);
	/* only an ACK echoes an endpoint */
	r.ack_psn = 5;
	len = egw_proto_encode_register(&key, 1, 1, 0, &r, b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	len = egw_proto_encode_register(&key, 1, 1, EGW_MSGF_ACK, &r, b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);
	r.ack_psn = 1u << 24; /* 24 bits, like the psn it echoes */
	len = egw_proto_encode_register(&key, 1, 1, EGW_MSGF_ACK, &r, b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	/* a REGISTER carries no rank, room or offset */
	r.ack_psn = 0;
	len = egw_proto_encode_register(&key, 1, 1, 0, &r, b, sizeof(b));
	b[13] = 1; /* nranks */
	remac(b, len);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);

	/* an ERROR about a REGISTER: nranks 0 and no room, or FIELD */
	{
		struct egw_msg e = { .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
				     .error = EGW_E_GEOMETRY };

		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_OK);
		CU_ASSERT_EQUAL(pkt.msg.state, EGW_MSG_REGISTER);
		CU_ASSERT_EQUAL(pkt.msg.error, EGW_E_GEOMETRY);
		e.nranks = 1;
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
		e.nranks = 0;
		e.room = 3;
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
		e.room = 0;
		e.offset = 128;
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
		/* an ERROR about a room keeps the nranks rule */
		e = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_INIT,
				      .error = EGW_E_NO_SLOT };
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
		e.nranks = 8;
		e.rank = 7;
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_OK);
		e.rank = 8;
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
		/* the last code is a code; one past it is not */
		e = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
				      .error = EGW_E_NAME };
		len = egw_proto_encode(&key, 1, 1, &e, b, sizeof(b));
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_OK);
		b[51] = 26;
		remac(b, len);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_FIELD);
	}
	/* a room message: nranks 1..8, rank below it */
	ms[5].nranks = 0;
	len = egw_proto_encode(&key, 1, 1, &ms[5], b, sizeof(b));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	/* a HEARTBEAT names no room */
	len = egw_proto_encode(&key, 1, 1, &ms[4], b, sizeof(b));
	b[13] = 1;
	remac(b, len);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	/* INIT/RESUME: body_len = 28 + 8 x nruns exactly */
	len = egw_proto_encode(&key, 1, 1, &ms[2], b, sizeof(b)); /* 0 runs */
	CU_ASSERT_EQUAL(len, 48 + 28 + 16);
	b[57] = 1; /* claims a run the body does not hold */
	remac(b, len);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_BODY);
}

/* Encode `m`, change its header's ranks behind a valid MAC, decode. */
static enum egw_proto_err
forge_ranks(struct egw_msg m, uint16_t ranks)
{
	uint8_t b[EGW_PROTO_MAX_LEN];
	struct egw_pkt pkt;
	int len;

	m.ranks = 0;
	len = egw_proto_encode(&key, 1, 1, &m, b, sizeof(b));
	CU_ASSERT_FATAL(len > 0);
	b[14] = (uint8_t)(ranks >> 8);
	b[15] = (uint8_t)ranks;
	remac(b, len);
	return egw_proto_decode(&key, b, (size_t)len, &pkt, NULL);
}

/* The header's ranks (offset 14): a set of the room's ranks whose lowest
 * is `rank`, or 0; FIELD otherwise, RESERVED where no room is named. */
static void
test_ranks_field(void)
{
	struct egw_msg m = { .type = EGW_MSG_INIT,
			     .rank = 2,
			     .nranks = 4,
			     .ranks = 0xc,
			     .room = 9,
			     .block_tokens = 128,
			     .alloc_tokens = 128,
			     .nruns = 1,
			     .runs = { { 0, 1 } } };
	struct egw_msg ms[NSAMPLES];
	struct egw_register r;
	struct egw_pkt pkt;
	uint8_t b[EGW_PROTO_MAX_LEN];
	int len;

	len = egw_proto_encode(&key, 1, 1, &m, b, sizeof(b));
	CU_ASSERT_FATAL(len > 0);
	CU_ASSERT_EQUAL(be(b + 14, 2), 0x000c);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(pkt.msg.ranks, 0xc);
	CU_ASSERT_EQUAL(pkt.msg.rank, 2);
	/* 0 and the rank alone: the old meaning */
	CU_ASSERT_EQUAL(forge_ranks(m, 0), EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(forge_ranks(m, 0x4), EGW_PROTO_ERR_OK);
	/* the encoder builds none of the bad ones; a forged one is FIELD */
	m.ranks = 0x8; /* without `rank` */
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)),
			-EINVAL);
	CU_ASSERT_EQUAL(forge_ranks(m, 0x8), EGW_PROTO_ERR_FIELD);
	CU_ASSERT_EQUAL(forge_ranks(m, 0x6), EGW_PROTO_ERR_FIELD);  /* rank 1 */
	CU_ASSERT_EQUAL(forge_ranks(m, 0x14), EGW_PROTO_ERR_FIELD); /* 4 >= 4 */
	CU_ASSERT_EQUAL(forge_ranks(m, 0x8004), EGW_PROTO_ERR_FIELD);
	/* an aux-only INIT speaks for one rank */
	m.flags = EGW_MSGF_DUMMY;
	m.ranks = 0xc;
	CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)),
			-EINVAL);
	CU_ASSERT_EQUAL(forge_ranks(m, 0xc), EGW_PROTO_ERR_FIELD);
	CU_ASSERT_EQUAL(forge_ranks(m, 0x4), EGW_PROTO_ERR_OK);
	/* every room message carries it: a STATUS report echoes it */
	samples(ms, &r);
	ms[3].rank = 0;
	CU_ASSERT_EQUAL(forge_ranks(ms[3], 0x3), EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(forge_ranks(ms[3], 0x2), EGW_PROTO_ERR_FIELD);
	CU_ASSERT_EQUAL(forge_ranks(ms[8], 0x1), EGW_PROTO_ERR_OK);
	/* an ERROR about a REGISTER names no rank */
	CU_ASSERT_EQUAL(forge_ranks(ms[7], 0x1), EGW_PROTO_ERR_FIELD);
	/* HEARTBEAT and REGISTER keep the reserved rule */
	CU_ASSERT_EQUAL(forge_ranks(ms[4], 0x1), EGW_PROTO_ERR_RESERVED);
	len = egw_proto_encode_register(&key, 1, 1, 0, &r, b, sizeof(b));
	CU_ASSERT_FATAL(len > 0);
	b[15] = 1;
	remac(b, len);
	CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_RESERVED);
}

/* Session ids: random and never 0 (a restart is a new incarnation). */
static void
test_session_ids(void)
{
	uint64_t a = egw_proto_session_new(), b = egw_proto_session_new();

	CU_ASSERT_NOT_EQUAL(a, 0);
	CU_ASSERT_NOT_EQUAL(b, 0);
	CU_ASSERT_NOT_EQUAL(a, b);
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
	struct egw_msg m[NSAMPLES];
	struct egw_register reg;
	struct egw_pkt pkt;
	uint8_t buf[EGW_PROTO_MAX_LEN], copy[EGW_PROTO_MAX_LEN];
	int n = samples(m, &reg);
	uint32_t accepted = 0, tried = 0;
	struct egw_proto_stats st;

	memset(&st, 0, sizeof(st));
	for (int i = 0; i <= n; i++) {
		int len = i < n ? egw_proto_encode(&key, 5, 5, &m[i], buf, sizeof(buf))
				: egw_proto_encode_register(&key, 5, 5, 0, &reg,
							    buf, sizeof(buf));

		CU_ASSERT_FATAL(len > 0);
		for (int cut = 0; cut < len; cut++, tried++)
			if (egw_proto_decode(&key, buf, (size_t)cut, &pkt,
					     &st) == EGW_PROTO_ERR_OK)
				accepted++;
		for (int bit = 0; bit < 8 * len; bit++, tried++) {
			memcpy(copy, buf, (size_t)len);
			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (egw_proto_decode(&key, copy, (size_t)len, &pkt,
					     &st) == EGW_PROTO_ERR_OK)
				accepted++;
		}
		/* one byte too many */
		memcpy(copy, buf, (size_t)len);
		copy[len] = 0;
		if (egw_proto_decode(&key, copy, (size_t)len + 1, &pkt, &st) ==
		    EGW_PROTO_ERR_OK)
			accepted++;
	}
	CU_ASSERT(tried > 5000);
	CU_ASSERT_EQUAL(accepted, 0);
	CU_ASSERT_EQUAL(st.ok, 0);
	CU_ASSERT(st.refused[EGW_PROTO_ERR_MAC] > 0);
	CU_ASSERT(st.refused[EGW_PROTO_ERR_SHORT] > 0);
	CU_ASSERT(st.refused[EGW_PROTO_ERR_LENGTH] > 0);
	CU_ASSERT(st.refused[EGW_PROTO_ERR_MAGIC] > 0);
}

static void
test_wrong_key_and_unknown_fields_rejected(void)
{
	struct egw_msg m[NSAMPLES];
	struct egw_register reg;
	struct egw_pkt pkt;
	struct egw_proto_key other = key;
	uint8_t buf[EGW_PROTO_MAX_LEN];
	int len;

	samples(m, &reg);
	/* another key file: another K, so another tag key */
	other.k[31] ^= 1;
	CU_ASSERT_FATAL(egw_proto_key_set(&other, other.k) == 0);
	CU_ASSERT_NOT_EQUAL(memcmp(other.mac, key.mac, sizeof(key.mac)), 0);
	len = egw_proto_encode(&other, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_MAC);
	CU_ASSERT_EQUAL(egw_proto_decode(&other, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_OK);
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	/* versions we do not speak, the previous one too: refused before
	 * the MAC */
	for (unsigned v = 0; v < 256; v++) {
		if (v == EGW_PROTO_VERSION)
			continue;
		buf[4] = (uint8_t)v;
		CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_VERSION);
	}
	CU_ASSERT_EQUAL(EGW_PROTO_VERSION, 3);
	buf[4] = 3;
	buf[5] = 42;
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_TYPE);
	buf[5] = EGW_MSG_STATUS;
	buf[7] = 0x80; /* undefined flag */
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FLAGS);
	/* a field out of range behind a valid MAC (a buggy peer, not an
	 * attacker): refused and typed */
	m[3].nranks = 9;
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	m[3].nranks = 2;
	m[3].state = 9;
	len = egw_proto_encode(&key, 1, 1, &m[3], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	len = egw_proto_encode(&key, 0, 1, &m[4], buf, sizeof(buf)); /* session 0 */
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	/* a REGISTER name must leave room for its NUL (found by the fuzzer:
	 * 32 characters decoded, then re-encoded as 31) */
	memset(reg.name, 'x', sizeof(reg.name));
	len = egw_proto_encode_register(&key, 1, 1, 0, &reg, buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	reg.name[0] = '\0';
	len = egw_proto_encode_register(&key, 1, 1, 0, &reg, buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
	m[1].offset = 0; /* a RESUME at offset 0 is an INIT in disguise */
	len = egw_proto_encode(&key, 1, 1, &m[1], buf, sizeof(buf));
	CU_ASSERT_EQUAL(egw_proto_decode(&key, buf, (size_t)len, &pkt, NULL),
			EGW_PROTO_ERR_FIELD);
}

static void
test_replay_window(void)
{
	struct egw_proto_replay r = { 0 };

	/* no window yet: every session is the caller's to start */
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 1),
			EGW_PROTO_ERR_SESSION);
	egw_proto_replay_start(&r, 100, 1);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 1),
			EGW_PROTO_ERR_REPLAY);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 3), EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 2),
			EGW_PROTO_ERR_OK); /* late, in window */
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 2),
			EGW_PROTO_ERR_REPLAY);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100,
					       3 + EGW_PROTO_REPLAY_WINDOW),
			EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 3),
			EGW_PROTO_ERR_REPLAY); /* too old */
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 4),
			EGW_PROTO_ERR_OK); /* oldest in window */
	/* sessions carry no order: a larger one and a smaller one are both
	 * just another session, refused until started */
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 101, 1),
			EGW_PROTO_ERR_SESSION);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 99, 1000),
			EGW_PROTO_ERR_SESSION);
	egw_proto_replay_start(&r, 99, 7);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 99, 7),
			EGW_PROTO_ERR_REPLAY);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 99, 8), EGW_PROTO_ERR_OK);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 100, 500),
			EGW_PROTO_ERR_SESSION);
	CU_ASSERT_EQUAL(egw_proto_replay_check(&r, 99, 0),
			EGW_PROTO_ERR_REPLAY);
	/* a whole captured exchange replayed: all refused */
	{
		struct egw_proto_replay s = { 0 };
		int refused = 0;

		egw_proto_replay_start(&s, 7, 1);
		for (uint64_t q = 2; q <= 200; q++)
			CU_ASSERT_EQUAL(egw_proto_replay_check(&s, 7, q),
					EGW_PROTO_ERR_OK);
		for (uint64_t q = 1; q <= 200; q++)
			refused += egw_proto_replay_check(&s, 7, q) !=
				   EGW_PROTO_ERR_OK;
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

	for (uint16_t w = 1; w < EGW_E_WIRE_COUNT; w++) {
		struct egw_msg m = { .type = EGW_MSG_ABORT, .nranks = 1,
				     .room = 9, .error = egw_err_from_wire(w) };
		int len = egw_proto_encode(&key, 1, w, &m, b, sizeof(b));

		CU_ASSERT_FATAL(len > 0);
		/* ABORT's body starts with the 16-bit big-endian code */
		CU_ASSERT_EQUAL(b[EGW_PROTO_HDR_LEN], w >> 8);
		CU_ASSERT_EQUAL(b[EGW_PROTO_HDR_LEN + 1], w & 0xff);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_OK);
		CU_ASSERT_EQUAL(pkt.msg.error, m.error);
		CU_ASSERT_EQUAL(egw_err_to_wire((enum egw_err)m.error), w);
	}
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_UNKNOWN_PEER), 22);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_GEOMETRY), 23);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_UNREACHABLE), 24);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_NAME), 25);
	CU_ASSERT_EQUAL(EGW_E_WIRE_COUNT, 26);
	CU_ASSERT_EQUAL(egw_err_to_wire(EGW_E_OK), 0);
	CU_ASSERT_EQUAL(egw_err_from_wire(EGW_E_COUNT), EGW_E_END);
	{
		/* a local-only reason goes out as ABORTED, and a wire value
		 * past the wire's codes is refused (FIELD) */
		struct egw_msg m = { .type = EGW_MSG_ABORT,
				     .nranks = 1,
				     .room = 9,
				     .error = EGW_E_PEER_REMOVED };
		int len = egw_proto_encode(&key, 1, 1, &m, b, sizeof(b));

		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL(b[EGW_PROTO_HDR_LEN + 1], 20);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, (size_t)len, &pkt,
						 NULL),
				EGW_PROTO_ERR_OK);
		CU_ASSERT_EQUAL(pkt.msg.error, EGW_E_ABORTED);
	}
	{
		/* a raw wire number is no code: refused, not sent */
		struct egw_msg m = { .type = EGW_MSG_ABORT, .nranks = 1,
				     .room = 9, .error = 20 };

		CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)), -EINVAL);
		/* an ABORT or ERROR without a reason is not sent, nor taken */
		m.error = EGW_E_OK;
		CU_ASSERT_EQUAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)), -EINVAL);
		m.error = EGW_E_ABORTED;
		CU_ASSERT_FATAL(egw_proto_encode(&key, 1, 1, &m, b, sizeof(b)) > 0);
		b[EGW_PROTO_HDR_LEN] = 0;
		b[EGW_PROTO_HDR_LEN + 1] = 0;
		remac(b, EGW_PROTO_HDR_LEN + 4 + EGW_PROTO_TAG_LEN);
		CU_ASSERT_EQUAL(egw_proto_decode(&key, b, EGW_PROTO_HDR_LEN + 4 +
						 EGW_PROTO_TAG_LEN, &pkt, NULL),
				EGW_PROTO_ERR_FIELD);
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
	CU_ASSERT_STRING_EQUAL(egw_err_key(EGW_E_GEOMETRY), "geometry");
	CU_ASSERT_STRING_EQUAL(egw_err_key(-EGW_E_UNREACHABLE), "unreachable");
	CU_ASSERT_STRING_EQUAL(egw_err_key(EGW_E_NAME), "name");
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
		{ "encode_refuses_bad_messages",
		  test_encode_refuses_bad_messages },
		{ "v3_layout_every_field", test_v3_layout_every_field },
		{ "known_answers", test_known_answers },
		{ "tag_mismatch", test_tag_mismatch },
		{ "flags_per_type", test_flags_per_type },
		{ "register_and_error_rules", test_register_and_error_rules },
		{ "session_ids", test_session_ids },
		{ "ranks_field", test_ranks_field },
		{ "truncation_and_bit_flips_rejected",
		  test_truncation_and_bit_flips_rejected },
		{ "wrong_key_and_unknown_fields_rejected",
		  test_wrong_key_and_unknown_fields_rejected },
		{ "replay_window", test_replay_window },
		{ "error_codes_on_the_wire_and_in_text",
		  test_error_codes_on_the_wire_and_in_text },
		{ NULL, NULL },
	};
	if (egw_proto_init() != 0)
		return 2;
	if (keys() != 0)
		return 2;
	return cu_run("proto", tests);
}
