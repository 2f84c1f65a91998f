/* SPDX-License-Identifier: BSD-3-Clause */
/* Writes one valid datagram of every message type into DIR: the fuzzer's
 * starting corpus (with the fuzz target's key). */
#include <stdio.h>
#include <string.h>

#include "egw_proto.h"

/* K = 1..32, as the fuzz target's */
static struct egw_proto_key key;

static int
put(const char *dir, const char *name, const uint8_t *b, int n)
{
	char path[512];
	FILE *f;

	if (n <= 0)
		return 1;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(b, 1, (size_t)n, f) != (size_t)n)
		return 1;
	return fclose(f) != 0;
}

int
main(int argc, char **argv)
{
	uint8_t b[EGW_PROTO_MAX_LEN];
	struct egw_msg m;
	struct egw_register r;
	int bad = 0;

	for (size_t i = 0; i < sizeof(b) && i < EGW_PROTO_KEY_LEN; i++)
		b[i] = (uint8_t)(i + 1);
	if (argc != 2 || egw_proto_init() != 0 ||
	    egw_proto_key_set(&key, b) != 0)
		return 2;
	memset(&m, 0, sizeof(m));
	m = (struct egw_msg){ .type = EGW_MSG_INIT, .rank = 1, .nranks = 2,
		.room = 77, .block_tokens = 128, .alloc_tokens = 1024, .nruns = 2,
		.rkeys = { 0x5a5a, 0x5b5b, 0, 0x5c5c },
		.runs = { { 0, 4 }, { 10, 4 } } };
	bad |= put(argv[1], "init", b, egw_proto_encode(&key, 9, 1, &m, b, sizeof(b)));
	m.type = EGW_MSG_RESUME;
	m.offset = 1024;
	bad |= put(argv[1], "resume", b, egw_proto_encode(&key, 9, 2, &m, b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_STATUS, .state = 2, .rank = 0,
		.nranks = 1, .room = 77, .total_tokens = 5000,
		.landed_tokens = 1024, .accepted_tokens = 2048 };
	bad |= put(argv[1], "status", b, egw_proto_encode(&key, 9, 3, &m, b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_HEARTBEAT };
	bad |= put(argv[1], "heartbeat", b, egw_proto_encode(&key, 9, 4, &m, b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_ABORT, .error = EGW_E_ABORTED, .nranks = 1, .room = 77 };
	bad |= put(argv[1], "abort", b, egw_proto_encode(&key, 9, 5, &m, b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = 2, .error = EGW_E_BAD_BLOCKS,
		.nranks = 1, .room = 77, .offset = 1024 };
	bad |= put(argv[1], "error", b, egw_proto_encode(&key, 9, 6, &m, b, sizeof(b)));
	memset(&r, 0, sizeof(r));
	strcpy(r.name, "enc-a");
	r.qpn = 0x1234;
	r.mtu = 1024;
	r.roles = EGW_ROLE_ENCODE;
	r.block_tokens = 128;
	r.pool_blocks = 4096;
	r.hidden_size = 4096;
	r.dtype_bytes = 2;
	r.aux_bytes = 64;
	bad |= put(argv[1], "register", b,
		   egw_proto_encode_register(&key, 9, 7, 0, &r, b, sizeof(b)));
	r.peer_session = 0x1122334455667788ull;
	r.ack_qpn = 0x4321;
	r.ack_psn = 0xabcdef;
	r.peer_seq = 7;
	bad |= put(argv[1], "register-ack-adopted", b,
		   egw_proto_encode_register(&key, 9, 8,
					     EGW_MSGF_ACK | EGW_MSGF_ADOPTED, &r,
					     b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
		.error = EGW_E_GEOMETRY };
	bad |= put(argv[1], "error-register", b, egw_proto_encode(&key, 9, 9, &m, b, sizeof(b)));
	m = (struct egw_msg){ .type = EGW_MSG_ABORT, .flags = EGW_MSGF_ACK,
		.error = EGW_E_ABORTED, .nranks = 1, .room = 77 };
	bad |= put(argv[1], "abort-ack", b, egw_proto_encode(&key, 9, 10, &m, b, sizeof(b)));
	return bad;
}
