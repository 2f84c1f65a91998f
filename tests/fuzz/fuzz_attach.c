/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for what the attach ABI (lib/attach) takes from a
 * client or a gateway it does not trust. The first byte picks:
 *  0. a command as copied out of the ring, checked against limits also
 *     taken from the input (egw_attach_cmd_check). Oracle: the result is
 *     one of the documented ones; an accepted command meets the rules a
 *     caller relies on (its op allowed on the port, its slot, peer and
 *     size in range); acceptance survives looser limits; a refusal for
 *     the op (-EOPNOTSUPP) depends on the op and the port's roles alone.
 *  1. a hello as received (egw_attach_hello_check). Oracle: a documented
 *     result, and on a refusal a reason, terminated inside its buffer.
 *  2. an area as mapped (egw_attach_area_check); one that passes is
 *     mapped and both rings are read and written as a hostile peer left
 *     them: the sanitizers catch any access outside the area, and the
 *     results are the documented ones.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egw_attach.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
role_allows(uint8_t op, const struct egw_attach_limits *l)
{
	switch (op) {
	case EGW_OP_NOP:
	case EGW_OP_ABORT:
		return true;
	case EGW_OP_SEND_OPEN:
	case EGW_OP_SEND_COMMIT:
		return l->encode;
	case EGW_OP_RECV_OPEN:
	case EGW_OP_RELEASE:
	case EGW_OP_LOOKUP:
		return l->language;
	default:
		return false;
	}
}

static void
check_accepted(const struct egw_attach_cmd *c,
	       const struct egw_attach_limits *l)
{
	if (c->op >= EGW_OP_MAX || !role_allows(c->op, l))
		abort();
	if (c->op == EGW_OP_SEND_OPEN &&
	    (c->total_tokens == 0 || c->total_tokens > l->max_total_tokens ||
	     c->nranks == 0 || c->room == 0))
		abort();
	/* a RECV_OPEN names its peer by id or by name, one of the two */
	if (c->op == EGW_OP_RECV_OPEN &&
	    ((c->peer_id == 0) == !(c->flags & EGW_CMDF_PEER_NAME) ||
	     c->rank >= c->nranks || c->room == 0))
		abort();
	if (c->op != EGW_OP_NOP && c->op != EGW_OP_LOOKUP &&
	    c->slot >= l->nslots)
		abort();
}

/* One more than `v`, unless that passes `max` */
static uint32_t
looser(uint32_t v, uint32_t max)
{
	return v < max ? v + 1 : v;
}

static void
fuzz_cmd(const uint8_t *data, size_t size)
{
	struct egw_attach_limits l, wide;
	struct egw_attach_cmd c;
	uint8_t raw[4 + 4 + 2 + 1]; /* nslots, max_total, (2 unused), roles */
	int rc;

	if (size < sizeof(raw) + sizeof(c))
		return;
	memcpy(raw, data, sizeof(raw));
	memcpy(&c, data + sizeof(raw), sizeof(c));
	memcpy(&l.nslots, raw, 4);
	memcpy(&l.max_total_tokens, raw + 4, 4);
	l.encode = raw[10] & 1;
	l.language = raw[10] & 2;
	rc = egw_attach_cmd_check(&c, &l);
	if (rc != 0 && rc != -EOPNOTSUPP && rc != -EINVAL && rc != -ERANGE &&
	    rc != -EFBIG)
		abort();
	/* -EOPNOTSUPP exactly when the op is unknown or not the port's */
	if ((rc == -EOPNOTSUPP) != !role_allows(c.op, &l))
		abort();
	if (rc != 0)
		return;
	check_accepted(&c, &l);
	wide = l;
	wide.nslots = looser(l.nslots, UINT32_MAX);
	wide.max_total_tokens = looser(l.max_total_tokens, UINT32_MAX);
	if (egw_attach_cmd_check(&c, &wide) != 0)
		abort();
}

static void
fuzz_hello(const uint8_t *data, size_t size)
{
	char why[96];
	int rc;

	memset(why, 0x5a, sizeof(why));
	rc = egw_attach_hello_check(data, size, why, sizeof(why));
	if (rc == 0)
		return;
	if (rc != -EPROTO && rc != -EPROTONOSUPPORT && rc != -EINVAL)
		abort();
	if (memchr(why, '\0', sizeof(why)) == NULL || why[0] == '\0')
		abort();
}

static void
fuzz_area(const uint8_t *data, size_t size)
{
	uint8_t entry[EGW_ATTACH_ENTRY_BYTES];
	struct egw_attach_map m;
	void *mem;
	int rc;

	if (size < sizeof(struct egw_attach_area))
		return;
	mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (mem == NULL)
		return;
	memcpy(mem, data, size);
	rc = egw_attach_area_check(mem, size);
	if (rc != 0 && rc != -EPROTO && rc != -EINVAL)
		abort();
	if (rc == 0 && egw_attach_map_init(&m, mem, size) == 0) {
		memset(entry, 0, sizeof(entry));
		for (int i = 0; i < 4; i++) {
			rc = egw_attach_ring_get(&m.sq, entry);
			if (rc != 0 && rc != 1 && rc != -EBADMSG)
				abort();
			rc = egw_attach_ring_put(&m.cq, entry);
			if (rc != 0 && rc != -ENOBUFS && rc != -EBADMSG)
				abort();
		}
	}
	free(mem);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_cmd(data + 1, size - 1);
		break;
	case 1:
		fuzz_hello(data + 1, size - 1);
		break;
	default:
		fuzz_area(data + 1, size - 1);
		break;
	}
	return 0;
}
