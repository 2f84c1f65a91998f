/* SPDX-License-Identifier: BSD-3-Clause */
#include "client_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *shim_program;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* execv() takes char *const[]: it writes none of them */
static char *
mutable(const char *s)
{
	char *m;

	memcpy(&m, &s, sizeof(m));
	return m;
}

int
shim_start(struct shim_proc *f, const char *const *args)
{
	static unsigned int seq;
	char *argv[40];
	int pfd[2], ifd[2], n = 0;

	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "/tmp/egw-shim-test.%d.%u.sock",
		 (int)getpid(), seq++);
	argv[n++] = mutable(shim_program);
	argv[n++] = mutable("--socket");
	argv[n++] = f->path;
	for (; args != NULL && *args != NULL && n < 38; args++)
		argv[n++] = mutable(*args);
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -errno;
	if (pipe2(ifd, O_CLOEXEC) != 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	f->pid = fork();
	if (f->pid == 0) {
		/* a failed fatal assertion skips shim_stop(): the shim goes
		 * with the test program at the latest */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(pfd[1], 1);
		dup2(ifd[0], 0);
		execv(shim_program, argv);
		_exit(127);
	}
	close(pfd[1]);
	close(ifd[0]);
	f->out = pfd[0];
	f->in = ifd[1];
	if (!shim_expect(f, "listening on", 5000)) {
		shim_stop(f);
		return -EIO;
	}
	return 0;
}

bool
shim_expect(struct shim_proc *f, const char *needle, unsigned int ms)
{
	uint64_t deadline = now_ms() + ms;

	for (;;) {
		char *hit, *eol;
		struct pollfd p = { .fd = f->out, .events = POLLIN };
		uint64_t now;
		ssize_t n;

		f->buf[f->len] = '\0';
		hit = strstr(f->buf, needle);
		if (hit != NULL && (eol = strchr(hit, '\n')) != NULL) {
			size_t used = (size_t)(eol + 1 - f->buf);

			memmove(f->buf, eol + 1, f->len - used);
			f->len -= used;
			return true;
		}
		now = now_ms();
		if (now >= deadline || f->len + 1 >= sizeof(f->buf) ||
		    poll(&p, 1, (int)(deadline - now)) <= 0) {
			fprintf(stderr, "\nattach shim: no line with \"%s\" "
				"within %u ms; it printed:\n%s\n", needle, ms,
				f->buf);
			return false;
		}
		n = read(f->out, f->buf + f->len, sizeof(f->buf) - 1 - f->len);
		if (n <= 0) {
			fprintf(stderr, "\nattach shim ended; it printed:\n"
				"%s\n", f->buf);
			return false;
		}
		f->len += (size_t)n;
	}
}

void
shim_say(struct shim_proc *f, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) - 1) {
		fprintf(stderr, "shim_say: line too long\n");
		return;
	}
	line[n++] = '\n';
	if (write(f->in, line, (size_t)n) != n)
		fprintf(stderr, "shim_say: %s\n", strerror(errno));
}

void
shim_stop(struct shim_proc *f)
{
	int st;

	if (f->pid <= 0)
		return;
	kill(f->pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
			f->pid = 0;
			break;
		}
		usleep(10000);
	}
	if (f->pid > 0) {
		fprintf(stderr, "attach shim %d did not stop in 5 s\n",
			(int)f->pid);
		kill(f->pid, SIGKILL);
		waitpid(f->pid, &st, 0);
		f->pid = 0;
	}
	close(f->out);
	close(f->in);
}

int
shim_attach(struct shim_proc *f, const char *port, uint32_t flags,
	    struct egw_client **c)
{
	struct egw_client_opts o = { .size = sizeof(o), .name = "cunit",
				     .flags = flags };

	return egw_client_attach(f->path, port, &o, c);
}

bool
wait_event(struct egw_client *c, uint32_t slot, int state, unsigned int ms,
	   struct egw_client_event *ev)
{
	uint64_t deadline = now_ms() + ms;
	struct egw_client_event last = { .state = 99 };

	for (;;) {
		/* one at a time: what follows the awaited event stays queued */
		struct egw_client_event e[1];
		int n = egw_client_poll(c, e, 1);
		uint64_t now;

		for (int i = 0; i < n; i++) {
			if (e[i].slot == slot &&
			    (state < 0 || e[i].state == (uint32_t)state)) {
				*ev = e[i];
				return true;
			}
			if (e[i].slot == slot)
				last = e[i];
		}
		if (n < 0) {
			fprintf(stderr, "poll: %s (%s)\n", strerror(-n),
				egw_client_last_error());
			return false;
		}
		now = now_ms();
		if (now >= deadline) {
			fprintf(stderr, "no event for slot %u state %d within "
				"%u ms; the last was op %u state %u result "
				"%d\n", slot, state, ms, last.op, last.state,
				last.result);
			return false;
		}
		if (n == 0 && egw_client_wait(c, (unsigned int)(deadline -
								 now)) < 0)
			return false;
	}
}
