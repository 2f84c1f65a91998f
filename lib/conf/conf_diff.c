/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A running configuration against a newly loaded one: which settings a
 * reload may apply while rooms run, which would need a restart, which
 * peers come and go. Pure: two structs in, a list out; the gateway
 * decides what to do with it (doc/configuration.md, "Reloading").
 *
 * A setting is fixed when something set up at start depends on it: the
 * port's device, queues and workers, the pool and its payload driver,
 * the engines' room and run tables (sized once, nothing is allocated
 * afterwards), the sockets of attach and metrics, the name, roles and
 * key that peers registered with. Only what is compared here is seen:
 * a setting added to the file is added here too, as fixed unless the
 * gateway applies it while running.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "egw_conf.h"

#define MS 1000000ull

static void __attribute__((format(printf, 4, 5)))
note(struct egw_conf_change *arr, unsigned *n, unsigned *total, const char *fmt,
     ...)
{
	va_list ap;

	(*total)++;
	if (*n >= EGW_CONF_MAX_CHANGES)
		return;
	va_start(ap, fmt);
	vsnprintf(arr[*n].path, sizeof(arr[*n].path), fmt, ap);
	va_end(ap);
	(*n)++;
}

/* The change just noted gets its two values (nothing when it was not
 * stored: the arrays are full). */
static void
values(struct egw_conf_change *arr, unsigned n, unsigned total, const char *o,
       const char *v)
{
	if (n != total || n == 0)
		return;
	snprintf(arr[n - 1].old_val, sizeof(arr[n - 1].old_val), "%s", o);
	snprintf(arr[n - 1].new_val, sizeof(arr[n - 1].new_val), "%s", v);
}

struct cmp {
	struct egw_conf_diff *d;
	bool live;	 /* where the next change goes */
	char prefix[48]; /* "gateway.timers", "ports.[1]" */
};

static void
changed(struct cmp *c, const char *name, const char *o, const char *v)
{
	struct egw_conf_diff *d = c->d;

	if (strcmp(o, v) == 0)
		return;
	const char *dot = c->prefix[0] && name[0] ? "." : "";

	if (c->live) {
		note(d->live, &d->nlive, &d->live_total, "%s%s%s", c->prefix,
		     dot, name);
		values(d->live, d->nlive, d->live_total, o, v);
	} else {
		note(d->fixed, &d->nfixed, &d->fixed_total, "%s%s%s", c->prefix,
		     dot, name);
		values(d->fixed, d->nfixed, d->fixed_total, o, v);
	}
}

static void
num(struct cmp *c, const char *name, unsigned long long o, unsigned long long v)
{
	char a[24], b[24];

	if (o == v)
		return;
	snprintf(a, sizeof(a), "%llu", o);
	snprintf(b, sizeof(b), "%llu", v);
	changed(c, name, a, b);
}

static void
str(struct cmp *c, const char *name, const char *o, const char *v)
{
	char a[272], b[272];

	snprintf(a, sizeof(a), "\"%.260s\"", o);
	snprintf(b, sizeof(b), "\"%.260s\"", v);
	changed(c, name, a, b);
}

static void
flag(struct cmp *c, const char *name, bool o, bool v)
{
	changed(c, name, o ? "true" : "false", v ? "true" : "false");
}

/* An array of small integers as "[1, 2]". */
static void
ids(struct cmp *c, const char *name, const uint32_t *o, unsigned no,
    const uint32_t *v, unsigned nv)
{
	char a[112], b[112];
	const uint32_t *arr[2] = { o, v };
	unsigned cnt[2] = { no, nv };
	char *out[2] = { a, b };

	for (int k = 0; k < 2; k++) {
		size_t off = 0;

		out[k][off++] = '[';
		for (unsigned i = 0; i < cnt[k] && off < sizeof(a) - 16; i++)
			off += (size_t)snprintf(out[k] + off, sizeof(a) - off,
						"%s%u", i ? ", " : "",
						arr[k][i]);
		snprintf(out[k] + off, sizeof(a) - off, "]");
	}
	changed(c, name, a, b);
}

static void
ip(struct cmp *c, const char *name, uint32_t o, uint8_t op, uint32_t v,
   uint8_t vp)
{
	char a[24], b[24], ao[32], bo[32];

	egw_conf_ip_str(o, a, sizeof(a));
	egw_conf_ip_str(v, b, sizeof(b));
	if (op != 0 || vp != 0) {
		snprintf(ao, sizeof(ao), "%s/%u", a, op);
		snprintf(bo, sizeof(bo), "%s/%u", b, vp);
	} else {
		snprintf(ao, sizeof(ao), "%s", a);
		snprintf(bo, sizeof(bo), "%s", b);
	}
	changed(c, name, ao, bo);
}

static void
section(struct cmp *c, bool live, const char *prefix)
{
	c->live = live;
	snprintf(c->prefix, sizeof(c->prefix), "%s", prefix);
}

/* ---- gateway { } --------------------------------------------------------- */

static const char *
roles_str(uint16_t r)
{
	switch (r & (EGW_ROLE_ENCODE | EGW_ROLE_LANGUAGE)) {
	case EGW_ROLE_ENCODE:
		return "[\"encode\"]";
	case EGW_ROLE_LANGUAGE:
		return "[\"language\"]";
	case EGW_ROLE_ENCODE | EGW_ROLE_LANGUAGE:
		return "[\"encode\", \"language\"]";
	default:
		return "[]";
	}
}

static void
diff_identity(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	section(c, false, "gateway");
	str(c, "name", a->name, b->name);
	changed(c, "roles", roles_str(a->roles), roles_str(b->roles));
	str(c, "key_file", a->key_file, b->key_file);
	/* the same file may hold another key now: peers registered with
	 * the old one (never printed) */
	if (strcmp(a->key_file, b->key_file) == 0 &&
	    memcmp(&a->key, &b->key, sizeof(a->key)) != 0)
		changed(c, "key_file", "(its key)", "(another key)");
}

static void
diff_pool(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	static const char *const kinds[] = { "\"fixed\"", "\"adaptive\"" };

	section(c, false, "gateway.pool");
	num(c, "capacity_tokens", a->geom.capacity_tokens,
	    b->geom.capacity_tokens);
	num(c, "block_tokens", a->geom.block_tokens, b->geom.block_tokens);
	num(c, "hidden_size", a->geom.hidden_size, b->geom.hidden_size);
	str(c, "dtype", a->dtype, b->dtype);
	flag(c, "mrope", a->geom.mrope, b->geom.mrope);
	num(c, "aux_bytes", a->geom.aux_bytes, b->geom.aux_bytes);
	section(c, true, "gateway.pool.policy");
	changed(c, "kind", kinds[a->policy.kind == EGW_POLICY_ADAPTIVE],
		kinds[b->policy.kind == EGW_POLICY_ADAPTIVE]);
	num(c, "tokens", a->policy.tokens, b->policy.tokens);
	num(c, "percentile", a->policy.percentile, b->policy.percentile);
	num(c, "min_tokens", a->policy.min_tokens, b->policy.min_tokens);
	num(c, "max_tokens", a->policy.max_tokens, b->policy.max_tokens);
}

static void
diff_limits(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	/* the room and run tables are allocated once, at start */
	section(c, false, "gateway.limits");
	num(c, "max_rooms", a->max_rooms, b->max_rooms);
	num(c, "max_runs_per_room", a->max_runs_per_room, b->max_runs_per_room);
	section(c, true, "gateway.limits");
	num(c, "max_blocks_per_round", a->max_blocks_per_round,
	    b->max_blocks_per_round);
	num(c, "pipeline_depth", a->pipeline_depth, b->pipeline_depth);
}

static void
diff_timers(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	static const char *const names[] = { "rto_ms",	     "rto_max_ms",
					     "bootstrap_ms", "input_ms",
					     "round_ms",     "alloc_retry_ms",
					     "alloc_ms",     "admit_ms",
					     "heartbeat_ms", "peer_dead_ms",
					     "linger_ms",    "quarantine_ms" };
	const struct egw_xfer_timers *t[2] = { &a->timers, &b->timers };
	uint64_t v[2][12];

	for (int k = 0; k < 2; k++) {
		const uint64_t w[12] = {
			t[k]->rto_ns,	    t[k]->rto_max_ns,
			t[k]->bootstrap_ns, t[k]->input_ns,
			t[k]->round_ns,	    t[k]->alloc_retry_ns,
			t[k]->alloc_ns,	    t[k]->admit_ns,
			t[k]->heartbeat_ns, t[k]->peer_dead_ns,
			t[k]->linger_ns,    t[k]->quarantine_ns
		};

		memcpy(v[k], w, sizeof(w));
	}
	section(c, true, "gateway.timers");
	for (int i = 0; i < 12; i++)
		num(c, names[i], v[0][i] / MS, v[1][i] / MS);
}

static void
diff_tenant(struct cmp *c, const struct egw_conf_tenant *a,
	    const struct egw_conf_tenant *b)
{
	char pa[112] = "", pb[112] = "";

	str(c, "path", a->path, b->path);
	num(c, "mode", a->mode, b->mode);
	str(c, "group", a->group, b->group);
	ids(c, "allow_uids", a->allow_uids, a->nuids, b->allow_uids, b->nuids);
	ids(c, "allow_gids", a->allow_gids, a->ngids, b->allow_gids, b->ngids);
	for (unsigned i = 0; i < a->nports; i++)
		snprintf(pa + strlen(pa), sizeof(pa) - strlen(pa), "%s%s",
			 i ? ", " : "", a->ports[i]);
	for (unsigned i = 0; i < b->nports; i++)
		snprintf(pb + strlen(pb), sizeof(pb) - strlen(pb), "%s%s",
			 i ? ", " : "", b->ports[i]);
	changed(c, "ports", pa, pb);
}

static void
diff_attach(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	const struct egw_conf_attach *x = &a->attach, *y = &b->attach;
	char pre[48];

	section(c, false, "gateway");
	changed(c, "attach", x->enabled ? "(present)" : "(absent)",
		y->enabled ? "(present)" : "(absent)");
	if (!x->enabled || !y->enabled)
		return;
	section(c, false, "gateway.attach");
	str(c, "path", x->path, y->path);
	num(c, "mode", x->mode, y->mode);
	str(c, "group", x->group, y->group);
	ids(c, "allow_uids", x->allow_uids, x->nuids, y->allow_uids, y->nuids);
	ids(c, "allow_gids", x->allow_gids, x->ngids, y->allow_gids, y->ngids);
	num(c, "max_clients", x->max_clients, y->max_clients);
	num(c, "sq_entries", x->sq_entries, y->sq_entries);
	num(c, "cq_entries", x->cq_entries, y->cq_entries);
	num(c, "slots", x->slots, y->slots);
	num(c, "lease_ms", x->lease_ms, y->lease_ms);
	num(c, "cache_entries", x->cache_entries, y->cache_entries);
	num(c, "cache_tokens", x->cache_tokens, y->cache_tokens);
	num(c, "held_warn_ms", x->held_warn_ms, y->held_warn_ms);
	num(c, "tenants", x->ntenants, y->ntenants);
	for (unsigned i = 0; i < x->ntenants && i < y->ntenants; i++) {
		snprintf(pre, sizeof(pre), "gateway.attach.tenants.[%u]", i);
		section(c, false, pre);
		diff_tenant(c, &x->tenants[i], &y->tenants[i]);
	}
}

static void
diff_metrics(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	section(c, false, "gateway");
	changed(c, "metrics", a->metrics.enabled ? "(present)" : "(absent)",
		b->metrics.enabled ? "(present)" : "(absent)");
	if (!a->metrics.enabled || !b->metrics.enabled)
		return;
	section(c, false, "gateway.metrics");
	ip(c, "address", a->metrics.addr, 0, b->metrics.addr, 0);
	num(c, "port", a->metrics.port, b->metrics.port);
}

/* The cluster's thread holds its settings for its life (gw_cluster.c):
 * a change of any of them, or of the group's presence, needs a restart. */
static void
diff_cluster(struct cmp *c, const struct egw_conf *a, const struct egw_conf *b)
{
	const struct egw_conf_cluster *x = &a->cluster, *y = &b->cluster;

	section(c, false, "gateway");
	changed(c, "cluster", x->enabled ? "(present)" : "(absent)",
		y->enabled ? "(present)" : "(absent)");
	if (!x->enabled || !y->enabled)
		return;
	section(c, false, "gateway.cluster");
	str(c, "name", x->name, y->name);
	num(c, "endpoints", x->nendpoints, y->nendpoints);
	for (unsigned i = 0; i < x->nendpoints && i < y->nendpoints; i++)
		str(c, "endpoints", x->endpoints[i], y->endpoints[i]);
	num(c, "lease_ttl_s", x->lease_ttl_s, y->lease_ttl_s);
	num(c, "dial_timeout_ms", x->dial_timeout_ms, y->dial_timeout_ms);
	num(c, "request_timeout_ms", x->request_timeout_ms,
	    y->request_timeout_ms);
	str(c, "tls.ca_file", x->tls_ca, y->tls_ca);
	str(c, "tls.cert_file", x->tls_cert, y->tls_cert);
	str(c, "tls.key_file", x->tls_key, y->tls_key);
	str(c, "user", x->user, y->user);
	str(c, "password_file", x->password_file, y->password_file);
	/* the secret itself is never printed */
	if (strcmp(x->password, y->password) != 0)
		changed(c, "password", "(read)", "(changed)");
}

/* ---- ports ( ) ----------------------------------------------------------- */

static void
diff_payload(struct cmp *c, const struct egw_conf_payload *a,
	     const struct egw_conf_payload *b)
{
	static const char *const drv[] = { "\"shm\"", "\"verbs\"" };

	changed(c, "driver", drv[a->driver == EGW_PAYLOAD_VERBS],
		drv[b->driver == EGW_PAYLOAD_VERBS]);
	if (a->driver != b->driver)
		return;
	num(c, "segments", a->segments, b->segments);
	if (a->driver == EGW_PAYLOAD_SHM) {
		str(c, "path", a->path, b->path);
		return;
	}
	str(c, "device", a->device, b->device);
	num(c, "port", a->port, b->port);
	if (a->gid_index != b->gid_index) {
		char x[16], y[16];

		snprintf(x, sizeof(x), "%d", a->gid_index);
		snprintf(y, sizeof(y), "%d", b->gid_index);
		changed(c, "gid_index", a->gid_index < 0 ? "\"auto\"" : x,
			b->gid_index < 0 ? "\"auto\"" : y);
	}
	flag(c, "window_keys", a->window_keys, b->window_keys);
}

static void
diff_neighbours(struct cmp *c, const struct egw_conf_port *a,
		const struct egw_conf_port *b)
{
	bool same = a->nneigh == b->nneigh;

	for (unsigned i = 0; same && i < a->nneigh; i++)
		same = a->neigh[i].addr == b->neigh[i].addr &&
		       memcmp(a->neigh[i].mac, b->neigh[i].mac, 6) == 0;
	if (!same) {
		char x[40], y[40];

		snprintf(x, sizeof(x), "(%u entries)", a->nneigh);
		snprintf(y, sizeof(y), "(%u entries, changed)", b->nneigh);
		changed(c, "neighbours", x, y);
	}
}

static const struct egw_conf_peer *
peer_named(const struct egw_conf_port *p, const char *name, uint16_t *idx)
{
	for (uint16_t i = 0; i < p->npeers; i++)
		if (strcmp(p->peers[i].name, name) == 0) {
			*idx = i;
			return &p->peers[i];
		}
	return NULL;
}

static bool
same_peer(const struct egw_conf_peer *a, const struct egw_conf_peer *b)
{
	return a->addr == b->addr && a->udp_port == b->udp_port &&
	       strcmp(a->shm_path, b->shm_path) == 0;
}

/* Removed: in the old list and not in the new one as it was; added: in
 * the new list and not in the old one as it is. A changed peer is both. */
static void
diff_peers(struct egw_conf_diff *d, uint16_t port,
	   const struct egw_conf_port *a, const struct egw_conf_port *b)
{
	uint16_t j;

	for (uint16_t i = 0; i < a->npeers; i++) {
		const struct egw_conf_peer *q = peer_named(b, a->peers[i].name,
							   &j);

		if (q == NULL || !same_peer(&a->peers[i], q))
			d->removed[d->nremoved++] = (struct egw_conf_peer_ref){
				port, i
			};
	}
	for (uint16_t i = 0; i < b->npeers; i++) {
		const struct egw_conf_peer *q = peer_named(a, b->peers[i].name,
							   &j);

		if (q == NULL || !same_peer(q, &b->peers[i]))
			d->added[d->nadded++] = (struct egw_conf_peer_ref){
				port, i
			};
	}
}

static void
diff_port(struct cmp *c, uint16_t i, const struct egw_conf_port *a,
	  const struct egw_conf_port *b)
{
	char pre[48];
	uint32_t la[EGW_CONF_MAX_QUEUES], lb[EGW_CONF_MAX_QUEUES];

	snprintf(pre, sizeof(pre), "ports.[%u]", i);
	section(c, false, pre);
	str(c, "name", a->name, b->name);
	str(c, "device", a->device, b->device);
	ip(c, "address", a->addr, a->prefix, b->addr, b->prefix);
	num(c, "udp_port", a->udp_port, b->udp_port);
	num(c, "mtu", a->mtu, b->mtu);
	/* the device's offloads are set when it starts */
	str(c, "udp_checksum",
	    a->udp_checksum == EGW_UDP_CKSUM_ALWAYS ? "always" : "auto",
	    b->udp_checksum == EGW_UDP_CKSUM_ALWAYS ? "always" : "auto");
	num(c, "queues", a->queues, b->queues);
	/* the node's, the driver's and the neighbour table's slots */
	num(c, "max_peers", a->max_peers, b->max_peers);
	/* open groups of rooms are sized by it */
	num(c, "fanout_ranks", a->fanout_ranks, b->fanout_ranks);
	for (unsigned k = 0; k < a->nlcores && k < EGW_CONF_MAX_QUEUES; k++)
		la[k] = a->lcores[k];
	for (unsigned k = 0; k < b->nlcores && k < EGW_CONF_MAX_QUEUES; k++)
		lb[k] = b->lcores[k];
	ids(c, "lcores", la, a->nlcores, lb, b->nlcores);
	diff_neighbours(c, a, b);
	snprintf(pre, sizeof(pre), "ports.[%u].payload", i);
	section(c, false, pre);
	diff_payload(c, &a->payload, &b->payload);
	diff_peers(c->d, i, a, b);
}

int
egw_conf_diff(const struct egw_conf *cur, const struct egw_conf *next,
	      struct egw_conf_diff *d)
{
	struct cmp c = { .d = d };

	if (cur == NULL || next == NULL || d == NULL)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	diff_identity(&c, cur, next);
	diff_pool(&c, cur, next);
	diff_limits(&c, cur, next);
	diff_timers(&c, cur, next);
	diff_attach(&c, cur, next);
	diff_metrics(&c, cur, next);
	diff_cluster(&c, cur, next);
	section(&c, false, "");
	num(&c, "ports", cur->nports, next->nports);
	for (uint16_t i = 0; i < cur->nports && i < next->nports; i++)
		diff_port(&c, i, &cur->ports[i], &next->ports[i]);
	return d->fixed_total == 0 ? 0 : -EPERM;
}

bool
egw_conf_diff_empty(const struct egw_conf_diff *d)
{
	return d->fixed_total == 0 && d->live_total == 0 && d->nremoved == 0 &&
	       d->nadded == 0;
}
