/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for what etcd hands the cluster's machine (lib/cluster):
 * anyone who may write under the prefix chooses these bytes. Each input is
 * read three ways: as a record (oracle: accepted means it writes back and
 * reads back the same; refused means a terminated reason), as a line of
 * the watch stream and as the answer to a list, both to a machine in step
 * (oracle: it never crashes, its actions drain, and what it holds is a
 * record that passes the checks).
 */
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egw_cluster.h"
#include "egw_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct egw_cluster_action act;

static void
drain(struct egw_cluster *m)
{
	while (egw_cluster_next_action(m, &act)) {
		char buf[EGW_CLUSTER_RECORD_MAX], why[256];
		struct egw_cluster_record back;
		int n;

		if (act.kind != EGW_CLUSTER_ACT_HOLD)
			continue;
		n = egw_cluster_record_write(&act.peer, buf, sizeof(buf));
		if (n < 0 || egw_cluster_record_parse(buf, (size_t)n, &back,
						      why, sizeof(why)) != 0)
			abort();
	}
}

/* A machine that waits for its list (`listed` false) or is listed and
 * watching, as after a start. */
static struct egw_cluster *
machine(bool listed)
{
	static const char grant[] = "{\"ID\":\"7\",\"TTL\":\"9\"}";
	static const char put[] = "{\"succeeded\":true}";
	static char list[1024];
	struct egw_cluster_conf c;
	struct egw_cluster *m;
	char val[EGW_CLUSTER_RECORD_MAX], v64[3000];
	int n;

	memset(&c, 0, sizeof(c));
	snprintf(c.cluster, sizeof(c.cluster), "f");
	c.lease_ttl_s = 9;
	snprintf(c.self[0].name, sizeof(c.self[0].name), "lang-0");
	c.self[0].roles = EGW_ROLE_LANGUAGE;
	c.self[0].addr = 0x0a000001;
	c.self[0].udp_port = 9471;
	c.self[0].block_tokens = 128;
	c.self[0].hidden = 64;
	snprintf(c.self[0].dtype, sizeof(c.self[0].dtype), "bf16");
	c.self[0].dtype_bytes = 2;
	c.self[0].kinds = 0xf;
	c.self[0].aux_bytes = 64;
	c.self[0].protocol = EGW_PROTO_VERSION;
	snprintf(c.self[0].payload, sizeof(c.self[0].payload), "shm");
	memset(c.self[0].key_id, 'a', EGW_CLUSTER_KEY_ID_LEN - 1);
	c.nself = 1;
	m = egw_cluster_create(&c);
	if (m == NULL)
		abort();
	egw_cluster_start(m, 0);
	drain(m);
	egw_cluster_on_response(m, EGW_CLUSTER_CH_MAIN, 200, grant,
				sizeof(grant) - 1, 0);
	drain(m);
	egw_cluster_on_response(m, EGW_CLUSTER_CH_MAIN, 200, put,
				sizeof(put) - 1, 0);
	drain(m);
	if (!listed)
		return m;
	n = egw_cluster_record_write(&c.self[0], val, sizeof(val));
	sodium_bin2base64(v64, sizeof(v64), (const unsigned char *)val,
			  (size_t)n, sodium_base64_VARIANT_ORIGINAL);
	/* "/embgw/f/lang-0" */
	n = snprintf(
		list, sizeof(list),
		"{\"header\":{\"revision\":\"3\"},"
		"\"kvs\":[{\"key\":\"L2VtYmd3L2YvbGFuZy0w\",\"value\":\"%s\","
		"\"lease\":\"7\",\"mod_revision\":\"2\"}]}",
		v64);
	egw_cluster_on_response(m, EGW_CLUSTER_CH_MAIN, 200, list, (size_t)n,
				0);
	drain(m);
	return m;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egw_cluster_record r, back;
	char why[256], buf[EGW_CLUSTER_RECORD_MAX];
	struct egw_cluster *m;
	int rc, n;

	if (sodium_init() < 0)
		return 0;
	rc = egw_cluster_record_parse((const char *)data, size, &r, why,
				      sizeof(why));
	if (rc != 0 && (why[0] == '\0' || memchr(why, 0, sizeof(why)) == NULL))
		abort();
	if (rc == 0) {
		n = egw_cluster_record_write(&r, buf, sizeof(buf));
		if (n < 0 ||
		    egw_cluster_record_parse(buf, (size_t)n, &back, why,
					     sizeof(why)) != 0 ||
		    memcmp(&r, &back, sizeof(r)) != 0)
			abort();
	}
	m = machine(true);
	egw_cluster_on_watch_line(m, (const char *)data, size, 1);
	drain(m);
	egw_cluster_destroy(m);
	m = machine(false);
	egw_cluster_on_response(m, EGW_CLUSTER_CH_MAIN, 200, (const char *)data,
				size, 1);
	drain(m);
	egw_cluster_destroy(m);
	return 0;
}
