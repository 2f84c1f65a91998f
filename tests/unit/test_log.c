/* SPDX-License-Identifier: BSD-3-Clause */
/* The log hook (egw_log.h): a driver's line reaches the installed sink
 * with its component and level, and the default sink keeps the text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_main.h"
#include "egw_log.h"
#include "egw_payload.h"

struct seen {
	unsigned lines;
	enum egw_log_comp comp;
	enum egw_log_level level;
	char line[EGW_LOG_LINE_MAX];
};

static void
capture(void *ctx, enum egw_log_comp comp, enum egw_log_level level,
	const char *fmt, va_list ap)
{
	struct seen *s = ctx;

	s->lines++;
	s->comp = comp;
	s->level = level;
	vsnprintf(s->line, sizeof(s->line), fmt, ap);
}

static void
test_driver_line_reaches_the_sink(void)
{
	char dir[] = "/tmp/egw-log-XXXXXX";
	char want[256];
	struct seen s = { 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	egw_log_set_sink(capture, &s);
	/* a directory where the shm pool file should be: refused, logged */
	CU_ASSERT(egw_payload_shm_path_check(dir) < 0);
	egw_log_set_sink(NULL, NULL);
	rmdir(dir);
	CU_ASSERT_EQUAL(s.lines, 1);
	CU_ASSERT_EQUAL(s.comp, EGW_LOG_DRIVERS);
	CU_ASSERT_EQUAL(s.level, EGW_LOG_ERR);
	snprintf(want, sizeof(want), "shm: payload.path %s exists and is ", dir);
	CU_ASSERT_NSTRING_EQUAL(s.line, want, strlen(want));
	CU_ASSERT_PTR_NOT_NULL(strstr(s.line, "refused, left untouched"));
}

/* What the default sink wrote on stderr for one egw_payload_log line. */
static void
default_sink_line(char *out, size_t len)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	egw_payload_log("verbs", "device '%s' not found", "mlx5_9");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

static void
test_default_sink_keeps_the_text(void)
{
	char got[256];

	egw_log_set_sink(NULL, NULL);
	default_sink_line(got, sizeof(got));
	CU_ASSERT_STRING_EQUAL(got, "embgw: verbs: device 'mlx5_9' not found\n");
}

static void
test_components_have_names(void)
{
	CU_ASSERT_STRING_EQUAL(egw_log_comp_name(EGW_LOG_GATEWAY), "gateway");
	CU_ASSERT_STRING_EQUAL(egw_log_comp_name(EGW_LOG_NODE), "node");
	CU_ASSERT_STRING_EQUAL(egw_log_comp_name(EGW_LOG_DRIVERS), "drivers");
	CU_ASSERT_STRING_EQUAL(egw_log_comp_name(EGW_LOG_ATTACH), "attach");
	CU_ASSERT_STRING_EQUAL(egw_log_comp_name(EGW_LOG_COMP_MAX), "?");
}

int
main(void)
{
	static const struct cu_test tests[] = {
		{ "driver_line_reaches_the_sink",
		  test_driver_line_reaches_the_sink },
		{ "default_sink_keeps_the_text", test_default_sink_keeps_the_text },
		{ "components_have_names", test_components_have_names },
		{ NULL, NULL },
	};
	return cu_run("log", tests);
}
