/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cluster membership without etcd: records written and read back, every
 * bad field named, the compatibility decision, and the state machine
 * driven by hand-written answers of etcd's JSON gateway (as etcd 3.4
 * writes them) with `now` passed in.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "egw_cluster.h"
#include "egw_pool.h"
#include "egw_proto.h"

#define MS 1000000ull
#define LEASE "7587"

static void
rec_init(struct egw_cluster_record *r, const char *name, uint16_t roles,
	 uint32_t addr)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->roles = roles;
	r->addr = addr;
	r->udp_port = 9471;
	r->block_tokens = 128;
	r->hidden = 4096;
	snprintf(r->dtype, sizeof(r->dtype), "bf16");
	r->dtype_bytes = 2;
	r->kinds = (1u << EGW_KIND_EMB) | (1u << EGW_KIND_FILL_IDS) |
		   (1u << EGW_KIND_MROPE) | (1u << EGW_KIND_AUX);
	r->aux_bytes = 64;
	r->protocol = EGW_PROTO_VERSION;
	snprintf(r->payload, sizeof(r->payload), "shm");
	memset(r->key_id, 'a', EGW_CLUSTER_KEY_ID_LEN - 1);
}

/* ---- key id, records, compatibility ------------------------------------ */

static void
test_key_id(void)
{
	uint8_t key[100], hex_key[2 * sizeof(key) + 1];
	char a[EGW_CLUSTER_KEY_ID_LEN], b[EGW_CLUSTER_KEY_ID_LEN];

	memset(key, 7, sizeof(key));
	CU_ASSERT_EQUAL(egw_cluster_key_id(key, 32, a), 0);
	CU_ASSERT_EQUAL(egw_cluster_key_id(key, 32, b), 0);
	CU_ASSERT_STRING_EQUAL(a, b); /* stable */
	CU_ASSERT_EQUAL(strlen(a), 32);
	key[31] ^= 1;
	CU_ASSERT_EQUAL(egw_cluster_key_id(key, 32, b), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b); /* tells keys apart */
	CU_ASSERT_EQUAL(egw_cluster_key_id(key, sizeof(key), b), 0); /* > 64 */
	/* the key's bytes never show */
	sodium_bin2hex((char *)hex_key, sizeof(hex_key), key, 16);
	CU_ASSERT(strstr(b, (char *)hex_key) == NULL);
	CU_ASSERT_EQUAL(egw_cluster_key_id(key, 8, b), -22);
}

static void
test_record_roundtrip(void)
{
	struct egw_cluster_record r, back;
	char buf[EGW_CLUSTER_RECORD_MAX], why[200];
	int n;

	rec_init(&r, "enc-1", EGW_ROLE_ENCODE, 0x0a000001);
	snprintf(r.shm_path, sizeof(r.shm_path), "/dev/shm/enc-1");
	n = egw_cluster_record_write(&r, buf, sizeof(buf));
	CU_ASSERT_FATAL(n > 0);
	CU_ASSERT(strstr(buf, "\"addr\":\"10.0.0.1\"") != NULL);
	CU_ASSERT(strstr(buf, "\"kinds\":[\"emb\",\"fill_ids\",\"mrope\","
			      "\"aux\"]") != NULL);
	CU_ASSERT_EQUAL(egw_cluster_record_parse(buf, (size_t)n, &back, why,
						 sizeof(why)),
			0);
	CU_ASSERT_EQUAL(memcmp(&r, &back, sizeof(r)), 0);
	CU_ASSERT_EQUAL(egw_cluster_record_write(&r, buf, 20),
			-EGW_CLUSTER_E_TOO_BIG);
}

/* Each bad record is refused with its field and value named. */
static void
test_record_bad_fields(void)
{
	static const struct {
		const char *from, *to;
		int err;
		const char *why;
	} cases[] = {
		{ "\"v\":1", "\"v\":2", EGW_CLUSTER_E_RECORD_VERSION,
		  "v: 2, not 1" },
		{ "\"name\":\"enc-1\",", "", EGW_CLUSTER_E_FIELD_MISSING,
		  "name: missing" },
		{ "\"name\":\"enc-1\"", "\"name\":\"a b\"",
		  EGW_CLUSTER_E_FIELD_RANGE, "name: 'a b'" },
		{ "\"name\":\"enc-1\"", "\"name\":7", EGW_CLUSTER_E_FIELD_TYPE,
		  "name: expected string, got int" },
		{ "[\"encode\"]", "[\"decode\"]", EGW_CLUSTER_E_FIELD_RANGE,
		  "roles[0]: 'decode'" },
		{ "[\"encode\"]", "[]", EGW_CLUSTER_E_FIELD_RANGE,
		  "roles: empty" },
		{ "\"10.0.0.1\"", "\"10.0.0\"", EGW_CLUSTER_E_FIELD_RANGE,
		  "addr: '10.0.0', not an IPv4" },
		{ "\"10.0.0.1\"", "\"224.0.0.1\"", EGW_CLUSTER_E_FIELD_RANGE,
		  "addr: '224.0.0.1', not a unicast" },
		{ "\"udp_port\":9471", "\"udp_port\":0",
		  EGW_CLUSTER_E_FIELD_RANGE, "udp_port: 0, not 1..65535" },
		{ "\"block_tokens\":128", "\"block_tokens\":\"128\"",
		  EGW_CLUSTER_E_FIELD_TYPE,
		  "geometry.block_tokens: expected int" },
		{ "\"mrope\"", "\"rope\"", EGW_CLUSTER_E_FIELD_RANGE,
		  "geometry.kinds[2]: unknown kind 'rope'" },
		{ "\"payload\":\"shm\"", "\"payload\":\"tcp\"",
		  EGW_CLUSTER_E_FIELD_RANGE,
		  "payload: 'tcp', not shm or verbs" },
		{ "\"key_id\":\"aaaa", "\"key_id\":\"AAAA",
		  EGW_CLUSTER_E_FIELD_RANGE, "key_id: 'AAAA" },
		{ "{", "[", EGW_CLUSTER_E_JSON, "not one JSON object" },
		{ "}", "} x", EGW_CLUSTER_E_JSON, "not one JSON object" },
	};
	struct egw_cluster_record r, back;
	char good[EGW_CLUSTER_RECORD_MAX], bad[EGW_CLUSTER_RECORD_MAX + 64];
	char why[200];

	rec_init(&r, "enc-1", EGW_ROLE_ENCODE, 0x0a000001);
	CU_ASSERT_FATAL(egw_cluster_record_write(&r, good, sizeof(good)) > 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = cases[i].from[0] == '}' ?
					strrchr(good, '}') :
					strstr(good, cases[i].from);
		int rc;

		CU_ASSERT_FATAL(p != NULL);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(p - good), good,
			 cases[i].to, p + strlen(cases[i].from));
		rc = egw_cluster_record_parse(bad, strlen(bad), &back, why,
					      sizeof(why));
		CU_ASSERT_EQUAL(rc, -cases[i].err);
		if (strstr(why, cases[i].why) == NULL) {
			printf("\n  case %zu: got %s: '%s'", i,
			       egw_cluster_err_name(rc), why);
			CU_FAIL("why");
		}
	}
}

static void
test_compat(void)
{
	struct egw_cluster_record s, p;
	char why[200];

	rec_init(&s, "lang-1", EGW_ROLE_LANGUAGE, 0x0a000002);
	rec_init(&p, "enc-1", EGW_ROLE_ENCODE, 0x0a000001);
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, why, sizeof(why)),
			EGW_CLUSTER_COMPAT_OK);
	p.roles = EGW_ROLE_LANGUAGE;
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, NULL, 0),
			EGW_CLUSTER_COMPAT_ROLES);
	p.roles = EGW_ROLE_ENCODE | EGW_ROLE_LANGUAGE;
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, NULL, 0),
			EGW_CLUSTER_COMPAT_OK);
	p.hidden = 2048;
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, why, sizeof(why)),
			EGW_CLUSTER_COMPAT_GEOMETRY);
	CU_ASSERT(strstr(why, "hidden 2048") != NULL);
	p.hidden = 4096;
	p.kinds &= ~(1u << EGW_KIND_MROPE);
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, NULL, 0),
			EGW_CLUSTER_COMPAT_GEOMETRY);
	p.kinds = s.kinds;
	p.key_id[0] = 'b';
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, why, sizeof(why)),
			EGW_CLUSTER_COMPAT_KEY);
	CU_ASSERT(strstr(why, "another pre-shared key") != NULL);
	p.key_id[0] = 'a';
	p.protocol++;
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, NULL, 0),
			EGW_CLUSTER_COMPAT_PROTOCOL);
	p.protocol--;
	snprintf(p.payload, sizeof(p.payload), "verbs");
	CU_ASSERT_EQUAL(egw_cluster_compat(&s, &p, NULL, 0),
			EGW_CLUSTER_COMPAT_PAYLOAD);
}

/* ---- the state machine ------------------------------------------------- */

static struct egw_cluster *c;
static struct egw_cluster_action acts[4096];
static unsigned nacts;
/* the last request per channel */
static char last_path[EGW_CLUSTER_CH_MAX][64];
static char last_body[EGW_CLUSTER_CH_MAX][EGW_CLUSTER_BODY_MAX];

static unsigned
drain(void)
{
	nacts = 0;
	while (nacts < 4096 && egw_cluster_next_action(c, &acts[nacts])) {
		if (acts[nacts].kind == EGW_CLUSTER_ACT_REQUEST) {
			snprintf(last_path[acts[nacts].chan], 64, "%s",
				 acts[nacts].path);
			snprintf(last_body[acts[nacts].chan],
				 EGW_CLUSTER_BODY_MAX, "%s", acts[nacts].body);
		}
		nacts++;
	}
	return nacts;
}

static unsigned
count(enum egw_cluster_act_kind k)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nacts; i++)
		n += acts[i].kind == k;
	return n;
}

static const struct egw_cluster_action *
find(enum egw_cluster_act_kind k, const char *text)
{
	for (unsigned i = 0; i < nacts; i++)
		if (acts[i].kind == k &&
		    (text == NULL || strstr(acts[i].text, text) != NULL ||
		     (k == EGW_CLUSTER_ACT_HOLD &&
		      strcmp(acts[i].peer.name, text) == 0) ||
		     (k == EGW_CLUSTER_ACT_RELEASE &&
		      strcmp(acts[i].peer.name, text) == 0) ||
		     (k == EGW_CLUSTER_ACT_REQUEST &&
		      strcmp(acts[i].path, text) == 0)))
			return &acts[i];
	return NULL;
}

static void
b64(const char *s, char *out, size_t n)
{
	sodium_bin2base64(out, n, (const unsigned char *)s, strlen(s),
			  sodium_base64_VARIANT_ORIGINAL);
}

/* One kv as etcd writes it: the record of `r` under the test prefix. */
static char *
kv(char *out, size_t n, const struct egw_cluster_record *r, const char *lease,
   int mod)
{
	char key[128], k64[256], val[EGW_CLUSTER_RECORD_MAX], v64[3000];

	snprintf(key, sizeof(key), "/embgw/t/%s", r->name);
	b64(key, k64, sizeof(k64));
	egw_cluster_record_write(r, val, sizeof(val));
	b64(val, v64, sizeof(v64));
	snprintf(out, n,
		 "{\"key\":\"%s\",\"create_revision\":\"%d\","
		 "\"mod_revision\":\"%d\",\"version\":\"1\",\"value\":\"%s\""
		 "%s%s%s}",
		 k64, mod, mod, v64, lease ? ",\"lease\":\"" : "",
		 lease ? lease : "", lease ? "\"" : "");
	return out;
}

static void
answer(enum egw_cluster_chan ch, const char *body, uint64_t now)
{
	egw_cluster_on_response(c, ch, 200, body, strlen(body), now);
	drain();
}

static void
watch_line(const char *body, uint64_t now)
{
	egw_cluster_on_watch_line(c, body, strlen(body), now);
	drain();
}

static struct egw_cluster_record self_rec, enc1, enc2, lang9;

static void
machine(void)
{
	struct egw_cluster_conf conf;

	memset(&conf, 0, sizeof(conf));
	snprintf(conf.cluster, sizeof(conf.cluster), "t");
	conf.lease_ttl_s = 9;
	conf.backoff_min_ns = 100 * MS;
	conf.backoff_max_ns = 2000 * MS;
	conf.seed = 42;
	rec_init(&self_rec, "lang-1", EGW_ROLE_LANGUAGE, 0x0a000002);
	conf.self[0] = self_rec;
	conf.nself = 1;
	rec_init(&enc1, "enc-1", EGW_ROLE_ENCODE, 0x0a000011);
	rec_init(&enc2, "enc-2", EGW_ROLE_ENCODE, 0x0a000012);
	rec_init(&lang9, "lang-9", EGW_ROLE_LANGUAGE, 0x0a000019);
	egw_cluster_destroy(c);
	c = egw_cluster_create(&conf);
	CU_ASSERT_FATAL(c != NULL);
}

/* grant, put, list (with enc-1), watch: the steady state at t=0 */
static void
to_watch(void)
{
	char b[16384], k1[4096], own[4096];

	machine();
	egw_cluster_start(c, 0);
	drain();
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/grant");
	CU_ASSERT(strstr(last_body[0], "\"TTL\":9") != NULL);
	answer(EGW_CLUSTER_CH_MAIN,
	       "{\"header\":{\"revision\":\"1\"},\"ID\":\"" LEASE
	       "\",\"TTL\":\"9\"}",
	       0);
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/txn");
	/* create if absent, under the lease */
	CU_ASSERT(strstr(last_body[0], "\"target\":\"CREATE\"") != NULL);
	CU_ASSERT(strstr(last_body[0], "\"create_revision\":\"0\"") != NULL);
	CU_ASSERT(strstr(last_body[0], "\"lease\":\"" LEASE "\"") != NULL);
	answer(EGW_CLUSTER_CH_MAIN,
	       "{\"header\":{\"revision\":\"2\"},"
	       "\"succeeded\":true}",
	       0);
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/range");
	/* "/embgw/t/" .. "/embgw/t0" */
	CU_ASSERT(strstr(last_body[0], "\"key\":\"L2VtYmd3L3Qv\"") != NULL);
	CU_ASSERT(strstr(last_body[0], "\"range_end\":\"L2VtYmd3L3Qw\"") !=
		  NULL);
	/* with our own record: not a peer */
	snprintf(b, sizeof(b),
		 "{\"header\":{\"revision\":\"5\"},\"kvs\":[%s,"
		 "%s],\"count\":\"2\"}",
		 kv(k1, sizeof(k1), &enc1, "99", 3),
		 kv(own, sizeof(own), &self_rec, LEASE, 2));
	answer(EGW_CLUSTER_CH_MAIN, b, 0);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_HOLD, "enc-1"));
	CU_ASSERT_STRING_EQUAL(last_path[2], "/v3/watch");
	CU_ASSERT(strstr(last_body[2], "\"start_revision\":\"6\"") != NULL);
	CU_ASSERT_PTR_NOT_NULL(
		find(EGW_CLUSTER_ACT_LOG, "in step at revision 5"));
}

static void
test_start_to_watch(void)
{
	struct egw_cluster_status st;
	const struct egw_cluster_action *h;

	to_watch();
	h = find(EGW_CLUSTER_ACT_HOLD, "enc-1");
	CU_ASSERT_FATAL(h != NULL);
	CU_ASSERT_EQUAL(h->self, 0);
	CU_ASSERT_EQUAL(h->peer.addr, 0x0a000011);
	egw_cluster_get_status(c, &st);
	CU_ASSERT_EQUAL(st.state, EGW_CLUSTER_ST_WATCH);
	CU_ASSERT(st.connected);
	CU_ASSERT_EQUAL(st.lease, 7587);
	CU_ASSERT_EQUAL(st.revision, 5);
	CU_ASSERT_EQUAL(st.peers, 1);
	CU_ASSERT_EQUAL(st.compatible, 1);
}

/* a keep-alive every third of the TTL, on its own channel */
static void
test_keepalive(void)
{
	to_watch();
	CU_ASSERT_EQUAL(egw_cluster_next_deadline(c), 3000 * MS);
	egw_cluster_tick(c, 2999 * MS);
	CU_ASSERT_EQUAL(drain(), 0);
	egw_cluster_tick(c, 3000 * MS);
	drain();
	CU_ASSERT_STRING_EQUAL(last_path[1], "/v3/lease/keepalive");
	CU_ASSERT(strstr(last_body[1], "\"ID\":\"" LEASE "\"") != NULL);
	/* in flight: no second one */
	CU_ASSERT_EQUAL(egw_cluster_next_deadline(c), UINT64_MAX);
	answer(EGW_CLUSTER_CH_KEEPALIVE,
	       "{\"result\":{\"ID\":\"" LEASE "\","
	       "\"TTL\":\"9\"}}",
	       3010 * MS);
	CU_ASSERT_EQUAL(egw_cluster_next_deadline(c), 6010 * MS);
	/* etcd says the lease is gone (no TTL): grant and put again */
	egw_cluster_tick(c, 6010 * MS);
	drain();
	answer(EGW_CLUSTER_CH_KEEPALIVE, "{\"result\":{\"ID\":\"" LEASE "\"}}",
	       6020 * MS);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_CANCEL, NULL));
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/grant");
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_RELEASE), 0); /* peers kept */
}

static void
test_watch_events(void)
{
	char b[16384], k[4096];
	const struct egw_cluster_action *r;

	to_watch();
	watch_line("{\"result\":{\"header\":{\"revision\":\"5\"},"
		   "\"created\":true}}",
		   1);
	CU_ASSERT_EQUAL(nacts, 0);
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"6\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &enc2, "98", 6));
	watch_line(b, 2);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_HOLD, "enc-2"));
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "peer enc-2 joined"));
	/* the same record again (a re-list): nothing */
	watch_line(b, 3);
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_HOLD), 0);
	/* moved: released and held at its new address */
	enc2.addr = 0x0a000022;
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"7\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &enc2, "98", 7));
	watch_line(b, 4);
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_RELEASE), 1);
	CU_ASSERT_EQUAL(find(EGW_CLUSTER_ACT_HOLD, "enc-2")->peer.addr,
			0x0a000022);
	/* deleted (or its lease ended): released */
	watch_line(
		"{\"result\":{\"header\":{\"revision\":\"8\"},\"events\":"
		"[{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2VtYmd3L3QvZW5jLTI=\","
		"\"mod_revision\":\"8\"}}]}}",
		5);
	r = find(EGW_CLUSTER_ACT_RELEASE, "enc-2");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT(strstr(r->text, "deleted") != NULL);
	/* a key outside the prefix's records (deeper): ignored */
	watch_line(
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":"
		"[{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2VtYmd3L3QvYS9i\"}}]}}",
		6);
	CU_ASSERT_EQUAL(nacts, 0);
}

/* incompatible or bad records: skipped, logged once; our own: not a peer */
static void
test_skip_logged_once(void)
{
	char b[16384], k[4096], k2[4096];

	to_watch();
	lang9.hidden = 1024; /* and the same role as ours */
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"6\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &lang9, "9", 6));
	watch_line(b, 1);
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_HOLD), 0);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "lang-9 skipped for "
							 "lang-1: roles"));
	CU_ASSERT_PTR_NULL(
		find(EGW_CLUSTER_ACT_LOG, "joined")); /* not a peer */
	kv(k, sizeof(k), &lang9, "9", 7);
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"7\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 k);
	watch_line(b, 2);
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_LOG), 0); /* once */
	/* a record whose name is not its key's */
	snprintf(enc2.name, sizeof(enc2.name), "enc-3");
	kv(k2, sizeof(k2), &enc2, "9", 8);
	snprintf(enc2.name, sizeof(enc2.name), "enc-2");
	kv(k, sizeof(k), &enc2, "9", 8);
	/* the key of enc-2 with enc-3's value */
	memcpy(strstr(k, "\"value\""), strstr(k2, "\"value\""),
	       strlen(strstr(k2, "\"value\"")) + 1);
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"8\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 k);
	watch_line(b, 3);
	CU_ASSERT_PTR_NOT_NULL(
		find(EGW_CLUSTER_ACT_LOG,
		     "record enc-2 skipped: "
		     "KEY_NAME: name 'enc-3' under key 'enc-2'"));
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_HOLD), 0);
	/* our own record: never a peer */
	snprintf(b, sizeof(b),
		 "{\"result\":{\"header\":{\"revision\":\"9\"},"
		 "\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &self_rec, LEASE, 9));
	watch_line(b, 4);
	CU_ASSERT_EQUAL(nacts, 0);
}

/* etcd lost: peers kept, back-off, the old lease probed, the list diffed
 * (a delete missed while away is seen), the watch from the new revision */
static void
test_lost_and_back(void)
{
	char b[16384], k[4096];
	struct egw_cluster_status st;
	uint64_t due, t;

	to_watch();
	egw_cluster_on_failure(c, EGW_CLUSTER_CH_WATCH, "Connection refused",
			       1000 * MS);
	drain();
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_RELEASE), 0);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "etcd lost"));
	egw_cluster_get_status(c, &st);
	CU_ASSERT_EQUAL(st.state, EGW_CLUSTER_ST_BACKOFF);
	CU_ASSERT_FALSE(st.connected);
	CU_ASSERT(strstr(st.last_error, "Connection refused") != NULL);
	CU_ASSERT_EQUAL(st.compatible, 1);
	/* backed off: half to all of 100 ms, then doubling, bounded */
	due = egw_cluster_next_deadline(c);
	CU_ASSERT(due >= 1050 * MS && due <= 1100 * MS);
	t = due;
	for (int i = 0; i < 8; i++) {
		egw_cluster_tick(c, t);
		drain();
		CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/keepalive");
		egw_cluster_on_failure(c, EGW_CLUSTER_CH_MAIN, "timeout", t);
		drain();
		CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_LOG), 1);
		CU_ASSERT_EQUAL(acts[0].level, EGW_CLUSTER_DEBUG); /* once */
		CU_ASSERT(egw_cluster_next_deadline(c) - t <= 2000 * MS);
		t = egw_cluster_next_deadline(c);
	}
	CU_ASSERT(egw_cluster_next_deadline(c) - t <= 2000 * MS);
	/* back: the lease is alive, list again; enc-1 went meanwhile and
	 * enc-2 came */
	egw_cluster_tick(c, t);
	drain();
	answer(EGW_CLUSTER_CH_MAIN,
	       "{\"result\":{\"ID\":\"" LEASE "\","
	       "\"TTL\":\"4\"}}",
	       t);
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/range");
	{
		char own[4096];

		snprintf(b, sizeof(b),
			 "{\"header\":{\"revision\":\"40\"},\"kvs\":"
			 "[%s,%s]}",
			 kv(k, sizeof(k), &enc2, "98", 30),
			 kv(own, sizeof(own), &self_rec, LEASE, 2));
	}
	answer(EGW_CLUSTER_CH_MAIN, b, t);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_RELEASE, "enc-1"));
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_HOLD, "enc-2"));
	CU_ASSERT(strstr(last_body[2], "\"start_revision\":\"41\"") != NULL);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "in step again"));
}

/* back after the lease ended: grant, put again, then list */
static void
test_back_lease_gone(void)
{
	to_watch();
	egw_cluster_tick(c, 3000 * MS);
	drain();
	egw_cluster_on_failure(c, EGW_CLUSTER_CH_KEEPALIVE, "timeout",
			       3000 * MS);
	drain();
	egw_cluster_tick(c, egw_cluster_next_deadline(c));
	drain();
	answer(EGW_CLUSTER_CH_MAIN, "{\"result\":{\"ID\":\"" LEASE "\"}}", 0);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "ended while away"));
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/grant");
	answer(EGW_CLUSTER_CH_MAIN, "{\"ID\":\"8000\",\"TTL\":\"9\"}", 0);
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/txn");
	CU_ASSERT(strstr(last_body[0], "\"lease\":\"8000\"") != NULL);
}

/* a watch answered "compacted" lists again, then watches from there */
static void
test_compacted(void)
{
	to_watch();
	watch_line("{\"result\":{\"header\":{\"revision\":\"90\"},"
		   "\"compact_revision\":\"50\",\"canceled\":true}}",
		   1);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "compacted (at 50)"));
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/range");
	answer(EGW_CLUSTER_CH_MAIN,
	       "{\"header\":{\"revision\":\"90\"},"
	       "\"kvs\":[]}",
	       2);
	/* enc-1 was deleted in what was compacted away: the list says so;
	 * our own record missing too: put back before watching */
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_RELEASE, "enc-1"));
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/txn");
}

/* our record deleted by someone while the lease lives: put back */
static void
test_own_deleted(void)
{
	to_watch();
	watch_line(
		"{\"result\":{\"header\":{\"revision\":\"8\"},\"events\":"
		"[{\"type\":\"DELETE\",\"kv\":{\"key\":\"L2VtYmd3L3QvbGFuZy0x\"}}]}}",
		1);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "our record lang-1 "
							 "was deleted"));
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/txn");
	answer(EGW_CLUSTER_CH_MAIN, "{\"succeeded\":true}", 2);
	CU_ASSERT_EQUAL(nacts, 0);
	CU_ASSERT_EQUAL(egw_cluster_next_deadline(c), 3000 * MS);
}

/* a second gateway of the same name: refused at start, naming the holder */
static void
test_duplicate_name(void)
{
	char b[16384], k[4096];
	const struct egw_cluster_action *a;
	struct egw_cluster_status st;

	machine();
	egw_cluster_start(c, 0);
	drain();
	answer(EGW_CLUSTER_CH_MAIN, "{\"ID\":\"" LEASE "\",\"TTL\":\"9\"}", 0);
	self_rec.addr = 0x0a0000aa;
	snprintf(b, sizeof(b),
		 "{\"header\":{\"revision\":\"3\"},\"responses\":"
		 "[{\"response_range\":{\"kvs\":[%s],\"count\":\"1\"}}]}",
		 kv(k, sizeof(k), &self_rec, "1234", 2));
	answer(EGW_CLUSTER_CH_MAIN, b, 0);
	a = find(EGW_CLUSTER_ACT_REFUSE, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT(strstr(a->text, "the name lang-1 is held by another gateway "
				  "(lease 1234)") != NULL);
	CU_ASSERT(strstr(a->text, "\"addr\":\"10.0.0.170\"") != NULL);
	egw_cluster_get_status(c, &st);
	CU_ASSERT_EQUAL(st.state, EGW_CLUSTER_ST_REFUSED);
	CU_ASSERT_EQUAL(egw_cluster_next_deadline(c), UINT64_MAX);
}

/* clean stop: our key deleted, the lease revoked, then stopped */
static void
test_clean_stop(void)
{
	to_watch();
	egw_cluster_stop(c, 10);
	drain();
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_CANCEL), 1); /* the watch */
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/kv/deleterange");
	CU_ASSERT(strstr(last_body[0], "L2VtYmd3L3QvbGFuZy0x") != NULL);
	answer(EGW_CLUSTER_CH_MAIN, "{\"deleted\":\"1\"}", 11);
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/revoke");
	answer(EGW_CLUSTER_CH_MAIN, "{\"header\":{}}", 12);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_STOPPED, NULL));
	/* unreachable at stop: stopped at once, the lease ends the key */
	to_watch();
	egw_cluster_stop(c, 10);
	drain();
	egw_cluster_on_failure(c, EGW_CLUSTER_CH_MAIN, "refused", 11);
	drain();
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_STOPPED, NULL));
	CU_ASSERT_PTR_NOT_NULL(
		find(EGW_CLUSTER_ACT_LOG, "when the lease ends"));
}

/* unreachable at start: one warning, retries; HTTP errors are failures */
static void
test_unreachable_at_start(void)
{
	machine();
	egw_cluster_start(c, 0);
	drain();
	egw_cluster_on_failure(c, EGW_CLUSTER_CH_MAIN, "Connection refused", 0);
	drain();
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG,
				    "etcd unreachable "
				    "(request: Connection refused)"));
	egw_cluster_tick(c, egw_cluster_next_deadline(c));
	drain();
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/lease/grant");
	{
		const char *e =
			"{\"error\":\"etcdserver: no leader\",\"code\":14}";

		egw_cluster_on_response(c, EGW_CLUSTER_CH_MAIN, 503, e,
					strlen(e), 1);
	}
	drain();
	{
		struct egw_cluster_status st;

		egw_cluster_get_status(c, &st);
		CU_ASSERT(strstr(st.last_error,
				 "HTTP 503: etcdserver: no leader") != NULL);
		CU_ASSERT_EQUAL(st.failures, 2);
	}
	/* an answer to a request that was dropped is ignored */
	egw_cluster_on_response(c, EGW_CLUSTER_CH_WATCH, 200, "{}", 2, 2);
	CU_ASSERT_EQUAL(drain(), 0);
}

/* credentials: authenticate first, the token on every request after */
static void
test_auth(void)
{
	struct egw_cluster_conf conf;
	const struct egw_cluster_action *a;

	memset(&conf, 0, sizeof(conf));
	snprintf(conf.cluster, sizeof(conf.cluster), "t");
	snprintf(conf.user, sizeof(conf.user), "root");
	snprintf(conf.password, sizeof(conf.password), "p\"w");
	conf.lease_ttl_s = 9;
	egw_cluster_destroy(c);
	c = egw_cluster_create(&conf);
	egw_cluster_start(c, 0);
	drain();
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/auth/authenticate");
	CU_ASSERT(strstr(last_body[0], "\"password\":\"p\\\"w\"") != NULL);
	answer(EGW_CLUSTER_CH_MAIN, "{\"token\":\"tok.1\"}", 0);
	a = find(EGW_CLUSTER_ACT_REQUEST, "/v3/lease/grant");
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_STRING_EQUAL(a->token, "tok.1");
	/* an expired token: authenticate again after the back-off */
	egw_cluster_on_response(
		c, EGW_CLUSTER_CH_MAIN, 401,
		"{\"error\":\"etcdserver: invalid auth token\"}",
		strlen("{\"error\":\"etcdserver: invalid auth "
		       "token\"}"),
		1);
	drain();
	egw_cluster_tick(c, egw_cluster_next_deadline(c));
	drain();
	CU_ASSERT_STRING_EQUAL(last_path[0], "/v3/auth/authenticate");
}

/* after in step, a name taken meanwhile is not a refusal: back off, retry */
static void
test_name_taken_later(void)
{
	char b[16384], k[4096];
	struct egw_cluster_status st;

	to_watch();
	/* the lease ended while away; someone took our name meanwhile */
	egw_cluster_tick(c, 3000 * MS);
	drain();
	answer(EGW_CLUSTER_CH_KEEPALIVE, "{\"result\":{\"ID\":\"" LEASE "\"}}",
	       3000 * MS);
	answer(EGW_CLUSTER_CH_MAIN, "{\"ID\":\"8000\",\"TTL\":\"9\"}",
	       3000 * MS);
	snprintf(b, sizeof(b),
		 "{\"responses\":[{\"response_range\":{\"kvs\":[%s]}}]}",
		 kv(k, sizeof(k), &self_rec, "1234", 20));
	answer(EGW_CLUSTER_CH_MAIN, b, 3000 * MS);
	CU_ASSERT_PTR_NULL(find(EGW_CLUSTER_ACT_REFUSE, NULL));
	egw_cluster_get_status(c, &st);
	CU_ASSERT_EQUAL(st.state, EGW_CLUSTER_ST_BACKOFF);
	CU_ASSERT(strstr(st.last_error, "held by another gateway") != NULL);
}

/* a skipped record that becomes compatible is held; one that stops
 * being compatible is released */
static void
test_compat_changes(void)
{
	char b[16384], k[4096];
	const struct egw_cluster_action *r;

	to_watch();
	enc2.hidden = 1;
	snprintf(b, sizeof(b), "{\"result\":{\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &enc2, "9", 6));
	watch_line(b, 1);
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_HOLD), 0);
	enc2.hidden = 4096;
	snprintf(b, sizeof(b), "{\"result\":{\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &enc2, "9", 7));
	watch_line(b, 2);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_HOLD, "enc-2"));
	enc2.key_id[3] = 'f';
	snprintf(b, sizeof(b), "{\"result\":{\"events\":[{\"kv\":%s}]}}",
		 kv(k, sizeof(k), &enc2, "9", 8));
	watch_line(b, 3);
	r = find(EGW_CLUSTER_ACT_RELEASE, "enc-2");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT(strstr(r->text, "not compatible") != NULL);
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_LOG, "another pre-shared"));
}

/* a stop before any lease: stopped at once, nothing sent */
static void
test_stop_before_lease(void)
{
	machine();
	egw_cluster_start(c, 0);
	drain();
	egw_cluster_stop(c, 1);
	drain();
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_CANCEL, NULL));
	CU_ASSERT_PTR_NOT_NULL(find(EGW_CLUSTER_ACT_STOPPED, NULL));
	CU_ASSERT_EQUAL(count(EGW_CLUSTER_ACT_REQUEST), 0);
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "key_id", test_key_id },
		{ "record_roundtrip", test_record_roundtrip },
		{ "record_bad_fields", test_record_bad_fields },
		{ "compat", test_compat },
		{ "start_to_watch", test_start_to_watch },
		{ "keepalive", test_keepalive },
		{ "watch_events", test_watch_events },
		{ "skip_logged_once", test_skip_logged_once },
		{ "lost_and_back", test_lost_and_back },
		{ "back_lease_gone", test_back_lease_gone },
		{ "compacted", test_compacted },
		{ "own_deleted", test_own_deleted },
		{ "duplicate_name", test_duplicate_name },
		{ "clean_stop", test_clean_stop },
		{ "unreachable_at_start", test_unreachable_at_start },
		{ "auth", test_auth },
		{ "name_taken_later", test_name_taken_later },
		{ "compat_changes", test_compat_changes },
		{ "stop_before_lease", test_stop_before_lease },
		{ NULL, NULL },
	};
	int rc;

	if (sodium_init() < 0)
		return 2;
	rc = cu_run("cluster", tests);
	egw_cluster_destroy(c);
	return rc;
}
