/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fault-injecting wrapper (egw_payload_fault.h): forwards every op to
 * the driver underneath and adds, where asked, a link error after a given
 * batch and a write into a window whose room has ended. Its own writes go
 * through the driver's post() under EGW_PAYLOAD_FAULT_COOKIE, and their
 * completions are taken out of poll()'s before the caller sees them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egw_payload_fault.h"

#define flog(...) egw_payload_log("fault", __VA_ARGS__)

/* A write remembered towards one peer. */
struct fault_write {
	struct egw_write w;
	bool valid;
};

struct egw_payload {
	struct egw_payload_ops ops;      /* ours: handed to the caller */
	const struct egw_payload_ops *in; /* the driver underneath */
	struct egw_payload *inner;
	struct egw_payload_fault_params fp;
	uint64_t posts;                  /* post() calls, all peers */
	uint64_t rooms_sent;
	uint64_t faults;
	struct fault_write last[EGW_PAYLOAD_MAX_PEERS];  /* posted last */
	struct fault_write stale[EGW_PAYLOAD_MAX_PEERS]; /* armed */
};

/* ---- forwarded as they are ---------------------------------------------- */

static int
fault_open(const struct egw_payload_params *pp, uint64_t session,
	   struct egw_payload **out, struct egw_pool **pool)
{
	(void)pp; (void)session; (void)out; (void)pool;
	return -ENOTSUP; /* made by egw_payload_fault_wrap() over a driver */
}

static void
fault_describe(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
	       uint8_t gid[16], uint32_t *qpn)
{
	p->in->describe(p->inner, r, gid, qpn);
}

static void
fault_endpoint(struct egw_payload *p, uint32_t peer, uint32_t *qpn,
	       uint32_t *psn, uint16_t *mtu)
{
	p->in->endpoint(p->inner, peer, qpn, psn, mtu);
}

static int
fault_connect(struct egw_payload *p, uint32_t peer,
	      const struct egw_register *r)
{
	return p->in->connect(p->inner, peer, r);
}

static const char *
fault_why(const struct egw_payload *p, uint32_t peer)
{
	return p->in->why(p->inner, peer);
}

static void
fault_disconnect(struct egw_payload *p, uint32_t peer)
{
	p->in->disconnect(p->inner, peer);
}

static int
fault_peer_add(struct egw_payload *p, uint32_t slot,
	       const struct egw_payload_peer *pe)
{
	if (slot < EGW_PAYLOAD_MAX_PEERS) /* a new peer: nothing armed */
		p->last[slot].valid = p->stale[slot].valid = false;
	return p->in->peer_add(p->inner, slot, pe);
}

static void
fault_peer_remove(struct egw_payload *p, uint32_t slot)
{
	p->in->peer_remove(p->inner, slot);
}

static uint32_t
fault_changed(struct egw_payload *p, uint32_t *peers, uint32_t max)
{
	return p->in->changed(p->inner, peers, max);
}

static int
fault_window_bind(struct egw_payload *p, uint32_t peer,
		  const struct egw_run *run, uint32_t rkeys[EGW_KIND_MAX],
		  uint64_t cookie, uint64_t now)
{
	return p->in->window_bind(p->inner, peer, run, rkeys, cookie, now);
}

static void
fault_window_unbind(struct egw_payload *p, const struct egw_run *run,
		    uint64_t cookie, uint64_t now)
{
	p->in->window_unbind(p->inner, run, cookie, now);
}

static void
fault_stats(const struct egw_payload *p, struct egw_payload_stats *st)
{
	p->in->stats(p->inner, st);
}

static int
fault_pool_fd(const struct egw_payload *p, uint64_t *offset, uint64_t *bytes)
{
	return p->in->pool_fd(p->inner, offset, bytes);
}

static const struct egw_pool_mem *
fault_pool_mem(const struct egw_payload *p)
{
	return p->in->pool_mem(p->inner);
}

static void
fault_close(struct egw_payload *p)
{
	if (p == NULL)
		return;
	p->in->close(p->inner);
	free(p);
}

/* ---- the faults --------------------------------------------------------- */

/* One write of the fault's own, whose completion nobody waits for. */
static void
fault_post_own(struct egw_payload *p, uint32_t peer, const struct egw_write *w)
{
	int rc = p->in->post(p->inner, peer, w, 1, EGW_PAYLOAD_FAULT_COOKIE);

	if (rc != 0)
		flog("test fault: the driver refused the fault's write to "
		     "peer %u: %s", peer, strerror(-rc));
	else
		p->faults++;
}

/* The batch's first write once more, under a key the peer never gave
 * (every bit of the real one flipped), posted just ahead of the batch:
 * the peer's device refuses it and our link fails with the batch behind
 * it, as a failure on the wire in the middle of a room would. */
static void
link_error(struct egw_payload *p, uint32_t peer, const struct egw_write *w)
{
	struct egw_write bad = *w;

	bad.rkey = ~w->rkey;
	flog("test fault: link to peer %u fails at batch %llu (a write under "
	     "rkey %#x ahead of it)",
	     peer, (unsigned long long)p->fp.link_error_at, bad.rkey);
	fault_post_own(p, peer, &bad);
}

static int
fault_post(struct egw_payload *p, uint32_t peer, const struct egw_write *w,
	   uint32_t n, uint64_t cookie)
{
	int rc;

	if (++p->posts == p->fp.link_error_at && n > 0 &&
	    peer < EGW_PAYLOAD_MAX_PEERS)
		link_error(p, peer, &w[0]);
	rc = p->in->post(p->inner, peer, w, n, cookie);
	if (n == 0 || peer >= EGW_PAYLOAD_MAX_PEERS)
		return rc;
	/* the batch's last write, for a stale write later: with one room
	 * at a time, the last write posted is that room's */
	p->last[peer].w = w[n - 1];
	p->last[peer].valid = true;
	return rc;
}

static uint32_t
fault_poll(struct egw_payload *p, struct egw_payload_cpl *c, uint32_t max,
	   uint64_t now)
{
	uint32_t n, kept;

	/* a burst of the fault's own completions alone is no end of the
	 * driver's: 0 only when the driver has nothing more */
	do {
		n = p->in->poll(p->inner, c, max, now);
		kept = 0;
		for (uint32_t i = 0; i < n; i++)
			if (c[i].cookie != EGW_PAYLOAD_FAULT_COOKIE)
				c[kept++] = c[i];
	} while (kept == 0 && n > 0);
	return kept;
}

void
egw_payload_fault_room_sent(struct egw_payload *p)
{
	uint64_t n = ++p->rooms_sent, at = p->fp.stale_write_at;

	if (at == 0 || (n != at && n != at + 1))
		return;
	for (uint32_t i = 0; i < EGW_PAYLOAD_MAX_PEERS; i++) {
		if (n == at) { /* the Nth room's last write, to each peer */
			p->stale[i] = p->last[i];
			continue;
		}
		if (!p->stale[i].valid)
			continue;
		flog("test fault: room %llu has ended; %llu bytes written once "
		     "more to peer %u under rkey %#x", (unsigned long long)at,
		     (unsigned long long)p->stale[i].w.bytes, i,
		     p->stale[i].w.rkey);
		fault_post_own(p, i, &p->stale[i].w);
		p->stale[i].valid = false;
	}
}

uint64_t
egw_payload_fault_count(const struct egw_payload *p)
{
	return p->faults;
}

int
egw_payload_fault_wrap(const struct egw_payload_ops **ops,
		       struct egw_payload **p,
		       const struct egw_payload_fault_params *fp)
{
	const struct egw_payload_ops *in = *ops;
	struct egw_payload *f;

	if (in == NULL || in->post == NULL || in->poll == NULL ||
	    in->close == NULL || in->describe == NULL || in->connect == NULL)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->in = in;
	f->inner = *p;
	f->fp = *fp;
	/* the driver's optional ops stay optional: NULL where it has none */
	f->ops = (struct egw_payload_ops){
		.name = in->name,
		.open = fault_open,
		.describe = fault_describe,
		.endpoint = in->endpoint ? fault_endpoint : NULL,
		.connect = fault_connect,
		.why = in->why ? fault_why : NULL,
		.disconnect = in->disconnect ? fault_disconnect : NULL,
		.disconnect_silent = in->disconnect_silent,
		.peer_add = in->peer_add ? fault_peer_add : NULL,
		.peer_remove = in->peer_remove ? fault_peer_remove : NULL,
		.post = fault_post,
		.changed = in->changed ? fault_changed : NULL,
		.window_bind = in->window_bind ? fault_window_bind : NULL,
		.window_unbind = in->window_unbind ? fault_window_unbind : NULL,
		.poll = fault_poll,
		.stats = in->stats ? fault_stats : NULL,
		.pool_fd = in->pool_fd ? fault_pool_fd : NULL,
		.pool_mem = in->pool_mem ? fault_pool_mem : NULL,
		.close = fault_close,
	};
	*ops = &f->ops;
	*p = f;
	return 0;
}
