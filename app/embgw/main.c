/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * embgw - the gateway.
 *
 *   embgw --check-config FILE
 *       validate FILE without starting EAL or touching any device
 *   embgw [EAL args] -- -f FILE [app options]
 *       run the gateway: one worker lcore per configured port
 *
 * The configuration's virtual devices are added to the EAL arguments
 * (--vdev), and --no-pci when no port is a PCI device and the EAL
 * arguments name none, so DPDK never touches a NIC it was not given.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include "gw.h"

#define MAX_EAL_ARGS 128

volatile bool gw_force_quit;
int gw_logtype = RTE_LOGTYPE_USER1;
static struct rte_mempool *mbuf_pools[RTE_MAX_NUMA_NODES];
static uint32_t ports_done; /* driving ports whose rooms all finished */
static uint32_t ports_driving;

static struct egw_conf conf;
static struct gw_port ports[GW_MAX_PORTS];
static uint16_t nports;
/* --identities K: K peers played from the configuration's one port, each
 * with a configuration of its own (address, names, shm pool file) */
static uint16_t identities = 1;
static struct egw_conf *id_confs;
static uint64_t duration_ns;
static const char *capture_path;

static int
check_config(const char *path)
{
	if (egw_conf_load_report(path, &conf, stderr) != 0)
		return 1;
	egw_conf_print_summary(&conf, stdout);
	return 0;
}

static void
usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s --check-config FILE\n"
		"       %s [EAL args] -- -f FILE [options]\n"
		"options:\n"
		"  -f, --config FILE      gateway configuration (libconfig)\n"
		"  --produce              encode: synthesise data for every room asked for\n"
		"  --drive N              language: run N rooms, verify every byte\n"
		"  --concurrency C        language: rooms in flight (1)\n"
		"  --lengths L1,L2,...    language: room lengths in tokens, cycled\n"
		"  --ranks R              language: TP ranks per room (1)\n"
		"  --dummy-rank           language: the last rank wants the aux record only\n"
		"  --peer NAME|all        language: the encode peer to fetch from, or\n"
		"                         every peer of the port in turn (default: the first)\n"
		"  --exit-when-done       language: stop after the N rooms\n"
		"  --duration-ms D        stop after D ms (bounded runs)\n"
		"  --start-delay-ms D     language: wait D ms before the first room\n"
		"  --ctl-drop PCT, --ctl-dup PCT, --ctl-reorder PCT\n"
		"                         test knobs: lose/duplicate/reorder our control datagrams\n"
		"  --inject-junk N        test knob: N malformed/forged/replayed datagrams per tick\n"
		"  --fault-qp-error N     test knob (verbs): put the QP in error after batch N\n"
		"  --capture FILE         write every control frame in and out to a pcap file\n"
		"                         (FILE.<port> when there are several ports)\n"
		"  --rate R               language: open loop, R rooms/s (--concurrency caps)\n"
		"  --flood-pps P          junk datagrams per second at the port's first peer\n"
		"                         (with a net_pcap device: a replayable pcap)\n"
		"  --seed S               room-id and fault-injection seed\n"
		"  --identities K         play K peers from the one configured port:\n"
		"                         addresses ADDRESS+0..K-1, names NAME.0..K-1,\n"
		"                         shm pool files PATH.0..K-1, one pool each;\n"
		"                         --drive, --concurrency and --rate are shared out\n",
		prog, prog);
}

static void
on_signal(int sig)
{
	(void)sig;
	gw_force_quit = true;
}

static int
parse_lengths(const char *s, struct gw_work_opts *o)
{
	char *dup = strdup(s), *save = NULL;

	o->nlengths = 0;
	for (char *t = strtok_r(dup, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		long v = strtol(t, NULL, 10);

		if (v <= 0 || v > (long)EGW_XFER_MAX_TOKENS || o->nlengths == 64) {
			free(dup);
			return -1;
		}
		o->lengths[o->nlengths++] = (uint32_t)v;
	}
	free(dup);
	return o->nlengths > 0 ? 0 : -1;
}

static int
parse_app_args(int argc, char **argv, const char **cfg, struct gw_work_opts *o,
	       struct gw_faults *f)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'f' },
		{ "produce", no_argument, NULL, 'P' },
		{ "drive", required_argument, NULL, 'D' },
		{ "concurrency", required_argument, NULL, 'C' },
		{ "lengths", required_argument, NULL, 'L' },
		{ "ranks", required_argument, NULL, 'R' },
		{ "dummy-rank", no_argument, NULL, 'Y' },
		{ "peer", required_argument, NULL, 'p' },
		{ "exit-when-done", no_argument, NULL, 'X' },
		{ "duration-ms", required_argument, NULL, 'T' },
		{ "start-delay-ms", required_argument, NULL, 'W' },
		{ "ctl-drop", required_argument, NULL, 'd' },
		{ "ctl-dup", required_argument, NULL, 'u' },
		{ "ctl-reorder", required_argument, NULL, 'r' },
		{ "inject-junk", required_argument, NULL, 'J' },
		{ "capture", required_argument, NULL, 'K' },
		{ "rate", required_argument, NULL, 'Q' },
		{ "flood-pps", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 's' },
		{ "identities", required_argument, NULL, 'I' },
		{ "fault-qp-error", required_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	memset(o, 0, sizeof(*o));
	memset(f, 0, sizeof(*f));
	o->concurrency = 1;
	o->ranks = 1;
	o->lengths[0] = 2000;
	o->nlengths = 1;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'f': *cfg = optarg; break;
		case 'P': o->produce = true; break;
		case 'D': o->drive = (uint32_t)atoi(optarg); break;
		case 'C': o->concurrency = (uint32_t)atoi(optarg); break;
		case 'L':
			if (parse_lengths(optarg, o) != 0) {
				fprintf(stderr, "embgw: --lengths: 1..64 lengths of "
					"1..%u tokens\n", EGW_XFER_MAX_TOKENS);
				return -1;
			}
			break;
		case 'R': o->ranks = (uint16_t)atoi(optarg); break;
		case 'Y': o->dummy_rank = true; break;
		case 'p': snprintf(o->peer, sizeof(o->peer), "%s", optarg); break;
		case 'X': o->exit_when_done = true; break;
		case 'T': duration_ns = strtoull(optarg, NULL, 10) * 1000000ull; break;
		case 'W': o->start_delay_ms = (uint32_t)atoi(optarg); break;
		case 'd': f->drop_pct = (uint32_t)atoi(optarg); break;
		case 'u': f->dup_pct = (uint32_t)atoi(optarg); break;
		case 'r': f->reorder_pct = (uint32_t)atoi(optarg); break;
		case 'J': f->junk_per_tick = (uint32_t)atoi(optarg); break;
		case 'K': capture_path = optarg; break;
		case 'Q': o->rate = (uint32_t)atoi(optarg); break;
		case 'F': f->flood_pps = strtoull(optarg, NULL, 10); break;
		case 's': o->seed = strtoull(optarg, NULL, 10); break;
		case 'I': identities = (uint16_t)atoi(optarg); break;
		case 'E': f->qp_error_at = strtoull(optarg, NULL, 10); break;
		default:
			return -1;
		}
	}
	if (*cfg == NULL) {
		fprintf(stderr, "embgw: -f FILE is required\n");
		return -1;
	}
	if (o->drive > GW_MAX_DRIVE || o->ranks == 0 || o->ranks > EGW_XFER_MAX_RANKS ||
	    f->drop_pct > 50 || f->dup_pct > 50 || f->reorder_pct > 50 ||
	    f->junk_per_tick > 64 || identities == 0 ||
	    identities > GW_MAX_PORTS) {
		fprintf(stderr, "embgw: --drive <= %u, --ranks 1..%d, "
			"fault knobs 0..50%%, --inject-junk 0..64, "
			"--identities 1..%d\n",
			GW_MAX_DRIVE, EGW_XFER_MAX_RANKS, GW_MAX_PORTS);
		return -1;
	}
	f->rng = o->seed ? o->seed : 1;
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

/* One pass over one port (or identity) after the device's burst: payload
 * completions, timers, transmit. Returns work done. */
static uint32_t
serve(struct gw_port *p, uint64_t now, uint64_t stop_at)
{
	struct egw_payload_cpl cpl[64];
	uint32_t nc, work = 0;

	/* completions first: they may free blocks and finish rooms */
	while ((nc = p->dops->poll(p->drv, cpl, 64)) > 0) {
		work += nc;
		for (uint32_t i = 0; i < nc; i++)
			egw_node_writes_done(p->node, cpl[i].cookie, cpl[i].ok,
					     now);
	}
	gw_work_tick(p, now); /* new rooms as soon as they are due */
	if (now >= p->next_tick) {
		work++;
		egw_node_tick(p->node, now);
		gw_net_tick(p, now);
		if (p->dops->changed != NULL) {
			uint32_t peers[EGW_CONF_MAX_PEERS];
			uint32_t nch = p->dops->changed(p->drv, peers,
							EGW_CONF_MAX_PEERS);

			/* a link rebuilt after an error: tell the peer */
			for (uint32_t i = 0; i < nch; i++)
				egw_node_reregister(p->node, peers[i], now);
		}
		p->next_tick = now + GW_TICK_NS;
		if (p->faults.junk_per_tick)
			gw_net_inject_junk(p);
		gw_net_flood(p, now);
		if (!p->stopped && gw_work_wants_exit(p)) {
			p->stopped = true; /* keeps serving until all are */
			if (__atomic_add_fetch(&ports_done, 1, __ATOMIC_SEQ_CST) ==
			    ports_driving)
				gw_force_quit = true;
		}
		if (now >= stop_at)
			gw_force_quit = true;
	}
	gw_net_flush(p);
	return work;
}

/* The worker of one device: its burst in (handed to the identity each
 * frame is for), then every identity served in turn. */
static int
worker(void *arg)
{
	struct gw_port *p = arg;
	uint64_t stop_at = duration_ns ? gw_now_ns() + duration_ns : UINT64_MAX;
	uint64_t began = rte_get_tsc_cycles();

	GW_LOG(INFO, "port %s: worker on lcore %u (%u identit%s)\n",
		p->cfg->name, rte_lcore_id(), p->nids, p->nids > 1 ? "ies" : "y");
	while (!gw_force_quit) {
		uint64_t t0 = rte_get_tsc_cycles();
		uint64_t now = gw_tsc_ns(t0);
		uint32_t work = gw_net_rx_burst(p, now);

		for (uint16_t i = 0; i < p->nids; i++)
			work += serve(&p[i], now, stop_at);
		/* CPU per datagram without the busy-poll spin: only
		 * iterations that did something count as busy */
		if (work)
			p->st.busy_cycles += rte_get_tsc_cycles() - t0;
	}
	p->st.run_cycles = rte_get_tsc_cycles() - began;
	return 0;
}

/* Shutdown of one port on its own lcore's behalf: abort what is open (the
 * peers hear ABORT), let the payload drain, free, report. */
static void
teardown_port(struct gw_port *p)
{
	struct egw_payload_cpl cpl[64];
	uint64_t now = gw_now_ns();
	uint32_t nc;

	egw_node_abort_all(p->node, now);
	while ((nc = p->dops->poll(p->drv, cpl, 64)) > 0)
		for (uint32_t i = 0; i < nc; i++)
			egw_node_writes_done(p->node, cpl[i].cookie, cpl[i].ok, now);
	/* lingering sender rooms hold no blocks once aborted and drained */
	egw_node_tick(p->node, now + conf.timers.linger_ns + 1);
	gw_net_flush(p);
	gw_work_report(p, stdout);
	fflush(stdout);
}

/* One configuration per played identity, derived from the single port's:
 * consecutive addresses on the port's subnet, none of them a peer's. */
static int
make_identities(void)
{
	const struct egw_conf_port *base = &conf.ports[0];
	uint32_t mask = base->prefix ? ~0u << (32 - base->prefix) : 0;

	if (conf.nports != 1) {
		fprintf(stderr, "embgw: --identities needs a configuration with "
			"exactly one port (%s has %u)\n", conf.file, conf.nports);
		return -1;
	}
	id_confs = calloc(identities, sizeof(*id_confs));
	if (id_confs == NULL)
		return -1;
	for (uint16_t i = 0; i < identities; i++) {
		struct egw_conf *c = &id_confs[i];
		struct egw_conf_port *pp = &c->ports[0];
		uint32_t addr = base->addr + i;
		int n1, n2, n3 = 0;

		*c = conf;
		if ((addr & mask) != (base->addr & mask) ||
		    (addr & ~mask) == ~mask) {
			fprintf(stderr, "embgw: --identities %u: %s: address + %u "
				"leaves the port's /%u subnet\n", identities,
				conf.file, i, base->prefix);
			return -1;
		}
		for (uint16_t k = 0; k < base->npeers; k++)
			if (base->peers[k].addr == addr) {
				fprintf(stderr, "embgw: --identities %u: %s: "
					"address + %u is peer %s's\n", identities,
					conf.file, i, base->peers[k].name);
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
			fprintf(stderr, "embgw: --identities: names or paths "
				"of %s too long for a suffix\n", conf.file);
			return -1;
		}
	}
	return 0;
}

/* An identity's share of the generator's load: --drive, --concurrency and
 * --rate split evenly (the first ones take the remainder), distinct room
 * ids (the run number differs per identity). */
static struct gw_work_opts
share_of(const struct gw_work_opts *o, uint16_t i)
{
	struct gw_work_opts s = *o;
	uint32_t k = identities;

	s.identity = i; /* also a port's index: distinct room ids */
	if (k == 1)
		return s;
	s.drive = o->drive / k + (i < o->drive % k);
	s.concurrency = o->concurrency / k + (i < o->concurrency % k);
	if (s.concurrency == 0)
		s.concurrency = 1;
	s.rate = o->rate / k + (i < o->rate % k);
	if (o->rate > 0 && s.rate == 0)
		s.rate = 1;
	return s;
}

static int
setup_port(struct gw_port *p, uint16_t idx, const struct gw_work_opts *o,
	   const struct gw_faults *f)
{
	struct egw_region regions[EGW_KIND_MAX];
	struct egw_node_ops ops;
	uint8_t gid[16];
	uint32_t qpn;
	char name[32];
	struct timespec ts;
	int rc, socket;

	const struct egw_conf *c = identities > 1 ? &id_confs[idx] : &conf;
	uint16_t cidx = identities > 1 ? 0 : idx;

	/* identities share the device: the first one owns it and its rx */
	p->owner = identities > 1 ? &ports[0] : p;
	p->nids = identities;
	p->conf = c;
	p->cfg = &c->ports[cidx];
	p->idx = idx;
	p->lcore = p->cfg->lcores[0];
	p->faults = *f;
	if (p->cfg->queues != 1) {
		GW_LOG(ERR, "port %s: %u queues configured; this build "
			"runs one queue (one worker lcore) per port\n",
			p->cfg->name, p->cfg->queues);
		return -ENOTSUP;
	}
	if (!rte_lcore_is_enabled(p->lcore)) {
		GW_LOG(ERR, "port %s: lcore %u from the configuration "
			"is not enabled in EAL (-l/-c)\n", p->cfg->name, p->lcore);
		return -EINVAL;
	}
	if (find_port_id(p->cfg->device, &p->port_id) != 0) {
		GW_LOG(ERR, "port %s: no DPDK port for device '%s' "
			"(%u ports probed)\n", p->cfg->name, p->cfg->device,
			rte_eth_dev_count_avail());
		return -ENODEV;
	}
	/* one mbuf pool per socket, shared by that socket's ports */
	socket = rte_eth_dev_socket_id(p->port_id);
	if (socket < 0 || socket >= RTE_MAX_NUMA_NODES)
		socket = 0;
	if (mbuf_pools[socket] == NULL) {
		snprintf(name, sizeof(name), "embgw_mbuf_s%d", socket);
		mbuf_pools[socket] = rte_pktmbuf_pool_create(name, 8191, 256, 0,
							     RTE_MBUF_DEFAULT_BUF_SIZE,
							     socket);
	}
	p->mp = mbuf_pools[socket];
	if (p->mp == NULL) {
		GW_LOG(ERR, "port %s: no mbuf pool: %s\n", p->cfg->name,
			rte_strerror(rte_errno));
		return -ENOMEM;
	}
	p->dops = egw_payload_find(p->cfg->payload.driver);
	if (p->dops == NULL) {
		GW_LOG(ERR, "port %s: payload driver not built in this "
			"binary\n", p->cfg->name);
		return -ENOTSUP;
	}
	rc = p->dops->open(c, p->cfg, &p->drv, &p->pool);
	if (rc == 0)
		rc = egw_pool_cache_enable(p->pool, EGW_POOL_CACHE_DEFAULT);
	if (rc != 0) {
		GW_LOG(ERR, "port %s: payload driver %s: %s\n",
			p->cfg->name, p->dops->name, strerror(-rc));
		return rc;
	}
	p->dops->describe(p->drv, regions, gid, &qpn);
	/* the session grows across restarts: wall-clock nanoseconds */
	clock_gettime(CLOCK_REALTIME, &ts);
	ops = gw_node_ops;
	ops.ctx = p;
	rc = egw_node_create(c, cidx, p->pool, regions, gid, qpn,
			     &ops, (uint64_t)ts.tv_sec * 1000000000ull +
			     (uint64_t)ts.tv_nsec, gw_now_ns(), &p->node);
	if (rc == 0)
		rc = gw_work_create(p, o);
	if (rc == 0 && capture_path != NULL) {
		char path[512];

		snprintf(path, sizeof(path),
			 conf.nports > 1 || identities > 1 ? "%s.%s" : "%s",
			 capture_path, p->cfg->name);
		rc = gw_capture_open(p, path);
		if (rc != 0)
			GW_LOG(ERR, "cannot write capture %s: %s\n", path,
			       strerror(-rc));
	}
	if (rc == 0)
		rc = gw_port_start(p);
	return rc;
}

/* The gateway (embgw) and the load generator (embgw-gen) are one program:
 * the generator is a language-side driver with open-loop pacing and a
 * flood, reporting rates; it stops when its rooms are done by default. */
int
gw_main(int argc, char **argv, bool generator)
{
	char *eal[MAX_EAL_ARGS];
	const char *cfg = NULL;
	struct gw_work_opts o;
	struct gw_faults f;
	int sep = -1, neal, rc = 0;
	unsigned main_lcore;

	if (argc == 3 && (!strcmp(argv[1], "--check-config") ||
			  !strcmp(argv[1], "-t")))
		return check_config(argv[2]);
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout, argv[0]);
		return 0;
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			sep = i;
			break;
		}
	if (sep < 0) {
		usage(stderr, argv[0]);
		return 2;
	}
	/* app arguments first: the configuration decides the devices */
	argv[sep] = argv[0];
	if (parse_app_args(argc - sep, argv + sep, &cfg, &o, &f) != 0) {
		usage(stderr, argv[0]);
		return 2;
	}
	if (generator && o.drive > 0)
		o.exit_when_done = true;
	if (egw_conf_load_report(cfg, &conf, stderr) != 0)
		return 1;
	if (identities > 1 && make_identities() != 0) {
		free(id_confs);
		return 1;
	}
	neal = eal_args(sep, argv, eal);
	if (rte_eal_init(neal, eal) < 0) {
		fprintf(stderr, "embgw: EAL init failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	gw_clock_init();
	rc = rte_log_register_type_and_pick_level("user.embgw", RTE_LOG_INFO);
	if (rc >= 0)
		gw_logtype = rc;
	rc = 0;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	/* ports and identities derive their room ids from one base plus
	 * their index: bases drawn apart could meet, and two of our ports
	 * would then send the same room id to one gateway */
	if (o.seed == 0)
		o.seed = gw_now_ns() >> 10;
	for (nports = 0; nports < conf.nports * identities; nports++) {
		struct gw_work_opts share = share_of(&o, nports);
		struct gw_faults fs = f;

		/* --flood-pps is the generator's rate: the first identity's */
		if (identities > 1 && nports > 0)
			fs.flood_pps = 0;
		rc = setup_port(&ports[nports], nports, &share, &fs);
		if (rc != 0)
			break;
	}
	if (rc == 0) {
		for (uint16_t i = 0; i < nports; i++)
			ports_driving += gw_work_drives(&ports[i]);
		gw_telemetry_init(ports, nports);
		main_lcore = rte_get_main_lcore();
		/* one worker per device; it serves the device's identities */
		for (uint16_t i = 0; i < nports; i++)
			if (ports[i].owner == &ports[i] &&
			    ports[i].lcore != main_lcore)
				rte_eal_remote_launch(worker, &ports[i],
						      ports[i].lcore);
		for (uint16_t i = 0; i < nports; i++)
			if (ports[i].owner == &ports[i] &&
			    ports[i].lcore == main_lcore)
				worker(&ports[i]);
		while (!gw_force_quit) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
		rte_eal_mp_wait_lcore();
	}
	/* workers are stopped: tear down from here, port by port - including
	 * a port whose setup failed half-way (its shm file, capture, node) */
	if (rc != 0 && nports < conf.nports * identities)
		nports++;
	/* last first: identities send their ABORTs through the device that
	 * the first one owns and closes */
	for (uint16_t i = nports; i-- > 0;) {
		if (ports[i].started && ports[i].node != NULL &&
		    ports[i].work != NULL) {
			teardown_port(&ports[i]);
			if (gw_work_finished(&ports[i]) == false &&
			    gw_work_drives(&ports[i]))
				rc = rc ? rc : 3;
		}
		gw_port_stop(&ports[i]);
		gw_capture_close(&ports[i]);
	}
	if (identities > 1 && nports == identities)
		gw_work_report_total(ports, nports, stdout);
	for (uint16_t i = 0; i < nports; i++) {
		egw_node_destroy(ports[i].node);
		if (ports[i].drv != NULL)
			ports[i].dops->close(ports[i].drv);
	}
	free(id_confs);
	rte_eal_cleanup();
	/* exit status: 0, 1 (could not start: the log says why), 3 (rooms
	 * left unfinished) - not a negative errno folded into a byte */
	return rc < 0 ? 1 : rc;
}

#ifndef EMBGW_GEN
int
main(int argc, char **argv)
{
	return gw_main(argc, argv, false);
}
#endif
