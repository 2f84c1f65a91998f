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
		CU_ASSERT_EQUAL(egw_geom_check(&conf.geom), 0);
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
static const char *base =
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
	expect(edit("driver = \"shm\";", "driver = \"shm\"; device = \"rxe0\"; #<\n"),
	       1, "ports[0].payload.device: unknown setting (expected one of: driver, path)");
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
	expect(edit("driver = \"shm\";", "driver = \"shm\"; window_keys = true; #<\n"),
	       1, "ports[0].payload.window_keys: unknown setting (expected one of: driver, path)");
}

static void
test_out_of_range(void)
{
	expect(edit("lcores = [1];", "lcores = [1]; mtu = 50000; #<\n"), 1,
	       "ports[0].mtu: out of range 576..9000 (got 50000)");
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
	expect(edit("address = \"10.0.0.2\";", "address = \"10.9.0.2\"; #<\n"), 1,
	       "ports[0].peers[0].address: not on the port's subnet");
	/* per-peer shm pool file: absolute, shm driver only */
	expect(edit("address = \"10.0.0.2\";",
		    "address = \"10.0.0.2\"; shm_path = \"/dev/shm/e\";"), 0, "");
	CU_ASSERT_STRING_EQUAL(conf.ports[0].peers[0].shm_path, "/dev/shm/e");
	expect(edit("address = \"10.0.0.2\";",
		    "address = \"10.0.0.2\"; shm_path = \"e\"; #<\n"), 1,
	       "ports[0].peers[0].shm_path: must be an absolute path");
	expect(edit("  pool = {", "  timers = { alloc_ms = 6000; }; #<\n  pool = {"),
	       1, "gateway.timers.alloc_ms: must be below round_ms");
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

int
main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "examples_load", test_examples_load },
		{ "base_is_valid", test_base_is_valid },
		{ "unknown_key", test_unknown_key },
		{ "wrong_type", test_wrong_type },
		{ "payload.window_keys", test_window_keys },
		{ "out_of_range", test_out_of_range },
		{ "duplicates_across_ports", test_duplicates_across_ports },
		{ "key_file_problems", test_key_file_problems },
		{ "missing_and_cross_checks", test_missing_and_cross_checks },
		{ "syntax_error_and_many_errors", test_syntax_error_and_many_errors },
		{ "attach_group", test_attach_group },
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
