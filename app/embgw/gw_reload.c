/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reloading the configuration file while rooms run (doc/gateway.md,
 * "Reloading the configuration"), as `nginx -s reload` does: the file is
 * read and checked whole first; a file with errors, or one that changes
 * a setting that cannot change live (egw_conf_diff), is refused and the
 * running configuration stays as it was. Otherwise the new timers,
 * limits and policy go to every identity's worker (a message on a ring
 * of its own: the worker calls egw_node_update between two polls) and
 * then the peers each port gains or loses go through gw_peers_hold /
 * gw_peers_release as the file's (GW_PEER_FILE). Each outcome is one log
 * line and counted (reloads ok / refused).
 *
 * Threads: the SIGHUP handler writes to an eventfd (async-signal-safe);
 * the telemetry command writes to it too and waits for its answer. A
 * control thread of its own (rte_ctrl_thread_create: never on a worker's
 * CPU) sleeps on that eventfd and does every reload, one at a time, so
 * the main thread may serve as a worker as well.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_telemetry.h>

#include "gw_peers.h"
#include "gw_reload.h"

#define LINE_LEN 2048	    /* the outcome line */
#define WORKER_WAIT_MS 2000 /* a worker takes its parameters within */
#define MAILBOX_TRIES 200   /* a full peers mailbox, every 5 ms */

/* What one identity's worker is sent: new parameters for its node, and
 * back, what the node made of them. Allocated and freed by the reload
 * thread; the worker only reads, writes rc and hands it back. */
struct reload_msg {
	struct egw_node_params params;
	int rc;
};

/* One identity's two rings (single producer, single consumer each). */
struct gw_reload_box {
	struct rte_ring *to_worker, *from_worker;
};

enum reload_why { WHY_SIGNAL, WHY_TELEMETRY };

/* What a reload's outcome lists beside its line. */
enum reload_kind {
	KIND_NONE,    /* unchanged, or refused for another reason */
	KIND_ERRORS,  /* the file's errors */
	KIND_FIXED,   /* the settings that cannot change live */
	KIND_APPLIED, /* settings and peers applied */
};

/* The telemetry answer's lists: rte_telemetry keeps a string value to
 * RTE_TEL_MAX_STRING_LEN (128) bytes, so the line is cut there and the
 * lists carry each item whole enough to be read (the log has all). */
#define ITEM_LEN 128
struct reload_answer {
	const char *result;	/* "applied", "unchanged", "refused" */
	char outcome[LINE_LEN]; /* the log line's text */
	const char *key;	/* the list's name, NULL: none */
	char items[EGW_CONF_MAX_ERRORS][ITEM_LEN];
	unsigned nitems;
	char added[EGW_CONF_DIFF_PEERS][EGW_CONF_NAME_LEN];
	unsigned nadded;
	char removed[EGW_CONF_DIFF_PEERS][EGW_CONF_NAME_LEN];
	unsigned nremoved;
};

static struct {
	pthread_t thread;
	bool started; /* under lock */
	int efd;
	volatile sig_atomic_t hup; /* SIGHUP since the last reload */
	bool stop;		   /* under lock */
	bool reloadable;
	/* the telemetry command's tickets, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t asked, answered;
	struct egw_conf_errors errs; /* the last loaded file's errors */
	enum reload_kind kind;	     /* what the last reload lists */
	bool commit;		     /* the last reload changed the workers */
	uint64_t ok, refused;	     /* read by metrics and the report */
	/* the reload thread's own */
	struct egw_conf running, next;
	struct egw_conf_diff diff;
	struct gw_id *const *ids;
	uint16_t nids;
	struct gw_reload_box boxes[EGW_CONF_MAX_PORTS];
} rl = {
	.efd = -1,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* The last outcome, under rl.lock (written by the reload thread, read by
 * the telemetry thread). */
static struct reload_answer ans;

/* ---- the outcome line --------------------------------------------- */

struct line {
	char *buf;
	size_t len, off;
};

static void __attribute__((format(printf, 2, 3)))
put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (l->off >= l->len)
		return;
	va_start(ap, fmt);
	w = vsnprintf(l->buf + l->off, l->len - l->off, fmt, ap);
	va_end(ap);
	if (w > 0)
		l->off += (size_t)w;
	if (l->off >= l->len && l->len > 4)
		memcpy(l->buf + l->len - 4, "...", 4);
}

static void
put_changes(struct line *l, const struct egw_conf_change *ch, unsigned n,
	    unsigned total)
{
	for (unsigned i = 0; i < n; i++)
		put(l, "%s%s (%s -> %s)", i ? ", " : "", ch[i].path,
		    ch[i].old_val, ch[i].new_val);
	if (total > n)
		put(l, " and %u more", total - n);
}

static void
put_peers(struct line *l, const struct egw_conf_diff *d)
{
	put(l, "peers +%u -%u", d->nadded, d->nremoved);
	for (unsigned i = 0; i < d->nadded; i++)
		put(l, "%s+%s", i ? " " : " (",
		    rl.next.ports[d->added[i].port]
			    .peers[d->added[i].peer]
			    .name);
	for (unsigned i = 0; i < d->nremoved; i++) {
		const struct egw_conf_port
			*p = &rl.running.ports[d->removed[i].port];

		put(l, "%s-%s", i || d->nadded ? " " : " (",
		    p->peers[d->removed[i].peer].name);
	}
	if (d->nadded + d->nremoved > 0)
		put(l, ")");
}

/* ---- the workers' side -------------------------------------------- */

uint32_t
gw_reload_worker_poll(struct gw_id *id, uint64_t now)
{
	struct gw_reload_box *b = id->reload;
	struct reload_msg *m;
	void *p;

	if (b == NULL || rte_ring_sc_dequeue(b->to_worker, &p) != 0)
		return 0;
	m = p;
	m->rc = egw_node_update(id->node, &m->params, now);
	/* room for every message sent: one at a time is in flight (and
	 * one the reload thread stopped waiting for) */
	rte_ring_sp_enqueue(b->from_worker, m);
	return 1;
}

/* The node parameters of `c` that a reload may change (peers are not
 * read by egw_node_update: they go through gw_peers). */
static void
node_params(const struct egw_conf *c, struct egw_node_params *np)
{
	memset(np, 0, sizeof(*np));
	snprintf(np->name, sizeof(np->name), "%s", c->name);
	np->roles = c->roles;
	np->key = c->key;
	egw_conf_to_xfer(c, &np->xfer, &np->policy);
}

/* The worker's answer to `m`, waited for: 0, its -errno, or -ETIMEDOUT
 * (`m` then stays the worker's until it hands it back: a later wait
 * frees it then). */
static int
await_worker(struct gw_reload_box *b, struct reload_msg *m)
{
	for (int i = 0; i < WORKER_WAIT_MS;) {
		void *p;

		if (rte_ring_sc_dequeue(b->from_worker, &p) != 0) {
			usleep(1000);
			i++;
			continue;
		}
		if (p == m)
			return m->rc;
		free(p); /* the answer to an earlier wait given up */
	}
	return -ETIMEDOUT;
}

/* New parameters to every identity's worker, each answer waited for.
 * They all come from one file and every node was made with the same
 * tables, so a node refuses only what all of them refuse: the first
 * refusal (or a worker that does not answer) stops the others being
 * asked. 0 or -errno, with the identity in `who` and how many took the
 * settings in `*done`. */
static int
send_params(const struct egw_conf *c, const char **who, uint16_t *done)
{
	for (uint16_t i = 0; i < rl.nids; i++) {
		*done = i;
		struct reload_msg *m = calloc(1, sizeof(*m));
		int rc;

		*who = rl.ids[i]->cfg->name;
		if (m == NULL)
			return -ENOMEM;
		node_params(c, &m->params);
		if (rte_ring_sp_enqueue(rl.boxes[i].to_worker, m) != 0) {
			free(m);
			return -ENOBUFS;
		}
		rc = await_worker(&rl.boxes[i], m);
		if (rc == -ETIMEDOUT)
			return rc;
		free(m);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- peers -------------------------------------------------------- */

static struct gw_id *
id_of_port(uint16_t port)
{
	for (uint16_t i = 0; i < rl.nids; i++)
		if (rl.ids[i]->cfg_port == port)
			return rl.ids[i];
	return NULL;
}

static int
retry_full(int rc)
{
	if (rc == -ENOBUFS)
		usleep(5000);
	return rc;
}

static int
release_peer(const struct egw_conf_peer_ref *r, const char *why)
{
	struct gw_id *id = id_of_port(r->port);
	const char *name = rl.running.ports[r->port].peers[r->peer].name;
	int rc = -ENOBUFS;

	for (int t = 0; id != NULL && rc == -ENOBUFS && t < MAILBOX_TRIES; t++)
		rc = retry_full(gw_peers_release(id, GW_PEER_FILE, name, why));
	return id == NULL ? -ENODEV : rc;
}

static int
hold_peer(const struct egw_conf_peer_ref *r)
{
	const struct egw_conf_peer *p = &rl.next.ports[r->port].peers[r->peer];
	struct gw_id *id = id_of_port(r->port);
	struct gw_peer_spec s;
	int rc = -ENOBUFS;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "%s", p->name);
	s.addr = p->addr;
	s.udp_port = p->udp_port;
	snprintf(s.shm_path, sizeof(s.shm_path), "%s", p->shm_path);
	for (int t = 0; id != NULL && rc == -ENOBUFS && t < MAILBOX_TRIES; t++)
		rc = retry_full(gw_peers_hold(id, GW_PEER_FILE, &s));
	return id == NULL ? -ENODEV : rc;
}

/* Removals first: a changed peer (same name, new address) is let go of
 * before it is held again. */
static int
apply_peers(const struct egw_conf_diff *d, const char **who)
{
	char why[EGW_CONF_PATH_LEN + 32];
	int rc = 0;

	snprintf(why, sizeof(why), "no longer in %s", rl.running.file);
	for (unsigned i = 0; rc == 0 && i < d->nremoved; i++) {
		*who = rl.running.ports[d->removed[i].port]
			       .peers[d->removed[i].peer]
			       .name;
		rc = release_peer(&d->removed[i], why);
	}
	for (unsigned i = 0; rc == 0 && i < d->nadded; i++) {
		*who = rl.next.ports[d->added[i].port]
			       .peers[d->added[i].peer]
			       .name;
		rc = hold_peer(&d->added[i]);
	}
	return rc;
}

/* ---- one reload --------------------------------------------------- */

static const char *
why_name(enum reload_why why)
{
	return why == WHY_SIGNAL ? "SIGHUP" : "telemetry";
}

static void
refuse_errors(struct line *l)
{
	const struct egw_conf_errors *e = &rl.errs;

	put(l,
	    "refused: %u error%s in the file, the running configuration "
	    "stays: ",
	    e->total, e->total == 1 ? "" : "s");
	for (unsigned i = 0; i < e->stored; i++)
		put(l, "%s%s", i ? "; " : "", e->msg[i]);
}

static const char *
reload_once(struct line *l)
{
	const char *who = "";
	uint16_t done = 0;
	int rc;

	rl.kind = KIND_NONE;
	rl.commit = false;
	if (!rl.reloadable) {
		put(l, "refused: identities derived by --identities are not "
		       "reloaded");
		return "refused";
	}
	if (egw_conf_load(rl.running.file, &rl.next, &rl.errs) != 0) {
		refuse_errors(l);
		rl.kind = KIND_ERRORS;
		return "refused";
	}
	if (egw_conf_diff(&rl.running, &rl.next, &rl.diff) != 0) {
		put(l,
		    "refused: these settings cannot change while the gateway "
		    "runs (restart it to change them), nothing was applied: ");
		put_changes(l, rl.diff.fixed, rl.diff.nfixed,
			    rl.diff.fixed_total);
		rl.kind = KIND_FIXED;
		return "refused";
	}
	if (egw_conf_diff_empty(&rl.diff)) {
		put(l, "unchanged");
		return "unchanged";
	}
	rc = rl.diff.live_total > 0 ? send_params(&rl.next, &who, &done) : 0;
	if (rc != 0) {
		put(l,
		    "refused: port %s's node did not take the new settings: "
		    "%s; ",
		    who, strerror(-rc));
		put(l, done == 0 ?
			       "nothing was applied" :
			       "the ports before it took them (reload again)");
		return "refused";
	}
	rc = apply_peers(&rl.diff, &who);
	rl.commit = true; /* the workers have the new settings */
	rl.kind = KIND_APPLIED;
	if (rc != 0) {
		put(l,
		    "applied in part: peer %s: %s (the settings were "
		    "applied; reload again)",
		    who, strerror(-rc));
		return "refused";
	}
	put(l, "applied: ");
	put_peers(l, &rl.diff);
	if (rl.diff.live_total > 0) {
		put(l, "; settings: ");
		put_changes(l, rl.diff.live, rl.diff.nlive, rl.diff.live_total);
	}
	return "applied";
}

static void
item(const char *text)
{
	struct reload_answer *an = &ans;

	if (an->nitems < EGW_CONF_MAX_ERRORS)
		snprintf(an->items[an->nitems++], ITEM_LEN, "%s", text);
}

static void
item_change(const struct egw_conf_change *ch)
{
	char buf[3 * ITEM_LEN];

	snprintf(buf, sizeof(buf), "%s (%.100s -> %.100s)", ch->path,
		 ch->old_val, ch->new_val);
	item(buf);
}

/* The answer /embgw/reload gives, from the reload just done (under the
 * lock: the telemetry thread reads it). */
static void
answer(const char *result, const char *line)
{
	struct reload_answer *an = &ans;
	const struct egw_conf_diff *d = &rl.diff;
	const struct egw_conf_change *ch = rl.kind == KIND_FIXED ? d->fixed :
								   d->live;
	unsigned nch = rl.kind == KIND_FIXED ? d->nfixed : d->nlive;

	an->result = result;
	snprintf(an->outcome, sizeof(an->outcome), "%s", line);
	an->key = rl.kind == KIND_ERRORS  ? "errors" :
		  rl.kind == KIND_FIXED	  ? "refused_settings" :
		  rl.kind == KIND_APPLIED ? "settings" :
					    NULL;
	an->nitems = an->nadded = an->nremoved = 0;
	for (unsigned i = 0; rl.kind == KIND_ERRORS && i < rl.errs.stored; i++)
		item(rl.errs.msg[i]);
	for (unsigned i = 0;
	     an->key != NULL && rl.kind != KIND_ERRORS && i < nch; i++)
		item_change(&ch[i]);
	if (rl.kind != KIND_APPLIED)
		return;
	for (unsigned i = 0; i < d->nadded; i++)
		snprintf(an->added[an->nadded++], EGW_CONF_NAME_LEN, "%s",
			 rl.next.ports[d->added[i].port]
				 .peers[d->added[i].peer]
				 .name);
	for (unsigned i = 0; i < d->nremoved; i++)
		snprintf(an->removed[an->nremoved++], EGW_CONF_NAME_LEN, "%s",
			 rl.running.ports[d->removed[i].port]
				 .peers[d->removed[i].peer]
				 .name);
}

static void
reload(enum reload_why why)
{
	char buf[LINE_LEN];
	struct line l = { buf, sizeof(buf), 0 };
	const char *result;

	buf[0] = '\0';
	result = reload_once(&l);
	if (strcmp(result, "refused") == 0) {
		GW_LOG(ERR, "reload of %s (%s): %s\n", rl.running.file,
		       why_name(why), buf);
		__atomic_add_fetch(&rl.refused, 1, __ATOMIC_RELAXED);
	} else {
		GW_LOG(NOTICE, "reload of %s (%s): %s\n", rl.running.file,
		       why_name(why), buf);
		__atomic_add_fetch(&rl.ok, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&rl.lock);
	answer(result, buf);
	pthread_mutex_unlock(&rl.lock);
	if (rl.commit)
		rl.running = rl.next; /* what the workers now have */
}

/* ---- the thread and its requests ---------------------------------- */

static void
wake(void)
{
	uint64_t one = 1;
	ssize_t rc = write(rl.efd, &one, sizeof(one));

	(void)rc; /* a counter at its maximum is awake already */
}

void
gw_reload_hangup(void)
{
	int saved = errno;

	rl.hup = 1;
	if (rl.efd >= 0)
		wake();
	errno = saved;
}

static void *
reload_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pf = { .fd = rl.efd, .events = POLLIN };
		uint64_t v, asked;
		bool stop;

		if (poll(&pf, 1, -1) > 0 && read(rl.efd, &v, sizeof(v)) < 0)
			continue;
		pthread_mutex_lock(&rl.lock);
		stop = rl.stop;
		asked = rl.asked;
		pthread_mutex_unlock(&rl.lock);
		if (stop)
			break;
		if (rl.hup) {
			rl.hup = 0;
			reload(WHY_SIGNAL);
		}
		if (asked > rl.answered) {
			reload(WHY_TELEMETRY);
			pthread_mutex_lock(&rl.lock);
			rl.answered = asked;
			pthread_cond_broadcast(&rl.cond);
			pthread_mutex_unlock(&rl.lock);
		}
	}
	return NULL;
}

/* A list of strings into the answer (nothing without memory). */
static void
add_list(struct rte_tel_data *d, const char *key, const char *base,
	 size_t stride, unsigned n)
{
	struct rte_tel_data *a = rte_tel_data_alloc();

	if (a == NULL)
		return;
	rte_tel_data_start_array(a, RTE_TEL_STRING_VAL);
	for (unsigned i = 0; i < n; i++)
		rte_tel_data_add_array_string(a, base + i * stride);
	rte_tel_data_add_dict_container(d, key, a, 0);
}

static void
answer_lists(struct rte_tel_data *d)
{
	const struct reload_answer *an = &ans;

	if (an->key != NULL)
		add_list(d, an->key, an->items[0], ITEM_LEN, an->nitems);
	if (strcmp(an->result, "applied") == 0) {
		add_list(d, "peers_added", an->added[0], EGW_CONF_NAME_LEN,
			 an->nadded);
		add_list(d, "peers_removed", an->removed[0], EGW_CONF_NAME_LEN,
			 an->nremoved);
	}
}

/* /embgw/reload: ask for a reload, wait for its outcome (the same as the
 * log line). */
static int
cmd_reload(const char *cmd, const char *params, struct rte_tel_data *d)
{
	uint64_t ticket;

	(void)cmd;
	(void)params;
	pthread_mutex_lock(&rl.lock);
	if (!rl.started || rl.stop) {
		pthread_mutex_unlock(&rl.lock);
		rte_tel_data_string(d, "stopping: no reload");
		return 0;
	}
	ticket = ++rl.asked;
	wake();
	while (rl.answered < ticket && !rl.stop)
		pthread_cond_wait(&rl.cond, &rl.lock);
	rte_tel_data_start_dict(d);
	if (rl.answered < ticket) {
		rte_tel_data_add_dict_string(d, "result", "stopping");
	} else {
		rte_tel_data_add_dict_string(d, "result", ans.result);
		rte_tel_data_add_dict_string(d, "outcome", ans.outcome);
		answer_lists(d);
	}
	rte_tel_data_add_dict_u64(d, "reloads_ok", rl.ok);
	rte_tel_data_add_dict_u64(d, "reloads_refused", rl.refused);
	pthread_mutex_unlock(&rl.lock);
	return 0;
}

static int
make_boxes(void)
{
	for (uint16_t i = 0; i < rl.nids && i < EGW_CONF_MAX_PORTS; i++) {
		char name[RTE_RING_NAMESIZE];
		struct gw_reload_box *b = &rl.boxes[i];

		snprintf(name, sizeof(name), "egw_rl_in%u", i);
		b->to_worker = rte_ring_create(name, 4, SOCKET_ID_ANY,
					       RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "egw_rl_out%u", i);
		b->from_worker = rte_ring_create(name, 4, SOCKET_ID_ANY,
						 RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (b->to_worker == NULL || b->from_worker == NULL)
			return -rte_errno;
		rl.ids[i]->reload = b;
	}
	return 0;
}

static void
free_boxes(void)
{
	for (uint16_t i = 0; i < EGW_CONF_MAX_PORTS; i++) {
		if (i < rl.nids && rl.ids[i]->reload == &rl.boxes[i])
			rl.ids[i]->reload = NULL;
		rte_ring_free(rl.boxes[i].to_worker);
		rte_ring_free(rl.boxes[i].from_worker);
		rl.boxes[i].to_worker = rl.boxes[i].from_worker = NULL;
	}
}

int
gw_reload_start(const struct egw_conf *c, struct gw_id *const *ids,
		uint16_t nids, bool reloadable)
{
	int rc;

	rl.running = *c;
	rl.ids = ids;
	rl.nids = nids;
	rl.reloadable = reloadable && nids <= EGW_CONF_MAX_PORTS;
	ans.result = "none";
	rl.efd = eventfd(0, EFD_CLOEXEC);
	if (rl.efd < 0) {
		rc = -errno;
		GW_LOG(ERR, "reload: no eventfd: %s\n", strerror(-rc));
		return rc;
	}
	rc = rl.reloadable ? make_boxes() : 0;
	if (rc == 0)
		rc = rte_ctrl_thread_create(&rl.thread, "embgw-reload", NULL,
					    reload_main, NULL);
	if (rc != 0) {
		rc = rc < 0 ? rc : -rc;
		GW_LOG(ERR, "reload: cannot start: %s\n", strerror(-rc));
		free_boxes();
		close(rl.efd);
		rl.efd = -1;
		return rc;
	}
	pthread_mutex_lock(&rl.lock);
	rl.started = true;
	pthread_mutex_unlock(&rl.lock);
	if (rl.hup)
		wake(); /* a SIGHUP during the start */
	rte_telemetry_register_cmd("/embgw/reload", cmd_reload,
				   "Reload the configuration file; answers "
				   "the outcome");
	return 0;
}

void
gw_reload_stop(void)
{
	pthread_mutex_lock(&rl.lock);
	rl.stop = true;
	pthread_cond_broadcast(&rl.cond);
	pthread_mutex_unlock(&rl.lock);
	if (rl.started) {
		wake();
		pthread_join(rl.thread, NULL);
		rl.started = false;
	}
	free_boxes();
	if (rl.efd >= 0)
		close(rl.efd);
	rl.efd = -1;
}

void
gw_reload_counts(uint64_t *ok, uint64_t *refused)
{
	*ok = __atomic_load_n(&rl.ok, __ATOMIC_RELAXED);
	*refused = __atomic_load_n(&rl.refused, __ATOMIC_RELAXED);
}
