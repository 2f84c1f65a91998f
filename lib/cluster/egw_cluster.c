/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The membership state machine (egw_cluster.h, doc/cluster.md):
 *
 *   [auth] -> grant -> put (txn "create if absent", one per record)
 *     -> range the prefix (revision R) -> watch from R + 1, keep-alive
 *     every TTL/3
 *
 * Any failure keeps the peers known, backs off (doubling, bounded,
 * jittered), then probes the old lease (alive: straight to the range;
 * gone: grant and put again) and lists again: the new list is diffed
 * against the known peers, so a delete missed while away is seen. A watch
 * answered "compacted" lists again. One request at a time per channel;
 * what is in flight on a channel is dropped (ACT_CANCEL) before a new
 * plan starts.
 */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_etcd.h"
#include "egw_cluster.h"

#define PREFIX_LEN (8 + EGW_CLUSTER_NAME_LEN + 2)
#define KEY_LEN (PREFIX_LEN + EGW_CLUSTER_NAME_LEN)

/* What the request on the main channel is. */
enum main_op {
	OP_NONE = 0,
	OP_AUTH,
	OP_GRANT,
	OP_PUT,
	OP_LIST,
	OP_PROBE,
	OP_DEL,
	OP_REVOKE
};

struct peer {
	char name[EGW_CLUSTER_NAME_LEN]; /* the key's last part */
	struct egw_cluster_record rec;
	bool valid; /* rec parsed and checked */
	int64_t mod_revision;
	uint32_t held;			      /* 1 << self index */
	uint8_t logged[EGW_CLUSTER_MAX_SELF]; /* compat code + 1 last logged */
	bool bad_logged;
	uint64_t gen; /* the last list that had it */
};

struct egw_cluster {
	struct egw_cluster_conf conf;
	enum egw_cluster_state st;
	char prefix[PREFIX_LEN]; /* "/embgw/<cluster>/" */
	char token[512];
	int64_t lease;
	int64_t rev;
	enum main_op op;
	unsigned put_idx;
	bool put_missing; /* PUT only the records found missing */
	bool missing[EGW_CLUSTER_MAX_SELF];
	bool in_step_once; /* reached WATCH at least once */
	bool inflight[EGW_CLUSTER_CH_MAX];
	char body[EGW_CLUSTER_CH_MAX][EGW_CLUSTER_BODY_MAX];
	uint64_t ka_due, backoff_due;
	uint32_t backoff_n;
	bool connected, outage_logged;
	uint32_t failures;
	char last_error[EGW_CLUSTER_TEXT_LEN];
	struct peer *peers;
	uint32_t npeers, cap;
	uint64_t gen;
	struct egw_cluster_action *q;
	uint32_t qhead, qlen, qcap;
	uint64_t rng;
};

static const char *const state_names[] = {
	[EGW_CLUSTER_ST_INIT] = "init",
	[EGW_CLUSTER_ST_AUTH] = "auth",
	[EGW_CLUSTER_ST_GRANT] = "grant",
	[EGW_CLUSTER_ST_PUT] = "put",
	[EGW_CLUSTER_ST_LIST] = "list",
	[EGW_CLUSTER_ST_WATCH] = "watch",
	[EGW_CLUSTER_ST_BACKOFF] = "backoff",
	[EGW_CLUSTER_ST_PROBE] = "probe",
	[EGW_CLUSTER_ST_STOPPING] = "stopping",
	[EGW_CLUSTER_ST_STOPPED] = "stopped",
	[EGW_CLUSTER_ST_REFUSED] = "refused",
};

const char *
egw_cluster_state_name(enum egw_cluster_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ?
		       state_names[s] :
		       "?";
}

/* ---- actions ----------------------------------------------------------- */

static struct egw_cluster_action *
push(struct egw_cluster *c, enum egw_cluster_act_kind kind)
{
	struct egw_cluster_action *a;

	if (c->qlen == c->qcap) {
		uint32_t ncap = c->qcap ? 2 * c->qcap : 64;
		struct egw_cluster_action *nq = malloc(ncap * sizeof(*nq));

		if (nq == NULL)
			return NULL;
		for (uint32_t i = 0; i < c->qlen; i++)
			nq[i] = c->q[(c->qhead + i) % c->qcap];
		free(c->q);
		c->q = nq;
		c->qcap = ncap;
		c->qhead = 0;
	}
	a = &c->q[(c->qhead + c->qlen++) % c->qcap];
	memset(a, 0, offsetof(struct egw_cluster_action, peer));
	a->kind = kind;
	a->text[0] = '\0';
	return a;
}

bool
egw_cluster_next_action(struct egw_cluster *c, struct egw_cluster_action *a)
{
	if (c->qlen == 0)
		return false;
	*a = c->q[c->qhead];
	c->qhead = (c->qhead + 1) % c->qcap;
	c->qlen--;
	return true;
}

static void __attribute__((format(printf, 3, 4)))
logf_(struct egw_cluster *c, enum egw_cluster_level lvl, const char *fmt, ...)
{
	struct egw_cluster_action *a = push(c, EGW_CLUSTER_ACT_LOG);
	va_list ap;

	if (a == NULL)
		return;
	a->level = lvl;
	va_start(ap, fmt);
	vsnprintf(a->text, sizeof(a->text), fmt, ap);
	va_end(ap);
}

/* Send `o` (consumed) to `path` on `ch`. */
static void
request(struct egw_cluster *c, enum egw_cluster_chan ch, const char *path,
	json_object *o)
{
	struct egw_cluster_action *a;

	if (!etcd_body(o, c->body[ch], sizeof(c->body[ch])))
		snprintf(c->body[ch], sizeof(c->body[ch]), "{}");
	a = push(c, EGW_CLUSTER_ACT_REQUEST);
	if (a == NULL)
		return;
	a->chan = ch;
	a->path = path;
	a->body = c->body[ch];
	a->token = c->token[0] ? c->token : NULL;
	c->inflight[ch] = true;
}

static void
cancel(struct egw_cluster *c, enum egw_cluster_chan ch)
{
	struct egw_cluster_action *a;

	if (!c->inflight[ch])
		return;
	c->inflight[ch] = false;
	a = push(c, EGW_CLUSTER_ACT_CANCEL);
	if (a != NULL)
		a->chan = ch;
}

static void
cancel_all(struct egw_cluster *c)
{
	for (unsigned ch = 0; ch < EGW_CLUSTER_CH_MAX; ch++)
		cancel(c, (enum egw_cluster_chan)ch);
	c->op = OP_NONE;
}

/* ---- keys -------------------------------------------------------------- */

static json_object *
b64_str(const char *s)
{
	char out[2 * KEY_LEN + 8];

	if (!etcd_b64(s, strlen(s), out, sizeof(out)))
		out[0] = '\0';
	return json_object_new_string(out);
}

static void
self_key(const struct egw_cluster *c, unsigned i, char *out, size_t n)
{
	snprintf(out, n, "%s%s", c->prefix, c->conf.self[i].name);
}

static json_object *
i64_str(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_object_new_string(s);
}

/* ---- requests ---------------------------------------------------------- */

static void
send_auth(struct egw_cluster *c)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "name", json_object_new_string(c->conf.user));
	json_object_object_add(o, "password",
			       json_object_new_string(c->conf.password));
	c->st = EGW_CLUSTER_ST_AUTH;
	c->op = OP_AUTH;
	request(c, EGW_CLUSTER_CH_MAIN, "/v3/auth/authenticate", o);
}

static void
send_grant(struct egw_cluster *c)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "TTL",
			       json_object_new_int64(c->conf.lease_ttl_s));
	c->st = EGW_CLUSTER_ST_GRANT;
	c->op = OP_GRANT;
	request(c, EGW_CLUSTER_CH_MAIN, "/v3/lease/grant", o);
}

static void
send_lease_op(struct egw_cluster *c, enum egw_cluster_chan ch, const char *path)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "ID", i64_str(c->lease));
	request(c, ch, path, o);
}

/* Our record i, created only where no key is: a second gateway of the same
 * name finds the first's record instead of overwriting it. */
static void
send_put(struct egw_cluster *c, unsigned i)
{
	char key[KEY_LEN], val[EGW_CLUSTER_RECORD_MAX];
	char v64[EGW_CLUSTER_RECORD_MAX * 4 / 3 + 8];
	json_object *o = json_object_new_object();
	json_object *cmp = json_object_new_object();
	json_object *put = json_object_new_object();
	json_object *rp = json_object_new_object();
	json_object *rr = json_object_new_object();
	json_object *rg = json_object_new_object();
	json_object *arr;
	int n;

	self_key(c, i, key, sizeof(key));
	n = egw_cluster_record_write(&c->conf.self[i], val, sizeof(val));
	if (n < 0 || !etcd_b64(val, (size_t)n, v64, sizeof(v64)))
		v64[0] = '\0';
	json_object_object_add(cmp, "key", b64_str(key));
	json_object_object_add(cmp, "target", json_object_new_string("CREATE"));
	json_object_object_add(cmp, "result", json_object_new_string("EQUAL"));
	json_object_object_add(cmp, "create_revision", i64_str(0));
	arr = json_object_new_array();
	json_object_array_add(arr, cmp);
	json_object_object_add(o, "compare", arr);
	json_object_object_add(rp, "key", b64_str(key));
	json_object_object_add(rp, "value", json_object_new_string(v64));
	json_object_object_add(rp, "lease", i64_str(c->lease));
	json_object_object_add(put, "request_put", rp);
	arr = json_object_new_array();
	json_object_array_add(arr, put);
	json_object_object_add(o, "success", arr);
	json_object_object_add(rr, "key", b64_str(key));
	json_object_object_add(rg, "request_range", rr);
	arr = json_object_new_array();
	json_object_array_add(arr, rg);
	json_object_object_add(o, "failure", arr);
	c->st = c->in_step_once && c->st == EGW_CLUSTER_ST_WATCH ?
			EGW_CLUSTER_ST_WATCH :
			EGW_CLUSTER_ST_PUT;
	c->op = OP_PUT;
	c->put_idx = i;
	request(c, EGW_CLUSTER_CH_MAIN, "/v3/kv/txn", o);
}

/* [prefix, prefix + 1): the prefix's last byte '/' becomes '0' */
static void
add_range(struct egw_cluster *c, json_object *o)
{
	char end[PREFIX_LEN];
	size_t n = strlen(c->prefix);

	memcpy(end, c->prefix, n + 1);
	end[n - 1]++;
	json_object_object_add(o, "key", b64_str(c->prefix));
	json_object_object_add(o, "range_end", b64_str(end));
}

static void
send_list(struct egw_cluster *c)
{
	json_object *o = json_object_new_object();

	add_range(c, o);
	c->st = EGW_CLUSTER_ST_LIST;
	c->op = OP_LIST;
	request(c, EGW_CLUSTER_CH_MAIN, "/v3/kv/range", o);
}

static void
send_watch(struct egw_cluster *c)
{
	json_object *o = json_object_new_object();
	json_object *cr = json_object_new_object();

	add_range(c, cr);
	json_object_object_add(cr, "start_revision", i64_str(c->rev + 1));
	json_object_object_add(o, "create_request", cr);
	request(c, EGW_CLUSTER_CH_WATCH, "/v3/watch", o);
}

static void
send_del(struct egw_cluster *c, unsigned i)
{
	char key[KEY_LEN];
	json_object *o = json_object_new_object();

	self_key(c, i, key, sizeof(key));
	json_object_object_add(o, "key", b64_str(key));
	c->op = OP_DEL;
	c->put_idx = i;
	request(c, EGW_CLUSTER_CH_MAIN, "/v3/kv/deleterange", o);
}

/* ---- peers ------------------------------------------------------------- */

static struct peer *
peer_find(struct egw_cluster *c, const char *name)
{
	for (uint32_t i = 0; i < c->npeers; i++)
		if (strcmp(c->peers[i].name, name) == 0)
			return &c->peers[i];
	return NULL;
}

static struct peer *
peer_add(struct egw_cluster *c, const char *name)
{
	struct peer *p;

	if (c->npeers == c->cap) {
		uint32_t ncap = c->cap ? 2 * c->cap : 16;
		struct peer *np = realloc(c->peers, ncap * sizeof(*np));

		if (np == NULL)
			return NULL;
		c->peers = np;
		c->cap = ncap;
	}
	p = &c->peers[c->npeers++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	return p;
}

static void
release(struct egw_cluster *c, struct peer *p, unsigned i, const char *why)
{
	struct egw_cluster_action *a;

	if (!(p->held & (1u << i)))
		return;
	p->held &= ~(1u << i);
	a = push(c, EGW_CLUSTER_ACT_RELEASE);
	if (a == NULL)
		return;
	a->self = i;
	a->peer = p->rec;
	snprintf(a->peer.name, sizeof(a->peer.name), "%s", p->name);
	snprintf(a->text, sizeof(a->text), "%s", why);
}

static void
release_all(struct egw_cluster *c, struct peer *p, const char *why)
{
	for (unsigned i = 0; i < c->conf.nself; i++)
		release(c, p, i, why);
}

static void
peer_drop(struct egw_cluster *c, struct peer *p, const char *why)
{
	/* only what was a peer leaves; a skipped record just goes */
	if (p->held != 0)
		logf_(c, EGW_CLUSTER_INFO, "cluster %s: peer %s left (%s)",
		      c->conf.cluster, p->name, why);
	release_all(c, p, why);
	*p = c->peers[--c->npeers];
}

static bool
same_place(const struct egw_cluster_record *a,
	   const struct egw_cluster_record *b)
{
	return a->addr == b->addr && a->udp_port == b->udp_port &&
	       strcmp(a->shm_path, b->shm_path) == 0;
}

/* A record's new value: held by every compatible identity of ours,
 * released by the others; what is skipped is logged once per reason. */
static void
peer_decide(struct egw_cluster *c, struct peer *p,
	    const struct egw_cluster_record *old)
{
	for (unsigned i = 0; i < c->conf.nself; i++) {
		char why[EGW_CLUSTER_TEXT_LEN - 96];
		enum egw_cluster_compat k = egw_cluster_compat(&c->conf.self[i],
							       &p->rec, why,
							       sizeof(why));
		struct egw_cluster_action *a;

		if (k != EGW_CLUSTER_COMPAT_OK) {
			release(c, p, i, "its record is not compatible");
			if (p->logged[i] != k + 1)
				logf_(c, EGW_CLUSTER_WARN,
				      "cluster %s: %s "
				      "skipped for %s: %s",
				      c->conf.cluster, p->name,
				      c->conf.self[i].name, why);
			p->logged[i] = (uint8_t)(k + 1);
			continue;
		}
		p->logged[i] = 0;
		if ((p->held & (1u << i)) && old != NULL &&
		    same_place(old, &p->rec))
			continue;
		release(c, p, i, "its record moved");
		a = push(c, EGW_CLUSTER_ACT_HOLD);
		if (a == NULL)
			continue;
		a->self = i;
		a->peer = p->rec;
		p->held |= 1u << i;
	}
}

static int
own_index(const struct egw_cluster *c, const char *name)
{
	for (unsigned i = 0; i < c->conf.nself; i++)
		if (strcmp(c->conf.self[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The name under our prefix of a decoded key, or NULL when the key is
 * not one of a record (deeper or outside). */
static const char *
key_name(const struct egw_cluster *c, const char *key)
{
	size_t n = strlen(c->prefix);
	const char *name = key + n;

	if (strncmp(key, c->prefix, n) != 0 || name[0] == '\0' ||
	    strchr(name, '/') != NULL || strlen(name) >= EGW_CLUSTER_NAME_LEN)
		return NULL;
	return name;
}

/* A key-value of etcd's: a record put (or listed). */
static void
on_kv(struct egw_cluster *c, json_object *kv)
{
	char key[KEY_LEN * 2], val[EGW_CLUSTER_RECORD_MAX + 1];
	char why[EGW_CLUSTER_TEXT_LEN - 96];
	struct egw_cluster_record old;
	json_object *k, *v;
	const char *name;
	struct peer *p;
	long vlen = -1;
	uint32_t held;
	bool had;
	int own, rc;

	if (!json_object_object_get_ex(kv, "key", &k) ||
	    etcd_unb64(json_object_get_string(k), key, sizeof(key)) < 0 ||
	    (name = key_name(c, key)) == NULL)
		return;
	own = own_index(c, name);
	if (own >= 0) {
		if (etcd_i64(kv, "lease", 0) != c->lease)
			logf_(c, EGW_CLUSTER_ERR,
			      "cluster %s: our name %s is "
			      "held by lease %" PRId64 ", not ours",
			      c->conf.cluster, name, etcd_i64(kv, "lease", 0));
		else
			c->missing[own] = false;
		return;
	}
	p = peer_find(c, name);
	if (p == NULL && (p = peer_add(c, name)) == NULL)
		return;
	p->gen = c->gen;
	if (p->mod_revision == etcd_i64(kv, "mod_revision", -1) &&
	    p->mod_revision > 0)
		return; /* listed again, unchanged */
	p->mod_revision = etcd_i64(kv, "mod_revision", -1);
	old = p->rec;
	had = p->valid;
	if (json_object_object_get_ex(kv, "value", &v))
		vlen = etcd_unb64(json_object_get_string(v), val, sizeof(val));
	rc = vlen < 0 ? -EGW_CLUSTER_E_JSON :
			egw_cluster_record_parse(val, (size_t)vlen, &p->rec,
						 why, sizeof(why));
	if (vlen < 0)
		snprintf(why, sizeof(why),
			 "a value of more than %d bytes or "
			 "not base64",
			 EGW_CLUSTER_RECORD_MAX);
	if (rc == 0 && strcmp(p->rec.name, name) != 0) {
		rc = -EGW_CLUSTER_E_KEY_NAME;
		snprintf(why, sizeof(why), "name '%s' under key '%s'",
			 p->rec.name, name);
	}
	p->valid = rc == 0;
	if (rc != 0) {
		release_all(c, p, "its record is not valid");
		if (!p->bad_logged)
			logf_(c, EGW_CLUSTER_WARN,
			      "cluster %s: record %s "
			      "skipped: %s: %s",
			      c->conf.cluster, name, egw_cluster_err_name(rc),
			      why);
		p->bad_logged = true;
		return;
	}
	p->bad_logged = false;
	held = p->held;
	peer_decide(c, p, had ? &old : NULL);
	if (held == 0 && p->held != 0)
		logf_(c, EGW_CLUSTER_INFO, "cluster %s: peer %s joined",
		      c->conf.cluster, name);
}

static void
on_delete(struct egw_cluster *c, json_object *kv)
{
	char key[KEY_LEN * 2];
	json_object *k;
	const char *name;
	struct peer *p;
	int own;

	if (!json_object_object_get_ex(kv, "key", &k) ||
	    etcd_unb64(json_object_get_string(k), key, sizeof(key)) < 0 ||
	    (name = key_name(c, key)) == NULL)
		return;
	own = own_index(c, name);
	if (own >= 0) {
		logf_(c, EGW_CLUSTER_WARN,
		      "cluster %s: our record %s was "
		      "deleted: publishing it again",
		      c->conf.cluster, name);
		c->missing[own] = true;
		if (c->op == OP_NONE) {
			c->put_missing = true;
			send_put(c, (unsigned)own);
		}
		return;
	}
	p = peer_find(c, name);
	if (p != NULL)
		peer_drop(c, p, "its key was deleted or its lease ended");
}

/* ---- the plan ---------------------------------------------------------- */

static uint64_t
rnd(struct egw_cluster *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng;
}

/* From the top: authenticate if asked, then find our lease again or
 * take a new one. */
static void
begin(struct egw_cluster *c)
{
	if (c->conf.user[0] != '\0' && c->token[0] == '\0')
		send_auth(c);
	else if (c->lease != 0) {
		c->st = EGW_CLUSTER_ST_PROBE;
		c->op = OP_PROBE;
		send_lease_op(c, EGW_CLUSTER_CH_MAIN, "/v3/lease/keepalive");
	} else
		send_grant(c);
}

static void
fail(struct egw_cluster *c, const char *what, const char *why, uint64_t now)
{
	uint64_t b = c->conf.backoff_min_ns;

	c->failures++;
	snprintf(c->last_error, sizeof(c->last_error), "%s: %s", what, why);
	if (c->st == EGW_CLUSTER_ST_STOPPING) {
		cancel_all(c);
		logf_(c, EGW_CLUSTER_WARN,
		      "cluster %s: %s at stop: our records "
		      "go when the lease ends",
		      c->conf.cluster, c->last_error);
		c->st = EGW_CLUSTER_ST_STOPPED;
		push(c, EGW_CLUSTER_ACT_STOPPED);
		return;
	}
	cancel_all(c);
	for (uint32_t i = 0; i < c->backoff_n && b < c->conf.backoff_max_ns;
	     i++)
		b *= 2;
	if (b > c->conf.backoff_max_ns)
		b = c->conf.backoff_max_ns;
	c->backoff_n++;
	/* half to all of it: gateways that lost etcd together do not all
	 * come back in the same instant */
	b = b / 2 + rnd(c) % (b / 2 + 1);
	c->backoff_due = now + b;
	/* one line per outage; the rest in telemetry */
	logf_(c, c->outage_logged ? EGW_CLUSTER_DEBUG : EGW_CLUSTER_WARN,
	      "cluster %s: etcd %s (%s): keeping %u peer(s), retrying in "
	      "%" PRIu64 " ms",
	      c->conf.cluster, c->in_step_once ? "lost" : "unreachable",
	      c->last_error, c->npeers, b / 1000000);
	c->outage_logged = true;
	c->connected = false;
	c->st = EGW_CLUSTER_ST_BACKOFF;
}

static void
in_step(struct egw_cluster *c, uint64_t now)
{
	uint32_t held = 0;

	for (uint32_t i = 0; i < c->npeers; i++)
		held += c->peers[i].held != 0;
	c->st = EGW_CLUSTER_ST_WATCH;
	c->op = OP_NONE;
	logf_(c, EGW_CLUSTER_INFO,
	      "cluster %s: %s at revision %" PRId64 ", lease %" PRId64
	      ", %u record(s) of others, %u peer(s)",
	      c->conf.cluster, c->in_step_once ? "in step again" : "in step",
	      c->rev, c->lease, c->npeers, held);
	c->in_step_once = true;
	c->outage_logged = false;
	c->backoff_n = 0;
	(void)now;
	send_watch(c);
}

/* Records still to put: the first index >= from that is missing. */
static int
next_put(struct egw_cluster *c, unsigned from)
{
	for (unsigned i = from; i < c->conf.nself; i++)
		if (!c->put_missing || c->missing[i])
			return (int)i;
	return -1;
}

static void
put_from(struct egw_cluster *c, unsigned from, uint64_t now)
{
	int i = next_put(c, from);

	if (i >= 0) {
		send_put(c, (unsigned)i);
		return;
	}
	c->op = OP_NONE;
	if (c->st == EGW_CLUSTER_ST_WATCH)
		return; /* a record put back while watching */
	(void)now;
	send_list(c);
}

static void
on_put(struct egw_cluster *c, json_object *o, uint64_t now)
{
	unsigned i = c->put_idx;
	json_object *rs, *r0, *kvs, *kv;
	char val[EGW_CLUSTER_RECORD_MAX + 1];
	int64_t holder = 0;

	if (json_object_get_boolean(json_object_object_get(o, "succeeded")) ||
	    !json_object_object_get_ex(o, "responses", &rs) ||
	    (r0 = json_object_array_get_idx(rs, 0)) == NULL ||
	    !json_object_object_get_ex(etcd_obj(r0, "response_range"), "kvs",
				       &kvs) ||
	    (kv = json_object_array_get_idx(kvs, 0)) == NULL ||
	    (holder = etcd_i64(kv, "lease", 0)) == c->lease) {
		c->missing[i] = false;
		put_from(c, i + 1, now);
		return;
	}
	/* another lease holds our name: a second gateway of the same name
	 * (or our own previous run, killed less than a lease ago) */
	val[0] = '\0';
	if (json_object_object_get_ex(kv, "value", &rs))
		etcd_unb64(json_object_get_string(rs), val, sizeof(val));
	if (!c->in_step_once) {
		struct egw_cluster_action *a;

		cancel_all(c);
		c->st = EGW_CLUSTER_ST_REFUSED;
		a = push(c, EGW_CLUSTER_ACT_REFUSE);
		if (a != NULL)
			snprintf(a->text, sizeof(a->text),
				 "cluster %s: the name "
				 "%s is held by another gateway (lease %" PRId64
				 "): %.200s",
				 c->conf.cluster, c->conf.self[i].name, holder,
				 val);
		return;
	}
	fail(c, "put", "our name is held by another gateway's lease", now);
}

static void
on_list(struct egw_cluster *c, json_object *o, uint64_t now)
{
	json_object *kvs;

	c->gen++;
	c->rev = etcd_i64(etcd_obj(o, "header"), "revision", c->rev);
	for (unsigned i = 0; i < c->conf.nself; i++)
		c->missing[i] = true;
	if (json_object_object_get_ex(o, "kvs", &kvs))
		for (size_t i = 0; i < json_object_array_length(kvs); i++)
			on_kv(c, json_object_array_get_idx(kvs, i));
	/* what was known and is not listed went while we were away */
	for (uint32_t i = 0; i < c->npeers;)
		if (c->peers[i].gen != c->gen)
			peer_drop(c, &c->peers[i], "gone from the list");
		else
			i++;
	c->put_missing = true;
	if (next_put(c, 0) >= 0) {
		logf_(c, EGW_CLUSTER_WARN,
		      "cluster %s: a record of ours is "
		      "missing from the list: publishing it again",
		      c->conf.cluster);
		c->st = EGW_CLUSTER_ST_PUT;
		put_from(c, 0, now);
		return;
	}
	in_step(c, now);
}

static void
stop_step(struct egw_cluster *c)
{
	if (c->op == OP_DEL && c->put_idx + 1 < c->conf.nself) {
		send_del(c, c->put_idx + 1);
		return;
	}
	if (c->op == OP_DEL) {
		c->op = OP_REVOKE;
		send_lease_op(c, EGW_CLUSTER_CH_MAIN, "/v3/lease/revoke");
		return;
	}
	logf_(c, EGW_CLUSTER_INFO,
	      "cluster %s: records deleted, lease %" PRId64 " revoked",
	      c->conf.cluster, c->lease);
	c->lease = 0;
	c->op = OP_NONE;
	c->st = EGW_CLUSTER_ST_STOPPED;
	push(c, EGW_CLUSTER_ACT_STOPPED);
}

static void
on_main(struct egw_cluster *c, json_object *o, uint64_t now)
{
	switch (c->op) {
	case OP_AUTH: {
		json_object *t;

		if (!json_object_object_get_ex(o, "token", &t)) {
			fail(c, "auth", "no token in the answer", now);
			return;
		}
		snprintf(c->token, sizeof(c->token), "%s",
			 json_object_get_string(t));
		begin(c);
		return;
	}
	case OP_GRANT:
		c->lease = etcd_i64(o, "ID", 0);
		if (c->lease == 0) {
			fail(c, "grant", "no lease in the answer", now);
			return;
		}
		c->ka_due = now + c->conf.lease_ttl_s * 1000000000ull / 3;
		c->put_missing = false;
		put_from(c, 0, now);
		return;
	case OP_PUT:
		on_put(c, o, now);
		return;
	case OP_LIST:
		on_list(c, o, now);
		return;
	case OP_PROBE:
		if (etcd_i64(etcd_obj(o, "result"), "TTL", 0) > 0) {
			c->ka_due = now +
				    c->conf.lease_ttl_s * 1000000000ull / 3;
			send_list(c);
			return;
		}
		logf_(c, EGW_CLUSTER_WARN,
		      "cluster %s: lease %" PRId64 " ended "
		      "while away: our records went with it, publishing them "
		      "again",
		      c->conf.cluster, c->lease);
		c->lease = 0;
		send_grant(c);
		return;
	case OP_DEL:
	case OP_REVOKE:
		stop_step(c);
		return;
	case OP_NONE:
		return;
	}
}

/* ---- entry points ------------------------------------------------------ */

struct egw_cluster *
egw_cluster_create(const struct egw_cluster_conf *conf)
{
	struct egw_cluster *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->conf = *conf;
	if (c->conf.nself > EGW_CLUSTER_MAX_SELF)
		c->conf.nself = EGW_CLUSTER_MAX_SELF;
	if (c->conf.backoff_min_ns == 0)
		c->conf.backoff_min_ns = 100000000ull;
	if (c->conf.backoff_max_ns < c->conf.backoff_min_ns)
		c->conf.backoff_max_ns = c->conf.backoff_min_ns;
	c->rng = conf->seed | 1;
	snprintf(c->prefix, sizeof(c->prefix), "/embgw/%s/", conf->cluster);
	return c;
}

void
egw_cluster_destroy(struct egw_cluster *c)
{
	if (c == NULL)
		return;
	free(c->peers);
	free(c->q);
	sodium_memzero(c->conf.password, sizeof(c->conf.password));
	free(c);
}

void
egw_cluster_start(struct egw_cluster *c, uint64_t now)
{
	(void)now;
	if (c->st != EGW_CLUSTER_ST_INIT)
		return;
	begin(c);
}

void
egw_cluster_on_response(struct egw_cluster *c, enum egw_cluster_chan ch,
			long status, const char *body, size_t len, uint64_t now)
{
	json_object *o;
	const char *e;
	char why[EGW_CLUSTER_TEXT_LEN - 64];

	if ((unsigned)ch >= EGW_CLUSTER_CH_MAX || !c->inflight[ch])
		return; /* cancelled meanwhile */
	c->inflight[ch] = false;
	o = etcd_parse(body, len);
	if (status != 200 || o == NULL || (e = etcd_error_text(o)) != NULL) {
		e = o != NULL ? etcd_error_text(o) : NULL;
		snprintf(why, sizeof(why), "HTTP %ld: %s", status,
			 e != NULL ? e : "not a JSON object");
		/* an expired or revoked token: authenticate again */
		if (status == 401 || (e != NULL && strstr(e, "token") != NULL))
			c->token[0] = '\0';
		if (o != NULL)
			json_object_put(o);
		if (ch == EGW_CLUSTER_CH_MAIN &&
		    (c->op == OP_DEL || c->op == OP_REVOKE) &&
		    c->st == EGW_CLUSTER_ST_STOPPING) {
			stop_step(c); /* the lease may be gone already */
			return;
		}
		fail(c,
		     ch == EGW_CLUSTER_CH_KEEPALIVE ? "keep-alive" :
		     ch == EGW_CLUSTER_CH_WATCH	    ? "watch" :
						      "request",
		     why, now);
		return;
	}
	c->connected = true;
	if (ch == EGW_CLUSTER_CH_MAIN) {
		on_main(c, o, now);
	} else if (ch == EGW_CLUSTER_CH_KEEPALIVE) {
		if (etcd_i64(etcd_obj(o, "result"), "TTL", 0) > 0) {
			c->ka_due = now +
				    c->conf.lease_ttl_s * 1000000000ull / 3;
		} else {
			/* etcd let it go while we thought it alive: start
			 * over, the peers known kept (the list diffs) */
			logf_(c, EGW_CLUSTER_WARN,
			      "cluster %s: lease %" PRId64
			      " ended: publishing our records again",
			      c->conf.cluster, c->lease);
			cancel_all(c);
			c->lease = 0;
			begin(c);
		}
	} else {
		/* a unary answer on the watch: the stream ended */
		fail(c, "watch", "the stream ended", now);
	}
	json_object_put(o);
}

void
egw_cluster_on_watch_line(struct egw_cluster *c, const char *line, size_t len,
			  uint64_t now)
{
	json_object *o, *r, *evs;
	const char *e;
	int64_t compact;

	if (!c->inflight[EGW_CLUSTER_CH_WATCH])
		return;
	o = etcd_parse(line, len);
	r = etcd_obj(o, "result");
	if (o == NULL || r == NULL) {
		char why[EGW_CLUSTER_TEXT_LEN - 64];

		e = o != NULL ? etcd_error_text(o) : NULL;
		snprintf(why, sizeof(why), "%s",
			 e != NULL ? e : "a line that is not a watch answer");
		if (o != NULL)
			json_object_put(o);
		fail(c, "watch", why, now);
		return;
	}
	c->connected = true;
	compact = etcd_i64(r, "compact_revision", 0);
	if (compact > 0 ||
	    json_object_get_boolean(json_object_object_get(r, "canceled"))) {
		cancel(c, EGW_CLUSTER_CH_WATCH);
		json_object_put(o);
		if (compact == 0) {
			fail(c, "watch", "cancelled by etcd", now);
			return;
		}
		/* the revisions after ours are gone: what changed is only
		 * known by listing again */
		logf_(c, EGW_CLUSTER_INFO,
		      "cluster %s: watch from revision %" PRId64
		      " compacted (at %" PRId64 "): listing again",
		      c->conf.cluster, c->rev + 1, compact);
		if (c->op == OP_NONE)
			send_list(c);
		else
			fail(c, "watch", "compacted while busy", now);
		return;
	}
	if (json_object_object_get_ex(r, "events", &evs))
		for (size_t i = 0; i < json_object_array_length(evs); i++) {
			json_object *ev = json_object_array_get_idx(evs, i);
			json_object *t, *kv = etcd_obj(ev, "kv");

			if (kv == NULL)
				continue;
			if (json_object_object_get_ex(ev, "type", &t) &&
			    strcmp(json_object_get_string(t), "DELETE") == 0)
				on_delete(c, kv);
			else
				on_kv(c, kv);
			if (etcd_i64(kv, "mod_revision", 0) > c->rev)
				c->rev = etcd_i64(kv, "mod_revision", 0);
		}
	if (etcd_i64(etcd_obj(r, "header"), "revision", 0) > c->rev &&
	    !json_object_object_get_ex(r, "created", &evs))
		c->rev = etcd_i64(etcd_obj(r, "header"), "revision", 0);
	json_object_put(o);
}

void
egw_cluster_on_failure(struct egw_cluster *c, enum egw_cluster_chan ch,
		       const char *why, uint64_t now)
{
	if ((unsigned)ch >= EGW_CLUSTER_CH_MAX || !c->inflight[ch])
		return;
	c->inflight[ch] = false;
	fail(c,
	     ch == EGW_CLUSTER_CH_KEEPALIVE ? "keep-alive" :
	     ch == EGW_CLUSTER_CH_WATCH	    ? "watch" :
					      "request",
	     why, now);
}

static bool
keeping_alive(const struct egw_cluster *c)
{
	return c->lease != 0 &&
	       (c->st == EGW_CLUSTER_ST_PUT || c->st == EGW_CLUSTER_ST_LIST ||
		c->st == EGW_CLUSTER_ST_WATCH) &&
	       !c->inflight[EGW_CLUSTER_CH_KEEPALIVE];
}

void
egw_cluster_tick(struct egw_cluster *c, uint64_t now)
{
	if (c->st == EGW_CLUSTER_ST_BACKOFF && now >= c->backoff_due) {
		begin(c);
		return;
	}
	if (keeping_alive(c) && now >= c->ka_due)
		send_lease_op(c, EGW_CLUSTER_CH_KEEPALIVE,
			      "/v3/lease/keepalive");
}

uint64_t
egw_cluster_next_deadline(const struct egw_cluster *c)
{
	if (c->st == EGW_CLUSTER_ST_BACKOFF)
		return c->backoff_due;
	if (keeping_alive(c))
		return c->ka_due;
	return UINT64_MAX;
}

void
egw_cluster_stop(struct egw_cluster *c, uint64_t now)
{
	(void)now;
	if (c->st == EGW_CLUSTER_ST_STOPPED || c->st == EGW_CLUSTER_ST_STOPPING)
		return;
	cancel_all(c);
	if (c->lease == 0 || c->conf.nself == 0 ||
	    c->st == EGW_CLUSTER_ST_REFUSED) {
		c->st = EGW_CLUSTER_ST_STOPPED;
		push(c, EGW_CLUSTER_ACT_STOPPED);
		return;
	}
	c->st = EGW_CLUSTER_ST_STOPPING;
	send_del(c, 0);
}

void
egw_cluster_get_status(const struct egw_cluster *c,
		       struct egw_cluster_status *s)
{
	memset(s, 0, sizeof(*s));
	s->state = c->st;
	s->connected = c->connected;
	s->lease = c->lease;
	s->revision = c->rev;
	s->failures = c->failures;
	for (uint32_t i = 0; i < c->npeers; i++) {
		s->peers += c->peers[i].valid;
		s->compatible += c->peers[i].held != 0;
	}
	snprintf(s->last_error, sizeof(s->last_error), "%s", c->last_error);
}
