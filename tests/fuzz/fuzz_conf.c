/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the configuration text (lib/conf: the bounded
 * reader, @include, libconfig, every setting's checks). Each input is
 * written as a file next to a key file (keys/demo.key, as the shipped
 * configurations name it) and loaded as the gateway loads it. Oracle:
 * the result is 0 or a documented error; a refusal comes with at least
 * one message, every message terminated and naming the file; success
 * comes with none, and the summary of an accepted configuration prints.
 * The sanitizers catch any access outside the text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egw_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[96];
static FILE *devnull;

static void
remove_dir(void)
{
	char p[128];

	unlink(path);
	snprintf(p, sizeof(p), "%s/keys/demo.key", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/keys", dir);
	rmdir(p);
	rmdir(dir);
}

/* Our own directory, with the key file the start configurations name. */
static int
setup(void)
{
	static const char key[] = "a pre-shared key for the fuzz target only\n";
	const char *tmp = getenv("TMPDIR");
	char p[128];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/egw-fuzz-conf.XXXXXX",
		 tmp != NULL && strlen(tmp) < 32 ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(p, sizeof(p), "%s/keys", dir);
	if (mkdir(p, 0700) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/keys/demo.key", dir);
	f = fopen(p, "w");
	if (f == NULL)
		return -1;
	fputs(key, f);
	fclose(f);
	chmod(p, 0600);
	snprintf(path, sizeof(path), "%s/fuzz.cfg", dir);
	devnull = fopen("/dev/null", "w");
	atexit(remove_dir);
	return devnull != NULL ? 0 : -1;
}

static void
check_errors(int rc, const struct egw_conf *c, const struct egw_conf_errors *e)
{
	if (rc == 0) {
		if (e->stored != 0 || e->total != 0)
			abort();
		egw_conf_print_summary(c, devnull);
		return;
	}
	if (rc != -EINVAL && rc != -ENOMEM && rc != -EFBIG)
		abort();
	if (e->stored == 0 || e->stored > e->total ||
	    e->stored > EGW_CONF_MAX_ERRORS)
		abort();
	for (unsigned i = 0; i < e->stored; i++) {
		const char *m = e->msg[i];

		if (memchr(m, '\0', sizeof(e->msg[i])) == NULL || m[0] == '\0')
			abort();
		/* every message says where: it starts with the file */
		if (strncmp(m, dir, strlen(dir)) != 0)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct egw_conf c;
	static struct egw_conf_errors e;
	FILE *f;
	int rc;

	if (devnull == NULL && setup() != 0)
		abort();
	f = fopen(path, "w");
	if (f == NULL)
		abort();
	if (size > 0 && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	rc = egw_conf_load(path, &c, &e);
	check_errors(rc, &c, &e);
	return 0;
}
