/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers that come and go (gw_peers.h). Control threads queue what a source
 * says into the identity's mailbox (an rte_ring, many producers, the
 * worker the only consumer); the worker reconciles, on its timer tick,
 * what the sources want with what its node has:
 *
 *   wanted, not in the node  -> node, driver and neighbour entry added
 *   in the node, not wanted  -> removed from the node (its rooms end);
 *     or wanted elsewhere       the driver and the neighbour entry go once
 *                               the node freed the slot, then (a changed
 *                               address) it is added anew
 *
 * Nothing here runs unless something changed or a removal is under way:
 * a table of a thousand quiet peers costs the worker nothing per tick.
 * What control threads read is a copy the worker publishes under a lock
 * it only tries (it never waits: a busy lock is tried again next tick).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "gw_attach.h"
#include "gw_peers.h"

#define MBOX_SIZE 1024		     /* messages waiting for the worker */
#define ADD_RETRY_NS 1000000000ull   /* a peer that did not fit, again */
#define VIEW_REFRESH_NS 100000000ull /* `ready` in the copy, this fresh */

enum { MSG_HOLD = 1, MSG_RELEASE };

struct peer_msg {
	uint32_t op;
	uint32_t origin;
	struct gw_peer_spec spec;
	char why[96];
};

/* What the worker knows of one name. */
struct peer_rec {
	bool used;
	uint8_t origins;			      /* who holds it */
	struct gw_peer_spec said[GW_PEER_ORIGIN_MAX]; /* what each says */
	/* as the node has it (id != 0): its address and a digest of the
	 * whole spec, not a third copy of it (a slot's memory counts) */
	uint32_t have_addr;
	uint16_t have_port;
	uint64_t have_digest;
	uint32_t id; /* node id, 0: not in the node */
	uint32_t slot;
	bool leaving; /* removed from the node */
	bool conflict_noted;
	uint64_t retry_at; /* a failed add, tried again then */
	char why[96];	   /* the last release's reason */
};

struct gw_peers {
	struct rte_ring *mbox;
	struct peer_rec *rec;
	uint32_t nrec; /* capacity */
	uint32_t busy; /* removals under way, failed adds */
	bool dirty;    /* reconcile on the next tick */
	/* the published copy */
	pthread_mutex_t lock;
	struct gw_peer_view *view;
	uint32_t nview;
	uint64_t gen;
	bool stale; /* to publish */
	uint64_t next_refresh;
};

const char *
gw_peer_origin_name(enum gw_peer_origin o)
{
	return o == GW_PEER_FILE    ? "file" :
	       o == GW_PEER_CLUSTER ? "cluster" :
				      "?";
}

static bool
same_spec(const struct gw_peer_spec *a, const struct gw_peer_spec *b)
{
	return a->addr == b->addr && a->udp_port == b->udp_port &&
	       strcmp(a->name, b->name) == 0 &&
	       strcmp(a->shm_path, b->shm_path) == 0;
}

/* FNV-1a over what makes a peer another one: its address, port and pool
 * file (the name is the record's key). Not for anything secret. */
static uint64_t
spec_digest(const struct gw_peer_spec *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint8_t b[6] = { (uint8_t)(p->addr >> 24),    (uint8_t)(p->addr >> 16),
			 (uint8_t)(p->addr >> 8),     (uint8_t)p->addr,
			 (uint8_t)(p->udp_port >> 8), (uint8_t)p->udp_port };

	for (size_t i = 0; i < sizeof(b); i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	for (const char *c = p->shm_path; *c != '\0'; c++)
		h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
	return h;
}

static bool
have_spec(const struct peer_rec *r, const struct gw_peer_spec *w)
{
	return w->addr == r->have_addr && w->udp_port == r->have_port &&
	       spec_digest(w) == r->have_digest;
}

static void
set_have(struct peer_rec *r, const struct gw_peer_spec *w)
{
	r->have_addr = w->addr;
	r->have_port = w->udp_port;
	r->have_digest = spec_digest(w);
}

/* The spec that wins: the file's over the cluster's. NULL: none. */
static const struct gw_peer_spec *
wanted(const struct peer_rec *r)
{
	for (int o = 0; o < GW_PEER_ORIGIN_MAX; o++)
		if (r->origins & (1u << o))
			return &r->said[o];
	return NULL;
}

static struct peer_rec *
rec_find(struct gw_peers *ps, const char *name)
{
	for (uint32_t i = 0; i < ps->nrec; i++)
		if (ps->rec[i].used &&
		    strcmp(ps->rec[i].said[0].name, name) == 0)
			return &ps->rec[i];
	return NULL;
}

static struct peer_rec *
rec_new(struct gw_peers *ps, const char *name)
{
	for (uint32_t i = 0; i < ps->nrec; i++)
		if (!ps->rec[i].used) {
			struct peer_rec *r = &ps->rec[i];

			memset(r, 0, sizeof(*r));
			r->used = true;
			/* said[0].name keys the record, whoever said it */
			snprintf(r->said[0].name, sizeof(r->said[0].name), "%s",
				 name);
			return r;
		}
	return NULL;
}

int
gw_peers_init(struct gw_id *id)
{
	struct gw_peers *ps = calloc(1, sizeof(*ps));
	char name[RTE_RING_NAMESIZE];

	if (ps == NULL)
		return -ENOMEM;
	/* a name a source has not dropped may wait for a slot: room for
	 * the slots and as many more */
	ps->nrec = 2u * id->cfg->max_peers;
	ps->rec = calloc(ps->nrec, sizeof(*ps->rec));
	ps->view = calloc(ps->nrec, sizeof(*ps->view));
	id->hist = calloc(id->cfg->max_peers, sizeof(*id->hist));
	snprintf(name, sizeof(name), "egw_peers_%u_%p", id->cfg_port,
		 (void *)id);
	ps->mbox = rte_ring_create_elem(name, sizeof(struct peer_msg),
					MBOX_SIZE, SOCKET_ID_ANY,
					RING_F_SC_DEQ);
	pthread_mutex_init(&ps->lock, NULL);
	id->peers = ps;
	if (ps->rec == NULL || ps->view == NULL || id->hist == NULL ||
	    ps->mbox == NULL) {
		gw_peers_fini(id);
		return -ENOMEM;
	}
	/* the file's peers are in the node already (slots 0.., ids 1..) */
	for (uint16_t i = 0; i < id->cfg->npeers; i++) {
		const struct egw_conf_peer *cp = &id->cfg->peers[i];
		struct peer_rec *r = rec_new(ps, cp->name);

		r->origins = 1u << GW_PEER_FILE;
		r->said[GW_PEER_FILE].addr = cp->addr;
		r->said[GW_PEER_FILE].udp_port = cp->udp_port;
		snprintf(r->said[GW_PEER_FILE].shm_path,
			 sizeof(r->said[GW_PEER_FILE].shm_path), "%s",
			 cp->shm_path);
		set_have(r, &r->said[GW_PEER_FILE]);
		r->slot = i;
		r->id = i + 1u;
	}
	ps->stale = true;
	return 0;
}

void
gw_peers_fini(struct gw_id *id)
{
	struct gw_peers *ps = id->peers;

	if (ps == NULL)
		return;
	rte_ring_free(ps->mbox);
	pthread_mutex_destroy(&ps->lock);
	free(ps->rec);
	free(ps->view);
	free(ps);
	free(id->hist);
	id->hist = NULL;
	id->peers = NULL;
}

static int
post(struct gw_id *id, const struct peer_msg *m)
{
	if (id->peers == NULL)
		return -EINVAL;
	/* many control threads may post: the ring's multi-producer path */
	return rte_ring_mp_enqueue_elem(id->peers->mbox, (void *)m,
					sizeof(*m)) == 0 ?
		       0 :
		       -ENOBUFS;
}

int
gw_peers_hold(struct gw_id *id, enum gw_peer_origin origin,
	      const struct gw_peer_spec *p)
{
	struct peer_msg m = { .op = MSG_HOLD, .origin = origin };

	if (p == NULL || (unsigned)origin >= GW_PEER_ORIGIN_MAX ||
	    p->name[0] == '\0' || memchr(p->name, 0, sizeof(p->name)) == NULL ||
	    p->addr == 0 || p->udp_port == 0)
		return -EINVAL;
	m.spec = *p;
	return post(id, &m);
}

int
gw_peers_release(struct gw_id *id, enum gw_peer_origin origin, const char *name,
		 const char *why)
{
	struct peer_msg m = { .op = MSG_RELEASE, .origin = origin };

	if (name == NULL || (unsigned)origin >= GW_PEER_ORIGIN_MAX ||
	    name[0] == '\0' || strlen(name) >= sizeof(m.spec.name))
		return -EINVAL;
	snprintf(m.spec.name, sizeof(m.spec.name), "%s", name);
	snprintf(m.why, sizeof(m.why), "%s", why != NULL ? why : "");
	return post(id, &m);
}

/* ---- the worker ---------------------------------------------------------- */

static void
take(struct gw_id *id, const struct peer_msg *m)
{
	struct gw_peers *ps = id->peers;
	struct peer_rec *r = rec_find(ps, m->spec.name);
	uint8_t bit = (uint8_t)(1u << m->origin);

	if (m->op == MSG_RELEASE) {
		if (r == NULL || !(r->origins & bit))
			return;
		r->origins &= (uint8_t)~bit;
		snprintf(r->why, sizeof(r->why), "%s", m->why);
		ps->dirty = true;
		return;
	}
	if (r == NULL)
		r = rec_new(ps, m->spec.name);
	if (r == NULL) {
		GW_LOG(ERR,
		       "port %s: peer %s (%s) not taken: %u names "
		       "already known (twice max_peers)\n",
		       id->cfg->name, m->spec.name,
		       gw_peer_origin_name(m->origin), ps->nrec);
		return;
	}
	r->said[m->origin] = m->spec;
	r->origins |= bit;
	ps->dirty = true;
	if (m->origin != GW_PEER_FILE && (r->origins & 1u << GW_PEER_FILE) &&
	    !same_spec(&r->said[GW_PEER_FILE], &m->spec) &&
	    !r->conflict_noted) {
		r->conflict_noted = true;
		GW_LOG(WARNING,
		       "port %s: peer %s: the %s says %u.%u.%u.%u:%u, "
		       "the configuration file says %u.%u.%u.%u:%u: the "
		       "file's wins\n",
		       id->cfg->name, m->spec.name,
		       gw_peer_origin_name(m->origin), m->spec.addr >> 24,
		       (m->spec.addr >> 16) & 255, (m->spec.addr >> 8) & 255,
		       m->spec.addr & 255, m->spec.udp_port,
		       r->said[0].addr >> 24, (r->said[0].addr >> 16) & 255,
		       (r->said[0].addr >> 8) & 255, r->said[0].addr & 255,
		       r->said[0].udp_port);
	}
}

/* The node freed the slot of a removed peer: the driver and the
 * neighbour entry let go of it too, and the slot's figures restart. */
static void
let_go(struct gw_id *id, struct peer_rec *r)
{
	if (id->dops->peer_remove != NULL)
		id->dops->peer_remove(id->drv, r->slot);
	gw_id_neigh_put(id, r->have_addr);
	gw_room_hist_clear(id, r->slot);
	GW_LOG(INFO,
	       "port %s: peer %s removed (id %u): its rooms have "
	       "ended\n",
	       id->cfg->name, r->said[0].name, r->id);
	r->id = 0;
	r->leaving = false;
}

static void
remove_from_node(struct gw_id *id, struct peer_rec *r, uint64_t now)
{
	const struct gw_peer_spec *w = wanted(r);

	GW_LOG(INFO,
	       "port %s: removing peer %s (id %u): %s; its open rooms "
	       "end failed (peer_removed)\n",
	       id->cfg->name, r->said[0].name, r->id,
	       w != NULL ? "its address changed" :
	       r->why[0] ? r->why :
			   "no source names it any more");
	r->leaving = true;
	egw_node_peer_remove(id->node, r->slot, now);
	/* no room held it: the slot is free already, and must be let go of
	 * before another peer can take it */
	if (egw_node_peer_slot(id->node, r->id) < 0)
		let_go(id, r);
}

static void
add_to_node(struct gw_id *id, struct peer_rec *r, uint64_t now)
{
	const struct gw_peer_spec *w = wanted(r);
	struct egw_node_peer np = { .addr = w->addr, .udp_port = w->udp_port };
	struct egw_payload_peer dp = { 0 };
	struct egw_node_peer_info info;
	int slot, rc;

	snprintf(np.name, sizeof(np.name), "%s", w->name);
	slot = egw_node_peer_add(id->node, &np, now);
	if (slot < 0) {
		r->retry_at = now + ADD_RETRY_NS;
		if (!r->conflict_noted)
			GW_LOG(WARNING,
			       "port %s: peer %s not added: %s "
			       "(max_peers %u)\n",
			       id->cfg->name, w->name,
			       slot == -ENOSPC ? "every peer slot is taken" :
			       slot == -EEXIST ? "another peer has its name or "
						 "address" :
						 strerror(-slot),
			       id->cfg->max_peers);
		r->conflict_noted = true;
		return;
	}
	snprintf(dp.name, sizeof(dp.name), "%s", w->name);
	snprintf(dp.shm_path, sizeof(dp.shm_path), "%s", w->shm_path);
	rc = id->dops->peer_add != NULL ?
		     id->dops->peer_add(id->drv, (uint32_t)slot, &dp) :
		     -ENOTSUP;
	if (rc == 0)
		rc = gw_id_neigh_hold(id, w->addr);
	egw_node_peer_get(id->node, (uint32_t)slot, &info);
	r->slot = (uint32_t)slot;
	r->id = info.id;
	set_have(r, w);
	if (rc != 0) {
		GW_LOG(ERR,
		       "port %s: peer %s: the payload driver cannot take "
		       "it: %s\n",
		       id->cfg->name, w->name, strerror(-rc));
		/* out of the node again at once: nothing of it is open */
		egw_node_peer_remove(id->node, r->slot, now);
		if (id->dops->peer_remove != NULL)
			id->dops->peer_remove(id->drv, r->slot);
		r->id = 0;
		r->retry_at = now + ADD_RETRY_NS;
		return;
	}
	r->retry_at = 0;
	r->conflict_noted = false;
	GW_LOG(INFO, "port %s: peer %s added (%s, %u.%u.%u.%u:%u, id %u)\n",
	       id->cfg->name, w->name,
	       gw_peer_origin_name((r->origins & 1u) ? GW_PEER_FILE :
						       GW_PEER_CLUSTER),
	       w->addr >> 24, (w->addr >> 16) & 255, (w->addr >> 8) & 255,
	       w->addr & 255, w->udp_port, r->id);
}

/* One name: what the sources want against what the node has. Returns
 * true while it needs more ticks (a removal under way, an add to retry). */
static bool
reconcile(struct gw_id *id, struct peer_rec *r, uint64_t now)
{
	const struct gw_peer_spec *w = wanted(r);

	if (r->id != 0 && r->leaving) {
		if (egw_node_peer_slot(id->node, r->id) >= 0)
			return true; /* its rooms are still ending */
		let_go(id, r);
	}
	if (r->id != 0 && (w == NULL || !have_spec(r, w))) {
		remove_from_node(id, r, now);
		if (r->id != 0)
			return true;
	}
	if (r->id == 0 && w != NULL) {
		if (now < r->retry_at)
			return true;
		add_to_node(id, r, now);
		return r->id == 0;
	}
	if (r->id == 0 && w == NULL)
		r->used = false;
	return false;
}

static void
publish(struct gw_id *id, uint64_t now)
{
	struct gw_peers *ps = id->peers;
	uint32_t n = 0;

	if (pthread_mutex_trylock(&ps->lock) != 0)
		return; /* a reader holds it: next tick */
	for (uint32_t i = 0; i < ps->nrec; i++) {
		const struct peer_rec *r = &ps->rec[i];
		const struct gw_peer_spec *w;
		struct gw_peer_view *v;

		if (!r->used)
			continue;
		w = wanted(r);
		v = &ps->view[n++];
		memset(v, 0, sizeof(*v));
		snprintf(v->name, sizeof(v->name), "%s", r->said[0].name);
		v->id = r->id;
		v->slot = r->slot;
		v->addr = r->id != 0 ? r->have_addr : w != NULL ? w->addr : 0;
		v->udp_port = r->id != 0 ? r->have_port :
			      w != NULL	 ? w->udp_port :
					   0;
		v->origins = r->origins;
		v->leaving = r->leaving;
		v->ready = r->id != 0 && !r->leaving &&
			   egw_node_peer_ready(id->node, r->slot);
	}
	ps->nview = n;
	if (ps->stale)
		ps->gen++; /* the table changed, not only who is ready */
	pthread_mutex_unlock(&ps->lock);
	ps->stale = false;
	ps->next_refresh = now + VIEW_REFRESH_NS;
}

uint32_t
gw_peers_poll(struct gw_id *id, uint64_t now)
{
	struct gw_peers *ps = id->peers;
	struct peer_msg m;
	uint32_t work = 0;

	if (ps == NULL)
		return 0;
	while (rte_ring_sc_dequeue_elem(ps->mbox, &m, sizeof(m)) == 0) {
		take(id, &m);
		work++;
	}
	if (ps->dirty || ps->busy > 0) {
		ps->dirty = false;
		ps->busy = 0;
		for (uint32_t i = 0; i < ps->nrec; i++)
			if (ps->rec[i].used && reconcile(id, &ps->rec[i], now))
				ps->busy++;
		ps->stale = true;
		work++;
		/* engines see the change now, not at their next look */
		if (id->attach != NULL)
			gw_attach_peers_changed(id, now);
	}
	if (ps->stale || now >= ps->next_refresh)
		publish(id, now);
	return work;
}

uint32_t
gw_peers_list(const struct gw_id *id, struct gw_peer_view *out, uint32_t max,
	      uint64_t *gen)
{
	struct gw_peers *ps = id->peers;
	uint32_t n;

	if (ps == NULL)
		return 0;
	pthread_mutex_lock(&ps->lock);
	n = ps->nview;
	memcpy(out, ps->view, (n < max ? n : max) * sizeof(*out));
	if (gen != NULL)
		*gen = ps->gen;
	pthread_mutex_unlock(&ps->lock);
	return n;
}
