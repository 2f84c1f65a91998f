/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mw_probe - does this RDMA device enforce type-2 memory windows the way
 * the verbs driver's per-window keys use them (doc/rdma.md)?
 *
 * One device, two RC QPs connected to each other (loopback through the
 * device's own GID). The responder registers a buffer with local write
 * and MW-bind access only (no remote access under the region's own key),
 * allocates a type-2 memory window, binds it on its QP to one slice of
 * the buffer and hands the window's rkey to the requester, which then:
 *   1. writes through the window into the slice       -> must land
 *   2. (the responder binds and invalidates the window ROUNDS times more:
 *      the average cost of one bind and one invalidation is printed)
 *   3. writes through the invalidated window           -> must be refused
 *   4. (both QPs are reset and reconnected)
 *   5. writes under the region's own rkey              -> must be refused
 * Each step prints one "mw_probe:" line; the last is
 *   "mw_probe: type2 ok" when all behaved, else "mw_probe: FAIL ...".
 *
 * usage: mw_probe DEVICE GID_INDEX
 * Exit status: 0 enforced, 1 not, 2 setup failed.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF 65536
#define SLICE_OFF 4096
#define SLICE_LEN 8192
#define ROUNDS 200

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static int die(const char *what)
{
	printf("mw_probe: FAIL setup: %s\n", what);
	return 2;
}

/* Waits at most 5 s for one completion; returns 0 and fills wc, or -1. */
static int wait_wc(struct ibv_wc *wc, const char *what)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 5) {
			printf("mw_probe: no completion for %s within 5 s\n", what);
			return -1;
		}
	}
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };

	return ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static struct ibv_qp *make_qp(void)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	return qp == NULL || to_init(qp) ? NULL : qp;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dqpn, union ibv_gid *gid, int gidx,
		      uint32_t psn)
{
	struct ibv_qp_attr m = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dqpn, .rq_psn = psn, .max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *gid, .sgid_index = gidx, .hop_limit = 64 } },
	};

	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 2;
	m.rnr_retry = 2;
	m.sq_psn = psn;
	m.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int rdma_write(struct ibv_qp *qp, struct ibv_mr *src, uint64_t raddr,
		      uint32_t rkey, struct ibv_wc *wc)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src->addr, .length = 1024,
			       .lkey = src->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey } }, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	return wait_wc(wc, "the write");
}

/* Post one signalled WR on qp and wait for its completion: its status,
 * or -1. */
static int post_wait(struct ibv_qp *qp, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(qp, wr, &bad)) {
		printf("mw_probe: FAIL posting %s: %s\n", what, strerror(errno));
		return -1;
	}
	return wait_wc(&wc, what) ? -1 : (int)wc.status;
}

static int mw_bind(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey,
		struct ibv_mr *mr, uint64_t addr)
{
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = IBV_WR_BIND_MW };

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr,
		.addr = addr, .length = SLICE_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int st = post_wait(qp, &wr, "IBV_WR_BIND_MW");

	/* a bind names the MW by its current key; the device leaves
	 * updating mw->rkey to the application */
	if (st == IBV_WC_SUCCESS)
		mw->rkey = rkey;
	return st;
}

static int invalidate(struct ibv_qp *qp, uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = 2, .opcode = IBV_WR_LOCAL_INV,
				  .invalidate_rkey = rkey };

	return post_wait(qp, &wr, "IBV_WR_LOCAL_INV");
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A write that must be refused: remote access error, nothing written. */
static int refused(struct ibv_qp *req, struct ibv_mr *smr, char *dst,
		   uint32_t rkey, const char *what)
{
	struct ibv_wc wc;

	dst[SLICE_OFF] = 0;
	if (rdma_write(req, smr, (uintptr_t)dst + SLICE_OFF, rkey, &wc)) {
		printf("mw_probe: FAIL no completion for the write %s\n", what);
		return 0;
	}
	printf("mw_probe: write %s: %s, byte %s\n", what,
	       ibv_wc_status_str(wc.status), dst[SLICE_OFF] ? "WRITTEN" : "untouched");
	return wc.status == IBV_WC_REM_ACCESS_ERR && dst[SLICE_OFF] == 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	struct ibv_device_attr da;
	union ibv_gid gid;
	struct ibv_wc wc;
	int gidx, n, i;

	if (argc != 3)
		return die("usage: mw_probe DEVICE GID_INDEX");
	gidx = atoi(argv[2]);
	devs = ibv_get_device_list(&n);
	for (i = 0; devs != NULL && i < n; i++)
		if (strcmp(ibv_get_device_name(devs[i]), argv[1]) == 0)
			ctx = ibv_open_device(devs[i]);
	if (ctx == NULL)
		return die("device not found");
	if (ibv_query_device(ctx, &da) == 0)
		printf("mw_probe: device caps: memory windows %d, type 2A %d, "
		       "type 2B %d, max_mw %d\n",
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW),
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A),
		       !!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B), da.max_mw);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (pd == NULL || cq == NULL || ibv_query_gid(ctx, 1, gidx, &gid))
		return die("pd/cq/gid");
	char *dst = calloc(1, BUF), *src = malloc(BUF);
	if (dst == NULL || src == NULL)
		return die("memory");
	memset(src, 0xab, BUF);
	/* as the driver registers its pool: no remote access of its own */
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_MW_BIND);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (dmr == NULL || smr == NULL)
		return die("ibv_reg_mr with IBV_ACCESS_MW_BIND");
	struct ibv_qp *req = make_qp(), *resp = make_qp();
	if (req == NULL || resp == NULL || connect_qp(req, resp->qp_num, &gid, gidx, 100) ||
	    connect_qp(resp, req->qp_num, &gid, gidx, 100))
		return die("QPs");
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (mw == NULL) {
		printf("mw_probe: FAIL ibv_alloc_mw(type 2): %s\n", strerror(errno));
		return 1;
	}
	uint64_t slice = (uintptr_t)dst + SLICE_OFF;
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	if (mw_bind(resp, mw, rkey, dmr, slice) != IBV_WC_SUCCESS) {
		printf("mw_probe: FAIL the bind did not complete successfully\n");
		return 1;
	}
	printf("mw_probe: type-2 window bound on the responder's QP to [%d, %d) "
	       "of the buffer, rkey %#x (the region's %#x)\n",
	       SLICE_OFF, SLICE_OFF + SLICE_LEN, rkey, dmr->rkey);
	if (rdma_write(req, smr, slice, rkey, &wc) || wc.status != IBV_WC_SUCCESS ||
	    (unsigned char)dst[SLICE_OFF] != 0xab) {
		printf("mw_probe: FAIL write through the window: %s\n",
		       ibv_wc_status_str(wc.status));
		return 1;
	}
	printf("mw_probe: write through the window: ok, bytes landed\n");
	double tb = 0, ti = 0;
	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_us();

		if (invalidate(resp, rkey) != IBV_WC_SUCCESS)
			return printf("mw_probe: FAIL invalidation %d\n", r), 1;
		ti += now_us() - t0;
		rkey = ibv_inc_rkey(rkey);
		t0 = now_us();
		if (mw_bind(resp, mw, rkey, dmr, slice) != IBV_WC_SUCCESS)
			return printf("mw_probe: FAIL bind %d\n", r), 1;
		tb += now_us() - t0;
	}
	printf("mw_probe: bind %.1f us, invalidation %.1f us (posted and "
	       "completed, mean of %d)\n", tb / ROUNDS, ti / ROUNDS, ROUNDS);
	if (invalidate(resp, rkey) != IBV_WC_SUCCESS)
		return printf("mw_probe: FAIL the last invalidation\n"), 1;
	if (!refused(req, smr, dst, rkey, "through the invalidated window"))
		return printf("mw_probe: FAIL the invalidated window took a write\n"), 1;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	ibv_query_qp(resp, &qa, IBV_QP_STATE, &qi);
	printf("mw_probe: the responder's QP after the refusal: %s\n",
	       qa.qp_state == IBV_QPS_ERR ? "error" : "not in error");
	/* both QPs back, on new PSNs, then the region's own key */
	qa.qp_state = IBV_QPS_RESET;
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
	if (ibv_modify_qp(req, &qa, IBV_QP_STATE) || ibv_modify_qp(resp, &qa, IBV_QP_STATE) ||
	    to_init(req) || to_init(resp) ||
	    connect_qp(req, resp->qp_num, &gid, gidx, 5000) ||
	    connect_qp(resp, req->qp_num, &gid, gidx, 5000))
		return die("QPs reconnected");
	if (!refused(req, smr, dst, dmr->rkey, "under the region's own rkey"))
		return printf("mw_probe: FAIL the region admits remote writes\n"), 1;
	printf("mw_probe: type2 ok\n");
	return 0;
}
