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
 * done from egw_node_tick: our REGISTER every 200 ms to a peer that is not
 * registered or has not acknowledged our current endpoint.
 *
 * Per-window keys (ops.window_bind) are posted work, parked in a state per
 * window and advanced by the driver's completions (egw_node_window_done),
 * never waited for: a window's allocation reaches the receiver - and its
 * INIT/RESUME the peer - only once its bind completed; its blocks go back
 * to the pool, or to the application with the room's delivery, only once
 * its invalidation completed. Every parked window has a deadline, checked
 * by egw_node_tick against the `now` it is given.
 *
 * Peers and their incarnations (doc/protocol.md, "Sessions and
 * incarnations"): per peer the session last heard in a REGISTER, the
 * adopted one (the incarnation served; only a REGISTER naming our own
 * random session can adopt, so nothing recorded before our start can),
 * the last NODE_RETIRED sessions adopted before it (refused for good),
 * and whether the peer confirmed ours. A new incarnation fails every room
 * shared with the old one and has the driver let go of the old memory
 * before anything is written for the new one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_priv.h"

static const char *const drop_names[EGW_NODE_DROP_MAX] = {
	[EGW_NODE_DROP_UNKNOWN_PEER] = "unknown_peer",
	[EGW_NODE_DROP_PROTO] = "proto",
	[EGW_NODE_DROP_REPLAY] = "replay",
	[EGW_NODE_DROP_NOT_REGISTERED] = "not_registered",
	[EGW_NODE_DROP_GEOMETRY] = "geometry",
	[EGW_NODE_DROP_ROLE] = "role",
	[EGW_NODE_DROP_PAYLOAD] = "payload",
	[EGW_NODE_DROP_SESSION] = "session",
	[EGW_NODE_DROP_NAME] = "name",
};

const char *
egw_node_drop_name(enum egw_node_drop d)
{
	return (unsigned)d < EGW_NODE_DROP_MAX ? drop_names[d] : "?";
}

/* ---- output ------------------------------------------------------------ */

static void
send_bytes(struct egw_node *n, uint32_t peer, int len)
{
	if (len <= 0)
		return;
	n->st.tx_datagrams++;
	n->ops.tx(n->ops.ctx, n->peers[peer].cfg.addr,
		  n->peers[peer].cfg.udp_port, n->buf, (size_t)len, n->now);
}

static void
send_msg(struct egw_node *n, uint32_t peer, const struct egw_msg *m)
{
	send_bytes(n, peer, egw_proto_encode(&n->key, n->session,
					     ++n->seq, m, n->buf,
					     sizeof(n->buf)));
}

#define peer_registered node_peer_registered

/* Our REGISTER to `peer`: an ACK answering `answer` (its session named,
 * its endpoint echoed), else peer_session = what we heard; ADOPTED when
 * the session it names is the one we adopted. */
static void
send_register(struct egw_node *n, uint32_t peer, const struct egw_pkt *answer)
{
	struct node_peer *pe = &n->peers[peer];
	struct egw_register r;
	uint16_t flags = 0;
	uint64_t seq = ++n->seq;

	if (n->ops.endpoint != NULL)
		n->ops.endpoint(n->ops.ctx, peer, &n->self.qpn, &n->self.psn,
				&n->self.mtu, n->now);
	pe->my_qpn = n->self.qpn;
	pe->my_psn = n->self.psn;
	r = n->self;
	r.peer_session = pe->heard;
	r.peer_seq = pe->heard_seq;
	if (answer != NULL) {
		flags |= EGW_MSGF_ACK;
		r.peer_session = answer->session;
		r.ack_qpn = answer->reg.qpn;
		r.ack_psn = answer->reg.psn;
	}
	if (r.peer_session != 0 && r.peer_session == pe->adopted)
		flags |= EGW_MSGF_ADOPTED;
	n->st.registers_tx++;
	pe->sent[pe->nsent++ % NODE_SENT] = (struct sent_register){ seq, n->now };
	send_bytes(n, peer, egw_proto_encode_register(&n->key,
						      n->session, seq,
						      flags, &r, n->buf,
						      sizeof(n->buf)));
}

/* A REGISTER now, unless one went out for the same reason < 200 ms ago. */
static void
nudge(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];

	if (n->now < pe->next_nudge)
		return;
	send_register(n, peer, NULL);
	pe->next_nudge = n->now + REGISTER_RETRY_NS;
}

/* The bit of a once-per-peer note: authentication failures, then our
 * refusals and the peer's by code, then windows (codes 1..25 fold into 15
 * bits each:
 * the REGISTER ones, 23..25, stay apart). */
static uint32_t
note_bit(enum egw_node_note_kind k, enum egw_err code)
{
	uint32_t c = egw_err_to_wire(code) % 15u;

	if (k == EGW_NODE_NOTE_REFUSED)
		return 1u << (1u + c);
	if (k == EGW_NODE_NOTE_PEER_REFUSED)
		return 1u << (16u + c);
	if (k == EGW_NODE_NOTE_WINDOW)
		return 1u << 31;
	return 1u;
}

/* node_priv.h */
void
node_note(struct egw_node *n, uint32_t peer, enum egw_node_note_kind k,
     enum egw_err code, bool once, const char *fmt, ...)
{
	struct node_peer *pe = &n->peers[peer];
	struct egw_node_note nt = { .kind = k, .code = code };
	va_list ap;

	if (once) {
		if (pe->noted & note_bit(k, code))
			return;
		pe->noted |= note_bit(k, code);
	}
	if (n->ops.note == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(nt.text, sizeof(nt.text), fmt, ap);
	va_end(ap);
	n->ops.note(n->ops.ctx, peer, &nt, n->now);
}

/* ---- the engines' actions ------------------------------------------------ */

static void
do_pool(struct egw_node *n, const struct egw_act *a)
{
	switch (a->type) {
	case EGW_ACT_ALLOC:
		node_window_open(n, a);
		break;
	case EGW_ACT_FREE:
		for (uint32_t i = 0; i < a->nruns; i++)
			if (!node_window_close(n, &a->runs[i], WNIL))
				egw_pool_free(n->pool, a->room, a->runs[i]);
		break;
	case EGW_ACT_SHRINK:
		/* a window's key still admits writes to the whole run: its
		 * tail waits for the window to close */
		if (n->window_keys &&
		    a->runs[0].start < egw_pool_nblocks(n->pool) &&
		    n->win[a->runs[0].start].state == WIN_BOUND)
			break;
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
		/* room messages go to registered peers only */
		if (peer_registered(&n->peers[a->peer]))
			send_msg(n, a->peer, a->msg);
		break;
	case EGW_ACT_POST_WRITES:
		if (n->ops.post(n->ops.ctx, a->peer, a->writes, a->nwrites,
				a->cookie, n->now) == 0)
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
		node_deliver(n, a);
		break;
	case EGW_ACT_DONE:
		node_done(n, a, is_sender);
		break;
	case EGW_ACT_PEER_DEAD:
		/* silent past its deadline: it must confirm us again (the
		 * same incarnation at once, a new one through adoption); its
		 * memory is let go once the engine call returns (let_go) */
		n->peers[a->peer].confirmed = false;
		if (!n->peers[a->peer].silent)
			n->nflagged++;
		n->peers[a->peer].silent = true;
		n->peers[a->peer].next_register = n->now;
		n->register_due = 0;
		break;
	case EGW_ACT_PEER_FENCE:
		/* fenced once the engine call returns (fence) */
		if (!n->peers[a->peer].fence) {
			n->nflagged++;
			n->peers[a->peer].fence = true;
			n->peers[a->peer].fence_room = a->room;
			n->peers[a->peer].fence_rank = a->rank;
		}
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
void
node_drain_deferred(struct egw_node *n)
{
	/* called through an application callback from inside an engine: the
	 * entry point that called that engine drains once it returns */
	if (n->emitting > 0)
		return;
	while (n->nalloc > 0 || n->nrefused > 0) {
		for (uint32_t i = 0; i < n->nalloc; i++) {
			struct alloc_res r = n->allocq[i];

			egw_xfer_receiver_alloc_done_keys(n->receiver, r.room,
						     r.rank, r.runs, r.nruns,
						     r.rkeys, n->now);
		}
		n->nalloc = 0;
		for (uint32_t i = 0; i < n->nrefused; i++)
			egw_xfer_sender_writes_done(n->sender, n->refusedq[i],
						    false, n->now);
		n->nrefused = 0;
	}
}

/* ---- lifecycle --------------------------------------------------------- */

/* REGISTER's content that does not change: who we are, our pool. */
static void
self_describe(struct egw_node *n, const struct egw_node_params *p,
	      const struct egw_region regions[EGW_KIND_MAX],
	      const uint8_t gid[16], uint32_t qpn)
{
	const struct egw_pool_geom *g = egw_pool_geom(n->pool);

	snprintf(n->self.name, sizeof(n->self.name), "%s", p->name);
	if (gid != NULL)
		memcpy(n->self.gid, gid, 16);
	n->self.qpn = qpn;
	n->self.mtu = 1024;
	n->self.roles = p->roles;
	n->self.block_tokens = g->block_tokens;
	n->self.pool_blocks = egw_pool_nblocks(n->pool);
	n->self.hidden_size = g->hidden_size;
	n->self.dtype_bytes = g->dtype_bytes;
	n->self.aux_bytes = g->aux_bytes;
	memcpy(n->self.region, regions, sizeof(n->self.region));
}

int
egw_node_create(const struct egw_node_params *params, struct egw_pool *pool,
		const struct egw_region regions[EGW_KIND_MAX],
		const uint8_t gid[16], uint32_t qpn,
		const struct egw_node_ops *ops, uint64_t session, uint64_t now,
		struct egw_node **out)
{
	struct egw_node *n;
	struct egw_xfer_conf xc;
	int rc = 0;

	if (params == NULL || params->npeers > EGW_NODE_MAX_STATIC ||
	    params->max_peers > EGW_NODE_MAX_PEERS ||
	    (params->max_peers != 0 && params->max_peers < params->npeers) ||
	    params->roles == 0 || pool == NULL || ops == NULL ||
	    ops->tx == NULL || ops->post == NULL || ops->deliver == NULL ||
	    ops->done == NULL || session == 0 || out == NULL)
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return -ENOMEM;
	n->key = params->key;
	n->quarantine_ns = params->xfer.timers.quarantine_ns;
	n->ops = *ops;
	n->pool = pool;
	n->session = session;
	n->now = now;
	rc = node_peers_create(n, params->max_peers != 0 ? params->max_peers :
				  params->npeers > 0	 ? params->npeers :
							   1);
	for (uint32_t i = 0; rc == 0 && i < params->npeers; i++) {
		int slot = node_peer_insert(n, &params->peers[i], now);

		rc = slot < 0 ? slot : 0;
	}
	if (rc != 0) {
		egw_node_destroy(n);
		return rc;
	}
	self_describe(n, params, regions, gid, qpn);

	xc = params->xfer;
	xc.geom = *egw_pool_geom(pool);
	xc.max_peers = n->nslots;
	xc.window_keys = false;
	xc.emit_ctx = n;
	if (params->roles & EGW_ROLE_ENCODE) {
		xc.emit = emit_sender;
		rc = egw_xfer_sender_create(&xc, &n->sender);
		n->refusedq_len = xc.max_rooms * EGW_XFER_MAX_RANKS *
				  EGW_XFER_PIPE;
		n->refusedq = calloc(n->refusedq_len, sizeof(*n->refusedq));
		if (rc == 0 && n->refusedq == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && (params->roles & EGW_ROLE_LANGUAGE)) {
		n->allocq_len = xc.max_rooms * EGW_XFER_PIPE;
		n->allocq = calloc(n->allocq_len, sizeof(*n->allocq));
		if (n->allocq == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && (params->roles & EGW_ROLE_LANGUAGE) &&
	    ops->window_bind != NULL) {
		if (ops->window_unbind == NULL)
			rc = -EINVAL; /* keys that never close are no keys */
		xc.window_keys = true;
		n->window_keys = true;
		if (rc == 0)
			rc = node_windows_create(n, xc.max_runs_per_room);
	}
	if (rc == 0 && (params->roles & EGW_ROLE_LANGUAGE)) {
		xc.emit = emit_receiver;
		rc = egw_xfer_receiver_create(&xc, &params->policy,
					      &n->receiver);
		for (uint32_t i = 0; rc == 0 && i < n->npeers; i++)
			rc = egw_xfer_receiver_peer_add(n->receiver, i, now);
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
	egw_xfer_sender_destroy(n->sender);
	egw_xfer_receiver_destroy(n->receiver);
	free(n->allocq);
	free(n->refusedq);
	free(n->win);
	free(n->dl);
	free(n->dl_runs);
	node_peers_destroy(n);
	free(n);
}

/* ---- input ------------------------------------------------------------- */

static bool
peer_retired(const struct node_peer *pe, uint64_t session)
{
	for (uint32_t i = 0; i < NODE_RETIRED; i++)
		if (pe->retired[i] == session && session != 0)
			return true;
	return false;
}

/* Rule 1's proof of freshness: `peer_seq` names a REGISTER we sent to
 * this peer less than 2 s ago, made after the one that adopted the current
 * incarnation. A REGISTER replayed from an old incarnation names an old
 * seq of ours; one from a live incarnation names our recent one. */
static bool
fresh_proof(const struct egw_node *n, const struct node_peer *pe,
	    uint64_t peer_seq)
{
	if (peer_seq == 0 || peer_seq <= pe->proof)
		return false;
	for (uint32_t i = 0; i < NODE_SENT; i++)
		if (pe->sent[i].seq == peer_seq)
			return n->now - pe->sent[i].at <= FRESH_NS;
	return false;
}

/* What differs between a peer's pool and ours, into `what`; 0 when they
 * agree, else EGW_E_GEOMETRY. */
static enum egw_err
geometry_check(const struct egw_node *n, const struct egw_register *r,
	       char *what, size_t len)
{
	const struct egw_pool_geom *g = egw_pool_geom(n->pool);
	static const char *const kind[EGW_KIND_MAX] = {
		"embedding", "fill_ids", "mrope", "aux",
	};
	struct field { const char *name; uint64_t theirs, ours; };
	struct field f[4 + EGW_KIND_MAX] = {
		{ "block_tokens", r->block_tokens, g->block_tokens },
		{ "hidden_size", r->hidden_size, g->hidden_size },
		{ "dtype_bytes", r->dtype_bytes, g->dtype_bytes },
		{ "aux_bytes", r->aux_bytes, g->aux_bytes },
	};
	size_t used = 0;

	/* which kinds exist, and their sizes */
	for (int k = 0; k < EGW_KIND_MAX; k++)
		f[4 + k] = (struct field){ kind[k], r->region[k].unit_bytes,
			egw_pool_geom_unit_bytes(g, (enum egw_kind)k) };
	what[0] = '\0';
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]) && used < len; i++) {
		if (f[i].theirs == f[i].ours)
			continue;
		used += (size_t)snprintf(what + used, len - used, "%s%s %lu%s (ours %lu)",
					 used ? ", " : "", f[i].name,
					 (unsigned long)f[i].theirs,
					 i >= 4 ? " bytes per unit" : "",
					 (unsigned long)f[i].ours);
	}
	return what[0] ? EGW_E_GEOMETRY : EGW_E_OK;
}

/* A REGISTER refused on its content: counted, noted once, answered with
 * ERROR at most every 200 ms (an ACK is never answered). */
static void
refuse_register(struct egw_node *n, uint32_t peer, const struct egw_pkt *p,
		enum egw_err e, const char *what)
{
	struct node_peer *pe = &n->peers[peer];
	struct egw_msg m = { .type = EGW_MSG_ERROR, .state = EGW_MSG_REGISTER,
			     .error = (uint16_t)e };

	n->st.drops[e == EGW_E_GEOMETRY ? EGW_NODE_DROP_GEOMETRY :
		    e == EGW_E_NAME ? EGW_NODE_DROP_NAME :
		    EGW_NODE_DROP_PAYLOAD]++;
	node_note(n, peer, EGW_NODE_NOTE_REFUSED, e, true,
	     "REGISTER from peer %s (session %#lx) refused, %s: %s",
	     pe->cfg.name, (unsigned long)p->session, egw_err_key(e), what);
	if ((p->flags & EGW_MSGF_ACK) || n->now < pe->next_refusal)
		return;
	pe->next_refusal = n->now + REGISTER_RETRY_NS;
	n->st.register_refusals++;
	send_msg(n, peer, &m);
}

/* REGISTER content without what only names this datagram. */
static bool
same_content(const struct egw_register *a, const struct egw_register *b)
{
	struct egw_register x = *a, y = *b;

	x.session = y.session = 0;
	x.peer_session = y.peer_session = 0;
	x.peer_seq = y.peer_seq = 0;
	x.ack_qpn = y.ack_qpn = x.ack_psn = y.ack_psn = 0;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

/* Reach the peer's memory as `p` describes it (rule 7). */
static bool
apply_register(struct egw_node *n, uint32_t peer, const struct egw_pkt *p)
{
	struct node_peer *pe = &n->peers[peer];
	char what[256], why[200] = "";
	int rc = n->ops.peer_up != NULL ?
		 n->ops.peer_up(n->ops.ctx, peer, &p->reg, why, sizeof(why),
				n->now) : 0;

	if (rc != 0) {
		pe->reached = false;
		snprintf(what, sizeof(what), "cannot reach its %s: %s",
			 (p->reg.roles & EGW_ROLE_LANGUAGE) ? "pool" : "endpoint",
			 why[0] ? why : egw_strerror(rc));
		refuse_register(n, peer, p, EGW_E_UNREACHABLE, what);
		return false;
	}
	pe->applied = p->reg;
	pe->reached = true;
	if (n->sender != NULL && (p->reg.roles & EGW_ROLE_LANGUAGE))
		egw_xfer_sender_peer_add(n->sender, peer, p->reg.pool_blocks,
					 n->now);
	return true;
}

/* The adopted incarnation is over: its memory let go first, then every
 * room shared with it failed, its session retired for good. */
static void
forget_incarnation(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];

	if (n->ops.peer_down != NULL)
		n->ops.peer_down(n->ops.ctx, peer, false, n->now);
	if (n->sender != NULL)
		egw_xfer_sender_peer_dead(n->sender, peer, n->now);
	if (n->receiver != NULL)
		egw_xfer_receiver_peer_dead(n->receiver, peer, n->now);
	if (pe->adopted != 0)
		pe->retired[pe->nretired++ % NODE_RETIRED] = pe->adopted;
	pe->adopted = 0;
	pe->confirmed = false;
	pe->reached = false;
	pe->was_registered = false; /* the new one is noted when registered */
}

/* The adopted incarnation restarted (rule 2). */
static void
end_incarnation(struct egw_node *n, uint32_t peer)
{
	forget_incarnation(n, peer);
	n->st.peer_restarts++;
}

static void
adopt(struct egw_node *n, uint32_t peer, const struct egw_pkt *p, uint64_t old)
{
	struct node_peer *pe = &n->peers[peer];

	pe->adopted = p->session;
	pe->confirmed = false;
	/* what the session sent before this REGISTER was checked in the
	 * window of sessions not adopted (this one included): it goes over,
	 * so none of it is taken twice */
	if (pe->heard_win.session == p->session)
		pe->replay = pe->heard_win;
	else
		egw_proto_replay_start(&pe->replay, p->session, p->seq);
	if (n->receiver != NULL)
		egw_xfer_receiver_peer_add(n->receiver, peer, n->now);
	n->st.adoptions++;
	if (old != 0)
		node_note(n, peer, EGW_NODE_NOTE_RESTARTED, EGW_E_PEER_DEAD,
			  false, "peer %s restarted: session %#lx replaces "
			  "%#lx, the rooms shared with the old one failed",
			  pe->cfg.name, (unsigned long)p->session,
			  (unsigned long)old);
}

static void
on_register(struct egw_node *n, uint32_t peer, const struct egw_pkt *p)
{
	struct node_peer *pe = &n->peers[peer];
	const struct egw_register *r = &p->reg;
	bool ack = (p->flags & EGW_MSGF_ACK) != 0;
	bool names_us = r->peer_session == n->session, adopted_now = false;
	char what[160];

	n->st.registers_rx++;
	if (strncmp(r->name, pe->cfg.name, sizeof(r->name)) != 0) {
		snprintf(what, sizeof(what), "name '%s' (configured '%s')",
			 r->name, pe->cfg.name);
		refuse_register(n, peer, p, EGW_E_NAME, what);
		return;
	}
	/* heard only under the peer's own name: a REGISTER of ours sent
	 * back to us from the peer's address names us, and must not make
	 * our own session the one we name in the peer's REGISTERs */
	pe->heard = p->session;
	pe->heard_seq = p->seq;
	if (geometry_check(n, r, what, sizeof(what)) != EGW_E_OK) {
		refuse_register(n, peer, p, EGW_E_GEOMETRY, what);
		return;
	}
	if (p->session != pe->adopted) {
		uint64_t old = pe->adopted;

		/* no proof that it is live now: answer, adopt nothing
		 * (rule 1) */
		if (!names_us || !fresh_proof(n, pe, r->peer_seq)) {
			if (!ack)
				send_register(n, peer, p);
			return;
		}
		/* it is live now, so the old one is gone: ended even when
		 * the new content cannot be applied */
		if (old != 0)
			end_incarnation(n, peer);
		pe->proof = r->peer_seq;
		if (!apply_register(n, peer, p))
			return;
		adopt(n, peer, p, old);
		adopted_now = true;
		/* rule 6: at once; an answer carries ADOPTED as well */
		send_register(n, peer, ack ? NULL : p);
	} else if (!pe->reached || !same_content(r, &pe->applied)) {
		if (!apply_register(n, peer, p))
			return;
	}
	/* rule 4: it adopted us; an ACK must echo our current endpoint */
	if ((p->flags & EGW_MSGF_ADOPTED) && names_us) {
		if (!ack) {
			pe->confirmed = true;
		} else if (r->ack_qpn == pe->my_qpn && r->ack_psn == pe->my_psn) {
			pe->confirmed = true;
			/* our rebuilt endpoint is the peer's now: the driver
			 * may write again */
			if (pe->endpoint_unacked && n->ops.peer_up != NULL &&
			    n->ops.peer_up(n->ops.ctx, peer, r, what,
					   sizeof(what), n->now) == 0)
				pe->endpoint_unacked = false;
		}
	}
	if (!ack && !adopted_now)
		send_register(n, peer, p);
}

/* An ERROR answering our REGISTER: the peer did not take it. */
static void
on_register_error(struct egw_node *n, uint32_t peer, const struct egw_pkt *p)
{
	struct node_peer *pe = &n->peers[peer];
	enum egw_err e = (enum egw_err)p->msg.error;

	n->st.register_refused++;
	node_note(n, peer, EGW_NODE_NOTE_PEER_REFUSED, e, true,
	     "peer %s (session %#lx) refused our REGISTER: %s (%s)",
	     pe->cfg.name, (unsigned long)p->session, egw_err_key(e),
	     egw_strerror(e));
	/* from the incarnation we serve: ours is not confirmed any more, so
	 * REGISTERs go on until it takes one */
	if (p->session == pe->adopted)
		pe->confirmed = false;
}

/* Rule 11: the adopted session's window; REGISTERs (and ERRORs about
 * ours) from another session that is not retired, a window of their own;
 * anything else from another session: SESSION. */
static enum egw_proto_err
session_check(struct node_peer *pe, const struct egw_pkt *p, bool about_register)
{
	if (p->session == pe->adopted)
		return egw_proto_replay_check(&pe->replay, p->session, p->seq);
	if (!about_register || peer_retired(pe, p->session))
		return EGW_PROTO_ERR_SESSION;
	if (pe->heard_win.session != p->session) {
		egw_proto_replay_start(&pe->heard_win, p->session, p->seq);
		return EGW_PROTO_ERR_OK;
	}
	return egw_proto_replay_check(&pe->heard_win, p->session, p->seq);
}

/* An INIT for a room the sender does not know: validate it first, then
 * let the application open the room. true when the INIT was refused here
 * (answered with ERROR; nothing was created). */
static bool
produce_on_demand(struct egw_node *n, uint32_t peer, const struct egw_msg *m)
{
	int rc = egw_xfer_sender_check_init(n->sender, peer, m);

	if (rc == 0)
		rc = n->ops.unknown_room(n->ops.ctx, m->room, m->nranks, n->now);
	if (rc == 0 || rc == -EGW_E_UNKNOWN_ROOM || !egw_rc_is_err(rc))
		return false; /* the sender answers: STATUS, or unknown */
	egw_xfer_sender_refuse(n->sender, peer, m, (enum egw_err)-rc, n->now);
	return true;
}

static void
dispatch(struct egw_node *n, uint32_t peer, const struct egw_pkt *p)
{
	bool to_sender;

	switch (p->type) {
	case EGW_MSG_HEARTBEAT:
		if (n->sender != NULL)
			egw_xfer_sender_on_msg(n->sender, peer, &p->msg,
					       n->now);
		if (n->receiver != NULL)
			egw_xfer_receiver_on_msg(n->receiver, peer, &p->msg,
						 n->now);
		return;
	case EGW_MSG_INIT:
	case EGW_MSG_RESUME:
		to_sender = true;
		break;
	case EGW_MSG_ABORT:
		/* an ACK answers the receiver's ABORT */
		to_sender = (p->flags & EGW_MSGF_ACK) == 0;
		break;
	case EGW_MSG_STATUS:
		/* a poll is for the sender, a report for the receiver */
		to_sender = (p->flags & EGW_MSGF_POLL) != 0;
		break;
	case EGW_MSG_ERROR:
		to_sender = false;
		break;
	default:
		return;
	}
	if ((to_sender ? (void *)n->sender : (void *)n->receiver) == NULL) {
		n->st.drops[EGW_NODE_DROP_ROLE]++;
		return;
	}
	if (!to_sender) {
		egw_xfer_receiver_on_msg(n->receiver, peer, &p->msg, n->now);
		return;
	}
	if (p->type == EGW_MSG_INIT &&
	    n->peers[peer].state == EGW_NODE_PEER_LEAVING &&
	    !egw_node_sender_has_room(n, p->msg.room)) {
		/* removed: its rooms are ending, no new one starts */
		egw_xfer_sender_refuse(n->sender, peer, &p->msg,
				       EGW_E_UNKNOWN_PEER, n->now);
		return;
	}
	if (p->type == EGW_MSG_INIT && n->ops.unknown_room != NULL &&
	    !egw_node_sender_has_room(n, p->msg.room) &&
	    produce_on_demand(n, peer, &p->msg))
		return;
	egw_xfer_sender_on_msg(n->sender, peer, &p->msg, n->now);
}

static void
node_rx(struct egw_node *n, uint32_t peer, const uint8_t *buf, size_t len)
{
	struct node_peer *pe = &n->peers[peer];
	struct egw_pkt p;
	enum egw_proto_err e;
	bool about_register;

	e = egw_proto_decode(&n->key, buf, len, &p, &n->st.proto);
	if (e != EGW_PROTO_ERR_OK) {
		n->st.drops[EGW_NODE_DROP_PROTO]++;
		if (e == EGW_PROTO_ERR_MAC)
			node_note(n, peer, EGW_NODE_NOTE_AUTH, EGW_E_OK, true,
			     "datagrams from peer %s fail authentication: "
			     "different key?", pe->cfg.name);
		return;
	}
	about_register = p.type == EGW_MSG_REGISTER ||
			 (p.type == EGW_MSG_ERROR && p.msg.state == EGW_MSG_REGISTER);
	e = session_check(pe, &p, about_register);
	if (e != EGW_PROTO_ERR_OK) {
		n->st.proto.refused[e]++;
		n->st.drops[e == EGW_PROTO_ERR_SESSION ?
				    EGW_NODE_DROP_SESSION :
				    EGW_NODE_DROP_REPLAY]++;
		/* rule 6: tell a peer that speaks from another session who
		 * we are (at most every 200 ms) */
		if (e == EGW_PROTO_ERR_SESSION)
			nudge(n, peer);
		return;
	}
	/* it speaks: our REGISTERs to it go back to their pace */
	pe->register_ns = REGISTER_RETRY_NS;
	if (p.type == EGW_MSG_REGISTER) {
		on_register(n, peer, &p);
		return;
	}
	if (about_register) {
		on_register_error(n, peer, &p);
		return;
	}
	if (!peer_registered(pe)) {
		n->st.drops[EGW_NODE_DROP_NOT_REGISTERED]++;
		nudge(n, peer);
		return;
	}
	/* the engines order a request against a restart of its rank by it */
	p.msg.seq = p.seq;
	dispatch(n, peer, &p);
}

/* After anything that may change a peer's registration: note it once it
 * is registered, and clear the once-per-peer notes for the next trouble. */
static void
registered_check(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];
	bool reg = peer_registered(pe);

	if (reg && !pe->was_registered) {
		pe->noted = 0;
		node_note(n, peer, EGW_NODE_NOTE_REGISTERED, EGW_E_OK, false,
		     "peer %s registered: session %#lx, %u blocks",
		     pe->cfg.name, (unsigned long)pe->adopted,
		     pe->applied.pool_blocks);
	}
	pe->was_registered = reg;
}

void
egw_node_rx(struct egw_node *n, uint32_t ip, uint16_t port, const uint8_t *buf,
	    size_t len, uint64_t now)
{
	int peer;

	n->now = now;
	n->st.rx_datagrams++;
	peer = node_peer_find(n, ip, port);
	if (peer < 0) {
		/* not even decoded: nothing of an unknown source is parsed */
		n->st.drops[EGW_NODE_DROP_UNKNOWN_PEER]++;
		return;
	}
	node_rx(n, (uint32_t)peer, buf, len);
	registered_check(n, (uint32_t)peer);
	/* its registration may have changed either way */
	n->register_due = 0;
	node_drain_deferred(n);
}

/* A peer declared dead: every room shared with it has failed (in both
 * engines: one may not have noticed yet), then the driver lets go of its
 * memory, and the memory counts as not reached, so the same incarnation's
 * next REGISTER is applied anew (rule 7). */
static void
let_go(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];

	pe->silent = false;
	if (n->sender != NULL)
		egw_xfer_sender_peer_dead(n->sender, peer, n->now);
	if (n->receiver != NULL)
		egw_xfer_receiver_peer_dead(n->receiver, peer, n->now);
	if (n->ops.peer_down != NULL)
		n->ops.peer_down(n->ops.ctx, peer, true, n->now);
	pe->reached = false;
}

/* A peer alive but holding a quarantine past quarantine_ns: broken for
 * that memory (doc/xfer.md, "Quarantine"). Treated as a restart of its
 * incarnation, which it did not make: the driver lets go first (verbs:
 * its QP reset - nothing of it lands after this returns; shm: our
 * mapping of its pool), then every room shared with it fails and the
 * quarantined blocks come back, and its session is retired for good:
 * whatever it sends under it is refused (SESSION) until it starts anew
 * with a new session, which is adopted as any new incarnation. */
static void
fence(struct egw_node *n, uint32_t peer)
{
	struct node_peer *pe = &n->peers[peer];
	uint64_t old = pe->adopted;

	pe->fence = false;
	node_note(n, peer, EGW_NODE_NOTE_FENCED, EGW_E_ABORTED, false,
	     "peer %s (session %#lx) did not answer the ABORT of room %#lx "
	     "rank %u within quarantine_ms (%lu ms): fenced - its rooms "
	     "failed, its writes cut off (%s), its quarantined blocks back "
	     "in the pool, its session retired: it is served again once it "
	     "starts anew", pe->cfg.name, (unsigned long)old,
	     (unsigned long)pe->fence_room, pe->fence_rank,
	     (unsigned long)(n->quarantine_ns / 1000000),
	     "a verbs QP is reset; shm cannot unmap it from our pool");
	forget_incarnation(n, peer);
	pe->silent = false;
	n->st.peers_fenced++;
}

/* Our REGISTER to every peer that is not registered (or has not
 * acknowledged our endpoint) and is due; register_due becomes the next
 * such moment. A registered peer is due again only through something
 * that may end its registration, which sets register_due to 0. */
static void
registers_due(struct egw_node *n, uint64_t now)
{
	uint64_t due = UINT64_MAX;

	for (uint32_t i = 0; i < n->npeers; i++) {
		struct node_peer *pe = &n->peers[i];

		if (pe->state == EGW_NODE_PEER_FREE ||
		    (peer_registered(pe) && !pe->endpoint_unacked))
			continue;
		if (now >= pe->next_register) {
			send_register(n, i, NULL);
			/* reset by whatever it says (node_rx): a peer
			 * that is not up is asked less and less often */
			pe->next_register = now + pe->register_ns;
			pe->register_ns *= 2;
			if (pe->register_ns > REGISTER_BACKOFF_MAX_NS)
				pe->register_ns = REGISTER_BACKOFF_MAX_NS;
		}
		if (pe->next_register < due)
			due = pe->next_register;
	}
	n->register_due = due;
}

void
egw_node_tick(struct egw_node *n, uint64_t now)
{
	n->now = now;
	if (now >= n->register_due)
		registers_due(n, now);
	if (n->sender != NULL)
		egw_xfer_sender_tick(n->sender, now);
	if (n->receiver != NULL)
		egw_xfer_receiver_tick(n->receiver, now);
	if (n->nflagged > 0) {
		n->nflagged = 0;
		for (uint32_t i = 0; i < n->npeers; i++) {
			struct node_peer *pe = &n->peers[i];

			if (!pe->fence && !pe->silent)
				continue;
			if (pe->fence)
				fence(n, i);
			if (pe->silent)
				let_go(n, i);
			registered_check(n, i);
		}
		n->register_due = 0;
	}
	if (n->window_keys)
		node_windows_expire(n);
	node_drain_deferred(n);
	if (n->nleaving > 0)
		node_peers_reap(n);
}

uint64_t
egw_node_next_deadline(const struct egw_node *n, uint64_t now)
{
	uint64_t due = n->register_due, t;

	/* left for the tick by the last call: peers declared dead or to be
	 * fenced, removed peers whose slot may be freed */
	if (n->nflagged > 0 || n->nleaving > 0)
		return now;
	if (n->sender != NULL) {
		t = egw_xfer_sender_next_deadline(n->sender, now);
		due = t < due ? t : due;
	}
	if (n->receiver != NULL) {
		t = egw_xfer_receiver_next_deadline(n->receiver, now);
		due = t < due ? t : due;
	}
	if (n->window_keys) {
		t = node_windows_next_deadline(n);
		due = t < due ? t : due;
	}
	return due;
}

int
egw_node_reregister(struct egw_node *n, uint32_t peer, uint64_t now)
{
	struct node_peer *pe;

	if (n == NULL || peer >= n->npeers)
		return -EINVAL;
	pe = &n->peers[peer];
	n->now = now;
	pe->endpoint_unacked = true;
	n->st.reregisters++;
	send_register(n, peer, NULL);
	pe->next_register = now + REGISTER_RETRY_NS;
	n->register_due = 0;
	return 0;
}

void
egw_node_writes_done(struct egw_node *n, uint64_t cookie, bool ok,
		     uint64_t now)
{
	n->now = now;
	if (n->sender != NULL)
		egw_xfer_sender_writes_done(n->sender, cookie, ok, now);
	node_drain_deferred(n);
}

/* ---- application API --------------------------------------------------- */

bool
egw_node_peer_ready(const struct egw_node *n, uint32_t peer)
{
	return peer < n->npeers && n->peers[peer].state != EGW_NODE_PEER_FREE &&
	       peer_registered(&n->peers[peer]);
}

uint64_t
egw_node_peer_session(const struct egw_node *n, uint32_t peer)
{
	return peer < n->npeers ? n->peers[peer].adopted : 0;
}

/* A receive of one rank (ranks 0) or of a group of ranks (their set). */
static int
node_receiver_open(struct egw_node *n, uint64_t room, uint16_t rank,
		   uint16_t nranks, uint16_t ranks, uint32_t peer, bool dummy,
		   uint64_t now)
{
	int rc;

	if (n->receiver == NULL)
		return -ENOTSUP;
	if (peer >= n->nslots || n->peers[peer].state != EGW_NODE_PEER_ACTIVE)
		return -EGW_E_UNKNOWN_PEER;
	n->now = now;
	rc = egw_xfer_receiver_open_group(n->receiver, room, rank, nranks,
					  ranks, peer, dummy, now);
	node_drain_deferred(n);
	return rc;
}

int
egw_node_receiver_open(struct egw_node *n, uint64_t room, uint16_t rank,
		       uint16_t nranks, uint32_t peer, bool dummy, uint64_t now)
{
	return node_receiver_open(n, room, rank, nranks, 0, peer, dummy, now);
}

int
egw_node_receiver_open_group(struct egw_node *n, uint64_t room, uint16_t rank,
			     uint16_t nranks, uint16_t ranks, uint32_t peer,
			     uint64_t now)
{
	return node_receiver_open(n, room, rank, nranks, ranks, peer, false,
				  now);
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
	rc = egw_xfer_sender_open(n->sender, room, nranks, now);
	node_drain_deferred(n);
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
	rc = egw_xfer_sender_input(n->sender, room, total, runs, nruns, now);
	node_drain_deferred(n);
	return rc;
}

bool
egw_node_sender_has_room(const struct egw_node *n, uint64_t room)
{
	return n->sender != NULL && egw_xfer_sender_state(n->sender, room) >= 0;
}

int
egw_node_abort_room(struct egw_node *n, uint64_t room, uint16_t rank,
		    bool sender, uint64_t now)
{
	int rc;

	if ((sender ? (void *)n->sender : (void *)n->receiver) == NULL)
		return -ENOTSUP;
	n->now = now;
	rc = sender ? egw_xfer_sender_abort(n->sender, room, now) :
		      egw_xfer_receiver_abort(n->receiver, room, rank, now);
	node_drain_deferred(n);
	return rc;
}

void
egw_node_abort_all(struct egw_node *n, uint64_t now)
{
	n->now = now;
	if (n->sender != NULL)
		egw_xfer_sender_abort_all(n->sender, now);
	if (n->receiver != NULL)
		egw_xfer_receiver_abort_all(n->receiver, now);
	node_drain_deferred(n);
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

const struct egw_xfer_sender *
egw_node_sender(const struct egw_node *n)
{
	return n->sender;
}

const struct egw_xfer_receiver *
egw_node_receiver(const struct egw_node *n)
{
	return n->receiver;
}
