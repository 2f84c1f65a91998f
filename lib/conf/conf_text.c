/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The configuration's text, prepared for libconfig in one linear pass
 * (conf_text.h says why each step is there). The pass knows just enough
 * of libconfig's syntax to do it: comments, strings, names, numbers and
 * the brackets that nest groups, lists and arrays - and the setting each
 * value belongs to, so that its errors read like the loader's:
 * `file:line: setting: why`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf_text.h"

#define MAX_NEST 64
#define LABEL_LEN 64

static const char *
kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" :
	       S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : "not a regular file";
}

int
conf_read_file(const char *path, size_t max, char **buf, size_t *len,
	       mode_t *mode, char *why, size_t why_len)
{
	struct stat st;
	size_t n = 0;
	char *b;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, why_len, "%s", strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(why, why_len, "%s", strerror(errno));
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "is %s, not a regular file",
			 kind_of(st.st_mode));
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > max) {
		snprintf(why, why_len, "too large: %lld bytes (at most %zu)",
			 (long long)st.st_size, max);
		close(fd);
		return -EFBIG;
	}
	b = malloc((size_t)st.st_size + 1);
	if (b == NULL) {
		close(fd);
		snprintf(why, why_len, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	/* what fstat said, no more: a file that grows meanwhile is read
	 * as it was */
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, b + n, (size_t)st.st_size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			snprintf(why, why_len, "%s", strerror(errno));
			free(b);
			close(fd);
			return rc;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = '\0';
	*buf = b;
	*len = n;
	if (mode != NULL)
		*mode = st.st_mode;
	return 0;
}

/* ---- the pass ---------------------------------------------------------- */

struct frame {
	char kind;              /* 'r' root, '{' group, '(' list, '[' array */
	char label[LABEL_LEN];  /* "name" or "[index]" in its parent */
	uint32_t members;       /* settings so far (group, root) */
	uint32_t elems;         /* elements so far (list, array) */
	bool expect_elem;       /* the next value starts an element */
};

struct pass {
	struct conf_text *t;
	size_t total;           /* bytes read, all files */
	struct frame st[MAX_NEST];
	int depth;              /* st[depth] is the innermost */
	char name[LABEL_LEN];   /* the last name seen (a setting's?) */
	char setting[LABEL_LEN];/* the setting a value belongs to */
	/* where the scanner is */
	uint32_t file, line;
};

static int __attribute__((format(printf, 2, 3)))
fail(struct pass *p, const char *fmt, ...)
{
	size_t off;
	va_list ap;

	off = (size_t)snprintf(p->t->err, sizeof(p->t->err), "%s:%u: ",
			       p->t->files[p->file], p->line);
	if (off >= sizeof(p->t->err))
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(p->t->err + off, sizeof(p->t->err) - off, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The setting being read, as the loader names it ("gateway.pool.x",
 * "ports[0].lcores[1]"). */
static const char *
where(struct pass *p, char *buf, size_t n)
{
	const struct frame *f = &p->st[p->depth];
	size_t off = 0;

	buf[0] = '\0';
	for (int d = 1; d <= p->depth + 1 && off < n; d++) {
		char idx[24];
		const char *lab;

		if (d <= p->depth) {
			lab = p->st[d].label;
		} else if (f->kind == '(' || f->kind == '[') {
			snprintf(idx, sizeof(idx), "[%u]",
				 f->elems ? f->elems - 1 : 0);
			lab = idx;
		} else {
			lab = p->setting;
		}
		if (lab[0] == '\0')
			continue;
		off += (size_t)snprintf(buf + off, n - off, "%s%s",
					off && lab[0] != '[' ? "." : "", lab);
	}
	return buf[0] ? buf : "(top level)";
}

static int
grow(struct conf_text *t, size_t more)
{
	if (t->len + more + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		char *b;

		while (cap < t->len + more + 1)
			cap *= 2;
		b = realloc(t->buf, cap);
		if (b == NULL)
			return -ENOMEM;
		t->buf = b;
		t->cap = cap;
	}
	return 0;
}

static int
out(struct pass *p, const char *s, size_t n)
{
	struct conf_text *t = p->t;

	if (grow(t, n) != 0)
		return -ENOMEM;
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
	return 0;
}

/* Line t->nlines of the output (from 1) is line `line` of `file`. */
static int
map_line(struct conf_text *t, uint32_t file, uint32_t line, bool new_line)
{
	if (new_line) {
		if (t->nlines == t->lines_cap) {
			uint32_t cap = t->lines_cap ? 2 * t->lines_cap : 1024;
			uint32_t *a = realloc(t->line_file, cap * sizeof(*a));
			uint32_t *b;

			if (a == NULL)
				return -ENOMEM;
			t->line_file = a;
			b = realloc(t->line_no, cap * sizeof(*b));
			if (b == NULL)
				return -ENOMEM;
			t->line_no = b;
			t->lines_cap = cap;
		}
		t->nlines++;
	}
	t->line_file[t->nlines - 1] = file;
	t->line_no[t->nlines - 1] = line;
	return 0;
}

static int
newline(struct pass *p)
{
	p->line++;
	if (out(p, "\n", 1) != 0)
		return -ENOMEM;
	return map_line(p->t, p->file, p->line, true);
}

/* A value starts: in a list or an array it is the next element. */
static void
value_starts(struct pass *p)
{
	struct frame *f = &p->st[p->depth];

	if ((f->kind == '(' || f->kind == '[') && f->expect_elem) {
		f->elems++;
		f->expect_elem = false;
	}
}

static bool
word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '+' ||
	       c == '.' || c == '*';
}

static int
hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* An integer literal as libconfig reads it: [+-](0x hex | decimal)[L[L]].
 * false when `w` is no integer (a float, a name); *wide when it does not
 * fit 32 bits (libconfig 1.5 would narrow it without its L); *huge when
 * it does not fit 64. */
static bool
integer(const char *w, size_t n, bool *has_l, bool *wide, bool *huge)
{
	size_t i = 0, digits = 0;
	bool neg = false, hex = false;
	uint64_t v = 0;

	*huge = false;
	if (i < n && (w[i] == '+' || w[i] == '-'))
		neg = w[i++] == '-';
	if (i + 1 < n && w[i] == '0' && (w[i + 1] == 'x' || w[i + 1] == 'X')) {
		hex = true;
		i += 2;
	}
	for (; i < n; i++, digits++) {
		int d = hex ? hexval(w[i]) : (w[i] >= '0' && w[i] <= '9' ?
					      w[i] - '0' : -1);
		unsigned base = hex ? 16 : 10;

		if (d < 0)
			break;
		if (v > (UINT64_MAX - (unsigned)d) / base)
			*huge = true;
		else
			v = v * base + (unsigned)d;
	}
	*has_l = false;
	if (i < n && w[i] == 'L') {
		*has_l = true;
		i += (i + 1 < n && w[i + 1] == 'L') ? 2 : 1;
	}
	if (digits == 0 || i != n)
		return false;
	if (v > (uint64_t)INT64_MAX + neg)
		*huge = true;
	*wide = neg ? v > (uint64_t)INT32_MAX + 1 : v > INT32_MAX;
	return true;
}

static int
word(struct pass *p, const char *w, size_t n)
{
	char at[160];
	bool has_l, wide, huge;

	if (n > CONF_MAX_TOKEN)
		return fail(p, "%s: a name or number of more than %u characters",
			    where(p, at, sizeof(at)), CONF_MAX_TOKEN);
	if ((w[0] >= 'a' && w[0] <= 'z') || (w[0] >= 'A' && w[0] <= 'Z') ||
	    w[0] == '*') {
		/* a setting's name, or true/false */
		snprintf(p->name, sizeof(p->name), "%.*s", (int)n, w);
		value_starts(p);
		return out(p, w, n);
	}
	p->name[0] = '\0';
	value_starts(p);
	if (integer(w, n, &has_l, &wide, &huge)) {
		if (huge)
			return fail(p, "%s: integer out of range (more than "
				    "64 bits): %.40s%s", where(p, at, sizeof(at)),
				    w, n > 40 ? "..." : "");
		if (wide && !has_l)
			return out(p, w, n) != 0 ? -ENOMEM : out(p, "L", 1);
	}
	return out(p, w, n);
}

static int
open_bracket(struct pass *p, char c)
{
	struct frame *parent = &p->st[p->depth];
	struct frame *f;
	char at[160];

	value_starts(p);
	if (p->depth + 1 >= MAX_NEST)
		return fail(p, "%s: nested more than %d deep",
			    where(p, at, sizeof(at)), MAX_NEST - 2);
	f = &p->st[++p->depth];
	memset(f, 0, sizeof(*f));
	f->kind = c;
	f->expect_elem = true;
	if (parent->kind == '(' || parent->kind == '[')
		snprintf(f->label, sizeof(f->label), "[%u]",
			 parent->elems ? parent->elems - 1 : 0);
	else
		snprintf(f->label, sizeof(f->label), "%s", p->setting);
	p->name[0] = '\0';
	return out(p, &c, 1);
}

static int
punct(struct pass *p, char c)
{
	struct frame *f = &p->st[p->depth];
	char at[160];

	switch (c) {
	case '=':
	case ':':
		if (p->name[0] && (f->kind == 'r' || f->kind == '{')) {
			snprintf(p->setting, sizeof(p->setting), "%s", p->name);
			if (++f->members > CONF_MAX_MEMBERS)
				return fail(p, "%s: more than %u settings in "
					    "one group", where(p, at, sizeof(at)),
					    CONF_MAX_MEMBERS);
		}
		break;
	case '{':
	case '(':
	case '[':
		return open_bracket(p, c);
	case '}':
	case ')':
	case ']':
		if (p->depth > 0) {
			p->depth--;
			/* what follows belongs to the setting just closed */
			snprintf(p->setting, sizeof(p->setting), "%s",
				 p->st[p->depth + 1].label);
		}
		break;
	case ',':
		f->expect_elem = true;
		break;
	default:
		break;
	}
	p->name[0] = '\0';
	return out(p, &c, 1);
}

static int load_file(struct pass *p, const char *path, int depth);

/* `@include "file"` at the start of a line of file `dir_of`: the
 * included text takes the directive's place. */
static int
include(struct pass *p, const char *s, size_t n, size_t *i, int depth)
{
	const char *dir_of = p->t->files[p->file];
	const char *slash = strrchr(dir_of, '/');
	char rel[512], path[1024];
	size_t j = *i + 8, k;   /* after "@include" */
	uint32_t file = p->file, line = p->line;
	int rc;

	while (j < n && (s[j] == ' ' || s[j] == '\t'))
		j++;
	if (j >= n || s[j] != '"')
		return fail(p, "@include: expected a quoted file name");
	for (k = j + 1; k < n && s[k] != '"' && s[k] != '\n'; k++)
		;
	if (k >= n || s[k] != '"' || k - j - 1 == 0 || k - j - 1 >= sizeof(rel))
		return fail(p, "@include: expected a quoted file name of "
			    "1..%zu characters", sizeof(rel) - 1);
	snprintf(rel, sizeof(rel), "%.*s", (int)(k - j - 1), s + j + 1);
	/* relative: from the including file's directory, like key_file */
	if (rel[0] == '/' || slash == NULL)
		snprintf(path, sizeof(path), "%s", rel);
	else
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - dir_of),
			 dir_of, rel);
	for (j = k + 1; j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r');
	     j++)
		;
	if (j < n && s[j] != '\n' && s[j] != '#' &&
	    !(s[j] == '/' && j + 1 < n && s[j + 1] == '/'))
		return fail(p, "@include \"%s\": nothing may follow it on its "
			    "line", rel);
	while (j < n && s[j] != '\n')
		j++;
	if (depth + 1 > CONF_MAX_DEPTH)
		return fail(p, "@include \"%s\": nested more than %d deep",
			    rel, CONF_MAX_DEPTH);
	/* the included file's first line is this output line */
	rc = map_line(p->t, p->t->nfiles, 1, false);
	if (rc == 0)
		rc = load_file(p, path, depth + 1);
	if (rc != 0)
		return rc;
	p->file = file;
	p->line = line;
	/* the rest of the directive's line is its own again */
	rc = out(p, "\n", 1);
	if (rc == 0)
		rc = map_line(p->t, file, line, true);
	*i = j;
	return rc;
}

/* One file's text through the pass. */
static int
scan(struct pass *p, const char *s, size_t n, int depth)
{
	bool line_start = true;
	char at[160];
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n;) {
		char c = s[i];

		if (c == '\n') {
			rc = newline(p);
			line_start = true;
			i++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' ||
			   c == '\v') {
			/* a blank run: one space */
			while (i < n && (s[i] == ' ' || s[i] == '\t' ||
					 s[i] == '\r' || s[i] == '\f' ||
					 s[i] == '\v'))
				i++;
			rc = out(p, " ", 1);
		} else if (c == '#' || (c == '/' && i + 1 < n && s[i + 1] == '/')) {
			while (i < n && s[i] != '\n')
				i++;
		} else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
			uint32_t from = p->line;

			/* a newline inside starts a line: libconfig takes
			 * an @include after it for a directive too */
			for (i += 2; rc == 0 && i < n &&
			     !(s[i] == '*' && i + 1 < n && s[i + 1] == '/'); i++)
				if (s[i] == '\n') {
					rc = newline(p);
					line_start = true;
				}
			if (rc == 0 && i >= n) {
				p->line = from;
				rc = fail(p, "a /* comment that does not end");
			}
			i += 2;
			if (rc == 0)
				rc = out(p, " ", 1);
		} else if (c == '"') {
			size_t j = i + 1;

			while (j < n && s[j] != '"' && s[j] != '\n')
				j += s[j] == '\\' && j + 1 < n && s[j + 1] != '\n'
				     ? 2 : 1;
			value_starts(p);
			p->name[0] = '\0';
			if (j >= n || s[j] != '"')
				rc = fail(p, "%s: a string that does not end on "
					  "its line", where(p, at, sizeof(at)));
			else if (j - i - 1 > CONF_MAX_TOKEN)
				rc = fail(p, "%s: a string of more than %u "
					  "characters", where(p, at, sizeof(at)),
					  CONF_MAX_TOKEN);
			else
				rc = out(p, s + i, j + 1 - i);
			i = j + 1;
			line_start = false;
		} else if (c == '@') {
			/* only the directive is ours to read: any other '@'
			 * would reach libconfig, which reads files itself */
			if (line_start && n - i >= 9 &&
			    memcmp(s + i, "@include", 8) == 0 &&
			    (s[i + 8] == ' ' || s[i + 8] == '\t' ||
			     s[i + 8] == '"'))
				rc = include(p, s, n, &i, depth);
			else
				rc = fail(p, "%s: '@' outside a string: only "
					  "@include \"file\" at the start of a "
					  "line", where(p, at, sizeof(at)));
		} else if (word_char(c)) {
			size_t j = i;

			while (j < n && word_char(s[j]))
				j++;
			rc = word(p, s + i, j - i);
			i = j;
			line_start = false;
		} else {
			rc = punct(p, c);
			i++;
			line_start = false;
		}
	}
	return rc;
}

static int
load_file(struct pass *p, const char *path, int depth)
{
	struct conf_text *t = p->t;
	char why[160];
	char *buf;
	size_t len;
	int rc;

	if (t->nfiles == CONF_MAX_FILES)
		return fail(p, "@include \"%s\": more than %d files", path,
			    CONF_MAX_FILES);
	rc = conf_read_file(path, CONF_MAX_BYTES - p->total, &buf, &len, NULL,
			    why, sizeof(why));
	if (rc != 0) {
		if (t->nfiles == 0)
			snprintf(t->err, sizeof(t->err), "%s: cannot read: %s",
				 path, why);
		else
			fail(p, "@include \"%s\": cannot read: %s", path, why);
		return rc == -ENOENT || rc == -EACCES || rc == -EFBIG ? rc :
		       -EINVAL;
	}
	t->files[t->nfiles] = strdup(path);
	if (t->files[t->nfiles] == NULL) {
		free(buf);
		return -ENOMEM;
	}
	p->file = t->nfiles++;
	p->line = 1;
	p->total += len;
	rc = scan(p, buf, len, depth);
	free(buf);
	return rc;
}

int
conf_text_load(const char *path, struct conf_text *t)
{
	struct pass *p = calloc(1, sizeof(*p));
	int rc;

	memset(t, 0, sizeof(*t));
	if (p == NULL)
		return -ENOMEM;
	p->t = t;
	p->st[0].kind = 'r';
	rc = out(p, "", 0) == 0 && grow(t, 0) == 0 ? 0 : -ENOMEM;
	if (rc == 0)
		rc = map_line(t, 0, 1, true);
	if (rc == 0)
		rc = load_file(p, path, 0);
	if (rc == -ENOMEM && t->err[0] == '\0')
		snprintf(t->err, sizeof(t->err), "%s: %s", path,
			 strerror(ENOMEM));
	free(p);
	return rc;
}

void
conf_text_free(struct conf_text *t)
{
	free(t->buf);
	free(t->line_file);
	free(t->line_no);
	for (uint32_t i = 0; i < t->nfiles; i++)
		free(t->files[i]);
	memset(t, 0, sizeof(*t));
}

const char *
conf_text_where(const struct conf_text *t, int line, int *file_line)
{
	if (line < 1 || (uint32_t)line > t->nlines || t->nfiles == 0) {
		*file_line = line;
		return t->nfiles ? t->files[0] : "";
	}
	*file_line = (int)t->line_no[line - 1];
	return t->files[t->line_file[line - 1]];
}
