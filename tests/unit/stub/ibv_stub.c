/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stub rdma-core (ibv_stub.h). ibv_post_send and ibv_poll_cq are
 * inline in <infiniband/verbs.h> and call through the context's ops, so
 * the device's context carries this file's versions; ibv_query_port and
 * ibv_reg_mr are macros there, hence the parenthesised names below.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibv_stub.h"
#include "stub.h"

/* a stub's parameters are its signature; it need not use them all */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define MAX_MR 8
#define MW_KEY_BASE 0x800000u        /* MW keys: index << 8 | key byte */

struct stub_qp {
	struct ibv_qp qp;            /* first: the driver holds &qp */
	uint32_t max_send_wr;
	uint32_t sq_used;            /* posted, not yet freed by a completion */
	uint32_t since_signal;       /* completed unsignalled, slots still held */
	uint32_t dest_qpn;
	/* the address vector RTR was given */
	struct ibv_ah_attr av;
};

struct ibv_stub ibv_stub;

static struct ibv_device stub_device;
static struct ibv_context stub_ctx;
static struct ibv_mr *mrs[MAX_MR];
static int mr_access[MAX_MR];
static uint32_t next_qpn = 0x100, next_key = 0x1000;

static int stub_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad);
static int stub_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
static struct ibv_mw *stub_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
static int stub_dealloc_mw(struct ibv_mw *mw);

void
ibv_stub_reset(void)
{
	memset(&ibv_stub, 0, sizeof(ibv_stub));
	snprintf(ibv_stub.name, sizeof(ibv_stub.name), "stub0");
	ibv_stub.port_state = IBV_PORT_ACTIVE;
	ibv_stub.mtu = IBV_MTU_1024;
	ibv_stub.max_qp_wr = 4096;
	memset(&stub_ctx, 0, sizeof(stub_ctx));
	stub_ctx.device = &stub_device;
	stub_ctx.ops.post_send = stub_post_send;
	stub_ctx.ops.poll_cq = stub_poll_cq;
	stub_ctx.ops.alloc_mw = stub_alloc_mw;
	stub_ctx.ops.dealloc_mw = stub_dealloc_mw;
}

void
ibv_stub_gid(uint32_t i, uint32_t ipv4, enum ibv_gid_type type)
{
	struct ibv_gid_entry *e = &ibv_stub.gid[i];

	memset(e, 0, sizeof(*e));
	e->gid.raw[10] = e->gid.raw[11] = 0xff;
	e->gid.raw[12] = (uint8_t)(ipv4 >> 24);
	e->gid.raw[13] = (uint8_t)(ipv4 >> 16);
	e->gid.raw[14] = (uint8_t)(ipv4 >> 8);
	e->gid.raw[15] = (uint8_t)ipv4;
	e->gid_index = i;
	e->port_num = 1;
	e->gid_type = type;
	if (i >= ibv_stub.ngid)
		ibv_stub.ngid = i + 1;
}

enum ibv_qp_state
ibv_stub_qp_state(const struct ibv_qp *qp)
{
	return qp->state;
}

uint32_t
ibv_stub_qp_dest(const struct ibv_qp *qp)
{
	return ((const struct stub_qp *)(const void *)qp)->dest_qpn;
}

const struct ibv_ah_attr *
ibv_stub_qp_av(const struct ibv_qp *qp)
{
	return &((const struct stub_qp *)(const void *)qp)->av;
}

/* ---- device, port, GID ----------------------------------------------- */

struct ibv_device **
ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));

	snprintf(stub_device.name, sizeof(stub_device.name), "%s",
		 ibv_stub.name);
	if (l != NULL)
		l[0] = &stub_device;
	if (num != NULL)
		*num = l != NULL;
	return l;
}

void
ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *
ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

struct ibv_context *
ibv_open_device(struct ibv_device *device)
{
	return &stub_ctx;
}

DEFINE_STUB(ibv_close_device, int, (struct ibv_context *context), 0)

int (ibv_query_port)(struct ibv_context *context, uint8_t port_num,
		     struct _compat_ibv_port_attr *port_attr)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)port_attr;

	if (port_num != 1)
		return EINVAL;
	a->state = ibv_stub.port_state;
	a->active_mtu = ibv_stub.mtu;
	a->max_mtu = IBV_MTU_4096;
	a->gid_tbl_len = (int)ibv_stub.ngid;
	return 0;
}

int
_ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		  uint32_t gid_index, struct ibv_gid_entry *entry,
		  uint32_t flags, size_t entry_size)
{
	if (gid_index >= ibv_stub.ngid ||
	    (ibv_stub.gid_unreadable & (1u << gid_index)))
		return ENODATA;
	*entry = ibv_stub.gid[gid_index];
	return 0;
}

int
ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
	      union ibv_gid *gid)
{
	if (index < 0 || (uint32_t)index >= ibv_stub.ngid)
		return -1;
	*gid = ibv_stub.gid[index].gid;
	return 0;
}

int
ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->max_qp_wr = ibv_stub.max_qp_wr;
	return 0;
}

DEFINE_STUB(ibv_wc_status_str, const char *, (enum ibv_wc_status status),
	    "stub completion error")

/* ---- PD, CQ, MR ------------------------------------------------------ */

struct ibv_pd *
ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (pd != NULL)
		pd->context = context;
	return pd;
}

int
ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

struct ibv_cq *
ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
	      struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq *cq = calloc(1, sizeof(*cq));

	if (cq != NULL) {
		cq->context = context;
		cq->cqe = cqe;
	}
	return cq;
}

int
ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (cqe < cq->cqe)
		return EINVAL; /* never shrinks under its completions */
	cq->cqe = cqe;
	return 0;
}

int
ibv_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}

struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
			    int access)
{
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] == NULL) {
			struct ibv_mr *mr = calloc(1, sizeof(*mr));

			if (mr == NULL)
				return NULL;
			mr->context = pd->context;
			mr->pd = pd;
			mr->addr = addr;
			mr->length = length;
			mr->lkey = next_key++;
			mr->rkey = next_key++;
			mrs[i] = mr;
			mr_access[i] = access;
			ibv_stub.last_mr_access = access;
			return mr;
		}
	errno = ENOMEM;
	return NULL;
}

/* taken only when the access flags are not a constant */
struct ibv_mr *
ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
		 unsigned int access)
{
	return (ibv_reg_mr)(pd, addr, length, (int)access);
}

int
ibv_dereg_mr(struct ibv_mr *mr)
{
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] == mr)
			mrs[i] = NULL;
	free(mr);
	return 0;
}

static bool
inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* Does the responder take an RDMA WRITE from `from` (a region with remote
 * write access, or a window bound on the QP it arrives at)? What the rkey
 * check of a real responder does. */
static bool
remote_ok(const struct ibv_qp *from, uint32_t rkey, uint64_t addr, uint32_t len)
{
	uint32_t at = ((const struct stub_qp *)(const void *)from)->dest_qpn;

	for (int i = 0; i < MAX_MR; i++) {
		const struct ibv_mr *mr = mrs[i];

		if (mr == NULL || mr->rkey != rkey)
			continue;
		return (mr_access[i] & IBV_ACCESS_REMOTE_WRITE) &&
		       inside((uint64_t)(uintptr_t)mr->addr, mr->length, addr, len);
	}
	for (int i = 0; i < IBV_STUB_MAX_MW; i++) {
		const struct ibv_stub_mw *w = &ibv_stub.mw[i];

		if (w->used && w->bound && w->key == rkey)
			return w->qp->qp_num == at && inside(w->addr, w->len, addr, len);
	}
	return false;
}

struct ibv_stub_mw *
ibv_stub_mw_by_key(uint32_t rkey)
{
	for (int i = 0; i < IBV_STUB_MAX_MW; i++)
		if (ibv_stub.mw[i].used && ibv_stub.mw[i].key == rkey)
			return &ibv_stub.mw[i];
	return NULL;
}

static struct ibv_mw *
stub_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	for (uint32_t i = 0; i < IBV_STUB_MAX_MW; i++) {
		struct ibv_stub_mw *w = &ibv_stub.mw[i];

		if (w->used)
			continue;
		memset(w, 0, sizeof(*w));
		w->used = true;
		w->mw.context = pd->context;
		w->mw.pd = pd;
		w->mw.type = type;
		w->key = w->mw.rkey = (MW_KEY_BASE + i) << 8 | 0x10;
		ibv_stub.mw_allocs++;
		return &w->mw;
	}
	errno = ENOMEM;
	return NULL;
}

static int
stub_dealloc_mw(struct ibv_mw *mw)
{
	struct ibv_stub_mw *w = (struct ibv_stub_mw *)(void *)mw;

	w->used = w->bound = false;
	ibv_stub.mw_deallocs++;
	return 0;
}

/* A bind or an invalidation takes effect; false when the device refuses
 * it (a completion error, the QP to error). */
static bool
mw_op(const struct ibv_stub_wr *s)
{
	struct ibv_stub_mw *w = (struct ibv_stub_mw *)(void *)s->mw;

	if (s->opcode == IBV_WR_LOCAL_INV) {
		w = ibv_stub_mw_by_key(s->rkey);
		if (w == NULL || !w->bound || w->qp != s->qp)
			return false;
		w->bound = false;
		ibv_stub.invalidations++;
		return true;
	}
	if (!w->used || w->bound || w->mw.type != IBV_MW_TYPE_2 ||
	    s->mw_rkey != w->key || (s->rkey & ~0xffu) != (w->key & ~0xffu))
		return false;
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] != NULL && mrs[i]->lkey == s->lkey &&
		    (mr_access[i] & IBV_ACCESS_MW_BIND) &&
		    inside((uint64_t)(uintptr_t)mrs[i]->addr, mrs[i]->length,
			   s->remote, s->len)) {
			w->bound = true;
			w->qp = s->qp;
			w->addr = s->remote;
			w->len = s->len;
			w->key = s->rkey;
			ibv_stub.binds++;
			return true;
		}
	return false;
}

/* ---- QPs ------------------------------------------------------------- */

static void
discard(const struct ibv_qp *qp)
{
	for (uint32_t i = 0; i < ibv_stub.nwr; i++)
		if (ibv_stub.wr[i].qp == qp)
			ibv_stub.wr[i].done = true;
}

struct ibv_qp *
ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct stub_qp *q;

	if (a->cap.max_send_wr > (uint32_t)ibv_stub.max_qp_wr ||
	    a->qp_type != IBV_QPT_RC) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.qp_num = next_qpn++;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = a->qp_type;
	q->max_send_wr = a->cap.max_send_wr;
	ibv_stub.max_send_wr = a->cap.max_send_wr;
	if (ibv_stub.nqp < sizeof(ibv_stub.qp) / sizeof(ibv_stub.qp[0]))
		ibv_stub.qp[ibv_stub.nqp++] = &q->qp;
	return &q->qp;
}

int
ibv_destroy_qp(struct ibv_qp *qp)
{
	discard(qp);
	free(qp);
	return 0;
}

int
ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct stub_qp *q = (struct stub_qp *)(void *)qp;

	if (ibv_stub.modify_qp_rc != 0)
		return ibv_stub.modify_qp_rc;
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	if (attr->qp_state == IBV_QPS_RESET) {
		discard(qp);
		q->sq_used = q->since_signal = 0;
	}
	if (attr->qp_state == IBV_QPS_RTR) {
		if (!(mask & IBV_QP_DEST_QPN) || qp->state != IBV_QPS_INIT)
			return EINVAL;
		q->dest_qpn = attr->dest_qp_num;
		if (mask & IBV_QP_AV)
			q->av = attr->ah_attr;
	}
	if (attr->qp_state == IBV_QPS_RTS && qp->state != IBV_QPS_RTR)
		return EINVAL;
	qp->state = attr->qp_state;
	return 0;
}

static int
stub_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
	       struct ibv_send_wr **bad)
{
	struct stub_qp *q = (struct stub_qp *)(void *)qp;

	if (ibv_stub.post_send_rc != 0) {
		*bad = wr;
		return ibv_stub.post_send_rc;
	}
	for (; wr != NULL; wr = wr->next) {
		struct ibv_stub_wr *s;

		if ((qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) ||
		    (wr->opcode == IBV_WR_RDMA_WRITE && wr->num_sge != 1) ||
		    (wr->opcode != IBV_WR_RDMA_WRITE &&
		     wr->opcode != IBV_WR_BIND_MW &&
		     wr->opcode != IBV_WR_LOCAL_INV)) {
			*bad = wr;
			return EINVAL;
		}
		if (q->sq_used == q->max_send_wr ||
		    ibv_stub.nwr == IBV_STUB_MAX_WR) {
			*bad = wr;
			return ENOMEM;
		}
		s = &ibv_stub.wr[ibv_stub.nwr++];
		*s = (struct ibv_stub_wr){
			.qp = qp, .wr_id = wr->wr_id, .opcode = wr->opcode,
			.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0,
		};
		if (wr->opcode == IBV_WR_RDMA_WRITE) {
			s->src = wr->sg_list[0].addr;
			s->len = wr->sg_list[0].length;
			s->lkey = wr->sg_list[0].lkey;
			s->remote = wr->wr.rdma.remote_addr;
			s->rkey = wr->wr.rdma.rkey;
		} else if (wr->opcode == IBV_WR_BIND_MW) {
			s->mw = wr->bind_mw.mw;
			s->mw_rkey = wr->bind_mw.mw->rkey;
			s->rkey = wr->bind_mw.rkey;
			s->lkey = wr->bind_mw.bind_info.mr->lkey;
			s->remote = wr->bind_mw.bind_info.addr;
			s->len = (uint32_t)wr->bind_mw.bind_info.length;
		} else {
			s->rkey = wr->invalidate_rkey;
		}
		q->sq_used++;
	}
	ibv_stub.post_calls++;
	return 0;
}

/* One WR reaches the responder; true when it makes a completion. */
static bool
complete_one(struct ibv_stub_wr *s, struct ibv_wc *wc)
{
	struct stub_qp *q = (struct stub_qp *)(void *)s->qp;

	s->done = true;
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = s->wr_id;
	wc->opcode = s->opcode == IBV_WR_BIND_MW ? IBV_WC_BIND_MW :
		     s->opcode == IBV_WR_LOCAL_INV ? IBV_WC_LOCAL_INV :
		     IBV_WC_RDMA_WRITE;
	wc->qp_num = s->qp->qp_num;
	if (s->qp->state == IBV_QPS_ERR) {
		wc->status = IBV_WC_WR_FLUSH_ERR; /* every WR, signalled or not */
		q->sq_used--;
		return true;
	}
	if (s->opcode != IBV_WR_RDMA_WRITE && !mw_op(s)) {
		wc->status = s->opcode == IBV_WR_BIND_MW ? IBV_WC_MW_BIND_ERR
							 : IBV_WC_LOC_PROT_ERR;
		s->qp->state = IBV_QPS_ERR;
		q->sq_used--;
		return true;
	}
	if (s->opcode == IBV_WR_RDMA_WRITE && ibv_stub.execute) {
		if (!remote_ok(s->qp, s->rkey, s->remote, s->len)) {
			wc->status = IBV_WC_REM_ACCESS_ERR;
			s->qp->state = IBV_QPS_ERR;
			/* the responder's QP too (what soft-RoCE does) */
			for (uint32_t i = 0; i < ibv_stub.nqp; i++)
				if (ibv_stub.qp[i]->qp_num == q->dest_qpn)
					ibv_stub.qp[i]->state = IBV_QPS_ERR;
			q->sq_used--;
			return true;
		}
		memcpy((void *)(uintptr_t)s->remote,
		       (const void *)(uintptr_t)s->src, s->len);
	}
	q->since_signal++;
	if (!s->signaled)
		return false;
	q->sq_used -= q->since_signal; /* its slots and those before it */
	q->since_signal = 0;
	wc->status = IBV_WC_SUCCESS;
	wc->byte_len = s->len;
	return true;
}

static int
stub_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int n = 0;

	if (ibv_stub.hold)
		return 0;
	for (uint32_t i = 0; i < ibv_stub.nwr && n < num; i++) {
		struct ibv_stub_wr *s = &ibv_stub.wr[i];

		if (!s->done && s->qp->send_cq == cq && complete_one(s, &wc[n]))
			n++;
	}
	return n;
}
