/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm payload driver: both gateways on one host. The receiving side's pool
 * lives in a shared-memory file (the port's payload.path); the sending side
 * maps that file when the peer registers and a write is a memcpy. Every
 * write is checked against the region the peer registered, exactly the
 * bounds an rkey would enforce, so a bad block number can never touch
 * memory outside the peer's pool. Completions are immediate but reported
 * through poll(), like a completion queue, so the engines are never
 * re-entered from their own callbacks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egw_payload.h"

struct shm_peer {
	uint8_t *map;
	size_t len;
	struct egw_register reg;
};

struct egw_payload {
	char path[EGW_CONF_PATH_LEN];
	const struct egw_conf_port *port; /* peers' own pool files */
	bool owns_file;
	uint8_t *mem;
	size_t mem_len;
	int fd;                 /* the pool's memory: the file, or a memfd */
	struct egw_pool_mem own; /* the sending side's memory */
	struct egw_pool *pool;
	struct shm_peer peers[EGW_CONF_MAX_PEERS];
	struct egw_payload_ring ring;
	struct egw_payload_stats st;
};

static void shm_close(struct egw_payload *p);

static int
shm_open_(const struct egw_conf *c, const struct egw_conf_port *port,
	  uint64_t session, struct egw_payload **out, struct egw_pool **pool)
{
	struct egw_payload *p = calloc(1, sizeof(*p));
	size_t need = egw_geom_mem_bytes(&c->geom);
	int rc;

	(void)session;
	if (p == NULL)
		return -ENOMEM;
	p->fd = -1;
	p->own.fd = -1;
	snprintf(p->path, sizeof(p->path), "%s", port->payload.path);
	p->port = port;
	/* bounded by what the engines can have in flight */
	rc = egw_payload_ring_init(&p->ring, c->max_rooms * EGW_XFER_MAX_RANKS *
					     EGW_XFER_PIPE);
	if (rc == 0 && (c->roles & EGW_ROLE_LANGUAGE)) {
		/* we receive: our pool is the shared file peers write into */
		int fd = open(p->path, O_RDWR | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0)
			p->owns_file = true; /* shm_close unlinks it */
		if (fd < 0 || ftruncate(fd, (off_t)need) != 0) {
			rc = -errno;
		} else {
			p->mem = mmap(NULL, need, PROT_READ | PROT_WRITE,
				      MAP_SHARED, fd, 0);
			if (p->mem == MAP_FAILED) {
				rc = -errno;
				p->mem = NULL;
			} else {
				p->mem_len = need;
			}
		}
		/* kept: local engines map the pool through it */
		p->fd = fd;
	} else if (rc == 0) {
		/* we send: our pool is memory local engines can map */
		rc = egw_payload_pool_mem("embgw-pool", need, &p->own);
		if (rc == 0) {
			p->mem = p->own.mem;
			p->mem_len = need;
			p->fd = p->own.fd;
		}
	}
	if (rc == 0)
		rc = egw_pool_create(&c->geom, p->mem, p->mem_len, &p->pool);
	if (rc != 0) {
		shm_close(p); /* undoes whatever part was done */
		return rc;
	}
	*out = p;
	*pool = p->pool;
	return 0;
}

static void
shm_describe(struct egw_payload *p, struct egw_region r[EGW_KIND_MAX],
	     uint8_t gid[16], uint32_t *qpn)
{
	memset(gid, 0, 16);
	*qpn = 0;
	/* shm addresses are offsets into the shared file */
	egw_payload_regions(p->pool, (uint64_t)(uintptr_t)egw_pool_mem(p->pool),
			    0, r);
}

static int
shm_connect(struct egw_payload *p, uint32_t peer, const struct egw_register *r)
{
	struct shm_peer *sp;
	struct stat st;
	int fd;

	if (peer >= EGW_CONF_MAX_PEERS)
		return -EINVAL;
	sp = &p->peers[peer];
	if (sp->map != NULL) {
		munmap(sp->map, sp->len);
		sp->map = NULL;
	}
	if (!(r->roles & EGW_ROLE_LANGUAGE))
		return 0; /* we never write to it */
	/* several receiving peers on one port: each names its own file */
	fd = open(peer < p->port->npeers && p->port->peers[peer].shm_path[0] ?
		  p->port->peers[peer].shm_path : p->path, O_RDWR);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -errno;
	}
	/* the file must hold every region the peer claims */
	for (int k = 0; k < EGW_KIND_MAX; k++)
		if (r->region[k].unit_bytes != 0 &&
		    r->region[k].addr + egw_payload_region_len(r, (unsigned)k) >
		    (uint64_t)st.st_size) {
			close(fd);
			return -ERANGE;
		}
	sp->map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);
	close(fd);
	if (sp->map == MAP_FAILED) {
		sp->map = NULL;
		return -errno;
	}
	sp->len = (size_t)st.st_size;
	sp->reg = *r;
	return 0;
}

static void
shm_disconnect(struct egw_payload *p, uint32_t peer)
{
	struct shm_peer *sp;

	if (peer >= EGW_CONF_MAX_PEERS)
		return;
	sp = &p->peers[peer];
	if (sp->map != NULL)
		munmap(sp->map, sp->len);
	sp->map = NULL;
	sp->len = 0;
}

static bool
one_write(struct egw_payload *p, const struct shm_peer *sp,
	  const struct egw_write *w)
{
	uint8_t *src;
	int64_t off = egw_payload_check_write(p->pool, &sp->reg, w, &src);

	if (off < 0)
		return false;
	memcpy(sp->map + sp->reg.region[w->kind].addr + (uint64_t)off, src,
	       w->bytes);
	return true;
}

static int
shm_post(struct egw_payload *p, uint32_t peer, const struct egw_write *w,
	 uint32_t n, uint64_t cookie)
{
	uint64_t t0 = egw_payload_cycles();
	bool ok;

	if (peer >= EGW_CONF_MAX_PEERS)
		return -EINVAL;
	if (egw_payload_ring_full(&p->ring))
		return -ENOBUFS;
	ok = p->peers[peer].map != NULL;
	for (uint32_t i = 0; ok && i < n; i++) {
		ok = one_write(p, &p->peers[peer], &w[i]);
		if (ok)
			egw_payload_count_write(&p->st, &p->peers[peer].reg, &w[i]);
		else
			p->st.refused_writes++;
	}
	p->st.batches++;
	if (!ok)
		p->st.failed_batches++;
	egw_payload_ring_push(&p->ring, cookie, ok);
	p->st.cycles += egw_payload_cycles() - t0;
	return 0;
}

static uint32_t
shm_poll(struct egw_payload *p, struct egw_payload_cpl *c, uint32_t max)
{
	return egw_payload_ring_drain(&p->ring, c, max);
}

static void
shm_stats(const struct egw_payload *p, struct egw_payload_stats *st)
{
	*st = p->st;
}

static void
shm_close(struct egw_payload *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < EGW_CONF_MAX_PEERS; i++)
		if (p->peers[i].map != NULL)
			munmap(p->peers[i].map, p->peers[i].len);
	egw_pool_destroy(p->pool);
	if (p->own.fd >= 0) {
		egw_payload_pool_mem_free(&p->own);
	} else {
		if (p->mem != NULL)
			munmap(p->mem, p->mem_len);
		if (p->fd >= 0)
			close(p->fd);
	}
	if (p->owns_file)
		unlink(p->path);
	free(p->ring.c);
	free(p);
}

static int
shm_pool_fd(const struct egw_payload *p)
{
	return p->fd >= 0 ? p->fd : -ENODEV;
}

const struct egw_payload_ops egw_payload_shm_ops = {
	.name = "shm",
	.open = shm_open_,
	.describe = shm_describe,
	.connect = shm_connect,
	.disconnect = shm_disconnect,
	.post = shm_post,
	.poll = shm_poll,
	.stats = shm_stats,
	.pool_fd = shm_pool_fd,
	.close = shm_close,
};
