/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake gateway's server side of doc/client.md: commands checked with
 * lib/attach's rules, rooms moved through their states one step_ms apart,
 * language rooms filled from tests/client/pattern.h, encode rooms checked
 * against it byte by byte, slots written before the completion that
 * reports them, completions dropped and counted when the ring is full.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_gateway.h"
#include "pattern.h"

#define EGW_ERR(w) (-(1000 + (w)))
#define ERR_PEER_DEAD 19
#define ERR_ABORTED 20
#define ERR_POOL_EXHAUSTED 18
#define ERR_TRANSPORT 21

static struct egw_attach_slot *
slot_of(struct fake_client *c, uint32_t s)
{
	return egw_attach_slot_at(&c->map, s);
}

static void
post(struct fake_client *c, uint64_t tag, uint64_t room, int32_t result,
     uint8_t op, uint8_t state, bool more, uint32_t slot)
{
	struct egw_attach_slot *sl = slot < c->map.nslots ? slot_of(c, slot)
							  : NULL;
	struct egw_attach_cqe q = {
		.tag = tag, .room = room, .result = result, .op = op,
		.state = state, .flags = more ? EGW_CQEF_MORE : 0,
		.slot = slot,
	};

	if (sl != NULL && sl->room == room && room != 0) {
		q.total_tokens = sl->total_tokens;
		q.nruns = sl->nruns;
		q.landed_tokens = state == EGW_AST_SUCCESS ? sl->total_tokens
							   : 0;
	}
	if (egw_attach_ring_put(&c->map.cq, &q) == -ENOBUFS) {
		__atomic_fetch_add(&c->map.cq.ctl->overflow, 1,
				   __ATOMIC_RELEASE);
		printf("client %u: completion dropped (room %llu %s state "
		       "%u)\n", c->id, (unsigned long long)room,
		       egw_attach_op_name(op), state);
	}
	if (c->efd >= 0 && (__atomic_load_n(&c->map.cq.ctl->flags,
					    __ATOMIC_SEQ_CST) &
			    EGW_RING_F_NEED_WAKEUP)) {
		uint64_t one = 1;

		(void)!write(c->efd, &one, sizeof(one));
		c->wakeups++;
		printf("client %u: wake-up %u\n", c->id, c->wakeups);
	}
}

/* ---- the pool ----------------------------------------------------------- */

/* First fit, runs cut at run_blocks with a free block left after each so
 * that rooms get several runs. @return 0 or -ENOSPC (nothing taken). */
static int
pool_alloc(struct fake_gw *gw, uint32_t need, struct fake_room *r)
{
	struct fake_pool *p = &gw->pool;
	uint32_t b = 0, max_len = gw->cfg.run_blocks;

	r->nruns = 0;
	while (need > 0 && b < p->nblocks) {
		uint32_t len = 0;

		if (p->used[b]) {
			b++;
			continue;
		}
		if (r->nruns == gw->cfg.max_runs)
			break;
		while (b + len < p->nblocks && !p->used[b + len] &&
		       len < need && (max_len == 0 || len < max_len))
			len++;
		r->runs[r->nruns++] = (struct egw_attach_run){ b, len };
		memset(p->used + b, 1, len);
		p->nfree -= len;
		need -= len;
		b += len + (max_len ? 1 : 0);
	}
	if (need == 0)
		return 0;
	for (uint32_t i = 0; i < r->nruns; i++) {
		memset(p->used + r->runs[i].start, 0, r->runs[i].count);
		p->nfree += r->runs[i].count;
	}
	r->nruns = 0;
	return -ENOSPC;
}

static uint32_t
pool_free(struct fake_gw *gw, struct fake_room *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nruns; i++) {
		memset(gw->pool.used + r->runs[i].start, 0, r->runs[i].count);
		n += r->runs[i].count;
	}
	gw->pool.nfree += n;
	r->nruns = 0;
	return n;
}

/* Token t's address in kind k (its run found by walking the list). */
static uint8_t *
token_at(struct fake_gw *gw, const struct fake_room *r, int k, uint32_t t)
{
	static const uint32_t fixed[4] = { 0, 4, 12, 0 };
	const struct fake_cfg *cfg = &gw->cfg;
	uint32_t bytes = k == 0 ? cfg->hidden * cfg->dtype_bytes : fixed[k];
	uint32_t before = 0;

	for (uint32_t i = 0; i < r->nruns; i++) {
		uint32_t n = r->runs[i].count * cfg->block_tokens;

		if (t < before + n) {
			uint64_t tok = (uint64_t)r->runs[i].start *
				       cfg->block_tokens + (t - before);

			return gw->pool.mem + gw->pool.off[k] + tok * bytes;
		}
		before += n;
	}
	return NULL;
}

static void
write_aux(struct fake_gw *gw, const struct fake_room *r, int32_t delta,
	  uint64_t cookie)
{
	const struct fake_cfg *cfg = &gw->cfg;
	uint8_t *aux = gw->pool.mem + gw->pool.off[3] +
		       (uint64_t)r->runs[0].start * cfg->aux_bytes;
	uint32_t rec[6] = { r->total, cfg->hidden, cfg->dtype_bytes,
			    (uint32_t)delta, cfg->block_tokens, 0 };

	memset(aux, 0, cfg->aux_bytes);
	memcpy(aux, rec, sizeof(rec));
	memcpy(aux + 24, &cookie, sizeof(cookie));
}

static void
fill_room(struct fake_gw *gw, const struct fake_room *r)
{
	uint32_t eb = gw->cfg.hidden * gw->cfg.dtype_bytes;

	for (uint32_t t = 0; t < r->total; t++) {
		uint8_t *e = token_at(gw, r, 0, t);
		uint32_t f = pat_fill(r->room, t);

		for (uint32_t k = 0; k < eb; k++)
			e[k] = pat_emb(r->room, t, k);
		memcpy(token_at(gw, r, 1, t), &f, 4);
		if (gw->cfg.mrope)
			for (uint32_t i = 0; i < 3; i++) {
				uint32_t m = pat_mrope(r->room, t, i);

				memcpy(token_at(gw, r, 2, t) + 4 * i, &m, 4);
			}
	}
}

/* @return -1 when the room holds the pattern, else the first wrong token */
static int64_t
check_room(struct fake_gw *gw, const struct fake_room *r)
{
	uint32_t eb = gw->cfg.hidden * gw->cfg.dtype_bytes;

	for (uint32_t t = 0; t < r->total; t++) {
		const uint8_t *e = token_at(gw, r, 0, t);
		uint32_t f = pat_fill(r->room, t), m;

		for (uint32_t k = 0; k < eb; k++)
			if (e[k] != pat_emb(r->room, t, k))
				return t;
		if (memcmp(token_at(gw, r, 1, t), &f, 4) != 0)
			return t;
		for (uint32_t i = 0; gw->cfg.mrope && i < 3; i++) {
			m = pat_mrope(r->room, t, i);
			if (memcmp(token_at(gw, r, 2, t) + 4 * i, &m, 4) != 0)
				return t;
		}
	}
	return -1;
}

/* ---- slots -------------------------------------------------------------- */

static void
slot_write(struct fake_client *c, uint32_t s, const struct fake_room *r,
	   int32_t error)
{
	struct egw_attach_slot *sl = slot_of(c, s);

	sl->error = error;
	sl->total_tokens = r->total;
	sl->nruns = r->nruns;
	sl->first_block = r->nruns ? r->runs[0].start : 0;
	memcpy(sl->runs, r->runs, r->nruns * sizeof(r->runs[0]));
	__atomic_store_n(&sl->state, r->state, __ATOMIC_RELEASE);
	__atomic_store_n(&sl->room, r->room, __ATOMIC_RELEASE);
}

/* The room's last completion: slot state first, then the completion, then
 * the slot is handed back. */
static void
room_end(struct fake_gw *gw, struct fake_client *c, uint32_t s,
	 uint64_t tag, uint8_t op, uint8_t state, int32_t result,
	 int32_t error)
{
	struct fake_room *r = &c->rooms[s];
	uint64_t room = r->room;

	pool_free(gw, r);
	r->state = state;
	slot_write(c, s, r, error);
	post(c, tag, room, result, op, state, false, s);
	__atomic_store_n(&slot_of(c, s)->room, 0, __ATOMIC_RELEASE);
	r->room = 0;
}

static void
room_fail(struct fake_gw *gw, struct fake_client *c, uint32_t s, int w)
{
	struct fake_room *r = &c->rooms[s];
	uint8_t op = r->op;

	uint64_t room = r->room;

	room_end(gw, c, s, 0, op, EGW_AST_FAILED, EGW_ERR(w), EGW_ERR(w));
	printf("client %u room %llu: failed %d\n", c->id,
	       (unsigned long long)room, EGW_ERR(w));
}

/* ---- commands ----------------------------------------------------------- */

static bool
rank_open(struct fake_gw *gw, uint64_t room, uint16_t rank, uint8_t op)
{
	for (uint32_t i = 0; i < FAKE_MAX_CLIENTS; i++) {
		struct fake_client *c = gw->clients[i];

		for (uint32_t s = 0; c != NULL && s < c->map.nslots; s++)
			if (c->rooms[s].room == room && c->rooms[s].op == op &&
			    (op == EGW_OP_SEND_OPEN || c->rooms[s].rank == rank))
				return true;
	}
	return false;
}

static int
cmd_open(struct fake_gw *gw, struct fake_client *c,
	 const struct egw_attach_cmd *cmd)
{
	struct fake_room *r = &c->rooms[cmd->slot];
	uint64_t now = fake_now_ns();
	uint32_t bt = gw->cfg.block_tokens;

	if (r->room != 0 || slot_of(c, cmd->slot)->room != 0)
		return -EBUSY;
	if (rank_open(gw, cmd->room, cmd->rank, cmd->op))
		return -EEXIST;
	*r = (struct fake_room){ .room = cmd->room, .op = cmd->op,
				 .rank = cmd->rank, .nranks = cmd->nranks,
				 .aux_only = cmd->flags & EGW_CMDF_AUX_ONLY,
				 .runs = r->runs,
				 .next_ns = now + gw->cfg.step_ms * 1000000ull };
	if (cmd->op == EGW_OP_RECV_OPEN) {
		r->state = EGW_AST_BOOTSTRAPPING;
		slot_write(c, cmd->slot, r, 0);
		post(c, cmd->tag, cmd->room, 0, cmd->op, r->state, true,
		     cmd->slot);
		return 0;
	}
	r->total = cmd->total_tokens;
	if (pool_alloc(gw, (r->total + bt - 1) / bt, r) != 0) {
		r->state = EGW_AST_FAILED;
		printf("client %u room %llu: pool exhausted\n", c->id,
		       (unsigned long long)cmd->room);
		slot_write(c, cmd->slot, r, EGW_ERR(ERR_POOL_EXHAUSTED));
		post(c, cmd->tag, cmd->room, EGW_ERR(ERR_POOL_EXHAUSTED),
		     cmd->op, r->state, false, cmd->slot);
		__atomic_store_n(&slot_of(c, cmd->slot)->room, 0,
				 __ATOMIC_RELEASE);
		r->room = 0;
		return 0;
	}
	write_aux(gw, r, cmd->mrope_delta, cmd->cookie);
	r->state = EGW_AST_WAITING_FOR_INPUT;
	slot_write(c, cmd->slot, r, 0);
	post(c, cmd->tag, cmd->room, 0, cmd->op, r->state, true, cmd->slot);
	return 0;
}

/* COMMIT, RELEASE, ABORT: the slot must hold the room. */
static int
cmd_room(struct fake_gw *gw, struct fake_client *c,
	 const struct egw_attach_cmd *cmd)
{
	struct fake_room *r = &c->rooms[cmd->slot];

	if (r->room != cmd->room)
		return -ENOENT;
	switch (cmd->op) {
	case EGW_OP_SEND_COMMIT:
		if (r->op != EGW_OP_SEND_OPEN || r->committed)
			return -EBADFD;
		r->committed = true;
		r->state = EGW_AST_TRANSFERRING;
		r->next_ns = fake_now_ns() + gw->cfg.step_ms * 1000000ull;
		slot_write(c, cmd->slot, r, 0);
		post(c, cmd->tag, r->room, 0, cmd->op, r->state, true,
		     cmd->slot);
		return 0;
	case EGW_OP_RELEASE:
		if (r->op != EGW_OP_RECV_OPEN || r->state != EGW_AST_SUCCESS)
			return -EBADFD;
		room_end(gw, c, cmd->slot, cmd->tag, cmd->op, EGW_AST_SUCCESS,
			 0, 0);
		printf("client %u room %llu rank %u: released\n", c->id,
		       (unsigned long long)cmd->room, r->rank);
		return 0;
	default: /* ABORT */
		room_end(gw, c, cmd->slot, cmd->tag, cmd->op, EGW_AST_FAILED,
			 0, EGW_ERR(ERR_ABORTED));
		printf("client %u room %llu: aborted\n", c->id,
		       (unsigned long long)cmd->room);
		return 0;
	}
}

int
fake_commands(struct fake_gw *gw, struct fake_client *c)
{
	struct egw_attach_limits lim = {
		.nslots = c->map.nslots,
		.max_total_tokens = gw->cfg.max_total,
		.npeers = (uint16_t)gw->cfg.npeers,
		.encode = gw->cfg.flags & EGW_WELCOME_F_ENCODE,
		.language = gw->cfg.flags & EGW_WELCOME_F_LANGUAGE,
	};
	struct egw_attach_cmd cmd;
	int rc;

	while ((rc = egw_attach_ring_get(&c->map.sq, &cmd)) == 1) {
		rc = egw_attach_cmd_check(&cmd, &lim);
		if (rc == 0 && cmd.op == EGW_OP_NOP)
			rc = 0;
		else if (rc == 0 && (cmd.op == EGW_OP_SEND_OPEN ||
				     cmd.op == EGW_OP_RECV_OPEN))
			rc = cmd_open(gw, c, &cmd);
		else if (rc == 0)
			rc = cmd_room(gw, c, &cmd);
		if (rc != 0)
			printf("client %u: %s room %llu slot %u refused: %d\n",
			       c->id, egw_attach_op_name(cmd.op),
			       (unsigned long long)cmd.room, cmd.slot, rc);
		if (rc != 0 || cmd.op == EGW_OP_NOP)
			post(c, cmd.tag, cmd.room, rc, cmd.op,
			     EGW_AST_FAILED, false, cmd.slot);
	}
	return rc < 0 ? rc : 0;
}

/* ---- time --------------------------------------------------------------- */

static void
step_recv(struct fake_gw *gw, struct fake_client *c, uint32_t s)
{
	struct fake_room *r = &c->rooms[s];
	uint32_t bt = gw->cfg.block_tokens, total = PAT_TOTAL(r->room);

	switch (r->state) {
	case EGW_AST_BOOTSTRAPPING:
		r->state = EGW_AST_WAITING_FOR_INPUT;
		break;
	case EGW_AST_WAITING_FOR_INPUT:
		if (r->room & PAT_STALL)
			return;
		if (r->room & PAT_FAIL) {
			room_fail(gw, c, s, ERR_PEER_DEAD);
			return;
		}
		r->total = total;
		if (pool_alloc(gw, r->aux_only ? 1 : (total + bt - 1) / bt,
			       r) != 0) {
			room_fail(gw, c, s, ERR_POOL_EXHAUSTED);
			return;
		}
		write_aux(gw, r, pat_delta(r->room), pat_cookie(r->room));
		if (!r->aux_only)
			fill_room(gw, r);
		r->state = EGW_AST_TRANSFERRING;
		break;
	case EGW_AST_TRANSFERRING:
		r->state = EGW_AST_SUCCESS;
		break;
	default:
		return; /* Success: the client's until RELEASE */
	}
	slot_write(c, s, r, 0);
	post(c, 0, r->room, 0, EGW_OP_RECV_OPEN, r->state, true, s);
	/* printed once the slot says so: tests act on the line */
	if (r->state == EGW_AST_SUCCESS)
		printf("client %u room %llu rank %u: success\n", c->id,
		       (unsigned long long)r->room, r->rank);
}

static void
step_send(struct fake_gw *gw, struct fake_client *c, uint32_t s)
{
	struct fake_room *r = &c->rooms[s];
	uint64_t room;
	uint32_t total;
	int64_t bad;

	if (!r->committed || (r->room & PAT_STALL))
		return;
	bad = check_room(gw, r);
	if (bad >= 0) {
		printf("client %u room %llu: token %lld differs from the "
		       "pattern\n", c->id, (unsigned long long)r->room,
		       (long long)bad);
		room_fail(gw, c, s, ERR_TRANSPORT);
		return;
	}
	room = r->room;
	total = r->total;
	room_end(gw, c, s, 0, EGW_OP_SEND_COMMIT, EGW_AST_SUCCESS, 0, 0);
	printf("client %u room %llu: success, %u tokens checked\n", c->id,
	       (unsigned long long)room, total);
}

/* The port's published stats (doc/client.md, "Published stats"), as a
 * sequence lock: the pool's blocks, nothing queued, no cache. */
static void
publish_stats(struct fake_gw *gw, struct fake_client *c, uint64_t now)
{
	struct egw_attach_stats *st = &c->map.area->stats;
	uint32_t seq = __atomic_load_n(&st->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&st->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	st->updated_ns = now;
	st->pool_blocks = gw->pool.nblocks;
	st->free_blocks = gw->pool.nfree;
	__atomic_store_n(&st->seq, seq + 2, __ATOMIC_RELEASE);
}

void
fake_rooms_step(struct fake_gw *gw, struct fake_client *c)
{
	uint64_t now = fake_now_ns();

	publish_stats(gw, c, now);

	for (uint32_t s = 0; s < c->map.nslots; s++) {
		struct fake_room *r = &c->rooms[s];

		if (r->room == 0 || now < r->next_ns)
			continue;
		r->next_ns = now + gw->cfg.step_ms * 1000000ull;
		if (r->op == EGW_OP_RECV_OPEN)
			step_recv(gw, c, s);
		else
			step_send(gw, c, s);
	}
}

void
fake_rooms_drop(struct fake_gw *gw, struct fake_client *c, const char *why)
{
	uint32_t rooms = 0, blocks = 0;

	for (uint32_t s = 0; s < c->map.nslots; s++) {
		struct fake_room *r = &c->rooms[s];

		if (r->room == 0)
			continue;
		printf("client %u room %llu: aborted (%s, state %u)\n", c->id,
		       (unsigned long long)r->room, why, r->state);
		blocks += pool_free(gw, r);
		r->room = 0;
		rooms++;
	}
	printf("client %u detached (%s): aborted %u rooms, freed %u blocks; "
	       "pool free %u of %u\n", c->id, why, rooms, blocks,
	       gw->pool.nfree, gw->pool.nblocks);
}
