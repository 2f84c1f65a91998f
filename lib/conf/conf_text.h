/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The configuration's text as libconfig gets it (lib/conf only). Read with
 * bounded time and memory: regular files only, sizes capped, @include
 * expanded here (resolved from the including file's directory), comments
 * dropped and blank runs folded (libconfig's scanner rescans a long token
 * from its start each time its buffer refills: a long comment, blank run
 * or string would take time quadratic in its length), settings per group
 * capped (libconfig looks each new name up in its group: quadratic in the
 * group's size), and integer literals that libconfig would narrow to 32
 * bits silently given their 64-bit form - or refused beyond 64 bits.
 */
#ifndef EGW_CONF_TEXT_H
#define EGW_CONF_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CONF_MAX_BYTES (16u << 20)  /* all files together */
#define CONF_MAX_FILES 32           /* the file and what it includes */
#define CONF_MAX_DEPTH 8            /* @include nesting */
#define CONF_MAX_TOKEN 4096         /* a string, a name, a number */
#define CONF_MAX_MEMBERS 256        /* settings in one group */

struct conf_text {
	char *buf;                  /* NUL-terminated, for libconfig */
	size_t len, cap;
	uint32_t *line_file;        /* per line of buf: its file, its line */
	uint32_t *line_no;
	uint32_t nlines, lines_cap;
	char *files[CONF_MAX_FILES];
	uint32_t nfiles;
	char err[512];              /* "file:line: why" when loading failed */
};

/**
 * Read `path` and what it includes into `t`. 0, or -errno with t->err
 * saying where and why: -ENOENT etc. (cannot open), -EINVAL (not a
 * regular file, a token or group too large, an integer beyond 64 bits, a
 * bad @include), -EFBIG (over CONF_MAX_BYTES), -ENOMEM.
 */
int conf_text_load(const char *path, struct conf_text *t);
void conf_text_free(struct conf_text *t);

/** The file and line in it of line `line` (from 1) of t->buf. */
const char *conf_text_where(const struct conf_text *t, int line,
			    int *file_line);

/**
 * Read a whole regular file of at most `max` bytes, without blocking on
 * a FIFO or a device: *buf (malloc'd, NUL-terminated), *len and, when
 * `mode` is not NULL, the mode of the very file read. 0, or -errno with
 * `why` filled in: -EINVAL (not a regular file), -EFBIG.
 */
int conf_read_file(const char *path, size_t max, char **buf, size_t *len,
		   mode_t *mode, char *why, size_t why_len);

#endif /* EGW_CONF_TEXT_H */
