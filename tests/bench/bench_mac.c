/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a datagram's tag costs: the protocol's SipHash-2-4-128 under K_mac
 * against keyed BLAKE2b-128 under K (the tag of protocol version 2), over
 * the bytes the gateway tags - header and body of real datagrams built by
 * egw_proto_encode: HEARTBEAT (48 bytes tagged), STATUS (64), INIT with
 * one run (84) and REGISTER (216). Both in the same process, interleaved
 * per round, CPU time of the tagging alone, median of the rounds per size
 * and function; the mean over the four sizes is the figure.
 *
 *   bench_mac ROUNDS TAGS
 *   -> "mac_ns sizes=48,64,84,216 siphash=N,N,N,N blake2b=N,N,N,N
 *       siphash_mean=N blake2b_mean=N" (ns per tag)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "egw_proto.h"
#include "bench_time.h"

#define NSIZES 4
#define MAX_ROUNDS 32

/* The four datagrams, each as the encoder writes it; returns the length
 * of each one's tagged part (header and body) in len[]. */
static int
messages(const struct egw_proto_key *key,
	 uint8_t buf[NSIZES][EGW_PROTO_MAX_LEN], size_t len[NSIZES])
{
	struct egw_msg hb = { .type = EGW_MSG_HEARTBEAT };
	struct egw_msg st = { .type = EGW_MSG_STATUS,
			      .rank = 0,
			      .nranks = 2,
			      .room = 0x1234,
			      .state = EGW_ST_TRANSFERRING,
			      .total_tokens = 10000,
			      .landed_tokens = 4096,
			      .accepted_tokens = 8192 };
	struct egw_msg in = { .type = EGW_MSG_INIT,
			      .rank = 1,
			      .nranks = 2,
			      .room = 0x1234,
			      .block_tokens = 128,
			      .alloc_tokens = 8192,
			      .nruns = 1,
			      .runs = { { 100, 64 } } };
	struct egw_register r = { .name = "lang-0",
				  .mtu = 4096,
				  .roles = EGW_ROLE_LANGUAGE,
				  .block_tokens = 128,
				  .pool_blocks = 8192,
				  .hidden_size = 4096,
				  .dtype_bytes = 2,
				  .aux_bytes = 64,
				  .peer_session = 0x99,
				  .peer_seq = 7 };
	int n[NSIZES];

	n[0] = egw_proto_encode(key, 0x77, 1, &hb, buf[0], EGW_PROTO_MAX_LEN);
	n[1] = egw_proto_encode(key, 0x77, 2, &st, buf[1], EGW_PROTO_MAX_LEN);
	n[2] = egw_proto_encode(key, 0x77, 3, &in, buf[2], EGW_PROTO_MAX_LEN);
	n[3] = egw_proto_encode_register(key, 0x77, 4, EGW_MSGF_ADOPTED, &r,
					 buf[3], EGW_PROTO_MAX_LEN);
	for (int i = 0; i < NSIZES; i++) {
		if (n[i] <= (int)EGW_PROTO_TAG_LEN)
			return -1;
		len[i] = (size_t)n[i] - EGW_PROTO_TAG_LEN;
	}
	return 0;
}

/* `tags` tags of b[0..n) with the seq's low byte changed each time, as a
 * sender's datagrams differ; the tags' first bytes summed into *sink so
 * that none is left uncomputed. */
static double
run_siphash(const struct egw_proto_key *key, uint8_t *b, size_t n, long tags,
	    unsigned *sink)
{
	uint8_t tag[EGW_PROTO_TAG_LEN];
	double t0 = cpu_ns();

	for (long i = 0; i < tags; i++) {
		b[EGW_PROTO_HDR_LEN - 1] = (uint8_t)i;
		crypto_shorthash_siphashx24(tag, b, n, key->mac);
		*sink += tag[0];
	}
	return (cpu_ns() - t0) / (double)tags;
}

static double
run_blake2b(const struct egw_proto_key *key, uint8_t *b, size_t n, long tags,
	    unsigned *sink)
{
	uint8_t tag[EGW_PROTO_TAG_LEN];
	double t0 = cpu_ns();

	for (long i = 0; i < tags; i++) {
		b[EGW_PROTO_HDR_LEN - 1] = (uint8_t)i;
		crypto_generichash(tag, sizeof(tag), b, n, key->k,
				   sizeof(key->k));
		*sink += tag[0];
	}
	return (cpu_ns() - t0) / (double)tags;
}

int
main(int argc, char **argv)
{
	static uint8_t buf[NSIZES][EGW_PROTO_MAX_LEN];
	double sip[NSIZES][MAX_ROUNDS], b2[NSIZES][MAX_ROUNDS];
	double msip[NSIZES], mb2[NSIZES], sum_sip = 0, sum_b2 = 0;
	uint8_t k[EGW_PROTO_KEY_LEN];
	struct egw_proto_key key;
	size_t len[NSIZES];
	unsigned sink = 0;
	int rounds;
	long tags;

	if (argc != 3 || (rounds = atoi(argv[1])) < 1 || rounds > MAX_ROUNDS ||
	    (tags = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: bench_mac ROUNDS(1..%d) TAGS\n",
			MAX_ROUNDS);
		return 2;
	}
	if (egw_proto_init() != 0)
		return 1;
	randombytes_buf(k, sizeof(k));
	if (egw_proto_key_set(&key, k) != 0 || messages(&key, buf, len) != 0)
		return 1;
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < NSIZES; s++) {
			sip[s][r] = run_siphash(&key, buf[s], len[s], tags,
						&sink);
			b2[s][r] = run_blake2b(&key, buf[s], len[s], tags,
					       &sink);
		}
	for (int s = 0; s < NSIZES; s++) {
		qsort(sip[s], (size_t)rounds, sizeof(double), cmp_d);
		qsort(b2[s], (size_t)rounds, sizeof(double), cmp_d);
		msip[s] = sip[s][rounds / 2];
		mb2[s] = b2[s][rounds / 2];
		sum_sip += msip[s];
		sum_b2 += mb2[s];
	}
	printf("mac_ns sizes=%zu,%zu,%zu,%zu siphash=%.1f,%.1f,%.1f,%.1f "
	       "blake2b=%.1f,%.1f,%.1f,%.1f siphash_mean=%.1f "
	       "blake2b_mean=%.1f\n",
	       len[0], len[1], len[2], len[3], msip[0], msip[1], msip[2],
	       msip[3], mb2[0], mb2[1], mb2[2], mb2[3], sum_sip / NSIZES,
	       sum_b2 / NSIZES);
	return sink == 0xffffffffu; /* never: keeps the sums computed */
}
