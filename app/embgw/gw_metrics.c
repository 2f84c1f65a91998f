/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics endpoint (gateway.metrics; doc/gateway.md, "Metrics"):
 * GET /metrics answers the OpenMetrics page of gw_metrics_text.c.
 *
 * libmicrohttpd runs without a thread of its own: a DPDK control thread
 * (rte_ctrl_thread_create: pinned to the CPUs no lcore uses, never a
 * worker's) drives it with MHD_run_wait. The workers do nothing for it:
 * the page is made on this thread from the counters they keep anyway.
 *
 * Lifetime: the page reads identities, nodes, pools and drivers that the
 * teardown frees. gw_metrics_stop() therefore runs after the workers
 * returned and before the teardown: it sets `stop`, joins the thread (a
 * scrape in progress finishes first; MHD_run_wait returns within
 * RUN_WAIT_MS) and only then stops the daemon and forgets the identities,
 * so no request is ever answered from freed memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <microhttpd.h>
#include <rte_lcore.h>

#include "gw.h"

#define RUN_WAIT_MS 100
#define CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

static struct {
	struct MHD_Daemon *d;
	pthread_t thread;
	bool running;
	volatile bool stop;
	struct gw_id *const *ids;
	uint16_t nids;
} m;

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
      enum MHD_ResponseMemoryMode mode, const char *type)
{
	struct MHD_Response *r;
	enum MHD_Result rc;

	r = MHD_create_response_from_buffer(len, body, mode);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
	   const char *method, const char *version, const char *upload,
	   size_t *upload_len, void **state)
{
	static char not_found[] = "embgw: only /metrics is served\n";
	static char bad_method[] = "embgw: only GET and HEAD\n";
	size_t len = 0;
	char *page;

	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, bad_method,
			     sizeof(bad_method) - 1, MHD_RESPMEM_PERSISTENT,
			     "text/plain");
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, not_found,
			     sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT,
			     "text/plain");
	page = gw_metrics_render(m.ids, m.nids, &len);
	if (page == NULL)
		return MHD_NO; /* no memory: the connection is closed */
	return reply(c, MHD_HTTP_OK, page, len, MHD_RESPMEM_MUST_FREE,
		     CONTENT_TYPE);
}

static void *
serve(void *arg)
{
	(void)arg;
	while (!m.stop)
		if (MHD_run_wait(m.d, RUN_WAIT_MS) != MHD_YES) {
			GW_LOG(ERR, "metrics: the HTTP server failed; "
			       "no more scrapes are answered\n");
			break;
		}
	return NULL;
}

int
gw_metrics_start(const struct egw_conf *c, struct gw_id *const *ids,
		 uint16_t nids)
{
	struct sockaddr_in sa;
	char ip[16];
	int rc;

	if (!c->metrics.enabled)
		return 0;
	m.ids = ids;
	m.nids = nids;
	m.stop = false;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(c->metrics.port);
	sa.sin_addr.s_addr = htonl(c->metrics.addr);
	egw_conf_ip_str(c->metrics.addr, ip, sizeof(ip));
	/* no internal thread: ours drives it (see above); errno says why
	 * a start failed (bind, listen) */
	errno = 0;
	m.d = MHD_start_daemon(MHD_USE_ERROR_LOG, c->metrics.port, NULL, NULL,
			       on_request, NULL,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
			       MHD_OPTION_CONNECTION_LIMIT, 16u,
			       MHD_OPTION_CONNECTION_TIMEOUT, 10u,
			       MHD_OPTION_END);
	if (m.d == NULL) {
		rc = errno ? -errno : -EADDRINUSE;
		GW_LOG(ERR, "metrics: cannot listen on %s:%u (gateway.metrics "
		       "in %s): %s\n", ip, c->metrics.port, c->file,
		       strerror(-rc));
		return rc;
	}
	rc = rte_ctrl_thread_create(&m.thread, "embgw-metrics", NULL, serve,
				    NULL);
	if (rc != 0) {
		GW_LOG(ERR, "metrics: no control thread: %s\n", strerror(-rc));
		MHD_stop_daemon(m.d);
		m.d = NULL;
		return rc < 0 ? rc : -rc;
	}
	m.running = true;
	GW_LOG(INFO, "metrics: serving http://%s:%u/metrics\n", ip,
	       c->metrics.port);
	return 0;
}

void
gw_metrics_stop(void)
{
	if (m.running) {
		m.stop = true;
		pthread_join(m.thread, NULL);
		m.running = false;
	}
	if (m.d != NULL) {
		MHD_stop_daemon(m.d);
		m.d = NULL;
	}
	m.ids = NULL;
	m.nids = 0;
}
