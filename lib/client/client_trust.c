/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Losing the gateway (doc/client.md, "Trust"): a client that the gateway
 * gave up (lease, broken ring: the area's trust word), that detached, or
 * whose gateway went away (its socket's end) finds out on every call of
 * the library before it can act on pool memory, and its pool mapping is
 * revoked: replaced in place by private zero pages, so that a pointer or a
 * view into the pool stays a valid address but never shows another room's
 * bytes again.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client_priv.h"

_Static_assert(EGW_CLIENT_LOST_LEASE == EGW_LOST_LEASE &&
	       EGW_CLIENT_LOST_RING == EGW_LOST_RING &&
	       EGW_CLIENT_LOST_STOP == EGW_LOST_STOP, "one set of codes");

static const char *
lost_why(uint32_t lost)
{
	switch (lost) {
	case EGW_LOST_LEASE:
		return "its lease expired (the client did not call the "
		       "library or beat for lease_ms)";
	case EGW_LOST_RING:
		return "a ring index of this client was impossible";
	case EGW_LOST_STOP:
		return "the gateway is stopping";
	default:
		return "an unknown reason";
	}
}

uint32_t
egw_client_lost(const struct egw_client *c)
{
	return __atomic_load_n(&egw_attach_trust_of(c->map.area)->lost,
			       __ATOMIC_ACQUIRE);
}

int
client_alive(const struct egw_client *c, bool socket)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };
	uint32_t lost;

	lost = egw_client_lost(c);
	if (c->gone != 0 && lost == EGW_LOST_NONE) {
		client_error("the gateway closed the attach socket or broke a "
			     "ring; this client's rooms are gone");
		return c->gone;
	}
	if (lost != EGW_LOST_NONE) {
		client_error("the gateway gave this client up: %s; its rooms "
			     "are gone and its pool views hold no room data",
			     lost_why(lost));
		return -ECONNRESET;
	}
	/* the gateway sends nothing after the welcome: anything readable is
	 * its end of the socket (it stopped, or shut the socket on giving
	 * the client up) */
	if (socket && poll(&p, 1, 0) > 0 && p.revents != 0) {
		client_error("the gateway closed the attach socket; this "
			     "client's rooms are gone");
		return -ECONNRESET;
	}
	return 0;
}

void
client_revoke(struct egw_client *c)
{
	void *p;

	if (c->pool == NULL || c->revoked)
		return;
	/* in place, in one call: there is no moment at which the range is
	 * unmapped (a reader in another thread reads zeros, not SIGSEGV) */
	p = mmap(c->pool, c->pool_map_bytes, c->pool_prot,
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		/* cannot happen short of exhausted kernel memory: take the
		 * range away rather than leave the pool behind it */
		mprotect(c->pool, c->pool_map_bytes, PROT_NONE);
	}
	c->revoked = true;
}

/*
 * The trust word on every call (a load); the socket (a system call, tens
 * of microseconds on a loaded host) at most every CLIENT_SOCKET_CHECK_NS:
 * a gateway that went away without giving the client up leaves its pool
 * memory to no other room (the client's mapping holds the memfd, or the
 * old pool file, which a restarted gateway replaces), so noticing it a
 * few milliseconds late hands out no other room's bytes.
 */
int
client_gone_check(struct egw_client *c, bool force)
{
	uint64_t now = client_now_ns();
	bool sock = force || now >= c->sock_check_ns;
	int rc;

	if (sock)
		c->sock_check_ns = now + CLIENT_SOCKET_CHECK_NS;
	rc = client_alive(c, sock);

	if (rc != 0) {
		if (c->gone == 0)
			c->gone = rc;
		client_revoke(c);
	}
	return rc;
}

int
egw_client_check(struct egw_client *c)
{
	return client_gone_check(c, true);
}

void
egw_client_detach_keep(struct egw_client *c, void **pool, size_t *bytes)
{
	*pool = NULL;
	*bytes = 0;
	if (c == NULL)
		return;
	client_revoke(c);
	*pool = c->pool;
	*bytes = c->pool_map_bytes;
	c->pool = NULL; /* not unmapped by detach */
	egw_client_detach(c);
}

void
egw_client_unmap_kept(void *pool, size_t bytes)
{
	if (pool != NULL)
		munmap(pool, bytes);
}
