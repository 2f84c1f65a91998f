/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Attaching: connect to the gateway's socket, send the hello, take the
 * welcome and its descriptors, check what they describe before mapping
 * and using it, and the reverse at detach.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"

#define DEFAULT_TIMEOUT_MS 5000u
#define MAX_FDS 3

static _Thread_local char last_error[256];

void
client_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

const char *
egw_client_last_error(void)
{
	return last_error;
}

uint64_t
client_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
connect_socket(const char *path, uint32_t timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		client_error("socket path longer than %zu bytes: %s",
			     sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		client_error("socket: %s", strerror(errno));
		return rc;
	}
	/* bounds connect() and send(): a gateway with a full backlog or a
	 * stuck reader makes the attach fail, not hang */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		client_error("connect to %s: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

static int
send_hello(int fd, const char *port, const struct egw_client_opts *o)
{
	struct egw_attach_hello h = {
		.magic = EGW_HELLO_MAGIC,
		.version = EGW_ATTACH_VERSION,
		.sq_entries = o->sq_entries,
		.cq_entries = o->cq_entries,
		.nslots = o->nslots,
	};
	const char *name = o->name != NULL ? o->name : "embgw";
	ssize_t n;

	if (port == NULL || port[0] == '\0' ||
	    strlen(port) >= sizeof(h.port)) {
		client_error("port name must be 1..%zu characters",
			     sizeof(h.port) - 1);
		return -EINVAL;
	}
	if ((o->flags & ~(EGW_CLIENT_F_WAKEUP | EGW_CLIENT_F_LEASE_THREAD |
			  EGW_CLIENT_F_PEER_EVENTS))) {
		client_error("unknown option flags %#x", o->flags);
		return -EINVAL;
	}
	memcpy(h.port, port, strlen(port));
	/* the client name is free text for the logs: cut, never refused */
	memcpy(h.client, name, strnlen(name, sizeof(h.client) - 1));
	if (o->flags & EGW_CLIENT_F_WAKEUP)
		h.flags |= EGW_HELLO_F_WAKEUP;
	if (o->flags & EGW_CLIENT_F_PEER_EVENTS)
		h.flags |= EGW_HELLO_F_PEERS;
	n = send(fd, &h, sizeof(h), MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(h)) {
		int rc = n < 0 ? -errno : -EIO;

		client_error("sending the hello: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

static void
close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* Receive the welcome and the descriptors that came with it (nfds). */
static int
recv_welcome(int fd, uint32_t timeout_ms, struct egw_attach_welcome *w,
	     int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = w, .iov_len = sizeof(*w) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int rc;

	*nfds = 0;
	rc = poll(&p, 1, (int)timeout_ms);
	if (rc == 0) {
		client_error("no welcome from the gateway within %u ms",
			     timeout_ms);
		return -ETIMEDOUT;
	}
	if (rc < 0) {
		rc = -errno;
		client_error("waiting for the welcome: %s", strerror(errno));
		return rc;
	}
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	/* a gateway that refuses before reading the hello closes with it
	 * unread: Linux reports that as ECONNRESET first (and clears it),
	 * the refusal with its message is still queued behind it */
	if (n < 0 && errno == ECONNRESET) {
		mh.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	}
	if (n < 0) {
		rc = -errno;
		client_error("receiving the welcome: %s", strerror(errno));
		return rc;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		for (int i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(int));
			if (*nfds < MAX_FDS)
				fds[(*nfds)++] = got;
			else
				close(got);
		}
	}
	if (n == 0) {
		client_error("the gateway closed the socket without a welcome");
		return -ECONNRESET;
	}
	if ((size_t)n != sizeof(*w) || (mh.msg_flags & MSG_TRUNC)) {
		client_error("welcome of %zd bytes, expected %zu", n,
			     sizeof(*w));
		return -EPROTO;
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		client_error("the welcome carried more descriptors than %d",
			     MAX_FDS);
		return -EPROTO;
	}
	if (w->magic != EGW_WELCOME_MAGIC) {
		client_error("not an embgw welcome (magic %08x)", w->magic);
		return -EPROTO;
	}
	return 0;
}

static uint32_t
dtype_bytes(uint32_t dtype)
{
	static const uint32_t bytes[] = { 0, 1, 1, 2, 2, 4 };

	return dtype < sizeof(bytes) / sizeof(bytes[0]) ? bytes[dtype] : 0;
}

/* The welcome's geometry, checked so that no address computed from it can
 * leave the pool's mapping. */
static int
check_geometry(const struct egw_attach_welcome *w, int nfds)
{
	uint64_t tokens = w->capacity_tokens;
	uint64_t need[4];

	if (w->version != EGW_ATTACH_VERSION) {
		client_error("gateway speaks attach version %u, the client "
			     "speaks version %u", w->version,
			     EGW_ATTACH_VERSION);
		return -EPROTONOSUPPORT;
	}
	if ((int)w->nfds != nfds || (nfds != 2 && nfds != 3) ||
	    ((w->flags & EGW_WELCOME_F_WAKEUP) != 0) != (nfds == 3)) {
		client_error("welcome says %u descriptors (flags %#x), %d came",
			     w->nfds, w->flags, nfds);
		return -EPROTO;
	}
	if (w->block_tokens == 0 || tokens < w->block_tokens ||
	    w->hidden_size == 0 || dtype_bytes(w->dtype) == 0 ||
	    dtype_bytes(w->dtype) != w->dtype_bytes ||
	    w->aux_bytes < sizeof(struct egw_client_aux) || w->max_runs == 0 ||
	    w->max_peers > EGW_ATTACH_MAX_PEER_RECS || w->mrope > 1) {
		client_error("welcome's pool geometry is impossible "
			     "(block_tokens %u, capacity %u, dtype %u/%u, "
			     "aux %u, max_runs %u, max_peers %u)",
			     w->block_tokens, w->capacity_tokens, w->dtype,
			     w->dtype_bytes, w->aux_bytes, w->max_runs,
			     w->max_peers);
		return -EPROTO;
	}
	need[EGW_CLIENT_EMBEDDING] = tokens * w->hidden_size * w->dtype_bytes;
	need[EGW_CLIENT_FILL_IDS] = tokens * 4;
	need[EGW_CLIENT_MROPE] = w->mrope ? tokens * 12 : 0;
	need[EGW_CLIENT_AUX] = tokens / w->block_tokens * w->aux_bytes;
	for (int k = 0; k < 4; k++) {
		uint64_t off = w->region_offset[k], len = w->region_bytes[k];

		if ((k == EGW_CLIENT_MROPE && !w->mrope && len != 0) ||
		    len < need[k] || off > w->pool_bytes ||
		    len > w->pool_bytes - off) {
			client_error("welcome's pool region %d (offset %llu, "
				     "%llu bytes) does not fit %llu bytes "
				     "inside the pool's %llu", k,
				     (unsigned long long)off,
				     (unsigned long long)len,
				     (unsigned long long)need[k],
				     (unsigned long long)w->pool_bytes);
			return -EPROTO;
		}
	}
	return 0;
}

/* Map `bytes` of `fd` after checking the file holds them (a short file
 * would turn accesses into SIGBUS). */
static int
map_fd(int fd, uint64_t bytes, const char *what, int prot, void **out)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) != 0 || bytes == 0 ||
	    (uint64_t)st.st_size < bytes || bytes > SIZE_MAX) {
		client_error("the %s's descriptor holds %lld bytes, the welcome "
			     "says %llu", what, (long long)st.st_size,
			     (unsigned long long)bytes);
		return -EPROTO;
	}
	p = mmap(NULL, (size_t)bytes, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int rc = -errno;

		client_error("mapping the %s: %s", what, strerror(errno));
		return rc;
	}
	*out = p;
	return 0;
}

static void
fill_geometry(struct egw_client *c, const struct egw_attach_welcome *w)
{
	struct egw_client_geometry *g = &c->g;

	g->flags = w->flags & (EGW_CLIENT_G_ENCODE | EGW_CLIENT_G_LANGUAGE |
			       EGW_CLIENT_G_WAKEUP);
	if (!(c->pool_prot & PROT_WRITE))
		g->flags |= EGW_CLIENT_G_POOL_RDONLY;
	if (w->trust_flags & EGW_WELCOME_T_POOL_SEGMENT) {
		g->flags |= EGW_CLIENT_G_POOL_SEGMENT;
		g->first_block = w->first_block;
	}
	g->client_id = w->client_id;
	g->capacity_tokens = w->capacity_tokens;
	g->block_tokens = w->block_tokens;
	g->nblocks = w->capacity_tokens / w->block_tokens;
	g->hidden_size = w->hidden_size;
	g->dtype = w->dtype;
	g->dtype_bytes = w->dtype_bytes;
	g->aux_bytes = w->aux_bytes;
	g->mrope = w->mrope;
	g->max_runs = w->max_runs;
	g->max_total_tokens = w->max_total_tokens;
	g->lease_ms = w->lease_ms;
	g->max_peers = c->map.max_peers;
	g->nslots = c->map.nslots;
	g->sq_entries = c->map.sq.nentries;
	g->cq_entries = c->map.cq.nentries;
	g->pool_bytes = w->pool_bytes;
	memcpy(g->region_offset, w->region_offset, sizeof(g->region_offset));
	memcpy(g->region_bytes, w->region_bytes, sizeof(g->region_bytes));
	c->limits = (struct egw_attach_limits){
		.nslots = c->map.nslots,
		.max_total_tokens = w->max_total_tokens,
		.encode = (w->flags & EGW_WELCOME_F_ENCODE) != 0,
		.language = (w->flags & EGW_WELCOME_F_LANGUAGE) != 0,
	};
}

/* Map the pool and the area the welcome describes; takes the fds. */
static int
map_welcome(struct egw_client *c, const struct egw_attach_welcome *w,
	    int *fds, int nfds)
{
	void *pool = NULL;
	int rc = check_geometry(w, nfds);

	/* a language port's pool comes read-only: map it so (a writable
	 * shared mapping of a read-only descriptor fails with EACCES) */
	c->pool_prot = PROT_READ | PROT_WRITE;
	if (rc == 0 && ((w->trust_flags & EGW_WELCOME_T_POOL_RDONLY) ||
			(fcntl(fds[0], F_GETFL) & O_ACCMODE) == O_RDONLY))
		c->pool_prot = PROT_READ;
	if (rc == 0)
		rc = map_fd(fds[0], w->pool_bytes, "pool", c->pool_prot, &pool);
	if (rc == 0) {
		c->pool = pool;
		c->pool_map_bytes = (size_t)w->pool_bytes;
		rc = map_fd(fds[1], w->area_bytes, "client area",
			    PROT_READ | PROT_WRITE, &c->area_mem);
	}
	if (rc == 0) {
		c->area_map_bytes = (size_t)w->area_bytes;
		rc = egw_attach_map_init(&c->map, c->area_mem,
					 c->area_map_bytes);
		if (rc != 0)
			client_error("the client area's header is wrong (%s)",
				     strerror(-rc));
	}
	if (rc == 0 && c->map.max_runs != w->max_runs) {
		client_error("the client area lists %u runs a slot, the "
			     "welcome %u", c->map.max_runs, w->max_runs);
		rc = -EPROTO;
	}
	/* the mappings stay valid without the descriptors; only those that
	 * came are closed (a welcome with too few fails check_geometry) */
	for (int i = 0; i < nfds && i < 2; i++)
		close(fds[i]);
	c->efd = nfds == 3 ? fds[2] : -1;
	if (rc != 0)
		return rc;
	fill_geometry(c, w);
	c->overflow_seen = __atomic_load_n(&c->map.cq.ctl->overflow,
					   __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->map.cq.ctl->flags, 0, __ATOMIC_RELEASE);
	return 0;
}

static int
attach_on(struct egw_client *c, const char *path, const char *port,
	  const struct egw_client_opts *o)
{
	uint32_t timeout = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	struct egw_attach_welcome w;
	int fds[MAX_FDS], nfds = 0, rc;

	c->sock = connect_socket(path, timeout);
	if (c->sock < 0)
		return c->sock;
	rc = send_hello(c->sock, port, o);
	/* a gateway that refused at once (credentials, too many clients)
	 * may have closed before the hello went: its refusal is queued */
	if (rc == 0 || rc == -EPIPE || rc == -ECONNRESET) {
		int sent = rc;

		rc = recv_welcome(c->sock, timeout, &w, fds, &nfds);
		if (sent != 0 && (rc != 0 || w.status == 0)) {
			client_error("sending the hello: %s", strerror(-sent));
			rc = sent;
		}
	}
	if (rc == 0 && w.status != 0) {
		w.message[sizeof(w.message) - 1] = '\0';
		client_error("gateway refused the attach to port %s: %s", port,
			     w.message);
		/* a status that is no errno is the gateway's fault */
		rc = w.status < 0 && w.status > -4096 ? w.status : -EPROTO;
	}
	if (rc != 0) {
		close_fds(fds, nfds);
		return rc;
	}
	rc = map_welcome(c, &w, fds, nfds);
	if (rc != 0)
		return rc;
	c->slots = calloc(c->map.nslots, sizeof(*c->slots));
	if (c->slots == NULL) {
		client_error("no memory for %u slots", c->map.nslots);
		return -ENOMEM;
	}
	if (o->flags & EGW_CLIENT_F_LEASE_THREAD)
		return client_lease_start(c);
	return 0;
}

int
egw_client_attach(const char *socket_path, const char *port,
		  const struct egw_client_opts *o, struct egw_client **out)
{
	struct egw_client_opts opts;
	struct egw_client *c;
	int rc;

	last_error[0] = '\0';
	if (socket_path == NULL || out == NULL) {
		client_error("socket path and result pointer are required");
		return -EINVAL;
	}
	rc = client_opts_read(o, &opts);
	if (rc != 0)
		return rc;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		client_error("no memory for the client");
		return -ENOMEM;
	}
	c->sock = -1;
	c->efd = -1;
	c->epfd = -1;
	rc = attach_on(c, socket_path, port, &opts);
	if (rc != 0) {
		egw_client_detach(c);
		return rc;
	}
	*out = c;
	return 0;
}

void
egw_client_detach(struct egw_client *c)
{
	if (c == NULL)
		return;
	client_lease_stop(c);
	/* the pool first: closing the socket is what tells the gateway to
	 * abort our rooms and free their blocks, which may go to other
	 * rooms at once */
	if (c->pool != NULL)
		munmap(c->pool, c->pool_map_bytes);
	if (c->sock >= 0)
		close(c->sock);
	if (c->efd >= 0)
		close(c->efd);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->area_mem != NULL)
		munmap(c->area_mem, c->area_map_bytes);
	free(c->slots);
	free(c);
}

const struct egw_client_geometry *
egw_client_geometry(const struct egw_client *c)
{
	return &c->g;
}

void *
egw_client_region(const struct egw_client *c, enum egw_client_kind kind,
		  uint64_t *bytes)
{
	if ((unsigned int)kind > EGW_CLIENT_AUX ||
	    c->g.region_bytes[kind] == 0) {
		if (bytes != NULL)
			*bytes = 0;
		return NULL;
	}
	if (bytes != NULL)
		*bytes = c->g.region_bytes[kind];
	return c->pool + c->g.region_offset[kind];
}

int
egw_client_socket_fd(const struct egw_client *c)
{
	return c->sock;
}

int
egw_client_event_fd(const struct egw_client *c)
{
	return c->efd;
}
