/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The small pieces of etcd's JSON gateway: base64 keys, int64-as-string
 * fields, error texts (cluster_etcd.h).
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_etcd.h"

bool
etcd_b64(const char *s, size_t len, char *out, size_t n)
{
	if (sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL) > n)
		return false;
	sodium_bin2base64(out, n, (const unsigned char *)s, len,
			  sodium_base64_VARIANT_ORIGINAL);
	return true;
}

long
etcd_unb64(const char *b64, char *out, size_t n)
{
	size_t len = 0;

	if (n == 0 || sodium_base642bin((unsigned char *)out, n - 1, b64,
					strlen(b64), NULL, &len, NULL,
					sodium_base64_VARIANT_ORIGINAL) != 0)
		return -1;
	out[len] = '\0';
	return (long)len;
}

int64_t
etcd_i64(json_object *o, const char *name, int64_t def)
{
	json_object *v;
	const char *s;
	char *end;
	long long x;

	if (o == NULL || !json_object_object_get_ex(o, name, &v) || v == NULL)
		return def;
	if (json_object_get_type(v) == json_type_int)
		return json_object_get_int64(v);
	if (json_object_get_type(v) != json_type_string)
		return def;
	s = json_object_get_string(v);
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return def;
	return x;
}

json_object *
etcd_obj(json_object *o, const char *name)
{
	json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, name, &v) ||
	    json_object_get_type(v) != json_type_object)
		return NULL;
	return v;
}

const char *
etcd_error_text(json_object *o)
{
	json_object *v;
	json_object *e = etcd_obj(o, "error");

	/* unary answers: {"error": "...", "code": N, "message": "..."};
	 * the stream: {"error": {"grpc_code": N, "message": "..."}} */
	if (e != NULL && json_object_object_get_ex(e, "message", &v))
		return json_object_get_string(v);
	if (json_object_object_get_ex(o, "message", &v))
		return json_object_get_string(v);
	if (json_object_object_get_ex(o, "error", &v) &&
	    json_object_get_type(v) == json_type_string)
		return json_object_get_string(v);
	return NULL;
}

json_object *
etcd_parse(const char *body, size_t len)
{
	json_tokener *t = json_tokener_new();
	json_object *o;

	if (t == NULL || len > INT32_MAX) {
		json_tokener_free(t);
		return NULL;
	}
	o = json_tokener_parse_ex(t, body, (int)len);
	if (o != NULL && json_object_get_type(o) != json_type_object) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(t);
	return o;
}

bool
etcd_body(json_object *o, char *out, size_t n)
{
	const char *s = json_object_to_json_string_ext(o,
						       JSON_C_TO_STRING_PLAIN);
	size_t len = strlen(s);
	bool ok = len < n;

	if (ok)
		memcpy(out, s, len + 1);
	json_object_put(o);
	return ok;
}
