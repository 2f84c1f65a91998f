/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs payload driver: RDMA WRITE over RoCEv2 through rdma-core.
 *
 * - One device/port/GID per gateway port, from the configuration; GID
 *   "auto" picks the RoCEv2 entry whose IPv4-mapped address is the port's
 *   (never a hard-coded index).
 * - One PD; the whole pool is registered once at start (never on the data
 *   path); its per-kind addresses and the rkey go out in REGISTER.
 * - One RC QP per peer, created at start (its QPN travels in REGISTER) and
 *   brought INIT -> RTR -> RTS when the peer's REGISTER arrives; brought
 *   back through RESET when the peer's endpoint changes or the QP fails.
 * - post() only chains work requests, one RDMA WRITE per coalesced write;
 *   poll() posts each peer's chain once, then polls the CQ in a batch.
 *   Every VERBS_SIGNAL_EVERY-th WR and the last of each batch are
 *   signalled, so the send queue never overflows and a batch completes
 *   when its last WR does (an RC QP completes in order).
 * - A failed completion puts the QP in error: every batch in flight on it
 *   is reported failed (its rooms fail), the QP is reset and reconnected
 *   for later rooms; late completions of the old generation are ignored.
 *   A reset for a peer's new endpoint fails what was in flight the same
 *   way (a QP moved to RESET drops its WRs without completions).
 *
 * - Per-window keys (payload.window_keys, doc/rdma.md): the pool is
 *   registered with MW-bind access and no peer gets its rkey; a window a
 *   peer is given is a type-2 memory window per kind, bound on that peer's
 *   QP over exactly the window's blocks, and invalidated (LOCAL_INV) when
 *   its room ends. Both are posted and return at once; their completions
 *   come out of poll() like a batch's (EGW_PAYLOAD_CPL_WINDOW), and the
 *   node waits for them: an INIT/RESUME never names a key before its bind
 *   completed, and no block goes back to the pool before its window's
 *   invalidation did. A reset of the peer's QP frees the MWs of every
 *   window pending on it and completes them (binds failed, invalidations
 *   done), so each post gets its completion.
 *
 * The decisions themselves (GID choice, chaining and signalling, send
 * queue depth, what a completion means) live in verbs_core.c, free of
 * device calls; this file is the rdma-core glue around them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "egw_payload.h"
#include "verbs_core.h"

#define CQ_BATCH 32

struct vpeer {
	struct ibv_qp *qp;
	uint32_t psn;            /* ours */
	bool connected;
	bool changed;            /* new PSN: the peer must hear it */
	bool unconfirmed;        /* ... and has not confirmed it yet */
	struct egw_register reg; /* the peer's endpoint and regions */
	struct verbs_sq sq;      /* chain, send queue use, generation */
	char why[128];           /* why the last connect failed */
};

/* A window's memory windows, kept by its first block (windows are single
 * runs and never overlap). The MWs stay allocated for the next window
 * that starts at the same block; each bind moves the key's low byte on,
 * so a key of an earlier window there admits nothing. mw->rkey is the
 * MW's current key: a bind names the MW by it, and the device does not
 * update it - the driver does, once the bind completed. */
enum vwin_state {
	VWIN_IDLE = 0,           /* nothing bound, nothing posted */
	VWIN_BINDING,            /* bind posted, no completion yet */
	VWIN_OPEN,               /* bound: its keys admit writes */
	VWIN_UNBINDING,          /* invalidation posted, no completion yet */
};

struct vwin {
	struct ibv_mw *mw[EGW_KIND_MAX];
	uint32_t rkeys[EGW_KIND_MAX]; /* the keys being bound */
	uint64_t cookie;         /* the caller's, for the completion */
	uint64_t posted;         /* `now` at the post (window_*_ns) */
	uint32_t peer;
	uint8_t gen;             /* the peer's QP generation at the post */
	uint8_t seq;             /* this post's, in its wr_id: tells it from
				  * a post given up on */
	uint8_t state;           /* enum vwin_state */
};

struct egw_payload {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	/* the GRH's: routers on the path take one each */
	uint8_t hop_limit;
	enum ibv_mtu mtu;
	uint32_t max_send_wr;
	uint8_t *mem;
	size_t mem_len;
	struct egw_pool_mem own; /* mem's memfd (egw_payload_pool_mem) */
	struct egw_pool *pool;
	struct vpeer *peers; /* per slot; qp NULL: a free slot */
	uint32_t nslots;
	uint32_t nqps;		 /* slots with a QP */
	int cq_cap;		 /* the CQ's entries: a send queue a QP and
				  * one spare */
	struct verbs_flight fl;  /* batches in flight, completions, stats */
	struct vwin *win;        /* per first block; NULL: no window keys */
	uint32_t nblocks;
	/* windows' completions: at most one pending per first block */
	struct egw_payload_ring wring;
};

#define verr(...) egw_payload_log("verbs", __VA_ARGS__)

/* A slot with a peer (a QP). */
static bool
live(const struct egw_payload *p, uint32_t peer)
{
	return peer < p->nslots && p->peers[peer].qp != NULL;
}

static uint16_t
mtu_bytes(enum ibv_mtu m)
{
	return (uint16_t)(128u << m); /* IBV_MTU_256 == 1 */
}

static enum ibv_mtu
mtu_enum(uint16_t bytes)
{
	enum ibv_mtu m = IBV_MTU_256;

	while (m < IBV_MTU_4096 && mtu_bytes((enum ibv_mtu)(m + 1)) <= bytes)
		m = (enum ibv_mtu)(m + 1);
	return m;
}

/* ---- device, port, GID -------------------------------------------------- */

static struct ibv_context *
open_device(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	char seen[256] = "";

	if (list == NULL || n == 0) {
		verr("device '%s' not found: no RDMA devices at all (is an RDMA "
		     "driver or rdma_rxe loaded? see doc/rdma.md)", name);
		if (list != NULL)
			ibv_free_device_list(list);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		const char *d = ibv_get_device_name(list[i]);

		if (strcmp(d, name) == 0)
			ctx = ibv_open_device(list[i]);
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s%s",
			 i ? ", " : "", d);
	}
	ibv_free_device_list(list);
	if (ctx == NULL)
		verr("device '%s' not found; devices present: %s", name, seen);
	return ctx;
}

/* The RoCEv2 GID of `addr` (host order), from the port's table as read
 * now (entries that cannot be read are left out). */
static int
pick_gid(struct egw_payload *p, int table_len, uint32_t addr)
{
	struct ibv_gid_entry *t = calloc(table_len > 0 ? (size_t)table_len : 1,
					 sizeof(*t));
	uint32_t n = 0;
	char seen[512];
	int idx;

	if (t == NULL)
		return -1;
	for (int i = 0; i < table_len; i++)
		if (ibv_query_gid_ex(p->ctx, p->port, (uint32_t)i, &t[n], 0) == 0)
			n++;
	idx = verbs_gid_pick(t, n, addr);
	if (idx < 0) {
		verbs_gid_list(t, n, seen, sizeof(seen));
		verr("no RoCEv2 GID for %u.%u.%u.%u on port %u; GIDs: %s",
		     addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
		     addr & 0xff, p->port, seen[0] ? seen : "none");
	}
	free(t);
	return idx;
}

/* ibv_modify_qp() and ibv_post_send() return an errno value; a provider
 * that returns -1 leaves it in errno. Either way: a negative errno. */
static int
neg_errno(int rc)
{
	if (rc > 0)
		return -rc;
	return rc == 0 ? 0 : errno > 0 ? -errno : -EIO;
}

/* ---- QPs ------------------------------------------------------------- */

static struct ibv_qp *
make_qp(struct egw_payload *p)
{
	struct ibv_qp_init_attr a = {
		.send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = { .max_send_wr = p->max_send_wr, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 0 },
	};

	return ibv_create_qp(p->pd, &a);
}

static int
qp_to_init(struct egw_payload *p, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = p->port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
	};

	return neg_errno(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

static void windows_flush(struct egw_payload *p, uint32_t peer);

/* Reset the peer's QP (what was in flight on it fails, windows pending on
 * it complete) and bring it to RTS towards the endpoint in v->reg. */
static int
qp_connect(struct egw_payload *p, uint32_t peer)
{
	struct vpeer *v = &p->peers[peer];
	struct ibv_qp_attr a;
	int rc;

	v->connected = false;
	verbs_sq_restart(&p->fl, &v->sq, peer);
	windows_flush(p, peer);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	rc = neg_errno(ibv_modify_qp(v->qp, &a, IBV_QP_STATE));
	if (rc == 0)
		rc = qp_to_init(p, v->qp);
	if (rc != 0)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(v->reg.mtu) < p->mtu ? mtu_enum(v->reg.mtu) : p->mtu;
	a.dest_qp_num = v->reg.qpn;
	a.rq_psn = v->reg.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, v->reg.gid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
	a.ah_attr.grh.hop_limit = p->hop_limit;
	a.ah_attr.port_num = p->port;
	rc = neg_errno(ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER));
	if (rc != 0)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = v->psn;
	a.max_rd_atomic = 1;
	rc = neg_errno(ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
	if (rc != 0)
		return rc;
	v->connected = true;
	return 0;
}

/* ---- ops ------------------------------------------------------------- */

static void verbs_close(struct egw_payload *p);

/* A QP for the peer in `slot`, in INIT (connect brings it up). */
static int
vpeer_make(struct egw_payload *p, uint32_t slot, const char *name)
{
	struct vpeer *v = &p->peers[slot];

	memset(v, 0, sizeof(*v));
	v->qp = make_qp(p);
	v->sq.wr = calloc(VERBS_MAX_CHAIN, sizeof(*v->sq.wr));
	v->sq.sge = calloc(VERBS_MAX_CHAIN, sizeof(*v->sq.sge));
	v->sq.depth = p->max_send_wr;
	if (v->qp == NULL || v->sq.wr == NULL || v->sq.sge == NULL ||
	    qp_to_init(p, v->qp) != 0) {
		verr("cannot create an RC QP for peer %s", name);
		if (v->qp != NULL)
			ibv_destroy_qp(v->qp);
		free(v->sq.wr);
		free(v->sq.sge);
		memset(v, 0, sizeof(*v));
		return -ENOMEM;
	}
	v->psn = (uint32_t)(lrand48() & 0xffffff);
	p->nqps++;
	return 0;
}

static int
verbs_open(const struct egw_payload_params *pp,
	   uint64_t session __attribute__((unused)),
	   struct egw_payload **out, struct egw_pool **pool)
{
	struct egw_payload *p;
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	int rc;

	uint32_t nslots = pp->max_peers != 0 ? pp->max_peers : pp->npeers;

	if (pp->npeers > EGW_PAYLOAD_MAX_PEERS || nslots < pp->npeers ||
	    nslots > EGW_PAYLOAD_MAX_SLOTS)
		return -EINVAL;
	if (nslots == 0)
		nslots = 1;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->peers = calloc(nslots, sizeof(*p->peers));
	if (p->peers == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->nslots = nslots;
	p->own.fd = -1; /* nothing to free yet */
	p->port = pp->port;
	p->hop_limit = pp->hop_limit != 0 ? pp->hop_limit : VERBS_HOP_LIMIT;
	p->ctx = open_device(pp->device);
	if (p->ctx == NULL) {
		free(p->peers);
		free(p);
		return -ENODEV;
	}
	if (ibv_query_port(p->ctx, p->port, &pa) != 0) {
		verr("device '%s' has no port %u", pp->device, p->port);
		verbs_close(p);
		return -ENODEV;
	}
	if (pa.state != IBV_PORT_ACTIVE)
		verr("device '%s' port %u is not active (state %d); going on",
		     pp->device, p->port, pa.state);
	p->mtu = pa.active_mtu;
	p->gid_index = pp->gid_index >= 0 ? pp->gid_index
		       : pick_gid(p, pa.gid_tbl_len, pp->addr);
	if (p->gid_index < 0 ||
	    ibv_query_gid(p->ctx, p->port, p->gid_index, &p->gid) != 0) {
		if (p->gid_index >= 0)
			verr("GID index %d unreadable on '%s' port %u",
			     p->gid_index, pp->device, p->port);
		verbs_close(p);
		return -ENOENT;
	}
	if (ibv_query_device(p->ctx, &da) != 0) {
		verbs_close(p);
		return -EIO;
	}
	p->max_send_wr = verbs_sq_depth(da.max_qp_wr);
	if (p->max_send_wr == 0) {
		verr("device '%s' allows no send work requests (max_qp_wr %d)",
		     pp->device, da.max_qp_wr);
		verbs_close(p);
		return -ENODEV;
	}
	p->mem_len = egw_pool_geom_mem_bytes(&pp->geom);
	/* a sealed memfd: local engines map the pool through it */
	if (egw_payload_pool_mem_geom("embgw-pool", &pp->geom, pp->segments,
				      &p->own) == 0)
		p->mem = p->own.mem;
	p->pd = ibv_alloc_pd(p->ctx);
	/* bounded by what the engines can have in flight */
	rc = verbs_flight_init(&p->fl, pp->max_batches);
	/* grown as peers come (cq_grow) */
	p->cq_cap = (int)(p->max_send_wr * (pp->npeers + 1));
	p->cq = ibv_create_cq(p->ctx, p->cq_cap, NULL, NULL, 0);
	if (p->mem == NULL || p->pd == NULL || rc != 0 || p->cq == NULL) {
		verr("cannot allocate PD/CQ/memory on '%s'", pp->device);
		verbs_close(p);
		return -ENOMEM;
	}
	memset(p->mem, 0, p->mem_len);
	/* the whole pool, once: nothing is registered on the data path.
	 * With window keys the region itself admits no remote access at all
	 * (its rkey, guessable, opens nothing): peers write only through
	 * memory windows, which local write access lets us bind. */
	p->mr = ibv_reg_mr(p->pd, p->mem, p->mem_len,
			   pp->window_keys
			   ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND
			   : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (p->mr == NULL) {
		verr("cannot register %zu bytes of pool memory: %s", p->mem_len,
		     strerror(errno));
		verbs_close(p);
		return -ENOMEM;
	}
	srand48((long)time(NULL) ^ (long)getpid());
	for (uint32_t i = 0; i < pp->npeers; i++) {
		if (vpeer_make(p, i, pp->peers[i].name) != 0) {
			verbs_close(p);
			return -ENOMEM;
		}
	}
	rc = egw_pool_create(&pp->geom, p->mem, p->mem_len, &p->pool);
	if (rc != 0) {
		verbs_close(p);
		return rc;
	}
	if (pp->window_keys) {
		p->nblocks = egw_pool_nblocks(p->pool);
		if (p->nblocks > VERBS_WINDOW_MAX_BLOCKS) {
			verr("window keys: the pool has %u blocks, at most %u "
			     "can be told apart", p->nblocks,
			     VERBS_WINDOW_MAX_BLOCKS);
			verbs_close(p);
			return -ERANGE;
		}
		p->win = calloc(p->nblocks, sizeof(*p->win));
		if (p->win == NULL ||
		    egw_payload_ring_init(&p->wring, p->nblocks) != 0) {
			verbs_close(p);
			return -ENOMEM;
		}
	}
	*out = p;
	*pool = p->pool;
	return 0;
}

static void
verbs_describe(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
	       uint8_t gid[16], uint32_t *qpn)
{
	memcpy(gid, p->gid.raw, 16);
	*qpn = 0;
	/* with window keys there is no key to the whole region to give */
	egw_payload_regions(p->pool, 0, p->win != NULL ? 0 : p->mr->rkey, r);
}

static void
verbs_endpoint(struct egw_payload *p, uint32_t peer, uint32_t *qpn,
	       uint32_t *psn, uint16_t *mtu)
{
	if (!live(p, peer))
		return;
	*qpn = p->peers[peer].qp->qp_num;
	*psn = p->peers[peer].psn;
	*mtu = mtu_bytes(p->mtu);
}

static int
verbs_connect(struct egw_payload *p, uint32_t peer, const struct egw_register *r)
{
	struct vpeer *v;
	int rc;

	if (!live(p, peer))
		return -EINVAL;
	v = &p->peers[peer];
	/* an ACK echoing our current endpoint: the peer's side expects our
	 * PSN now (an older ACK, delayed, echoes an older one) */
	if (r->ack_qpn == v->qp->qp_num && r->ack_psn == v->psn)
		v->unconfirmed = false;
	if (v->connected && v->reg.qpn == r->qpn && v->reg.psn == r->psn &&
	    memcmp(v->reg.gid, r->gid, 16) == 0) {
		v->reg = *r; /* same endpoint: only the regions may be news */
		return 0;
	}
	v->reg = *r;
	rc = qp_connect(p, peer);
	/* not logged: retried with every REGISTER; the node notes it */
	if (rc != 0)
		snprintf(v->why, sizeof(v->why), "cannot bring the QP to RTS "
			 "towards qpn %#x: %s", r->qpn, strerror(-rc));
	return rc;
}

static const char *
verbs_why(const struct egw_payload *p, uint32_t peer)
{
	return live(p, peer) ? p->peers[peer].why : "no such peer";
}

static int
verbs_post(struct egw_payload *p, uint32_t peer, const struct egw_write *w,
	   uint32_t n, uint64_t cookie)
{
	uint64_t t0 = egw_payload_cycles();
	struct vpeer *v;
	int rc;

	if (!live(p, peer))
		return -EINVAL;
	v = &p->peers[peer];
	rc = verbs_chain_batch(&p->fl, &v->sq, &(struct verbs_dest){
		.peer = peer, .reg = &v->reg, .lkey = p->mr->lkey,
		.usable = v->connected && !v->unconfirmed }, p->pool, w, n, cookie);
	p->fl.st.cycles += egw_payload_cycles() - t0;
	return rc;
}

/* Fail everything in flight on a peer's QP and bring it back. */
static void
recover(struct egw_payload *p, uint32_t peer)
{
	struct vpeer *v = &p->peers[peer];

	p->fl.st.qp_resets++;
	/* The peer's responder still expects the PSN after the last packet
	 * it took; restarting ours from the old value would be refused as
	 * out of sequence (or ignored as duplicates). A new PSN, our QP back
	 * to RTS now, and a new REGISTER (changed()) so the peer resets its
	 * side to expect it. Writes posted before the peer has done so fail
	 * like the ones in flight did. */
	v->psn = (uint32_t)(lrand48() & 0xffffff);
	v->changed = true;
	v->unconfirmed = true;
	if (qp_connect(p, peer) != 0)
		verr("QP for peer %s stays down after an error", v->reg.name);
}

/* The peer's incarnation is gone: its QP back to RESET (what was in
 * flight or chained fails at once); connect() brings it up towards the
 * new incarnation's endpoint. */
static void
verbs_disconnect(struct egw_payload *p, uint32_t peer)
{
	struct vpeer *v;
	struct ibv_qp_attr a;

	if (!live(p, peer))
		return;
	v = &p->peers[peer];
	v->connected = false;
	verbs_sq_restart(&p->fl, &v->sq, peer);
	windows_flush(p, peer);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE) != 0)
		verr("cannot reset the QP of peer %s", v->reg.name);
	memset(&v->reg, 0, sizeof(v->reg));
}

static uint32_t
verbs_changed(struct egw_payload *p, uint32_t *peers, uint32_t max)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nslots && n < max; i++)
		if (p->peers[i].qp != NULL && p->peers[i].changed) {
			p->peers[i].changed = false;
			peers[n++] = i;
		}
	return n;
}

static void window_completed(struct egw_payload *p,
			     const struct verbs_wr_id *id, uint64_t now);

/* One completion of any peer's QP: its batch, a window's bind or
 * invalidation, or the QP's recovery. */
static void
apply_wc(struct egw_payload *p, const struct ibv_wc *wc, uint64_t now)
{
	struct verbs_wr_id id = verbs_wr_id_parse(wc->wr_id);
	bool window = (id.slot & VERBS_WINDOW_BIT) != 0 &&
		      id.slot != VERBS_NO_BATCH;
	struct vpeer *v;

	if (!live(p, id.peer))
		return;
	v = &p->peers[id.peer];
	switch (verbs_cpl_apply(&p->fl, &v->sq, &id, wc->status)) {
	case VERBS_CPL_FAILED:
		verr("%s on the QP of peer %s failed: %s",
		     window ? "a window's bind or invalidation" : "a write",
		     v->reg.name, ibv_wc_status_str(wc->status));
		/* completes this window too, with every other pending one */
		recover(p, id.peer);
		break;
	case VERBS_CPL_PROGRESS:
		if (window)
			window_completed(p, &id, now);
		break;
	default:
		break;
	}
}

/* ---- per-window keys --------------------------------------------------- */

static uint32_t
window_slot(uint32_t start, uint8_t seq)
{
	return VERBS_WINDOW_BIT | (uint32_t)(seq & 0x7f) << 24 | start;
}

/* A window's completion for poll(). The ring holds one per first block,
 * and a window has one post pending at most: it never overflows. */
static void
window_cpl(struct egw_payload *p, uint64_t cookie, bool ok)
{
	if (egw_payload_ring_full(&p->wring)) {
		verr("window completion ring full: completion dropped");
		return;
	}
	egw_payload_ring_push_kind(&p->wring, cookie, EGW_PAYLOAD_CPL_WINDOW,
				   ok);
}

/* Free a window's MWs: the kernel invalidates a bound one at once, on any
 * QP state. The way out when the QP cannot invalidate them. */
static void
window_dealloc(struct egw_payload *p, struct vwin *e)
{
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		if (e->mw[k] != NULL && ibv_dealloc_mw(e->mw[k]) != 0)
			verr("cannot free a memory window: %s", strerror(errno));
		e->mw[k] = NULL;
	}
	p->fl.st.window_unbind_deallocs++;
}

/* The window's pending post ends now with this completion; a completion
 * of it still on its way is told apart by the sequence number. */
static void
window_finish(struct egw_payload *p, struct vwin *e, enum vwin_state to,
	      bool ok)
{
	e->state = (uint8_t)to;
	e->seq++;
	window_cpl(p, e->cookie, ok);
}

/* A bind or invalidation WR completed successfully. */
static void
window_completed(struct egw_payload *p, const struct verbs_wr_id *id,
		 uint64_t now)
{
	uint32_t start = id->slot & (VERBS_WINDOW_MAX_BLOCKS - 1);
	struct vwin *e;

	if (p->win == NULL || start >= p->nblocks)
		return;
	e = &p->win[start];
	if (((id->slot >> 24) & 0x7f) != (e->seq & 0x7fu) ||
	    e->peer != id->peer || e->gen != id->gen)
		return; /* a post given up on: its window was freed */
	if (e->state == VWIN_BINDING) {
		for (int k = 0; k < EGW_KIND_MAX; k++)
			if (e->rkeys[k] != 0)
				e->mw[k]->rkey = e->rkeys[k];
		p->fl.st.window_binds++;
		p->fl.st.window_bind_ns += now - e->posted;
		window_finish(p, e, VWIN_OPEN, true);
	} else if (e->state == VWIN_UNBINDING) {
		p->fl.st.window_unbinds++;
		p->fl.st.window_unbind_ns += now - e->posted;
		window_finish(p, e, VWIN_IDLE, true);
	}
}

/* The peer's QP is reset or in error: its WRs complete no more (or only
 * flushed). Every window pending on it ends now - its MWs freed, which
 * invalidates them at once: a bind failed, an invalidation done. */
static void
windows_flush(struct egw_payload *p, uint32_t peer)
{
	for (uint32_t b = 0; p->win != NULL && b < p->nblocks; b++) {
		struct vwin *e = &p->win[b];

		if (e->peer != peer || (e->state != VWIN_BINDING &&
					e->state != VWIN_UNBINDING))
			continue;
		window_dealloc(p, e);
		if (e->state == VWIN_BINDING) {
			p->fl.st.window_bind_failed++;
			window_finish(p, e, VWIN_IDLE, false);
		} else {
			p->fl.st.window_unbinds++;
			window_finish(p, e, VWIN_IDLE, true);
		}
	}
}

/* Post `n` (1..EGW_KIND_MAX) bind or invalidation WRs of window `e` on
 * the peer's QP, the last signalled: 0 or -errno, nothing posted. */
static int
window_post(struct egw_payload *p, struct vwin *e, uint32_t start,
	    struct ibv_send_wr *wr, uint32_t n)
{
	struct vpeer *v = &p->peers[e->peer];
	uint64_t id = verbs_wr_id_make(&(struct verbs_wr_id){
		.peer = e->peer, .gen = v->sq.gen, .covered = n,
		.slot = window_slot(start, e->seq) });
	struct ibv_send_wr *bad = NULL;
	int rc;

	if (v->sq.used + v->sq.nchain + n > v->sq.depth)
		return -ENOBUFS; /* cannot happen while writes are signalled */
	for (uint32_t i = 0; i < n; i++) {
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].wr_id = id;
		wr[i].send_flags = i + 1 < n ? 0 : IBV_SEND_SIGNALED;
	}
	rc = neg_errno(ibv_post_send(v->qp, wr, &bad));
	if (rc != 0)
		return rc;
	v->sq.used += n;
	e->gen = v->sq.gen;
	return 0;
}

/* The bind WRs of a window over `run`, one per kind present: their
 * number, or -errno. */
static int
window_bind_wrs(struct egw_payload *p, struct vwin *e,
		const struct egw_run *run, struct ibv_send_wr *wr)
{
	uint32_t n = 0;

	memset(wr, 0, EGW_KIND_MAX * sizeof(*wr));
	for (int k = 0; k < EGW_KIND_MAX; k++) {
		uint64_t addr, len;

		e->rkeys[k] = 0;
		if (!verbs_window_range(p->pool, (enum egw_kind)k, run->start,
					run->count, &addr, &len))
			continue;
		if (e->mw[k] == NULL) {
			/* once per first block: later windows there reuse it */
			e->mw[k] = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
			if (e->mw[k] == NULL) {
				verr("cannot allocate a memory window: %s",
				     strerror(errno));
				return -ENOMEM;
			}
		}
		wr[n].opcode = IBV_WR_BIND_MW;
		wr[n].bind_mw.mw = e->mw[k];
		wr[n].bind_mw.rkey = ibv_inc_rkey(e->mw[k]->rkey);
		wr[n].bind_mw.bind_info = (struct ibv_mw_bind_info){
			.mr = p->mr, .addr = addr, .length = len,
			.mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
		e->rkeys[k] = wr[n].bind_mw.rkey;
		n++;
	}
	return n > 0 ? (int)n : -EINVAL;
}

static int
verbs_window_bind(struct egw_payload *p, uint32_t peer,
		  const struct egw_run *run, uint32_t rkeys[EGW_KIND_MAX],
		  uint64_t cookie, uint64_t now)
{
	struct ibv_send_wr wr[EGW_KIND_MAX];
	struct vwin *e;
	int n, rc;

	memset(rkeys, 0, EGW_KIND_MAX * sizeof(*rkeys));
	if (p->win == NULL || !live(p, peer) || run->count == 0 ||
	    run->start >= p->nblocks || run->count > p->nblocks - run->start)
		return -EINVAL;
	if (!p->peers[peer].connected)
		return -ENOTCONN;
	e = &p->win[run->start];
	if (e->state != VWIN_IDLE)
		return -EBUSY; /* a window is never given twice */
	e->peer = peer;
	n = window_bind_wrs(p, e, run, wr);
	rc = n < 0 ? n : window_post(p, e, run->start, wr, (uint32_t)n);
	if (rc != 0) {
		/* nothing of it is posted: nothing stays open */
		window_dealloc(p, e);
		p->fl.st.window_bind_failed++;
		return rc;
	}
	memcpy(rkeys, e->rkeys, EGW_KIND_MAX * sizeof(*rkeys));
	e->cookie = cookie;
	e->posted = now;
	e->state = VWIN_BINDING;
	return 0;
}

/* Invalidate an open window on the QP it was bound on: 0 when posted. */
static int
window_invalidate(struct egw_payload *p, struct vwin *e, uint32_t start)
{
	struct ibv_send_wr wr[EGW_KIND_MAX];
	struct vpeer *v = &p->peers[e->peer];
	uint32_t n = 0;

	/* a QP reset since the bind, or down: LOCAL_INV cannot reach it */
	if (!v->connected || e->gen != v->sq.gen)
		return -ENOTCONN;
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < EGW_KIND_MAX; k++)
		if (e->mw[k] != NULL) {
			wr[n].opcode = IBV_WR_LOCAL_INV;
			wr[n].invalidate_rkey = e->mw[k]->rkey;
			n++;
		}
	return n == 0 ? -EINVAL : window_post(p, e, start, wr, n);
}

static void
verbs_window_unbind(struct egw_payload *p, const struct egw_run *run,
		    uint64_t cookie, uint64_t now)
{
	struct vwin *e;

	if (p->win == NULL || run->start >= p->nblocks) {
		window_cpl(p, cookie, true);
		return;
	}
	e = &p->win[run->start];
	if (e->state == VWIN_OPEN || e->state == VWIN_BINDING) {
		e->cookie = cookie;
		e->posted = now;
	}
	switch (e->state) {
	case VWIN_OPEN:
		if (window_invalidate(p, e, run->start) == 0) {
			e->state = VWIN_UNBINDING;
			return;
		}
		/* the QP cannot invalidate: free the MWs instead */
		window_dealloc(p, e);
		p->fl.st.window_unbinds++;
		window_finish(p, e, VWIN_IDLE, true);
		return;
	case VWIN_BINDING:
		/* given up on (its bind is overdue): freed, so whatever
		 * becomes of the bind admits nothing */
		window_dealloc(p, e);
		p->fl.st.window_bind_failed++;
		window_finish(p, e, VWIN_IDLE, true);
		return;
	default:
		/* none open there (or its invalidation is under way) */
		window_cpl(p, cookie, true);
		return;
	}
}

static uint32_t
verbs_poll(struct egw_payload *p, struct egw_payload_cpl *c, uint32_t max,
	   uint64_t now)
{
	struct ibv_wc wc[CQ_BATCH];
	uint64_t t0 = egw_payload_cycles();
	uint32_t n;
	int got;

	/* post what was chained since the last poll: one call per peer */
	for (uint32_t i = 0; i < p->nslots; i++) {
		struct vpeer *v = &p->peers[i];
		struct ibv_send_wr *head, *bad = NULL;
		int rc;

		if (v->qp == NULL)
			continue;
		head = verbs_chain_link(&v->sq);
		if (head == NULL)
			continue;
		rc = neg_errno(ibv_post_send(v->qp, head, &bad));
		verbs_chain_done(&v->sq, rc == 0);
		if (rc != 0) {
			verr("post to peer %s failed: %s", v->reg.name,
			     strerror(-rc));
			recover(p, i);
		}
	}
	got = ibv_poll_cq(p->cq, CQ_BATCH, wc);
	for (int i = 0; i < got; i++)
		apply_wc(p, &wc[i], now);
	n = egw_payload_ring_drain(&p->wring, c, max);
	n += egw_payload_ring_drain(&p->fl.ring, c + n, max - n);
	/* an empty poll is the loop's idle spin, not cost per block */
	if (got > 0 || n > 0)
		p->fl.st.cycles += egw_payload_cycles() - t0;
	return n;
}

static void
verbs_stats(const struct egw_payload *p, struct egw_payload_stats *st)
{
	*st = p->fl.st;
}

static int
verbs_pool_fd(const struct egw_payload *p, uint64_t *offset, uint64_t *bytes)
{
	*offset = 0;
	*bytes = p->own.bytes;
	return p->own.fd >= 0 ? p->own.fd : -ENODEV;
}

static const struct egw_pool_mem *
verbs_pool_mem(const struct egw_payload *p)
{
	return p->own.mem != NULL ? &p->own : NULL;
}

static void
verbs_close(struct egw_payload *p)
{
	if (p == NULL)
		return;
	/* MWs before the region they are bound to */
	for (uint32_t b = 0; p->win != NULL && b < p->nblocks; b++)
		for (int k = 0; k < EGW_KIND_MAX; k++)
			if (p->win[b].mw[k] != NULL)
				ibv_dealloc_mw(p->win[b].mw[k]);
	free(p->win);
	free(p->wring.c);
	for (uint32_t i = 0; p->peers != NULL && i < p->nslots; i++) {
		if (p->peers[i].qp != NULL)
			ibv_destroy_qp(p->peers[i].qp);
		free(p->peers[i].sq.wr);
		free(p->peers[i].sq.sge);
	}
	free(p->peers);
	egw_pool_destroy(p->pool);
	if (p->mr != NULL)
		ibv_dereg_mr(p->mr);
	if (p->cq != NULL)
		ibv_destroy_cq(p->cq);
	if (p->pd != NULL)
		ibv_dealloc_pd(p->pd);
	if (p->ctx != NULL)
		ibv_close_device(p->ctx);
	egw_payload_pool_mem_free(&p->own);
	verbs_flight_free(&p->fl);
	free(p);
}

/* Room in the CQ for one more QP's send queue (each completes at most its
 * depth): resized before the QP exists, so it never overflows. */
static int
cq_grow(struct egw_payload *p)
{
	int need = (int)(p->max_send_wr * (p->nqps + 2));

	if (need <= p->cq_cap)
		return 0;
	if (ibv_resize_cq(p->cq, need) != 0) {
		verr("cannot grow the CQ to %d entries for one more peer: %s",
		     need, strerror(errno));
		return -ENOMEM;
	}
	p->cq_cap = need;
	return 0;
}

static int
verbs_peer_add(struct egw_payload *p, uint32_t slot,
	       const struct egw_payload_peer *pe)
{
	if (slot >= p->nslots || p->peers[slot].qp != NULL)
		return -EINVAL;
	if (cq_grow(p) != 0)
		return -ENOMEM;
	return vpeer_make(p, slot, pe->name);
}

static void
verbs_peer_remove(struct egw_payload *p, uint32_t slot)
{
	struct vpeer *v;

	if (!live(p, slot))
		return;
	verbs_disconnect(p, slot); /* in flight: failed, windows flushed */
	v = &p->peers[slot];
	if (ibv_destroy_qp(v->qp) != 0)
		verr("cannot destroy the QP of a removed peer: %s",
		     strerror(errno));
	free(v->sq.wr);
	free(v->sq.sge);
	memset(v, 0, sizeof(*v));
	p->nqps--;
}

const struct egw_payload_ops egw_payload_verbs_ops = {
	.name = "verbs",
	.open = verbs_open,
	.describe = verbs_describe,
	.endpoint = verbs_endpoint,
	.connect = verbs_connect,
	.why = verbs_why,
	.disconnect = verbs_disconnect,
	.peer_add = verbs_peer_add,
	.peer_remove = verbs_peer_remove,
	.post = verbs_post,
	.changed = verbs_changed,
	.window_bind = verbs_window_bind,
	.window_unbind = verbs_window_unbind,
	.poll = verbs_poll,
	.stats = verbs_stats,
	.pool_fd = verbs_pool_fd,
	.pool_mem = verbs_pool_mem,
	.close = verbs_close,
};
