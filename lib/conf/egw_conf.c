/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libconfig -> struct egw_conf. The loader walks the file's groups with a
 * table of known keys per group (anything else is an error, so a typo never
 * silently becomes a default), reads each setting with its type and range,
 * and then checks what spans settings: duplicates across ports, peers on
 * the port's subnet, timer ordering. It records every problem and goes on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf_text.h"
#include "egw_conf.h"

#define MAX_KEY_FILE 4096

struct ld {
	const char *file;
	struct egw_conf_errors *errs;
	const struct conf_text *text; /* where each line came from */
};

/* ---- errors ------------------------------------------------------------ */

static void
setting_path(const config_setting_t *s, char *buf, size_t n)
{
	const config_setting_t *chain[16];
	int d = 0;
	size_t off = 0;

	buf[0] = '\0';
	for (; s != NULL && !config_setting_is_root(s) && d < 16;
	     s = config_setting_parent(s))
		chain[d++] = s;
	while (d-- > 0 && off < n) {
		const char *name = config_setting_name(chain[d]);
		int w;

		if (name != NULL)
			w = snprintf(buf + off, n - off, "%s%s", off ? "." : "",
				     name);
		else
			w = snprintf(buf + off, n - off, "[%d]",
				     config_setting_index(chain[d]));
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

/* "file:line: path[.name]: why". `s` is the setting at fault, or the group
 * a missing `name` should have been in. */
static void __attribute__((format(printf, 4, 5)))
err(struct ld *l, const config_setting_t *s, const char *name,
    const char *fmt, ...)
{
	char path[160], why[160];
	const char *file;
	int line;
	va_list ap;
	unsigned i = l->errs->stored;

	l->errs->total++;
	if (i >= EGW_CONF_MAX_ERRORS)
		return;
	setting_path(s, path, sizeof(path));
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	file = conf_text_where(l->text, s != NULL ?
			       config_setting_source_line(s) : 0, &line);
	if (snprintf(l->errs->msg[i], sizeof(l->errs->msg[i]), "%s:%d: %s%s%s: %s",
		     file, line,
		     path, name != NULL && path[0] ? "." : "",
		     name != NULL ? name : "", why) >= (int)sizeof(l->errs->msg[i]))
		memcpy(l->errs->msg[i] + sizeof(l->errs->msg[i]) - 4, "...", 4);
	l->errs->stored++;
}

/* ---- typed getters ----------------------------------------------------- */

static const char *
type_name(int t)
{
	switch (t) {
	case CONFIG_TYPE_GROUP: return "a group { }";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64: return "an integer";
	case CONFIG_TYPE_FLOAT: return "a float";
	case CONFIG_TYPE_STRING: return "a string";
	case CONFIG_TYPE_BOOL: return "a boolean";
	case CONFIG_TYPE_ARRAY: return "an array [ ]";
	case CONFIG_TYPE_LIST: return "a list ( )";
	default: return "nothing";
	}
}

static const config_setting_t *
member(const config_setting_t *g, const char *name)
{
	return g == NULL ? NULL : config_setting_get_member(g, name);
}

/* The member, if present and of `type` (INT also accepts INT64). */
static const config_setting_t *
typed(struct ld *l, const config_setting_t *g, const char *name, int type,
      bool required)
{
	const config_setting_t *s = member(g, name);
	int t;

	if (s == NULL) {
		if (required && g != NULL)
			err(l, g, name, "missing (required)");
		return NULL;
	}
	t = config_setting_type(s);
	if (t == CONFIG_TYPE_INT64)
		t = CONFIG_TYPE_INT;
	if (t != type) {
		err(l, s, NULL, "wrong type: expected %s, got %s",
		    type_name(type), type_name(config_setting_type(s)));
		return NULL;
	}
	return s;
}

static bool
get_int(struct ld *l, const config_setting_t *g, const char *name,
	long long min, long long max, bool required, uint32_t *out)
{
	const config_setting_t *s = typed(l, g, name, CONFIG_TYPE_INT, required);
	long long v;

	if (s == NULL)
		return false;
	v = config_setting_get_int64(s);
	if (v < min || v > max) {
		err(l, s, NULL, "out of range %lld..%lld (got %lld)", min, max, v);
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

static bool
get_str(struct ld *l, const config_setting_t *g, const char *name,
	bool required, char *out, size_t n)
{
	const config_setting_t *s = typed(l, g, name, CONFIG_TYPE_STRING,
					  required);
	const char *v;

	if (s == NULL)
		return false;
	v = config_setting_get_string(s);
	if (v[0] == '\0') {
		err(l, s, NULL, "must not be empty");
		return false;
	}
	if (strlen(v) >= n) {
		err(l, s, NULL, "too long (at most %zu characters)", n - 1);
		return false;
	}
	snprintf(out, n, "%s", v);
	return true;
}

static bool
get_bool(struct ld *l, const config_setting_t *g, const char *name, bool *out)
{
	const config_setting_t *s = typed(l, g, name, CONFIG_TYPE_BOOL, false);

	if (s == NULL)
		return false;
	*out = config_setting_get_bool(s) != 0;
	return true;
}

/* Every member of group `g` must be one of `keys` (NULL-terminated). */
static void
known_keys(struct ld *l, const config_setting_t *g, const char *const *keys)
{
	char list[200];
	size_t off = 0;

	if (g == NULL)
		return;
	list[0] = '\0';
	for (const char *const *k = keys; *k != NULL; k++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s",
				 off ? ", " : "", *k);

		if (w > 0 && (size_t)w < sizeof(list) - off)
			off += (size_t)w;
	}
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *c = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(c);
		bool ok = false;

		for (const char *const *k = keys; *k != NULL && name; k++)
			ok |= strcmp(*k, name) == 0;
		if (!ok)
			err(l, c, NULL, "unknown setting (expected one of: %s)",
			    list);
	}
}

static bool
parse_ipv4(const char *s, uint32_t *addr)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		return false;
	*addr = ntohl(a.s_addr);
	return true;
}

static bool
get_ipv4(struct ld *l, const config_setting_t *g, const char *name,
	 bool required, uint32_t *addr)
{
	char buf[32];

	if (!get_str(l, g, name, required, buf, sizeof(buf)))
		return false;
	if (!parse_ipv4(buf, addr)) {
		err(l, member(g, name), NULL,
		    "not an IPv4 address (a.b.c.d): '%s'", buf);
		return false;
	}
	return true;
}

static bool
name_ok(const char *n)
{
	for (; *n; n++)
		if (*n < 0x21 || *n > 0x7e)
			return false;
	return true;
}

static bool
get_name(struct ld *l, const config_setting_t *g, const char *name,
	 bool required, char *out)
{
	if (!get_str(l, g, name, required, out, EGW_CONF_NAME_LEN))
		return false;
	if (!name_ok(out)) {
		err(l, member(g, name), NULL,
		    "only printable characters without spaces");
		return false;
	}
	return true;
}

/* ---- defaults ---------------------------------------------------------- */

void
egw_conf_defaults(struct egw_conf *c)
{
	struct egw_xfer_conf xc;

	memset(c, 0, sizeof(*c));
	c->geom.capacity_tokens = 512 * 1024;
	c->geom.block_tokens = EGW_POOL_DEFAULT_BLOCK_TOKENS;
	c->geom.hidden_size = 4096;
	c->geom.dtype_bytes = 2;
	c->geom.mrope = true;
	c->geom.aux_bytes = 64;
	snprintf(c->dtype, sizeof(c->dtype), "%s", "bf16");
	c->policy.kind = EGW_POLICY_FIXED;
	c->policy.tokens = 8192;
	c->policy.percentile = 90;
	c->policy.min_tokens = 512;
	c->policy.max_tokens = 16384;
	/* the engines' own defaults (lib/xfer sets them, once) */
	egw_xfer_conf_default(&xc, NULL);
	c->max_rooms = xc.max_rooms;
	c->max_runs_per_room = xc.max_runs_per_room;
	c->max_blocks_per_round = xc.max_blocks_per_round;
	c->pipeline_depth = xc.pipeline_depth;
	c->timers = xc.timers;
	c->attach.mode = 0660;
	c->attach.max_clients = 64;
	c->attach.sq_entries = 256;
	c->attach.cq_entries = 1024;
	c->attach.slots = 256;
	c->attach.lease_ms = 10000;
	c->attach.cache_entries = 256;
	c->attach.cache_tokens = EGW_CONF_CACHE_HALF;
	c->attach.held_warn_ms = 30000;
	c->metrics.addr = 0x7f000001; /* 127.0.0.1: only this host scrapes */
	c->metrics.port = EGW_CONF_METRICS_PORT;
	c->cluster.lease_ttl_s = 10;
	c->cluster.dial_timeout_ms = 1000;
	c->cluster.request_timeout_ms = 3000;
}

/* ---- gateway { } ------------------------------------------------------- */

static void
load_key(struct ld *l, const config_setting_t *s, struct egw_conf *c)
{
	char why[160];
	mode_t mode = 0;
	char *buf;
	size_t n;
	/* the mode of the file read, not of whatever the path names now */
	int rc = conf_read_file(c->key_file, MAX_KEY_FILE, &buf, &n, &mode,
				why, sizeof(why));

	if (rc == -EFBIG) {
		err(l, s, NULL, "key file '%s' too long (at most %u bytes)",
		    c->key_file, MAX_KEY_FILE);
		return;
	}
	if (rc != 0) {
		err(l, s, NULL, "cannot read key file '%s': %s", c->key_file,
		    why);
		return;
	}
	if ((mode & 077) != 0)
		c->key_loose_perms = true;
	if (egw_proto_key_derive(&c->key, (const uint8_t *)buf, n) != 0)
		err(l, s, NULL,
		    "key file '%s' too short: %zu bytes, need at least %u",
		    c->key_file, n, EGW_PROTO_KEY_MIN_BYTES);
	memset(buf, 0, n);
	free(buf);
}

static void
load_key_file(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	char rel[EGW_CONF_PATH_LEN];
	const char *slash;

	if (!get_str(l, gw, "key_file", true, rel, sizeof(rel)))
		return;
	slash = strrchr(l->file, '/');
	if (rel[0] == '/' || slash == NULL) {
		snprintf(c->key_file, sizeof(c->key_file), "%s", rel);
	} else {
		int w = snprintf(c->key_file, sizeof(c->key_file), "%.*s/%s",
				 (int)(slash - l->file), l->file, rel);

		if (w < 0 || (size_t)w >= sizeof(c->key_file)) {
			err(l, member(gw, "key_file"), NULL, "path too long");
			return;
		}
	}
	load_key(l, member(gw, "key_file"), c);
}

static void
load_roles(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	const config_setting_t *s = member(gw, "roles");
	int t;

	if (s == NULL) {
		err(l, gw, "roles", "missing (required): [\"encode\"], "
		    "[\"language\"] or both");
		return;
	}
	t = config_setting_type(s);
	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
		err(l, s, NULL, "wrong type: expected an array of strings");
		return;
	}
	if (config_setting_length(s) == 0)
		err(l, s, NULL, "must name at least one role");
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *v = config_setting_get_string(e);
		uint16_t bit;

		if (v == NULL) {
			err(l, e, NULL, "wrong type: expected a string");
			continue;
		}
		if (strcmp(v, "encode") == 0)
			bit = EGW_ROLE_ENCODE;
		else if (strcmp(v, "language") == 0)
			bit = EGW_ROLE_LANGUAGE;
		else {
			err(l, e, NULL, "unknown role '%s' (encode, language)", v);
			continue;
		}
		if (c->roles & bit)
			err(l, e, NULL, "role '%s' given twice", v);
		c->roles |= bit;
	}
}

static void
load_policy(struct ld *l, const config_setting_t *pool, struct egw_conf *c)
{
	static const char *const keys[] = { "kind", "tokens", "percentile",
		"min_tokens", "max_tokens", NULL };
	const config_setting_t *p = typed(l, pool, "policy", CONFIG_TYPE_GROUP,
					  false);
	uint32_t cap = c->geom.capacity_tokens;
	char kind[16];

	if (p == NULL)
		return;
	known_keys(l, p, keys);
	if (get_str(l, p, "kind", false, kind, sizeof(kind))) {
		if (strcmp(kind, "fixed") == 0)
			c->policy.kind = EGW_POLICY_FIXED;
		else if (strcmp(kind, "adaptive") == 0)
			c->policy.kind = EGW_POLICY_ADAPTIVE;
		else
			err(l, member(p, "kind"), NULL,
			    "unknown policy '%s' (fixed, adaptive)", kind);
	}
	get_int(l, p, "tokens", 1, cap, false, &c->policy.tokens);
	if (c->policy.kind == EGW_POLICY_FIXED) {
		static const char *const only[] = { "percentile", "min_tokens",
						    "max_tokens", NULL };

		for (const char *const *k = only; *k; k++)
			if (member(p, *k) != NULL)
				err(l, member(p, *k), NULL,
				    "only for kind = \"adaptive\"");
		return;
	}
	get_int(l, p, "percentile", 1, 100, false, &c->policy.percentile);
	get_int(l, p, "min_tokens", 1, cap, false, &c->policy.min_tokens);
	if (get_int(l, p, "max_tokens", 1, cap, false, &c->policy.max_tokens) &&
	    c->policy.max_tokens < c->policy.min_tokens)
		err(l, member(p, "max_tokens"), NULL,
		    "below min_tokens (%u)", c->policy.min_tokens);
}

static void
load_pool(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "capacity_tokens", "block_tokens",
		"hidden_size", "dtype", "mrope", "aux_bytes", "policy", NULL };
	const config_setting_t *p = typed(l, gw, "pool", CONFIG_TYPE_GROUP,
					  false);
	char dtype[16];

	if (p == NULL)
		return;
	known_keys(l, p, keys);
	get_int(l, p, "block_tokens", 1, 4096, false, &c->geom.block_tokens);
	if (get_int(l, p, "capacity_tokens", 1, EGW_XFER_MAX_TOKENS, false,
		    &c->geom.capacity_tokens) &&
	    c->geom.capacity_tokens % c->geom.block_tokens != 0)
		err(l, member(p, "capacity_tokens"), NULL,
		    "not a multiple of block_tokens (%u)", c->geom.block_tokens);
	get_int(l, p, "hidden_size", 1, 65536, false, &c->geom.hidden_size);
	if (get_str(l, p, "dtype", false, dtype, sizeof(dtype))) {
		if (!strcmp(dtype, "fp8") || !strcmp(dtype, "int8"))
			c->geom.dtype_bytes = 1;
		else if (!strcmp(dtype, "bf16") || !strcmp(dtype, "fp16"))
			c->geom.dtype_bytes = 2;
		else if (!strcmp(dtype, "fp32"))
			c->geom.dtype_bytes = 4;
		else
			err(l, member(p, "dtype"), NULL,
			    "unknown dtype '%s' (fp8, int8, bf16, fp16, fp32)",
			    dtype);
		if (strlen(dtype) < sizeof(c->dtype))
			memcpy(c->dtype, dtype, strlen(dtype) + 1);
	}
	get_bool(l, p, "mrope", &c->geom.mrope);
	if (get_int(l, p, "aux_bytes", sizeof(struct egw_aux_rec), 4096, false,
		    &c->geom.aux_bytes) && c->geom.aux_bytes % 8 != 0)
		err(l, member(p, "aux_bytes"), NULL, "not a multiple of 8");
	load_policy(l, p, c);
}

static void
load_limits(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "max_rooms", "max_runs_per_room",
		"max_blocks_per_round", "pipeline_depth", NULL };
	const config_setting_t *p = typed(l, gw, "limits", CONFIG_TYPE_GROUP,
					  false);

	if (p == NULL)
		return;
	known_keys(l, p, keys);
	get_int(l, p, "max_rooms", 1, 65536, false, &c->max_rooms);
	get_int(l, p, "max_runs_per_room", 1, 65536, false,
		&c->max_runs_per_room);
	get_int(l, p, "max_blocks_per_round", 0, EGW_XFER_MAX_TOKENS, false,
		&c->max_blocks_per_round);
	get_int(l, p, "pipeline_depth", 1, EGW_XFER_PIPE - 1, false,
		&c->pipeline_depth);
	/* a receiver keeps max_runs_per_room runs for each of its rooms */
	if ((uint64_t)c->max_rooms * c->max_runs_per_room > EGW_CONF_MAX_RUNS)
		err(l, p, NULL, "max_rooms x max_runs_per_room = %llu block runs: "
		    "more than %u (the receiver's run tables would not fit)",
		    (unsigned long long)c->max_rooms * c->max_runs_per_room,
		    EGW_CONF_MAX_RUNS);
}

static void
load_timers(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "rto_ms",	      "rto_min_ms",
					    "rto_max_ms",     "bootstrap_ms",
					    "input_ms",	      "round_ms",
					    "alloc_retry_ms", "alloc_ms",
					    "admit_ms",	      "heartbeat_ms",
					    "peer_dead_ms",   "linger_ms",
					    "quarantine_ms",  NULL };
	struct egw_xfer_timers *t = &c->timers;
	uint64_t *dst[] = { &t->rto_ns,		&t->rto_min_ns,
			    &t->rto_max_ns,	&t->bootstrap_ns,
			    &t->input_ns,	&t->round_ns,
			    &t->alloc_retry_ns, &t->alloc_ns,
			    &t->admit_ns,	&t->heartbeat_ns,
			    &t->peer_dead_ns,	&t->linger_ns,
			    &t->quarantine_ns };
	const config_setting_t *p = typed(l, gw, "timers", CONFIG_TYPE_GROUP,
					  false);

	if (p == NULL)
		return;
	known_keys(l, p, keys);
	for (size_t i = 0; keys[i] != NULL; i++) {
		uint32_t ms;

		if (get_int(l, p, keys[i], 1, 3600 * 1000, false, &ms))
			*dst[i] = (uint64_t)ms * 1000000u;
	}
	if (t->rto_max_ns < t->rto_ns)
		err(l, p, "rto_max_ms", "below rto_ms");
	if (t->rto_min_ns > t->rto_ns)
		err(l, p, "rto_min_ms",
		    "above rto_ms (the first timeout lies "
		    "within rto_min_ms..rto_max_ms)");
	if (t->alloc_ns >= t->round_ns)
		err(l, p, "alloc_ms", "must be below round_ms, so that a room "
		    "waiting for memory fails as pool-exhausted");
	if (t->peer_dead_ns <= t->heartbeat_ns)
		err(l, p, "peer_dead_ms", "must exceed heartbeat_ms");
	if (t->quarantine_ns <= t->rto_max_ns)
		err(l, p, "quarantine_ms", "must exceed rto_max_ms, so that the "
		    "ABORT is resent before the peer is fenced");
}

/* An array of small non-negative integers (uids, gids). */
static uint16_t
get_ids(struct ld *l, const config_setting_t *g, const char *name,
	uint32_t *out)
{
	const config_setting_t *a = typed(l, g, name, CONFIG_TYPE_ARRAY, false);
	int n;

	if (a == NULL)
		return 0;
	n = config_setting_length(a);
	if (n > EGW_CONF_MAX_IDS) {
		err(l, a, NULL, "at most %d entries", EGW_CONF_MAX_IDS);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(a,
								    (unsigned)i);
		long long v;

		if (config_setting_type(e) != CONFIG_TYPE_INT &&
		    config_setting_type(e) != CONFIG_TYPE_INT64) {
			err(l, a, NULL, "entries must be integers");
			return 0;
		}
		v = config_setting_get_int64(e);
		if (v < 0 || v > UINT32_MAX - 1) {
			err(l, a, NULL, "entry %d out of range (got %lld)", i, v);
			return 0;
		}
		out[i] = (uint32_t)v;
	}
	return (uint16_t)n;
}

static bool
pow2(uint32_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* An attach socket's own settings: the attach group's and a tenant's. */
static void
load_socket(struct ld *l, const config_setting_t *p, char *path,
	    uint32_t *mode_out, char *group, uint32_t *uids, uint16_t *nuids,
	    uint32_t *gids, uint16_t *ngids)
{
	char mode[8];

	if (get_str(l, p, "path", true, path, EGW_CONF_SOCK_PATH_LEN) &&
	    path[0] != '/')
		err(l, member(p, "path"), NULL, "must be an absolute path");
	if (get_str(l, p, "mode", false, mode, sizeof(mode))) {
		char *end;
		unsigned long m = strtoul(mode, &end, 8);

		/* libconfig has no octal integers: "0660" is a string */
		if (*end != '\0' || m > 0777 || (m & 0600) != 0600)
			err(l, member(p, "mode"), NULL, "permission bits in "
			    "octal, e.g. \"0660\", with owner read and write");
		else
			*mode_out = (uint32_t)m;
	}
	get_name(l, p, "group", false, group);
	*nuids = get_ids(l, p, "allow_uids", uids);
	*ngids = get_ids(l, p, "allow_gids", gids);
}

static void
load_tenants(struct ld *l, const config_setting_t *p,
	     struct egw_conf_attach *a)
{
	static const char *const keys[] = { "path", "mode", "group",
		"allow_uids", "allow_gids", "ports", NULL };
	const config_setting_t *ts = typed(l, p, "tenants", CONFIG_TYPE_LIST,
					   false);
	int n;

	if (ts == NULL)
		return;
	n = config_setting_length(ts);
	if (n > (int)EGW_CONF_MAX_TENANTS) {
		err(l, ts, NULL, "at most %u tenants", EGW_CONF_MAX_TENANTS);
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *t = config_setting_get_elem(ts,
								    (unsigned)i);
		struct egw_conf_tenant *tn = &a->tenants[i];
		const config_setting_t *ps;

		if (config_setting_type(t) != CONFIG_TYPE_GROUP) {
			err(l, t, NULL, "a tenant is a group { path = ...; "
			    "ports = [...]; ... }");
			return;
		}
		known_keys(l, t, keys);
		tn->mode = 0660;
		load_socket(l, t, tn->path, &tn->mode, tn->group,
			    tn->allow_uids, &tn->nuids, tn->allow_gids,
			    &tn->ngids);
		if (strcmp(tn->path, a->path) == 0)
			err(l, member(t, "path"), NULL, "the attach group's "
			    "own path; a tenant needs a socket of its own");
		for (int j = 0; j < i; j++)
			if (strcmp(tn->path, a->tenants[j].path) == 0)
				err(l, member(t, "path"), NULL, "tenant %d's "
				    "path too", j);
		ps = typed(l, t, "ports", CONFIG_TYPE_ARRAY, true);
		if (ps == NULL)
			continue;
		if (config_setting_length(ps) < 1 ||
		    config_setting_length(ps) > EGW_CONF_MAX_IDS) {
			err(l, ps, NULL, "1..%d port names", EGW_CONF_MAX_IDS);
			continue;
		}
		for (int k = 0; k < config_setting_length(ps); k++) {
			const char *s = config_setting_get_string_elem(ps,
								(unsigned)k);

			if (s == NULL || s[0] == '\0' ||
			    strlen(s) >= EGW_CONF_NAME_LEN) {
				err(l, ps, NULL, "entry %d: a port name of "
				    "1..%d characters", k,
				    EGW_CONF_NAME_LEN - 1);
				break;
			}
			snprintf(tn->ports[tn->nports++], EGW_CONF_NAME_LEN,
				 "%s", s);
		}
	}
	a->ntenants = (uint16_t)n;
}

/* Every port a tenant names exists, and belongs to one tenant only. */
static void
check_tenant_ports(struct ld *l, const config_setting_t *gw,
		   const struct egw_conf *c)
{
	const struct egw_conf_attach *a = &c->attach;
	const config_setting_t *at = gw == NULL ? NULL :
		config_setting_get_member(gw, "attach");
	const config_setting_t *ts = at == NULL ? NULL :
		config_setting_get_member(at, "tenants");

	if (ts == NULL)
		return;
	for (uint16_t t = 0; t < a->ntenants; t++)
		for (uint16_t i = 0; i < a->tenants[t].nports; i++) {
			const char *name = a->tenants[t].ports[i];
			uint16_t p;

			for (p = 0; p < c->nports; p++)
				if (!strcmp(c->ports[p].name, name))
					break;
			if (p == c->nports)
				err(l, ts, NULL,
				    "tenant %u names port \"%s\", which is "
				    "not in ports", t, name);
			for (uint16_t u = 0; u < t; u++)
				for (uint16_t j = 0; j < a->tenants[u].nports; j++)
					if (!strcmp(a->tenants[u].ports[j], name))
						err(l, ts, NULL,
						    "port \"%s\" in tenants %u "
						    "and %u", name, u, t);
		}
}

static void
load_attach(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "path", "mode", "group",
		"allow_uids", "allow_gids", "max_clients", "sq_entries",
		"cq_entries", "slots", "lease_ms", "tenants", "cache_entries",
		"cache_tokens", "held_warn_ms", NULL };
	struct egw_conf_attach *a = &c->attach;
	const config_setting_t *p = typed(l, gw, "attach", CONFIG_TYPE_GROUP,
					  false);

	if (p == NULL)
		return;
	a->enabled = true;
	known_keys(l, p, keys);
	load_socket(l, p, a->path, &a->mode, a->group, a->allow_uids,
		    &a->nuids, a->allow_gids, &a->ngids);
	load_tenants(l, p, a);
	get_int(l, p, "max_clients", 1, 4096, false, &a->max_clients);
	if (get_int(l, p, "sq_entries", 1, 65536, false, &a->sq_entries) &&
	    !pow2(a->sq_entries))
		err(l, member(p, "sq_entries"), NULL, "not a power of two");
	if (get_int(l, p, "cq_entries", 1, 65536, false, &a->cq_entries) &&
	    !pow2(a->cq_entries))
		err(l, member(p, "cq_entries"), NULL, "not a power of two");
	get_int(l, p, "slots", 1, 65536, false, &a->slots);
	get_int(l, p, "lease_ms", 0, 3600 * 1000, false, &a->lease_ms);
	get_int(l, p, "cache_entries", 0, 65536, false, &a->cache_entries);
	if (get_int(l, p, "cache_tokens", 0, INT32_MAX, false,
		    &a->cache_tokens) &&
	    a->cache_tokens > c->geom.capacity_tokens)
		err(l, member(p, "cache_tokens"), NULL, "%u tokens, more than "
		    "the pool's capacity_tokens %u", a->cache_tokens,
		    c->geom.capacity_tokens);
	get_int(l, p, "held_warn_ms", 0, 3600 * 1000, false, &a->held_warn_ms);
}

/* gateway.metrics: present means on; loopback unless an address is given
 * (the endpoint has no authentication: exposing it is a decision). */
static void
load_metrics(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "address", "port", NULL };
	struct egw_conf_metrics *m = &c->metrics;
	const config_setting_t *p = typed(l, gw, "metrics", CONFIG_TYPE_GROUP,
					  false);
	uint32_t v;

	if (p == NULL)
		return;
	m->enabled = true;
	known_keys(l, p, keys);
	get_ipv4(l, p, "address", false, &m->addr);
	if (m->addr >> 28 == 0xe)
		err(l, member(p, "address"), NULL, "a multicast address: the "
		    "endpoint listens on a local address (or 0.0.0.0)");
	if (get_int(l, p, "port", 1, 65535, false, &v))
		m->port = (uint16_t)v;
}

/* ---- gateway.cluster { } ----------------------------------------------- */

/* `rel` against the configuration file's directory (as key_file). */
static bool
resolve_path(struct ld *l, const config_setting_t *s, const char *rel,
	     char *out, size_t n)
{
	const char *slash = strrchr(l->file, '/');
	int w;

	if (rel[0] == '/' || slash == NULL)
		w = snprintf(out, n, "%s", rel);
	else
		w = snprintf(out, n, "%.*s/%s", (int)(slash - l->file), l->file,
			     rel);
	if (w < 0 || (size_t)w >= n) {
		err(l, s, NULL, "path too long (at most %zu characters)",
		    n - 1);
		return false;
	}
	return true;
}

/* "http[s]://host:port": a host name, an IPv4 address or [IPv6], an
 * explicit port, nothing after it (the API's paths are the gateway's). */
static const char *
endpoint_problem(const char *u)
{
	const char *h, *colon, *end;
	char *tail;
	long port;

	if (strncmp(u, "http://", 7) == 0)
		h = u + 7;
	else if (strncmp(u, "https://", 8) == 0)
		h = u + 8;
	else
		return "not http://host:port or https://host:port";
	if (h[0] == '[') {
		end = strchr(h, ']');
		if (end == NULL || end == h + 1)
			return "an IPv6 host without its closing ']'";
		colon = end + 1;
		if (*colon != ':')
			return "no :port after the host";
	} else {
		colon = strchr(h, ':');
		if (colon == NULL)
			return "no :port after the host";
		if (colon == h)
			return "no host";
		for (const char *c = h; c < colon; c++)
			if (!((*c >= 'a' && *c <= 'z') ||
			      (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '-' ||
			      *c == '.'))
				return "a host of letters, digits, '-' and '.' only";
	}
	errno = 0;
	port = strtol(colon + 1, &tail, 10);
	if (colon[1] < '0' || colon[1] > '9' || errno != 0 || port < 1 ||
	    port > 65535)
		return "the port is not 1..65535";
	if (*tail == '/' && tail[1] == '\0')
		return NULL;
	if (*tail != '\0')
		return "nothing may follow the port (no path, no query)";
	return NULL;
}

static void
load_endpoints(struct ld *l, const config_setting_t *p,
	       struct egw_conf_cluster *k)
{
	const config_setting_t *s = member(p, "endpoints");
	int t;

	if (s == NULL) {
		err(l, p, "endpoints",
		    "missing (required): etcd's client URLs, "
		    "e.g. [\"http://127.0.0.1:2379\"]");
		return;
	}
	t = config_setting_type(s);
	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
		err(l, s, NULL, "wrong type: expected an array of strings");
		return;
	}
	if (config_setting_length(s) == 0)
		err(l, s, NULL, "must name at least one endpoint");
	if (config_setting_length(s) > EGW_CONF_MAX_ENDPOINTS)
		err(l, s, NULL, "%d endpoints, at most %d",
		    config_setting_length(s), EGW_CONF_MAX_ENDPOINTS);
	for (int i = 0;
	     i < config_setting_length(s) && i < EGW_CONF_MAX_ENDPOINTS; i++) {
		const config_setting_t *e = config_setting_get_elem(s,
								    (unsigned)
									    i);
		const char *v = config_setting_get_string(e);
		const char *why;
		size_t len;

		if (v == NULL) {
			err(l, e, NULL, "wrong type: expected a string");
			continue;
		}
		len = strlen(v);
		if (len >= EGW_CONF_URL_LEN) {
			err(l, e, NULL, "too long (at most %d characters)",
			    EGW_CONF_URL_LEN - 1);
			continue;
		}
		why = endpoint_problem(v);
		if (why != NULL) {
			err(l, e, NULL, "%s: '%s'", why, v);
			continue;
		}
		if (v[len - 1] == '/')
			len--;
		for (uint16_t j = 0; j < k->nendpoints; j++)
			if (strncmp(k->endpoints[j], v, len) == 0 &&
			    k->endpoints[j][len] == '\0')
				err(l, e, NULL, "'%s' given twice", v);
		snprintf(k->endpoints[k->nendpoints++], EGW_CONF_URL_LEN,
			 "%.*s", (int)len, v);
	}
}

/* A file the control thread opens later: resolved, and readable now. */
static void
get_file(struct ld *l, const config_setting_t *g, const char *name, char *out)
{
	char rel[EGW_CONF_PATH_LEN];
	const config_setting_t *s = member(g, name);

	if (!get_str(l, g, name, false, rel, sizeof(rel)) ||
	    !resolve_path(l, s, rel, out, EGW_CONF_PATH_LEN))
		return;
	if (access(out, R_OK) != 0) {
		err(l, s, NULL, "cannot read '%s': %s", out, strerror(errno));
		out[0] = '\0';
	}
}

static void
load_cluster_tls(struct ld *l, const config_setting_t *p,
		 struct egw_conf_cluster *k)
{
	static const char *const keys[] = { "ca_file", "cert_file", "key_file",
					    NULL };
	const config_setting_t *t = typed(l, p, "tls", CONFIG_TYPE_GROUP,
					  false);

	if (t == NULL)
		return;
	known_keys(l, t, keys);
	get_file(l, t, "ca_file", k->tls_ca);
	get_file(l, t, "cert_file", k->tls_cert);
	get_file(l, t, "key_file", k->tls_key);
	if ((member(t, "cert_file") == NULL) != (member(t, "key_file") == NULL))
		err(l, t, NULL,
		    "cert_file and key_file go together (a client "
		    "certificate and its key)");
	for (uint16_t i = 0; i < k->nendpoints; i++)
		if (strncmp(k->endpoints[i], "http://", 7) == 0)
			err(l, t, NULL,
			    "given, but endpoint '%s' is plain http",
			    k->endpoints[i]);
}

static void
load_cluster_password(struct ld *l, const config_setting_t *p,
		      struct egw_conf_cluster *k)
{
	const config_setting_t *s = member(p, "password_file");
	char why[160];
	char *buf;
	size_t n;
	int rc;

	get_name(l, p, "user", false, k->user);
	if ((member(p, "user") == NULL) != (s == NULL)) {
		err(l, p, member(p, "user") ? "password_file" : "user",
		    "missing: user and password_file go together");
		return;
	}
	if (s == NULL)
		return;
	get_file(l, p, "password_file", k->password_file);
	if (k->password_file[0] == '\0')
		return;
	rc = conf_read_file(k->password_file, EGW_CONF_SECRET_LEN, &buf, &n,
			    NULL, why, sizeof(why));
	if (rc != 0) {
		err(l, s, NULL, "cannot read '%s': %s", k->password_file,
		    rc == -EFBIG ? "longer than 255 bytes" : why);
		return;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0 || n >= EGW_CONF_SECRET_LEN || memchr(buf, '\0', n) != NULL)
		err(l, s, NULL,
		    "'%s': the password must be 1..255 bytes, "
		    "no NUL",
		    k->password_file);
	else
		memcpy(k->password, buf, n);
	memset(buf, 0, n);
	free(buf);
}

/* gateway.cluster: present means on (doc/cluster.md). */
static void
load_cluster(struct ld *l, const config_setting_t *gw, struct egw_conf *c)
{
	static const char *const keys[] = { "name",
					    "endpoints",
					    "lease_ttl_s",
					    "dial_timeout_ms",
					    "request_timeout_ms",
					    "tls",
					    "user",
					    "password_file",
					    NULL };
	struct egw_conf_cluster *k = &c->cluster;
	const config_setting_t *p = typed(l, gw, "cluster", CONFIG_TYPE_GROUP,
					  false);

	if (p == NULL)
		return;
	k->enabled = true;
	known_keys(l, p, keys);
	if (get_name(l, p, "name", true, k->name))
		for (const char *n = k->name; *n; n++)
			if (!((*n >= 'a' && *n <= 'z') ||
			      (*n >= 'A' && *n <= 'Z') ||
			      (*n >= '0' && *n <= '9') || *n == '-' ||
			      *n == '_' || *n == '.')) {
				err(l, member(p, "name"), NULL,
				    "'%s': letters, "
				    "digits, '-', '_' and '.' only (a key "
				    "prefix)",
				    k->name);
				break;
			}
	load_endpoints(l, p, k);
	get_int(l, p, "lease_ttl_s", 3, 300, false, &k->lease_ttl_s);
	get_int(l, p, "dial_timeout_ms", 50, 60000, false, &k->dial_timeout_ms);
	get_int(l, p, "request_timeout_ms", 100, 60000, false,
		&k->request_timeout_ms);
	if (k->dial_timeout_ms > k->request_timeout_ms) {
		const config_setting_t *at = member(p, "dial_timeout_ms");

		if (at == NULL)
			at = member(p, "request_timeout_ms");
		err(l, at != NULL ? at : p, NULL,
		    "dial_timeout_ms %u ms is "
		    "longer than request_timeout_ms %u ms",
		    k->dial_timeout_ms, k->request_timeout_ms);
	}
	if ((uint64_t)k->request_timeout_ms * 3 >
	    (uint64_t)k->lease_ttl_s * 1000) {
		const config_setting_t *at = member(p, "request_timeout_ms");

		if (at == NULL)
			at = member(p, "lease_ttl_s");
		err(l, at != NULL ? at : p, NULL,
		    "request_timeout_ms %u ms is "
		    "more than a third of lease_ttl_s %u s (a keep-alive every "
		    "third of the lease must end before the next)",
		    k->request_timeout_ms, k->lease_ttl_s);
	}
	load_cluster_tls(l, p, k);
	load_cluster_password(l, p, k);
}

/* ---- ports ( ) --------------------------------------------------------- */

static bool
is_pci(const char *d)
{
	unsigned a, b, c, e;
	char tail;

	return sscanf(d, "%x:%x:%x.%x%c", &a, &b, &c, &e, &tail) == 4 ||
	       sscanf(d, "%x:%x.%x%c", &a, &b, &c, &tail) == 3;
}

static bool
in_subnet(uint32_t a, uint32_t net, uint8_t prefix)
{
	uint32_t mask = prefix == 0 ? 0 : ~0u << (32 - prefix);

	return (a & mask) == (net & mask);
}

/* Why `a` cannot be a host's address on a /`prefix` subnet, or NULL. */
static const char *
unusable_addr(uint32_t a, uint8_t prefix)
{
	uint32_t host = prefix >= 32 ? 0 : ~0u >> prefix;

	if (a >> 24 == 0)
		return "in 0.0.0.0/8, not a host address";
	if (a >> 28 == 0xe)
		return "a multicast address";
	if (a >> 28 == 0xf)
		return a == ~0u ? "the broadcast address" :
		       "in the reserved 240.0.0.0/4";
	/* /31 and /32 have no network or broadcast address (RFC 3021) */
	if (prefix <= 30 && (a & host) == 0)
		return "the subnet's network address";
	if (prefix <= 30 && (a & host) == host)
		return "the subnet's broadcast address";
	return NULL;
}

static bool
usable_addr(struct ld *l, const config_setting_t *s, uint32_t a,
	    uint8_t prefix)
{
	const char *why = unusable_addr(a, prefix);
	char ip[16];

	if (why != NULL)
		err(l, s, NULL, "%s is %s", egw_conf_ip_str(a, ip, sizeof(ip)),
		    why);
	return why == NULL;
}

static void
load_payload(struct ld *l, const config_setting_t *ps, struct egw_conf_port *p)
{
	static const char *const shm_keys[] = { "driver", "path", "segments",
						NULL };
	static const char *const verbs_keys[] = {
		"driver",      "device",    "port",	"gid_index",
		"window_keys", "hop_limit", "segments", NULL,
	};
	const config_setting_t *g = typed(l, ps, "payload", CONFIG_TYPE_GROUP,
					  true);
	const config_setting_t *gid;
	char drv[16];
	uint32_t v;

	if (g == NULL || !get_str(l, g, "driver", true, drv, sizeof(drv)))
		return;
	get_int(l, g, "segments", 0, EGW_CONF_MAX_SEGMENTS, false,
		&p->payload.segments);
	if (strcmp(drv, "shm") == 0) {
		p->payload.driver = EGW_PAYLOAD_SHM;
		known_keys(l, g, shm_keys);
		if (get_str(l, g, "path", true, p->payload.path,
			    sizeof(p->payload.path)) &&
		    p->payload.path[0] != '/')
			err(l, member(g, "path"), NULL, "must be an absolute path");
		return;
	}
	if (strcmp(drv, "verbs") != 0) {
		err(l, member(g, "driver"), NULL,
		    "unknown payload driver '%s' (shm, verbs)", drv);
		return;
	}
	p->payload.driver = EGW_PAYLOAD_VERBS;
	known_keys(l, g, verbs_keys);
	get_str(l, g, "device", true, p->payload.device,
		sizeof(p->payload.device));
	p->payload.port = 1;
	if (get_int(l, g, "port", 1, 255, false, &v))
		p->payload.port = (uint8_t)v;
	p->payload.gid_index = -1;
	gid = member(g, "gid_index");
	if (gid != NULL && config_setting_type(gid) == CONFIG_TYPE_STRING) {
		if (strcmp(config_setting_get_string(gid), "auto") != 0)
			err(l, gid, NULL, "\"auto\" or an index 0..255");
	} else if (gid != NULL && get_int(l, g, "gid_index", 0, 255, false, &v)) {
		p->payload.gid_index = (int)v;
	}
	p->payload.window_keys = true;
	get_bool(l, g, "window_keys", &p->payload.window_keys);
	p->payload.hop_limit = EGW_CONF_HOP_LIMIT;
	if (get_int(l, g, "hop_limit", 1, 255, false, &v))
		p->payload.hop_limit = (uint8_t)v;
}

static uint32_t
gcd32(uint32_t a, uint32_t b)
{
	while (b != 0) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

uint32_t
egw_conf_segment_align(const struct egw_pool_geom *g)
{
	uint32_t m = 1;

	for (int k = 0; k < EGW_KIND_MAX; k++) {
		uint64_t per_block = egw_pool_geom_unit_bytes(g, (enum egw_kind)
									 k) *
				     (k == EGW_KIND_AUX ? 1 : g->block_tokens);
		uint32_t need;

		if (per_block == 0)
			continue;
		/* blocks whose bytes make whole pages */
		need = EGW_CONF_SEGMENT_PAGE /
		       gcd32(EGW_CONF_SEGMENT_PAGE,
			     (uint32_t)(per_block % EGW_CONF_SEGMENT_PAGE));
		m = m / gcd32(m, need) * need;
	}
	return m;
}

/*
 * payload.segments: the encode pool cut into equal segments of whole
 * blocks, each kind's share of a segment whole pages (they are mapped
 * side by side), each at least the policy's largest allocation (a room
 * lies in its client's segment).
 */
static void
check_segments(struct ld *l, const config_setting_t *ps,
	       const struct egw_conf *c, const struct egw_conf_port *p)
{
	const config_setting_t *s = member(member(ps, "payload"), "segments");
	uint32_t n = p->payload.segments, nb, per, align, largest;

	if (n == 0 || egw_pool_geom_check(&c->geom) != 0)
		return;
	if (c->roles & EGW_ROLE_LANGUAGE) {
		err(l, s, NULL,
		    "only an encode gateway's pool is cut into "
		    "segments (roles include \"language\")");
		return;
	}
	nb = c->geom.capacity_tokens / c->geom.block_tokens;
	if (nb % n != 0) {
		err(l, s, NULL,
		    "%u does not divide the pool's %u blocks "
		    "(capacity_tokens / block_tokens) into equal segments",
		    n, nb);
		return;
	}
	per = nb / n;
	align = egw_conf_segment_align(&c->geom);
	if (per % align != 0) {
		err(l, s, NULL,
		    "segments of %u blocks: each kind's share of a "
		    "segment must fill whole %u-byte pages, so blocks per "
		    "segment must be a multiple of %u",
		    per, EGW_CONF_SEGMENT_PAGE, align);
		return;
	}
	largest = c->policy.kind == EGW_POLICY_ADAPTIVE ? c->policy.max_tokens :
							  c->policy.tokens;
	if ((uint64_t)per * c->geom.block_tokens < largest)
		err(l, s, NULL,
		    "segments of %u tokens are smaller than the "
		    "largest allocation the pool's policy allows (%u tokens)",
		    per * c->geom.block_tokens, largest);
}

/* idle = { mode = "backoff" | "poll"; max_sleep_us = N; } */
static void
load_idle(struct ld *l, const config_setting_t *ps, struct egw_conf_port *p)
{
	static const char *const keys[] = { "mode", "max_sleep_us", NULL };
	const config_setting_t *g = typed(l, ps, "idle", CONFIG_TYPE_GROUP,
					  false);
	char mode[16];
	uint32_t v;

	p->idle.mode = EGW_IDLE_BACKOFF;
	p->idle.max_sleep_us = EGW_CONF_IDLE_MAX_SLEEP_US;
	if (g == NULL)
		return;
	known_keys(l, g, keys);
	if (get_str(l, g, "mode", false, mode, sizeof(mode))) {
		if (strcmp(mode, "poll") == 0)
			p->idle.mode = EGW_IDLE_POLL;
		else if (strcmp(mode, "backoff") != 0)
			err(l, member(g, "mode"), NULL,
			    "unknown idle mode '%s' (backoff, poll)", mode);
	}
	if (get_int(l, g, "max_sleep_us", 1, EGW_CONF_IDLE_MAX_SLEEP_US_LIMIT,
		    false, &v)) {
		p->idle.max_sleep_us = v;
		if (p->idle.mode == EGW_IDLE_POLL)
			err(l, member(g, "max_sleep_us"), NULL,
			    "a polling worker never sleeps: only with mode "
			    "\"backoff\"");
	}
}

static void
load_neighbours(struct ld *l, const config_setting_t *ps,
		struct egw_conf_port *p)
{
	static const char *const keys[] = { "address", "mac", NULL };
	const config_setting_t *list = typed(l, ps, "neighbours",
					     CONFIG_TYPE_LIST, false);

	for (int i = 0; list && i < config_setting_length(list); i++) {
		const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
		struct egw_conf_neigh n;
		char mac[32];
		unsigned m[6];
		char tail;

		if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
			err(l, g, NULL, "wrong type: expected a group { }");
			continue;
		}
		known_keys(l, g, keys);
		if (p->nneigh == EGW_CONF_MAX_NEIGH) {
			err(l, g, NULL, "too many neighbours (at most %d)",
			    EGW_CONF_MAX_NEIGH);
			break;
		}
		if (!get_ipv4(l, g, "address", true, &n.addr) ||
		    !get_str(l, g, "mac", true, mac, sizeof(mac)))
			continue;
		if (sscanf(mac, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2],
			   &m[3], &m[4], &m[5], &tail) != 6) {
			err(l, member(g, "mac"), NULL,
			    "not a MAC address (xx:xx:xx:xx:xx:xx): '%s'", mac);
			continue;
		}
		for (int k = 0; k < 6; k++)
			n.mac[k] = (uint8_t)m[k];
		if (m[0] & 1)
			err(l, member(g, "mac"), NULL, "%s is a %s MAC address, "
			    "not a host's", mac, (m[0] & m[1] & m[2] & m[3] &
						   m[4] & m[5]) == 0xff ?
			    "broadcast" : "multicast");
		else if ((m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0)
			err(l, member(g, "mac"), NULL, "%s is not a host's MAC "
			    "address", mac);
		if (!in_subnet(n.addr, p->addr, p->prefix))
			err(l, member(g, "address"), NULL,
			    "not on the port's subnet (a neighbour is on the "
			    "link; routes reach beyond it)");
		else
			usable_addr(l, member(g, "address"), n.addr, p->prefix);
		for (uint16_t k = 0; k < p->nneigh; k++)
			if (p->neigh[k].addr == n.addr)
				err(l, member(g, "address"), NULL,
				    "duplicate neighbour address");
		p->neigh[p->nneigh++] = n;
	}
}

static uint32_t
prefix_mask(uint8_t prefix)
{
	return prefix == 0 ? 0 : ~0u << (32 - prefix);
}

/* "a.b.c.d/len" with len 0..32 and no host bits set: a route's prefix. */
static bool
get_route_prefix(struct ld *l, const config_setting_t *g,
		 struct egw_conf_route *r)
{
	char buf[40], *slash, *end = NULL;
	char ip[16];
	long pre = -1;

	if (!get_str(l, g, "prefix", true, buf, sizeof(buf)))
		return false;
	slash = strchr(buf, '/');
	if (slash != NULL) {
		*slash = '\0';
		pre = strtol(slash + 1, &end, 10);
	}
	if (slash == NULL || end == slash + 1 || *end != '\0' || pre < 0 ||
	    pre > 32 || !parse_ipv4(buf, &r->net)) {
		if (slash != NULL)
			*slash = '/';
		err(l, member(g, "prefix"), NULL,
		    "not an IPv4 prefix "
		    "(a.b.c.d/len, len 0..32): '%s'",
		    buf);
		return false;
	}
	r->prefix = (uint8_t)pre;
	if ((r->net & ~prefix_mask(r->prefix)) != 0) {
		err(l, member(g, "prefix"), NULL,
		    "%s/%ld has host bits set "
		    "(the network is %s/%ld)",
		    buf, pre,
		    egw_conf_ip_str(r->net & prefix_mask(r->prefix), ip,
				    sizeof(ip)),
		    pre);
		return false;
	}
	return true;
}

/* The route's checks against the port and the routes before it. */
static void
check_route(struct ld *l, const config_setting_t *g,
	    const struct egw_conf_port *p, const struct egw_conf_route *r)
{
	char a[16], b[16];

	if (r->prefix >= p->prefix && in_subnet(r->net, p->addr, p->prefix))
		err(l, member(g, "prefix"), NULL,
		    "%s/%u lies within the "
		    "port's own subnet %s/%u, whose addresses are reached "
		    "directly",
		    egw_conf_ip_str(r->net, a, sizeof(a)), r->prefix,
		    egw_conf_ip_str(p->addr & prefix_mask(p->prefix), b,
				    sizeof(b)),
		    p->prefix);
	if (!in_subnet(r->via, p->addr, p->prefix))
		err(l, member(g, "via"), NULL,
		    "%s is not on the port's subnet "
		    "%s/%u: a next hop is a neighbour on the link",
		    egw_conf_ip_str(r->via, a, sizeof(a)),
		    egw_conf_ip_str(p->addr & prefix_mask(p->prefix), b,
				    sizeof(b)),
		    p->prefix);
	else if (r->via == p->addr)
		err(l, member(g, "via"), NULL, "%s is the port's own address",
		    egw_conf_ip_str(r->via, a, sizeof(a)));
	else
		usable_addr(l, member(g, "via"), r->via, p->prefix);
	for (uint16_t k = 0; k < p->nroutes; k++)
		if (p->routes[k].net == r->net &&
		    p->routes[k].prefix == r->prefix)
			err(l, member(g, "prefix"), NULL,
			    "duplicate route "
			    "prefix %s/%u (routes[%u])",
			    egw_conf_ip_str(r->net, a, sizeof(a)), r->prefix,
			    k);
}

/* Before the peers: they may lie beyond the subnet when a route covers
 * them. Overlapping prefixes of different lengths are allowed: the
 * longest wins (egw_conf_next_hop). */
static void
load_routes(struct ld *l, const config_setting_t *ps, struct egw_conf_port *p)
{
	static const char *const keys[] = { "prefix", "via", NULL };
	const config_setting_t *list = typed(l, ps, "routes", CONFIG_TYPE_LIST,
					     false);

	for (int i = 0; list && i < config_setting_length(list); i++) {
		const config_setting_t *g;
		struct egw_conf_route r;
		bool ok;

		g = config_setting_get_elem(list, (unsigned)i);
		if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
			err(l, g, NULL, "wrong type: expected a group { }");
			continue;
		}
		known_keys(l, g, keys);
		if (p->nroutes == EGW_CONF_MAX_ROUTES) {
			err(l, g, NULL, "too many routes (at most %d)",
			    EGW_CONF_MAX_ROUTES);
			break;
		}
		ok = get_route_prefix(l, g, &r);
		if (!get_ipv4(l, g, "via", true, &r.via) || !ok)
			continue;
		if (p->prefix != 0)
			check_route(l, g, p, &r);
		p->routes[p->nroutes++] = r;
	}
}

uint32_t
egw_conf_next_hop(const struct egw_conf_port *p, uint32_t ip)
{
	const struct egw_conf_route *best = NULL;

	if (in_subnet(ip, p->addr, p->prefix))
		return ip;
	for (uint16_t i = 0; i < p->nroutes; i++) {
		const struct egw_conf_route *r = &p->routes[i];

		if (in_subnet(ip, r->net, r->prefix) &&
		    (best == NULL || r->prefix > best->prefix))
			best = r;
	}
	return best != NULL ? best->via : 0;
}

/* A peer is on the port's subnet, or beyond it where a route covers it
 * (then only its address class is checked: the remote subnet's size is
 * not known here). */
static void
check_peer_addr(struct ld *l, const config_setting_t *s,
		const struct egw_conf_port *p, uint32_t a)
{
	char ip[16], net[16];

	if (p->prefix == 0) /* the port's address was refused */
		return;
	if (in_subnet(a, p->addr, p->prefix))
		usable_addr(l, s, a, p->prefix);
	else if (egw_conf_next_hop(p, a) == 0)
		err(l, s, NULL,
		    "%s is not on the port's subnet %s/%u and no "
		    "route covers it (routes)",
		    egw_conf_ip_str(a, ip, sizeof(ip)),
		    egw_conf_ip_str(p->addr & prefix_mask(p->prefix), net,
				    sizeof(net)),
		    p->prefix);
	else
		usable_addr(l, s, a, 32);
}

static void
load_peers(struct ld *l, const config_setting_t *ps, struct egw_conf_port *p)
{
	static const char *const keys[] = { "name", "address", "udp_port",
					    "shm_path", NULL };
	const config_setting_t *list = typed(l, ps, "peers", CONFIG_TYPE_LIST,
					     false);

	for (int i = 0; list && i < config_setting_length(list); i++) {
		const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
		struct egw_conf_peer pe = { .udp_port = EGW_PROTO_PORT };
		uint32_t v;

		if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
			err(l, g, NULL, "wrong type: expected a group { }");
			continue;
		}
		known_keys(l, g, keys);
		if (p->npeers == EGW_CONF_MAX_PEERS) {
			err(l, g, NULL, "too many peers (at most %d)",
			    EGW_CONF_MAX_PEERS);
			break;
		}
		if (!get_name(l, g, "name", true, pe.name) ||
		    !get_ipv4(l, g, "address", true, &pe.addr))
			continue;
		if (get_int(l, g, "udp_port", 1, 65535, false, &v))
			pe.udp_port = (uint16_t)v;
		if (get_str(l, g, "shm_path", false, pe.shm_path,
			    sizeof(pe.shm_path))) {
			if (pe.shm_path[0] != '/')
				err(l, member(g, "shm_path"), NULL,
				    "must be an absolute path");
			else if (p->payload.driver != EGW_PAYLOAD_SHM)
				err(l, member(g, "shm_path"), NULL,
				    "only for the shm payload driver");
		}
		check_peer_addr(l, member(g, "address"), p, pe.addr);
		if (pe.addr == p->addr && pe.udp_port == p->udp_port)
			err(l, member(g, "address"), NULL,
			    "is this port's own address and UDP port");
		for (uint16_t k = 0; k < p->npeers; k++) {
			if (strcmp(p->peers[k].name, pe.name) == 0)
				err(l, member(g, "name"), NULL,
				    "duplicate peer name '%s'", pe.name);
			if (p->peers[k].addr == pe.addr &&
			    p->peers[k].udp_port == pe.udp_port)
				err(l, member(g, "address"), NULL,
				    "duplicate peer address and UDP port");
		}
		p->peers[p->npeers++] = pe;
	}
}

static void
load_port(struct ld *l, const config_setting_t *ps, struct egw_conf_port *p)
{
	static const char *const keys[] = {
		"name",	     "device",	     "address",	     "udp_port",
		"mtu",	     "queues",	     "lcores",	     "payload",
		"idle",	     "neighbours",   "routes",	     "peers",
		"max_peers", "fanout_ranks", "udp_checksum", NULL
	};
	char ck[16];
	const config_setting_t *lc;
	char addr[40];
	uint32_t v;

	known_keys(l, ps, keys);
	p->udp_port = EGW_PROTO_PORT;
	p->mtu = 1500;
	p->queues = 1;
	p->max_peers = EGW_CONF_DEFAULT_MAX_PEERS;
	p->fanout_ranks = EGW_XFER_MAX_RANKS;
	get_name(l, ps, "name", true, p->name);
	if (get_str(l, ps, "device", true, p->device, sizeof(p->device))) {
		p->is_pci = is_pci(p->device);
		if (!p->is_pci && strncmp(p->device, "net_", 4) != 0)
			err(l, member(ps, "device"), NULL,
			    "neither a PCI address (DDDD:BB:DD.F) nor a "
			    "virtual device (net_...): '%s'", p->device);
	}
	if (get_str(l, ps, "address", true, addr, sizeof(addr))) {
		char *slash = strchr(addr, '/');
		char *end = NULL;
		long pre = -1;

		if (slash != NULL) {
			*slash = '\0';
			pre = strtol(slash + 1, &end, 10);
		}
		if (slash == NULL || end == slash + 1 || *end != '\0' ||
		    pre < 1 || pre > 32 || !parse_ipv4(addr, &p->addr))
			err(l, member(ps, "address"), NULL,
			    "not an IPv4 address with prefix (a.b.c.d/len)");
		else if (usable_addr(l, member(ps, "address"), p->addr,
				     (uint8_t)pre))
			p->prefix = (uint8_t)pre;
	}
	if (get_int(l, ps, "udp_port", 1, 65535, false, &v))
		p->udp_port = (uint16_t)v;
	if (get_int(l, ps, "mtu", 576, 9000, false, &v))
		p->mtu = (uint16_t)v;
	p->udp_checksum = EGW_UDP_CKSUM_AUTO;
	if (get_str(l, ps, "udp_checksum", false, ck, sizeof(ck))) {
		if (strcmp(ck, "always") == 0)
			p->udp_checksum = EGW_UDP_CKSUM_ALWAYS;
		else if (strcmp(ck, "auto") != 0)
			err(l, member(ps, "udp_checksum"), NULL,
			    "unknown udp_checksum '%s' (auto, always)", ck);
	}
	if (get_int(l, ps, "queues", 1, EGW_CONF_MAX_QUEUES, false, &v))
		p->queues = (uint16_t)v;
	lc = member(ps, "lcores");
	if (lc == NULL) {
		err(l, ps, "lcores", "missing (required): one worker lcore per queue");
	} else if (config_setting_type(lc) != CONFIG_TYPE_ARRAY) {
		err(l, lc, NULL, "wrong type: expected an array of integers");
	} else if (config_setting_length(lc) != p->queues) {
		err(l, lc, NULL, "%d lcores for %u queues: one worker lcore "
		    "per queue", config_setting_length(lc), p->queues);
	} else {
		bool ok = true;

		for (int i = 0; i < p->queues; i++) {
			const config_setting_t *e =
				config_setting_get_elem(lc, (unsigned)i);
			long long x = config_setting_get_int64(e);

			if (config_setting_type(e) != CONFIG_TYPE_INT &&
			    config_setting_type(e) != CONFIG_TYPE_INT64) {
				err(l, e, NULL, "wrong type: expected an integer");
				ok = false;
			} else if (x < 0 || x > 1023) {
				err(l, e, NULL, "out of range 0..1023 (got %lld)", x);
				ok = false;
			} else {
				p->lcores[i] = (uint16_t)x;
			}
		}
		if (ok)
			p->nlcores = p->queues;
	}
	if (get_int(l, ps, "max_peers", 1, EGW_CONF_MAX_SLOTS, false, &v))
		p->max_peers = (uint16_t)v;
	if (get_int(l, ps, "fanout_ranks", 1, EGW_XFER_MAX_RANKS, false, &v))
		p->fanout_ranks = (uint16_t)v;
	load_payload(l, ps, p);
	load_idle(l, ps, p);
	load_neighbours(l, ps, p);
	load_routes(l, ps, p);
	load_peers(l, ps, p);
	if (p->npeers > p->max_peers)
		err(l,
		    member(ps, "max_peers") != NULL ? member(ps, "max_peers") :
						      ps,
		    NULL,
		    "max_peers %u is below the %u peers listed: each peer "
		    "takes a slot",
		    p->max_peers, p->npeers);
}

/* One device: the same PCI address, or the same virtual device name
 * (what precedes the first ','), whatever the arguments. */
static bool
same_device(const char *a, const char *b)
{
	size_t la = strcspn(a, ","), lb = strcspn(b, ",");

	return la == lb && strncmp(a, b, la) == 0;
}

static void
load_ports(struct ld *l, const config_setting_t *root, struct egw_conf *c)
{
	const config_setting_t *list = typed(l, root, "ports", CONFIG_TYPE_LIST,
					     true);

	if (list == NULL)
		return;
	if (config_setting_length(list) == 0)
		err(l, list, NULL, "at least one port is required");
	for (int i = 0; i < config_setting_length(list); i++) {
		const config_setting_t *ps = config_setting_get_elem(list, (unsigned)i);
		struct egw_conf_port *p;

		if (config_setting_type(ps) != CONFIG_TYPE_GROUP) {
			err(l, ps, NULL, "wrong type: expected a group { }");
			continue;
		}
		if (c->nports == EGW_CONF_MAX_PORTS) {
			err(l, ps, NULL, "too many ports (at most %d)",
			    EGW_CONF_MAX_PORTS);
			break;
		}
		p = &c->ports[c->nports];
		load_port(l, ps, p);
		check_segments(l, ps, c, p);
		/* what must be unique across ports */
		for (uint16_t k = 0; k < c->nports; k++) {
			const struct egw_conf_port *q = &c->ports[k];

			if (p->name[0] && strcmp(p->name, q->name) == 0)
				err(l, member(ps, "name"), NULL,
				    "duplicate port name '%s'", p->name);
			if (p->device[0] && same_device(p->device, q->device))
				err(l, member(ps, "device"), NULL,
				    "device already used by port '%s'", q->name);
			if (p->payload.driver == EGW_PAYLOAD_SHM &&
			    q->payload.driver == EGW_PAYLOAD_SHM &&
			    (c->roles & EGW_ROLE_LANGUAGE) &&
			    p->payload.path[0] &&
			    strcmp(p->payload.path, q->payload.path) == 0)
				err(l, member(member(ps, "payload"), "path"), NULL,
				    "already port '%s''s pool file (each port "
				    "receives into its own)", q->name);
			if (p->addr && p->addr == q->addr)
				err(l, member(ps, "address"), NULL,
				    "address already used by port '%s'", q->name);
			for (uint16_t a = 0; a < p->nlcores; a++)
				for (uint16_t b = 0; b < q->nlcores; b++)
					if (p->lcores[a] == q->lcores[b])
						err(l, member(ps, "lcores"), NULL,
						    "lcore %u already serves port '%s'",
						    p->lcores[a], q->name);
		}
		for (uint16_t a = 0; a < p->nlcores; a++)
			for (uint16_t b = 0; b < a; b++)
				if (p->lcores[a] == p->lcores[b])
					err(l, member(ps, "lcores"), NULL,
					    "lcore %u listed twice", p->lcores[a]);
		c->nports++;
	}
}

/* ---- entry points ------------------------------------------------------ */

int
egw_conf_load(const char *path, struct egw_conf *c,
	      struct egw_conf_errors *errs)
{
	static const char *const root_keys[] = { "gateway", "ports", NULL };
	static const char *const gw_keys[] = { "name",	 "roles",   "key_file",
					       "pool",	 "limits",  "timers",
					       "attach", "metrics", "cluster",
					       NULL };
	struct conf_text text;
	struct ld l = { path, errs, &text };
	const config_setting_t *root, *gw;
	config_t cfg;
	int rc;

	memset(errs, 0, sizeof(*errs));
	egw_conf_defaults(c);
	if (egw_proto_init() != 0) {
		snprintf(errs->msg[0], sizeof(errs->msg[0]),
			 "%s: cannot initialise libsodium", path);
		errs->stored = errs->total = 1;
		return -EINVAL;
	}
	snprintf(c->file, sizeof(c->file), "%s", path);
	/* read here, bounded, @include expanded: libconfig gets a string */
	rc = conf_text_load(path, &text);
	if (rc != 0) {
		snprintf(errs->msg[0], sizeof(errs->msg[0]), "%.300s", text.err);
		errs->stored = errs->total = 1;
		conf_text_free(&text);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	config_init(&cfg);
	if (config_read_string(&cfg, text.buf) != CONFIG_TRUE) {
		int line;
		const char *file = conf_text_where(&text, config_error_line(&cfg),
						   &line);

		snprintf(errs->msg[0], sizeof(errs->msg[0]),
			 "%s:%d: syntax error: %s", file, line,
			 config_error_text(&cfg));
		errs->stored = errs->total = 1;
		config_destroy(&cfg);
		conf_text_free(&text);
		return -EINVAL;
	}
	root = config_root_setting(&cfg);
	known_keys(&l, root, root_keys);
	gw = typed(&l, root, "gateway", CONFIG_TYPE_GROUP, true);
	if (gw != NULL) {
		known_keys(&l, gw, gw_keys);
		get_name(&l, gw, "name", true, c->name);
		load_roles(&l, gw, c);
		load_pool(&l, gw, c);
		load_limits(&l, gw, c);
		load_timers(&l, gw, c);
		load_attach(&l, gw, c);
		load_metrics(&l, gw, c);
		load_cluster(&l, gw, c);
		load_key_file(&l, gw, c);
		if (c->policy.tokens > c->geom.capacity_tokens)
			err(&l, gw, "pool.policy.tokens",
			    "larger than capacity_tokens");
	}
	load_ports(&l, root, c);
	check_tenant_ports(&l, gw, c);
	/* a record's key is the name REGISTER carries, the same on every
	 * port: one port, one record */
	if (c->cluster.enabled && c->nports > 1)
		err(&l, member(gw, "cluster"), NULL,
		    "a gateway in a cluster has "
		    "one port (its record is keyed by the gateway's name), "
		    "got %u",
		    c->nports);
	if (errs->total == 0 && egw_pool_geom_check(&c->geom) != 0)
		err(&l, gw, "pool", "inconsistent pool geometry");
	config_destroy(&cfg);
	conf_text_free(&text);
	return errs->total == 0 ? 0 : -EINVAL;
}

int
egw_conf_load_report(const char *path, struct egw_conf *c, FILE *err)
{
	static struct egw_conf_errors e; /* large: not on the stack */

	if (egw_conf_load(path, c, &e) == 0)
		return 0;
	for (unsigned i = 0; i < e.stored; i++)
		fprintf(err, "%s\n", e.msg[i]);
	if (e.total > e.stored)
		fprintf(err, "... and %u more\n", e.total - e.stored);
	fprintf(err, "%s: %u error(s)\n", path, e.total);
	return -EINVAL;
}

const char *
egw_conf_ip_str(uint32_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
		 (addr >> 8) & 0xff, addr & 0xff);
	return buf;
}

void
egw_conf_print_summary(const struct egw_conf *c, FILE *f)
{
	const struct egw_pool_geom *g = &c->geom;
	uint32_t blocks = g->capacity_tokens / g->block_tokens;
	char ip[16];

	fprintf(f, "%s: ok\n", c->file);
	fprintf(f, "gateway %s: roles%s%s\n", c->name,
		c->roles & EGW_ROLE_ENCODE ? " encode" : "",
		c->roles & EGW_ROLE_LANGUAGE ? " language" : "");
	fprintf(f, "pool: %u tokens = %u blocks x %u tokens; per token %zu B "
		"embedding + 4 B fill_ids%s; aux %u B/block; %.1f MiB\n",
		g->capacity_tokens, blocks, g->block_tokens,
		egw_pool_geom_unit_bytes(g, EGW_KIND_EMB),
		g->mrope ? " + 12 B mrope" : "", g->aux_bytes,
		egw_pool_geom_mem_bytes(g) / 1048576.0);
	if (c->policy.kind == EGW_POLICY_FIXED)
		fprintf(f, "default allocation: fixed %u tokens\n",
			c->policy.tokens);
	else
		fprintf(f, "default allocation: adaptive p%u of recent totals, "
			"%u..%u tokens (start %u)\n", c->policy.percentile,
			c->policy.min_tokens, c->policy.max_tokens,
			c->policy.tokens);
	fprintf(f, "limits: %u rooms, %u runs/room, pipeline depth %u, "
		"%s blocks/round\n", c->max_rooms, c->max_runs_per_room,
		c->pipeline_depth, c->max_blocks_per_round ? "capped" : "no cap on");
	fprintf(f, "key: %s%s\n", c->key_file, c->key_loose_perms
		? " (WARNING: readable by group or others; chmod 600)" : "");
	if (c->attach.enabled)
		fprintf(f, "attach: %s mode %04o, %u uid(s) and %u gid(s) "
			"allowed%s, %u clients, rings %u/%u, %u slots, lease "
			"%u ms, content cache %u entries\n", c->attach.path,
			c->attach.mode, c->attach.nuids,
			c->attach.ngids, c->attach.nuids + c->attach.ngids ? "" :
			" (none listed: the gateway's own uid only)",
			c->attach.max_clients, c->attach.sq_entries,
			c->attach.cq_entries, c->attach.slots, c->attach.lease_ms,
			c->attach.cache_entries);
	for (uint16_t t = 0; t < c->attach.ntenants; t++) {
		const struct egw_conf_tenant *tn = &c->attach.tenants[t];

		fprintf(f, "attach tenant %u: %s mode %04o, %u uid(s) and %u "
			"gid(s) allowed, ports", t, tn->path, tn->mode,
			tn->nuids, tn->ngids);
		for (uint16_t i = 0; i < tn->nports; i++)
			fprintf(f, "%s%s", i ? "," : " ", tn->ports[i]);
		fprintf(f, "\n");
	}
	if (c->metrics.enabled)
		fprintf(f, "metrics: http://%s:%u/metrics\n",
			egw_conf_ip_str(c->metrics.addr, ip, sizeof(ip)),
			c->metrics.port);
	if (c->cluster.enabled) {
		fprintf(f,
			"cluster %s: keys under /embgw/%s/, lease %u s, "
			"endpoints",
			c->cluster.name, c->cluster.name,
			c->cluster.lease_ttl_s);
		for (uint16_t i = 0; i < c->cluster.nendpoints; i++)
			fprintf(f, "%s%s", i ? "," : " ",
				c->cluster.endpoints[i]);
		fprintf(f, "%s%s\n", c->cluster.user[0] ? ", user " : "",
			c->cluster.user);
	}
	for (uint16_t i = 0; i < c->nports; i++) {
		const struct egw_conf_port *p = &c->ports[i];

		fprintf(f, "port %s: %s %s, %s/%u udp %u, mtu %u, %u queue(s) "
			"on lcore(s)", p->name, p->is_pci ? "pci" : "vdev",
			p->device, egw_conf_ip_str(p->addr, ip, sizeof(ip)),
			p->prefix, p->udp_port, p->mtu, p->queues);
		for (uint16_t q = 0; q < p->queues; q++)
			fprintf(f, "%s%u", q ? "," : " ", p->lcores[q]);
		if (p->payload.driver == EGW_PAYLOAD_SHM)
			fprintf(f, "; payload shm %s", p->payload.path);
		else if (p->payload.gid_index < 0)
			fprintf(f, "; payload verbs %s port %u gid auto",
				p->payload.device, p->payload.port);
		else
			fprintf(f, "; payload verbs %s port %u gid %d",
				p->payload.device, p->payload.port,
				p->payload.gid_index);
		if (p->payload.segments != 0)
			fprintf(f, ", %u segments of %u blocks, one per client",
				p->payload.segments,
				c->geom.capacity_tokens / c->geom.block_tokens /
					p->payload.segments);
		if (p->idle.mode == EGW_IDLE_POLL)
			fprintf(f, "; idle: busy polling");
		else
			fprintf(f, "; idle: sleeps of at most %u us",
				p->idle.max_sleep_us);
		fprintf(f, "; %u peer(s), %u static neighbour(s)\n", p->npeers,
			p->nneigh);
		for (uint16_t k = 0; k < p->nroutes; k++) {
			char net[16], via[16];

			fprintf(f, "  route %s/%u via %s\n",
				egw_conf_ip_str(p->routes[k].net, net,
						sizeof(net)),
				p->routes[k].prefix,
				egw_conf_ip_str(p->routes[k].via, via,
						sizeof(via)));
		}
	}
}

void
egw_conf_to_xfer(const struct egw_conf *c, struct egw_xfer_conf *xc,
		 struct egw_policy *policy)
{
	egw_xfer_conf_default(xc, &c->geom);
	xc->max_rooms = c->max_rooms;
	xc->max_runs_per_room = c->max_runs_per_room;
	xc->max_blocks_per_round = c->max_blocks_per_round;
	xc->pipeline_depth = c->pipeline_depth;
	xc->timers = c->timers;
	if (c->policy.kind == EGW_POLICY_FIXED)
		egw_policy_init_fixed(policy, c->geom.block_tokens,
				      c->policy.tokens);
	else
		egw_policy_init_adaptive(policy, c->geom.block_tokens,
					 c->policy.tokens, c->policy.percentile,
					 c->policy.min_tokens,
					 c->policy.max_tokens);
}
