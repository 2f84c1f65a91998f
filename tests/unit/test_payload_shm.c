/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm payload driver: an encode side writing into a language side's
 * pool file, both in this process. Writes land where the REGISTER says
 * and nowhere else; a batch fails whole when a write is outside the
 * peer's regions or the peer is not connected; a full completion ring and
 * an unknown peer are errors of post() itself; the pool file is checked
 * against the regions the peer claims and removed on close.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cu_main.h"

#include "payload_pair.h"

static char path[64];
static struct pp_pair pp;

static void
open_pair(void)
{
	snprintf(path, sizeof(path), "/tmp/egw-test-shm-%ld", (long)getpid());
	CU_ASSERT_FATAL(pp_open(&pp, &egw_payload_shm_ops, path) == 0);
}

static uint32_t
ring_size(void)
{
	return pp.side[PP_ENC].conf.max_rooms * EGW_XFER_MAX_RANKS *
	       EGW_XFER_PIPE;
}

static void
test_write_lands(void)
{
	struct egw_write w[2];
	struct egw_payload_cpl c[4];
	struct egw_payload_stats st;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	pp_fill(&pp, 2, 5);
	pp_fill(&pp, 3, 9);
	w[0] = pp_emb(&pp, 2, 5, PP_BLOCK_TOKENS);
	w[1] = pp_emb(&pp, 3, 0, 3);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, w, 2, 42) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 42);
	CU_ASSERT(c[0].ok);
	CU_ASSERT(pp_landed(&pp, 5, 5, PP_BLOCK_TOKENS));
	CU_ASSERT(pp_landed(&pp, 0, 9, 3));
	CU_ASSERT(!pp_landed(&pp, 0, 9, 4)); /* only the 3 tokens written */
	pp.ops->stats(pp.side[PP_ENC].drv, &st);
	CU_ASSERT_EQUAL(st.batches, 1);
	CU_ASSERT_EQUAL(st.writes, 2);
	CU_ASSERT_EQUAL(st.bytes, w[0].bytes + w[1].bytes);
	CU_ASSERT_EQUAL(st.blocks, 2);
	CU_ASSERT_EQUAL(st.failed_batches, 0);
	pp_close(&pp);
}

static void
test_write_outside_regions_fails_batch(void)
{
	struct egw_write bad[2];
	struct egw_payload_cpl c[4];
	struct egw_payload_stats st;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	bad[0] = pp_emb(&pp, 0, PP_BLOCKS, 1); /* past the last block */
	bad[1] = pp_emb(&pp, 0, 0, 1);
	bad[1].kind = EGW_KIND_MAX;            /* no such kind */
	for (unsigned i = 0; i < 2; i++) {
		struct egw_write w[2] = { pp_emb(&pp, 1, 1, 1), bad[i] };

		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, w, 2, 7 + i) == 0);
		CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
		CU_ASSERT_EQUAL(c[0].cookie, 7 + i);
		CU_ASSERT(!c[0].ok);
	}
	/* a write longer than what is left of the source region */
	{
		struct egw_write w = pp_emb(&pp, PP_BLOCKS - 1, 0, 2 * PP_BLOCK_TOKENS);

		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 9) == 0);
		CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 4), 1);
		CU_ASSERT(!c[0].ok);
	}
	pp.ops->stats(pp.side[PP_ENC].drv, &st);
	CU_ASSERT_EQUAL(st.failed_batches, 3);
	CU_ASSERT_EQUAL(st.refused_writes, 3);
	pp_close(&pp);
}

static void
test_unconnected_peer_fails_batch(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[2];

	open_pair();
	w = pp_emb(&pp, 0, 0, 1);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 3) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 3);
	CU_ASSERT(!c[0].ok);
	pp_close(&pp);
}

/* The peer restarted: disconnect unmaps its pool; a write after it fails
 * until the next connect. */
static void
test_disconnect_unmaps(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[2];

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	w = pp_emb(&pp, 0, 0, 1);
	pp.ops->disconnect(pp.side[PP_ENC].drv, 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 5) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 5 && !c[0].ok);
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 6) == 0);
	CU_ASSERT_EQUAL_FATAL(pp_poll(&pp, PP_ENC, c, 2), 1);
	CU_ASSERT(c[0].cookie == 6 && c[0].ok);
	pp_close(&pp);
}

static void
test_post_errors(void)
{
	struct egw_write w;
	struct egw_payload_cpl c[64];
	uint32_t n = 0;

	open_pair();
	CU_ASSERT_FATAL(pp_connect(&pp) == 0);
	w = pp_emb(&pp, 0, 0, 1);
	CU_ASSERT_EQUAL(pp.ops->post(pp.side[PP_ENC].drv, EGW_CONF_MAX_PEERS,
				     &w, 1, 1), -EINVAL);
	for (uint32_t i = 0; i < ring_size(); i++)
		CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, i) == 0);
	/* nothing taken: the batch can be posted again after a poll */
	CU_ASSERT_EQUAL(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 99),
			-ENOBUFS);
	CU_ASSERT_EQUAL(pp.ops->poll(pp.side[PP_ENC].drv, c, 1), 1);
	CU_ASSERT_EQUAL(c[0].cookie, 0);
	CU_ASSERT(pp.ops->post(pp.side[PP_ENC].drv, 0, &w, 1, 99) == 0);
	n = pp_poll(&pp, PP_ENC, c, 64);
	CU_ASSERT_EQUAL_FATAL(n, ring_size());
	CU_ASSERT_EQUAL(c[n - 1].cookie, 99);
	pp_close(&pp);
}

static void
test_connect_checks_file(void)
{
	struct egw_register r;

	open_pair();
	pp_register(&pp, PP_LANG, &r);
	r.pool_blocks = 2 * PP_BLOCKS; /* more than the file holds */
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r), -ERANGE);
	pp_register(&pp, PP_LANG, &r);
	CU_ASSERT_EQUAL(pp.ops->connect(pp.side[PP_ENC].drv, EGW_CONF_MAX_PEERS,
					&r), -EINVAL);
	CU_ASSERT(pp.ops->connect(pp.side[PP_ENC].drv, 0, &r) == 0);
	pp_close(&pp);
}

static void
test_close_removes_pool_file(void)
{
	open_pair();
	CU_ASSERT(access(path, F_OK) == 0);
	pp_close(&pp);
	CU_ASSERT(access(path, F_OK) != 0);
}

/* Both sides' pools can be mapped through pool_fd (local engines do):
 * the same bytes as the pool; the sending side's is a memfd sealed so
 * that no holder of the fd can shrink it under the gateway. */
static void
test_pool_fd_maps_the_pool(void)
{
	open_pair();
	for (int side = PP_ENC; side <= PP_LANG; side++) {
		struct egw_pool *pool = pp.side[side].pool;
		size_t bytes = egw_geom_mem_bytes(egw_pool_geom(pool));
		int fd = pp.ops->pool_fd(pp.side[side].drv);
		uint8_t *m;

		CU_ASSERT_FATAL(fd >= 0);
		m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CU_ASSERT_FATAL(m != MAP_FAILED);
		m[bytes - 1] = 0x5a;
		CU_ASSERT_EQUAL(((uint8_t *)egw_pool_mem(pool))[bytes - 1], 0x5a);
		((uint8_t *)egw_pool_mem(pool))[0] = 0xa5;
		CU_ASSERT_EQUAL(m[0], 0xa5);
		munmap(m, bytes);
	}
	CU_ASSERT_EQUAL(ftruncate(pp.ops->pool_fd(pp.side[PP_ENC].drv), 4096), -1);
	CU_ASSERT_EQUAL(errno, EPERM);
	pp_close(&pp);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "write lands where the REGISTER says", test_write_lands },
		{ "a write outside the peer's regions fails its batch",
		  test_write_outside_regions_fails_batch },
		{ "a batch to an unconnected peer fails",
		  test_unconnected_peer_fails_batch },
		{ "unknown peer -EINVAL, full ring -ENOBUFS", test_post_errors },
		{ "disconnect unmaps the peer's pool", test_disconnect_unmaps },
		{ "connect checks the pool file against the regions",
		  test_connect_checks_file },
		{ "close removes the pool file", test_close_removes_pool_file },
		{ "pool_fd maps the pool; the sending side's cannot shrink",
		  test_pool_fd_maps_the_pool },
		{ NULL, NULL },
	};

	return cu_run("payload_shm", tests);
}
