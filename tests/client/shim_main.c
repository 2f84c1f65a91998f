/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach shim's program (shim.h): the attach socket of doc/client.md
 * as the gateway's control thread serves it, one port, and the loop that
 * plays the gateway's worker around lib/engines.
 *
 * attach_shim --socket PATH [--port NAME] [--mode encode|language]
 *   [--dtype bf16|fp16|fp32|fp8|int8] [--hidden N] [--block-tokens N]
 *   [--capacity TOKENS] [--max-runs N] [--run-blocks N] [--lease-ms N]
 *   [--step-ms N] [--max-total N] [--max-clients N] [--slots N]
 *   [--mrope 0|1] [--peers a,b,...] [--peer-wait-ms MS]
 *   [--speak-version N] [--allow-uid UID]
 *   [--cache-entries N] [--alloc-ms N] [--pool-rdonly]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "shim.h"

#define DEFAULT_RING 64u

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The rule broken and the value that broke it. */
static void
usage_exit(const char *rule, const char *value)
{
	fprintf(stderr, "attach_shim: %s, not '%s'\n", rule, value);
	exit(2);
}

/* ---- the command line -------------------------------------------------------- */

static uint32_t
num(const char *opt, const char *s)
{
	char rule[96];
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (*s == '\0' || *s == '-' || *end != '\0' || v > UINT32_MAX) {
		snprintf(rule, sizeof(rule), "--%s takes a number from 0 to "
			 "%u", opt, UINT32_MAX);
		usage_exit(rule, s);
	}
	return (uint32_t)v;
}

static void
parse_dtype(struct shim_cfg *c, const char *s)
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
	usage_exit("--dtype is one of fp8, int8, bf16, fp16, fp32", s);
}

static void
parse_peers(struct shim_cfg *c, const char *list)
{
	char buf[1024], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	c->npeers = 0;
	for (char *p = strtok_r(buf, ",", &save); p != NULL;
	     p = strtok_r(NULL, ",", &save)) {
		if (c->npeers == SHIM_MAX_PEERS ||
		    strlen(p) >= EGW_ATTACH_NAME_LEN)
			usage_exit("--peers lists at most 16 names of at most "
				   "31 characters", list);
		snprintf(c->peers[c->npeers++], EGW_ATTACH_NAME_LEN, "%s", p);
	}
}

static void
parse_mode(struct shim_cfg *c, const char *s)
{
	c->encode = strcmp(s, "encode") == 0;
	c->language = strcmp(s, "language") == 0;
	if (!c->encode && !c->language)
		usage_exit("--mode is encode or language", s);
}

static void
parse(struct shim_cfg *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", 1, NULL, 's' },
		{ "port", 1, NULL, 'p' },
		{ "mode", 1, NULL, 'm' },
		{ "dtype", 1, NULL, 'd' },
		{ "hidden", 1, NULL, 'h' },
		{ "block-tokens", 1, NULL, 'b' },
		{ "capacity", 1, NULL, 'c' },
		{ "max-runs", 1, NULL, 'r' },
		{ "run-blocks", 1, NULL, 'R' },
		{ "lease-ms", 1, NULL, 'l' },
		{ "step-ms", 1, NULL, 't' },
		{ "max-total", 1, NULL, 'T' },
		{ "max-clients", 1, NULL, 'C' },
		{ "mrope", 1, NULL, 'M' },
		{ "peers", 1, NULL, 'P' },
		{ "speak-version", 1, NULL, 'V' },
		{ "allow-uid", 1, NULL, 'U' },
		{ "slots", 1, NULL, 'S' },
		{ "cache-entries", 1, NULL, 'K' },
		{ "alloc-ms", 1, NULL, 'A' },
		{ "pool-rdonly", 0, NULL, 'o' },
		{ "peer-wait-ms", 1, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	char num_s[16];
	int o;

	*c = (struct shim_cfg){
		.port = "lang0",
		.language = true,
		.dtype = EGW_DTYPE_BF16,
		.dtype_bytes = 2,
		.hidden = 64,
		.block_tokens = 128,
		.capacity = 128 * 1024,
		.max_runs = 16,
		.step_ms = 1,
		.max_clients = 8,
		.slots = 64,
		.mrope = true,
		.speak_version = EGW_ATTACH_VERSION,
		.alloc_ms = 1000,
		.peer_wait_ms = 2000,
		.allow_uid = -1,
	};
	parse_peers(c, "enc0");
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		const char *opt = opts[0].name;

		for (size_t i = 0; opts[i].name != NULL; i++)
			if (opts[i].val == o)
				opt = opts[i].name;
		switch (o) {
		case 's': c->socket_path = optarg; break;
		case 'p': c->port = optarg; break;
		case 'm': parse_mode(c, optarg); break;
		case 'd': parse_dtype(c, optarg); break;
		case 'h': c->hidden = num(opt, optarg); break;
		case 'b': c->block_tokens = num(opt, optarg); break;
		case 'c': c->capacity = num(opt, optarg); break;
		case 'r': c->max_runs = num(opt, optarg); break;
		case 'R': c->run_blocks = num(opt, optarg); break;
		case 'l': c->lease_ms = num(opt, optarg); break;
		case 't': c->step_ms = num(opt, optarg); break;
		case 'T': c->max_total = num(opt, optarg); break;
		case 'C': c->max_clients = num(opt, optarg); break;
		case 'M': c->mrope = num(opt, optarg) != 0; break;
		case 'P': parse_peers(c, optarg); break;
		case 'V': c->speak_version = num(opt, optarg); break;
		case 'U': c->allow_uid = num(opt, optarg); break;
		case 'S': c->slots = num(opt, optarg); break;
		case 'K': c->cache_entries = num(opt, optarg); break;
		case 'A': c->alloc_ms = num(opt, optarg); break;
		case 'o': c->pool_rdonly = true; break;
		case 'W':
			c->peer_wait_ms = num(opt, optarg);
			break;
		default: usage_exit("options are those listed in shim_main.c",
				    argv[optind - 1]);
		}
	}
	if (c->socket_path == NULL)
		usage_exit("--socket PATH is required", "");
	if (c->max_clients == 0 || c->max_clients > SHIM_MAX_CLIENTS) {
		snprintf(num_s, sizeof(num_s), "%u", c->max_clients);
		usage_exit("--max-clients is 1 to 64", num_s);
	}
	if ((uint64_t)c->hidden * c->dtype_bytes > SHIM_MAX_EMB_BYTES ||
	    c->hidden == 0) {
		snprintf(num_s, sizeof(num_s), "%u", c->hidden);
		usage_exit("a token's embedding (--hidden x the dtype's bytes) "
			   "is 1 to 65536 bytes: --hidden", num_s);
	}
	if (c->max_total == 0 || c->max_total > c->capacity)
		c->max_total = c->capacity;
}

/* ---- the pool: lib/pool in a memfd the clients map ------------------------- */

static int
pool_create(struct shim *sh)
{
	const struct shim_cfg *c = &sh->cfg;
	struct egw_pool_geom g = {
		.capacity_tokens = c->capacity, .block_tokens = c->block_tokens,
		.hidden_size = c->hidden, .dtype_bytes = c->dtype_bytes,
		.mrope = c->mrope, .aux_bytes = 64,
	};
	char path[64];
	int rc = egw_pool_geom_check(&g);

	if (rc != 0) {
		fprintf(stderr, "attach_shim: lib/pool refuses the geometry "
			"(--capacity %u a multiple of --block-tokens %u, "
			"--hidden %u): %s\n", c->capacity, c->block_tokens,
			c->hidden, strerror(-rc));
		return rc;
	}
	sh->pool_bytes = egw_pool_geom_mem_bytes(&g);
	sh->pool_fd = memfd_create("egw-shim-pool", MFD_CLOEXEC);
	if (sh->pool_fd < 0 ||
	    ftruncate(sh->pool_fd, (off_t)sh->pool_bytes) != 0)
		return -errno;
	sh->pool_mem = mmap(NULL, sh->pool_bytes, PROT_READ | PROT_WRITE,
			    MAP_SHARED, sh->pool_fd, 0);
	if (sh->pool_mem == MAP_FAILED)
		return -errno;
	rc = egw_pool_create(&g, sh->pool_mem, sh->pool_bytes, &sh->pool);
	if (rc != 0)
		return rc;
	sh->pool_ro_fd = -1;
	if (!c->pool_rdonly)
		return 0;
	/* as the gateway gives a language port's clients: a read-only
	 * descriptor of the same file */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sh->pool_fd);
	sh->pool_ro_fd = open(path, O_RDONLY | O_CLOEXEC);
	return sh->pool_ro_fd < 0 ? -errno : 0;
}

static int
server_create(struct shim *sh)
{
	const struct shim_cfg *c = &sh->cfg;
	struct egw_engines_conf cc = {
		.max_clients = c->max_clients,
		.max_rooms = c->max_clients * c->slots,
		.max_total_tokens = c->max_total,
		.max_peers = SHIM_MAX_PEERS,
		/* a room waits this long for a peer named but not listed */
		.peer_wait_ns = (uint64_t)c->peer_wait_ms * 1000000u,
		.encode = c->encode,
		.language = c->language,
		.alloc_ns = (uint64_t)c->alloc_ms * 1000000u,
		.max_waiting = 8,
		.lease_ns = (uint64_t)c->lease_ms * 1000000u,
		.budget = 32,
		.cache_entries = c->language ? c->cache_entries : 0,
		.cache_blocks = c->capacity / c->block_tokens / 2,
		.cache_max_runs = c->max_runs,
		.ops = &shim_ops,
		.ctx = sh,
	};

	int rc = egw_engines_create(&cc, &sh->srv);

	if (rc != 0)
		return rc;
	for (uint32_t i = 0; i < c->npeers; i++) {
		struct egw_engines_peer *p = &sh->peers[sh->npeers++];

		p->id = ++sh->next_peer_id;
		p->slot = i;
		p->ready = true;
		snprintf(p->name, sizeof(p->name), "%s", c->peers[i]);
	}
	shim_peers_changed(sh);
	return 0;
}

void
shim_peers_changed(struct shim *sh)
{
	int rc = egw_engines_peers_set(sh->srv, sh->peers, sh->npeers, sh->now);

	if (rc != 0)
		printf("peers: refused by lib/engines (%d)\n", rc);
}

/* ---- the socket ---------------------------------------------------------------- */

static int
listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		usage_exit("cannot make the socket", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 16) != 0)
		usage_exit("cannot listen on the socket path", path);
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

	w->magic = EGW_WELCOME_MAGIC;
	w->version = EGW_ATTACH_VERSION;
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
	struct egw_attach_welcome w = { .status = status };

	snprintf(w.message, sizeof(w.message), "%s", msg);
	printf("refused: %d %s\n", status, msg);
	send_welcome(fd, &w, NULL, 0);
	close(fd);
}

static struct shim_conn *
free_conn(struct shim *sh)
{
	for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++)
		if (sh->conns[i].sock < 0)
			return &sh->conns[i];
	return NULL;
}

/* The checks before an area is made: credentials (lib/attach's), the
 * hello (lib/attach's), the port. @return 0 or the refusal's status. */
static int
hello_checks(struct shim *sh, int fd, struct egw_attach_hello *h,
	     char *why, size_t why_len)
{
	uint32_t uid = sh->cfg.allow_uid >= 0 ? (uint32_t)sh->cfg.allow_uid
					      : (uint32_t)geteuid();
	struct egw_attach_policy pol = { .self_uid = uid };
	struct egw_attach_peer who;
	uint8_t buf[sizeof(*h) + 1];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	int rc = egw_attach_hello_check(buf, n < 0 ? 0 : (size_t)n, why,
					why_len);

	if (rc != 0)
		return rc;
	memcpy(h, buf, sizeof(*h));
	if (egw_attach_peer_check(fd, &pol, &who) != 1) {
		snprintf(why, why_len, "uid %u may not attach (neither its uid "
			 "nor any of its groups is allowed)", who.uid);
		return -EACCES;
	}
	if (sh->cfg.speak_version != EGW_ATTACH_VERSION) {
		/* a gateway of another release, played */
		snprintf(why, why_len, "client speaks attach version %u, the "
			 "gateway speaks version %u", h->version,
			 sh->cfg.speak_version);
		return -EPROTONOSUPPORT;
	}
	if (strcmp(h->port, sh->cfg.port) != 0) {
		snprintf(why, why_len, "no port '%s' with an attach point on "
			 "this socket (%s)", h->port, sh->cfg.socket_path);
		return -ENOENT;
	}
	return 0;
}

static int
make_area(struct shim *sh, struct shim_conn *k,
	  const struct egw_attach_hello *h, int *area_fd)
{
	uint32_t sq = h->sq_entries ? h->sq_entries : DEFAULT_RING;
	uint32_t cq = h->cq_entries ? h->cq_entries : DEFAULT_RING;
	uint32_t slots = h->nslots ? h->nslots : sh->cfg.slots;
	int rc;

	if (slots > sh->cfg.slots)
		slots = sh->cfg.slots;
	k->area_bytes = egw_attach_area_bytes(sq, cq, slots, sh->cfg.max_runs,
					      SHIM_MAX_PEERS);
	if (k->area_bytes == 0)
		return -EINVAL;
	*area_fd = memfd_create("egw-shim-area", MFD_CLOEXEC);
	if (*area_fd < 0 || ftruncate(*area_fd, (off_t)k->area_bytes) != 0)
		return -errno;
	k->area = mmap(NULL, k->area_bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED, *area_fd, 0);
	if (k->area == MAP_FAILED) {
		k->area = NULL;
		return -errno;
	}
	rc = egw_attach_area_init(k->area, sq, cq, slots, sh->cfg.max_runs,
				  SHIM_MAX_PEERS);
	if (rc == 0 && (h->flags & EGW_HELLO_F_PEERS) != 0)
		((struct egw_attach_area *)k->area)
			->events |= EGW_AREA_EV_PEERS;
	return rc;
}

static void
fill_welcome(const struct shim *sh, const struct shim_conn *k,
	     struct egw_attach_welcome *w)
{
	const struct egw_pool_geom *g = egw_pool_geom(sh->pool);
	const struct shim_cfg *c = &sh->cfg;

	w->flags = (c->encode ? EGW_WELCOME_F_ENCODE : 0) |
		   (c->language ? EGW_WELCOME_F_LANGUAGE : 0) |
		   (k->efd >= 0 ? EGW_WELCOME_F_WAKEUP : 0);
	w->trust_flags = sh->pool_ro_fd >= 0 ? EGW_WELCOME_T_POOL_RDONLY : 0;
	w->capacity_tokens = g->capacity_tokens;
	w->block_tokens = g->block_tokens;
	w->hidden_size = g->hidden_size;
	w->dtype = c->dtype;
	w->dtype_bytes = g->dtype_bytes;
	w->aux_bytes = g->aux_bytes;
	w->mrope = g->mrope;
	w->max_runs = ((const struct egw_attach_area *)k->area)->max_runs;
	w->pool_bytes = sh->pool_bytes;
	for (int kind = 0; kind < EGW_KIND_MAX; kind++) {
		w->region_bytes[kind] = egw_pool_geom_region_bytes(g, kind);
		w->region_offset[kind] = w->region_bytes[kind] == 0 ? 0 :
			(uint64_t)((uint8_t *)egw_pool_region(sh->pool, kind) -
				   (uint8_t *)sh->pool_mem);
	}
	w->area_bytes = k->area_bytes;
	w->max_total_tokens = c->max_total;
	w->lease_ms = c->lease_ms;
	w->max_peers = SHIM_MAX_PEERS;
	w->cache_entries = c->language ? c->cache_entries : 0;
	w->cache_tokens = c->capacity / 2;
	w->client_id = k->client;
}

static void
conn_close(struct shim_conn *k)
{
	if (k->sock >= 0)
		close(k->sock);
	if (k->efd >= 0)
		close(k->efd);
	if (k->area != NULL)
		munmap(k->area, k->area_bytes);
	*k = (struct shim_conn){ .sock = -1, .efd = -1 };
}

static void
accept_client(struct shim *sh, int lfd)
{
	struct egw_attach_welcome w = { 0 };
	struct egw_attach_hello h;
	char why[EGW_ATTACH_MSG_LEN];
	struct shim_conn *k;
	struct pollfd p;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), rc, fds[3];

	if (fd < 0)
		return;
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 2000) != 1) {
		printf("no hello within 2 s\n");
		close(fd);
		return;
	}
	rc = hello_checks(sh, fd, &h, why, sizeof(why));
	k = free_conn(sh);
	if (rc == 0 && k == NULL) {
		rc = -EUSERS;
		snprintf(why, sizeof(why), "%u connections, the most the shim "
			 "holds", SHIM_MAX_CLIENTS);
	}
	if (rc != 0) {
		refuse(fd, rc, why);
		return;
	}
	k->sock = fd;
	fds[1] = -1;
	rc = make_area(sh, k, &h, &fds[1]);
	if (rc == 0 && (h.flags & EGW_HELLO_F_WAKEUP)) {
		k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		rc = k->efd < 0 ? -errno : 0;
	}
	/* the worker's part: lib/engines takes the area or says why not */
	if (rc == 0)
		rc = egw_engines_add(sh->srv, k->area, k->area_bytes, sh->now);
	if (rc < 0) {
		if (rc == -EUSERS)
			snprintf(why, sizeof(why), "the port takes no more "
				 "clients (%u attached)", sh->cfg.max_clients);
		else
			snprintf(why, sizeof(why), "cannot add the client: %s",
				 strerror(-rc));
		k->sock = -1;
		conn_close(k);
		if (fds[1] >= 0)
			close(fds[1]);
		refuse(fd, rc, why);
		return;
	}
	k->client = (uint32_t)rc;
	fill_welcome(sh, k, &w);
	fds[0] = sh->pool_ro_fd >= 0 ? sh->pool_ro_fd : sh->pool_fd;
	fds[2] = k->efd;
	send_welcome(fd, &w, fds, k->efd >= 0 ? 3 : 2);
	close(fds[1]);
	printf("client %u attached: port %s name %s slots %u%s\n", k->client,
	       h.port, h.client, k->area == NULL ? 0 :
	       ((struct egw_attach_area *)k->area)->nslots,
	       k->efd >= 0 ? " wakeup" : "");
}

/* The client's socket ended: lib/engines ends its rooms. */
static void
detach(struct shim *sh, struct shim_conn *k, const char *why)
{
	uint32_t rooms = egw_engines_rooms(sh->srv);
	uint32_t free0 = shim_pool_free(sh);

	egw_engines_remove(sh->srv, k->client, sh->now);
	printf("client %u detached (%s): ended %u rooms, freed %u blocks; "
	       "pool free %u of %u\n", k->client, why,
	       rooms - egw_engines_rooms(sh->srv),
	       shim_pool_free(sh) - free0, shim_pool_free(sh),
	       shim_pool_blocks(sh));
	conn_close(k);
}

/* ---- the loop ---------------------------------------------------------------- */

/* @return false once stdin has ended (it is not watched any more) */
static bool
read_script(struct shim *sh, char *buf, size_t *len, size_t cap)
{
	ssize_t n = read(0, buf + *len, cap - 1 - *len);
	char *eol;

	if (n <= 0) {
		*len = 0;
		return n < 0 && errno == EINTR;
	}
	*len += (size_t)n;
	buf[*len] = '\0';
	while ((eol = strchr(buf, '\n')) != NULL) {
		size_t used = (size_t)(eol + 1 - buf);

		*eol = '\0';
		shim_script(sh, buf);
		memmove(buf, eol + 1, *len - used + 1);
		*len -= used;
	}
	if (*len + 1 >= cap) {
		printf("script: a line longer than %zu bytes dropped\n", cap);
		*len = 0;
	}
	return true;
}

static void
serve(struct shim *sh, int lfd)
{
	struct pollfd p[SHIM_MAX_CLIENTS + 2];
	uint32_t who[SHIM_MAX_CLIENTS + 2];
	char script[512];
	size_t slen = 0;
	bool stdin_open = true;

	while (!stop) {
		nfds_t n = 0;

		p[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = stdin_open ? 0 : -1,
					  .events = POLLIN };
		for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++)
			if (sh->conns[i].sock >= 0) {
				who[n] = i;
				p[n++] = (struct pollfd){
					.fd = sh->conns[i].sock,
					.events = POLLIN };
			}
		if (poll(p, n, 1) < 0 && errno != EINTR)
			break;
		sh->now = shim_now_ns(sh);
		for (nfds_t i = 2; i < n; i++)
			if (p[i].revents != 0)
				detach(sh, &sh->conns[who[i]], "socket closed");
		if (p[1].revents != 0)
			stdin_open = read_script(sh, script, &slen,
						 sizeof(script));
		if (p[0].revents & POLLIN)
			accept_client(sh, lfd);
		egw_engines_poll(sh->srv, sh->now);
		shim_rooms_step(sh, sh->now);
		fflush(stdout);
	}
}

int
main(int argc, char **argv)
{
	static struct shim sh;
	struct sigaction sa = { .sa_handler = on_signal };
	int lfd, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++)
		sh.conns[i] = (struct shim_conn){ .sock = -1, .efd = -1 };
	parse(&sh.cfg, argc, argv);
	sh.now = shim_now_ns(&sh);
	rc = pool_create(&sh);
	if (rc == 0)
		rc = server_create(&sh);
	if (rc == 0)
		rc = shim_rooms_init(&sh);
	if (rc != 0) {
		fprintf(stderr, "attach_shim: cannot start: %s\n",
			strerror(-rc));
		return 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(sh.cfg.socket_path);
	printf("listening on %s port %s: %u blocks of %u tokens\n",
	       sh.cfg.socket_path, sh.cfg.port, shim_pool_blocks(&sh),
	       sh.cfg.block_tokens);
	serve(&sh, lfd);
	for (uint32_t i = 0; i < SHIM_MAX_CLIENTS; i++)
		if (sh.conns[i].sock >= 0)
			detach(&sh, &sh.conns[i], "shim stopping");
	egw_engines_destroy(sh.srv, sh.now);
	printf("stopped: pool free %u of %u\n", shim_pool_free(&sh),
	       shim_pool_blocks(&sh));
	close(lfd);
	unlink(sh.cfg.socket_path);
	return 0;
}
