/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach ABI: area layout and its checks, the SPSC rings (order, full,
 * empty, index wrap, impossible indices from a hostile peer, two threads),
 * and the field checks of every command.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_main.h"
#include "egw_attach.h"

struct area_buf {
	void *mem;
	size_t bytes;
	struct egw_attach_map m;
};

static void
area_make(struct area_buf *b, uint32_t sq, uint32_t cq, uint32_t nslots,
	  uint32_t max_runs)
{
	b->bytes = egw_attach_area_bytes(sq, cq, nslots, max_runs, 4);
	CU_ASSERT_FATAL(b->bytes > 0);
	b->mem = aligned_alloc(4096, (b->bytes + 4095) & ~(size_t)4095);
	CU_ASSERT_FATAL(b->mem != NULL);
	memset(b->mem, 0, b->bytes);
	CU_ASSERT_EQUAL_FATAL(egw_attach_area_init(b->mem, sq, cq, nslots,
						   max_runs, 4),
			      0);
	CU_ASSERT_EQUAL_FATAL(egw_attach_map_init(&b->m, b->mem, b->bytes), 0);
}

static void
test_layout_is_the_documented_one(void)
{
	struct area_buf b;
	struct egw_attach_area *a;

	CU_ASSERT_EQUAL(egw_attach_slot_bytes(1), 64);
	CU_ASSERT_EQUAL(egw_attach_slot_bytes(4), 64);
	CU_ASSERT_EQUAL(egw_attach_slot_bytes(5), 128);
	CU_ASSERT_EQUAL(egw_attach_slot_bytes(32), 320);
	area_make(&b, 256, 512, 64, 32);
	a = b.mem;
	CU_ASSERT_EQUAL(b.bytes, 4096 + (256 + 512) * 64 + 64 * 320 + 4 * 48);
	CU_ASSERT_EQUAL(a->magic, EGW_ATTACH_MAGIC);
	CU_ASSERT_EQUAL(memcmp(&a->magic, "EGWC", 4), 0);
	CU_ASSERT_EQUAL(a->sq.offset, 4096);
	CU_ASSERT_EQUAL(a->cq.offset, 4096 + 256 * 64);
	CU_ASSERT_EQUAL(a->slots_offset, 4096 + 768 * 64);
	CU_ASSERT_EQUAL((uint8_t *)&a->sq - (uint8_t *)a, 64);
	CU_ASSERT_EQUAL((uint8_t *)&a->cq.tail - (uint8_t *)a, 4 * 64 + 64);
	CU_ASSERT_PTR_EQUAL(egw_attach_slot_at(&b.m, 63),
			    (uint8_t *)a + a->slots_offset + 63 * 320);
	CU_ASSERT_PTR_NULL(egw_attach_slot_at(&b.m, 64));
	/* the peer table follows the slots; its control words at 2048 */
	CU_ASSERT_EQUAL(a->peers_offset, 4096 + 768 * 64 + 64 * 320);
	CU_ASSERT_EQUAL(a->max_peers, 4);
	CU_ASSERT_PTR_EQUAL(b.m.peers, (uint8_t *)a + a->peers_offset);
	CU_ASSERT_PTR_EQUAL(egw_attach_peers_of(a), (uint8_t *)a + 2048);
	free(b.mem);
}

static void
test_bad_counts_and_headers_refused(void)
{
	struct area_buf b;
	struct egw_attach_area *a, save;

	CU_ASSERT_EQUAL(egw_attach_area_bytes(0, 8, 1, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(8, 12, 1, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(8, 8, 0, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(8, 8, 1, 0, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(131072, 8, 1, 1, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(8, 8, 1, 4097, 0), 0);
	CU_ASSERT_EQUAL(egw_attach_area_bytes(8, 8, 1, 1, 4097), 0);
	CU_ASSERT_EQUAL(egw_attach_area_init(NULL, 8, 8, 1, 1, 0), -EINVAL);

	area_make(&b, 8, 8, 4, 4);
	a = b.mem;
	save = *a;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes - 1), -EINVAL);
	CU_ASSERT_EQUAL(egw_attach_area_check(a, 100), -EINVAL);
	a->magic ^= 1;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EPROTO);
	*a = save;
	a->version = EGW_ATTACH_VERSION + 1;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EPROTO);
	*a = save;
	a->version = EGW_ATTACH_VERSION - 1;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EPROTO);
	*a = save;
	a->cq.offset -= 64; /* cq over the last sq entry */
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EINVAL);
	*a = save;
	a->sq.entries = 6;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EINVAL);
	*a = save;
	a->slot_bytes = 64; /* 4 runs need 64; claim fewer runs' worth */
	a->max_runs = 40;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EINVAL);
	*a = save;
	a->nslots = 5; /* one slot past the end */
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), -EINVAL);
	*a = save;
	CU_ASSERT_EQUAL(egw_attach_area_check(a, b.bytes), 0);
	free(b.mem);
}

static struct egw_attach_cmd
cmd_n(uint64_t n)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = EGW_OP_NOP;
	c.tag = n;
	return c;
}

static void
test_ring_fifo_full_and_empty(void)
{
	struct area_buf b;
	struct egw_attach_cmd c, out;

	area_make(&b, 8, 8, 1, 1);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 0);
	for (uint64_t i = 0; i < 8; i++) {
		c = cmd_n(i);
		CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.sq, &c), 0);
	}
	c = cmd_n(99);
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.sq, &c), -ENOBUFS);
	CU_ASSERT_EQUAL(egw_attach_ring_count(&b.m.sq), 8);
	for (uint64_t i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 1);
		CU_ASSERT_EQUAL(out.tag, i);
	}
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 0);
	CU_ASSERT_EQUAL(egw_attach_ring_count(&b.m.sq), 0);
	free(b.mem);
}

static void
test_ring_indices_wrap_at_32_bits(void)
{
	struct area_buf b;
	struct egw_attach_cmd c, out;
	uint64_t next = 0, want = 0;

	area_make(&b, 4, 4, 1, 1);
	b.m.cq.ctl->head = b.m.cq.ctl->tail = UINT32_MAX - 5;
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 3; i++) {
			c = cmd_n(next++);
			CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.cq, &c), 0);
		}
		CU_ASSERT_EQUAL(egw_attach_ring_count(&b.m.cq), 3);
		for (int i = 0; i < 3; i++) {
			CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.cq, &out), 1);
			CU_ASSERT_EQUAL(out.tag, want++);
		}
	}
	CU_ASSERT(b.m.cq.ctl->tail < 100); /* it did wrap */
	free(b.mem);
}

static void
test_hostile_indices_reported_not_used(void)
{
	struct area_buf b;
	struct egw_attach_cmd c = cmd_n(1), out;
	struct egw_attach_area *a;

	area_make(&b, 8, 8, 1, 1);
	a = b.mem;
	/* a producer's tail far ahead of what the ring can hold */
	a->sq.tail = 1000;
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), -EBADMSG);
	CU_ASSERT_EQUAL(egw_attach_ring_count(&b.m.sq), 0);
	/* behind the consumer's head */
	a->sq.head = 10;
	a->sq.tail = 9;
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), -EBADMSG);
	CU_ASSERT_EQUAL(a->sq.head, 10); /* nothing consumed */
	/* a consumer's head ahead of our tail */
	a->cq.head = 5;
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.cq, &c), -EBADMSG);
	CU_ASSERT_EQUAL(a->cq.tail, 0);
	free(b.mem);
}

static void
test_rewritten_header_cannot_move_writes(void)
{
	struct area_buf b;
	struct egw_attach_cmd c = cmd_n(7), out;
	struct egw_attach_area *a;
	uint8_t *cq0;

	area_make(&b, 8, 8, 2, 1);
	a = b.mem;
	cq0 = (uint8_t *)a + a->cq.offset;
	/* the client points the ring far outside the mapping and claims a
	 * huge one: the gateway's view does not follow */
	a->cq.offset = 0x7fffffff;
	a->cq.entries = 1u << 30;
	a->nslots = 1u << 20;
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.cq, &c), 0);
	memcpy(&out, cq0, sizeof(out));
	CU_ASSERT_EQUAL(out.tag, 7);
	CU_ASSERT_PTR_NULL(egw_attach_slot_at(&b.m, 2));
	free(b.mem);
}

#define SPSC_N 500000u

static void *
producer(void *arg)
{
	struct egw_attach_rview *r = arg;

	for (uint64_t i = 0; i < SPSC_N;) {
		struct egw_attach_cmd c = cmd_n(i);

		c.room = i * 3 + 1; /* a second field that must match */
		if (egw_attach_ring_put(r, &c) == 0)
			i++;
	}
	return NULL;
}

/* Two threads, a small ring: every entry arrives once, in order, whole. */
static void
test_two_threads_keep_order_and_content(void)
{
	struct area_buf b;
	struct egw_attach_cmd out;
	pthread_t t;
	uint64_t want = 0, bad = 0;

	area_make(&b, 16, 16, 1, 1);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, producer, &b.m.sq), 0);
	while (want < SPSC_N) {
		int rc = egw_attach_ring_get(&b.m.sq, &out);

		if (rc < 0) {
			bad++;
			break;
		}
		if (rc == 0)
			continue;
		bad += out.tag != want || out.room != want * 3 + 1;
		want++;
	}
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(want, SPSC_N);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 0);
	free(b.mem);
}

static const struct egw_attach_limits both = {
	.nslots = 16,
	.max_total_tokens = 1u << 20,
	.encode = true,
	.language = true,
};

static struct egw_attach_cmd
op(uint8_t o)
{
	struct egw_attach_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = o;
	c.room = 42;
	c.tag = 9;
	switch (o) {
	case EGW_OP_SEND_OPEN:
		c.total_tokens = 1000;
		c.nranks = 2;
		break;
	case EGW_OP_RECV_OPEN:
		c.nranks = 2;
		c.rank = 1;
		c.peer_id = 2;
		break;
	}
	c.slot = 15;
	if (o == EGW_OP_NOP)
		c.room = 0;
	if (o == EGW_OP_LOOKUP) {
		c.room = 0;
		c.slot = 0;
		c.content[3] = 7;
	}
	return c;
}

static void
test_command_fields_checked(void)
{
	struct egw_attach_limits enc = both, lang = both;
	struct egw_attach_cmd c;

	enc.language = false;
	lang.encode = false;
	/* a completion's op, never a command's */
	c = op(EGW_OP_PEERS);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EOPNOTSUPP);
	for (uint8_t o = 0; o <= EGW_OP_LOOKUP; o++) {
		c = op(o);
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), 0);
		/* a content key: RECV_OPEN's and LOOKUP's field only */
		c.content[15] = 1;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both),
				o == EGW_OP_RECV_OPEN || o == EGW_OP_LOOKUP ?
				0 : -EINVAL);
		/* an attempt: the OPENs' field only */
		c = op(o);
		c.attempt = 1;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both),
				o == EGW_OP_RECV_OPEN || o == EGW_OP_SEND_OPEN ?
				0 : -EINVAL);
		if (o == EGW_OP_NOP || o == EGW_OP_LOOKUP)
			continue;
		c = op(o);
		c.room = 0;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	}
	c = op(EGW_OP_MAX);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EOPNOTSUPP);
	c = op(0xff);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EOPNOTSUPP);

	/* each side's ops on the other side's port */
	c = op(EGW_OP_SEND_OPEN);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EOPNOTSUPP);
	c = op(EGW_OP_SEND_COMMIT);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EOPNOTSUPP);
	c = op(EGW_OP_RECV_OPEN);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &enc), -EOPNOTSUPP);
	c = op(EGW_OP_RELEASE);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &enc), -EOPNOTSUPP);
	c = op(EGW_OP_ABORT);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &enc), 0);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), 0);
	c = op(EGW_OP_LOOKUP);
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &enc), -EOPNOTSUPP);

	/* LOOKUP: a key and nothing else */
	c = op(EGW_OP_LOOKUP);
	memset(c.content, 0, sizeof(c.content));
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EINVAL);
	c = op(EGW_OP_LOOKUP);
	c.room = 5;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EINVAL);
	c = op(EGW_OP_LOOKUP);
	c.slot = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EINVAL);
	/* a keyed aux-only rank: it could not share another room's blocks */
	c = op(EGW_OP_RECV_OPEN);
	c.flags = EGW_CMDF_AUX_ONLY;
	c.content[0] = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &lang), -EINVAL);

	/* SEND_OPEN */
	c = op(EGW_OP_SEND_OPEN);
	c.total_tokens = 0;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c.total_tokens = both.max_total_tokens;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), 0);
	c.total_tokens++;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EFBIG);
	c = op(EGW_OP_SEND_OPEN);
	c.nranks = 0;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c.nranks = 9;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_SEND_OPEN);
	c.rank = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_SEND_OPEN);
	c.flags = EGW_CMDF_AUX_ONLY;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);

	/* RECV_OPEN */
	c = op(EGW_OP_RECV_OPEN);
	c.flags = EGW_CMDF_AUX_ONLY;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), 0);
	c.flags = 2;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_RECV_OPEN);
	c.rank = 2;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_RECV_OPEN);
	c.nranks = 0;
	c.rank = 0;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c.nranks = 9;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	/* the peer by id or by name, never both nor neither */
	c = op(EGW_OP_RECV_OPEN);
	c.peer_id = 0;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c.flags = EGW_CMDF_PEER_NAME;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), 0);
	c.peer_id = 7;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_RECV_OPEN);
	c.reserved0 = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_RECV_OPEN);
	c.mrope_delta = 5;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);

	c = op(EGW_OP_RECV_OPEN);
	c.cookie = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	c = op(EGW_OP_NOP);
	c.room = 1;
	CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);

	/* every room op names a slot in range */
	for (uint8_t o = EGW_OP_SEND_OPEN; o <= EGW_OP_ABORT; o++) {
		c = op(o);
		c.slot = 16;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -ERANGE);
	}
	/* slot-naming ops carry nothing else */
	for (uint8_t o = EGW_OP_SEND_COMMIT; o <= EGW_OP_LOOKUP; o++) {
		if (o == EGW_OP_RECV_OPEN)
			continue;
		c = op(o);
		c.nranks = 1;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
		c = op(o);
		c.cookie = 3;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
		c = op(o);
		c.flags = 1;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
		c = op(o);
		c.total_tokens = 1;
		CU_ASSERT_EQUAL(egw_attach_cmd_check(&c, &both), -EINVAL);
	}
	CU_ASSERT_STRING_EQUAL(egw_attach_op_name(EGW_OP_RECV_OPEN), "recv_open");
	CU_ASSERT_STRING_EQUAL(egw_attach_op_name(200), "unknown");
}

static struct egw_attach_hello
hello(void)
{
	struct egw_attach_hello h;

	memset(&h, 0, sizeof(h));
	h.magic = EGW_HELLO_MAGIC;
	h.version = EGW_ATTACH_VERSION;
	strcpy(h.port, "p0");
	strcpy(h.client, "rank0");
	return h;
}

/* doc/client.md's worked examples of a retry's room id, computed by a
 * second implementation of the documented formula */
static void
test_attempt_room_ids_are_the_documented_ones(void)
{
	CU_ASSERT_EQUAL(egw_attach_room_id(42, 0), 42);
	CU_ASSERT_EQUAL(egw_attach_room_id(42, 1), 0xbdd732262feb6e95ull);
	CU_ASSERT_EQUAL(egw_attach_room_id(42, 2), 0xd9639a006c85adb0ull);
	CU_ASSERT_EQUAL(egw_attach_room_id(0x123456789abcdef0ull, 7),
			0xac2812bf0089648full);
	/* never 0: room 0 means "no room" everywhere */
	for (uint32_t a = 1; a < 1000; a++)
		CU_ASSERT_NOT_EQUAL(egw_attach_room_id(a, a), 0);
}

static void
test_hello_checked_with_reasons(void)
{
	struct egw_attach_hello h = hello();
	char why[128];

	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h) - 1, why, sizeof(why)), -EPROTO);
	h.magic++;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EPROTO);
	h = hello();
	h.version = 7;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)),
			-EPROTONOSUPPORT);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "version 7"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "version 3"));
	/* an attach version 2 client hears why, in words */
	h.version = 2;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)),
			-EPROTONOSUPPORT);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "version 2"));
	h = hello();
	h.flags = EGW_HELLO_F_WAKEUP | EGW_HELLO_F_PEERS;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)),
			0);
	h.flags = 4;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h = hello();
	h.reserved[39] = 1;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h = hello();
	memset(h.port, 'x', sizeof(h.port)); /* no NUL */
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h = hello();
	h.port[0] = 0;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h = hello();
	h.client[10] = 'y'; /* text after the terminator */
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h = hello();
	h.sq_entries = 100;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h.sq_entries = 128;
	h.cq_entries = 1u << 17;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), -EINVAL);
	h.cq_entries = 1024;
	h.flags = EGW_HELLO_F_WAKEUP;
	CU_ASSERT_EQUAL(egw_attach_hello_check(&h, sizeof(h), why, sizeof(why)), 0);
}

/*
 * Connect from a child process running as uid/gid 65534 with `group` as
 * its only supplementary group, and check the accepted socket against
 * the policy. @return egw_attach_peer_check()'s answer.
 */
static int
check_peer_with_group(const uint32_t *gids, uint16_t ngids, gid_t group,
		      struct egw_attach_peer *who)
{
	const struct egw_attach_policy pol = {
		.self_uid = 0, .gids = gids, .ngids = ngids,
	};
	int afd, rc, status;
	pid_t pid;
	char b;

	/* a socketpair's peer credentials are those of its creator: the
	 * child connects to an abstract listening socket instead */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "egw-peer-%d",
		 (int)getpid());
	CU_ASSERT_FATAL(lfd >= 0);
	CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CU_ASSERT_FATAL(listen(lfd, 1) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		int fd;

		if (setgroups(1, &group) != 0 || setgid(65534) != 0 ||
		    setuid(65534) != 0)
			_exit(2);
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa,
				      sizeof(sa)) != 0)
			_exit(3);
		(void)!read(fd, &b, 1); /* until the parent is done */
		_exit(0);
	}
	afd = accept(lfd, NULL, NULL);
	close(lfd);
	CU_ASSERT_FATAL(afd >= 0);
	rc = egw_attach_peer_check(afd, &pol, who);
	close(afd);
	waitpid(pid, &status, 0);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return rc;
}

/* allow_gids counts the groups a process is in by a supplementary group
 * (as `id -G` lists them), not only its primary gid. */
static void
test_peer_supplementary_group_allowed(void)
{
	const uint32_t inference[] = { 4242 }, other[] = { 4343 };
	struct egw_attach_peer who;

	CU_ASSERT_FATAL(geteuid() == 0); /* the child changes its ids */
	CU_ASSERT_EQUAL(check_peer_with_group(inference, 1, 4242, &who), 1);
	CU_ASSERT_EQUAL(who.uid, 65534);
	CU_ASSERT_EQUAL(who.gid, 65534);
	CU_ASSERT(who.pid > 0);
	CU_ASSERT_EQUAL(check_peer_with_group(other, 1, 4242, &who), 0);
	CU_ASSERT_EQUAL(check_peer_with_group(NULL, 0, 4242, &who), 0);
	/* the primary gid still counts */
	{
		const uint32_t nobody[] = { 65534 };

		CU_ASSERT_EQUAL(check_peer_with_group(nobody, 1, 4242, &who), 1);
	}
}

/* A command and its name entry: both or nothing, one tail store. */
static void
test_two_entries_published_together(void)
{
	struct area_buf b;
	struct egw_attach_cmd two[2], out;
	struct egw_attach_cmd_name n;
	uint32_t tail;

	area_make(&b, 4, 4, 1, 1);
	memset(two, 0, sizeof(two));
	two[0].op = EGW_OP_RECV_OPEN;
	snprintf((char *)&two[1], EGW_ATTACH_NAME_LEN, "enc-3");
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.sq, &two[0]), 0);
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.sq, &two[0]), 0);
	CU_ASSERT_EQUAL(egw_attach_ring_put(&b.m.sq, &two[0]), 0);
	tail = b.m.sq.ctl->tail;
	CU_ASSERT_EQUAL(egw_attach_ring_putn(&b.m.sq, two, 2), -ENOBUFS);
	CU_ASSERT_EQUAL(b.m.sq.ctl->tail, tail);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 1);
	/* across the ring's end */
	CU_ASSERT_EQUAL(egw_attach_ring_putn(&b.m.sq, two, 2), 0);
	CU_ASSERT_EQUAL(b.m.sq.ctl->tail, tail + 2);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &out), 1);
	CU_ASSERT_EQUAL(out.op, EGW_OP_RECV_OPEN);
	CU_ASSERT_EQUAL(egw_attach_ring_get(&b.m.sq, &n), 1);
	CU_ASSERT_STRING_EQUAL(n.name, "enc-3");
	CU_ASSERT_EQUAL(egw_attach_name_check(&n), 0);
	n.reserved[0] = 1;
	CU_ASSERT_EQUAL(egw_attach_name_check(&n), -EINVAL);
	memset(&n, 0, sizeof(n));
	CU_ASSERT_EQUAL(egw_attach_name_check(&n), -EINVAL); /* empty */
	snprintf(n.name, sizeof(n.name), "a");
	n.name[5] = 'x'; /* bytes after the NUL */
	CU_ASSERT_EQUAL(egw_attach_name_check(&n), -EINVAL);
	memset(n.name, 'a', sizeof(n.name)); /* no NUL */
	CU_ASSERT_EQUAL(egw_attach_name_check(&n), -EINVAL);
	free(b.mem);
}

/* The peer table: what the gateway writes is what a client reads, a
 * count beyond the table is impossible, a write in progress says so. */
static void
test_peer_table_written_and_read(void)
{
	struct area_buf b;
	struct egw_attach_peer_rec in[5], out[4];
	uint64_t gen = 0;

	area_make(&b, 4, 4, 1, 1); /* 4 records */
	memset(in, 0, sizeof(in));
	for (uint32_t i = 0; i < 5; i++) {
		in[i].id = 10 + i;
		snprintf(in[i].name, sizeof(in[i].name), "p%u", i);
	}
	CU_ASSERT_EQUAL(egw_attach_peers_read(&b.m, out, 4, &gen), 0);
	CU_ASSERT_EQUAL(gen, 0);
	CU_ASSERT_EQUAL(egw_attach_peers_write(&b.m, in, 5, 1), -E2BIG);
	CU_ASSERT_EQUAL(egw_attach_peers_write(&b.m, in, 3, 7), 0);
	CU_ASSERT_EQUAL(egw_attach_peers_read(&b.m, out, 2, &gen), 3);
	CU_ASSERT_EQUAL(gen, 7);
	CU_ASSERT(out[0].id == 10 && out[1].id == 11);
	CU_ASSERT_STRING_EQUAL(out[1].name, "p1");
	CU_ASSERT_EQUAL(egw_attach_peers_of(b.mem)->seq % 2, 0);
	egw_attach_peers_of(b.mem)->count = 5;
	CU_ASSERT_EQUAL(egw_attach_peers_read(&b.m, out, 4, &gen), -EBADMSG);
	egw_attach_peers_of(b.mem)->seq |= 1;
	CU_ASSERT_EQUAL(egw_attach_peers_read(&b.m, out, 4, &gen), -EAGAIN);
	free(b.mem);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "layout_is_the_documented_one",
		  test_layout_is_the_documented_one },
		{ "bad_counts_and_headers_refused",
		  test_bad_counts_and_headers_refused },
		{ "ring_fifo_full_and_empty", test_ring_fifo_full_and_empty },
		{ "ring_indices_wrap_at_32_bits",
		  test_ring_indices_wrap_at_32_bits },
		{ "hostile_indices_reported_not_used",
		  test_hostile_indices_reported_not_used },
		{ "rewritten_header_cannot_move_writes",
		  test_rewritten_header_cannot_move_writes },
		{ "two_threads_keep_order_and_content",
		  test_two_threads_keep_order_and_content },
		{ "command_fields_checked", test_command_fields_checked },
		{ "hello_checked_with_reasons",
		  test_hello_checked_with_reasons },
		{ "attempt_room_ids_are_the_documented_ones",
		  test_attempt_room_ids_are_the_documented_ones },
		{ "peer_supplementary_group_allowed",
		  test_peer_supplementary_group_allowed },
		{ "two_entries_published_together",
		  test_two_entries_published_together },
		{ "peer_table_written_and_read",
		  test_peer_table_written_and_read },
		{ NULL, NULL },
	};

	return cu_run("attach", tests);
}
