/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The program around the loop: configuration, EAL, devices and their
 * identities, one worker per device, teardown and the exit status.
 *
 * The configuration's virtual devices are added to the EAL arguments
 * (--vdev), and --no-pci when no port is a PCI device and the EAL
 * arguments name none, so DPDK never touches a NIC it was not given.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_version.h>

#include "gw_app.h"
#include "gw_attach.h"
#include "gw_cluster.h"
#include "gw_notify.h"
#include "gw_peers.h"
#include "gw_reload.h"
#include "gw_resources.h"
#include "gw_version.h"

#define MAX_EAL_ARGS 128

volatile bool gw_force_quit;

static struct rte_mempool *mbuf_pools[RTE_MAX_NUMA_NODES];
static struct egw_conf conf;
static struct gw_options opt;
static bool interrupted; /* a signal came before the workers ran */
/* --identities K: one configuration per played identity (address, names,
 * shm pool file), derived from the one configured port */
static struct egw_conf *id_confs;
static struct gw_dev devs[EGW_CONF_MAX_PORTS];
static uint16_t ndevs;
static struct gw_id *ids[EGW_CONF_MAX_PORTS > GW_MAX_IDS ?
			 EGW_CONF_MAX_PORTS : GW_MAX_IDS];
static uint16_t nids;

static int
check_config(const char *path)
{
	if (egw_conf_load_report(path, &conf, stderr) != 0)
		return 1;
	/* what the start would refuse for want of memory or space */
	if (gw_check_resources(&conf, stderr) != 0)
		return 1;
	egw_conf_print_summary(&conf, stdout);
	return 0;
}

/* The signal that stopped the run (0: none). */
static volatile sig_atomic_t quit_signal;

static void
on_signal(int sig)
{
	if (quit_signal == 0)
		quit_signal = sig;
	gw_force_quit = true;
}

/* "SIGQUIT", "SIGRTMIN+3" */
static const char *
signame(int sig)
{
	static char buf[32];
	const char *a = sigabbrev_np(sig);

	if (a != NULL)
		snprintf(buf, sizeof(buf), "SIG%s", a);
	else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, sizeof(buf), "SIGRTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, sizeof(buf), "signal %d", sig);
	return buf;
}

/* The reload thread does the work (gw_reload.c); before it runs, and
 * after, a SIGHUP finds nothing to wake and is let go. */
static void
on_hangup(int sig)
{
	(void)sig;
	gw_reload_hangup();
}

/*
 * From the first instruction on, every signal that would end the process
 * ends it through the same teardown as SIGINT: rooms aborted (peers hear
 * ABORT), reports printed, the pool file removed. SIGHUP reloads the
 * configuration file (gw_reload.c). SIGPIPE and SIGXFSZ are
 * ignored: a write to a peer that left, or past a file size limit, fails
 * with its error (EPIPE, EFBIG), which the writer handles. The signals of
 * faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS) keep
 * their default: after one, nothing can be trusted to tear down.
 */
static void
install_signals(void)
{
	static const int stop[] = { SIGINT, SIGTERM, SIGQUIT, SIGUSR1,
				    SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
				    SIGXCPU, SIGIO, SIGPWR, SIGSTKFLT };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_signal;
	for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
		sigaction(stop[i], &sa, NULL);
	/* real-time signals end a process by default too */
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		sigaction(sig, &sa, NULL);
	sa.sa_handler = on_hangup;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigaction(SIGXFSZ, &sa, NULL);
}

/* A --vdev among the EAL arguments naming a configured port's device:
 * one of the two sets of arguments would be dropped without a word. */
static int
eal_names_a_port(const char *prog, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;

		if (!strcmp(argv[i], "--vdev") && i + 1 < argc)
			v = argv[++i];
		else if (!strncmp(argv[i], "--vdev=", 7))
			v = argv[i] + 7;
		if (v == NULL)
			continue;
		for (uint16_t p = 0; p < conf.nports; p++) {
			const char *d = conf.ports[p].device;
			size_t n = strcspn(d, ",");

			if (!conf.ports[p].is_pci && strcspn(v, ",") == n &&
			    !strncmp(v, d, n)) {
				fprintf(stderr, "%s: EAL argument --vdev %s names "
					"port %s's device (%s in %s): give it "
					"in one place\n", prog, v,
					conf.ports[p].name, d, conf.file);
				return -1;
			}
		}
	}
	return 0;
}

/* EAL arguments plus what the configuration implies. */
static int
eal_args(int argc, char **argv, char **out)
{
	bool names_devices = false, any_pci = false;
	int n = 0;

	for (int i = 0; i < argc && n < MAX_EAL_ARGS - 4; i++) {
		if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--allow") ||
		    !strcmp(argv[i], "-b") || !strcmp(argv[i], "--block") ||
		    !strcmp(argv[i], "--no-pci"))
			names_devices = true;
		out[n++] = argv[i];
	}
	for (uint16_t i = 0; i < conf.nports && n < MAX_EAL_ARGS - 4; i++) {
		const struct egw_conf_port *p = &conf.ports[i];

		if (p->is_pci) {
			any_pci = true;
			if (!names_devices) {
				out[n++] = (char *)"-a";
				out[n++] = (char *)p->device;
			}
		} else {
			out[n++] = (char *)"--vdev";
			out[n++] = (char *)p->device;
		}
	}
	if (!names_devices && !any_pci)
		out[n++] = (char *)"--no-pci";
	out[n] = NULL;
	return n;
}

/* One configuration per played identity, derived from the single port's:
 * consecutive addresses on the port's subnet, none of them a peer's. */
static int
make_identity_confs(const char *prog, uint16_t k)
{
	const struct egw_conf_port *base = &conf.ports[0];
	uint32_t mask = base->prefix ? ~0u << (32 - base->prefix) : 0;

	if (conf.nports != 1) {
		fprintf(stderr, "%s: --identities needs a configuration with "
			"exactly one port (%s has %u)\n", prog, conf.file,
			conf.nports);
		return -1;
	}
	id_confs = calloc(k, sizeof(*id_confs));
	if (id_confs == NULL)
		return -1;
	for (uint16_t i = 0; i < k; i++) {
		struct egw_conf *c = &id_confs[i];
		struct egw_conf_port *pp = &c->ports[0];
		uint32_t addr = base->addr + i;
		int n1, n2, n3 = 0;

		*c = conf;
		if ((addr & mask) != (base->addr & mask) ||
		    (addr & ~mask) == ~mask) {
			fprintf(stderr, "%s: --identities %u: %s: address + %u "
				"leaves the port's /%u subnet\n", prog, k,
				conf.file, i, base->prefix);
			return -1;
		}
		for (uint16_t j = 0; j < base->npeers; j++)
			if (base->peers[j].addr == addr) {
				fprintf(stderr, "%s: --identities %u: %s: "
					"address + %u is peer %s's\n", prog, k,
					conf.file, i, base->peers[j].name);
				return -1;
			}
		pp->addr = addr;
		n1 = snprintf(c->name, sizeof(c->name), "%s.%u", conf.name, i);
		n2 = snprintf(pp->name, sizeof(pp->name), "%s.%u", base->name, i);
		/* a receiving identity creates its own pool file; a sending
		 * one maps its peers' files and keeps the path as it is */
		if (pp->payload.driver == EGW_PAYLOAD_SHM &&
		    (c->roles & EGW_ROLE_LANGUAGE))
			n3 = snprintf(pp->payload.path, sizeof(pp->payload.path),
				      "%s.%u", base->payload.path, i);
		if (n1 >= (int)sizeof(c->name) || n2 >= (int)sizeof(pp->name) ||
		    n3 >= (int)sizeof(pp->payload.path)) {
			fprintf(stderr, "%s: --identities: names or paths "
				"of %s too long for a suffix\n", prog, conf.file);
			return -1;
		}
	}
	return 0;
}

static int
find_port_id(const char *device, uint16_t *id)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	size_t len = strcspn(device, ",");

	if (len >= sizeof(name))
		return -1;
	memcpy(name, device, len);
	name[len] = '\0';
	return rte_eth_dev_get_port_by_name(name, id);
}

/* A net_af_packet device that did not probe: the usual cause on one host
 * is DPDK 22.11's PACKET_FANOUT group, (getpid() ^ ifindex) & 0xffff in
 * the network namespace, already made by another process's socket on
 * another interface (the kernel refuses it: EINVAL, no port). Say so with
 * the numbers and the fix; the PMD's own line above says only "could not
 * set PACKET_FANOUT". */
static void
explain_af_packet(const struct egw_conf_port *cfg)
{
	const char *iface = strstr(cfg->device, ",iface=");
	char name[IF_NAMESIZE];
	unsigned ifindex;

	if (strncmp(cfg->device, "net_af_packet", 13) != 0 || iface == NULL)
		return;
	iface += strlen(",iface=");
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(iface, ","), iface);
	ifindex = if_nametoindex(name);
	if (ifindex == 0) {
		GW_LOG(ERR, "port %s: net_af_packet: interface %s: %s\n",
		       cfg->name, name, strerror(errno));
		return;
	}
	GW_LOG(ERR, "port %s: net_af_packet on %s (ifindex %u) most likely "
	       "could not join its PACKET_FANOUT group (getpid() %d ^ "
	       "ifindex) & 0xffff = %u: another process's af_packet socket "
	       "on another interface made that group first (the two ends of "
	       "a veth pair have neighbouring ifindexes, so two gateways "
	       "started one after the other often meet). Start again (another "
	       "PID), or give the pair ifindexes equal modulo 65536: ip link "
	       "add A index N type veth peer name B index N+65536*K "
	       "(doc/gateway.md, \"Same-host devices\")\n", cfg->name, name,
	       ifindex, (int)getpid(), (unsigned)((getpid() ^ ifindex) & 0xffff));
}

/* A device for configured port `cfg`: its DPDK port, lcore, mbuf pool.
 * Started once its identities are made (gw_dev_start). */
static int
make_dev(struct gw_dev *d, const struct egw_conf_port *cfg)
{
	char name[32];
	int socket;

	d->cfg = cfg;
	d->lcore = cfg->lcores[0];
	if (cfg->queues != 1) {
		GW_LOG(ERR, "port %s: %u queues configured; this build "
			"runs one queue (one worker lcore) per port\n",
			cfg->name, cfg->queues);
		return -ENOTSUP;
	}
	if (!rte_lcore_is_enabled(d->lcore)) {
		GW_LOG(ERR, "port %s: lcore %u from the configuration "
			"is not enabled in EAL (-l/-c)\n", cfg->name, d->lcore);
		return -EINVAL;
	}
	if (find_port_id(cfg->device, &d->port_id) != 0) {
		GW_LOG(ERR, "port %s: no DPDK port for device '%s' "
			"(%u ports probed)\n", cfg->name, cfg->device,
			rte_eth_dev_count_avail());
		explain_af_packet(cfg);
		return -ENODEV;
	}
	/* one mbuf pool per socket, shared by that socket's devices */
	socket = rte_eth_dev_socket_id(d->port_id);
	if (socket < 0 || socket >= RTE_MAX_NUMA_NODES)
		socket = 0;
	if (mbuf_pools[socket] == NULL) {
		snprintf(name, sizeof(name), "embgw_mbuf_s%d", socket);
		mbuf_pools[socket] = rte_pktmbuf_pool_create(name, 8191, 256, 0,
							     RTE_MBUF_DEFAULT_BUF_SIZE,
							     socket);
	}
	d->mp = mbuf_pools[socket];
	if (d->mp == NULL) {
		GW_LOG(ERR, "port %s: no mbuf pool: %s\n", cfg->name,
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	return 0;
}


/* The node and the payload driver take parameters of their own; the
 * configuration stays up here. */
_Static_assert(EGW_CONF_MAX_PEERS <= EGW_NODE_MAX_STATIC &&
		       EGW_CONF_MAX_PEERS <= EGW_PAYLOAD_MAX_PEERS &&
		       EGW_CONF_MAX_SLOTS <= EGW_NODE_MAX_PEERS &&
		       EGW_CONF_MAX_SLOTS <= EGW_PAYLOAD_MAX_SLOTS,
	       "a port's peers fit the node's and the drivers' tables");
_Static_assert(EGW_CONF_NAME_LEN <= EGW_NODE_NAME_LEN &&
	       EGW_CONF_NAME_LEN <= EGW_PAYLOAD_NAME_LEN &&
	       EGW_CONF_PATH_LEN <= EGW_PAYLOAD_PATH_LEN,
	       "names and paths are never cut short");

static void
node_params(const struct egw_conf *c, const struct egw_conf_port *port,
	    struct egw_node_params *np)
{
	memset(np, 0, sizeof(*np));
	snprintf(np->name, sizeof(np->name), "%s", c->name);
	np->roles = c->roles;
	np->key = c->key;
	egw_conf_to_xfer(c, &np->xfer, &np->policy);
	np->npeers = port->npeers;
	np->max_peers = port->max_peers;
	for (uint32_t i = 0; i < port->npeers; i++) {
		snprintf(np->peers[i].name, sizeof(np->peers[i].name), "%s",
			 port->peers[i].name);
		np->peers[i].addr = port->peers[i].addr;
		np->peers[i].udp_port = port->peers[i].udp_port;
	}
}

static void
payload_params(const struct egw_conf *c, const struct egw_conf_port *port,
	       struct egw_payload_params *pp)
{
	memset(pp, 0, sizeof(*pp));
	pp->geom = c->geom;
	pp->receives = (c->roles & EGW_ROLE_LANGUAGE) != 0;
	/* every batch the engines can have in flight */
	pp->max_batches = c->max_rooms * EGW_XFER_MAX_RANKS * EGW_XFER_PIPE;
	pp->peer_dead_ns = c->timers.peer_dead_ns;
	pp->addr = port->addr;
	snprintf(pp->path, sizeof(pp->path), "%s", port->payload.path);
	snprintf(pp->device, sizeof(pp->device), "%s", port->payload.device);
	pp->port = port->payload.port;
	pp->gid_index = port->payload.gid_index;
	pp->hop_limit = port->payload.hop_limit;
	pp->window_keys = port->payload.window_keys;
	/* a sending pool only (the configuration refuses it elsewhere) */
	pp->segments = (c->roles & EGW_ROLE_LANGUAGE) ? 0 :
							port->payload.segments;
	pp->npeers = port->npeers;
	pp->max_peers = port->max_peers;
	for (uint32_t i = 0; i < port->npeers; i++) {
		snprintf(pp->peers[i].name, sizeof(pp->peers[i].name), "%s",
			 port->peers[i].name);
		snprintf(pp->peers[i].shm_path, sizeof(pp->peers[i].shm_path),
			 "%s", port->peers[i].shm_path);
	}
}

/* An identity on device `d`: port `cfg_port` of configuration `c`, its
 * payload driver, pool, node and the engines' attach point. */
static int
make_id(struct gw_id *id, struct gw_dev *d, const struct egw_conf *c,
	uint16_t cfg_port, const struct gw_app *app)
{
	struct egw_region regions[EGW_KIND_MAX];
	struct egw_payload_params pp;
	struct egw_node_params np;
	struct egw_node_ops ops;
	uint8_t gid[16];
	uint32_t qpn;
	int rc;

	id->dev = d;
	id->conf = c;
	id->cfg = &c->ports[cfg_port];
	id->cfg_port = cfg_port;
#ifdef GW_TEST_HOOKS
	id->knobs = opt.knobs;
#endif
	/* --flood-pps is the generator's rate: the first identity's */
	if (app->flood_tick != NULL && d->nids == 0) {
		id->flood.pps = opt.flood_pps;
		id->flood.rng = opt.rng;
	}
	d->ids[d->nids++] = id;
	if (gw_id_neigh_init(id) != 0)
		return -ENOMEM;
	id->dops = egw_payload_find(id->cfg->payload.driver ==
				    EGW_PAYLOAD_VERBS ? "verbs" : "shm");
	if (id->dops == NULL) {
		GW_LOG(ERR, "port %s: payload driver not built in this "
			"binary\n", id->cfg->name);
		return -ENOTSUP;
	}
	/* this incarnation: random, whatever the clock says (a test build
	 * may fix it: --test-session) */
	id->session = egw_proto_session_new();
#ifdef GW_TEST_HOOKS
	rc = gw_test_knobs_session(id, (uint16_t)(nids - 1));
	if (rc != 0)
		return rc;
#endif
	GW_LOG(INFO, "port %s: session %#lx\n", id->cfg->name,
	       (unsigned long)id->session);
	payload_params(c, id->cfg, &pp);
	rc = id->dops->open(&pp, id->session, &id->drv, &id->pool);
#ifdef GW_TEST_HOOKS
	if (rc == 0)
		rc = gw_test_knobs_wrap(id);
#endif
	if (rc == 0)
		rc = egw_pool_cache_enable(id->pool, EGW_POOL_CACHE_DEFAULT);
	if (rc != 0) {
		GW_LOG(ERR, "port %s: payload driver %s: %s\n",
			id->cfg->name, id->dops->name, strerror(-rc));
		return rc;
	}
	id->dops->describe(id->drv, regions, gid, &qpn);
	ops = gw_node_ops;
	ops.ctx = id;
	if (id->dops->window_bind == NULL || id->dops->window_unbind == NULL ||
	    !id->cfg->payload.window_keys) {
		/* windows go out under the regions' keys */
		ops.window_bind = NULL;
		ops.window_unbind = NULL;
	} else {
		GW_LOG(INFO, "port %s: per-window keys: every window a peer is "
		       "given is a memory window on its QP\n", id->cfg->name);
	}
	node_params(c, id->cfg, &np);
	rc = egw_node_create(&np, id->pool, regions, gid, qpn, &ops,
			     id->session, gw_now_ns(), &id->node);
	if (rc != 0)
		GW_LOG(ERR, "port %s: cannot create its node (%u rooms, %u runs "
		       "a room): %s\n", id->cfg->name, c->max_rooms,
		       c->max_runs_per_room, strerror(-rc));
	if (rc == 0) {
		rc = gw_peers_init(id);
		if (rc != 0)
			GW_LOG(ERR,
			       "port %s: cannot make its peer table (%u "
			       "slots): %s\n",
			       id->cfg->name, id->cfg->max_peers,
			       strerror(-rc));
	}
	/* engines' rooms first: the attach source takes only its clients'
	 * rooms, embgw-gen's room source (set_up) answers for any other */
	if (rc == 0 && c->attach.enabled)
		rc = gw_attach_source_attach(id, &id->attach);
	/* after the payload driver: a second gateway with the same pool file
	 * hears that refusal, which says more */
	if (rc == 0)
		rc = gw_port_lock(id);
	if (rc == 0 && opt.capture != NULL) {
		char path[512];

		snprintf(path, sizeof(path),
			 conf.nports > 1 || opt.identities > 1 ? "%s.%s" : "%s",
			 opt.capture, id->cfg->name);
		rc = gw_capture_open(id, path);
		if (rc != 0)
			GW_LOG(ERR, "cannot write capture %s: %s\n", path,
			       strerror(-rc));
	}
	return rc;
}

/* Every configured port a device; with --identities the one device
 * carries K identities. Stops at the first failure (the log says why),
 * or with -EINTR at a signal. */
static int
set_up(const struct gw_app *app)
{
	uint16_t k = opt.identities;
	int rc = 0;

	for (ndevs = 0; rc == 0 && ndevs < conf.nports; ndevs++) {
		struct gw_dev *d = &devs[ndevs];

		rc = gw_force_quit ? -EINTR : make_dev(d, &conf.ports[ndevs]);
		for (uint16_t i = 0; rc == 0 && i < k; i++) {
			const struct egw_conf *c = k > 1 ? &id_confs[i] : &conf;

			ids[nids] = calloc(1, sizeof(*ids[nids]));
			if (ids[nids] == NULL) {
				rc = -ENOMEM;
				break;
			}
			ids[nids]->cap.fd = -1;
			ids[nids]->lock_fd = -1;
			rc = make_id(ids[nids++], d, c, k > 1 ? 0 : ndevs,
				     app);
			/* the load's room source, after the attach point's */
			if (rc == 0 && app->load != NULL)
				rc = app->load->attach(ids[nids - 1],
						       (uint16_t)(nids - 1), k);
			if (rc == 0 && gw_force_quit)
				rc = -EINTR; /* a signal: the start ends here */
		}
		if (rc == 0)
			rc = gw_dev_start(d);
		if (rc != 0 && gw_force_quit)
			rc = -EINTR;
	}
	return rc;
}

/* Workers stopped: each identity aborts what is open (its peers hear
 * ABORT), drains its driver and reports; then the device closes. What
 * the driven rooms and the captures came to lands in `out`. An identity
 * whose device never started (a start cut short by a signal) reports too. */
static void
tear_down(struct gw_outcome *out)
{
	for (uint16_t di = ndevs; di-- > 0;) {
		struct gw_dev *d = &devs[di];

		/* last first: identities send their ABORTs through the
		 * device, which closes after the last of them */
		for (uint16_t i = d->nids; i-- > 0;) {
			struct gw_id *id = d->ids[i];

			if (id->node != NULL && (d->started || quit_signal)) {
				if (d->started) {
					gw_id_drain(id, conf.timers.linger_ns);
					gw_dev_flush(d);
				}
				gw_report_id(id, stdout);
				fflush(stdout);
				gw_report_driven(id, out);
			}
#ifdef GW_TEST_HOOKS
			gw_test_knobs_close(id);
#endif
		}
		gw_dev_stop(d);
		for (uint16_t i = 0; i < d->nids; i++)
			if (gw_capture_close(d->ids[i]) != 0)
				out->captures_failed++;
	}
}

/* The driven rooms asked for that no room source accounts for: a signal
 * during the start can stop it before an identity (and its source) is
 * made. */
static uint64_t
rooms_never_sourced(const struct gw_app *app, const struct gw_outcome *o)
{
	uint64_t asked = app->load != NULL ?
			 app->load->rooms_asked(conf.nports) : 0;

	return asked > o->rooms ? asked - o->rooms : 0;
}

/* The exit status, on the report's last line too: 1 (could not start:
 * the log says why), 4 (driven rooms failed or were corrupt), 3 (driven
 * rooms left unfinished), 5 (a capture stopped short), else 0 - never a
 * negative errno folded into a byte. */
static int
exit_line(int status, const struct gw_outcome *o)
{
	const char *why = "ok";
	uint64_t reloads_ok, reloads_refused;

	if (status == GW_EXIT_START) {
		why = "could_not_start";
	} else if (o->failed + o->bad > 0) {
		status = GW_EXIT_ROOMS_FAILED;
		why = "rooms_failed";
	} else if (o->unfinished > 0) {
		status = GW_EXIT_ROOMS_UNFINISHED;
		why = "rooms_unfinished";
	} else if (o->captures_failed > 0) {
		status = GW_EXIT_CAPTURE;
		why = "capture_incomplete";
	}
	gw_reload_counts(&reloads_ok, &reloads_refused);
	printf("exit: status=%d reason=%s failed=%lu bad=%lu unfinished=%lu "
	       "captures_failed=%u reloads_ok=%lu reloads_refused=%lu "
	       "signal=%s\n",
	       status, why, (unsigned long)o->failed, (unsigned long)o->bad,
	       (unsigned long)o->unfinished, o->captures_failed,
	       (unsigned long)reloads_ok, (unsigned long)reloads_refused,
	       quit_signal == 0 ? "none" : signame(quit_signal));
	fflush(stdout);
	return status;
}

static void
free_all(bool report_total)
{
	if (report_total)
		gw_report_total(ids, nids, stdout);
	for (uint16_t i = 0; i < nids; i++) {
		gw_room_sources_close(ids[i]);
		gw_peers_fini(ids[i]);
		egw_node_destroy(ids[i]->node);
		gw_id_neigh_fini(ids[i]);
		if (ids[i]->drv != NULL)
			ids[i]->dops->close(ids[i]->drv);
		gw_port_unlock(ids[i]);
		free(ids[i]);
	}
	free(id_confs);
}

/* EAL's files under its runtime directory (/var/run/dpdk/PREFIX: the
 * shared config, the memory segments' arrays - megabytes with
 * --no-huge -, the multi-process and telemetry sockets) outlive
 * rte_eal_cleanup(), one directory per exited gateway. The prefix is
 * ours alone as primary (EAL refuses a second primary on it), so at our
 * exit we remove what EAL puts there, by name, and the directory if
 * that empties it; anything else there is left alone. */
static void
remove_runtime_dir(const char *dir)
{
	static const char *const ours[] = { "config", "hugepage_info",
		"mp_socket", "fbarray_", "dpdk_telemetry.", NULL };
	struct dirent *e;
	DIR *d;

	if (dir[0] == '\0' || rte_eal_process_type() != RTE_PROC_PRIMARY)
		return;
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		for (int i = 0; ours[i] != NULL; i++)
			if (strncmp(e->d_name, ours[i], strlen(ours[i])) == 0) {
				unlinkat(dirfd(d), e->d_name, 0);
				break;
			}
	closedir(d);
	if (rmdir(dir) != 0 && errno != ENOENT)
		GW_LOG(INFO, "EAL runtime directory %s kept: %s\n", dir,
		       strerror(errno));
}

static void
run_workers(const struct gw_app *app)
{
	unsigned main_lcore = rte_get_main_lcore();
	uint32_t bounded = 0;
	struct gw_loop_opts lo = {
		.duration_ns = opt.duration_ns,
		.exit_when_done = opt.exit_when_done,
		.flood_tick = app->flood_tick,
	};

	for (uint16_t i = 0; i < nids; i++)
		bounded += gw_room_sources_remaining(ids[i]) != GW_ROOMS_ENDLESS;
	gw_loop_init(&lo, bounded);
	gw_telemetry_init(ids, nids);
	/* one worker per device; it serves the device's identities */
	for (uint16_t i = 0; i < ndevs; i++)
		if (devs[i].lcore != main_lcore)
			rte_eal_remote_launch(gw_loop_worker, &devs[i],
					      devs[i].lcore);
	/* ports started, the attach socket listening, workers launched:
	 * ready for the service manager (Type=notify) */
	if (conf.attach.enabled)
		gw_notify_ready(devs, ndevs, "running: %u port(s), engines "
				"attach at %s", ndevs, conf.attach.path);
	else
		gw_notify_ready(devs, ndevs, "running: %u port(s), no attach "
				"socket", ndevs);
	for (uint16_t i = 0; i < ndevs; i++)
		if (devs[i].lcore == main_lcore)
			gw_loop_worker(&devs[i]);
	while (!gw_force_quit) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
	}
	rte_eal_mp_wait_lcore();
}

int
gw_app_main(int argc, char **argv, const struct gw_app *app)
{
	char *eal[MAX_EAL_ARGS];
	char rundir[PATH_MAX];
	struct gw_outcome out = { 0 };
	int sep = -1, neal, rc, status;

	install_signals();

	if (argc == 3 && (!strcmp(argv[1], "--check-config") ||
			  !strcmp(argv[1], "-t")))
		return check_config(argv[2]);
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		gw_version_print(stdout, app->name, rte_version());
		return 0;
	}
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		gw_options_usage(stdout, argv[0], app);
		return 0;
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			sep = i;
			break;
		}
	if (sep < 0) {
		gw_options_usage(stderr, argv[0], app);
		return GW_EXIT_USAGE;
	}
	/* app arguments first: the configuration decides the devices */
	argv[sep] = argv[0];
	if (gw_options_parse(argc - sep, argv + sep, app, &opt) != 0) {
		gw_options_usage(stderr, argv[0], app);
		return GW_EXIT_USAGE;
	}
	if (egw_conf_load_report(opt.config, &conf, stderr) != 0)
		return 1;
	if (eal_names_a_port(app->name, sep, argv) != 0)
		return 1;
	if (opt.identities > 1 && make_identity_confs(app->name, opt.identities) != 0) {
		free(id_confs);
		return 1;
	}
	neal = eal_args(sep, argv, eal);
	if (rte_eal_init(neal, eal) < 0) {
		fprintf(stderr, "%s: EAL init failed: %s\n", app->name,
			rte_strerror(rte_errno));
		free(id_confs);
		return 1;
	}
	gw_clock_init();
	gw_notify_status("starting %u port(s) of %s", conf.nports, conf.file);
	gw_log_init();
	gw_pdump_init();
	/* a signal during the start ends it here, cleanly */
	rc = set_up(app);
	if (rc == 0 && conf.attach.enabled && !gw_force_quit)
		rc = gw_attach_start(&conf, ids, nids);
	if (rc == 0 && !gw_force_quit)
		rc = gw_metrics_start(&conf, ids, nids);
	if (rc == 0 && !gw_force_quit)
		rc = gw_cluster_start(&conf, ids, nids);
	if (rc == 0 && !gw_force_quit)
		rc = gw_reload_start(&conf, ids, nids, opt.identities <= 1);
	interrupted = rc == -EINTR || (rc == 0 && gw_force_quit);
	if (rc == 0 && !gw_force_quit)
		run_workers(app);
	if (quit_signal != 0)
		GW_LOG(INFO, "%s: stopping on %s%s\n", app->name,
		       signame(quit_signal), interrupted ? " during the start" : "");
	status = rc != 0 && !interrupted ? GW_EXIT_START : GW_EXIT_OK;
	if (status == GW_EXIT_START)
		gw_notify_stopping("could not start: %s", strerror(-rc));
	else if (quit_signal != 0)
		gw_notify_stopping("stopping on %s", signame(quit_signal));
	else
		gw_notify_stopping("stopping: the run is done");
	/* our records left the cluster at the signal (or leave now, at the
	 * end of a run); the thread ends before the identities go */
	gw_cluster_stop();
	/* the workers have returned: the metrics thread ends here, before
	 * the teardown frees what its pages read (gw_metrics.c) */
	gw_metrics_stop();
	gw_reload_stop();
	tear_down(&out);
	/* rooms of identities a signal kept from being made are unfinished
	 * as much as those of a started one */
	out.unfinished += rooms_never_sourced(app, &out);
	/* the telemetry thread may still read: it lets go of the identities
	 * before the attach points and the identities are freed */
	gw_telemetry_stop();
	/* the clients' sockets close after their rooms were aborted (they
	 * read Failed), before the room sources let go of them */
	gw_attach_stop();
	free_all(status != GW_EXIT_START && opt.identities > 1);
	gw_pdump_uninit();
	snprintf(rundir, sizeof(rundir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	remove_runtime_dir(rundir);
	return exit_line(status, &out);
}
