/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs driver's decisions that need no device (verbs_core.h).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "verbs_core.h"

int
verbs_gid_pick(const struct ibv_gid_entry *t, uint32_t n, uint32_t addr)
{
	uint8_t want[16] = { 0 };

	/* RoCEv2 over IPv4 names the port by the IPv4-mapped IPv6 address */
	want[10] = want[11] = 0xff;
	want[12] = (uint8_t)(addr >> 24);
	want[13] = (uint8_t)(addr >> 16);
	want[14] = (uint8_t)(addr >> 8);
	want[15] = (uint8_t)addr;
	for (uint32_t i = 0; i < n; i++)
		if (t[i].gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    memcmp(t[i].gid.raw, want, sizeof(want)) == 0)
			return (int)t[i].gid_index;
	return -1;
}

void
verbs_gid_list(const struct ibv_gid_entry *t, uint32_t n, char *out,
	       size_t size)
{
	size_t used = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < n && used < size; i++) {
		char txt[INET6_ADDRSTRLEN];
		int w;

		inet_ntop(AF_INET6, t[i].gid.raw, txt, sizeof(txt));
		w = snprintf(out + used, size - used, "%s[%u] %s %s",
			     i ? ", " : "", t[i].gid_index, txt,
			     t[i].gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCEv2" :
			     t[i].gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCEv1" :
			     "IB");
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

uint32_t
verbs_sq_depth(int max_qp_wr)
{
	if (max_qp_wr <= 0)
		return 0;
	return (uint32_t)max_qp_wr < VERBS_MAX_SQ ? (uint32_t)max_qp_wr
						  : VERBS_MAX_SQ;
}

/* wr_id bits: peer 63..56, generation 55..48, covered 47..32, slot 31..0 */
bool
verbs_window_range(const struct egw_pool *pool, enum egw_kind k,
		   uint32_t start, uint32_t count, uint64_t *addr, uint64_t *len)
{
	const struct egw_pool_geom *g = egw_pool_geom(pool);
	uint8_t *base = egw_pool_region(pool, k);
	size_t unit = egw_pool_geom_unit_bytes(g, k);
	uint64_t per_block = k == EGW_KIND_AUX ? unit : (uint64_t)unit * g->block_tokens;

	if (base == NULL || unit == 0 || count == 0 ||
	    start >= egw_pool_nblocks(pool) ||
	    count > egw_pool_nblocks(pool) - start)
		return false;
	*addr = (uint64_t)(uintptr_t)base + (uint64_t)start * per_block;
	*len = (uint64_t)count * per_block;
	return true;
}

uint64_t
verbs_wr_id_make(const struct verbs_wr_id *id)
{
	return ((uint64_t)(id->peer & 0xff) << 56) | ((uint64_t)id->gen << 48) |
	       ((uint64_t)(id->covered & 0xffff) << 32) | id->slot;
}

struct verbs_wr_id
verbs_wr_id_parse(uint64_t wr_id)
{
	return (struct verbs_wr_id){
		.peer = (uint32_t)(wr_id >> 56),
		.gen = (uint8_t)(wr_id >> 48),
		.covered = (uint32_t)(wr_id >> 32) & 0xffff,
		.slot = (uint32_t)wr_id,
	};
}

int
verbs_flight_init(struct verbs_flight *f, uint32_t size)
{
	memset(f, 0, sizeof(*f));
	f->size = size;
	f->b = calloc(size, sizeof(*f->b));
	if (f->b == NULL || egw_payload_ring_init(&f->ring, size) != 0) {
		verbs_flight_free(f);
		return -ENOMEM;
	}
	return 0;
}

void
verbs_flight_free(struct verbs_flight *f)
{
	free(f->b);
	free(f->ring.c);
	f->b = NULL;
	f->ring.c = NULL;
}

static void
complete(struct verbs_flight *f, uint64_t cookie, bool ok)
{
	egw_payload_ring_push(&f->ring, cookie, ok);
	if (!ok)
		f->st.failed_batches++;
}

static uint32_t
take_slot(struct verbs_flight *f, uint64_t cookie, uint32_t peer, uint8_t gen)
{
	uint32_t slot = f->next;

	while (f->b[slot].in_use)
		slot = (slot + 1) % f->size;
	f->next = (slot + 1) % f->size;
	f->b[slot] = (struct verbs_batch){ cookie, peer, gen, true };
	f->in_use++;
	return slot;
}

static void
end_batch(struct verbs_flight *f, uint32_t slot, bool ok)
{
	f->b[slot].in_use = false;
	f->in_use--;
	complete(f, f->b[slot].cookie, ok);
}

int
verbs_chain_batch(struct verbs_flight *f, struct verbs_sq *q,
		  const struct verbs_dest *d, const struct egw_pool *pool,
		  const struct egw_write *w, uint32_t n, uint64_t cookie)
{
	struct egw_payload_stats add = { 0 };
	uint32_t first = q->nchain, slot;

	/* the ring holds what is waiting for poll() plus, after a reset,
	 * every batch now in flight; and this batch's completion */
	if (f->ring.count + f->in_use >= f->size)
		return -ENOBUFS;
	f->st.batches++;
	/* a batch that cannot be posted whole fails whole, now; so does one
	 * for a rebuilt QP the peer has not confirmed: its responder may
	 * still expect the old PSN and would take our new packets for
	 * duplicates - acknowledged, not written */
	if (!d->usable || n == 0 || n > VERBS_MAX_CHAIN - q->nchain ||
	    q->used + q->nchain + n > q->depth) {
		complete(f, cookie, false);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *src = NULL;
		int64_t off = egw_payload_check_write(pool, d->reg, &w[i], &src);
		struct ibv_send_wr *wr = &q->wr[q->nchain];
		struct ibv_sge *sg = &q->sge[q->nchain];

		if (off < 0) {
			f->st.refused_writes++;
			q->nchain = first; /* drop this batch's WRs */
			complete(f, cookie, false);
			return 0;
		}
		sg->addr = (uint64_t)(uintptr_t)src;
		sg->length = (uint32_t)w[i].bytes;
		sg->lkey = d->lkey;
		memset(wr, 0, sizeof(*wr));
		wr->sg_list = sg;
		wr->num_sge = 1;
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = d->reg->region[w[i].kind].addr +
					  (uint64_t)off;
		/* a window's own key, else the region's from REGISTER */
		wr->wr.rdma.rkey = w[i].rkey != 0 ? w[i].rkey :
				   d->reg->region[w[i].kind].rkey;
		/* even unsignalled WRs name their peer and generation: one
		 * that fails is reported, and must not pass for peer 0's */
		wr->wr_id = verbs_wr_id_make(&(struct verbs_wr_id){
			.peer = d->peer, .gen = q->gen, .covered = 0,
			.slot = VERBS_NO_BATCH });
		q->nchain++;
		egw_payload_count_write(&add, d->reg, &w[i]);
	}
	slot = take_slot(f, cookie, d->peer, q->gen);
	/* signal every Nth WR of the batch and its last one */
	for (uint32_t c = first, run = 0; c < q->nchain; c++) {
		bool last = c == q->nchain - 1;

		if (++run < VERBS_SIGNAL_EVERY && !last)
			continue;
		q->wr[c].send_flags = IBV_SEND_SIGNALED;
		q->wr[c].wr_id = verbs_wr_id_make(&(struct verbs_wr_id){
			.peer = d->peer, .gen = q->gen, .covered = run,
			.slot = last ? slot : VERBS_NO_BATCH });
		run = 0;
	}
	f->st.writes += add.writes;
	f->st.bytes += add.bytes;
	f->st.blocks += add.blocks;
	return 0;
}

struct ibv_send_wr *
verbs_chain_link(struct verbs_sq *q)
{
	if (q->nchain == 0)
		return NULL;
	for (uint32_t k = 0; k + 1 < q->nchain; k++)
		q->wr[k].next = &q->wr[k + 1];
	q->wr[q->nchain - 1].next = NULL;
	return q->wr;
}

void
verbs_chain_done(struct verbs_sq *q, bool posted)
{
	if (posted)
		q->used += q->nchain;
	q->nchain = 0;
}

void
verbs_sq_restart(struct verbs_flight *f, struct verbs_sq *q, uint32_t peer)
{
	for (uint32_t i = 0; i < f->size && f->in_use > 0; i++)
		if (f->b[i].in_use && f->b[i].peer == peer &&
		    f->b[i].gen == q->gen)
			end_batch(f, i, false);
	q->gen++;
	q->used = 0;
	q->nchain = 0;
}

enum verbs_cpl
verbs_cpl_apply(struct verbs_flight *f, struct verbs_sq *q,
		const struct verbs_wr_id *id, enum ibv_wc_status status)
{
	if (id->gen != q->gen)
		return VERBS_CPL_STALE; /* its batches already failed */
	if (status != IBV_WC_SUCCESS)
		return VERBS_CPL_FAILED;
	q->used -= id->covered < q->used ? id->covered : q->used;
	if (id->slot == VERBS_NO_BATCH || id->slot >= f->size ||
	    !f->b[id->slot].in_use || f->b[id->slot].peer != id->peer ||
	    f->b[id->slot].gen != id->gen)
		return VERBS_CPL_PROGRESS;
	end_batch(f, id->slot, true);
	return VERBS_CPL_DONE;
}
