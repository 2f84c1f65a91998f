/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node: decode -> peer -> replay -> engine, and engine actions ->
 * encode / pool / callbacks.
 *
 * Deferred work is the node's: an engine must not be re-entered from its
 * own emit callback, so what an action produces for the engines is queued
 * and fed back as soon as the engine call that emitted it returns
 * (drain_deferred, at the end of every entry point that calls an engine):
 *  - allocation results (EGW_ACT_ALLOC) for the receiver;
 *  - posts the payload driver refused, completed as failed writes for the
 *    sender, so the room fails at once instead of at its round deadline.
 * Work that must wait for time rather than for the stack to unwind is
 * retried from egw_node_tick: a REGISTER whose connect the driver refused
 * (until the driver accepts it or a newer REGISTER replaces it), and our
 * own REGISTER until the peer acknowledges it (egw_node_reregister).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egw_node.h"

#define REGISTER_RETRY_NS 200000000ull /* until the peer answers */
#define CONNECT_RETRY_NS 100000000ull  /* until the driver connects */

struct node_peer {
	struct egw_conf_peer cfg;
	struct egw_replay replay;
	bool registered;         /* we have its REGISTER */
	bool acked;              /* it has ours (REGISTER or ACK received) */
	bool reannounced;        /* our endpoint changed: its ACK confirms */
	uint64_t next_register;
	struct egw_register reg;
	/* the last REGISTER whose connect the driver refused: retried */
	bool connect_pending;
	uint16_t pending_flags;
	uint64_t next_connect;
	struct egw_register pending;
};

struct alloc_res {
	uint64_t room;
	uint16_t rank;
	int nruns;               /* runs, or -errno: the pool's answer */
	struct egw_run runs[EGW_XFER_MAX_RUNS];
};

struct egw_node {
	const struct egw_conf *conf;
	const struct egw_conf_port *port;
	struct egw_node_ops ops;
	struct egw_pool *pool;
	struct egw_register self;
	struct egw_sender *sender;
	struct egw_receiver *receiver;
	struct node_peer peers[EGW_CONF_MAX_PEERS];
	uint32_t npeers;
	uint64_t session, seq;
	/* a room has one request pending at a time and chains at most
	 * pipeline depth (< EGW_XFER_PIPE) of them in one drain */
	struct alloc_res *allocq;
	uint32_t nalloc, allocq_len;
	/* cookies of refused posts: each is an outstanding batch of the
	 * sender, so there are never more than it can have in flight */
	uint64_t *refusedq;
	uint32_t nrefused, refusedq_len;
	uint32_t emitting;       /* inside an engine's emit callback */
	uint64_t now;
	struct egw_node_stats st;
	uint8_t buf[EGW_PROTO_MAX_LEN];
};

static const char *const drop_names[EGW_ND_MAX] = {
	[EGW_ND_UNKNOWN_PEER] = "unknown_peer",
	[EGW_ND_PROTO] = "malformed_or_unauthenticated",
	[EGW_ND_REPLAY] = "replay",
	[EGW_ND_NOT_REGISTERED] = "not_registered",
	[EGW_ND_GEOMETRY] = "geometry_mismatch",
	[EGW_ND_ROLE] = "wrong_role",
	[EGW_ND_PAYLOAD] = "payload_unreachable",
};

const char *
egw_node_drop_name(enum egw_node_drop d)
{
	return (unsigned)d < EGW_ND_MAX ? drop_names[d] : "?";
}

/* ---- output ------------------------------------------------------------ */

static void
send_bytes(struct egw_node *n, uint32_t peer, int len)
{
	if (len <= 0)
		return;
	n->st.tx_datagrams++;
	n->ops.tx(n->ops.ctx, n->peers[peer].cfg.addr,
		  n->peers[peer].cfg.udp_port, n->buf, (size_t)len);
}

static void
send_msg(struct egw_node *n, uint32_t peer, const struct egw_msg *m)
{
	send_bytes(n, peer, egw_proto_encode(&n->conf->key, n->session,
					     ++n->seq, m, n->buf,
					     sizeof(n->buf)));
}

static void
send_register(struct egw_node *n, uint32_t peer, bool ack)
{
	if (n->ops.endpoint != NULL)
		n->ops.endpoint(n->ops.ctx, peer, &n->self.qpn, &n->self.psn,
				&n->self.mtu);
	n->st.registers_tx++;
	send_bytes(n, peer, egw_proto_encode_register(&n->conf->key,
						      n->session, ++n->seq,
						      ack, &n->self, n->buf,
						      sizeof(n->buf)));
}

static void
do_pool(struct egw_node *n, const struct egw_act *a)
{
	switch (a->type) {
	case EGW_ACT_ALLOC: {
		struct alloc_res *r;

		if (n->nalloc == n->allocq_len) {
			/* cannot happen (sized below); if it did, the room's
			 * allocation deadline fails it, and this counts it */
			n->st.alloc_overflow++;
			break;
		}
		r = &n->allocq[n->nalloc++];

		r->room = a->room;
		r->rank = a->rank;
		r->nruns = egw_pool_alloc_tokens(n->pool, a->room, a->tokens, r->runs,
					     a->max_runs);
		break;
	}
	case EGW_ACT_FREE:
		for (uint32_t i = 0; i < a->nruns; i++)
			egw_pool_free(n->pool, a->room, a->runs[i]);
		break;
	case EGW_ACT_SHRINK:
		egw_pool_shrink(n->pool, a->room, a->runs[0], a->keep);
		break;
	default:
		break;
	}
}

static void
emit(struct egw_node *n, const struct egw_act *a, bool is_sender)
{
	n->emitting++;
	switch (a->type) {
	case EGW_ACT_SEND:
		send_msg(n, a->peer, a->msg);
		break;
	case EGW_ACT_POST_WRITES:
		if (n->ops.post(n->ops.ctx, a->peer, a->writes, a->nwrites,
				a->cookie) == 0)
			break;
		n->st.posts_refused++;
		if (n->nrefused == n->refusedq_len) {
			/* cannot happen (sized to the batches in flight);
			 * if it did, the round deadline fails the room */
			n->st.refused_overflow++;
			break;
		}
		n->refusedq[n->nrefused++] = a->cookie;
		break;
	case EGW_ACT_DELIVER:
		n->ops.deliver(n->ops.ctx, a);
		break;
	case EGW_ACT_DONE:
		n->ops.done(n->ops.ctx, a->room, a->rank, a->error, is_sender);
		break;
	case EGW_ACT_PEER_DEAD:
		/* ask it to register again when it comes back */
		n->peers[a->peer].registered = false;
		n->peers[a->peer].acked = false;
		n->peers[a->peer].next_register = n->now;
		break;
	default:
		do_pool(n, a);
		break;
	}
	n->emitting--;
}

static void
emit_sender(void *ctx, const struct egw_act *a)
{
	emit(ctx, a, true);
}

static void
emit_receiver(void *ctx, const struct egw_act *a)
{
	emit(ctx, a, false);
}

/* Feed queued allocation results and refused posts back to the engines
 * (which may queue more: the loops reach those too). */
static void
drain_deferred(struct egw_node *n)
{
	/* called through an application callback from inside an engine: the
	 * entry point that called that engine drains once it returns */
	if (n->emitting > 0)
		return;
	while (n->nalloc > 0 || n->nrefused > 0) {
		for (uint32_t i = 0; i < n->nalloc; i++) {
			struct alloc_res r = n->allocq[i];

			egw_receiver_alloc_done(n->receiver, r.room, r.rank,
						r.runs, r.nruns, n->now);
		}
		n->nalloc = 0;
		for (uint32_t i = 0; i < n->nrefused; i++)
			egw_sender_writes_done(n->sender, n->refusedq[i], false,
					       n->now);
		n->nrefused = 0;
	}
}

/* ---- lifecycle --------------------------------------------------------- */

int
egw_node_create(const struct egw_conf *conf, uint16_t port,
		struct egw_pool *pool,
		const struct egw_region regions[EGW_KIND_MAX],
		const uint8_t gid[16], uint32_t qpn,
		const struct egw_node_ops *ops, uint64_t session, uint64_t now,
		struct egw_node **out)
{
	struct egw_node *n;
	struct egw_xfer_conf xc;
	struct egw_policy pol;
	int rc = 0;

	if (conf == NULL || port >= conf->nports || pool == NULL ||
	    ops == NULL || ops->tx == NULL || ops->post == NULL ||
	    ops->deliver == NULL || ops->done == NULL || session == 0 ||
	    out == NULL)
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return -ENOMEM;
	n->conf = conf;
	n->port = &conf->ports[port];
	n->ops = *ops;
	n->pool = pool;
	n->session = session;
	n->now = now;
	n->npeers = n->port->npeers;
	for (uint32_t i = 0; i < n->npeers; i++) {
		n->peers[i].cfg = n->port->peers[i];
		n->peers[i].next_register = now;
	}
	snprintf(n->self.name, sizeof(n->self.name), "%s", conf->name);
	if (gid != NULL)
		memcpy(n->self.gid, gid, 16);
	n->self.qpn = qpn;
	n->self.mtu = 1024;
	n->self.roles = conf->roles;
	n->self.block_tokens = conf->geom.block_tokens;
	n->self.pool_blocks = egw_pool_nblocks(pool);
	n->self.hidden_size = conf->geom.hidden_size;
	n->self.dtype_bytes = conf->geom.dtype_bytes;
	n->self.aux_bytes = conf->geom.aux_bytes;
	memcpy(n->self.region, regions, sizeof(n->self.region));

	egw_conf_to_xfer(conf, &xc, &pol);
	xc.geom = *egw_pool_geom(pool);
	xc.max_peers = n->npeers > 0 ? n->npeers : 1;
	xc.emit_ctx = n;
	if (conf->roles & EGW_ROLE_ENCODE) {
		xc.emit = emit_sender;
		rc = egw_sender_create(&xc, &n->sender);
		n->refusedq_len = xc.max_rooms * EGW_XFER_MAX_RANKS *
				  EGW_XFER_PIPE;
		n->refusedq = calloc(n->refusedq_len, sizeof(*n->refusedq));
		if (rc == 0 && n->refusedq == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && (conf->roles & EGW_ROLE_LANGUAGE)) {
		n->allocq_len = xc.max_rooms * EGW_XFER_PIPE;
		n->allocq = calloc(n->allocq_len, sizeof(*n->allocq));
		if (n->allocq == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && (conf->roles & EGW_ROLE_LANGUAGE)) {
		xc.emit = emit_receiver;
		rc = egw_receiver_create(&xc, &pol, &n->receiver);
		for (uint32_t i = 0; rc == 0 && i < n->npeers; i++)
			rc = egw_receiver_peer_add(n->receiver, i, now);
	}
	if (rc != 0) {
		egw_node_destroy(n);
		return rc;
	}
	*out = n;
	return 0;
}

void
egw_node_destroy(struct egw_node *n)
{
	if (n == NULL)
		return;
	egw_sender_destroy(n->sender);
	egw_receiver_destroy(n->receiver);
	free(n->allocq);
	free(n->refusedq);
	free(n);
}

/* ---- input ------------------------------------------------------------- */

static int
find_peer(const struct egw_node *n, uint32_t ip, uint16_t port)
{
	for (uint32_t i = 0; i < n->npeers; i++)
		if (n->peers[i].cfg.addr == ip && n->peers[i].cfg.udp_port == port)
			return (int)i;
	return -1;
}

static bool
geometry_ok(const struct egw_node *n, const struct egw_register *r)
{
	const struct egw_pool_geom *g = egw_pool_geom(n->pool);

	if (r->block_tokens != g->block_tokens ||
	    r->hidden_size != g->hidden_size ||
	    r->dtype_bytes != g->dtype_bytes || r->aux_bytes != g->aux_bytes)
		return false;
	for (int k = 0; k < EGW_KIND_MAX; k++)
		if (r->region[k].unit_bytes !=
		    egw_geom_unit_bytes(g, (enum egw_kind)k))
			return false;
	return true;
}

/* Connect the payload path for the peer's pending REGISTER and, once the
 * driver accepts, take it. false: the driver refused (retried by tick). */
static bool
connect_peer(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];
	const struct egw_register *r = &pe->pending;
	bool ack = (pe->pending_flags & EGW_MSGF_ACK) != 0;

	/* the driver hears of a peer when it is new or its endpoint changed
	 * (a restart), not on every retransmitted REGISTER - and once more
	 * when the peer acknowledges our re-announced endpoint, which tells
	 * the driver the peer's side is rebuilt too */
	if (n->ops.peer_up != NULL &&
	    (!pe->registered || memcmp(&pe->reg, r, sizeof(*r)) != 0 ||
	     (pe->reannounced && ack)) &&
	    n->ops.peer_up(n->ops.ctx, peer, r) != 0) {
		pe->connect_pending = true;
		pe->next_connect = n->now + CONNECT_RETRY_NS;
		return false;
	}
	pe->connect_pending = false;
	pe->reg = *r;
	pe->registered = true;
	if (n->sender != NULL && (r->roles & EGW_ROLE_LANGUAGE))
		egw_sender_peer_add(n->sender, peer, r->pool_blocks, n->now);
	if (ack) {
		pe->acked = true;
		pe->reannounced = false;
	} else
		send_register(n, peer, true);
	return true;
}

static void
on_register(struct egw_node *n, uint32_t peer, const struct egw_pkt *p)
{
	struct node_peer *pe = &n->peers[peer];

	n->st.registers_rx++;
	if (!geometry_ok(n, &p->reg)) {
		n->st.drops[EGW_ND_GEOMETRY]++;
		return;
	}
	/* the newest REGISTER replaces one still waiting for its connect */
	pe->pending = p->reg;
	pe->pending_flags = p->flags;
	if (!connect_peer(n, peer))
		n->st.drops[EGW_ND_PAYLOAD]++;
}

/* An INIT for a room the sender does not know: validate it first, then
 * let the application open the room. true when the INIT was refused here
 * (answered with ERROR; nothing was created). */
static bool
produce_on_demand(struct egw_node *n, uint32_t peer, const struct egw_msg *m,
		  uint64_t now)
{
	int rc = egw_sender_check_init(n->sender, peer, m);

	if (rc == 0)
		rc = n->ops.unknown_room(n->ops.ctx, m->room, m->nranks, now);
	if (rc == 0 || rc == -EGW_E_UNKNOWN_ROOM || !egw_rc_is_err(rc))
		return false; /* the sender answers: STATUS, or unknown */
	egw_sender_refuse(n->sender, peer, m, (enum egw_err)-rc, now);
	return true;
}

void
egw_node_rx(struct egw_node *n, uint32_t ip, uint16_t port, const uint8_t *buf,
	    size_t len, uint64_t now)
{
	struct egw_pkt p;
	enum egw_proto_err e;
	int peer;

	n->now = now;
	n->st.rx_datagrams++;
	peer = find_peer(n, ip, port);
	if (peer < 0) {
		/* not even decoded: nothing of an unknown source is parsed */
		n->st.drops[EGW_ND_UNKNOWN_PEER]++;
		return;
	}
	e = egw_proto_decode(&n->conf->key, buf, len, &p, &n->st.proto);
	if (e != EGW_PE_OK) {
		n->st.drops[EGW_ND_PROTO]++;
		return;
	}
	e = egw_replay_check(&n->peers[peer].replay, p.session, p.seq);
	if (e != EGW_PE_OK) {
		n->st.proto.refused[e]++;
		n->st.drops[EGW_ND_REPLAY]++;
		return;
	}
	if (p.type == EGW_MSG_REGISTER) {
		on_register(n, (uint32_t)peer, &p);
		return;
	}
	if (!n->peers[peer].registered) {
		/* until REGISTER, we do not know its pool: ask again */
		n->st.drops[EGW_ND_NOT_REGISTERED]++;
		if (now >= n->peers[peer].next_register) {
			send_register(n, (uint32_t)peer, false);
			n->peers[peer].next_register = now + REGISTER_RETRY_NS;
		}
		return;
	}
	/* the engines order a request against a restart of its rank by it */
	p.msg.seq = p.seq;
	switch (p.type) {
	case EGW_MSG_HEARTBEAT:
		if (n->sender != NULL)
			egw_sender_on_msg(n->sender, (uint32_t)peer, &p.msg, now);
		if (n->receiver != NULL)
			egw_receiver_on_msg(n->receiver, (uint32_t)peer, &p.msg, now);
		break;
	case EGW_MSG_ABORT:
		if (p.flags & EGW_MSGF_ACK) {
			/* the answer to the receiver's ABORT */
			if (n->receiver == NULL)
				n->st.drops[EGW_ND_ROLE]++;
			else
				egw_receiver_on_msg(n->receiver, (uint32_t)peer,
						    &p.msg, now);
			break;
		}
		__attribute__((fallthrough));
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		if (n->sender == NULL) {
			n->st.drops[EGW_ND_ROLE]++;
			break;
		}
		if (p.type == EGW_MSG_INIT && n->ops.unknown_room != NULL &&
		    !egw_node_sender_has_room(n, p.msg.room) &&
		    produce_on_demand(n, (uint32_t)peer, &p.msg, now))
			break;
		egw_sender_on_msg(n->sender, (uint32_t)peer, &p.msg, now);
		break;
	case EGW_MSG_STATUS:
		if (p.flags & EGW_MSGF_POLL) {
			if (n->sender == NULL)
				n->st.drops[EGW_ND_ROLE]++;
			else
				egw_sender_on_msg(n->sender, (uint32_t)peer, &p.msg, now);
			break;
		}
		/* a report is for the receiver */
		__attribute__((fallthrough));
	case EGW_MSG_ERROR:
		if (n->receiver == NULL)
			n->st.drops[EGW_ND_ROLE]++;
		else
			egw_receiver_on_msg(n->receiver, (uint32_t)peer, &p.msg, now);
		break;
	default:
		break;
	}
	drain_deferred(n);
}

void
egw_node_tick(struct egw_node *n, uint64_t now)
{
	n->now = now;
	for (uint32_t i = 0; i < n->npeers; i++) {
		struct node_peer *pe = &n->peers[i];

		if (pe->connect_pending && now >= pe->next_connect) {
			n->st.connect_retries++;
			connect_peer(n, i);
		}
		if ((!pe->registered || !pe->acked) && now >= pe->next_register) {
			send_register(n, i, false);
			pe->next_register = now + REGISTER_RETRY_NS;
		}
	}
	if (n->sender != NULL)
		egw_sender_tick(n->sender, now);
	if (n->receiver != NULL)
		egw_receiver_tick(n->receiver, now);
	drain_deferred(n);
}

int
egw_node_reregister(struct egw_node *n, uint32_t peer, uint64_t now)
{
	struct node_peer *pe;

	if (n == NULL || peer >= n->npeers)
		return -EINVAL;
	pe = &n->peers[peer];
	n->now = now;
	pe->acked = false;
	pe->reannounced = true;
	n->st.reregisters++;
	send_register(n, peer, false);
	pe->next_register = now + REGISTER_RETRY_NS;
	return 0;
}

void
egw_node_writes_done(struct egw_node *n, uint64_t cookie, bool ok,
		     uint64_t now)
{
	n->now = now;
	if (n->sender != NULL)
		egw_sender_writes_done(n->sender, cookie, ok, now);
	drain_deferred(n);
}

/* ---- application API --------------------------------------------------- */

int
egw_node_peer_index(const struct egw_node *n, const char *name)
{
	for (uint32_t i = 0; i < n->npeers; i++)
		if (strcmp(n->peers[i].cfg.name, name) == 0)
			return (int)i;
	return -1;
}

bool
egw_node_peer_ready(const struct egw_node *n, uint32_t peer)
{
	return peer < n->npeers && n->peers[peer].registered;
}

int
egw_node_receiver_open(struct egw_node *n, uint64_t room, uint16_t rank,
		       uint16_t nranks, uint32_t peer, bool dummy, uint64_t now)
{
	int rc;

	if (n->receiver == NULL)
		return -ENOTSUP;
	n->now = now;
	rc = egw_receiver_open(n->receiver, room, rank, nranks, peer, dummy, now);
	drain_deferred(n);
	return rc;
}

int
egw_node_release(struct egw_node *n, uint64_t room, const struct egw_run *runs,
		 uint32_t nruns)
{
	int bad = 0;

	for (uint32_t i = 0; i < nruns; i++)
		if (egw_pool_free(n->pool, room, runs[i]) != 0)
			bad = -EINVAL;
	return bad;
}

int
egw_node_sender_open(struct egw_node *n, uint64_t room, uint16_t nranks,
		     uint64_t now)
{
	int rc;

	if (n->sender == NULL)
		return -ENOTSUP;
	n->now = now;
	rc = egw_sender_open(n->sender, room, nranks, now);
	drain_deferred(n);
	return rc;
}

int
egw_node_alloc_src(struct egw_node *n, uint64_t room, uint32_t tokens,
		   struct egw_run *runs, uint32_t max_runs)
{
	return egw_pool_alloc_tokens(n->pool, room, tokens, runs, max_runs);
}

int
egw_node_input(struct egw_node *n, uint64_t room, uint32_t total,
	       const struct egw_run *runs, uint32_t nruns, uint64_t now)
{
	int rc;

	if (n->sender == NULL)
		return -ENOTSUP;
	n->now = now;
	rc = egw_sender_input(n->sender, room, total, runs, nruns, now);
	drain_deferred(n);
	return rc;
}

bool
egw_node_sender_has_room(const struct egw_node *n, uint64_t room)
{
	return n->sender != NULL && egw_sender_state(n->sender, room) >= 0;
}

int
egw_node_abort_room(struct egw_node *n, uint64_t room, uint16_t rank,
		    bool sender, uint64_t now)
{
	int rc;

	if ((sender ? (void *)n->sender : (void *)n->receiver) == NULL)
		return -ENOTSUP;
	n->now = now;
	rc = sender ? egw_sender_abort(n->sender, room, now) :
		      egw_receiver_abort(n->receiver, room, rank, now);
	drain_deferred(n);
	return rc;
}

void
egw_node_abort_all(struct egw_node *n, uint64_t now)
{
	n->now = now;
	if (n->sender != NULL)
		egw_sender_abort_all(n->sender, now);
	if (n->receiver != NULL)
		egw_receiver_abort_all(n->receiver, now);
	drain_deferred(n);
}

struct egw_pool *
egw_node_pool(struct egw_node *n)
{
	return n->pool;
}

void
egw_node_get_stats(const struct egw_node *n, struct egw_node_stats *st)
{
	*st = n->st;
}

const struct egw_sender *
egw_node_sender(const struct egw_node *n)
{
	return n->sender;
}

const struct egw_receiver *
egw_node_receiver(const struct egw_node *n)
{
	return n->receiver;
}
