/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway's side of doc/client.md, sans-I/O. A slot's truth lives in
 * the server's private copy (struct slot_state); the shared slot is only
 * ever written from it, and completions are posted after the shared slot
 * says what they report.
 */
#include "egw_engines.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum phase {
	PH_FREE = 0,
	PH_WAIT_MEM,  /* SEND_OPEN waiting for blocks */
	PH_WAIT_SLOT, /* OPEN waiting for a slot of the node's room table */
	PH_WAIT_PEER, /* RECV_OPEN waiting for its peer's name to be listed */
	PH_OPEN,      /* send: blocks given, not committed; recv: opened */
	PH_COMMITTED, /* send: the engine owns the runs */
	PH_DELIVERED, /* recv: the client owns the blocks until RELEASE */
	PH_FOLLOW,    /* recv: waits for another room's transfer of the
		       * same content (no receive of its own) */
	PH_HELD,      /* the client was given up while it may still map
		       * these blocks: out of the pool until it is removed */
	PH_MEMBER,    /* recv: waits for its group's receive, opened by
		       * another member (the group's driver) */
};

#define NO_ENTRY UINT32_MAX
#define NO_GROUP UINT32_MAX
#define SIDE_GROUP 2 /* index entries of groups: (room, leader) -> group */

struct slot_state {
	uint64_t room;             /* 0: free; the engine's id */
	uint64_t wire;             /* the id in the gateway (attempt applied) */
	uint64_t held_at;          /* PH_DELIVERED: since when */
	uint32_t entry;            /* content entry, NO_ENTRY: none */
	uint32_t group;		   /* fan-out group, NO_GROUP: none */
	bool warned;               /* held_long reported */
	uint64_t tag;              /* echoed in the room's completions */
	uint64_t deadline;	   /* PH_WAIT_MEM: the allocation deadline;
				    * PH_WAIT_PEER: the bootstrap deadline */
	uint64_t since;		   /* PH_WAIT_SLOT: waiting since */
	uint64_t cookie;
	int32_t mrope_delta;
	uint32_t total, nruns;
	uint16_t rank, nranks;
	uint32_t peer_id; /* recv: 0 while waiting for peer_name */
	char peer_name[EGW_ATTACH_NAME_LEN]; /* recv: as the command said */
	bool aux_only;
	uint8_t side, phase, state, op;
	struct egw_attach_run *runs; /* max_runs, private */
};

struct client {
	bool used, lost, wake;
	uint32_t events;	   /* EGW_AREA_EV_*, from the area at add */
	const char *broken;        /* why the client is to be given up */
	struct egw_attach_map m;
	struct slot_state *slots;
	struct egw_attach_run *run_store;
	uint32_t nwait;            /* slots in PH_WAIT_MEM */
	uint32_t pub_seq;          /* the published stats' sequence */
	uint64_t beat, beat_at;
	uint32_t held_blocks;      /* in PH_HELD rooms */
	struct egw_engines_stats st;
};

/* (room, rank, side) -> (client, slot): open addressing, linear probing,
 * backward-shift deletion; room 0 marks an empty entry */
struct index_entry {
	uint64_t room;
	uint32_t rank_side;
	uint32_t client;
	uint32_t slot;
};

/* A content entry: one room's transfer of a content key, in flight
 * (its leader slot is receiving it) or landed (its blocks kept for every
 * room that names the key, until evicted). */
enum { CE_FREE = 0, CE_IN_FLIGHT, CE_LANDED };

struct cache_entry {
	uint8_t key[EGW_ATTACH_CONTENT_BYTES];
	uint8_t state;
	uint16_t origin_rank;
	uint64_t origin;           /* the transfer's room id: the blocks' owner */
	uint64_t origin_room;      /* the engine's id of that room (any attempt) */
	uint32_t lead_cid, lead_slot; /* CE_IN_FLIGHT: the receiving slot */
	uint32_t refs;             /* slots holding the landed blocks */
	uint32_t followers;        /* slots in PH_FOLLOW on it */
	uint32_t total, nruns, blocks;
	uint64_t used;             /* last use, on the server's use counter */
	struct egw_attach_run *runs; /* cache_max_runs */
};

/* A fan-out group (doc/client.md, "Fan-out"): the ranks leader..leader+n-1
 * of a room on this port share one receive. Its first member (the driver)
 * opens it at the node; the others join. Landed, its blocks are every
 * member's until the last one lets go and the members that never opened
 * are given up (their bootstrap deadline). */
struct group_member {
	uint32_t cid, slot;
};

struct group {
	bool used, landed, closed; /* closed: the unopened ones are gone */
	uint64_t wire;
	uint16_t leader, nranks, set;
	uint16_t opened;  /* members that opened */
	uint16_t holding; /* members holding the delivery */
	uint32_t peer_id; /* the peer as the driver named it */
	char peer_name[EGW_ATTACH_NAME_LEN];
	uint32_t driver_cid, driver_slot;
	uint64_t deadline; /* members not opened by then are gone */
	uint32_t total, nruns;
	struct egw_attach_run *runs; /* fanout_max_runs */
	struct group_member member[EGW_XFER_MAX_RANKS];
};

/* OPENs waiting for a room-table slot, oldest first: a ring of
 * slot_queue entries per side */
struct slot_ref {
	uint32_t client, slot;
};

struct slot_queue {
	struct slot_ref *q;
	uint32_t head, n;
	bool said;    /* the wait episode was noted */
	bool gave_up; /* ... and its first room to give up */
};

struct egw_engines {
	struct egw_engines_conf c;
	struct slot_queue sq[2];   /* by enum egw_attach_side */
	uint64_t now;              /* the last poll's */
	uint64_t pub_at, scan_at;  /* stats published, held rooms scanned */
	struct egw_attach_stats pool; /* the last pool_state() */
	struct cache_entry *cache;
	struct egw_attach_run *cache_runs;
	uint64_t use_clock;
	uint32_t pinned_blocks;    /* of landed entries some room holds */
	struct egw_engines_cache_stats cst;
	struct client *clients;
	uint32_t nattached;
	struct index_entry *tab;
	uint32_t tab_mask, nrooms;
	struct egw_engines_stats removed; /* counters of removed clients */
	uint32_t held_blocks;      /* of all clients, in PH_HELD rooms */
	struct egw_engines_peer *peers;	  /* max_peers, ascending ids */
	struct egw_engines_peer *scratch; /* a new list, sorted before use */
	struct egw_attach_peer_rec *recs; /* the same, as clients see it */
	uint32_t npeers;
	uint32_t top_id; /* the highest id ever listed */
	uint64_t peers_gen;
	uint32_t nwait_peer; /* slots in PH_WAIT_PEER */
	uint64_t peer_due;   /* their earliest deadline */
	struct group *groups;
	struct egw_attach_run *group_runs;
	uint32_t ngroups, groups_used;
	uint64_t group_due; /* the earliest deadline of an open group */
};

/* ---- the room index ------------------------------------------------------ */

static uint32_t
rank_side(uint16_t rank, uint8_t side)
{
	return (uint32_t)rank | (uint32_t)side << 16;
}

static uint32_t
home_of(const struct egw_engines *s, uint64_t room, uint32_t rs)
{
	uint64_t x = room ^ ((uint64_t)rs << 47);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x & s->tab_mask;
}

static struct index_entry *
index_find(const struct egw_engines *s, uint64_t room, uint32_t rs)
{
	for (uint32_t i = home_of(s, room, rs);; i = (i + 1) & s->tab_mask) {
		struct index_entry *e = &s->tab[i];

		if (e->room == 0)
			return NULL;
		if (e->room == room && e->rank_side == rs)
			return e;
	}
}

static int
index_insert(struct egw_engines *s, uint64_t room, uint32_t rs,
	     uint32_t client, uint32_t slot)
{
	uint32_t i;

	if (s->nrooms - s->groups_used >= s->c.max_rooms)
		return -EMFILE;
	for (i = home_of(s, room, rs); s->tab[i].room != 0;
	     i = (i + 1) & s->tab_mask)
		;
	s->tab[i] = (struct index_entry){ room, rs, client, slot };
	s->nrooms++;
	return 0;
}

static void
index_erase(struct egw_engines *s, struct index_entry *e)
{
	uint32_t hole = (uint32_t)(e - s->tab);

	/* shift later members of the probe chain back over the hole, so
	 * lookups never stop early and no tombstone is needed */
	for (uint32_t j = (hole + 1) & s->tab_mask; s->tab[j].room != 0;
	     j = (j + 1) & s->tab_mask) {
		uint32_t home = home_of(s, s->tab[j].room, s->tab[j].rank_side);

		if (((j - home) & s->tab_mask) >= ((j - hole) & s->tab_mask)) {
			s->tab[hole] = s->tab[j];
			hole = j;
		}
	}
	s->tab[hole].room = 0;
	s->nrooms--;
}

static void
unindex(struct egw_engines *s, uint64_t room, uint32_t rs)
{
	struct index_entry *e = index_find(s, room, rs);

	if (e != NULL)
		index_erase(s, e);
}

/* ---- the wait for a room-table slot ------------------------------------- */

/* The node's room table holds the admission queue too (xfer.md,
 * "Admission"), so a room that finds it full cannot wait there: it waits
 * here, in a bounded ring per side, and is opened in order as slots free. */

static bool
queue_push(struct egw_engines *s, uint8_t side, uint32_t cid, uint32_t slot)
{
	struct slot_queue *q = &s->sq[side];

	if (q->n == s->c.slot_queue)
		return false;
	q->q[(q->head + q->n++) % s->c.slot_queue] = (struct slot_ref){
		.client = cid, .slot = slot
	};
	return true;
}

static struct slot_ref
queue_at(const struct egw_engines *s, uint8_t side, uint32_t k)
{
	const struct slot_queue *q = &s->sq[side];

	return q->q[(q->head + k) % s->c.slot_queue];
}

/* Out of the ring wherever it stands (an abort, a lost client): the rooms
 * behind it move up, keeping their order. */
static void
queue_remove(struct egw_engines *s, uint8_t side, uint32_t cid, uint32_t slot)
{
	struct slot_queue *q = &s->sq[side];
	uint32_t cap = s->c.slot_queue, k = 0;
	struct slot_ref r;

	for (; k < q->n; k++) {
		r = queue_at(s, side, k);
		if (r.client == cid && r.slot == slot)
			break;
	}
	if (k == q->n)
		return;
	if (k == 0) {
		q->head = (q->head + 1) % cap;
	} else {
		for (; k + 1 < q->n; k++)
			q->q[(q->head + k) % cap] =
				q->q[(q->head + k + 1) % cap];
	}
	if (--q->n == 0)
		q->said = q->gave_up = false; /* the episode is over */
}

/* A slot leaves whichever wait it is in (it is opened, or it ends). */
static void
unwait(struct egw_engines *s, uint32_t cid, uint32_t slot)
{
	struct slot_state *p = &s->clients[cid].slots[slot];

	if (p->phase == PH_WAIT_MEM)
		s->clients[cid].nwait--;
	else if (p->phase == PH_WAIT_SLOT)
		queue_remove(s, p->side, cid, slot);
	else if (p->phase == PH_WAIT_PEER)
		s->nwait_peer--;
}

/* ---- completions and shared slots --------------------------------------- */


static void
post(struct egw_engines *s, uint32_t cid, uint64_t tag, uint64_t room,
     int result, uint8_t op, uint8_t state, uint16_t flags, uint32_t slot,
     uint32_t total, uint32_t nruns, uint32_t landed)
{
	struct client *cl = &s->clients[cid];
	struct egw_attach_cqe e;
	int rc;

	if (cl->lost)
		return;
	memset(&e, 0, sizeof(e));
	e.tag = tag;
	e.room = room;
	e.result = result;
	e.op = op;
	e.state = state;
	e.flags = flags;
	e.slot = slot;
	e.total_tokens = total;
	e.nruns = nruns;
	e.landed_tokens = landed;
	rc = egw_attach_ring_put(&cl->m.cq, &e);
	if (rc == 0) {
		cl->st.completions++;
		cl->wake = true;
	} else if (rc == -ENOBUFS) {
		/* never wait for the client: count it, the slot says it all */
		__atomic_store_n(&cl->m.cq.ctl->overflow,
				 cl->m.cq.ctl->overflow + 1, __ATOMIC_RELEASE);
		cl->st.cq_overflow++;
		cl->wake = true;
	} else {
		/* given up at the next poll, not here: the caller is in the
		 * middle of ending a room */
		cl->broken = "completion ring head out of range";
	}
}

/* The shared slot from the private one (the client only reads it). */
static void
publish_slot(struct client *cl, uint32_t slot, int error)
{
	const struct slot_state *p = &cl->slots[slot];
	struct egw_attach_slot *sh = egw_attach_slot_at(&cl->m, slot);

	sh->state = p->state;
	sh->error = error;
	sh->total_tokens = p->total;
	sh->nruns = p->nruns;
	sh->first_block = p->nruns > 0 ? p->runs[0].start : 0;
	memcpy(sh->runs, p->runs, p->nruns * sizeof(p->runs[0]));
	/* the room last: a client that sees it sees the rest */
	__atomic_store_n(&sh->room, p->room, __ATOMIC_RELEASE);
}

/* A room's last word: slot and completion, then the slot is free. A room
 * counts as ok when it succeeded (delivered, or served to every rank) and
 * as failed when it ends Failed before that. */
static void
finish_as(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t tag,
	  uint8_t op, uint8_t state, int result, int slot_error)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	struct egw_attach_slot *sh;
	uint64_t room = p->room;

	p->state = state;
	if (state == EGW_ATTACH_STATE_FAILED)
		p->nruns = 0;
	if (!cl->lost)
		publish_slot(cl, slot, slot_error);
	post(s, cid, tag, room, result, op, state, 0, slot, p->total,
	     p->nruns, state == EGW_ATTACH_STATE_SUCCESS ? p->total : 0);
	if (state == EGW_ATTACH_STATE_FAILED && p->phase != PH_DELIVERED)
		cl->st.rooms_failed++;
	unwait(s, cid, slot);
	p->room = 0;
	p->phase = PH_FREE;
	if (!cl->lost) {
		sh = egw_attach_slot_at(&cl->m, slot);
		__atomic_store_n(&sh->room, 0, __ATOMIC_RELEASE);
	}
}

/* The usual case: the completion's result is the slot's error. */
static void
finish(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t tag,
       uint8_t op, uint8_t state, int result)
{
	finish_as(s, cid, slot, tag, op, state, result, result);
}

static int
err_code(int err)
{
	return err > 0 ? -err : err;
}

/* ---- the content cache ---------------------------------------------------- */

static bool
key_zero(const uint8_t *k)
{
	for (uint32_t i = 0; i < EGW_ATTACH_CONTENT_BYTES; i++)
		if (k[i] != 0)
			return false;
	return true;
}

/* Entries are few (the configuration bounds them) and a lookup compares
 * 16 bytes each: a scan costs less than keeping an index in step. */
static struct cache_entry *
cache_find(const struct egw_engines *s, const uint8_t *key)
{
	for (uint32_t i = 0; i < s->c.cache_entries; i++) {
		struct cache_entry *e = &s->cache[i];

		if (e->state != CE_FREE &&
		    memcmp(e->key, key, EGW_ATTACH_CONTENT_BYTES) == 0)
			return e;
	}
	return NULL;
}

static uint32_t
entry_index(const struct egw_engines *s, const struct cache_entry *e)
{
	return (uint32_t)(e - s->cache);
}

/* A landed entry's blocks go back to the pool through the gateway. */
static void
cache_drop(struct egw_engines *s, struct cache_entry *e)
{
	if (e->state == CE_LANDED) {
		s->c.ops->recv_release(s->c.ctx, e->origin, e->origin_rank,
				       e->runs, e->nruns);
		s->cst.blocks -= e->blocks;
	}
	e->state = CE_FREE;
	e->refs = 0;
	e->followers = 0;
	s->cst.entries--;
}

/* The least recently used landed entry that no room holds goes. */
static bool
cache_evict_one(struct egw_engines *s)
{
	struct cache_entry *victim = NULL;

	for (uint32_t i = 0; i < s->c.cache_entries; i++) {
		struct cache_entry *e = &s->cache[i];

		if (e->state == CE_LANDED && e->refs == 0 &&
		    (victim == NULL || e->used < victim->used))
			victim = e;
	}
	if (victim == NULL)
		return false;
	cache_drop(s, victim);
	s->cst.evictions++;
	return true;
}

/* The bound is on blocks no room holds: held ones cannot go anyway. */
static void
cache_trim(struct egw_engines *s)
{
	while (s->cst.blocks - s->pinned_blocks > s->c.cache_blocks &&
	       cache_evict_one(s))
		;
}

static struct cache_entry *
cache_new(struct egw_engines *s, const uint8_t *key)
{
	struct cache_entry *e = NULL;

	for (int pass = 0; pass < 2 && e == NULL; pass++) {
		for (uint32_t i = 0; i < s->c.cache_entries; i++) {
			if (s->cache[i].state == CE_FREE) {
				e = &s->cache[i];
				break;
			}
		}
		if (e == NULL && !cache_evict_one(s))
			return NULL; /* every entry in use: no caching */
	}
	if (e == NULL)
		return NULL;
	memcpy(e->key, key, EGW_ATTACH_CONTENT_BYTES);
	e->state = CE_IN_FLIGHT;
	e->refs = 0;
	e->followers = 0;
	e->nruns = 0;
	e->blocks = 0;
	e->used = ++s->use_clock;
	s->cst.entries++;
	return e;
}

static void
cache_unref(struct egw_engines *s, struct cache_entry *e)
{
	e->used = ++s->use_clock;
	if (--e->refs == 0) {
		s->cst.pinned--;
		s->pinned_blocks -= e->blocks;
		cache_trim(s);
	}
}

static int entry_deliver(struct egw_engines *s, uint32_t cid, uint32_t slot,
			 struct cache_entry *e, uint16_t flags);

/*
 * The rooms that waited for an entry's transfer: served from its landed
 * blocks (code 0), or failed with `code` when the transfer did not land.
 */
static void
settle_followers(struct egw_engines *s, struct cache_entry *e, int code)
{
	for (uint32_t c = 0; e->followers > 0 && c < s->c.max_clients; c++) {
		struct client *cl = &s->clients[c];

		for (uint32_t i = 0; cl->used && i < cl->m.nslots; i++) {
			struct slot_state *f = &cl->slots[i];
			int rc = code;

			if (f->phase != PH_FOLLOW || f->entry != entry_index(s, e))
				continue;
			f->entry = NO_ENTRY;
			e->followers--;
			if (rc == 0)
				rc = entry_deliver(s, c, i, e, EGW_CQEF_CACHED);
			if (rc == 0)
				continue;
			unindex(s, f->wire, rank_side(f->rank, f->side));
			finish(s, c, i, f->tag, f->op, EGW_ATTACH_STATE_FAILED,
			       rc);
		}
	}
}

/*
 * A slot lets go of its entry: a follower stops waiting, a holder drops
 * its reference, and a leader whose transfer did not land takes its
 * followers down with it (`code` says why: no other transfer of their
 * content is under way, so they cannot land).
 */
static void group_leave(struct egw_engines *s, uint32_t cid, uint32_t slot,
			int code);
static void group_end(struct egw_engines *s, uint32_t cid, uint32_t slot,
		      int code, bool abort_node);
static void show_waiting(struct egw_engines *s, uint32_t cid, uint32_t slot);

static void
entry_leave(struct egw_engines *s, uint32_t cid, uint32_t slot, int code)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	struct cache_entry *e;

	group_leave(s, cid, slot, code);
	if (p->entry == NO_ENTRY)
		return;
	e = &s->cache[p->entry];
	p->entry = NO_ENTRY;
	if (p->phase == PH_FOLLOW) {
		e->followers--;
		return;
	}
	if (e->state == CE_LANDED) {
		if (p->phase == PH_DELIVERED || p->phase == PH_HELD)
			cache_unref(s, e);
		return;
	}
	if (e->lead_cid != cid || e->lead_slot != slot)
		return;
	settle_followers(s, e, code);
	cache_drop(s, e);
}

/* A slot receives a landed entry's blocks: Success, nothing transferred. */
static int
entry_deliver(struct egw_engines *s, uint32_t cid, uint32_t slot,
	      struct cache_entry *e, uint16_t flags)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];

	if (e->nruns > cl->m.max_runs)
		return -E2BIG;
	memcpy(p->runs, e->runs, e->nruns * sizeof(*e->runs));
	p->nruns = e->nruns;
	p->total = e->total;
	p->entry = entry_index(s, e);
	p->phase = PH_DELIVERED;
	p->state = EGW_ATTACH_STATE_SUCCESS;
	p->held_at = s->now;
	p->warned = false;
	if (e->refs++ == 0) {
		s->cst.pinned++;
		s->pinned_blocks += e->blocks;
	}
	e->used = ++s->use_clock;
	cl->st.rooms_ok++;
	publish_slot(cl, slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state,
	     EGW_CQEF_MORE | flags, slot, p->total, p->nruns, p->total);
	return 0;
}

/* The leader's transfer landed: the entry keeps its blocks. */
static void
entry_landed(struct egw_engines *s, struct cache_entry *e, uint32_t total,
	     const struct egw_attach_run *runs, uint32_t nruns)
{
	memcpy(e->runs, runs, nruns * sizeof(*runs));
	e->nruns = nruns;
	e->total = total;
	e->blocks = 0;
	for (uint32_t i = 0; i < nruns; i++)
		e->blocks += runs[i].count;
	e->state = CE_LANDED;
	e->used = ++s->use_clock;
	s->cst.blocks += e->blocks;
}

/* ---- fan-out groups -------------------------------------------------------
 */

static struct group *
group_of(struct egw_engines *s, uint64_t wire, uint16_t leader)
{
	struct index_entry *e = index_find(s, wire,
					   rank_side(leader, SIDE_GROUP));

	return e == NULL ? NULL : &s->groups[e->slot];
}

static void
group_free(struct egw_engines *s, struct group *g)
{
	unindex(s, g->wire, rank_side(g->leader, SIDE_GROUP));
	g->used = false;
	s->groups_used--;
}

/* Landed, no member holds it, and every member opened or is given up:
 * the blocks go back. */
static void
group_maybe_release(struct egw_engines *s, struct group *g)
{
	if (!g->landed || g->holding != 0 ||
	    (!g->closed && g->opened != g->set))
		return;
	group_free(s, g);
	s->c.ops->recv_release(s->c.ctx, g->wire, g->leader, g->runs, g->nruns);
}

/* One member gets the landed blocks (read-only views of the same blocks
 * as every other member). */
static void
group_deliver_one(struct egw_engines *s, struct group *g, uint32_t cid,
		  uint32_t slot)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];

	if (g->nruns > cl->m.max_runs) {
		p->group = NO_GROUP;
		unindex(s, p->wire, rank_side(p->rank, EGW_SIDE_RECV));
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       -E2BIG);
		return;
	}
	unwait(s, cid, slot);
	memcpy(p->runs, g->runs, g->nruns * sizeof(*g->runs));
	p->nruns = g->nruns;
	p->total = g->total;
	p->phase = PH_DELIVERED;
	p->state = EGW_ATTACH_STATE_SUCCESS;
	p->held_at = s->now;
	p->warned = false;
	g->holding |= (uint16_t)(1u << p->rank);
	cl->st.rooms_ok++;
	publish_slot(cl, slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, slot,
	     p->total, p->nruns, p->total);
}

/*
 * A member lets go. Landed: it drops its hold. In flight: the group's
 * receive ends (a member's abort or death fails the transfer, as an
 * ABORT of a rank fails the room), every other member fails with `code`
 * and the node's room is aborted if the driver had opened it.
 */
static void
group_end(struct egw_engines *s, uint32_t cid, uint32_t slot, int code,
	  bool abort_node)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	struct group *g;
	bool opened;

	if (p->group == NO_GROUP)
		return;
	g = &s->groups[p->group];
	p->group = NO_GROUP;
	if (g->landed) {
		g->holding &= (uint16_t) ~(1u << p->rank);
		group_maybe_release(s, g);
		return;
	}
	opened = abort_node &&
		 s->clients[g->driver_cid].slots[g->driver_slot].phase ==
			 PH_OPEN;
	group_free(s, g); /* reports of the node's room find nothing now */
	for (uint16_t r = g->leader;
	     r < g->leader + EGW_XFER_MAX_RANKS && r < g->nranks; r++) {
		const struct group_member *m = &g->member[r];
		struct slot_state *o;

		if (!(g->opened >> r & 1) || (m->cid == cid && m->slot == slot))
			continue;
		o = &s->clients[m->cid].slots[m->slot];
		o->group = NO_GROUP;
		unindex(s, o->wire, rank_side(o->rank, EGW_SIDE_RECV));
		finish(s, m->cid, m->slot, o->tag, o->op,
		       EGW_ATTACH_STATE_FAILED, code);
	}
	if (opened)
		s->c.ops->recv_abort(s->c.ctx, g->wire, g->leader);
}

static void
group_leave(struct egw_engines *s, uint32_t cid, uint32_t slot, int code)
{
	group_end(s, cid, slot, code, true);
}

/* The group's rank set: ranks g*F .. min((g+1)*F, nranks) - 1. */
static uint16_t
group_set(uint32_t f, uint16_t rank, uint16_t nranks, uint16_t *leader)
{
	uint16_t lo = (uint16_t)(rank / f * f), hi = (uint16_t)(lo + f);

	if (hi > nranks)
		hi = nranks;
	*leader = lo;
	return (uint16_t)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* Fan-out is on, the RECV_OPEN names no content (a keyed one is the
 * content cache's), and its group holds more than its rank. */
static bool
group_wanted(const struct egw_engines *s, const struct slot_state *p,
	     const struct egw_attach_cmd *c)
{
	uint16_t leader;

	return s->c.fanout_ranks > 1 && key_zero(c->content) &&
	       (group_set(s->c.fanout_ranks, p->rank, p->nranks, &leader) &
		~(1u << p->rank)) != 0;
}

/*
 * A RECV_OPEN of a rank that shares its receive: it joins the group's
 * room (delivered at once when it has landed) or opens it as the
 * driver. @return true when the slot joined or failed (nothing more to
 * do); false when it is the driver and opens the room as any RECV_OPEN.
 */
static bool
group_open(struct egw_engines *s, uint32_t cid, uint32_t slot,
	   const struct egw_attach_cmd *c, const char *name, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	uint16_t leader,
		set = group_set(s->c.fanout_ranks, p->rank, p->nranks, &leader);
	struct group *g = group_of(s, p->wire, leader);
	uint32_t gi;

	if (g != NULL) {
		/* the same room from the same peer, or no member of it */
		if (g->nranks != p->nranks || g->peer_id != c->peer_id ||
		    strcmp(g->peer_name, name != NULL ? name : "") != 0) {
			unindex(s, p->wire, rank_side(p->rank, p->side));
			finish(s, cid, slot, p->tag, p->op,
			       EGW_ATTACH_STATE_FAILED, -EGW_E_BAD_RANK);
			return true;
		}
		p->group = (uint32_t)(g - s->groups);
		g->opened |= (uint16_t)(1u << p->rank);
		g->member[p->rank] = (struct group_member){ cid, slot };
		cl->st.group_joins++;
		if (g->landed) {
			group_deliver_one(s, g, cid, slot);
			return true;
		}
		p->phase = PH_MEMBER;
		show_waiting(s, cid, slot);
		return true;
	}
	for (gi = 0; gi < s->ngroups && s->groups[gi].used; gi++)
		;
	if (gi == s->ngroups) {
		unindex(s, p->wire, rank_side(p->rank, p->side));
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       -EGW_E_NO_SLOT);
		return true;
	}
	g = &s->groups[gi];
	s->groups_used++;
	(void)index_insert(s, p->wire, rank_side(leader, SIDE_GROUP),
			   UINT32_MAX, gi);
	g->used = true;
	g->landed = g->closed = false;
	g->wire = p->wire;
	g->leader = leader;
	g->nranks = p->nranks;
	g->set = set;
	g->opened = (uint16_t)(1u << p->rank);
	g->holding = 0;
	g->peer_id = c->peer_id;
	snprintf(g->peer_name, sizeof(g->peer_name), "%s",
		 name != NULL ? name : "");
	g->driver_cid = cid;
	g->driver_slot = slot;
	g->deadline = now + s->c.peer_wait_ns;
	if (s->groups_used == 1 || g->deadline < s->group_due)
		s->group_due = g->deadline;
	g->member[p->rank] = (struct group_member){ cid, slot };
	p->group = gi;
	cl->st.group_opens++;
	return false;
}

/* Groups whose members did not all open by the deadline: those are
 * given up, and a landed group nobody holds goes back. */
static void
groups_poll(struct egw_engines *s, uint64_t now)
{
	if (s->groups_used == 0 || now < s->group_due)
		return;
	s->group_due = UINT64_MAX;
	for (uint32_t i = 0; i < s->ngroups; i++) {
		struct group *g = &s->groups[i];

		if (!g->used || g->closed)
			continue;
		if (now < g->deadline) {
			if (g->deadline < s->group_due)
				s->group_due = g->deadline;
			continue;
		}
		g->closed = true;
		group_maybe_release(s, g);
	}
}

/* ---- ending rooms --------------------------------------------------------- */

/*
 * Take the room out of the index first: the gateway may report the end
 * of the room from inside the ops call, and must find nothing then.
 */
static uint32_t
blocks_of(const struct slot_state *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nruns; i++)
		n += p->runs[i].count;
	return n;
}

static void
end_room(struct egw_engines *s, uint32_t cid, uint32_t slot)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	const struct egw_engines_ops *ops = s->c.ops;
	bool shared = p->entry != NO_ENTRY &&
		      s->cache[p->entry].state == CE_LANDED;
	bool grouped = p->group != NO_GROUP;

	if (p->phase != PH_HELD)
		unindex(s, p->wire, rank_side(p->rank, p->side));
	/* blocks of a landed entry are the cache's, not this room's; a
	 * group's are the group's, and its room the group's to end */
	entry_leave(s, cid, slot, -EGW_E_ABORTED);
	if (grouped) {
		if (p->phase == PH_HELD) {
			s->held_blocks -= blocks_of(p);
			s->clients[cid].held_blocks -= blocks_of(p);
		} else if (p->phase == PH_WAIT_SLOT ||
			   p->phase == PH_WAIT_PEER) {
			unwait(s, cid, slot);
		}
		return;
	}
	switch (p->phase) {
	case PH_OPEN:
		if (p->side == EGW_SIDE_SEND)
			ops->send_abort(s->c.ctx, p->wire, false, p->runs,
					p->nruns);
		else
			ops->recv_abort(s->c.ctx, p->wire, p->rank);
		break;
	case PH_COMMITTED:
		ops->send_abort(s->c.ctx, p->wire, true, NULL, 0);
		break;
	case PH_DELIVERED:
		if (!shared)
			ops->recv_release(s->c.ctx, p->wire, p->rank, p->runs,
					  p->nruns);
		break;
	case PH_HELD:
		/* ended at the node when the client was given up; now the
		 * blocks go back (ending it again is no error) */
		if (p->side == EGW_SIDE_SEND)
			ops->send_abort(s->c.ctx, p->wire, false, p->runs,
					p->nruns);
		else if (!shared)
			ops->recv_release(s->c.ctx, p->wire, p->rank, p->runs,
					  p->nruns);
		s->held_blocks -= blocks_of(p);
		s->clients[cid].held_blocks -= blocks_of(p);
		return; /* out of the index already */
	case PH_WAIT_SLOT:
	case PH_WAIT_PEER:
		unwait(s, cid, slot); /* nothing was opened yet */
		break;
	default: /* PH_WAIT_MEM, PH_FOLLOW: nothing was given yet */
		break;
	}
}

static void
end_all(struct egw_engines *s, uint32_t cid)
{
	struct client *cl = &s->clients[cid];

	for (uint32_t i = 0; i < cl->m.nslots; i++) {
		if (cl->slots[i].room == 0)
			continue;
		if (cl->slots[i].phase != PH_DELIVERED &&
		    cl->slots[i].phase != PH_HELD)
			cl->st.rooms_failed++;
		end_room(s, cid, i);
		cl->slots[i].room = 0;
		cl->slots[i].phase = PH_FREE;
	}
	cl->nwait = 0;
}

/*
 * A room whose blocks the client may be reading or writing right now (a
 * delivered language room, an encode room before its commit) ends at the
 * node (the peers hear ABORT) but keeps its blocks out of the pool: a
 * client given up while it was stopped finds its own room's bytes, never
 * another room's, until it is removed (its socket closed).
 */
static void
hold_room(struct egw_engines *s, uint32_t cid, uint32_t slot)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];

	unindex(s, p->wire, rank_side(p->rank, p->side));
	if (p->side == EGW_SIDE_SEND) {
		s->c.ops->send_abort(s->c.ctx, p->wire, true, NULL, 0);
		cl->st.rooms_failed++;
	}
	p->phase = PH_HELD;
	cl->held_blocks += blocks_of(p);
	s->held_blocks += blocks_of(p);
	cl->st.held_rooms++;
	cl->st.held_blocks += blocks_of(p);
}

static void
lose(struct egw_engines *s, uint32_t cid, const char *why,
     enum egw_attach_lost reason, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct egw_attach_trust *t = egw_attach_trust_of(cl->m.area);

	if (cl->lost)
		return;
	cl->lost = true;
	cl->st.lost++;
	for (uint32_t i = 0; i < cl->m.nslots; i++) {
		struct slot_state *p = &cl->slots[i];

		if (p->room == 0)
			continue;
		if (p->phase == PH_DELIVERED ||
		    (p->phase == PH_OPEN && p->side == EGW_SIDE_SEND &&
		     p->nruns > 0)) {
			hold_room(s, cid, i);
			continue;
		}
		if (p->phase != PH_DELIVERED)
			cl->st.rooms_failed++;
		end_room(s, cid, i);
		p->room = 0;
		p->phase = PH_FREE;
	}
	cl->nwait = 0;
	/* the client's word: checked by its library on every call */
	t->held_blocks = cl->held_blocks;
	t->lost_ns = now;
	__atomic_store_n(&t->lost, (uint32_t)reason, __ATOMIC_RELEASE);
	s->c.ops->client_lost(s->c.ctx, cid, why);
}

/* ---- commands -------------------------------------------------------------- */

static void
refuse(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c,
       int rc)
{
	struct client *cl = &s->clients[cid];

	cl->st.refused++;
	if (rc == -EINVAL || rc == -ERANGE || rc == -EFBIG ||
	    rc == -EOPNOTSUPP)
		cl->st.refused_invalid++;
	else
		cl->st.refused_state++;
	post(s, cid, c->tag, c->room, rc, c->op, EGW_ATTACH_STATE_FAILED, 0,
	     c->slot, 0, 0, 0);
}

/* The engine sees a waiting room as Bootstrapping, said once. */
static void
show_waiting(struct egw_engines *s, uint32_t cid, uint32_t slot)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];

	if (p->state == EGW_ATTACH_STATE_BOOTSTRAPPING)
		return;
	p->state = EGW_ATTACH_STATE_BOOTSTRAPPING;
	publish_slot(cl, slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, slot,
	     p->total, 0, 0);
}

static void
note(struct egw_engines *s, uint32_t cid, const char *text)
{
	if (s->c.ops->slot_note != NULL)
		s->c.ops->slot_note(s->c.ctx, cid, text);
}

/*
 * The room found the node's room table full: it waits at the back of its
 * side's queue (as Bootstrapping), or, with the queue full, fails
 * NO_SLOT at once. @return true when it waits.
 */
static bool
slot_wait(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	struct slot_queue *q = &s->sq[p->side];
	char text[160];

	if (p->phase == PH_WAIT_SLOT)
		return true; /* still full: it keeps its place */
	if (!queue_push(s, p->side, cid, slot))
		return false;
	if (p->phase == PH_WAIT_MEM)
		cl->nwait--;
	p->phase = PH_WAIT_SLOT;
	p->since = now;
	cl->st.slot_waits++;
	show_waiting(s, cid, slot);
	if (!q->said) {
		q->said = true;
		snprintf(text, sizeof(text),
			 "the %s room table is full: "
			 "rooms wait for a slot, in order, up to admit_ms "
			 "(%" PRIu64 " ms) each, at most %u at once",
			 p->side == EGW_SIDE_SEND ? "encode" : "language",
			 s->c.admit_ns / 1000000, s->c.slot_queue);
		note(s, cid, text);
	}
	return true;
}

/* Past admit_ns without a slot: NO_SLOT, as without the wait, and the log
 * says how long it waited (the episode's first such room: under a
 * lasting overload every later one would say the same). */
static void
slot_give_up(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t now)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	struct slot_queue *q = &s->sq[p->side];
	char text[160];

	if (!q->gave_up) {
		q->gave_up = true;
		snprintf(text, sizeof(text),
			 "room %" PRIu64 " rank %u: no "
			 "slot after waiting %" PRIu64 " ms (admit_ms %" PRIu64
			 "): the room table stayed full",
			 p->room, p->rank, (now - p->since) / 1000000,
			 s->c.admit_ns / 1000000);
		note(s, cid, text);
	}
	unindex(s, p->wire, rank_side(p->rank, p->side));
	entry_leave(s, cid, slot, -EGW_E_NO_SLOT);
	finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
	       -EGW_E_NO_SLOT);
}

/* SEND_OPEN's allocation, first and on every retry. */
static void
try_alloc(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	bool first = p->phase == PH_FREE || p->phase == PH_WAIT_SLOT;
	int n = s->c.ops->send_open(s->c.ctx, cid, p->wire, p->nranks, p->total,
				    p->mrope_delta, p->cookie, p->runs,
				    cl->m.max_runs);

	if (n == -EGW_E_NO_SLOT && slot_wait(s, cid, slot, now))
		return;
	if (n > 0 && (uint32_t)n <= cl->m.max_runs) {
		unwait(s, cid, slot);
		p->nruns = (uint32_t)n;
		p->phase = PH_OPEN;
		p->state = EGW_ATTACH_STATE_WAITING_FOR_INPUT;
		publish_slot(cl, slot, 0);
		post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, slot,
		     p->total, p->nruns, 0);
		return;
	}
	if (n == -ENOSPC && first && s->c.max_waiting != 0 &&
	    cl->nwait >= s->c.max_waiting) {
		/* backpressure: the client has enough rooms waiting already;
		 * a clear "busy", never a silent drop */
		cl->st.busy++;
		n = -EGW_E_BUSY;
	} else if (n == -ENOSPC && first) {
		/* queued, not refused: the engine sees Bootstrapping */
		unwait(s, cid, slot);
		p->phase = PH_WAIT_MEM;
		p->deadline = now + s->c.alloc_ns;
		cl->nwait++;
		cl->st.alloc_waits++;
		show_waiting(s, cid, slot);
		return;
	}
	if (n == -ENOSPC && now < p->deadline)
		return;
	if (n == -ENOSPC)
		n = -EGW_E_POOL_EXHAUSTED;
	else if (n > 0)
		n = -E2BIG; /* more runs than asked for: the gateway's bug */
	unindex(s, p->wire, rank_side(0, EGW_SIDE_SEND));
	finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED, n);
}

/*
 * A keyed RECV_OPEN: served from a landed entry, joined to a transfer of
 * the same content under way, or the leader of a new one. Another rank of
 * the entry's own room always receives for itself: its sender counts on
 * it. So does another attempt of that room: a retry is opened because the
 * engines are giving the earlier attempt up, and following it would fail
 * with it. @return true when the room was served or joined (nothing to
 * open).
 */
static bool
open_keyed(struct egw_engines *s, uint32_t cid, uint32_t slot,
	   const struct egw_attach_cmd *c)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	struct cache_entry *e = cache_find(s, c->content);

	if (e != NULL && (e->origin == p->wire ||
			  (e->state == CE_IN_FLIGHT && e->origin_room == c->room)))
		return false;
	if (e != NULL && e->state == CE_LANDED &&
	    entry_deliver(s, cid, slot, e, EGW_CQEF_CACHED) == 0) {
		cl->st.cache_hits++;
		return true;
	}
	if (e != NULL && e->state == CE_IN_FLIGHT) {
		p->entry = entry_index(s, e);
		p->phase = PH_FOLLOW;
		p->state = EGW_ATTACH_STATE_BOOTSTRAPPING;
		e->followers++;
		cl->st.cache_shared++;
		publish_slot(cl, slot, 0);
		post(s, cid, p->tag, p->room, 0, p->op, p->state,
		     EGW_CQEF_MORE, slot, 0, 0, 0);
		return true;
	}
	if (e == NULL)
		e = cache_new(s, c->content);
	if (e != NULL && e->state == CE_IN_FLIGHT) {
		e->origin = p->wire;
		e->origin_room = c->room;
		e->origin_rank = p->rank;
		e->lead_cid = cid;
		e->lead_slot = slot;
		p->entry = entry_index(s, e);
	}
	cl->st.cache_misses++;
	return false;
}

/* The live, not leaving, peer with this id; NULL otherwise. */
static const struct egw_engines_peer *
peer_by_id(const struct egw_engines *s, uint32_t id)
{
	uint32_t lo = 0, hi = s->npeers;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->peers[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->npeers && s->peers[lo].id == id && !s->peers[lo].leaving)
		return &s->peers[lo];
	return NULL;
}

/* The live, not leaving, peer called `name`; NULL otherwise. Peers are few
 * and RECV_OPENs by name rare next to the data they move. */
static const struct egw_engines_peer *
peer_by_name(const struct egw_engines *s, const char *name)
{
	for (uint32_t i = 0; i < s->npeers; i++)
		if (!s->peers[i].leaving && strcmp(s->peers[i].name, name) == 0)
			return &s->peers[i];
	return NULL;
}

/* RECV_OPEN at the node, first and from the slot queue. The peer is
 * looked up by id each time: a slot of the node may hold another peer by
 * the time a queued room is opened. */
static void
try_recv(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[slot];
	const struct egw_engines_peer *peer = peer_by_id(s, p->peer_id);
	const struct group *g = p->group != NO_GROUP ? &s->groups[p->group] :
						       NULL;
	int rc;

	if (peer == NULL)
		rc = -EGW_E_PEER_REMOVED;
	else if (g != NULL) /* the driver opens its group's room */
		rc = s->c.ops->recv_open_group(s->c.ctx, p->wire, g->leader,
					       p->nranks, g->set, peer->slot);
	else
		rc = s->c.ops->recv_open(s->c.ctx, p->wire, p->rank, p->nranks,
					 peer->slot, p->aux_only);

	if (rc == -EGW_E_NO_SLOT && slot_wait(s, cid, slot, now))
		return;
	if (rc != 0) {
		unindex(s, p->wire, rank_side(p->rank, p->side));
		entry_leave(s, cid, slot, rc);
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       rc);
		return;
	}
	unwait(s, cid, slot);
	p->phase = PH_OPEN;
	show_waiting(s, cid, slot);
}

/* A new OPEN while rooms of its side wait for a slot joins them at the
 * back: nothing overtakes them. */
static bool
behind_waiting(struct egw_engines *s, uint32_t cid, uint32_t slot, uint64_t now)
{
	struct slot_state *p = &s->clients[cid].slots[slot];

	return s->sq[p->side].n > 0 && slot_wait(s, cid, slot, now);
}

/*
 * A RECV_OPEN's peer: by id, a live one or an immediate failure (an id
 * once listed is removed, any other was never the gateway's); by name, a
 * live one now, or a wait until the bootstrap deadline (a peer about to
 * join: a cluster member not seen yet). @return true when the room may go
 * to the node now; false when it waits or has failed.
 */
static bool
resolve_peer(struct egw_engines *s, uint32_t cid, uint32_t slot, uint32_t id,
	     const char *name, uint64_t now)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	const struct egw_engines_peer *peer;
	int rc;

	if (name == NULL) {
		p->peer_id = id;
		if (peer_by_id(s, id) != NULL)
			return true;
		rc = id <= s->top_id ? -EGW_E_PEER_REMOVED :
				       -EGW_E_UNKNOWN_PEER;
		unindex(s, p->wire, rank_side(p->rank, p->side));
		entry_leave(s, cid, slot, rc);
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       rc);
		return false;
	}
	snprintf(p->peer_name, sizeof(p->peer_name), "%s", name);
	peer = peer_by_name(s, name);
	if (peer != NULL) {
		p->peer_id = peer->id;
		return true;
	}
	p->phase = PH_WAIT_PEER;
	p->deadline = now + s->c.peer_wait_ns;
	if (s->nwait_peer++ == 0 || p->deadline < s->peer_due)
		s->peer_due = p->deadline;
	s->clients[cid].st.peer_waits++;
	show_waiting(s, cid, slot);
	return false;
}

static void
cmd_open(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c,
	 const char *peer_name, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[c->slot];
	uint8_t side = c->op == EGW_OP_SEND_OPEN ? EGW_SIDE_SEND : EGW_SIDE_RECV;
	uint16_t rank = side == EGW_SIDE_SEND ? 0 : c->rank;
	uint64_t wire = egw_attach_room_id(c->room, c->attempt);
	int rc;

	if (p->room != 0) {
		refuse(s, cid, c, -EBUSY);
		return;
	}
	if (index_find(s, wire, rank_side(rank, side)) != NULL) {
		refuse(s, cid, c, -EEXIST);
		return;
	}
	rc = index_insert(s, wire, rank_side(rank, side), cid, c->slot);
	if (rc != 0) {
		refuse(s, cid, c, rc);
		return;
	}
	p->room = c->room;
	p->wire = wire;
	p->entry = NO_ENTRY;
	p->group = NO_GROUP;
	p->tag = c->tag;
	p->op = c->op;
	p->side = side;
	p->rank = rank;
	p->nranks = c->nranks;
	p->total = c->total_tokens;
	p->mrope_delta = c->mrope_delta;
	p->cookie = c->cookie;
	p->peer_id = 0;
	p->peer_name[0] = '\0';
	p->aux_only = (c->flags & EGW_CMDF_AUX_ONLY) != 0;
	p->nruns = 0;
	p->phase = PH_FREE;
	/* nothing shown to the engine yet */
	p->state = EGW_ATTACH_STATE_FAILED;
	cl->st.rooms_opened++;
	if (side == EGW_SIDE_SEND) {
		if (!behind_waiting(s, cid, c->slot, now))
			try_alloc(s, cid, c->slot, now);
		return;
	}
	p->total = 0;
	if (s->c.cache_entries > 0 && !key_zero(c->content) &&
	    open_keyed(s, cid, c->slot, c))
		return;
	/* a keyed RECV_OPEN is the content cache's; the others of a group
	 * of more than one rank share one receive */
	if (group_wanted(s, p, c) &&
	    group_open(s, cid, c->slot, c, peer_name, now))
		return;
	if (!resolve_peer(s, cid, c->slot, c->peer_id, peer_name, now))
		return;
	if (!behind_waiting(s, cid, c->slot, now))
		try_recv(s, cid, c->slot, now);
}

/* The slot must hold this room on this side. */
static struct slot_state *
held(struct client *cl, const struct egw_attach_cmd *c, uint8_t side)
{
	struct slot_state *p = &cl->slots[c->slot];

	return p->room == c->room && p->side == side ? p : NULL;
}

static void
cmd_commit(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c)
{
	struct slot_state *p = held(&s->clients[cid], c, EGW_SIDE_SEND);
	int rc;

	if (p == NULL) {
		refuse(s, cid, c, -ENOENT);
		return;
	}
	if (p->phase != PH_OPEN) {
		refuse(s, cid, c, -EBADFD);
		return;
	}
	rc = s->c.ops->send_commit(s->c.ctx, p->wire, p->total, p->runs,
				   p->nruns);
	if (rc != 0) {
		end_room(s, cid, c->slot); /* frees the runs */
		finish(s, cid, c->slot, c->tag, c->op, EGW_ATTACH_STATE_FAILED,
		       rc);
		return;
	}
	p->phase = PH_COMMITTED;
	p->tag = c->tag;
	p->op = c->op;
	p->state = EGW_ATTACH_STATE_TRANSFERRING;
	publish_slot(&s->clients[cid], c->slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, c->slot,
	     p->total, p->nruns, 0);
}

static void
cmd_release(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c)
{
	struct slot_state *p = held(&s->clients[cid], c, EGW_SIDE_RECV);

	if (p == NULL) {
		refuse(s, cid, c, -ENOENT);
		return;
	}
	if (p->phase != PH_DELIVERED) {
		refuse(s, cid, c, -EBADFD);
		return;
	}
	end_room(s, cid, c->slot); /* recv_release */
	finish(s, cid, c->slot, c->tag, c->op, EGW_ATTACH_STATE_SUCCESS, 0);
}

static void
cmd_abort(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c)
{
	struct client *cl = &s->clients[cid];
	struct slot_state *p = &cl->slots[c->slot];

	if (p->room != c->room) {
		refuse(s, cid, c, -ENOENT);
		return;
	}
	end_room(s, cid, c->slot);
	/* the abort itself succeeded; the room failed as aborted */
	finish_as(s, cid, c->slot, c->tag, c->op, EGW_ATTACH_STATE_FAILED, 0,
		  -EGW_E_ABORTED);
}

/* What the port holds for a key; the answer's result is the
 * enum egw_attach_lookup (0 with no cache). */
static void
cmd_lookup(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c)
{
	const struct cache_entry *e = s->c.cache_entries > 0 ?
				      cache_find(s, c->content) : NULL;
	int result = EGW_LOOKUP_NONE;

	if (e != NULL)
		result = e->state == CE_LANDED ? EGW_LOOKUP_LANDED :
						 EGW_LOOKUP_IN_FLIGHT;
	post(s, cid, c->tag, 0, result, c->op, 0, 0, 0, 0, 0, 0);
}

/* `name`: the RECV_OPEN's name entry (EGW_CMDF_PEER_NAME), NULL when
 * the command has none; `name_rc` what taking it off the ring gave. */
static void
command(struct egw_engines *s, uint32_t cid, const struct egw_attach_cmd *c,
	const struct egw_attach_cmd_name *name, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct egw_attach_limits lim = {
		.nslots = cl->m.nslots,
		.max_total_tokens = s->c.max_total_tokens,
		.encode = s->c.encode,
		.language = s->c.language,
	};
	int rc = egw_attach_cmd_check(c, &lim);

	cl->st.commands++;
	/* a name that is not one fails the command as its other fields do */
	if (rc == 0 && (c->flags & EGW_CMDF_PEER_NAME) != 0 &&
	    (name == NULL || egw_attach_name_check(name) != 0))
		rc = -EINVAL;
	if (rc != 0) {
		refuse(s, cid, c, rc);
		return;
	}
	switch (c->op) {
	case EGW_OP_NOP:
		post(s, cid, c->tag, 0, 0, c->op, 0, 0, 0, 0, 0, 0);
		break;
	case EGW_OP_SEND_OPEN:
	case EGW_OP_RECV_OPEN:
		cmd_open(s, cid, c, name != NULL ? name->name : NULL, now);
		break;
	case EGW_OP_SEND_COMMIT:
		cmd_commit(s, cid, c);
		break;
	case EGW_OP_RELEASE:
		cmd_release(s, cid, c);
		break;
	case EGW_OP_LOOKUP:
		cmd_lookup(s, cid, c);
		break;
	default: /* EGW_OP_ABORT: egw_attach_cmd_check knows no other */
		cmd_abort(s, cid, c);
		break;
	}
}

/* ---- the port's peers ------------------------------------------------------
 */

/* The table as one client sees it, and the client told when it asked. */
static void
peers_publish(struct egw_engines *s, uint32_t cid)
{
	struct client *cl = &s->clients[cid];
	uint32_t n = s->npeers < cl->m.max_peers ? s->npeers : cl->m.max_peers;

	if (cl->lost)
		return;
	/* an area smaller than the port's list (a gateway never lays one
	 * out) shows the lowest ids */
	(void)egw_attach_peers_write(&cl->m, s->recs, n, s->peers_gen);
	if (cl->events & EGW_AREA_EV_PEERS)
		post(s, cid, 0, s->peers_gen, 0, EGW_OP_PEERS, 0, 0, 0, n, 0,
		     0);
}

/* A room waiting for a peer by name: opened when the name is listed, or
 * failed at its deadline with a note that names the peer. */
static void
peer_wait_settle(struct egw_engines *s, uint32_t cid, uint32_t slot,
		 uint64_t now)
{
	struct slot_state *p = &s->clients[cid].slots[slot];
	const struct egw_engines_peer *peer = peer_by_name(s, p->peer_name);
	char text[192];

	if (peer != NULL) {
		unwait(s, cid, slot);
		p->phase = PH_FREE;
		p->peer_id = peer->id;
		if (!behind_waiting(s, cid, slot, now))
			try_recv(s, cid, slot, now);
		return;
	}
	if (now < p->deadline) {
		if (p->deadline < s->peer_due)
			s->peer_due = p->deadline;
		return;
	}
	snprintf(text, sizeof(text),
		 "room %" PRIu64 " rank %u: no peer named '%s' after %" PRIu64
		 " ms (bootstrap_ms): the room fails unknown_peer",
		 p->room, p->rank, p->peer_name, s->c.peer_wait_ns / 1000000);
	note(s, cid, text);
	unindex(s, p->wire, rank_side(p->rank, p->side));
	entry_leave(s, cid, slot, -EGW_E_UNKNOWN_PEER);
	finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
	       -EGW_E_UNKNOWN_PEER);
}

/* Every room waiting for a peer, and every queued one whose peer went
 * away (`all`: after a change of the list), or only those past their
 * deadline. */
static uint32_t
peer_waits_poll(struct egw_engines *s, bool all, uint64_t now)
{
	uint32_t done = 0;

	if (!all && (s->nwait_peer == 0 || now < s->peer_due))
		return 0;
	s->peer_due = UINT64_MAX;
	for (uint32_t c = 0; c < s->c.max_clients; c++) {
		struct client *cl = &s->clients[c];

		for (uint32_t i = 0; cl->used && !cl->lost && i < cl->m.nslots;
		     i++) {
			struct slot_state *p = &cl->slots[i];

			if (p->room == 0 || p->side != EGW_SIDE_RECV)
				continue;
			if (p->phase == PH_WAIT_PEER) {
				peer_wait_settle(s, c, i, now);
				done++;
			} else if (all && p->phase == PH_WAIT_SLOT &&
				   peer_by_id(s, p->peer_id) == NULL) {
				unindex(s, p->wire,
					rank_side(p->rank, p->side));
				entry_leave(s, c, i, -EGW_E_PEER_REMOVED);
				finish(s, c, i, p->tag, p->op,
				       EGW_ATTACH_STATE_FAILED,
				       -EGW_E_PEER_REMOVED);
				done++;
			}
		}
	}
	return done;
}

static int
peer_cmp(const void *a, const void *b)
{
	const struct egw_engines_peer *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static bool
peers_same(const struct egw_engines *s, const struct egw_engines_peer *p,
	   uint32_t n)
{
	if (n != s->npeers)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (p[i].id != s->peers[i].id ||
		    p[i].slot != s->peers[i].slot ||
		    p[i].ready != s->peers[i].ready ||
		    p[i].leaving != s->peers[i].leaving ||
		    strcmp(p[i].name, s->peers[i].name) != 0)
			return false;
	return true;
}

int
egw_engines_peers_set(struct egw_engines *s,
		      const struct egw_engines_peer *peers, uint32_t n,
		      uint64_t now)
{
	struct egw_engines_peer *sorted = s->scratch;

	if (n > s->c.max_peers)
		return -E2BIG;
	if (n > 0)
		memcpy(sorted, peers, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), peer_cmp);
	for (uint32_t i = 0; i < n; i++) {
		size_t len = strnlen(sorted[i].name, sizeof(sorted[i].name));

		if (sorted[i].id == 0 ||
		    (i > 0 && sorted[i].id == sorted[i - 1].id) || len == 0 ||
		    len == sizeof(sorted[i].name))
			return -EINVAL;
	}
	s->now = now;
	if (peers_same(s, sorted, n))
		return 0;
	if (n > 0)
		memcpy(s->peers, sorted, n * sizeof(*sorted));
	s->npeers = n;
	memset(s->recs, 0, n * sizeof(*s->recs));
	for (uint32_t i = 0; i < n; i++) {
		s->recs[i].id = s->peers[i].id;
		s->recs[i].flags = (s->peers[i].ready ? EGW_PEER_F_READY : 0) |
				   (s->peers[i].leaving ? EGW_PEER_F_LEAVING :
							  0);
		memcpy(s->recs[i].name, s->peers[i].name,
		       sizeof(s->recs[i].name));
		if (s->peers[i].id > s->top_id)
			s->top_id = s->peers[i].id;
	}
	s->peers_gen++;
	for (uint32_t c = 0; c < s->c.max_clients; c++)
		if (s->clients[c].used)
			peers_publish(s, c);
	peer_waits_poll(s, true, now);
	return 0;
}

uint64_t
egw_engines_peers_gen(const struct egw_engines *s)
{
	return s->peers_gen;
}

/* ---- the server ------------------------------------------------------------ */

int
egw_engines_create(const struct egw_engines_conf *c, struct egw_engines **out)
{
	struct egw_engines *s;
	uint32_t tab = 1;
	const struct egw_engines_ops *o = c->ops;

	if (c->max_clients == 0 || c->max_clients > 4096 || c->max_rooms == 0 ||
	    c->max_rooms > (1u << 24) || c->budget == 0 ||
	    c->slot_queue > (1u << 24) || o == NULL || o->send_open == NULL ||
	    o->send_commit == NULL || o->send_abort == NULL ||
	    o->recv_open == NULL || o->recv_abort == NULL ||
	    o->recv_release == NULL || o->wake == NULL ||
	    o->client_lost == NULL ||
	    (c->cache_entries > 0 &&
	     (c->cache_max_runs == 0 || c->cache_entries > (1u << 16))) ||
	    c->max_peers > EGW_ATTACH_MAX_PEER_RECS ||
	    c->fanout_ranks > EGW_XFER_MAX_RANKS ||
	    (c->fanout_ranks > 1 &&
	     (o->recv_open_group == NULL || c->fanout_max_runs == 0)))
		return -EINVAL;
	while (tab < 2 * c->max_rooms)
		tab <<= 1;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->c = *c;
	s->clients = calloc(c->max_clients, sizeof(*s->clients));
	s->tab = calloc(tab, sizeof(*s->tab));
	s->tab_mask = tab - 1;
	s->peers = calloc(c->max_peers + 1, sizeof(*s->peers));
	s->scratch = calloc(c->max_peers + 1, sizeof(*s->scratch));
	s->recs = calloc(c->max_peers + 1, sizeof(*s->recs));
	if (c->cache_entries > 0) {
		s->cache = calloc(c->cache_entries, sizeof(*s->cache));
		s->cache_runs = calloc((size_t)c->cache_entries *
				       c->cache_max_runs, sizeof(*s->cache_runs));
	}
	if (c->slot_queue > 0) {
		s->sq[0].q = calloc(c->slot_queue, sizeof(*s->sq[0].q));
		s->sq[1].q = calloc(c->slot_queue, sizeof(*s->sq[1].q));
	}
	if (s->clients == NULL || s->tab == NULL || s->peers == NULL ||
	    s->scratch == NULL || s->recs == NULL ||
	    (c->slot_queue > 0 && (s->sq[0].q == NULL || s->sq[1].q == NULL)) ||
	    (c->cache_entries > 0 &&
	     (s->cache == NULL || s->cache_runs == NULL))) {
		egw_engines_destroy(s, 0);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->cache_entries; i++)
		s->cache[i].runs = s->cache_runs + (size_t)i * c->cache_max_runs;
	if (c->fanout_ranks > 1) {
		/* a group has two members or more: half the rooms at most
		 * (the run tables are touched only as groups are used) */
		s->ngroups = c->max_rooms / 2 > 0 ? c->max_rooms / 2 : 1;
		s->groups = calloc(s->ngroups, sizeof(*s->groups));
		s->group_runs = calloc((size_t)s->ngroups * c->fanout_max_runs,
				       sizeof(*s->group_runs));
		if (s->groups == NULL || s->group_runs == NULL) {
			egw_engines_destroy(s, 0);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < s->ngroups; i++)
			s->groups[i].runs = s->group_runs +
					    (size_t)i * c->fanout_max_runs;
	}
	*out = s;
	return 0;
}

void
egw_engines_destroy(struct egw_engines *s, uint64_t now)
{
	if (s == NULL)
		return;
	for (uint32_t i = 0; s->clients != NULL && i < s->c.max_clients; i++)
		egw_engines_remove(s, i, now);
	/* no room holds an entry now: every landed block goes back */
	for (uint32_t i = 0; s->cache != NULL && i < s->c.cache_entries; i++)
		if (s->cache[i].state != CE_FREE)
			cache_drop(s, &s->cache[i]);
	/* no member holds a group now: landed ones went back with them */
	free(s->groups);
	free(s->group_runs);
	free(s->cache);
	free(s->cache_runs);
	free(s->sq[0].q);
	free(s->sq[1].q);
	free(s->clients);
	free(s->tab);
	free(s->peers);
	free(s->scratch);
	free(s->recs);
	free(s);
}

int
egw_engines_add(struct egw_engines *s, void *area, size_t area_bytes,
		uint64_t now)
{
	struct client *cl = NULL;
	uint32_t cid;
	int rc;

	for (cid = 0; cid < s->c.max_clients; cid++) {
		if (!s->clients[cid].used) {
			cl = &s->clients[cid];
			break;
		}
	}
	if (cl == NULL)
		return -EUSERS;
	memset(cl, 0, sizeof(*cl));
	rc = egw_attach_map_init(&cl->m, area, area_bytes);
	if (rc != 0)
		return rc;
	cl->slots = calloc(cl->m.nslots, sizeof(*cl->slots));
	cl->run_store = calloc((size_t)cl->m.nslots * cl->m.max_runs,
			       sizeof(*cl->run_store));
	if (cl->slots == NULL || cl->run_store == NULL) {
		free(cl->slots);
		free(cl->run_store);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cl->m.nslots; i++)
		cl->slots[i].runs = cl->run_store + (size_t)i * cl->m.max_runs;
	cl->beat = cl->m.area->client_beat;
	cl->beat_at = now;
	/* what the gateway asked for when it laid the area out, copied now:
	 * the client may write its header afterwards */
	cl->events = cl->m.area->events;
	cl->used = true;
	s->nattached++;
	if (s->peers_gen != 0)
		peers_publish(s, cid);
	return (int)cid;
}

static void
add_stats(struct egw_engines_stats *to, const struct egw_engines_stats *a)
{
	const uint64_t *src = (const uint64_t *)a;
	uint64_t *dst = (uint64_t *)to;

	/* all members are uint64_t counters */
	for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
		dst[i] += src[i];
}

void
egw_engines_remove(struct egw_engines *s, uint32_t client, uint64_t now)
{
	struct client *cl;

	(void)now;
	if (client >= s->c.max_clients || !s->clients[client].used)
		return;
	cl = &s->clients[client];
	cl->lost = true; /* nothing more is posted */
	end_all(s, client);
	add_stats(&s->removed, &cl->st);
	free(cl->slots);
	free(cl->run_store);
	memset(cl, 0, sizeof(*cl));
	s->nattached--;
}

static uint32_t
poll_client(struct egw_engines *s, uint32_t cid, uint64_t now)
{
	struct client *cl = &s->clients[cid];
	struct egw_attach_cmd c;
	struct egw_attach_cmd_name name;
	uint32_t done = 0;
	uint64_t beat;
	int rc, name_rc;

	/* rooms already waiting for memory ask before new ones */
	for (uint32_t i = 0; cl->nwait > 0 && i < cl->m.nslots && !cl->lost;
	     i++) {
		if (cl->slots[i].phase == PH_WAIT_MEM) {
			try_alloc(s, cid, i, now);
			done++;
		}
	}
	for (uint32_t n = 0; n < s->c.budget && !cl->lost; n++) {
		rc = egw_attach_ring_get(&cl->m.sq, &c);
		/* a RECV_OPEN by name: its name is the next entry, published
		 * with it (an entry missing fails the command) */
		if (rc > 0 && c.op == EGW_OP_RECV_OPEN &&
		    (c.flags & EGW_CMDF_PEER_NAME) != 0)
			name_rc = egw_attach_ring_get(&cl->m.sq, &name);
		else
			name_rc = 0;
		if (rc == 0)
			break;
		if (rc < 0 || name_rc < 0) {
			lose(s, cid, "submission ring tail out of range",
			     EGW_LOST_RING, now);
			return done + 1;
		}
		command(s, cid, &c, name_rc > 0 ? &name : NULL, now);
		done++;
	}
	if (cl->broken != NULL)
		lose(s, cid, cl->broken, EGW_LOST_RING, now);
	if (cl->lost)
		return done;
	beat = __atomic_load_n(&cl->m.area->client_beat, __ATOMIC_ACQUIRE);
	if (beat != cl->beat) {
		cl->beat = beat;
		cl->beat_at = now;
	} else if (s->c.lease_ns > 0 && now - cl->beat_at > s->c.lease_ns) {
		lose(s, cid, "lease expired (client_beat did not move)",
		     EGW_LOST_LEASE, now);
		return done + 1;
	}
	if (cl->wake) {
		cl->wake = false;
		/* one wake-up per sleep: the bit is taken as it is read (the
		 * client sets it again before it next sleeps); the locked
		 * read-modify-write also orders the tail published above
		 * before this read, so neither side misses the other */
		if (__atomic_fetch_and(&cl->m.cq.ctl->flags,
				       ~EGW_RING_F_NEED_WAKEUP, __ATOMIC_SEQ_CST) &
		    EGW_RING_F_NEED_WAKEUP)
			s->c.ops->wake(s->c.ctx, cid);
	}
	return done;
}

/* The published stats of every client, as a sequence lock. */
static void
publish_stats(struct egw_engines *s, uint64_t now)
{
	struct egw_attach_stats st = s->pool;
	struct egw_engines_stats sum;

	egw_engines_stats(s, &sum);
	st.updated_ns = now;
	st.cache_entries = s->cst.entries;
	st.cache_blocks = s->cst.blocks;
	st.cache_pinned = s->cst.pinned;
	st.held_long = (uint32_t)sum.held_long;
	st.cache_hits = sum.cache_hits;
	st.cache_misses = sum.cache_misses;
	st.cache_shared = sum.cache_shared;
	st.cache_evictions = s->cst.evictions;
	for (uint32_t i = 0; i < s->c.max_clients; i++) {
		struct client *cl = &s->clients[i];
		struct egw_attach_stats *sh;
		uint32_t seq;

		if (!cl->used || cl->lost)
			continue;
		sh = &cl->m.area->stats;
		seq = st.seq = cl->pub_seq + 1;
		__atomic_store_n(&sh->seq, seq, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		memcpy((uint8_t *)sh + 8, (const uint8_t *)&st + 8,
		       sizeof(st) - 8);
		cl->pub_seq = seq + 1;
		__atomic_store_n(&sh->seq, seq + 1, __ATOMIC_RELEASE);
	}
}

/* Delivered rooms held too long: reported once each (a forgotten
 * RELEASE keeps blocks from every other room). */
static void
scan_held(struct egw_engines *s, uint64_t now)
{
	for (uint32_t c = 0; c < s->c.max_clients; c++) {
		struct client *cl = &s->clients[c];

		for (uint32_t i = 0; cl->used && !cl->lost && i < cl->m.nslots;
		     i++) {
			struct slot_state *p = &cl->slots[i];

			if (p->phase != PH_DELIVERED || p->warned ||
			    now - p->held_at <= s->c.held_warn_ns)
				continue;
			p->warned = true;
			cl->st.held_long++;
			if (s->c.ops->held_long != NULL)
				s->c.ops->held_long(s->c.ctx, c, p->room,
						    now - p->held_at);
		}
	}
}

/* About once a millisecond: the pool's state for the clients, landed
 * entries nobody holds given back while rooms wait for memory; once a
 * second: the held rooms. */
static uint32_t
housekeeping(struct egw_engines *s, uint64_t now)
{
	uint32_t done = 0;

	if (now - s->pub_at >= 1000000) {
		s->pub_at = now;
		if (s->c.ops->pool_state != NULL)
			s->c.ops->pool_state(s->c.ctx, &s->pool);
		for (uint32_t n = s->pool.admission_queue; n > 0; n--) {
			if (!cache_evict_one(s))
				break;
			done++;
		}
		publish_stats(s, now);
	}
	if (s->c.held_warn_ns > 0 && now - s->scan_at >= 1000000000) {
		s->scan_at = now;
		scan_held(s, now);
	}
	return done;
}

/*
 * The rooms waiting for a slot of one side's table, oldest first: those
 * past admit_ns fail, the others are opened while the table has room. The
 * queue is in arrival order, so the deadlines are too: the first room
 * still in time stops the scan when it cannot be opened.
 */
static uint32_t
poll_slot_queue(struct egw_engines *s, uint8_t side, uint64_t now)
{
	const struct slot_queue *q = &s->sq[side];
	uint32_t done = 0, free = UINT32_MAX;
	struct slot_ref r;
	struct slot_state *p;

	if (q->n > 0 && s->c.ops->slots_free != NULL)
		free = s->c.ops->slots_free(s->c.ctx,
					    (enum egw_attach_side)side);
	while (q->n > 0) {
		r = queue_at(s, side, 0);
		p = &s->clients[r.client].slots[r.slot];
		if (now - p->since >= s->c.admit_ns) {
			slot_give_up(s, r.client, r.slot, now);
		} else if (free == 0) {
			break;
		} else {
			if (side == EGW_SIDE_SEND)
				try_alloc(s, r.client, r.slot, now);
			else
				try_recv(s, r.client, r.slot, now);
			if (p->phase == PH_WAIT_SLOT && p->room != 0)
				break; /* still full */
			free--;
		}
		done++;
	}
	return done;
}

uint32_t
egw_engines_poll(struct egw_engines *s, uint64_t now)
{
	uint32_t done = 0;

	s->now = now;
	done += housekeeping(s, now);
	done += peer_waits_poll(s, false, now);
	groups_poll(s, now);
	done += poll_slot_queue(s, EGW_SIDE_SEND, now);
	done += poll_slot_queue(s, EGW_SIDE_RECV, now);

	for (uint32_t i = 0, seen = 0; seen < s->nattached &&
	     i < s->c.max_clients; i++) {
		if (!s->clients[i].used)
			continue;
		seen++;
		if (!s->clients[i].lost)
			done += poll_client(s, i, now);
	}
	return done;
}

/* ---- events from the gateway ----------------------------------------------- */

static struct slot_state *
lookup(struct egw_engines *s, enum egw_attach_side side, uint64_t room,
       uint16_t rank, uint32_t *cid, uint32_t *slot)
{
	struct index_entry *e;

	if (room == 0)
		return NULL;
	if (side == EGW_SIDE_RECV && s->groups_used > 0 &&
	    (e = index_find(s, room, rank_side(rank, SIDE_GROUP))) != NULL) {
		/* a group's room: its driver's slot, until it landed (the
		 * driver may have released since and its slot hold another
		 * room) */
		if (s->groups[e->slot].landed)
			return NULL;
		*cid = s->groups[e->slot].driver_cid;
		*slot = s->groups[e->slot].driver_slot;
		return &s->clients[*cid].slots[*slot];
	}
	e = index_find(s, room, rank_side(side == EGW_SIDE_SEND ? 0 : rank,
					  (uint8_t)side));
	if (e == NULL)
		return NULL;
	*cid = e->client;
	*slot = e->slot;
	return &s->clients[e->client].slots[e->slot];
}

static void
room_state_one(struct egw_engines *s, uint32_t cid, uint32_t slot,
	       enum egw_attach_state st, uint32_t total, uint32_t landed)
{
	struct slot_state *p = &s->clients[cid].slots[slot];

	if (st <= p->state)
		return;
	p->state = (uint8_t)st;
	if (total != 0)
		p->total = total;
	publish_slot(&s->clients[cid], slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, slot,
	     p->total, p->nruns, landed);
}

void
egw_engines_room_state(struct egw_engines *s, enum egw_attach_side side,
		       uint64_t room, uint16_t rank, enum egw_attach_state st,
		       uint32_t total, uint32_t landed)
{
	uint32_t cid, slot;
	struct slot_state *p = lookup(s, side, room, rank, &cid, &slot);

	/* only forward, and never to the end: done() and delivered() say it */
	if (p == NULL || st <= p->state || st >= EGW_ATTACH_STATE_SUCCESS ||
	    st == EGW_ATTACH_STATE_FAILED)
		return;
	if (p->group != NO_GROUP) {
		const struct group *g = &s->groups[p->group];

		/* every member waiting on the group hears it */
		for (uint16_t r = g->leader; r < g->nranks; r++)
			if (g->opened >> r & 1)
				room_state_one(s, g->member[r].cid,
					       g->member[r].slot, st, total,
					       landed);
		return;
	}
	room_state_one(s, cid, slot, st, total, landed);
}

/* A group's room landed: one set of blocks for every member that opened,
 * and for those still to come until the group closes. */
static int
group_delivered(struct egw_engines *s, struct group *g, uint32_t total,
		const struct egw_attach_run *runs, uint32_t nruns)
{
	if (nruns == 0 || nruns > s->c.fanout_max_runs) {
		/* the caller frees the blocks; every member fails */
		const struct group_member d = { g->driver_cid, g->driver_slot };
		struct slot_state *p = &s->clients[d.cid].slots[d.slot];

		group_leave(s, d.cid, d.slot, -E2BIG);
		unindex(s, p->wire, rank_side(p->rank, EGW_SIDE_RECV));
		finish(s, d.cid, d.slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       -E2BIG);
		return -E2BIG;
	}
	memcpy(g->runs, runs, nruns * sizeof(*runs));
	g->nruns = nruns;
	g->total = total;
	g->landed = true;
	for (uint16_t r = g->leader; r < g->nranks; r++)
		if (g->opened >> r & 1)
			group_deliver_one(s, g, g->member[r].cid,
					  g->member[r].slot);
	group_maybe_release(s, g); /* every member failed -E2BIG */
	return 0;
}

int
egw_engines_room_delivered(struct egw_engines *s, uint64_t room, uint16_t rank,
			   uint32_t total, const struct egw_attach_run *runs,
			   uint32_t nruns)
{
	uint32_t cid, slot;
	struct slot_state *p = lookup(s, EGW_SIDE_RECV, room, rank, &cid,
				      &slot);
	struct client *cl;
	int rc;

	if (p == NULL || p->phase != PH_OPEN)
		return -ENOENT;
	if (p->group != NO_GROUP)
		return group_delivered(s, &s->groups[p->group], total, runs,
				       nruns);
	cl = &s->clients[cid];
	if (nruns == 0 || nruns > cl->m.max_runs) {
		unindex(s, room, rank_side(rank, EGW_SIDE_RECV));
		entry_leave(s, cid, slot, -E2BIG);
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       -E2BIG);
		return -E2BIG;
	}
	if (p->entry != NO_ENTRY && s->cache[p->entry].state == CE_IN_FLIGHT) {
		/* the leader: the blocks become the entry's, this room its
		 * first holder */
		struct cache_entry *e = &s->cache[p->entry];

		if (nruns <= s->c.cache_max_runs) {
			entry_landed(s, e, total, runs, nruns);
			p->entry = NO_ENTRY;
			rc = entry_deliver(s, cid, slot, e, 0);
			settle_followers(s, e, 0);
			cache_trim(s);
			return rc;
		}
		entry_leave(s, cid, slot, -E2BIG);
	}
	memcpy(p->runs, runs, nruns * sizeof(*runs));
	p->nruns = nruns;
	p->total = total;
	p->phase = PH_DELIVERED;
	p->state = EGW_ATTACH_STATE_SUCCESS;
	p->held_at = s->now;
	p->warned = false;
	cl->st.rooms_ok++;
	publish_slot(cl, slot, 0);
	post(s, cid, p->tag, p->room, 0, p->op, p->state, EGW_CQEF_MORE, slot, total,
	     nruns, total);
	return 0;
}

int
egw_engines_room_done(struct egw_engines *s, enum egw_attach_side side,
		      uint64_t room, uint16_t rank, int err)
{
	uint32_t cid, slot;
	struct slot_state *p = lookup(s, side, room, rank, &cid, &slot);
	const struct group *g;

	if (p == NULL && side == EGW_SIDE_RECV && s->groups_used > 0 &&
	    (g = group_of(s, room, rank)) != NULL && g->landed)
		return 0; /* a delivered group ends with its members */
	if (p == NULL)
		return -ENOENT;
	if (p->phase == PH_DELIVERED)
		return 0; /* a delivered room ends with RELEASE */
	/* a group's room failed: every member with it (the node ended
	 * its room: nothing to abort there) */
	group_end(s, cid, slot, err == 0 ? -EGW_E_ABORTED : err_code(err),
		  false);
	unindex(s, room, rank_side(p->rank, p->side));
	entry_leave(s, cid, slot, err == 0 ? -EGW_E_ABORTED : err_code(err));
	if (side == EGW_SIDE_SEND && p->phase == PH_OPEN)
		/* the engine ended it before the commit: the runs are ours */
		s->c.ops->send_abort(s->c.ctx, room, false, p->runs, p->nruns);
	if (err == 0 && side == EGW_SIDE_SEND && p->phase == PH_COMMITTED) {
		s->clients[cid].st.rooms_ok++;
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_SUCCESS,
		       0);
	} else
		finish(s, cid, slot, p->tag, p->op, EGW_ATTACH_STATE_FAILED,
		       err == 0 ? -EGW_E_ABORTED : err_code(err));
	return 0;
}

/* ---- counters ---------------------------------------------------------------- */

int
egw_engines_client_stats(const struct egw_engines *s, uint32_t client,
			 struct egw_engines_stats *st)
{
	if (client >= s->c.max_clients || !s->clients[client].used)
		return -ENOENT;
	*st = s->clients[client].st;
	return 0;
}

void
egw_engines_stats(const struct egw_engines *s, struct egw_engines_stats *st)
{
	*st = s->removed;
	for (uint32_t i = 0; i < s->c.max_clients; i++)
		if (s->clients[i].used)
			add_stats(st, &s->clients[i].st);
}

uint32_t
egw_engines_cache_flush(struct egw_engines *s)
{
	uint32_t n = 0;

	while (cache_evict_one(s))
		n++;
	return n;
}

void
egw_engines_cache(const struct egw_engines *s,
		  struct egw_engines_cache_stats *st)
{
	*st = s->cst;
}

uint32_t
egw_engines_attached(const struct egw_engines *s)
{
	return s->nattached;
}

uint32_t
egw_engines_rooms(const struct egw_engines *s)
{
	return s->nrooms - s->groups_used;
}

uint32_t
egw_engines_held_blocks(const struct egw_engines *s)
{
	return s->held_blocks;
}

uint32_t
egw_engines_client_held(const struct egw_engines *s, uint32_t client)
{
	if (client >= s->c.max_clients || !s->clients[client].used)
		return 0;
	return s->clients[client].held_blocks;
}
