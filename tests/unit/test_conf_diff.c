/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reloads: what differs between a running configuration and a new one,
 * split into what cannot change live (named by path, with both values)
 * and what can, and which peers of each port come and go.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "egw_conf.h"

static const char *config_dir = "config";
static struct egw_conf cur, next;
static struct egw_conf_diff d;

static void
load_both(void)
{
	struct egw_conf_errors errs;
	char path[512];

	snprintf(path, sizeof(path), "%s/both.cfg", config_dir);
	CU_ASSERT_FATAL(egw_conf_load(path, &cur, &errs) == 0);
	next = cur;
}

static const struct egw_conf_change *
find(const struct egw_conf_change *arr, unsigned n, const char *path)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(arr[i].path, path) == 0)
			return &arr[i];
	return NULL;
}

static void
test_same_is_empty(void)
{
	load_both();
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), 0);
	CU_ASSERT(egw_conf_diff_empty(&d));
	CU_ASSERT_EQUAL(egw_conf_diff(NULL, &next, &d), -EINVAL);
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, NULL), -EINVAL);
}

static void
test_live_settings(void)
{
	const struct egw_conf_change *ch;

	load_both();
	next.timers.rto_ns *= 2;
	next.timers.peer_dead_ns = 9000000000ull;
	next.pipeline_depth = 3;
	next.max_blocks_per_round = 64;
	next.policy.kind = EGW_POLICY_ADAPTIVE;
	next.policy.tokens = 4096;
	next.timers.admit_ns += 1000000;
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), 0);
	CU_ASSERT_EQUAL(d.fixed_total, 0);
	CU_ASSERT_EQUAL(d.live_total, 7);
	CU_ASSERT(!egw_conf_diff_empty(&d));
	ch = find(d.live, d.nlive, "gateway.timers.peer_dead_ms");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT_STRING_EQUAL(ch->new_val, "9000");
	ch = find(d.live, d.nlive, "gateway.limits.pipeline_depth");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT_STRING_EQUAL(ch->old_val, "2");
	CU_ASSERT_STRING_EQUAL(ch->new_val, "3");
	ch = find(d.live, d.nlive, "gateway.pool.policy.kind");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT_STRING_EQUAL(ch->old_val, "\"fixed\"");
	CU_ASSERT_STRING_EQUAL(ch->new_val, "\"adaptive\"");
	CU_ASSERT(find(d.live, d.nlive, "gateway.pool.policy.tokens") != NULL);
	CU_ASSERT(find(d.live, d.nlive, "gateway.timers.rto_ms") != NULL);
	CU_ASSERT(find(d.live, d.nlive, "gateway.timers.admit_ms") != NULL);
	CU_ASSERT(find(d.live, d.nlive,
		       "gateway.limits.max_blocks_per_round") != NULL);
	CU_ASSERT_EQUAL(d.nadded + d.nremoved, 0);
}

static void
test_peers_added_removed_changed(void)
{
	struct egw_conf_port *p0 = &next.ports[0];

	load_both();
	/* port 0: encoder-a, encoder-b; port 1: prefill-a */
	CU_ASSERT_FATAL(cur.ports[0].npeers == 2 && cur.ports[1].npeers == 1);
	p0->peers[0] = p0->peers[1]; /* encoder-a removed */
	p0->peers[1] = cur.ports[0].peers[1];
	snprintf(p0->peers[1].name, sizeof(p0->peers[1].name), "encoder-c");
	p0->peers[1].addr++;			/* encoder-c added */
	next.ports[1].peers[0].udp_port = 9999; /* prefill-a changed */
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), 0);
	CU_ASSERT_EQUAL(d.fixed_total, 0);
	CU_ASSERT_EQUAL(d.live_total, 0);
	CU_ASSERT_EQUAL_FATAL(d.nremoved, 2);
	CU_ASSERT_EQUAL_FATAL(d.nadded, 2);
	/* removed: indices in the old lists */
	CU_ASSERT_EQUAL(d.removed[0].port, 0);
	CU_ASSERT_STRING_EQUAL(cur.ports[0].peers[d.removed[0].peer].name,
			       "encoder-a");
	CU_ASSERT_EQUAL(d.removed[1].port, 1);
	CU_ASSERT_STRING_EQUAL(cur.ports[1].peers[d.removed[1].peer].name,
			       "prefill-a");
	/* added: indices in the new lists; encoder-b moved but is the same */
	CU_ASSERT_EQUAL(d.added[0].port, 0);
	CU_ASSERT_STRING_EQUAL(next.ports[0].peers[d.added[0].peer].name,
			       "encoder-c");
	CU_ASSERT_EQUAL(d.added[1].port, 1);
	CU_ASSERT_EQUAL(next.ports[1].peers[d.added[1].peer].udp_port, 9999);
}

static void
test_fixed_settings_named(void)
{
	static const struct {
		const char *path, *old_val, *new_val;
	} want[] = {
		{ "ports.[0].mtu", "1500", "9000" },
		{ "ports.[1].max_peers", "64", "128" },
		{ "ports.[1].fanout_ranks", "8", "1" },
		{ "ports.[0].udp_checksum", "\"auto\"", "\"always\"" },
		{ "ports.[0].lcores", "[1, 2]", "[1, 5]" },
		{ "ports.[1].payload.driver", "\"verbs\"", "\"shm\"" },
		{ "ports.[1].address", "10.77.2.1/24", "10.77.2.1/16" },
		{ "gateway.pool.block_tokens", NULL, "32" },
		{ "gateway.limits.max_rooms", "1024", "2048" },
		{ "gateway.metrics.port", NULL, "9999" },
		{ "gateway.roles", "[\"encode\", \"language\"]",
		  "[\"language\"]" },
	};
	const struct egw_conf_change *ch;

	load_both();
	next.ports[0].mtu = 9000;
	next.ports[1].max_peers = 128;
	next.ports[1].fanout_ranks = 1;
	next.ports[0].udp_checksum = EGW_UDP_CKSUM_ALWAYS;
	next.ports[0].lcores[1] = 5;
	next.ports[1].payload.driver = EGW_PAYLOAD_SHM;
	next.ports[1].prefix = 16;
	next.geom.block_tokens = 32;
	next.max_rooms = 2048;
	next.metrics.enabled = cur.metrics.enabled = true;
	next.metrics.port = 9999;
	next.roles = EGW_ROLE_LANGUAGE;
	next.timers.rto_ns *= 2; /* live, but refused with */
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	CU_ASSERT_EQUAL(d.fixed_total, 11);
	CU_ASSERT_EQUAL(d.live_total, 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ch = find(d.fixed, d.nfixed, want[i].path);
		if (ch == NULL)
			printf("\n  missing: %s", want[i].path);
		CU_ASSERT_FATAL(ch != NULL);
		if (want[i].old_val != NULL)
			CU_ASSERT_STRING_EQUAL(ch->old_val, want[i].old_val);
		CU_ASSERT_STRING_EQUAL(ch->new_val, want[i].new_val);
	}
}

/* The cluster's settings need a restart: present or not, and each one
 * (the password shown as changed, never itself). */
static void
test_cluster_fixed(void)
{
	const struct egw_conf_change *ch;

	load_both();
	next.cluster.enabled = true;
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	ch = find(d.fixed, d.nfixed, "gateway.cluster");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT_STRING_EQUAL(ch->new_val, "(present)");
	cur.cluster.enabled = true;
	cur.cluster.lease_ttl_s = next.cluster.lease_ttl_s = 10;
	next.cluster.lease_ttl_s = 20;
	snprintf(next.cluster.password, sizeof(next.cluster.password), "s3");
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	ch = find(d.fixed, d.nfixed, "gateway.cluster.lease_ttl_s");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT_STRING_EQUAL(ch->new_val, "20");
	ch = find(d.fixed, d.nfixed, "gateway.cluster.password");
	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT(strstr(ch->new_val, "s3") == NULL);
}

static void
test_ports_and_sockets(void)
{
	load_both();
	next.nports = 1;
	next.attach.enabled = true;
	snprintf(next.key_file, sizeof(next.key_file), "/elsewhere.key");
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	CU_ASSERT(find(d.fixed, d.nfixed, "ports") != NULL);
	CU_ASSERT(find(d.fixed, d.nfixed, "gateway.attach") != NULL);
	CU_ASSERT(find(d.fixed, d.nfixed, "gateway.key_file") != NULL);
	/* the port that went is not compared peer by peer */
	CU_ASSERT_EQUAL(d.nremoved, 0);

	load_both();
	cur.attach.enabled = next.attach.enabled = true;
	snprintf(next.attach.path, sizeof(next.attach.path), "/run/other.sock");
	next.key.k[0] ^= 1;
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	CU_ASSERT(find(d.fixed, d.nfixed, "gateway.attach.path") != NULL);
	CU_ASSERT(find(d.fixed, d.nfixed, "gateway.key_file") != NULL);
	CU_ASSERT_EQUAL(d.fixed_total, 2);
}

static void
test_many_changes_counted(void)
{
	load_both();
	for (uint16_t i = 0; i < EGW_CONF_MAX_PORTS; i++) {
		next.ports[i] = cur.ports[0];
		next.ports[i].mtu = 9000;
		next.ports[i].udp_port = 1;
		next.ports[i].queues = 9;
		next.ports[i].payload.driver = EGW_PAYLOAD_VERBS;
		cur.ports[i] = cur.ports[0];
		snprintf(next.ports[i].device, sizeof(next.ports[i].device),
			 "net_null%u", i);
		next.ports[i].prefix = 8;
		next.ports[i].lcores[0] = 9;
		next.ports[i].nneigh = 1;
		snprintf(next.ports[i].name, sizeof(next.ports[i].name), "x%u",
			 i);
	}
	cur.nports = next.nports = EGW_CONF_MAX_PORTS;
	CU_ASSERT_EQUAL(egw_conf_diff(&cur, &next, &d), -EPERM);
	CU_ASSERT_EQUAL(d.nfixed, EGW_CONF_MAX_CHANGES);
	CU_ASSERT(d.fixed_total > EGW_CONF_MAX_CHANGES);
}

int
main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "same_is_empty", test_same_is_empty },
		{ "live_settings", test_live_settings },
		{ "peers_added_removed_changed",
		  test_peers_added_removed_changed },
		{ "fixed_settings_named", test_fixed_settings_named },
		{ "cluster_fixed", test_cluster_fixed },
		{ "ports_and_sockets", test_ports_and_sockets },
		{ "many_changes_counted", test_many_changes_counted },
		{ NULL, NULL },
	};

	if (argc > 1)
		config_dir = argv[1];
	return cu_run("conf_diff", tests);
}
