/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd v3's JSON gateway as the state machine speaks it: request bodies
 * built with json-c, keys and values in base64 (libsodium), and the
 * fields of answers read back (etcd writes int64 values as strings).
 */
#ifndef EGW_CLUSTER_ETCD_H
#define EGW_CLUSTER_ETCD_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* base64 of `s` into out (NUL-terminated); false when it does not fit */
bool etcd_b64(const char *s, size_t len, char *out, size_t n);
/* the bytes of base64 `b64` into out, NUL-terminated; -1 on bad input */
long etcd_unb64(const char *b64, char *out, size_t n);

/* o's member `name` as an int64 (a number or a decimal string), or def */
int64_t etcd_i64(json_object *o, const char *name, int64_t def);
/* o's object member `name` or NULL */
json_object *etcd_obj(json_object *o, const char *name);
/* an error answer's text ("error" or "message"), or NULL */
const char *etcd_error_text(json_object *o);

/* parse a whole body; NULL unless it is one JSON object */
json_object *etcd_parse(const char *body, size_t len);

/* `o` as a compact string into out; false when it does not fit. Drops o. */
bool etcd_body(json_object *o, char *out, size_t n);

#endif
