/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Default allocation policy: how many tokens the receiver allocates before
 * it knows the total. Too few costs resume round trips, too many holds
 * memory the room never uses until the total arrives and the surplus is
 * trimmed. The adaptive policy tracks a high percentile of recent totals.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egw_xfer.h"

static uint32_t
round_blocks(uint32_t tokens, uint32_t bt)
{
	uint64_t v = ((uint64_t)tokens + bt - 1) / bt * bt;

	if (v == 0)
		v = bt;
	return v > EGW_XFER_MAX_TOKENS ? EGW_XFER_MAX_TOKENS / bt * bt
				       : (uint32_t)v;
}

int
egw_policy_init_fixed(struct egw_policy *p, uint32_t block_tokens,
		      uint32_t tokens)
{
	if (p == NULL || block_tokens == 0 || tokens == 0)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->kind = EGW_POLICY_FIXED;
	p->block_tokens = block_tokens;
	p->fixed_tokens = round_blocks(tokens, block_tokens);
	p->current = p->fixed_tokens;
	return 0;
}

int
egw_policy_init_adaptive(struct egw_policy *p, uint32_t block_tokens,
			 uint32_t start_tokens, uint32_t percentile,
			 uint32_t min_tokens, uint32_t max_tokens)
{
	int rc = egw_policy_init_fixed(p, block_tokens, start_tokens);

	if (rc != 0)
		return rc;
	if (percentile == 0 || percentile > 100 || min_tokens == 0 ||
	    max_tokens < min_tokens)
		return -EINVAL;
	p->kind = EGW_POLICY_ADAPTIVE;
	p->percentile = percentile;
	p->min_tokens = round_blocks(min_tokens, block_tokens);
	p->max_tokens = round_blocks(max_tokens, block_tokens);
	p->warmup = 16;
	return 0;
}

uint32_t
egw_policy_tokens(const struct egw_policy *p)
{
	return p->current;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

void
egw_policy_observe(struct egw_policy *p, uint32_t total)
{
	uint32_t sorted[EGW_POLICY_WINDOW], n, idx, v;

	if (p->kind != EGW_POLICY_ADAPTIVE || total == 0)
		return;
	p->seen[p->head] = total;
	p->head = (p->head + 1) % EGW_POLICY_WINDOW;
	if (p->nseen < EGW_POLICY_WINDOW)
		p->nseen++;
	/* re-estimate every 8 totals once warm: a sort of <= 256 values is
	 * cheap there and costs nothing on the paths in between */
	if (p->nseen < p->warmup || p->head % 8 != 0)
		return;
	n = p->nseen;
	memcpy(sorted, p->seen, n * sizeof(sorted[0]));
	qsort(sorted, n, sizeof(sorted[0]), cmp_u32);
	idx = (uint32_t)(((uint64_t)n * p->percentile + 99) / 100);
	v = sorted[idx == 0 ? 0 : idx - 1];
	if (v < p->min_tokens)
		v = p->min_tokens;
	if (v > p->max_tokens)
		v = p->max_tokens;
	p->current = round_blocks(v, p->block_tokens);
}
