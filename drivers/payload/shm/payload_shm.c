/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm payload driver: both gateways on one host. The receiving side's pool
 * lives in a shared-memory file it owns (the port's payload.path; layout
 * and ownership in shm_pool_file.c); the sending side checks that file's
 * header against the peer's REGISTER, maps it, and a write is a memcpy. Every
 * write is checked against the region the peer registered, exactly the
 * bounds an rkey would enforce, so a bad block number can never touch
 * memory outside the peer's pool. Completions are immediate but reported
 * through poll(), like a completion queue, so the engines are never
 * re-entered from their own callbacks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egw_payload.h"
#include "shm_pool_file.h"

struct shm_peer {
	uint8_t *map;           /* the peer file's data part, from data_offset */
	size_t len;
	uint64_t data_offset;   /* file offset of map[0] */
	struct egw_register reg;
	char why[192];          /* why the last connect failed */
};

struct egw_payload {
	char path[EGW_PAYLOAD_PATH_LEN];
	/* peers' own pool files ("": path) */
	char (*peer_path)[EGW_PAYLOAD_PATH_LEN]; /* per slot */
	uint32_t nslots;
	struct shm_file file;   /* the receiving side's pool file */
	uint8_t *mem;           /* the pool's memory */
	size_t mem_len;
	int fd;                 /* the pool's memory: the file, or a memfd */
	uint64_t fd_offset;     /* where mem lies in fd */
	uint64_t fd_bytes;      /* what a local engine maps of fd */
	struct egw_pool_mem own; /* the sending side's memory */
	struct egw_pool *pool;
	struct shm_peer *peers; /* per slot */
	struct egw_payload_ring ring;
	struct egw_payload_stats st;
};

static void shm_close(struct egw_payload *p);

/* We receive: our pool is the shared file peers write into. */
static int
open_file(struct egw_payload *p, const struct egw_payload_params *pp,
	  uint64_t session, size_t need)
{
	const struct egw_pool_geom *g = &pp->geom;
	struct shm_file_hdr h = {
		.session = session,
		.block_tokens = g->block_tokens,
		.pool_blocks = g->block_tokens == 0 ? 0 :
			       g->capacity_tokens / g->block_tokens,
		.hidden_size = g->hidden_size,
		.dtype_bytes = g->dtype_bytes,
		.aux_bytes = g->aux_bytes,
	};
	/* a peer lets go of a killed predecessor's file within
	 * peer_dead_ms of its death: that long, and a second for the
	 * unmapping to reach us */
	int rc = shm_file_create(p->path, &h, need,
				 pp->peer_dead_ns + 1000000000ull,
				 &p->file);

	if (rc != 0)
		return rc;
	p->mem = p->file.map + SHM_FILE_HDR;
	p->mem_len = need;
	/* local engines map the whole file through a description of its
	 * own: the one holding the lock is never handed out, so a client
	 * can neither keep the lock past our exit nor release it */
	rc = shm_file_reopen(&p->file);
	if (rc < 0)
		return rc;
	p->fd = rc;
	p->fd_offset = SHM_FILE_HDR;
	p->fd_bytes = p->file.bytes;
	return 0;
}

static int
shm_open_(const struct egw_payload_params *pp, uint64_t session,
	  struct egw_payload **out, struct egw_pool **pool)
{
	size_t need = egw_pool_geom_mem_bytes(&pp->geom);
	struct egw_payload *p;
	int rc;

	uint32_t nslots = pp->max_peers != 0 ? pp->max_peers : pp->npeers;

	if (pp->npeers > EGW_PAYLOAD_MAX_PEERS || nslots < pp->npeers ||
	    nslots > EGW_PAYLOAD_MAX_SLOTS)
		return -EINVAL;
	if (nslots == 0)
		nslots = 1;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->fd = -1;
	p->own.fd = -1;
	p->file.fd = -1;
	p->peers = calloc(nslots, sizeof(*p->peers));
	p->peer_path = calloc(nslots, sizeof(*p->peer_path));
	if (p->peers == NULL || p->peer_path == NULL) {
		free(p->peers);
		free(p->peer_path);
		free(p);
		return -ENOMEM;
	}
	snprintf(p->path, sizeof(p->path), "%s", pp->path);
	p->nslots = nslots;
	for (uint32_t i = 0; i < pp->npeers; i++)
		snprintf(p->peer_path[i], sizeof(p->peer_path[i]), "%s",
			 pp->peers[i].shm_path);
	/* bounded by what the engines can have in flight */
	rc = egw_payload_ring_init(&p->ring, pp->max_batches);
	if (rc == 0 && pp->receives) {
		rc = open_file(p, pp, session, need);
	} else if (rc == 0) {
		/* we send: our pool is memory local engines can map */
		rc = egw_payload_pool_mem_geom("embgw-pool", &pp->geom,
					       pp->segments, &p->own);
		if (rc == 0) {
			p->mem = p->own.mem;
			p->mem_len = need;
			p->fd = p->own.fd;
			p->fd_bytes = p->own.bytes;
		}
	}
	if (rc == 0)
		rc = egw_pool_create(&pp->geom, p->mem, p->mem_len, &p->pool);
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
	/* shm addresses are offsets into the shared file (its header
	 * first, then the pool) */
	egw_payload_regions(p->pool, (uint64_t)(uintptr_t)egw_pool_mem(p->pool) -
			    p->fd_offset, 0, r);
}

static void
unmap_peer(struct shm_peer *sp)
{
	if (sp->map != NULL)
		munmap(sp->map, sp->len);
	sp->map = NULL;
	sp->len = 0;
}

/* A receiving peer registered: check its pool file's header against the
 * REGISTER (doc/protocol.md, "The shm pool file") and map the file's data
 * part; writes are bounds-checked against the regions on every post. */
static int
shm_connect(struct egw_payload *p, uint32_t peer, const struct egw_register *r)
{
	struct shm_file_hdr h;
	struct shm_peer *sp;
	int fd;

	if (peer >= p->nslots)
		return -EINVAL;
	sp = &p->peers[peer];
	unmap_peer(sp); /* whatever happens, never the old incarnation's */
	if (!(r->roles & EGW_ROLE_LANGUAGE))
		return 0; /* we never write to it */
	/* several receiving peers on one port: each names its own file */
	fd = shm_file_open_peer(p->peer_path[peer][0] ? p->peer_path[peer] :
							p->path,
				r, &h, sp->why, sizeof(sp->why));
	if (fd < 0)
		return fd;
	sp->len = (size_t)(h.file_bytes - h.data_offset);
	sp->map = mmap(NULL, sp->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)h.data_offset);
	close(fd);
	if (sp->map == MAP_FAILED) {
		int rc = -errno;

		snprintf(sp->why, sizeof(sp->why), "cannot map its pool file "
			 "(%zu bytes): %s", sp->len, strerror(-rc));
		sp->map = NULL;
		sp->len = 0;
		return rc;
	}
	sp->data_offset = h.data_offset;
	sp->reg = *r;
	return 0;
}

static const char *
shm_why(const struct egw_payload *p, uint32_t peer)
{
	return peer < p->nslots ? p->peers[peer].why : "no such peer";
}

static void
shm_disconnect(struct egw_payload *p, uint32_t peer)
{
	if (peer >= p->nslots)
		return;
	unmap_peer(&p->peers[peer]);
}

static int
shm_peer_add(struct egw_payload *p, uint32_t slot,
	     const struct egw_payload_peer *pe)
{
	if (slot >= p->nslots)
		return -EINVAL;
	unmap_peer(&p->peers[slot]);
	memset(&p->peers[slot], 0, sizeof(p->peers[slot]));
	snprintf(p->peer_path[slot], sizeof(p->peer_path[slot]), "%s",
		 pe->shm_path);
	return 0;
}

static void
shm_peer_remove(struct egw_payload *p, uint32_t slot)
{
	if (slot >= p->nslots)
		return;
	unmap_peer(&p->peers[slot]);
	memset(&p->peers[slot], 0, sizeof(p->peers[slot]));
	p->peer_path[slot][0] = '\0';
}

static bool
one_write(struct egw_payload *p, const struct shm_peer *sp,
	  const struct egw_write *w)
{
	uint8_t *src;
	int64_t off = egw_payload_check_write(p->pool, &sp->reg, w, &src);

	if (off < 0)
		return false;
	/* regions lie in [data_offset, file_bytes): checked at connect */
	memcpy(sp->map + (sp->reg.region[w->kind].addr - sp->data_offset) +
	       (uint64_t)off, src, w->bytes);
	return true;
}

static int
shm_post(struct egw_payload *p, uint32_t peer, const struct egw_write *w,
	 uint32_t n, uint64_t cookie)
{
	uint64_t t0 = egw_payload_cycles();
	bool ok;

	if (peer >= p->nslots)
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
shm_poll(struct egw_payload *p, struct egw_payload_cpl *c, uint32_t max,
	 uint64_t now)
{
	(void)now;
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
	for (uint32_t i = 0; p->peers != NULL && i < p->nslots; i++)
		unmap_peer(&p->peers[i]);
	free(p->peers);
	free(p->peer_path);
	egw_pool_destroy(p->pool);
	egw_payload_pool_mem_free(&p->own);
	if (p->file.fd >= 0 && p->fd >= 0)
		close(p->fd); /* the clients' description of our file */
	shm_file_remove(p->path, &p->file);
	free(p->ring.c);
	free(p);
}

static int
shm_pool_fd(const struct egw_payload *p, uint64_t *offset, uint64_t *bytes)
{
	*offset = p->fd_offset;
	*bytes = p->fd_bytes;
	return p->fd >= 0 ? p->fd : -ENODEV;
}

static const struct egw_pool_mem *
shm_pool_mem(const struct egw_payload *p)
{
	return p->own.mem != NULL ? &p->own : NULL;
}

const struct egw_payload_ops egw_payload_shm_ops = {
	.name = "shm",
	.open = shm_open_,
	.describe = shm_describe,
	.connect = shm_connect,
	.why = shm_why,
	.disconnect = shm_disconnect,
	.disconnect_silent = true,
	.peer_add = shm_peer_add,
	.peer_remove = shm_peer_remove,
	.post = shm_post,
	.poll = shm_poll,
	.stats = shm_stats,
	.pool_fd = shm_pool_fd,
	.pool_mem = shm_pool_mem,
	.close = shm_close,
};
