/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A record: what one identity tells the cluster about itself, as JSON
 * (json-c), read back with every field checked, and the decision of
 * whether two identities can be peers. Records come from etcd, which
 * anyone with write access to the prefix can fill: nothing in one is
 * trusted beyond its checks, and the pre-shared key stays the only proof.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <json-c/json.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "egw_cluster.h"
#include "egw_pool.h"
#include "egw_proto.h"

static const char *const err_names[] = { "OK",
#define EGW_CLUSTER_X(n, t) #n,
					 EGW_CLUSTER_ERRORS(EGW_CLUSTER_X)
#undef EGW_CLUSTER_X
};
static const char *const err_texts[] = { "success",
#define EGW_CLUSTER_X(n, t) t,
					 EGW_CLUSTER_ERRORS(EGW_CLUSTER_X)
#undef EGW_CLUSTER_X
};

const char *
egw_cluster_err_name(int e)
{
	if (e < 0)
		e = -e;
	return e < EGW_CLUSTER_E_MAX ? err_names[e] : "UNKNOWN";
}

const char *
egw_cluster_strerror(int e)
{
	if (e < 0)
		e = -e;
	return e < EGW_CLUSTER_E_MAX ? err_texts[e] : "unknown error";
}

/* Kept apart from the MAC key's own derivation (protocol.md) by this
 * context: the id is of no use to compute a MAC. */
static const char key_id_context[] = "embgw cluster key id v1";

int
egw_cluster_key_id(const uint8_t *key, size_t len,
		   char out[EGW_CLUSTER_KEY_ID_LEN])
{
	uint8_t h[EGW_CLUSTER_KEY_ID_BYTES];
	uint8_t k[crypto_generichash_KEYBYTES_MAX];

	if (key == NULL || len < crypto_generichash_KEYBYTES_MIN)
		return -EINVAL;
	/* BLAKE2b takes a key of at most 64 bytes: a longer file is
	 * hashed down first (unkeyed), as HMAC does with long keys */
	if (len > sizeof(k)) {
		crypto_generichash(k, sizeof(k), key, len, NULL, 0);
		key = k;
		len = sizeof(k);
	}
	crypto_generichash(h, sizeof(h), (const uint8_t *)key_id_context,
			   sizeof(key_id_context) - 1, key, len);
	sodium_bin2hex(out, EGW_CLUSTER_KEY_ID_LEN, h, sizeof(h));
	sodium_memzero(k, sizeof(k));
	return 0;
}

static const char *const kind_names[EGW_KIND_MAX] = {
	[EGW_KIND_EMB] = "emb",
	[EGW_KIND_FILL_IDS] = "fill_ids",
	[EGW_KIND_MROPE] = "mrope",
	[EGW_KIND_AUX] = "aux",
};

static const char *
ip_str(uint32_t a, char *buf, size_t n)
{
	snprintf(buf, n, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		 (a >> 8) & 0xff, a & 0xff);
	return buf;
}

int
egw_cluster_record_write(const struct egw_cluster_record *r, char *buf,
			 size_t len)
{
	json_object *o = json_object_new_object();
	json_object *roles = json_object_new_array();
	json_object *g = json_object_new_object();
	json_object *kinds = json_object_new_array();
	char ip[16];
	const char *s;
	size_t n;

	json_object_object_add(o, "v",
			       json_object_new_int(EGW_CLUSTER_RECORD_VERSION));
	json_object_object_add(o, "name", json_object_new_string(r->name));
	if (r->roles & EGW_ROLE_ENCODE)
		json_object_array_add(roles, json_object_new_string("encode"));
	if (r->roles & EGW_ROLE_LANGUAGE)
		json_object_array_add(roles,
				      json_object_new_string("language"));
	json_object_object_add(o, "roles", roles);
	json_object_object_add(o, "addr",
			       json_object_new_string(
				       ip_str(r->addr, ip, sizeof(ip))));
	json_object_object_add(o, "udp_port", json_object_new_int(r->udp_port));
	json_object_object_add(g, "block_tokens",
			       json_object_new_int64(r->block_tokens));
	json_object_object_add(g, "hidden", json_object_new_int64(r->hidden));
	json_object_object_add(g, "dtype", json_object_new_string(r->dtype));
	json_object_object_add(g, "dtype_bytes",
			       json_object_new_int64(r->dtype_bytes));
	for (unsigned k = 0; k < EGW_KIND_MAX; k++)
		if (r->kinds & (1u << k))
			json_object_array_add(kinds, json_object_new_string(
							     kind_names[k]));
	json_object_object_add(g, "kinds", kinds);
	json_object_object_add(g, "aux_bytes",
			       json_object_new_int64(r->aux_bytes));
	json_object_object_add(o, "geometry", g);
	json_object_object_add(o, "protocol",
			       json_object_new_int64(r->protocol));
	json_object_object_add(o, "payload",
			       json_object_new_string(r->payload));
	if (r->shm_path[0] != '\0')
		json_object_object_add(o, "shm_path",
				       json_object_new_string(r->shm_path));
	json_object_object_add(o, "key_id", json_object_new_string(r->key_id));
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	n = strlen(s);
	if (n >= len || n >= EGW_CLUSTER_RECORD_MAX) {
		json_object_put(o);
		return -EGW_CLUSTER_E_TOO_BIG;
	}
	memcpy(buf, s, n + 1);
	json_object_put(o);
	return (int)n;
}

/* ---- parse ------------------------------------------------------------- */

struct rd {
	char *why;
	size_t why_len;
};

static int __attribute__((format(printf, 3, 4)))
bad(struct rd *d, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->why, d->why_len, fmt, ap);
	va_end(ap);
	return -code;
}

static int
field(struct rd *d, json_object *o, const char *name, json_type t,
      json_object **out)
{
	if (!json_object_object_get_ex(o, name, out) || *out == NULL)
		return bad(d, EGW_CLUSTER_E_FIELD_MISSING, "%s: missing", name);
	if (json_object_get_type(*out) != t)
		return bad(d, EGW_CLUSTER_E_FIELD_TYPE,
			   "%s: expected %s, got %s", name,
			   json_type_to_name(t),
			   json_type_to_name(json_object_get_type(*out)));
	return 0;
}

static int
get_uint(struct rd *d, json_object *o, const char *name, int64_t min,
	 int64_t max, uint32_t *out)
{
	json_object *v;
	int rc = field(d, o, name, json_type_int, &v);
	int64_t x;

	if (rc != 0)
		return rc;
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "%s: %lld, not %lld..%lld", name, (long long)x,
			   (long long)min, (long long)max);
	*out = (uint32_t)x;
	return 0;
}

/* Printable ASCII without spaces, 1..n-1 characters. */
static int
get_word(struct rd *d, json_object *o, const char *name, char *out, size_t n)
{
	json_object *v;
	int rc = field(d, o, name, json_type_string, &v);
	const char *s;
	size_t len;

	if (rc != 0)
		return rc;
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if (len == 0 || len >= n)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "%s: %zu characters, not 1..%zu", name, len, n - 1);
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
				   "%s: '%.40s': printable characters without "
				   "spaces only",
				   name, s);
	memcpy(out, s, len + 1);
	return 0;
}

static int
get_roles(struct rd *d, json_object *o, uint16_t *roles)
{
	json_object *a;
	int rc = field(d, o, "roles", json_type_array, &a);

	if (rc != 0)
		return rc;
	*roles = 0;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		const char *s = json_object_get_string(e);

		if (json_object_get_type(e) != json_type_string)
			return bad(d, EGW_CLUSTER_E_FIELD_TYPE,
				   "roles[%zu]: expected a string", i);
		if (strcmp(s, "encode") == 0)
			*roles |= EGW_ROLE_ENCODE;
		else if (strcmp(s, "language") == 0)
			*roles |= EGW_ROLE_LANGUAGE;
		else
			return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
				   "roles[%zu]: "
				   "'%.40s', not encode or language",
				   i, s);
	}
	if (*roles == 0)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE, "roles: empty");
	return 0;
}

static int
get_kinds(struct rd *d, json_object *g, uint8_t *kinds)
{
	json_object *a;
	int rc = field(d, g, "kinds", json_type_array, &a);

	if (rc != 0)
		return rc;
	*kinds = 0;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i);
		const char *s = json_object_get_string(e);
		unsigned k = 0;

		if (json_object_get_type(e) != json_type_string)
			return bad(d, EGW_CLUSTER_E_FIELD_TYPE,
				   "geometry.kinds[%zu]: expected a string", i);
		while (k < EGW_KIND_MAX && strcmp(kind_names[k], s) != 0)
			k++;
		if (k == EGW_KIND_MAX)
			return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
				   "geometry.kinds[%zu]: unknown kind '%.40s'",
				   i, s);
		*kinds |= (uint8_t)(1u << k);
	}
	return 0;
}

static int
get_geometry(struct rd *d, json_object *o, struct egw_cluster_record *r)
{
	json_object *g;
	int rc = field(d, o, "geometry", json_type_object, &g);

	if (rc == 0)
		rc = get_uint(d, g, "block_tokens", 1, 1 << 20,
			      &r->block_tokens);
	if (rc == 0)
		rc = get_uint(d, g, "hidden", 1, 1 << 20, &r->hidden);
	if (rc == 0)
		rc = get_word(d, g, "dtype", r->dtype, sizeof(r->dtype));
	if (rc == 0)
		rc = get_uint(d, g, "dtype_bytes", 1, 8, &r->dtype_bytes);
	if (rc == 0)
		rc = get_kinds(d, g, &r->kinds);
	if (rc == 0)
		rc = get_uint(d, g, "aux_bytes", 0, 1 << 20, &r->aux_bytes);
	if (rc != 0 && strncmp(d->why, "geometry.", 9) != 0) {
		char tmp[EGW_CLUSTER_TEXT_LEN];

		snprintf(tmp, sizeof(tmp), "geometry.%s", d->why);
		snprintf(d->why, d->why_len, "%s", tmp);
	}
	return rc;
}

static int
get_addr(struct rd *d, json_object *o, uint32_t *addr)
{
	char s[32];
	struct in_addr a;
	int rc = get_word(d, o, "addr", s, sizeof(s));

	if (rc != 0)
		return rc;
	if (inet_pton(AF_INET, s, &a) != 1)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "addr: '%s', not an IPv4 address", s);
	*addr = ntohl(a.s_addr);
	if (*addr == 0 || *addr >> 24 == 127 || *addr >> 28 >= 0xe)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "addr: '%s', not a "
			   "unicast address of a fabric",
			   s);
	return 0;
}

static int
get_key_id(struct rd *d, json_object *o, char *out)
{
	int rc = get_word(d, o, "key_id", out, EGW_CLUSTER_KEY_ID_LEN);

	if (rc != 0)
		return rc;
	if (strlen(out) != EGW_CLUSTER_KEY_ID_LEN - 1 ||
	    strspn(out, "0123456789abcdef") != EGW_CLUSTER_KEY_ID_LEN - 1)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "key_id: '%s', not %d "
			   "lowercase hex digits",
			   out, EGW_CLUSTER_KEY_ID_LEN - 1);
	return 0;
}

static int
get_payload(struct rd *d, json_object *o, struct egw_cluster_record *r)
{
	json_object *v;
	int rc = get_word(d, o, "payload", r->payload, sizeof(r->payload));

	if (rc != 0)
		return rc;
	if (strcmp(r->payload, "shm") != 0 && strcmp(r->payload, "verbs") != 0)
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "payload: '%s', not shm or verbs", r->payload);
	if (!json_object_object_get_ex(o, "shm_path", &v))
		return 0;
	rc = get_word(d, o, "shm_path", r->shm_path, sizeof(r->shm_path));
	if (rc == 0 && r->shm_path[0] != '/')
		return bad(d, EGW_CLUSTER_E_FIELD_RANGE,
			   "shm_path: '%.60s', not an absolute path",
			   r->shm_path);
	return rc;
}

int
egw_cluster_record_parse(const char *json, size_t len,
			 struct egw_cluster_record *r, char *why,
			 size_t why_len)
{
	struct rd d = { why, why_len };
	json_tokener *t = json_tokener_new();
	json_object *o;
	uint32_t v, port;
	int rc;

	memset(r, 0, sizeof(*r));
	why[0] = '\0';
	if (t == NULL)
		return bad(&d, EGW_CLUSTER_E_JSON, "out of memory");
	o = len > EGW_CLUSTER_RECORD_MAX ?
		    NULL :
		    json_tokener_parse_ex(t, json, (int)len);
	if (o == NULL || json_tokener_get_parse_end(t) != len ||
	    json_object_get_type(o) != json_type_object) {
		rc = bad(&d, EGW_CLUSTER_E_JSON,
			 len > EGW_CLUSTER_RECORD_MAX ?
				 "%zu bytes, more than a record's %d" :
				 "not one JSON object (%zu bytes)",
			 len, EGW_CLUSTER_RECORD_MAX);
		goto out;
	}
	rc = get_uint(&d, o, "v", 0, UINT32_MAX, &v);
	if (rc == 0 && v != EGW_CLUSTER_RECORD_VERSION)
		rc = bad(&d, EGW_CLUSTER_E_RECORD_VERSION, "v: %u, not %d", v,
			 EGW_CLUSTER_RECORD_VERSION);
	if (rc == 0)
		rc = get_word(&d, o, "name", r->name, sizeof(r->name));
	if (rc == 0)
		rc = get_roles(&d, o, &r->roles);
	if (rc == 0)
		rc = get_addr(&d, o, &r->addr);
	if (rc == 0 && (rc = get_uint(&d, o, "udp_port", 1, 65535, &port)) == 0)
		r->udp_port = (uint16_t)port;
	if (rc == 0)
		rc = get_geometry(&d, o, r);
	if (rc == 0)
		rc = get_uint(&d, o, "protocol", 1, UINT16_MAX, &r->protocol);
	if (rc == 0)
		rc = get_payload(&d, o, r);
	if (rc == 0)
		rc = get_key_id(&d, o, r->key_id);
out:
	if (o != NULL)
		json_object_put(o);
	json_tokener_free(t);
	return rc;
}

/* ---- compatibility ----------------------------------------------------- */

static bool
roles_complement(uint16_t a, uint16_t b)
{
	return ((a & EGW_ROLE_ENCODE) && (b & EGW_ROLE_LANGUAGE)) ||
	       ((a & EGW_ROLE_LANGUAGE) && (b & EGW_ROLE_ENCODE));
}

enum egw_cluster_compat
egw_cluster_compat(const struct egw_cluster_record *s,
		   const struct egw_cluster_record *p, char *why,
		   size_t why_len)
{
	char tmp[8];

	if (why == NULL) {
		why = tmp;
		why_len = sizeof(tmp);
	}
	why[0] = '\0';
	if (p->protocol != s->protocol) {
		snprintf(why, why_len, "protocol %u, ours %u", p->protocol,
			 s->protocol);
		return EGW_CLUSTER_COMPAT_PROTOCOL;
	}
	if (strcmp(p->key_id, s->key_id) != 0) {
		snprintf(why, why_len,
			 "key_id %s, ours %s (another "
			 "pre-shared key)",
			 p->key_id, s->key_id);
		return EGW_CLUSTER_COMPAT_KEY;
	}
	if (!roles_complement(s->roles, p->roles)) {
		snprintf(why, why_len,
			 "roles 0x%x, ours 0x%x: neither serves "
			 "the other",
			 p->roles, s->roles);
		return EGW_CLUSTER_COMPAT_ROLES;
	}
	if (p->block_tokens != s->block_tokens || p->hidden != s->hidden ||
	    strcmp(p->dtype, s->dtype) != 0 ||
	    p->dtype_bytes != s->dtype_bytes || p->kinds != s->kinds ||
	    p->aux_bytes != s->aux_bytes) {
		snprintf(why, why_len,
			 "geometry block_tokens %u hidden %u "
			 "dtype %s kinds 0x%x aux %u, ours %u %u %s 0x%x %u",
			 p->block_tokens, p->hidden, p->dtype, p->kinds,
			 p->aux_bytes, s->block_tokens, s->hidden, s->dtype,
			 s->kinds, s->aux_bytes);
		return EGW_CLUSTER_COMPAT_GEOMETRY;
	}
	if (strcmp(p->payload, s->payload) != 0) {
		snprintf(why, why_len, "payload %s, ours %s", p->payload,
			 s->payload);
		return EGW_CLUSTER_COMPAT_PAYLOAD;
	}
	return EGW_CLUSTER_COMPAT_OK;
}
