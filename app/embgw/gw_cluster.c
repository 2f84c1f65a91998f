/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cluster membership (gateway.cluster; doc/cluster.md): lib/cluster's
 * state machine driven on a control thread of its own, against etcd's v3
 * JSON gateway through libcurl.
 *
 * One curl multi handle carries the three channels of the machine at
 * once - the unary requests, the keep-alives and the watch stream - so
 * that none waits for another and the thread never blocks on one: it
 * sleeps in curl_multi_poll until a socket is ready or the machine's next
 * deadline. Every request but the watch has a deadline
 * (request_timeout_ms); the watch is judged by the keep-alives that share
 * its endpoint. After a failure the next endpoint is tried.
 *
 * Peers go to the workers through gw_peers_hold/release (origin
 * GW_PEER_CLUSTER): a mailbox the worker drains on its timer tick. The
 * workers never wait for this thread, nor for etcd.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>

#include "egw_cluster.h"
#include "gw.h"
#include "gw_cluster.h"
#include "gw_peers.h"

#define POLL_MAX_MS 100	     /* to see gw_force_quit */
#define BODY_MAX (64u << 20) /* a list of many thousand records */
#define PENDING_MAX 65536    /* peer changes the mailbox refused */

struct chan {
	CURL *h;
	struct curl_slist *hdr;
	char *buf; /* the answer so far */
	size_t len, cap;
	bool busy;
	bool too_big;
};

struct pending {
	bool hold;
	unsigned self;
	struct gw_peer_spec spec;
	char why[96];
};

static struct {
	struct egw_conf_cluster conf; /* gateway.cluster, as started */
	struct gw_id *const *ids;
	uint16_t nids;
	struct egw_cluster *m;
	CURLM *multi;
	struct chan ch[EGW_CLUSTER_CH_MAX];
	unsigned endpoint;
	pthread_t thread;
	bool running;
	volatile bool stop;	/* gw_cluster_stop: leave now */
	bool stopping, stopped; /* the clean stop begun, over */
	struct pending *pending;
	uint32_t npending;
	/* what other threads read: under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool first;   /* in step or refused */
	bool started; /* gw_cluster_start returned */
	bool refused;
	char refusal[EGW_CLUSTER_TEXT_LEN];
	struct egw_cluster_status st;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static const char *const chan_names[] = { "request", "keep-alive", "watch" };

/* ---- the record of an identity ----------------------------------------- */

static int
self_record(const struct gw_id *id, struct egw_cluster_record *r)
{
	const struct egw_conf *c = id->conf;
	const struct egw_conf_port *p = id->cfg;

	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", c->name);
	r->roles = c->roles;
	r->addr = p->addr;
	r->udp_port = p->udp_port;
	r->block_tokens = c->geom.block_tokens;
	r->hidden = c->geom.hidden_size;
	snprintf(r->dtype, sizeof(r->dtype), "%s", c->dtype);
	r->dtype_bytes = c->geom.dtype_bytes;
	for (unsigned k = 0; k < EGW_KIND_MAX; k++)
		if (egw_pool_geom_unit_bytes(&c->geom, (enum egw_kind)k) > 0)
			r->kinds |= (uint8_t)(1u << k);
	r->aux_bytes = c->geom.aux_bytes;
	r->protocol = EGW_PROTO_VERSION;
	snprintf(r->payload, sizeof(r->payload), "%s",
		 p->payload.driver == EGW_PAYLOAD_VERBS ? "verbs" : "shm");
	/* a receiving shm identity's pool file: where senders write */
	if (p->payload.driver == EGW_PAYLOAD_SHM &&
	    (c->roles & EGW_ROLE_LANGUAGE))
		snprintf(r->shm_path, sizeof(r->shm_path), "%s",
			 p->payload.path);
	return egw_cluster_key_id(c->key.k, sizeof(c->key.k), r->key_id);
}

/* ---- peers to the workers ---------------------------------------------- */

static int
apply(const struct pending *p)
{
	struct gw_id *id = g.ids[p->self];

	if (p->hold)
		return gw_peers_hold(id, GW_PEER_CLUSTER, &p->spec);
	return gw_peers_release(id, GW_PEER_CLUSTER, p->spec.name, p->why);
}

/* In order: a change the mailbox refused waits, and so do all after it. */
static void
flush_pending(void)
{
	uint32_t done = 0;

	while (done < g.npending && apply(&g.pending[done]) != -ENOBUFS)
		done++;
	memmove(g.pending, g.pending + done,
		(g.npending - done) * sizeof(*g.pending));
	g.npending -= done;
}

static void
peer_change(const struct egw_cluster_action *a)
{
	struct pending p;

	if (a->self >= g.nids)
		return;
	memset(&p, 0, sizeof(p));
	p.hold = a->kind == EGW_CLUSTER_ACT_HOLD;
	p.self = a->self;
	snprintf(p.spec.name, sizeof(p.spec.name), "%s", a->peer.name);
	p.spec.addr = a->peer.addr;
	p.spec.udp_port = a->peer.udp_port;
	snprintf(p.spec.shm_path, sizeof(p.spec.shm_path), "%s",
		 a->peer.shm_path);
	snprintf(p.why, sizeof(p.why), "cluster: %.80s", a->text);
	if (g.npending == 0 && apply(&p) != -ENOBUFS)
		return;
	if (g.npending == PENDING_MAX) {
		GW_LOG(ERR,
		       "cluster: %u peer changes wait for the workers: "
		       "%s %s dropped\n",
		       g.npending, p.hold ? "hold" : "release", p.spec.name);
		return;
	}
	if (g.pending == NULL)
		g.pending = malloc(PENDING_MAX * sizeof(*g.pending));
	if (g.pending != NULL)
		g.pending[g.npending++] = p;
}

/* ---- HTTP -------------------------------------------------------------- */

static size_t
on_data(char *data, size_t size, size_t n, void *arg)
{
	struct chan *c = arg;
	size_t len = size * n;

	if (c->len + len + 1 > BODY_MAX) {
		c->too_big = true;
		return 0; /* curl fails the transfer */
	}
	if (c->len + len + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 16384;
		char *b;

		while (cap < c->len + len + 1)
			cap *= 2;
		b = realloc(c->buf, cap);
		if (b == NULL)
			return 0;
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, data, len);
	c->len += len;
	c->buf[c->len] = '\0';
	/* the watch: one JSON object a line, handed on line by line */
	if (c == &g.ch[EGW_CLUSTER_CH_WATCH]) {
		char *nl;

		while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
			size_t l = (size_t)(nl - c->buf);

			if (l > 0)
				egw_cluster_on_watch_line(g.m, c->buf, l,
							  gw_now_ns());
			memmove(c->buf, nl + 1, c->len - l - 1);
			c->len -= l + 1;
			c->buf[c->len] = '\0';
		}
	}
	return len;
}

static void
chan_drop(enum egw_cluster_chan ch)
{
	struct chan *c = &g.ch[ch];

	if (!c->busy)
		return;
	curl_multi_remove_handle(g.multi, c->h);
	curl_slist_free_all(c->hdr);
	c->hdr = NULL;
	c->busy = false;
}

static void
request(const struct egw_cluster_action *a)
{
	const struct egw_conf_cluster *k = &g.conf;
	struct chan *c = &g.ch[a->chan];
	char url[EGW_CONF_URL_LEN + 64], auth[600];

	chan_drop(a->chan);
	if (c->h == NULL && (c->h = curl_easy_init()) == NULL) {
		egw_cluster_on_failure(g.m, a->chan, "no curl handle",
				       gw_now_ns());
		return;
	}
	curl_easy_reset(c->h);
	c->len = 0;
	c->too_big = false;
	snprintf(url, sizeof(url), "%s%s", k->endpoints[g.endpoint], a->path);
	c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (a->token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: %s", a->token);
		c->hdr = curl_slist_append(c->hdr, auth);
	}
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdr);
	curl_easy_setopt(c->h, CURLOPT_COPYPOSTFIELDS, a->body);
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->h, CURLOPT_PRIVATE, c);
	curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)k->dial_timeout_ms);
	if (a->chan != EGW_CLUSTER_CH_WATCH)
		curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS,
				 (long)k->request_timeout_ms);
	/* a dead peer under a watch: TCP's own probes, besides the lease's */
	curl_easy_setopt(c->h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (k->tls_ca[0] != '\0')
		curl_easy_setopt(c->h, CURLOPT_CAINFO, k->tls_ca);
	if (k->tls_cert[0] != '\0') {
		curl_easy_setopt(c->h, CURLOPT_SSLCERT, k->tls_cert);
		curl_easy_setopt(c->h, CURLOPT_SSLKEY, k->tls_key);
	}
	if (curl_multi_add_handle(g.multi, c->h) != CURLM_OK) {
		curl_slist_free_all(c->hdr);
		c->hdr = NULL;
		egw_cluster_on_failure(g.m, a->chan, "curl_multi_add_handle",
				       gw_now_ns());
		return;
	}
	c->busy = true;
}

static void
log_line(const struct egw_cluster_action *a)
{
	switch (a->level) {
	case EGW_CLUSTER_ERR:
		GW_LOG(ERR, "%s\n", a->text);
		break;
	case EGW_CLUSTER_WARN:
		GW_LOG(WARNING, "%s\n", a->text);
		break;
	case EGW_CLUSTER_INFO:
		GW_LOG(INFO, "%s\n", a->text);
		break;
	default:
		GW_LOG(DEBUG, "%s\n", a->text);
		break;
	}
}

static void
publish_status(void)
{
	pthread_mutex_lock(&g.lock);
	egw_cluster_get_status(g.m, &g.st);
	if (!g.first && (g.st.state == EGW_CLUSTER_ST_WATCH ||
			 g.st.state == EGW_CLUSTER_ST_REFUSED)) {
		g.first = true;
		pthread_cond_broadcast(&g.cond);
	}
	pthread_mutex_unlock(&g.lock);
}

/* Carry out what the machine asks, in order. */
static void
act(void)
{
	static struct egw_cluster_action a; /* large: not on the stack */

	while (egw_cluster_next_action(g.m, &a)) {
		switch (a.kind) {
		case EGW_CLUSTER_ACT_REQUEST:
			request(&a);
			break;
		case EGW_CLUSTER_ACT_CANCEL:
			chan_drop(a.chan);
			break;
		case EGW_CLUSTER_ACT_HOLD:
		case EGW_CLUSTER_ACT_RELEASE:
			peer_change(&a);
			break;
		case EGW_CLUSTER_ACT_LOG:
			log_line(&a);
			break;
		case EGW_CLUSTER_ACT_REFUSE:
			pthread_mutex_lock(&g.lock);
			/* after the start (etcd was out of reach then): the
			 * gateway runs on, outside the cluster */
			if (g.started)
				GW_LOG(ERR, "%s: leaving the cluster\n",
				       a.text);
			g.refused = true;
			snprintf(g.refusal, sizeof(g.refusal), "%s", a.text);
			pthread_mutex_unlock(&g.lock);
			break;
		case EGW_CLUSTER_ACT_STOPPED:
			g.stopped = true;
			break;
		}
	}
	publish_status();
}

/* Transfers that ended: answers, or failures (then the next endpoint). */
static void
finished(void)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(g.multi, &left)) != NULL) {
		struct chan *c = NULL;
		enum egw_cluster_chan ch;
		CURLcode rc = msg->data.result;
		long status = 0;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
				  (char **)&c);
		if (c == NULL)
			continue;
		ch = (enum egw_cluster_chan)(c - g.ch);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE,
				  &status);
		chan_drop(ch);
		if (rc == CURLE_OK && ch != EGW_CLUSTER_CH_WATCH) {
			egw_cluster_on_response(g.m, ch, status,
						c->buf ? c->buf : "", c->len,
						gw_now_ns());
		} else {
			char why[EGW_CLUSTER_TEXT_LEN / 2];

			snprintf(why, sizeof(why), "%s: %s",
				 g.conf.endpoints[g.endpoint],
				 c->too_big	? "answer too large" :
				 rc == CURLE_OK ? "the watch stream ended" :
						  curl_easy_strerror(rc));
			g.endpoint = (g.endpoint + 1) % g.conf.nendpoints;
			egw_cluster_on_failure(g.m, ch, why, gw_now_ns());
		}
		GW_LOG(DEBUG, "cluster: %s done: %ld\n", chan_names[ch],
		       status);
		act();
	}
}

static uint32_t
wait_ms(uint64_t now)
{
	uint64_t due = egw_cluster_next_deadline(g.m);

	if (due <= now)
		return 0;
	/* changes wait for room in a mailbox: the worker frees it on its
	 * next tick (a millisecond or so) */
	if (g.npending > 0)
		return 1;
	if (due - now >= POLL_MAX_MS * 1000000ull)
		return POLL_MAX_MS;
	return (uint32_t)((due - now) / 1000000) + 1;
}

static void *
run(void *arg)
{
	(void)arg;
	egw_cluster_start(g.m, gw_now_ns());
	act();
	while (!g.stopped) {
		int running;

		curl_multi_poll(g.multi, NULL, 0, (int)wait_ms(gw_now_ns()),
				NULL);
		curl_multi_perform(g.multi, &running);
		finished();
		/* the clean stop begins at the signal, while the workers
		 * drain: our records go before the process does */
		if ((gw_force_quit || g.stop) && !g.stopping) {
			g.stopping = true;
			egw_cluster_stop(g.m, gw_now_ns());
		} else {
			egw_cluster_tick(g.m, gw_now_ns());
		}
		act();
		flush_pending();
		if (g.refused && !g.stopping)
			break;
	}
	for (unsigned ch = 0; ch < EGW_CLUSTER_CH_MAX; ch++)
		chan_drop((enum egw_cluster_chan)ch);
	return NULL;
}

/* /embgw/cluster: where membership stands (doc/cluster.md) */
static int
cmd_cluster(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct egw_cluster_status s;
	char endpoint[EGW_CONF_URL_LEN];

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	if (!gw_cluster_status(&s, endpoint, sizeof(endpoint)))
		return 0;
	rte_tel_data_add_dict_string(d, "cluster", g.conf.name);
	rte_tel_data_add_dict_string(d, "state",
				     egw_cluster_state_name(s.state));
	rte_tel_data_add_dict_u64(d, "connected", s.connected);
	rte_tel_data_add_dict_string(d, "endpoint", endpoint);
	rte_tel_data_add_dict_u64(d, "lease", (uint64_t)s.lease);
	rte_tel_data_add_dict_u64(d, "revision", (uint64_t)s.revision);
	rte_tel_data_add_dict_u64(d, "peers_known", s.peers);
	rte_tel_data_add_dict_u64(d, "peers_held", s.compatible);
	rte_tel_data_add_dict_u64(d, "failures", s.failures);
	rte_tel_data_add_dict_string(d, "last_error", s.last_error);
	return 0;
}

/* ---- entry points ------------------------------------------------------ */

int
gw_cluster_start(const struct egw_conf *c, struct gw_id *const *ids,
		 uint16_t nids)
{
	struct egw_cluster_conf mc;
	struct timespec until;
	uint64_t wait_ns;
	int rc;

	if (!c->cluster.enabled || nids == 0)
		return 0;
	memset(&mc, 0, sizeof(mc));
	snprintf(mc.cluster, sizeof(mc.cluster), "%s", c->cluster.name);
	mc.lease_ttl_s = c->cluster.lease_ttl_s;
	mc.backoff_min_ns = 100 * 1000000ull;
	mc.backoff_max_ns = (uint64_t)c->cluster.lease_ttl_s * 1000000000ull /
			    2;
	mc.seed = gw_now_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(mc.user, sizeof(mc.user), "%s", c->cluster.user);
	snprintf(mc.password, sizeof(mc.password), "%s", c->cluster.password);
	mc.nself = nids < EGW_CLUSTER_MAX_SELF ? nids : EGW_CLUSTER_MAX_SELF;
	for (unsigned i = 0; i < mc.nself; i++)
		if (self_record(ids[i], &mc.self[i]) != 0) {
			GW_LOG(ERR, "cluster: no key id for %s\n",
			       ids[i]->conf->name);
			return -EINVAL;
		}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	/* a copy: the thread never reads the configuration a reload may
	 * replace */
	g.conf = c->cluster;
	g.ids = ids;
	g.nids = (uint16_t)mc.nself;
	g.m = egw_cluster_create(&mc);
	sodium_memzero(mc.password, sizeof(mc.password));
	sodium_memzero(g.conf.password, sizeof(g.conf.password));
	g.multi = curl_multi_init();
	if (g.m == NULL || g.multi == NULL) {
		gw_cluster_stop();
		return -ENOMEM;
	}
	GW_LOG(INFO,
	       "cluster %s: joining as %s through %s (%u endpoint(s)), "
	       "lease %u s\n",
	       c->cluster.name, mc.self[0].name, c->cluster.endpoints[0],
	       c->cluster.nendpoints, c->cluster.lease_ttl_s);
	rc = rte_ctrl_thread_create(&g.thread, "embgw-cluster", NULL, run,
				    NULL);
	if (rc != 0) {
		GW_LOG(ERR, "cluster: no control thread: %s\n", strerror(rc));
		gw_cluster_stop();
		return rc < 0 ? rc : -rc;
	}
	g.running = true;
	rte_telemetry_register_cmd("/embgw/cluster", cmd_cluster,
				   "Cluster membership: etcd state, lease, "
				   "revision, peers");
	/* the first outcome: in step, refused (a second gateway of our
	 * name: the start fails) or, after a request's time and a dial to
	 * every endpoint, etcd out of reach (we start with the file's peers
	 * and keep trying) */
	wait_ns = ((uint64_t)c->cluster.request_timeout_ms +
		   (uint64_t)c->cluster.dial_timeout_ms *
			   c->cluster.nendpoints) *
		  1000000ull;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(wait_ns / 1000000000ull);
	until.tv_nsec += (long)(wait_ns % 1000000000ull);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&g.lock);
	while (!g.first && !gw_force_quit &&
	       pthread_cond_timedwait(&g.cond, &g.lock, &until) == 0)
		;
	rc = g.refused ? -EEXIST : 0;
	g.started = true;
	if (!g.first && rc == 0)
		GW_LOG(WARNING,
		       "cluster %s: not in step yet: starting with the "
		       "file's peers, the cluster's join when etcd answers\n",
		       c->cluster.name);
	pthread_mutex_unlock(&g.lock);
	if (rc != 0) {
		GW_LOG(ERR, "%s; not starting\n", g.refusal);
		gw_cluster_stop();
	}
	return rc;
}

void
gw_cluster_stop(void)
{
	if (g.running) {
		g.stop = true;
		pthread_join(g.thread, NULL);
		g.running = false;
	}
	for (unsigned ch = 0; ch < EGW_CLUSTER_CH_MAX; ch++) {
		if (g.ch[ch].h != NULL)
			curl_easy_cleanup(g.ch[ch].h);
		free(g.ch[ch].buf);
		memset(&g.ch[ch], 0, sizeof(g.ch[ch]));
	}
	if (g.multi != NULL) {
		curl_multi_cleanup(g.multi);
		curl_global_cleanup();
	}
	g.multi = NULL;
	egw_cluster_destroy(g.m);
	g.m = NULL;
	free(g.pending);
	g.pending = NULL;
	g.npending = 0;
}

bool
gw_cluster_status(struct egw_cluster_status *s, char *endpoint, size_t len)
{
	if (!g.conf.enabled)
		return false;
	pthread_mutex_lock(&g.lock);
	*s = g.st;
	if (endpoint != NULL)
		snprintf(endpoint, len, "%s", g.conf.endpoints[g.endpoint]);
	pthread_mutex_unlock(&g.lock);
	return true;
}
