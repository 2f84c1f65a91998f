/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two payload drivers in one process (payload_pair.h).
 */
#include <stdio.h>
#include <string.h>

#include "payload_pair.h"

void
pp_params(struct egw_payload_params *par, uint16_t roles, const char *path)
{
	bool lang = roles & EGW_ROLE_LANGUAGE;

	memset(par, 0, sizeof(*par));
	par->geom = (struct egw_pool_geom){
		.capacity_tokens = PP_BLOCKS * PP_BLOCK_TOKENS,
		.block_tokens = PP_BLOCK_TOKENS,
		.hidden_size = 64, .dtype_bytes = 2, .mrope = true,
		.aux_bytes = 64,
	};
	par->receives = lang;
	par->max_batches = PP_MAX_BATCHES; /* a small completion ring */
	par->peer_dead_ns = 1000000000ull; /* the engines' default */
	par->addr = lang ? PP_LANG_IP : PP_ENC_IP;
	snprintf(par->device, sizeof(par->device), "stub0");
	par->port = 1;
	par->gid_index = -1;
	snprintf(par->path, sizeof(par->path), "%s", path);
	par->npeers = 1;
	snprintf(par->peers[0].name, sizeof(par->peers[0].name), "%s",
		 lang ? "enc" : "lang");
}

static int
open_side(struct pp_pair *pp, int s)
{
	struct pp_side *sd = &pp->side[s];

	return pp->ops->open(&sd->par, PP_SESSION, &sd->drv, &sd->pool);
}

int
pp_reopen(struct pp_pair *pp, int s)
{
	if (pp->side[s].drv != NULL)
		pp->ops->close(pp->side[s].drv);
	pp->side[s].drv = NULL;
	return open_side(pp, s);
}

static int
open_pair(struct pp_pair *pp, const struct egw_payload_ops *ops,
	  const char *path, bool window_keys)
{
	static const uint16_t roles[2] = { EGW_ROLE_ENCODE, EGW_ROLE_LANGUAGE };

	memset(pp, 0, sizeof(*pp));
	pp->ops = ops;
	for (int s = PP_ENC; s <= PP_LANG; s++) {
		struct pp_side *sd = &pp->side[s];
		int rc;

		pp_params(&sd->par, roles[s], path);
		sd->par.window_keys = window_keys;
		sd->roles = roles[s];
		sd->name = s == PP_LANG ? "lang" : "enc";
		rc = open_side(pp, s);
		if (rc != 0) {
			pp_close(pp);
			return rc;
		}
	}
	return 0;
}

int
pp_open(struct pp_pair *pp, const struct egw_payload_ops *ops, const char *path)
{
	return open_pair(pp, ops, path, false);
}

int
pp_open_window_keys(struct pp_pair *pp, const struct egw_payload_ops *ops)
{
	return open_pair(pp, ops, "", true);
}

void
pp_close(struct pp_pair *pp)
{
	for (int s = PP_ENC; s <= PP_LANG; s++) {
		if (pp->side[s].drv != NULL)
			pp->ops->close(pp->side[s].drv);
		pp->side[s].drv = NULL;
		pp->side[s].pool = NULL;
	}
}

void
pp_register(struct pp_pair *pp, int from, struct egw_register *r)
{
	struct pp_side *sd = &pp->side[from];
	const struct egw_pool_geom *g = &sd->par.geom;

	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", sd->name);
	pp->ops->describe(sd->drv, r->region, r->gid, &r->qpn);
	r->mtu = 1024;
	if (pp->ops->endpoint != NULL)
		pp->ops->endpoint(sd->drv, 0, &r->qpn, &r->psn, &r->mtu);
	r->roles = sd->roles;
	r->block_tokens = g->block_tokens;
	r->pool_blocks = egw_pool_nblocks(sd->pool);
	r->hidden_size = g->hidden_size;
	r->dtype_bytes = g->dtype_bytes;
	r->aux_bytes = g->aux_bytes;
	r->session = PP_SESSION;
}

int
pp_connect(struct pp_pair *pp)
{
	for (int s = PP_ENC; s <= PP_LANG; s++) {
		struct egw_register r;
		int rc;

		pp_register(pp, 1 - s, &r);
		rc = pp->ops->connect(pp->side[s].drv, 0, &r);
		if (rc != 0)
			return rc;
	}
	return 0;
}

struct egw_write
pp_emb(const struct pp_pair *pp, uint32_t src, uint32_t dst, uint32_t tokens)
{
	const struct egw_pool_geom *g = &pp->side[PP_ENC].par.geom;

	return (struct egw_write){
		.kind = EGW_KIND_EMB,
		.src_block = src,
		.dst_block = dst,
		.tokens = tokens,
		.bytes = (uint64_t)tokens *
			 egw_pool_geom_unit_bytes(g, EGW_KIND_EMB),
	};
}

static uint8_t
pattern(uint8_t seed, size_t i)
{
	return (uint8_t)(seed + i * 7 + (i >> 8));
}

void
pp_fill(struct pp_pair *pp, uint32_t block, uint8_t seed)
{
	const struct egw_pool_geom *g = &pp->side[PP_ENC].par.geom;
	uint8_t *b = egw_pool_addr(pp->side[PP_ENC].pool, EGW_KIND_EMB, block, 0);
	size_t len = (size_t)g->block_tokens *
		     egw_pool_geom_unit_bytes(g, EGW_KIND_EMB);

	for (size_t i = 0; i < len; i++)
		b[i] = pattern(seed, i);
}

bool
pp_landed(const struct pp_pair *pp, uint32_t block, uint8_t seed,
	  uint32_t tokens)
{
	const struct egw_pool_geom *g = &pp->side[PP_LANG].par.geom;
	const uint8_t *b = egw_pool_addr(pp->side[PP_LANG].pool, EGW_KIND_EMB,
					 block, 0);
	size_t len = (size_t)tokens * egw_pool_geom_unit_bytes(g, EGW_KIND_EMB);

	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern(seed, i))
			return false;
	return true;
}

uint32_t
pp_poll(struct pp_pair *pp, int s, struct egw_payload_cpl *c, uint32_t max)
{
	uint32_t n = 0, got;

	while (n < max &&
	       (got = pp->ops->poll(pp->side[s].drv, c + n, max - n,
				     pp->now)) > 0)
		n += got;
	return n;
}
