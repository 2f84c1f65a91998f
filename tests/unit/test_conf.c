/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration: the shipped examples load; each class of error names the
 * file, the line of the faulty setting (marked "#<" in the texts below),
 * the setting's path and the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cu_main.h"
#include "egw_conf.h"

static const char *config_dir = "config";
static char tmpdir[256];
static struct egw_conf conf;
static struct egw_conf_errors errs;

static void
test_examples_load(void)
{
	static const char *const names[] = { "encode.cfg", "language.cfg",
					     "both.cfg" };

	for (size_t i = 0; i < 3; i++) {
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", config_dir, names[i]);
		CU_ASSERT_EQUAL(egw_conf_load(path, &conf, &errs), 0);
		for (unsigned e = 0; e < errs.stored; e++)
			printf("\n  %s", errs.msg[e]);
		CU_ASSERT(conf.nports >= 1);
		CU_ASSERT(conf.roles != 0);
		CU_ASSERT_EQUAL(egw_pool_geom_check(&conf.geom), 0);
	}
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/language.cfg", config_dir);
		CU_ASSERT_EQUAL(egw_conf_load(path, &conf, &errs), 0);
	}
	CU_ASSERT_EQUAL(conf.policy.kind, EGW_POLICY_ADAPTIVE);
	CU_ASSERT_EQUAL(conf.ports[0].payload.driver, EGW_PAYLOAD_SHM);
	CU_ASSERT_EQUAL(conf.ports[0].udp_port, 9471); /* the default */
	CU_ASSERT_EQUAL(conf.ports[0].peers[0].addr, 0xc0a84d01u);
	CU_ASSERT_EQUAL(conf.timers.alloc_ns, 2000000000ull);
}

/* A valid file; the cases below each change one thing. */
static const char *const base_text =
	"gateway = {\n"
	"  name = \"gw\";\n"
	"  roles = [\"language\"];\n"
	"  key_file = \"KEY\";\n"
	"  pool = { capacity_tokens = 65536; hidden_size = 64; };\n"
	"};\n"
	"ports = (\n"
	"  { name = \"p0\"; device = \"net_ring0\"; address = \"10.0.0.1/24\";\n"
	"    lcores = [1];\n"
	"    payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };\n"
	"    peers = ( { name = \"e\"; address = \"10.0.0.2\"; } );\n"
	"  }\n"
	");\n";
static const char *base = base_text;

static void
write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT_FATAL(fwrite(text, 1, len, f) == len);
	fclose(f);
}

/* Load `text` (with KEY replaced by the test key) and expect exactly
 * `nerr` errors; the first must be on the "#<" line and contain `what`. */
static void
expect(const char *text, unsigned nerr, const char *what)
{
	char cfg[512], buf[4096], key[512];
	const char *k = strstr(text, "KEY");
	int line = 0;

	snprintf(key, sizeof(key), "%s/test.key", tmpdir);
	snprintf(cfg, sizeof(cfg), "%s/test.cfg", tmpdir);
	if (k != NULL)
		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(k - text), text,
			 key, k + 3);
	else
		snprintf(buf, sizeof(buf), "%s", text);
	write_file(cfg, buf, strlen(buf));
	if (strstr(buf, "#<") != NULL) {
		line = 1;
		for (const char *p = buf; p < strstr(buf, "#<"); p++)
			line += *p == '\n';
	}
	CU_ASSERT_EQUAL(egw_conf_load(cfg, &conf, &errs), nerr ? -22 : 0);
	CU_ASSERT_EQUAL(errs.total, nerr);
	if (errs.total != nerr)
		for (unsigned i = 0; i < errs.stored; i++)
			printf("\n  got: %s", errs.msg[i]);
	if (nerr > 0 && errs.stored > 0 && what[0] != '\0') {
		char where[600];

		snprintf(where, sizeof(where), "%s:%d: ", cfg, line);
		if (strncmp(errs.msg[0], where, strlen(where)) != 0 ||
		    strstr(errs.msg[0], what) == NULL) {
			printf("\n  expected line %d with '%s', got: %s", line,
			       what, errs.msg[0]);
			CU_FAIL("error message");
		}
	}
}

/* Replace the first occurrence of `from` in base with `to`. */
static const char *
edit(const char *from, const char *to)
{
	static char out[4096];
	const char *p = strstr(base, from);

	if (p == NULL)
		return "edit failed";
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - base), base, to,
		 p + strlen(from));
	return out;
}

static void
test_base_is_valid(void)
{
	expect(base, 0, "");
	CU_ASSERT_EQUAL(conf.ports[0].peers[0].udp_port, 9471);
	CU_ASSERT_EQUAL(conf.geom.block_tokens, 128);
	CU_ASSERT_EQUAL(conf.policy.tokens, 8192);
}

static void
test_unknown_key(void)
{
	expect(edit("  name = \"gw\";\n", "  name = \"gw\";\n  colour = 1; #<\n"),
	       1, "gateway.colour: unknown setting (expected one of: name,");
	expect(edit("lcores = [1];", "lcores = [1]; mtu_bytes = 9000; #<\n"), 1,
	       "ports[0].mtu_bytes: unknown setting");
	expect(edit("driver = \"shm\";",
		    "driver = \"shm\"; device = \"rxe0\"; #<\n"),
	       1,
	       "ports[0].payload.device: unknown setting (expected one of: driver, path, segments)");
}

static void
test_wrong_type(void)
{
	expect(edit("lcores = [1];", "lcores = [1]; mtu = \"1500\"; #<\n"), 1,
	       "ports[0].mtu: wrong type: expected an integer, got a string");
	expect(edit("hidden_size = 64;", "hidden_size = 64.0; #<\n"), 1,
	       "gateway.pool.hidden_size: wrong type: expected an integer, got a float");
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\";\n"
		    "  window_keys = \"yes\"; }; #<\n"), 1,
	       "ports[0].payload.window_keys: wrong type: expected a boolean, got a string");
}

/* payload.segments: 0 by default; an encode gateway's pool cut into equal
 * segments of whole pages, each as large as the policy's allocation;
 * each rule broken is named with its value. */
static void
test_segments(void)
{
	static const char *const enc = "roles = [\"encode\"];";
	char *enc_text, *pol_text;

	expect(base, 0, "");
	CU_ASSERT_EQUAL(conf.ports[0].payload.segments, 0);
	/* 512 blocks of 64 tokens x 128 bytes, aux 64: 64 blocks a page */
	enc_text = strdup(edit("roles = [\"language\"];", enc));
	CU_ASSERT_FATAL(enc_text != NULL);
	base = enc_text;
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 8;"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].payload.segments, 8);
	CU_ASSERT_EQUAL(egw_conf_segment_align(&conf.geom), 64);
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 65; #<\n"),
	       1, "ports[0].payload.segments: out of range");
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 3; #<\n"),
	       1,
	       "ports[0].payload.segments: 3 does not divide the pool's 512 "
	       "blocks");
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 16; #<\n"),
	       1,
	       "segments of 32 blocks: each kind's share of a segment must "
	       "fill whole 4096-byte pages, so blocks per segment must be a "
	       "multiple of 64");
	pol_text = strdup(edit("hidden_size = 64; };",
			       "hidden_size = 64; policy = { tokens = 16384; "
			       "}; };"));
	CU_ASSERT_FATAL(pol_text != NULL);
	base = pol_text;
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 8; #<\n"),
	       1,
	       "segments of 8192 tokens are smaller than the largest "
	       "allocation the pool's policy allows (16384 tokens)");
	free(pol_text);
	free(enc_text);
	base = base_text;
	expect(edit("path = \"/dev/shm/x\";",
		    "path = \"/dev/shm/x\"; segments = 8; #<\n"),
	       1, "only an encode gateway's pool is cut into segments");
}

/* payload.window_keys: on by default for verbs, off when asked, unknown
 * to shm. */
static void
test_window_keys(void)
{
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\"; };"), 0, "");
	CU_ASSERT_TRUE(conf.ports[0].payload.window_keys);
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\";\n"
		    "  window_keys = false; };"), 0, "");
	CU_ASSERT_FALSE(conf.ports[0].payload.window_keys);
	expect(edit("driver = \"shm\";",
		    "driver = \"shm\"; window_keys = true; #<\n"),
	       1,
	       "ports[0].payload.window_keys: unknown setting (expected one of: driver, path, segments)");
}

/* payload.hop_limit: 64 by default for verbs, 1..255, unknown to shm. */
static void
test_hop_limit(void)
{
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\"; };"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].payload.hop_limit, 64);
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\";\n"
		    "  hop_limit = 8; };"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].payload.hop_limit, 8);
	expect(edit("payload = { driver = \"shm\"; path = \"/dev/shm/x\"; };",
		    "payload = { driver = \"verbs\"; device = \"rxe0\";\n"
		    "  hop_limit = 0; }; #<\n"),
	       1, "ports[0].payload.hop_limit: out of range 1..255");
	expect(edit("driver = \"shm\";",
		    "driver = \"shm\"; hop_limit = 2; #<\n"),
	       1, "ports[0].payload.hop_limit: unknown setting");
}

/* idle: sleeps of at most 1 ms by default, busy polling when asked;
 * a bound past 10 ms or on a polling worker is refused. */
static void
test_idle_group(void)
{
	expect(base, 0, "");
	CU_ASSERT_EQUAL(conf.ports[0].idle.mode, EGW_IDLE_BACKOFF);
	CU_ASSERT_EQUAL(conf.ports[0].idle.max_sleep_us, 1000);
	expect(edit("lcores = [1];",
		    "lcores = [1]; idle = { mode = \"poll\"; };"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].idle.mode, EGW_IDLE_POLL);
	expect(edit("lcores = [1];",
		    "lcores = [1];\n"
		    "  idle = { mode = \"backoff\"; max_sleep_us = 20; };"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].idle.mode, EGW_IDLE_BACKOFF);
	CU_ASSERT_EQUAL(conf.ports[0].idle.max_sleep_us, 20);
	expect(edit("lcores = [1];", "lcores = [1];\n"
				     "  idle = { mode = \"nap\"; }; #<\n"),
	       1,
	       "ports[0].idle.mode: unknown idle mode 'nap' (backoff, poll)");
	expect(edit("lcores = [1];",
		    "lcores = [1];\n"
		    "  idle = { max_sleep_us = 10001; }; #<\n"),
	       1,
	       "ports[0].idle.max_sleep_us: out of range 1..10000 (got 10001)");
	expect(edit("lcores = [1];",
		    "lcores = [1];\n"
		    "  idle = { mode = \"poll\"; max_sleep_us = 50; }; #<\n"),
	       1, "ports[0].idle.max_sleep_us: a polling worker never sleeps");
	expect(edit("lcores = [1];", "lcores = [1];\n"
				     "  idle = { sleep = 5; }; #<\n"),
	       1,
	       "ports[0].idle.sleep: unknown setting (expected one of: mode, max_sleep_us)");
}

static void
test_out_of_range(void)
{
	expect(edit("lcores = [1];", "lcores = [1]; mtu = 50000; #<\n"), 1,
	       "ports[0].mtu: out of range 576..9000 (got 50000)");
	expect(edit("lcores = [1];", "lcores = [1]; fanout_ranks = 0; #<\n"), 1,
	       "ports[0].fanout_ranks: out of range 1..8 (got 0)");
	expect(edit("lcores = [1];", "lcores = [1]; fanout_ranks = 9; #<\n"), 1,
	       "ports[0].fanout_ranks: out of range 1..8 (got 9)");
	expect(edit("lcores = [1];", "lcores = [1]; fanout_ranks = 2; #<\n"), 0,
	       "");
	CU_ASSERT_EQUAL(conf.ports[0].fanout_ranks, 2);
	expect(base, 0, "");
	CU_ASSERT_EQUAL(conf.ports[0].fanout_ranks, 8);
	CU_ASSERT_EQUAL(conf.ports[0].udp_checksum, EGW_UDP_CKSUM_AUTO);
	expect(edit("lcores = [1];",
		    "lcores = [1]; udp_checksum = \"always\"; #<\n"),
	       0, "");
	CU_ASSERT_EQUAL(conf.ports[0].udp_checksum, EGW_UDP_CKSUM_ALWAYS);
	expect(edit("lcores = [1];",
		    "lcores = [1]; udp_checksum = \"never\"; #<\n"),
	       1,
	       "ports[0].udp_checksum: unknown udp_checksum 'never' "
	       "(auto, always)");
	expect(edit("capacity_tokens = 65536;", "capacity_tokens = 65500; #<\n"), 1,
	       "gateway.pool.capacity_tokens: not a multiple of block_tokens (128)");
	expect(edit("hidden_size = 64;", "hidden_size = 64; dtype = \"fp64\"; #<\n"),
	       1, "gateway.pool.dtype: unknown dtype 'fp64'");
}

static const char *two_ports =
	"gateway = { name = \"gw\"; roles = [\"encode\"]; key_file = \"KEY\"; };\n"
	"ports = (\n"
	"  { name = \"p0\"; device = \"net_ring0\"; address = \"10.0.0.1/24\";\n"
	"    lcores = [1]; payload = { driver = \"shm\"; path = \"/x\"; }; },\n"
	"  { name = \"NAME\"; device = \"DEV\"; address = \"ADDR\"; lcores = [LCORE]; payload = { driver = \"shm\"; path = \"/y\"; }; }\n"
	");\n";

static const char *
second_port(const char *name, const char *dev, const char *addr,
	    const char *lcore)
{
	static char out[2048];
	const char *from[] = { "NAME", "DEV", "ADDR", "LCORE" };
	const char *to[] = { name, dev, addr, lcore };
	char tmp[2048];

	snprintf(out, sizeof(out), "%s", two_ports);
	for (int i = 0; i < 4; i++) {
		char *p = strstr(out, from[i]);

		snprintf(tmp, sizeof(tmp), "%.*s%s%s", (int)(p - out), out, to[i],
			 p + strlen(from[i]));
		snprintf(out, sizeof(out), "%s", tmp);
	}
	/* mark the second port's line */
	{
		char *p = strstr(out, "payload = { driver = \"shm\"; path = \"/y\"");
		char *nl = strchr(strstr(out, "},\n") + 3, '\n');

		(void)p;
		snprintf(tmp, sizeof(tmp), "%.*s #<%s", (int)(nl - out), out, nl);
		snprintf(out, sizeof(out), "%s", tmp);
	}
	return out;
}

static void
test_duplicates_across_ports(void)
{
	expect(second_port("p1", "net_ring1", "10.0.1.1/24", "2"), 0, "");
	expect(second_port("p0", "net_ring1", "10.0.1.1/24", "2"), 1,
	       "ports[1].name: duplicate port name 'p0'");
	expect(second_port("p1", "net_ring1", "10.0.0.1/24", "2"), 1,
	       "ports[1].address: address already used by port 'p0'");
	expect(second_port("p1", "net_ring0", "10.0.1.1/24", "2"), 1,
	       "ports[1].device: device already used by port 'p0'");
	expect(second_port("p1", "net_ring1", "10.0.1.1/24", "1"), 1,
	       "lcore 1 already serves port 'p0'");
	expect(second_port("p1", "eth0", "10.0.1.1/24", "2"), 1,
	       "ports[1].device: neither a PCI address");
	expect(second_port("p1", "0000:3b:00.0", "10.0.1.1/33", "2"), 1,
	       "ports[1].address: not an IPv4 address with prefix");
}

static void
test_key_file_problems(void)
{
	char key[512];

	expect(edit("key_file = \"KEY\";", "key_file = \"/nonexistent/k\"; #<\n"), 1,
	       "gateway.key_file: cannot read key file '/nonexistent/k': No such file");
	snprintf(key, sizeof(key), "%s/test.key", tmpdir);
	write_file(key, "short key", 9);
	expect(edit("key_file = \"KEY\";", "key_file = \"KEY\"; #<\n"), 1,
	       "too short: 9 bytes, need at least 32");
	write_file(key, "0123456789abcdef0123456789abcdef0123456789abcdef", 48);
	chmod(key, 0600);
	expect(base, 0, "");
	CU_ASSERT_FALSE(conf.key_loose_perms);
	chmod(key, 0644);
	expect(base, 0, "");
	CU_ASSERT_TRUE(conf.key_loose_perms);
}

static void
test_missing_and_cross_checks(void)
{
	{
		char t[4096];

		/* missing: reported at the line of the group it belongs in */
		snprintf(t, sizeof(t), "gateway = { #<\n%s",
			 edit("  name = \"gw\";\n", "") + strlen("gateway = {\n"));
		expect(t, 1, "gateway.name: missing (required)");
	}
	expect(edit("lcores = [1];", "queues = 2; lcores = [1]; #<\n"), 1,
	       "ports[0].lcores: 1 lcores for 2 queues");
	expect(edit("address = \"10.0.0.2\";", "address = \"10.9.0.2\"; #<\n"),
	       1,
	       "ports[0].peers[0].address: 10.9.0.2 is not on the port's "
	       "subnet 10.0.0.0/24 and no route covers it");
	/* per-peer shm pool file: absolute, shm driver only */
	expect(edit("address = \"10.0.0.2\";",
		    "address = \"10.0.0.2\"; shm_path = \"/dev/shm/e\";"), 0, "");
	CU_ASSERT_STRING_EQUAL(conf.ports[0].peers[0].shm_path, "/dev/shm/e");
	expect(edit("address = \"10.0.0.2\";",
		    "address = \"10.0.0.2\"; shm_path = \"e\"; #<\n"), 1,
	       "ports[0].peers[0].shm_path: must be an absolute path");
	expect(edit("  pool = {", "  timers = { alloc_ms = 6000; }; #<\n  pool = {"),
	       1, "gateway.timers.alloc_ms: must be below round_ms");
	expect(edit("  pool = {", "  timers = { admit_ms = 7000; };\n  pool = {"),
	       0, "");
	CU_ASSERT_EQUAL(conf.timers.admit_ns, 7000000000ull);
	expect(edit("  pool = {", "  timers = { admit_ms = 0; }; #<\n  pool = {"),
	       1, "gateway.timers.admit_ms");
	/* the adaptive timeout's floor: 1 ms, at most the first timeout */
	CU_ASSERT_EQUAL(conf.timers.rto_min_ns, 1000000ull);
	expect(edit("  pool = {",
		    "  timers = { rto_min_ms = 2; rto_ms = 4; };\n  pool = {"),
	       0, "");
	CU_ASSERT_EQUAL(conf.timers.rto_min_ns, 2000000ull);
	expect(edit("  pool = {",
		    "  timers = { rto_min_ms = 3; }; #<\n  pool = {"),
	       1, "gateway.timers.rto_min_ms: above rto_ms");
	expect(edit("[\"language\"]", "[\"language\", \"prefill\"] #<\n"), 1,
	       "gateway.roles[1]: unknown role 'prefill'");
}

static void
test_syntax_error_and_many_errors(void)
{
	expect(edit("  roles = [\"language\"];\n", "  roles = [\"language\"; #<\n"),
	       1, "syntax error");
	/* three independent problems: all reported in one run */
	{
		const char *t = edit("lcores = [1];",
				     "lcores = [1]; mtu = 1; queues = 99; oops = 2;");

		CU_ASSERT_EQUAL(egw_conf_load("/nonexistent.cfg", &conf, &errs), -22);
		CU_ASSERT(strstr(errs.msg[0], "cannot read") != NULL);
		expect(t, 3, "");
	}
}

/* gateway.attach: the engines' socket */
static void
test_attach_group(void)
{
	const char *at = "  name = \"gw\";\n";

	expect(base, 0, "");
	CU_ASSERT_FALSE(conf.attach.enabled);
	CU_ASSERT_STRING_EQUAL(conf.dtype, "bf16");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "mode = \"0600\"; allow_uids = [0, 1000]; allow_gids = [27]; "
		    "lease_ms = 0; cq_entries = 4096; };\n"), 0, "");
	CU_ASSERT(conf.attach.enabled);
	CU_ASSERT_STRING_EQUAL(conf.attach.path, "/run/e.sock");
	CU_ASSERT_EQUAL(conf.attach.mode, 0600);
	CU_ASSERT_EQUAL(conf.attach.nuids, 2);
	CU_ASSERT_EQUAL(conf.attach.allow_uids[1], 1000);
	CU_ASSERT_EQUAL(conf.attach.ngids, 1);
	CU_ASSERT_EQUAL(conf.attach.lease_ms, 0);
	CU_ASSERT_EQUAL(conf.attach.cq_entries, 4096);
	CU_ASSERT_EQUAL(conf.attach.sq_entries, 256); /* the default */
	CU_ASSERT_EQUAL(conf.attach.max_clients, 64);
	expect(edit(at, "  name = \"gw\";\n  attach = { mode = \"0660\"; }; #<\n"),
	       1, "gateway.attach.path: missing (required)");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"run/e\"; #<\n };\n"),
	       1, "gateway.attach.path: must be an absolute path");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n mode = \"0999\"; #<\n };\n"),
	       1, "gateway.attach.mode: permission bits in octal");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n mode = \"0066\"; #<\n };\n"),
	       1, "gateway.attach.mode: permission bits in octal");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n sq_entries = 100; #<\n };\n"),
	       1, "gateway.attach.sq_entries: not a power of two");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n allow_uids = [-1]; #<\n };\n"),
	       1, "gateway.attach.allow_uids: entry 0 out of range");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n allow_gids = [\"wheel\"]; #<\n };\n"),
	       1, "gateway.attach.allow_gids:");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/e\";\n socket = 1; #<\n };\n"),
	       1, "gateway.attach.socket: unknown setting (expected one of: path,");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"; #<\n };\n"),
	       1, "gateway.attach.path: too long (at most 107 characters)");
}

/* gateway.attach.tenants: sockets of their own for some ports */
static void
test_attach_tenants(void)
{
	const char *at = "  name = \"gw\";\n";

	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "tenants = ( { path = \"/run/t.sock\"; allow_uids = [1001]; "
		    "allow_gids = [990]; ports = [\"p0\"]; } ); };\n"), 0, "");
	CU_ASSERT_EQUAL(conf.attach.ntenants, 1);
	CU_ASSERT_STRING_EQUAL(conf.attach.tenants[0].path, "/run/t.sock");
	CU_ASSERT_EQUAL(conf.attach.tenants[0].mode, 0660);
	CU_ASSERT_EQUAL(conf.attach.tenants[0].nuids, 1);
	CU_ASSERT_EQUAL(conf.attach.tenants[0].allow_uids[0], 1001);
	CU_ASSERT_EQUAL(conf.attach.tenants[0].allow_gids[0], 990);
	CU_ASSERT_EQUAL(conf.attach.tenants[0].nports, 1);
	CU_ASSERT_STRING_EQUAL(conf.attach.tenants[0].ports[0], "p0");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "tenants = ( { path = \"/run/t.sock\"; ports = [\"nope\"]; } ); }; #<\n"),
	       1, "tenant 0 names port \"nope\", which is not in ports");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "tenants = ( { path = \"/run/e.sock\"; ports = [\"p0\"]; } ); }; #<\n"),
	       1, "the attach group's own path");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "tenants = ( { path = \"/run/t.sock\"; ports = [\"p0\"]; }, "
		    "{ path = \"/run/u.sock\"; ports = [\"p0\"]; } ); }; #<\n"),
	       1, "port \"p0\" in tenants 0 and 1");
	expect(edit(at, "  name = \"gw\";\n  attach = { path = \"/run/e.sock\"; "
		    "tenants = ( { path = \"/run/t.sock\"; } ); }; #<\n"),
	       1, "ports: missing (required)");
}

/* gateway.metrics: off without the group, loopback by default when on */
static void
test_metrics_group(void)
{
	const char *at = "  name = \"gw\";\n";

	expect(base, 0, "");
	CU_ASSERT_FALSE(conf.metrics.enabled);
	expect(edit(at, "  name = \"gw\";\n  metrics = { };\n"), 0, "");
	CU_ASSERT(conf.metrics.enabled);
	CU_ASSERT_EQUAL(conf.metrics.addr, 0x7f000001u);
	CU_ASSERT_EQUAL(conf.metrics.port, EGW_CONF_METRICS_PORT);
	expect(edit(at, "  name = \"gw\";\n  metrics = { address = \"0.0.0.0\"; "
		    "port = 19100; };\n"), 0, "");
	CU_ASSERT_EQUAL(conf.metrics.addr, 0);
	CU_ASSERT_EQUAL(conf.metrics.port, 19100);
	expect(edit(at, "  name = \"gw\";\n  metrics = {\n port = 0; #<\n };\n"),
	       1, "gateway.metrics.port: out of range");
	expect(edit(at, "  name = \"gw\";\n  metrics = {\n port = 65536; #<\n };\n"),
	       1, "gateway.metrics.port: out of range");
	expect(edit(at, "  name = \"gw\";\n  metrics = {\n address = \"localhost\"; #<\n };\n"),
	       1, "gateway.metrics.address: not an IPv4 address (a.b.c.d): 'localhost'");
	expect(edit(at, "  name = \"gw\";\n  metrics = {\n address = \"239.1.1.1\"; #<\n };\n"),
	       1, "gateway.metrics.address: a multicast address");
	expect(edit(at, "  name = \"gw\";\n  metrics = {\n path = \"/m\"; #<\n };\n"),
	       1, "gateway.metrics.path: unknown setting (expected one of: address, port)");
	expect(edit(at, "  name = \"gw\";\n  metrics = 9470; #<\n"),
	       1, "gateway.metrics: wrong type: expected a group { }");
}

/* gateway.cluster: off without the group; each rule names its value */
static void
test_cluster_group(void)
{
	const char *at = "  name = \"gw\";\n";
	const char *ok = "  name = \"gw\";\n  cluster = { name = \"prod\"; "
			 "endpoints = [\"http://127.0.0.1:2379\", "
			 "\"http://etcd-2.example:2379/\"]; };\n";
	char pw[512], text[1024];

	expect(base, 0, "");
	CU_ASSERT_FALSE(conf.cluster.enabled);
	expect(edit(at, ok), 0, "");
	CU_ASSERT(conf.cluster.enabled);
	CU_ASSERT_STRING_EQUAL(conf.cluster.name, "prod");
	CU_ASSERT_EQUAL(conf.cluster.nendpoints, 2);
	CU_ASSERT_STRING_EQUAL(conf.cluster.endpoints[1],
			       "http://etcd-2.example:2379");
	CU_ASSERT_EQUAL(conf.cluster.lease_ttl_s, 10);
	CU_ASSERT_EQUAL(conf.cluster.user[0], '\0');

	expect(edit(at, "  name = \"gw\";\n  cluster = {\n name = \"a/b\"; #<\n"
			" endpoints = [\"http://h:1\"]; };\n"),
	       1, "gateway.cluster.name: 'a/b': letters, digits");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; }; #<\n"),
	       1, "gateway.cluster.endpoints: missing (required)");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\";\n"
			" endpoints = [\"127.0.0.1:2379\"]; #<\n };\n"),
	       1,
	       "not http://host:port or https://host:port: '127.0.0.1:2379'");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\";\n"
			" endpoints = [\"http://h\"]; #<\n };\n"),
	       1, "no :port after the host: 'http://h'");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\";\n"
			" endpoints = [\"http://h:70000\"]; #<\n };\n"),
	       1, "the port is not 1..65535: 'http://h:70000'");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\";\n"
			" endpoints = [\"http://h:2379/v3\"]; #<\n };\n"),
	       1, "nothing may follow the port");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\";\n"
		    " endpoints = [\"http://[::1]:2379\", \"http://[::1]:2379\"]; #<\n };\n"),
	       1, "'http://[::1]:2379' given twice");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"http://h:1\"];\n lease_ttl_s = 2; #<\n };\n"),
	       1, "gateway.cluster.lease_ttl_s: out of range 3..300 (got 2)");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"http://h:1\"];\n lease_ttl_s = 3; #<\n };\n"),
	       1,
	       "gateway.cluster.lease_ttl_s: request_timeout_ms 3000 ms is "
	       "more than a third of lease_ttl_s 3 s");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"http://h:1\"];\n dial_timeout_ms = 5000; #<\n };\n"),
	       1,
	       "gateway.cluster.dial_timeout_ms: dial_timeout_ms 5000 ms is "
	       "longer than request_timeout_ms 3000 ms");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"http://h:1\"];\n tls = { ca_file = \"/\"; }; #<\n };\n"),
	       1,
	       "gateway.cluster.tls: given, but endpoint 'http://h:1' is plain http");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"https://h:1\"];\n tls = { ca_file = \"no-such.pem\"; #<\n }; };\n"),
	       1, "gateway.cluster.tls.ca_file: cannot read");
	expect(edit(at,
		    "  name = \"gw\";\n  cluster = { name = \"p\"; "
		    "endpoints = [\"https://h:1\"];\n tls = { cert_file = \"/\"; }; #<\n };\n"),
	       1, "cert_file and key_file go together");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\"; #<\n"
			"endpoints = [\"http://h:1\"];\n user = \"u\"; };\n"),
	       1,
	       "gateway.cluster.password_file: missing: user and "
	       "password_file go together");
	expect(edit(at, "  name = \"gw\";\n  cluster = { name = \"p\"; "
			"endpoints = [\"http://h:1\"];\n ttl = 1; #<\n };\n"),
	       1, "gateway.cluster.ttl: unknown setting");

	/* one port per gateway in a cluster */
	{
		char two[2048];
		const char *p = strstr(base, "  }\n);");

		snprintf(
			two, sizeof(two),
			"%.*s  },\n  { name = \"p1\"; device = "
			"\"net_ring1\"; address = \"10.0.1.1/24\"; lcores = [2]; "
			"payload = { driver = \"shm\"; path = \"/dev/shm/y\"; }; }\n);\n",
			(int)(p - base), base);
		CU_ASSERT_FATAL(strstr(two, "  name = \"gw\";\n") != NULL);
		snprintf(
			text, sizeof(text),
			"%.*s  name = \"gw\";\n  cluster = { "
			"name = \"p\"; endpoints = [\"http://h:1\"]; }; #<\n%s",
			(int)(strstr(two, "  name = \"gw\";\n") - two), two,
			strstr(two, "  name = \"gw\";\n") + 15);
		expect(text, 1,
		       "gateway.cluster: a gateway in a cluster has one "
		       "port (its record is keyed by the gateway's name), got 2");
	}

	/* the password: read at load, its newline dropped */
	snprintf(pw, sizeof(pw), "%s/pw", tmpdir);
	write_file(pw, "s3cret\n", 7);
	snprintf(text, sizeof(text),
		 "  name = \"gw\";\n  cluster = { name = "
		 "\"p\"; endpoints = [\"http://h:1\"]; user = \"root\"; "
		 "password_file = \"%s\"; };\n",
		 pw);
	expect(edit(at, text), 0, "");
	CU_ASSERT_STRING_EQUAL(conf.cluster.user, "root");
	CU_ASSERT_STRING_EQUAL(conf.cluster.password, "s3cret");
	write_file(pw, "\n", 1);
	snprintf(text, sizeof(text),
		 "  name = \"gw\";\n  cluster = { name = "
		 "\"p\"; endpoints = [\"http://h:1\"]; user = \"root\";\n "
		 "password_file = \"%s\"; #<\n };\n",
		 pw);
	expect(edit(at, text), 1, "the password must be 1..255 bytes");
	unlink(pw);
}

/* Numbers are range-checked at their full width: libconfig itself would
 * narrow a literal beyond 32 bits without a word (99999999999999999999
 * read as -1, 0x100000010 as 16). */
static void
test_wide_numbers(void)
{
	expect(edit("capacity_tokens = 65536;",
		    "capacity_tokens = 99999999999999999999; #<\n"), 1,
	       "gateway.pool.capacity_tokens: integer out of range (more than 64 bits): 99999999999999999999");
	expect(edit("capacity_tokens = 65536;",
		    "capacity_tokens = -99999999999999999999; #<\n"), 1,
	       "gateway.pool.capacity_tokens: integer out of range");
	expect(edit("capacity_tokens = 65536;",
		    "capacity_tokens = 4294967296; #<\n"), 1,
	       "gateway.pool.capacity_tokens: out of range 1..1073741824 (got 4294967296)");
	expect(edit("  pool = {", "  limits = { max_rooms = 0x100000010; }; #<\n  pool = {"),
	       1, "gateway.limits.max_rooms: out of range 1..65536 (got 4294967312)");
	expect(edit("lcores = [1];", "lcores = [1]; udp_port = 0x100002503; #<\n"), 1,
	       "ports[0].udp_port: out of range 1..65535 (got 4294976771)");
	expect(edit("lcores = [1];", "lcores = [1]; udp_port = 0xFFFFFFFF; #<\n"), 1,
	       "ports[0].udp_port: out of range 1..65535 (got 4294967295)");
	expect(edit("lcores = [1];", "lcores = [0x100000001]; #<\n"), 1,
	       "ports[0].lcores[0]: out of range 0..1023 (got 4294967297)");
	expect(edit("lcores = [1];", "lcores = [1]; peers = ( ); neighbours = ( { address = \"10.0.0.9\"; mac = \"02:00:00:00:00:01\"; x = 0x1FFFFFFFFFFFFFFFF; } ); #<\n"), 1,
	       "ports[0].neighbours[0].x: integer out of range (more than 64 bits)");
	/* the same values written as 64-bit literals and in range: fine */
	expect(edit("  pool = {", "  limits = { max_rooms = 0x10L; };\n  pool = {"),
	       0, "");
	CU_ASSERT_EQUAL(conf.max_rooms, 16);
	/* each limit alone up to 65536; their product bounded */
	expect(edit("  pool = {", "  limits = { max_rooms = 65536; };\n  pool = {"),
	       0, "");
	expect(edit("  pool = {", "  limits = { max_rooms = 65536; max_runs_per_room = 65536; }; #<\n  pool = {"),
	       1, "gateway.limits: max_rooms x max_runs_per_room = 4294967296 block runs: more than 67108864");
}

/* Addresses a host cannot have, MACs that are no host's. */
static void
test_unusable_addresses(void)
{
	static const struct { const char *addr, *why; } port[] = {
		{ "0.0.0.0/24", "0.0.0.0 is in 0.0.0.0/8" },
		{ "10.0.0.0/24", "10.0.0.0 is the subnet's network address" },
		{ "10.0.0.255/24", "10.0.0.255 is the subnet's broadcast address" },
		{ "224.0.0.5/24", "224.0.0.5 is a multicast address" },
		{ "255.255.255.255/32", "is the broadcast address" },
	};
	char to[128];

	for (size_t i = 0; i < sizeof(port) / sizeof(port[0]); i++) {
		snprintf(to, sizeof(to), "address = \"%s\"; #<\n", port[i].addr);
		expect(edit("address = \"10.0.0.1/24\";", to), 1, port[i].why);
	}
	/* a /31 has no network or broadcast address */
	expect(edit("address = \"10.0.0.1/24\";", "address = \"10.0.0.3/31\";"), 0, "");
	expect(edit("address = \"10.0.0.2\";", "address = \"10.0.0.255\"; #<\n"), 1,
	       "ports[0].peers[0].address: 10.0.0.255 is the subnet's broadcast address");
	expect(edit("address = \"10.0.0.2\";", "address = \"10.0.0.0\"; #<\n"), 1,
	       "ports[0].peers[0].address: 10.0.0.0 is the subnet's network address");
	expect(edit("lcores = [1];", "lcores = [1]; neighbours = ( { address = \"10.0.0.9\"; mac = \"ff:ff:ff:ff:ff:ff\"; } ); #<\n"), 1,
	       "ports[0].neighbours[0].mac: ff:ff:ff:ff:ff:ff is a broadcast MAC address");
	expect(edit("lcores = [1];", "lcores = [1]; neighbours = ( { address = \"10.0.0.9\"; mac = \"01:00:5e:00:00:01\"; } ); #<\n"), 1,
	       "ports[0].neighbours[0].mac: 01:00:5e:00:00:01 is a multicast MAC address");
	expect(edit("lcores = [1];", "lcores = [1]; neighbours = ( { address = \"10.0.0.255\"; mac = \"02:00:00:00:00:01\"; } ); #<\n"), 1,
	       "ports[0].neighbours[0].address: 10.0.0.255 is the subnet's broadcast address");
}

/* The peers line of `base` with routes before it: `routes` is the inside
 * of the list, `peer` the peer's address (a trailing '<' marks the peer's
 * line as the one the first error is on). */
static const char *
with_routes(const char *routes, const char *peer)
{
	size_t plen = strlen(peer);
	bool mark = plen > 0 && peer[plen - 1] == '<';
	static char out[4096];
	char to[2048];
	const char *from =
		"peers = ( { name = \"e\"; address = \"10.0.0.2\"; } );";
	const char *p = strstr(base, from);

	snprintf(to, sizeof(to),
		 "routes = (%s);\n    peers = ( { name = \"e\"; "
		 "address = \"%.*s\"; } );%s",
		 routes, (int)(plen - mark), peer, mark ? " #<\n" : "");
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - base), base, to,
		 p + strlen(from));
	return out;
}

#define IP4(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* routes: peers beyond the subnet through a next hop on it; the longest
 * prefix wins whatever the order; the subnet itself is always direct. */
static void
test_routes(void)
{
	const struct egw_conf_port *p = &conf.ports[0];

	expect(with_routes(
		       " { prefix = \"10.2.0.0/16\"; via = \"10.0.0.254\"; } ",
		       "10.2.3.4"),
	       0, "");
	CU_ASSERT_EQUAL(p->nroutes, 1);
	CU_ASSERT_EQUAL(p->routes[0].net, IP4(10, 2, 0, 0));
	CU_ASSERT_EQUAL(p->routes[0].prefix, 16);
	CU_ASSERT_EQUAL(p->peers[0].addr, IP4(10, 2, 3, 4));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 2, 3, 4)),
			IP4(10, 0, 0, 254));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 0, 0, 7)),
			IP4(10, 0, 0, 7));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 3, 0, 1)), 0);

	expect(with_routes(
		       " { prefix = \"10.2.3.0/24\"; via = \"10.0.0.252\"; },"
		       " { prefix = \"0.0.0.0/0\"; via = \"10.0.0.253\"; },"
		       " { prefix = \"10.2.0.0/16\"; via = \"10.0.0.254\"; },"
		       " { prefix = \"10.0.0.0/8\"; via = \"10.0.0.251\"; } ",
		       "192.168.9.9"),
	       0, "");
	CU_ASSERT_EQUAL(p->nroutes, 4);
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 2, 3, 4)),
			IP4(10, 0, 0, 252));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 2, 4, 4)),
			IP4(10, 0, 0, 254));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 9, 0, 1)),
			IP4(10, 0, 0, 251));
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(192, 168, 9, 9)),
			IP4(10, 0, 0, 253));
	/* a route that contains the subnet does not take it over */
	CU_ASSERT_EQUAL(egw_conf_next_hop(p, IP4(10, 0, 0, 2)),
			IP4(10, 0, 0, 2));
}

/* Each rule of a route, and peers beyond the subnet that none covers. */
static void
test_route_errors(void)
{
	static const struct {
		const char *route, *why;
	} bad[] = {
		{ "prefix = \"10.2.0.0/16\"; via = \"10.1.0.254\";",
		  "routes[0].via: 10.1.0.254 is not on the port's subnet 10.0.0.0/24" },
		{ "prefix = \"10.2.0.0/16\"; via = \"10.0.0.1\";",
		  "routes[0].via: 10.0.0.1 is the port's own address" },
		{ "prefix = \"10.2.0.0/16\"; via = \"10.0.0.255\";",
		  "routes[0].via: 10.0.0.255 is the subnet's broadcast address" },
		{ "prefix = \"10.2.0.0/16\"; via = \"10.0.0\";",
		  "routes[0].via: not an IPv4 address (a.b.c.d): '10.0.0'" },
		{ "prefix = \"10.2.0.1/16\"; via = \"10.0.0.254\";",
		  "routes[0].prefix: 10.2.0.1/16 has host bits set (the network is 10.2.0.0/16)" },
		{ "prefix = \"10.2.0.0\"; via = \"10.0.0.254\";",
		  "routes[0].prefix: not an IPv4 prefix (a.b.c.d/len, len 0..32): '10.2.0.0'" },
		{ "prefix = \"10.2.0.0/33\"; via = \"10.0.0.254\";",
		  "routes[0].prefix: not an IPv4 prefix (a.b.c.d/len, len 0..32): '10.2.0.0/33'" },
		{ "prefix = \"10.0.0.128/25\"; via = \"10.0.0.254\";",
		  "routes[0].prefix: 10.0.0.128/25 lies within the port's own subnet 10.0.0.0/24" },
		{ "prefix = \"10.0.0.0/24\"; via = \"10.0.0.254\";",
		  "routes[0].prefix: 10.0.0.0/24 lies within the port's own subnet" },
		{ "prefix = \"10.2.0.0/16\"; via = \"10.0.0.254\"; metric = 1;",
		  "routes[0].metric: unknown setting" },
		{ "via = \"10.0.0.254\";",
		  "routes[0].prefix: missing (required)" },
	};
	char r[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(r, sizeof(r), " { %s } #<\n", bad[i].route);
		expect(with_routes(r, "10.0.0.2"), 1, bad[i].why);
	}
	/* a route and its duplicate: the second is named */
	expect(with_routes(
		       " { prefix = \"10.2.0.0/16\"; via = \"10.0.0.254\"; },\n"
		       " { prefix = \"10.2.0.0/16\"; via = \"10.0.0.253\"; } #<\n",
		       "10.0.0.2"),
	       1,
	       "routes[1].prefix: duplicate route prefix 10.2.0.0/16 (routes[0])");
	/* a peer beyond the subnet that no route covers */
	expect(with_routes(
		       " { prefix = \"10.2.0.0/16\"; via = \"10.0.0.254\"; } ",
		       "10.3.0.2<"),
	       1,
	       "ports[0].peers[0].address: 10.3.0.2 is not on the port's "
	       "subnet 10.0.0.0/24 and no route covers it (routes)");
	/* routed, but no host's address */
	expect(with_routes(
		       " { prefix = \"0.0.0.0/0\"; via = \"10.0.0.254\"; } ",
		       "224.1.1.1<"),
	       1,
	       "ports[0].peers[0].address: 224.1.1.1 is a multicast address");
	/* static neighbours stay on the link */
	expect(edit("lcores = [1];",
		    "lcores = [1]; neighbours = ( { address = \"10.2.0.9\"; mac = \"02:00:00:00:00:01\"; } ); #<\n"),
	       1, "ports[0].neighbours[0].address: not on the port's subnet");
}

/* Two ports on one device name, or receiving into one pool file. */
static void
test_same_device_or_pool_file(void)
{
	char t[4096];
	const char *two = second_port("p1", "net_ring0,nodeaction=x", "10.0.1.1/24", "2");

	expect(two, 1, "ports[1].device: device already used by port 'p0'");
	snprintf(t, sizeof(t), "%s", second_port("p1", "net_ring1", "10.0.1.1/24", "2"));
	/* both ports' path "/x" */
	memcpy(strstr(t, "path = \"/y\"") + 9, "x", 1);
	/* an encode gateway maps its peers' files: two ports may name one */
	expect(t, 0, "");
	/* a language gateway creates them: each port its own */
	snprintf(t, sizeof(t), "%s", second_port("p1", "net_ring1", "10.0.1.1/24", "2"));
	memcpy(strstr(t, "path = \"/y\"") + 9, "x", 1);
	{
		char *r = strstr(t, "[\"encode\"]");
		char tail[4096];

		snprintf(tail, sizeof(tail), "%s", r + strlen("[\"encode\"]"));
		snprintf(r, sizeof(t) - (size_t)(r - t), "[\"language\"]%s", tail);
	}
	expect(t, 1, "ports[1].payload.path: already port 'p0''s pool file");
}

static void
write_in_tmp(const char *name, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	write_file(path, text, strlen(text));
}

static void
remove_in_tmp(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	if (unlink(path) != 0)
		rmdir(path);
}

/* Only regular files are read, at once: a FIFO or a directory as the
 * configuration, the key file or an @include is a clear error, never a
 * wait. A relative @include is found next to the including file. */
static void
test_input_files(void)
{
	char path[512], fifo[512], t[4096];
	char cwd[512];

	snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
	CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
	CU_ASSERT_EQUAL(egw_conf_load(fifo, &conf, &errs), -22);
	CU_ASSERT_EQUAL(errs.total, 1);
	CU_ASSERT(strstr(errs.msg[0], "fifo: cannot read: is a FIFO, not a regular file") != NULL);
	CU_ASSERT_EQUAL(egw_conf_load(tmpdir, &conf, &errs), -22);
	CU_ASSERT(strstr(errs.msg[0], "cannot read: is a directory") != NULL);
	/* the key file */
	snprintf(t, sizeof(t), "key_file = \"%s\"; #<\n", fifo);
	expect(edit("key_file = \"KEY\";", t), 1,
	       "gateway.key_file: cannot read key file");
	CU_ASSERT(strstr(errs.msg[0], "is a FIFO, not a regular file") != NULL);
	snprintf(t, sizeof(t), "key_file = \"%s\"; #<\n", tmpdir);
	expect(edit("key_file = \"KEY\";", t), 1, "is a directory, not a regular file");
	/* @include of a FIFO: where the directive is */
	expect(edit("  pool = {", "@include \"fifo\" #<\n  pool = {"), 1,
	       "@include \"");
	CU_ASSERT(strstr(errs.msg[0], "fifo\": cannot read: is a FIFO") != NULL);
	/* relative to the configuration's directory, not the working one */
	write_in_tmp("pool.inc", "# the pool, kept apart\n"
		     "pool = { capacity_tokens = 32768; hidden_size = 32; };\n");
	CU_ASSERT_FATAL(getcwd(cwd, sizeof(cwd)) != NULL);
	CU_ASSERT_FATAL(chdir("/") == 0);
	expect(edit("  pool = { capacity_tokens = 65536; hidden_size = 64; };\n",
		    "@include \"pool.inc\"\n"), 0, "");
	CU_ASSERT_EQUAL(conf.geom.capacity_tokens, 32768);
	CU_ASSERT_EQUAL(conf.geom.hidden_size, 32);
	/* an error inside the included file names that file and its line */
	write_in_tmp("pool.inc", "# the pool, kept apart\n\n"
		     "pool = { capacity_tokens = 32768; hidden_size = 0; };\n");
	expect(edit("  pool = { capacity_tokens = 65536; hidden_size = 64; };\n",
		    "@include \"pool.inc\"\n"), 1, "");
	snprintf(path, sizeof(path), "%s/pool.inc:3: gateway.pool.hidden_size: out of range", tmpdir);
	CU_ASSERT(strncmp(errs.msg[0], path, strlen(path)) == 0);
	if (strncmp(errs.msg[0], path, strlen(path)) != 0)
		printf("\n  got: %s", errs.msg[0]);
	/* and the lines after the include are the configuration's own */
	expect(edit("  pool = { capacity_tokens = 65536; hidden_size = 64; };\n",
		    "@include \"pool.inc\"\n  colour = 1; #<\n"), 2,
	       "gateway.colour: unknown setting");
	CU_ASSERT_FATAL(chdir(cwd) == 0);
	remove_in_tmp("pool.inc");
	remove_in_tmp("fifo");
}

/* An @include on the line after a block comment's newline is a directive
 * of the configuration (found next to it, not in the working directory);
 * an '@' anywhere else outside a string is refused, never left to
 * libconfig. */
static void
test_include_after_block_comment(void)
{
	char cwd[512];

	write_in_tmp("pool.inc", "pool = { capacity_tokens = 32768; hidden_size = 32; };\n");
	CU_ASSERT_FATAL(getcwd(cwd, sizeof(cwd)) != NULL);
	CU_ASSERT_FATAL(chdir("/") == 0);
	expect(edit("  key_file = \"KEY\";\n  pool = { capacity_tokens = 65536; hidden_size = 64; };\n",
		    "  key_file = \"KEY\"; /* the pool,\n   kept apart */ @include \"pool.inc\"\n"),
	       0, "");
	CU_ASSERT_EQUAL(conf.geom.capacity_tokens, 32768);
	CU_ASSERT_EQUAL(conf.geom.hidden_size, 32);
	/* not at a line start */
	expect(edit("  key_file = \"KEY\";\n  pool = { capacity_tokens = 65536; hidden_size = 64; };\n",
		    "  key_file = \"KEY\"; @include \"pool.inc\" #<\n"),
	       1, "'@' outside a string");
	/* not a directive */
	expect(edit("  name = \"gw\";\n", "  name = \"gw\";\n  @includes \"pool.inc\" #<\n"),
	       1, "'@' outside a string");
	CU_ASSERT_FATAL(chdir(cwd) == 0);
	remove_in_tmp("pool.inc");
}

/* Large inputs are read in time linear in their size: a 6 MB
 * configuration (a 4 MB comment line, a 1 MB blank run, a 1 MB block
 * comment) loads, with the values it sets; a group with more settings
 * than any group has is refused at the first one too many; more than
 * 16 MiB is refused before it is read. */
static void
test_large_inputs(void)
{
	const size_t mb = 1u << 20;
	size_t len = strlen(base) + 6 * mb + 64, n = 0;
	char *big = malloc(len + 32 * mb), *p;
	char path[512];

	CU_ASSERT_FATAL(big != NULL);
	big[n++] = '#';
	memset(big + n, 'c', 4 * mb);
	n += 4 * mb;
	big[n++] = '\n';
	memset(big + n, ' ', mb);
	n += mb;
	memcpy(big + n, "/*", 2);
	memset(big + n + 2, 'x', mb);
	memcpy(big + n + 2 + mb, "*/\n", 3);
	n += mb + 5;
	/* the base, its key made absolute */
	p = strstr(base, "KEY");
	n += (size_t)sprintf(big + n, "%.*s%s/test.key%s", (int)(p - base),
			     base, tmpdir, p + 3);
	snprintf(path, sizeof(path), "%s/big.cfg", tmpdir);
	write_file(path, big, n);
	CU_ASSERT_EQUAL(egw_conf_load(path, &conf, &errs), 0);
	for (unsigned e = 0; e < errs.stored; e++)
		printf("\n  %s", errs.msg[e]);
	CU_ASSERT_EQUAL(conf.geom.capacity_tokens, 65536);
	CU_ASSERT_STRING_EQUAL(conf.ports[0].peers[0].name, "e");

	/* 100000 settings in one group */
	n = (size_t)sprintf(big, "gateway = {\n");
	for (int i = 0; i < 100000; i++)
		n += (size_t)sprintf(big + n, "k%d = %d;\n", i, i);
	n += (size_t)sprintf(big + n, "};\n");
	write_file(path, big, n);
	CU_ASSERT_EQUAL(egw_conf_load(path, &conf, &errs), -22);
	snprintf(big, 600, "%s:258: gateway.k256: more than 256 settings in one group", path);
	CU_ASSERT_STRING_EQUAL(errs.msg[0], big);

	/* 17 MiB */
	memset(big, '\n', 17 * mb);
	write_file(path, big, 17 * mb);
	CU_ASSERT_EQUAL(egw_conf_load(path, &conf, &errs), -22);
	CU_ASSERT(strstr(errs.msg[0], "too large: 17825792 bytes") != NULL);
	unlink(path);
	free(big);
}

int
main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "examples_load", test_examples_load },
		{ "base_is_valid", test_base_is_valid },
		{ "unknown_key", test_unknown_key },
		{ "wrong_type", test_wrong_type },
		{ "payload.window_keys", test_window_keys },
		{ "payload.segments", test_segments },
		{ "payload.hop_limit", test_hop_limit },
		{ "out_of_range", test_out_of_range },
		{ "duplicates_across_ports", test_duplicates_across_ports },
		{ "key_file_problems", test_key_file_problems },
		{ "missing_and_cross_checks", test_missing_and_cross_checks },
		{ "syntax_error_and_many_errors",
		  test_syntax_error_and_many_errors },
		{ "attach_group", test_attach_group },
		{ "attach_tenants", test_attach_tenants },
		{ "metrics_group", test_metrics_group },
		{ "cluster_group", test_cluster_group },
		{ "wide_numbers", test_wide_numbers },
		{ "unusable_addresses", test_unusable_addresses },
		{ "routes", test_routes },
		{ "route_errors", test_route_errors },
		{ "same_device_or_pool_file", test_same_device_or_pool_file },
		{ "input_files", test_input_files },
		{ "include_after_block_comment",
		  test_include_after_block_comment },
		{ "large_inputs", test_large_inputs },
		{ "idle_group", test_idle_group },
		{ NULL, NULL },
	};
	char key[512];
	int rc;

	if (argc > 1)
		config_dir = argv[1];
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/embgw-conf-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return 2;
	snprintf(key, sizeof(key), "%s/test.key", tmpdir);
	{
		FILE *f = fopen(key, "w");

		fputs("a test key of more than thirty-two bytes", f);
		fclose(f);
	}
	rc = cu_run("conf", tests);
	unlink(key);
	snprintf(key, sizeof(key), "%s/test.cfg", tmpdir);
	unlink(key);
	rmdir(tmpdir);
	return rc;
}
