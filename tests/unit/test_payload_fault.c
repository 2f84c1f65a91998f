/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fault-injecting payload driver over a stub driver that records what
 * it is asked to do: every op reaches the driver underneath, optional ops
 * stay as optional as the driver's, the link error comes after the batch
 * asked for and the stale write once the room after the one asked for has
 * been sent, and the fault's own completions never reach the caller.
 */
#include <errno.h>
#include <string.h>

#include "cu_main.h"

#include "egw_payload_fault.h"

/* ---- the stub driver --------------------------------------------------- */

#define STUB_MAX 16

struct stub_post {
	uint32_t peer;
	struct egw_write w;     /* the batch's first write */
	uint32_t n;
	uint64_t cookie;
};

static struct {
	struct stub_post post[STUB_MAX];
	uint32_t nposts;
	struct egw_payload_cpl cpl[STUB_MAX]; /* one per post, in order */
	uint32_t ncpl;
	int connects, describes, closes, binds;
} stub;

static int stub_instance;

static void
stub_describe(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
	      uint8_t gid[16], uint32_t *qpn)
{
	(void)p; (void)r; (void)gid;
	*qpn = 77;
	stub.describes++;
}

static int
stub_connect(struct egw_payload *p, uint32_t peer, const struct egw_register *r)
{
	(void)p; (void)r;
	stub.connects++;
	return peer == 9 ? -EHOSTUNREACH : 0;
}

static int
stub_post(struct egw_payload *p, uint32_t peer, const struct egw_write *w,
	  uint32_t n, uint64_t cookie)
{
	(void)p;
	if (stub.nposts == STUB_MAX)
		return -ENOBUFS;
	stub.post[stub.nposts++] = (struct stub_post){ .peer = peer,
		.w = w[0], .n = n, .cookie = cookie };
	stub.cpl[stub.ncpl++] = (struct egw_payload_cpl){ .cookie = cookie,
							  .ok = true };
	return 0;
}

static int
stub_window_bind(struct egw_payload *p, uint32_t peer,
		 const struct egw_run *run, uint32_t rkeys[EGW_KIND_MAX],
		 uint64_t cookie, uint64_t now)
{
	(void)p; (void)peer; (void)run; (void)cookie; (void)now;
	rkeys[0] = 0x1234;
	stub.binds++;
	return 0;
}

static uint32_t
stub_poll(struct egw_payload *p, struct egw_payload_cpl *c, uint32_t max,
	  uint64_t now)
{
	uint32_t n = stub.ncpl < max ? stub.ncpl : max;

	(void)p; (void)now;
	memcpy(c, stub.cpl, n * sizeof(*c));
	memmove(stub.cpl, stub.cpl + n, (stub.ncpl - n) * sizeof(*c));
	stub.ncpl -= n;
	return n;
}

static void
stub_close(struct egw_payload *p)
{
	CU_ASSERT_PTR_EQUAL(p, (struct egw_payload *)&stub_instance);
	stub.closes++;
}

/* no endpoint, why, disconnect, changed, window_unbind, stats, pool_fd */
static const struct egw_payload_ops stub_ops = {
	.name = "stub",
	.describe = stub_describe,
	.connect = stub_connect,
	.disconnect_silent = true,
	.post = stub_post,
	.window_bind = stub_window_bind,
	.poll = stub_poll,
	.close = stub_close,
};

static const struct egw_payload_ops *ops;
static struct egw_payload *drv;

static void
wrap(uint64_t link_error_at, uint64_t stale_write_at)
{
	struct egw_payload_fault_params fp = {
		.link_error_at = link_error_at,
		.stale_write_at = stale_write_at,
	};

	memset(&stub, 0, sizeof(stub));
	ops = &stub_ops;
	drv = (struct egw_payload *)&stub_instance;
	CU_ASSERT_FATAL(egw_payload_fault_wrap(&ops, &drv, &fp) == 0);
	CU_ASSERT_FATAL(ops != &stub_ops);
}

/* A batch of one write to `peer` under `rkey`, its cookie `cookie`. */
static int
post_one(uint32_t peer, uint32_t rkey, uint64_t cookie)
{
	struct egw_write w = { .kind = EGW_KIND_EMB, .src_block = 1,
			       .dst_block = (uint32_t)cookie, .tokens = 4,
			       .rkey = rkey, .bytes = 256 };

	return ops->post(drv, peer, &w, 1, cookie);
}

static void
test_forwards_every_op_to_the_driver(void)
{
	struct egw_region r[EGW_KIND_MAX];
	struct egw_register reg;
	struct egw_run run;
	uint32_t rkeys[EGW_KIND_MAX] = { 0 }, qpn = 0;
	uint8_t gid[16];
	struct egw_payload_cpl c[4];

	wrap(0, 0);
	memset(&reg, 0, sizeof(reg));
	memset(&run, 0, sizeof(run));
	ops->describe(drv, r, gid, &qpn);
	CU_ASSERT_EQUAL(qpn, 77);
	CU_ASSERT_EQUAL(ops->connect(drv, 0, &reg), 0);
	CU_ASSERT_EQUAL(ops->connect(drv, 9, &reg), -EHOSTUNREACH);
	CU_ASSERT_EQUAL(ops->window_bind(drv, 0, &run, rkeys, 7, 0), 0);
	CU_ASSERT_EQUAL(rkeys[0], 0x1234);
	CU_ASSERT_EQUAL(post_one(0, 5, 1), 0);
	CU_ASSERT_EQUAL(post_one(1, 5, 2), 0);
	CU_ASSERT_EQUAL(stub.describes, 1);
	CU_ASSERT_EQUAL(stub.connects, 2);
	CU_ASSERT_EQUAL(stub.binds, 1);
	CU_ASSERT_EQUAL_FATAL(stub.nposts, 2);
	CU_ASSERT(stub.post[1].peer == 1 && stub.post[1].cookie == 2 &&
		  stub.post[1].w.rkey == 5);
	CU_ASSERT_EQUAL_FATAL(ops->poll(drv, c, 4, 0), 2);
	CU_ASSERT(c[0].cookie == 1 && c[1].cookie == 2 && c[1].ok);
	CU_ASSERT_EQUAL(egw_payload_fault_count(drv), 0);
	ops->close(drv);
	CU_ASSERT_EQUAL(stub.closes, 1);
}

static void
test_optional_ops_stay_as_the_drivers(void)
{
	wrap(0, 0);
	CU_ASSERT_STRING_EQUAL(ops->name, "stub");
	CU_ASSERT(ops->disconnect_silent);
	CU_ASSERT_PTR_NULL(ops->endpoint);
	CU_ASSERT_PTR_NULL(ops->why);
	CU_ASSERT_PTR_NULL(ops->disconnect);
	CU_ASSERT_PTR_NULL(ops->changed);
	CU_ASSERT_PTR_NULL(ops->window_unbind);
	CU_ASSERT_PTR_NOT_NULL(ops->window_bind);
	CU_ASSERT_EQUAL(ops->open(NULL, 0, NULL, NULL), -ENOTSUP);
	ops->close(drv);
}

static void
test_refuses_a_driver_without_post(void)
{
	struct egw_payload_ops no_post = stub_ops;
	struct egw_payload_fault_params fp = { .link_error_at = 1 };
	const struct egw_payload_ops *o = &no_post;
	struct egw_payload *p = (struct egw_payload *)&stub_instance;

	no_post.post = NULL;
	CU_ASSERT_EQUAL(egw_payload_fault_wrap(&o, &p, &fp), -EINVAL);
	CU_ASSERT_PTR_EQUAL(o, &no_post); /* nothing changed */
	CU_ASSERT_PTR_EQUAL(p, (struct egw_payload *)&stub_instance);
}

static void
test_link_error_after_the_nth_batch(void)
{
	struct egw_payload_cpl c[8];

	wrap(3, 0);
	CU_ASSERT_EQUAL(post_one(0, 0x100, 1), 0);
	CU_ASSERT_EQUAL(post_one(0, 0x100, 2), 0);
	CU_ASSERT_EQUAL(stub.nposts, 2); /* nothing before the 3rd */
	CU_ASSERT_EQUAL(post_one(1, 0x200, 3), 0);
	/* the fault's write to the 3rd batch's peer under a key the peer
	 * never gave, then the batch behind it (it fails with the link) */
	CU_ASSERT_EQUAL_FATAL(stub.nposts, 4);
	CU_ASSERT_EQUAL(stub.post[2].peer, 1);
	CU_ASSERT_EQUAL(stub.post[2].cookie, EGW_PAYLOAD_FAULT_COOKIE);
	CU_ASSERT_EQUAL(stub.post[2].w.rkey, ~0x200u);
	CU_ASSERT_EQUAL(stub.post[2].w.dst_block, 3);
	CU_ASSERT_EQUAL(stub.post[3].cookie, 3);
	CU_ASSERT_EQUAL(egw_payload_fault_count(drv), 1);
	CU_ASSERT_EQUAL(post_one(0, 0x100, 4), 0);
	CU_ASSERT_EQUAL(stub.nposts, 5); /* once */
	/* the fault's completion stays inside */
	CU_ASSERT_EQUAL_FATAL(ops->poll(drv, c, 8, 0), 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(c[i].cookie, (uint64_t)i + 1);
	ops->close(drv);
}

static void
test_stale_write_once_the_next_room_is_sent(void)
{
	wrap(0, 2);
	CU_ASSERT_EQUAL(post_one(0, 0x101, 1), 0);  /* room 1 */
	egw_payload_fault_room_sent(drv);
	CU_ASSERT_EQUAL(post_one(0, 0x102, 2), 0);  /* room 2 */
	egw_payload_fault_room_sent(drv);           /* remembered */
	CU_ASSERT_EQUAL(stub.nposts, 2);
	CU_ASSERT_EQUAL(post_one(0, 0x103, 3), 0);  /* room 3 */
	CU_ASSERT_EQUAL(stub.nposts, 3);
	egw_payload_fault_room_sent(drv);
	/* room 2's last write once more, under room 2's key */
	CU_ASSERT_EQUAL_FATAL(stub.nposts, 4);
	CU_ASSERT_EQUAL(stub.post[3].cookie, EGW_PAYLOAD_FAULT_COOKIE);
	CU_ASSERT_EQUAL(stub.post[3].w.rkey, 0x102);
	CU_ASSERT_EQUAL(stub.post[3].w.dst_block, 2);
	CU_ASSERT_EQUAL(egw_payload_fault_count(drv), 1);
	CU_ASSERT_EQUAL(post_one(0, 0x104, 4), 0);
	egw_payload_fault_room_sent(drv);
	CU_ASSERT_EQUAL(stub.nposts, 5); /* once */
	ops->close(drv);
}

static void
test_no_fault_when_unarmed(void)
{
	struct egw_payload_cpl c[STUB_MAX];

	wrap(0, 0);
	for (uint64_t i = 1; i <= 6; i++) {
		CU_ASSERT_EQUAL(post_one(0, 0x100, i), 0);
		egw_payload_fault_room_sent(drv);
	}
	CU_ASSERT_EQUAL(stub.nposts, 6);
	CU_ASSERT_EQUAL(ops->poll(drv, c, STUB_MAX, 0), 6);
	CU_ASSERT_EQUAL(egw_payload_fault_count(drv), 0);
	ops->close(drv);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "every op reaches the driver underneath",
		  test_forwards_every_op_to_the_driver },
		{ "optional ops, name, disconnect_silent: the driver's",
		  test_optional_ops_stay_as_the_drivers },
		{ "a driver without post: refused, nothing changed",
		  test_refuses_a_driver_without_post },
		{ "link error after the Nth batch, once, unseen by poll",
		  test_link_error_after_the_nth_batch },
		{ "stale write once the room after the Nth is sent",
		  test_stale_write_once_the_next_room_is_sent },
		{ "unarmed: nothing added", test_no_fault_when_unarmed },
		{ NULL, NULL },
	};

	return cu_run("payload_fault", tests);
}
