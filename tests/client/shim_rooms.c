/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shim's transfer: what the gateway's node would do with the rooms
 * lib/engines asks for (shim.h says how it moves them), on a real
 * lib/pool pool, with lib/pattern's bytes. It reports back through
 * egw_engines_room_state/_delivered/_done, as the gateway's worker does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egw_pattern.h"
#include "shim.h"

uint64_t
shim_now_ns(const struct shim *sh)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
	       sh->skew_ns;
}

/* ---- the pool ------------------------------------------------------------ */

/* Every (run_blocks + 1)-th block is taken by an owner no room has, so
 * that a room larger than run_blocks blocks gets several runs. */
#define FILLER_OWNER (EGW_OWNER_NONE - 1)
#define TMP_OWNER (EGW_OWNER_NONE - 2)

uint32_t
shim_pool_blocks(const struct shim *sh)
{
	return egw_pool_nblocks(sh->pool) - sh->filler_blocks;
}

uint32_t
shim_pool_free(const struct shim *sh)
{
	struct egw_pool_stats st;

	egw_pool_get_stats(sh->pool, &st);
	return st.blocks_total - st.blocks_in_use;
}

static void
free_runs(struct shim *sh, uint64_t room, const struct egw_run *runs,
	  uint32_t nruns)
{
	for (uint32_t i = 0; i < nruns; i++) {
		int rc = egw_pool_free(sh->pool, room, runs[i]);

		if (rc != 0)
			printf("room %" PRIu64 ": freeing run %u+%u: %s\n",
			       room, runs[i].start, runs[i].count,
			       strerror(-rc));
	}
}

/* ---- the room table -------------------------------------------------------- */

static struct shim_room *
find(struct shim *sh, enum egw_attach_side side, uint64_t room,
     uint16_t rank)
{
	for (uint32_t i = 0; i < sh->max_rooms; i++) {
		struct shim_room *r = &sh->rooms[i];

		if (r->room == room && r->side == side &&
		    (side == EGW_SIDE_SEND || r->rank == rank))
			return r;
	}
	return NULL;
}

static struct shim_room *
take(struct shim *sh, enum egw_attach_side side, uint64_t room,
     uint16_t rank)
{
	for (uint32_t i = 0; i < sh->max_rooms; i++) {
		struct shim_room *r = &sh->rooms[i];

		if (r->room != 0)
			continue;
		*r = (struct shim_room){
			.room = room, .side = side, .rank = rank,
			.runs = r->runs,
			.next_ns = sh->now + sh->cfg.step_ms * 1000000ull,
		};
		return r;
	}
	return NULL;
}

static uint32_t
room_blocks(const struct shim_room *r)
{
	return egw_pool_runs_blocks(r->runs, r->nruns);
}

/* The room leaves the transfer; blocks it still holds go back. */
static void
drop(struct shim *sh, struct shim_room *r)
{
	free_runs(sh, r->room, r->runs, r->nruns);
	r->nruns = 0;
	r->room = 0;
}

int
shim_rooms_init(struct shim *sh)
{
	const struct shim_cfg *c = &sh->cfg;
	uint32_t nb = egw_pool_nblocks(sh->pool);

	sh->max_rooms = c->max_clients * c->slots;
	sh->rooms = calloc(sh->max_rooms, sizeof(*sh->rooms));
	sh->run_store = calloc((size_t)sh->max_rooms * c->max_runs,
			       sizeof(*sh->run_store));
	if (sh->rooms == NULL || sh->run_store == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < sh->max_rooms; i++)
		sh->rooms[i].runs = sh->run_store + (size_t)i * c->max_runs;
	if (c->run_blocks == 0)
		return 0;
	/* first fit: run_blocks blocks for a moment, then one for good */
	for (uint32_t b = 0; b + c->run_blocks < nb; b += c->run_blocks + 1) {
		struct egw_run run;

		if (egw_pool_alloc(sh->pool, TMP_OWNER, c->run_blocks, &run,
				   1) != 1 ||
		    egw_pool_alloc(sh->pool, FILLER_OWNER, 1, &run, 1) != 1)
			return -EINVAL;
		sh->filler_blocks++;
	}
	for (uint32_t b = 0; b + c->run_blocks < nb; b += c->run_blocks + 1)
		if (egw_pool_free(sh->pool, TMP_OWNER, (struct egw_run){
					  b, c->run_blocks }) != 0)
			return -EINVAL;
	return 0;
}

/* ---- lib/engines' operations
 * -------------------------------------------------- */

static int
op_send_open(void *ctx, uint32_t client, uint64_t room, uint16_t nranks,
	     uint32_t total, int32_t mrope_delta, uint64_t cookie,
	     struct egw_attach_run *runs, uint32_t max_runs)
{
	struct shim *sh = ctx;
	struct egw_run *er = (struct egw_run *)runs; /* one layout */
	struct shim_room *r;
	int n;

	(void)client;
	(void)nranks;
	if (find(sh, EGW_SIDE_SEND, room, 0) != NULL)
		return -EGW_E_DUPLICATE_ROOM;
	n = egw_pool_alloc_tokens(sh->pool, room, total, er, max_runs);
	if (n < 0)
		return n; /* -ENOSPC: lib/engines asks again */
	r = take(sh, EGW_SIDE_SEND, room, 0);
	if (r == NULL) {
		free_runs(sh, room, er, (uint32_t)n);
		return -EGW_E_NO_SLOT;
	}
	egw_pool_aux_init(sh->pool, er[0].start, total, mrope_delta, cookie);
	r->total = total;
	r->mrope_delta = mrope_delta;
	r->cookie = cookie;
	r->nruns = (uint32_t)n;
	memcpy(r->runs, er, (size_t)n * sizeof(*er));
	r->state = EGW_ATTACH_STATE_WAITING_FOR_INPUT;
	return n;
}

static int
op_send_commit(void *ctx, uint64_t room, uint32_t total,
	       const struct egw_attach_run *runs, uint32_t nruns)
{
	struct shim *sh = ctx;
	struct shim_room *r = find(sh, EGW_SIDE_SEND, room, 0);

	(void)runs;
	if (r == NULL || r->committed)
		return -EGW_E_UNKNOWN_ROOM;
	if (total != r->total || nruns != r->nruns)
		return -EGW_E_ALLOC_MISMATCH;
	r->committed = true;
	r->next_ns = sh->now + sh->cfg.step_ms * 1000000ull;
	return 0;
}

static void
op_send_abort(void *ctx, uint64_t room, bool committed,
	      const struct egw_attach_run *runs, uint32_t nruns)
{
	struct shim *sh = ctx;
	struct shim_room *r = find(sh, EGW_SIDE_SEND, room, 0);

	/* the transfer's own copy of the runs is what it frees: the runs
	 * given here are the same blocks */
	(void)runs;
	(void)nruns;
	if (r == NULL)
		return;
	printf("room %" PRIu64 ": aborted (%s, %u blocks)\n", room,
	       committed ? "committed" : "open", room_blocks(r));
	drop(sh, r);
}

static int
op_recv_open(void *ctx, uint64_t room, uint16_t rank, uint16_t nranks,
	     uint32_t peer, bool aux_only)
{
	struct shim *sh = ctx;
	struct shim_room *r;

	(void)nranks;
	(void)peer;
	r = take(sh, EGW_SIDE_RECV, room, rank);
	if (r == NULL)
		return -EGW_E_NO_SLOT;
	r->aux_only = aux_only;
	r->total = SHIM_TOTAL(room);
	r->state = EGW_ATTACH_STATE_BOOTSTRAPPING;
	return 0;
}

static void
op_recv_abort(void *ctx, uint64_t room, uint16_t rank)
{
	struct shim *sh = ctx;
	struct shim_room *r = find(sh, EGW_SIDE_RECV, room, rank);

	if (r == NULL)
		return;
	printf("room %" PRIu64 ": aborted (rank %u, state %u)\n", room,
	       rank, r->state);
	drop(sh, r);
}

static void
op_recv_release(void *ctx, uint64_t room, uint16_t rank,
		const struct egw_attach_run *runs, uint32_t nruns)
{
	struct shim *sh = ctx;
	uint32_t blocks = 0;

	for (uint32_t i = 0; i < nruns; i++)
		blocks += runs[i].count;
	free_runs(sh, room, (const struct egw_run *)runs, nruns);
	printf("room %" PRIu64 " rank %u: released %u blocks\n", room, rank,
	       blocks);
}

static void
op_wake(void *ctx, uint32_t client)
{
	struct shim *sh = ctx;
	uint64_t one = 1;

	for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++) {
		struct shim_conn *k = &sh->conns[i];

		if (k->sock < 0 || k->client != client || k->efd < 0)
			continue;
		(void)!write(k->efd, &one, sizeof(one));
		printf("client %u: wake-up %u\n", client, ++k->wakeups);
	}
}

static void
op_client_lost(void *ctx, uint32_t client, const char *why)
{
	struct shim *sh = ctx;

	/* as the gateway's control thread: the socket is shut for writing
	 * (the client reads its end), the blocks held until it closes */
	for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++) {
		struct shim_conn *k = &sh->conns[i];

		if (k->sock < 0 || k->client != client || k->lost)
			continue;
		k->lost = true;
		shutdown(k->sock, SHUT_WR);
	}
	printf("client %u given up (%s): %u blocks held\n", client, why,
	       egw_engines_client_held(sh->srv, client));
}

static void
op_pool_state(void *ctx, struct egw_attach_stats *st)
{
	struct shim *sh = ctx;

	st->pool_blocks = shim_pool_blocks(sh);
	st->free_blocks = shim_pool_free(sh);
	st->quarantined_blocks = 0;
	st->admission_queue = 0;
}

const struct egw_engines_ops shim_ops = {
	.send_open = op_send_open,
	.send_commit = op_send_commit,
	.send_abort = op_send_abort,
	.recv_open = op_recv_open,
	.recv_abort = op_recv_abort,
	.recv_release = op_recv_release,
	.wake = op_wake,
	.client_lost = op_client_lost,
	.pool_state = op_pool_state,
};

/* ---- time ------------------------------------------------------------------ */

/* The room ends with `err` (a positive enum egw_err, or a negative errno)
 * as the node would report it; its blocks go back. */
static void
fail(struct shim *sh, struct shim_room *r, int err)
{
	uint64_t room = r->room;
	uint16_t rank = r->rank;
	enum egw_attach_side side = r->side;

	drop(sh, r);
	printf("room %" PRIu64 " rank %u: failed %d\n", room, rank, err);
	egw_engines_room_done(sh->srv, side, room, rank, err);
}

static void
state(struct shim *sh, struct shim_room *r, uint8_t st, uint32_t landed)
{
	r->state = st;
	egw_engines_room_state(sh->srv, r->side, r->room, r->rank, st,
			       r->total, landed);
}

/* WaitingForInput: the room's blocks are taken and written. */
static void
recv_land(struct shim *sh, struct shim_room *r)
{
	uint32_t blocks = r->aux_only ? 1 :
			  egw_pool_geom_blocks_for(egw_pool_geom(sh->pool),
					      r->total);
	int n = egw_pool_alloc(sh->pool, r->room, blocks, r->runs,
			       sh->cfg.max_runs);

	if (n < 0) {
		fail(sh, r, EGW_E_POOL_EXHAUSTED);
		return;
	}
	r->nruns = (uint32_t)n;
	if (r->aux_only)
		egw_pool_aux_init(sh->pool, r->runs[0].start, r->total,
				  EGW_PATTERN_MROPE_DELTA, r->room);
	else if (egw_pattern_fill(sh->pool, r->room, r->total, r->runs,
				  r->nruns) != 0) {
		fail(sh, r, EGW_E_TRANSPORT);
		return;
	}
	state(sh, r, EGW_ATTACH_STATE_TRANSFERRING, r->total);
}

static void
recv_deliver(struct shim *sh, struct shim_room *r)
{
	int rc = egw_engines_room_delivered(sh->srv, r->room, r->rank,
					    r->total,
					    (const struct egw_attach_run *)
					    r->runs, r->nruns);

	printf("room %" PRIu64 " rank %u: delivered %u tokens in %u runs: "
	       "%d\n", r->room, r->rank, r->total, r->nruns, rc);
	if (rc != 0) {
		drop(sh, r); /* nobody holds them: ours to free */
		return;
	}
	r->nruns = 0; /* the client's until RELEASE */
	r->room = 0;
}

static void
step_recv(struct shim *sh, struct shim_room *r)
{
	switch (r->state) {
	case EGW_ATTACH_STATE_BOOTSTRAPPING:
		state(sh, r, EGW_ATTACH_STATE_WAITING_FOR_INPUT, 0);
		return;
	case EGW_ATTACH_STATE_WAITING_FOR_INPUT:
		if (r->room & SHIM_STALL)
			return;
		if (r->room & SHIM_FAIL)
			fail(sh, r, EGW_E_PEER_DEAD);
		else
			recv_land(sh, r);
		return;
	default:
		recv_deliver(sh, r);
		return;
	}
}

/* One token's units (embedding, fill id, mrope triple) against lib/pattern.
 * @return the wrong ones */
static uint64_t
check_token(const struct shim *sh, uint64_t room, uint32_t t, uint32_t b,
	    uint32_t k)
{
	const struct egw_pool_geom *g = egw_pool_geom(sh->pool);
	size_t eb = (size_t)g->hidden_size * g->dtype_bytes;
	const uint8_t *e = egw_pool_addr(sh->pool, EGW_KIND_EMB, b, k);
	const int32_t *f = egw_pool_addr(sh->pool, EGW_KIND_FILL_IDS, b, k);
	const int32_t *m = egw_pool_addr(sh->pool, EGW_KIND_MROPE, b, k);
	static uint8_t want[SHIM_MAX_EMB_BYTES]; /* the option's bound */
	int32_t mw[3];
	uint64_t bad = 0;

	egw_pattern_emb(room, t, want, eb);
	bad += memcmp(e, want, eb) != 0;
	bad += *f != egw_pattern_fill_id(room, t);
	if (m != NULL) {
		egw_pattern_mrope(room, t, mw);
		bad += memcmp(m, mw, sizeof(mw)) != 0;
	}
	return bad;
}

/*
 * A committed encode room: its tokens against lib/pattern, its aux record
 * against what SEND_OPEN asked the gateway to write (the engine names the
 * cookie and delta; they are not the pattern's).
 * @return the wrong units, one more for a wrong aux record
 */
static uint64_t
check_send(const struct shim *sh, const struct shim_room *r)
{
	uint32_t bt = egw_pool_geom(sh->pool)->block_tokens, t = 0;
	const struct egw_aux_rec *aux =
		egw_pool_addr(sh->pool, EGW_KIND_AUX, r->runs[0].start, 0);
	uint64_t bad = aux->total_tokens != r->total ||
		       aux->mrope_delta != r->mrope_delta ||
		       aux->cookie != r->cookie;

	for (uint32_t i = 0; i < r->nruns; i++)
		for (uint32_t k = 0; k < r->runs[i].count * bt &&
				     t < r->total; k++, t++)
			bad += check_token(sh, r->room, t,
					   r->runs[i].start + k / bt, k % bt);
	return bad;
}

static void
step_send(struct shim *sh, struct shim_room *r)
{
	uint64_t room = r->room, bad;
	uint32_t total = r->total;

	if (!r->committed || (room & SHIM_STALL))
		return;
	if (room & SHIM_FAIL) {
		fail(sh, r, EGW_E_PEER_DEAD);
		return;
	}
	bad = check_send(sh, r);
	if (bad != 0) {
		printf("room %" PRIu64 ": %" PRIu64 " units differ from the "
		       "pattern\n", room, bad);
		fail(sh, r, EGW_E_TRANSPORT);
		return;
	}
	drop(sh, r);
	printf("room %" PRIu64 ": success, %u tokens checked\n", room, total);
	egw_engines_room_done(sh->srv, EGW_SIDE_SEND, room, 0, 0);
}

void
shim_rooms_step(struct shim *sh, uint64_t now)
{
	for (uint32_t i = 0; i < sh->max_rooms; i++) {
		struct shim_room *r = &sh->rooms[i];

		if (r->room == 0 || now < r->next_ns)
			continue;
		r->next_ns = now + sh->cfg.step_ms * 1000000ull;
		if (r->side == EGW_SIDE_RECV)
			step_recv(sh, r);
		else
			step_send(sh, r);
	}
}

/* ---- the script ------------------------------------------------------------ */

static void
script_fail(struct shim *sh, const char *args)
{
	unsigned long long room;
	unsigned int rank;
	int err;
	struct shim_room *r;

	if (sscanf(args, "%llu %u %d", &room, &rank, &err) != 3) {
		printf("script: fail wants ROOM RANK ERR, not '%s'\n", args);
		return;
	}
	r = find(sh, EGW_SIDE_RECV, room, (uint16_t)rank);
	if (r == NULL)
		r = find(sh, EGW_SIDE_SEND, room, 0);
	if (r == NULL) {
		printf("script: fail: the transfer has no room %llu rank %u\n",
		       room, rank);
		return;
	}
	fail(sh, r, err);
}

/* "peer-add NAME": a peer joins under the next id (a node's free slot). */
static void
script_peer_add(struct shim *sh, const char *name)
{
	struct egw_engines_peer *p;

	if (sh->npeers == SHIM_MAX_PEERS || strlen(name) == 0 ||
	    strlen(name) >= sizeof(p->name)) {
		printf("script: peer-add '%s' refused\n", name);
		return;
	}
	p = &sh->peers[sh->npeers++];
	memset(p, 0, sizeof(*p));
	p->id = ++sh->next_peer_id;
	p->slot = sh->npeers - 1;
	p->ready = true;
	snprintf(p->name, sizeof(p->name), "%s", name);
	shim_peers_changed(sh);
	printf("script: peer %s joined as id %u\n", name, p->id);
}

/* "peer-remove NAME": the peer leaves; its id is never listed again. */
static void
script_peer_remove(struct shim *sh, const char *name)
{
	for (uint32_t i = 0; i < sh->npeers; i++) {
		if (strcmp(sh->peers[i].name, name) != 0)
			continue;
		sh->peers[i] = sh->peers[--sh->npeers];
		shim_peers_changed(sh);
		printf("script: peer %s removed\n", name);
		return;
	}
	printf("script: no peer '%s' to remove\n", name);
}

void
shim_script(struct shim *sh, char *line)
{
	unsigned int ms;

	line[strcspn(line, "\n")] = '\0';
	if (strncmp(line, "fail ", 5) == 0) {
		script_fail(sh, line + 5);
	} else if (strncmp(line, "peer-add ", 9) == 0) {
		script_peer_add(sh, line + 9);
	} else if (strncmp(line, "peer-remove ", 12) == 0) {
		script_peer_remove(sh, line + 12);
	} else if (sscanf(line, "skip %u", &ms) == 1) {
		sh->skew_ns += (uint64_t)ms * 1000000u;
		printf("script: clock %u ms ahead\n", ms);
	} else {
		printf("script: unknown line '%s'\n", line);
	}
}
