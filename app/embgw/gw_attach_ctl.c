/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach socket (doc/client.md) on a control thread of its own: it
 * accepts, checks credentials and the hello, maps each client's area,
 * sends the welcome with the pool's and the area's fds, watches the
 * client's socket for its end, writes eventfds for sleeping clients and
 * unmaps what the workers have let go. Workers hear of clients only
 * through their rings (gw_attach.h); nothing here touches a node.
 */
#define GW_LOG_COMP EGW_LOG_ATTACH /* its lines: log type user.embgw.attach */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gw_attach.h"
#include "gw_resources.h"

#define HELLO_DEADLINE_NS 1000000000ull  /* a connection says hello in 1 s */
#define POLL_MS 1                         /* wake-ups within a millisecond */
/* Connections whose credentials were refused at accept wait for their
 * hello (so that the refusal's reason reaches the client) in at most
 * REFUSED_CONNS places of their own, for REFUSED_DEADLINE_NS; beyond
 * that they are closed at once. A refused uid's flood of silent
 * connections thus never holds a place that an allowed engine needs. */
#define REFUSED_CONNS 8u
#define REFUSED_DEADLINE_NS 100000000ull
/* Hellos one uid may have outstanding at once (allowed uids too): one
 * engine's ranks attach together, a flood from one uid is cut. */
#define UID_HELLOS 16u
#define ACCEPT_BURST 64u  /* accepts per loop: a flood drains the backlog */
/* A client given up while it may still map its rooms' blocks (lease
 * expired, broken ring): the blocks stay out of the pool until its socket
 * closes (its process is gone, or it detached), at most this long. */
#define LOST_HOLD_NS 60000000000ull

enum conn_state {
	C_FREE = 0,
	C_HELLO,        /* connected, hello not yet read */
	C_ADDING,       /* area mapped, the worker has not answered yet */
	C_ATTACHED,
	C_REMOVING,     /* the worker is letting go of it */
};

struct conn {
	enum conn_state state;
	int fd;                 /* the socket; -1 once closed */
	bool gone;              /* the socket ended while C_ADDING */
	uint16_t port;          /* index into ctl.ids */
	int32_t client;         /* the worker's id */
	uint64_t deadline;
	void *area;
	size_t area_bytes;
	int area_fd, efd;
	pid_t pid;
	uid_t uid;
	bool wakeup;
	int refuse_rc;          /* refused at accept: said after the hello */
	uint32_t seg;		/* its segment of a cut pool */
	uint16_t ls;            /* the listening socket it came through */
	bool lost;              /* given up by the worker: socket half shut,
				 * waiting for the client's end */
	uint64_t lost_deadline; /* LOST_HOLD_NS after it was given up */
};

/* A listening socket: the attach group's (0) or a tenant's (1..), each
 * with its own credentials and the ports it serves. */
struct lsock {
	int fd;
	dev_t dev;
	ino_t ino;
	const char *path;
	uint32_t mode;
	const char *group;
	struct egw_attach_policy pol;
};

#define MAX_LS (1 + EGW_CONF_MAX_TENANTS)

static struct {
	const struct egw_conf *c;
	struct gw_id *const *ids;
	uint16_t nids;
	struct lsock ls[MAX_LS];
	uint16_t nls;
	uint16_t *ls_of;        /* per identity: the socket that serves it */
	struct conn *conns;
	uint32_t nconns;
	int *ro_fd;             /* per identity: a read-only pool fd or -1 */
	uint32_t nrefused;      /* connections refused at accept, waiting */
	/* counted for the exit line and the metrics endpoint: written by
	 * this thread only, read by others (CNT, gw_attach_counters) */
	uint64_t st_refused, st_refused_closed, st_hello_timeouts;
	uint64_t st_uid_capped, st_lost, st_lost_expired;
	pthread_t thread;
	bool running;
	volatile bool stop;
} ctl;

/* a counter's increment, readable from the metrics thread meanwhile;
 * gives the value before it */
#define CNT(field) __atomic_fetch_add(&ctl.field, 1, __ATOMIC_RELAXED)

void
gw_attach_counters(struct gw_attach_counters *out)
{
	out->refused = __atomic_load_n(&ctl.st_refused, __ATOMIC_RELAXED);
	out->refused_closed = __atomic_load_n(&ctl.st_refused_closed,
					      __ATOMIC_RELAXED);
	out->uid_capped = __atomic_load_n(&ctl.st_uid_capped,
					  __ATOMIC_RELAXED);
	out->hello_timeouts = __atomic_load_n(&ctl.st_hello_timeouts,
					      __ATOMIC_RELAXED);
	out->lost = __atomic_load_n(&ctl.st_lost, __ATOMIC_RELAXED);
	out->lost_expired = __atomic_load_n(&ctl.st_lost_expired,
					    __ATOMIC_RELAXED);
}

/* ---- the socket file ------------------------------------------------------ */

/*
 * A socket file at `path` from an earlier run is replaced only when it is
 * a socket nobody accepts on; anything else there is left alone and the
 * gateway does not start.
 */
static int
claim_path(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		GW_LOG(ERR, "attach: %s exists and is not a socket; not "
		       "replacing it\n", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (rc == 0) {
		GW_LOG(ERR, "attach: another process serves %s\n", path);
		return -EADDRINUSE;
	}
	if (errno != ECONNREFUSED) {
		GW_LOG(ERR, "attach: %s: cannot tell whether it is in use: "
		       "%s\n", path, strerror(errno));
		return -EEXIST;
	}
	GW_LOG(INFO, "attach: replacing the stale socket %s\n", path);
	return unlink(path) == 0 ? 0 : -errno;
}

static int
listen_on(struct lsock *l)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	rc = claim_path(l->path);
	if (rc != 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", l->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    lstat(l->path, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* ours from here: removed at stop only if it is still this inode */
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->fd = fd;
	if (l->group[0] != '\0') {
		struct group *g = getgrnam(l->group);

		if (g == NULL || chown(l->path, (uid_t)-1, g->gr_gid) != 0) {
			GW_LOG(ERR, "attach: cannot give %s to group %s\n",
			       l->path, l->group);
			return -EPERM;
		}
	}
	if (chmod(l->path, l->mode) != 0 || listen(fd, SOMAXCONN) != 0)
		return -errno;
	return 0;
}

static void
unlink_if_ours(const struct lsock *l)
{
	struct stat st;

	if (lstat(l->path, &st) == 0 && st.st_dev == l->dev &&
	    st.st_ino == l->ino)
		unlink(l->path);
}

/* ---- connections ----------------------------------------------------------- */

/* 1 allowed, 0 refused (uid, primary and supplementary groups), <0 the
 * credentials could not be read (refused too) */
static int
allowed(int fd, uint16_t ls, struct egw_attach_peer *who)
{
	return egw_attach_peer_check(fd, &ctl.ls[ls].pol, who);
}

static void refuse(int fd, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
refuse(int fd, int status, const char *fmt, ...)
{
	struct egw_attach_welcome w;
	va_list ap;

	memset(&w, 0, sizeof(w));
	w.magic = EGW_WELCOME_MAGIC;
	w.version = EGW_ATTACH_VERSION;
	w.status = status;
	va_start(ap, fmt);
	vsnprintf(w.message, sizeof(w.message), fmt, ap);
	va_end(ap);
	if (send(fd, &w, sizeof(w), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		GW_LOG(DEBUG, "attach: refusal not sent: %s\n", strerror(errno));
	GW_LOG(NOTICE, "attach: client refused: %s\n", w.message);
}

static void
conn_free(struct conn *k)
{
	if (k->fd >= 0)
		close(k->fd);
	if (k->area != NULL)
		munmap(k->area, k->area_bytes);
	if (k->area_fd >= 0)
		close(k->area_fd);
	if (k->efd >= 0)
		close(k->efd);
	if (k->refuse_rc != 0 && k->state == C_HELLO)
		ctl.nrefused--;
	memset(k, 0, sizeof(*k));
	k->fd = k->area_fd = k->efd = -1;
}

static uint32_t
hellos_of(uid_t uid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < ctl.nconns; i++)
		if (ctl.conns[i].state == C_HELLO &&
		    ctl.conns[i].refuse_rc == 0 && ctl.conns[i].uid == uid)
			n++;
	return n;
}

/*
 * A refusal is sent only after the hello has been read: a socket closed
 * with its hello unread makes the client read a reset instead of the
 * refusal's reason. Credentials are checked before a place is taken:
 * a refused connection waits for its hello in one of REFUSED_CONNS places
 * of its own for REFUSED_DEADLINE_NS, or is closed at once when they are
 * taken; an allowed uid has at most UID_HELLOS hellos outstanding.
 * @return false when nothing was waiting to be accepted.
 */
static bool
accept_one(uint16_t ls, uint64_t now)
{
	struct egw_attach_peer who;
	struct conn *k = NULL;
	int fd = accept4(ctl.ls[ls].fd, NULL, NULL,
			 SOCK_NONBLOCK | SOCK_CLOEXEC);
	int ok;

	if (fd < 0)
		return false;
	ok = allowed(fd, ls, &who);
	if (ok != 1) {
		CNT(st_refused);
		if (ctl.nrefused >= REFUSED_CONNS) {
			if (CNT(st_refused_closed) % 1000 == 0)
				GW_LOG(WARNING, "attach: pid %d (uid %u) may not "
				       "attach; closed at once (%u refused "
				       "connections already wait for their "
				       "hello; %llu closed so)\n", (int)who.pid,
				       (unsigned)who.uid, REFUSED_CONNS,
				       (unsigned long long)ctl.st_refused_closed);
			close(fd);
			return true;
		}
	} else if (hellos_of((uid_t)who.uid) >= UID_HELLOS) {
		if (CNT(st_uid_capped) % 1000 == 0)
			GW_LOG(WARNING, "attach: uid %u has %u connections "
			       "without a hello; closed at once (%llu so)\n",
			       (unsigned)who.uid, UID_HELLOS,
			       (unsigned long long)ctl.st_uid_capped);
		close(fd);
		return true;
	}
	for (uint32_t i = 0; i < ctl.nconns; i++)
		if (ctl.conns[i].state == C_FREE) {
			k = &ctl.conns[i];
			break;
		}
	if (k == NULL) {
		/* beyond every port's clients and the spare connections */
		GW_LOG(WARNING, "attach: connection closed: too many\n");
		close(fd);
		return true;
	}
	k->state = C_HELLO;
	k->fd = fd;
	k->ls = ls;
	k->pid = (pid_t)who.pid;
	k->uid = (uid_t)who.uid;
	k->deadline = now + HELLO_DEADLINE_NS;
	if (ok != 1) {
		k->refuse_rc = -EACCES;
		k->deadline = now + REFUSED_DEADLINE_NS;
		ctl.nrefused++;
	}
	return true;
}

/* The area: a sealed memfd, so that a client cannot shrink it under the
 * worker (which would then fault on it). */
static int
make_area(struct conn *k, const struct egw_attach_hello *h)
{
	const struct egw_conf_attach *a = &ctl.c->attach;
	uint32_t sq = h->sq_entries ? h->sq_entries : a->sq_entries;
	uint32_t cq = h->cq_entries ? h->cq_entries : a->cq_entries;
	uint32_t slots = h->nslots ? h->nslots : a->slots;
	uint32_t max_runs = ctl.c->max_runs_per_room;
	uint32_t max_peers = gw_attach_max_peers(ctl.ids[k->port]);
	size_t bytes;
	int rc;

	if (max_runs > 4096)
		max_runs = 4096;
	/* a client gets at most the configured slots: the port's room
	 * table (max_clients x slots) is shared by all its clients */
	if (slots > a->slots)
		slots = a->slots;
	bytes = egw_attach_area_bytes(sq, cq, slots, max_runs, max_peers);
	if (bytes == 0)
		return -EINVAL;
	k->area_fd = memfd_create("embgw-client", MFD_CLOEXEC |
				  MFD_ALLOW_SEALING);
	if (k->area_fd < 0 || ftruncate(k->area_fd, (off_t)bytes) != 0 ||
	    fcntl(k->area_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_SEAL) != 0)
		return -errno;
	k->area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		       k->area_fd, 0);
	if (k->area == MAP_FAILED) {
		k->area = NULL;
		return -errno;
	}
	k->area_bytes = bytes;
	rc = egw_attach_area_init(k->area, sq, cq, slots, max_runs, max_peers);
	if (rc == 0 && (h->flags & EGW_HELLO_F_PEERS) != 0)
		((struct egw_attach_area *)k->area)
			->events |= EGW_AREA_EV_PEERS;
	return rc;
}

static void
hello(struct conn *k)
{
	struct egw_attach_hello h;
	char why[EGW_ATTACH_MSG_LEN];
	uint8_t buf[sizeof(h) + 1];
	ssize_t n = recv(k->fd, buf, sizeof(buf), MSG_DONTWAIT);
	int rc;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(k);
		return;
	}
	rc = egw_attach_hello_check(buf, (size_t)n, why, sizeof(why));
	if (rc != 0) {
		refuse(k->fd, rc, "%s", why);
		conn_free(k);
		return;
	}
	if (k->refuse_rc == -EACCES) {
		refuse(k->fd, k->refuse_rc, "uid %u may not attach (neither "
		       "its uid nor any of its groups is allowed)",
		       (unsigned)k->uid);
		conn_free(k);
		return;
	}
	memcpy(&h, buf, sizeof(h));
	/* a port is served on its tenant's socket only */
	for (k->port = 0; k->port < ctl.nids; k->port++)
		if (ctl.ids[k->port]->attach != NULL &&
		    ctl.ls_of[k->port] == k->ls &&
		    !strcmp(ctl.ids[k->port]->cfg->name, h.port))
			break;
	if (k->port == ctl.nids) {
		refuse(k->fd, -ENOENT, "no port '%s' with an attach point on "
		       "this socket (%s)", h.port, ctl.ls[k->ls].path);
		conn_free(k);
		return;
	}
	rc = make_area(k, &h);
	if (rc == 0 && (h.flags & EGW_HELLO_F_WAKEUP)) {
		k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		rc = k->efd < 0 ? -errno : 0;
		k->wakeup = rc == 0;
	}
	if (rc != 0) {
		refuse(k->fd, rc, "cannot make the client area: %s",
		       strerror(-rc));
		conn_free(k);
		return;
	}
	{
		struct gw_attach_msg m = {
			.type = GW_AM_ADD,
			.conn = (uint16_t)(k - ctl.conns),
			.arg = (uint64_t)(uintptr_t)k->area,
		};

		if (rte_ring_sp_enqueue_elem(ctl.ids[k->port]->attach->to_worker,
					     &m, sizeof(m)) != 0) {
			refuse(k->fd, -EBUSY, "%s", "the gateway is busy");
			conn_free(k);
			return;
		}
	}
	k->state = C_ADDING;
	GW_LOG(INFO, "attach: pid %d (uid %u, '%.31s') on port %s\n",
	       (int)k->pid, (unsigned)k->uid, h.client, h.port);
}

static const char *
dtype_of(const char *name, uint32_t *code)
{
	static const char *const names[] = { "fp8", "int8", "bf16", "fp16",
					     "fp32" };

	for (uint32_t i = 0; i < 5; i++)
		if (!strcmp(name, names[i])) {
			*code = EGW_DTYPE_FP8 + i;
			return names[i];
		}
	*code = 0;
	return NULL;
}

/* A cut pool: the client maps its segment's memfd alone, which holds its
 * blocks' share of every kind; its rooms are no larger than it. */
static void
welcome_segment(struct egw_attach_welcome *w, const struct egw_pool_mem *pm,
		const struct egw_pool_geom *g, uint32_t seg, int *fds)
{
	fds[0] = egw_payload_pool_seg_fd(pm, seg);
	w->trust_flags |= EGW_WELCOME_T_POOL_SEGMENT;
	w->first_block = seg * pm->seg.blocks;
	w->capacity_tokens = pm->seg.blocks * g->block_tokens;
	w->max_total_tokens = w->capacity_tokens;
	w->pool_bytes = pm->seg.bytes;
	for (int kind = 0; kind < EGW_KIND_MAX; kind++) {
		w->region_offset[kind] = pm->seg.off[kind];
		w->region_bytes[kind] = pm->seg.len[kind];
	}
}

static void
welcome(struct conn *k)
{
	const struct gw_id *id = ctl.ids[k->port];
	const struct egw_pool_geom *g = egw_pool_geom(id->pool);
	struct egw_attach_welcome w;
	uint64_t pool_off, pool_bytes;
	int fds[3] = { id->dops->pool_fd(id->drv, &pool_off, &pool_bytes),
		       k->area_fd, k->efd };
	bool ro = ctl.ro_fd != NULL && ctl.ro_fd[k->port] >= 0;
	char cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { &w, sizeof(w) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf,
	};
	struct cmsghdr *cm;
	uint32_t nfds = k->wakeup ? 3 : 2;
	const struct egw_pool_mem *pm = id->dops->pool_mem != NULL ?
						id->dops->pool_mem(id->drv) :
						NULL;

	memset(&w, 0, sizeof(w));
	memset(cbuf, 0, sizeof(cbuf));
	if (ro) {
		fds[0] = ctl.ro_fd[k->port];
		w.trust_flags = EGW_WELCOME_T_POOL_RDONLY;
	}
	w.magic = EGW_WELCOME_MAGIC;
	w.version = EGW_ATTACH_VERSION;
	w.flags = (ctl.c->roles & EGW_ROLE_ENCODE ? EGW_WELCOME_F_ENCODE : 0) |
		  (ctl.c->roles & EGW_ROLE_LANGUAGE ? EGW_WELCOME_F_LANGUAGE : 0) |
		  (k->wakeup ? EGW_WELCOME_F_WAKEUP : 0);
	w.nfds = nfds;
	w.capacity_tokens = g->capacity_tokens;
	w.block_tokens = g->block_tokens;
	w.hidden_size = g->hidden_size;
	dtype_of(ctl.c->dtype, &w.dtype);
	w.dtype_bytes = g->dtype_bytes;
	w.aux_bytes = g->aux_bytes;
	w.mrope = g->mrope;
	w.max_runs = ((struct egw_attach_area *)k->area)->max_runs;
	/* offsets from the fd's start (shm: the pool file's header first) */
	w.pool_bytes = pool_bytes;
	for (int kind = 0; kind < EGW_KIND_MAX; kind++) {
		w.region_bytes[kind] = egw_pool_geom_region_bytes(g, kind);
		w.region_offset[kind] = w.region_bytes[kind] == 0 ? 0 : pool_off +
			(uint64_t)((uint8_t *)egw_pool_region(id->pool, kind) -
				   (uint8_t *)egw_pool_mem(id->pool));
	}
	w.area_bytes = k->area_bytes;
	w.max_total_tokens = g->capacity_tokens;
	if (pm != NULL && pm->seg.nseg != 0)
		welcome_segment(&w, pm, g, k->seg, fds);
	w.lease_ms = ctl.c->attach.lease_ms;
	w.max_peers = ((struct egw_attach_area *)k->area)->max_peers;
	if ((ctl.c->roles & EGW_ROLE_LANGUAGE) != 0) {
		const struct egw_conf_attach *at = &ctl.c->attach;

		w.cache_entries = at->cache_entries;
		w.cache_tokens = at->cache_tokens == EGW_CONF_CACHE_HALF ?
				 g->capacity_tokens / 2 : at->cache_tokens;
	}
	w.held_warn_ms = ctl.c->attach.held_warn_ms;
	w.client_id = (uint32_t)k->client;
	mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	if (sendmsg(k->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(w))
		GW_LOG(NOTICE, "attach: welcome to pid %d not sent: %s\n",
		       (int)k->pid, strerror(errno));
}

/* The client's socket ended (or it sent something after its hello). */
static void
gone(struct conn *k)
{
	struct gw_attach_msg m = {
		.type = GW_AM_REMOVE,
		.conn = (uint16_t)(k - ctl.conns),
		.client = k->client,
	};

	if (k->fd >= 0) {
		close(k->fd);
		k->fd = -1;
	}
	if (k->state == C_ADDING) {
		k->gone = true; /* removed once the worker has it */
		return;
	}
	if (k->state != C_ATTACHED)
		return;
	GW_LOG(INFO, "attach: pid %d detached; its rooms end\n", (int)k->pid);
	/* the ring holds a message per client and kind: it has room */
	if (rte_ring_sp_enqueue_elem(ctl.ids[k->port]->attach->to_worker, &m,
				     sizeof(m)) == 0)
		k->state = C_REMOVING;
}

/*
 * The worker gave the client up while it may still map the blocks of its
 * delivered or uncommitted rooms (a stopped process whose lease ran out):
 * the worker keeps those blocks out of the pool; here the socket is shut
 * for writing (the client reads its end) and watched for the client's
 * close, which detaches it as usual and frees the blocks. LOST_HOLD_NS
 * bounds the wait.
 */
static void
hold(struct conn *k, uint64_t held_blocks)
{
	CNT(st_lost);
	k->lost = true;
	k->lost_deadline = gw_now_ns() + LOST_HOLD_NS;
	if (shutdown(k->fd, SHUT_WR) != 0)
		GW_LOG(DEBUG, "attach: shutdown: %s\n", strerror(errno));
	GW_LOG(NOTICE, "attach: pid %d given up; %llu block(s) of its rooms "
	       "held until it closes its socket (at most %llu s)\n",
	       (int)k->pid, (unsigned long long)held_blocks,
	       LOST_HOLD_NS / 1000000000ull);
}

/* Something readable on a lost client's socket: its end (EOF, error) or
 * bytes, which are thrown away (a live client still maps the blocks). */
static void
lost_readable(struct conn *k)
{
	uint8_t buf[256];
	ssize_t n = recv(k->fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	GW_LOG(INFO, "attach: pid %d (given up) closed its socket; its held "
	       "blocks go back to the pool\n", (int)k->pid);
	gone(k);
}

/* Which segment of a cut pool a client was given, for the operator. */
static void
say_segment(const struct conn *k, uint16_t port)
{
	const struct gw_id *id = ctl.ids[port];
	const struct egw_pool_mem *pm = id->dops->pool_mem != NULL ?
						id->dops->pool_mem(id->drv) :
						NULL;

	if (pm == NULL || pm->seg.nseg == 0)
		return;
	GW_LOG(INFO,
	       "attach: pid %d has segment %u of %u of port %s "
	       "(blocks %u..%u)\n",
	       (int)k->pid, k->seg, pm->seg.nseg, id->cfg->name,
	       k->seg * pm->seg.blocks, (k->seg + 1) * pm->seg.blocks - 1);
}

static void
from_worker(uint16_t port)
{
	struct gw_attach_msg m;

	while (rte_ring_sc_dequeue_elem(ctl.ids[port]->attach->to_ctl, &m,
					sizeof(m)) == 0) {
		struct conn *k = &ctl.conns[m.conn];
		uint64_t one = 1;

		switch (m.type) {
		case GW_AM_ADDED:
			if (m.client == -EBUSY) {
				refuse(k->fd, m.client,
				       "no segment of port %s "
				       "is free (payload.segments: each holds "
				       "an engine, or rooms of one gone)",
				       ctl.ids[port]->cfg->name);
				conn_free(k);
				break;
			}
			if (m.client < 0) {
				refuse(k->fd, m.client, "%s",
				       "the port has all the clients it takes");
				conn_free(k);
				break;
			}
			k->client = m.client;
			k->seg = (uint32_t)m.arg;
			say_segment(k, port);
			k->state = C_ATTACHED;
			if (k->gone)
				gone(k);
			else
				welcome(k);
			break;
		case GW_AM_REMOVED:
			conn_free(k);
			break;
		case GW_AM_WAKE:
			if (k->state == C_ATTACHED && k->efd >= 0 &&
			    write(k->efd, &one, sizeof(one)) < 0)
				GW_LOG(DEBUG, "attach: eventfd: %s\n",
				       strerror(errno));
			break;
		case GW_AM_LOST:
			if (k->state == C_ATTACHED && k->fd >= 0 && !k->lost)
				hold(k, m.arg);
			break;
		default:
			break;
		}
	}
}

static void *
ctl_main(void *arg)
{
	struct pollfd *pfd = calloc(ctl.nconns + MAX_LS, sizeof(*pfd));
	uint32_t *who = calloc(ctl.nconns + MAX_LS, sizeof(*who));

	(void)arg;
	if (pfd == NULL || who == NULL) {
		GW_LOG(ERR, "attach: control thread out of memory\n");
		free(pfd);
		free(who);
		return NULL;
	}
	while (!ctl.stop) {
		uint64_t now = gw_now_ns();
		nfds_t n = ctl.nls;

		for (uint16_t l = 0; l < ctl.nls; l++)
			pfd[l] = (struct pollfd){ .fd = ctl.ls[l].fd,
						  .events = POLLIN };
		for (uint32_t i = 0; i < ctl.nconns; i++) {
			struct conn *k = &ctl.conns[i];

			if (k->fd < 0 || k->state == C_FREE)
				continue;
			pfd[n] = (struct pollfd){ .fd = k->fd, .events = POLLIN };
			who[n++] = i;
		}
		if (poll(pfd, n, POLL_MS) > 0) {
			for (uint16_t l = 0; l < ctl.nls; l++)
				for (uint32_t a = 0; (pfd[l].revents & POLLIN) &&
				     a < ACCEPT_BURST && accept_one(l, now); a++)
					;
			for (nfds_t j = ctl.nls; j < n; j++) {
				struct conn *k = &ctl.conns[who[j]];

				if (pfd[j].revents == 0 || k->fd != pfd[j].fd)
					continue;
				if (k->state == C_HELLO)
					hello(k);
				else if (k->lost)
					lost_readable(k);
				else
					gone(k); /* EOF, error, or data */
			}
		}
		for (uint16_t p = 0; p < ctl.nids; p++)
			if (ctl.ids[p]->attach != NULL)
				from_worker(p);
		/* after the sockets were read: a hello already waiting counts
		 * even when this thread got the CPU late */
		now = gw_now_ns();
		for (uint32_t i = 0; i < ctl.nconns; i++) {
			struct conn *k = &ctl.conns[i];

			if (k->state == C_HELLO && now > k->deadline) {
				CNT(st_hello_timeouts);
				if (k->refuse_rc == 0)
					refuse(k->fd, -ETIMEDOUT, "%s",
					       "no hello within a second");
				conn_free(k);
			} else if (k->lost && k->fd >= 0 &&
				   now > k->lost_deadline) {
				CNT(st_lost_expired);
				GW_LOG(WARNING, "attach: pid %d, given up %llu s "
				       "ago, still holds its socket open; its "
				       "held blocks go back to the pool\n",
				       (int)k->pid,
				       LOST_HOLD_NS / 1000000000ull);
				gone(k);
			}
		}
	}
	free(pfd);
	free(who);
	return NULL;
}

/*
 * The attach group's socket and one per tenant, each with its policy;
 * every identity served on its tenant's socket, the others on the attach
 * group's (the configuration checked that tenants name known ports).
 */
static int
sockets(const struct egw_conf *c)
{
	const struct egw_conf_attach *a = &c->attach;
	uint32_t self = (uint32_t)geteuid();
	int rc;

	ctl.ls[0] = (struct lsock){
		.fd = -1, .path = a->path, .mode = a->mode, .group = a->group,
		.pol = { .self_uid = self, .uids = a->allow_uids,
			 .nuids = a->nuids, .gids = a->allow_gids,
			 .ngids = a->ngids },
	};
	for (uint16_t t = 0; t < a->ntenants; t++) {
		const struct egw_conf_tenant *tn = &a->tenants[t];

		ctl.ls[1 + t] = (struct lsock){
			.fd = -1, .path = tn->path, .mode = tn->mode,
			.group = tn->group,
			.pol = { .self_uid = self, .uids = tn->allow_uids,
				 .nuids = tn->nuids, .gids = tn->allow_gids,
				 .ngids = tn->ngids },
		};
	}
	ctl.nls = (uint16_t)(1 + a->ntenants);
	ctl.ls_of = calloc(ctl.nids, sizeof(*ctl.ls_of));
	if (ctl.ls_of == NULL)
		return -ENOMEM;
	for (uint16_t i = 0; i < ctl.nids; i++)
		for (uint16_t t = 0; t < a->ntenants; t++)
			for (uint16_t j = 0; j < a->tenants[t].nports; j++)
				if (!strcmp(a->tenants[t].ports[j],
					    ctl.ids[i]->cfg->name))
					ctl.ls_of[i] = (uint16_t)(1 + t);
	for (uint16_t l = 0; l < ctl.nls; l++) {
		rc = listen_on(&ctl.ls[l]);
		if (rc != 0) {
			GW_LOG(ERR, "attach: cannot serve %s: %s\n",
			       ctl.ls[l].path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int
gw_attach_start(const struct egw_conf *c, struct gw_id *const *ids,
		uint16_t nids)
{
	char why[GW_ATTACH_WHY_LEN];
	int rc;

	ctl.c = c;
	ctl.ids = ids;
	ctl.nids = nids;
	for (uint16_t i = 0; i < nids; i++) {
		uint64_t off, bytes;

		if (ids[i]->attach == NULL)
			continue;
		rc = ids[i]->dops->pool_fd(ids[i]->drv, &off, &bytes);
		/* or one memfd per segment of a cut pool */
		if (rc < 0 && ids[i]->dops->pool_mem != NULL &&
		    ids[i]->dops->pool_mem(ids[i]->drv) != NULL &&
		    ids[i]->dops->pool_mem(ids[i]->drv)->seg.nseg != 0)
			rc = 0;
		if (rc < 0) {
			GW_LOG(ERR, "attach: port %s: the %s driver's pool cannot "
			       "be shared: %s\n", ids[i]->cfg->name,
			       ids[i]->dops->name, strerror(-rc));
			return rc;
		}
	}
	/* a language port's engines get a read-only descriptor of the pool:
	 * their mappings cannot write it. Reopening it writable through
	 * /proc takes the file's permission: only the gateway's uid. */
	ctl.ro_fd = malloc(nids * sizeof(*ctl.ro_fd));
	if (ctl.ro_fd == NULL)
		return -ENOMEM;
	for (uint16_t i = 0; i < nids; i++)
		ctl.ro_fd[i] = -1;
	for (uint16_t i = 0; i < nids; i++) {
		char path[64];
		uint64_t off, bytes;
		int fd;

		if (ids[i]->attach == NULL || (c->roles & EGW_ROLE_ENCODE))
			continue;
		fd = ids[i]->dops->pool_fd(ids[i]->drv, &off, &bytes);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (fchmod(fd, 0600) != 0)
			GW_LOG(WARNING, "attach: port %s: cannot make the pool's "
			       "file 0600: %s\n", ids[i]->cfg->name,
			       strerror(errno));
		ctl.ro_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (ctl.ro_fd[i] < 0) {
			rc = -errno;
			GW_LOG(ERR, "attach: port %s: cannot open the pool "
			       "read-only (%s): %s\n", ids[i]->cfg->name,
			       path, strerror(-rc));
			gw_attach_stop();
			return rc;
		}
	}
	/* connection indices travel as 16 bits in the rings' messages */
	ctl.nconns = c->attach.max_clients * nids + 16 + REFUSED_CONNS;
	if (ctl.nconns > UINT16_MAX)
		ctl.nconns = UINT16_MAX;
	ctl.conns = calloc(ctl.nconns, sizeof(*ctl.conns));
	if (ctl.conns == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < ctl.nconns; i++)
		ctl.conns[i].fd = ctl.conns[i].area_fd = ctl.conns[i].efd = -1;
	/* the refusals --check-config makes too, in the same words */
	rc = gw_attach_path_check(&c->attach, why, sizeof(why));
	if (rc != 0)
		GW_LOG(ERR, "%s\n", why);
	else if (gw_attach_mode_warning(&c->attach, why, sizeof(why)))
		GW_LOG(WARNING, "%s\n", why);
	if (rc == 0)
		rc = sockets(c);
	if (rc == 0)
		rc = -pthread_create(&ctl.thread, NULL, ctl_main, NULL);
	if (rc != 0) {
		gw_attach_stop();
		return rc;
	}
	pthread_setname_np(ctl.thread, "embgw-attach");
	ctl.running = true;
	for (uint16_t l = 0; l < ctl.nls; l++)
		GW_LOG(INFO, "attach: engines attach at %s%s\n", ctl.ls[l].path,
		       l == 0 ? "" : " (a tenant's socket)");
	return 0;
}

/* After the workers stopped and before the room sources close: the
 * clients' sockets close (they see the end), every area is unmapped (the
 * sources' teardown does not touch the areas). */
void
gw_attach_stop(void)
{
	if (ctl.running) {
		ctl.stop = true;
		pthread_join(ctl.thread, NULL);
		ctl.running = false;
	}
	for (uint32_t i = 0; ctl.conns != NULL && i < ctl.nconns; i++) {
		struct conn *k = &ctl.conns[i];
		uint32_t none = EGW_LOST_NONE;

		/* the client's word before its socket closes (the workers
		 * have stopped: nothing else writes the area now) */
		if (k->area != NULL && k->state != C_HELLO)
			__atomic_compare_exchange_n(
				&egw_attach_trust_of(k->area)->lost, &none,
				EGW_LOST_STOP, false, __ATOMIC_RELEASE,
				__ATOMIC_RELAXED);
		if (k->state != C_FREE)
			conn_free(k);
	}
	free(ctl.conns);
	ctl.conns = NULL;
	for (uint16_t i = 0; ctl.ro_fd != NULL && i < ctl.nids; i++)
		if (ctl.ro_fd[i] >= 0)
			close(ctl.ro_fd[i]);
	free(ctl.ro_fd);
	ctl.ro_fd = NULL;
	if (ctl.c != NULL && ctl.c->attach.enabled)
		GW_LOG(INFO, "attach: refused=%llu refused_closed=%llu "
		       "uid_capped=%llu hello_timeouts=%llu lost=%llu "
		       "lost_expired=%llu\n",
		       (unsigned long long)ctl.st_refused,
		       (unsigned long long)ctl.st_refused_closed,
		       (unsigned long long)ctl.st_uid_capped,
		       (unsigned long long)ctl.st_hello_timeouts,
		       (unsigned long long)ctl.st_lost,
		       (unsigned long long)ctl.st_lost_expired);
	for (uint16_t l = 0; l < ctl.nls; l++)
		if (ctl.ls[l].fd >= 0) {
			close(ctl.ls[l].fd);
			ctl.ls[l].fd = -1;
			unlink_if_ours(&ctl.ls[l]);
		}
	ctl.nls = 0;
	free(ctl.ls_of);
	ctl.ls_of = NULL;
	ctl.c = NULL;
}
