/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake gateway for the client tests: one port, a memfd block pool, the
 * attach socket of doc/client.md (hello checked with lib/attach, welcome
 * with SCM_RIGHTS, refusals with their messages), one memfd client area
 * per client, the lease, detaching on a closed socket. The rooms it plays
 * are in fake_rooms.c. Everything it sees worth checking is one line on
 * stdout, which the tests read.
 *
 * fake_gateway --socket PATH [--port NAME] [--mode encode|language]
 *   [--dtype bf16|fp16|fp32|fp8|int8] [--hidden N] [--block-tokens N]
 *   [--capacity TOKENS] [--max-runs N] [--run-blocks N] [--lease-ms N]
 *   [--step-ms N] [--max-total N] [--max-clients N] [--mrope 0|1]
 *   [--peers a,b,...] [--speak-version N] [--allow-uid UID]
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fake_gateway.h"

#define DEFAULT_RING 64u
#define DEFAULT_SLOTS 64u
#define PAGE 4096u

static volatile sig_atomic_t stop;

uint64_t
fake_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
usage_exit(const char *why)
{
	fprintf(stderr, "fake_gateway: %s\n", why);
	exit(2);
}

static uint32_t
num(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*s == '\0' || *end != '\0' || v > UINT32_MAX)
		usage_exit("bad number");
	return (uint32_t)v;
}

static void
parse_dtype(struct fake_cfg *c, const char *s)
{
	static const struct { const char *name; uint32_t id, bytes; } t[] = {
		{ "fp8", EGW_DTYPE_FP8, 1 }, { "int8", EGW_DTYPE_INT8, 1 },
		{ "bf16", EGW_DTYPE_BF16, 2 }, { "fp16", EGW_DTYPE_FP16, 2 },
		{ "fp32", EGW_DTYPE_FP32, 4 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(s, t[i].name) == 0) {
			c->dtype = t[i].id;
			c->dtype_bytes = t[i].bytes;
			return;
		}
	usage_exit("unknown dtype");
}

static void
parse_peers(struct fake_cfg *c, const char *list)
{
	char buf[1024], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	c->npeers = 0;
	for (char *p = strtok_r(buf, ",", &save); p != NULL;
	     p = strtok_r(NULL, ",", &save)) {
		if (c->npeers == EGW_ATTACH_MAX_PEERS ||
		    strlen(p) >= EGW_ATTACH_NAME_LEN)
			usage_exit("too many peers or a name too long");
		snprintf(c->peers[c->npeers++], EGW_ATTACH_NAME_LEN, "%s", p);
	}
}

static void
parse(struct fake_cfg *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", 1, NULL, 's' }, { "port", 1, NULL, 'p' },
		{ "mode", 1, NULL, 'm' }, { "dtype", 1, NULL, 'd' },
		{ "hidden", 1, NULL, 'h' }, { "block-tokens", 1, NULL, 'b' },
		{ "capacity", 1, NULL, 'c' }, { "max-runs", 1, NULL, 'r' },
		{ "run-blocks", 1, NULL, 'R' }, { "lease-ms", 1, NULL, 'l' },
		{ "step-ms", 1, NULL, 't' }, { "max-total", 1, NULL, 'T' },
		{ "max-clients", 1, NULL, 'C' }, { "mrope", 1, NULL, 'M' },
		{ "peers", 1, NULL, 'P' }, { "speak-version", 1, NULL, 'V' },
		{ "allow-uid", 1, NULL, 'U' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	*c = (struct fake_cfg){
		.port = "lang0", .flags = EGW_WELCOME_F_LANGUAGE,
		.dtype = EGW_DTYPE_BF16, .dtype_bytes = 2, .hidden = 64,
		.block_tokens = 128, .capacity = 128 * 1024, .max_runs = 16,
		.step_ms = 1, .max_clients = 8, .mrope = 1,
		.speak_version = EGW_ATTACH_VERSION, .aux_bytes = 64,
		.allow_uid = -1,
	};
	parse_peers(c, "enc0");
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': c->socket_path = optarg; break;
		case 'p': c->port = optarg; break;
		case 'm':
			if (strcmp(optarg, "encode") == 0)
				c->flags = EGW_WELCOME_F_ENCODE;
			else if (strcmp(optarg, "language") == 0)
				c->flags = EGW_WELCOME_F_LANGUAGE;
			else
				usage_exit("mode: encode or language");
			break;
		case 'd': parse_dtype(c, optarg); break;
		case 'h': c->hidden = num(optarg); break;
		case 'b': c->block_tokens = num(optarg); break;
		case 'c': c->capacity = num(optarg); break;
		case 'r': c->max_runs = num(optarg); break;
		case 'R': c->run_blocks = num(optarg); break;
		case 'l': c->lease_ms = num(optarg); break;
		case 't': c->step_ms = num(optarg); break;
		case 'T': c->max_total = num(optarg); break;
		case 'C': c->max_clients = num(optarg); break;
		case 'M': c->mrope = num(optarg) != 0; break;
		case 'P': parse_peers(c, optarg); break;
		case 'V': c->speak_version = num(optarg); break;
		case 'U': c->allow_uid = num(optarg); break;
		default: usage_exit("unknown option");
		}
	}
	if (c->socket_path == NULL)
		usage_exit("--socket PATH is required");
	if (c->block_tokens == 0 || c->hidden == 0 ||
	    c->capacity % c->block_tokens != 0 || c->capacity == 0 ||
	    c->max_clients > FAKE_MAX_CLIENTS)
		usage_exit("impossible geometry");
	if (c->max_total == 0 || c->max_total > c->capacity)
		c->max_total = c->capacity;
}

static uint64_t
page_up(uint64_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

static void
pool_create(struct fake_gw *gw)
{
	struct fake_pool *p = &gw->pool;
	const struct fake_cfg *c = &gw->cfg;
	uint64_t tok = c->capacity;

	p->nblocks = c->capacity / c->block_tokens;
	p->len[0] = tok * c->hidden * c->dtype_bytes;
	p->len[1] = tok * 4;
	p->len[2] = c->mrope ? tok * 12 : 0;
	p->len[3] = (uint64_t)p->nblocks * c->aux_bytes;
	for (int k = 0; k < 4; k++) {
		p->off[k] = p->bytes;
		p->bytes += page_up(p->len[k]);
	}
	p->fd = memfd_create("egw-fake-pool", MFD_CLOEXEC);
	if (p->fd < 0 || ftruncate(p->fd, (off_t)p->bytes) != 0)
		usage_exit("cannot make the pool's memfd");
	p->mem = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		      p->fd, 0);
	p->used = calloc(p->nblocks, 1);
	if (p->mem == MAP_FAILED || p->used == NULL)
		usage_exit("cannot map the pool");
	p->nfree = p->nblocks;
}

static int
listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		usage_exit("cannot make the socket");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 16) != 0)
		usage_exit("cannot listen on the socket path");
	return fd;
}

static void
send_welcome(int fd, struct egw_attach_welcome *w, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = w, .iov_len = sizeof(*w) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	w->nfds = (uint32_t)nfds;
	if (nfds > 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(*w))
		printf("sending a welcome failed: %s\n", strerror(errno));
}

static void
refuse(int fd, int status, const char *msg)
{
	struct egw_attach_welcome w = { .magic = EGW_WELCOME_MAGIC,
					.version = EGW_ATTACH_VERSION,
					.status = status };

	snprintf(w.message, sizeof(w.message), "%s", msg);
	printf("refused: %d %s\n", status, msg);
	send_welcome(fd, &w, NULL, 0);
	close(fd);
}

static int
free_index(struct fake_gw *gw)
{
	uint32_t n = 0;
	int idx = -1;

	for (int i = 0; i < FAKE_MAX_CLIENTS; i++) {
		if (gw->clients[i] != NULL)
			n++;
		else if (idx < 0)
			idx = i;
	}
	return n < gw->cfg.max_clients ? idx : -1;
}

static void
client_free(struct fake_client *c)
{
	if (c->sock >= 0)
		close(c->sock);
	if (c->efd >= 0)
		close(c->efd);
	if (c->area_mem != NULL)
		munmap(c->area_mem, c->area_bytes);
	free(c->rooms);
	free(c->run_store);
	free(c);
}

/* Take a connection: read its hello, refuse it or attach it. */
static void
accept_client(struct fake_gw *gw, int lfd)
{
	struct egw_attach_hello h;
	struct egw_attach_welcome w = { .magic = EGW_WELCOME_MAGIC,
					.version = EGW_ATTACH_VERSION };
	struct pollfd p;
	char why[EGW_ATTACH_MSG_LEN];
	struct fake_client *c;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), idx, rc, fds[3];
	uint32_t sq, cq, ns;
	ssize_t n;

	if (fd < 0)
		return;
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 2000) != 1) {
		printf("no hello within 2 s\n");
		close(fd);
		return;
	}
	/* checked before the hello is read, as a gateway may: the client
	 * must still find the refusal behind the reset */
	if (gw->cfg.allow_uid >= 0) {
		struct ucred cr;
		socklen_t len = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
		    cr.uid != (uid_t)gw->cfg.allow_uid) {
			snprintf(why, sizeof(why), "uid %u may not attach",
				 (unsigned int)cr.uid);
			refuse(fd, -EACCES, why);
			return;
		}
	}
	n = recv(fd, &h, sizeof(h), MSG_TRUNC);
	rc = egw_attach_hello_check(&h, n < 0 ? 0 : (size_t)n, why,
				    sizeof(why));
	if (rc == 0 && h.version != gw->cfg.speak_version) {
		snprintf(why, sizeof(why), "client speaks attach version %u, "
			 "the gateway speaks version %u", h.version,
			 gw->cfg.speak_version);
		rc = -EPROTONOSUPPORT;
	}
	if (rc != 0) {
		refuse(fd, rc, why);
		return;
	}
	if (strcmp(h.port, gw->cfg.port) != 0) {
		snprintf(why, sizeof(why), "no port called %s (this gateway "
			 "has %s)", h.port, gw->cfg.port);
		refuse(fd, -ENOENT, why);
		return;
	}
	idx = free_index(gw);
	if (idx < 0) {
		snprintf(why, sizeof(why), "%u clients attached, the most "
			 "allowed", gw->cfg.max_clients);
		refuse(fd, -EUSERS, why);
		return;
	}
	sq = h.sq_entries ? h.sq_entries : DEFAULT_RING;
	cq = h.cq_entries ? h.cq_entries : DEFAULT_RING;
	ns = h.nslots ? h.nslots : DEFAULT_SLOTS;
	c = calloc(1, sizeof(*c));
	c->sock = fd;
	c->efd = -1;
	c->id = gw->next_id++;
	c->area_bytes = egw_attach_area_bytes(sq, cq, ns, gw->cfg.max_runs);
	fds[0] = gw->pool.fd;
	fds[1] = memfd_create("egw-fake-area", MFD_CLOEXEC);
	if (fds[1] < 0 || ftruncate(fds[1], (off_t)c->area_bytes) != 0 ||
	    (c->area_mem = mmap(NULL, c->area_bytes, PROT_READ | PROT_WRITE,
				MAP_SHARED, fds[1], 0)) == MAP_FAILED ||
	    egw_attach_area_init(c->area_mem, sq, cq, ns,
				 gw->cfg.max_runs) != 0 ||
	    egw_attach_map_init(&c->map, c->area_mem, c->area_bytes) != 0 ||
	    (c->rooms = calloc(ns, sizeof(*c->rooms))) == NULL ||
	    (c->run_store = calloc((size_t)ns * gw->cfg.max_runs,
				   sizeof(*c->run_store))) == NULL) {
		if (fds[1] >= 0)
			close(fds[1]);
		c->area_mem = c->area_mem == MAP_FAILED ? NULL : c->area_mem;
		c->sock = -1;
		client_free(c);
		refuse(fd, -ENOMEM, "cannot make the client area");
		return;
	}
	for (uint32_t s = 0; s < ns; s++)
		c->rooms[s].runs = c->run_store + (size_t)s * gw->cfg.max_runs;
	if (h.flags & EGW_HELLO_F_WAKEUP) {
		c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		fds[2] = c->efd;
		w.flags |= EGW_WELCOME_F_WAKEUP;
	}
	w.flags |= (uint16_t)gw->cfg.flags;
	w.capacity_tokens = gw->cfg.capacity;
	w.block_tokens = gw->cfg.block_tokens;
	w.hidden_size = gw->cfg.hidden;
	w.dtype = gw->cfg.dtype;
	w.dtype_bytes = gw->cfg.dtype_bytes;
	w.aux_bytes = gw->cfg.aux_bytes;
	w.mrope = gw->cfg.mrope;
	w.max_runs = gw->cfg.max_runs;
	w.pool_bytes = gw->pool.bytes;
	for (int k = 0; k < 4; k++) {
		w.region_offset[k] = gw->pool.len[k] ? gw->pool.off[k] : 0;
		w.region_bytes[k] = gw->pool.len[k];
	}
	w.area_bytes = c->area_bytes;
	w.max_total_tokens = gw->cfg.max_total;
	w.lease_ms = gw->cfg.lease_ms;
	w.npeers = gw->cfg.npeers;
	w.client_id = c->id;
	memcpy(w.peers, gw->cfg.peers, sizeof(w.peers));
	send_welcome(fd, &w, fds, c->efd >= 0 ? 3 : 2);
	close(fds[1]);
	c->beat_ns = fake_now_ns();
	gw->clients[idx] = c;
	printf("client %u attached: port %s name %s sq %u cq %u slots %u%s\n",
	       c->id, h.port, h.client, sq, cq, ns,
	       c->efd >= 0 ? " wakeup" : "");
}

static void
detach(struct fake_gw *gw, int i, const char *why)
{
	fake_rooms_drop(gw, gw->clients[i], why);
	client_free(gw->clients[i]);
	gw->clients[i] = NULL;
}

/* A client whose lease counter stood still for lease_ms is hung. */
static bool
lease_expired(struct fake_gw *gw, struct fake_client *c)
{
	uint64_t beat = __atomic_load_n(&c->map.area->client_beat,
					__ATOMIC_ACQUIRE);
	uint64_t now = fake_now_ns();

	if (gw->cfg.lease_ms == 0)
		return false;
	if (beat != c->beat) {
		c->beat = beat;
		c->beat_ns = now;
		return false;
	}
	return now - c->beat_ns > gw->cfg.lease_ms * 1000000ull;
}

static void
serve(struct fake_gw *gw, int lfd)
{
	struct pollfd p[FAKE_MAX_CLIENTS + 1];
	int map[FAKE_MAX_CLIENTS + 1];

	while (!stop) {
		int n = 0;

		p[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < FAKE_MAX_CLIENTS; i++)
			if (gw->clients[i] != NULL) {
				map[n] = i;
				p[n++] = (struct pollfd){
					.fd = gw->clients[i]->sock,
					.events = POLLIN };
			}
		if (poll(p, (nfds_t)n, 1) < 0 && errno != EINTR)
			break;
		for (int k = 1; k < n; k++) {
			char b;

			if (p[k].revents == 0)
				continue;
			detach(gw, map[k], recv(p[k].fd, &b, 1, MSG_DONTWAIT)
				   > 0 ? "sent data after the hello"
				       : "socket closed");
		}
		if (p[0].revents & POLLIN)
			accept_client(gw, lfd);
		for (int i = 0; i < FAKE_MAX_CLIENTS; i++) {
			struct fake_client *c = gw->clients[i];

			if (c == NULL)
				continue;
			if (fake_commands(gw, c) != 0) {
				detach(gw, i, "broken ring index");
				continue;
			}
			fake_rooms_step(gw, c);
			if (lease_expired(gw, c)) {
				/* as the gateway does: the trust word first */
				__atomic_store_n(&egw_attach_trust_of(
					c->area_mem)->lost, EGW_LOST_LEASE,
					__ATOMIC_RELEASE);
				detach(gw, i, "lease expired");
			}
		}
		fflush(stdout);
	}
}

int
main(int argc, char **argv)
{
	static struct fake_gw gw;
	struct sigaction sa = { .sa_handler = on_signal };
	int lfd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(&gw.cfg, argc, argv);
	pool_create(&gw);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(gw.cfg.socket_path);
	printf("listening on %s port %s: %u blocks of %u tokens\n",
	       gw.cfg.socket_path, gw.cfg.port, gw.pool.nblocks,
	       gw.cfg.block_tokens);
	serve(&gw, lfd);
	for (int i = 0; i < FAKE_MAX_CLIENTS; i++)
		if (gw.clients[i] != NULL)
			detach(&gw, i, "gateway stopping");
	printf("stopped: pool free %u of %u\n", gw.pool.nfree,
	       gw.pool.nblocks);
	close(lfd);
	unlink(gw.cfg.socket_path);
	return 0;
}
