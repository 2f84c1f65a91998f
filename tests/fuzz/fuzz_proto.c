/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the control-protocol decoder. Three things per input:
 *  1. decode it as a datagram; if it is accepted it must re-encode to the
 *     very same bytes (nothing is accepted that we would not have sent);
 *  2. append a valid MAC and decode again, so the fuzzer reaches the body
 *     parser that only authenticated data gets to;
 *  3. drive a replay window with (session, seq) pairs from the input, a
 *     session adopted (the window started) the first time it shows up
 *     and never again, as lib/node does, and check the invariant: no
 *     pair is ever accepted twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "egw_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* K as make_corpus's: 1..32; the tag's key is derived from it at start */
static struct egw_proto_key key;

static void
check_round_trip(const uint8_t *buf, size_t len, const struct egw_pkt *p)
{
	uint8_t out[EGW_PROTO_MAX_LEN];
	int n;

	if (p->type == EGW_MSG_REGISTER)
		n = egw_proto_encode_register(&key, p->session, p->seq,
					      p->flags,
					      &p->reg, out, sizeof(out));
	else
		n = egw_proto_encode(&key, p->session, p->seq, &p->msg, out,
				     sizeof(out));
	if (n != (int)len || memcmp(out, buf, len) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	struct egw_pkt pkt;
	uint8_t buf[EGW_PROTO_MAX_LEN + EGW_PROTO_TAG_LEN];

	if (!inited) {
		uint8_t k[EGW_PROTO_KEY_LEN];

		for (size_t i = 0; i < sizeof(k); i++)
			k[i] = (uint8_t)(i + 1);
		if (egw_proto_init() != 0 || egw_proto_key_set(&key, k) != 0)
			abort();
		inited = 1;
	}
	if (egw_proto_decode(&key, data, size, &pkt, NULL) == EGW_PROTO_ERR_OK)
		check_round_trip(data, size, &pkt);

	if (size >= EGW_PROTO_HDR_LEN && size <= EGW_PROTO_MAX_LEN - EGW_PROTO_TAG_LEN) {
		memcpy(buf, data, size);
		crypto_shorthash_siphashx24(buf + size, buf, size, key.mac);
		if (egw_proto_decode(&key, buf, size + EGW_PROTO_TAG_LEN, &pkt,
				     NULL) == EGW_PROTO_ERR_OK)
			check_round_trip(buf, size + EGW_PROTO_TAG_LEN, &pkt);
	}

	{
		struct egw_proto_replay r = { 0 };
		uint64_t seen_s[64], seen_q[64];
		bool adopted[4] = { false };
		size_t n = 0;

		for (size_t i = 0; i + 3 <= size && n < 64; i += 3) {
			uint64_t s = 1 + data[i] % 3, q = 1 + (data[i + 1] << 8 | data[i + 2]) % 200;
			enum egw_proto_err e = egw_proto_replay_check(&r, s, q);

			if (e == EGW_PROTO_ERR_SESSION && !adopted[s]) {
				adopted[s] = true;
				egw_proto_replay_start(&r, s, q);
				e = EGW_PROTO_ERR_OK;
			}
			if (e == EGW_PROTO_ERR_OK) {
				for (size_t j = 0; j < n; j++)
					if (seen_s[j] == s && seen_q[j] == q)
						abort(); /* accepted twice */
				seen_s[n] = s;
				seen_q[n++] = q;
			}
		}
	}
	return 0;
}
